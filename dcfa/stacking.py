"""xarray plumbing: a labelled field <-> a (sample, feature) matrix.

A climate field ``(time, lat, lon)`` becomes ``(time, feature)`` with ``feature`` the flattened
``(lat, lon)``; :class:`FeatureLayout` remembers the feature dims, their coordinates, the sample
coordinate and the attributes so every per-feature result (a label map, a mean, a weight) can
be put back on the grid and every per-sample result keeps its time axis.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import InputError

__all__ = [
    "BLOCK_DIMS",
    "CellGrid",
    "FeatureLayout",
    "ensemble_dim",
    "is_ensemble",
    "isel_positions",
    "single_members",
    "stack_features",
]

BLOCK_DIMS = ("variable", "window", "lag")
"""Feature dims that are not space: a variable, a time scale or a lag of the predictors
(:mod:`dcfa.forecast`). Cells that differ along them are never neighbours and never share a
group (:func:`dcfa.neighbors.block_labels`)."""


# the names climate archives give the dim of an ensemble's members (CMIP's member_id,
# xMIP's member, ECMWF's number with the CF standard name realization)
ENSEMBLE_NAMES = ("member", "members", "member_id", "ensemble", "ensemble_member", "ens",
                  "realization", "realisation")  # fmt: skip


def is_ensemble(X: xr.DataArray | xr.Dataset, dim) -> bool:
    """Whether ``dim`` holds an ensemble's members: named as archives name it, or its
    coordinate's CF ``standard_name`` is ``realization``."""
    named = str(dim).lower() in ENSEMBLE_NAMES
    return named or (dim in X.coords and X[dim].attrs.get("standard_name") == "realization")


def ensemble_dim(X: xr.DataArray | xr.Dataset, dims) -> str | None:
    """The first of ``dims`` that holds an ensemble's members (:func:`is_ensemble`), more
    than one."""
    return next((d for d in dims if is_ensemble(X, d) and X.sizes[d] > 1), None)


def single_members(X: xr.DataArray | xr.Dataset, skip=()) -> list:
    """The dims of ``X`` but ``skip`` that hold one member of an ensemble: a label of the
    archive, not a dim of a map (a member kept by a job's ``input.select``)."""
    return [d for d in X.dims if d not in skip and is_ensemble(X, d) and X.sizes[d] == 1]


def ensemble_text(dim: str, size: int) -> str:
    """Why an ensemble's members are not cells (the caller says how to fit them)."""
    return (
        f"its dim {dim!r} holds {size} ensemble members; dcfa would take each member's cells "
        "as cells of one grid, so that regions and their means would span members"
    )


@dataclass(frozen=True)
class CellGrid:
    """The grid behind a stacked cell dim: ``field.stack(cell=("lat", "lon"))``, also after
    ``dropna("cell")``, any selection or order of cells, or ``reset_index("cell")``.

    The cell dim's pandas MultiIndex keeps every value of each stacked dim in its levels (in
    their order), so the grid is the product of the levels and each cell has its place on it:
    an int ``neighbors`` radius, the periodic longitude and the visiting order are those of
    the grid, restricted to the cells present.

    Without a MultiIndex (``reset_index("cell")``, as netCDF and Zarr need, or a store read
    back) the grid is rebuilt from the 1-D coordinates along the cell dim that place the cells
    (:meth:`from_coords`): one latitude and one longitude, and the block dims among them
    (:data:`BLOCK_DIMS`: ``variable``, ``window``, ``lag``).
    """

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    coords: dict  # level name -> 1-D xarray.Variable of the level's values
    cells: np.ndarray  # flat (C-order) place of each feature on the grid

    @classmethod
    def of(cls, X: xr.DataArray, dim: str) -> CellGrid | None:
        """The grid of ``X``'s feature dim ``dim`` if its index is a MultiIndex, else None."""
        index = X.indexes.get(dim)
        if not isinstance(index, pd.MultiIndex):
            return None
        dims = tuple(str(n) for n in index.names)
        shape = tuple(len(level) for level in index.levels)
        coords = {
            d: xr.Variable(
                (d,), np.asarray(level), attrs=dict(getattr(X.coords.get(d), "attrs", {}))
            )
            for d, level in zip(dims, index.levels, strict=True)
        }
        codes = np.stack([np.asarray(c, dtype=np.int64) for c in index.codes])
        if (codes < 0).any():
            raise InputError(f"X: the {dim!r} index has missing level values (NaN in a level)")
        cells = np.ravel_multi_index(tuple(codes), shape) if codes.size else codes[0]
        return cls(dims=dims, shape=shape, coords=coords, cells=cells)

    @classmethod
    def from_coords(cls, X: xr.DataArray, dim: str, *, name: str = "X") -> CellGrid | None:
        """The grid of a cell dim without a MultiIndex, from the coordinates along it.

        The cells of ``dim`` are placed by the 1-D coordinates along it that are a latitude
        or a longitude (:func:`dcfa.geo.is_longitude`: by name or CF attributes) or a block
        dim (``variable``, ``window``, ``lag``), in the order of ``X.coords`` (after
        ``reset_index``, the order of the MultiIndex levels). None unless there is one
        latitude and one longitude among them: a single dim without them is a 1-D grid
        (the feature dims are the grid), as before.

        Each latitude and longitude axis is the values present, with the gaps of a regularly
        spaced axis filled (a row or column of cells all dropped, e.g. all land), so cells
        on either side of it stay two steps apart and a global longitude stays global. When
        the cells are in the order of a stacked grid (C order, as ``stack``, ``dropna`` and
        a store read back leave them), each axis keeps the order the cells show: a
        descending latitude, a longitude starting anywhere on the circle, a block dim's
        values in order of first appearance. Otherwise (cells shuffled) every axis is
        ascending and a block dim's values are sorted. So an int ``neighbors`` radius, the
        periodic longitude and the visiting order are those of the MultiIndex input, in
        any longitude convention and with any cells dropped; for shuffled cells as well,
        unless its axes are not ascending. A global longitude whose first or last column
        has no cell cannot be told from a regional one (pass ``periodic=True``).

        Raises ValueError when the coordinates do not place the cells on a grid: several
        latitudes or longitudes, non-numeric or missing values, two cells at one place, or
        most cells without a neighbour on the grid the values span (a curvilinear grid's
        ``lat``/``lon``, scattered points).
        """
        from dcfa.geo import _is_latitude, is_longitude

        along = [(str(k), c) for k, c in X.coords.items() if k != dim and c.dims == (dim,)]
        lats = [k for k, c in along if _is_latitude(k, c.attrs)]
        lons = [k for k, c in along if is_longitude(k, c.attrs) and k not in lats]
        if not lats or not lons:
            return None
        where = (
            f"{name}: an int neighbors radius needs the grid of the cells along {dim!r}, which "
            "has no MultiIndex"
        )
        fix = (
            f"restore the MultiIndex over every stacked dim, e.g. "
            f"{name}.set_index({dim}=[...]), or pass neighbors as a sparse adjacency"
        )
        if len(lats) > 1 or len(lons) > 1:
            raise InputError(
                f"{where}: expected one latitude and one longitude coordinate along it, got "
                f"latitudes {lats} and longitudes {lons}; {fix}"
            )
        names = [k for k, _ in along if k in lats or k in lons or k in BLOCK_DIMS]
        kinds = ["block" if k in BLOCK_DIMS else "lon" if k in lons else "lat" for k in names]
        blocks = [kind == "block" for kind in kinds]
        axes, codes = [], []
        for k, block in zip(names, blocks, strict=True):
            values = np.asarray(X.coords[k].values)
            try:
                axis, code = _category_axis(values) if block else _numeric_axis(values)
            except ValueError as exc:
                raise InputError(f"{where}: the coordinate {k!r} {exc}; {fix}") from None
            axes.append(axis)
            codes.append(code)
        reverse = _orient(axes, codes, kinds)
        for j, kind in enumerate(kinds):
            if kind != "block":
                axes[j], codes[j] = _fill_axis(axes[j], codes[j], reverse[j], kind == "lon")
        shape = tuple(a.size for a in axes)
        if np.prod(shape, dtype=np.float64) >= 2.0**62:
            raise InputError(f"{where}: the grid of {names} would have {shape} cells; {fix}")
        cells = np.ravel_multi_index(tuple(codes), shape).astype(np.int64)
        order = np.argsort(cells, kind="stable")
        same = np.flatnonzero(cells[order][1:] == cells[order][:-1])
        if same.size:
            first = order[same[0]]
            at = ", ".join(f"{k}={X.coords[k].values[first]!r}" for k in names)
            raise InputError(
                f"{where}: expected one cell per place on the grid of {tuple(names)}, got "
                f"{same.size} cell(s) at the place of another (first: {at}); {fix}"
            )
        touching = _with_neighbours(cells, np.stack(codes), shape, blocks)
        if cells.size > 1 and 2 * touching < cells.size:
            raise InputError(
                f"{where}: only {touching} of its {cells.size} cells have a neighbour on the "
                f"grid of {tuple(names)} (shape {shape}) their coordinates span, so they do not "
                f"place the cells on a grid (a curvilinear grid's latitudes and longitudes, "
                f"scattered points); expected most cells next to another; {fix}"
            )
        coords = {
            k: xr.Variable((k,), axis, attrs=dict(X.coords[k].attrs))
            for k, axis in zip(names, axes, strict=True)
        }
        return cls(dims=tuple(names), shape=shape, coords=coords, cells=cells)


# an axis rebuilt from its values may be filled up to this many times the values present
_MAX_FILL = 16


def _numeric_axis(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A latitude or longitude: its values present, ascending, and each cell's position."""
    if values.dtype == bool or not (
        np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)
    ):
        raise ValueError(f"is not numeric (dtype {values.dtype})")
    if not np.isfinite(values).all():
        raise ValueError("has missing (NaN) or infinite values")
    present = np.unique(values)
    return present, np.searchsorted(present, values).astype(np.int64)


def _category_axis(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block dim (variable, window, lag): its values in order of first appearance."""
    code, uniques = pd.factorize(values, sort=False)
    if (code < 0).any():
        raise ValueError("has missing values")
    return np.asarray(uniques), np.asarray(code, dtype=np.int64)


def _orient(axes: list, codes: list, kinds: list) -> list[bool]:
    """Order the axes (in place) as the cells' order along the cell dim says, when it is the
    C order of a stacked grid (as ``stack``, ``dropna`` or a selection in order leave it);
    returns which axes are descending.

    Along each axis, between consecutive cells at the same place on the axes before it, the
    positions rise (ascending) or all fall (descending: latitudes from 90 to -90); a
    longitude may also start anywhere on its circle (a -180..180 grid written from 0 east:
    0, ..., 165, -180, ..., -15), and a block dim keeps its order of first appearance. When
    the cells, so placed, are not in C order (shuffled), every axis is ascending and a block
    dim's values sorted instead: the grid does not depend on the order of the cells.
    """
    n = codes[0].size
    same = np.ones(max(n - 1, 0), dtype=bool)
    ways = []
    for axis, code, kind in zip(axes, codes, kinds, strict=True):
        a, b = code[:-1][same], code[1:][same]
        way = _orientation(a[a != b], b[a != b], axis.size, kind)
        if way is None:
            break
        ways.append(way)
        same &= code[:-1] == code[1:]
    if len(ways) == len(axes):
        placed = [_turn(a, c, *w) for a, c, w in zip(axes, codes, ways, strict=True)]
        shape = tuple(a.size for a in axes)
        if (np.diff(np.ravel_multi_index(tuple(c for _, c in placed), shape)) > 0).all():
            axes[:], codes[:] = [a for a, _ in placed], [c for _, c in placed]
            return [reverse for reverse, _ in ways]
    for j, kind in enumerate(kinds):
        if kind == "block":
            try:
                ordered = np.argsort(axes[j], kind="stable")
            except TypeError:  # values that do not sort: order of first appearance
                ordered = np.arange(axes[j].size)
            rank = np.empty(axes[j].size, dtype=np.int64)
            rank[ordered] = np.arange(axes[j].size)
            axes[j], codes[j] = axes[j][ordered], rank[codes[j]]
    return [False] * len(axes)


def _orientation(a, b, n: int, kind: str) -> tuple[bool, int] | None:
    """(descending, start) of an axis of ``n`` values on which every step ``a -> b`` rises
    once the axis is reversed (descending) and rotated to begin at position ``start`` (a
    longitude only), or None."""
    for reverse in (False, True) if kind != "block" else (False,):
        x, y = (n - 1 - a, n - 1 - b) if reverse else (a, b)
        down = x > y
        if not down.any():
            return reverse, 0
        if kind == "lon":  # the start s: s <= x and y < s for a step down, not x < s <= y up
            low, high = int(y[down].max()) + 1, int(x[down].min())
            if low <= high:
                cover = np.zeros(n + 1, dtype=np.int64)
                np.add.at(cover, x[~down] + 1, 1)
                np.add.at(cover, y[~down] + 1, -1)
                free = np.flatnonzero(np.cumsum(cover)[low : high + 1] == 0)
                if free.size:
                    return reverse, low + int(free[0])
    return None


def _turn(axis: np.ndarray, code: np.ndarray, reverse: bool, start: int):
    if reverse:
        axis, code = axis[::-1], axis.size - 1 - code
    if start:
        axis, code = np.roll(axis, -start), (code - start) % axis.size
    return axis, code


def _fill_axis(axis: np.ndarray, code: np.ndarray, reverse: bool, circular: bool):
    """``axis`` (ascending, or descending when ``reverse``; a longitude possibly rotated) with
    the gaps of a regular spacing filled, and each cell's position on it: a row or column of
    cells all dropped stays between its neighbours. The spacing is the smallest step, and
    every step must be a whole number of it."""
    t = axis.astype(np.float64)[::-1] if reverse else axis.astype(np.float64)
    if circular:  # unwrap: one turn up at the seam
        t[1:] += 360.0 * np.cumsum(np.diff(t) < 0)
    if t.size < 3 or not (np.diff(t) > 0).all():
        return axis, code
    steps = np.diff(t)
    ratio = steps / steps.min()
    whole = np.rint(ratio).astype(np.int64)
    if (np.abs(ratio - whole) > 0.01).any() or whole.max() < 2:
        return axis, code
    if whole.sum() + 1 > _MAX_FILL * t.size:
        return axis, code
    at = np.concatenate(([0], np.cumsum(whole)))  # the values present on the filled axis
    filled = np.concatenate(
        [t[:1]]
        + [lo + d * np.arange(1, k + 1) / k for lo, d, k in zip(t[:-1], steps, whole, strict=True)]
    )
    if circular:
        from dcfa.geo import longitude_convention, wrap_longitude

        filled = wrap_longitude(filled, longitude_convention(axis))
    if np.issubdtype(axis.dtype, np.integer):
        filled = np.rint(filled)
    filled = filled.astype(axis.dtype)
    filled[at] = axis[::-1] if reverse else axis  # exact values
    if np.unique(filled).size != filled.size:
        return axis, code
    if reverse:
        return filled[::-1], filled.size - 1 - at[axis.size - 1 - code]
    return filled, at[code]


def _with_neighbours(cells, codes, shape, blocks) -> int:
    """How many of the ``cells`` (flat places on ``shape``, positions ``codes``) touch
    another along the grid's axes that are not block dims (a radius of 1, not across a
    longitude seam)."""
    present = np.sort(cells)
    spatial = [a for a, b in enumerate(blocks) if not b]
    touching = np.zeros(cells.size, dtype=bool)
    for step in itertools.product((-1, 0, 1), repeat=len(spatial)):
        if not any(step):
            continue
        moved = codes.copy()
        moved[spatial] += np.asarray(step)[:, None]
        inside = np.flatnonzero(((moved >= 0) & (moved < np.asarray(shape)[:, None])).all(0))
        flat = np.ravel_multi_index(tuple(moved[:, inside]), shape)
        pos = np.clip(np.searchsorted(present, flat), 0, present.size - 1)
        touching[inside[present[pos] == flat]] = True
    return int(touching.sum())


@dataclass(frozen=True)
class FeatureLayout:
    """How the features of a stacked DataArray map back onto its dims.

    The grid (what an int ``neighbors`` radius, the periodic longitude and the visiting order
    are about) is the feature dims, or for one stacked cell dim its :class:`CellGrid`. When
    the coordinates of a cell dim without MultiIndex do not place its cells on a grid,
    ``grid_error`` says why, and asking for the grid raises it (a fit without an int
    ``neighbors`` radius never does).
    """

    sample_dim: str
    feature_dims: tuple[str, ...]
    feature_shape: tuple[int, ...]
    feature_coords: dict
    sample_coords: dict
    name: str | None
    attrs: dict
    cell_grid: CellGrid | None = None
    grid_error: str | None = None

    @property
    def n_features(self) -> int:
        return int(np.prod(self.feature_shape))

    @property
    def grid_dims(self) -> tuple[str, ...]:
        self._check_grid()
        return self.feature_dims if self.cell_grid is None else self.cell_grid.dims

    @property
    def grid_shape(self) -> tuple[int, ...]:
        self._check_grid()
        return self.feature_shape if self.cell_grid is None else self.cell_grid.shape

    @property
    def grid_coords(self) -> dict:
        self._check_grid()
        return self.feature_coords if self.cell_grid is None else self.cell_grid.coords

    def _check_grid(self) -> None:
        if self.grid_error is not None:
            raise InputError(self.grid_error)

    def visit_order(self, periodic: tuple[int, ...] = ()) -> np.ndarray | None:
        """The order in which the partition visits the features of a grid.

        A periodic longitude has no first cell: the given first one is wherever the input's
        convention puts its seam (0 or 180 degrees, or anywhere for a rotated axis). Along
        each dim of ``periodic`` (positions among the grid dims) that has longitude values,
        the cells are visited by longitude modulo 360, from 0 east; along a latitude, from
        south to north (stores keep it either way); other dims keep their order. So the same
        grid in any longitude convention and either latitude order gives the same visiting
        order, hence the same partition. The cells of a :class:`CellGrid` are visited in that order
        of the grid, whatever their order along the cell dim. Returns the feature indices in
        visiting order, or None when it is the given order.
        """
        self._check_grid()
        order = self._grid_order(periodic)
        if self.cell_grid is None:
            return order
        cells = self.cell_grid.cells
        if order is not None:  # rank of each grid cell in the visit
            rank = np.empty(order.size, dtype=np.int64)
            rank[order] = np.arange(order.size)
            cells = rank[cells]
        visit = np.argsort(cells, kind="stable")
        return None if (visit == np.arange(visit.size)).all() else visit

    def _grid_order(self, periodic: tuple[int, ...]) -> np.ndarray | None:
        from dcfa.geo import latitude_axes, longitude_axes

        shape = self.grid_shape
        lons = longitude_axes(self.grid_dims, self.grid_coords)
        lats = latitude_axes(self.grid_dims, self.grid_coords)
        perms = []
        for axis, size in enumerate(shape):
            lon = lons.get(axis) if axis in periodic else None
            if lon is not None and lon.shape == (size,):
                perms.append(np.argsort(np.mod(lon.astype(np.float64), 360.0), kind="stable"))
            elif axis in lats and lats[axis].shape == (size,):
                perms.append(np.argsort(lats[axis], kind="stable"))
            else:
                perms.append(np.arange(size))
        if all((p == np.arange(p.size)).all() for p in perms):
            return None
        index = np.arange(int(np.prod(shape))).reshape(shape)
        return index[np.ix_(*perms)].ravel()

    def unstack(
        self, values, *, name: str | None = None, attrs: dict | None = None
    ) -> xr.DataArray:
        """Put a length-``D`` vector (or ``(D, ...)`` array) back on the feature dims."""
        values = np.asarray(values)
        trailing = values.shape[1:]
        data = values.reshape(self.feature_shape + trailing)
        extra = tuple(f"dim_{i}" for i in range(len(trailing)))
        return xr.DataArray(
            data,
            dims=self.feature_dims + extra,
            coords={k: v for k, v in self.feature_coords.items()},
            name=name,
            attrs=dict(attrs or {}),
        )

    def samples(
        self,
        data,
        *,
        dim: str | None = None,
        coords: dict | None = None,
        name: str | None = None,
        attrs: dict | None = None,
    ) -> xr.DataArray:
        """Wrap a ``(n_samples,)`` result, or a ``(n_samples, k)`` one with ``dim`` for its
        columns, with the sample coordinates and the scalar ones (an ensemble member's label,
        a height), and ``attrs`` (``X``'s by default)."""
        scalars = {k: v for k, v in self.feature_coords.items() if not v.dims}
        return xr.DataArray(
            data,
            dims=(self.sample_dim,) if dim is None else (self.sample_dim, dim),
            coords={**scalars, **self.sample_coords, **(coords or {})},
            name=name,
            attrs=dict(self.attrs if attrs is None else attrs),
        )


def stack_features(X: xr.DataArray, sample_dim: str, *, name: str = "X"):
    """Stack every dim of ``X`` but ``sample_dim`` into one feature axis.

    Returns the ``(n_samples, n_features)`` data (NumPy or Dask, never loaded) and the
    :class:`FeatureLayout` to map results back. A single feature dim is a stacked cell dim
    when it has a MultiIndex (:meth:`CellGrid.of`) or, without one, a latitude and a
    longitude coordinate along it (:meth:`CellGrid.from_coords`); the grid is then that of the
    cells, else the feature dims.
    """
    if sample_dim not in X.dims:
        raise InputError(
            f"{name}: the sample dim {sample_dim!r} is not among the dims {X.dims}; pass "
            f"sample_dim=<one of {list(X.dims)}>"
        )
    feature_dims = tuple(d for d in X.dims if d != sample_dim)
    members = ensemble_dim(X, feature_dims)
    if members is not None:
        raise InputError(
            f"{name}: {ensemble_text(members, X.sizes[members])}. Fit one member "
            f"({name}.sel({members}=...)), or pool the members as samples: their anomalies, "
            f"then {name}.stack(sample=({members!r}, {sample_dim!r})), the target stacked "
            "alike, and sample_dim='sample'"
        )
    if not feature_dims:
        raise InputError(
            f"{name}: expected a sample dim and at least one feature dim, got only "
            f"{sample_dim!r}; a single series is one feature: use X.expand_dims('feature', -1)"
        )
    X = X.transpose(sample_dim, *feature_dims)
    shape = tuple(X.sizes[d] for d in feature_dims)
    cell_grid, grid_error = None, None
    if len(feature_dims) == 1:
        cell_grid = CellGrid.of(X, feature_dims[0])
        if cell_grid is None:
            try:
                cell_grid = CellGrid.from_coords(X, feature_dims[0], name=name)
            except ValueError as exc:  # raised when the grid is asked for
                grid_error = str(exc)
    data = X.data.reshape((X.sizes[sample_dim], int(np.prod(shape))))
    layout = FeatureLayout(
        sample_dim=sample_dim,
        feature_dims=feature_dims,
        feature_shape=shape,
        feature_coords={
            k: c.variable for k, c in X.coords.items() if set(c.dims) <= set(feature_dims)
        },
        sample_coords={k: c.variable for k, c in X.coords.items() if set(c.dims) == {sample_dim}},
        name=X.name,
        attrs=dict(X.attrs),
        cell_grid=cell_grid,
        grid_error=grid_error,
    )
    return data, layout


def isel_positions(positions: np.ndarray) -> slice | np.ndarray:
    """An ``isel`` indexer for integer ``positions``: a slice when they are one run of
    consecutive positions, increasing or decreasing (a slice keeps a Dask array's chunks and
    its graph small; a list of positions gathers), else the positions themselves."""
    positions = np.asarray(positions)
    if positions.size == 1:
        return slice(int(positions[0]), int(positions[0]) + 1)
    steps = np.diff(positions)
    if positions.size > 1 and (steps == 1).all():
        return slice(int(positions[0]), int(positions[-1]) + 1)
    if positions.size > 1 and (steps == -1).all():
        stop = int(positions[-1]) - 1
        return slice(int(positions[0]), None if stop < 0 else stop, -1)
    return positions

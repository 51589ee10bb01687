"""xarray plumbing: a labelled field <-> a (sample, feature) matrix.

A climate field ``(time, lat, lon)`` becomes ``(time, feature)`` with ``feature`` the flattened
``(lat, lon)``; :class:`FeatureLayout` remembers the feature dims, their coordinates, the sample
coordinate and the attributes so every per-feature result (a label map, a mean, a weight) can
be put back on the grid and every per-sample result keeps its time axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["CellGrid", "FeatureLayout", "stack_features"]


@dataclass(frozen=True)
class CellGrid:
    """The grid behind a stacked cell dim: ``field.stack(cell=("lat", "lon"))``, also after
    ``dropna("cell")`` or any selection of cells.

    The cell dim's pandas MultiIndex keeps every value of each stacked dim in its levels (in
    their order), so the grid is the product of the levels and each cell has its place on it:
    an int ``neighbors`` radius, the periodic longitude and the visiting order are those of
    the grid, restricted to the cells present.
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
            raise ValueError(f"X: the {dim!r} index has missing level values (NaN in a level)")
        cells = np.ravel_multi_index(tuple(codes), shape) if codes.size else codes[0]
        return cls(dims=dims, shape=shape, coords=coords, cells=cells)


@dataclass(frozen=True)
class FeatureLayout:
    """How the features of a stacked DataArray map back onto its dims.

    The grid (what an int ``neighbors`` radius, the periodic longitude and the visiting order
    are about) is the feature dims, or for one stacked cell dim its :class:`CellGrid`.
    """

    sample_dim: str
    feature_dims: tuple[str, ...]
    feature_shape: tuple[int, ...]
    feature_coords: dict
    sample_coords: dict
    name: str | None
    attrs: dict
    cell_grid: CellGrid | None = None

    @property
    def n_features(self) -> int:
        return int(np.prod(self.feature_shape))

    @property
    def grid_dims(self) -> tuple[str, ...]:
        return self.feature_dims if self.cell_grid is None else self.cell_grid.dims

    @property
    def grid_shape(self) -> tuple[int, ...]:
        return self.feature_shape if self.cell_grid is None else self.cell_grid.shape

    @property
    def grid_coords(self) -> dict:
        return self.feature_coords if self.cell_grid is None else self.cell_grid.coords

    def visit_order(self, periodic: tuple[int, ...] = ()) -> np.ndarray | None:
        """The order in which the partition visits the features of a grid.

        A periodic longitude has no first cell: the given first one is wherever the input's
        convention puts its seam (0 or 180 degrees, or anywhere for a rotated axis). Along
        each dim of ``periodic`` (positions among the grid dims) that has longitude values,
        the cells are visited by longitude modulo 360, from 0 east; other dims keep their
        order. So the same grid in any longitude convention gives the same visiting order,
        hence the same partition. The cells of a :class:`CellGrid` are visited in that order
        of the grid, whatever their order along the cell dim. Returns the feature indices in
        visiting order, or None when it is the given order.
        """
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
        from dcfa.geo import longitude_axes

        if not periodic:
            return None
        shape = self.grid_shape
        lons = longitude_axes(self.grid_dims, self.grid_coords)
        perms = []
        for axis, size in enumerate(shape):
            values = lons.get(axis) if axis in periodic else None
            if values is None or values.shape != (size,):
                perms.append(np.arange(size))
            else:
                perms.append(np.argsort(np.mod(values.astype(np.float64), 360.0), kind="stable"))
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
        dim: str,
        coords: dict | None = None,
        name: str | None = None,
        attrs: dict | None = None,
    ) -> xr.DataArray:
        """Wrap a ``(n_samples, k)`` result with the sample coordinates and ``dim`` for columns."""
        return xr.DataArray(
            data,
            dims=(self.sample_dim, dim),
            coords={**self.sample_coords, **(coords or {})},
            name=name,
            attrs=dict(self.attrs if attrs is None else attrs),
        )


def stack_features(X: xr.DataArray, sample_dim: str, *, name: str = "X"):
    """Stack every dim of ``X`` but ``sample_dim`` into one feature axis.

    Returns the ``(n_samples, n_features)`` data (NumPy or Dask, never loaded) and the
    :class:`FeatureLayout` to map results back.
    """
    if sample_dim not in X.dims:
        raise ValueError(
            f"{name}: the sample dim {sample_dim!r} is not among the dims {X.dims}; pass "
            f"sample_dim=<one of {list(X.dims)}>"
        )
    feature_dims = tuple(d for d in X.dims if d != sample_dim)
    if not feature_dims:
        raise ValueError(
            f"{name}: expected a sample dim and at least one feature dim, got only "
            f"{sample_dim!r}; a single series is one feature: use X.expand_dims('feature', -1)"
        )
    X = X.transpose(sample_dim, *feature_dims)
    shape = tuple(X.sizes[d] for d in feature_dims)
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
        cell_grid=CellGrid.of(X, feature_dims[0]) if len(feature_dims) == 1 else None,
    )
    return data, layout

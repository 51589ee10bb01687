"""Spatial adjacency of grid cells, for the neighbour-restricted partition.

On a grid the authors of the CFA papers only aggregate cells that touch a group (their
climate runs); :func:`grid_adjacency` builds that restriction as a sparse ``D x D`` matrix from
the shape of the feature dims, and :func:`resolve_neighbors` turns an estimator's
``neighbors`` parameter (``None``, an int radius, or a matrix) into it.

A global grid wraps around in longitude: its first and last columns are neighbours.
:func:`periodic_dims` finds such dims from the coordinates (or takes the user's word), and
:func:`grid_adjacency_for` builds the adjacency of an xarray field's grid with them.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
import xarray as xr

from dcfa._errors import InputError, InputTypeError
from dcfa.stacking import BLOCK_DIMS

__all__ = [
    "BLOCK_DIMS",
    "PERIODIC_AUTO",
    "block_axes",
    "block_labels",
    "feature_blocks_of",
    "grid_adjacency",
    "grid_adjacency_for",
    "patch_sizes",
    "periodic_dims",
    "resolve_grid",
    "resolve_neighbors",
]

PERIODIC_AUTO = "auto"


def block_axes(dims) -> tuple[int, ...]:
    """Positions of the :data:`BLOCK_DIMS` among the grid dims ``dims``."""
    return tuple(a for a, d in enumerate(dims) if d in BLOCK_DIMS)


def block_labels(dims, shape, coords, block_dims=None) -> np.ndarray:
    """One block label per feature (C order over ``dims`` of sizes ``shape``), ``0 ..
    n_blocks - 1`` in order of first appearance: features that differ along a block dim (a
    dim, or a coordinate over ``dims`` such as a stacked level, named in ``block_dims``;
    default :data:`BLOCK_DIMS`) are in different blocks. Every feature is in block 0 when
    there is none.
    """
    import pandas as pd
    import xarray as xr

    sizes = dict(zip(dims, shape, strict=True))
    n = int(np.prod(shape, dtype=np.int64))
    if block_dims is None:
        block_dims = [d for d in BLOCK_DIMS if d in dims or d in coords]
    columns = []
    for name in block_dims:
        if name in coords:
            var = coords[name]
            var = var.variable if hasattr(var, "variable") else var
        elif name in dims:
            var = xr.Variable(name, np.arange(sizes[name]))
        else:
            raise InputError(f"block_dims: {name!r} is no dim or coordinate of the features")
        if not set(var.dims) <= set(dims):
            raise InputError(f"block_dims: {name!r} runs along a dim that is not a feature dim")
        columns.append(var.set_dims(sizes).transpose(*dims).values.ravel())
    if not columns:
        return np.zeros(n, dtype=np.int64)
    codes, _ = pd.MultiIndex.from_arrays(columns).factorize()
    return codes.astype(np.int64)


def feature_blocks_of(layout) -> np.ndarray | None:
    """The block of every feature of an xarray input's ``layout`` (:func:`block_labels`), or
    None when it has one block (or no layout: NumPy input)."""
    if layout is None:
        return None
    labels = block_labels(layout.feature_dims, layout.feature_shape, layout.feature_coords)
    return labels if labels.size and labels.max() > 0 else None


def grid_adjacency(
    shape: tuple[int, ...], radius: int = 1, *, periodic=(), blocks=()
) -> sp.csr_array:
    """Adjacency of the cells of a C-ordered grid of ``shape`` within ``radius`` steps.

    Two cells are neighbours when they differ by at most ``radius`` along every grid dim
    (a square / cube of side ``2 radius + 1``) and not at all along the ``blocks`` dims
    (:data:`BLOCK_DIMS`: variables, time scales, lags). ``periodic`` lists dims (by
    position) that wrap around, such as a global longitude.

    Returns
    -------
    scipy.sparse.csr_array of shape (D, D), bool, without the diagonal.
    """
    if not is_radius(radius) or radius < 1:  # 1.0 or True are no number of steps
        raise InputError(f"neighbors: expected an int radius >= 1 grid steps, got {radius!r}")
    radius = int(radius)
    shape = tuple(int(s) for s in shape)
    D = int(np.prod(shape))
    index = np.arange(D).reshape(shape)
    rows, cols = [], []
    steps = [
        range(0, 1) if ax in blocks else range(-radius, radius + 1) for ax in range(len(shape))
    ]
    for off in itertools.product(*steps):
        if not any(off):
            continue
        src = [slice(None)] * len(shape)
        dst = [slice(None)] * len(shape)
        shifted = index
        ok = True
        for axis, o in enumerate(off):
            if axis in periodic:
                shifted = np.roll(shifted, -o, axis=axis)
                continue
            if abs(o) >= shape[axis]:
                ok = False
                break
            src[axis] = slice(max(0, -o), shape[axis] - max(0, o))
            dst[axis] = slice(max(0, o), shape[axis] - max(0, -o))
        if not ok:
            continue
        rows.append(index[tuple(src)].ravel())
        cols.append(shifted[tuple(dst)].ravel())
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    keep = r != c
    A = sp.coo_array((np.ones(keep.sum(), dtype=bool), (r[keep], c[keep])), shape=(D, D))
    return sp.csr_array(A)


def periodic_dims(grid, periodic="auto", *, sample_dim: str = "time") -> tuple[int, ...]:
    """Positions of the grid dims that wrap around (a global longitude).

    Parameters
    ----------
    grid : xarray.DataArray or FeatureLayout
        A field (its grid is every dim but ``sample_dim``, in order, or the grid of its
        stacked cell dim, :class:`dcfa.stacking.CellGrid`) or the layout of a stacked one.
    periodic : "auto", bool or sequence of str, default="auto"
        ``"auto"``: the longitude dims (:func:`dcfa.geo.longitude_axes`: named ``lon`` /
        ``longitude``, or with CF ``units = "degrees_east"`` / ``standard_name =
        "longitude"``) whose values are regularly spaced and go round the globe
        (:func:`dcfa.geo.is_global_longitude`); a regional grid is not periodic. ``True``:
        every longitude dim, global or not (an error when there is none). ``False``: none.
        A sequence names the dims that wrap.
    sample_dim : str, default="time"
        For a DataArray: the dim that is not part of the grid (ignored if absent).

    Returns
    -------
    tuple of int
        Positions among the grid dims, ascending (what :func:`grid_adjacency` and
        :func:`dcfa.grid_moments` take).
    """
    from dcfa.geo import is_global_longitude, longitude_axes

    dims, coords = _grid_of(grid, sample_dim)
    if isinstance(periodic, str):
        if periodic != PERIODIC_AUTO:
            raise InputError(
                f"periodic: expected 'auto', a bool or a tuple of dim names, got {periodic!r}"
            )
        lons = longitude_axes(dims, coords)
        return tuple(a for a, v in lons.items() if v is not None and is_global_longitude(v))
    if isinstance(periodic, bool | np.bool_):
        if not periodic:
            return ()
        lons = longitude_axes(dims, coords)
        if not lons:
            raise InputError(
                f"periodic=True: no longitude dim among the grid dims {dims}; name the dims "
                "that wrap around, e.g. periodic=('x',), or set periodic=False"
            )
        return tuple(sorted(lons))
    if isinstance(periodic, tuple | list):
        unknown = [d for d in periodic if d not in dims]
        if unknown:
            stacked = getattr(grid, "cell_grid", None) is not None or (
                hasattr(grid, "dims") and not set(dims) <= set(grid.dims)
            )
            whose = (
                "the dims stacked into X's cell dim"
                if stacked
                else "the dims of X but the sample dim"
            )
            raise InputError(f"periodic: {unknown} not among the grid dims {dims} ({whose})")
        return tuple(sorted({dims.index(d) for d in periodic}))
    raise InputTypeError(
        f"periodic: expected 'auto', a bool or a tuple of dim names, got {type(periodic).__name__}"
    )


def _grid_of(grid, sample_dim: str) -> tuple[tuple, dict]:
    """(grid dims, their coordinate variables) of a DataArray or a FeatureLayout."""
    if hasattr(grid, "grid_dims"):
        return tuple(grid.grid_dims), dict(grid.grid_coords)
    if not hasattr(grid, "dims") or not hasattr(grid, "coords"):
        raise InputTypeError(
            f"grid: expected an xarray.DataArray or a FeatureLayout, got {type(grid).__name__}"
        )
    dims = tuple(d for d in grid.dims if d != sample_dim)
    if len(dims) == 1:
        from dcfa.stacking import CellGrid

        cells = CellGrid.of(grid, dims[0])
        if cells is not None:
            return cells.dims, dict(cells.coords)
    coords = {k: c.variable for k, c in grid.coords.items() if set(c.dims) <= set(dims)}
    return dims, coords


def grid_adjacency_for(
    field, radius: int = 1, *, periodic="auto", sample_dim: str = "time"
) -> sp.csr_array:
    """:func:`grid_adjacency` of the grid of an xarray field, wrapping where it is global.

    Parameters
    ----------
    field : xarray.DataArray
        Its grid is every dim but ``sample_dim``, in order; cells are numbered in C order
        over those dims (as ``field.stack(cell=grid)`` does). Only its dims, sizes and
        coordinates are read (nothing is computed).
    radius : int, default=1
        Neighbours are within ``radius`` steps along every grid dim.
    periodic : "auto", bool or sequence of str, default="auto"
        Which dims wrap around (see :func:`periodic_dims`).
    sample_dim : str, default="time"

    Returns
    -------
    scipy.sparse.csr_array of shape (D, D), bool, without the diagonal.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> lon = np.arange(-180.0, 180.0, 90.0)
    >>> field = xr.DataArray(np.zeros((3, 2, 4)), dims=("time", "lat", "lon"),
    ...                      coords={"lat": [-45.0, 45.0], "lon": lon})
    >>> bool(grid_adjacency_for(field, 1)[0, 3])  # lon -180 and 90 are neighbours
    True
    >>> bool(grid_adjacency_for(field, 1, periodic=False)[0, 3])
    False
    """
    dims, _ = _grid_of(field, sample_dim)
    shape = tuple(int(field.sizes[d]) for d in dims)
    axes = periodic_dims(field, periodic, sample_dim=sample_dim)
    return grid_adjacency(shape, radius, periodic=axes, blocks=block_axes(dims))


def patch_sizes(
    field, radius: int = 1, *, periodic="auto", sample_dim: str = "time"
) -> xr.DataArray:
    """How many cells the separate patch of each cell of ``field`` holds: the cells with a
    value in every sample, connected by :func:`grid_adjacency_for` (what a map of contiguous
    regions can join; 0 where a cell has a missing value or lies on land).

    A lake, an enclosed sea or a bay that the land mask cuts off is a patch of its own, and
    every patch is a region of its own in a map of contiguous regions (``RegionsCV``): a few
    cells of one take a region, and ``max_groups`` counts it. Leave the small ones out
    first, where they are not what the map is for::

        X = X.where(dcfa.patch_sizes(X) >= 20)

    Parameters
    ----------
    field : xarray.DataArray
        Dims ``(sample_dim, *grid)``, as an estimator takes it. Its missing values are read
        (computed, for a Dask-backed field).
    radius, periodic : as :func:`grid_adjacency_for`
        The estimator's ``neighbors`` and ``periodic``.
    sample_dim : str, default="time"

    Returns
    -------
    xarray.DataArray of int on the grid
        Each cell's patch size, with the grid's coordinates.

    Examples
    --------
    >>> import numpy as np, xarray as xr, dcfa
    >>> values = np.ones((3, 2, 5))
    >>> values[:, :, 2] = np.nan  # a strip of land cuts the grid in two
    >>> field = xr.DataArray(values, dims=("time", "y", "x"))
    >>> dcfa.patch_sizes(field).values.tolist()
    [[4, 4, 0, 4, 4], [4, 4, 0, 4, 4]]
    """
    from scipy.sparse.csgraph import connected_components

    if not isinstance(field, xr.DataArray) or sample_dim not in field.dims:
        raise InputTypeError(
            f"field: expected an xarray.DataArray with the sample dim {sample_dim!r}, got "
            f"{type(field).__name__}" + (f" of dims {field.dims}" if hasattr(field, "dims") else "")
        )
    dims, _ = _grid_of(field, sample_dim)
    if not set(dims) <= set(field.dims):  # a list of cells: their patches are not the grid's
        raise InputError(
            f"field: expected a field on its grid, dims ({sample_dim!r}, *grid); got dims "
            f"{field.dims}: unstack its cells first"
        )
    kept = field.notnull().all(sample_dim).transpose(*dims)
    inside = np.asarray(kept.values).ravel()
    A = grid_adjacency_for(field, radius, periodic=periodic, sample_dim=sample_dim)
    cells = np.flatnonzero(inside)
    _, patch = connected_components(A[cells][:, cells], directed=False)
    sizes = np.zeros(inside.size, dtype=np.int64)
    sizes[cells] = np.bincount(patch)[patch]
    return kept.copy(data=sizes.reshape(kept.shape)).rename("patch_size")


def is_radius(neighbors) -> bool:
    return isinstance(neighbors, int | np.integer) and not isinstance(neighbors, bool)


def resolve_neighbors(neighbors, n_features: int, layout=None, *, periodic="auto"):
    """The adjacency matrix an estimator's ``neighbors`` parameter stands for (or None).

    ``periodic`` (see :func:`periodic_dims`, or positions already resolved, a tuple of int)
    only matters for an int radius on the grid of ``layout``.
    """
    if neighbors is None:
        return None
    if is_radius(neighbors):
        if layout is None:
            raise InputError(
                "neighbors: an int radius needs the grid, i.e. an xarray.DataArray X whose "
                "feature dims are the grid; for other inputs pass a sparse (D, D) adjacency"
            )
        axes = _axes(periodic, layout)
        blocks = block_axes(layout.grid_dims)
        A = grid_adjacency(layout.grid_shape, int(neighbors), periodic=axes, blocks=blocks)
        if layout.cell_grid is not None:  # the grid's adjacency among the cells present
            cells = layout.cell_grid.cells
            A = sp.csr_array(A[cells][:, cells])
        return A
    if isinstance(neighbors, bool | np.bool_):
        raise InputTypeError(
            f"neighbors: {neighbors!r} is not a radius; pass an int number of grid steps, "
            "e.g. neighbors=1, or None for no restriction"
        )
    if isinstance(neighbors, list | tuple):  # an array-like, as the estimators allow
        neighbors = np.asarray(neighbors)
    if sp.issparse(neighbors) or isinstance(neighbors, np.ndarray):
        return _adjacency_matrix(neighbors, n_features)
    hint = ""
    if hasattr(neighbors, "adj") and hasattr(neighbors, "nodes"):  # a networkx graph
        hint = (
            "; for a networkx graph pass networkx.to_scipy_sparse_array(G, nodelist=...) with "
            "the nodes in the order of the features"
        )
    raise InputTypeError(
        f"neighbors: expected None, an int radius or a sparse (D, D) matrix, got "
        f"{type(neighbors).__name__}{hint}"
    )


def _adjacency_matrix(neighbors, n_features: int) -> sp.csr_array:
    """A user's (D, D) matrix as a symmetric bool adjacency without the diagonal.

    Every stored non-zero entry is an edge, whatever its sign or size, and an edge in
    either direction is one in both: a weighted or one-sided matrix gives the graph it
    draws. Explicit zeros are not edges; NaN or infinite entries are refused (they say
    neither).
    """
    if neighbors.ndim != 2 or neighbors.shape != (n_features, n_features):
        raise InputError(
            f"neighbors: expected an adjacency of shape ({n_features}, {n_features}), "
            f"got {neighbors.shape}"
        )
    if neighbors.dtype.kind not in "biuf":
        raise InputTypeError(
            f"neighbors: expected a numeric or bool adjacency, got dtype {neighbors.dtype}"
        )
    A = sp.coo_array(neighbors, copy=True)
    A.sum_duplicates()  # scipy's meaning of repeated entries: their sum (the user's untouched)
    data = np.asarray(A.data)
    if A.dtype.kind == "f" and not np.isfinite(data).all():
        raise InputError(
            f"neighbors: the adjacency has {int((~np.isfinite(data)).sum())} NaN or infinite "
            "entries; store an edge as any non-zero number and no edge as 0"
        )
    # edges from the entries' positions, not their sum: A + A.T cancelled opposite weights
    edge = (data != 0) & (A.row != A.col)
    rows = np.concatenate([A.row[edge], A.col[edge]])
    cols = np.concatenate([A.col[edge], A.row[edge]])
    B = sp.coo_array((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n_features, n_features))
    B = sp.csr_array(B)
    B.sum_duplicates()
    return B


def _axes(periodic, layout) -> tuple[int, ...]:
    """Positions, whether ``periodic`` is already resolved (ints) or a user's value."""
    if isinstance(periodic, tuple | list) and all(
        isinstance(a, int | np.integer) and not isinstance(a, bool) for a in periodic
    ):
        return tuple(int(a) for a in periodic)
    return periodic_dims(layout, periodic)


class GridNeighbors(NamedTuple):
    """What an estimator's ``neighbors`` and ``periodic`` stand for on its input."""

    adjacency: sp.csr_array | None
    """The ``D x D`` adjacency (None without ``neighbors``, or when not asked for)."""
    periodic: tuple[int, ...]
    """Grid dims (positions among the feature dims) that wrap around."""
    order: np.ndarray | None
    """The order the partition visits features in (:meth:`FeatureLayout.visit_order`)."""
    blocks: np.ndarray | None = None
    """Every feature's block (:func:`feature_blocks_of`): a group never spans two."""


def resolve_grid(
    neighbors, n_features: int, layout=None, *, periodic="auto", adjacency: bool = True
) -> GridNeighbors:
    """Resolve ``neighbors`` and ``periodic`` of an estimator, before the pass.

    The grid, its periodic dims and the canonical visiting order only exist for an int
    radius on an xarray input; for ``neighbors=None`` or a matrix, ``periodic`` is ignored
    and the features are visited in the given order. ``adjacency=False`` skips building the
    matrix (the grid execution reads the grid itself).
    """
    axes: tuple[int, ...] = ()
    order = None
    if is_radius(neighbors) and layout is not None:
        axes = periodic_dims(layout, periodic)
        order = layout.visit_order(axes)
    A = resolve_neighbors(neighbors, n_features, layout, periodic=axes) if adjacency else None
    return GridNeighbors(A, axes, order, feature_blocks_of(layout))

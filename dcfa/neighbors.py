"""Spatial adjacency of grid cells, for the neighbour-restricted partition.

On a grid the authors of the CFA papers only aggregate cells that touch a group (their
climate runs); :func:`grid_adjacency` builds that restriction as a sparse ``D x D`` matrix from
the shape of the feature dims, and :func:`resolve_neighbors` turns an estimator's
``neighbors`` parameter (``None``, an int radius, or a matrix) into it.
"""

from __future__ import annotations

import itertools

import numpy as np
import scipy.sparse as sp

__all__ = ["grid_adjacency", "resolve_neighbors"]


def grid_adjacency(shape: tuple[int, ...], radius: int = 1, *, periodic=()) -> sp.csr_array:
    """Adjacency of the cells of a C-ordered grid of ``shape`` within ``radius`` steps.

    Two cells are neighbours when they differ by at most ``radius`` along every grid dim
    (a square / cube of side ``2 radius + 1``). ``periodic`` lists dims (by position) that
    wrap around, such as a global longitude.

    Returns
    -------
    scipy.sparse.csr_array of shape (D, D), bool, without the diagonal.
    """
    if int(radius) != radius or radius < 1:
        raise ValueError(f"neighbors: expected a radius >= 1 grid steps, got {radius!r}")
    shape = tuple(int(s) for s in shape)
    D = int(np.prod(shape))
    index = np.arange(D).reshape(shape)
    rows, cols = [], []
    offsets = itertools.product(range(-radius, radius + 1), repeat=len(shape))
    for off in offsets:
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


def resolve_neighbors(neighbors, n_features: int, layout=None):
    """The adjacency matrix an estimator's ``neighbors`` parameter stands for (or None)."""
    if neighbors is None:
        return None
    if isinstance(neighbors, (int, np.integer)) and not isinstance(neighbors, bool):
        if layout is None:
            raise ValueError(
                "neighbors: an int radius needs the grid, i.e. an xarray.DataArray X whose "
                "feature dims are the grid; for other inputs pass a sparse (D, D) adjacency"
            )
        return grid_adjacency(layout.feature_shape, int(neighbors))
    if sp.issparse(neighbors) or isinstance(neighbors, np.ndarray):
        A = sp.csr_array(neighbors)
        if A.shape != (n_features, n_features):
            raise ValueError(
                f"neighbors: expected an adjacency of shape ({n_features}, {n_features}), "
                f"got {A.shape}"
            )
        A = ((A + A.T) != 0).astype(bool)  # symmetric
        A.setdiag(False)
        A.eliminate_zeros()
        return sp.csr_array(A)
    raise TypeError(
        f"neighbors: expected None, an int radius or a sparse (D, D) matrix, got "
        f"{type(neighbors).__name__}"
    )

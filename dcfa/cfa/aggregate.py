"""The reduced features: one aggregate per group, as a sparse product.

Group ``g``'s value is the mean (or sum) over its members ``k`` of ``s_k (x_k - mu_k)``, with
``s_k = 1/std_k`` for standardised members. That is ``X @ W + offset`` with a sparse ``(D, d)``
``W``; on a Dask array the product is done per feature block and the blocks summed, so it
stays lazy and no task holds more than one input chunk. Excluded features have empty rows in
``W``: their NaNs are never touched.

With ``nan_aware=True`` (fits on gappy data) a group's value in a sample is the mean over
the members observed in that sample.
"""

from __future__ import annotations

from functools import partial

import dask.array as da
import numpy as np
import scipy.sparse as sp

__all__ = ["group_matrix", "aggregate", "broadcast_back"]


def group_matrix(labels: np.ndarray, values, *, how: str = "mean", weights=None) -> sp.csr_array:
    """Sparse ``(D, d)``: ``values[k]`` at ``(k, g)``, times ``weights[k]`` when given, and for
    a mean divided by the group's size (or its total weight)."""
    labels = np.asarray(labels)
    used = np.flatnonzero(labels >= 0)
    d = int(labels.max()) + 1 if used.size else 0
    v = np.broadcast_to(np.asarray(values, dtype=np.float64), labels.shape)[used]
    w = None if weights is None else np.asarray(weights, dtype=np.float64)[used]
    if w is not None:
        v = v * w
    if how == "mean":
        sizes = np.bincount(labels[used], weights=w, minlength=d)
        v = v / sizes[labels[used]]
    return sp.csr_array((v, (used, labels[used])), shape=(labels.size, d))


def aggregate(X, labels, scale, mean, *, how: str = "mean", nan_aware: bool = False, weights=None):
    """Group aggregates of the rows of ``X`` (NumPy in, NumPy out; Dask in, lazy Dask out);
    ``weights`` (one per feature) make them weighted means (or sums)."""
    labels = np.asarray(labels)
    mean = np.where(labels >= 0, mean, 0.0)
    if nan_aware:
        mats = (
            group_matrix(labels, scale, how="sum", weights=weights),
            group_matrix(labels, np.asarray(scale) * mean, how="sum", weights=weights),
            group_matrix(labels, 1.0, how="sum", weights=weights),
        )
        used = labels >= 0
        sizes = np.bincount(
            labels[used], weights=None if weights is None else np.asarray(weights)[used]
        ).astype(np.float64)
        factor = sizes if how == "sum" else np.ones_like(sizes)
        return _map(X, _nan_block, mats, 2, partial(_nan_finish, factor=factor))
    W = group_matrix(labels, scale, how=how, weights=weights)
    offset = -np.asarray(mean @ W)
    return _map(X, _dot_block, (W,), 1, partial(_add_offset, offset=offset))


def _add_offset(t, offset):
    return t + offset


def _dot_block(x, W):
    return np.asarray((W.T @ np.asarray(x, dtype=np.float64).T).T)


def _nan_block(x, W0, C, M):
    x = np.asarray(x, dtype=np.float64)
    obs = ~np.isnan(x)
    x0 = np.where(obs, x, 0.0)
    o = obs.astype(np.float64)
    num = (W0.T @ x0.T).T - (C.T @ o.T).T
    den = (M.T @ o.T).T
    return np.concatenate([np.asarray(num), np.asarray(den)], axis=1)


def _nan_finish(t, factor):
    d = t.shape[1] // 2
    num, den = t[:, :d], t[:, d:]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den * factor, np.nan)


def _map(X, block_fn, mats, width, finish):
    """Apply ``block_fn(x_block, *row_slices_of_mats)`` per feature block, sum, ``finish``."""
    d = mats[0].shape[1]
    if not isinstance(X, da.Array):
        return finish(block_fn(X, *mats))
    edges = np.cumsum((0, *X.chunks[1]))
    parts = []
    for b in range(len(X.chunks[1])):
        sl = [m[edges[b] : edges[b + 1]] for m in mats]
        if sl[0].nnz == 0:
            continue
        parts.append(
            X.blocks[:, b].map_blocks(
                block_fn, *sl, chunks=(X.chunks[0], (width * d,)), dtype=np.float64
            )
        )
    if not parts:
        raise ValueError("X: no feature of X is used by any group")
    total = parts[0] if len(parts) == 1 else da.stack(parts).sum(axis=0)
    return total.map_blocks(finish, chunks=(X.chunks[0], (d,)), dtype=np.float64)


def broadcast_back(Xt, labels, scale, mean, *, how: str = "mean") -> np.ndarray:
    """Map group values back onto the features, each in its own units (NaN if excluded).

    The inverse of :func:`aggregate` up to the differences within a group.
    """
    labels = np.asarray(labels)
    used = labels >= 0
    Xt = np.asarray(Xt, dtype=np.float64)
    out = np.full((Xt.shape[0], labels.size), np.nan)
    per = Xt[:, labels[used]]
    if how == "sum":
        sizes = np.bincount(labels[used])
        per = per / sizes[labels[used]]
    out[:, used] = per / np.asarray(scale)[used] + np.asarray(mean)[used]
    return out

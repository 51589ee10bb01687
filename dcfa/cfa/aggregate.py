"""The reduced features: one aggregate per group, as a sparse product.

Group ``g``'s value is the mean (or sum) over its members ``k`` of ``s_k (x_k - mu_k)``, with
``s_k = 1/std_k`` for standardised members. That is ``X @ W + offset`` with a sparse ``(D, d)``
``W`` of one entry per member; each batch of rows is summed into its groups in place with
``np.add.at`` (the members in column order, the same float operations as the sparse
product). On a Dask array this is done per feature block and the blocks summed, so it stays
lazy and no task holds more than one input chunk. Excluded features add into a bin that is
dropped: their NaNs never reach a group.

``anomalies=(climatology, spread, groups)`` folds a preprocessing into the same sweep: each
row is first ``(x - climatology[groups[t]]) / spread`` (as
:func:`dcfa.stats.kernels.anomaly_block` computes it, bit for bit), in cache, so the
anomalies of a whole block are never written out.

With ``nan_aware=True`` (fits on gappy data) a group's value in a sample is the mean over
the members observed in that sample.
"""

from __future__ import annotations

import itertools
from functools import partial

import dask
import dask.array as da
import numpy as np
import scipy.sparse as sp

from dcfa._errors import InputError
from dcfa.stats.graph import as_chunked
from dcfa.stats.kernels import subtract_by_group

__all__ = ["group_matrix", "group_rows", "aggregate", "broadcast_back"]


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


def aggregate(
    X,
    labels,
    scale,
    mean,
    *,
    how: str = "mean",
    nan_aware: bool = False,
    weights=None,
    anomalies: tuple | None = None,
):
    """Group aggregates of the rows of ``X`` (NumPy in, NumPy out; Dask in, lazy Dask out);
    ``weights`` (one per feature) make them weighted means (or sums).

    ``anomalies = (climatology, spread, groups)``: ``X`` is raw and each of its rows ``t`` is
    taken as ``(X[t] - climatology[groups[t]]) / spread`` (``climatology`` ``(G, D)``,
    ``spread`` ``(D,)``, either None, and either a Dask array with a Dask ``X``; ``groups``
    one int per row). Not with ``nan_aware``.
    """
    labels = np.asarray(labels)
    mean = np.where(labels >= 0, mean, 0.0)
    if nan_aware:
        if anomalies is not None:
            raise InputError("anomalies: not with nan_aware=True (apply them first)")
        mats = {
            "W0": group_matrix(labels, scale, how="sum", weights=weights),
            "C": group_matrix(labels, np.asarray(scale) * mean, how="sum", weights=weights),
            "M": group_matrix(labels, 1.0, how="sum", weights=weights),
        }
        used = labels >= 0
        sizes = np.bincount(
            labels[used], weights=None if weights is None else np.asarray(weights)[used]
        ).astype(np.float64)
        factor = sizes if how == "sum" else np.ones_like(sizes)
        finish = partial(_nan_finish, factor=factor)
        if not isinstance(X, da.Array):
            return finish(_nan_block(X, **mats))
        return _map(
            X,
            _nan_block,
            mats["W0"].shape[1],
            finish,
            width=2,
            used=np.diff(mats["W0"].indptr) > 0,
            kwargs=lambda sl: {k: m[sl] for k, m in mats.items()},
        )
    W = group_matrix(labels, scale, how=how, weights=weights)
    offset = -np.asarray(mean @ W)
    # W's one entry per member, and every feature's bin (0: no group, dropped)
    value = np.zeros(labels.size)
    used = np.diff(W.indptr) > 0
    value[used] = W.data
    bins = np.where(labels >= 0, labels + 1, 0)
    d = W.shape[1]
    clim, spread, rows = anomalies if anomalies is not None else (None, None, None)
    if not isinstance(X, da.Array):
        return group_rows(X, bins, value, d, clim, spread, rows, offset)
    edges = np.cumsum((0, *X.chunks[1]))
    one = sum(bool(bins[a:b].any()) for a, b in itertools.pairwise(edges)) == 1
    return _map(
        X,
        _group_rows_block,
        d,
        None if one else partial(_add_offset, offset=offset),
        used=bins > 0,
        consts=((clim, "gj"), (spread, "j"), (rows, "i")),
        kwargs=lambda sl: {
            "bins": bins[sl],
            "value": value[sl],
            "d": d,
            "offset": offset if one else None,
        },
    )


def _add_offset(t, offset):
    return t + offset


_BATCH_VALUES = 1 << 16  # values of a batch of rows: the work buffer stays in cache


def group_rows(x, bins, value, d, clim=None, spread=None, rows=None, offset=None) -> np.ndarray:
    """``out[t, g]``: the sum over the features ``k`` of group ``g`` (``bins[k] == g + 1``) of
    ``value[k] * a[t, k]`` (plus ``offset[g]``), ``a`` being ``x``, or its anomalies when
    ``clim`` / ``spread`` are given (see :func:`aggregate`). ``(n, d)`` float64.

    Rows go in batches of about ``_BATCH_VALUES`` values through one work buffer, summed into
    one zeroed output with ``np.add.at`` (the members in column order, as the sparse product
    sums them). Not ``np.bincount``, the same sums and 15 % faster in a plain process: each call
    returns a fresh array, and on a Dask worker, whose allocator hands every freed block over
    64 kB back to the system (the nanny's ``MALLOC_TRIM_THRESHOLD_``), each of those costs its
    first touches again. One block of ``benchmarks/bench_job.py``'s features pass (120 x 64 800,
    18 474 groups), in a thread of a process started with ``MALLOC_TRIM_THRESHOLD_=65536``:
    41 ms with ``np.bincount``, 28-31 ms with ``np.add.at``, which allocates nothing per row.
    """
    x = np.asarray(x)
    n, D = x.shape
    r = max(1, min(n, _BATCH_VALUES // max(D, 1)))
    index = (bins[None, :] + (d + 1) * np.arange(r)[:, None]).ravel()
    out = np.zeros((n, d + 1))
    work = np.empty((r, D))
    for start in range(0, n, r):
        k = min(r, n - start)
        block = work[:k]
        np.copyto(block, x[start : start + k], casting="unsafe")  # float64
        if clim is not None:
            if clim.shape[0] == 1:
                block -= clim[0]
            else:
                subtract_by_group(block, clim, rows[start : start + k])
        if spread is not None:
            block /= spread
        with np.errstate(invalid="ignore"):  # inf * 0 in the dropped bin
            block *= value
        np.add.at(out[start : start + k].reshape(-1), index[: k * D], block.reshape(-1))
    out = out[:, 1:]
    if offset is not None:
        out += offset
    return out


def _map(X, fn, d, finish, *, width=1, used, consts=(), kwargs=lambda sl: {}):
    """``fn(x_block, *const_blocks, **kwargs(features))`` per feature block of a Dask ``X``
    that holds a ``used`` feature (``width * d`` columns each), the blocks summed, ``finish``
    (``d`` columns; None: the single block's own).

    ``consts``: ``(array, index)`` pairs of constants sent once rather than embedded in every
    task (NumPy, or Dask arrays held on the workers): index ``"j"`` one value per feature,
    ``"gj"`` a table over the features, ``"i"`` one value per sample; a None constant is
    passed as None. The ``kwargs`` of a feature block
    that are arrays (sparse ones included) are sent once too (:func:`_once`).
    """
    edges = np.cumsum((0, *X.chunks[1]))
    consts = [
        (da.from_array(np.asarray(c), chunks=(X.chunks[0],)), i)
        if i == "i" and c is not None
        else (c, i)
        for c, i in consts
    ]
    parts = []
    for b in range(len(X.chunks[1])):
        sl = slice(edges[b], edges[b + 1])
        if not used[sl].any():
            continue
        args = [X.blocks[:, b], "ij"]
        for const, index in consts:
            if const is None:
                args += [None, None]
                continue
            if "j" in index:
                const = as_chunked(const[..., sl], -1)
            args += [const, index]
        parts.append(
            da.blockwise(
                fn,
                "ij",
                *args,
                **{k: _once(v) for k, v in kwargs(sl).items()},
                adjust_chunks={"j": width * d},
                dtype=np.float64,
                concatenate=True,
                meta=np.empty((0, 0)),
            )
        )
    if not parts:
        raise InputError("X: no feature of X is used by any group")
    total = parts[0] if len(parts) == 1 else da.stack(parts).sum(axis=0)
    if finish is None:
        return total
    return total.map_blocks(finish, chunks=(X.chunks[0], (d,)), dtype=np.float64)


def _once(value):
    """An array as one task of the graph that every task using it reads (not a copy inside
    each of them); anything else as it is."""
    return dask.delayed(value, pure=True) if hasattr(value, "shape") else value


def _group_rows_block(x, clim, spread, rows, *, bins, value, d, offset):
    return group_rows(x, bins, value, d, clim, spread, rows, offset)


def _nan_block(x, *, W0, C, M):
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

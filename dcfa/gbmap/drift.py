"""Distances in the GBMAP embedding and the kNN drift (out-of-distribution) score.

The embedding distance (Patron et al. 2024, Eq. 7) is the L1 distance between embeddings,

.. math:: d_{emb}(x, x') = \\sum_{j=1}^m |f_j(x) - f_j(x')|,

an upper bound of ``|f(x) - f(x')|`` (Eq. 8). The drift score of a new point (Section 4.5) is

.. math:: \\delta(x^*) = |f(x^*) - \\frac{1}{k} \\sum_{i \\in N_k(x^*)} v_i|,

with ``N_k`` its ``k = 5`` nearest training points in ``d_emb`` and ``v_i`` the training
targets ``y_i`` (regression) or the model's own training scores ``f(x_i)`` (classification).
A point where the model extrapolates (outside the training data, GBMAP keeps its slopes while
the kNN average stays flat) gets a large score. The EUCLID baseline drifter is the Euclidean
distance to the ``k``-th nearest training point in the original space.

The same search (:func:`knn_reduce`) serves the kNN regressor and classifier on the embedding
(:class:`dcfa.gbmap.GBMAPKNeighborsRegressor`, Table 4's KNN-GBMAP column) and the EUCLID
drifter.

Everything is computed chunk-wise, so the training set may be a Dask array larger than memory:
for each query chunk and training chunk one task finds the ``k`` nearest (a running top-``k``
over sub-blocks that bounds the distance matrix held at once), and the partial top-``k`` lists
of a query chunk are merged in a tree (the merge is associative). Ties in distance are broken
by the training row index, so the result does not depend on the chunking. On NumPy inputs the
same kernels run in a loop; if any input is a Dask array the result is a lazy Dask array.
An xarray DataArray (such as ``transform``'s output on a field) counts as the array it holds:
a chunked one stays lazy.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import dask
import dask.array as da
import numpy as np
from numpy.typing import ArrayLike
from scipy.spatial.distance import cdist

from dcfa._compute import tree_reduce
from dcfa._errors import InputError

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["drift_score", "embedding_distance", "euclid_drift_score", "knn_mean", "knn_reduce"]

# At most this many query x training distances are held at once in one task (64 MiB).
_MAX_PAIRS = 1 << 23
# Partial top-k lists merged per task in the tree reduction.


############################################################################################
# kernels on in-memory blocks

# The metrics of the nearest-neighbour searches: L1 in the embedding (Eq. 7), Euclidean in
# the original space (the EUCLID drifter of Section 4.5).
METRICS = ("cityblock", "euclidean")


def _dist(A: np.ndarray, B: np.ndarray, metric: str = "cityblock") -> np.ndarray:
    return cdist(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64), metric)


def _l1(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return _dist(A, B, "cityblock")


def _order(dist: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per row, the order by (distance, training index)."""
    return np.lexsort((idx, dist), axis=-1)


def _take(a: np.ndarray, order: np.ndarray) -> np.ndarray:
    return np.take_along_axis(a, order, axis=1)


def _merge(parts: list[tuple], k: int) -> tuple:
    """Merge partial top-``k`` lists ``(dist, idx, val)`` (each ``(n_q, <= k)``)."""
    dist = np.concatenate([p[0] for p in parts], axis=1)
    idx = np.concatenate([p[1] for p in parts], axis=1)
    val = np.concatenate([p[2] for p in parts], axis=1)
    order = _order(dist, idx)[:, :k]
    return _take(dist, order), _take(idx, order), _take(val, order)


def _select(D: np.ndarray, start: int, values: np.ndarray, k: int) -> tuple:
    """The ``k`` nearest columns of a distance block, ties broken by index."""
    nq, nt = D.shape
    idx_all = np.arange(start, start + nt)
    if nt <= k:
        order = np.argsort(D, axis=1, kind="stable")
    else:
        order = np.argpartition(D, k - 1, axis=1)[:, :k]
        kth = _take(D, order).max(axis=1)
        tied = (D <= kth[:, None]).sum(axis=1) > k  # a tie straddles the k-th place
        if tied.any():
            order[tied] = np.argsort(D[tied], axis=1, kind="stable")[:, :k]
    dist = _take(D, order)
    idx = idx_all[order]
    val = np.asarray(values, dtype=np.float64)[order]
    return dist, idx, val


def _knn_partial(
    Q: np.ndarray, T: np.ndarray, values: np.ndarray, start: int, k: int, metric: str = "cityblock"
) -> tuple:
    """Top-``k`` training rows of ``T`` (global rows ``start ...``) for every query row.

    A running top-``k`` over sub-blocks of ``T`` keeps at most ``_MAX_PAIRS`` distances.
    """
    nq = Q.shape[0]
    step = max(1, _MAX_PAIRS // max(nq, 1))
    best = None
    for s in range(0, T.shape[0], step):
        D = _dist(Q, T[s : s + step], metric)
        part = _select(D, start + s, values[s : s + step], k)
        best = part if best is None else _merge([best, part], k)
    if best is None:  # empty training block
        empty = np.zeros((nq, 0))
        return empty, empty.astype(np.int64), empty
    return best


def _mean_values(top: tuple) -> np.ndarray:
    """The mean of the values of the ``k`` nearest (``knn_mean``); NaN for a query row with a
    non-finite distance (a NaN or inf in the row: a lazy input is not checked before), not the
    mean over whichever rows a NaN sorts after."""
    out = top[2].mean(axis=1)
    out[~np.isfinite(top[0]).all(axis=1)] = np.nan
    return out


def _kth_distance(top: tuple) -> np.ndarray:
    """The distance to the ``k``-th nearest (the EUCLID drifter)."""
    return top[0][:, -1]


_REDUCERS = {"mean": _mean_values, "kth": _kth_distance}


def _knn_numpy(
    Q: np.ndarray, T: np.ndarray, values: np.ndarray, k: int, metric: str, reduce
) -> np.ndarray:
    rows = max(1, min(Q.shape[0], 4096))
    out = [
        reduce(_knn_partial(Q[s : s + rows], T, values, 0, k, metric))
        for s in range(0, Q.shape[0], rows)
    ]
    return np.concatenate(out) if out else np.zeros(0)


def knn_reduce(query, train, values, k: int, *, metric: str = "cityblock", reduce: str = "mean"):
    """The one chunk-wise nearest-neighbour search behind every kNN output of GBMAP.

    ``reduce="mean"``: the mean of ``values`` over the ``k`` nearest training rows;
    ``reduce="kth"``: the distance to the ``k``-th nearest. Validated 2-D ``query`` and
    ``train``; ``values`` of shape ``(n,)`` (ignored by ``"kth"``). Lazy if any input is a
    Dask array: per query chunk, one task per training chunk and a tree merge of the partial
    top-``k`` lists.
    """
    if metric not in METRICS:
        raise InputError(f"metric: expected one of {METRICS}, got {metric!r}")
    reducer = _REDUCERS[reduce]
    lazy = any(isinstance(a, da.Array) for a in (query, train, values))
    if not lazy:
        return _knn_numpy(query, train, values, k, metric, reducer)
    query, train = _as_dask(query), _as_dask(train)
    values = _as_dask(values).astype(np.float64).rechunk((train.chunks[0],))
    q_blocks = query.to_delayed().ravel()
    t_blocks = train.to_delayed().ravel()
    v_blocks = values.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(train.chunks[0])[:-1]]).astype(int)
    out = []
    for qb, nq in zip(q_blocks, query.chunks[0], strict=True):
        parts = [
            dask.delayed(_knn_partial, pure=True)(qb, tb, vb, int(s), k, metric)
            for tb, vb, s in zip(t_blocks, v_blocks, starts, strict=True)
        ]
        top = tree_reduce(parts, _merge, k)
        res = dask.delayed(reducer, pure=True)(top)
        out.append(da.from_delayed(res, shape=(nq,), dtype=np.float64))
    return da.concatenate(out) if len(out) > 1 else out[0]


############################################################################################
# public functions


def _unwrap(a):
    """The array inside an xarray DataArray (such as ``transform``'s output), which
    ``np.asarray`` would compute when it holds a Dask array. xarray is not imported here:
    the workers that run the kernels above need not load it."""
    xr = sys.modules.get("xarray")
    if xr is not None and isinstance(a, xr.DataArray):
        return a.data
    return a


def _rows_like(out, query, name: str):
    """``out`` (one value per row of ``query``) as a DataArray over ``query``'s first dim and
    its coords, when ``query`` is a DataArray; else ``out`` itself."""
    xr = sys.modules.get("xarray")
    if xr is None or not isinstance(query, xr.DataArray):
        return out
    dim = query.dims[0]
    coords = {k: c for k, c in query.coords.items() if c.dims == (dim,)}
    return xr.DataArray(out, dims=(dim,), coords=coords, name=name)


def _as_1d(a):
    a = _unwrap(a)
    if isinstance(a, da.Array):
        return a
    return np.asarray(a, dtype=np.float64).reshape(-1)


def _as_2d(a, name: str):
    a = _unwrap(a)
    if not isinstance(a, da.Array):
        a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise InputError(f"{name}: expected a 2-D (n_samples, n_components) array, got {a.shape}")
    return a


def _as_dask(a) -> da.Array:
    if isinstance(a, da.Array):
        return a.rechunk({1: -1}) if a.ndim == 2 else a
    return da.from_array(a, chunks=(max(1, min(a.shape[0], 65536)),) + a.shape[1:])


def embedding_distance(A: ArrayLike | da.Array, B: ArrayLike | da.Array) -> np.ndarray | da.Array:
    """Pairwise L1 distances in the embedding (Patron et al. 2024, Eq. 7).

    Parameters
    ----------
    A : array-like or dask.array.Array of shape (n_a, m)
    B : array-like or dask.array.Array of shape (n_b, m)
        Embeddings, e.g. from ``GBMAPRegressor.transform``.

    Returns
    -------
    D : ndarray or dask.array.Array of shape (n_a, n_b)
        ``D[i, j] = sum_k |A[i, k] - B[j, k]|``; lazy (one task per pair of row chunks) if
        ``A`` or ``B`` is a Dask array.
    """
    A, B = _as_2d(A, "A"), _as_2d(B, "B")
    if A.shape[1] != B.shape[1]:
        raise InputError(f"A and B: different embedding dimensions {A.shape[1]} != {B.shape[1]}")
    if not isinstance(A, da.Array) and not isinstance(B, da.Array):
        return _l1(A, B)
    A, B = _as_dask(A), _as_dask(B)
    return da.blockwise(
        _l1, "ij", A, "ik", B, "jk", concatenate=True, dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )  # fmt: skip


def _check_knn(query, train, n_neighbors, names=("query", "train")) -> tuple:
    query, train = _as_2d(query, names[0]), _as_2d(train, names[1])
    k = int(n_neighbors)
    if k < 1 or k != n_neighbors:
        raise InputError(f"n_neighbors: expected an int >= 1, got {n_neighbors}")
    if train.shape[0] < k:
        raise InputError(
            f"n_neighbors: {k} neighbours requested but the training set has {train.shape[0]} rows"
        )
    if query.shape[1] != train.shape[1]:
        raise InputError(
            f"{names[0]} and {names[1]}: different numbers of columns "
            f"{query.shape[1]} != {train.shape[1]}"
        )
    return query, train, k


def knn_mean(
    query: ArrayLike | da.Array,
    train: ArrayLike | da.Array,
    values: ArrayLike | da.Array,
    n_neighbors: int = 5,
    *,
    metric: str = "cityblock",
) -> np.ndarray | da.Array | xr.DataArray:
    """Mean of ``values`` over the ``n_neighbors`` nearest training rows.

    Parameters
    ----------
    query : array-like, dask.array.Array or xarray.DataArray of shape (n_q, m)
    train : array-like or dask.array.Array of shape (n, m)
    values : array-like or dask.array.Array of shape (n,)
        One value per training row (its target, its score, or a class indicator).
    n_neighbors : int, default=5
    metric : {"cityblock", "euclidean"}, default="cityblock"
        L1 (the embedding distance of Eq. 7) or Euclidean distance.

    Returns
    -------
    mean : ndarray, dask.array.Array or xarray.DataArray of shape (n_q,)
        Lazy if any input is a Dask array; a DataArray over ``query``'s first dim and its
        coords if ``query`` is one. Ties in distance are broken by the training row
        index (the lowest index wins), whatever the chunking.
    """
    return _rows_like(
        _knn_mean(query, train, values, n_neighbors, metric=metric), query, "knn_mean"
    )


def _knn_mean(query, train, values, n_neighbors, *, metric="cityblock", names=None):
    """:func:`knn_mean` whose errors name the caller's arguments (``names``: query, train,
    values)."""
    names = names or ("query", "train", "values")
    query, train, k = _check_knn(query, train, n_neighbors, names=names[:2])
    values = _as_1d(values)
    if values.shape != (train.shape[0],):
        raise InputError(f"{names[2]}: expected shape ({train.shape[0]},), got {values.shape}")
    return knn_reduce(query, train, values, k, metric=metric, reduce="mean")


def euclid_drift_score(
    X: ArrayLike | da.Array | xr.DataArray, X_train: ArrayLike | da.Array, n_neighbors: int = 5
) -> np.ndarray | da.Array | xr.DataArray:
    """The EUCLID drifter: distance to the ``n_neighbors``-th nearest training point.

    The baseline of Patron et al. (2024), Section 4.5: the Euclidean distance, in the
    original (standardised) feature space, from each new point to its ``k``-th nearest
    training point (``k = 5``). Unlike the GBMAP drifter it weighs every direction alike,
    relevant to the target or not.

    Parameters
    ----------
    X : array-like, dask.array.Array or xarray.DataArray of shape (n_q, p)
        New points, in the same (standardised) units as ``X_train``.
    X_train : array-like or dask.array.Array of shape (n, p)
        Training points.
    n_neighbors : int, default=5
        ``k`` of the paper.

    Returns
    -------
    score : ndarray, dask.array.Array or xarray.DataArray of shape (n_q,)
        Lazy if any input is a Dask array (the same chunk-wise search as :func:`knn_mean`); a
        DataArray over ``X``'s first dim and its coords if ``X`` is one.
    """
    query, X_train, k = _check_knn(X, X_train, n_neighbors, names=("X", "X_train"))
    dummy = (
        da.zeros(X_train.shape[0], chunks=(X_train.chunks[0],))
        if isinstance(X_train, da.Array)
        else np.zeros(X_train.shape[0])
    )
    score = knn_reduce(query, X_train, dummy, k, metric="euclidean", reduce="kth")
    return _rows_like(score, X, "euclid_drift_score")


def drift_score(
    embedding: ArrayLike | da.Array | xr.DataArray,
    scores: ArrayLike | da.Array,
    train_embedding: ArrayLike | da.Array,
    train_values: ArrayLike | da.Array,
    n_neighbors: int = 5,
) -> np.ndarray | da.Array | xr.DataArray:
    """GBMAP drift score ``|f(x*) - kNN mean|`` (Patron et al. 2024, Section 4.5).

    Parameters
    ----------
    embedding : array-like, dask.array.Array or xarray.DataArray of shape (n_q, m)
        Embedding of the new points, e.g. ``GBMAPRegressor.transform(X)``.
    scores : array-like or dask.array.Array of shape (n_q,)
        The model's output at the new points: the prediction (regression) or the score /
        logit (classification).
    train_embedding : array-like or dask.array.Array of shape (n, m)
        Embedding of the training points.
    train_values : array-like or dask.array.Array of shape (n,)
        Training targets ``y_i`` (regression) or training scores ``f(x_i)``
        (classification), in the units of ``scores``.
    n_neighbors : int, default=5
        ``k`` of the paper.

    Returns
    -------
    score : ndarray or dask.array.Array of shape (n_q,)
        Large where the model disagrees with its training neighbourhood (extrapolation).
        Lazy if any input is a Dask array; a DataArray over ``embedding``'s first dim and
        its coords if ``embedding`` is one.

    Notes
    -----
    The paper's drift score uses the embedding distance of Eq. (7); the EUCLID baseline of
    Section 4.5 is :func:`euclid_drift_score`, and the whole experiment of Section 4.5
    :func:`dcfa.gbmap.drift_experiment`.
    """
    fknn = _knn_mean(
        embedding,
        train_embedding,
        train_values,
        n_neighbors,
        names=("embedding", "train_embedding", "train_values"),
    )
    scores = _as_1d(scores)
    if scores.shape != (fknn.shape[0],):
        raise InputError(f"scores: expected shape ({fknn.shape[0]},), got {scores.shape}")
    if isinstance(fknn, da.Array) and isinstance(scores, da.Array):
        scores = scores.rechunk(fknn.chunks)
    return _rows_like(abs(scores - fknn), embedding, "drift_score")

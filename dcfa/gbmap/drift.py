"""Distances in the GBMAP embedding and the kNN drift (out-of-distribution) score.

The embedding distance (Patron et al. 2024, Eq. 7) is the L1 distance between embeddings,

.. math:: d_{emb}(x, x') = \\sum_{j=1}^m |f_j(x) - f_j(x')|,

an upper bound of ``|f(x) - f(x')|`` (Eq. 8). The drift score of a new point (Section 4.5) is

.. math:: \\delta(x^*) = |f(x^*) - \\frac{1}{k} \\sum_{i \\in N_k(x^*)} v_i|,

with ``N_k`` its ``k = 5`` nearest training points in ``d_emb`` and ``v_i`` the training
targets ``y_i`` (regression) or the model's own training scores ``f(x_i)`` (classification).
A point where the model extrapolates (outside the training data, GBMAP keeps its slopes while
the kNN average stays flat) gets a large score.

Everything is computed chunk-wise, so the training set may be a Dask array larger than memory:
for each query chunk and training chunk one task finds the ``k`` nearest (a running top-``k``
over sub-blocks that bounds the distance matrix held at once), and the partial top-``k`` lists
of a query chunk are merged in a tree (the merge is associative). Ties in distance are broken
by the training row index, so the result does not depend on the chunking. On NumPy inputs the
same kernels run in a loop; if any input is a Dask array the result is a lazy Dask array.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from scipy.spatial.distance import cdist

__all__ = ["embedding_distance", "knn_mean", "drift_score"]

# At most this many query x training distances are held at once in one task (64 MiB).
_MAX_PAIRS = 1 << 23
# Partial top-k lists merged per task in the tree reduction.
_SPLIT_EVERY = 8


############################################################################################
# kernels on in-memory blocks


def _l1(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return cdist(np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64), "cityblock")


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


def _knn_partial(Q: np.ndarray, T: np.ndarray, values: np.ndarray, start: int, k: int) -> tuple:
    """Top-``k`` training rows of ``T`` (global rows ``start ...``) for every query row.

    A running top-``k`` over sub-blocks of ``T`` keeps at most ``_MAX_PAIRS`` distances.
    """
    nq = Q.shape[0]
    step = max(1, _MAX_PAIRS // max(nq, 1))
    best = None
    for s in range(0, T.shape[0], step):
        part = _select(_l1(Q, T[s : s + step]), start + s, values[s : s + step], k)
        best = part if best is None else _merge([best, part], k)
    if best is None:  # empty training block
        empty = np.zeros((nq, 0))
        return empty, empty.astype(np.int64), empty
    return best


def _mean_values(top: tuple) -> np.ndarray:
    return top[2].mean(axis=1)


def _knn_mean_numpy(Q: np.ndarray, T: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    rows = max(1, min(Q.shape[0], 4096))
    out = [
        _mean_values(_knn_partial(Q[s : s + rows], T, values, 0, k))
        for s in range(0, Q.shape[0], rows)
    ]
    return np.concatenate(out) if out else np.zeros(0)


def _tree_merge(parts: list, k: int):
    while len(parts) > 1:
        parts = [
            dask.delayed(_merge, pure=True)(parts[s : s + _SPLIT_EVERY], k)
            if len(parts[s : s + _SPLIT_EVERY]) > 1
            else parts[s]
            for s in range(0, len(parts), _SPLIT_EVERY)
        ]
    return parts[0]


############################################################################################
# public functions


def _as_2d(a, name: str):
    if not isinstance(a, da.Array):
        a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D (n_samples, n_components) array, got {a.shape}")
    return a


def _as_dask(a) -> da.Array:
    if isinstance(a, da.Array):
        return a.rechunk({1: -1}) if a.ndim == 2 else a
    return da.from_array(a, chunks=(max(1, min(a.shape[0], 65536)),) + a.shape[1:])


def embedding_distance(A, B) -> np.ndarray | da.Array:
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
        raise ValueError(f"A and B: different embedding dimensions {A.shape[1]} != {B.shape[1]}")
    if not isinstance(A, da.Array) and not isinstance(B, da.Array):
        return _l1(A, B)
    A, B = _as_dask(A), _as_dask(B)
    return da.blockwise(
        _l1, "ij", A, "ik", B, "jk", concatenate=True, dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
    )  # fmt: skip


def knn_mean(query, train, values, n_neighbors: int = 5) -> np.ndarray | da.Array:
    """Mean of ``values`` over the ``n_neighbors`` nearest training rows in L1 distance.

    Parameters
    ----------
    query : array-like or dask.array.Array of shape (n_q, m)
    train : array-like or dask.array.Array of shape (n, m)
    values : array-like or dask.array.Array of shape (n,)
        One value per training row (its target, or its score).
    n_neighbors : int, default=5

    Returns
    -------
    mean : ndarray or dask.array.Array of shape (n_q,)
        Lazy if any input is a Dask array. Ties in distance are broken by the training row
        index (the lowest index wins), whatever the chunking.
    """
    query, train = _as_2d(query, "query"), _as_2d(train, "train")
    k = int(n_neighbors)
    if k < 1:
        raise ValueError(f"n_neighbors: expected an int >= 1, got {n_neighbors}")
    if train.shape[0] < k:
        raise ValueError(
            f"n_neighbors: {k} neighbours requested but the training set has {train.shape[0]} rows"
        )
    if query.shape[1] != train.shape[1]:
        raise ValueError(
            f"query and train: different embedding dimensions {query.shape[1]} != {train.shape[1]}"
        )
    if not isinstance(values, da.Array):
        values = np.asarray(values, dtype=np.float64).reshape(-1)
    if values.shape != (train.shape[0],):
        raise ValueError(f"values: expected shape ({train.shape[0]},), got {values.shape}")
    lazy = any(isinstance(a, da.Array) for a in (query, train, values))
    if not lazy:
        return _knn_mean_numpy(query, train, values, k)
    query, train = _as_dask(query), _as_dask(train)
    values = _as_dask(values).astype(np.float64).rechunk((train.chunks[0],))
    q_blocks = query.to_delayed().ravel()
    t_blocks = train.to_delayed().ravel()
    v_blocks = values.to_delayed().ravel()
    starts = np.concatenate([[0], np.cumsum(train.chunks[0])[:-1]]).astype(int)
    out = []
    for qb, nq in zip(q_blocks, query.chunks[0], strict=True):
        parts = [
            dask.delayed(_knn_partial, pure=True)(qb, tb, vb, int(s), k)
            for tb, vb, s in zip(t_blocks, v_blocks, starts, strict=True)
        ]
        top = _tree_merge(parts, k)
        mean = dask.delayed(_mean_values, pure=True)(top)
        out.append(da.from_delayed(mean, shape=(nq,), dtype=np.float64))
    return da.concatenate(out) if len(out) > 1 else out[0]


def drift_score(
    embedding, scores, train_embedding, train_values, n_neighbors: int = 5
) -> np.ndarray | da.Array:
    """GBMAP drift score ``|f(x*) - kNN mean|`` (Patron et al. 2024, Section 4.5).

    Parameters
    ----------
    embedding : array-like or dask.array.Array of shape (n_q, m)
        Embedding of the new points.
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
        Lazy if any input is a Dask array.

    Notes
    -----
    The paper's drift score uses the embedding distance of Eq. (7); the EUCLID baseline of
    Section 4.5 is not provided.
    """
    fknn = knn_mean(embedding, train_embedding, train_values, n_neighbors)
    if not isinstance(scores, da.Array):
        scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.shape != (fknn.shape[0],):
        raise ValueError(f"scores: expected shape ({fknn.shape[0]},), got {scores.shape}")
    if isinstance(fknn, da.Array) and isinstance(scores, da.Array):
        scores = scores.rechunk(fknn.chunks)
    return abs(scores - fknn)

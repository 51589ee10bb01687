"""The neighbour (grid) execution's loop: groups grow within ``radius`` of their seed.

It reads :class:`~dcfa.stats.grid.GridMoments` (moments of nearby cells only), never a
``D x D`` matrix, and gives exactly the partition of
:func:`~dcfa.cfa.sequential.sequential_partition` with the grid adjacency and
``neighborhood="seed"``.
"""

from __future__ import annotations

import numpy as np

from dcfa._errors import InputError
from dcfa.cfa.basis import Basis, fold_parts
from dcfa.cfa.driver import prologue
from dcfa.cfa.rules import PairMoments
from dcfa.cfa.sequential import GroupNumbering, grow_group


def grid_partition(
    gm,
    accept,
    *,
    radius: int,
    standardize: bool = True,
    shuffle: bool = False,
    random_state=None,
    compare: str = "seed",
    scan: str = "single",
    progress=None,
    order=None,
    segments=None,
    folds=None,
) -> np.ndarray:
    """The grid execution: a group holds its seed and cells within ``radius`` of it.

    Works from :class:`~dcfa.stats.grid.GridMoments` (the moments of nearby cells only), never a
    ``D x D`` matrix, and gives exactly the partition of :func:`sequential_partition` with the
    grid adjacency and ``neighborhood="seed"`` (and the same ``order``, see
    :func:`partition_moments`). With ``compare="seed"`` every test is between
    a cell and one of its neighbours: all ``D x k`` of them are evaluated in a few vectorised
    calls and the loop only looks verdicts up. With ``compare="mean"`` each group grows on a
    local basis of its seed's neighbourhood (the moments must reach ``2 radius``).

    ``segments`` (one :class:`~dcfa.stats.grid.GridMoments` per row segment, ``gm`` their merge)
    and ``folds`` give the rule the row sets of :func:`fold_parts` (NonLinCFA): every group
    then grows on a local basis of its fold sets (the moments must reach ``2 radius``).

    Returns
    -------
    labels : ndarray of shape (D,)
        -1 for excluded cells.
    """
    need = radius if compare == "seed" and segments is None else 2 * radius
    if gm.radius < need:
        raise InputError(
            f"radius: compare={compare!r} with a radius of {radius} needs the moments of cells "
            f"up to {need} apart; these reach {gm.radius}"
        )
    D = gm.n_features
    valid = gm.valid
    # the driver's prologue: kept cells, their weights, the visiting order
    kept, scale, visit = prologue(
        gm, standardize=standardize, order=order, shuffle=shuffle, random_state=random_state
    )
    order = kept if visit is None else kept[visit]
    pos = np.full(D, D, dtype=np.int64)
    pos[order] = np.arange(order.size)
    w = np.zeros(D)
    w[kept] = scale
    nbr, _ = gm.neighbours(np.arange(D), radius)
    nbr = np.where((nbr >= 0) & valid[np.maximum(nbr, 0)], nbr, -1)
    labels = np.full(D, -1, dtype=np.int64)
    unassigned = valid.copy()
    seed_tests = compare == "seed" and segments is None
    verdict = _neighbour_verdicts(gm, accept, nbr, w) if seed_tests else None
    numbering = GroupNumbering(labels, progress)
    for seed in order:
        if not unassigned[seed]:
            continue
        row = nbr[seed]
        live = (row >= 0) & unassigned[np.maximum(row, 0)]
        if verdict is not None:  # seed tests: order-free, all passing candidates join
            members = [seed, *row[live & verdict[seed]].tolist()]
        else:
            cand = row[live]
            cand = cand[np.argsort(pos[cand], kind="stable")]
            cells = np.concatenate([[seed], cand])
            if segments is None:
                local = _local_basis(gm, cells, w)
            else:
                local = _local_fold_basis(segments, folds, cells, w)
            L = cells.size
            grown = grow_group(
                local,
                0,
                accept,
                order=np.arange(L),
                pos=np.arange(L),
                unassigned=np.ones(L, dtype=bool),
                adj=None,
                compare=compare,
                scan=scan,
                neighborhood="seed",
            )
            members = cells[grown].tolist()
        unassigned[members] = False
        numbering.add(members)
    return labels


def _neighbour_verdicts(
    gm, accept, nbr: np.ndarray, w: np.ndarray, block: int = 500_000
) -> np.ndarray:
    """``accept`` for every (cell, neighbour) pair: (D, K) booleans, False off the grid."""
    D, K = nbr.shape
    flat_a = np.repeat(np.arange(D), K)
    flat_b = nbr.ravel()
    verdict = np.zeros(D * K, dtype=bool)
    ok = np.flatnonzero(flat_b >= 0)
    ym = gm.target_mean
    for s in range(0, ok.size, block):
        sel = ok[s : s + block]
        a, b = flat_a[sel], flat_b[sel]
        J = sel.size
        cross = np.empty((1, J, 3, 3))
        cross[0, :, 0, 0] = w[a] ** 2 * gm.diag[a]
        cross[0, :, 0, 1] = cross[0, :, 1, 0] = w[a] * w[b] * gm.pair_cross(a, b)
        cross[0, :, 0, 2] = cross[0, :, 2, 0] = w[a] * gm.target_cross[a]
        cross[0, :, 1, 1] = w[b] ** 2 * gm.diag[b]
        cross[0, :, 1, 2] = cross[0, :, 2, 1] = w[b] * gm.target_cross[b]
        cross[0, :, 2, 2] = gm.target_ss
        mean = np.stack([w[a] * gm.mean[a], w[b] * gm.mean[b], np.full(J, ym)], axis=-1)[None]
        n = np.full((1, J), float(gm.n))
        verdict[sel] = accept(PairMoments(n=n, mean=mean, cross=cross))
    return verdict.reshape(D, K)


def _local_fold_basis(segments, folds, cells: np.ndarray, w: np.ndarray) -> Basis:
    """:func:`_local_basis` on the row sets of :func:`fold_parts`: the few cells' moments in
    every segment, merged into each fold's training and test rows."""
    from dcfa.stats.moments import Moments

    local = []
    for gm in segments:
        L = cells.size
        M = np.empty((L + 1, L + 1))
        M[:L, :L] = gm.pair_cross(cells[:, None], cells[None, :])
        M[:L, L] = M[L, :L] = gm.target_cross[cells]
        M[L, L] = gm.target_ss
        mean = np.append(gm.mean[cells], gm.target_mean)
        count = np.append(gm.count[cells], gm.n)
        local.append(Moments(n=gm.n, n_targets=1, count=count, mean=mean, cross=M))
    sets, _ = fold_parts(local, folds)
    return Basis.from_moments(sets, np.arange(cells.size), w[cells])


def _local_basis(gm, cells: np.ndarray, w: np.ndarray) -> Basis:
    """A dense basis of a few cells (all within ``gm.radius`` of each other) and the target."""
    L = cells.size
    M = np.empty((L + 1, L + 1))
    wc = w[cells]
    M[:L, :L] = np.outer(wc, wc) * gm.pair_cross(cells[:, None], cells[None, :])
    M[:L, L] = M[L, :L] = wc * gm.target_cross[cells]
    M[L, L] = gm.target_ss
    mean = np.append(wc * gm.mean[cells], gm.target_mean)
    return Basis(
        n=np.array([gm.n]),
        mean=mean[None],
        diag=np.diagonal(M).copy()[None],
        target=M[:, L].copy()[None],
        crosses=[M],
        cols=np.arange(L + 1),
        scale=np.ones(L + 1),
    )

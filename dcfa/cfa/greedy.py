"""The order-free variant of LinCFA's Remark 13: the best-scoring pair first.

Every step merges the pair of groups with the highest score that the rule accepts (a heap of
candidate pairs, invalidated lazily when a group changes), so the result does not depend on
the order features are visited in. With an adjacency (``neighbors``) only adjacent groups
are candidates, and a merged group is adjacent to every neighbour of its members: the same
rule on the region adjacency graph, so every group is one connected patch.
"""

from __future__ import annotations

import heapq

import numpy as np
import scipy.sparse as sp

from dcfa.cfa.basis import Basis
from dcfa.cfa.rules import SegmentMoments


def greedy_partition(
    basis: Basis, accept, *, neighbors=None, blocks=None, progress=None
) -> np.ndarray:
    """Order-free greedy aggregation (LinCFA journal, Remark 13).

    Repeatedly take the most correlated pair of current groups that passes the test and
    replace it by its aggregate, until no pair passes. Pairs of original features are tested
    all at once and kept in a sorted array; a merged group is tested against every other
    group (with ``neighbors``, a sparse ``D x D`` adjacency: every adjacent group) when it is
    formed. Only groups of the same block (``blocks``: every feature's, None for one block)
    are ever paired. Needs the full ``D x D`` moments; O(D^2 log D) time.
    """
    D = basis.n_features
    y = D
    K = basis.dense()  # group x group moments, in the slot of the group's first member
    mean = basis.mean.copy()
    count = basis.dense_count()
    active = np.ones(D, dtype=bool)
    merged = np.zeros(D, dtype=bool)  # slot holds a merged group: its original pairs are stale
    version = np.zeros(D, dtype=np.int64)
    labels = np.arange(D)
    # each group's adjacent groups (None: every group is a candidate)
    adjacent = None
    if neighbors is not None:
        A = sp.csr_array(neighbors)
        adjacent = [set(A.indices[A.indptr[a] : A.indptr[a + 1]].tolist()) - {a} for a in range(D)]

    def passing(a: int, others: np.ndarray):
        if count is None:
            n = basis.n.astype(np.float64)
        else:
            n = count[a, others][None, :].astype(np.float64)
        pm = SegmentMoments(
            gg=K[:, a, a],
            gc=K[:, a, others],
            gy=K[:, a, y],
            gm=mean[:, a],
            cc=K[:, others, others],
            cy=K[:, others, y],
            yy=K[:, y, y],
            cm=mean[:, others],
            ym=mean[:, y],
            n=n,
        ).pair_moments()
        ok = accept(pm)
        c = pm.cross[:, ok].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.nan_to_num(c[:, 0, 1] / np.sqrt(c[:, 0, 0] * c[:, 1, 1]))
        return others[ok], r

    # every original pair that passes, in decreasing correlation
    rs, As, Bs = [], [], []
    for a in range(D - 1):
        later = (
            np.arange(a + 1, D)
            if adjacent is None
            else np.array(sorted(b for b in adjacent[a] if b > a), dtype=np.int64)
        )
        if blocks is not None:
            later = later[blocks[later] == blocks[a]]
        if later.size == 0:
            continue
        b, r = passing(a, later)
        rs.append(r)
        As.append(np.full(b.size, a))
        Bs.append(b)
    rs = np.concatenate(rs) if rs else np.zeros(0)
    idx = np.argsort(-rs, kind="stable")
    s_r, s_a, s_b = rs[idx], np.concatenate(As or [[]])[idx], np.concatenate(Bs or [[]])[idx]
    s_a, s_b = s_a.astype(np.int64), s_b.astype(np.int64)
    ptr = 0
    heap: list = []  # pairs involving a merged group: (-r, a, b, version a, version b)

    while True:
        while ptr < s_r.size and (
            merged[s_a[ptr]] or merged[s_b[ptr]] or not (active[s_a[ptr]] and active[s_b[ptr]])
        ):
            ptr += 1
        while heap and not _heap_valid(heap[0], active, version):
            heapq.heappop(heap)
        if ptr < s_r.size and (not heap or s_r[ptr] >= -heap[0][0]):
            a, b = int(s_a[ptr]), int(s_b[ptr])
            ptr += 1
        elif heap:
            _, a, b, _, _ = heapq.heappop(heap)
        else:
            break
        K[:, a, :] += K[:, b, :]
        K[:, :, a] += K[:, :, b]
        mean[:, a] += mean[:, b]
        if count is not None:
            count[a] = count[:, a] = np.minimum(count[a], count[b])
        active[b] = False
        merged[a] = True
        version[a] += 1
        labels[labels == b] = a
        if adjacent is None:
            others = np.flatnonzero(active)
            others = others[others != a]
        else:  # the merged group borders every neighbour of its two parts
            for o in adjacent[b]:
                adjacent[o].discard(b)
                if o != a:
                    adjacent[o].add(a)
            adjacent[a] = (adjacent[a] | adjacent[b]) - {a, b}
            adjacent[b] = set()
            others = np.array(sorted(adjacent[a]), dtype=np.int64)
        if blocks is not None:
            others = others[blocks[others] == blocks[a]]
        if others.size:
            ok, r = passing(a, others)
            for rv, o in zip(r.tolist(), ok.tolist(), strict=True):
                lo, hi = (a, o) if a < o else (o, a)
                heapq.heappush(heap, (-rv, lo, hi, int(version[lo]), int(version[hi])))
        if progress is not None:
            progress(D - int(active.sum()), D)

    # number groups in order of their first member
    _, first = np.unique(labels, return_index=True)
    roots = labels[np.sort(first)]
    rank = np.empty(D, dtype=np.int64)
    rank[roots] = np.arange(roots.size)
    return rank[labels]


def _heap_valid(entry, active, version) -> bool:
    _, a, b, va, vb = entry
    return bool(active[a] and active[b] and version[a] == va and version[b] == vb)

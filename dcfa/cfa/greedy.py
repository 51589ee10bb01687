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
from dcfa.cfa.hierarchy import by_first_item
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
    groups = _Groups(basis, accept, neighbors, blocks)
    D = groups.D
    s_r, s_a, s_b = groups.original_pairs()
    ptr = 0
    heap: list = []  # pairs involving a merged group: (-r, a, b, version a, version b)
    while True:
        while ptr < s_r.size and not groups.original_valid(s_a[ptr], s_b[ptr]):
            ptr += 1
        while heap and not groups.valid(heap[0]):
            heapq.heappop(heap)
        if ptr < s_r.size and (not heap or s_r[ptr] >= -heap[0][0]):
            a, b = int(s_a[ptr]), int(s_b[ptr])
            ptr += 1
        elif heap:
            _, a, b, _, _ = heapq.heappop(heap)
        else:
            break
        groups.merge(a, b)
        ok, r = groups.passing(a, groups.candidates(a))
        for rv, o in zip(r.tolist(), ok.tolist(), strict=True):
            lo, hi = (a, o) if a < o else (o, a)
            heapq.heappush(heap, (-rv, lo, hi, groups.version_of(lo), groups.version_of(hi)))
        if progress is not None:
            progress(D - int(groups.active.sum()), D)
    return groups.numbered()


class _Groups:
    """The current groups of a greedy aggregation: their moments, each in the slot of the
    group's first member, which groups are adjacent, and the pairs the rule accepts."""

    def __init__(self, basis: Basis, accept, neighbors, blocks):
        self.D = D = basis.n_features
        self.y = D
        self.accept = accept
        self.blocks = blocks
        self.n = basis.n
        self.K = basis.dense()  # group x group moments
        self.mean = basis.mean.copy()
        self.count = basis.dense_count()
        self.active = np.ones(D, dtype=bool)
        # merges into each slot: an original pair of a slot merged into is stale
        self.version = np.zeros(D, dtype=np.int64)
        self.labels = np.arange(D)
        # each group's adjacent groups (None: every group is a candidate)
        self.adjacent = None
        if neighbors is not None:
            A = sp.csr_array(neighbors)
            self.adjacent = [
                set(A.indices[A.indptr[a] : A.indptr[a + 1]].tolist()) - {a} for a in range(D)
            ]

    def passing(self, a: int, others: np.ndarray):
        """The groups of ``others`` that the rule lets ``a`` merge with, and the correlation
        of each with ``a``."""
        if others.size == 0:
            return others, np.zeros(0)
        K, mean, y = self.K, self.mean, self.y
        n = (
            self.n.astype(np.float64)
            if self.count is None
            else self.count[a, others][None, :].astype(np.float64)
        )
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
        ok = self.accept(pm)
        c = pm.cross[:, ok].sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.nan_to_num(c[:, 0, 1] / np.sqrt(c[:, 0, 0] * c[:, 1, 1]))
        return others[ok], r

    def _same_block(self, a: int, others: np.ndarray) -> np.ndarray:
        return others if self.blocks is None else others[self.blocks[others] == self.blocks[a]]

    def original_pairs(self):
        """Every pair of original features that passes, in decreasing correlation: the
        correlations and the two features of each."""
        D, adjacent = self.D, self.adjacent
        rs, As, Bs = [], [], []
        for a in range(D - 1):
            later = (
                np.arange(a + 1, D)
                if adjacent is None
                else np.array(sorted(b for b in adjacent[a] if b > a), dtype=np.int64)
            )
            b, r = self.passing(a, self._same_block(a, later))
            rs.append(r)
            As.append(np.full(b.size, a))
            Bs.append(b)
        rs = np.concatenate(rs) if rs else np.zeros(0)
        idx = np.argsort(-rs, kind="stable")
        s_a = np.concatenate(As or [[]])[idx].astype(np.int64)
        s_b = np.concatenate(Bs or [[]])[idx].astype(np.int64)
        return rs[idx], s_a, s_b

    def original_valid(self, a: int, b: int) -> bool:
        """An original pair still joins two unmerged groups."""
        unmerged = self.version[a] == 0 and self.version[b] == 0
        return bool(unmerged and self.active[a] and self.active[b])

    def valid(self, entry) -> bool:
        """A heap entry's two groups are still as they were when it was pushed."""
        _, a, b, va, vb = entry
        active, version = self.active, self.version
        return bool(active[a] and active[b] and version[a] == va and version[b] == vb)

    def version_of(self, a: int) -> int:
        return int(self.version[a])

    def merge(self, a: int, b: int) -> None:
        """Group ``b`` joins ``a``: their moments summed in ``a``'s slot, and (with an
        adjacency) ``a`` borders every neighbour of its two parts."""
        K = self.K
        K[:, a, :] += K[:, b, :]
        K[:, :, a] += K[:, :, b]
        self.mean[:, a] += self.mean[:, b]
        if self.count is not None:
            count = self.count
            count[a] = count[:, a] = np.minimum(count[a], count[b])
        self.active[b] = False
        self.version[a] += 1
        self.labels[self.labels == b] = a
        adjacent = self.adjacent
        if adjacent is not None:
            for o in adjacent[b]:
                adjacent[o].discard(b)
                if o != a:
                    adjacent[o].add(a)
            adjacent[a] = (adjacent[a] | adjacent[b]) - {a, b}
            adjacent[b] = set()

    def candidates(self, a: int) -> np.ndarray:
        """The groups ``a`` may merge with: every other active group of its block, or its
        adjacent ones."""
        if self.adjacent is None:
            others = np.flatnonzero(self.active)
            others = others[others != a]
        else:
            others = np.array(sorted(self.adjacent[a]), dtype=np.int64)
        return self._same_block(a, others)

    def numbered(self) -> np.ndarray:
        """Every feature's group, the groups numbered in order of their first member."""
        return by_first_item(self.labels)

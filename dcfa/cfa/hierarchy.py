"""Agglomeration on a neighbour graph: the merge orders behind :class:`dcfa.RegionsCV`.

The functions take series held in memory (one row per item: a cell, or a piece made of
cells) and a sparse adjacency between items, and return the order in which a greedy
agglomeration merges adjacent groups, as a :class:`Merges` value. Every group is the sum of
its members' series (its mean up to the constant factor of its size, which no correlation
sees), so a group is always the size-weighted mean of its cells, and a merged group borders
every neighbour of its two parts: every group is one connected patch of the graph.

* :func:`correlation_merges` merges first the adjacent pair whose group means are the most
  correlated (the order-free greedy of LinCFA's Remark 13, on the group means of Remark 12),
  until no adjacent pair is correlated above ``floor``. It never reads the target: the pieces
  it makes are the patches of the field that vary together.
* :func:`relevance_merges` merges first the adjacent pair whose more relevant member (the
  larger absolute correlation of its mean with the target) is the least relevant; among equal
  relevance, the more correlated pair. Groups that tell nothing about the target merge into a
  background first; a relevant group is merged last, and the cross-validation of
  :class:`dcfa.RegionsCV` decides how far down this order a map goes.
  :func:`dcfa.cfa.signal_order.regions_merges` puts the signal order before it
  (``RegionsCV(signal=True)``), with the rounds' helpers of this module.

* :func:`ward_merges` merges first the adjacent pair of groups whose values (each group's
  weighted mean of its items') are the most alike, by Ward's criterion: with the items'
  weights per cell in a ridge regression of the target, regions of alike weight.
* :func:`projection_merges` merges first the adjacent pair whose merged mean loses least of
  a linear prediction (ridge's, from those weights): neighbours whose means vary together
  merge cheaply even where their weights differ.

:func:`cut` turns the first ``k`` merges into labels; :func:`chain` follows one order with
another; :func:`sums_in_place` writes the groups' sums over the items' series;
:func:`neighbourhood_means` smooths the items' values over the graph.
:class:`GroupSums` holds the groups' sums without a copy of the series,
:func:`centred_statistics` the items' statistics on some of the samples (a fold's), and
:func:`next_pairs` and :func:`join_pairs` carry the adjacent pairs from one round of merges
to the next; the signal order (:mod:`dcfa.cfa.signal_order`) is made of them too. Nothing
here imports Dask or xarray.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from dcfa._errors import InputError
from dcfa.cfa.rules import correlation
from dcfa.stats.kernels import row_blocks

__all__ = [
    "Merges",
    "by_first_item",
    "centred_statistics",
    "chain",
    "correlation_merges",
    "cut",
    "group_adjacency",
    "membership",
    "neighbourhood_means",
    "projection_merges",
    "relevance_merges",
    "relevance_order",
    "segment_pair_cross",
    "sums_in_place",
    "upper_pairs",
    "ward_merges",
]

# bytes of the two blocks of series a pass over the adjacent pairs gathers at a time: small
# enough to stay in cache-friendly sizes, large enough for few NumPy calls
PAIR_BYTES = 8 << 20


@dataclass(frozen=True)
class Merges:
    """The merges of an agglomeration of ``n_items`` items, in the order they were made.

    Merge ``i`` joined the group holding item ``a[i]`` and the group holding ``b[i]``
    (``a[i]`` keeps the merged group); ``value[i]`` is the score it was chosen by (the
    correlation of the two group means for :func:`correlation_merges`, the relevance of the
    pair for :func:`relevance_order`).
    """

    n_items: int
    a: np.ndarray
    b: np.ndarray
    value: np.ndarray

    def __len__(self) -> int:
        return int(self.a.size)

    @property
    def min_groups(self) -> int:
        """The groups left after every merge: the connected components of the graph."""
        return self.n_items - len(self)


def cut(merges: Merges, k: int) -> np.ndarray:
    """Labels ``0 .. g-1`` of the items after the first ``k`` merges (``g = n_items - k``).

    Groups are numbered in the order of their first item, so that the same partition always
    gets the same labels.
    """
    k = int(k)
    if not 0 <= k <= len(merges):
        raise InputError(f"k: expected 0 <= k <= {len(merges)} merges, got {k}")
    n = merges.n_items
    graph = sp.coo_array(
        (np.ones(k, dtype=np.int8), (merges.a[:k], merges.b[:k])), shape=(n, n)
    ).tocsr()
    _, comp = connected_components(graph, directed=False)
    return by_first_item(comp)


def membership(labels: np.ndarray, n_groups: int | None = None) -> sp.csr_array:
    """The ``n_groups x n_items`` 0/1 matrix of which items each group holds (labels 0..)."""
    if n_groups is None:
        n_groups = int(labels.max()) + 1
    return sp.csr_array(
        (np.ones(labels.size), (labels, np.arange(labels.size))), shape=(n_groups, labels.size)
    )


def group_adjacency(adjacency, labels: np.ndarray, n_groups: int | None = None) -> sp.csr_array:
    """Which groups hold adjacent items: a symmetric boolean ``n_groups x n_groups`` matrix
    without its diagonal."""
    M = membership(labels, n_groups)
    B = sp.csr_array(M @ sp.csr_array(adjacency) @ M.T)
    B.setdiag(0)
    B.eliminate_zeros()
    return sp.csr_array(B > 0)


def _group_pairs(adjacency: sp.csr_array, labels: np.ndarray, n_groups: int):
    """The pairs ``p < q`` of groups that hold adjacent items, sorted."""
    return upper_pairs(group_adjacency(adjacency, labels, n_groups))


def best_pairs(order: np.ndarray, rows: np.ndarray, cols: np.ndarray, n_groups: int):
    """Each pair's rank in ``order`` (the pairs best first), and each group's best pair: the
    lowest rank of the pairs at either end of which it is (``order.size`` for none)."""
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    best = np.full(n_groups, order.size, dtype=np.int64)
    np.minimum.at(best, rows, rank)
    np.minimum.at(best, cols, rank)
    return rank, best


def _representatives(labels: np.ndarray, n_groups: int) -> np.ndarray:
    """One item of each group: the union-find's handle on it."""
    rep = np.empty(n_groups, dtype=np.int64)
    rep[labels] = np.arange(labels.size)
    return rep


class _UnionFind:
    """Items' groups under successive unions; each union that joins two groups is a merge."""

    def __init__(self, n: int):
        self.parent = np.arange(n)

    def find(self, i: int) -> int:
        parent = self.parent
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:  # path compression
            parent[i], i = root, parent[i]
        return int(root)

    def union_all(self, a, b, value, out: tuple[list, list, list]) -> None:
        """Union the pairs in the order given, recording each that joins two groups."""
        for x, y, v in zip(
            np.asarray(a).tolist(), np.asarray(b).tolist(), np.asarray(value).tolist(), strict=True
        ):
            rx, ry = self.find(x), self.find(y)
            if rx != ry:
                self.parent[ry] = rx
                out[0].append(x)
                out[1].append(y)
                out[2].append(v)

    def labels(self) -> np.ndarray:
        """Each item's group, ``0 ..`` in the order of the groups' roots."""
        roots = self.parent
        while True:  # every item's root at once: follow the parents until they stop moving
            up = roots[roots]
            if np.array_equal(up, roots):
                break
            roots = up
        _, lab = np.unique(roots, return_inverse=True)
        return lab


def correlation_merges(
    S: np.ndarray, adjacency, *, floor: float = -1.0, levels=(), snapshots: dict | None = None
) -> Merges:
    """Merge adjacent groups whose means are correlated, the most correlated first, until no
    adjacent pair is correlated at ``floor`` or above.

    The merges go in rounds (Boruvka's scheme on the group means): every group's most
    correlated neighbour is found, and every group joins its best neighbour when that
    correlation is at or above the current level; then the group means are recomputed. A
    round's merges are recorded in decreasing correlation. Each level of ``levels`` (and
    ``floor``) is reached once no adjacent pair of groups is correlated at it or above.

    Parameters
    ----------
    S : ndarray of shape (n_items, n_samples)
        Each item's series, centred. Not changed.
    adjacency : sparse matrix of shape (n_items, n_items)
        Which items are neighbours (symmetric; the diagonal is ignored).
    floor : float, default=-1.0
        The last level: stop when no adjacent pair of groups is correlated at ``floor``.
    levels : sequence of float, default=()
        Correlations (each >= ``floor``) at which to record the groups.
    snapshots : dict, optional
        Filled with ``{level: (n_merges, labels)}``: the merges made when the level was
        reached and each item's group (numbered in the order of their first item, as
        :func:`cut` numbers them). The groups' sums are not kept: ``membership(labels) @ S``
        gives them (:func:`sums_in_place` over ``S``), and a copy per level would hold the
        series several times over.

    Returns
    -------
    Merges
        ``value`` holds each merge's correlation.
    """
    n_items, n_samples = S.shape
    adjacency = sp.csr_array(adjacency)
    pending = sorted({float(v) for v in levels} | {float(floor)}, reverse=True)
    if pending[-1] < floor:
        raise InputError(f"levels: every level must be >= floor ({floor})")
    uf = _UnionFind(n_items)
    out: tuple[list, list, list] = ([], [], [])
    labels = np.arange(n_items)
    g = n_items
    sums = GroupSums(S)
    rows, cols = _group_pairs(adjacency, labels, g)
    ss = np.einsum("ij,ij->i", S, S)
    cross = sums.cross(rows, cols)
    for level in pending:
        while rows.size:
            rho = correlation(cross, ss[rows], ss[cols])
            keep = rho >= level
            if not keep.any():
                break
            r, c, rk = rows[keep], cols[keep], rho[keep]
            # every group's best pair, by decreasing correlation
            order = np.argsort(-rk, kind="stable")
            _, first = best_pairs(order, r, c, g)
            best = order[np.unique(first[first < order.size])]
            rep = _representatives(labels, g)
            uf.union_all(rep[r[best]], rep[c[best]], rk[best], out)
            new = uf.labels()
            to = new[rep]  # each group's group after the round
            g_new = int(new.max()) + 1
            grown = sums.merge(to, g_new)
            new_ss = np.empty(g_new)
            new_ss[to] = ss  # the groups left alone; the grown ones below
            new_ss[grown] = sums.cross(grown, grown)
            rows, cols, cross = _carry_pairs(sums, grown, to, rows, cols, cross)
            labels, g, ss = new, g_new, new_ss
        if snapshots is not None and level in {float(v) for v in levels}:
            snapshots[level] = (len(out[0]), by_first_item(labels))
    a, b, v = out
    return Merges(n_items, np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(v))


def by_first_item(labels: np.ndarray) -> np.ndarray:
    """The same groups, numbered in the order of their first item."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse]


def sums_in_place(S: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each group's sum of its items' series, written over ``S``: ``membership(labels) @ S``
    without a second array of its size, for a caller that needs the items' series no more.

    Returns ``S[:n_groups]`` (a view; the rows below it are left as they are). The groups
    must be numbered in the order of their first item (as :func:`cut` and the snapshots of
    :func:`correlation_merges` number them): group ``g``'s items are then all at rows ``>=
    g``, so writing the groups in increasing order overwrites no row that is still to be read.
    """
    n_groups = int(labels.max()) + 1
    first = np.full(n_groups, labels.size)
    np.minimum.at(first, labels, np.arange(labels.size))
    if np.any(np.diff(first) <= 0):
        raise ValueError("labels: groups must be numbered in the order of their first item")
    M = membership(labels, n_groups)
    for blk in row_blocks(n_groups, S.shape[1], PAIR_BYTES):
        rows = slice(blk.start, min(blk.stop, n_groups))
        S[rows] = M[rows] @ S  # reads rows >= rows.start only
    return S[:n_groups]


class GroupSums:
    """Each group's sum of its items' series, without a copy of the series: a group of one
    item is that item's row of ``S`` (never written), a group of several a row of ``G``. Only
    the merged groups take memory, and a row freed by a merge is used again.

    Group ``g``'s sum is ``S[at[g]]`` when ``at[g] >= 0``, else ``G[-1 - at[g]]``.
    """

    def __init__(self, S: np.ndarray):
        self.S = S
        self.G = np.empty((0, S.shape[1]))
        self.at = np.arange(S.shape[0])
        self.free = np.zeros(0, dtype=np.int64)

    def take(self, groups: np.ndarray) -> np.ndarray:
        """The sums of ``groups``, one row each (a copy)."""
        at = self.at[groups]
        alone = at >= 0
        if alone.all():
            return self.S[at]
        out = np.empty((at.size, self.S.shape[1]))
        out[alone] = self.S[at[alone]]
        out[~alone] = self.G[-1 - at[~alone]]
        return out

    def cross(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``sum_a . sum_b`` for every pair ``(a[i], b[i])``, in blocks."""
        return pair_cross(self.take, a, b, self.S.shape[1])

    def merge(self, to: np.ndarray, g_new: int) -> np.ndarray:
        """Group ``i`` becomes group ``to[i]``: each new group of several parts keeps the row
        of ``G`` of its first part that has one (else takes a free row) and the other parts'
        sums are added in. Returns the new groups made of several parts."""
        g, at = to.size, self.at
        parts = np.bincount(to, minlength=g_new)
        grown = np.flatnonzero(parts > 1)
        # each grown group's first part already in G, if any: it keeps its row
        in_g = np.flatnonzero(at < 0)
        keeper = np.full(g_new, g)
        np.minimum.at(keeper, to[in_g], in_g)
        keeper = keeper[grown]
        kept = keeper < g
        fresh = self._rows(int((~kept).sum()))
        row = np.empty(grown.size, dtype=np.int64)
        row[kept] = -1 - at[keeper[kept]]
        row[~kept] = fresh
        self.G[fresh] = 0.0
        # the parts added in: all but the keeper, by where their sums are
        slot = np.full(g_new, -1)
        slot[grown] = np.arange(grown.size)
        added = np.flatnonzero(slot[to] >= 0)
        is_keeper = np.zeros(g, dtype=bool)
        is_keeper[keeper[kept]] = True
        added = added[~is_keeper[added]]
        alone = at[added] >= 0
        shape = (grown.size, self.S.shape[0])
        from_s = _adder(slot[to[added[alone]]], at[added[alone]], shape)
        from_g = _adder(
            slot[to[added[~alone]]], -1 - at[added[~alone]], (grown.size, self.G.shape[0])
        )
        for blk in row_blocks(grown.size, self.S.shape[1], PAIR_BYTES):
            add = from_s[blk] @ self.S
            add += from_g[blk] @ self.G
            self.G[row[blk]] += add
        new_at = np.empty(g_new, dtype=np.int64)
        new_at[to] = at  # the groups of one part keep their rows
        new_at[grown] = -1 - row
        self.free = np.concatenate([self.free, -1 - at[added[~alone]]])
        self.at = new_at
        return grown

    def _rows(self, k: int) -> np.ndarray:
        """``k`` free rows of ``G``, made when too few are free (a quarter more than needed,
        so that ``G`` is seldom copied)."""
        short = k - self.free.size
        if short > 0:
            n = self.G.shape[0]
            more = max(short, n // 4)
            G = np.empty((n + more, self.S.shape[1]))
            G[:n] = self.G
            self.G = G
            self.free = np.concatenate([self.free, np.arange(n, n + more)])
        rows, self.free = self.free[:k], self.free[k:]
        return rows


def _adder(to: np.ndarray, src: np.ndarray, shape) -> sp.csr_array:
    """The 0/1 matrix adding source row ``src[i]`` into row ``to[i]``."""
    return sp.csr_array((np.ones(to.size), (to, src)), shape=shape)


def _carry_pairs(sums: GroupSums, grown, to, rows, cols, cross):
    """The adjacent pairs ``rows < cols`` of the new groups (old group ``i`` is ``to[i]``),
    sorted, with their products: a pair of groups that did not grow keeps its product, the
    others are computed from the groups' sums."""
    g_new = sums.at.size
    is_grown = np.zeros(g_new, dtype=bool)
    is_grown[grown] = True
    rows, cols, kept, at, tl, th = next_pairs(to[rows], to[cols], is_grown, g_new)
    return rows, cols, np.insert(cross[kept], at, sums.cross(tl, th))


def next_pairs(a: np.ndarray, b: np.ndarray, changed: np.ndarray, n: int):
    """The sorted pairs ``(a[i], b[i])`` of a round's groups, once each, from the round's
    sorted pairs relabelled (``changed``: the groups it made). A relabelling that keeps the
    order of the unchanged groups keeps their pairs' order too, so only the pairs touching a
    changed group are sorted, then slotted in. Returns ``rows, cols``, the mask ``kept`` of
    the old pairs carried over, and where the others sit (positions for ``np.insert`` among
    the kept) with their ends."""
    kl, kh, kept, tl, th = _split_pairs(a, b, changed, n)
    old, new = kl * n + kh, tl * n + th
    at = np.searchsorted(old, new)
    pairs = np.insert(old, at, new)
    return pairs // n, pairs % n, kept, at, tl, th


def _split_pairs(a: np.ndarray, b: np.ndarray, changed: np.ndarray, n: int):
    """The pairs ``(a[i], b[i])`` of groups after a round (numbered below ``n``; ``changed``:
    the groups the round made): those of two unchanged groups, one old pair each, as
    ``lo, hi`` with the mask ``kept`` of the old pairs they were; and the pairs touching a
    changed group, once each, sorted. Returns ``lo, hi, kept, touched_lo, touched_hi``."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    kept = (lo != hi) & ~changed[lo] & ~changed[hi]
    touched = np.unique((lo * n + hi)[(lo != hi) & (changed[lo] | changed[hi])])
    return lo[kept], hi[kept], kept, touched // n, touched % n


def row_weights(n_samples: int, rows) -> np.ndarray:
    """1 on the samples ``rows``, 0 elsewhere: products are then sums over those samples,
    without a copy of the series."""
    w = np.zeros(n_samples)
    w[rows] = 1.0
    return w


def pair_cross(
    take, a: np.ndarray, b: np.ndarray, n_samples: int, w: np.ndarray | None = None
) -> np.ndarray:
    """``sum_t w[t] x_a[t] x_b[t]`` for every pair ``(a[i], b[i])`` (each ``w[t]`` 1 when
    ``w`` is None), in blocks; ``take(items)`` gives the items' rows (a copy)."""
    out = np.empty(a.size)
    for blk in row_blocks(a.size, n_samples, PAIR_BYTES):
        prod = take(a[blk])
        prod *= take(b[blk])
        out[blk] = prod.sum(axis=1) if w is None else prod @ w
    return out


def centred_statistics(S: np.ndarray, y: np.ndarray, adjacency, *, rows=slice(None)) -> dict:
    """The items' statistics on the samples ``rows`` that :func:`relevance_order` and
    :func:`dcfa.cfa.signal_order.signal_merges` start from: each item's sum ``tot``, its
    centred sum of squares ``ss`` and product with the target ``sy``, the target's ``yy``,
    and the centred products ``cross`` of the adjacent pairs ``rows[i] < cols[i]``
    (:func:`upper_pairs`)."""
    n_items, n_samples = S.shape
    w = row_weights(n_samples, rows)
    n = float(w.sum())
    yc = np.where(w > 0, np.asarray(y, dtype=np.float64) - np.asarray(y)[rows].mean(), 0.0)
    tot, sy, ss = np.empty(n_items), np.empty(n_items), np.empty(n_items)
    for blk in row_blocks(n_items, n_samples, PAIR_BYTES):
        tot[blk], sy[blk], ss[blk] = S[blk] @ w, S[blk] @ yc, (S[blk] * S[blk]) @ w
    r, c = upper_pairs(adjacency)
    cross = pair_cross(S.__getitem__, r, c, n_samples, w)
    mean = tot / n
    return {
        "tot": tot,
        "ss": ss - tot * mean,
        "sy": sy,
        "yy": float(yc @ yc),
        "rows": r,
        "cols": c,
        "cross": cross - tot[r] * mean[c],
    }


def join_pairs(p, q, cost, rep, height, out: tuple[list, list, list]):
    """Disjoint pairs ``p < q`` of a round's groups join, ``q``'s group into ``p``'s: each
    merge is recorded in ``out`` by the two groups' last items, at its height (its ``cost``,
    or the height of a merge that made one of its groups when that is higher: merges then go
    in increasing height, and every cut is a partition the rounds made). Returns each group's
    group after the round ``to`` (the groups left keep their order, so they stay numbered by
    their first item), their number, and their last items and heights."""
    h = np.maximum(cost, np.maximum(height[p], height[q]))
    for part, x in zip(out, (rep[p], rep[q], h), strict=True):
        part.append(x)
    left = np.ones(rep.size, dtype=bool)
    left[q] = False
    to = np.cumsum(left) - 1
    to[q] = to[p]
    rep_pq = np.maximum(rep[p], rep[q])
    rep, up = rep[left], height[left]
    rep[to[p]] = rep_pq
    up[to[p]] = h
    return to, int(left.sum()), rep, up


def relevance_merges(S: np.ndarray, y: np.ndarray, adjacency, *, rows=slice(None)) -> Merges:
    """Merge adjacent items in order of increasing relevance, until none is left to merge.

    An item's relevance is the absolute correlation of its series with the target ``y``; a
    pair's, the larger of its two items'. Pairs go in increasing relevance, and among equal
    relevance (a relevant item and each of its neighbours) the more correlated pair first;
    a pair whose items are already in one group is skipped (Kruskal's scheme: the merges
    are a spanning forest of the graph). The items are pieces the size of regions' parts,
    whose relevance a merge changes little.

    Parameters
    ----------
    S : ndarray of shape (n_items, n_samples)
        Each item's series. Not changed.
    y : ndarray of shape (n_samples,)
    adjacency : sparse matrix of shape (n_items, n_items)
    rows : slice or ndarray, default=slice(None)
        The samples to use; the series and the target are centred on them.

    Returns
    -------
    Merges
        ``value`` holds each merge's relevance.
    """
    st = centred_statistics(S, y, adjacency, rows=rows)
    return relevance_order(st["rows"], st["cols"], st["ss"], st["sy"], st["yy"], st["cross"])


def relevance_order(
    rows: np.ndarray,
    cols: np.ndarray,
    ss: np.ndarray,
    sy: np.ndarray,
    yy: float,
    cross: np.ndarray,
) -> Merges:
    """:func:`relevance_merges` from the centred sums it reads: each item's sum of squares
    ``ss`` and products with the target ``sy``, the target's ``yy``, and the products
    ``cross`` of the adjacent pairs ``rows[i] < cols[i]`` (:func:`upper_pairs`)."""
    rel = np.abs(correlation(sy, ss, yy))
    rho = correlation(cross, ss[rows], ss[cols])
    weight = np.maximum(rel[rows], rel[cols])
    order = np.lexsort((-rho, weight))
    kept = order[_kruskal(ss.size, rows[order], cols[order])]
    return Merges(ss.size, rows[kept], cols[kept], weight[kept])


def _kruskal(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The positions of the pairs ``(a[i], b[i])``, taken in the order given, that join two
    groups (Kruskal's scheme): the minimum spanning forest when each pair weighs its rank,
    which is unique, as the ranks are."""
    rank = np.arange(1, a.size + 1, dtype=np.float64)  # 0 would be no edge
    forest = minimum_spanning_tree(sp.csr_array((rank, (a, b)), shape=(n, n)))
    return np.sort(forest.data).astype(np.int64) - 1


def segment_pair_cross(
    S: np.ndarray, rows: np.ndarray, cols: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """``(S[rows[i]] * S[cols[i]])`` summed over each segment of samples that begins at
    ``starts`` (the first 0): shape ``(pairs, segments)``, in blocks of pairs."""
    out = np.empty((rows.size, starts.size))
    for b in row_blocks(rows.size, S.shape[1], PAIR_BYTES):
        prod = S[rows[b]]
        prod *= S[cols[b]]
        out[b] = np.add.reduceat(prod, starts, axis=1)
    return out


def upper_pairs(adjacency) -> tuple[np.ndarray, np.ndarray]:
    """The adjacent pairs ``rows[i] < cols[i]`` of a symmetric adjacency, sorted (the merge
    rounds keep them sorted, and break ties by position)."""
    rows, cols = sp.triu(sp.csr_array(adjacency), k=1).nonzero()
    order = np.lexsort((cols, rows))
    return rows[order].astype(np.int64), cols[order].astype(np.int64)


def neighbourhood_means(value: np.ndarray, weight: np.ndarray, adjacency, times: int) -> np.ndarray:
    """Each item's ``value`` replaced ``times`` over by the ``weight``-weighted mean of its own
    and its neighbours' values."""
    A = sp.csr_array(adjacency, dtype=np.float64)
    A = A + sp.eye_array(A.shape[0], format="csr")
    total = A @ weight
    for _ in range(times):
        value = (A @ (weight * value)) / total
    return value


def ward_merges(value: np.ndarray, weight: np.ndarray, adjacency) -> Merges:
    """Merge adjacent groups of alike ``value`` (Ward's criterion), until none is left to merge.

    A group's value is the weighted mean of its items' values; merging groups ``a`` and ``b``
    costs ``w_a w_b / (w_a + w_b) (v_a - v_b)^2``, the rise of the weighted sum of squares
    about the groups' values. The merges go in rounds: every group finds its cheapest
    neighbour, and the pairs that are each other's cheapest merge (reciprocal nearest
    neighbours, which the greedy Ward order merges too), the cheapest first. A round's costs
    are computed for all pairs at once, so ``n`` items take a few dozen array passes, not
    ``n`` Python steps.

    Parameters
    ----------
    value : ndarray of shape (n_items,)
    weight : ndarray of shape (n_items,)
        Positive: each item's weight (its cells).
    adjacency : sparse matrix of shape (n_items, n_items)

    Returns
    -------
    Merges
        ``value`` holds each merge's height: its cost, or the height of a merge that made
        one of its groups when that is higher (so that the merges go in increasing height and
        every cut is a partition the rounds made).
    """
    v = np.asarray(value, dtype=np.float64).ravel()
    w = np.asarray(weight, dtype=np.float64).ravel()
    n = v.size
    out: tuple[list, list, list] = ([], [], [])
    g, gv, gw = n, v, w
    wv = w * v  # each group's weighted sum: a round updates the groups, not the items
    rep = np.arange(n)  # each group's last item
    height = np.zeros(n)  # each group's highest merge so far
    rows, cols = upper_pairs(adjacency)
    while rows.size:
        cost = gw[rows] * gw[cols] / (gw[rows] + gw[cols]) * (gv[rows] - gv[cols]) ** 2
        # every group's cheapest pair; ties by position, so that ranks are distinct
        rank, best = best_pairs(np.argsort(cost, kind="stable"), rows, cols, g)
        mutual = np.flatnonzero((best[rows] == rank) & (best[cols] == rank))
        p, q = rows[mutual], cols[mutual]  # disjoint: a group's cheapest pair is one pair
        # heights kept monotone: cuts stay Ward's groups
        to, g_new, rep, up = join_pairs(p, q, cost[mutual], rep, height, out)
        # the pairs of the new groups, sorted, once each
        changed = np.zeros(g_new, dtype=bool)
        changed[to[p]] = True
        rows, cols, *_ = next_pairs(to[rows], to[cols], changed, g_new)
        gw = np.bincount(to, weights=gw, minlength=g_new)
        wv = np.bincount(to, weights=wv, minlength=g_new)
        g, height, gv = g_new, up, wv / gw
    a, b, h = (np.concatenate(x) if x else np.zeros(0) for x in out)
    # by height across rounds, as the greedy order makes them; a round's merges are disjoint
    # and a merge's height is at least its groups', so every cut is a union of whole groups
    keep = np.argsort(h, kind="stable")
    return Merges(n, a[keep].astype(np.int64), b[keep].astype(np.int64), h[keep])


def projection_merges(sums: np.ndarray, size: np.ndarray, coef: np.ndarray, adjacency) -> Merges:
    """Merge adjacent groups so that a linear predictor on the group means loses least.

    ``u = sum_i coef_i x_i`` is a prediction from the items' sums ``x_i`` (``coef``: the
    weight of each of an item's cells, as :func:`dcfa.cfa.selection.ridge_weights` gives).
    Each group carries a coefficient ``beta`` on its mean ``m`` (at the start, ``coef_i n_i``
    on ``m_i = x_i / n_i``), so that ``sum_g beta_g m_g`` approximates ``u``. Merging
    groups ``a`` and ``b`` replaces ``beta_a m_a + beta_b m_b`` by its projection on the
    merged mean ``m_ab``; the cost is the variance of what the projection loses,
    ``Var(beta_a m_a + beta_b m_b) - Cov(beta_a m_a + beta_b m_b, m_ab)^2 / Var(m_ab)``, and
    the merged group's coefficient is the projection's. Unlike Ward's criterion on the
    weights, two neighbours whose means vary together merge cheaply even where the weights
    differ: their means carry the same signal, which one coefficient predicts as well.

    The merges go in rounds, as in :func:`ward_merges` (reciprocal cheapest pairs; heights
    kept monotone, then sorted). A round recomputes the variance of each group it made and
    the covariances of their adjacent pairs, a dot product over the samples each.

    Parameters
    ----------
    sums : ndarray of shape (n_items, n_samples)
        Each item's sum of its cells' series on the samples to use (centred here).
    size : ndarray of shape (n_items,)
        Cells per item (positive).
    coef : ndarray of shape (n_items,)
        The predictor's weight per cell of each item.
    adjacency : sparse matrix of shape (n_items, n_items)

    Returns
    -------
    Merges
        ``value`` holds each merge's height: its cost, or the height of a merge that made one
        of its groups when that is higher.
    """
    n_items, T = sums.shape
    X = np.array(sums, dtype=np.float64)  # each group's sum lives in the row of its root
    X -= X.mean(axis=1, keepdims=True)
    w = np.asarray(size, dtype=np.float64).copy()
    beta = np.asarray(coef, dtype=np.float64) * w
    var = _row_dots(X, np.arange(n_items)) / T
    height = np.zeros(n_items)
    alias = np.arange(n_items)
    a_out, b_out, h_out = [], [], []
    rows, cols = upper_pairs(adjacency)
    cross = pair_cross(X.__getitem__, rows, cols, T) / T
    while rows.size:
        # on the groups' sums s (mean m = s / n): u = ca s_a + cb s_b, m_ab = (s_a + s_b) / n
        n = w[rows] + w[cols]
        ca, cb = beta[rows] / w[rows], beta[cols] / w[cols]
        va, vb = var[rows], var[cols]
        vu = ca * ca * va + 2 * ca * cb * cross + cb * cb * vb
        vm = np.maximum((va + 2 * cross + vb) / (n * n), np.finfo(np.float64).tiny)
        cu = (ca * va + (ca + cb) * cross + cb * vb) / n
        cost = np.maximum(vu - cu * cu / vm, 0.0)
        rank, best = best_pairs(np.argsort(cost, kind="stable"), rows, cols, n_items)
        mutual = np.flatnonzero((best[rows] == rank) & (best[cols] == rank))
        a, b = rows[mutual], cols[mutual]
        h = np.maximum(cost[mutual], np.maximum(height[a], height[b]))
        a_out.append(a)
        b_out.append(b)
        h_out.append(h)
        # the merged group lives in a's row (the pairs of a round are disjoint)
        X[a] += X[b]
        w[a] += w[b]
        beta[a] = cu[mutual] / vm[mutual]
        height[a] = h
        var[a] = _row_dots(X, a) / T
        alias[b] = a
        changed = np.zeros(n_items, dtype=bool)
        changed[a] = True
        # the new pairs: unchanged ones keep their covariance, the others are recomputed
        kl, kh, keep, nr, nc = _split_pairs(alias[rows], alias[cols], changed, n_items)
        rows = np.concatenate([kl, nr])
        cols = np.concatenate([kh, nc])
        cross = np.concatenate([cross[keep], pair_cross(X.__getitem__, nr, nc, T) / T])
    a, b, h = (np.concatenate(x) if x else np.zeros(0) for x in (a_out, b_out, h_out))
    order = np.argsort(h, kind="stable")
    return Merges(n_items, a[order].astype(np.int64), b[order].astype(np.int64), h[order])


def _row_dots(X: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``X[i] . X[i]`` for each row ``i`` of ``rows``, in blocks."""
    return pair_cross(X.__getitem__, rows, rows, X.shape[1])


def chain(first: Merges, k: int, second: Merges) -> Merges:
    """The first ``k`` merges of ``first``, then ``second``'s merges of the groups they leave.

    ``second`` merges the groups of ``cut(first, k)`` (its items are those groups, numbered as
    :func:`cut` numbers them); each is recorded by one of the group's items. Heights go on
    from ``first``'s ``k``-th, so they stay in increasing order.
    """
    rep = _representatives(cut(first, k), second.n_items)
    start = first.value[k - 1] if k else 0.0
    return Merges(
        first.n_items,
        np.concatenate([first.a[:k], rep[second.a]]),
        np.concatenate([first.b[:k], rep[second.b]]),
        np.concatenate([first.value[:k], start + second.value]),
    )

"""The signal order: adjacent groups that carry one signal of the target merge first.

:func:`signal_merges` merges first the adjacent pair whose merged mean loses least of a
least-squares fit of the target on the two means, among the pairs that carry one signal:
means correlated at :data:`SIGNAL_FLOOR`, and a loss that an F test at :data:`SIGNAL_ALPHA`
does not find. The cells of a region that drives the target become one group, which no test
between single noisy cells would make, and two regions with independent signals stay apart.
:func:`regions_merges` follows it with the relevance order
(:func:`dcfa.cfa.hierarchy.relevance_order`): the second stage of
``RegionsCV(signal=True)``.

The groups, their pairs and the rounds' bookkeeping are :mod:`dcfa.cfa.hierarchy`'s. Nothing
here imports Dask or xarray.
"""

from __future__ import annotations

import numpy as np

from dcfa.cfa.hierarchy import (
    GroupSums,
    Merges,
    best_pairs,
    centred_statistics,
    chain,
    join_pairs,
    next_pairs,
    pair_cross,
    relevance_order,
    row_weights,
)

__all__ = [
    "GRAM_GROUPS",
    "GRAM_PAIR_COST",
    "SIGNAL_ALPHA",
    "SIGNAL_FLOOR",
    "gram_bytes",
    "regions_merges",
    "signal_merges",
]

#: the correlation of two adjacent groups' means below which :func:`signal_merges` never merges
#: them: independent signals (two regions, a region and its neighbour) stay apart, whatever
#: the target says of them
SIGNAL_FLOOR = 0.3
#: the level of the F test by which the two means of a pair fit the target better than their
#: merged mean does (then the pair is not merged by :func:`signal_merges`): every group is
#: tested against its cheapest neighbour in every round, and at 5 % enough pairs of one
#: region are kept apart by chance to leave fragments of it
SIGNAL_ALPHA = 0.01
#: the number of groups at or below which :func:`signal_merges` may hold their products with
#: one another (a Gram matrix, 128 MB at most) instead of multiplying the series of each
#: round's new pairs: the last rounds merge a few pairs each, and would multiply a large
#: group's series with every neighbour's again in each
GRAM_GROUPS = 4096
#: how many entries of the Gram matrix cost as much as one pair's product from the series:
#: the matrix is made once the pairs multiplied since the groups were few enough have cost
#: as much as it would (about 400 entries on 2 cores, gathered rows against BLAS; 100, as
#: the rounds left may be few: 9.2 s and 15.3 s on a 2 and a 1 degree field, against 10.3
#: and 15.2 s at 400, 9.1 and 19.0 s without the matrix)
GRAM_PAIR_COST = 100


def gram_bytes(n_samples: int, n_items: int) -> int:
    """The most memory the Gram matrix of :func:`signal_merges` takes on ``n_items`` items:
    the matrix of at most :data:`GRAM_GROUPS` groups, and the copy of their series it is
    made from."""
    g = min(n_items, GRAM_GROUPS)
    return 8 * g * (g + n_samples)


def signal_merges(
    S: np.ndarray,
    y: np.ndarray,
    adjacency,
    *,
    rows=slice(None),
    start: dict | None = None,
    floor: float = SIGNAL_FLOOR,
    alpha: float = SIGNAL_ALPHA,
    gram_groups: int = GRAM_GROUPS,
) -> tuple[Merges, dict]:
    """Merge adjacent groups that carry one signal of the target, the cheapest first.

    Two adjacent groups carry one signal when their means are correlated at ``floor`` or
    above and their merged mean fits the target as well as the two means do: the least-squares
    fit of the target on the two is not better by an F test at level ``alpha`` (one degree of
    freedom, on the samples ``rows``). A merge costs the R^2 the fit loses. The merges go in
    rounds: the pairs that are the cheapest of both their groups merge, then those of the
    groups left (so that a round merges about half the groups, and a chain of cheap pairs
    does not merge into one group without being tested as one), then the groups' statistics
    are recomputed, until no pair carries one signal. A single cell tells little of the target;
    the cells of a region that drives it, merged, tell it well, and a group's test has the
    power a cell's lacks.

    Parameters
    ----------
    S : ndarray of shape (n_items, n_samples)
        Each item's series (its sum over its cells). Not changed.
    y : ndarray of shape (n_samples,)
    adjacency : sparse matrix of shape (n_items, n_items)
    rows : slice or ndarray, default=slice(None)
        The samples to use; the series and the target are centred on them.
    start : dict, optional
        The items' statistics on ``rows`` when they are known
        (:func:`dcfa.cfa.hierarchy.centred_statistics` makes them from ``S``): the merges
        then read the series only for the groups they make.
    floor, alpha : float
        See :data:`SIGNAL_FLOOR` and :data:`SIGNAL_ALPHA`.
    gram_groups : int
        See :data:`GRAM_GROUPS` and :data:`GRAM_PAIR_COST`.

    Returns
    -------
    merges : Merges
        ``value`` holds each merge's height: its cost, or the height of a merge that made one
        of its groups when that is higher.
    groups : dict
        The groups left, numbered as :func:`dcfa.cfa.hierarchy.cut` numbers them, centred on
        ``rows``: each one's sum of squares ``ss`` and product with the target ``sy``, the
        target's ``yy``, and the products ``cross`` of the adjacent pairs ``rows[i] <
        cols[i]`` (what :func:`dcfa.cfa.hierarchy.relevance_order` reads).
    """
    from scipy.stats import f as f_dist

    n_items = S.shape[0]
    w = row_weights(S.shape[1], rows)
    n = float(w.sum())
    sums = GroupSums(S)

    def dots(a: np.ndarray, b: np.ndarray, tot: np.ndarray) -> np.ndarray:  # centred on rows
        return pair_cross(sums.take, a, b, w.size, w) - tot[a] * tot[b] / n

    if start is None:
        start = centred_statistics(S, y, adjacency, rows=rows)
    tot, ss, sy, yy = start["tot"], start["ss"], start["sy"], start["yy"]
    r, c, cross = start["rows"], start["cols"], start["cross"]
    critical = f_dist.ppf(1.0 - alpha, 1, max(n - 3, 1))
    g = n_items
    rep = np.arange(n_items)  # each group's last item
    height = np.zeros(n_items)  # each group's highest merge so far
    gram, spent = None, 0  # spent: pairs multiplied from the series since g <= gram_groups
    out: tuple[list, list, list] = ([], [], [])
    while r.size:
        cost, rho, fit = _signal_cost(ss[r], ss[c], cross, sy[r], sy[c], yy)
        ok = np.flatnonzero((rho >= floor) & (cost * (n - 3) <= critical * (1.0 - fit)))
        if not ok.size:
            break
        if gram is None and g <= gram_groups and spent * GRAM_PAIR_COST >= g * g:
            gram = _GroupGram(sums.take(np.arange(g)), tot, w)
        chosen = ok[_matching(np.argsort(cost[ok], kind="stable"), r[ok], c[ok], g)]
        p, q = r[chosen], c[chosen]  # disjoint pairs, p < q
        to, g_new, rep, up = join_pairs(p, q, cost[chosen], rep, height, out)
        is_grown = np.zeros(g_new, dtype=bool)
        is_grown[to[p]] = True
        tot, sy = (np.bincount(to, weights=v, minlength=g_new) for v in (tot, sy))
        new_ss = np.empty(g_new)
        new_ss[to] = ss
        new_ss[to[p]] = ss[p] + ss[q] + 2.0 * cross[chosen]  # centred sums add
        r, c, kept, at, tl, th = next_pairs(to[r], to[c], is_grown, g_new)
        if gram is None:
            sums.merge(to, g_new)
            new_cross = dots(tl, th, tot)
            spent += tl.size if g_new <= gram_groups else 0
        else:
            gram.merge(p, q, to)
            new_cross = gram.cross(tl, th)
        cross = np.insert(cross[kept], at, new_cross)
        g, ss, height = g_new, new_ss, up
    a, b, h = (np.concatenate(x) if x else np.zeros(0) for x in out)
    keep = np.argsort(h, kind="stable")
    merges = Merges(n_items, a[keep].astype(np.int64), b[keep].astype(np.int64), h[keep])
    return merges, {"ss": ss, "sy": sy, "yy": yy, "rows": r, "cols": c, "cross": cross}


class _GroupGram:
    """The centred products of the groups, once they are few: the last rounds merge a few
    pairs each, and would multiply a large group's series with every neighbour's again in
    each. A group's row holds its products with the groups there were when the Gram matrix
    was made (its base groups): a merge adds two rows, and two groups' product is the sum
    of one's row over the other's base groups (the smaller one's)."""

    def __init__(self, X: np.ndarray, tot: np.ndarray, w: np.ndarray):
        # X: the groups' series, a copy centred here in place, the samples not used zeroed
        # (one copy of the series, not two)
        used = w > 0
        X -= (tot / used.sum())[:, None]
        X[:, ~used] = 0.0
        self.K = X @ X.T
        self.row = np.arange(X.shape[0])  # each group's row of K
        self.group = np.arange(X.shape[0])  # each base group's group

    def merge(self, p: np.ndarray, q: np.ndarray, to: np.ndarray) -> None:
        """Groups ``q`` join groups ``p`` (disjoint pairs); group ``i`` becomes ``to[i]``."""
        self.K[self.row[p]] += self.K[self.row[q]]
        left = np.ones(to.size, dtype=bool)
        left[q] = False
        self.row = self.row[left]  # ``to`` keeps the order of the groups left
        self.group = to[self.group]

    def cross(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The products of the pairs of groups ``(a[i], b[i])``."""
        order = np.argsort(self.group, kind="stable")  # the base groups, by group
        size = np.bincount(self.group, minlength=self.row.size)
        start = np.cumsum(size) - size
        small = np.where(size[a] <= size[b], a, b)
        big = a + b - small
        count = size[small]
        pair = np.repeat(np.arange(a.size), count)
        within = np.arange(pair.size) - np.repeat(np.cumsum(count) - count, count)
        base = order[np.repeat(start[small], count) + within]
        return np.bincount(pair, weights=self.K[self.row[big][pair], base], minlength=a.size)


def _matching(order: np.ndarray, rows: np.ndarray, cols: np.ndarray, n_groups: int):
    """Disjoint pairs, cheapest first (``order``: positions of the pairs by cost): the pairs
    that are the cheapest of both their groups, then again among the pairs of the groups not
    yet matched, until none is left. Returns their positions."""
    free = np.ones(n_groups, dtype=bool)
    live, taken = order, []
    while live.size:
        rank, best = best_pairs(np.arange(live.size), rows[live], cols[live], n_groups)
        mutual = live[(best[rows[live]] == rank) & (best[cols[live]] == rank)]
        taken.append(mutual)
        free[rows[mutual]] = False
        free[cols[mutual]] = False
        live = live[free[rows[live]] & free[cols[live]]]
    return np.sort(np.concatenate(taken))


def _signal_cost(ssa, ssb, cross, sya, syb, yy: float):
    """Per pair of groups (centred sums of squares ``ssa``, ``ssb``, products ``cross`` and
    with the target ``sya``, ``syb``): the R^2 a fit of the target loses when the two means
    are merged into one, the correlation of the two means, and the R^2 of the fit on both."""
    tiny = np.finfo(np.float64).tiny
    prod = ssa * ssb
    rho = cross / np.sqrt(np.maximum(prod, tiny))
    merged = (sya + syb) ** 2 / np.maximum(ssa + 2 * cross + ssb, tiny) / yy
    # two means that are one series up to rounding (or a mean without variance) fit the
    # target as their merged mean does; elsewhere the two-mean fit is at least the merged's
    det = prod - cross * cross
    one = det <= 1e-9 * prod
    both = (ssb * sya * sya - 2 * cross * sya * syb + ssa * syb * syb) / np.where(one, 1.0, det)
    both = np.where(one, merged, np.clip(np.maximum(both / yy, merged), 0.0, 1.0))
    return both - merged, rho, both


def regions_merges(
    S: np.ndarray, y: np.ndarray, adjacency, *, rows=slice(None), start: dict | None = None
) -> Merges:
    """The second stage of :class:`dcfa.RegionsCV`'s relevance order on the samples ``rows``:
    the adjacent groups that carry one signal merge first (:func:`signal_merges`, from the
    statistics ``start`` when known), then the groups they leave in the relevance order
    (:func:`dcfa.cfa.hierarchy.relevance_order`)."""
    first, groups = signal_merges(S, y, adjacency, rows=rows, start=start)
    second = relevance_order(
        groups["rows"], groups["cols"], groups["ss"], groups["sy"], groups["yy"], groups["cross"]
    )
    return chain(first, len(first), second)

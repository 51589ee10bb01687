"""RegionsCV and what it stands on: the two merge orders, the cut, the selection, stability.

The merge orders are checked against brute force on small graphs (the stopping rule of every
level; Kruskal's order written out); the selection and co-membership against hand-made
cases; the estimator against fields with known regions (the driving regions recovered pure,
every group one patch, the skill of the true regions) and against itself across inputs.
"""

from __future__ import annotations

import json
import logging
import warnings
from contextlib import contextmanager
from functools import partial

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

import dcfa
from dcfa.cfa import hierarchy, selection, signal_order
from dcfa.cfa.agreement import comembership
from dcfa.cfa.hierarchy import (
    Merges,
    chain,
    correlation_merges,
    cut,
    group_adjacency,
    neighbourhood_means,
    projection_merges,
    relevance_merges,
    sums_in_place,
    upper_pairs,
    ward_merges,
)
from dcfa.cfa.selection import (
    ols_skill,
    ridge_weights,
    scaled_gram,
    within_noise,
)
from dcfa.cfa.signal_order import signal_merges
from dcfa.datasets import make_regions_field
from dcfa.geo import group_mean, group_patches
from dcfa.neighbors import grid_adjacency
from dcfa.skill import blocked_cv

############################################################################################
# cut


def test_cut_counts_groups_and_numbers_them_by_first_item():
    merges = Merges(5, np.array([3, 0]), np.array([4, 1]), np.array([0.9, 0.8]))
    assert cut(merges, 0).tolist() == [0, 1, 2, 3, 4]
    assert cut(merges, 1).tolist() == [0, 1, 2, 3, 3]
    assert cut(merges, 2).tolist() == [0, 0, 1, 2, 2]
    assert merges.min_groups == 3
    with pytest.raises(ValueError, match="k: expected 0 <= k <= 2"):
        cut(merges, 3)


############################################################################################
# the first stage: correlation merges


def _field(seed: int, shape=(6, 8), n=60, n_signals=3, noise=0.7):
    rng = np.random.default_rng(seed)
    region = rng.integers(0, n_signals, shape)
    z = rng.normal(size=(n, n_signals))
    X = z[:, region.ravel()] + noise * rng.normal(size=(n, region.size))
    return X - X.mean(axis=0), grid_adjacency(shape, 1)


def _group_corr(S, labels, A):
    """Brute force: the correlation of every adjacent pair of groups' sums."""
    k = labels.max() + 1
    sums = np.stack([S[labels == g].sum(axis=0) for g in range(k)])
    C = np.corrcoef(sums)
    rows, cols = sp.triu(A, k=1).nonzero()
    pairs = {
        (min(a, b), max(a, b)) for a, b in zip(labels[rows], labels[cols], strict=True) if a != b
    }
    return sums, {p: C[p] for p in pairs}


@contextmanager
def _rows_per_block(n_rows: int | None, n_samples: int):
    """Blocks of ``n_rows`` series in the first stage's loops (None: the default), so that
    tests of a few dozen cells go through many blocks, as a field of a million cells does."""
    with pytest.MonkeyPatch.context() as mp:
        if n_rows is not None:
            mp.setattr(hierarchy, "PAIR_BYTES", 8 * n_rows * n_samples)
        yield


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    levels=st.sets(st.sampled_from([0.9, 0.7, 0.5, 0.3]), min_size=1),
    block=st.sampled_from([None, 1, 3]),
)
def test_correlation_merges_stop_where_no_adjacent_pair_reaches_the_level(seed, levels, block):
    X, A = _field(seed)
    S = np.ascontiguousarray(X.T)
    snaps: dict = {}
    with _rows_per_block(block, S.shape[1]):
        merges = correlation_merges(S, A, floor=min(levels), levels=levels, snapshots=snaps)
    assert np.array_equal(S, X.T)  # not changed
    assert set(snaps) == set(levels)
    assert np.all(merges.value >= min(levels))
    for level, (done, labels) in snaps.items():
        # the groups of the level are the first ``done`` merges, numbered by first item
        assert np.array_equal(cut(merges, done), labels)
        brute, corr = _group_corr(S, labels, A)
        assert all(r < level for r in corr.values()), (level, max(corr.values()))
        for g in range(labels.max() + 1):  # every group one connected patch
            members = np.flatnonzero(labels == g)
            n, _ = connected_components(A[members][:, members], directed=False)
            assert n == 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_correlation_merges_first_round_joins_every_item_to_its_best_neighbour(seed):
    """Boruvka's first round written out: each item's most correlated neighbour, by a loop."""
    X, A = _field(seed, shape=(7, 9), noise=1.5)
    S = np.ascontiguousarray(X.T)
    C = np.corrcoef(S)
    n = S.shape[0]
    rows, cols = [], []
    for i in range(n):
        nbrs = [j for j in sp.csr_array(A)[[i]].indices if j != i]
        rows.append(i)
        cols.append(max(nbrs, key=lambda j: C[i, j]))
    k, expected = connected_components(
        sp.coo_array((np.ones(n), (rows, cols)), shape=(n, n)), directed=False
    )
    merges = correlation_merges(S, A)
    # the round's merges come first: later rounds merge less noisy means, maybe higher
    assert np.array_equal(_canonical(cut(merges, n - k)), _canonical(expected))


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000), n_groups=st.integers(1, 30), block=st.sampled_from([None, 1, 4])
)
def test_sums_in_place_are_each_groups_sum_of_the_rows(seed, n_groups, block):
    """Against a loop over the groups; in blocks of one row a block writes over rows the
    next ones still read unless the order is right."""
    rng = np.random.default_rng(seed)
    labels = _canonical(np.unique(rng.integers(0, n_groups, 40), return_inverse=True)[1])
    S = rng.normal(size=(40, 7))
    expected = np.stack([S[labels == g].sum(axis=0) for g in range(labels.max() + 1)])
    with _rows_per_block(block, S.shape[1]):
        out = sums_in_place(S, labels)
    assert np.shares_memory(out, S)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
    if labels.max() > 0:
        with pytest.raises(ValueError, match="numbered in the order of their first item"):
            sums_in_place(S, labels.max() - labels)


def _canonical(labels):
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.size)
    return rank[labels]


def test_correlation_merges_join_a_region_and_not_its_neighbour():
    """Two halves of a grid with independent signals: at level 0.5 each half is one group."""
    rng = np.random.default_rng(3)
    n, shape = 200, (4, 6)
    z = rng.normal(size=(n, 2))
    half = (np.arange(24) % 6 >= 3).astype(int)
    X = z[:, half] + 0.5 * rng.normal(size=(n, 24))
    snaps: dict = {}
    correlation_merges(np.ascontiguousarray((X - X.mean(0)).T), grid_adjacency(shape, 1),
                       floor=0.5, levels=(0.5,), snapshots=snaps)  # fmt: skip
    labels = snaps[0.5][1]
    assert np.array_equal(_canonical(labels), half)


############################################################################################
# the second stage: relevance merges


def _kruskal(S, y, A):
    """Kruskal's order written out: edges by (larger |corr with y|, -corr), union-find."""
    rel = np.abs([np.corrcoef(s, y)[0, 1] for s in S])
    rows, cols = sp.triu(A, k=1).nonzero()
    edges = sorted(
        (max(rel[a], rel[b]), -np.corrcoef(S[a], S[b])[0, 1], a, b)
        for a, b in zip(rows.tolist(), cols.tolist(), strict=True)
    )
    parent = list(range(len(S)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    out = []
    for w, _, a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[rb] = ra
            out.append((a, b, w))
    return out


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("on_rows", [False, True])
def test_relevance_merges_are_kruskal_on_the_larger_relevance(seed, on_rows):
    """On the samples ``rows`` of series that are not centred (a fold's training months),
    the order is Kruskal's on those samples' correlations."""
    X, A = _field(seed, shape=(5, 5))
    rng = np.random.default_rng(seed)
    y = X[:, :3].sum(axis=1) + rng.normal(size=X.shape[0]) + 3.0
    S = np.ascontiguousarray(X.T) + rng.normal(size=(X.shape[1], 1))
    rows = np.sort(rng.choice(X.shape[0], X.shape[0] * 2 // 3, replace=False))
    if not on_rows:
        rows = np.arange(X.shape[0])
    before = S.copy()
    merges = relevance_merges(S, y, A, rows=rows)
    np.testing.assert_array_equal(S, before)
    expected = _kruskal(S[:, rows], y[rows], A)
    assert list(zip(merges.a.tolist(), merges.b.tolist(), strict=True)) == [
        (a, b) for a, b, _ in expected
    ]
    np.testing.assert_allclose(merges.value, [w for *_, w in expected], rtol=1e-12)
    assert np.all(np.diff(merges.value) >= 0)  # least relevant pairs first
    assert len(merges) == 24  # a spanning tree of the connected 5 x 5 grid


def test_a_relevant_piece_merges_after_the_background():
    """Pieces 0-2 say nothing of the target, piece 3 drives it: 3 merges last."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 4))
    y = z[:, 3] - z[:, 3].mean()
    S = np.ascontiguousarray((z - z.mean(0)).T)
    A = sp.csr_array(np.ones((4, 4)) - np.eye(4))
    merges = relevance_merges(S, y, A)
    assert 3 in (merges.a[-1], merges.b[-1])
    assert 3 not in np.concatenate([merges.a[:-1], merges.b[:-1]])


def _partition(labels) -> set:
    return {frozenset(np.flatnonzero(labels == g).tolist()) for g in np.unique(labels)}


@pytest.mark.parametrize("seed", range(4))
def test_ward_merges_are_scipys_ward_without_a_graph(seed):
    """On a complete graph Ward's criterion is reducible, so merging reciprocal nearest
    neighbours in rounds gives the greedy order: every cut is SciPy's Ward tree cut at as many
    clusters. Integer weights are checked as repeated items (which SciPy merges first)."""
    from scipy.cluster.hierarchy import cut_tree, linkage

    rng = np.random.default_rng(seed)
    n = 14
    v, w = rng.normal(size=n), rng.integers(1, 4, n)
    merges = ward_merges(v, w, sp.csr_array(np.ones((n, n)) - np.eye(n)))
    assert len(merges) == n - 1 and np.all(np.diff(merges.value) >= 0)
    item = np.repeat(np.arange(n), w)
    tree = linkage(v[item][:, None], method="ward")
    for k in range(1, n + 1):
        theirs = cut_tree(tree, n_clusters=k).ravel()
        first = np.searchsorted(item, np.arange(n))  # one copy of each item
        assert _partition(cut(merges, n - k)) == _partition(theirs[first])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 7), st.integers(2, 9))
def test_ward_merges_cut_into_patches_of_the_graph(seed, rows, cols):
    """Whatever the values, every cut's groups are connected patches of the grid, and the
    merges are a spanning forest in increasing height."""
    rng = np.random.default_rng(seed)
    A = sp.csr_array(grid_adjacency((rows, cols), 1))
    n = rows * cols
    v = np.round(rng.normal(size=n), 1)  # ties too
    merges = ward_merges(v, rng.uniform(0.5, 3, n), A)
    assert len(merges) == n - 1 and np.all(np.diff(merges.value) >= 0)
    for k in range(n):
        labels = cut(merges, k)
        for g in range(labels.max() + 1):
            inside = np.flatnonzero(labels == g)
            assert connected_components(A[inside][:, inside], directed=False)[0] == 1


def _projection_rounds(S, size, coef, A) -> list[set]:
    """The rounds of :func:`projection_merges` written out on the series: every adjacent pair
    is scored by least squares of ``beta_a m_a + beta_b m_b`` on the merged mean; the pairs
    that are each other's cheapest merge; heights kept monotone. Returns the partition after
    each merge, in increasing height."""
    n = S.shape[0]
    S = S - S.mean(axis=1, keepdims=True)
    labels = np.arange(n)
    beta = {g: coef[g] * size[g] for g in range(n)}
    height = dict.fromkeys(range(n), 0.0)
    made = []  # (height, items of group a, items of group b)
    while True:
        groups = np.unique(labels)
        mean = {g: S[labels == g].sum(axis=0) / size[labels == g].sum() for g in groups}
        pairs = sorted(
            {
                (min(labels[i], labels[j]), max(labels[i], labels[j]))
                for i, j in zip(*sp.triu(A, k=1).nonzero(), strict=True)
                if labels[i] != labels[j]
            }
        )
        if not pairs:
            break
        cost, coefs = {}, {}
        for a, b in pairs:
            u = beta[a] * mean[a] + beta[b] * mean[b]
            m = (mean[a] * size[labels == a].sum() + mean[b] * size[labels == b].sum()) / (
                size[labels == a].sum() + size[labels == b].sum()
            )
            c = np.linalg.lstsq(m[:, None], u, rcond=None)[0][0]
            cost[a, b], coefs[a, b] = np.mean((u - c * m) ** 2), c
        cheapest = {g: min((p for p in pairs if g in p), key=cost.get) for g in groups}
        mutual = [p for p in pairs if cheapest[p[0]] == p == cheapest[p[1]]]
        for a, b in mutual:
            h = max(cost[a, b], height[a], height[b])
            made.append((h, np.flatnonzero(labels == a), np.flatnonzero(labels == b)))
            labels[labels == b] = a
            beta[a], height[a] = coefs[a, b], h
    group = np.arange(n)  # the partitions after each merge, in increasing height
    part = [_partition(group)]
    for _, a, b in sorted(made, key=lambda m: m[0]):
        group[np.isin(group, group[b])] = group[a[0]]
        part.append(_partition(group))
    return part


def _signal_rounds(S, y, A, rows, floor, alpha) -> tuple[list, np.ndarray, list]:
    """The rounds of :func:`signal_merges` written out on the series: every adjacent pair of
    groups is scored by least squares of the target on its two means and on its merged mean
    (the series and the target centred on ``rows``); the pairs whose means correlate at
    ``floor`` and whose F statistic is within the critical value at ``alpha`` are matched,
    the cheapest of both their groups first, then again among the groups left. Returns the
    heights (kept monotone) in increasing order, the last partition's labels, and the
    partitions after each merge."""
    from scipy.stats import f as f_dist

    n = S.shape[0]
    X = S[:, rows] - S[:, rows].mean(axis=1, keepdims=True)
    yr = y[rows] - y[rows].mean()
    T = yr.size
    critical = f_dist.ppf(1 - alpha, 1, T - 3)
    labels = np.arange(n)
    height = dict.fromkeys(range(n), 0.0)
    made = []

    def r2(*columns):
        Z = np.stack(columns, axis=1)
        fit = Z @ np.linalg.lstsq(Z, yr, rcond=None)[0]
        return float(fit @ fit / (yr @ yr))

    while True:
        groups = np.unique(labels)
        total = {g: X[labels == g].sum(axis=0) for g in groups}
        pairs = sorted(
            {
                (min(labels[i], labels[j]), max(labels[i], labels[j]))
                for i, j in zip(*sp.triu(A, k=1).nonzero(), strict=True)
                if labels[i] != labels[j]
            }
        )
        cost = {}
        for a, b in pairs:
            both, merged = r2(total[a], total[b]), r2(total[a] + total[b])
            both = max(both, merged)
            rho = np.corrcoef(total[a], total[b])[0, 1]
            if rho >= floor and (both - merged) * (T - 3) / (1 - both) <= critical:
                cost[a, b] = both - merged
        if not cost:
            break
        # a matching: the pairs cheapest for both their groups, again among those left
        ok, matched = [p for p in pairs if p in cost], []
        while ok:
            cheapest = {g: min((p for p in ok if g in p), key=cost.get)
                        for g in {g for p in ok for g in p}}  # fmt: skip
            mutual = [p for p in ok if cheapest[p[0]] == p == cheapest[p[1]]]
            matched += mutual
            done = {g for p in mutual for g in p}
            ok = [p for p in ok if not set(p) & done]
        for a, b in matched:
            h = max(cost[a, b], height[a], height[b])
            made.append((h, np.flatnonzero(labels == a), np.flatnonzero(labels == b)))
            labels[labels == b] = a
            height[a] = h
    group = np.arange(n)
    part = [_partition(group)]
    for _, a, b in sorted(made, key=lambda m: m[0]):
        group[np.isin(group, group[b])] = group[a[0]]
        part.append(_partition(group))
    return sorted(m[0] for m in made), labels, part


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(2, 4),
    st.integers(2, 5),
    st.booleans(),
    st.sampled_from([0, 6, 100]),
)
def test_signal_merges_are_the_rounds_written_out(seed, n_rows, n_cols, fold, gram_groups):
    """Each cut is the partition of the rounds written out with least squares on the
    series, on all samples or a fold's rows; the groups left are reported with their
    statistics centred on those rows; only pairs that pass both tests merge. The groups'
    products come from their series in every round (``gram_groups=0``), from their Gram
    matrix from the first (100), or from the series until 6 groups are left."""
    rng = np.random.default_rng(seed)
    n, T = n_rows * n_cols, 60
    A = sp.csr_array(grid_adjacency((n_rows, n_cols), 1))
    common = rng.normal(size=(2, T))
    S = rng.normal(size=(n, 2)) @ common + 0.8 * rng.normal(size=(n, T))
    y = common[0] + rng.normal(size=T)
    rows = np.r_[0:20, 35:60] if fold else slice(None)
    merges, groups = signal_merges(
        S, y, A, rows=rows, floor=0.3, alpha=0.05, gram_groups=gram_groups
    )
    heights, labels, parts = _signal_rounds(S, y, A, rows, 0.3, 0.05)
    np.testing.assert_allclose(merges.value, heights, rtol=1e-9, atol=1e-12)
    for k, theirs in enumerate(parts):
        assert _partition(cut(merges, k)) == theirs
    # the groups left: numbered as cut numbers them, with their centred statistics
    left = cut(merges, len(merges))
    X = S[:, rows] - S[:, rows].mean(axis=1, keepdims=True)
    yr = y[rows] - y[rows].mean()
    G = np.stack([X[left == g].sum(axis=0) for g in range(left.max() + 1)])
    np.testing.assert_allclose(groups["ss"], np.einsum("ij,ij->i", G, G), rtol=1e-9)
    np.testing.assert_allclose(groups["sy"], G @ yr, rtol=1e-9, atol=1e-9)
    assert groups["yy"] == pytest.approx(yr @ yr)
    pairs = upper_pairs(group_adjacency(A, left))
    np.testing.assert_array_equal(groups["rows"], pairs[0])
    np.testing.assert_array_equal(groups["cols"], pairs[1])
    np.testing.assert_allclose(
        groups["cross"], np.einsum("ij,ij->i", G[pairs[0]], G[pairs[1]]), rtol=1e-9, atol=1e-9
    )


def test_signal_merges_take_one_series_as_one_signal_without_warnings():
    """Two cells with one series (a grid's duplicated row), or one a multiple of the other,
    fit the target as their mean does: they merge at no cost. The two-mean fit's solve is
    singular there, and a cell without variance divides by zero: neither may warn."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=100)
    S = np.stack([x, x, 2 * x, np.zeros(100), rng.normal(size=100)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        merges, _ = signal_merges(S, x + rng.normal(size=100), sp.csr_array(1 - np.eye(5)))
    assert _partition(cut(merges, len(merges))) == _partition(np.array([0, 0, 0, 1, 2]))
    np.testing.assert_allclose(merges.value, 0.0, atol=1e-12)


def test_signal_merges_keep_independent_signals_apart():
    """Two regions whose signals are independent never merge, even where one mean would fit
    the target as well (equal loadings): their means are not correlated. The cells of each
    region merge into one."""
    rng = np.random.default_rng(1)
    T = 400
    z = rng.normal(size=(2, T))
    region = np.tile(np.repeat([0, 1], 3), 2)  # a 2 x 6 strip: three columns each
    S = z[region] + 0.5 * rng.normal(size=(12, T))
    y = z[0] + z[1] + 0.5 * rng.normal(size=T)
    merges, _ = signal_merges(S, y, grid_adjacency((2, 6), 1))
    assert _partition(cut(merges, len(merges))) == _partition(region)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.integers(2, 5))
def test_projection_merges_are_the_rounds_written_out(seed, rows, cols):
    """Each cut is the partition the rounds written out with least squares on the series
    make, and every group of every cut is a patch of the grid."""
    rng = np.random.default_rng(seed)
    n, T = rows * cols, 40
    A = sp.csr_array(grid_adjacency((rows, cols), 1))
    common = rng.normal(size=(3, T))
    S = rng.normal(size=(n, 3)) @ common + rng.normal(size=(n, T))
    size, coef = rng.integers(1, 4, n).astype(float), rng.normal(size=n)
    merges = projection_merges(S, size, coef, A)
    assert len(merges) == n - 1 and np.all(np.diff(merges.value) >= 0)
    for k, theirs in enumerate(_projection_rounds(S, size, coef, A)):
        labels = cut(merges, k)
        assert _partition(labels) == theirs
        for g in range(labels.max() + 1):
            inside = np.flatnonzero(labels == g)
            assert connected_components(A[inside][:, inside], directed=False)[0] == 1


def test_projection_merges_join_correlated_neighbours_of_unlike_weight_first():
    """Two neighbours with one signal and weights 1 and 3 merge before two of unlike signals
    and weights 0.5 and -0.5, which Ward's criterion on the weights merges first."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2, 500))
    S = np.stack([z[0], z[0] + 0.01 * rng.normal(size=500), z[1], rng.normal(size=500)])
    A = sp.csr_array(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]]))
    coef = np.array([1.0, 3.0, 0.5, -0.5])
    size = np.ones(4)
    assert {_first_merge(projection_merges(S, size, coef, A))} == {(0, 1)}
    assert {_first_merge(ward_merges(coef, size, A))} == {(2, 3)}


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_neighbourhood_means_are_weighted_means_over_each_neighbourhood(n, times, seed):
    """Against a loop over the items: each round, an item's value becomes the weighted mean
    of its own and its neighbours' values of the round before."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.4, k=1)
    A = sp.csr_array((upper | upper.T).astype(np.int8))
    value, weight = rng.normal(size=n), rng.integers(1, 5, n).astype(float)
    want = value.copy()
    for _ in range(times):
        before = want.copy()
        for i in range(n):
            near = [i, *np.flatnonzero(A.toarray()[i])]
            want[i] = np.sum(weight[near] * before[near]) / np.sum(weight[near])
    got = neighbourhood_means(value, weight, A, times)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _first_merge(merges: Merges) -> tuple[int, int]:
    """The pair of items the first merge joined, smaller first."""
    return tuple(sorted((int(merges.a[0]), int(merges.b[0]))))


@pytest.mark.parametrize("k", [0, 3, 7])
def test_chain_follows_the_first_merges_with_the_second(k):
    rng = np.random.default_rng(k)
    A = sp.csr_array(grid_adjacency((3, 4), 1))
    first = ward_merges(rng.normal(size=12), np.ones(12), A)
    labels = cut(first, k)
    second = ward_merges(rng.normal(size=12 - k), np.ones(12 - k), group_adjacency(A, labels))
    both = chain(first, k, second)
    assert len(both) == 11 and np.all(np.diff(both.value) >= 0)
    assert _partition(cut(both, k)) == _partition(labels)
    for j in range(len(second) + 1):
        assert _partition(cut(both, k + j)) == _partition(cut(second, j)[labels])


def test_ridge_weights_are_ridge_on_the_cells(monkeypatch):
    """An item of ``n_i`` identical cells: ridge on the cells gives each of them one weight,
    which is the item's weight per cell (here at one fixed penalty)."""
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    n, size = 80, np.array([1, 3, 2, 5, 1, 4])
    u = rng.normal(size=(n, size.size))
    y = u @ rng.normal(size=size.size) + rng.normal(size=n)
    sums = (u * size).T  # an item's sum: its n_i copies of u_i
    cells = np.repeat(u, size, axis=1)
    train = np.arange(10, 70)
    monkeypatch.setattr(selection, "RIDGE_ALPHAS", np.array([0.3]))
    centred = cells[train] - cells[train].mean(axis=0)
    alpha = 0.3 * np.linalg.eigvalsh(centred @ centred.T).clip(0).mean()
    expected = Ridge(alpha=alpha).fit(cells[train], y[train]).coef_
    got = ridge_weights(sums, size.astype(float), y, train)
    np.testing.assert_allclose(np.repeat(got, size), expected, rtol=1e-8, atol=1e-12)
    # the same from the Gram matrix of all samples, as the folds share it
    gram = scaled_gram(sums, size.astype(float))
    shared = ridge_weights(sums, size.astype(float), y, train, gram)
    np.testing.assert_allclose(shared, got, rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("items, n_train", [(40, 150), (40, 30)], ids=["items", "samples"])
def test_ridge_weights_are_the_same_from_either_gram_matrix(monkeypatch, items, n_train):
    """Daily records have more samples than pieces: the ``rows x rows`` Gram matrix took 72 s
    of a 96 s fit of 4 000 days; the ``items x items`` one gives the same weights, with the
    penalty chosen by the same generalised cross-validation (both regimes forced each way,
    so that zero eigenvalues fall on either side)."""
    rng = np.random.default_rng(3)
    size = rng.integers(1, 6, items).astype(float)
    sums = rng.normal(size=(items, 200)) * size[:, None] + 5.0
    y = sums[:4].sum(axis=0) / 10 + rng.normal(size=200)
    train = np.sort(rng.choice(200, n_train, replace=False))
    natural = ridge_weights(sums, size, y, train)
    forced = not selection.uses_gram(items, n_train)
    monkeypatch.setattr(selection, "uses_gram", lambda n_items, n_rows: forced)
    other = ridge_weights(sums, size, y, train)
    np.testing.assert_allclose(other, natural, rtol=1e-7, atol=1e-10)
    # and the weights are ridge's on the cells: each cell of an item its sum's share
    from sklearn.linear_model import Ridge

    alphas = []
    monkeypatch.setattr(selection, "_gcv_alpha", _spy(selection._gcv_alpha, alphas))
    got = ridge_weights(sums, size, y, train)
    cells = np.repeat(sums.T / size, size.astype(int), axis=1)  # n_i equal cells
    expected = Ridge(alpha=alphas[-1]).fit(cells[train], y[train]).coef_
    np.testing.assert_allclose(np.repeat(got, size.astype(int)), expected, rtol=1e-6)


def _spy(function, calls: list):
    def spy(*args):
        calls.append(function(*args))
        return calls[-1]

    return spy


@pytest.mark.parametrize("signal", [False, True], ids=["relevance", "signal"])
@pytest.mark.parametrize("level", [None, 0.7, 0.5], ids=["cells", "finest", "pieces"])
@pytest.mark.parametrize("seed", range(4))
def test_a_folds_merges_from_segment_sums_are_those_of_its_rows(seed, level, signal):
    """Every fold's second stage reads the per-segment sums of the pieces (with ``signal``,
    the pieces' sums on the fold's rows): the merges (and every map's region means) must be
    those of the series centred on the fold's own rows.
    The pieces are the cells, or the first stage's pieces at its finest level (0.7) or a
    coarser one, whose sums are made from the finest pieces' sums, made over the cells'
    series."""
    from dcfa.cfa.pieces import FirstStage, Pieces, Segments
    from dcfa.skill import blocked_folds

    X, A = _field(seed, shape=(6, 7), n=90)
    rng = np.random.default_rng(seed)
    y = X[:, :4].sum(axis=1) + rng.normal(size=X.shape[0])
    S = np.ascontiguousarray(X.T)
    labels = finest = np.arange(S.shape[0])
    snaps: dict = {}
    if level is not None:
        correlation_merges(S, A, floor=0.5, levels=(0.7, 0.5), snapshots=snaps)
        finest, labels = snaps[0.7][1], snaps[level][1]
        assert labels.max() + 1 < S.shape[0]  # pieces of several cells
    # brute force: each piece's sum of its cells' series, and the pieces' adjacency
    P = np.stack([S[labels == g].sum(axis=0) for g in range(labels.max() + 1)])
    AP = group_adjacency(A, labels)
    folds = blocked_folds(X.shape[0], 4, 3)
    first = FirstStage(np.arange(S.shape[0]), sp.csr_array(A), finest,
                        sums_in_place(S.copy(), finest), snaps)  # fmt: skip
    segments = Segments(X.shape[0], [t for t, _ in folds])
    pieces = Pieces(labels, first, segments, y, selection.ridge_skill, signal=signal)
    np.testing.assert_allclose(pieces.sums, P, rtol=1e-12, atol=1e-12)
    for rows in [train for train, _ in folds] + [slice(None)]:
        Pr = P[:, rows] - P[:, rows].mean(axis=1, keepdims=True)
        if signal:  # on the pieces' own sums on these rows
            expected = signal_order.regions_merges(np.ascontiguousarray(P[:, rows]), y[rows], AP)
        else:
            expected = relevance_merges(Pr, y[rows] - y[rows].mean(), AP)
        got = pieces.regions(rows)
        np.testing.assert_array_equal(got.a, expected.a)
        np.testing.assert_array_equal(got.b, expected.b)
        np.testing.assert_allclose(got.value, expected.value, rtol=1e-10, atol=1e-12)
        sizes = np.array([1, 2, 5, 9])
        for k, G in zip(sizes, pieces.means_along(got, sizes), strict=True):
            M = pieces.cells(cut(got, pieces.n - k))
            direct = np.stack([S[M == g].mean(axis=0) for g in range(k)])
            np.testing.assert_allclose(G, direct, rtol=1e-12, atol=1e-12)


############################################################################################
# selection and stability


def test_within_noise_takes_the_smallest_map_within_the_paired_noise():
    # fold difficulty varies a lot, but candidate 1 trails the best by a steady 0.01
    hard = np.array([0.2, 0.9, 0.5, 0.7, 0.4])
    skill = np.stack([hard + 0.02, hard + 0.01, hard - 0.2])
    sizes = np.array([30, 8, 3])
    assert within_noise(skill, sizes, parsimony=1.0) == 0  # steady gap: outside the noise
    noisy = np.stack([hard + 0.02, hard + [0.05, -0.03, 0.04, -0.02, 0.0], hard - 0.2])
    assert within_noise(noisy, sizes, parsimony=1.0) == 1
    assert within_noise(noisy, sizes, parsimony=0.0) == 0  # the best
    with_nan = noisy.copy()
    with_nan[1, 2] = np.nan
    assert within_noise(with_nan, sizes) == 0  # a candidate not scored everywhere is out
    with pytest.raises(ValueError, match="no candidate"):
        within_noise(np.full((2, 3), np.nan), np.array([1, 2]))


def test_comembership_is_the_mean_jaccard_of_each_cell_region():
    final = np.array([0, 0, 0, 1, 1, -1])
    same = comembership(final, [final.copy()])
    np.testing.assert_array_equal(same[:5], 1.0)
    assert np.isnan(same[5])
    other = np.array([0, 0, 1, 1, 1, 1])  # cell 2 moved to the other region
    jac = comembership(final, [other])
    # each region with all its cells (cell 5, unused in ``final``, is in ``other``'s second):
    # cells 0, 1: {0,1,2} vs {0,1} -> 2/3; cell 2: {0,1,2} vs {2,3,4,5} -> 1/6;
    # cells 3, 4: {3,4} vs {2,3,4,5} -> 2/4
    np.testing.assert_allclose(jac[:5], [2 / 3, 2 / 3, 1 / 6, 1 / 2, 1 / 2])
    np.testing.assert_allclose(comembership(final, [final, other])[:5], (1 + jac[:5]) / 2)
    # each region's recurrence is its cells' mean: (2/3 + 2/3 + 1/6) / 3 and (1/2 + 1/2) / 2
    np.testing.assert_allclose(group_mean(final, jac, 2), [1.5 / 3, 1 / 2])


def test_ols_skill_is_scikit_learn_linear_regression():
    rng = np.random.default_rng(1)
    G = rng.normal(size=(3, 50))
    y = G.T @ [1.0, -2.0, 0.5] + rng.normal(size=50)
    train, test = np.arange(35), np.arange(35, 50)
    model = LinearRegression().fit(G[:, train].T, y[train])
    assert ols_skill(G, y, train, test) == pytest.approx(model.score(G[:, test].T, y[test]))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 40),
    n=st.integers(20, 200),
    noise=st.floats(0.05, 5.0),
    constant=st.booleans(),
)
def test_ridge_skill_is_scikit_learns_scaler_and_ridge_cv(seed, k, n, noise, constant):
    """Groups on scales from 0.01 to 100, a near-duplicate pair, perhaps a constant one, more
    groups than rows at times: the R^2 of StandardScaler -> RidgeCV(REGION_ALPHAS), penalty
    and all."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    G = rng.normal(size=(k, n + 30)) * rng.uniform(0.01, 100, size=(k, 1))
    if k > 2:
        G[1] = G[0] + 1e-3 * G[2]
    if constant:
        G[-1] = 7.0
    y = G[: min(3, k)].sum(0) / G[: min(3, k)].std(1).clip(1e-9).sum()
    y = y + noise * rng.normal(size=n + 30)
    train, test = slice(0, n), slice(n, n + 30)
    ref = make_pipeline(StandardScaler(), RidgeCV(alphas=selection.REGION_ALPHAS))
    ref.fit(G[:, train].T, y[train])
    expected = ref.score(G[:, test].T, y[test])
    assert selection.ridge_skill(G, y, train, test) == pytest.approx(expected, abs=1e-9)


def test_the_regressions_estimators_are_the_ones_their_skill_scores():
    rng = np.random.default_rng(3)
    G = rng.normal(size=(6, 80))
    y = G.T @ rng.normal(size=6) + rng.normal(size=80)
    train, test = np.arange(60), np.arange(60, 80)
    for name, reg in selection.REGRESSIONS.items():
        model = selection.regression(name).fit(G[:, train].T, y[train])
        score = model.score(G[:, test].T, y[test])
        assert reg.skill(G, y, train, test) == pytest.approx(score), name
        # the selection scores means centred per fold, the user's regression the means
        # themselves: a skill that moved with a constant per group would pick maps wrongly
        shifted = G + rng.normal(0.0, 50.0, size=(6, 1))
        assert reg.skill(shifted, y, train, test) == pytest.approx(score, abs=1e-6), name
        # and RegionsCV's docstring lists it
        assert f'"{name}"' in dcfa.RegionsCV.__doc__.split("regression :")[1][:200], name
    # two fresh estimators, not one shared
    assert selection.regression("ridge") is not selection.regression("ridge")


def test_a_regression_registered_later_is_a_valid_parameter(monkeypatch):
    """The parameter's options were copied when regions.py was imported: an entry added
    after it was refused or accepted by import order."""
    dcfa.RegionsCV()  # imported first
    monkeypatch.setitem(selection.REGRESSIONS, "ols2", selection.REGRESSIONS["ols"])
    X, y = _field(0, n=60)[0], np.random.default_rng(0).normal(size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dcfa.NoSkillWarning)
        model = dcfa.RegionsCV(regression="ols2", neighbors=None, n_splits=3).fit(X, y)
    assert model.regression == "ols2"


############################################################################################
# the estimator


def _purity(labels, region, driving):
    """Share of each driving region's cells in groups that hold no other region's cells."""
    out = []
    for r in driving:
        cells = region == r
        pure = [g for g in np.unique(labels[cells]) if np.all(region[labels == g] == r)]
        out.append(np.isin(labels[cells], pure).mean())
    return np.array(out)


@pytest.fixture(scope="module")
def regions_field():
    return make_regions_field(
        240, (24, 48), 12, n_active=3, land_fraction=0.2, time_chunk=240, seed=5
    ).load()


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_regions_cv_finds_the_driving_regions_pure_and_contiguous(seed):
    ds = make_regions_field(240, (24, 48), 12, n_active=3, land_fraction=0.2, time_chunk=240,
                            seed=seed).load()  # fmt: skip
    model = dcfa.RegionsCV().fit(ds.field, ds.target)
    region = ds.region.values.ravel()
    labels = model.labels_
    driving = np.flatnonzero(ds.beta.values != 0)
    assert np.all(_purity(labels, region, driving) >= 0.95)
    assert model.n_features_out_ < 12  # the background merged
    assert np.all(group_patches(model.label_map_, periodic=True) == 1)
    truth = np.stack(
        [ds.field.values.reshape(240, -1)[:, region == r].mean(1) for r in range(12)], 1
    )
    oracle = blocked_cv(LinearRegression(), truth, ds.target.values).mean
    ours = blocked_cv(LinearRegression(), model.transform(ds.field).values, ds.target.values).mean
    assert ours >= 0.95 * oracle


def _box_on_a_smooth_field(seed: int, months: int = 360, shape=(24, 32)):
    """A target that follows a 6 x 6 box of cells on a field of noise smoothed over 3 cells
    plus each cell's own noise: nothing in the field alone marks the box's edge."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(seed)
    smooth = gaussian_filter(rng.normal(size=(months, *shape)), (0, 3, 3), mode="wrap")
    field = smooth / smooth.std() + 0.7 * rng.normal(size=smooth.shape)
    box = np.zeros(shape, dtype=bool)
    box[8:14, 10:16] = True
    mean = field[:, box].mean(axis=1)
    y = (mean - mean.mean()) / mean.std() + 0.7 * rng.normal(size=months)
    coords = {
        "time": xr.date_range("1980-01-01", periods=months, freq="MS"),
        "lat": 30.5 + np.arange(shape[0]),
        "lon": 240.5 + np.arange(shape[1]),
    }
    return xr.DataArray(field, dims=("time", "lat", "lon"), coords=coords), y, box


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_box_the_field_does_not_set_apart_is_one_region(seed):
    """A basin's flow follows the mean of its cells, which vary like their neighbours outside
    it. The relevance order merged the box's single cells into the background one by one,
    the least relevant first, and the map was a background and up to 27 regions of one cell.
    The box's cells now carry one signal and merge first: a few regions, none of one cell,
    and one that lies mostly in the box holds most of it."""
    field, y, box = _box_on_a_smooth_field(seed)
    model = dcfa.RegionsCV(signal=True).fit(field, y)
    labels = model.labels_.reshape(box.shape)
    sizes = np.bincount(labels.ravel())
    assert np.all(sizes > 1) and sizes.size <= 10
    main = np.bincount(labels[box]).argmax()
    assert (labels[box] == main).mean() >= 0.6  # the share of the box in one region
    assert box[labels == main].mean() >= 0.6  # and that region's share inside the box


def test_regions_cv_fitted_values(regions_field, caplog):
    ds = regions_field
    with caplog.at_level(logging.INFO, logger="dcfa"):
        model = dcfa.RegionsCV(n_splits=4).fit(ds.field, ds.target)
    # one line gives the map and how it was chosen (it was two, counting the regions twice)
    (line,) = [r.getMessage() for r in caplog.records if " -> " in r.getMessage()]
    land = ds.field[0].isnull().sum().item()
    assert line.startswith(f"RegionsCV: {24 * 48} features -> {model.n_features_out_} groups ")
    assert f"({land} excluded); relevance order, level {model.level_:.2f}: " in line
    assert model.level_ in dcfa.cfa.regions.LEVELS
    path = model.cv_path_
    assert isinstance(path, xr.Dataset)
    assert path["r2"].dims == ("level", "n_groups", "fold")
    assert path.sizes["fold"] == 4 and model.fold_ari_.shape == (4,)
    kept = model.labels_ >= 0
    assert np.all(np.isnan(model.stability_[~kept]))
    assert np.all((model.stability_[kept] >= 0) & (model.stability_[kept] <= 1))
    assert model.stability_map_.dims == ("lat", "lon")
    assert model.label_map_.dims == ("lat", "lon")
    # each region's recurrence: the mean stability of its cells
    assert model.group_stability_.shape == (model.n_features_out_,)
    for g in range(model.n_features_out_):
        assert model.group_stability_[g] == pytest.approx(
            model.stability_[model.labels_ == g].mean()
        )
    # the features are the plain means of the regions' cells, in the field's units
    Xt = model.transform(ds.field)
    assert Xt.dims == ("time", "group") and Xt.attrs.get("units") == "K"
    X = ds.field.values.reshape(240, -1).astype(np.float64)
    expected = np.stack(
        [X[:, model.labels_ == g].mean(axis=1) for g in range(model.n_features_out_)], 1
    )
    np.testing.assert_allclose(Xt.values, expected, rtol=1e-6)
    record = model.fit_record()
    assert record["level"] == model.level_ and "cv_path" in record
    assert record["order"] == model.order_ == "relevance"
    assert record["regression"] == "ridge"
    # the path says which regression its skill is of, not a fixed one
    assert path.attrs["regression"] == "ridge"
    assert all("OLS" not in path[v].attrs["long_name"] for v in ("r2", "r2_weights"))
    ols = dcfa.RegionsCV(n_splits=4, regression="ols").fit(ds.field, ds.target).cv_path_
    assert ols.attrs["regression"] == "ols"


def test_a_fold_whose_target_is_constant_is_left_out_of_the_choice():
    """A target of 0 over the first 20 of 100 months (no rain in a dry spell): the first
    fold's R^2 is undefined for every map, and the fit stopped on a bare ValueError ("no
    candidate map could be scored in every fold"). That fold is left out, with a warning;
    with fewer than two folds left the target is refused."""
    ds = make_regions_field(n_time=100, shape=(6, 12), n_regions=4, seed=1).compute()
    y = ds.target.copy()
    y[:20] = 0.0
    with pytest.warns(UserWarning, match=r"^y: constant over the test blocks of folds 0 "
                      r"\(samples 0-19\): .* chosen on the other 4 folds") as caught:  # fmt: skip
        model = dcfa.RegionsCV().fit(ds.field, y)
    assert caught[0].filename == __file__
    np.testing.assert_array_equal(model.cv_path_.test_start.values, [20, 40, 60, 80])
    assert np.isfinite(model.cv_path_.r2.sel(level=model.level_)).any()
    y[:80] = 0.0
    refused = r"^y: constant over the test blocks of folds 0 \(samples 0-19\), 1 .* 3 \(samples"
    with pytest.raises(dcfa.InputError, match=refused + r" 60-79\) of 5: .* smaller n_splits"):
        dcfa.RegionsCV().fit(ds.field, y)


@pytest.mark.slow
def test_regions_cv_same_map_from_numpy_dask_and_xarray(regions_field):
    ds = regions_field
    ref = dcfa.RegionsCV().fit(ds.field, ds.target)
    lazy = ds.field.chunk({"time": 60, "lat": 12})
    assert np.array_equal(dcfa.RegionsCV().fit(lazy, ds.target).labels_, ref.labels_)
    X = ds.field.values.reshape(240, -1)
    A = grid_adjacency((24, 48), 1, periodic=(1,))
    flat = dcfa.RegionsCV(neighbors=A).fit(X, ds.target.values)
    assert np.array_equal(flat.labels_, ref.labels_)
    chunked = dcfa.RegionsCV(neighbors=A).fit(da.from_array(X, chunks=(80, 500)), ds.target.values)
    assert np.array_equal(chunked.labels_, ref.labels_)
    again = clone(ref).fit(ds.field, ds.target, moments=ref.moments_)
    assert np.array_equal(again.labels_, ref.labels_)


def test_the_weights_order_approaches_ridge_on_a_smooth_field():
    """A smooth field (no discrete regions), the whole estimator refitted in every fold: the
    relevance order alone, at most 30 regions, falls 0.06-0.34 R² below ridge on all cells
    (data seeds 0-5 at this size, median 0.14); at the defaults, which score the regions made
    from ridge's weights too, the map comes from 0.055 below ridge to level with it (median
    0.011 below; seed 0: 0.001 below, and 0.109 above the relevance order alone). The weights
    order's map is its most skilful of at most 30 regions (the default ``max_groups``), cut
    from the smoothed weights."""
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline

    from dcfa.datasets import make_smooth_field

    ds = make_smooth_field(240, (24, 48), seed=0)
    X, y = ds.field.values.reshape(240, -1), ds.target.values
    A = grid_adjacency((24, 48), 1, periodic=(1,))
    ridge = blocked_cv(RidgeCV(np.logspace(-2, 6, 33)), X, y).mean

    def skill(**kw):
        return blocked_cv(make_pipeline(dcfa.RegionsCV(neighbors=A, **kw), LinearRegression()),
                          X, y).mean  # fmt: skip

    default = skill()
    assert default > ridge - 0.03
    assert default > skill(orders=("relevance",)) + 0.02
    model = dcfa.RegionsCV(neighbors=A).fit(X, y)
    assert model.order_ == "weights"
    # the weights order's most skilful map of at most max_groups = 30 regions, not its
    # smallest within the noise
    path = model.cv_path_
    assert int(path.n_groups.max()) == 30
    mean = path["mean_r2_smoothed"].values
    assert model.n_features_out_ == int(path.n_groups[np.nanargmax(mean)])
    labels = model.labels_.reshape(24, 48)
    assert np.all(group_patches(xr.DataArray(labels, dims=("lat", "lon")), periodic=True) == 1)


def test_the_order_is_chosen_on_the_weights_and_the_map_cut_from_smoothed_ones(monkeypatch):
    """The choice between the orders reads the ridge weights themselves: smoothing them
    otherwise (here: not at all, or scrambled) changes the kept map, never the scores the
    choice is made on. Without smoothing the kept map's scores are the weights order's."""
    from dcfa.cfa import pieces
    from dcfa.datasets import make_smooth_field

    ds = make_smooth_field(240, (24, 48), seed=0)
    X, y = ds.field.values.reshape(240, -1), ds.target.values
    A = grid_adjacency((24, 48), 1, periodic=(1,))
    fitted = {}
    real = pieces.neighbourhood_means
    for name, smooth in {
        "smoothed": real,
        "raw": lambda value, weight, adjacency, times: value,
        "scrambled": lambda value, weight, adjacency, times: np.random.default_rng(0).permutation(
            value
        ),
    }.items():
        monkeypatch.setattr(pieces, "neighbourhood_means", smooth)
        fitted[name] = dcfa.RegionsCV(neighbors=A).fit(X, y)
    base = fitted["smoothed"]
    assert base.order_ == "weights"
    for model in fitted.values():
        assert model.order_ == "weights"
        for var in ("r2", "r2_weights"):
            np.testing.assert_array_equal(model.cv_path_[var], base.cv_path_[var])
    raw = fitted["raw"].cv_path_
    np.testing.assert_array_equal(raw["r2_smoothed"], raw["r2_weights"])
    assert not np.array_equal(base.cv_path_["r2_smoothed"], raw["r2_smoothed"])
    assert not np.array_equal(fitted["scrambled"].labels_, base.labels_)


def test_regions_cv_solves_with_one_blas_thread(regions_field, monkeypatch):
    """The selection's small solves run with one BLAS thread (OpenBLAS's threads made them
    80x slower on a machine another process kept busy), and the caller's setting is back
    after the fit."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from dcfa.cfa import pieces

    seen = []
    real = pieces.ridge_weights

    def spy(*args, **kwargs):
        seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        return real(*args, **kwargs)

    monkeypatch.setattr(pieces, "ridge_weights", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        dcfa.RegionsCV().fit(regions_field.field, regions_field.target)
        after = {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}
    assert seen and all(s == {1} for s in seen)
    assert after == {2}


def test_first_within_noise_keeps_the_first_family_while_it_is_close():
    """The first family's own choice stands while its best map is within the noise of the
    best of both; a second family clearly better takes over, with its best map (not its
    smallest within the noise, 5 here)."""
    from dcfa.cfa.selection import first_within_noise

    sizes = np.array([2, 5, 10])
    first = np.array([[0.50, 0.60, 0.55], [0.68, 0.74, 0.69], [0.71, 0.73, 0.70]])
    # its smallest map within the noise (5) is below the second's best, its best (10) is not
    close = np.array([[0.20, 0.30, 0.25], [0.50, 0.55, 0.52], [0.70, 0.76, 0.71]])
    assert first_within_noise(first, sizes, close, sizes) == (0, 1)
    better = np.array([[0.20, 0.30, 0.25], [0.90, 0.93, 0.91], [0.91, 0.92, 0.93]])
    assert within_noise(better, sizes) == 1  # what the second family's own rule would take
    assert first_within_noise(first, sizes, better, sizes) == (1, 2)
    never = np.full((3, 3), np.nan)
    assert first_within_noise(first, sizes, never, sizes) == (0, 1)
    assert first_within_noise(never, sizes, better, sizes) == (1, 2)


def test_first_within_noise_wants_more_than_a_sliver_of_skill():
    """A second family better in every fold, so out of the noise, but by less than the
    least gain in mean skill leaves the first family's choice standing; the same edge over
    the least gain, or a least gain of zero, hands over to the second."""
    from dcfa.cfa.selection import LEAST_GAIN, first_within_noise

    sizes = np.array([2, 5, 10])
    first = np.array([[0.50, 0.60, 0.55], [0.68, 0.74, 0.69], [0.71, 0.73, 0.70]])
    best = first[2]  # its best map; its own rule takes the 5-group one
    sliver = np.vstack([best - 0.2, best - 0.1, best + [0.004, 0.006, 0.005]])
    assert 0 < sliver[2].mean() - best.mean() < LEAST_GAIN
    assert first_within_noise(first, sizes, sliver, sizes) == (0, 1)
    assert first_within_noise(first, sizes, sliver, sizes, least_gain=0.0) == (1, 2)
    clear = sliver + [[0.0], [0.0], [LEAST_GAIN]]
    assert clear[2].mean() - best.mean() > LEAST_GAIN
    assert first_within_noise(first, sizes, clear, sizes) == (1, 2)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(-2, 1), st.just(float("nan"))),
        min_size=0,
        max_size=12,
    )
)
def test_fold_skill_is_the_mean_and_standard_error_of_the_scored_folds(scores):
    """What ``dcfa inspect`` says of a result's skill, against NumPy: NaN folds dropped, the
    standard error of the mean with ddof 1, skilful only above one standard error."""
    skill = selection.fold_skill(scores)
    scored = np.array([v for v in scores if not np.isnan(v)])
    if not scored.size:
        assert skill is None
        return
    se = scored.std(ddof=1) / np.sqrt(scored.size) if scored.size > 1 else 0.0
    assert skill.n_folds == scored.size
    assert skill.mean == pytest.approx(scored.mean(), abs=1e-12)
    assert skill.se == pytest.approx(se, abs=1e-12)
    assert skill.skilful == (scored.mean() > se)


def test_warn_if_no_skill_names_the_kept_map_and_the_best_candidate():
    warn = partial(selection.warn_if_no_skill, "Est", "map", chosen="the 2-region map")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn([-0.5, 0.3, np.nan], [0.01, 0.012, 0.008])  # out of its noise: silent
        warn([-0.5, 0.3], [0.2, np.nan, 0.4])  # a fold no map could score
    none = r"^Est: no map beats the climatology \(mean CV R\^2 from -0.50 to -0.01\); the 2-"
    with pytest.warns(dcfa.NoSkillWarning, match=none + "region map is the least bad, not a map"):
        warn([-0.5, -0.01, np.nan], [-0.01, -0.02, 0.0])
    noise = r"\(mean CV R\^2 -0.02; the best map's \+0.01 is within the noise of it\)"
    with pytest.warns(dcfa.NoSkillWarning, match=r"^Est: the 2-region map does not beat the "
                      r"climatology " + noise):  # fmt: skip
        warn([-0.5, 0.01], [-0.02, -0.01, -0.03])
    # above 0 but within one standard error of it: the best of many maps on white noise
    folds = np.array([0.023, -0.012, 0.024, -0.014, 0.002])
    se = folds.std(ddof=1) / np.sqrt(folds.size)
    assert 0 < folds.mean() <= se
    within = r"^Est: the 2-region map's mean CV R\^2 \(\+0.005\) is within one standard "
    within += rf"error \({se:.3f}\)"
    with pytest.warns(dcfa.NoSkillWarning, match=within):
        warn([-0.5, 0.01], folds)


def test_regions_cv_says_when_its_map_does_not_beat_the_climatology(regions_field):
    """On a target nothing in the field predicts, RegionsCV returned a map without a word
    (2 regions at a mean CV R^2 of -0.016 in a user's trial)."""
    ds = regions_field
    noise = np.random.default_rng(0).standard_normal(ds.sizes["time"])
    with pytest.warns(dcfa.NoSkillWarning, match=r"^RegionsCV: .*the climatology") as caught:
        model = dcfa.RegionsCV(n_splits=4).fit(ds.field, noise)
    (warning,) = [w for w in caught if "climatology" in str(w.message)]
    assert warning.filename == __file__  # it points at the caller's fit
    # in the forecast pipeline too, whose steps scikit-learn fits through joblib's frames
    from sklearn.pipeline import make_pipeline

    with pytest.warns(dcfa.NoSkillWarning, match=r"^RegionsCV: .*the climatology") as caught:
        make_pipeline(dcfa.RegionsCV(n_splits=4), LinearRegression()).fit(ds.field, noise)
    assert [w.filename for w in caught if "climatology" in str(w.message)] == [__file__]
    path = model.cv_path_.sel(n_groups=model.n_features_out_)
    kept = path["mean_r2"].sel(level=model.level_)
    if model.order_ == "weights":
        kept = path["mean_r2_smoothed"]
    assert float(kept) <= 0
    # the kept map's folds, as the path scored them, are what a result store keeps
    folds = path["r2"].sel(level=model.level_)
    if model.order_ == "weights":
        folds = path["r2_smoothed"]
    np.testing.assert_array_equal(model.cv_r2_, folds.values)
    assert json.loads(model.fit_record()["cv_r2"]) == pytest.approx(folds.values, abs=1e-6)
    assert f"the {model.n_features_out_}-region map" in str(warning.message)
    with warnings.catch_warnings():  # a target the field predicts: no warning
        warnings.simplefilter("error", UserWarning)
        dcfa.RegionsCV(n_splits=4).fit(ds.field, ds.target)


def test_regions_cv_max_groups(regions_field):
    ds = regions_field
    model = dcfa.RegionsCV(max_groups=3).fit(ds.field, ds.target)
    assert model.n_features_out_ <= 3


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"levels": []}, "levels: expected correlations in"),
        ({"levels": [0.5, 1.5]}, "levels: expected correlations in"),
        ({"gap": 100}, "gap: 100 samples"),
        ({"parsimony": -1}, "parsimony"),
        ({"orders": ["relevance", "alike"]}, "orders: expected a non-empty sequence of"),
        ({"orders": []}, "orders: expected a non-empty sequence of"),
        ({"regression": "lasso"}, "regression"),
    ],
)
def test_regions_cv_bad_parameters_are_named_before_any_pass(regions_field, params, match):
    ds = regions_field
    lazy = ds.field.chunk({"time": 60})
    with count_computes(0), pytest.raises(ValueError, match=match):
        dcfa.RegionsCV(**params).fit(lazy, ds.target)


def test_regions_cv_refuses_a_complete_graph_of_many_features():
    X = np.zeros((10, 6000))
    with pytest.raises(ValueError, match="neighbors: None makes all 6,000 features"):
        dcfa.RegionsCV(neighbors=None).fit(X, np.arange(10.0))


def test_regions_cv_refuses_dates_out_of_order(regions_field):
    ds = regions_field.isel(time=np.r_[1, 0, 2:240])
    with pytest.raises(ValueError, match="RegionsCV's blocked folds"):
        dcfa.RegionsCV().fit(ds.field, ds.target)


def test_regions_cv_memory_budget_before_any_pass(regions_field):
    ds = regions_field
    with dask.config.set({"dcfa.memory_budget": "1MB"}), count_computes(0):
        with pytest.raises(dcfa.MemoryBudgetError, match="RegionsCV holds the series") as err:
            dcfa.RegionsCV().fit(ds.field.chunk({"time": 60}), ds.target)
    assert "DASK_DCFA__MEMORY_BUDGET=1GiB" in str(err.value)  # and how to raise it


def test_plot_stability_draws_the_map_with_region_borders(regions_field):
    import matplotlib

    matplotlib.use("Agg")
    from dcfa.plot import plot_stability

    model = dcfa.RegionsCV().fit(regions_field.field, regions_field.target)
    ax = plot_stability(model.stability_map_, region=model.label_map_, coastlines=False)
    mesh = ax.collections[0]
    values = np.ma.getdata(mesh.get_array()).reshape(24, 48)
    kept = model.label_map_.values >= 0
    np.testing.assert_allclose(values[kept], model.stability_map_.values[kept])
    assert np.ma.getmaskarray(mesh.get_array()).reshape(24, 48)[~kept].all()
    with pytest.raises(ValueError, match="stability: expected a 2-D"):
        plot_stability(model.stability_map_.expand_dims(variable=["a"]))


def test_regions_cv_execution_for_checks_the_budget_reading_nothing(regions_field):
    lazy = regions_field.field.chunk({"time": 60})
    with count_computes(0):
        assert dcfa.RegionsCV().execution_for(lazy) == "series"
        with dask.config.set({"dcfa.memory_budget": "1MB"}):
            with pytest.raises(dcfa.MemoryBudgetError, match="RegionsCV holds the series"):
                dcfa.RegionsCV().execution_for(lazy)


def test_signal_counts_its_gram_matrix_in_the_budget(regions_field):
    """``signal=True`` holds the Gram matrix of up to GRAM_GROUPS groups and a copy of their
    series (8 bytes x g x (g + months)): a budget that holds the series and the default's
    blocks but not those refuses it, before reading anything."""
    from dcfa.cfa.regions import SERIES_COPIES, WORKING_BYTES
    from dcfa.cfa.series import series_bytes

    lazy = regions_field.field.chunk({"time": 60})
    n, cells = lazy.sizes["time"], lazy.sizes["lat"] * lazy.sizes["lon"]
    plain = int(SERIES_COPIES * series_bytes(n, cells)) + WORKING_BYTES
    gram = 8 * cells * (cells + n)  # fewer cells than GRAM_GROUPS
    with count_computes(0), dask.config.set({"dcfa.memory_budget": plain + gram // 2}):
        assert dcfa.RegionsCV().execution_for(lazy) == "series"
        with pytest.raises(dcfa.MemoryBudgetError, match="RegionsCV holds the series"):
            dcfa.RegionsCV(signal=True).execution_for(lazy)
    with count_computes(0), dask.config.set({"dcfa.memory_budget": plain + gram + 2**20}):
        assert dcfa.RegionsCV(signal=True).execution_for(lazy) == "series"


@pytest.mark.parametrize(
    "make",
    [
        lambda: make_regions_field(400, (60, 120), 20, n_active=3, noise=2.0, seed=5),
        lambda: dcfa.datasets.make_smooth_field(400, (60, 120), seed=6),
    ],
    ids=["noisy regions", "smooth"],
)
def test_the_memory_budget_counts_what_the_fit_holds(make):
    """The fit's peak stays under what the budget check counts. The check once counted the
    series alone while the fit held 3.8x (the pieces' sums at every level); it now holds the
    series (which the finest pieces' sums take over), one coarser level's sums at a time, and
    blocks of working memory."""
    import tracemalloc

    from dcfa.cfa.regions import SERIES_COPIES, WORKING_BYTES
    from dcfa.cfa.series import series_bytes

    ds = make()
    X, y = ds.field.values.reshape(400, -1), ds.target.values
    counted = SERIES_COPIES * series_bytes(*X.shape) + WORKING_BYTES
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        dcfa.RegionsCV(neighbors=grid_adjacency((60, 120), 1)).fit(X, y)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert 8 * X.size < peak < counted  # the series at least


def _chains(patches: np.ndarray) -> sp.csr_array:
    """An adjacency of items in a row, each a neighbour of the next within its patch only:
    one separate chain per patch."""
    i = np.arange(patches.size)
    return sp.csr_array(
        (patches[:, None] == patches[None, :]) & (np.abs(i[:, None] - i[None, :]) == 1)
    )


def test_more_separate_patches_than_max_groups_warns_and_keeps_one_region_per_patch(rng):
    """Cells in 4 separate patches (islands of a land mask) and max_groups=3: no map of
    contiguous regions has 3 regions. The fit crashed on an empty list of sizes (a global
    field at 0.25 degree); it warns, naming max_groups, and its map has a region or more per
    patch, each within one patch, and room for max_groups more (at most 7)."""
    patches = np.repeat(np.arange(4), 10)
    A = _chains(patches)
    signal = rng.normal(size=(240, 4))
    X = signal[:, patches] + 0.5 * rng.normal(size=(240, 40))
    y = signal[:, 0] - signal[:, 2] + 0.3 * rng.normal(size=240)
    with pytest.warns(dcfa.PatchesWarning, match=r"max_groups: the kept cells form 4 separate"):
        model = dcfa.RegionsCV(neighbors=A, max_groups=3).fit(X, y)
    labels = model.labels_
    assert model.n_patches_ == 4 and 4 <= model.n_features_out_ <= 7
    assert int(model.cv_path_.n_groups.max()) == 7
    for region in np.unique(labels):
        assert np.unique(patches[labels == region]).size == 1


def test_a_map_of_one_region_per_patch_is_scored_when_no_larger_size_is_reachable(rng):
    """31 separate patches, each one piece at every level, and max_groups=1: the sizes
    scored were those of the list up to 32 (31 patches + 1), of which no map of these pieces
    has any (the path has exactly 31 regions), and the fit stopped with "no candidate map
    could be scored". The patches' own count is a size: one region per patch."""
    patches = np.repeat(np.arange(31), 3)
    signal = rng.normal(size=(240, 31))
    X = signal[:, patches] + 0.01 * rng.normal(size=(240, 93))
    y = signal[:, 0] + 0.3 * rng.normal(size=240)
    with pytest.warns(UserWarning, match=r"max_groups: the kept cells form 31 separate patches"):
        model = dcfa.RegionsCV(neighbors=_chains(patches), max_groups=1).fit(X, y)
    assert model.n_features_out_ == 31
    assert set(model.n_pieces_.values()) == {31}
    np.testing.assert_array_equal(np.unique(patches[model.labels_ == model.labels_[0]]), [0])
    for region in np.unique(model.labels_):
        assert np.unique(patches[model.labels_ == region]).size == 1


def test_test_blocks_of_a_few_months_are_said_naming_n_splits(rng):
    """472 samples in 100 blocks of 4-5 months gave a mean CV R^2 of -0.35 where 5 blocks
    gave +0.67, and the only warning blamed the target ("Check the target and its lead")."""
    from sklearn.pipeline import make_pipeline

    patches = np.repeat(np.arange(4), 10)
    signal = rng.normal(size=(240, 4))
    X = signal[:, patches] + 0.5 * rng.normal(size=(240, 40))
    y = signal[:, 0] + 0.3 * rng.normal(size=240)
    A = _chains(patches)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dcfa.RegionsCV(neighbors=A, n_splits=40).fit(X, y)
        dcfa.blocked_cv(LinearRegression(), X, y, n_splits=40)
        # a pipeline fits its first steps through joblib's Memory: still the user's line
        make_pipeline(dcfa.RegionsCV(neighbors=A, n_splits=40), LinearRegression()).fit(X, y)
    said = [w for w in caught if str(w.message).startswith("n_splits: 40 test blocks")]
    assert len(said) == 3 and all(w.filename == __file__ for w in said), said
    assert str(said[0].message) == (
        "n_splits: 40 test blocks of 240 samples hold 6 or 7 samples each: an R^2 over so few "
        "scores noise, and a map chosen by it too; n_splits <= 20 gives blocks of 12 or more"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dcfa.RegionsCV(neighbors=A, n_splits=20).fit(X, y)  # blocks of 12
        dcfa.RegionsCV(neighbors=A[:20, :20], n_splits=3).fit(X[:20, :20], y[:20])  # tiny
    assert not [w for w in caught if str(w.message).startswith("n_splits:")]

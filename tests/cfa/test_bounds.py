"""NonLinCFA's margin bounds and the verdicts the driver keeps with them (dcfa.cfa.bounds,
dcfa.cfa.skips.Allowances): the bounds contain every margin the group can reach within
its drift, and keeping verdicts changes no label."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import TimeSeriesSplit

import dcfa.cfa.sequential as sequential
import dcfa.cfa.skips as skips
from dcfa import NonLinCFA
from dcfa.cfa.bounds import nonlincfa_margin_bounds
from dcfa.cfa.folds import make_folds
from dcfa.cfa.rules import nonlincfa_margin, nonlincfa_rule
from dcfa.cfa.series import SeriesData
from dcfa.datasets import make_regions_field
from dcfa.neighbors import grid_adjacency

EPS = 3e-2


def _field(seed, shape=(16, 24), n_time=120, n_regions=6, n_active=4):
    ds = make_regions_field(
        n_time=n_time, shape=shape, n_regions=n_regions, n_active=n_active, seed=seed
    ).compute()
    X = ds.field.stack(cell=("lat", "lon")).values.astype(np.float64)
    return ds, X, ds.target.values


def _basis(X, y, cv):
    folds = make_folds(cv, X.shape[0])
    parts = [list(tr) for tr, _ in folds.splits] + [list(te) for _, te in folds.splits]
    data = SeriesData.gather(X, y, bounds=folds.bounds, parts=parts)
    scale = 1.0 / X[:, data.cols].std(axis=0, ddof=1)
    return data.basis(data.cols, scale)


def _margin(group, cand):
    return nonlincfa_margin(group.pair_moments(cand), eps=EPS)


def _drift(basis, before, members):
    """The relative drift (dcfa.cfa.bounds) of a group that gained ``members`` since its
    per-segment sums of squares were ``before``."""
    a, b = basis.member_drift()
    A, B = a[:, members].sum(axis=1), b[:, members].sum(axis=1)
    return max(np.max(A / np.sqrt(before)), np.max(B / np.sqrt(before / basis.counts)))


@pytest.mark.parametrize("cv", [5, TimeSeriesSplit(3)])
def test_at_no_drift_the_bounds_are_the_margin(cv):
    _, X, y = _field(0)
    basis = _basis(X, y, cv)
    group = basis.open_group(0)
    for j in range(1, 30):
        group.add(j)
    cand = np.arange(30, basis.n_features)
    lo, hi = nonlincfa_margin_bounds(
        group.segment_moments(cand), basis.A, eps=EPS, rel=np.array([0.0])
    )
    margin = _margin(group, cand)
    finite = np.isfinite(lo[0])
    assert finite.mean() > 0.9  # unbounded only where the two-regressor fit is singular
    np.testing.assert_allclose(lo[0][finite], margin[finite], rtol=0, atol=1e-10)
    np.testing.assert_allclose(hi[0][finite], margin[finite], rtol=0, atol=1e-10)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 50),
    cv=st.sampled_from([5, 3, "ts"]),
    size=st.integers(1, 80),
    own=st.floats(0.0, 1.0),
)
def test_bounds_contain_every_margin_within_the_drift(seed, cv, size, own):
    """Grow a group, bound its candidates' margins, add members (of its region with
    probability ``own``, else any cell): at every level at least the drift reached, the true
    margin lies within the bounds."""
    ds, X, y = _field(seed % 5)
    basis = _basis(X, y, TimeSeriesSplit(3) if cv == "ts" else cv)
    rng = np.random.default_rng(seed)
    region = ds.region.values.ravel()
    members = list(rng.permutation(np.flatnonzero(region == region[0]))[:size])
    group = basis.open_group(members[0])
    for j in members[1:]:
        group.add(j)
    free = np.setdiff1d(np.arange(basis.n_features), members)
    cand = rng.choice(free, 40, replace=False)
    rel = np.array([0.0, 1e-3, 1e-2, 3e-2, 0.1, 0.3])
    lo, hi = nonlincfa_margin_bounds(group.segment_moments(cand), basis.A, eps=EPS, rel=rel)
    assert np.all(lo[1:] <= lo[:-1] + 1e-12) and np.all(hi[1:] >= hi[:-1] - 1e-12)
    before = group.gg.copy()
    pool = np.setdiff1d(free, cand)
    same = np.intersect1d(pool, np.flatnonzero(region == region[0]))
    added = []
    for _ in range(30):
        src = same if same.size and rng.uniform() < own else pool
        j = int(rng.choice(src))
        if j in added:
            continue
        group.add(j)
        added.append(j)
        r = _drift(basis, before, added)
        if r > rel[-1]:
            break
        level = np.searchsorted(rel, r)  # the first level at least the drift
        m = _margin(group, cand)
        assert np.all(m >= lo[level] - 1e-9), (r, m - lo[level])
        assert np.all(m <= hi[level] + 1e-9), (r, hi[level] - m)


class _PlainNonLinCFA(NonLinCFA):
    """NonLinCFA testing every candidate at every step (no kept verdicts)."""

    def _accept(self):
        return partial(nonlincfa_rule, eps=self.eps)


def _count_tests(monkeypatch):
    counts = {"tests": 0}
    original = skips.Allowances.test

    def test(self, group, cand):
        counts["tests"] += cand.size
        return original(self, group, cand)

    monkeypatch.setattr(skips.Allowances, "test", test)
    return counts


@settings(max_examples=10, deadline=None)
@given(
    seed=st.integers(0, 30),
    eps=st.sampled_from([1e-2, 3e-2, 1e-1]),
    cv=st.sampled_from([5, "ts"]),
    standardize=st.booleans(),
    shuffle=st.booleans(),
    scan=st.sampled_from(["restart", "single"]),
)
def test_kept_verdicts_change_no_label(seed, eps, cv, standardize, shuffle, scan):
    _, X, y = _field(seed, shape=(14, 20), n_time=100, n_regions=4)
    params = dict(
        mode="series",
        neighbors=None if seed % 3 == 0 else grid_adjacency((14, 20), 1),
        eps=eps,
        cv=TimeSeriesSplit(3) if cv == "ts" else cv,
        standardize=standardize,
        shuffle=shuffle,
        random_state=seed,
        scan=scan,
    )
    got = NonLinCFA(**params).fit(X, y).labels_
    np.testing.assert_array_equal(got, _PlainNonLinCFA(**params).fit(X, y).labels_)


def test_kept_verdicts_save_most_tests_on_large_groups(monkeypatch):
    """Large regions, most of which do not drive the target: NonLinCFA joins those into
    large groups whose frontiers are cells failing by far, the verdicts the bounds keep
    longest. The same labels as testing every candidate at every step, with a fraction of
    the tests."""
    _, X, y = _field(1, shape=(30, 45), n_time=400, n_regions=12, n_active=2)
    params = dict(neighbors=grid_adjacency((30, 45), 1), eps=EPS)
    counts = _count_tests(monkeypatch)
    kept = NonLinCFA(mode="series", **params).fit(X, y).labels_
    plain = {"tests": 0}
    original = sequential._first_passing

    def first_passing(cand, test, first_block=32):
        def counted(block):
            plain["tests"] += block.size
            return test(block)

        return original(cand, counted, first_block)

    monkeypatch.setattr(sequential, "_first_passing", first_passing)
    every = _PlainNonLinCFA(mode="series", **params).fit(X, y).labels_
    np.testing.assert_array_equal(kept, every)
    assert 2 * counts["tests"] < plain["tests"], (counts, plain)  # 32 646 vs 77 232


def test_candidates_the_bounds_cannot_decide_get_the_rule(monkeypatch):
    """Copies of a cell make the two-regressor fit singular: the bounds give up there and
    the rule itself decides (the same labels as testing every candidate)."""
    from dcfa.cfa.rules import SegmentMoments

    _, X, y = _field(2, shape=(10, 12), n_time=200)
    X = np.repeat(X[:, :60], 2, axis=1)  # every cell twice, a seed's copy tested first
    taken = {"n": 0}
    original = SegmentMoments.take

    def take(self, idx):
        taken["n"] += int(np.count_nonzero(idx))
        return original(self, idx)

    monkeypatch.setattr(SegmentMoments, "take", take)
    params = dict(mode="series", eps=EPS)
    got = NonLinCFA(**params).fit(X, y).labels_
    assert taken["n"] > 0
    np.testing.assert_array_equal(got, _PlainNonLinCFA(**params).fit(X, y).labels_)
    np.testing.assert_array_equal(got, NonLinCFA(mode="dense", eps=EPS).fit(X, y).labels_)

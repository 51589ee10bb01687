"""GenLinCFA: exact partitions of the authors' test, regression and classification."""

from __future__ import annotations

from functools import partial

import dask.array as da
import numpy as np
import pytest
from conftest import correlated_data, count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import genlincfa_authors

import dcfa
from dcfa import GenLinCFA
from dcfa.cfa.driver import partition_moments
from dcfa.cfa.rules import DriftBoundRule, genlincfa_bounded, genlincfa_margin
from dcfa.datasets import make_regions_field
from dcfa.neighbors import grid_adjacency


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scan", ["restart", "single"])
@pytest.mark.parametrize("form, eps", [("full", 0.7), ("full", 0.85), ("simple", 0.3)])
def test_partition_equals_the_authors_test(seed, scan, form, eps):
    rng = np.random.default_rng(seed)
    X, y = correlated_data(rng, n=100, D=10, noise=0.6)
    got = GenLinCFA(eps=eps, form=form, scan=scan).fit(X, y).labels_
    np.testing.assert_array_equal(got, genlincfa_authors(X, y, eps=eps, form=form, scan=scan))


@pytest.mark.parametrize("family, eps2", [("gaussian", 1.0), ("bernoulli", 0.25), ("poisson", 1.0)])
def test_family_sets_the_curvature(rng, family, eps2):
    X, y = correlated_data(rng, n=120, D=8, noise=0.5)
    if family == "bernoulli":
        y = (y > np.median(y)).astype(float)
    if family == "poisson":
        y = rng.poisson(np.exp(0.3 * (y - y.mean()) / y.std()))
    got = GenLinCFA(eps=0.8, family=family).fit(X, y).labels_
    np.testing.assert_array_equal(got, genlincfa_authors(X, y, eps=0.8, eps2=eps2))
    forced = GenLinCFA(eps=0.8, family=family, curvature=0.5).fit(X, y).labels_
    np.testing.assert_array_equal(forced, genlincfa_authors(X, y, eps=0.8, eps2=0.5))


def test_any_two_labels(rng):
    X, y = correlated_data(rng, n=150, D=8)
    y01 = (y > 0).astype(int)
    words = np.where(y01 == 1, "wet", "dry")
    a = GenLinCFA(eps=0.7, family="bernoulli", curvature=1).fit(X, y01)
    b = GenLinCFA(eps=0.7, family="bernoulli", curvature=1).fit(X, words)
    c = GenLinCFA(eps=0.7, family="bernoulli", curvature=1).fit(X, np.where(y01, 5, -3))
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.labels_, c.labels_)
    assert b.classes_.tolist() == ["dry", "wet"]


def test_dask_and_numpy_agree_and_one_compute(rng):
    X, y = correlated_data(rng, n=100, D=12, offset=1e4)
    ref = GenLinCFA(eps=0.75).fit(X, y)
    with count_computes(1):
        got = GenLinCFA(eps=0.75).fit(da.from_array(X, chunks=(30, 5)), y)
    np.testing.assert_array_equal(got.labels_, ref.labels_)


def test_neighbors_restrict_groups(rng):
    X, y = correlated_data(rng, n=100, D=12, k_latent=1, noise=0.3)
    A = grid_adjacency((3, 4), 1)
    free = GenLinCFA(eps=0.75).fit(X, y)
    near = GenLinCFA(eps=0.75, neighbors=A).fit(X, y)
    dense = A.toarray()
    for g in range(near.n_features_out_):
        members = np.flatnonzero(near.labels_ == g)
        if members.size > 1:
            assert all(dense[i, members].any() for i in members)
    assert near.n_features_out_ >= free.n_features_out_


def test_functional_twin(rng):
    X, y = correlated_data(rng, n=60, D=7)
    m = dcfa.moments(X, y)
    np.testing.assert_array_equal(dcfa.genlincfa(m, eps=0.8), GenLinCFA(eps=0.8).fit(X, y).labels_)


@pytest.mark.parametrize(
    "params, target, err, match",
    [
        (dict(eps=0.0), "real", ValueError, "eps"),
        (dict(eps=1.2), "real", ValueError, "eps"),
        (dict(family="gamma"), "real", ValueError, "family"),
        (dict(form="short"), "real", ValueError, "form"),
        (dict(family="bernoulli"), "three", ValueError, "exactly two classes, got 3"),
        (dict(family="poisson"), "real", ValueError, "poisson family needs non-negative"),
        (dict(family="bernoulli"), "one", ValueError, "exactly two classes, got 1"),
    ],
)
def test_bad_input_fails_before_the_pass(rng, params, target, err, match):
    X, y = correlated_data(rng, n=40, D=4)
    y = {"real": y, "three": rng.integers(0, 3, 40), "one": np.zeros(40)}[target]
    with count_computes(0), pytest.raises(err, match=match):
        GenLinCFA(**params).fit(da.from_array(X, chunks=10), y)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 20),
    eps=st.sampled_from([0.5, 0.6, 0.75, 0.9]),
    form=st.sampled_from(["full", "simple"]),
    scan=st.sampled_from(["restart", "single"]),
    standardize=st.booleans(),
    neighbors=st.sampled_from([None, 1]),
)
def test_skipping_provable_failures_changes_no_label(seed, eps, form, scan, standardize, neighbors):
    """The driver skips candidates whose margin is provably still positive
    (``rules.DriftBoundRule``): the labels are those of testing every candidate, with fewer
    tests."""
    ds = make_regions_field(n_time=120, shape=(12, 18), n_regions=6, seed=seed).compute()
    X = ds.field.stack(cell=("lat", "lon")).values.astype(np.float64)
    y = ds.target.values
    m = dcfa.moments(X, y)
    adj = grid_adjacency((12, 18), 1) if neighbors else None
    options = dict(eps=eps, curvature=1.0, form=form)
    tested = {"plain": 0, "bounded": 0}

    def counted(key):
        def margin(pm):
            tested[key] += pm.n_candidates
            return genlincfa_margin(pm, **options)

        return margin

    plain = partial(_passes, margin=counted("plain"))
    bounded = DriftBoundRule(counted("bounded"), genlincfa_bounded(**options).lower_bound)
    run = partial(
        partition_moments,
        m,
        standardize=standardize,
        compare="mean",
        scan=scan,
        neighbors=adj,
    )
    np.testing.assert_array_equal(run(bounded), run(plain))
    assert tested["bounded"] <= tested["plain"]


def test_skipping_saves_tests_on_large_groups():
    """On a field of a few large regions the bound skips over half of the retests."""
    ds = make_regions_field(n_time=200, shape=(30, 45), n_regions=8, seed=1).compute()
    X = ds.field.stack(cell=("lat", "lon")).values.astype(np.float64)
    m = dcfa.moments(X, ds.target.values)
    bounded = genlincfa_bounded(0.75)
    tested = {}
    labels = {}
    for name, lower in (("bounded", bounded.lower_bound), ("plain", None)):
        tested[name] = 0

        def margin(pm, name=name):
            tested[name] += pm.n_candidates
            return bounded.margin(pm)

        rule = DriftBoundRule(margin, lower) if lower else partial(_passes, margin=margin)
        labels[name] = partition_moments(
            m,
            rule,
            standardize=False,
            compare="mean",
            scan="restart",
            neighbors=grid_adjacency((30, 45), 1),
        )
    np.testing.assert_array_equal(labels["bounded"], labels["plain"])
    assert 2 * tested["bounded"] < tested["plain"], tested


def _passes(pm, margin):
    return margin(pm) <= 0.0

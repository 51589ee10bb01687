"""GenLinCFA: exact partitions of the authors' test, regression and classification."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from conftest import correlated_data, count_computes
from reference import genlincfa_authors

import dcfa
from dcfa import GenLinCFA
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

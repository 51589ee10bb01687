"""Acceptance rules pair by pair against explicit regressions."""

from __future__ import annotations

import numpy as np
import pytest
from reference import lincfa_pair_test, standardize

from dcfa.cfa.rules import PairMoments, eq17_threshold, lincfa_rule


def pair_moments(g, c, y):
    Z = np.column_stack([g, c, y])
    mean = Z.mean(axis=0)
    C = (Z - mean).T @ (Z - mean)
    return PairMoments(n=np.array([[len(y)]], float), mean=mean[None, None], cross=C[None, None])


@pytest.mark.parametrize(
    "w, sigma, expected",
    [
        ((0.2, 0.8), 0.5, 0.997217),
        ((0.2, 0.8), 1.0, 0.988867),
        ((0.2, 0.8), 10.0, -0.113338),
        ((0.47, 0.52), 0.5, 0.599198),
        ((0.47, 0.52), 1.0, -0.603206),
    ],
)
def test_eq17_threshold_reproduces_tables_6_and_7(w, sigma, expected):
    # LinCFA journal Tables 6/7, "Theoretical rho-bar", n = 500
    assert eq17_threshold(*w, sigma**2, 500) == pytest.approx(expected, abs=5e-7)


def test_eq17_threshold_is_minus_infinity_for_equal_weights():
    assert eq17_threshold(0.3, 0.3, 1.0, 100) == -np.inf


@pytest.mark.parametrize("strict", [True, False])
def test_lincfa_rule_equals_the_bivariate_ols_test(rng, strict):
    """2 000 random pairs (many near the threshold): correlation form == explicit OLS form."""
    agree = 0
    outcomes = set()
    for _ in range(2000):
        n = int(rng.integers(8, 200))
        a = rng.normal(size=n)
        b = rng.uniform(0.6, 1) * a + rng.uniform(0.02, 1) * rng.normal(size=n)
        y = rng.normal() * a + rng.normal() * b + rng.uniform(0.1, 5) * rng.normal(size=n)
        za, zb = standardize(a), standardize(b)
        expected = lincfa_pair_test(za, zb, y, strict=strict)
        got = bool(lincfa_rule(pair_moments(a, b, y), strict=strict)[0])
        agree += got == expected
        outcomes.add(expected)
    assert agree == 2000
    assert outcomes == {True, False}


def test_lincfa_rule_edge_cases(rng):
    n = 50
    a = rng.normal(size=n)
    y = rng.normal(size=n)
    # the same feature twice: rho = 1 aggregates
    assert lincfa_rule(pair_moments(a, a, y))[0]
    assert lincfa_rule(pair_moments(a, 3 * a + 1, y), strict=True)[0]
    # equal correlation with the target aggregates whatever rho
    b = rng.normal(size=n)
    yy = standardize(a) + standardize(b)
    assert lincfa_rule(pair_moments(a, b, yy))[0]
    # strongly different relevance, weakly correlated: kept apart
    assert not lincfa_rule(pair_moments(a, b, 5 * a + 0.1 * rng.normal(size=n)))[0]


def test_rule_is_vectorised_over_candidates(rng):
    n, J = 100, 30
    g = rng.normal(size=n)
    C = g[:, None] + rng.uniform(0.01, 2, J) * rng.normal(size=(n, J))
    y = g + rng.normal(size=n)
    one_by_one = [bool(lincfa_rule(pair_moments(g, C[:, j], y))[0]) for j in range(J)]
    stacked = [pair_moments(g, C[:, j], y) for j in range(J)]
    pm = PairMoments(
        n=np.concatenate([p.n for p in stacked], axis=1),
        mean=np.concatenate([p.mean for p in stacked], axis=1),
        cross=np.concatenate([p.cross for p in stacked], axis=1),
    )
    assert lincfa_rule(pm).tolist() == one_by_one
    assert 0 < sum(one_by_one) < J  # both outcomes occur

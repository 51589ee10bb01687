"""Published LinCFA numbers (journal Tables 1, 3, 6, 7), rerun from the authors' recipes.

Recipes and the re-runs they are compared with: ../shared/reference/lincfa.md section 4.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from dcfa import LinCFA
from dcfa.datasets import make_lincfa_bivariate, make_lincfa_tree
from dcfa.rules import eq17_threshold

pytestmark = pytest.mark.slow

# (w, sigma): (theoretical count, empirical count) over 500 repetitions, journal Table 1
TABLE_1 = {
    ((0.2, 0.8), 0.5): (0, 0),
    ((0.2, 0.8), 1.0): (0, 24),
    ((0.2, 0.8), 10.0): (500, 332),
    ((0.47, 0.52), 0.5): (500, 314),
    ((0.47, 0.52), 1.0): (500, 339),
    ((0.47, 0.52), 10.0): (500, 346),
}


@pytest.mark.parametrize("w, sigma", list(TABLE_1))
def test_bivariate_aggregation_counts_table_1(w, sigma):
    rng = np.random.default_rng(0)
    X_test, y_test = make_lincfa_bivariate(500, w, sigma, rng)
    emp = theo = 0
    r2 = []
    for _ in range(500):
        X, y = make_lincfa_bivariate(500, w, sigma, rng)
        emp += LinCFA(shuffle=False).fit(X, y).n_features_out_ == 1
        theo += np.corrcoef(X.T)[0, 1] > eq17_threshold(*w, sigma**2, 500)
        r2.append(LinearRegression().fit(X, y).score(X_test, y_test))
    paper_theo, paper_emp = TABLE_1[(w, sigma)]
    assert theo == paper_theo
    # the paper's counts come from one random run; a binomial spread of ~11 at these rates
    # and the recipe's text/code difference (reference/lincfa.md 4.1a) allow about +-40
    if paper_emp == 0:
        assert emp <= 2
    elif paper_emp < 50:
        assert 8 <= emp <= 45
    else:
        assert abs(emp - paper_emp) <= 40
    if (w, sigma) == ((0.2, 0.8), 0.5):
        assert np.mean(r2) == pytest.approx(0.781, abs=0.01)


@pytest.mark.parametrize("seed", [0, 1])
def test_hundred_features_table_3(seed):
    """D = 100, n = 500, sigma = 10: about 15 groups, and averaging beats the full OLS."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0, 1, 100)
    X_test, y_test = make_lincfa_tree(500, w, 10.0, rng)
    d, r2_cfa, r2_full = [], [], []
    for _ in range(50):
        X, y = make_lincfa_tree(500, w, 10.0, rng)
        model = LinCFA(shuffle=False).fit(X, y)
        d.append(model.n_features_out_)
        ols = LinearRegression().fit(model.transform(X), y)
        r2_cfa.append(ols.score(model.transform(X_test), y_test))
        r2_full.append(LinearRegression().fit(X, y).score(X_test, y_test))
    # paper: d = 15, R2 0.881 (LinCFA) vs 0.828 (full); re-runs over seeds: d 15.1-15.8,
    # R2 0.83-0.92 vs 0.73-0.88
    assert 13.5 <= np.mean(d) <= 17.5
    assert 0.80 <= np.mean(r2_cfa) <= 0.94
    assert np.mean(r2_cfa) > np.mean(r2_full) + 0.02

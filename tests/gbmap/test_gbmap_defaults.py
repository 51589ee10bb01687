"""GBMAP at its defaults learns, a switched-off fit says so, and a job can tell whether GBMAP
beats the linear models on its features.

The skill thresholds sit between what the defaults reach and what the former default
(``beta = 1``, whose learners switch off on standardised data) reached on the same draws:
SYNTH-COS-R(2e4, 50) test R^2 0.37-0.40 against 0.24-0.29.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import r2_score
from sklearn.model_selection import TimeSeriesSplit

import dcfa
from dcfa.batch.gbmap_check import (
    extremes_separation,
    extremes_verdict,
    gbmap_against_linear,
    inactive_line,
    step_spans,
    verdict_line,
)
from dcfa.gbmap import InactiveLearnersWarning
from dcfa.gbmap.datasets import make_synth_cos


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_regressor_learns_synth_cos(seed):
    X, y = make_synth_cos(25_000, 50, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InactiveLearnersWarning)  # no step switched off
        model = dcfa.GBMAPRegressor(random_state=0).fit(X[:20_000], y[:20_000])
    assert r2_score(y[20_000:], model.predict(X[20_000:])) >= 0.33
    assert not model.inactive_steps_.any()
    assert model.initial_loss_ == pytest.approx(1.0)  # the standardised target's variance
    assert np.all(np.diff(np.r_[model.initial_loss_, model.train_loss_]) < 0)


def test_the_default_classifier_learns_synth_cos():
    X, y = make_synth_cos(25_000, 50, task="classification", random_state=0)
    model = dcfa.GBMAPClassifier(random_state=0).fit(X[:20_000], y[:20_000])
    assert model.score(X[20_000:], y[20_000:]) >= 0.62  # logistic regression: 0.5
    assert model.initial_loss_ == pytest.approx(np.log(2))  # f0 = 0: the logit of 1/2


def test_switched_off_learners_warn_naming_beta_and_n_boosts():
    X, y = make_synth_cos(40_000, 200, random_state=0)
    with pytest.warns(
        InactiveLearnersWarning, match=r"2 of 3 boosting steps .* beta \(now 1:"
    ) as w:
        model = dcfa.GBMAPRegressor(beta=1.0, n_boosts=3, random_state=1).fit(X, y)
    assert [x.filename for x in w if x.category is InactiveLearnersWarning] == [__file__]
    assert model.inactive_steps_.tolist() == [False, True, True]
    before = np.r_[model.initial_loss_, model.train_loss_[:-1]]
    drops = before - model.train_loss_
    np.testing.assert_array_equal(drops < 1e-3 * model.initial_loss_, model.inactive_steps_)
    assert inactive_line(model) == (
        "GBMAP: 2 of 3 steps (2-3) lowered the training loss by less than 0.1 % of its first "
        "value: switched off (see gbmap.beta, now 1, and gbmap.n_boosts)"
    )
    model.inactive_steps_ = np.zeros(3, dtype=bool)
    assert inactive_line(model) is None


@given(st.sets(st.integers(1, 400), max_size=60))
def test_step_spans_name_every_step_once_in_runs(steps):
    """The job's summary names hundreds of switched-off steps in runs: expanding the runs
    gives back the steps, and no two runs touch (each is as long as it can be)."""
    text = step_spans(sorted(steps))
    runs = [tuple(map(int, r.split("-"))) if "-" in r else (int(r),) * 2 for r in
            text.split(", ")] if text else []  # fmt: skip
    expanded = [k for a, b in runs for k in range(a, b + 1)]
    assert expanded == sorted(steps)
    dashed = [tuple(map(int, r.split("-"))) for r in text.split(", ") if "-" in r]
    assert all(a < b for a, b in dashed)  # a single step is never written "7-7"
    assert all(nxt[0] > prev[1] + 1 for prev, nxt in zip(runs, runs[1:], strict=False))


def test_gbmap_against_linear_says_who_wins():
    X, y = make_synth_cos(1_500, 5, random_state=3)  # no linear signal at all
    result = gbmap_against_linear(dcfa.GBMAPRegressor(random_state=0), X, y, gap=2)
    assert result["metric"] == "r2" and set(result["scores"]) == {"gbmap", "ols", "ridge"}
    assert result["beats"] and result["mean"]["gbmap"] > 0.3 > result["mean"]["ols"]
    assert "GBMAP beats the linear model" in verdict_line(result, 5)
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(300, 4))
    linear = Z @ [1.0, -1.0, 0.5, 0.0] + 0.5 * rng.normal(size=300)
    result = gbmap_against_linear(dcfa.GBMAPRegressor(random_state=0), Z, linear)
    assert not result["beats"]
    assert "GBMAP does not beat the linear model" in verdict_line(result, 4)


def test_extremes_separation_compares_the_embedding_with_the_features():
    # the target is a sum of cosines of 20 features: kNN in the features themselves is lost
    # among the 19 that do not matter for each direction (0.73), the embedding is not (0.86)
    X, y = make_synth_cos(2_000, 20, random_state=1)
    sep = extremes_separation(dcfa.GBMAPRegressor(random_state=0), X, y)
    assert sep["embedding"] > sep["features"] + 0.1
    assert all(0 <= a <= 1 for a in sep["folds"]["embedding"] + sep["folds"]["features"])
    # the first fold by hand, in plain NumPy: a vote of the 5 nearest training extremes in
    # the L1 distance of the embedding (GBMAP's own), and in the Euclidean of the features
    train, test = next(TimeSeriesSplit(5).split(X))
    lo, hi = np.quantile(y[train], [0.2, 0.8])
    tr, te = (rows[(y[rows] <= lo) | (y[rows] >= hi)] for rows in (train, test))
    ytr, yte = y[tr] >= hi, y[te] >= hi
    model = dcfa.GBMAPRegressor(random_state=0).fit(X[train], y[train])
    mu, sd = X[train].mean(0), X[train].std(0)
    for name, a, b, p in [
        ("embedding", model.transform(X[tr]), model.transform(X[te]), 1),
        ("features", (X[tr] - mu) / sd, (X[te] - mu) / sd, 2),
    ]:
        dist = (np.abs(b[:, None, :] - a[None, :, :]) ** p).sum(-1)
        vote = ytr[np.argsort(dist, axis=1)[:, :5]].mean(1) > 0.5
        assert np.mean(vote == yte) == pytest.approx(sep["folds"][name][0], abs=1e-12), name
    # the paired test: months right in one space only, an exact binomial sum written out
    b, c = sep["only"]["embedding"], sep["only"]["features"]
    assert b + c > 0 and b > c
    tail = sum(math.comb(b + c, i) for i in range(min(b, c) + 1)) / 2 ** (b + c)
    assert sep["p_value"] == pytest.approx(min(1.0, 2 * tail), rel=1e-9)
    assert extremes_verdict(sep).startswith("the embedding separates them better than")
    assert extremes_verdict({**sep, "p_value": 0.2}).startswith("the difference is within")
    assert f"they disagree on {b + c} months, {b} of them right" in extremes_verdict(sep)


def test_more_features_than_samples_warn_before_the_fit():
    """A field's 12 408 cells for 300 months gave forward-CV R² -1.5 against ridge's +0.85,
    with only InactiveLearnersWarning's causes (none of them this one). On 2 000 features of
    five factors and 240 samples the default fits its training rows exactly."""
    from sklearn.linear_model import RidgeCV

    rng = np.random.default_rng(0)
    Z = rng.normal(size=(340, 5))
    X = Z @ rng.normal(size=(5, 2000)) + rng.normal(size=(340, 2000))
    y = Z[:, 0] + 0.5 * rng.normal(size=340)
    with pytest.warns(UserWarning, match="2,000 features for 240 samples: .* fit the training"):
        model = dcfa.GBMAPRegressor(random_state=0).fit(X[:240], y[:240])
    assert model.score(X[:240], y[:240]) > 0.999  # what the warning says
    ridge = RidgeCV(alphas=np.logspace(-2, 5, 15)).fit(X[:240], y[:240])
    assert model.score(X[240:], y[240:]) < ridge.score(X[240:], y[240:]) - 0.3
    with pytest.warns(UserWarning, match="GBMAPClassifier: 2,000 features for 240 samples"):
        dcfa.GBMAPClassifier(n_boosts=1, random_state=0).fit(X[:240], y[:240] > 0)
    # at the user's line, in a pipeline too
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipeline = make_pipeline(StandardScaler(), dcfa.GBMAPRegressor(n_boosts=1, random_state=0))
    with pytest.warns(UserWarning, match="2,000 features for 240 samples") as caught:
        pipeline.fit(X[:240], y[:240])
    assert [w.filename for w in caught if "2,000 features" in str(w.message)] == [__file__]
    with warnings.catch_warnings():  # fewer features than samples: no such warning
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", InactiveLearnersWarning)
        dcfa.GBMAPRegressor(n_boosts=2, random_state=0).fit(X[:240, :200], y[:240])

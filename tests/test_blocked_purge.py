"""blocked_cv's purge: ``gap`` samples on each side of a test block are left out of training
(a purged K-fold), checked against folds and scores written by hand."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LinearRegression
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline

from dcfa import Anomalies, GenLinCFA
from dcfa.datasets import make_regions_field
from dcfa.skill import blocked_cv


def hand_folds(n: int, k: int, gap: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Contiguous blocks (the first n % k one sample longer, as KFold cuts them); training is
    every sample more than ``gap`` samples away from the block."""
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    folds, start = [], 0
    for size in sizes:
        first, last = start, start + size - 1
        train = [i for i in range(n) if i < first - gap or i > last + gap]
        folds.append((np.array(train), np.arange(first, last + 1)))
        start += size
    return folds


def ols_r2(Xtr, ytr, Xte, yte) -> float:
    A = np.column_stack([np.ones(len(Xtr)), Xtr])
    coef = np.linalg.lstsq(A, ytr, rcond=None)[0]
    pred = np.column_stack([np.ones(len(Xte)), Xte]) @ coef
    return 1.0 - np.sum((yte - pred) ** 2) / np.sum((yte - yte.mean()) ** 2)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(16, 90), k=st.integers(2, 6), gap=st.integers(0, 30))
def test_folds_and_scores_equal_a_loop_by_hand(n, k, gap):
    """Every fold's training rows and its OLS R^2 equal the purge written out by hand; a gap
    too wide for some fold is refused, naming the widest that fits, which does fit."""
    if k > n // 4:
        return
    rng = np.random.default_rng(n * 100 + gap)
    X = rng.normal(size=(n, 2))
    y = X @ [1.0, -0.5] + rng.normal(size=n)
    folds = hand_folds(n, k, gap)
    if min(train.size for train, _ in folds) < 4:
        with pytest.raises(ValueError, match=r"^gap: .* fewer than 4; ") as info:
            blocked_cv(LinearRegression(), X, y, n_splits=k, gap=gap)
        widest = [g for g in range(gap) if min(t.size for t, _ in hand_folds(n, k, g)) >= 4]
        if widest:
            assert f"need gap <= {widest[-1]}" in str(info.value)
            blocked_cv(LinearRegression(), X, y, n_splits=k, gap=widest[-1])
        return
    skill = blocked_cv(LinearRegression(), X, y, n_splits=k, gap=gap)
    for (train, test), (ref_train, ref_test) in zip(skill.extra["folds"], folds, strict=True):
        np.testing.assert_array_equal(train, ref_train)
        np.testing.assert_array_equal(test, ref_test)
    reference = [ols_r2(X[tr], y[tr], X[te], y[te]) for tr, te in folds]
    np.testing.assert_allclose(skill.r2, reference, rtol=0, atol=1e-9)


def test_a_pipeline_is_fitted_on_the_purged_rows_only():
    """Anomalies -> GenLinCFA -> OLS on a dated Dask field: each fold's climatology and
    regions come from the purged training rows (a refit on exactly those rows by hand)."""
    ds = make_regions_field(n_time=144, shape=(6, 8), n_regions=4, land_fraction=0.0, seed=3)
    X, y = ds.field.chunk({"time": 50}), ds.target.values
    model = make_pipeline(Anomalies(), GenLinCFA(eps=0.8))
    skill = blocked_cv(model, X, y, n_splits=3, gap=12)
    reference = []
    for train, test in hand_folds(144, 3, 12):
        fitted = make_pipeline(Anomalies(), GenLinCFA(eps=0.8)).fit(X[train], y[train])
        F = np.asarray(fitted.transform(X))
        reference.append(ols_r2(F[train], y[train], F[test], y[test]))
    np.testing.assert_allclose(skill.r2, reference, rtol=0, atol=1e-8)
    assert [t.size for t, _ in skill.extra["folds"]] == [96 - 12, 96 - 24, 96 - 12]


def test_the_purge_removes_what_neighbouring_samples_leak():
    """A slowly varying target predicted from the time stamp alone by the nearest training
    sample: without a purge the samples bordering each block hand over their values; with a
    purge longer than the target's memory nothing is left to copy."""
    n = 400
    rng = np.random.default_rng(0)
    smooth = np.convolve(rng.normal(size=n + 39), np.ones(40) / 40, mode="valid")
    t = np.arange(n, dtype=float)[:, None]
    copy = KNeighborsRegressor(n_neighbors=1)
    # a block of 40 samples: its two ends sit next to a training sample without the purge
    leaky = blocked_cv(copy, t, smooth, n_splits=10)
    purged = blocked_cv(copy, t, smooth, n_splits=10, gap=40)
    assert leaky.mean > 0.3 + purged.mean, (leaky.mean, purged.mean)


@pytest.mark.parametrize("gap", [-1, 2.0, True, "3", None])
def test_a_wrong_gap_is_named_before_the_field_is_read(gap):
    ds = make_regions_field(n_time=48, shape=(4, 5), n_regions=3, land_fraction=0.0, seed=0)
    with count_computes(0), pytest.raises(ValueError, match=r"^gap: expected an int >= 0, got"):
        blocked_cv(GenLinCFA(), ds.field.chunk({"time": 12}), ds.target.values, gap=gap)
    with count_computes(0), pytest.raises(ValueError, match=r"^gap: 40 samples .* need gap <="):
        blocked_cv(GenLinCFA(), ds.field.chunk({"time": 12}), ds.target.values, gap=40)

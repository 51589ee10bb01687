"""The interval of a region's correlation with the target accounts for autocorrelation.

Two red series (AR(1), phi = 0.8) of 120 months: the usual Fisher interval with n = 120 covers
the true correlation about 65 % of the time instead of 95 %; the one with the effective sample
size of their lag-1 autocorrelations covers it as it says.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

import dcfa
from dcfa import io
from dcfa.stats.interval import correlation_interval, effective_sample_size, lag1_autocorrelation


def _pairs(phi: float, rho: float, n: int = 120, reps: int = 2000, seed: int = 0):
    """``reps`` pairs of AR(1) series whose innovations (hence values) correlate by ``rho``."""
    rng = np.random.default_rng(seed)
    e1 = rng.standard_normal((reps, n + 200))
    e2 = rho * e1 + np.sqrt(1 - rho**2) * rng.standard_normal((reps, n + 200))
    x = lfilter([1], [1, -phi], e1, axis=1)[:, 200:]
    y = lfilter([1], [1, -phi], e2, axis=1)[:, 200:]
    return x, y


def _corr(x, y):
    xc, yc = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    return (xc * yc).sum(1) / np.sqrt((xc**2).sum(1) * (yc**2).sum(1))


@pytest.mark.parametrize("phi, rho", [(0.0, 0.5), (0.5, 0.0), (0.8, 0.0), (0.8, 0.5)])
def test_the_interval_covers_the_true_correlation_as_it_says(phi, rho):
    x, y = _pairs(phi, rho)
    r, n = _corr(x, y), x.shape[1]
    n_eff = effective_sample_size(n, lag1_autocorrelation(x.T), lag1_autocorrelation(y.T))
    low, high = correlation_interval(r, n_eff)
    covered = np.mean((low <= rho) & (rho <= high))
    assert 0.93 <= covered <= 0.97, covered  # 2000 draws: +-0.01 around 0.95
    naive_low, naive_high = correlation_interval(r, n)
    naive = np.mean((naive_low <= rho) & (rho <= naive_high))
    if phi >= 0.5:
        assert naive < 0.9, naive  # what ignoring the memory of the series gives


def test_the_pieces_against_their_formulas():
    x = np.array([1.0, 3.0, 2.0, 5.0, 4.0, np.nan, 6.0])
    c = x - np.nanmean(x)
    pairs = [c[i] * c[i - 1] for i in range(1, 7) if not np.isnan(c[i] * c[i - 1])]
    assert lag1_autocorrelation(x) == pytest.approx(sum(pairs) / np.nansum(c * c))
    assert effective_sample_size(100, 0.5, 0.4) == pytest.approx(100 * 0.8 / 1.2)
    assert effective_sample_size(100, -0.5, 0.4) == 100  # never more than n
    low, high = correlation_interval(0.3, 50.0)
    half = 1.959963984540054 / np.sqrt(47.0)
    z = np.arctanh(0.3)
    assert (low, high) == pytest.approx((np.tanh(z - half), np.tanh(z + half)))
    assert correlation_interval(0.3, 3.0) == pytest.approx((-1.0, 1.0))


def test_the_result_store_carries_each_groups_interval(tmp_path):
    from support import make_archive

    make_archive(tmp_path / "a.zarr", n=120)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    y = lfilter([1], [1, -0.7], np.random.default_rng(1).standard_normal(120))
    model = dcfa.LinCFA(random_state=0, neighbors=1).fit(field, y)
    ds = io.result_dataset(model, field, target=y).compute()
    F = ds["features"].values.astype(np.float64)  # what the store holds
    Fc, yc = F - F.mean(0), y - y.mean()
    r = (Fc * yc[:, None]).sum(0) / np.sqrt((Fc**2).sum(0) * (yc @ yc))
    a = (Fc[1:] * Fc[:-1]).sum(0) / (Fc**2).sum(0)
    b = (yc[1:] @ yc[:-1]) / (yc @ yc)
    n_eff = np.minimum(120 * (1 - a * b) / (1 + a * b), 120)
    z, half = np.arctanh(r), 1.959963984540054 / np.sqrt(n_eff - 3)
    np.testing.assert_allclose(ds["group_target_n_eff"].values, n_eff, rtol=1e-5)
    np.testing.assert_allclose(ds["group_target_corr_low"].values, np.tanh(z - half), atol=1e-5)
    np.testing.assert_allclose(ds["group_target_corr_high"].values, np.tanh(z + half), atol=1e-5)
    assert (ds["group_target_corr_low"] < ds["group_target_corr"]).all()

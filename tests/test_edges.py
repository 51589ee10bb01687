"""Edge cases of the pure functions that a mutation run found untested: each assertion is
against a plain-NumPy or by-hand reference, and fails if the function is changed in the way
noted beside it (an off-by-one, a bound, a dropped check)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from dcfa._errors import InputError
from dcfa.cfa.aggregate import aggregate, broadcast_back
from dcfa.cfa.agreement import comembership
from dcfa.cfa.hierarchy import group_adjacency
from dcfa.cfa.selection import warn_if_no_skill, within_noise
from dcfa.geo import group_circular_mean, group_mean, hemisphere, is_global_longitude
from dcfa.io.calendars import _numeric_day_month_format, date_span, sample_keys
from dcfa.neighbors import grid_adjacency

# -- selection ------------------------------------------------------------------------------


def test_within_noise_reads_the_paired_standard_error_of_the_folds():
    """A smaller map 0.01 below the best, its paired standard error 0.0091 (ddof=1 over 4
    folds, / sqrt(4)): out of the noise, so the larger map stays (/ sqrt(3) would take it)."""
    best = np.array([0.5, 0.6, 0.7, 0.8])
    d = np.array([0.01, -0.03, 0.0, -0.02])
    se = d.std(ddof=1) / np.sqrt(d.size)
    assert se < -d.mean() < d.std(ddof=1) / np.sqrt(d.size - 1)
    assert within_noise(np.stack([best, best + d]), np.array([10, 2])) == 0


def test_within_noise_takes_the_better_of_two_maps_of_the_fewest_groups():
    best = np.array([0.5, 0.6, 0.7, 0.8])
    worse = best + np.array([0.01, -0.02, 0.005, -0.003])  # 0.002 below the best: within
    better = best + np.array([0.012, -0.018, 0.007, -0.002])  # 0.00025 below the best
    skill = np.stack([best, worse, better])
    for d in (worse - best, better - best):
        assert -d.mean() <= d.std(ddof=1) / np.sqrt(d.size)
    assert within_noise(skill, np.array([10, 3, 3])) == 2


def test_no_skill_message_when_the_best_mean_is_exactly_zero():
    with pytest.warns(UserWarning, match=r"no map beats the climatology"):
        warn_if_no_skill("Est", "map", [0.0, -0.1], [0.0, 0.0, 0.0], "the map")


def test_comembership_is_the_jaccard_index_over_each_map_s_cells():
    """A cell the other map leaves out counts in this map's group: {0, 1, 2} against {0, 1}
    is 2/3, by sets."""
    got = comembership(np.array([0, 0, 0]), [np.array([0, 0, -1])])
    jaccard = len({0, 1} & {0, 1, 2}) / len({0, 1} | {0, 1, 2})
    np.testing.assert_allclose(got, [jaccard, jaccard, 0.0])
    np.testing.assert_array_equal(comembership(np.array([0, -1]), []), [1.0, np.nan])


# -- geo ------------------------------------------------------------------------------------


def test_group_mean_ignores_labels_beyond_its_groups():
    np.testing.assert_array_equal(group_mean([0, 1, 2], [1.0, 2.0, 3.0], 2), [1.0, 2.0])


def test_a_missing_weight_is_ignored_in_a_circular_mean():
    got = group_circular_mean([0, 0, 0], [10.0, 20.0, 30.0], 1, weights=[1.0, 1.0, np.nan])
    np.testing.assert_allclose(got, [15.0])


def test_the_dateline_is_180_east_either_way():
    assert hemisphere(180.0, "lon") == (180.0, "E")
    assert hemisphere(-180.0, "lon") == (180.0, "E")


def test_a_global_grid_stored_rounded_still_wraps():
    lon = np.arange(0.0, 360.0, 5.0) + np.tile([0.02, -0.02], 36)  # 2 % of a step off
    assert is_global_longitude(lon)
    assert not is_global_longitude(np.arange(0.0, 300.0, 5.0))


# -- calendars ------------------------------------------------------------------------------


def test_month_keys_are_the_dates_own_months():
    dates = pd.DatetimeIndex(
        [pd.Timestamp(t) for t in ("1999-12-31 23:00", "2000-01-01", "2000-12-15", "2001-02-28")]
    )
    coord = xr.DataArray(dates, dims="time")
    year, month = np.divmod(np.asarray(sample_keys(coord, "standard", "month")), 12)
    np.testing.assert_array_equal(year, dates.year)
    np.testing.assert_array_equal(month + 1, dates.month)


def test_exact_keys_keep_the_hours():
    dates = pd.date_range("2000-01-01", periods=8, freq="6h")
    keys = sample_keys(xr.DataArray(dates, dims="time"), "standard", "exact")
    assert len(set(keys)) == len(dates)


def test_day_first_dates_with_december_are_read_day_first():
    """Every date of 2000 on its first day, written day first: 01/12/2000 is 1 December (a
    second number of 12 is a month); both orders fit every row, so it is refused."""
    every = pd.Series([f"01/{m:02d}/2000" for m in range(1, 13)])
    with pytest.raises(InputError, match="day first or month first in every row"):
        _numeric_day_month_format(every, "t")
    assert _numeric_day_month_format(pd.Series(["25/12/2000", "26/11/2000"]), "t") == "%d/%m/%Y"
    assert _numeric_day_month_format(pd.Series(["12/25/2000", "11/26/2000"]), "t") == "%m/%d/%Y"


def test_a_span_is_of_the_first_and_last_dates_in_any_order():
    dates = pd.to_datetime(["2001-03-01", "2001-01-01", "2001-02-01"])
    text = date_span(xr.DataArray(dates, dims="time"), "standard", "month")
    assert "2001-01 .. 2001-03" in text


# -- hierarchy ------------------------------------------------------------------------------


def test_a_group_is_not_its_own_neighbour():
    labels = np.array([0, 0, 1, 0, 1, 1, 2, 2, 2])
    A = group_adjacency(grid_adjacency((3, 3), 1), labels)
    assert A.diagonal().sum() == 0
    dense = np.zeros((3, 3), dtype=bool)  # by hand: groups whose cells touch
    grid = grid_adjacency((3, 3), 1).toarray()
    for i, j in zip(*np.nonzero(grid), strict=True):
        if labels[i] != labels[j]:
            dense[labels[i], labels[j]] = True
    np.testing.assert_array_equal(A.toarray().astype(bool), dense)


# -- aggregate ------------------------------------------------------------------------------


def _per_group(X, labels, fn):
    return np.stack([fn(X[:, labels == g]) for g in range(labels.max() + 1)], axis=1)


@pytest.mark.parametrize("weighted", [False, True])
def test_sums_of_gappy_rows_scale_the_observed_mean_to_the_whole_group(weighted):
    """aggregation='sum' with missing values: the weighted mean of a row's observed members
    times the group's total weight (its size, unweighted)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 7))
    X[1, 0] = X[3, 4] = np.nan
    labels = np.array([0, 0, 1, 1, 1, 2, 2])
    w = rng.uniform(0.5, 2.0, 7) if weighted else np.ones(7)
    got = aggregate(X, labels, np.ones(7), np.zeros(7), how="sum", nan_aware=True,
                    weights=w if weighted else None)  # fmt: skip
    expected = np.empty((6, 3))
    for g in range(3):
        m = labels == g
        for t in range(6):
            ok = np.isfinite(X[t, m])
            expected[t, g] = (X[t, m][ok] * w[m][ok]).sum() / w[m][ok].sum() * w[m].sum()
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_sums_broadcast_back_as_each_member_s_share():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, 6))
    labels = np.array([0, 1, 1, 2, 2, 2])
    sums = aggregate(X, labels, np.ones(6), np.zeros(6), how="sum")
    back = broadcast_back(sums, labels, np.ones(6), np.zeros(6), how="sum")
    means = _per_group(X, labels, lambda v: v.mean(axis=1))
    np.testing.assert_allclose(back, means[:, labels], rtol=1e-12)

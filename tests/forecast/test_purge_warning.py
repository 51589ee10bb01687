"""A target at a lead carries it (its ``target_time``): a cross-validation purged by less than
the lead, the outer one (forward_cv, blocked_cv) or an estimator's own folds (RegionsCV,
GenLinCFACV), is warned of at the user's line, naming the argument and the value it needs."""

from __future__ import annotations

import warnings

import cftime
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.pipeline import make_pipeline

import dcfa
from dcfa.forecast.leads import lead_of


def _labels(kind: str, n: int):
    if kind == "monthly":
        return pd.date_range("1950-01-01", periods=n, freq="MS")
    if kind == "mid-month noleap":
        return xr.date_range("1950-01-16", periods=n, freq="MS", calendar="noleap") + pd.Timedelta(
            days=15
        )
    if kind == "daily":
        return pd.date_range("2000-01-01", periods=n, freq="D")
    return np.arange(n) * 5  # numbers on a step of 5


UNITS = {"monthly": "month", "mid-month noleap": "month", "daily": "day", "numbers": "step of 5"}


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(sorted(UNITS)),
    lead=st.integers(0, 30),
    n=st.integers(40, 90),
    dropped=st.lists(st.integers(0, 39), max_size=3),
)
def test_the_lead_is_read_back_from_the_labels(kind, lead, n, dropped):
    """Against the lead given to lead_target, months missing from both records or not."""
    time = _labels(kind, n)
    keep = np.setdiff1d(np.arange(n), dropped)
    x = xr.DataArray(np.arange(n, dtype=float), dims="time", coords={"time": time})[keep]
    _, y, _ = dcfa.lead_target(x, x, lead=lead)
    assert lead_of(y) == (lead, UNITS[kind])


def test_no_lead_without_the_target_time_or_with_offsets_that_vary():
    time = pd.date_range("1950-01-01", periods=24, freq="MS")
    y = xr.DataArray(np.zeros(24), dims="time", coords={"time": time})
    assert lead_of(y) is None
    assert lead_of(y.values) is None
    assert lead_of(pd.Series(0.0, index=time)) is None
    valid = time + pd.DateOffset(months=2)
    assert lead_of(y.assign_coords(target_time=("time", valid))) == (2, "month")
    uneven = valid.values.copy()
    uneven[5] = np.datetime64("1951-01-01")  # 10 months after its predictor, not 2
    assert lead_of(y.assign_coords(target_time=("time", uneven))) is None
    assert lead_of(y.assign_coords(target_time=("time", valid)).drop_vars("time")) is None


@pytest.fixture(scope="module")
def at_lead_3():
    ds = dcfa.datasets.make_regions_field(120, (6, 12), 4, n_active=2, seed=3)
    X, y, _ = dcfa.lead_target(ds.field, ds.target, lead=3)
    return X, y


def _caught(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", dcfa.NoSkillWarning)
        call()
    return [w for w in caught if "ahead (its target_time" in str(w.message)]


@pytest.mark.parametrize("estimator", [dcfa.RegionsCV, dcfa.GenLinCFACV])
def test_a_fit_whose_folds_are_purged_by_less_than_the_lead_is_warned_of(at_lead_3, estimator):
    X, y = at_lead_3
    params = {"orders": ("relevance",)} if estimator is dcfa.RegionsCV else {"n_splits": 3}
    (w,) = _caught(lambda: estimator(gap=2, **params).fit(X, y))
    assert w.filename == __file__  # the user's line, not dcfa's
    assert str(w.message).startswith("gap=2: y is a target 3 months ahead")
    assert "pass gap=3" in str(w.message)
    assert _caught(lambda: estimator(gap=3, **params).fit(X, y)) == []
    assert _caught(lambda: estimator(gap=0, **params).fit(X, y.values)) == []  # no labels


@pytest.mark.parametrize("cv", [dcfa.forward_cv, dcfa.blocked_cv])
def test_the_cv_names_its_own_gap_and_its_models(at_lead_3, cv):
    """The refits see y as an array, so the CV speaks for the estimator inside it."""
    X, y = at_lead_3
    inner = dcfa.RegionsCV(orders=("relevance",), n_splits=3)
    model = make_pipeline(dcfa.Anomalies(), inner)
    (w,) = _caught(lambda: cv(model, X, y, n_splits=3, gap=1))
    assert w.filename == __file__
    assert str(w.message).startswith("gap=1 and RegionsCV.gap=0: y is a target 3 months")
    assert "pass gap=3, RegionsCV.gap=3 (" in str(w.message)
    inner.set_params(gap=3)
    (w,) = _caught(lambda: cv(model, X, y, n_splits=3, gap=0))
    assert str(w.message).startswith("gap=0: ")
    assert _caught(lambda: cv(model, X, y, n_splits=3, gap=3)) == []


def test_cftime_targets_carry_their_lead_too():
    time = xr.date_range("1950-01-01", periods=48, freq="MS", calendar="360_day")
    assert isinstance(time[0], cftime.Datetime360Day)
    x = xr.DataArray(np.arange(48.0), dims="time", coords={"time": time})
    _, y, _ = dcfa.lead_target(x, x, lead=6)
    assert lead_of(y) == (6, "month")


def test_a_model_calendar_field_and_a_dated_target_carry_their_lead():
    """A noleap field and a target file's datetime64 dates, paired by month: the lead was
    not read back (the two calendars share no step), so a short purge went unwarned."""
    ds = dcfa.datasets.make_regions_field(120, (6, 12), 4, n_active=2, seed=3)
    noleap = xr.date_range("1990-01-01", periods=120, freq="MS", calendar="noleap")
    field = ds.field.assign_coords(time=noleap)
    target = pd.Series(ds.target.values, index=pd.date_range("1990-01-15", periods=120, freq="MS"))
    X, y, _ = dcfa.lead_target(field, target, 3, match="month")
    assert y["target_time"].dtype.kind == "M" and X["time"].dtype == object
    assert lead_of(y) == (3, "month")
    (w,) = _caught(lambda: dcfa.RegionsCV(gap=1, orders=("relevance",)).fit(X, y))
    assert str(w.message).startswith("gap=1: y is a target 3 months ahead")
    # one side not monthly (every other month dropped): no lead read
    assert lead_of(y.isel(time=slice(None, None, 2)).isel(time=[0, 1, 3])) is None

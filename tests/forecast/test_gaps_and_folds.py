"""Leads and lags count calendar steps across gaps of the labels; NonLinCFA takes a list of
(train, test) folds; forward-CV messages (forward_cv, GenLinCFACV) name the argument at fault."""

from __future__ import annotations

import itertools
import re

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, TimeSeriesSplit

import dcfa
from dcfa.cfa.folds import make_folds
from dcfa.forecast import lagged, lead_target, trailing_windows
from dcfa.skill import _forward_splitter

N = 72  # months, 1950-01 .. 1955-12
TIME = pd.date_range("1950-01-01", periods=N, freq="MS")
GAP = np.datetime64("1955-06-01")  # TIME[65]


def months(dates) -> np.ndarray:
    """Month numbers ``12 * year + month`` of datetime64 or cftime dates."""
    d = xr.DataArray(np.asarray(dates), dims="s").dt
    return 12 * d.year.values + d.month.values


def series(values, time=TIME, name="soi") -> xr.DataArray:
    return xr.DataArray(values, dims="time", coords={"time": time}, name=name)


def field(values, time=TIME) -> xr.DataArray:
    return xr.DataArray(
        values, dims=("time", "cell"), coords={"time": time, "cell": np.arange(values.shape[1])}
    )


X_FULL = np.random.default_rng(0).normal(size=(N, 3))
Y_FULL = np.arange(N, dtype=float) * 10.0  # y of month k is 10 k: the pairing is readable


def drop_gap(a: xr.DataArray) -> xr.DataArray:
    return a.where(a.time != GAP).dropna("time")


# --------------------------------------------------------------------------------------------
# 1. lead_target, lagged and trailing_windows count months across gaps of the labels


def test_lead_with_the_same_gap_in_both_pairs_months_by_label():
    """The review's case: 1955-06 dropped from both, aligned; lead 3 must stay 3 months."""
    sst, soi = field(X_FULL), drop_gap(series(Y_FULL))
    X, t = xr.align(sst, soi, join="inner")
    X, y, how = lead_target(X, t, lead=3)
    np.testing.assert_array_equal(months(y.target_time.values) - months(X.time.values), 3)
    k = months(X.time.values) - months(TIME[:1])  # month index of every predictor
    np.testing.assert_array_equal(y.values, (k + 3) * 10.0)
    np.testing.assert_array_equal(X.values, X_FULL[k])
    # 1955-03 (its target 1955-06 is missing) and the last 3 months are dropped
    assert np.datetime64("1955-03-01") not in X.time.values
    assert (how.n_samples, how.n_input, how.n_gaps) == (N - 1 - 3 - 1, N - 1, 1)
    assert how.first_gap == pd.Timestamp("1955-03-01") and how.step == "month"
    assert str(how).endswith(
        "; 1 predictor dropped at a gap: no target 3 months later (first 1955-03-01)"
    )


@pytest.mark.parametrize("kind", ["dataarray", "series", "numpy"])
def test_lead_with_a_gap_in_the_field_only(kind):
    """The target is complete: every predictor pairs with the month 3 later; a target given
    as one value per field sample has the field's (gapped) labels."""
    X0 = drop_gap(field(X_FULL))
    k = months(X0.time.values) - months(TIME[:1])
    target = {
        "dataarray": series(Y_FULL),
        "series": pd.Series(Y_FULL, index=TIME),
        "numpy": Y_FULL[k],  # one value per sample of the field
    }[kind]
    X, y, how = lead_target(X0, target, 3)
    np.testing.assert_array_equal(months(y.target_time.values) - months(X.time.values), 3)
    kx = months(X.time.values) - months(TIME[:1])
    np.testing.assert_array_equal(y.values, (kx + 3) * 10.0)
    np.testing.assert_array_equal(X.values, X_FULL[kx])
    gaps = 1 if kind == "numpy" else 0  # 1955-03's target 1955-06 exists unless from X
    assert how.n_gaps == gaps and how.n_samples == N - 1 - 3 - gaps


@pytest.mark.parametrize("match", ["exact", "month"])
def test_lead_with_a_gap_in_the_target_only_keeps_the_gap_months_predictors(match):
    """A month left out of the target's rows (1955-06): its own predictor is paired with the
    target 3 months later, which exists; only 1955-03, whose target is the gap, is dropped
    (the month's predictor was lost, or the call refused)."""
    X, y, how = lead_target(field(X_FULL), drop_gap(series(Y_FULL)), 3, match=match)
    k = months(X.time.values) - months(TIME[:1])
    np.testing.assert_array_equal(y.values, (k + 3) * 10.0)
    assert np.datetime64("1955-06-01") in X.time.values
    assert np.datetime64("1955-03-01") not in X.time.values
    assert (how.n_samples, how.n_gaps) == (N - 3 - 1, 1)


def test_lead_on_gapped_noleap_and_yearly_and_daily_labels():
    noleap = xr.date_range("2250-01-01", periods=36, freq="MS", calendar="noleap", use_cftime=True)
    keep = np.ones(36, dtype=bool)
    keep[[7, 20]] = False
    time = noleap[keep]
    X, y, how = lead_target(field(X_FULL[:36][keep], time), series(np.arange(36.0)[keep], time), 2)
    np.testing.assert_array_equal(months(y.target_time.values) - months(X.time.values), 2)
    np.testing.assert_array_equal(y.values, months(y.target_time.values) - months(noleap[:1]))
    assert (how.n_gaps, how.n_samples) == (2, 34 - 2 - 2)

    years = pd.date_range("1900-01-01", periods=10, freq="YS").delete(4)
    _, y, how = lead_target(field(X_FULL[:9], years), series(np.arange(9.0), years), 1)
    assert (y.target_time.dt.year - y.time.dt.year == 1).all() and how.step == "year"
    assert "no target 1 year later (first 1903-01-01)" in str(how)

    days = pd.date_range("2000-02-25", periods=10, freq="D").delete([3, 4])
    _, y, how = lead_target(field(X_FULL[:8], days), series(np.arange(8.0), days), 2)
    assert ((y.target_time - y.time) == np.timedelta64(2, "D")).all() and how.n_gaps == 2


def test_lead_without_a_regular_step_counts_samples():
    """Irregular dates (no calendar step fits): the lead counts the target's samples."""
    time = pd.DatetimeIndex(["2000-01-01", "2000-01-04", "2000-02-20", "2000-07-01", "2001-01-09"])
    X, y, how = lead_target(field(X_FULL[:5], time), series(np.arange(5.0), time), 1)
    np.testing.assert_array_equal(y.values, [1.0, 2.0, 3.0, 4.0])
    assert how.step == "sample" and how.n_gaps == 0


@pytest.mark.parametrize("chunks", [None, 5])
def test_lags_and_windows_count_months_across_a_gap(chunks):
    """The predictors of a gapped field equal those of the complete field at the months kept;
    a sample whose lag or window reaches the missing month is dropped."""
    full = field(X_FULL)
    gapped = drop_gap(full)
    if chunks:
        gapped = gapped.chunk({"time": chunks})
    with pytest.warns(UserWarning, match="dropped at gaps"):
        out = lagged(trailing_windows(gapped, [1, 3], aggregate="sum"), [0, 2])
    ref = lagged(trailing_windows(full, [1, 3], aggregate="sum"), [0, 2])
    t = out.time.values
    # months whose lag-2 window of 3 (t-4 .. t) or lag-0 window (t-2 .. t) holds 1955-06
    k = months(t) - months(TIME[:1])
    assert not np.isin(65, np.concatenate([k - j for j in range(5)]))
    expected = ref.sel(time=t)
    np.testing.assert_array_equal(out.values, expected.values)
    lost = set(ref.time.values) - set(t)
    assert lost == set(TIME[65:70].to_numpy())  # 1955-06 itself and the 4 after it
    np.testing.assert_array_equal(out.sel(lag=2, window=1).values[:, 0], X_FULL[k - 2, 0])


def test_samples_dropped_at_a_gap_are_counted_and_the_edge_is_not():
    """A walkthrough's daily record missing 5 % of its days lost 77 % of its samples to
    30-day windows without a word. The samples a gap drops are counted (not those whose
    windows reach before the record: every field loses those); a field without gaps says
    nothing."""
    import warnings

    gapped = drop_gap(field(X_FULL))
    n = gapped.sizes["time"]
    with pytest.warns(UserWarning) as seen:
        windows = trailing_windows(gapped, [1, 3], aggregate="sum")
    (warning,) = seen
    assert str(warning.message).startswith(
        f"windows: 2 of {n - 2} samples dropped at gaps (3%): their windows [1, 3] reach a "
        "date missing from the field (the first such sample 1955-07-01)"
    )
    assert warning.filename == __file__
    with pytest.warns(UserWarning, match=rf"^lags: 2 of {n - 2 - 2 - 2} samples dropped at g"):
        lagged(windows, [0, 2])
    # a Dataset's variables are lagged one by one, deeper in dcfa: still the user's line
    for shift in (lagged, trailing_windows):
        with pytest.warns(UserWarning, match="samples dropped at gaps") as seen:
            shift(gapped.to_dataset(name="sst"), [1, 3])
        assert seen[0].filename == __file__, shift
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lagged(trailing_windows(field(X_FULL), [1, 3]), [0, 2])


def test_the_share_dropped_at_a_gap_is_of_the_samples_inside_the_record():
    """Ten months without June: of the 7 samples whose 3-month windows start inside the
    record, July's and August's reach June (2 of 7: 29 %, not 2 of the 9 rows)."""
    short = field(X_FULL[:10], TIME[:10])
    short = short.isel(time=[i for i in range(10) if i != 5])
    with pytest.warns(UserWarning, match=r"^windows: 2 of 7 samples dropped at gaps \(29%\): .*"
                      r"\(the first such sample 1950-07-01\)"):  # fmt: skip
        trailing_windows(short, [3])


def test_gap_free_lags_stay_slices():
    """No gap: the lags are the old positional slices, bit for bit, on Dask too."""
    x = field(X_FULL).chunk({"time": 7})
    with count_computes(0):
        out = lagged(x, [0, 1])
    np.testing.assert_array_equal(out.sel(lag=1).values, X_FULL[:-1])
    np.testing.assert_array_equal(out.time.values, TIME[1:].to_numpy())


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda x: lagged(x, [0, 2]), "lags"),  # Jun's lag 2 is April: missing
        (lambda x: trailing_windows(x, [1, 3]), "windows"),
    ],
)
def test_no_complete_sample_across_gaps_names_the_argument(call, name):
    x = field(X_FULL[:6], TIME[:6]).isel(time=[0, 1, 4, 5])  # Jan, Feb, May, Jun
    with pytest.raises(ValueError, match=rf"^{name}: .* gaps \(the first after 1950-02-01\)"):
        call(x)


# --------------------------------------------------------------------------------------------
# 2. NonLinCFA's cv: an iterable of (train, test) pairs, as scikit-learn's check_cv


RNG = np.random.default_rng(1)
XC = RNG.normal(size=(60, 6)) + RNG.normal(size=(60, 1))
YC = XC[:, :3].sum(axis=1) + RNG.normal(size=60)


@pytest.mark.parametrize("splitter", [KFold(4), TimeSeriesSplit(3), TimeSeriesSplit(3, gap=2)])
def test_nonlincfa_takes_a_list_of_folds(splitter):
    ref = dcfa.NonLinCFA(eps=1e-3, cv=splitter).fit(XC, YC)
    got = dcfa.NonLinCFA(eps=1e-3, cv=list(splitter.split(XC))).fit(XC, YC)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    assert got.folds_ == ref.folds_ == make_folds(splitter, 60)


def test_cv_none_is_five_folds():
    assert make_folds(None, 60) == make_folds(KFold(5), 60)


@pytest.mark.parametrize(
    "cv, error, match",
    [
        (2.5, TypeError, r"^cv: expected an int, a cross-validation splitter or an iterable"),
        ("abc", TypeError, r"^cv: expected an int"),
        (object(), TypeError, r"got a value of type object$"),
        ([np.arange(3)], ValueError, r"^cv: expected an iterable of \(train, test\)"),
        (list(KFold(4).split(np.zeros(80))), ValueError, r"holds row 79, not among the 60"),
        ([(np.arange(10.0), np.arange(10, 20))], ValueError, r"not a 1-D array of row indices"),
    ],
)
def test_bad_cv_is_described_briefly(cv, error, match):
    with pytest.raises(error, match=match) as e:
        make_folds(cv, 60)
    assert "array(" not in str(e.value) and len(str(e.value)) < 300


def test_nonlincfacv_refuses_a_fixed_list_of_folds():
    folds = list(KFold(3).split(XC))  # for 60 rows; NonLinCFACV partitions shorter prefixes
    model = dcfa.NonLinCFACV(n_splits=2, cv=folds, epsilons=(1e-3,))
    with pytest.raises(ValueError, match=r"^cv: fold 0's .* not among the 20 samples"):
        model.fit(XC, YC)


# --------------------------------------------------------------------------------------------
# 3. forward-chaining CV: the message names the argument at fault and the value it needs


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(min_train=1000), r"^min_train: .*; need min_train <= 290$"),
        # min_train chosen on purpose: fewer folds keep it
        (
            dict(n_splits=100, min_train=120),
            r"^min_train: .*; need min_train <= 100, or n_splits <= 90$",
        ),
        (dict(gap=290), r"^gap: 300 samples, n_splits=5, gap=290: .*; need gap <= 46$"),
        (dict(gap=290, min_train=5), r"^gap: .*; need gap <= 285$"),
        (dict(gap=95, min_train=200), r"^gap: .*; need gap <= 90$"),
        (dict(test_size=100), r"^test_size: .*; need test_size <= 59$"),
        (dict(n_splits=200), r"^n_splits: .*; need n_splits <= 148$"),
    ],
)
def test_forward_cv_names_the_argument_at_fault(kwargs, message):
    """Bad input, as dcfa's checks raise it (an InputError: it was a plain ValueError, a bug's
    type)."""
    X = np.random.default_rng(2).normal(size=(300, 3))
    with pytest.raises(dcfa.InputError, match=message) as e:
        dcfa.forward_cv(LinearRegression(), X, X[:, 0], **kwargs)
    assert not re.search(r"-\d", str(e.value))  # no negative block or window lengths


def test_forward_cv_checks_before_reading_a_dask_field():
    X = xr.DataArray(da.zeros((300, 4), chunks=(50, 4)), dims=("time", "cell"))
    with count_computes(0), pytest.raises(ValueError, match=r"^min_train: "):
        dcfa.forward_cv(LinearRegression(), X, np.zeros(300), min_train=1000)


def test_genlincfacv_names_the_gap_and_the_largest_that_fits():
    """GenLinCFACV(gap=290) on 300 samples blamed n_splits; the purge is at fault, and 56 (4
    test blocks of 60 and 4 training samples left) is the largest gap that fits."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 6)), rng.normal(size=300)
    with pytest.raises(ValueError, match=r"^gap: 290 leaves 0 samples .*; need gap <= 56$"):
        dcfa.GenLinCFACV(epsilons=[0.7], gap=290).fit(X, y)
    with pytest.warns(dcfa.NoSkillWarning):  # noise: the gap is what is tested
        dcfa.GenLinCFACV(epsilons=[0.7], gap=56).fit(X, y)
    with pytest.raises(ValueError, match=r"^gap: 57 leaves 3 samples"):
        dcfa.GenLinCFACV(epsilons=[0.7], gap=57).fit(X, y)
    with pytest.raises(ValueError, match=r"^n_splits: 200 forward folds .* test blocks of 1"):
        dcfa.GenLinCFACV(epsilons=[0.7], n_splits=200).fit(X, y)


def test_the_bound_named_is_the_largest_that_fits():
    from dcfa.skill import _fits  # whether the folds fit

    grid = itertools.product([9, 40, 101], [2, 5, 30], [0, 6, 25], [None, 4, 10, 35], [None, 2, 8])
    for n, k, gap, min_train, test_size in grid:
        args = dict(n_splits=k, gap=gap, min_train=min_train, test_size=test_size)
        try:
            _forward_splitter(n, **args, max_train_size=None)
            assert _fits(n, **args)
            continue
        except ValueError as exc:
            msg = str(exc)
        assert not _fits(n, **args)
        m = re.search(r"; need (gap|min_train|test_size) <= (\d+)$", msg)
        if m:
            arg, best = m.group(1), int(m.group(2))
            assert msg.startswith(f"{arg}: ")
            assert _fits(n, **{**args, arg: best}) and not _fits(n, **{**args, arg: best + 1})
        if gap and _fits(n, **{**args, "gap": 0}):
            assert msg.startswith("gap: "), msg

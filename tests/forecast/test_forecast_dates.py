"""Forecast predictors as a demanding user meets them: a field stored latest-first, a record
whose date stamps change convention, targets that are not one series, labels of another kind
(calendar, strings, time zone), CSV dates with a time zone. Every reference is built by hand
from month numbers (NumPy), independently of dcfa's label steps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

import dcfa
from dcfa import io
from dcfa.forecast import lagged, lead_target, trailing_windows

N = 36
TIME = pd.date_range("2000-01-01", periods=N, freq="MS")


def month_index(dates) -> np.ndarray:
    """``12 * year + month - 1`` of datetime64 or cftime dates, from 2000-01 (0)."""
    d = xr.DataArray(np.asarray(dates), dims="s").dt
    return 12 * (d.year.values - 2000) + d.month.values - 1


def by_month(time, cells: int = 2) -> xr.DataArray:
    """A field whose value is its month number (plus the cell): lags read as months."""
    k = month_index(time).astype(float)
    values = k[:, None] + 100.0 * np.arange(cells)
    return xr.DataArray(
        values,
        dims=("time", "cell"),
        coords={"time": time, "cell": np.arange(cells)},
        name="sst",
        attrs={"units": "K"},
    )


def reference_lags(k: np.ndarray, lags: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Months kept (every lag in the record) and their lagged month numbers, by hand."""
    have = set(k.tolist())
    kept = np.array([t for t in k if all(t - L in have for L in lags)])
    return kept, np.stack([kept - L for L in lags], axis=1)


# --------------------------------------------------------------------------------------------
# 1. a field stored latest-first: lags and windows count its past, never its future


@settings(max_examples=25, deadline=None)
@given(
    drop=st.sets(st.integers(0, N - 1), max_size=4),
    lags=st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True),
    window=st.integers(1, 4),
    data=st.data(),
)
def test_lags_and_windows_of_a_latest_first_field_are_its_past(drop, lags, window, data):
    """Lag L at month t holds month t - L and a window the months t - w + 1 .. t, in any order
    of storage (before: positions were counted, so lag 1 of a latest-first field was the
    month after: the future)."""
    time = TIME.delete(sorted(drop))
    f = by_month(time).isel(time=slice(None, None, -1))  # latest-first
    if data.draw(st.booleans()):
        f = f.chunk({"time": data.draw(chunks(f.sizes["time"]))})
    k = month_index(time)
    kept, ref = reference_lags(k, lags)
    if kept.size == 0:
        with pytest.raises(ValueError, match="^lags:"):
            lagged(f, lags)
        return
    out = lagged(f, lags)
    got_k = month_index(out.time.values)
    assert (np.diff(got_k) < 0).all()  # the field's order is kept
    order = np.argsort(got_k)
    np.testing.assert_array_equal(got_k[order], kept)
    np.testing.assert_array_equal(out.isel(cell=0).values[order], ref)

    kept_w, months = reference_lags(k, list(range(window)))
    if kept_w.size:
        w = trailing_windows(f, [window], aggregate="sum").isel(window=0, cell=1)
        order = np.argsort(month_index(w.time.values))
        np.testing.assert_array_equal(month_index(w.time.values)[order], kept_w)
        np.testing.assert_array_equal(w.values[order], (months + 100.0).sum(axis=1))


def test_latest_first_labels_on_no_step_are_refused():
    """Irregular dates out of order cannot be counted by date nor by position: refused."""
    time = pd.DatetimeIndex(["2001-03-09", "2000-07-01", "2000-02-20", "2000-01-04"])
    f = by_month(time)
    with pytest.raises(ValueError, match=r"^field: .*do not increase.*sortby\('time'\)"):
        lagged(f, [0, 1])
    with pytest.raises(ValueError, match=r"^field: .*do not increase"):
        trailing_windows(f, [2])
    assert lagged(f.sortby("time"), [0, 1]).sizes["time"] == 3  # sorted: positions, as before


def test_latest_first_gaps_leaving_nothing_name_lags():
    """Every sample's lag in a gap: the message names lags and the first gap in time."""
    time = TIME[[0, 1, 4, 5, 8, 9]][::-1]
    with pytest.raises(ValueError, match=r"^lags: \[0, 2\] .*first after 2000-02-01"):
        lagged(by_month(time), [0, 2])


def test_latest_first_lags_stay_lazy():
    f = by_month(TIME).isel(time=slice(None, None, -1)).chunk({"time": 7})
    with count_computes(0):
        out = lagged(trailing_windows(f, [1, 3]), [0, 1])
    assert out.chunks is not None and out.attrs["units"] == "K" and out.name == "sst"


# --------------------------------------------------------------------------------------------
# 2. a record joined from two sources: first-of-month stamps, then mid-month


def joined(drop: list[int]) -> pd.DatetimeIndex:
    t = TIME[:18].append(TIME[18:] + pd.Timedelta(days=14))  # 1st, then the 15th
    return t.delete(drop)


def test_lags_windows_and_lead_count_months_across_a_change_of_stamps_and_a_gap():
    """Before: the stamps sat at two points of their month, no step fitted, and a lag, a
    window or a lead counted samples: across the missing month lag 1 was two months back."""
    time = joined([21])  # 2001-10 missing, after the change of convention
    f = by_month(time)
    k = month_index(time)
    kept, ref = reference_lags(k, [0, 1, 2])
    out = lagged(f, [0, 1, 2])
    np.testing.assert_array_equal(month_index(out.time.values), kept)
    np.testing.assert_array_equal(out.isel(cell=0).values, ref)

    w = trailing_windows(f, [3], aggregate="sum").isel(window=0, cell=0)
    np.testing.assert_array_equal(w.values, ref.sum(axis=1))

    X, y, how = lead_target(f, f.isel(cell=0), 2)
    np.testing.assert_array_equal(month_index(y.target_time.values) - month_index(X.time), 2)
    np.testing.assert_array_equal(y.values, month_index(X.time.values) + 2.0)
    assert how.step == "month" and how.n_gaps == 1  # 2001-08 loses its target (2001-10)


def test_dates_drifting_through_their_months_still_count_samples():
    """One per month, but each two days later in its month than the last: no point of the
    month, no fixed duration: samples are counted, as before."""
    time = TIME[:14] + pd.to_timedelta(np.arange(14) * 2, "D")
    _, y, how = lead_target(by_month(time), np.arange(14.0), 1)
    assert how.step == "sample"
    np.testing.assert_array_equal(y.values, np.arange(1.0, 14.0))


# --------------------------------------------------------------------------------------------
# 3. lead_target's target: one series, labels of the field's kind


FIELD = by_month(TIME)


@pytest.mark.parametrize(
    "target",
    [
        xr.Dataset({"soi": ("time", np.zeros(N)), "nino": ("time", np.zeros(N))}),
        pd.DataFrame({"soi": np.zeros(N), "nino": np.zeros(N)}, index=TIME),
        xr.DataArray(np.zeros((2, N)), dims=("station", "time"), coords={"time": TIME}),
    ],
    ids=["dataset", "dataframe", "2-d"],
)
def test_several_series_are_refused_naming_target(target):
    """Before: a Dataset failed in NumPy conversion, and a 2-D DataArray was returned as a
    (station, time) target, samples last."""
    with pytest.raises(ValueError, match=r"^target: expected (one series|a series)"):
        lead_target(FIELD, target, 1)


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (
            xr.DataArray(
                np.zeros(N),
                dims="time",
                coords={
                    "time": xr.date_range(
                        "2000-01-01", periods=N, freq="MS", use_cftime=True, calendar="noleap"
                    )
                },
            ),
            "noleap calendar",
        ),
        (pd.Series(np.zeros(N), index=TIME.strftime("%Y-%m-%d")), "strings"),
        (pd.Series(np.zeros(N), index=TIME.tz_localize("UTC")), "time zone UTC"),
    ],
    ids=["noleap", "strings", "utc"],
)
def test_labels_of_another_kind_are_told_apart(target, said):
    """Before: 'none of the field's labels (2000-01-01 .. 2002-12-01) is among the target's
    (2000-01-01 .. 2002-12-01)': the same text on both sides."""
    with pytest.raises(ValueError, match="^target: none of") as info:
        lead_target(FIELD, target, 1)
    assert said in str(info.value) and "proleptic_gregorian calendar" in str(info.value)


def test_a_mid_month_field_and_a_first_of_month_target_get_a_hint():
    mid = by_month(TIME + pd.Timedelta(days=14))
    with pytest.raises(ValueError, match="stamped on other days of the month") as info:
        lead_target(mid, pd.Series(np.zeros(N), index=TIME), 1)
    assert "the field's 2000-01-15" in str(info.value)
    noleap = xr.date_range("2000-01-01", periods=N, freq="MS", calendar="noleap", use_cftime=True)
    with pytest.raises(ValueError, match=r"convert_calendar\('noleap'"):
        lead_target(by_month(noleap), pd.Series(np.zeros(N), index=TIME), 1)


@pytest.mark.parametrize(
    ("field_freq", "target_freq", "said"),
    [
        ("MS", "D", r"finer step \(day\) than the field's \(month\), so lead would count days"),
        ("YS", "MS", r"finer step \(month\) than the field's \(year\)"),
        ("5D", "D", r"finer step \(day\) than the field's \(5-day step\)"),
    ],
)
def test_a_target_finer_than_the_field_is_refused_not_paired_by_its_steps(
    field_freq, target_freq, said
):
    """A daily target against a monthly field was paired by days: lead=2 gave 2 days later,
    one day of each month, without a word (dcfa.align refuses the same inputs)."""
    field = by_month(pd.date_range("2000-01-01", periods=24, freq=field_freq))
    fine = pd.date_range("2000-01-01", field.time.values[-1], freq=target_freq)
    target = pd.Series(np.arange(fine.size, dtype=float), index=fine)
    with pytest.raises(ValueError, match=f"^target: its 'time' labels are on a {said}"):
        lead_target(field, target, 2)
    # on the field's own step, and the other way round (a coarser target), it pairs
    coarse = target[target.index.isin(field.time.values)]
    assert lead_target(field, coarse, 2)[1].size == 22
    assert lead_target(by_month(fine), coarse, 0)[1].size == field.sizes["time"]


@given(
    lead=st.integers(0, 6),
    missing=st.sets(st.integers(0, N - 1), max_size=6),
    noleap=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_match_month_pairs_calendar_months_and_keeps_what_aligning_first_drops(
    lead, missing, noleap
):
    """Aligning first (dcfa.align drops the target's NaN months, and the field's with them)
    lost the predictors of those months, whose target lead months later exists."""
    if noleap:  # a model calendar, mid-month, against a standard-calendar index on the 1st
        time = xr.date_range("2000-01-01", periods=N, freq="MS", calendar="noleap",
                             use_cftime=True) + pd.Timedelta(days=14)  # fmt: skip
    else:
        time = TIME + pd.Timedelta(days=14)
    field = by_month(time)
    values = month_index(TIME).astype(float) + 1000.0  # the target's month, by hand
    values[sorted(missing)] = np.nan
    X, y, how = lead_target(field, pd.Series(values, index=TIME), lead, match="month")
    k = np.arange(N - lead)  # every predictor whose target month is in the record
    np.testing.assert_array_equal(X.values[:, 0], k)
    np.testing.assert_array_equal(y.values, np.where(np.isin(k + lead, list(missing)), np.nan,
                                                     k + lead + 1000.0))  # fmt: skip
    np.testing.assert_array_equal(y.target_time.values, TIME.values[lead:])
    assert (y.time.values == X.time.values).all() and how.n_samples == N - lead
    kept = int(y.notnull().sum())
    assert kept == int((~np.isin(k + lead, list(missing))).sum())
    if not noleap and missing and lead:  # aligning first loses more, never fewer
        from dcfa import align

        Xa, ya = align(field, pd.Series(values, index=TIME), match="month")
        if Xa.sizes["time"] > lead + 1:
            _, y_first, _ = lead_target(Xa, ya, lead, min_samples=1)
            assert int(y_first.notnull().sum()) <= kept


def test_align_takes_an_index_read_from_a_csv_file(tmp_path):
    """``pd.read_csv(..., index_col="date")`` names the index "date": the Series failed in
    ``align`` with xarray's error that coordinate time has dimensions ('date',)."""
    from dcfa import align

    field = by_month(TIME + pd.Timedelta(days=14))
    values = month_index(TIME).astype(float) + 1000.0
    pd.DataFrame({"date": TIME[3:], "rain": values[3:]}).to_csv(tmp_path / "rain.csv", index=False)
    rain = pd.read_csv(tmp_path / "rain.csv", parse_dates=["date"], index_col="date")["rain"]
    assert rain.index.name == "date"
    X, y = align(field, rain, match="month")
    assert y.dims == ("time",) and y.name == "rain"
    np.testing.assert_array_equal(X.values[:, 0], np.arange(3, N))  # the months in the file
    np.testing.assert_array_equal(y.values, values[3:])
    np.testing.assert_array_equal(y.time.values, X.time.values)


def test_match_month_names_what_it_needs():
    mid = by_month(TIME + pd.Timedelta(days=14))
    with pytest.raises(ValueError, match=r"^match: expected 'exact' or 'month', got 'day'"):
        lead_target(mid, pd.Series(np.zeros(N), index=TIME), 1, match="day")
    with pytest.raises(ValueError, match=r"^match: 'month' .* the target has no 'time' labels"):
        lead_target(mid, np.zeros(N), 1, match="month")
    with pytest.raises(ValueError, match=r"^match: .* the target's 'time' labels are int64"):
        lead_target(mid, pd.Series(np.zeros(N), index=np.arange(1, N + 1)), 1, match="month")
    daily = pd.Series(np.zeros(60), index=pd.date_range("2000-01-01", periods=60, freq="D"))
    with pytest.raises(ValueError, match=r"^match: the target holds 31 samples in 2000-01; .*"
                       r"resample\(time='MS'\)"):  # fmt: skip
        lead_target(mid, daily, 1, match="month")
    with pytest.raises(ValueError, match="pair them with match='month'"):
        lead_target(mid, pd.Series(np.zeros(N), index=TIME), 1)


@pytest.mark.parametrize("match", ["month", "exact"])
def test_a_date_typed_twice_is_named_not_averaged(match):
    """A monthly target whose November was typed as December: "the target holds 2 samples in
    2000-12; average it to one value a month first" by month, "its labels must be unique and
    increasing" exactly. The date is named, as a label repeated."""
    dates = (TIME + pd.Timedelta(days=14 if match == "month" else 0)).to_numpy().copy()
    dates[10] = dates[11]
    y = pd.Series(np.arange(float(N)), index=dates)
    said = r"^{}: holds the 'time' label 2000-12-(15|01) 2 times; each sample needs a label"
    with pytest.raises(dcfa.InputError, match=said.format("target")):
        lead_target(by_month(TIME), y, 1, match=match)
    with pytest.raises(dcfa.InputError, match=said.format("y")):
        dcfa.align(by_month(TIME), xr.DataArray(y.to_numpy(), coords={"time": dates}), match=match)


@settings(max_examples=40, deadline=None)
@given(
    start=st.integers(-60, 60),
    lead=st.integers(0, 12),
    match=st.sampled_from(["exact", "month"]),
)
def test_too_few_pairs_name_the_target_when_the_records_barely_overlap(start, lead, match):
    """A target of other years was refused as ``lead: lead=3 leaves 0 pair(s)`` with
    ``match="month"``, which sent the user to a lead that was right. Against counting by
    hand: the target names itself when the two records share fewer months than needed,
    with both spans; else a lead that leaves too few pairs is named."""
    target_time = pd.date_range(TIME[0] + pd.DateOffset(months=start), periods=N, freq="MS")
    y = pd.Series(np.arange(N, dtype=float), index=target_time)
    field = FIELD if match == "exact" else by_month(TIME + pd.Timedelta(days=14))
    months = 12 * TIME.year + TIME.month
    target_months = 12 * target_time.year + target_time.month
    shared = int(np.isin(months, target_months).sum())
    pairs = int(np.isin(months + lead, target_months).sum())
    if pairs >= 2:
        _, y_lead, _ = lead_target(field, y, lead, match=match)
        assert y_lead.size == pairs
        return
    with pytest.raises(ValueError) as info:
        lead_target(field, y, lead, match=match)
    said = str(info.value)
    if shared >= 2:
        assert said.startswith(f"lead: lead={lead} leaves {pairs} pair(s)"), said
    elif match == "exact" and shared == 0:  # no label in common at all: said as before
        assert said.startswith("target: none of the field's 'time' labels"), said
    else:
        assert said.startswith(f"target: its record ({target_time[0]:%Y-%m-%d} .. "), said
        assert f"share {shared} month" in said and f"lead={lead} pairs {pairs} " in said
        assert said.endswith("give the target the field's years")


def test_a_negative_lead_says_what_lead_counts():
    with pytest.raises(ValueError, match=r"^lead: .*time steps of the labels"):
        lead_target(FIELD, np.zeros(N), -1)


def test_a_nan_target_is_kept_as_documented():
    y0 = FIELD.isel(cell=0).copy()
    y0[5] = np.nan
    _, y, how = lead_target(FIELD, y0, 3)
    assert how.n_samples == N - 3 and np.isnan(y.values[2]) and np.isnan(y.values).sum() == 1


# --------------------------------------------------------------------------------------------
# 4. CSV targets whose dates carry a time zone


def write(path, stamps, values):
    rows = "".join(f"{s},{v}\n" for s, v in zip(stamps, values, strict=True))
    path.write_text("time,soi\n" + rows)
    return path


def test_csv_dates_in_utc_are_dates(tmp_path):
    """Before: the dates came back as an object array of Timestamps, and aligning them said
    'holds object values, not dates'."""
    stamps = [t.strftime("%Y-%m-%dT%H:%M:%S+00:00") for t in TIME]
    target = io.open_target(write(tmp_path / "utc.csv", stamps, range(N)))
    np.testing.assert_array_equal(target.time.values, TIME.values)
    field = by_month(TIME + pd.Timedelta(days=14))  # mid-month stamps, by month
    _, y, n = io.align_target(field, target, match="month")
    assert n == N and (y.values == np.arange(N)).all()
    z = io.open_target(
        write(tmp_path / "z.csv", [s.replace("+00:00", "Z") for s in stamps], range(N))
    )
    np.testing.assert_array_equal(z.time.values, TIME.values)


def test_csv_dates_in_another_zone_are_refused(tmp_path):
    """+10:00 midnight of the 1st is the month before in UTC: which is meant is the user's."""
    stamps = [t.strftime("%Y-%m-%dT%H:%M:%S+10:00") for t in TIME]
    with pytest.raises(ValueError, match=r"^target\.time_column: .*time zone UTC\+10:00"):
        io.open_target(write(tmp_path / "aest.csv", stamps, range(N)))


# --------------------------------------------------------------------------------------------
# 5. the alignment names a lead's unit when it is not months


@pytest.mark.parametrize(
    ("freq", "lead", "head"),
    [
        ("D", 3, "lead 3 days: "),
        ("YS", 1, "lead 1 year: "),
        ("QS", 2, "lead 2 (3-month steps): "),
        ("MS", 3, "lead 3: "),
    ],
)
def test_the_alignment_names_a_lead_that_is_not_months(freq, lead, head):
    """Before: 'lead 3: predictors 2000-01-01 .. ' on daily dates, read as 3 months."""
    time = pd.date_range("2000-01-01", periods=12, freq=freq)
    x = xr.DataArray(np.arange(12.0), dims="time", coords={"time": time})
    X, y, how = lead_target(x, x, lead)
    assert str(how).startswith(head)
    assert (y.values - X.values == lead).all()  # x counts samples: lead steps = lead samples


_DAYS_IN_MONTH = {
    "noleap": [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
    "360_day": [30] * 12,
}


@settings(max_examples=80, deadline=None)
@given(
    calendar=st.sampled_from(["standard", "noleap", "360_day"]),
    year=st.integers(1950, 2100),
    month=st.integers(1, 12),
    day=st.integers(1, 31),
    lead=st.integers(0, 40),
    step=st.sampled_from([("month", 1), ("year", 12), ("3-month step", 3)]),
)
def test_target_time_moves_the_calendar_month_and_keeps_the_day(
    calendar, year, month, day, lead, step
):
    """A forecast's valid time, against year and month arithmetic by hand: the day kept, or
    the month's last when it has fewer, in the labels' own calendar."""
    import calendar as cal

    from dcfa.forecast.leads import target_time

    name, months = step
    if calendar == "standard":
        day = min(day, cal.monthrange(year, month)[1])
        labels = xr.DataArray(np.array([f"{year:04d}-{month:02d}-{day:02d}"], "M8[ns]"), dims="t")
    else:
        day = min(day, _DAYS_IN_MONTH[calendar][month - 1])
        labels = xr.DataArray(
            xr.date_range(f"{year:04d}-{month:02d}-{day:02d}", periods=1, calendar=calendar,
                          use_cftime=True).values, dims="t")  # fmt: skip
    k = 12 * year + month - 1 + lead * months
    y, m = divmod(k, 12)
    m += 1
    last = cal.monthrange(y, m)[1] if calendar == "standard" else _DAYS_IN_MONTH[calendar][m - 1]
    later = target_time(labels, lead, name)
    assert later.dims == ("t",) and later.name == "target_time"
    got = xr.DataArray(later.values, dims="t").dt
    assert (int(got.year[0]), int(got.month[0]), int(got.day[0])) == (y, m, min(day, last))


def test_target_time_adds_durations_and_numbers_and_none_to_samples():
    from dcfa.forecast.leads import target_time

    hours = xr.DataArray(pd.date_range("2000-12-31 18:00", periods=3, freq="6h"), dims="t")
    later = target_time(hours, 3, "6-hour step")
    np.testing.assert_array_equal(later.values, (hours + pd.Timedelta(hours=18)).values)
    noleap = xr.DataArray(
        xr.date_range("2001-02-27", periods=3, calendar="noleap", use_cftime=True).values,
        dims="t",
    )
    days = xr.DataArray(target_time(noleap, 2, "day").values, dims="t").dt
    assert (days.month.values.tolist(), days.day.values.tolist()) == ([3, 3, 3], [1, 2, 3])
    steps = target_time(xr.DataArray([0.0, 0.5, 1.0], dims="t"), 4, "step of 0.5")
    np.testing.assert_array_equal(steps.values, [2.0, 2.5, 3.0])
    years = target_time(xr.DataArray([1990, 1991], dims="t"), 2, "step of 1")
    assert years.values.tolist() == [1992, 1993] and years.dtype.kind == "i"
    assert target_time(hours, 3, "sample") is None
    numbered = xr.DataArray([0, 1, 2], dims="t")  # a result fitted on dates, given numbers
    for step in ("month", "year", "3-month step", "day", "6-hour step"):
        assert target_time(numbered, 2, step) is None, step


def test_a_target_of_monthly_periods_is_refused_naming_to_timestamp():
    """pandas' monthly periods are dates in all but type: the refusal said "needs dates on
    both sides" without the one call that gives them."""
    t = pd.date_range("2000-01-01", periods=24, freq="MS")
    X = xr.DataArray(np.zeros((24, 3)) + np.arange(24)[:, None], dims=("time", "x"),
                     coords={"time": t})  # fmt: skip
    periods = pd.Series(np.arange(24.0), index=pd.period_range("2000-01", periods=24, freq="M"))
    with pytest.raises(dcfa.InputError, match=r"period\[M\] values, not dates; .*"
                       r"for pandas periods: series.to_timestamp\(\)$"):  # fmt: skip
        dcfa.align(X, periods, match="month")
    _, y = dcfa.align(X, periods.to_timestamp(), match="month")
    np.testing.assert_array_equal(y.values, np.arange(24.0))

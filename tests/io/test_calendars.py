"""cftime calendars end to end: real Zarr archives on ``noleap``, ``360_day`` and Gregorian
axes past 2262 (which numpy's nanoseconds cannot hold), targets from CSV, netCDF and Zarr,
slicing, month and exact matching, monthly anomalies, the result store and the command line.

Every expectation is computed independently, in pure Python or NumPy, from the (year, month)
of the dates: no pandas or xarray date machinery in the references.
"""

from __future__ import annotations

import subprocess
import sys

import cftime
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.pipeline import make_pipeline

import dcfa
from dcfa import io
from dcfa.io.calendars import calendar_days

# open_archive (dcfa.io.archive.open_zarr) lets xarray warn that dates past 2262 are decoded to
# cftime, which is what is wanted; pytest would turn that RuntimeWarning from dcfa into an error
pytestmark = pytest.mark.filterwarnings(
    "ignore:Unable to decode time axis into full numpy.datetime64:xarray.SerializationWarning"
)

# calendar -> first year of a 96-month archive (the Gregorian ones cross 2262)
CALENDARS = {"noleap": 2258, "360_day": 1998, "proleptic_gregorian": 2258, "standard": 2259}
N, SHAPE = 96, (4, 6)
CELL = (1, 3)  # the cell that drives the targets, inside a coherent patch
LAND = (0, 0)


def make_archive(path, calendar, start, *, n=N, seed=0):
    """A (time, lat, lon) Zarr archive on ``calendar``, monthly from ``start``-01-01."""
    rng = np.random.default_rng(seed)
    time = xr.date_range(f"{start}-01-01", periods=n, freq="MS", calendar=calendar, use_cftime=True)
    month = np.array([t.month for t in time])
    sst = 280 + 3 * np.sin(2 * np.pi * month / 12)[:, None, None] + rng.normal(size=(n, *SHAPE))
    sst[:, 1:3, 2:5] += 2 * rng.normal(size=n)[:, None, None]  # a patch sharing one signal
    sst[:, LAND[0], LAND[1]] = np.nan
    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), sst.astype("float32"), {"units": "K"})},
        coords={"time": time, "lat": np.linspace(-10, 10, SHAPE[0]), "lon": np.arange(SHAPE[1])},
    )
    ds.chunk({"time": 24}).to_zarr(path, consolidated=False)
    return ds


def ym(dates):
    """(year, month) of every date, in pure Python."""
    return [(d.year, d.month) for d in dates]


def reference_anomalies(x, months):
    """``x`` minus the mean of its calendar month, with NumPy."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    for m in range(1, 13):
        rows = np.asarray(months) == m
        if rows.any():
            out[rows] = x[rows] - x[rows].mean(axis=0)
    return out


def months_from(year, month, n):
    return [(year + (month - 1 + k) // 12, (month - 1 + k) % 12 + 1) for k in range(n)]


def standard_csv_target(path, ds, first, n, *, seed=1):
    """A standard-calendar CSV (mid-month stamps, read by pandas): ``2 * anomaly + 1`` of
    ``CELL`` where the archive has the month, noise elsewhere. Returns the expected pairs
    ``{archive row: target value}``."""
    rng = np.random.default_rng(seed)
    keys = months_from(*first, n)
    rows = {k: i for i, k in enumerate(ym(ds.time.values))}
    anom = reference_anomalies(ds.sst.values, [m for _, m in ym(ds.time.values)])
    values = [2 * anom[(rows[k], *CELL)] + 1 if k in rows else rng.normal() for k in keys]
    dates = [f"{y:04d}-{m:02d}-15" for y, m in keys]
    pd.DataFrame({"date": dates, "y": values}).to_csv(path, index=False)
    return {rows[k]: v for k, v in zip(keys, values, strict=True) if k in rows}


@pytest.fixture(params=list(CALENDARS))
def archive(request, tmp_path):
    calendar = request.param
    ds = make_archive(tmp_path / "a.zarr", calendar, CALENDARS[calendar])
    return calendar, ds, tmp_path / "a.zarr"


def test_archive_opens_and_slices_on_its_calendar(archive):
    calendar, ds, path = archive
    start = CALENDARS[calendar]
    field = io.open_archive(path, ["sst"])
    assert field.sizes["time"] == N and field.chunks[0] == (24,) * 4
    assert isinstance(field.time.values[0], cftime.datetime)  # the Gregorian ones: past 2262
    assert field.time.dt.calendar == calendar
    part = io.open_archive(path, "sst", time=[f"{start + 1}-03", f"{start + 4}-11"])
    assert ym(part.time.values) == months_from(start + 1, 3, 45)
    np.testing.assert_array_equal(part.values, ds.sst.values[14:59])
    wide = io.open_archive(path, "sst", time=[f"{start - 8}-01", f"{start + 32}-12"])
    assert wide.sizes["time"] == N


def test_noleap_slice_of_the_report(tmp_path):
    make_archive(tmp_path / "a.zarr", "noleap", 2248, n=12 * 45)
    part = io.open_archive(tmp_path / "a.zarr", "sst", time=["2250-01", "2290-12"])
    assert ym(part.time.values) == months_from(2250, 1, 12 * 41)


def test_monthly_anomalies_per_calendar_month(archive):
    calendar, ds, path = archive
    field = io.open_archive(path, ["sst"])
    prep = io.fit_preprocessing(field, anomalies=True)
    out = io.apply_preprocessing(field, prep)
    assert out.chunks == field.chunks
    months = [m for _, m in ym(ds.time.values)]
    expected = reference_anomalies(ds.sst.values, months)
    np.testing.assert_allclose(out.values, expected, atol=1e-9, equal_nan=True)
    assert out.time.dt.calendar == calendar


def test_month_matching_against_a_standard_csv(archive):
    calendar, ds, path = archive
    start = CALENDARS[calendar]
    field = io.open_archive(path, ["sst"])
    expected = standard_csv_target(path.parent / "y.csv", ds, (start - 1, 7), 60)
    target = io.open_target(path.parent / "y.csv", time_column="date")
    assert target.time.dtype.kind == "M"  # pandas: past 2262 too
    f, t, n = io.align_target(field, target, match="month")
    rows = sorted(expected)
    assert n == len(rows) == 54  # start-01 .. (start+4)-06
    assert ym(f.time.values) == [ym(ds.time.values)[i] for i in rows]
    np.testing.assert_array_equal(t.values, [expected[i] for i in rows])
    assert t.time.dt.calendar == calendar  # the target takes the input's dates
    np.testing.assert_array_equal(f.values, ds.sst.values[rows])
    if calendar in ("noleap", "360_day"):  # no stamp of one calendar is one of the other's
        message = f"target.match: the input is on the '{calendar}' calendar"
    else:  # one calendar, but the 15th is no archive stamp: named, with the remedy
        message = (
            r"target.match: 54 of the target's 54 samples in the input's months are not on "
            r"the input's stamps .* set target.match = 'month'"
        )
    with pytest.raises(ValueError, match=message):
        io.align_target(field, target, match="exact")


def _same_calendar_target(ds, calendar):
    """Stamps on the archive's calendar: every third archive stamp, and as many stamps that
    are on no archive stamp (the 2nd at noon; the 30th of February in ``360_day``)."""
    on = list(range(5, N, 3))
    stamps, values = [], []
    for k in on:
        t = ds.time.values[k]
        stamps.append(cftime.datetime(t.year, t.month, 1, calendar=calendar))
        values.append(10.0 * k)
        day = 30 if calendar == "360_day" and t.month == 2 else 2
        stamps.append(cftime.datetime(t.year, t.month, day, 12, calendar=calendar))
        values.append(-1.0)
    return stamps, np.array(values), {k: 10.0 * k for k in on}


@pytest.mark.parametrize("kind", ["nc", "zarr", "csv"])
def test_exact_matching_on_a_shared_calendar(archive, kind):
    calendar, ds, path = archive
    stamps, values, expected = _same_calendar_target(ds, calendar)
    where = path.parent / f"y.{kind}"
    if kind == "csv":
        text = [f"{s.year:04d}-{s.month:02d}-{s.day:02d} {s.hour:02d}:00" for s in stamps]
        pd.DataFrame({"time": text, "y": values}).to_csv(where, index=False)
    else:
        target = xr.Dataset({"y": ("time", values)}, coords={"time": np.array(stamps)})
        if kind == "nc":
            target.to_netcdf(where)
        else:
            target.to_zarr(where, consolidated=False)
    target = io.open_target(where, calendar=calendar)
    got = target.time.dt.calendar
    assert got == calendar or {got, calendar} <= {"standard", "proleptic_gregorian"}
    fields = [target.time.dt.year, target.time.dt.month, target.time.dt.day, target.time.dt.hour]
    assert [(s.year, s.month, s.day, s.hour) for s in stamps] == [
        tuple(int(v) for v in row) for row in zip(*fields, strict=True)
    ]
    field = io.open_archive(path, ["sst"])
    # the stamps off the archive's, in its months, are refused: exact would drop them
    off = "31 of the target's 62 samples in the input's months are not on the input's stamps"
    with pytest.raises(ValueError, match=f"target.match: {off}.*up to 2 samples in one month"):
        io.align_target(field, target, match="exact")
    with pytest.raises(ValueError, match="target.match: the target has repeated samples"):
        io.align_target(field, target, match="month")  # two stamps in a month
    on = target.isel(time=slice(0, None, 2))  # the stamps on the archive's, exactly
    f, t, n = io.align_target(field, on, match="exact")
    rows = sorted(expected)
    assert n == len(rows) == 31
    assert ym(f.time.values) == [ym(ds.time.values)[i] for i in rows]
    np.testing.assert_array_equal(t.values, [expected[i] for i in rows])


def test_csv_dates_and_their_calendar(tmp_path):
    def write(dates):
        pd.DataFrame({"time": dates, "y": np.arange(len(dates), dtype=float)}).to_csv(
            tmp_path / "y.csv", index=False
        )
        return tmp_path / "y.csv"

    path = write(["2001-01-30", "2001-02-30", "2001-03-30T06:30:15.5"])
    t = io.open_target(path, calendar="360_day")
    assert t.time.dt.calendar == "360_day" and t.time.dt.day.values.tolist() == [30] * 3
    assert (t.time.dt.hour.values[2], t.time.dt.microsecond.values[2]) == (6, 500000)
    # the calendar's own date type, as xarray decodes a netCDF time: selection by a date
    # string compared a plain (standard) cftime.datetime with the 360-day dates, a TypeError
    decoded = xr.date_range("2001-01-30", periods=1, calendar="360_day", use_cftime=True)
    assert type(t.time.values[0]) is type(decoded[0])
    assert t.sel(time="2001-02").values.tolist() == [1.0]
    # 2001-02-30 is no standard date: named with its row, as an editor numbers the file's lines
    with pytest.raises(
        ValueError,
        match=r"target.time_column: 'time' of .* holds 1 value\(s\) that are not dates of the "
        r"standard calendar, the first '2001-02-30' in row 3 of the file .*target.calendar",
    ):
        io.open_target(path)
    with pytest.raises(
        ValueError, match=r"target.time_column: .*row 3 of the file: '2001-02-30'.*'noleap'"
    ):
        io.open_target(path, calendar="noleap")
    with pytest.raises(ValueError, match="target.calendar: unknown calendar 'mayan'"):
        io.open_target(path, calendar="mayan")
    with pytest.raises(ValueError, match="target.time_column: .*row 2 of the file: 'soon'"):
        io.open_target(write(["soon"]), calendar="noleap")
    t = io.open_target(write(["2300-01-15", "2301-06-15"]))  # standard, past 2262: pandas
    assert t.time.dt.year.values.tolist() == [2300, 2301]
    t = io.open_target(write(["2300-01", "2300-02"]), calendar="noleap")  # months only
    assert ym(t.time.values) == [(2300, 1), (2300, 2)] and t.time.dt.day.values.tolist() == [1, 1]
    nc = xr.Dataset(
        {"y": ("time", [1.0, 2.0])},
        coords={"time": xr.date_range("2300-01-01", periods=2, calendar="noleap")},
    )
    nc.to_netcdf(tmp_path / "y.nc")
    assert io.open_target(tmp_path / "y.nc").time.dt.calendar == "noleap"
    assert io.open_target(tmp_path / "y.nc", calendar="365_day").size == 2  # an alias
    with pytest.raises(ValueError, match="target.calendar: '360_day', but .* 'noleap'"):
        io.open_target(tmp_path / "y.nc", calendar="360_day")


def test_alignment_errors_name_the_key(tmp_path):
    ds = make_archive(tmp_path / "a.zarr", "noleap", 2258)
    field = io.open_archive(tmp_path / "a.zarr", ["sst"])
    far = xr.DataArray(
        np.ones(24),
        dims="time",
        coords={"time": pd.date_range("1990-01-01", periods=24, freq="MS") + pd.Timedelta(days=14)},
    )
    with pytest.raises(
        ValueError,
        match=r"target: no samples in common between the input \(noleap calendar, 2258-01 "
        r"\.\. 2265-12, 96 samples\) and the target \(proleptic_gregorian calendar, 1990-01",
    ):
        io.align_target(field, far, match="month")
    with pytest.raises(ValueError, match="target.match must be 'exact' or 'month'"):
        io.align_target(field, far, match="year")
    numbered = xr.DataArray(np.ones(24), dims="time", coords={"time": np.arange(24)})
    with pytest.raises(ValueError, match="target.match: the target's 'time' holds int64"):
        io.align_target(field, numbered, match="month")
    with pytest.raises(ValueError, match="target.match: the target's 'time' holds int64"):
        io.align_target(field, numbered, match="exact")
    with pytest.raises(ValueError, match="target: every target value is missing"):
        io.align_target(field, far * np.nan, match="month")
    prep = io.fit_preprocessing(field, anomalies=True)
    with pytest.raises(ValueError, match="input.anomalies: .* not dates"):
        io.apply_preprocessing(field.assign_coords(time=np.arange(N)), prep)
    assert ds.sizes["time"] == N


@pytest.mark.parametrize("calendar", ["360_day", "proleptic_gregorian"])
def test_result_store_keeps_the_calendar(tmp_path, calendar):
    ds = make_archive(tmp_path / "a.zarr", calendar, CALENDARS[calendar])
    field = io.open_archive(tmp_path / "a.zarr", ["sst"], time=[f"{CALENDARS[calendar]}-04", None])
    y = np.random.default_rng(1).normal(size=field.sizes["time"])
    model = dcfa.LinCFA(random_state=0).fit(field, y)
    out = io.write_result(tmp_path / "r.zarr", io.result_dataset(model, field, target=y))
    back = xr.open_zarr(out, consolidated=False)
    assert back.time.dt.calendar == calendar
    assert isinstance(back.time.values[0], cftime.datetime)
    assert ym(back.time.values) == ym(ds.time.values[3:])
    np.testing.assert_allclose(back.features.values, model.transform(field).values, rtol=1e-6)


def _job(tmp_path, target_first):
    import tomli_w

    ds = make_archive(tmp_path / "sst.zarr", "noleap", 2258)
    expected = standard_csv_target(tmp_path / "soi.csv", ds, target_first, 84)
    config = {
        "input": {
            "store": str(tmp_path / "sst.zarr"),
            "variables": ["sst"],
            "anomalies": True,
            "time": ["2258-03", "2265-10"],
        },
        "target": {
            "path": str(tmp_path / "soi.csv"),
            "variable": "y",
            "time_column": "date",
            "match": "month",
        },
        "method": {"name": "lincfa", "params": {"random_state": 0, "neighbors": 1}},
        "output": {"store": str(tmp_path / "result.zarr")},
        "cluster": {"n_workers": 1, "memory_limit": "1GiB"},
    }
    (tmp_path / "job.toml").write_text(tomli_w.dumps(config))
    return tmp_path / "job.toml", ds, expected


def _cli(job, cwd):
    return subprocess.run(
        [sys.executable, "-m", "dcfa", "fit", str(job), "-q"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


@pytest.mark.slow
def test_cli_on_a_noleap_archive_past_2262(tmp_path):
    job, ds, expected = _job(tmp_path, (2257, 7))  # the target: 2257-07 .. 2264-06
    proc = _cli(job, tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert result.time.dt.calendar == "noleap"
    assert isinstance(result.time.values[0], cftime.DatetimeNoLeap)
    assert ym(result.time.values) == months_from(2258, 3, 76)  # 2258-03 .. 2264-06
    assert result.attrs["n_samples_used"] == 76
    region = result.region.values
    assert np.isnan(region[LAND]) and np.isfinite(np.delete(region.ravel(), 0)).all()
    g = int(region[CELL])
    assert abs(float(result.group_target_corr[g])) > 0.8, proc.stdout
    assert len(expected) == 78  # 2258-01 .. 2264-06 before input.time


@pytest.mark.slow
def test_cli_target_months_that_never_overlap_exit_2(tmp_path):
    job, _, _ = _job(tmp_path, (2190, 1))  # 2190-01 .. 2196-12: before the archive
    proc = _cli(job, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "dcfa: error: target: no samples in common" in proc.stderr
    assert "noleap calendar, 2258-03 .. 2265-10" in proc.stderr
    assert not (tmp_path / "result.zarr").exists()


def test_a_daily_target_on_another_calendar_gets_a_remedy_that_works(tmp_path):
    """A noleap daily field and a standard-calendar daily CSV: the job said to use
    target.match = 'month', which then refused 'up to 31 samples in one month'."""
    import pandas as pd

    from dcfa.io.target import ALIGN_ARGUMENTS, JOB_KEYS, align_target, open_target

    noleap = xr.date_range("2001-01-01", periods=1200, freq="D", calendar="noleap", use_cftime=True)
    field = xr.DataArray(np.zeros((noleap.size, 2)), dims=("time", "x"), coords={"time": noleap})
    days = pd.date_range("2001-01-01", "2004-12-31", freq="D")
    pd.DataFrame({"time": days.strftime("%Y-%m-%d"), "y": np.arange(days.size)}).to_csv(
        tmp_path / "y.csv", index=False
    )
    target = open_target(tmp_path / "y.csv", "y")
    with pytest.raises(ValueError, match=r"set target.calendar = 'noleap' .* no Feb 29\)$"):
        align_target(field, target, keys=JOB_KEYS)
    with pytest.raises(ValueError, match=r"y.convert_calendar\('noleap', align_on='date'\)$"):
        align_target(field, target, keys=ALIGN_ARGUMENTS)
    # the job's remedy: the rows of Feb 29 left out, the dates read on the field's calendar
    leap = (days.month == 2) & (days.day == 29)
    pd.DataFrame({"time": days[~leap].strftime("%Y-%m-%d"), "y": np.arange(days.size)[~leap]}
                 ).to_csv(tmp_path / "y.csv", index=False)  # fmt: skip
    _, paired, n = align_target(field, open_target(tmp_path / "y.csv", "y", calendar="noleap"))
    assert n == noleap.size and paired.values[0] == 0 and paired.values[-1] == 1200


@pytest.mark.parametrize(
    "calendar, n_days",
    [("noleap", 365), ("365_day", 365), ("all_leap", 366), ("366_day", 366), ("360_day", 360)],
)
def test_calendar_days_of_calendars_whose_years_are_alike(calendar, n_days):
    """Each date's day of its calendar's year (0-based), counted in pure Python from the
    calendar's month lengths."""
    lengths = {
        365: [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
        366: [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
        360: [30] * 12,
    }[n_days]
    dates = [
        cftime.datetime(year, month, day, calendar=calendar)
        for year in (2001, 2004)
        for month in range(1, 13)
        for day in range(1, lengths[month - 1] + 1)
    ]
    days, n = calendar_days(xr.DataArray(dates, dims="time", name="time"), "X")
    assert n == n_days
    np.testing.assert_array_equal(days, [sum(lengths[: d.month - 1]) + d.day - 1 for d in dates])
    assert days.min() == 0 and days.max() == n_days - 1


@pytest.mark.parametrize("calendar", ["standard", "proleptic_gregorian", "julian"])
def test_calendar_days_of_calendars_with_leap_years_place_every_date_in_a_leap_year(calendar):
    """1 March is day 60 in every year and 29 February day 59, in leap years and others, and
    on the Julian calendar's leap years too (1900 is one there)."""
    dates = [
        cftime.datetime(year, month, day, calendar=calendar)
        for year, month, day in [
            (1899, 1, 1), (1899, 2, 28), (1899, 3, 1), (1899, 12, 31),
            (1900, 2, 28), (1900, 3, 1), (1904, 2, 29), (1904, 3, 1), (1904, 12, 31),
        ]
    ]  # fmt: skip
    if calendar == "julian":
        dates.append(cftime.datetime(1900, 2, 29, calendar=calendar))
    days, n = calendar_days(xr.DataArray(dates, dims="time", name="time"), "X")
    assert n == 366
    expected = [0, 58, 60, 365, 58, 60, 59, 60, 365] + ([59] if calendar == "julian" else [])
    np.testing.assert_array_equal(days, expected)


_NAT_FIT = """
import numpy as np, pandas as pd, xarray as xr, dcfa
time = pd.date_range("2000-01-01", periods=48, freq="MS").values.copy()
time[5] = np.datetime64("NaT")
X = xr.DataArray(np.random.default_rng(0).normal(size=(48, 2, 3)), dims=("time", "lat", "lon"),
                 coords={"time": time, "lat": [0.0, 1.0], "lon": [0.0, 1.0, 2.0]})
try:
    dcfa.Anomalies().fit(X)
except dcfa.InputError as e:
    print(e)
import gc; gc.collect()
"""


def test_a_missing_date_is_refused_naming_its_sample():
    """A NaT in the dates became month -2**63, and the climatology's bincount of it corrupted
    the heap: the process aborted after the fit (run in a subprocess for that reason). Every
    reader of months or days refuses it, naming the argument and the sample."""
    proc = subprocess.run([sys.executable, "-c", _NAT_FIT], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(
        "X: the sample coordinate 'time' misses the date of 1 sample(s) (NaT; the first is "
        "sample 5); monthly anomalies need dates"
    ), proc.stdout
    time = pd.date_range("2000-01-01", periods=48, freq="MS").values
    X = xr.DataArray(np.random.default_rng(0).normal(size=(48, 3)), dims=("time", "cell"),
                     coords={"time": time})  # fmt: skip
    y = X.mean("cell")
    gap = time.copy()
    gap[30] = np.datetime64("NaT")
    Xn, yn = X.assign_coords(time=gap), y.assign_coords(time=gap)
    missing = r"the sample coordinate 'time' misses the date of 1 sample\(s\) \(NaT; the first is sample 30\)"  # noqa: E501
    with pytest.raises(dcfa.InputError, match=rf"^X: {missing}; day-of-year anomalies"):
        dcfa.Anomalies(by="dayofyear").fit(Xn)
    with pytest.raises(dcfa.InputError, match=rf"^X: {missing}; monthly anomalies"):
        dcfa.Anomalies().fit(X).transform(Xn)
    with pytest.raises(dcfa.InputError, match=rf"^target: {missing}; match='month'"):
        dcfa.lead_target(X, yn, 2, match="month")
    with pytest.raises(dcfa.InputError, match=rf"^field: {missing}; match='month'"):
        dcfa.lead_target(Xn, y, 2, match="month")
    pipeline = make_pipeline(dcfa.Anomalies(), dcfa.GenLinCFA())
    with pytest.raises(dcfa.InputError, match=rf"^X: {missing}; the model's anomalies"):
        dcfa.forward_cv(pipeline, Xn, yn, n_splits=2, min_train=24)

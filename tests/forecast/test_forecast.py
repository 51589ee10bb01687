"""Leads, lags and trailing windows against plain NumPy, in memory and on any Dask chunking."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

from dcfa.forecast import LeadAlignment, feature_blocks, lagged, lead_target, trailing_windows
from dcfa.stacking import stack_features

N = 30  # months
TIME = pd.date_range("1991-01-01", periods=N, freq="MS")


def make_field(values: np.ndarray, *, name: str = "sst") -> xr.DataArray:
    """A monthly ``(time, lat, lon)`` field with coordinates, an auxiliary coordinate and attrs."""
    n, ny, nx = values.shape
    return xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={
            "time": TIME[:n],
            "lat": np.linspace(-10, 10, ny),
            "lon": np.arange(nx) * 5.0,
            "month": ("time", TIME[:n].month.to_numpy()),
        },
        name=name,
        attrs={"units": "K", "source": "test"},
    )


def random_values(seed: int, nan: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, 3, 4)) * 2.0 + 273.15
    if nan:
        x[5, 0, 0] = np.nan  # one gap early
        x[17, 1, 2] = np.nan  # one in the middle
        x[:, 2, 3] = np.nan  # a land cell
    return x


def reference_windows(x: np.ndarray, windows, aggregate: str) -> np.ndarray:
    """``(n - max + 1, len(windows), ...)``: per cell, ``np.convolve`` with a box of ones."""
    m = max(windows)
    out = []
    for w in windows:
        box = np.ones(w) / w if aggregate == "mean" else np.ones(w)
        valid = np.apply_along_axis(np.convolve, 0, x, box, mode="valid")  # row k ends at k+w-1
        out.append(valid[m - w :])
    return np.stack(out, axis=1)


def reference_lags(x: np.ndarray, lags) -> np.ndarray:
    n, m = len(x), max(lags)
    return np.stack([x[m - lag : n - lag] for lag in lags], axis=1)


# --------------------------------------------------------------------------------------------
# lead


@pytest.mark.parametrize("lead", [0, 3])
@pytest.mark.parametrize("kind", ["numpy", "series", "range-series", "dataarray", "dask"])
def test_lead_pairs_t_with_t_plus_lead(lead, kind):
    x = random_values(1)
    y = np.random.default_rng(2).normal(size=N)
    target = {
        "numpy": y,
        "series": pd.Series(y, index=TIME, name="soi"),
        "range-series": pd.Series(y, name="soi"),
        "dataarray": xr.DataArray(y, dims="time", coords={"time": TIME}, name="soi"),
        "dask": xr.DataArray(da.from_array(y, chunks=7), dims="time", coords={"time": TIME}),
    }[kind]
    X, yy, info = lead_target(make_field(x), target, lead)

    kept = N - lead
    np.testing.assert_array_equal(X.values, x[:kept])
    np.testing.assert_array_equal(yy.values, y[lead:])
    np.testing.assert_array_equal(X.time.values, TIME[:kept].to_numpy())
    np.testing.assert_array_equal(yy.time.values, TIME[:kept].to_numpy())
    np.testing.assert_array_equal(yy.target_time.values, TIME[lead:].to_numpy())
    assert yy.dims == ("time",)
    assert X.attrs == {"units": "K", "source": "test"} and X.name == "sst"
    np.testing.assert_array_equal(X.month.values, TIME[:kept].month)

    assert isinstance(info, LeadAlignment)
    assert (info.lead, info.n_samples, info.n_input) == (lead, kept, N)
    assert info.first_predictor == TIME[0] and info.last_predictor == TIME[kept - 1]
    assert info.first_target == TIME[lead] and info.last_target == TIME[N - 1]
    text = str(info)
    for date in (TIME[0], TIME[kept - 1], TIME[lead], TIME[N - 1]):
        assert date.strftime("%Y-%m-%d") in text
    assert f"{kept} of {N} samples" in text and f"lead {lead}" in text


def test_lead_matches_a_longer_target_by_label_after_windows():
    """Windows drop the first months of the field; a target on the full record is matched by
    date, and the lead counts its months."""
    x = random_values(3)
    y = np.arange(N, dtype=float) * 10.0
    windows = trailing_windows(make_field(x), [1, 4])  # starts at TIME[3]
    target = xr.DataArray(y, dims="time", coords={"time": TIME}, name="soi", attrs={"u": "1"})
    X, yy, info = lead_target(windows, target, 2)

    first = 3
    np.testing.assert_array_equal(X.time.values, TIME[first : N - 2].to_numpy())
    np.testing.assert_array_equal(yy.values, y[first + 2 :])
    np.testing.assert_array_equal(yy.target_time.values, TIME[first + 2 :].to_numpy())
    np.testing.assert_allclose(X.sel(window=1).values, x[first : N - 2])
    assert yy.name == "soi" and yy.attrs == {"u": "1"}
    assert info.n_samples == N - first - 2 and info.n_input == N - first
    assert info.first_predictor == TIME[first] and info.first_target == TIME[first + 2]


def test_lead_keeps_every_predictor_whose_target_is_in_the_record():
    """A target that starts after the field: the predictor the month before its start is
    paired with its first value (it was dropped, as the target has no value of its own)."""
    x = random_values(4)
    y = np.arange(20, dtype=float)
    target = pd.Series(y, index=TIME[5:25])  # starts after the field, ends before it
    X, yy, info = lead_target(make_field(x), target, 1)
    np.testing.assert_array_equal(X.values, x[4:24])
    np.testing.assert_array_equal(yy.values, y)
    assert (info.first_predictor, info.last_target) == (TIME[4], TIME[24])
    assert info.n_gaps == 0


def test_lead_without_labels_uses_positions():
    x = np.arange(10.0)
    X, yy, info = lead_target(xr.DataArray(x, dims="time"), x * 2, 4)
    np.testing.assert_array_equal(X.values, x[:6])
    np.testing.assert_array_equal(yy.values, 2 * x[4:])
    np.testing.assert_array_equal(yy.target_time.values, np.arange(4, 10))
    assert (info.first_predictor, info.last_predictor) == (0, 5)
    assert (info.first_target, info.last_target) == (4, 9)
    assert str(info) == "lead 4: predictors 0 .. 5 -> targets 4 .. 9, 6 of 10 samples kept"


def test_lead_on_a_noleap_calendar():
    """cftime dates past 2262 (a model run): matched by label, printed as dates."""
    time = xr.date_range("2250-01-01", periods=24, freq="MS", calendar="noleap", use_cftime=True)
    x = np.arange(24.0)[:, None] * np.ones(3)
    field = xr.DataArray(x, dims=("time", "cell"), coords={"time": time})
    target = xr.DataArray(np.arange(24.0) * 10, dims="time", coords={"time": time})
    X, y, info = lead_target(trailing_windows(field, [1, 3]), target, 3)
    np.testing.assert_array_equal(y.values, np.arange(5, 24) * 10.0)
    assert list(y.target_time.values) == list(time[5:])
    np.testing.assert_array_equal(X.sel(window=3).values[:, 0], np.arange(1, 20, dtype=float))
    assert str(info) == (
        "lead 3: predictors 2250-03-01 .. 2251-09-01 -> targets 2250-06-01 .. 2251-12-01, "
        "19 of 22 samples kept"
    )


# --------------------------------------------------------------------------------------------
# lags


@pytest.mark.parametrize("lags", [[0, 1, 2], [2, 0], [3]])
@pytest.mark.parametrize("time_chunks", [None, 1, 7, (3, 5, 4, 18)])
def test_lags_are_shifted_slices(lags, time_chunks):
    x = random_values(5, nan=True)
    field = make_field(x)
    if time_chunks is not None:
        field = field.chunk({"time": time_chunks, "lat": 2})
    out = lagged(field, lags)
    m = max(lags)

    assert out.dims == ("time", "lag", "lat", "lon")
    assert out.lag.values.tolist() == lags
    np.testing.assert_array_equal(out.time.values, TIME[m:].to_numpy())
    np.testing.assert_array_equal(out.month.values, TIME[m:].month)
    assert out.attrs == field.attrs and out.name == "sst"
    np.testing.assert_array_equal(out.lat.values, field.lat.values)
    if time_chunks is not None:
        assert isinstance(out.data, da.Array)
        # every lag on the chunks of the lag-0 block: no fragmentation
        assert out.data.chunks[0] == field.isel(time=slice(m, None)).data.chunks[0]
    np.testing.assert_array_equal(out.values, reference_lags(x, lags))


def test_lags_of_a_dataset_and_of_windows():
    x = random_values(6)
    ds = xr.Dataset({"sst": make_field(x), "mask": make_field(x).isel(time=0, drop=True)})
    out = lagged(ds, [0, 1])
    np.testing.assert_array_equal(out.sst.values, reference_lags(x, [0, 1]))
    xr.testing.assert_identical(out["mask"], ds["mask"])

    both = lagged(trailing_windows(make_field(x), [1, 2]), [0, 1])
    assert both.dims == ("time", "lag", "window", "lat", "lon")
    # lag 1 of the 2-month mean at t: mean of t-2, t-1
    np.testing.assert_allclose(
        both.sel(lag=1, window=2).values, (x[0 : N - 2] + x[1 : N - 1]) / 2, rtol=1e-14
    )


# --------------------------------------------------------------------------------------------
# trailing windows


@pytest.mark.parametrize("aggregate", ["mean", "sum"])
@pytest.mark.parametrize("windows", [[1, 3, 6, 12], [12, 1], [5]])
def test_windows_match_numpy_convolve(windows, aggregate):
    x = random_values(7, nan=True)
    field = make_field(x)
    out = trailing_windows(field, windows, aggregate=aggregate)
    m = max(windows)
    assert field.attrs == {"units": "K", "source": "test"}  # the input's attrs untouched

    assert out.dims == ("time", "window", "lat", "lon")
    assert out.window.values.tolist() == windows
    np.testing.assert_array_equal(out.time.values, TIME[m - 1 :].to_numpy())
    np.testing.assert_array_equal(out.month.values, TIME[m - 1 :].month)
    assert out.attrs == {"units": "K", "source": "test", "window_aggregate": aggregate}
    assert out.dtype == np.float64
    ref = reference_windows(x, windows, aggregate)
    np.testing.assert_allclose(out.values, ref, rtol=1e-13)  # NaNs at the same places
    np.testing.assert_array_equal(np.isnan(out.values), np.isnan(ref))


def test_window_with_a_missing_month_is_missing():
    x = np.arange(1.0, 13.0)
    x[4] = np.nan
    field = xr.DataArray(x, dims="time", coords={"time": TIME[:12]})
    out = trailing_windows(field, [1, 3], aggregate="sum")  # samples t = 2 .. 11
    three = out.sel(window=3).values
    # windows ending at t = 4, 5, 6 contain month 4
    assert np.isnan(three[[2, 3, 4]]).all()
    np.testing.assert_array_equal(three[[0, 1, 5]], [6.0, 9.0, 21.0])  # 1+2+3, 2+3+4, 6+7+8
    assert np.isnan(out.sel(window=1).values[2]) and np.isfinite(out.sel(window=1)[3])


@settings(max_examples=30, deadline=None)
@given(
    time_chunks=chunks(N),
    lat_chunks=chunks(3),
    windows=st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True),
    aggregate=st.sampled_from(["mean", "sum"]),
    float32=st.booleans(),
)
def test_windows_on_any_chunking_equal_the_in_memory_result(
    time_chunks, lat_chunks, windows, aggregate, float32
):
    x = random_values(len(time_chunks), nan=True)
    if float32:
        x = x.astype(np.float32)
    field = make_field(x)
    expected = trailing_windows(field, windows, aggregate=aggregate)
    chunked = field.chunk({"time": time_chunks, "lat": lat_chunks})
    with count_computes(0):
        out = trailing_windows(chunked, windows, aggregate=aggregate)
    assert isinstance(out.data, da.Array)
    assert out.data.chunks[0] == chunked.isel(time=slice(max(windows) - 1, None)).data.chunks[0]
    assert out.data.chunks[2] == lat_chunks  # the grid keeps its chunks
    assert out.dtype == expected.dtype == x.dtype
    np.testing.assert_array_equal(out.values, expected.values)  # bit for bit
    ref = reference_windows(x.astype(np.float64), windows, aggregate)
    np.testing.assert_allclose(expected.values, ref, rtol=1e-13 if not float32 else 1e-6)


def test_dask_stays_lazy_until_compute():
    x = random_values(8, nan=True)
    field = make_field(x).chunk({"time": 7})
    target = xr.DataArray(da.from_array(x[:, 0, 0], chunks=7), dims="time", coords={"time": TIME})
    with count_computes(0):
        windows = trailing_windows(field, [1, 3, 6, 12], aggregate="sum")
        stack = lagged(windows, [0, 1, 2])
        X, y, info = lead_target(stack, target, 3)
        blocks = feature_blocks(X)
    assert isinstance(X.data, da.Array) and isinstance(y.data, da.Array)
    assert info.n_samples == N - 11 - 2 - 3
    assert blocks.shape == (12 * 12,)
    first = 11 + 2
    np.testing.assert_allclose(
        X.sel(lag=2, window=1).values, x[first - 2 : N - 3 - 2], rtol=1e-14, equal_nan=True
    )
    np.testing.assert_array_equal(y.values, x[first + 3 :, 0, 0])


def test_dataset_with_an_aggregate_per_variable():
    sst = random_values(9)
    rain = np.abs(random_values(10, nan=True) - 273.0)
    ds = xr.Dataset(
        {"sst": make_field(sst), "rain": make_field(rain, name="rain").assign_attrs(units="mm")},
        attrs={"title": "t"},
    )
    out = trailing_windows(ds.chunk({"time": 4}), [1, 3], aggregate={"rain": "sum"})
    assert out.attrs == {"title": "t"}
    assert out.sst.attrs["window_aggregate"] == "mean" and out.rain.attrs["units"] == "mm"
    assert out.rain.attrs["window_aggregate"] == "sum"
    np.testing.assert_allclose(out.sst.values, reference_windows(sst, [1, 3], "mean"), rtol=1e-13)
    np.testing.assert_allclose(out.rain.values, reference_windows(rain, [1, 3], "sum"), rtol=1e-13)


def test_integer_field_gives_float64():
    field = xr.DataArray(np.arange(8, dtype=np.int32), dims="time", coords={"time": TIME[:8]})
    out = trailing_windows(field, [2], aggregate="mean")
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.values[:, 0], np.arange(1, 8) - 0.5)


# --------------------------------------------------------------------------------------------
# feature blocks


def test_feature_blocks_follow_the_stacked_features():
    x = random_values(11)
    ds = xr.Dataset({"sst": make_field(x), "slp": make_field(x * 0.5, name="slp")})
    X = lagged(trailing_windows(ds, [1, 3]), [0, 1]).to_dataarray("variable")
    assert X.dims == ("variable", "time", "lag", "window", "lat", "lon")
    blocks = feature_blocks(X)
    # (variable, lag, window) in C order over the 12 cells of each block
    np.testing.assert_array_equal(blocks, np.repeat(np.arange(2 * 2 * 2), 12))

    data, layout = stack_features(X, "time")
    assert data.shape[1] == blocks.size
    for v, var in enumerate(X["variable"].values):
        for i, lag in enumerate(X.lag.values):
            for j, w in enumerate(X.window.values):
                cols = blocks == (v * 4 + i * 2 + j)
                part = X.sel(variable=var, lag=lag, window=w).values.reshape(len(X.time), -1)
                np.testing.assert_array_equal(np.asarray(data)[:, cols], part)


def test_feature_blocks_on_stacked_features_after_dropna():
    x = random_values(12, nan=True)  # cell (2, 3) is all NaN
    X = trailing_windows(make_field(x), [1, 6, 2])
    stacked = X.stack(feature=("window", "lat", "lon")).dropna("feature", how="all")
    blocks = feature_blocks(stacked)
    assert blocks.size == 3 * 11
    np.testing.assert_array_equal(blocks, np.repeat([0, 1, 2], 11))
    np.testing.assert_array_equal(stacked.window.values, np.repeat([1, 6, 2], 11))
    # none, or chosen by name
    assert (feature_blocks(make_field(x)) == 0).all()
    np.testing.assert_array_equal(
        feature_blocks(X, block_dims=["lat"]), np.tile(np.repeat([0, 1, 2], 4), 3)
    )


# --------------------------------------------------------------------------------------------
# bad arguments


FIELD = make_field(random_values(13))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: lead_target(FIELD, np.zeros(N), -1), "lead"),
        (lambda: lead_target(FIELD, np.zeros(N), 1.5), "lead"),
        (lambda: lead_target(FIELD, np.zeros(N), True), "lead"),
        (lambda: lead_target(FIELD, np.zeros(N), N - 1), "lead"),  # one pair left
        (lambda: lead_target(FIELD, np.zeros(N), N), "lead"),
        (lambda: lead_target(FIELD, np.zeros(N - 1), 0), "target"),
        (lambda: lead_target(FIELD, np.zeros((N, 2)), 0), "target"),
        (
            lambda: lead_target(FIELD, pd.Series(np.zeros(N), index=TIME + pd.Timedelta("1D")), 0),
            "target",
        ),
        (lambda: lead_target(FIELD, np.zeros(N), 0, sample_dim="month"), "sample_dim"),
        (lambda: lagged(FIELD, [-1, 0]), "lags"),
        (lambda: lagged(FIELD, [1, 1]), "lags"),
        (lambda: lagged(FIELD, [0.5]), "lags"),
        (lambda: lagged(FIELD, []), "lags"),
        (lambda: lagged(FIELD, 2), "lags"),
        (lambda: lagged(FIELD, [N]), "lags"),
        (lambda: lagged(lagged(FIELD, [0]), [0]), "field"),
        (lambda: trailing_windows(FIELD, [0, 3]), "windows"),
        (lambda: trailing_windows(FIELD, [3, 3]), "windows"),
        (lambda: trailing_windows(FIELD, [N + 1]), "windows"),
        (lambda: trailing_windows(FIELD, "3"), "windows"),
        (lambda: trailing_windows(FIELD, [1], aggregate="median"), "aggregate"),
        (lambda: trailing_windows(FIELD, [1], aggregate={"sst": "sum"}), "aggregate"),
        (lambda: trailing_windows(FIELD.to_dataset(), [1], aggregate={"rain": "sum"}), "aggregate"),
        (lambda: trailing_windows(FIELD.to_dataset(), [1], aggregate={"sst": "max"}), "aggregate"),
        (lambda: trailing_windows(FIELD, [1], sample_dim="t"), "sample_dim"),
        (lambda: feature_blocks(FIELD, block_dims=["depth"]), "block_dims"),
        (lambda: feature_blocks(FIELD, block_dims=["month"]), "block_dims"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call()


def test_feature_blocks_want_one_dataarray():
    with pytest.raises(TypeError, match="to_dataarray"):
        feature_blocks(FIELD.to_dataset())

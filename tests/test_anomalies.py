"""Anomalies against plain NumPy: training-rows-only climatology, any chunking, any calendar."""

from __future__ import annotations

import re
import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks
from strategies import chunks

import dcfa
from dcfa import LinCFA
from dcfa.anomalies import Anomalies


def reference(values, months, train, standardize=False):
    """Per-month means (months 1..12, NaN if absent) and the ddof=1 spread of the anomalies,
    over the rows ``train`` only, with NaN-aware two-pass NumPy."""
    x = np.asarray(values, dtype=np.float64)[train]
    m = np.asarray(months)[train]
    clim = np.full((12, *x.shape[1:]), np.nan)
    for k in np.unique(m):
        rows = x[m == k]
        count = (~np.isnan(rows)).sum(axis=0)
        clim[k - 1] = np.where(count > 0, np.nansum(rows, axis=0) / np.maximum(count, 1), np.nan)
    if not standardize:
        return clim, None
    anom = x - clim[m - 1]
    count = (~np.isnan(anom)).sum(axis=0)
    ss = np.nansum(anom**2, axis=0)  # anomalies have mean 0 within each month
    spread = np.sqrt(np.where(count > 1, ss / np.maximum(count - 1, 1), np.nan))
    return clim, spread


def field(rng, n=40, calendar=None, offset=0.0, dtype=np.float64, start="2001-01-01", gaps=True):
    """(time, lat, lon) with a seasonal cycle, a land cell (all NaN) and scattered gaps."""
    if calendar is None:
        time = pd.date_range(start, periods=n, freq="MS")
    else:
        time = xr.date_range(start, periods=n, freq="MS", calendar=calendar, use_cftime=True)
    months = np.asarray(xr.DataArray(time, dims="time").dt.month.values)
    seasonal = 3.0 * np.sin(2 * np.pi * months / 12)[:, None, None] * rng.uniform(0.5, 2, (3, 4))
    values = offset + seasonal + rng.normal(size=(n, 3, 4))
    values[:, 0, 0] = np.nan  # land
    if gaps:
        values[rng.random(values.shape) < 0.05] = np.nan
    X = xr.DataArray(
        values.astype(dtype),
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": [-5.0, 0.0, 5.0], "lon": [100.0, 105.0, 110.0, 115.0]},
        name="sst",
        attrs={"units": "K", "long_name": "sea-surface temperature"},
    )
    return X, months


def test_climatology_and_spread_equal_numpy(rng):
    X, months = field(rng, n=43)
    est = Anomalies(standardize=True).fit(X)
    clim, spread = reference(X.values, months, slice(None), standardize=True)
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(est.scale_.values, spread, rtol=1e-12)
    assert est.climatology_.dims == ("month", "lat", "lon")
    np.testing.assert_array_equal(est.climatology_["month"], np.arange(1, 13))
    np.testing.assert_array_equal(est.climatology_["lat"], X["lat"])
    assert est.climatology_.attrs["units"] == "K"
    assert np.isnan(est.scale_.values[0, 0])  # the land cell
    assert est.n_features_in_ == 12 and est.n_samples_seen_ == 43
    np.testing.assert_array_equal(est.months_, np.arange(1, 13))
    out = est.transform(X)
    np.testing.assert_allclose(out.values, (X.values - clim[months - 1]) / spread, rtol=1e-12)


def test_test_months_do_not_leak_into_the_climatology(rng):
    """Rows after the split get a huge offset: the fitted statistics and the transform of the
    training rows do not move, the test rows keep their offset (nothing was learnt from them)."""
    X, months = field(rng, n=60)
    train = np.arange(36)
    shifted = X.copy(data=X.values.copy())
    shifted[36:] += 1e6
    est = Anomalies(standardize=True).fit(shifted.isel(time=train))
    clim, spread = reference(X.values, months, train, standardize=True)
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-13)
    np.testing.assert_allclose(est.scale_.values, spread, rtol=1e-12)
    out = est.transform(shifted).values
    np.testing.assert_allclose(out[:36], (X.values[:36] - clim[months[:36] - 1]) / spread)
    assert np.nanmin(np.abs(out[36:])) > 1e5  # the test rows' offset is still there
    # fitted on every row, the climatology would be off by two fifths of the offset
    leaky = Anomalies().fit(shifted)
    assert np.nanmax(np.abs(leaky.climatology_.values - clim)) > 1e5


@pytest.mark.parametrize("calendar", ["noleap", "360_day", "julian", "proleptic_gregorian"])
def test_cftime_calendars_give_calendar_months(rng, calendar):
    X, months = field(rng, n=30, calendar=calendar, start="2301-03-01")
    assert months[0] == 3 and months[10] == 1
    est = Anomalies().fit(X)
    clim, _ = reference(X.values, months, slice(None))
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-13)
    np.testing.assert_allclose(est.transform(X).values, X.values - clim[months - 1])


@settings(max_examples=25, deadline=None)
@given(row_chunks=chunks(37), lat_chunks=chunks(3), standardize=st.booleans())
def test_any_chunking_equals_in_memory(row_chunks, lat_chunks, standardize):
    X, _ = field(np.random.default_rng(7), n=37)
    dense = Anomalies(standardize=standardize).fit(X)
    lazy_X = X.chunk({"time": row_chunks, "lat": lat_chunks, "lon": 2})
    lazy = Anomalies(standardize=standardize).fit(lazy_X)
    np.testing.assert_allclose(lazy.climatology_.values, dense.climatology_.values, rtol=1e-13)
    if standardize:
        np.testing.assert_allclose(lazy.scale_.values, dense.scale_.values, rtol=1e-12)
    out = lazy.transform(lazy_X)
    assert isinstance(out.data, da.Array) and out.chunks == lazy_X.chunks
    np.testing.assert_allclose(out.values, dense.transform(X).values, rtol=1e-12, atol=1e-12)


def test_dask_fit_is_one_compute_and_transform_is_lazy(rng):
    X, _ = field(rng, n=50)
    Xd = X.chunk(time=7, lat=2)
    with count_computes(1) as counter:
        est = Anomalies(standardize=True).fit(Xd)
    assert counter.total == 1
    with count_computes(0):
        out = est.transform(Xd)
    assert isinstance(out.data, da.Array)
    # one output block per input block: the time axis is not split into single steps
    assert out.chunks == Xd.chunks and out.data.numblocks == Xd.data.numblocks
    # standardised anomalies are dimensionless; every other attribute is kept
    assert out.dims == X.dims and out.name == "sst"
    assert out.attrs == {
        **X.attrs,
        "units": "1",
        "long_name": f"{X.long_name}, standardised anomalies",
    }
    np.testing.assert_array_equal(out["time"], X["time"])


def test_plain_dask_array_and_numpy_with_by_none(rng):
    values = rng.normal(size=(30, 5)) + 10.0
    values[:, 2] = 4.0  # constant: no spread
    dense = Anomalies(by=None, standardize=True).fit(values)
    np.testing.assert_allclose(dense.climatology_, values.mean(axis=0), rtol=1e-14)
    spread = values.std(axis=0, ddof=1)
    assert np.isnan(dense.scale_[2])
    np.testing.assert_allclose(np.delete(dense.scale_, 2), np.delete(spread, 2), rtol=1e-12)
    lazy = Anomalies(by=None, standardize=True).fit(da.from_array(values, chunks=(7, 2)))
    out = lazy.transform(da.from_array(values, chunks=(7, 2)))
    assert isinstance(out, da.Array)
    expect = (values - values.mean(axis=0)) / np.where(spread > 1e-12, spread, np.nan)
    np.testing.assert_allclose(out.compute(), expect, rtol=1e-12)
    np.testing.assert_allclose(dense.transform(values), expect, rtol=1e-12)
    assert not hasattr(dense, "months_")


@pytest.mark.parametrize("offset, rtol", [(273.15, 1e-9), (1e8, 1e-4)])
def test_large_offsets_keep_the_anomalies_digits(rng, offset, rtol):
    """Anomalies of 1e-3 on a large offset: the spread keeps the digits the float64 values
    hold (about eps * offset / 1e-3), as two-pass NumPy does; a sum-of-squares formula
    (``sumsq - n mean**2``) would lose every digit at 1e8."""
    X, months = field(rng, n=48)
    small = X * 1e-3
    est = Anomalies(standardize=True).fit((small + offset).chunk(time=5))
    clim, spread = reference((small + offset).values, months, slice(None), standardize=True)
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-15)
    np.testing.assert_allclose(est.scale_.values, spread, rtol=rtol)
    _, exact = reference(small.values, months, slice(None), standardize=True)
    np.testing.assert_allclose(est.scale_.values, exact, rtol=rtol)


def test_keeps_dims_order_coords_and_float32(rng):
    X, months = field(rng, n=24, dtype=np.float32)
    Y = X.transpose("lat", "time", "lon")
    est = Anomalies().fit(Y)
    out = est.transform(Y)
    assert out.dims == ("lat", "time", "lon") and out.dtype == np.float32
    assert out.attrs == X.attrs
    clim, _ = reference(X.values, months, slice(None))
    np.testing.assert_allclose(out.transpose(*X.dims).values, X.values - clim[months - 1], 1e-5)
    assert est.climatology_.dtype == np.float64  # float64 arithmetic


def test_a_single_series(rng):
    X, months = field(rng, n=36)
    series = X.isel(lat=1, lon=2)
    est = Anomalies().fit(series)
    clim, _ = reference(series.values, months, slice(None))
    assert est.climatology_.dims == ("month",) and est.n_features_in_ == 1
    np.testing.assert_allclose(est.transform(series).values, series.values - clim[months - 1])


def test_months_absent_from_training_are_an_error(rng):
    X, _ = field(rng, n=24)
    est = Anomalies().fit(X.isel(time=[*range(8), *range(12, 20)]))  # January to August
    np.testing.assert_array_equal(est.months_, np.arange(1, 9))
    assert np.isnan(est.climatology_.sel(month=[9, 10, 11, 12])).all()
    with pytest.raises(ValueError, match=r"month\(s\) \[9, 10, 11, 12\]"):
        est.transform(X)
    est.transform(X.isel(time=slice(12, 20)))  # months 1..8 of the next year are fine


@pytest.mark.parametrize("calendar", [None, "noleap"])
def test_a_repeated_date_is_refused_where_it_would_weigh_twice(rng, calendar):
    X, _ = field(rng, n=36, calendar=calendar)
    twice = xr.concat([X, X.isel(time=[5])], dim="time")  # June 2001 twice
    with pytest.raises(ValueError, match=r"X: its 'time' labels repeat 2001-06-01.*drop_dup"):
        Anomalies().fit(twice)
    # the same rows once each fit, in any order, to the reference
    est = Anomalies().fit(X.isel(time=np.random.default_rng(0).permutation(36)))
    months = np.asarray(X.time.dt.month)
    clim, _ = reference(X.values, months, np.arange(36))
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-12)


@pytest.mark.parametrize(
    "make, X, error, match",
    [
        (lambda: Anomalies(), np.ones((5, 2)), ValueError, "by: 'month' needs the dates"),
        (lambda: Anomalies(by="season"), None, ValueError, "'by' parameter"),
        (lambda: Anomalies(standardize="yes"), None, ValueError, "'standardize' parameter"),
        (lambda: Anomalies(sample_dim="t"), None, ValueError, "sample_dim: 't' is not a dim"),
        (lambda: Anomalies(), "not-dates", ValueError, "X: the sample coordinate 'time'"),
        (lambda: Anomalies(by=None), np.ones((0, 3)), ValueError, "X: 0 sample"),
        # a Dataset has dates: it was told they were missing, and to use by=None, which then
        # said to select one variable
        (Anomalies, "dataset", TypeError, r"^X: got an xarray.Dataset; select one variable"),
    ],
)
def test_bad_arguments_name_the_argument(rng, make, X, error, match):
    if X is None:
        X = field(rng, n=12)[0]
    elif isinstance(X, str) and X == "dataset":
        X = field(rng, n=12)[0].to_dataset()
    elif isinstance(X, str):
        X = field(rng, n=12)[0].assign_coords(time=np.arange(12))
    with pytest.raises(error, match=match):
        make().fit(X)


def test_transform_needs_the_training_grid(rng):
    X, _ = field(rng, n=24)
    est = Anomalies().fit(X)
    with pytest.raises(ValueError, match="'lat' coordinate differs"):
        est.transform(X.assign_coords(lat=X["lat"] + 1))
    with pytest.raises(ValueError, match="dim 'lon' has 2 entries"):
        est.transform(X.isel(lon=slice(0, 2)))
    with pytest.raises(ValueError, match="expected dims"):
        est.transform(X.rename(lon="x"))
    with pytest.raises(TypeError, match="transform needs one too"):
        est.transform(X.values.reshape(24, -1))
    flat = Anomalies(by=None).fit(X.values.reshape(24, -1))
    with pytest.raises(ValueError, match="expecting 12 features"):
        flat.transform(X.values.reshape(24, -1)[:, :5])
    with pytest.raises(TypeError, match="fitted on an array"):
        flat.transform(X)


def test_in_a_pipeline_before_lincfa(rng):
    """The DataArray out of Anomalies goes into LinCFA; same as fitting the steps by hand on the
    NumPy reference anomalies (the land cell is excluded by LinCFA)."""
    X, months = field(rng, n=96, gaps=False)
    latent = rng.normal(size=(96, 2))
    X = X + np.repeat(latent, 6, axis=1).reshape(96, 3, 4)
    y = latent @ [1.0, -2.0] + 0.1 * rng.normal(size=96)
    train = np.arange(72)
    pipe = make_pipeline(Anomalies(), LinCFA(random_state=0), LinearRegression())
    pipe.fit(X.chunk(time=10).isel(time=train), y[train])
    clim, _ = reference(X.values, months, train)
    anomalies = (X.values - clim[months - 1]).reshape(96, -1)
    lin = LinCFA(random_state=0).fit(anomalies[train], y[train])
    np.testing.assert_array_equal(pipe[1].labels_, lin.labels_)
    ols = LinearRegression().fit(lin.transform(anomalies[train]), y[train])
    pred = pipe.predict(X.isel(time=slice(72, None)))
    np.testing.assert_allclose(pred, ols.predict(lin.transform(anomalies[72:])), rtol=1e-8)
    assert pipe[:2].transform(X).dims == ("time", "group")


@parametrize_with_checks(
    [Anomalies(by=None), Anomalies(by=None, standardize=True)],
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("standardize", [True, False])
@pytest.mark.parametrize("by, n", [("month", 12), ("month", 7), (None, 1)])
def test_a_single_sample_of_every_month_is_named_before_the_pass(rng, by, n, standardize):
    """Every month (or cell, by=None) seen once: the anomalies are all 0 (and with
    standardize, the spread is undefined and every output NaN). Both were silent (a
    walkthrough's 12 months gave a field of zeros). Refused before any read; a second sample
    of one month is enough to fit, and the months seen once are named in a warning."""
    X, _ = field(rng, n=24, gaps=False)
    X = X.chunk({"time": 6})
    fit = X.isel(time=slice(0, n))
    spread = " and have no spread to divide by" if standardize else ""
    with count_computes(0), pytest.raises(dcfa.InputError) as info:
        Anomalies(by=by, standardize=standardize).fit(fit)
    said = rf"^X: every .* has a single sample in X \({n} samples\), so the anomalies are all 0"
    assert re.match(said + rf"{spread}; fit on at least two samples", str(info.value))
    with pytest.warns(UserWarning, match=r"^Anomalies: Feb, Mar, .*, Dec present once in X, so "):
        est = Anomalies(by="month", standardize=standardize).fit(X.isel(time=slice(0, 13)))
    if standardize:
        assert np.isfinite(est.scale_.values).sum() == 11  # all but the land cell
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Anomalies(by="month", standardize=standardize).fit(X)  # two years: no warning


@pytest.mark.parametrize("calendar", ["standard", "noleap"])
def test_months_once_are_the_calendar_months_of_one_sample(calendar):
    dates = xr.date_range("2001-11-01", periods=15, freq="MS", calendar=calendar, use_cftime=None)
    X = xr.DataArray(np.zeros((15, 2)), dims=("time", "cell"), coords={"time": dates})
    # Nov 2001 .. Jan 2003: Nov, Dec and Jan twice, the other nine months once
    assert Anomalies().months_once(X) == ["Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug",
                                          "Sep", "Oct"]  # fmt: skip
    assert (
        Anomalies().months_once(X.isel(time=slice(0, 2)).pipe(lambda x: xr.concat([x, x], "time")))
        == []
    )
    assert Anomalies(by=None).months_once(X) == []
    assert Anomalies().months_once(X.drop_vars("time")) == []  # no dates: fit says so
    assert Anomalies(sample_dim="t").months_once(X.rename(time="t")) == Anomalies().months_once(X)


def test_set_output_keeps_the_grid_and_tables_the_rest(rng):
    """A pipeline starting with Anomalies failed under set_output(transform="pandas"):
    scikit-learn made a DataFrame of the (time, lat, lon) anomalies ("Must pass 2-d input")."""
    import sklearn
    from sklearn.base import clone

    from dcfa import RegionsCV
    from dcfa.datasets import make_regions_field

    ds = make_regions_field(240, (12, 24), 6, seed=3).load()
    pipeline = make_pipeline(Anomalies(), RegionsCV()).set_output(transform="pandas")
    out = pipeline.fit(ds.field, ds.target).transform(ds.field)
    assert isinstance(out, pd.DataFrame) and out.shape[0] == 240
    assert (out.index == ds.time.to_index()).all()
    # the grid stays a DataArray, asked for pandas itself or by the global setting
    alone = clone(Anomalies().set_output(transform="pandas")).fit(ds.field)
    assert isinstance(alone.transform(ds.field), xr.DataArray)
    with sklearn.config_context(transform_output="pandas"):
        assert isinstance(Anomalies().fit_transform(ds.field), xr.DataArray)
        table = pd.DataFrame(rng.normal(size=(20, 3)), columns=list("abc"),
                             index=pd.RangeIndex(100, 120))  # fmt: skip
        got = Anomalies(by=None).fit_transform(table)
    # rows without dates: a DataFrame with the input's columns and index
    assert isinstance(got, pd.DataFrame) and list(got.columns) == list("abc")
    assert (got.index == table.index).all()
    np.testing.assert_allclose(got.values, table.values - table.values.mean(axis=0))
    assert isinstance(Anomalies(by=None).fit_transform(table.values), np.ndarray)
    with pytest.raises(ValueError, match=r"^transform: expected 'default', 'pandas'"):
        Anomalies().set_output(transform="arrow")


def test_other_units_are_refused_and_spellings_of_one_are_not(rng):
    """A climatology fitted in K, given degC: the anomalies were off by -273.15, and in a
    pipeline the predictions by a factor, without a word."""
    X, _ = field(rng, n=24)
    est = Anomalies().fit(X)
    celsius = (X - 273.15).assign_attrs(units="degC")
    with pytest.raises(
        ValueError, match=r"^X: its units 'degC' differ from the training data's 'K'"
    ):
        est.transform(celsius)
    model = make_pipeline(Anomalies(), LinCFA(random_state=0), LinearRegression())
    y = rng.normal(size=24)
    model.fit(X.fillna(0.0), y)
    with pytest.raises(ValueError, match="differ from the training data's 'K'"):
        model.predict(celsius.fillna(0.0))
    # the same unit spelled otherwise: transformed as before
    expected = est.transform(X).values
    for same in (X.assign_attrs(units="kelvin"), X.assign_attrs(units="degK")):
        np.testing.assert_array_equal(est.transform(same).values, expected)
    # no units to compare (a file without the attribute): taken as they are, but said, at
    # the user's line; a field in degC without units gave anomalies of -273 in silence
    with pytest.warns(UserWarning, match=r"^X: no units attribute, where the training data's "
                      r"were 'K'; X is taken to be in them") as caught:  # fmt: skip
        np.testing.assert_array_equal(est.transform(X.drop_attrs()).values, expected)
    assert caught[0].filename == __file__


def test_a_dataframe_on_dates_gets_monthly_anomalies_as_a_dataarray_does(rng):
    """A DataFrame on a DatetimeIndex was refused as one that "does not carry" dates."""
    X, _ = field(rng, n=48, gaps=False)
    cells = X.isel(lat=1).drop_vars("lat")  # (time, lon): one column per cell
    frame = pd.DataFrame(cells.values, index=cells.time.to_index(), columns=["a", "b", "c", "d"])
    on_array = Anomalies(standardize=True).fit(cells.isel(time=slice(0, 36)))
    on_frame = Anomalies(standardize=True).fit(frame.iloc[:36])
    np.testing.assert_allclose(on_frame.climatology_, on_array.climatology_.values, rtol=1e-12)
    np.testing.assert_allclose(
        on_frame.transform(frame.iloc[36:]),
        on_array.transform(cells.isel(time=slice(36, None))).values,
    )
    periods = frame.set_axis(frame.index.to_period("M"))
    np.testing.assert_allclose(
        Anomalies().fit(periods).climatology_, Anomalies().fit(frame).climatology_
    )
    assert Anomalies().months_once(frame.iloc[:14]) == [
        "Mar",
        "Apr",
        "May",
        "Jun",
        "Jul",
        "Aug",
        "Sep",
        "Oct",
        "Nov",
        "Dec",
    ]
    with pytest.raises(ValueError, match="its 'time' labels repeat 2001-01-01"):
        Anomalies().fit(pd.concat([frame.iloc[:1], frame]))
    with pytest.raises(
        ValueError, match="by: 'month' needs the dates.*DataFrame on a DatetimeIndex"
    ):
        Anomalies().fit(frame.reset_index(drop=True))


def test_a_dated_series_gets_the_anomalies_of_its_dataarray_as_a_series(rng):
    """A target's seasonal cycle, removed as the docs show: a pandas Series was refused as a
    1-D array ("Reshape your data with X.reshape(-1, 1)", which a Series has not)."""
    time = pd.date_range("2000-01-01", periods=1461, freq="D")
    cycle = 5.0 * np.sin(2 * np.pi * time.day_of_year.to_numpy() / 365.25)
    flow = pd.Series(10.0 + cycle + rng.normal(size=time.size), index=time, name="flow")
    as_array = flow.rename_axis("time").to_xarray()
    for by, n in [("dayofyear", 730), ("month", 730), (None, 730)]:
        got = Anomalies(by=by).fit(flow[:n]).transform(flow)
        want = Anomalies(by=by).fit(as_array[:n]).transform(as_array)
        assert isinstance(got, pd.Series) and got.name == "flow" and got.index.equals(time)
        np.testing.assert_array_equal(got.to_numpy(), want.values)
    once = Anomalies(by="dayofyear").months_once(flow[:400])
    assert once == Anomalies(by="dayofyear").months_once(as_array[:400]) and len(once) == 10
    with pytest.raises(ValueError, match="by: 'month' needs the dates.*which a Series does"):
        Anomalies().fit(flow.reset_index(drop=True))


def test_forward_cv_passes_a_dataframe_on_dates_to_the_pipeline(rng):
    """The CV read a DataFrame as an array, so Anomalies(by="month") lost its dates."""
    from dcfa.skill import forward_cv

    X, _ = field(rng, n=96, gaps=False)
    cells = X.isel(lat=1).drop_vars("lat")
    frame = pd.DataFrame(cells.values, index=cells.time.to_index(), columns=["a", "b", "c", "d"])
    y = cells.values[:, 1] - cells.values[:, 1].mean() + rng.normal(size=96)
    model = make_pipeline(Anomalies(), LinearRegression())
    on_frame = forward_cv(model, frame, y, n_splits=3, min_train=36)
    on_array = forward_cv(model, cells, y, n_splits=3, min_train=36)
    np.testing.assert_allclose(on_frame.r2, on_array.r2, rtol=1e-10)


def test_monthly_anomalies_of_daily_samples_warn():
    """A daily field's monthly anomalies keep the seasonal ramp within each month: a
    walkthrough's ran from -1.27 on 1 Jan to +1.18 on 31 Jan, without a word."""
    import warnings

    days = pd.date_range("2000-01-01", periods=3 * 365, freq="D")
    season = 10.0 * np.sin(2 * np.pi * days.day_of_year.to_numpy() / 365.25)
    X = xr.DataArray(np.c_[season, season], dims=("time", "x"), coords={"time": days})
    with pytest.warns(UserWarning, match=r"by='month' on 31 samples a month: a monthly "
                      r"climatology leaves the seasonal cycle"):  # fmt: skip
        A = Anomalies().fit(X)
    jan = A.transform(X).sel(time="2001-01").values[:, 0]
    assert jan[0] < -1.0 and jan[-1] > 1.0  # the ramp the warning names
    months = pd.date_range("2000-01-01", periods=36, freq="MS")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Anomalies().fit(X.isel(time=slice(0, 36)).assign_coords(time=months))
        Anomalies(by=None).fit(X)


############################################################################################
# by="dayofyear": a fitted annual cycle for daily samples


def daily_field(rng, start="1995-01-01", years=6, calendar=None, gaps=True):
    """(time, x) daily samples: a cycle with two harmonics, an offset, noise, scattered gaps
    and one cell with data on two days only."""
    if calendar is None:
        time = pd.date_range(start, periods=int(years * 365.25), freq="D")
    else:
        n = {"noleap": 365, "360_day": 360}[calendar] * years
        time = xr.date_range(start, periods=n, freq="D", calendar=calendar, use_cftime=True)
    coord = xr.DataArray(time, dims="time")
    phase = 2 * np.pi * (coord.dt.dayofyear.values - 1) / 365.25
    cycle = 8 * np.cos(phase - 3.5) + 2 * np.sin(2 * phase)
    values = 280.0 + cycle[:, None] * [1.0, 0.5, 2.0, 1.0] + rng.normal(size=(time.size, 4))
    if gaps:
        values[rng.random(values.shape) < 0.05] = np.nan
    values[2:, 3] = np.nan  # data on two days: fewer than the fit's terms
    return xr.DataArray(
        values, dims=("time", "x"), coords={"time": time}, name="t2m", attrs={"units": "K"}
    )


def leap_year_days(time) -> np.ndarray:
    """Each date's day (0-based) in the leap year 2000: 1 March is day 60 in every year."""
    return np.array([pd.Timestamp(2000, t.month, t.day).day_of_year - 1 for t in time])


def harmonic_reference(values, days, n_days, harmonics):
    """Each column's least squares on its own samples (NaN dropped), by numpy.linalg.lstsq,
    on every day; and the ddof=1 spread of its residuals."""

    def basis(d):
        phase = 2 * np.pi * np.asarray(d) / n_days
        waves = [f(k * phase) for k in range(1, harmonics + 1) for f in (np.cos, np.sin)]
        return np.column_stack([np.ones(len(d)), *waves])

    clim = np.full((n_days, values.shape[1]), np.nan)
    spread = np.full(values.shape[1], np.nan)
    for j in range(values.shape[1]):
        ok = ~np.isnan(values[:, j])
        if np.unique(days[ok]).size < 2 * harmonics + 1:
            continue
        coef = np.linalg.lstsq(basis(days[ok]), values[ok, j], rcond=None)[0]
        clim[:, j] = basis(np.arange(n_days)) @ coef
        resid = values[ok, j] - clim[days[ok], j]
        spread[j] = np.sqrt((resid**2).sum() / (ok.sum() - 1))
    return clim, spread


@pytest.mark.parametrize("harmonics", [1, 3, 6])
def test_dayofyear_climatology_is_each_cells_least_squares(rng, harmonics):
    X = daily_field(rng)
    est = Anomalies(by="dayofyear", harmonics=harmonics, standardize=True).fit(X)
    days = leap_year_days(X.indexes["time"])
    clim, spread = harmonic_reference(X.values, days, 366, harmonics)
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(est.scale_.values, spread, rtol=1e-9)
    assert np.isnan(est.climatology_.values[:, 3]).all()  # two days of data
    assert est.climatology_.dims == ("dayofyear", "x")
    np.testing.assert_array_equal(est.climatology_["dayofyear"], np.arange(1, 367))
    assert not hasattr(est, "months_")
    out = est.transform(X)
    expected = (X.values - clim[days]) / spread
    np.testing.assert_allclose(out.values, expected, rtol=1e-9, atol=1e-9)
    assert out.attrs["units"] == "1" and out.name == "t2m"


def test_dayofyear_without_harmonics_is_each_days_mean(rng):
    X = daily_field(rng, gaps=False)
    est = Anomalies(by="dayofyear", harmonics=None).fit(X)
    days = leap_year_days(X.indexes["time"])
    means = pd.DataFrame(X.values).groupby(days).mean()
    np.testing.assert_allclose(est.climatology_.values[means.index], means.values, rtol=1e-12)
    assert len(means) == 366  # 29 February: one year of the six


def test_dayofyear_recovers_the_cycle_that_days_means_blur(rng):
    """With 30 years, a day's own mean holds the noise of 30 samples (sd 1 / sqrt(30), about
    0.18); the fitted cycle pools every day and its error is about a tenth of that."""
    time = pd.date_range("1990-01-01", "2019-12-31", freq="D")
    days = leap_year_days(time)
    cycle = 10 * np.cos(2 * np.pi * (days - 200) / 366) + 2 * np.sin(4 * np.pi * days / 366)
    X = xr.DataArray(273.15 + cycle[:, None] + rng.normal(size=(time.size, 2)),
                     dims=("time", "x"), coords={"time": time})  # fmt: skip
    truth = 273.15 + 10 * np.cos(2 * np.pi * (np.arange(366) - 200) / 366)
    truth += 2 * np.sin(4 * np.pi * np.arange(366) / 366)
    fitted = Anomalies(by="dayofyear").fit(X).climatology_.values[:, 0]
    own = Anomalies(by="dayofyear", harmonics=None).fit(X).climatology_.values[:, 0]
    rms = lambda e: float(np.sqrt(np.mean(e**2)))  # noqa: E731
    assert rms(fitted - truth) < 0.04 < 0.12 < rms(own[:-1] - truth[:-1])
    out = Anomalies(by="dayofyear").fit(X).transform(X)
    # no seasonal cycle left: each month's mean anomaly is noise (sd 1 / 30; the cycle's
    # amplitude is 10)
    assert np.abs(out.groupby("time.month").mean().values).max() < 0.15


@pytest.mark.parametrize("calendar, n_days", [("noleap", 365), ("360_day", 360)])
def test_dayofyear_counts_the_days_of_the_calendars_year(rng, calendar, n_days):
    X = daily_field(rng, start="2001-01-01", years=4, calendar=calendar)
    est = Anomalies(by="dayofyear", harmonics=2).fit(X)
    days = X["time"].dt.dayofyear.values - 1
    clim, _ = harmonic_reference(X.values, days, n_days, 2)
    np.testing.assert_allclose(est.climatology_.values, clim, rtol=1e-11, atol=1e-9)
    other = daily_field(rng, start="2001-01-01", years=3)
    with pytest.raises(dcfa.InputError, match=rf"of 366 days a year; .* one of {n_days} "):
        est.transform(other)


def test_dayofyear_chunked_equals_in_memory(rng):
    X = daily_field(rng)
    est = Anomalies(by="dayofyear", standardize=True)
    whole = est.fit(X)
    clim, scale = whole.climatology_.values, whole.scale_.values
    chunked = Anomalies(by="dayofyear", standardize=True).fit(X.chunk({"time": 300}))
    np.testing.assert_allclose(chunked.climatology_.values, clim, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(chunked.scale_.values, scale, rtol=1e-12)
    lazy = chunked.transform(X.chunk({"time": 300}))
    assert isinstance(lazy.data, da.Array)
    np.testing.assert_allclose(lazy.values, whole.transform(X).values, rtol=1e-12)


def test_dayofyear_gives_a_leap_day_absent_from_training_its_cycle(rng):
    X = daily_field(rng, years=12)
    train = X.sel(time=slice("1997-01-01", "1999-12-31"))  # no 29 February
    out = Anomalies(by="dayofyear").fit(train).transform(X.sel(time=["2000-02-29"]))
    assert np.isfinite(out.values[0, :3]).all()
    with pytest.raises(dcfa.InputError, match=r"^X: 1 row\(s\) \(first 2000-02-29\) fall on "):
        Anomalies(by="dayofyear", harmonics=None).fit(train).transform(X.sel(time="2000"))


def test_dayofyear_refuses_one_year_and_warns_of_months_in_one_year(rng):
    X = daily_field(rng)
    with pytest.raises(dcfa.InputError, match=r"^X: every sample lies in 1995, so a day-of-y"):
        Anomalies(by="dayofyear").fit(X.sel(time="1995"))
    with pytest.warns(UserWarning, match=r"^Anomalies: X holds Apr, May, Jun in one year only"):
        Anomalies(by="dayofyear").fit(X.sel(time=slice("1995-07-01", "1997-03-31")))
    with pytest.raises(dcfa.InputError, match=r"^harmonics: 183 harmonics take 367 terms, more "
                       r"than the 366 days of X's calendar year; use at most 182 "):  # fmt: skip
        Anomalies(by="dayofyear", harmonics=183).fit(X)
    with pytest.raises(dcfa.InputError, match=r"^by: 'dayofyear' needs the dates"):
        Anomalies(by="dayofyear").fit(X.values)


def test_forward_cv_refuses_a_window_with_a_month_of_one_year_for_dayofyear(rng):
    from dcfa import forward_cv

    X = daily_field(rng, gaps=False).isel(x=[0, 1, 2])
    y = X.values[:, 0] - X.values[:, 0].mean()
    model = make_pipeline(Anomalies(by="dayofyear"), LinearRegression())
    with pytest.raises(dcfa.InputError, match=r"^min_train: the training rows of fold 0 .* in "
                       r"one year only: .*Anomalies\(by='dayofyear'\)"):  # fmt: skip
        forward_cv(model, X, y, n_splits=3, min_train=500)
    result = forward_cv(model, X, y, n_splits=3, min_train=800)
    assert np.isfinite(result.r2).all()


def test_dayofyear_with_as_many_terms_as_days_gives_each_days_mean(rng):
    """On a noleap calendar 182 harmonics and the mean are 365 terms, one per day: the fit
    passes through every day's mean; 183 would be more terms than days."""
    X = daily_field(rng, start="2001-01-01", years=3, calendar="noleap", gaps=False)
    X = X.isel(x=[0, 1])
    est = Anomalies(by="dayofyear", harmonics=182).fit(X)
    means = X.groupby("time.dayofyear").mean().values
    np.testing.assert_allclose(est.climatology_.values, means, rtol=1e-9)
    with pytest.raises(dcfa.InputError, match=r"more than the 365 days .*; use at most 182 "):
        Anomalies(by="dayofyear", harmonics=183).fit(X)


def test_dayofyear_fits_a_cell_with_data_on_as_many_days_as_terms(rng):
    """Three days of data and three terms (harmonics=1): the one curve through them. Two days:
    NaN. No data (land): NaN, without a warning."""
    X = daily_field(rng, gaps=False)
    values = X.values.copy()
    kept = [10, 400, 800]  # 11 January, 5 February, 11 March: three calendar days
    values[np.setdiff1d(np.arange(values.shape[0]), kept), 2] = np.nan
    values[:, 1] = np.nan
    X = X.copy(data=values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clim = Anomalies(by="dayofyear", harmonics=1).fit(X).climatology_.values
    days = leap_year_days(X.indexes["time"])
    np.testing.assert_allclose(clim[days[kept], 2], values[kept, 2], rtol=1e-10)
    assert np.isfinite(clim[:, 0]).all()
    assert np.isnan(clim[:, [1, 3]]).all()


def test_dayofyear_keeps_a_small_cycle_on_a_large_offset(rng):
    """A cycle of 1e-3 on an offset of 1e10: the fit is the one of the offset-free samples to
    two units in the offset's last place (solving on the raw values loses six)."""
    time = pd.date_range("1990-01-01", "1995-12-31", freq="D")
    days = leap_year_days(time)
    small = 1e-3 * np.cos(2 * np.pi * days / 366)[:, None] + 1e-4 * rng.normal(size=(time.size, 2))
    small[rng.random(small.shape) < 0.3] = np.nan  # uneven counts: the terms are not orthogonal
    offset = 1e10
    X = xr.DataArray(offset + small, dims=("time", "x"), coords={"time": time})
    clim = Anomalies(by="dayofyear").fit(X).climatology_.values
    exact, _ = harmonic_reference(small, days, 366, 3)
    assert np.abs(clim - offset - exact).max() <= 2 * np.spacing(offset)


def test_refitting_by_dayofyear_forgets_the_months(rng):
    X, _ = field(rng, n=36)
    est = Anomalies().fit(X)
    assert hasattr(est, "months_")
    est.set_params(by="dayofyear").fit(daily_field(rng))
    assert not hasattr(est, "months_")
    assert est.climatology_.dims == ("dayofyear", "x")


def test_dayofyear_names_the_count_and_first_of_the_rows_without_a_climatology(rng):
    X = daily_field(rng, years=12)
    est = Anomalies(by="dayofyear", harmonics=None).fit(X.sel(time=slice("1997", "1999")))
    with pytest.raises(dcfa.InputError, match=r"^X: 2 row\(s\) \(first 2000-02-29\) fall on "):
        est.transform(X.sel(time=slice("2000", "2004")))


def test_dayofyear_refuses_a_repeated_date_and_warns_at_the_callers_line(rng):
    X = daily_field(rng)
    twice = xr.concat([X, X.isel(time=[40])], dim="time")
    with pytest.raises(dcfa.InputError, match=r"^X: its 'time' labels repeat 1995-02-10 "):
        Anomalies(by="dayofyear").fit(twice)
    est = Anomalies(by="dayofyear").fit(X)
    out = est.transform(twice)  # transforming a repeated date weighs nothing: it is fine
    np.testing.assert_array_equal(out.values[-1], out.values[40])
    with pytest.warns(UserWarning, match="in one year only") as seen:
        Anomalies(by="dayofyear").fit(X.sel(time=slice("1995-07-01", "1997-03-31")))
    assert seen[0].filename == __file__


def test_forward_cv_needs_every_test_month_in_training_only_without_harmonics(rng):
    """One December, the record's last month: each day's own mean has none to give the last
    test rows' Decembers (refused before any fit); the fitted cycle gives every day one."""
    from dcfa import forward_cv

    X = daily_field(rng, gaps=False).isel(x=[0, 1, 2])
    X = X.isel(time=~((X["time"].dt.month == 12) & (X["time"].dt.year < 2000)).values)
    y = X.values[:, 0] - X.values[:, 0].mean()
    model = make_pipeline(Anomalies(by="dayofyear", harmonics=None), LinearRegression())
    with pytest.raises(dcfa.InputError, match=r"^min_train: the training rows of fold 2 .* hold "
                       r"no Dec, which its test rows hold"):  # fmt: skip
        forward_cv(model, X, y, n_splits=3, min_train=900)
    model.set_params(anomalies__harmonics=3)
    assert np.isfinite(forward_cv(model, X, y, n_splits=3, min_train=900).r2).all()

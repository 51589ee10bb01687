"""What a fitted estimator promises about the data given to it later: the grid is matched by
its labels, DataFrame columns by their names, stored moments by the target, a dated target by
its dates; the outputs say their units and keep their layout."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes

import dcfa
from dcfa.datasets import make_regions_field
from dcfa.geo import wrap_longitude


@pytest.fixture(scope="module")
def regions():
    ds = make_regions_field(300, (20, 40), 8, land_fraction=0.2, seed=1)
    return ds.field.compute(), ds.target


@pytest.fixture(scope="module")
def fitted(regions):
    field, y = regions
    model = dcfa.GenLinCFA(neighbors=1).fit(field, y)
    return model, model.transform(field).values


def minus180(field):
    """The same grid with its longitudes in -180..180, sorted."""
    lon = wrap_longitude(field.lon.values, -180.0)
    return field.assign_coords(lon=lon).sortby("lon")


def flip(field, *dims):
    return field.isel({d: slice(None, None, -1) for d in dims})


LAYOUTS = {
    "transposed": lambda f: f.transpose("time", "lon", "lat"),
    "lat flipped": lambda f: flip(f, "lat"),
    "both flipped, dims reordered": lambda f: flip(f, "lat", "lon").transpose("lon", "lat", "time"),
    "lon -180..180": minus180,
    "lon rotated": lambda f: f.roll(lon=7, roll_coords=True),
    "lon -180..180, float32 lat, flipped": lambda f: flip(
        minus180(f).assign_coords(lat=f.lat.values.astype(np.float32)), "lat"
    ),
}


# -- 1. the grid by its labels -------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_transform_matches_the_grid_by_labels(regions, fitted, layout):
    field, _ = regions
    model, expected = fitted
    out = model.transform(LAYOUTS[layout](field))
    assert not np.isnan(out.values).any()
    np.testing.assert_allclose(out.values, expected, rtol=1e-12)
    np.testing.assert_array_equal(out.time.values, field.time.values)


def test_transform_of_a_lazy_field_in_another_layout_stays_lazy(regions, fitted):
    field, _ = regions
    model, expected = fitted
    X = minus180(field).isel(lat=slice(None, None, -1)).chunk(time=100)
    with count_computes(0):
        out = model.transform(X)
    np.testing.assert_allclose(out.values, expected, rtol=1e-12)


def test_stacked_cells_in_another_order(regions):
    field, y = regions
    cells = field.stack(cell=("lat", "lon"))
    model = dcfa.GenLinCFA(neighbors=1).fit(cells, y)
    expected = model.transform(cells).values
    other = field.stack(cell=("lon", "lat"))  # levels the other way round, cells reordered
    np.testing.assert_allclose(model.transform(other).values, expected, rtol=1e-12)
    shuffled = cells.isel(cell=np.random.default_rng(0).permutation(cells.sizes["cell"]))
    np.testing.assert_allclose(model.transform(shuffled).values, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="X: the 'cell' coordinate differs"):
        model.transform(field.assign_coords(lat=field.lat + 1.0).stack(cell=("lat", "lon")))


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda f: f.assign_coords(lat=f.lat + 1.0), "X: the 'lat' coordinate differs"),
        (
            lambda f: f.assign_coords(lon=np.mod(f.lon + 5.0, 360.0)).sortby("lon"),
            "X: the 'lon' coordinate differs",
        ),
        (lambda f: f.rename(lon="x"), r"X: expected dims \('time', 'lat', 'lon'\)"),
        (lambda f: f.isel(lon=slice(0, 20)), "X: dim 'lon' has 20 entries"),
        (
            lambda f: f.assign_coords(mask=(("lat", "lon"), np.zeros((20, 40)))),
            None,  # a coordinate the training grid did not have: not compared
        ),
    ],
)
def test_transform_refuses_other_labels(regions, fitted, change, match):
    field, _ = regions
    model, expected = fitted
    if match is None:
        np.testing.assert_allclose(model.transform(change(field)).values, expected)
        return
    with pytest.raises(ValueError, match=match):
        model.transform(change(field))


def test_an_auxiliary_grid_coordinate_is_compared(regions):
    field, y = regions
    area = np.cos(np.deg2rad(field.lat)) * xr.ones_like(field.lon)
    X = field.assign_coords(area=area)
    model = dcfa.GenLinCFA().fit(X, y)
    expected = model.transform(X).values
    flipped = X.isel(lat=slice(None, None, -1))  # area follows its cells
    np.testing.assert_allclose(model.transform(flipped).values, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="X: coordinate 'area' differs"):
        model.transform(X.assign_coords(area=2.0 * X.area))


def test_gbmap_matches_the_grid_by_labels(regions):
    field, y = regions
    features = dcfa.GenLinCFA().fit(field, y).transform(field)
    model = dcfa.GBMAPRegressor(n_boosts=3, random_state=0).fit(features, y)
    expected = model.transform(features).values
    reordered = features.isel(group=slice(None, None, -1)).transpose("group", "time")
    np.testing.assert_allclose(model.transform(reordered).values, expected, rtol=1e-12)
    np.testing.assert_allclose(model.predict(reordered).values, model.predict(features).values)
    with pytest.raises(ValueError, match="X: the 'group' coordinate differs"):
        model.transform(features.assign_coords(group=features.group + 1))


@pytest.mark.parametrize("layout", ["lat flipped", "lon -180..180", "lon rotated"])
def test_anomalies_follow_the_labels(regions, layout):
    field, _ = regions
    est = dcfa.Anomalies(standardize=True).fit(field)
    expected = est.transform(field)
    X = LAYOUTS[layout](field)
    out = est.transform(X)
    assert out.dims == X.dims
    np.testing.assert_array_equal(out.lon.values, X.lon.values)  # X's own labels, in order
    back = out.assign_coords(lon=np.mod(out.lon.values, 360.0)).sortby("lon").sortby("lat")
    np.testing.assert_allclose(back.values, expected.values, rtol=1e-12, equal_nan=True)


def make_dataframe():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(80, 5)), columns=["a", "b", "c", "d", "e"])
    return X, X["a"] + X["b"] + 0.5 * rng.normal(size=80)


@pytest.mark.parametrize(
    "make",
    [
        lambda: dcfa.LinCFA(random_state=0),
        lambda: dcfa.NonLinCFA(cv=3),
        lambda: dcfa.GenLinCFA(),
        lambda: dcfa.GenLinCFACV(n_splits=2, epsilons=(0.5, 0.8)),
        lambda: dcfa.NonLinCFACV(n_splits=2, cv=2, epsilons=(1e-3,)),
        lambda: dcfa.GBMAPRegressor(n_boosts=2, random_state=0),
        lambda: dcfa.Anomalies(by=None),
    ],
    ids=["LinCFA", "NonLinCFA", "GenLinCFA", "GenLinCFACV", "NonLinCFACV", "GBMAP", "Anomalies"],
)
def test_dataframe_columns_are_checked_by_name(make):
    X, y = make_dataframe()
    est = make().fit(X, y)
    np.testing.assert_array_equal(est.feature_names_in_, X.columns)
    est.transform(X)
    with pytest.raises(ValueError, match="must be in the same order as they were in fit"):
        est.transform(X[["e", "d", "c", "b", "a"]])
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- z"):
        est.transform(X.rename(columns={"a": "z"}))


# -- 2. stored moments belong to this target ------------------------------------------------


MOMENT_FITS = {
    "LinCFA full": lambda: dcfa.LinCFA(random_state=0),
    "LinCFA seed-rows": lambda: dcfa.LinCFA(mode="rows", random_state=0),
    "GenLinCFA neighbors": lambda: dcfa.GenLinCFA(neighbors=1, mode="grid", neighborhood="seed"),
    "NonLinCFA segments": lambda: dcfa.NonLinCFA(cv=3),
    "GenLinCFACV series": lambda: dcfa.GenLinCFACV(n_splits=2, epsilons=(0.5,)),
}


@pytest.mark.parametrize("name", MOMENT_FITS)
def test_stored_moments_must_describe_this_target(regions, name):
    field, y = regions
    make = MOMENT_FITS[name]
    first = make().fit(field, y)
    stored = getattr(first, "segment_moments_", None) or first.moments_
    again = make().fit(field, y, moments=stored)
    np.testing.assert_array_equal(again.labels_, first.labels_)
    permuted = y.copy(data=y.values[np.random.default_rng(0).permutation(y.size)])
    with pytest.raises(ValueError, match="moments: they"):
        make().fit(field, permuted, moments=stored)
    with pytest.raises(ValueError, match="moments: they were computed with another target"):
        make().fit(field, 2.0 * y, moments=stored)


def test_stored_moments_pass_the_check_after_rounding(regions):
    field, y = regions
    first = dcfa.LinCFA(random_state=0).fit(field, y)
    rounded = y.astype(np.float32).astype(np.float64)  # the target as a float32 file holds it
    dcfa.LinCFA(random_state=0).fit(field, rounded, moments=first.moments_)


# -- 3. units --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, units, long_name",
    [
        (lambda: dcfa.LinCFA(random_state=0), "1", "SST, standardised"),  # means of z-scores
        (lambda: dcfa.GenLinCFA(), "K", "SST"),
        (lambda: dcfa.GenLinCFA(standardize=True), "1", "SST, standardised"),
        (lambda: dcfa.GenLinCFA(inputs="square"), "K2", "square of SST"),
        (lambda: dcfa.NonLinCFA(inputs="square", cv=3), "K2", "square of SST"),
        (
            lambda: dcfa.GenLinCFA(inputs="square", standardize=True),
            "1",
            "square of SST, standardised",
        ),
    ],
)
def test_cfa_output_units(regions, make, units, long_name):
    """The features keep the field's attrs, with their own units; where those change, the
    long_name says how and CF's standard_name goes (it fixes the units: a standardised SST
    kept 'sea_surface_temperature' with units '1', which no CF reader takes)."""
    field, y = regions
    cf = {"long_name": "SST", "standard_name": "sea_surface_temperature", "source": "test"}
    field = field.assign_attrs(cf)
    out = make().fit(field, y).transform(field)
    kept = field.attrs if units == "K" else {k: v for k, v in field.attrs.items()
                                              if k != "standard_name"}  # fmt: skip
    assert out.attrs == {**kept, "units": units, "long_name": long_name}


def test_anomalies_output_units(regions):
    field, _ = regions
    assert dcfa.Anomalies(standardize=True).fit(field).transform(field).attrs == {
        **field.attrs,
        "units": "1",
        "long_name": "synthetic field, standardised anomalies",
    }
    assert dcfa.Anomalies().fit(field).transform(field).attrs == field.attrs


def test_squared_compound_units(regions):
    field, y = regions
    wind = field.assign_attrs(units="m s-1")
    out = dcfa.GenLinCFA(inputs="square").fit(wind, y).transform(wind)
    assert out.attrs["units"] == "(m s-1)2"
    from dcfa.cfa.inputs import squared_units

    cases = {"K": "K2", "m2": "m4", "s-1": "s-2", "1": "1", "degC": "degC2", "W m-2": "(W m-2)2"}
    assert {u: squared_units(u) for u in cases} == cases


# -- 4. a dated Series target ----------------------------------------------------------------


def test_a_dated_series_target_is_matched_by_date(regions):
    field, y = regions
    series = y.to_series()
    assert isinstance(series.index, pd.DatetimeIndex)
    model = dcfa.GenLinCFA().fit(field, series)
    np.testing.assert_array_equal(model.labels_, dcfa.GenLinCFA().fit(field, y).labels_)
    shifted = series.shift(1, freq="MS")  # the same values on the next months' dates
    index = r"y: the dates of its index \('time'\) differ from X's 'time' coordinate"
    for target, said in (
        (y.shift(time=0).assign_coords(time=shifted.index), "y: its 'time' coordinate differs"),
        (shifted, index),
    ):
        with pytest.raises(ValueError, match=said):
            dcfa.GenLinCFA().fit(field, target)
    with pytest.raises(ValueError, match=index):
        dcfa.GBMAPRegressor(n_boosts=1).fit(field.isel(lat=0), shifted)
    # an undated Series is still taken by position
    dcfa.GenLinCFA().fit(field, series.reset_index(drop=True))


# -- 5. layouts of the outputs ---------------------------------------------------------------


def test_inverse_transform_gives_the_fitted_grid(regions, fitted):
    field, _ = regions
    model, _ = fitted
    Xt = model.transform(field)
    back = model.inverse_transform(Xt)
    assert isinstance(back, xr.DataArray)
    assert back.dims == ("time", "lat", "lon")
    xr.testing.assert_identical(back.time, field.time)
    xr.testing.assert_identical(back.lat, field.lat)
    assert back.attrs == field.attrs
    flat = model.inverse_transform(Xt.values)
    np.testing.assert_array_equal(back.values.reshape(field.sizes["time"], -1), flat)


def test_pandas_output_keeps_the_time_index(regions):
    field, y = regions
    model = dcfa.GenLinCFA().set_output(transform="pandas").fit(field, y)
    out = model.transform(field)
    assert isinstance(out, pd.DataFrame)
    pd.testing.assert_index_equal(out.index, field.indexes["time"])
    assert list(out.columns) == list(model.get_feature_names_out())


def test_coordinates_stored_as_float32_are_the_same_labels(regions):
    field, y = regions
    X = field.assign_coords(lat=np.linspace(-9.9, 9.9, 20), lon=np.linspace(0.1, 351.1, 40))
    model = dcfa.GenLinCFA().fit(X, y)
    expected = model.transform(X).values
    stored = X.assign_coords(lat=X.lat.astype(np.float32), lon=X.lon.astype(np.float32))
    assert not np.array_equal(stored.lat.values, X.lat.values)
    for Z in (stored, flip(stored, "lat", "lon")):
        np.testing.assert_allclose(model.transform(Z).values, expected, rtol=1e-12)

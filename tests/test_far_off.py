"""A field in other units than the fit's (degC for K, with xarray's ``K`` attribute kept by
the arithmetic that converted it) is said at the user's line when it is in memory: by the
estimators' ``transform`` (a pipeline's ``predict`` too) and by a loaded result's
``transform``. Its forecast was off by tens of thousands, without a word."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.pipeline import make_pipeline

import dcfa
from dcfa._validation import FAR_OFFSET, FAR_RATIO, far_off


def _field(seed: int, n: int = 240) -> tuple[xr.DataArray, xr.DataArray]:
    rng = np.random.default_rng(seed)
    time = pd.date_range("2000-01-01", periods=n, freq="MS")
    latent = rng.normal(size=(n, 2))
    cells = np.repeat([0, 1], 12).reshape(4, 6)
    sst = 290 + latent[:, cells] + 0.5 * rng.normal(size=(n, 4, 6))
    X = xr.DataArray(
        sst,
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": np.arange(4.0), "lon": np.arange(6.0)},
        attrs={"units": "K"},
    )
    y = xr.DataArray(latent[:, 0] + 0.3 * rng.normal(size=n), dims="time", coords={"time": time})
    return X, y


def _far_warnings(caught) -> list[warnings.WarningMessage]:
    return [w for w in caught if "far outside what" in str(w.message)]


def test_a_pipelines_predict_on_degrees_celsius_warns_at_the_users_line():
    X, y = _field(0)
    model = make_pipeline(dcfa.Anomalies(), dcfa.RegionsCV(gap=0, n_splits=3))
    model = make_pipeline(*model, model.fit(X, y)[-1].regressor()).fit(X, y)
    Xn, _ = _field(1, n=60)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict(Xn)  # the same units: nothing said
        model.predict(Xn + 2.0)  # two degrees warmer: a climate, not other units
    assert not _far_warnings(caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wrong = model.predict(Xn - 273.15)  # xarray keeps units: 'K'
    [w] = _far_warnings(caught)
    assert w.filename == __file__  # the user's line, not dcfa's or scikit-learn's
    assert str(w.message).startswith("X: its features lie a median of ")
    assert "far outside what RegionsCV was fitted on" in str(w.message)
    assert np.abs(wrong).mean() > 100 * np.abs(y.values).mean()  # what it warns of


def test_an_estimators_transform_checks_what_is_in_memory_and_leaves_dask_lazy():
    X, y = _field(2)
    model = dcfa.LinCFA(neighbors=1).fit(X, y)
    np.testing.assert_allclose(model.std_, X.std("time", ddof=1).values.ravel(), rtol=1e-10)
    assert model.n_samples_fit_ == 240
    with pytest.warns(UserWarning, match="far outside what LinCFA was fitted on"):
        model.transform(X * 1000.0)  # the same K read as mK
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.transform((X - 273.15).chunk({"time": 60}))  # a Dask X: not read here


def test_a_loaded_results_transform_checks_a_field_in_memory(tmp_path, scheduler):
    from support import write_job

    from dcfa.batch.config import load_config
    from dcfa.batch.job import run_job

    job = write_job(tmp_path)
    out = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    fitted = dcfa.load_result(out)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.forecast(ds)  # its own archive
        fitted.forecast(ds.chunk({"time": 60}) - 273.15)  # Dask: dcfa apply's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitted.forecast(ds - 273.15)
    [w] = _far_warnings(caught)
    assert w.filename == __file__ and str(w.message).startswith("field: its series lie a ")


@pytest.mark.parametrize("shift", [0.0, 3.0, FAR_OFFSET - 1])
def test_far_off_says_nothing_within_the_bounds(shift):
    rng = np.random.default_rng(3)
    applied = shift + rng.normal(size=(60, 5))
    assert far_off(applied, np.zeros(5), np.ones(5), 240) is None


def test_far_off_names_an_offset_and_a_spread_beyond_the_bounds():
    rng = np.random.default_rng(4)
    said = far_off(rng.normal(size=(60, 5)) + 2 * FAR_OFFSET, np.zeros(5), np.ones(5), 240)
    assert said is not None and said.startswith("lie a median of 6")
    wide = far_off(rng.normal(size=(60, 5)) * 2 * FAR_RATIO, np.zeros(5), np.ones(5), 240)
    assert wide is not None and wide.startswith("vary ")
    assert far_off(rng.normal(size=(6, 5)) * 2 * FAR_RATIO, np.zeros(5), np.ones(5), 240) is None


def test_a_cell_masked_in_new_months_is_named_where_its_group_turns_nan(tmp_path, scheduler):
    """One cell masked in the new months (a new land mask, sea ice) made every forecast NaN:
    a pipeline's predict raised scikit-learn's "Input X contains NaN", naming nothing, and a
    loaded result's forecast was NaN in every month without a word."""
    X, y = _field(5)
    model = make_pipeline(dcfa.Anomalies(), dcfa.RegionsCV(gap=0, n_splits=3))
    model = make_pipeline(*model, model.fit(X, y)[-1].regressor()).fit(X, y)
    Xn, _ = _field(6, n=60)
    Xn[10:, 2, 3] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="contains NaN"):  # scikit-learn's, after ours
            model.predict(Xn)
    [w] = [w for w in caught if "hold NaN" in str(w.message)]
    group = int(model[1].label_map_.sel(lat=2.0, lon=3.0))
    assert w.filename == __file__
    assert str(w.message).startswith(
        f"X: 1 of its cells hold NaN in 50 of 60 samples (the first: lat 2.0, lon 3.0, of "
        f"group {group}): their groups, and any forecast from them, are NaN"
    )

    from support import write_job

    from dcfa.batch.config import load_config
    from dcfa.batch.job import run_job

    out = run_job(load_config(write_job(tmp_path)), scheduler=scheduler, echo=lambda *a: None)
    fitted = dcfa.load_result(out)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    ds["sst"][5:8, 1, 2] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forecast = fitted.forecast(ds)
    [w] = [w for w in caught if "hold NaN" in str(w.message)]
    lat, lon = float(ds.lat[1]), float(ds.lon[2])
    assert str(w.message).startswith(
        f"field: 1 of its cells hold NaN in 3 of 120 samples (the first: lat {lat}, lon {lon}"
    )
    assert int(forecast.isnull().sum()) == 3


def test_inputs_phi_are_checked_against_the_moments_of_phi():
    """The fitted mean_ and std_ are of phi(x) (x**2 for inputs="square"): the raw x of the
    training field itself lay 140 of their standard deviations off, and every transform of
    NonLinCFA's paper setting warned."""
    X, y = _field(8)
    model = dcfa.NonLinCFA(inputs="square").fit(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.transform(X)
    assert not _far_warnings(caught)
    with pytest.warns(UserWarning, match="far outside what NonLinCFA was fitted on"):
        model.transform(X * 1000.0)

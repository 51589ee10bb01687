"""The recommended forecast pipeline answers a DataArray with a DataArray: its last step, a
plain scikit-learn regression on the region means, predicted a bare array and dropped the
samples' coordinates."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline

import dcfa
from dcfa.datasets import make_regions_field


@pytest.fixture(scope="module")
def field():
    ds = make_regions_field(120, (12, 24), 6, seed=1, time_chunk=120).load()
    ds["target"].attrs["units"] = "hPa"
    return ds


@pytest.mark.parametrize("regression", ["ridge", "ols"])
def test_the_pipeline_predicts_a_dataarray_along_the_samples(field, regression):
    """The prediction of the recommended pipeline on a DataArray is labelled along ``time``
    with the target's attrs, and holds what the same regression predicts on the region means
    as arrays (fitted by hand: scikit-learn's estimator, never wrapped)."""
    model = dcfa.RegionsCV(regression=regression, n_splits=3)
    pipe = make_pipeline(dcfa.Anomalies(), model, model.regressor())
    pipe.fit(field.field, field.target)
    predicted = pipe.predict(field.field.isel(time=slice(60, None)))

    assert isinstance(predicted, xr.DataArray) and predicted.dims == ("time",)
    np.testing.assert_array_equal(predicted.time, field.time[60:])
    assert predicted.name == "prediction"
    assert predicted.attrs == field.target.attrs

    means = pipe[:-1].transform(field.field)
    plain = clone(pipe[-1].estimator).fit(means.values, field.target.values)
    np.testing.assert_allclose(predicted.values, plain.predict(means.values[60:]), rtol=1e-12)


def test_arrays_get_the_estimators_own_answer():
    """Arrays in, the wrapped estimator's array out, as scikit-learn's."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    out = dcfa.LabelledRegressor(LinearRegression()).fit(X, y).predict(X)
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, LinearRegression().fit(X, y).predict(X))


def test_a_target_of_two_columns_is_predicted_along_target():
    """A 2-D target (scikit-learn's multi-output regression) keeps its columns as ``target``."""
    rng = np.random.default_rng(1)
    X = xr.DataArray(rng.normal(size=(30, 2)), dims=("month", "group"),
                     coords={"month": np.arange(30)})  # fmt: skip
    y = rng.normal(size=(30, 2))
    out = dcfa.LabelledRegressor(LinearRegression()).fit(X, y).predict(X)
    assert out.dims == ("month", "target") and out.attrs == {}
    np.testing.assert_allclose(out.values, LinearRegression().fit(X.values, y).predict(X.values))

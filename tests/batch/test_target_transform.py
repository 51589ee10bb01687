"""``target.transform = "log"``: ``dcfa fit`` fits on the logarithm of a target above 0, and
``dcfa apply`` brings its forecast back with the exponential (the median); a target of 0 or
below is refused before any pass, naming the first such month."""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, fails, tree, write_forecast_job

from dcfa import GBMAPClassifier, GBMAPRegressor
from dcfa._errors import InputError
from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.batch.results import load_result
from dcfa.batch.transform import check_transform

WINDOWS, LAGS, LEAD = [1, 3], [0, 1], 2  # write_forecast_job's
HISTORY = max(WINDOWS) - 1 + max(LAGS)  # earlier months the first computed one needs


def _job(d, change):
    """write_forecast_job's job (its target follows the field's temperatures, in kelvin),
    its CSV target's values ``change(y)``."""
    with dask.config.set(scheduler="synchronous"):
        job, _, _ = write_forecast_job(d)
    y = pd.read_csv(d / "y.csv")
    y["y"] = change(y["y"].to_numpy())
    y.to_csv(d / "y.csv", index=False)
    return job, y["y"].to_numpy()


@pytest.mark.slow
def test_fit_on_the_log_and_apply_back_in_the_targets_units(tmp_path, cluster_address):
    """The result's target is the logarithm of the CSV's values; ``dcfa apply``'s forecast is
    the exponential of OLS fitted to that logarithm on the stored features (least squares
    by hand), in the target's units, and named as the median it is; GBMAP's prediction
    likewise."""
    job, flow = _job(tmp_path, lambda y: np.exp(y - y.mean()))  # a skewed flow
    lines: list[str] = []
    config = load_config(job, ["target.transform=log", 'target.units="m3 s-1"', "gbmap.n_boosts=2"])
    run_job(config, scheduler=cluster_address, echo=lines.append)
    said = "\n".join(lines)
    assert "target.transform = 'log': fitted on the logarithm of the target (from " in said
    result = xr.open_zarr(tmp_path / "out.zarr")
    np.testing.assert_allclose(result.target.values, np.log(flow[HISTORY + LEAD : 120]))
    assert result.target.attrs["long_name"] == "log of y"
    assert result.target.attrs["units"] == "1"
    assert result.target.attrs["log_of_units"] == "m3 s-1"
    X = result.features.values.astype(np.float64)
    A = np.c_[np.ones(len(X)), X]
    beta = np.linalg.lstsq(A, result.target.values, rcond=None)[0]

    before = tree(tmp_path)
    out = cli("apply", str(tmp_path / "out.zarr"), str(tmp_path / "sst.zarr"), "--output",
              str(tmp_path / "applied.zarr"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("applied.zarr")} == before
    applied = xr.open_zarr(tmp_path / "applied.zarr")
    forecast = applied.forecast.sel(time=result.time).values
    np.testing.assert_allclose(forecast, np.exp(A @ beta), rtol=1e-5)
    assert applied.forecast.attrs["units"] == "m3 s-1"
    assert applied.forecast.attrs["long_name"] == (
        "y predicted by OLS on the features (the exponential of its logarithm's prediction: "
        "the median)"
    )
    # GBMAP's prediction too (a regressor fitted on the logarithm)
    gbmap = load_result(tmp_path / "out.zarr").gbmap
    logged = gbmap.predict(applied.features.sel(time=result.time).values.astype(np.float64))
    np.testing.assert_allclose(
        applied.prediction.sel(time=result.time).values, np.exp(logged), rtol=1e-4
    )
    assert applied.prediction.attrs["units"] == "m3 s-1"
    assert applied.prediction.attrs["long_name"] == (
        "y predicted by GBMAP (the exponential of its logarithm's prediction: the median)"
    )
    shown = cli("inspect", str(tmp_path / "out.zarr"), cwd=tmp_path)
    assert "(y, in m3 s-1, fitted on its logarithm), " in shown.stdout, shown.stdout
    # the same from Python, on a field in memory
    fitted = load_result(tmp_path / "out.zarr")
    assert fitted.target_transform == "log"
    field = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).sst.load()
    np.testing.assert_allclose(
        fitted.forecast(field).sel(time=result.time).values, forecast, rtol=1e-6
    )
    predicted = fitted.predict(field).sel(time=result.time)
    np.testing.assert_allclose(predicted.values, np.exp(logged), rtol=1e-4)
    assert predicted.attrs == applied.prediction.attrs


@pytest.mark.slow
def test_a_target_at_or_below_0_is_refused_before_any_pass(tmp_path):
    """``dcfa fit`` exits 2 naming the key, how many months are not above 0 and the first of
    them, and writes nothing."""
    job, y = _job(tmp_path, lambda y: y - np.median(y))  # anomalies: half below 0
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "target.transform=log", cwd=tmp_path)
    n_bad = int((y[HISTORY + LEAD :] <= 0).sum())  # the months the job fits
    last = fails(proc, 2, "target.transform = 'log' needs a target above 0: ")
    assert f": {n_bad} samples of {120 - HISTORY - LEAD} are not (the first, " in last, last
    assert tree(tmp_path) == before


def test_a_log_target_is_not_two_classes():
    """A classifier (GBMAP's, or GenLinCFA's bernoulli family) with a log target is refused,
    naming both keys; a regressor, or no transform, is not."""
    with pytest.raises(InputError, match=r"^target\.transform = 'log' .* gbmap\.task = 'class"):
        check_transform("log", {}, GBMAPClassifier())
    with pytest.raises(InputError, match=r"method\.params\.family = 'bernoulli' needs$"):
        check_transform("log", {"family": "bernoulli"}, None)
    check_transform("log", {}, GBMAPRegressor())
    check_transform("none", {"family": "bernoulli"}, GBMAPClassifier())

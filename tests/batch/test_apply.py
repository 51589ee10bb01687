"""Applying a fitted result to new months (issue 13, item 4): ``dcfa apply`` and
``dcfa.batch.results.load_result``.

Two small jobs are fitted once: A (anomalies, LinCFA over the cells with data, a GBMAP, an
archive stored in blocks of grid rows so the reduction sums several cell blocks) and B
(winter months only, standardised, LinCFA's grid execution ``mode = "grid"``). Applied to
their own archives they give their stored ``features`` bit for bit; applied to months appended
to the archive they give a NumPy reference's values; bad input exits 2 naming what differs
and writes nothing. A third job (C, tests/batch/test_job_forecast.py's) has trailing windows,
lags and a lead: applied, it computes the windows and lags itself, from the months before the first
one selected.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from support import cli, fails, numpy_predictors, tree, write_forecast_job, write_job

from dcfa import io
from dcfa.batch.apply import apply_result
from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.batch.results import PYTHON_NAMES, load_result

pytestmark = pytest.mark.slow

QUIET = {"echo": lambda *a: None}


def _job(d, archive, **changes):
    """tests/batch/test_job.py's small job, its archive rewritten by ``archive(ds)`` (the archive
    and target are made in this process: Dask's synchronous scheduler, not the cluster)."""
    with dask.config.set(scheduler="synchronous"):
        job = write_job(d, **changes)
        ds = xr.open_zarr(d / "sst.zarr", consolidated=False).load()
        shutil.rmtree(d / "sst.zarr")
        archive(ds.drop_encoding()).to_zarr(d / "sst.zarr", zarr_format=3, consolidated=False)
    return job


@pytest.fixture(scope="module")
def job_a(tmp_path_factory, cluster_address):
    """Anomalies, LinCFA on the cells with data, GBMAP; the archive in blocks of 2 grid rows
    (time chunks of 40 are kept by the job, so the reduction sums three cell blocks)."""
    d = tmp_path_factory.mktemp("a")
    job = _job(
        d, lambda ds: ds.chunk({"time": 40, "lat": 2}), gbmap__n_boosts=2, gbmap__random_state=0
    )
    run_job(load_config(job), scheduler=cluster_address, **QUIET)
    return d


@pytest.fixture(scope="module")
def job_b(tmp_path_factory, cluster_address):
    """Winter months only (a climatology of December, January and February), standardised,
    LinCFA's grid execution."""
    d = tmp_path_factory.mktemp("b")
    params = {"random_state": 0, "neighbors": 1, "neighborhood": "seed", "mode": "grid"}
    job = _job(
        d,
        lambda ds: ds.sel(time=ds.time.dt.month.isin([12, 1, 2])).chunk({"time": 12}),
        method__params=params,
        input__standardize=True,
    )
    run_job(load_config(job), scheduler=cluster_address, **QUIET)
    return d


def _reference(result: xr.Dataset, sst: np.ndarray, months: np.ndarray) -> np.ndarray:
    """Anomalies with the stored climatology, then each group's mean of
    ``cell_scale * (x - cell_centre)`` over its cells, by hand."""
    clim = result.climatology.sel(month=months).values
    x = (sst.astype(np.float64) - clim).reshape(len(months), -1)
    if "spread" in result:
        x = x / result.spread.values.ravel()
    region = np.nan_to_num(result.region.values.ravel(), nan=-1).astype(int)
    scale = result.cell_scale.values.ravel()
    centre = result.cell_centre.values.ravel()
    out = np.empty((len(months), result.sizes["group"]))
    for g in range(out.shape[1]):
        k = region == g
        out[:, g] = (scale[k] * (x[:, k] - centre[k])).mean(axis=1)
    return out


def _gbmap_reference(result: xr.Dataset, features: np.ndarray):
    """The GBMAP regressor's embedding and prediction from the stored learners, by hand."""
    import json

    fitted = json.loads(result.attrs["gbmap_fitted"])
    beta = json.loads(result.attrs["gbmap"])["beta"]
    z = (features - result.gbmap_shift.values - result.gbmap_centre.values) / (
        result.gbmap_scale.values
    )
    u = z @ result.gbmap_coef.values.T + result.gbmap_bias.values
    phi = result.gbmap_intercept.values + result.gbmap_sign.values * (
        np.logaddexp(0.0, beta * u) / beta
    )
    embedding = phi * fitted["y_scale"]
    return embedding, fitted["y_mean"] + embedding.sum(axis=1)


def _append_months(path, n: int, seed: int = 7) -> np.ndarray:
    """Append ``n`` months of new values to the archive at ``path``; return them."""
    old = xr.open_zarr(path, consolidated=False)
    start = pd.Timestamp(old.time.values[-1]) + pd.DateOffset(months=1)
    time = pd.date_range(start, periods=n, freq="MS")
    rng = np.random.default_rng(seed)
    season = 3 * np.sin(2 * np.pi * time.month.values / 12)[:, None, None]
    sst = (281 + season + rng.normal(size=(n, *old.sst.shape[1:]))).astype("float32")
    sst[:, np.isnan(old.sst.values[0])] = np.nan
    new = xr.Dataset(
        {"sst": (("time", "lat", "lon"), sst, dict(old.sst.attrs))},
        coords={"time": time, "lat": old.lat.values, "lon": old.lon.values},
    )
    new.to_zarr(path, append_dim="time", consolidated=False)
    return sst


############################################################################################
# the values


@pytest.mark.parametrize("job", ["job_a", "job_b"])
def test_applied_to_its_own_archive_reproduces_the_features_exactly(request, job, tmp_path):
    d = request.getfixturevalue(job)
    out = apply_result(d / "result.zarr", d / "sst.zarr", tmp_path / "applied.zarr", **QUIET)
    applied, result = xr.open_zarr(out), xr.open_zarr(d / "result.zarr")
    assert applied.features.dtype == np.float32
    np.testing.assert_array_equal(applied.time.values, result.time.values)
    np.testing.assert_array_equal(applied.features.values, result.features.values)  # bitwise
    # and labelled as the result's: units, each group's name and units
    assert applied.features.attrs.get("units") == result.features.attrs.get("units")
    for c in ("group_name", "group_units"):
        assert (c in applied.coords) == (c in result.coords)
        if c in result.coords:
            np.testing.assert_array_equal(applied[c].values, result[c].values)
    if "embedding" in result:
        np.testing.assert_array_equal(applied.embedding.values, result.embedding.values)
    assert applied.attrs["dcfa_kind"] == "region series"
    assert applied.attrs["result"] == str(d / "result.zarr")
    assert applied.attrs["archive"] == str(d / "sst.zarr")


def test_months_missing_from_the_archive_are_noted(job_a, tmp_path):
    """A year missing from the archive applied: "120 samples" and nothing of the gap, where
    dcfa fit notes it of its own archive."""
    ds = xr.open_zarr(job_a / "sst.zarr", consolidated=False).load().drop_encoding()
    ds.sel(time=ds.time.dt.year != 2005).chunk({"time": 12}).to_zarr(tmp_path / "gap.zarr")
    proc = cli(
        "apply", str(job_a / "result.zarr"), "gap.zarr", "--output", "out.zarr", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "      note: no series in 12 months within the span written (the first 2005-01 .. "
        "2005-12): months missing from the archive, or whose windows and lags reach one"
    ) in proc.stdout.splitlines(), proc.stdout


def test_appended_months_old_ones_unchanged_new_ones_as_numpy(job_a, tmp_path):
    """``dcfa apply`` (the real command line) on the training archive with a year appended."""
    archive = tmp_path / "sst.zarr"
    shutil.copytree(job_a / "sst.zarr", archive)
    new_sst = _append_months(archive, 12)
    proc = cli(
        "apply", str(job_a / "result.zarr"), str(archive), "--output", "out.zarr", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "2000-01-01 .. 2010-12-01, 132 samples" in proc.stdout
    assert "out.zarr: 132 samples x 9 groups" in proc.stdout
    applied = xr.open_zarr(tmp_path / "out.zarr")
    result = xr.open_zarr(job_a / "result.zarr")
    old, new = applied.isel(time=slice(0, 120)), applied.isel(time=slice(120, None))
    np.testing.assert_array_equal(old.features.values, result.features.values)
    np.testing.assert_array_equal(old.embedding.values, result.embedding.values)
    reference = _reference(result, new_sst, new.time.dt.month.values)
    np.testing.assert_allclose(new.features.values, reference, rtol=1e-5, atol=1e-6)
    assert np.abs(new.features.values - old.features.values[:12]).max() > 0.1  # new values
    # the reference is the job's computation: on the old months it gives the stored features
    old_sst = xr.open_zarr(job_a / "sst.zarr", consolidated=False).sst.values
    np.testing.assert_allclose(
        _reference(result, old_sst, old.time.dt.month.values),
        result.features.values,
        rtol=1e-5,
        atol=1e-6,
    )
    # GBMAP: embedding and prediction from the stored learners
    embedding, prediction = _gbmap_reference(result, reference)
    np.testing.assert_allclose(new.embedding.values, embedding, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new.prediction.values, prediction, rtol=1e-4, atol=1e-5)
    # only the new year (time=): the same values
    year = apply_result(
        job_a / "result.zarr",
        archive,
        tmp_path / "year.zarr",
        time=("2010-01", "2010-12"),
        **QUIET,
    )
    year = xr.open_zarr(year)
    np.testing.assert_array_equal(year.time.values, new.time.values)
    np.testing.assert_array_equal(year.features.values, new.features.values)


def test_load_result_transform_is_lazy(job_a):
    fitted = load_result(job_a / "result.zarr")
    assert fitted.variables == ["sst"] and fitted.n_groups == 9 and fitted.grid == ("lat", "lon")
    assert type(fitted.gbmap).__name__ == "GBMAPRegressor"
    field = io.open_archive(job_a / "sst.zarr", ["sst"])
    with count_computes(0):  # building the graphs asks Dask for nothing
        features = fitted.transform(field)
        embedding = fitted.embedding(field)
        prediction = fitted.predict(
            xr.open_zarr(job_a / "sst.zarr", consolidated=False)
        )  # a Dataset works too
    assert isinstance(features.data, da.Array) and features.dims == ("time", "group")
    assert isinstance(embedding.data, da.Array) and embedding.dims == ("time", "boost")
    assert isinstance(prediction.data, da.Array) and prediction.dims == ("time",)
    result = xr.open_zarr(job_a / "result.zarr")
    np.testing.assert_array_equal(features.astype("float32").values, result.features.values)
    np.testing.assert_array_equal(embedding.astype("float32").values, result.embedding.values)
    # in memory: NumPy in, NumPy out, the same values (one block of cells, not three: equal
    # up to float64 rounding)
    eager = fitted.transform(field.load())
    assert isinstance(eager.data, np.ndarray)
    np.testing.assert_allclose(eager.values, result.features.values, rtol=1e-6, atol=1e-7)


def test_one_gbmap_output_computes_only_that_one(job_a):
    """``embedding`` and ``predict`` of an in-memory field computed every GBMAP output (the
    embedding, the prediction) to return one; each now runs only its own, with the values
    of :meth:`gbmap_outputs`, which can be asked for some outputs by name."""
    fitted = load_result(job_a / "result.zarr")
    field = io.open_archive(job_a / "sst.zarr", ["sst"]).load()
    every = fitted.gbmap_outputs(fitted.transform(field))
    assert list(every) == ["embedding", "prediction"]  # a regressor

    def refused(*args, **kwargs):
        raise AssertionError("an output that was not asked for was computed")

    gbmap = fitted.gbmap
    gbmap.predict = refused  # this instance's: the embedding must not need it
    embedding = fitted.embedding(field)
    np.testing.assert_array_equal(embedding.values, every["embedding"].values)
    del gbmap.predict
    gbmap.transform = refused
    prediction = fitted.predict(field)
    np.testing.assert_array_equal(prediction.values, every["prediction"].values)
    del gbmap.transform
    assert list(fitted.gbmap_outputs(fitted.transform(field), names=["prediction"])) == [
        "prediction"
    ]
    with pytest.raises(ValueError, match=r"names: \['decision_function'\] are not among"):
        fitted.gbmap_outputs(fitted.transform(field), names=["decision_function"])


############################################################################################
# bad input: exit 2, one line naming what differs, nothing written


def _variant(source, target, change) -> None:
    ds = xr.open_zarr(source, consolidated=False).load()
    change(ds).drop_encoding().to_zarr(target, zarr_format=3, consolidated=False)


def _cli_together(runs: dict, cwd) -> dict:
    """``python -m dcfa ARGS`` for every entry of ``runs``, the processes side by side."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "dcfa", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in runs.items()
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_bad_input_exits_2_naming_what_differs_and_writes_nothing(job_a, job_b, tmp_path):
    """Through the real command line: another grid, a missing variable, months the
    climatology does not have, an output inside the archive."""
    _variant(
        job_a / "sst.zarr", tmp_path / "shifted.zarr", lambda ds: ds.assign_coords(lon=ds.lon + 1.0)
    )
    _variant(job_a / "sst.zarr", tmp_path / "renamed.zarr", lambda ds: ds.rename(sst="tos"))
    shutil.copytree(job_a / "sst.zarr", tmp_path / "sst.zarr")
    a, b = str(job_a / "result.zarr"), str(job_b / "result.zarr")
    before = tree(tmp_path)
    procs = _cli_together(
        {
            "grid": ["apply", a, "shifted.zarr", "--output", "out.zarr"],
            "variable": ["apply", a, "renamed.zarr", "--output", "out.zarr"],
            # result B knows December to February only; A's archive has every month
            "months": ["apply", b, "sst.zarr", "--output", "out.zarr"],
            "inside": ["apply", a, "sst.zarr", "--output", "sst.zarr/out.zarr"],
        },
        cwd=tmp_path,
    )
    fails(
        procs["grid"],
        2,
        "ARCHIVE: coordinate 'lon' differs from the result's grid",
        "at index 0 along 'lon': result 150.0, here 151.0",
    )
    fails(procs["variable"], 2, "ARCHIVE: variable(s) ['sst'] of the result", "it has ['tos']")
    fails(
        procs["months"],
        2,
        "ARCHIVE: calendar month(s) [3, 4, 5, 6, 7, 8, 9, 10, 11] of its samples",
        "(first 2000-03-01)",
        "climatology, which has months [1, 2, 12]",
        "--time",
    )
    fails(procs["inside"], 2, "--output: 'sst.zarr/out.zarr' lies inside ARCHIVE 'sst.zarr'")
    assert tree(tmp_path) == before
    # the winter months of the same archive are fine
    out = apply_result(
        b, tmp_path / "sst.zarr", tmp_path / "winter.zarr", time=("2000-12", "2001-02"), **QUIET
    )
    assert xr.open_zarr(out).sizes["time"] == 3


def test_an_archive_in_other_units_exits_2_and_writes_nothing(tmp_path, client):
    """A result fitted on SST in K, applied to the same field in degC: refused, naming the
    variable and both units, before any pass; the same field in K, or without units, runs."""
    d = tmp_path / "fit"
    d.mkdir()
    sst = {"units": "K", "standard_name": "sea_surface_temperature"}
    job = _job(d, lambda ds: ds.assign(sst=ds.sst.assign_attrs(sst)))
    run_job(load_config(job), scheduler=client.scheduler.address, **QUIET)
    result = str(d / "result.zarr")
    assert json.loads(xr.open_zarr(result).attrs["input_units"]) == {"sst": "K"}
    names = json.loads(xr.open_zarr(result).attrs["input_standard_names"])
    assert names == {"sst": "sea_surface_temperature"}
    _variant(
        d / "sst.zarr",
        tmp_path / "celsius.zarr",
        lambda ds: ds.assign(sst=(ds.sst - 273.15).assign_attrs(units="degC")),
    )
    _variant(
        d / "sst.zarr",
        tmp_path / "bare.zarr",
        lambda ds: ds.assign(sst=(ds.sst.dims, ds.sst.values)),
    )
    assert "units" not in xr.open_zarr(tmp_path / "bare.zarr")["sst"].attrs
    _variant(  # the same units, another quantity
        d / "sst.zarr",
        tmp_path / "air.zarr",
        lambda ds: ds.assign(sst=ds.sst.assign_attrs(standard_name="air_temperature")),
    )
    before = tree(tmp_path)
    proc = cli("apply", result, "air.zarr", "--output", "out.zarr", cwd=tmp_path)
    fails(
        proc,
        2,
        "ARCHIVE: 'sst' in",
        "is 'air_temperature' (standard_name), the result was fitted on 'sea_surface_temperature'",
    )
    proc = cli("apply", result, "celsius.zarr", "--output", "out.zarr", cwd=tmp_path)
    fails(
        proc,
        2,
        "ARCHIVE: 'sst' in",
        "is in 'degC', the result was fitted on 'K'; dcfa does not convert units",
    )
    assert tree(tmp_path) == before
    # in Python too: load_result(...).transform gave features off by -273.15, silently
    fitted = load_result(result)
    celsius = xr.open_zarr(tmp_path / "celsius.zarr")
    units = r"^field: 'sst' is in 'degC', the result was fitted on 'K'; dcfa does not convert"
    for given in (celsius, celsius["sst"], io.open_archive(tmp_path / "celsius.zarr", ["sst"])):
        with pytest.raises(ValueError, match=units):
            fitted.transform(given)
    air = xr.open_zarr(tmp_path / "air.zarr")["sst"]
    with pytest.raises(ValueError, match=r"^field: 'sst' is 'air_temperature' \(standard_name\)"):
        fitted.transform(air)
    fitted.transform(xr.open_zarr(tmp_path / "bare.zarr"))  # no units: nothing to compare
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same values: nothing to warn of
        kelvin = apply_result(result, d / "sst.zarr", tmp_path / "k.zarr", **QUIET)
        bare = apply_result(result, tmp_path / "bare.zarr", tmp_path / "bare_out.zarr", **QUIET)
    np.testing.assert_array_equal(
        xr.open_zarr(kelvin)["features"].values, xr.open_zarr(bare)["features"].values
    )


def test_units_spelled_otherwise_apply_and_values_far_off_are_named(tmp_path, client):
    """``kelvin`` and ``degK`` are K, and apply as it does; a field in degC whose variable has
    no ``units`` to check is written with a warning naming how far its series lie from the
    result's, and the result's units (it gave series off by -273.15 without a word)."""
    d = tmp_path / "fit"
    d.mkdir()
    job = _job(d, lambda ds: ds.assign(sst=ds.sst.assign_attrs(units="K")))
    run_job(load_config(job), scheduler=client.scheduler.address, **QUIET)
    result = str(d / "result.zarr")
    stored = xr.open_zarr(result)["features"].values
    for spelling in ("kelvin", "degK"):
        _variant(
            d / "sst.zarr",
            tmp_path / f"{spelling}.zarr",
            lambda ds, u=spelling: ds.assign(sst=ds.sst.assign_attrs(units=u)),
        )
        out = f"{spelling}_out.zarr"
        proc = cli("apply", result, f"{spelling}.zarr", "--output", out, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "warning" not in proc.stdout + proc.stderr
        np.testing.assert_array_equal(
            xr.open_zarr(tmp_path / f"{spelling}_out.zarr")["features"].values, stored
        )
    _variant(
        d / "sst.zarr",
        tmp_path / "celsius.zarr",
        lambda ds: ds.assign(sst=(ds.sst.dims, ds.sst.values - 273.15)),
    )
    before = tree(tmp_path)
    proc = cli("apply", result, "celsius.zarr", "--output", "celsius_out.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "dcfa: warning:" in line]
    assert len(warned) == 1, proc.stderr
    for needle in (
        "ARCHIVE: the series of 'celsius.zarr' lie a median of",
        "training standard deviations from the result's mean",
        "other units than the result's ('sst' in 'K')",
    ):
        assert needle in warned[0], (needle, warned[0])
    after = tree(tmp_path)  # the inputs as they were, the output written
    assert {k: after[k] for k in before} == before
    assert after["celsius_out.zarr"] == "dir"
    with pytest.warns(UserWarning, match="training standard deviations from the result's mean"):
        apply_result(result, tmp_path / "celsius.zarr", tmp_path / "celsius_py.zarr", **QUIET)


def test_other_grid_sizes_and_dims_are_named(job_a, tmp_path):
    fitted = load_result(job_a / "result.zarr")
    field = io.open_archive(job_a / "sst.zarr", ["sst"])
    cases = [
        (field.isel(lat=slice(0, 4)), "field: dim 'lat' has 4 cells, the result's grid 5"),
        (field.rename(lon="x"), r"field: its grid dims \('lat', 'x'\) differ from the result's"),
        (field.rename(time="t"), "field: dims .* lack the result's sample dim 'time'"),
        (field.drop_vars("lat"), "field: it has no coordinate 'lat'"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message):
            fitted.transform(bad)
    # the grid stored the other way round is the same grid
    np.testing.assert_array_equal(
        fitted.transform(field.transpose("time", "lon", "lat")).values,
        fitted.transform(field).values,
    )


def test_output_never_over_into_or_around_an_input(job_a, tmp_path):
    archive = tmp_path / "sst.zarr"
    shutil.copytree(job_a / "sst.zarr", archive)
    result = tmp_path / "result.zarr"
    shutil.copytree(job_a / "result.zarr", result)
    before = tree(tmp_path)
    for output, relation in [
        (result, "is result"),
        (tmp_path, "contains result"),
        (archive / "sst", "lies inside archive"),
    ]:
        with pytest.raises(FileExistsError, match=f"output: .* {relation}"):
            apply_result(result, archive, output, overwrite=True, **QUIET)
    # overwrite replaces only an earlier output of apply: never a result, never a directory
    (tmp_path / "mine").mkdir()
    with pytest.raises(
        FileExistsError, match="mine' exists and is a directory that dcfa did not write"
    ):
        apply_result(result, archive, tmp_path / "mine", overwrite=True, **QUIET)
    with pytest.raises(FileExistsError, match="is a dcfa result store, not an output of apply"):
        apply_result(result, archive, job_a / "result.zarr", overwrite=True, **QUIET)
    assert tree(tmp_path) == {**before, "mine": "dir"}
    out = apply_result(result, archive, tmp_path / "out.zarr", **QUIET)
    earlier = r"exists \(an earlier output of apply\); pass overwrite=True"
    with pytest.raises(FileExistsError, match=earlier):
        apply_result(result, archive, out, **QUIET)
    apply_result(result, archive, out, overwrite=True, time=("2001-01", "2001-06"), **QUIET)
    assert xr.open_zarr(out).sizes["time"] == 6


def test_not_a_result_and_bad_time_name_the_argument(job_a, tmp_path):
    with pytest.raises(ValueError, match="result: .* is not a result of dcfa fit"):
        apply_result(job_a / "sst.zarr", job_a / "sst.zarr", tmp_path / "o.zarr", **QUIET)
    with pytest.raises(FileNotFoundError, match="archive: no Zarr store at"):
        apply_result(job_a / "result.zarr", tmp_path / "none.zarr", tmp_path / "o.zarr", **QUIET)
    with pytest.raises(ValueError, match=r"time: no samples of .* in \['2030-01', '2030-12'\]"):
        apply_result(
            job_a / "result.zarr",
            job_a / "sst.zarr",
            tmp_path / "o.zarr",
            time=("2030-01", "2030-12"),
            **QUIET,
        )
    # the ends swapped: it said "no samples" of a span that holds them
    swapped = r"^time: \['2001-12', '2001-01'\] starts after it ends; give the start first"
    with pytest.raises(ValueError, match=swapped):
        apply_result(
            job_a / "result.zarr",
            job_a / "sst.zarr",
            tmp_path / "o.zarr",
            time=("2001-12", "2001-01"),
            **QUIET,
        )
    assert not any(tmp_path.iterdir())


############################################################################################
# windows, lags and a lead (job C): the job's time_scales, then the samples of --time

WINDOWS, LAGS, LEAD = [1, 3], [0, 1], 2
HISTORY = max(WINDOWS) - 1 + max(LAGS)  # earlier months the first computed one needs
ORDER = ("window", "lag", "lat", "lon")


@pytest.fixture(scope="module")
def job_c(tmp_path_factory, cluster_address):
    """input.windows = [1, 3], input.lags = [0, 1], target.lead = 2, anomalies; 120 months;
    the CSV target's units given by target.units."""
    d = tmp_path_factory.mktemp("c")
    with dask.config.set(scheduler="synchronous"):
        job, _, _ = write_forecast_job(d)
    config = load_config(job, ['target.units="mm"'])
    run_job(config, scheduler=cluster_address, **QUIET)
    return d


def _forecast_reference(result: xr.Dataset, sst: np.ndarray, times: pd.DatetimeIndex):
    """The features of the months ``times[HISTORY:]`` of ``sst`` by hand: trailing means,
    lags, the stored climatology, then each group's mean of ``cell_scale * (x -
    cell_centre)``."""
    P, start = numpy_predictors(sst.astype(np.float64), WINDOWS, LAGS)
    assert start == HISTORY
    P = P.astype(np.float32).astype(np.float64)  # a float32 archive's windows stay float32
    months = times[start:].month.values
    clim = result.climatology.transpose("month", *ORDER).sel(month=months).values
    A = (P - clim).reshape(len(months), -1)
    region = np.nan_to_num(result.region.transpose(*ORDER).values.ravel(), nan=-1).astype(int)
    scale = result.cell_scale.transpose(*ORDER).values.ravel()
    centre = result.cell_centre.transpose(*ORDER).values.ravel()
    out = np.empty((len(months), result.sizes["group"]))
    for g in range(out.shape[1]):
        k = region == g
        out[:, g] = (scale[k] * (A[:, k] - centre[k])).mean(axis=1)
    return out


def test_the_forecast_is_ols_of_the_target_on_the_stored_features_by_hand(job_c, tmp_path):
    """The result keeps its target (y of the month LEAD after each sample's, from the CSV);
    ``dcfa apply`` writes the forecast of OLS (LinCFA's regression in forward_cv) fitted to
    it on the stored features, least squares by hand; NaN in a month missing a group."""
    result = xr.open_zarr(job_c / "out.zarr")
    y = pd.read_csv(job_c / "y.csv")["y"].to_numpy()
    np.testing.assert_array_equal(result.target.values, y[HISTORY + LEAD : 120])
    X = result.features.values.astype(np.float64)
    A = np.c_[np.ones(len(X)), X]
    beta = np.linalg.lstsq(A, result.target.values, rcond=None)[0]
    out = cli("apply", str(job_c / "out.zarr"), str(job_c / "sst.zarr"), "--output",
              str(tmp_path / "applied.zarr"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "forecast by OLS on the features" in out.stdout
    applied = xr.open_zarr(tmp_path / "applied.zarr")
    forecast = applied.forecast.sel(time=result.time).values  # the applied features: float64
    np.testing.assert_allclose(forecast, A @ beta, atol=1e-5 * result.target.values.std())
    # named by the target (the CSV's column), not as "the target"
    assert result.target.attrs["long_name"] == "y"
    assert applied.forecast.attrs["long_name"] == "y predicted by OLS on the features"
    # a CSV says no units: target.units gives them, to the result's target and the forecast
    assert result.target.attrs["units"] == applied.forecast.attrs["units"] == "mm"
    shown = cli("inspect", str(job_c / "out.zarr"), cwd=tmp_path)
    assert f"target {job_c / 'y.csv'} (y, in mm), " in shown.stdout, shown.stdout
    assert applied.attrs["lead"] == LEAD  # the forecast of month t is for t + LEAD
    # and says so per sample: the months of the CSV's rows it predicts (stamped mid-month,
    # the archive on the 1st: target_time is in the archive's stamps)
    dates = pd.to_datetime(pd.read_csv(job_c / "y.csv")["time"]).to_numpy()
    valid = applied.forecast.target_time.sel(time=result.time).values
    np.testing.assert_array_equal(
        valid.astype("datetime64[M]"), dates[HISTORY + LEAD : 120].astype("datetime64[M]")
    )
    assert (pd.DatetimeIndex(valid).day == 1).all()
    assert applied.forecast.target_time.attrs["long_name"] == "valid time of the target"
    assert pd.Timestamp(applied.forecast.target_time.values[-1]) == pd.Timestamp(
        applied.time.values[-1]
    ) + pd.DateOffset(months=LEAD)  # past the CSV's end: the archive's last month + LEAD
    # a month missing from the archive's last months: NaN, the others as before
    fitted = load_result(job_c / "out.zarr")
    field = io.open_archive(job_c / "sst.zarr", ["sst"]).load()
    field[-1] = np.nan
    gappy = fitted.forecast(field)
    # predict is the GBMAP's, which this result lacks: it said so and no more
    with pytest.raises(ValueError, match=r"holds no GBMAP; forecast gives the target from the"):
        fitted.predict(field)
    assert np.isnan(gappy.values[-1]) and np.isfinite(gappy.values[:-1]).all()
    np.testing.assert_allclose(gappy.values[:-1], applied.forecast.values[:-1], rtol=1e-9)


def test_a_result_without_its_target_is_applied_without_a_forecast(job_c, tmp_path):
    """A result written before results kept their target: its features as before, no
    forecast, and a note saying why; the Python API names the reason."""
    old = tmp_path / "old.zarr"
    shutil.copytree(job_c / "out.zarr", old)
    shutil.rmtree(old / "target")  # and from the consolidated metadata
    meta = json.loads((old / "zarr.json").read_text())
    del meta["consolidated_metadata"]["metadata"]["target"]
    (old / "zarr.json").write_text(json.dumps(meta))
    out = cli("apply", str(old), str(job_c / "sst.zarr"), "--output", str(tmp_path / "a.zarr"),
              cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "note: no forecast: it holds no target (written by a dcfa fit older" in out.stdout
    applied = xr.open_zarr(tmp_path / "a.zarr")
    assert "forecast" not in applied and "features" in applied
    with pytest.raises(ValueError, match=r"old.zarr': it holds no target .* run the job again"):
        load_result(old).forecast(io.open_archive(job_c / "sst.zarr", ["sst"]))


def test_windows_lags_applied_to_its_own_archive_reproduce_the_features_exactly(job_c, tmp_path):
    fitted = load_result(job_c / "out.zarr")
    assert set(fitted.grid) == set(ORDER) and fitted.archive_grid == ("lat", "lon")
    assert (fitted.windows, fitted.lags, fitted.lead, fitted.history) == (WINDOWS, LAGS, 2, 3)
    out = apply_result(job_c / "out.zarr", job_c / "sst.zarr", tmp_path / "applied.zarr", **QUIET)
    applied, result = xr.open_zarr(out), xr.open_zarr(job_c / "out.zarr")
    # every month with complete windows and lags (the job also dropped the last LEAD ones,
    # which have no target LEAD months later)
    times = pd.date_range("2000-01-01", periods=120, freq="MS")
    np.testing.assert_array_equal(applied.time.values, times[HISTORY:].values)
    np.testing.assert_array_equal(result.time.values, times[HISTORY : 120 - LEAD].values)
    np.testing.assert_array_equal(  # bitwise
        applied.features.sel(time=result.time).values, result.features.values
    )
    assert (applied.attrs["lead"], applied.attrs["lead_step"]) == (LEAD, "month")
    assert (applied.attrs["windows"], applied.attrs["lags"]) == ("[1, 3]", "[0, 1]")
    # the Python API: the archive as stored (no window / lag dims), the same values
    field = io.open_archive(job_c / "sst.zarr", ["sst"])
    features = fitted.transform(field, time=("2000-04", "2009-10"))
    assert isinstance(features.data, da.Array)
    np.testing.assert_array_equal(features.astype("float32").values, result.features.values)
    windowed = fitted._checked_field(field, {**PYTHON_NAMES, "archive": "field"})  # with them
    with pytest.raises(ValueError, match="give it without the \\['window', 'lag'\\] dims"):
        fitted.transform(windowed)
    # the grid is the archive's: its dims and coordinates are named
    for bad, message in [
        (field.isel(lat=slice(0, 3)), "field: dim 'lat' has 3 cells, the result's grid 4"),
        (
            field.assign_coords(lon=field.lon + 1.0),
            "field: coordinate 'lon' differs .*at index 0 along 'lon'",
        ),
    ]:
        with pytest.raises(ValueError, match=message):
            fitted.transform(bad)


def test_windows_lags_on_appended_months_and_time_spans(job_c, tmp_path):
    """``dcfa apply`` (the real command line) on the archive with a year appended, and on
    spans that start after the archive does; too few earlier months exit 2."""
    archive = tmp_path / "sst.zarr"
    shutil.copytree(job_c / "sst.zarr", archive)
    new_sst = _append_months(archive, 12)
    _variant(archive, tmp_path / "short.zarr", lambda ds: ds.isel(time=slice(0, HISTORY)))
    a = str(job_c / "out.zarr")
    procs = _cli_together(
        {
            "all": ["apply", a, "sst.zarr", "--output", "out.zarr"],
            "short": ["apply", a, "short.zarr", "--output", "bad.zarr"],
            "early": [
                "apply",
                a,
                "sst.zarr",
                "--output",
                "bad.zarr",
                "--time",
                "2000-02",
                "2000-12",
            ],
        },
        cwd=tmp_path,
    )
    assert procs["all"].returncode == 0, procs["all"].stderr
    assert "2000-04-01 .. 2010-12-01, 129 samples" in procs["all"].stdout
    assert "windows [1, 3], lags [0, 1] (each sample needs the 3 before it)" in procs["all"].stdout
    assert "lead 2 months: for the target at t + 2 months" in procs["all"].stdout
    fails(
        procs["short"],
        2,
        "ARCHIVE: holds 3 sample(s) along 'time'",
        "input.windows [1, 3] and input.lags [0, 1] need 3 earlier sample(s)",
        "at least 4",
    )
    fails(
        procs["early"],
        2,
        "--time: its first sample, 2000-02-01, has 1 earlier sample(s) in ARCHIVE",
        "need 3: start --time at 2000-04-01 or later",
    )
    assert not list(tmp_path.glob("*bad.zarr*"))

    applied = xr.open_zarr(tmp_path / "out.zarr")
    result = xr.open_zarr(job_c / "out.zarr")
    times = pd.date_range("2000-01-01", periods=132, freq="MS")
    np.testing.assert_array_equal(applied.time.values, times[HISTORY:].values)
    old = applied.features.sel(time=result.time).values
    np.testing.assert_array_equal(old, result.features.values)  # unchanged, bitwise
    # every month against NumPy: the new year's windows and lags reach into the old months
    sst = np.concatenate([xr.open_zarr(job_c / "sst.zarr", consolidated=False).sst.values, new_sst])
    reference = _forecast_reference(result, sst, times)
    np.testing.assert_allclose(applied.features.values, reference, rtol=1e-5, atol=1e-6)
    new = applied.features.isel(time=slice(-12, None)).values
    assert np.abs(new - old[-12:]).max() > 0.1  # new values
    # a span starting after the archive: complete windows from the months before it
    for span, first in [(("2010-01", "2010-12"), 120), (("2000-04", "2000-09"), HISTORY)]:
        out = apply_result(
            job_c / "out.zarr", archive, tmp_path / f"{span[0]}.zarr", time=span, **QUIET
        )
        part = xr.open_zarr(out)
        np.testing.assert_array_equal(part.time.values, times[first : first + part.sizes["time"]])
        assert part.sizes["time"] == (12 if first == 120 else 6)
        np.testing.assert_array_equal(
            part.features.values, applied.features.sel(time=part.time).values
        )


def _with_a_missing_month(source, target, month: int) -> None:
    """A copy of the archive at ``source`` whose month ``month`` is NaN in every cell (a month
    not yet filled in)."""
    ds = xr.open_zarr(source, consolidated=False).load()
    ds["sst"][month] = np.nan
    ds.drop_encoding().to_zarr(target, zarr_format=3, consolidated=False)


def test_a_missing_month_has_no_gbmap_value_and_the_others_theirs(job_a, tmp_path):
    """A month missing from the archive: its features and GBMAP outputs are NaN, every other
    month's are those of the stored learners (the regressor's masking, which the classifier
    below now shares)."""
    _with_a_missing_month(job_a / "sst.zarr", tmp_path / "gap.zarr", 5)
    proc = cli(
        "apply", str(job_a / "result.zarr"), "gap.zarr", "--output", "out.zarr", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "(1 samples with a missing group value)" in proc.stdout
    applied = xr.open_zarr(tmp_path / "out.zarr")
    result = xr.open_zarr(job_a / "result.zarr")
    assert np.isnan(applied.features.values[5]).all()
    assert np.isnan(applied.embedding.values[5]).all() and np.isnan(applied.prediction.values[5])
    others = np.arange(applied.sizes["time"]) != 5
    np.testing.assert_array_equal(applied.features.values[others], result.features.values[others])
    embedding, prediction = _gbmap_reference(result, result.features.values[others])
    np.testing.assert_allclose(applied.embedding.values[others], embedding, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(applied.prediction.values[others], prediction, rtol=1e-4)


def test_a_classifier_result_applied_to_a_missing_month(tmp_path, client):
    """A GBMAP classifier's prediction is NaN for a missing month (the old code made up a
    class for it, the first of ``classes_``), and each other month's class is the sign of its
    decision function."""
    job = write_job(tmp_path, gbmap__n_boosts=2, gbmap__task="classification")
    target = pd.read_csv(tmp_path / "soi.csv")
    target["soi"] = (target["soi"] > 0).astype(float)
    target.to_csv(tmp_path / "soi.csv", index=False)
    run_job(load_config(job), scheduler=client.scheduler.address, **QUIET)
    _with_a_missing_month(tmp_path / "sst.zarr", tmp_path / "gap.zarr", 7)
    fitted = load_result(tmp_path / "result.zarr")
    field = xr.open_zarr(tmp_path / "gap.zarr", consolidated=False).sst
    prediction = fitted.predict(field).compute()
    score = fitted.gbmap_outputs(fitted.transform(field))["decision_function"].compute()
    assert np.isnan(prediction.values[7]) and np.isnan(score.values[7])
    others = np.arange(prediction.size) != 7
    np.testing.assert_array_equal(prediction.values[others], (score.values[others] > 0) * 1.0)
    assert set(np.unique(prediction.values[others])) == {0.0, 1.0}


def test_a_loaded_result_reads_as_one_line(job_a):
    """repr printed every array of the result (the map, the climatology, each cell's
    weight): thousands of lines in a notebook."""
    fitted = load_result(job_a / "result.zarr")
    text = repr(fitted)
    assert "\n" not in text and len(text) < 300, text
    assert text.startswith(f"FittedResult({fitted.path!r}: LinCFA, {fitted.n_groups} groups on (")
    assert (
        "variables ['sst'], sample_dim 'time', forecast by OLS on the features, with a GBMAP)"
        in text
    )


def test_apply_refers_to_the_climatology_held_on_the_workers(tmp_path, client):
    """``dcfa apply`` embedded the result's climatology and spread in its graph: 1.9 MB here
    (4 500 cells, two windows and two lags), 26 MB for the recommended forecast job at 1
    degree, over distributed's threshold of 10 MB, so a user of the recommended call met
    "Sending large graph" at every apply. They go to the workers once, as in the job."""
    from support import write_wide_job

    job = write_wide_job(tmp_path)
    out = run_job(load_config(job), scheduler=client.scheduler.address, echo=lambda *a: None)
    assert xr.open_zarr(out)["climatology"].nbytes > 1.5e6  # what the graph would carry
    with (
        dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        applied = apply_result(out, tmp_path / "big.zarr", tmp_path / "a.zarr", echo=lambda *a: 0)
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large
    np.testing.assert_array_equal(
        xr.open_zarr(applied).features.values, xr.open_zarr(out).features.values
    )

"""A review of "apply a fitted result to new months" as a user tries it: ``dcfa apply``,
``dcfa.load_result``, ``dcfa inspect``.

One small job (tests/batch/test_job.py's: anomalies, standardised, LinCFA) is fitted once on the
session's cluster. Each test holds a defect found in the review: the old code failed it.
"""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
import xarray as xr
from support import cli, cli_after_line, cli_imports, fails, tree, write_job
from terminal import dcfa_command

import dcfa
from dcfa.batch.apply import apply_result
from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.batch.results import load_result

pytestmark = pytest.mark.slow

QUIET = {"echo": lambda *a: None}


@pytest.fixture(scope="module")
def job(tmp_path_factory, cluster_address):
    """Anomalies and standardisation: the result holds a climatology and a spread."""
    d = tmp_path_factory.mktemp("review")
    config = write_job(d, input__standardize=True)
    run_job(load_config(config), scheduler=cluster_address, **QUIET)
    return d


def _rewrite(source, target, change) -> None:
    """``change(ds)`` of the store at ``source``, written to ``target`` (attributes kept)."""
    ds = xr.open_zarr(source, consolidated=False).load()
    change(ds).drop_encoding().to_zarr(target, zarr_format=3, consolidated=False)


def _reference(result: xr.Dataset, sst: xr.DataArray) -> np.ndarray:
    """The region series by hand: anomalies over the spread with the stored statistics, then
    each group's mean of ``cell_scale * (x - cell_centre)``, the grid in the result's order."""
    sst = sst.transpose("time", "lat", "lon")
    months = sst.time.dt.month.values
    x = (sst.values.astype(np.float64) - result.climatology.sel(month=months).values) / (
        result.spread.values
    )
    x = x.reshape(len(months), -1)
    region = np.nan_to_num(result.region.values.ravel(), nan=-1).astype(int)
    scale, centre = result.cell_scale.values.ravel(), result.cell_centre.values.ravel()
    out = np.empty((len(months), result.sizes["group"]))
    for g in range(out.shape[1]):
        k = region == g
        out[:, g] = (scale[k] * (x[:, k] - centre[k])).mean(axis=1)
    return out


@pytest.mark.parametrize("lost", ["climatology", "spread"])
def test_a_result_without_the_statistics_its_features_need_is_refused(job, tmp_path, lost):
    """A result store that lost its climatology (or spread) was applied without it: the
    series of the raw values (kelvin), exit 0. It is refused, naming what is missing."""
    _rewrite(job / "result.zarr", tmp_path / "result.zarr", lambda ds: ds.drop_vars(lost))
    shutil.copytree(job / "sst.zarr", tmp_path / "sst.zarr")
    before = tree(tmp_path)
    proc = cli("apply", "result.zarr", "sst.zarr", "--output", "out.zarr", cwd=tmp_path)
    flag = {"climatology": "anomalies", "spread": "standardize"}[lost]
    fails(proc, 2, "RESULT: 'result.zarr' lacks", f"{lost} (input.{flag} = true)", "run the job")
    assert tree(tmp_path) == before
    with pytest.raises(ValueError, match=f"result: .* lacks {lost}"):
        load_result(tmp_path / "result.zarr")


def _to_180(ds: xr.Dataset) -> xr.Dataset:
    """The archive's longitudes (150..250) as -180..180: 150..180 then -164..-110."""
    return ds.assign_coords(lon=((ds.lon + 180.0) % 360.0) - 180.0)


@pytest.mark.parametrize(
    "name, change",
    [
        ("flipped latitude", lambda ds: ds.isel(lat=slice(None, None, -1))),
        ("longitudes -180..180, sorted", lambda ds: _to_180(ds).sortby("lon")),
        ("longitudes -180..180, same order", _to_180),
        (
            "transposed and flipped",
            lambda ds: ds.transpose("time", "lon", "lat").sortby("lat", ascending=False),
        ),
    ],
)
def test_the_grid_in_another_order_or_longitude_convention_matches_by_labels(
    job, tmp_path, name, change
):
    """The same cells in another order or longitude convention (as LinCFA.transform takes
    them) were refused: 'coordinate lon differs (result 180.0, here -180.0)'. They give the
    series of the archive as fitted, and the NumPy reference on the archive's labels."""
    _rewrite(job / "sst.zarr", tmp_path / "other.zarr", change)
    before = tree(job)
    same = apply_result(job / "result.zarr", job / "sst.zarr", tmp_path / "same.zarr", **QUIET)
    out = apply_result(job / "result.zarr", tmp_path / "other.zarr", tmp_path / "out.zarr", **QUIET)
    assert tree(job) == before
    got = xr.open_zarr(out).features.values
    np.testing.assert_array_equal(got, xr.open_zarr(same).features.values)
    result = xr.open_zarr(job / "result.zarr").load()
    sst = xr.open_zarr(
        job / "sst.zarr", consolidated=False
    ).sst.load()  # the result's grid order, by hand
    np.testing.assert_allclose(got, _reference(result, sst), rtol=0, atol=2e-6)
    assert np.isfinite(got).all()


def test_other_labels_are_still_refused_naming_the_first_difference(job, tmp_path):
    """Label matching takes the same cells only: a grid shifted by half a cell, or a
    latitude with one other value, is another grid."""
    _rewrite(
        job / "sst.zarr", tmp_path / "half.zarr", lambda ds: ds.assign_coords(lat=ds.lat + 0.5)
    )
    fitted = load_result(job / "result.zarr")
    with pytest.raises(
        ValueError,
        match="coordinate 'lat' differs .*at index 0 along 'lat': result -10.0, here -9.5",
    ):
        apply_result(fitted, tmp_path / "half.zarr", tmp_path / "o.zarr", **QUIET)
    assert not (tmp_path / "o.zarr").exists()


def test_an_undecodable_chunk_exits_2_naming_the_archive(job, tmp_path):
    """A corrupt chunk of the archive exited 1 with the codec's bare error
    ('RuntimeError: Zstd decompression error'), naming no path; the batch job says exit 2
    naming the store for the same fault. Nothing is written."""
    shutil.copytree(job / "sst.zarr", tmp_path / "sst.zarr")
    chunk = next(
        p
        for p in sorted((tmp_path / "sst.zarr" / "sst").rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    )
    chunk.write_bytes(b"not a compressed chunk")
    before = tree(tmp_path)
    proc = cli("apply", str(job / "result.zarr"), "sst.zarr", "--output", "out.zarr", cwd=tmp_path)
    fails(proc, 2, "ARCHIVE: a chunk of ['sst'] in 'sst.zarr' cannot be decoded")
    assert tree(tmp_path) == before


def test_inspect_describes_moments_stores_and_apply_outputs(job, tmp_path, rng):
    """``dcfa inspect`` exited 2 ('not a readable Zarr store') on a moments store (the user guide's
    ``m.save("moments.zarr")``, a result's ``moments/``), and described an output of
    ``dcfa apply`` as an archive, without the result and archive it came from."""
    X = rng.normal(size=(50, 4))
    dcfa.moments(X, X[:, 0] + rng.normal(size=50)).save(tmp_path / "moments.zarr")
    apply_result(job / "result.zarr", job / "sst.zarr", tmp_path / "series.zarr", **QUIET)
    before = tree(tmp_path)
    own = cli("inspect", "moments.zarr", cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    assert own.stdout.splitlines() == [
        "moments.zarr: dcfa Moments store",
        "  Moments(n=50, n_features=4, n_targets=1, missing='exclude', excluded=0)",
    ]
    inner = cli("inspect", str(job / "result.zarr" / "moments"), cwd=tmp_path)
    assert inner.returncode == 0, inner.stderr
    assert "dcfa Moments store" in inner.stdout and "Moments(n=" in inner.stdout
    series = cli("inspect", "series.zarr", cwd=tmp_path)
    assert series.returncode == 0, series.stderr
    lines = series.stdout.splitlines()
    assert lines[0].startswith(f"series.zarr: dcfa {dcfa.__version__} region series of result ")
    assert str(job / "result.zarr") in lines[0]
    assert f"archive {job / 'sst.zarr'}" in lines[1] and "120 samples" in lines[1]
    assert any(line.startswith("  features('time', 'group')") for line in lines)
    assert tree(tmp_path) == before


def test_inspect_of_a_result_imports_no_estimator(job, tmp_path):
    """``dcfa inspect`` prints a result's groups with the job summary's own formatting,
    which lives beside the result's writing: that module names the fitted reduction for
    its type hints only, so describing a store imports no scikit-learn (1 s of 2.5 s)."""
    proc = cli_imports("inspect", str(job / "result.zarr"), cwd=tmp_path, modules={"sklearn"})
    lines = proc.stdout.splitlines()
    assert lines[-1] == "0 []", (proc.stdout, proc.stderr)
    assert any(line.lstrip().startswith("group ") and " corr " in line for line in lines)


def _model_archive(job, path, start: str, n: int, chunk: int) -> xr.Dataset:
    """The job archive's grid and months (repeated) on a ``noleap`` axis from ``start``, as
    climate-model output runs past 2262, stored ``chunk`` months per chunk."""
    ds = xr.open_zarr(job / "sst.zarr", consolidated=False).load().drop_encoding()
    time = xr.date_range(start, periods=n, freq="MS", calendar="noleap", use_cftime=True)
    reps = -(-n // ds.sizes["time"])
    sst = np.tile(ds.sst.values, (reps, 1, 1))[:n]
    out = xr.Dataset(
        {"sst": (("time", "lat", "lon"), sst, ds.sst.attrs)},
        coords={"time": time, "lat": ds.lat, "lon": ds.lon},
    )
    # chunked by the encoding, not by Dask: 3 000 chunks write in 3 s instead of 6.5 s
    encoding = {"sst": {"chunks": (chunk, *sst.shape[1:])}}
    out.to_zarr(path, zarr_format=3, consolidated=False, encoding=encoding)
    return out


def test_output_names_its_inputs_absolutely_and_model_dates_need_no_warning(job, tmp_path):
    """Run from the archive's directory with relative paths, the output's attributes said
    ``result: ../result.zarr``-style relative paths (meaningless once read from elsewhere),
    and months past 2262 printed xarray's SerializationWarning when apply reread its output."""
    shutil.copytree(job / "result.zarr", tmp_path / "result.zarr")
    ds = _model_archive(job, tmp_path / "future.zarr", "2300-01-01", 24, 12)
    (tmp_path / "work").mkdir()
    proc = cli(
        "apply", "../result.zarr", "../future.zarr", "--output", "series.zarr",
        cwd=tmp_path / "work",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # no warning
    out = xr.open_zarr(tmp_path / "work" / "series.zarr")
    assert out.attrs["result"] == str(tmp_path / "result.zarr")
    assert out.attrs["archive"] == str(tmp_path / "future.zarr")
    assert [(t.year, t.month) for t in out.time.values] == [
        (t.year, t.month) for t in ds.time.values
    ]
    result = xr.open_zarr(tmp_path / "result.zarr").load()
    np.testing.assert_allclose(out.features.values, _reference(result, ds.sst), atol=2e-6, rtol=0)


def test_ctrl_c_says_nothing_was_written_not_resume(job, tmp_path):
    """Ctrl-C during ``dcfa apply`` said 'rerun with --resume to continue' (the batch job's
    advice): apply has no --resume. It says nothing was written, and nothing is."""
    import signal
    import subprocess

    _model_archive(job, tmp_path / "long.zarr", "2000-01-01", 12000, 4)
    before = sorted(os.listdir(tmp_path))
    proc = subprocess.Popen(
        dcfa_command("apply", str(job / "result.zarr"), "long.zarr", "--output", "out.zarr"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().startswith("[1/2]")  # checked; the pass over 3000 chunks next
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, (out, err)
    assert err.strip().splitlines()[-1] == (
        "dcfa: interrupted; nothing was written (a temporary store is removed); run dcfa "
        "apply again"
    )
    assert "--resume" not in err
    assert sorted(os.listdir(tmp_path)) == before  # no output, no temporary store or marker


def test_an_unknown_url_protocol_is_named_with_its_argument(job, tmp_path):
    """``S3://`` (fsspec knows ``s3://`` only) gave 'dcfa: error: Protocol not known: S3',
    naming neither the argument nor the URL."""
    result = str(job / "result.zarr")
    runs = {
        "ARCHIVE": ["apply", result, "S3://bucket/sst.zarr", "--output", "out.zarr"],
        "RESULT": ["apply", "S3://bucket/r.zarr", str(job / "sst.zarr"), "--output", "o.zarr"],
        "--output": ["apply", result, str(job / "sst.zarr"), "--output", "S3://bucket/o.zarr"],
        "store": ["inspect", "S3://bucket/sst.zarr"],
    }
    for key, args in runs.items():
        url = next(a for a in args if a.startswith("S3://"))
        fails(cli(*args, cwd=tmp_path), 2, f"{key}: {url!r}: the protocol 'S3' is not known")
    assert os.listdir(tmp_path) == []


def test_apply_waits_for_its_scheduler_as_long_as_asked(job, tmp_path):
    """``dcfa apply --scheduler`` waited a fixed 30 s, silently; a bad wait is bad input."""
    args = ["apply", str(job / "result.zarr"), str(job / "sst.zarr"), "--output", "o.zarr"]
    before = tree(job)
    fails(cli(*args, "--connect-timeout", "lots", cwd=tmp_path), 2, "--connect-timeout must")
    said = "waiting for the scheduler at tcp://127.0.0.1:1 (up to 3s: --connect-timeout)"
    proc, after = cli_after_line(
        *args,
        "--scheduler",
        "tcp://127.0.0.1:1",
        "--connect-timeout",
        "3s",
        cwd=tmp_path,
        line=said,
    )
    fails(proc, 2, "--scheduler: cannot reach 'tcp://127.0.0.1:1'")
    assert after is not None and 1.5 <= after < 15, after  # 2-3 s, not ~30 (the default)
    assert os.listdir(tmp_path) == [] and tree(job) == before


def test_inspect_describes_zarr_stores_xarray_cannot_open(tmp_path):
    """A bare Zarr array, or a group of arrays without dimension names (written with zarr,
    not xarray), exited 2 with xarray's or zarr's internal message ('An array already
    exists in store ... at path .'). They are described from Zarr's metadata, saying why
    dcfa cannot read them; a directory that is no Zarr store is still refused."""
    import zarr

    root = zarr.create_array(tmp_path / "array.zarr", shape=(6, 4), chunks=(3, 4), dtype="f4")
    root[:] = 1.0
    group = zarr.open_group(tmp_path / "plain.zarr", mode="w")
    group.create_array("sst", shape=(12, 3), chunks=(6, 3), dtype="f8")[:] = 2.0
    (tmp_path / "notes").mkdir()
    before = tree(tmp_path)
    one = cli("inspect", "array.zarr", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines() == [
        "array.zarr: a single Zarr array, not a group of named variables (dcfa reads groups, "
        "e.g. written by xarray's to_zarr)",
        "  (root): shape (6, 4), float32, chunks (3, 4)",
    ]
    plain = cli("inspect", "plain.zarr", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0].startswith("plain.zarr: a Zarr group of 1 array(s) without dimension names")
    assert lines[1:] == ["  sst: shape (12, 3), float64, chunks (6, 3)"]
    fails(cli("inspect", "notes", cwd=tmp_path), 2, "store: 'notes' is not a readable Zarr store")
    assert tree(tmp_path) == before


def test_inspect_describes_netcdf_archives_as_a_job_reads_them(tmp_path):
    """A netCDF file or a glob of them, which input.store and dcfa apply take, exited 2:
    "store: no Zarr store at 'sst.nc'". They are described as the job opens them: the
    files of a glob combined along time, one chunk per file."""
    time = np.array(["2000-01-01", "2000-02-01", "2001-01-01"], dtype="datetime64[ns]")
    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), np.arange(24.0).reshape(3, 2, 4), {"units": "K"})},
        coords={"time": time, "lat": [-5.0, 5.0], "lon": [0.0, 90.0, 180.0, 270.0]},
    )
    ds.to_netcdf(tmp_path / "sst.nc")
    (tmp_path / "years").mkdir()
    for year, part in ds.groupby("time.year"):
        part.to_netcdf(tmp_path / "years" / f"sst_{year}.nc")
    before = tree(tmp_path)
    for store, chunks in (("sst.nc", "{'time': 3, "), ("years/sst_*.nc", "{'time': (2, 1), ")):
        proc = cli("inspect", store, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith(f"{store}: 1 variable(s), "), lines
        assert lines[1].startswith(
            f"  sst('time', 'lat', 'lon'): {{'time': 3, 'lat': 2, 'lon': 4}}, float64, "
            f"chunks {chunks}"
        ), lines
        assert (
            "  coord time: 2000-01-01T00:00:00.000000000 .. 2001-01-01T00:00:00.000000000 (3)"
            in lines
        )
    fails(cli("inspect", "none_*.nc", cwd=tmp_path), 2, "store: no ")
    assert tree(tmp_path) == before


def test_daily_values_are_refused_by_a_result_fitted_on_months(job, tmp_path):
    """A daily archive was applied to a result fitted on monthly values without a word: the
    monthly climatology subtracted from daily values, which were then divided by the monthly
    anomalies' spread (exit 0, series on another scale). It is refused, naming the first
    month with several samples; the same values as monthly means are applied."""
    import pandas as pd

    ds = xr.open_zarr(job / "sst.zarr", consolidated=False).load().drop_encoding()
    days = pd.date_range("2010-01-01", periods=90, freq="D")
    daily = xr.Dataset(
        {"sst": (("time", "lat", "lon"), ds.sst.values[:90], ds.sst.attrs)},
        coords={"time": days, "lat": ds.lat, "lon": ds.lon},
    )
    daily.to_zarr(tmp_path / "daily.zarr", zarr_format=3, consolidated=False)
    before = tree(tmp_path)
    proc = cli("apply", str(job / "result.zarr"), "daily.zarr", "--output", "o.zarr", cwd=tmp_path)
    fails(proc, 2, "ARCHIVE: holds 31 samples in one calendar month (first 2010-01-01)")
    assert tree(tmp_path) == before
    monthly = daily.resample(time="MS").mean()
    fitted = load_result(job / "result.zarr")
    got = fitted.transform(monthly).values
    result = xr.open_zarr(job / "result.zarr").load()
    np.testing.assert_allclose(got, _reference(result, monthly.sst), atol=1e-9, rtol=0)


def test_apply_opens_the_archive_once(job, tmp_path, monkeypatch):
    """apply opened the archive to check it, then again to read it: on a bucket, every
    metadata read twice. The Dataset it checked is the one it reads."""
    import dcfa.batch.apply as apply_module
    import dcfa.io.archive as archive_module

    opened = []

    def counting(real):
        def open_store(*args, **kwargs):
            opened.append(args[0])
            return real(*args, **kwargs)

        return open_store

    monkeypatch.setattr(apply_module, "open_store", counting(apply_module.open_store))
    monkeypatch.setattr(archive_module, "open_store", counting(archive_module.open_store))
    out = apply_result(job / "result.zarr", job / "sst.zarr", tmp_path / "out.zarr", **QUIET)
    assert opened == [job / "sst.zarr"]
    monkeypatch.undo()
    again = apply_result(job / "result.zarr", job / "sst.zarr", tmp_path / "again.zarr", **QUIET)
    a, b = (xr.open_zarr(path).load() for path in (out, again))
    assert a.attrs.pop("created") <= b.attrs.pop("created")  # the clock's second may turn
    # history's new line is stamped too: the same line, but for the second
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    assert stamp.sub("T", a.attrs.pop("history")) == stamp.sub("T", b.attrs.pop("history"))
    xr.testing.assert_identical(a, b)

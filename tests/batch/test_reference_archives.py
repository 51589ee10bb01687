"""Cloud-style archives: a kerchunk reference file (Zarr metadata and byte ranges into netCDF
files) and an icechunk repository. ``dcfa fit`` and ``dcfa apply`` read them and give what they
give from the equivalent Zarr store; the files a reference points into are inputs too."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr
from support import cli, fails, interrupt, tree, write_job

from dcfa.batch.config import load_config

pytestmark = pytest.mark.slow

PARAMS = {"neighbors": 1, "random_state": 0}


def _reference(tmp_path) -> None:
    """The job's Zarr archive as one netCDF file per year in nc/, and a kerchunk reference
    file, sst.json, that joins them along time."""
    from kerchunk.combine import MultiZarrToZarr
    from kerchunk.hdf import SingleHdf5ToZarr

    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    (tmp_path / "nc").mkdir()
    parts = []
    for year, part in ds.groupby("time.year"):
        path = tmp_path / "nc" / f"sst_{year}.nc"
        # one time encoding for all files: the references join their raw values
        part.to_netcdf(path, encoding={"time": {"units": "days since 1990-01-01"}})
        parts.append(SingleHdf5ToZarr(os.fspath(path)).translate())
    refs = MultiZarrToZarr(parts, concat_dims=["time"], identical_dims=["lat", "lon"]).translate()
    (tmp_path / "sst.json").write_text(json.dumps(refs))


def _icechunk(tmp_path) -> None:
    """The job's Zarr archive committed to a local icechunk repository, sst.icechunk."""
    import icechunk

    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    storage = icechunk.local_filesystem_storage(os.fspath(tmp_path / "sst.icechunk"))
    session = icechunk.Repository.create(storage).writable_session("main")
    # in memory, chunked by its encoding: dask would ship the writable session to a cluster
    encoding = {"sst": {"chunks": (24, *ds.sst.shape[1:])}}
    ds.to_zarr(session.store, consolidated=False, encoding=encoding)
    session.commit("the archive")


def _fits_as_zarr(tmp_path, job, store: str, scheduler: str) -> None:
    """``dcfa fit`` from ``store`` gives the Zarr store's region map, features and
    correlations, writes nothing but its result, and ``dcfa apply`` on ``store`` gives the
    Zarr store's features."""
    on = ("--scheduler", scheduler)
    assert cli("fit", str(job), "--output", "from_zarr.zarr", *on, cwd=tmp_path).returncode == 0
    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", f"input.store={store}", "--output", "other.zarr", *on,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{store}: ['sst'] {{'time': 120, 'lat': 5, 'lon': 8}}" in proc.stdout
    a, b = xr.open_zarr(tmp_path / "from_zarr.zarr"), xr.open_zarr(tmp_path / "other.zarr")
    for name in ("region", "features"):
        xr.testing.assert_identical(a[name], b[name])
    xr.testing.assert_allclose(a["group_target_corr"], b["group_target_corr"], rtol=1e-12)
    assert json.loads(b.attrs["input_units"]) == {"sst": "K"}
    assert {k: v for k, v in tree(tmp_path).items() if k in before} == before  # inputs kept
    for result, archive, out in [
        ("other.zarr", store, "a.zarr"),
        ("from_zarr.zarr", "sst.zarr", "b.zarr"),
    ]:
        proc = cli("apply", result, archive, "--output", out, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(
        xr.open_zarr(tmp_path / "a.zarr").features.values,
        xr.open_zarr(tmp_path / "b.zarr").features.values,
    )


def test_a_kerchunk_reference_gives_the_zarr_stores_result(tmp_path, scheduler):
    pytest.importorskip("kerchunk")
    pytest.importorskip("h5py")
    job = write_job(tmp_path, method__params=PARAMS)
    _reference(tmp_path)
    _fits_as_zarr(tmp_path, job, "sst.json", scheduler)


def test_a_file_under_a_reference_is_an_input(tmp_path, scheduler):
    """A netCDF file the reference points into is guarded and identified as the reference
    itself is: rewriting it refuses the resume, and a missing one is named."""
    pytest.importorskip("kerchunk")
    pytest.importorskip("h5py")
    job = write_job(tmp_path, input__store="sst.json")
    _reference(tmp_path)
    interrupt(load_config(job), "[4/5]", scheduler=None)
    os.utime(tmp_path / "nc" / "sst_2004.nc")  # rewritten: its times change
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "the input store's content changed", "sst_2004.nc")

    (tmp_path / "nc" / "sst_2003.nc").unlink()
    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", "output.store=other.zarr", "--scheduler", scheduler, cwd=tmp_path
    )
    fails(proc, 2, "input.store: the kerchunk reference", "1 missing file", "sst_2003.nc")
    assert tree(tmp_path) == before

    (tmp_path / "bad.json").write_text("{not json")
    proc = cli(
        "fit", str(job), "--set", "input.store=bad.json", "--scheduler", scheduler, cwd=tmp_path
    )
    fails(proc, 2, "input.store:", "is not a kerchunk reference file")


def test_an_icechunk_repository_gives_the_zarr_stores_result(tmp_path, scheduler):
    icechunk = pytest.importorskip("icechunk")
    job = write_job(tmp_path, method__params=PARAMS)
    _icechunk(tmp_path)
    _fits_as_zarr(tmp_path, job, "sst.icechunk", scheduler)

    # a new commit on main is a changed input: the resume is refused
    ice = load_config(job, [f"input.store={tmp_path / 'sst.icechunk'}"])
    interrupt(ice, "[4/5]", scheduler=None, output=tmp_path / "again.zarr")
    storage = icechunk.local_filesystem_storage(os.fspath(tmp_path / "sst.icechunk"))
    session = icechunk.Repository.open(storage).writable_session("main")
    ds = xr.open_zarr(session.store, consolidated=False, chunks=None)  # no dask: see above
    (ds["sst"][:12].load() + 1.0).to_dataset().drop_vars(["lat", "lon"]).to_zarr(
        session.store, region={"time": slice(0, 12)}, consolidated=False
    )  # fmt: skip
    session.commit("first year corrected")
    proc = cli(
        "fit", str(job), "--set", "input.store=sst.icechunk", "--output", "again.zarr",
        "--resume", cwd=tmp_path,
    )  # fmt: skip
    fails(proc, 2, "the input store's content changed")

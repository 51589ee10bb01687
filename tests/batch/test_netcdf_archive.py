"""An archive of netCDF files, as most observational and CMIP archives are held: ``dcfa fit``
and ``dcfa apply`` read a file or a glob of them (one per year) and give what they give from
the equivalent Zarr store. It said "not a readable Zarr store (No group found)".
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr
from support import cli, fails, interrupt, tree, write_job

from dcfa.batch.config import load_config

pytestmark = pytest.mark.slow


def _as_netcdf(tmp_path) -> None:
    """The job's Zarr archive as one netCDF file per year, in nc/."""
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    (tmp_path / "nc").mkdir()
    for year, part in ds.groupby("time.year"):
        part.to_netcdf(tmp_path / "nc" / f"sst_{year}.nc")


def test_a_glob_of_netcdf_files_gives_the_zarr_stores_result(tmp_path, scheduler):
    job = write_job(tmp_path, method__params={"neighbors": 1, "random_state": 0})
    _as_netcdf(tmp_path)
    on = ("--scheduler", scheduler)
    proc = cli("fit", str(job), "--output", "from_zarr.zarr", *on, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", "input.store=nc/sst_*.nc", "--output", "from_nc.zarr", *on,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "nc/sst_*.nc: ['sst'] {'time': 120, 'lat': 5, 'lon': 8}" in proc.stdout
    a = xr.open_zarr(tmp_path / "from_zarr.zarr")
    b = xr.open_zarr(tmp_path / "from_nc.zarr")
    for name in ("region", "features"):
        xr.testing.assert_identical(a[name], b[name])
    for name in ("group_target_corr", "group_target_corr_low"):  # summed in other blocks
        xr.testing.assert_allclose(a[name], b[name], rtol=1e-12, atol=0)
    assert json.loads(b.attrs["input_units"]) == {"sst": "K"}
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # the inputs untouched

    # apply reads netCDF too: one file of the glob, the same series as from the Zarr store
    one = cli("apply", "from_nc.zarr", "nc/sst_2003.nc", "--output", "one.zarr", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    ref = cli("apply", "from_zarr.zarr", "sst.zarr", "--output", "ref.zarr", cwd=tmp_path)
    assert ref.returncode == 0, ref.stderr
    got = xr.open_zarr(tmp_path / "one.zarr")["features"]
    want = xr.open_zarr(tmp_path / "ref.zarr")["features"].sel(time=got.time)
    np.testing.assert_array_equal(got.values, want.values)


def test_a_changed_netcdf_file_refuses_the_resume_and_a_missing_glob_is_named(tmp_path, scheduler):
    job = write_job(tmp_path, input__store="nc/sst_*.nc")
    _as_netcdf(tmp_path)
    interrupt(load_config(job), "[4/5]", scheduler=None)
    assert (tmp_path / "result.zarr.work").is_dir()
    os.utime(tmp_path / "nc" / "sst_2004.nc")  # rewritten (its times change)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "the input store's content changed", "sst_2004.nc")

    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", "input.store=nc/tos_*.nc", "--scheduler", scheduler, cwd=tmp_path
    )
    fails(proc, 2, "input.store: no netCDF file at", "tos_*.nc")
    assert tree(tmp_path) == before


def test_overlapping_files_of_a_glob_are_named(tmp_path):
    """A file of 2003-07 .. 2004-06 beside the files of each year: xarray's "Resulting object
    does not have monotonic global indexes along dimension time". The two files of one
    variable that overlap are named, with their spans; a file of another variable over the
    same years is not an overlap. A file that starts with another was worse: one of them
    was dropped without a word."""
    job = write_job(tmp_path, input__store="nc/*.nc")
    _as_netcdf(tmp_path)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    ds.rename(sst="t2m").to_netcdf(tmp_path / "nc" / "t2m_all.nc")  # every year: no overlap
    ds.sel(time=slice("2003-07", "2004-06")).to_netcdf(tmp_path / "nc" / "sst_2003-2004.nc")
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(
        proc,
        2,
        "input.store: cannot read the netCDF file(s) ",
        "'sst_2003-2004.nc' (2003-07-01 00:00:00 .. 2004-06-01 00:00:00) and 'sst_2003.nc' "
        "(2003-01-01 00:00:00 .. 2003-12-01 00:00:00) overlap along 'time'; leave one of them "
        "out of the glob",
    )
    assert tree(tmp_path) == before
    # tiles of the grid side by side, each in files of five years, are no overlap
    from pathlib import Path

    from dcfa.io.archive import open_store

    (tmp_path / "tiles").mkdir()
    for k, rows in enumerate((slice(0, 2), slice(2, None))):
        for years in (slice("2000", "2004"), slice("2005", "2009")):
            part = ds.isel(lat=rows).sel(time=years)
            part.to_netcdf(tmp_path / "tiles" / f"sst_{k}_{years.start}.nc")
    tiled = open_store(Path(tmp_path / "tiles" / "*.nc"), "input.store")
    assert tiled.sizes == ds.sizes
    # a revised file of 2003-2004 beside the yearly files: xarray kept one of the two files
    # that start together and dropped the other without a word (120 months, not 132)
    (tmp_path / "nc" / "sst_2003-2004.nc").unlink()
    revised = ds.sel(time=slice("2003-01", "2004-12")) + 1.0
    revised.to_netcdf(tmp_path / "nc" / "sst_2003-2004.nc")
    before = tree(tmp_path)
    fails(
        cli("fit", str(job), cwd=tmp_path),
        2,
        "input.store: in ",
        "'sst_2003-2004.nc' (2003-01-01 00:00:00 .. 2004-12-01 00:00:00) and 'sst_2003.nc' "
        "(2003-01-01 00:00:00 .. 2003-12-01 00:00:00) overlap along 'time'; leave one of them "
        "out of the glob",
    )
    assert tree(tmp_path) == before

"""``input.select``: a box of the grid, by labels. The job's result is that of the same job on
a store cut by xarray, across the longitudes' seam too; ``dcfa apply`` takes the result's cells
from the whole archive; a bad box is refused naming its key, before any pass."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st
from support import cli, fails, tree, write_job

from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.job import run_job
from dcfa.geo import box_positions

BOX = {"lat": [-30, 30], "lon": [-30, 30]}  # across Greenwich, on longitudes 0..350


def _global(n: int = 72) -> xr.Dataset:
    """A global 10-degree field, longitudes 0..350: a box across Greenwich lies at both ends
    of the stored longitudes."""
    rng = np.random.default_rng(5)
    lat, lon = np.arange(-80, 81, 10.0), np.arange(0, 360, 10.0)
    latent = rng.normal(size=(n, 3))
    which = (np.arange(lat.size)[:, None] // 6 + np.arange(lon.size)[None, :] // 12) % 3
    sst = 280 + latent[:, which] + 0.7 * rng.normal(size=(n, lat.size, lon.size))
    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), sst.astype("float32"), {"units": "K"})},
        coords={"time": pd.date_range("2000-01-01", periods=n, freq="MS"), "lat": lat, "lon": lon},
    )
    ds.lon.attrs["units"] = "degrees_east"
    return ds


def _job(tmp_path, **changes):
    job = write_job(tmp_path, **changes)
    _global().chunk({"time": 24}).to_zarr(tmp_path / "global.zarr", consolidated=False)
    return job


def test_a_box_across_the_seam_gives_the_job_on_the_store_cut_by_xarray(tmp_path, scheduler):
    job = _job(tmp_path, input__store="global.zarr", input__select=BOX)
    before = tree(tmp_path)
    lines = []
    out = run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    assert "      input.select: lat 7 of 17 (-30 .. 30), lon 7 of 36 (-30 .. 30)" in lines
    assert {k: v for k, v in tree(tmp_path).items() if k in before} == before  # inputs kept
    # the reference: the box cut by xarray, the longitudes written in -180..180 first
    ds = _global()
    cut = ds.assign_coords(lon=(ds.lon + 180) % 360 - 180).sortby("lon")
    cut.lon.attrs["units"] = "degrees_east"
    cut = cut.sel(lat=slice(-30, 30), lon=slice(-30, 30))
    cut.chunk({"time": 24}).to_zarr(tmp_path / "cut.zarr", consolidated=False)
    (tmp_path / "ref").mkdir()
    ref_job = write_job(tmp_path / "ref", input__store=str(tmp_path / "cut.zarr"))
    ref = run_job(load_config(ref_job), scheduler=scheduler, echo=lambda *a: None)
    got, want = (xr.open_zarr(p).load() for p in (out, ref))
    np.testing.assert_array_equal(got.lon.values, cut.lon.values)  # -30 .. 30, side by side
    np.testing.assert_array_equal(got.region.values, want.region.values)
    np.testing.assert_array_equal(got.features.values, want.features.values)
    assert len(np.unique(got.region.values[got.region.values >= 0])) > 1


def test_apply_takes_the_results_cells_from_the_whole_archive(tmp_path, scheduler):
    job = _job(tmp_path, input__store="global.zarr", input__select={"lat": [30, -10]})
    out = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    assert xr.open_zarr(out).sizes["lat"] == 5  # -10 .. 30: the ends in either order
    before = tree(tmp_path)
    proc = cli("apply", str(out), "global.zarr", "--output", "applied.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before
    applied = xr.open_zarr(tmp_path / "applied.zarr").features.values
    np.testing.assert_array_equal(applied, xr.open_zarr(out).features.values)
    # an archive without the result's cells is refused, naming them
    _global().sel(lat=slice(-80, 0)).to_zarr(tmp_path / "south.zarr", consolidated=False)
    proc = cli("apply", str(out), "south.zarr", "--output", "no.zarr", cwd=tmp_path)
    fails(proc, 2, "dim 'lat' has 9 cells, the result's grid 5")
    assert not (tmp_path / "no.zarr").exists()


@pytest.mark.parametrize(
    "box, needle",
    [
        ("{time = [0, 1]}", "input.select.time: the samples are selected by input.time"),
        ("{depth = [0, 1]}", "input.select.depth: 'depth' is not a dim of the archive's grid"),
        ("{lat = [85, 89]}", "input.select.lat: no 'lat' label lies within [85, 89] (they run"),
    ],
    ids=["sample-dim", "no-such-dim", "empty"],
)
def test_a_box_that_selects_nothing_exits_2_before_any_pass(tmp_path, box, needle):
    job = _job(tmp_path, input__store="global.zarr")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", f"input.select={box}", cwd=tmp_path)
    fails(proc, 2, needle)
    assert "[2/5]" not in proc.stdout and tree(tmp_path) == before


# names are labels too (a member "r1i1p1f1", tests/test_ensemble.py), but not mixed with numbers
@pytest.mark.parametrize("bounds", [[10], [0, 1, 2], ["a", 2], [True, 3], 5, [], ""])
def test_a_box_of_other_than_two_numbers_is_a_config_error(tmp_path, bounds):
    base = load_config(write_job(tmp_path)).raw
    base["input"]["select"] = {"lat": bounds}
    with pytest.raises(ConfigError, match=r"input.select.lat must be \[start, stop\], two"):
        load_config(base=base)


@given(
    start=st.integers(-400, 400),
    width=st.integers(0, 360),
    step=st.sampled_from([2.5, 10.0, 45.0]),
    lower=st.sampled_from([0.0, -180.0]),
)
def test_a_longitude_box_against_every_copy_of_each_cell(start, width, step, lower):
    """A cell is in the box when one of its copies ``lon + 360 k`` lies between ``start`` and
    ``start + span`` (``span``: eastward from the first end to the second); the cells come
    eastward from ``start``."""
    lon = lower + np.arange(0.0, 360.0, step)
    got = box_positions(lon, (start, start + width), longitude=True)
    span = 360 if width == 360 else width
    copies = lon[:, None] + 360.0 * np.arange(-3, 4)[None, :]
    inside = ((copies >= start) & (copies <= start + span)).any(axis=1)
    assert sorted(got.tolist()) == np.flatnonzero(inside).tolist()
    east = (lon[got] - start) % 360.0
    assert (np.diff(east) > 0).all()


def test_a_box_of_another_coordinate_keeps_its_order_and_takes_the_ends_either_way():
    lat = np.arange(90.0, -91.0, -2.5)  # stored north to south
    for bounds in ([-30, 30], [30, -30]):
        got = box_positions(lat, bounds)
        np.testing.assert_array_equal(lat[got], np.arange(30.0, -31.0, -2.5))


def test_a_larger_grid_holds_the_results_labels_up_to_float32_rounding():
    from dcfa._validation import label_positions

    ours = pd.Index(np.array([-0.9, 0.1, 1.1]))
    theirs = pd.Index(np.arange(-3.9, 4.0, 1.0).astype("float32"))  # -3.9 .. 3.1, stored float32
    np.testing.assert_array_equal(label_positions(ours, theirs, set(), subset=True), [3, 4, 5])
    assert label_positions(ours, theirs, set()) is None  # same grid only, without subset
    assert label_positions(pd.Index([0.5]), theirs, set(), subset=True) is None  # not there
    lon = pd.Index(np.arange(-180.0, 180.0, 10.0))  # the result's 350, 0, 10 on -180..180
    got = label_positions(pd.Index([350.0, 0.0, 10.0]), lon, {"lon"}, subset=True)
    np.testing.assert_array_equal(lon[got], [-10.0, 0.0, 10.0])

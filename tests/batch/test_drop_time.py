"""A month absent from the archive (no value in any cell): the job's refusal names it, and
``input.drop_time`` leaves it out; windows and lags that reach it drop their own samples."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import tomli_w
import xarray as xr
from support import cli, fails, tree, write_job

from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.job import run_job

ABSENT = "2003-05-01"


def _rewrite(path, ds) -> None:
    shutil.rmtree(path)
    ds.chunk({"time": 12}).to_zarr(path, consolidated=False)


def _archive(tmp_path) -> xr.Dataset:
    return xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()


def _set(job, section: str, **keys) -> None:
    import tomllib

    config = tomllib.loads(job.read_text())
    config[section].update(keys)
    job.write_text(tomli_w.dumps(config))


@pytest.mark.parametrize("lags", [[0], [0, 1]], ids=["no-lags", "lags-0-1"])
def test_a_month_absent_everywhere_is_named_and_drop_time_leaves_it_out(tmp_path, scheduler, lags):
    """The refusal said 'every one of the 37 cells ... was excluded (37 cells: 1 of 120 values
    missing)', naming no month, and no key could leave one month out of the middle."""
    job = write_job(tmp_path, input__lags=lags)
    ds = _archive(tmp_path)
    ds["sst"] = ds.sst.where(ds.time != np.datetime64(ABSENT))
    _rewrite(tmp_path / "sst.zarr", ds)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    last = fails(proc, 2, "every one of the ", "cells of ['sst'] in ", "values missing")
    # a cell as stored (lag 0) names the month itself, not the month its lag 1 shifts it to
    assert f"misses {ABSENT} (1 sample). If the archive has no value there in any cell" in last
    assert last.endswith('leave those samples out with input.drop_time = ["2003-05"]'), last
    assert tree(tmp_path) == before  # nothing left behind

    _set(job, "input", drop_time=["2003-05"])  # as the refusal writes it
    lines = []
    out = run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    assert f"      input.drop_time: 1 sample left out ({ABSENT})" in lines
    # the reference: the same job on an archive that never held the month
    ref = tmp_path / "ref"
    ref.mkdir()
    ref_job = write_job(ref, input__lags=lags)
    _rewrite(ref / "sst.zarr", _archive(ref).drop_sel(time=[np.datetime64(ABSENT)]))
    ref_lines = []
    ref_out = run_job(load_config(ref_job), scheduler=scheduler, echo=ref_lines.append)
    n = 120 - 1 - (len(lags) - 1) * 2  # the month, and with lag 1 the edge and the month after
    for said in (lines, ref_lines):
        common = [line for line in said if "samples in common" in line]
        assert len(common) == 1 and common[0].endswith(f": {n} samples in common"), common
    # the months the lags only read: the first, not the month left out ("first 2 of 120")
    lead = [line for line in lines if line.startswith("      lead 0:")]
    assert lead == [line for line in ref_lines if line.startswith("      lead 0:")], lead
    fed = " (the archive's first 1 of 119 samples only feed them; 1 more reaches a month it misses)"
    if lags == [0, 1]:
        assert lead[0].endswith(fed), lead
    else:
        assert "only feed" not in lead[0], lead
    got, want = (xr.open_zarr(p, consolidated=False).load() for p in (out, ref_out))
    np.testing.assert_array_equal(got.region.values, want.region.values)
    np.testing.assert_allclose(got.features.values, want.features.values, rtol=1e-12)

    # dcfa apply reads every month it is given: the result of a job with drop_time was
    # refused ("fitted with input key(s) ['drop_time'], which dcfa apply does not reproduce")
    proc = cli("apply", str(out), str(ref / "sst.zarr"), "--output", "ap.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    applied = xr.open_zarr(tmp_path / "ap.zarr").features.sel(time=got.time)
    np.testing.assert_array_equal(applied.values, got.features.values)


@pytest.mark.parametrize(
    "value, needle",
    [
        (["1850-01"], "input.drop_time: '1850-01' names no sample of 'time' (2000-01-01 .. "),
        (
            ["2000", "2001", "2002", "2003", "2004", "2005", "2006", "2007", "2008", "2009"],
            "leaves out every sample of 'time'",
        ),
    ],
    ids=["no-such-month", "every-month"],
)
def test_drop_time_naming_no_sample_or_every_one_exits_2_before_any_pass(tmp_path, value, needle):
    job = write_job(tmp_path, input__drop_time=value)
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, needle)
    assert "[2/5]" not in proc.stdout
    assert tree(tmp_path) == before


def test_drop_time_of_other_than_labels_is_a_config_error(tmp_path):
    job = write_job(tmp_path, input__drop_time=[1.5])
    with pytest.raises(ConfigError, match=r"input.drop_time must be a list of labels .*\[1.5\]"):
        load_config(job)


def test_a_year_absent_from_one_variable_is_named_and_drop_time_keeps_both(tmp_path, scheduler):
    """One variable with a year of NaN in every cell (the other intact): each of its cells
    was left out for its gap and the job fitted the other variable alone, saying "37 of the
    excluded cells miss some months", naming neither the months nor the key."""
    job = write_job(tmp_path, input__variables=["sst", "t2m"])
    ds = _archive(tmp_path)
    rng = np.random.default_rng(0)
    ds["t2m"] = ds.sst + 5 + rng.normal(size=ds.sst.shape).astype("float32")
    ds["sst"] = ds.sst.where(ds.time.dt.year != 2003)
    _rewrite(tmp_path / "sst.zarr", ds)
    said = []
    run_job(load_config(job), scheduler=scheduler, echo=said.append)
    n = int(ds.sst.notnull().any("time").sum())  # the sst cells that hold data
    assert f"      excluded: {n} cells: 12 of 120 values missing" in said, said
    (line,) = [x for x in said if x.startswith("      e.g. the cell at ")]
    assert "variable=sst" in line and "misses 2003-01-01, 2003-02-01, " in line, line
    assert line.endswith('(12 samples). If the archive has no value there in any cell (a month '
                         'absent from it), leave those samples out with input.drop_time = '
                         '["2003"]'), line  # fmt: skip

    _set(job, "input", drop_time=["2003"])
    said = []
    out = run_job(
        load_config(job, ["output.overwrite=true"]), scheduler=scheduler, echo=said.append
    )
    assert not [x for x in said if x.startswith("      excluded")], said
    region = xr.open_zarr(out, consolidated=False).region
    assert bool(region.sel(variable="sst").notnull().any())  # both variables mapped


def test_months_absent_counts_the_holes_of_a_monthly_axis():
    from dcfa.batch.inputs import months_absent

    def axis(values):
        return xr.DataArray(values, dims="time", name="time")

    months = pd.date_range("1890-01-01", periods=240, freq="MS")
    assert months_absent(axis(months)) is None
    holed = months[(months.year < 1900) | (months.year > 1904)]
    assert months_absent(axis(holed)) == (60, "1900-01 .. 1904-12")
    one = months.delete(30)
    assert months_absent(axis(one)) == (1, "1892-07")
    model = xr.date_range("1850-01-01", periods=36, freq="MS", calendar="noleap", use_cftime=True)
    model = [d.replace(day=15 if d.month == 2 else 16) for d in model]
    assert months_absent(axis(model[:10] + model[22:])) == (12, "1850-11 .. 1851-10")
    days = pd.date_range("2000-01-01", periods=400, freq="D")
    assert months_absent(axis(days.delete(range(40, 80)))) is None  # not monthly
    seasons = pd.date_range("2000-01-01", periods=20, freq="QS")
    assert months_absent(axis(seasons)) is None
    winters = months[months.month.isin([12, 1, 2])]
    assert months_absent(axis(winters)) is None  # a season chosen, not months lost
    assert months_absent(axis(np.arange(10))) is None  # not dates


def test_a_job_says_the_months_missing_inside_the_archive(tmp_path, scheduler):
    """Years of files missing from a netCDF glob: the job said "1200 of 1200 samples kept"
    and nothing of the 600 months absent in the span input.time asked for."""
    job = write_job(tmp_path)
    ds = _archive(tmp_path)
    _rewrite(tmp_path / "sst.zarr", ds.sel(time=ds.time.dt.year != 2004))
    said = []
    run_job(load_config(job), scheduler=scheduler, echo=said.append)
    assert (
        "      note: the archive has no sample in 12 months within its span (the first "
        "2004-01 .. 2004-12): leads, windows, lags and anomalies take the months it has, by date"
    ) in said, said

"""``target.months``: a job fits the target's chosen calendar months only (a winter index),
as the same job does on a target file that holds only those months, and its forecast is NaN
for the others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, tree, write_job

from dcfa import InputError, load_result
from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.inputs import in_target_months
from dcfa.batch.inspect import describe
from dcfa.batch.job import run_job

WINTER = [12, 1, 2]
LEAD = 2  # the target's months, not the predictors': October-December predict December-February


def _run(job, scheduler, *overrides) -> list[str]:
    lines: list[str] = []
    config = load_config(job, [f"target.lead={LEAD}", *overrides])
    run_job(config, scheduler=scheduler, echo=lines.append)
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("anomalies", [True, False])
def test_chosen_months_are_the_job_on_a_file_of_those_months(tmp_path, scheduler, anomalies):
    """The result with ``target.months`` is the result of a target file whose other months
    were deleted (the reference: dates the job already handles), and its forecast is that
    result's: a field of every month is applied to the samples whose target is in winter,
    which a reference result without the key would refuse with anomalies (its climatology
    holds October-December only)."""
    job = write_job(tmp_path, input__anomalies=anomalies)
    lines = _run(job, scheduler, f"target.months={WINTER}")
    soi = pd.read_csv(tmp_path / "soi.csv", parse_dates=["time"])
    soi[soi.time.dt.month.isin(WINTER)].to_csv(tmp_path / "winter.csv", index=False)
    reference = tmp_path / "reference.zarr"
    _run(job, scheduler, f"target.path='{tmp_path / 'winter.csv'}'", f"output.store='{reference}'")

    ours, ref = xr.open_zarr(tmp_path / "result.zarr"), xr.open_zarr(reference)
    kept = (ours.time.values.astype("datetime64[M]").astype(int) + LEAD) % 12 + 1
    assert set(kept) == set(WINTER) and ours.sizes["time"] == 30  # 10 winters in 120 months
    for name in ("region", "features", "target"):
        xr.testing.assert_allclose(ours[name].load(), ref[name].load(), rtol=1e-12)
    n_outside = 120 - 30  # the file holds the target 2 months after every field month
    assert f"({n_outside} samples outside target.months {WINTER} left out)" in lines[0], lines[0]

    said = describe(str(tmp_path / "result.zarr"))
    assert f"  the target's months {WINTER} only (target.months)" in said.splitlines(), said
    assert "target.months" not in describe(str(reference))

    field = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False)  # every month
    forecast = load_result(tmp_path / "result.zarr").forecast(field).load()
    expected = load_result(reference).forecast(field.isel(time=_for_winter(field))).load()
    np.testing.assert_array_equal(forecast.time, ours.time)  # the fitted samples, no other
    assert forecast.target_time.dt.month.isin(WINTER).all()
    np.testing.assert_allclose(forecast.values, expected.values, rtol=1e-10)
    assert forecast.attrs == expected.attrs
    other = np.setdiff1d(np.arange(field.sizes["time"]), _for_winter(field))[:3]
    with pytest.raises(InputError, match=r"^field: none of its samples is for the target's "):
        load_result(tmp_path / "result.zarr").forecast(field.isel(time=other))


def _for_winter(field) -> np.ndarray:
    """The samples whose target, ``LEAD`` months later, is in winter."""
    target_month = (field.time.dt.month.values - 1 + LEAD) % 12 + 1
    return np.flatnonzero(np.isin(target_month, WINTER))


@pytest.mark.parametrize(
    "value", ["[]", "[0]", "[13]", "[12, 12]", "['DJF']", "[1.5]", "[true]"]
)  # fmt: skip
def test_a_bad_list_of_months_names_the_key(tmp_path, value):
    job = write_job(tmp_path)
    with pytest.raises(ConfigError, match=r"target\.months must be a non-empty list of calendar "):
        load_config(job, [f"target.months={value}"])


def test_months_of_samples_that_are_not_dates_name_the_key():
    """Samples labelled by numbers (a Zarr target on an integer sample dim) have no calendar
    month: refused naming the key, not with xarray's error on ``.dt``."""
    target = xr.DataArray([1.0, 2.0, 3.0], dims="sample")
    with pytest.raises(InputError, match=r"^target\.months: .* not dates; calendar months"):
        in_target_months(target, np.arange(3), [1])
    dates = pd.date_range("2000-11-01", periods=3, freq="MS").values
    kept, outside = in_target_months(target, dates, WINTER[:1])
    np.testing.assert_array_equal(outside, [True, False, True])
    np.testing.assert_array_equal(kept.values, [np.nan, 2.0, np.nan])


@pytest.mark.slow
def test_dcfa_apply_says_it_keeps_the_samples_of_the_months(tmp_path, scheduler):
    """``dcfa apply`` of a season's result on the whole archive exits 0, says which samples
    it kept and why, writes the output alone, and holds the winter samples only."""
    job = write_job(tmp_path)
    _run(job, scheduler, f"target.months={WINTER}")
    before = tree(tmp_path)
    proc = cli("apply", "result.zarr", "sst.zarr", "--output", "out.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.endswith(
        ", 30 samples; lead 2 months: for the target at t + 2 months; the samples for the "
        f"target's months {WINTER} (target.months)"
    ), first
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("out.zarr")} == before
    out = xr.open_zarr(tmp_path / "out.zarr")
    assert out.sizes["time"] == 30 and out.forecast.target_time.dt.month.isin(WINTER).all()
    # samples numbered, not dated, have no month: refused naming the argument
    field = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).sst
    numbered = field.assign_coords(time=np.arange(field.sizes["time"]))
    with pytest.raises(InputError, match=r"^field: .* holds int64 values, not dates; the result"):
        load_result(tmp_path / "result.zarr").transform(numbered)

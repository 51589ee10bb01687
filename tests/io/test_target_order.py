"""A target file's rows in any order: the job pairs months by date, never by row.

A reviewer's case: a CSV target whose rows were shuffled, with ``target.lead = 3``, printed
nonsense dates and wrote other correlations, exit 0. The reference is the same job with the
rows in date order.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.io.target import open_target


def test_open_target_sorts_the_rows_by_date(tmp_path):
    time = pd.date_range("2000-01-01", periods=24, freq="MS")
    values = np.arange(24.0)
    order = np.random.default_rng(0).permutation(24)
    pd.DataFrame({"time": time[order], "y": values[order]}).to_csv(tmp_path / "y.csv", index=False)
    y = open_target(tmp_path / "y.csv", "y")
    np.testing.assert_array_equal(y.time.values, time.values)
    np.testing.assert_array_equal(y.values, values)


def test_open_target_keeps_the_order_of_a_sorted_file_and_of_repeated_dates(tmp_path):
    time = pd.to_datetime(["2000-01-01", "2000-02-01", "2000-02-01", "2000-03-01"])
    pd.DataFrame({"time": time[[3, 1, 2, 0]], "y": [3.0, 1.0, 2.0, 0.0]}).to_csv(
        tmp_path / "y.csv", index=False
    )
    y = open_target(tmp_path / "y.csv", "y")
    np.testing.assert_array_equal(y.values, [0.0, 1.0, 2.0, 3.0])


def test_a_value_that_is_no_number_names_the_key_and_the_row(tmp_path):
    time = pd.date_range("2000-01-01", periods=5, freq="MS")
    pd.DataFrame({"time": time, "y": ["1", "2", "oops", "", "5"]}).to_csv(
        tmp_path / "y.csv", index=False
    )
    with pytest.raises(ValueError, match=r"target.variable: column 'y' .* 'oops' \(row 4"):
        open_target(tmp_path / "y.csv", "y")


@pytest.mark.slow
def test_a_shuffled_target_gives_the_job_of_the_sorted_one(tmp_path, scheduler):
    for name in ("sorted", "shuffled"):
        (tmp_path / name).mkdir()
    write_job(tmp_path / "sorted", target__lead=3)
    job = write_job(tmp_path / "shuffled", target__lead=3)
    csv = tmp_path / "shuffled" / "soi.csv"
    frame = pd.read_csv(csv)
    frame.iloc[np.random.default_rng(1).permutation(len(frame))].to_csv(csv, index=False)
    lines: dict[str, list] = {"sorted": [], "shuffled": []}
    for name in lines:
        run_job(
            load_config(tmp_path / name / "job.toml"), scheduler=scheduler, echo=lines[name].append
        )
    a = xr.open_zarr(tmp_path / "sorted" / "result.zarr")
    b = xr.open_zarr(tmp_path / "shuffled" / "result.zarr")
    assert job.exists()
    np.testing.assert_array_equal(a.region.values, b.region.values)
    # the same series and target; the cluster's merge order may change the last bits
    np.testing.assert_allclose(a.group_target_corr.values, b.group_target_corr.values, rtol=1e-12)
    alignment = [s for s in lines["shuffled"] if "lead 3" in s]
    assert alignment == [s for s in lines["sorted"] if "lead 3" in s] and alignment


@pytest.mark.slow
def test_a_month_missing_from_the_target_is_skipped_by_date(tmp_path, scheduler):
    """A CSV target without one month's row, target.lead = 3: every predictor month is paired
    with the value dated 3 months later (it was the value 3 rows later: 4 months across the
    gap), and the predictor whose partner is the missing month is left out."""
    job = write_job(tmp_path, target__lead=3)
    csv = tmp_path / "soi.csv"
    frame = pd.read_csv(csv)
    dropped = frame.time[60]
    frame.drop(index=60).to_csv(csv, index=False)
    run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    ds = xr.open_zarr(tmp_path / "result.zarr")
    y = frame.set_index(pd.to_datetime(frame.time).dt.to_period("M")).soi
    predictors = pd.to_datetime(ds.time.values).to_period("M")
    partner = predictors + 3
    assert pd.Period(pd.Timestamp(dropped), "M") not in set(partner)
    # the stored correlations are those with the values dated 3 months later
    expected = y.loc[partner].to_numpy()
    f = ds.features.values.astype(np.float64)
    corr = [np.corrcoef(f[:, g], expected)[0, 1] for g in range(f.shape[1])]
    np.testing.assert_allclose(ds.group_target_corr.values, corr, atol=1e-5)


def _latest_first(store) -> None:
    """Rewrite the archive at ``store`` with its months stored latest-first."""
    import shutil

    ds = xr.open_zarr(store, consolidated=False).load()
    shutil.rmtree(store)
    ds = ds.isel(time=slice(None, None, -1)).drop_encoding()
    ds.to_zarr(store, zarr_format=3, consolidated=False)


@pytest.mark.slow
def test_an_archive_stored_latest_first_gives_the_job_of_the_sorted_one(tmp_path, scheduler):
    """GenLinCFACV's forward-chaining CV, the lead and the result read the months in time
    order whatever order the archive stores them in (the old job ran the folds backwards,
    training on the future; the reference is the same job on the archive in time order);
    dcfa apply --time selects on such an archive (pandas refused the reversed index)."""
    params = {"neighbors": 1, "epsilons": [0.7, 0.8], "n_splits": 3}
    for name in ("sorted", "reversed"):
        (tmp_path / name).mkdir()
        write_job(tmp_path / name, method__name="genlincfacv", method__params=params)
    _latest_first(tmp_path / "reversed" / "sst.zarr")
    for name in ("sorted", "reversed"):
        run_job(
            load_config(tmp_path / name / "job.toml"), scheduler=scheduler, echo=lambda *a: None
        )
    a = xr.open_zarr(tmp_path / "sorted" / "result.zarr")
    b = xr.open_zarr(tmp_path / "reversed" / "result.zarr")
    np.testing.assert_array_equal(a.time.values, b.time.values)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.features.values, b.features.values, rtol=1e-6)
    assert a.attrs["eps_path"] == b.attrs["eps_path"]
    proc = cli(
        "apply", str(tmp_path / "sorted" / "result.zarr"), "sst.zarr", "--output", "out.zarr",
        "--time", "2003-01", "2003-12", cwd=tmp_path / "reversed",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = xr.open_zarr(tmp_path / "reversed" / "out.zarr")
    np.testing.assert_array_equal(out.time.dt.year.values, [2003] * 12)
    assert (np.diff(out.time.values) > np.timedelta64(0)).all()


def test_an_archive_with_a_repeated_month_is_named_before_any_pass(tmp_path):
    """Two samples with one date cannot be put in time order: named, nothing written."""
    import shutil

    job = write_job(tmp_path)
    store = tmp_path / "sst.zarr"
    ds = xr.open_zarr(store, consolidated=False).load()
    shutil.rmtree(store)
    ds = ds.assign_coords(time=ds.time.values[[*range(5), 4, *range(6, ds.sizes["time"])]])
    ds.drop_encoding().to_zarr(store, zarr_format=3, consolidated=False)
    before = sorted(p.name for p in tmp_path.iterdir())
    repeated = r"^input\.store: .* holds repeated 'time' labels \(e\.g\. "
    with pytest.raises(ValueError, match=repeated):
        run_job(load_config(job), echo=lambda *a: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == before

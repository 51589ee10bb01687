"""A target's missing-value code (NOAA's ``-99.99``): read as missing when ``target.missing``
declares it, named in a warning when nothing does (it was used as data, and the job's map lost
its driving region without a word)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, write_job

from dcfa.batch.config import ConfigError, load_config
from dcfa.io.target import open_target

TIME = pd.date_range("1990-01-01", periods=120, freq="MS")


def _index(seed=0):
    return np.round(np.random.default_rng(seed).normal(0.0, 1.0, TIME.size), 2)


def _csv(path, values):
    pd.DataFrame({"time": TIME.strftime("%Y-%m-%d"), "idx": values}).to_csv(path, index=False)
    return path


def test_a_declared_code_is_missing_in_a_csv_and_a_float32_netcdf(tmp_path):
    values = _index()
    coded = values.copy()
    coded[[5, 40, 41]] = -99.99
    expected = values.copy()
    expected[[5, 40, 41]] = np.nan
    csv = _csv(tmp_path / "idx.csv", coded)
    nc = tmp_path / "idx.nc"
    # float32 holds -99.99 as -99.98999786: still the code
    xr.Dataset({"idx": ("time", coded.astype(np.float32))}, coords={"time": TIME}).to_netcdf(nc)
    for path, exact in ((csv, expected), (nc, expected.astype(np.float32))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = open_target(path, "idx", missing=[-99.99])
        np.testing.assert_array_equal(y.values, exact)
    # several codes, and a value near a code but not it, kept
    coded[7] = -999.0
    coded[8] = -99.9
    y = open_target(_csv(tmp_path / "two.csv", coded), "idx", missing=[-99.99, -999.0])
    assert np.isnan(y.values[[5, 7, 40, 41]]).all() and y.values[8] == -99.9
    assert np.isnan(y.values).sum() == 4


def test_an_undeclared_code_is_named_with_its_count_date_and_key(tmp_path):
    coded = _index()
    coded[[5, 40, 41]] = -99.99
    with pytest.warns(UserWarning) as record:
        y = open_target(_csv(tmp_path / "idx.csv", coded), "idx")
    (message,) = [str(w.message) for w in record]
    assert message.startswith("target.variable: 'idx' in ") and record[0].filename == __file__
    for needle in ("holds -99.99 3 times (first at 1990-06-01)", "set target.missing = -99.99"):
        assert needle in message, message
    assert (y.values == -99.99).sum() == 3  # a warning: the values are as written


@pytest.mark.parametrize("code", [-99.99, -999.0, 9999.9, -99.9])
def test_a_code_written_once_in_nines_is_named(tmp_path, code):
    """A code seen once is the common case (one month the agency could not compute): a job
    went on with -99.99 as data and its map lost a region. Far from the other values and
    written in nines alone, it is named."""
    coded = _index()
    coded[50] = code
    with pytest.warns(UserWarning) as record:
        open_target(_csv(tmp_path / "idx.csv", coded), "idx")
    (message,) = [str(w.message) for w in record]
    assert f"holds {code:g} once (at 1994-03-01)" in message, message
    assert f"set target.missing = {code:g}" in message, message


@pytest.mark.parametrize("code", [-99.99, -9.99, -99.0])
def test_a_negative_code_in_nines_near_a_flows_values_is_named(tmp_path, code):
    """A river's flow of about 100 (spread about 35): -99.99 lies about 6 robust standard
    deviations off, under the 10 that names a code, and was fitted as a month of flow. The
    only negative values of a series otherwise >= 0, written in nines, are named."""
    rng = np.random.default_rng(1)
    flow = np.round(rng.gamma(8.0, 100.0 / 8.0, TIME.size), 1)
    assert (flow >= 0).all()
    flow[[30, 31, 77]] = code
    with pytest.warns(UserWarning) as record:
        open_target(_csv(tmp_path / "flow.csv", flow), "idx")
    (message,) = [str(w.message) for w in record]
    assert (
        f"holds {code:g} 3 times (first at 1992-07-01), negative where every other value is >= 0"
        in message
    )
    assert f"set target.missing = {code:g}" in message


@pytest.mark.parametrize("value", [-0.99, -9.99, -123.45])
def test_negative_values_of_a_signed_series_are_data(tmp_path, value):
    """An index that takes both signs: a negative value in nines near its others is data."""
    values = _index() * 3.0
    values[50] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = open_target(_csv(tmp_path / "idx.csv", values), "idx")
    assert y.values[50] == value


@pytest.mark.parametrize("value", [9.99, 0.99, 40.0, -123.45])
def test_nines_within_reach_or_other_far_values_once_are_data(tmp_path, value):
    """In nines but within 10 robust standard deviations (9.99 for an index of spread 3),
    or far but written otherwise (a flood peak): data, no warning."""
    values = _index() * (3.0 if value > 1 else 1.0)
    values[50] = value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = open_target(_csv(tmp_path / "idx.csv", values), "idx")
    assert y.values[50] == value


@pytest.mark.parametrize("seed", range(20))
def test_real_extremes_are_not_taken_for_codes(tmp_path, seed):
    """An index with heavy tails (Student's t with 3 degrees of freedom, rounded to two
    decimals, so values repeat), a flow gauge's zero months, a single far outlier."""
    rng = np.random.default_rng(seed)
    cases = {
        "heavy": np.round(rng.standard_t(3, TIME.size), 2),
        "dry": np.where(rng.random(TIME.size) < 0.3, 0.0, np.round(rng.lognormal(3, 1, TIME.size))),
        "outlier": np.concatenate([_index(seed)[:-1], [40.0]]),
    }
    for name, values in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            open_target(_csv(tmp_path / f"{name}.csv", values), "idx")


def test_the_key_takes_a_number_or_a_list_of_numbers(tmp_path):
    job = write_job(tmp_path)
    assert load_config(job).target["missing"] == []
    assert load_config(job, ["target.missing=-99.99"]).target["missing"] == [-99.99]
    assert load_config(job, ["target.missing=[-99.99, -999]"]).target["missing"] == [-99.99, -999.0]
    for bad in ('"-99.99"', "true", '["x"]'):
        with pytest.raises(ConfigError, match="target.missing must be a number or a list") as err:
            load_config(job, [f"target.missing={bad}"])
        # echoed as the job file writes it, not as Python's repr, and named as given
        given = f"(given by --set target.missing={bad})"
        assert str(err.value).endswith(f"got {bad.replace(chr(34), chr(39))} {given}")
    proc = cli("fit", str(job), "--set", "target.missing=[true]", cwd=tmp_path)
    assert proc.returncode == 2 and "target.missing must be a number" in proc.stderr
    assert "got [true]" in proc.stderr


@pytest.mark.slow
def test_a_job_leaves_the_declared_code_out(tmp_path, client):
    from dcfa.batch.job import run_job

    job = write_job(tmp_path, target__missing=-99.99)
    soi = pd.read_csv(tmp_path / "soi.csv")
    # row 5 lies before the field's 120 months (the file starts 7 months earlier): its code
    # costs no sample, and is not counted
    soi.loc[[5, 40, 41], "soi"] = -99.99
    soi.to_csv(tmp_path / "soi.csv", index=False)
    lines = []
    run_job(load_config(job), scheduler=client.scheduler.address, echo=lines.append)
    (first,) = [line for line in lines if line.startswith("[1/5]")]
    assert "118 samples in common (2 missing target values left out)" in first, first

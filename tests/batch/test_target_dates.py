"""A target's dates are read as the user meant them, or refused by the key that fixes them.

Day-first dates that month-first reading also accepts, a daily target against a monthly
archive with exact stamps, and rows without a date each gave a silent wrong fit or a
misleading message. Every case runs the real command line on a real Zarr store in a temporary
directory and checks the exit code, the message and every file on disk before and after.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from support import cli, fails, tree, write_job

pytestmark = pytest.mark.slow


def _rewrite_target(tmp_path, dates, values=None) -> None:
    """The job's target file with other dates (the same values, as many as there are dates)."""
    soi = pd.read_csv(tmp_path / "soi.csv")["soi"].to_numpy()
    if values is None:
        values = np.resize(soi, len(dates))
    pd.DataFrame({"time": dates, "soi": values}).to_csv(tmp_path / "soi.csv", index=False)


def _target_keys(job, **keys):
    """The job file with other ``[target]`` keys (the archive and target left as they are)."""
    import tomllib

    import tomli_w

    config = tomllib.loads(job.read_text())
    config["target"].update(keys)
    job.write_text(tomli_w.dumps(config))
    return job


def _common(stdout: str) -> int:
    return int(re.search(r"(\d+) samples in common", stdout).group(1))


def test_day_first_dates_are_refused_then_read_by_date_format(tmp_path, scheduler):
    job = write_job(tmp_path)
    # the archive's months (2000-01 .. 2009-12) stamped on the 1st, written day first: every
    # row also reads month first (1 February is 2 January), which gave 10 samples in common
    months = pd.date_range("2000-01-01", periods=120, freq="MS")
    _rewrite_target(tmp_path, months.strftime("%d/%m/%Y"))
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "target.date_format:", "'01/01/2000'", "'%d/%m/%Y' (day first)")
    assert tree(tmp_path) == before

    _target_keys(job, date_format="%d/%m/%Y")
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _common(proc.stdout) == 120  # every month, each on its own month
    assert (tmp_path / "result.zarr").is_dir()


def test_dates_written_as_numbers_are_refused_then_read_by_date_format(tmp_path, scheduler):
    """199001 was read as nanoseconds after 1970-01-01: 'the target has repeated samples when
    matched by 'month' (up to 120 samples in one month, 1970-01)'."""
    job = write_job(tmp_path)
    months = pd.date_range("2000-01-01", periods=120, freq="MS")
    _rewrite_target(tmp_path, months.strftime("%Y%m").astype(int))
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "target.time_column:", "holds numbers (e.g. 200001)", "'%Y%m'")
    assert "1970" not in proc.stderr
    assert tree(tmp_path) == before

    _target_keys(job, date_format="%Y%m")
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _common(proc.stdout) == 120
    assert (tmp_path / "result.zarr").is_dir()


def test_a_wrong_date_format_is_named(tmp_path):
    job = write_job(tmp_path, target__date_format="%m/%d/%Y")
    before = tree(tmp_path)  # the target written by write_job: ISO dates, mid-month
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, "target.date_format:", "doesn't match format")
    assert tree(tmp_path) == before


def test_a_daily_target_with_exact_stamps_against_a_monthly_archive_is_refused(tmp_path):
    job = write_job(tmp_path, target__match="exact")
    days = pd.date_range("2000-01-01", "2009-12-31", freq="D")
    _rewrite_target(tmp_path, days.strftime("%Y-%m-%d"))
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    # it printed "120 samples in common" and fitted the values of each 1st of the month
    fails(
        proc,
        2,
        "target.match: 3533 of the target's 3653 samples in the input's months are not on "
        "the input's stamps",
        "up to 31 samples in one month",
        "then set target.match = 'month'",
    )
    assert tree(tmp_path) == before

    _target_keys(job, match="month")  # the same by month: one value a month, or which?
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, "target.match: the target has repeated samples", "average it")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("missing", ["", "NaT"])
def test_a_row_without_a_date_is_named(tmp_path, missing):
    job = write_job(tmp_path)
    dates = list(pd.date_range("1999-06-15", periods=150, freq="MS").strftime("%Y-%m-%d"))
    dates[40] = missing
    _rewrite_target(tmp_path, dates)
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    # it said "the target has repeated samples when matched by 'month'"
    fails(proc, 2, "target.time_column:", "no date in 1 row(s), the first row 42 of the file")
    assert tree(tmp_path) == before


def test_a_target_ending_as_the_archive_starts_names_the_target_not_the_lead(tmp_path):
    """At a lead, a target file whose record ends two months into the archive's was refused
    as "target.lead = 3: lead=3 leaves 0 pair(s)", which sent the user to a lead that was
    right: it is the target's dates that miss the archive's, said with both records."""
    job = _target_keys(write_job(tmp_path), lead=3)
    _rewrite_target(tmp_path, pd.date_range("1995-01-01", "2000-02-01", freq="MS"))
    before = tree(tmp_path)
    message = fails(cli("fit", str(job), cwd=tmp_path), 2)
    assert message == (
        "dcfa: error: target.path: its record (1995-01-01 .. 2000-02-01, proleptic_gregorian "
        "calendar) and the input's (2000-01-01 .. 2009-12-01, proleptic_gregorian calendar) "
        "share 2 months, and lead=3 pairs 0 predictor(s) with a target (need at least 4); "
        "give the target the input's years"
    )
    assert tree(tmp_path) == before


@pytest.mark.parametrize("lead", [0, 3])
def test_a_date_typed_twice_in_the_csv_is_named(tmp_path, lead):
    """A row's date typed as the next month's: by month the job said "the target has
    repeated samples when matched by 'month'; ... average it to one value a month first",
    advice for daily data, not for a typo."""
    job = _target_keys(write_job(tmp_path), lead=lead)
    dates = list(pd.date_range("1999-06-15", periods=150, freq="MS").strftime("%Y-%m-%d"))
    dates[40] = dates[41]
    _rewrite_target(tmp_path, dates)
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(
        proc,
        2,
        f"target: holds the 'time' label {dates[41]} 2 times; each sample needs a label of its "
        "own (a date typed twice?)",
    )
    assert "average" not in proc.stderr
    assert tree(tmp_path) == before

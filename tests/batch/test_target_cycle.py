"""A target with a seasonal cycle of its own, fitted on the field's anomalies: the cycle
stays in the error, and the job says so (a flow's cycle took a job's CV R2 from 0.89 to
0.57, without a word)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from support import write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.stats.seasonal import seasonal_share

NOTE = "      note: the target's mean seasonal cycle is "


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n, amplitude", [(36, 0.0), (120, 0.5), (241, 2.0)])
def test_the_share_and_p_value_are_one_way_anovas_by_month(seed, n, amplitude):
    rng = np.random.default_rng(seed)
    months = (np.arange(n) + rng.integers(12)) % 12 + 1
    y = amplitude * np.sin(2 * np.pi * months / 12) + rng.normal(size=n)
    share, p = seasonal_share(y, months)
    frame = pd.DataFrame({"y": y, "m": months})
    resid = frame.y - frame.groupby("m").y.transform("mean")
    assert share == pytest.approx(1 - (resid**2).sum() / ((y - y.mean()) ** 2).sum(), rel=1e-10)
    assert p == pytest.approx(stats.f_oneway(*[g.y for _, g in frame.groupby("m")]).pvalue)


def test_a_month_seen_once_or_a_single_month_gives_no_share():
    assert seasonal_share(np.arange(13.0), np.r_[np.arange(1, 13), 1]) == (0.0, 1.0)
    assert seasonal_share(np.arange(6.0), np.full(6, 7)) == (0.0, 1.0)


def test_a_target_with_its_own_cycle_gets_a_note_with_anomalies_only(tmp_path, scheduler):
    job = write_job(tmp_path)  # input.anomalies = true
    said = []
    run_job(load_config(job), scheduler=scheduler, echo=said.append)
    assert not [line for line in said if line.startswith(NOTE)]  # the SOI-like target: none

    frame = pd.read_csv(tmp_path / "soi.csv", parse_dates=["time"])
    frame["soi"] += 3 * np.cos(2 * np.pi * frame.time.dt.month / 12)
    frame.to_csv(tmp_path / "soi.csv", index=False)
    said = {}
    for anomalies in (True, False):
        config = load_config(
            job, [f"input.anomalies={str(anomalies).lower()}", "output.overwrite=true"]
        )
        said[anomalies] = []
        run_job(config, scheduler=scheduler, echo=said[anomalies].append)
    assert not [line for line in said[False] if line.startswith(NOTE)]
    (note,) = [line for line in said[True] if line.startswith(NOTE)]
    # the share said is the target's on the months fitted (2000-2009), by its own months
    fitted = frame[(frame.time >= "2000-01-01") & (frame.time < "2010-01-01")]
    resid = fitted.soi - fitted.groupby(fitted.time.dt.month).soi.transform("mean")
    share = 1 - (resid**2).sum() / ((fitted.soi - fitted.soi.mean()) ** 2).sum()
    assert note.startswith(f"{NOTE}{share:.0%} of its variance; "), (note, share)
    assert "subtract its monthly means from the target file first" in note

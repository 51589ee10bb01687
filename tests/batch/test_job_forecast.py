"""The batch job as a forecast: ``target.lead``, ``input.windows`` and ``input.lags``.

A real job (LocalCluster, Zarr archive, CSV target) against NumPy: the windows are trailing
means, the lags earlier samples, the climatology is fitted on the samples the job keeps, the
target is the one ``lead`` months after each predictor, and no group mixes windows or lags.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import N, cli, fails, numpy_predictors, tree, write_forecast_job, write_job

from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.job import run_job

pytestmark = pytest.mark.slow


def test_lead_windows_and_lags_against_numpy(tmp_path, scheduler):
    job, x, y = write_forecast_job(tmp_path)
    lines = []
    run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    ds = xr.open_zarr(tmp_path / "out.zarr")
    assert set(ds.region.dims) == {"window", "lag", "lat", "lon"}
    order = ("window", "lag", "lat", "lon")
    P, start = numpy_predictors(x)
    lead = 2
    P = P[: N - start - lead]  # the last predictors have no target 2 months later
    target = y[start + lead :]
    times = pd.date_range("2000-01-01", periods=N, freq="MS")
    np.testing.assert_array_equal(ds.time.values, times[start : N - lead].values)
    # the alignment, as printed: the archive as stored (its sizes were said after the windows,
    # lags and lead took their samples, 115 months of 120 with no word of the 120), then
    # what the lead kept of what the windows and lags left
    assert lines[0].startswith(f"[1/5] {tmp_path / 'sst.zarr'}: ['sst'] {{'time': {N}, 'lat': 4,")
    assert lines[0].endswith(f": {N - start - lead} samples in common"), lines[0]
    assert lines[1] == (
        f"      lead 2: predictors {times[start]:%Y-%m-%d} .. {times[N - lead - 1]:%Y-%m-%d} -> "
        f"targets 2000-0{start + lead + 1}-15 .. {times[N - 1]:%Y-%m}-15, {N - start - lead} of "
        f"{N - start} samples kept; windows [1, 3] (mean); lags [0, 1] (the archive's first "
        f"{start} of {N} samples only feed them)"
    ), lines[1]
    # the climatology of the samples kept, per calendar month
    month = times[start : N - lead].month.values
    clim = np.stack([P[month == k].mean(axis=0) for k in range(1, 13)])
    stored = ds.climatology.transpose("month", *order).values
    # (a float32 archive's running means are float32, as dcfa.trailing_windows keeps them)
    np.testing.assert_allclose(stored, clim, rtol=1e-7, equal_nan=True)
    A = P - clim[month - 1]
    # every group: the mean of its cells' (weighted, centred) anomalies; groups never mix
    # windows or lags
    region = ds.region.transpose(*order).values  # NaN where unused
    scale = ds.cell_scale.transpose(*order).values
    centre = ds.cell_centre.transpose(*order).values
    feats = ds.features.values
    for g in range(ds.sizes["group"]):
        cells = np.argwhere(region == g)
        assert len({(c[0], c[1]) for c in cells}) == 1, f"group {g} mixes blocks"
        ref = (scale[region == g] * (A[:, region == g] - centre[region == g])).mean(axis=1)
        np.testing.assert_allclose(feats[:, g], ref, rtol=1e-4, atol=1e-4)
    # the stored correlation is with the target 2 months ahead
    f = feats.astype(np.float64)
    corr = [np.corrcoef(f[:, g], target)[0, 1] for g in range(f.shape[1])]
    np.testing.assert_allclose(ds.group_target_corr.values, corr, atol=1e-5)


def test_without_neighbors_no_group_mixes_windows_or_lags(tmp_path, scheduler):
    """The blocks hold without the neighbour restriction too (the executions that stack the
    cells with data: their window and lag levels are the blocks)."""
    job, _, _ = write_forecast_job(tmp_path)
    job.write_text(job.read_text().replace("neighbors = 1\n", ""))
    lines = []
    run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    ds = xr.open_zarr(tmp_path / "out.zarr")
    region = ds.region.transpose("window", "lag", "lat", "lon").values
    assert ds.sizes["group"] >= 2
    for g in range(ds.sizes["group"]):
        cells = np.argwhere(region == g)
        assert len({(c[0], c[1]) for c in cells}) == 1, f"group {g} mixes blocks"
        # the summary names each group's window and lag (its lines were indistinguishable)
        line = next((s for s in lines if s.strip().startswith(f"group {g:4d}:")), None)
        if line is not None:
            w, lag = ds.window.values[cells[0][0]], ds.lag.values[cells[0][1]]
            assert f"group {g:4d}: window {w}, lag {lag} " in line, line
    assert sum("group" in s and "window" in s for s in lines) >= 2, lines


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("input.windows", "[0, 3]", "input.windows must be a list of ints >= 1"),
        ("input.windows", "[3, 3]", "input.windows has repeated values"),
        ("input.lags", "[-1]", "input.lags must be a list of ints >= 0"),
        ("input.aggregate", '"median"', "input.aggregate must be 'mean' or 'sum'"),
        ("target.lead", "-1", "target.lead must be an int >= 0"),
        ("target.lead", '"3"', "target.lead must be an integer"),
    ],
)
def test_bad_forecast_keys_name_them(tmp_path, key, value, message):
    job, _, _ = write_forecast_job(tmp_path)
    with pytest.raises(ConfigError, match=message):
        load_config(job, [f"{key}={value}"])


def test_a_bad_forecast_key_exits_2_and_writes_nothing(tmp_path):
    job, _, _ = write_forecast_job(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = cli("fit", str(job), "--set", "input.lags=[-1]", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "input.lags must be a list of ints >= 0" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_lead_too_long_for_the_folds_exits_2_before_any_pass(tmp_path):
    """A lead that leaves too few samples for RegionsCV's folds at its gap was refused after
    the preprocessing pass, naming ``gap`` alone, and left the pass with advice to resume."""
    job = write_job(tmp_path, method__name="regionscv", method__params={"gap": 3})
    before = tree(tmp_path)
    # the target runs 23 months past the archive: 11 samples in common at lead 132
    proc = cli("fit", str(job), "--set", "target.lead=132", cwd=tmp_path)
    fails(
        proc,
        2,
        "method.params.gap: 3 samples on each side of a test block leave 3 of the 11 samples",
        "(the input and the target have 11 samples in common at target.lead = 132: a shorter "
        "lead leaves more)",
    )
    assert "cluster:" not in proc.stdout and "[2/5]" not in proc.stdout
    assert tree(tmp_path) == before


def test_anomalies_of_months_present_once_are_refused_before_any_pass(tmp_path):
    """With 8 samples each month is its own climatology: every anomaly was 0, and the job
    said every cell of input.variables was constant."""
    job = write_job(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"^input\.anomalies: the 8 samples .* at target\.lead "
        r"= 135 hold Jan, Feb, Mar, Apr, May, Jun, Jul, Aug only once",
    ):
        run_job(load_config(job, ["target.lead=135"]), echo=lambda *a: None)
    assert tree(tmp_path) == before


def test_anomaly_months_need_two_samples_each():
    from dcfa.batch.inputs import check_anomaly_months

    def field(times):
        return xr.DataArray(np.zeros(len(times)), dims="time", coords={"time": times})

    check_anomaly_months(field(pd.date_range("2000-01-01", periods=24, freq="MS")), "time", 0)
    with pytest.raises(ValueError, match=r"hold Dec only once.*anomalies = false$"):
        check_anomaly_months(field(pd.date_range("2000-01-01", periods=23, freq="MS")), "time", 0)
    # daily samples: a month of them is a climatology of 31 values
    check_anomaly_months(field(pd.date_range("2000-01-01", periods=31, freq="D")), "time", 0)


def test_a_lead_beyond_the_record_names_the_key(tmp_path):
    job, _, _ = write_forecast_job(tmp_path)
    # lead counts steps of the dates (months), not samples: the message says so
    beyond = r"target.lead = 200 \(time steps of the dates\) leaves at most 0"
    with pytest.raises(ValueError, match=beyond):
        run_job(load_config(job, ["target.lead=200"]), echo=lambda *a: None)
    assert not (tmp_path / "out.zarr").exists()


def test_months_left_out_of_the_target_file_keep_their_own_predictors(tmp_path, scheduler):
    """The target file leaves out two months (absent rows, not empty values): only the
    predictors whose target 2 months later is absent are dropped. The predictors of the
    absent months themselves were dropped too, as if the target paired with its own dates."""
    job, _, _ = write_forecast_job(tmp_path)
    target = pd.read_csv(tmp_path / "y.csv")
    absent = [20, 41]
    target.drop(index=absent).to_csv(tmp_path / "y.csv", index=False)
    lines = []
    run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    ds = xr.open_zarr(tmp_path / "out.zarr")
    start, lead = 3, 2  # windows [1, 3] and lags [0, 1] need 3 earlier months
    times = pd.date_range("2000-01-01", periods=N, freq="MS")
    kept = [t for t in range(start, N - lead) if t + lead not in absent]
    assert all(t in kept for t in absent)  # the absent months' own predictors stay
    np.testing.assert_array_equal(ds.time.values, times[kept].values)
    said = (
        f"2 predictors dropped at gaps: no target 2 months later (first "
        f"{times[absent[0] - lead]:%Y-%m-%d})"
    )
    assert any(said in line for line in lines), lines


def _daily_job(tmp_path) -> list[str]:
    """Two years of a daily 3 x 4 field with a seasonal cycle and a target read off one
    cell's anomalies; the keys that point write_job's job at them."""
    days = pd.date_range("2000-01-01", periods=730, freq="D")
    rng = np.random.default_rng(0)
    season = 10.0 * np.sin(2 * np.pi * days.day_of_year.to_numpy() / 365.25)
    sst = season[:, None, None] + rng.normal(size=(days.size, 3, 4))
    coords = {"time": days, "lat": [0.0, 2.0, 4.0], "lon": [0.0, 2.0, 4.0, 6.0]}
    field = xr.Dataset({"sst": (("time", "lat", "lon"), sst, {"units": "K"})}, coords=coords)
    field.chunk({"time": 365}).to_zarr(tmp_path / "daily.zarr", consolidated=False)
    y = sst[:, 1, 1] - season + rng.normal(size=days.size)
    pd.DataFrame({"time": days, "y": y}).to_csv(tmp_path / "daily.csv", index=False)
    return [
        f"input.store={tmp_path / 'daily.zarr'}",
        f"target.path={tmp_path / 'daily.csv'}",
        "target.variable=y",
        "target.match=exact",
    ]


def test_monthly_anomalies_of_daily_samples_are_named_in_a_warning_line(tmp_path, scheduler):
    """A daily archive with input.anomalies = true kept each month's seasonal ramp in its
    anomalies (a walkthrough's daily field: -1.27 on 1 Jan to +1.18 on 31 Jan) without a
    word."""
    job, daily = write_job(tmp_path), _daily_job(tmp_path)
    found = {}
    for anomalies in ("true", "false"):
        lines = []
        keys = [*daily, f"input.anomalies={anomalies}", "output.overwrite=true"]
        run_job(load_config(job, keys), scheduler=scheduler, echo=lines.append)
        found[anomalies] = [line for line in lines if "warning: input.anomalies" in line]
    (warned,) = found["true"]
    assert "on 31 samples a month: a monthly climatology leaves the seasonal cycle" in warned
    assert "set input.anomalies = false" in warned and found["false"] == []


def test_a_daily_lead_is_named_in_days_by_inspect_and_apply(tmp_path, scheduler):
    """A daily job's target.lead = 14 read "lead 14" in dcfa inspect and in an applied
    output's attrs, which a reader of monthly results takes for 14 months."""
    job, daily = write_job(tmp_path), _daily_job(tmp_path)
    keys = [*daily, "input.anomalies=false", "target.lead=14", "output.overwrite=true"]
    run_job(load_config(job, keys), scheduler=scheduler, echo=lambda line: None)
    result = tmp_path / "result.zarr"
    assert xr.open_zarr(result).attrs["lead_step"] == "day"
    proc = cli("inspect", str(result), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "  lead 14 days (target.lead)" in proc.stdout
    out = tmp_path / "applied.zarr"
    proc = cli(
        "apply", str(result), str(tmp_path / "daily.zarr"), "--output", str(out), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "; lead 14 days: for the target at t + 14 days" in proc.stdout
    applied = xr.open_zarr(out)
    assert (applied.attrs["lead"], applied.attrs["lead_step"]) == (14, "day")
    days = (applied.forecast.target_time - applied.time).values
    assert (days == np.timedelta64(14, "D")).all()
    proc = cli("inspect", str(out), cwd=tmp_path)
    assert "  lead 14 days: for the target at t + 14 days" in proc.stdout
    assert re.search(r"  coord target_time: \S+ \.\. \S+ \(\d+\)", proc.stdout), proc.stdout


@pytest.mark.parametrize("lead, windows, lags", [(2, [1, 3], [0, 1]), (3, [1], [0]), (0, [6], [2])])
def test_the_default_purge_leaves_no_month_shared_with_a_test_block(tmp_path, lead, windows, lags):
    """A job at a lead whose method purges its folds (RegionsCV's ``gap``) ran them with
    ``gap = 0``: a training sample next to a test block shared months with it. The job now
    sets the purge the file leaves out; checked against the months each sample spans."""
    from dcfa.batch.method import purged
    from dcfa.skill import blocked_folds

    job = write_job(tmp_path, method__name="regionscv", method__params={})
    config = load_config(job, [f"target.lead={lead}", f"input.windows={windows}",
                               f"input.lags={lags}"])  # fmt: skip
    config, gap = purged(config)
    assert config.method["params"]["gap"] == gap

    def months(t):  # what sample t is made of: its predictors' months and its target's
        return set(range(t - max(lags) - max(windows) + 1, t + lead + 1))

    def shared(g):
        return any(
            months(int(a)) & months(int(b))
            for train, test in blocked_folds(60, 5, g)
            for a in train
            for b in test
        )

    assert not shared(gap) and shared(gap - 1)  # the shortest purge that shares no month
    # a gap the file sets is kept; a method without folds takes none
    config, _ = purged(load_config(job, ["method.params.gap=1", f"target.lead={lead}"]))
    assert config.method["params"]["gap"] == 1
    assert purged(load_config(job, [f"target.lead={lead}", "method.name=lincfa"]))[1] is None


def test_the_job_says_the_purge_it_sets(tmp_path, scheduler):
    job, _, _ = write_forecast_job(tmp_path)
    lines = []
    config = load_config(job, ["method.name=regionscv", "method.params={}", "gbmap.n_boosts=2"])
    run_job(config, scheduler=scheduler, echo=lines.append)
    (said,) = [s for s in lines if "method.params.gap" in s]
    assert said.strip().startswith("method.params.gap = 5 (not set: target.lead + ")
    # GBMAP's check against the linear models is purged alike (it was by the lead alone)
    (check,) = [s for s in lines if "GBMAP forward-CV" in s]
    assert ", gap 5)" in check, check
    params = json.loads(xr.open_zarr(tmp_path / "out.zarr").attrs["parameters"])
    assert params["gap"] == 5  # lead 2 + lag 1 + window 3 - 1
    lines = []
    config = load_config(job, ["method.name=regionscv", "method.params={gap = 2}",
                               "output.overwrite=true"])  # fmt: skip
    run_job(config, scheduler=scheduler, echo=lines.append)
    assert not any("method.params.gap" in s for s in lines)
    assert json.loads(xr.open_zarr(tmp_path / "out.zarr").attrs["parameters"])["gap"] == 2


def test_a_lead_too_long_for_the_purge_the_job_set_names_the_lead(tmp_path):
    """With ``method.params.gap`` unset, the job purges ``target.lead`` months; a lead too long
    for the folds at that purge was refused naming ``method.params.gap``, a key the file
    does not hold."""
    job = write_job(tmp_path, method__name="regionscv", method__params={})
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "target.lead=60", cwd=tmp_path)
    fails(
        proc,
        2,
        "dcfa: error: target.lead: 60 sets method.params.gap = 60 (not in the file: target.lead "
        "+ max(input.lags) + max(input.windows) - 1); 60 samples on each side of a test block "
        "leave",
        "(the input and the target have 83 samples in common at target.lead = 60: a shorter "
        "lead leaves more)",
    )
    assert "method.params.gap:" not in proc.stderr
    assert "cluster:" not in proc.stdout and "[2/5]" not in proc.stdout
    assert tree(tmp_path) == before

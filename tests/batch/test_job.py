"""The batch job: config checks, a real run against an in-memory computation, resume, and
bad input through the real command line (exit 2, a message naming the key, nothing written)."""

from __future__ import annotations

import json
import os
import re
import warnings

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, fails, tree, write_job

import dcfa
from dcfa.batch.config import ConfigError, load_config
from dcfa.batch.job import run_job
from dcfa.stats.kinds import load_moments

pytestmark = pytest.mark.slow


def test_config_errors_name_the_key(tmp_path):
    good = {
        "input": {"store": "a", "variables": ["v"]},
        "target": {"path": "t"},
        "output": {"store": "o"},
    }
    assert load_config(base=good).method["name"] == "regionscv"  # the recommended call
    cases = [
        ({**good, "inputs": {}}, "unknown section"),
        ({**good, "input": {"store": "a"}}, "missing required key input.variables"),
        ({**good, "input": {"store": "a", "variables": "v"}}, "input.variables must be a list"),
        (
            {**good, "input": {"store": "a", "variables": ["v", "w", "v"]}},
            r"input\.variables names \['v'\] more than once$",
        ),
        ({**good, "method": {"name": "pca"}}, "method.name must be one of"),
        (
            {**good, "output": {"store": "o", "ovewrite": True}},
            r"unknown key\(s\) \['output.ovewrite'\]",
        ),
        ({**good, "cluster": {"kind": "k8s"}}, "cluster.kind must be one of"),
        ({**good, "target": {"path": "t", "match": "year"}}, "target.match"),
    ]
    for raw, match in cases:
        with pytest.raises(ConfigError, match=match):
            load_config(base=raw)
    c = load_config(
        base=good,
        overrides=[
            "method.params.neighbors=2",
            "input.anomalies=true",
            "output.store=elsewhere.zarr",
        ],
    )
    assert c.method["params"] == {"neighbors": 2} and c.input["anomalies"] is True
    assert c.output["store"] == os.path.join(os.getcwd(), "elsewhere.zarr")  # --set: cwd
    with pytest.raises(ConfigError, match="--set: expected section.key=value"):
        load_config(base=good, overrides=["neighbors"])
    # a typo on the command line is named there, not in the file
    with pytest.raises(ConfigError, match=r"^--set target.leed: unknown key target.leed; \["):
        load_config(base=good, overrides=["target.leed=3"])
    with pytest.raises(ConfigError, match=r"^--set tagret.lead: unknown section 'tagret'"):
        load_config(base=good, overrides=["tagret.lead=3"])
    # [gbmap] holds GBMAP's parameters, checked with the estimator's
    assert load_config(base=good, overrides=["gbmap.n_boosts=4"]).gbmap == {"n_boosts": 4}
    (tmp_path / "bad.toml").write_text("[input\nstore=")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(tmp_path / "bad.toml")


def test_job_matches_the_in_memory_computation(tmp_path, scheduler):
    job = write_job(tmp_path)
    out = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    result = xr.open_zarr(out, consolidated=False)
    # the same steps in memory, with NumPy
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    x = ds.sst.astype("float64")
    anomalies = (x.groupby("time.month") - x.groupby("time.month").mean()).values
    soi = pd.read_csv(tmp_path / "soi.csv")["soi"].to_numpy()[7:127]
    has_data = ~np.isnan(anomalies).all(axis=0).ravel()
    cells = anomalies.reshape(120, -1)[:, has_data]
    from dcfa.neighbors import grid_adjacency

    A = grid_adjacency((5, 8), 1)[has_data][:, has_data]
    model = dcfa.LinCFA(random_state=0, neighbors=A).fit(cells, soi)
    region = np.full(40, -1.0)
    region[has_data] = model.labels_
    np.testing.assert_array_equal(np.nan_to_num(result.region.values.ravel(), nan=-1.0), region)
    np.testing.assert_allclose(result.features.values, model.transform(cells), atol=1e-5)
    assert result.attrs["n_samples_used"] == 120 and result.attrs["method"] == "LinCFA"
    # LinCFA's aggregates are of standardised cells (the archive's sst is in K)
    assert result.features.attrs["units"] == "1" and set(result.group_units.values) == {"1"}
    assert not (tmp_path / "result.zarr.work").exists()
    corr = result.group_target_corr.values
    g = int(np.nanargmax(np.abs(corr)))
    members = np.flatnonzero(region == g)
    assert abs(corr[g]) > 0.8 and set(members) & {10, 11, 12, 18, 19, 20}


def test_resume_reuses_finished_passes(tmp_path, scheduler):
    job = write_job(tmp_path)
    config = load_config(job)
    lines = []

    def die_after_moments(line):
        lines.append(line)
        if line.startswith("[3/5]"):
            raise KeyboardInterrupt  # the job is killed once the moments are on disk

    with pytest.raises(KeyboardInterrupt):
        run_job(config, scheduler=scheduler, echo=die_after_moments)
    work = tmp_path / "result.zarr.work"
    assert (work / "moments").exists() and not (tmp_path / "result.zarr").exists()
    resumed = []
    out = run_job(config, resume=True, scheduler=scheduler, echo=resumed.append)
    assert any("reused from the interrupted run" in s for s in resumed if s.startswith("[2/5]"))
    assert any("moments reused" in s for s in resumed)
    straight = run_job(
        config, output=str(tmp_path / "straight.zarr"), scheduler=scheduler, echo=lambda *a: None
    )
    a = xr.open_zarr(out, consolidated=False)
    b = xr.open_zarr(straight, consolidated=False)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.features.values, b.features.values)
    # a changed configuration refuses to resume someone else's work
    other = str(tmp_path / "other.zarr")
    with pytest.raises(KeyboardInterrupt):
        run_job(config, output=other, scheduler=scheduler, echo=die_after_moments)
    changed = load_config(job, ["input.anomalies=false"])
    with pytest.raises(ConfigError, match="--resume: cannot reuse the work in .* configuration"):
        run_job(changed, output=other, resume=True, scheduler=scheduler, echo=lambda *a: None)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(input__store="nowhere.zarr"), "input.store: no Zarr store at"),
        (dict(input__variables=["slp"]), r"input.variables: \['slp'\] not in"),
        (dict(target__path="nothing.csv"), "target.path: no such file"),
        (dict(target__variable="nino"), "target.variable: 'nino' not in"),
        (dict(target__match="exact"), "are not on the input's stamps .* target.match = 'month'"),
        (dict(input__sample_dim="step"), "without the sample dim 'step'"),
        (
            dict(method__params={"neighbours": 1}),
            r"method.params: unknown or reserved parameter\(s\) \['neighbours'\]",
        ),
        (dict(method__params={"compare": "group"}), "method.params: The 'compare' parameter"),
        (dict(gbmap__n_boost=3), r"gbmap: unknown or reserved parameter\(s\) \['n_boost'\]"),
        (dict(gbmap__beta=-1.0), "gbmap: The 'beta' parameter"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, monkeypatch, capsys, change, message):
    """The CLI's own entry point, in this process (the process boundary is tested below)."""
    import re

    from dcfa.cli import main

    job = write_job(tmp_path, **change)
    before = set(tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    assert main(["fit", str(job), "-q"]) == 2
    err = capsys.readouterr().err
    assert "dcfa: error:" in err and re.search(message, err), err
    assert set(tmp_path.iterdir()) == before


def test_unreadable_config_and_existing_output_exit_2(tmp_path):
    (tmp_path / "job.toml").write_text("[input]\nstore = ")
    proc = cli("fit", "job.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr
    proc = cli("fit", "missing.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "config: no such file 'missing.toml'" in proc.stderr
    job = write_job(tmp_path)
    (tmp_path / "result.zarr").mkdir()
    proc = cli("fit", str(job), cwd=tmp_path)
    assert proc.returncode == 2 and "output.store" in proc.stderr and "exists" in proc.stderr


def test_cli_fit_and_inspect(tmp_path):
    job = write_job(tmp_path)
    proc = cli(
        "fit",
        str(job),
        "--set",
        "method.name=genlincfa",
        "--set",
        "method.params={eps=0.8}",
        "--set",
        "gbmap.n_boosts=2",
        "--set",
        "gbmap.random_state=0",
        "--output",
        "g.zarr",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[5/5]" in proc.stdout and "% done" in proc.stdout
    assert "GBMAP: 2 learners" in proc.stdout
    result = xr.open_zarr(tmp_path / "g.zarr")
    assert result.attrs["method"] == "GenLinCFA"
    assert result.embedding.dims == ("time", "boost") and result.embedding.shape == (120, 2)
    assert result.gbmap_coef.shape == (2, result.sizes["group"])
    np.testing.assert_array_equal(result["boost"].values, [1, 2])  # f_1, f_2
    assert np.isfinite(result.embedding.values).all()
    assert "groups most correlated with the target (95 % interval, autocorrelation):" in (
        proc.stdout
    )
    shown = re.findall(r"corr ([+-]\d\.\d\d) \[([+-]\d\.\d\d), ([+-]\d\.\d\d)\]", proc.stdout)
    assert shown and all(float(lo) <= float(r) <= float(hi) for r, lo, hi in shown)
    proc = cli("inspect", "g.zarr", cwd=tmp_path)
    assert proc.returncode == 0 and "result of GenLinCFA" in proc.stdout
    assert "groups most correlated with the target (95 % interval" in proc.stdout
    listed = min(5, int(result.sizes["group"]))
    assert len(re.findall(r"corr [+-]\d\.\d\d \[", proc.stdout)) == listed
    more = int(result.sizes["group"]) - listed
    # the groups not listed are counted, not left out silently
    assert (f"  ... and {more} more (all in the result)" in proc.stdout) == (more > 0)
    proc = cli("inspect", str(tmp_path / "sst.zarr"), cwd=tmp_path)
    assert proc.returncode == 0 and "sst('time', 'lat', 'lon')" in proc.stdout


def test_a_map_of_one_group_is_counted_in_the_singular(tmp_path, scheduler):
    job = write_job(tmp_path)
    proc = cli("fit", str(job), "--set", "method.name=genlincfa", "--set",
               "method.params={eps=1.0}", "--scheduler", scheduler, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert xr.open_zarr(tmp_path / "result.zarr").sizes["group"] == 1
    assert "-> 1 group (0 excluded)" in proc.stdout and ": 1 group; " in proc.stdout
    assert "37 features -> 1 group (0 excluded)" in proc.stderr
    assert " 1 groups" not in proc.stdout + proc.stderr
    proc = cli("inspect", "result.zarr", cwd=tmp_path)
    assert proc.returncode == 0 and "  1 group over 37 cells" in proc.stdout


def test_job_in_neighbour_mode_matches_full_mode(tmp_path, scheduler):
    """mode = "grid" reads the grid itself and gives the dense execution's regions."""
    job = write_job(
        tmp_path, method__params={"random_state": 0, "neighbors": 1, "neighborhood": "seed"}
    )
    full = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    near = run_job(
        load_config(job, ["method.params.mode=neighbors"]),
        output=str(tmp_path / "near.zarr"),
        scheduler=scheduler,
        echo=lambda *a: None,
    )
    a, b = xr.open_zarr(full), xr.open_zarr(near)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.features.values, b.features.values, atol=1e-5)
    np.testing.assert_allclose(a.group_target_corr.values, b.group_target_corr.values, atol=1e-5)
    assert type(load_moments(near / "moments")).__name__ == "GridMoments"


@pytest.mark.parametrize(
    "method, params",
    [("genlincfa", {"eps": 0.7, "neighbors": 1}), ("nonlincfa", {"eps": 1e-2, "neighbors": 1})],
)
def test_job_runs_the_series_when_the_matrix_does_not_fit(tmp_path, method, params, scheduler):
    """A budget too small for the dense pass: the job says it runs the series execution and
    writes the dense job's regions."""
    job = write_job(tmp_path, method__name=method, method__params=params)
    full = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    lines = []
    # 120 months x 40 cells: the dense pass needs 46.8 KiB, the series 45.6 KiB
    with dask.config.set({"dcfa.memory_budget": "46 KiB"}):
        series = run_job(
            load_config(job),
            output=str(tmp_path / "series.zarr"),
            scheduler=scheduler,
            echo=lines.append,
        )
    assert any(line.strip() == "execution: series" for line in lines), lines
    a, b = xr.open_zarr(full), xr.open_zarr(series)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.features.values, b.features.values, atol=1e-5)
    assert type(load_moments(series / "moments")).__name__ == "ColumnMoments"
    assert (a.attrs["execution"], b.attrs["execution"]) == ("dense", "series")


def test_job_chooses_the_tolerance(tmp_path, scheduler):
    """method.name = "genlincfacv": the job records the chosen eps and its path; a genlincfa
    job with that eps writes the same regions."""
    params = {"neighbors": 1, "epsilons": [0.5, 0.7, 0.9], "n_splits": 2}
    job = write_job(tmp_path, method__name="genlincfacv", method__params=params)
    lines = []
    chosen = xr.open_zarr(run_job(load_config(job), scheduler=scheduler, echo=lines.append))
    assert any("chosen by forward CV among 0.5 (" in line for line in lines), lines
    path = json.loads(chosen.attrs["eps_path"])
    assert path["eps"] == [0.5, 0.7, 0.9] and len(path["n_groups"]) == 3
    eps = chosen.attrs["eps"]
    import tomllib

    import tomli_w

    config = tomllib.loads(job.read_text())
    config["method"] = {"name": "genlincfa", "params": {"neighbors": 1, "eps": eps}}
    config["output"]["store"] = str(tmp_path / "plain.zarr")
    (tmp_path / "plain.toml").write_text(tomli_w.dumps(config))
    plain = run_job(load_config(tmp_path / "plain.toml"), scheduler=scheduler, echo=lambda *a: None)
    np.testing.assert_array_equal(chosen.region.values, xr.open_zarr(plain).region.values)


def test_a_warning_of_pythons_categories_is_said_in_the_commands_own_words(tmp_path, scheduler):
    """dcfa's warnings point at the first line outside dcfa, which in a command is runpy's:
    a renamed mode's FutureWarning reached the user as ``<frozen runpy>:88: FutureWarning``,
    and six times over (the options are resolved for every fit and check)."""
    job = write_job(tmp_path, method__params={"random_state": 0, "neighbors": 1, "mode": "full"})
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (said,) = [s for s in proc.stderr.splitlines() if "mode='full'" in s]
    assert said.startswith("dcfa: warning: mode='full' is now mode='dense'"), said
    assert "FutureWarning" not in proc.stderr and "runpy" not in proc.stderr


def test_a_map_without_skill_is_said_in_the_commands_own_words(tmp_path, scheduler):
    """RegionsCV's warning that its map does not beat the climatology reached a job's user as
    Python's ``file:line: NoSkillWarning:`` and a line of dcfa's source."""
    job = write_job(tmp_path, method__name="regionscv", method__params={})
    noise = pd.read_csv(tmp_path / "soi.csv")
    noise["soi"] = np.random.default_rng(1).standard_normal(len(noise))
    noise.to_csv(tmp_path / "noise.csv", index=False)
    proc = cli(
        "fit", str(job), "--set", "target.path=noise.csv", "--scheduler", scheduler, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [s for s in proc.stderr.splitlines() if "climatology" in s]
    assert line.startswith("dcfa: warning: RegionsCV: no map beats the climatology")
    assert "not a map of predictors" in line
    assert "NoSkillWarning" not in proc.stderr and ".py:" not in proc.stderr
    assert (tmp_path / "result.zarr").is_dir()
    # the result says so afterwards too: in the job's summary and in `dcfa inspect`, which a
    # user reads long after the warning has scrolled away
    folds = json.loads(xr.open_zarr(tmp_path / "result.zarr").attrs["cv_r2"])
    se = np.std(folds, ddof=1) / np.sqrt(len(folds))
    score = f"mean CV R^2 {np.mean(folds):+.3f} (standard error {se:.3f}"
    (summary,) = [s for s in proc.stdout.splitlines() if "NO SKILL" in s]
    assert summary.strip().startswith(f"NO SKILL: the chosen map's {score} over 5 folds")
    shown = cli("inspect", "result.zarr", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    (said,) = [s for s in shown.stdout.splitlines() if "NO SKILL" in s]
    assert said.strip() == summary.strip()
    assert "not predictors of the target" in said
    # and a forecast from it is said to be none
    before = sorted(p.name for p in tmp_path.iterdir())
    applied = cli("apply", "result.zarr", "sst.zarr", "--output", "out.zarr", cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    (warned,) = [s for s in applied.stderr.splitlines() if "NO SKILL" in s]
    assert warned.startswith(f"dcfa: warning: RESULT: NO SKILL: the chosen map's {score}")
    assert warned.endswith("and forecast predict the target no better than the climatology")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "out.zarr"])


def test_a_skilful_map_says_its_cv_skill_in_the_summary_and_inspect(tmp_path, scheduler):
    """The chosen map's skill in the selection's folds, beside its groups, and that it is
    optimistic (a pure-noise target's map scored +0.034, standard error 0.023, there, while
    forward_cv gave -0.062): where to get one that is not."""
    job = write_job(tmp_path, method__name="regionscv", method__params={})
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folds = json.loads(xr.open_zarr(tmp_path / "result.zarr").attrs["cv_r2"])
    assert len(folds) == 5 and np.mean(folds) > np.std(folds, ddof=1) / np.sqrt(5)
    line = (
        f"skill of the chosen map: mean CV R^2 {np.mean(folds):+.3f} (standard error "
        f"{np.std(folds, ddof=1) / np.sqrt(5):.3f} over 5 folds of the selection); optimistic, "
        "as the map was chosen on these folds: dcfa.forward_cv scores the whole fit on months "
        "it did not see"
    )
    assert line in proc.stdout and "NO SKILL" not in proc.stdout
    shown = cli("inspect", "result.zarr", cwd=tmp_path)
    assert shown.returncode == 0 and line in shown.stdout


@pytest.mark.parametrize(
    "method, remedy",
    [
        ("lincfa", 'method.params.missing = "pairwise" keeps them'),
        ("regionscv", "(regionscv needs every month of a cell): fill them"),
    ],
)
def test_a_cell_missing_a_month_is_named_with_the_methods_own_remedy(
    tmp_path, client, method, remedy
):
    """RegionsCV takes no ``missing``: its line pointed to a parameter it refuses."""
    params = {"random_state": 0, "neighbors": 1} if method == "lincfa" else {}
    job = write_job(tmp_path, method__name=method, method__params=params)
    with dask.config.set(scheduler="synchronous"):
        ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load()
    ds["sst"][5, 1, 1] = np.nan  # a sea cell
    (tmp_path / "gappy").mkdir()
    ds.drop_encoding().to_zarr(tmp_path / "gappy" / "sst.zarr", zarr_format=3, consolidated=False)
    lines = []
    config = load_config(job, [f"input.store={tmp_path / 'gappy' / 'sst.zarr'}"])
    run_job(config, scheduler=client.scheduler.address, echo=lines.append)
    (line,) = [s for s in lines if "of the excluded cells miss some months" in s]
    assert line.strip().startswith("1 of the excluded cells") and remedy in line, line


def test_the_passes_graphs_refer_to_the_climatology_held_on_the_workers(tmp_path, scheduler):
    """The climatology and spread go to the workers once; each pass's graph refers to them.
    Here (4 500 cells, two windows and two lags) they are 1.9 MB. Embedded in the graphs, the
    moments and features passes each sent more than 1 MB through the scheduler: at a quarter
    degree, ~450 MB a pass, which distributed warns of ("Sending large graph")."""
    from support import write_wide_job

    job = write_wide_job(tmp_path)
    with (
        dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        out = run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert not large, large
    assert xr.open_zarr(out)["climatology"].nbytes > 1.5e6  # what they would have carried


def test_more_patches_than_max_groups_are_said_in_the_jobs_terms(tmp_path, scheduler):
    """Each window and lag is a block of its own, so 2 windows x 2 lags of one connected sea
    make 4 patches. RegionsCV's warning said to leave small patches out with
    ``X.where(dcfa.patch_sizes(X) >= n)``, Python a job's user cannot run; the job says it
    with its own keys."""
    job = write_job(
        tmp_path,
        input__windows=[1, 3],
        input__lags=[0, 1],
        method__name="regionscv",
        method__params={"max_groups": 2, "n_splits": 3},
    )
    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_job(load_config(job), scheduler=scheduler, echo=lines.append)
    assert not [w for w in caught if issubclass(w.category, dcfa.PatchesWarning)]
    note = [line for line in lines if "separate patches" in line]
    assert note == [
        "      note: the cells form 4 separate patches in 4 blocks (variables x windows x "
        "lags), more than method.params.max_groups = 2; no region spans two, so the map has a "
        "region for each. A box of the grid (input.select) or fewer windows and lags makes "
        "fewer"
    ], note
    assert xr.open_zarr(out).sizes["group"] >= 4


def test_a_constant_target_is_refused_before_any_pass(tmp_path):
    """A target of one value exited 2 after the passes, naming ``y``, and kept its work
    directory with advice to resume that no fix could use: refused before any pass now,
    naming the file and the keys, and nothing is written."""
    job = write_job(tmp_path)
    soi = pd.read_csv(tmp_path / "soi.csv")
    soi["soi"] = 1.0
    soi.to_csv(tmp_path / "soi.csv", index=False)
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(
        proc,
        2,
        f"target: {tmp_path / 'soi.csv'} (soi) is 1 in all 120 samples in common with the "
        "input: there is nothing to predict; give another target.path or target.variable",
    )
    assert "[1/5]" not in proc.stdout and tree(tmp_path) == before

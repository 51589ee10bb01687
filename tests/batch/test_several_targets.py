"""Several targets in one job: ``target.variable`` a list, one map per target, the archive read
once for all of them. It said ``target.variable must be a string``: one job per target, each
reading the whole archive again."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import cli, fails, tree, write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job

pytestmark = pytest.mark.slow


def _two_targets(tmp_path, **changes):
    """The job's archive and target file, with a second index, ``east``, driven by other
    cells than ``soi``; the job fits both."""
    job = write_job(tmp_path, **changes)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False)
    anomalies = ds.sst.groupby("time.month") - ds.sst.groupby("time.month").mean()
    driver = anomalies.isel(lat=slice(2, 5), lon=slice(5, 8)).mean(["lat", "lon"]).values
    table = pd.read_csv(tmp_path / "soi.csv")
    rng = np.random.default_rng(11)
    east = rng.normal(size=len(table))
    east[7:127] = driver + 0.3 * rng.normal(size=120)
    table["east"] = east
    table.to_csv(tmp_path / "soi.csv", index=False)
    return job


class _ChunkReads:
    """Counts the archive's chunk reads (zarr's LocalStore.get of keys under sst/c/) made in
    this process: the workers of an in-process cluster are threads of it."""

    def __init__(self, monkeypatch):
        import zarr.storage

        self.n = 0
        get = zarr.storage.LocalStore.get

        async def counted(store, key, *args, **kwargs):
            if "/sst.zarr" in str(store.root) and key.startswith("sst/c/"):
                self.n += 1
            return await get(store, key, *args, **kwargs)

        monkeypatch.setattr(zarr.storage.LocalStore, "get", counted)


def test_one_job_two_targets_reads_the_archive_once(tmp_path, monkeypatch):
    from distributed import LocalCluster

    params = {"neighbors": 1, "random_state": 0}
    job = _two_targets(tmp_path, method__params=params)
    reads = _ChunkReads(monkeypatch)
    lines = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        address = cluster.scheduler_address
        alone = {}
        for name in ("soi", "east"):
            config = load_config(job, [f"target.variable={name}"])
            before = reads.n
            alone[name] = run_job(
                config, scheduler=address, output=str(tmp_path / f"{name}.zarr"), echo=str
            )
            alone[name + " reads"] = reads.n - before
        both = str(tmp_path / "both-{target}.zarr")
        config = load_config(job, ['target.variable=["soi", "east"]'], output=both)
        inputs = tree(tmp_path)
        before = reads.n
        outs = run_job(config, scheduler=address, echo=lines.append)
        both_reads = reads.n - before
    assert outs == [tmp_path / "both-soi.zarr", tmp_path / "both-east.zarr"]
    assert alone["soi reads"] > 0 and alone["east reads"] == alone["soi reads"]
    assert both_reads == alone["soi reads"]  # not one read per target
    for name, out in zip(("soi", "east"), outs, strict=True):
        a, b = xr.open_zarr(alone[name]), xr.open_zarr(out)
        xr.testing.assert_identical(a.region, b.region)
        xr.testing.assert_allclose(a.features, b.features, rtol=1e-6)
        assert b.attrs["n_samples_used"] == a.attrs["n_samples_used"] == 120
        assert b.attrs["target_variable"] == name
    # each map is its own target's: the box that drives it is its best group
    for name, out, box in [("soi", outs[0], (1, 3, 2, 5)), ("east", outs[1], (2, 5, 5, 8))]:
        r = xr.open_zarr(out)
        best = int(np.nanargmax(np.abs(r.group_target_corr.values)))
        cells = r.region.isel(lat=slice(box[0], box[1]), lon=slice(box[2], box[3]))
        assert (cells == best).any(), name
    text = "\n".join(lines)
    assert "read once and held on the workers for every target" in text
    assert "target 1/2: soi" in text and "target 2/2: east" in text and "(east)" in text
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in inputs} == inputs  # inputs untouched


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('target.variable=["soi", "east"]', "output.store must hold {target} when"),
        ('target.variable=["soi", "soi"]', "target.variable names a target twice"),
        ("target.variable=[]", "target.variable must be a name or a non-empty list"),
        ("target.lead=[1, 3]", "output.store must hold {lead} when target.lead names 2 leads"),
        ("target.lead=[3, 3]", "target.lead names a lead twice: [3, 3]"),
        ("target.lead=[]", "target.lead must be an int >= 0 (steps of the dates) or a non-empty"),
        ("target.lead=[1, -1]", "got [1, -1] (given by --set target.lead=[1, -1])"),
    ],
)
def test_several_targets_or_leads_need_an_output_each(tmp_path, override, message):
    job = _two_targets(tmp_path)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", override, cwd=tmp_path)
    fails(proc, 2, message)
    assert tree(tmp_path) == before
    if message.startswith("output.store"):  # run_job's own output, in Python, checked too
        field = "{lead}" if "lead" in override else "{target}"
        config = load_config(job, [override], output=str(tmp_path / f"r-{field}.zarr"))
        with pytest.raises(ValueError, match=f"output.store must hold {field}"):
            run_job(config, output=str(tmp_path / "plain.zarr"))
        assert tree(tmp_path) == before


def test_a_target_missing_from_the_file_is_named_before_any_pass(tmp_path):
    job = _two_targets(tmp_path)
    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", 'target.variable=["soi", "nino"]',
        "--output", "r-{target}.zarr", cwd=tmp_path,
    )  # fmt: skip
    fails(proc, 2, "nino")
    assert tree(tmp_path) == before


def test_resume_keeps_the_targets_written_and_continues_the_next(tmp_path, scheduler):
    """Stopped in its second target, the job rerun with --resume keeps the first target's
    result (it records this job's identity) and resumes the second from its passes."""
    job = _two_targets(tmp_path, target__variable=["soi", "east"], output__store="r-{target}.zarr")
    config = load_config(job)
    seen = []

    def echo(line):
        seen.append(line)
        if line.startswith("[4/5]") and sum(s.startswith("[4/5]") for s in seen) == 2:
            raise KeyboardInterrupt  # killed while writing the second target's result

    with pytest.raises(KeyboardInterrupt):
        run_job(config, scheduler=scheduler, echo=echo)
    first = tree(tmp_path / "r-soi.zarr")
    assert (tmp_path / "r-east.zarr.work").is_dir() and not (tmp_path / "r-east.zarr").exists()
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "r-soi.zarr was written by this job's earlier run: kept" in proc.stdout
    assert "reused from the interrupted run" in proc.stdout
    assert tree(tmp_path / "r-soi.zarr") == first  # kept as it was
    assert xr.open_zarr(tmp_path / "r-east.zarr").attrs["target_variable"] == "east"

    # a result of other inputs in a target's place is not this job's: refused, not kept
    proc = cli("fit", str(job), "--set", "target.lead=1", "--output", "x-{target}.zarr",
               "--scheduler", scheduler, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "x-east.zarr").rename(tmp_path / "gone.zarr")
    (tmp_path / "r-east.zarr").rename(tmp_path / "r-east.old")
    (tmp_path / "x-soi.zarr").rename(tmp_path / "r-soi.zarr.lead1")
    shutil.rmtree(tmp_path / "r-soi.zarr")
    (tmp_path / "r-soi.zarr.lead1").rename(tmp_path / "r-soi.zarr")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "r-soi.zarr", "was not written by this job with these inputs")
    assert tree(tmp_path) == before


def test_a_failure_in_a_later_target_names_the_results_written(tmp_path, scheduler):
    """The note on an error in the second target listed the first's result as Python's
    ``[PosixPath('...')]``: it names the path."""
    job = _two_targets(tmp_path, target__variable=["soi", "east"], output__store="r-{target}.zarr")
    seen = []

    def echo(line):
        seen.append(line)
        if line.startswith("[4/5]") and sum(s.startswith("[4/5]") for s in seen) == 2:
            raise RuntimeError("stopped in the second target")

    with pytest.raises(RuntimeError) as caught:
        run_job(load_config(job), scheduler=scheduler, echo=echo)
    assert caught.value.__notes__[0] == (
        f"the results of the targets before it are written: {tmp_path / 'r-soi.zarr'}"
    )


def test_targets_on_the_same_months_share_regionscvs_pieces(tmp_path, monkeypatch):
    """RegionsCV's pieces depend on the field alone: the targets of a job on the same months
    (the same cells) make them once, and each map equals the one a job of its own makes; a
    target on other months makes its own."""
    from distributed import LocalCluster

    from dcfa.cfa import regions

    job = _two_targets(tmp_path, method__name="regionscv", method__params={})
    table = pd.read_csv(tmp_path / "soi.csv")
    late = table["east"].to_numpy().copy()
    late[:30] = np.nan  # 23 fewer months in common with the archive: other cells
    table["late"] = late
    table.to_csv(tmp_path / "soi.csv", index=False)
    made = []
    real = regions.first_stage

    def counted(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(regions, "first_stage", counted)
    inputs = tree(tmp_path)
    lines = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        address = cluster.scheduler_address
        config = load_config(job, ["target.variable=east"])
        alone = run_job(config, scheduler=address, output=str(tmp_path / "east.zarr"), echo=str)
        assert len(made) == 1
        config = load_config(
            job,
            ['target.variable=["soi", "east", "late"]'],
            output=str(tmp_path / "{target}3.zarr"),
        )
        outs = run_job(config, scheduler=address, echo=lines.append)
    assert len(made) == 1 + 2  # soi and east together, late alone
    text = "\n".join(lines)
    assert "one first stage for targets soi, east (the same cells)" in text
    assert "fitted with target soi's first stage (the same cells)" in text
    assert "first stage" not in text.split("target 3/3: late")[1]
    a, b = xr.open_zarr(alone), xr.open_zarr(outs[1])
    xr.testing.assert_identical(a.region, b.region)
    xr.testing.assert_identical(a.stability, b.stability)
    xr.testing.assert_allclose(a.features, b.features, rtol=1e-6)
    assert a.attrs["cv_path"] == b.attrs["cv_path"]
    assert xr.open_zarr(outs[2]).attrs["n_samples_used"] == 97
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in inputs} == inputs  # inputs untouched


def test_one_job_several_leads_gives_each_leads_result_from_one_read(tmp_path, monkeypatch):
    """``target.lead = [1, 3]``: a result per lead, each the one a job at that lead alone
    writes, from one read of the archive. A forecaster wanting leads 0-6 ran seven jobs, each
    reading the whole archive again."""
    from distributed import LocalCluster

    from dcfa.batch.results import load_result

    job = write_job(tmp_path, method__name="regionscv", method__params={})
    reads = _ChunkReads(monkeypatch)
    lines = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        address = cluster.scheduler_address
        alone = load_config(job, ["target.lead=3"], output=str(tmp_path / "alone.zarr"))
        before = reads.n
        alone = run_job(alone, scheduler=address, echo=str)
        alone_reads = reads.n - before
        inputs = tree(tmp_path)
        config = load_config(job, ["target.lead=[1, 3]"], output=str(tmp_path / "r{lead}.zarr"))
        before = reads.n
        outs = run_job(config, scheduler=address, echo=lines.append)
        both_reads = reads.n - before
    assert outs == [tmp_path / "r1.zarr", tmp_path / "r3.zarr"]
    assert 0 < both_reads == alone_reads  # not one read per lead
    a, b = xr.open_zarr(alone), xr.open_zarr(outs[1])
    xr.testing.assert_identical(a.region, b.region)
    xr.testing.assert_allclose(a.features, b.features, rtol=1e-6)
    assert b.attrs["parameters"] == a.attrs["parameters"]  # gap 3, as the job alone set it
    assert [load_result(out).lead for out in outs] == [1, 3]
    text = "\n".join(lines)
    assert "target 1/2: soi at lead 1 -> " in text and "target 2/2: soi at lead 3 -> " in text
    assert "method.params.gap = 1 at lead 1, 3 at lead 3 (not set: " in text
    assert "2 results in " in text
    proc = cli("inspect", "r3.zarr", cwd=tmp_path)
    assert proc.returncode == 0 and "lead 3 months (target.lead)" in proc.stdout, proc.stdout
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in inputs} == inputs  # inputs untouched

"""The batch job's runs: reproducible runs and resumes, GBMAP work under
``--resume``, a work directory held by its run, a work directory apart from the result,
nothing left by a failure before any finished pass, and a closed stdout.

Every CLI case runs the real command line (``python -m dcfa``, a separate process) on real
Zarr stores, against a real LocalCluster, and asserts the exit code, the message and the files
on disk before and after.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support import cli, cli_after_line, fails, interrupt, tree, write_job
from terminal import dcfa_command

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.batch.results import load_result

pytestmark = pytest.mark.slow

UNSEEDED = {"neighbors": 1}  # LinCFA shuffles (shuffle=True) and no random_state is given


def _start(*args, cwd: Path, stdout=None) -> subprocess.Popen:
    return subprocess.Popen(
        dcfa_command(*args),  # SIGINT as from a terminal: the tests interrupt it
        cwd=cwd,
        stdout=stdout if stdout is not None else subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _region(path: Path) -> np.ndarray:
    return np.nan_to_num(xr.open_zarr(path).region.values, nan=-2)


def _passes(work: Path) -> dict:
    return json.loads((work / "identity.json").read_text())["passes"]


############################################################################################
# A: reproducible by default


def test_a_job_is_reproducible_by_default_and_resumes_to_the_same_partition(tmp_path, scheduler):
    job = write_job(tmp_path, method__params=UNSEEDED)
    runs = []
    for name in ("first.zarr", "second.zarr"):
        proc = cli("fit", str(job), "--output", name, "--scheduler", scheduler, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "random_state = 0 (method.params.random_state not set" in proc.stdout
        runs.append(tmp_path / name)
    np.testing.assert_array_equal(_region(runs[0]), _region(runs[1]))
    attrs = xr.open_zarr(runs[0]).attrs
    assert json.loads(attrs["parameters"]) == {"neighbors": 1, "random_state": 0}

    # resumed from the same saved moments: the same partition again
    config = load_config(job)
    interrupt(config, "[3/5]", scheduler, output=str(tmp_path / "resumed.zarr"))
    assert "moments" in _passes(tmp_path / "resumed.zarr.work")
    proc = cli("fit", str(job), "--output", "resumed.zarr", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "moments reused" in proc.stdout
    np.testing.assert_array_equal(_region(tmp_path / "resumed.zarr"), _region(runs[0]))
    assert not (tmp_path / "resumed.zarr.work").exists()

    # a random_state given is kept as given, and nothing is printed about it
    proc = cli(
        "fit",
        str(job),
        "--output",
        "seven.zarr",
        "--set",
        "method.params.random_state=7",
        "--scheduler",
        scheduler,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "random_state = 0" not in proc.stdout
    assert (
        json.loads(xr.open_zarr(tmp_path / "seven.zarr").attrs["parameters"])["random_state"] == 7
    )


@pytest.mark.parametrize("at", ["[1/5]", "[2/5]"])
def test_ctrl_c_in_a_terminal_prints_one_line_that_the_disk_bears_out(tmp_path, at):
    """Ctrl-C reaches the terminal's whole process group: the job's own LocalCluster's
    workers printed a KeyboardInterrupt traceback each (40-100 lines), and a run stopped
    before any pass said to rerun with --resume. Stopped as the cluster starts, or in the
    passes: one line, and what it says was kept is on disk."""
    job = write_job(tmp_path)
    before = tree(tmp_path)
    proc = subprocess.Popen(
        dcfa_command("fit", str(job)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    try:
        for line in proc.stdout:
            if line.startswith(at):
                break
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    said = err.strip().splitlines()[-1]  # after the run's own log lines
    work = tmp_path / "result.zarr.work"
    if "the finished passes are kept in" in said:
        assert said.endswith("result.zarr.work': rerun with --resume to continue from them")
        assert (work / "preprocessing.zarr").is_dir()
    else:
        assert said in (
            "dcfa: interrupted; before any pass: nothing was kept",
            "dcfa: interrupted; no pass had finished: nothing was kept",
        ), said
        assert tree(tmp_path) == before
    assert not (tmp_path / "result.zarr").exists()


############################################################################################
# B: GBMAP's checkpoint under --resume


def _killed_during_gbmap(
    job: Path, tmp_path: Path, scheduler: str, how: signal.Signals = signal.SIGINT
) -> Path:
    """A real run, SIGINT (or ``how``) once GBMAP has checkpointed a few learners; the work
    directory."""
    work = tmp_path / "result.zarr.work"
    proc = _start("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    checkpoint = work / "gbmap" / "gbmap_checkpoint.npz"
    _wait_for(lambda: checkpoint.exists() or proc.poll() is not None, 300, "a checkpoint")
    time.sleep(0.3)
    proc.send_signal(how)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    kept = "the finished passes are kept in '"
    resume = "result.zarr.work': rerun with --resume to continue from them"
    if how == signal.SIGINT:
        assert f"dcfa: interrupted; {kept}" in err and resume in err, err
    else:  # SLURM's walltime, scancel, kill: said as such, with the same way on
        assert f"dcfa: interrupted; {how.name} received; {kept}" in err and resume in err, err
    assert "Traceback" not in err, err
    assert {"preprocessing.zarr", "moments"} <= set(_passes(work))
    assert checkpoint.exists()
    return work


def test_sigterm_keeps_the_finished_passes_and_says_to_resume(tmp_path, scheduler):
    """SIGTERM (SLURM's walltime or scancel of the driver job, a Kubernetes pod deleted) on a
    job attached to a running scheduler: the run stops as on Ctrl-C, its finished passes kept
    and the way on said (it printed only 'interrupted; SIGTERM' when passes were kept, and
    attached to a scheduler the driver died without a word); the rerun with --resume reuses
    them."""
    job = write_job(tmp_path, method__params=UNSEEDED, gbmap__n_boosts=300)
    before = tree(tmp_path)
    work = _killed_during_gbmap(job, tmp_path, scheduler, signal.SIGTERM)
    after = tree(tmp_path)
    assert {k.split("/")[0] for k in set(after) - set(before)} == {work.name}
    assert all(after.get(k) == v for k, v in before.items())  # the inputs as they were
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "preprocessing: reused" in proc.stdout and "moments reused" in proc.stdout
    assert "GBMAPRegressor: resuming after step" in proc.stderr
    assert not work.exists() and (tmp_path / "result.zarr").is_dir()


def test_resume_after_an_interrupt_in_gbmap_reuses_the_passes_and_the_checkpoint(
    tmp_path, scheduler
):
    job = write_job(tmp_path, method__params=UNSEEDED, gbmap__n_boosts=300)
    before = tree(tmp_path)
    work = _killed_during_gbmap(job, tmp_path, scheduler)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "preprocessing: reused" in proc.stdout and "moments reused" in proc.stdout
    assert "GBMAPRegressor: resuming after step" in proc.stderr
    assert "discarded" not in proc.stdout
    # 300 learners on 9 features and 120 months: most switch off, said in one short line
    (line,) = [s for s in proc.stdout.splitlines() if "switched off" in s]
    assert re.fullmatch(
        r" +GBMAP: \d+ of 300 steps \(\d+(-\d+)?(, \d+(-\d+)?)*\) lowered the training loss "
        r"by less than 0.1 % of its first value: switched off \(see gbmap.beta, now 10, and "
        r"gbmap.n_boosts\)",
        line,
    ), line
    assert len(line) < 400, line
    assert not work.exists()
    after = tree(tmp_path)
    assert {k.split("/")[0] for k in set(after) - set(before)} == {"result.zarr"}
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert json.loads(result.attrs["gbmap"])["random_state"] == 0
    # the same as an uninterrupted run
    straight = run_job(
        load_config(job),
        output=str(tmp_path / "straight.zarr"),
        scheduler=scheduler,
        echo=lambda *a: None,
    )
    np.testing.assert_array_equal(_region(tmp_path / "result.zarr"), _region(straight))
    np.testing.assert_allclose(
        result.embedding.values, xr.open_zarr(straight).embedding.values, rtol=1e-6, atol=1e-8
    )


def _resumed_past_the_passes(job, tmp_path, scheduler, *settings):
    """``dcfa fit JOB --resume --set ...``: it succeeds reusing both finished passes; the
    process and its line about the GBMAP checkpoint."""
    sets = [a for s in settings for a in ("--set", s)]
    proc = cli("fit", str(job), "--resume", *sets, "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "preprocessing: reused" in proc.stdout and "moments reused" in proc.stdout
    line = next(s for s in proc.stdout.splitlines() if "GBMAP checkpoint" in s)
    return proc, line


def test_a_changed_gbmap_setting_under_resume_restarts_gbmap_and_keeps_the_passes(
    tmp_path, scheduler
):
    job = write_job(tmp_path, gbmap__n_boosts=300)
    work = _killed_during_gbmap(job, tmp_path, scheduler)
    proc, line = _resumed_past_the_passes(
        job, tmp_path, scheduler, "gbmap.penalty=0.01", "gbmap.n_boosts=3"
    )
    assert "discarded" in line and "gbmap.penalty: 0.1 -> 0.01" in line, line
    assert "resuming after step" not in proc.stderr
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert result.sizes["boost"] == 3
    assert json.loads(result.attrs["gbmap"])["penalty"] == 0.01
    assert not work.exists()


def test_a_checkpoint_that_does_not_match_is_discarded_not_the_passes(tmp_path, scheduler):
    """A checkpoint the recorded settings do not explain (here: its fingerprint rewritten)
    fails GBMAP's own check: it is discarded, said so, and the passes are still reused."""
    job = write_job(tmp_path, gbmap__n_boosts=300)
    work = _killed_during_gbmap(job, tmp_path, scheduler)
    checkpoint = work / "gbmap" / "gbmap_checkpoint.npz"
    with np.load(checkpoint) as f:
        stored = {k: f[k] for k in f.files}
    meta = json.loads(str(stored["meta"]))
    meta["fingerprint"]["tol"] = 0.5  # as if another fit had written it
    stored["meta"] = np.asarray(json.dumps(meta))
    with checkpoint.open("wb") as fh:
        np.savez(fh, **stored)
    _, line = _resumed_past_the_passes(job, tmp_path, scheduler, "gbmap.n_boosts=3")
    assert "discarded: it does not match this fit (tol: 0.5 -> 0.001)" in line, line
    assert xr.open_zarr(tmp_path / "result.zarr").sizes["boost"] == 3
    assert not work.exists()


############################################################################################
# C: a run holds its work directory


def test_a_second_run_never_takes_the_work_directory_of_a_running_one(tmp_path, scheduler):
    job = write_job(tmp_path, gbmap__n_boosts=100_000)  # runs until it is stopped
    work = tmp_path / "result.zarr.work"
    log = (tmp_path / "first.log").open("w")
    first = _start("fit", str(job), "--scheduler", scheduler, cwd=tmp_path, stdout=log)
    try:
        checkpoint = work / "gbmap" / "gbmap_checkpoint.npz"
        _wait_for(lambda: checkpoint.exists() or first.poll() is not None, 300, "GBMAP")
        for extra in ([], ["--resume"]):
            proc = subprocess.run(
                [sys.executable, "-m", "dcfa", "fit", str(job), *extra, "--scheduler", scheduler],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,  # a run that took the directory would be fitting for hours
            )
            fails(
                proc,
                2,
                "output.store:",
                str(work),
                "in use by another run of this job",
                f"pid {first.pid} on host",
                "Nothing was touched",
            )
            assert "cluster:" not in proc.stdout and "starting over" not in proc.stdout
            assert first.poll() is None  # the first run goes on, its work in place
            assert {"preprocessing.zarr", "moments"} <= set(_passes(work))
            assert checkpoint.exists()
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
        log.close()
    assert first.returncode == 1, err
    assert "interrupted; the finished passes are kept in" in err and "--resume" in err, err
    assert "No such file" not in err
    # all of the first run's work is there: resumed, GBMAP included (stagewise: truncated)
    proc = cli(
        "fit",
        str(job),
        "--resume",
        "--set",
        "gbmap.n_boosts=2",
        "--scheduler",
        scheduler,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "moments reused" in proc.stdout and "discarded" not in proc.stdout
    assert "GBMAPRegressor: resuming after step" in proc.stderr
    assert (tmp_path / "result.zarr" / "zarr.json").exists() and not work.exists()


def test_a_killed_run_releases_its_work_directory(tmp_path, scheduler):
    """SIGKILL: no handler runs, the kernel drops the lock; --resume takes the work."""
    job = write_job(tmp_path, gbmap__n_boosts=300)
    work = tmp_path / "result.zarr.work"
    proc = _start("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    _wait_for(lambda: (work / "gbmap").exists() or proc.poll() is not None, 300, "GBMAP")
    proc.kill()
    proc.communicate(timeout=60)
    assert (work / "run.lock").exists()
    again = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "moments reused" in again.stdout and not work.exists()


############################################################################################
# D: the work directory apart from the result


@pytest.mark.parametrize(
    "work_dir, relation",
    [("out/o.zarr", "is"), ("out/o.zarr/w", "lies inside"), ("out", "contains")],
)
def test_work_dir_and_output_store_must_lie_apart(tmp_path, work_dir, relation):
    job = write_job(tmp_path)
    (tmp_path / "out").mkdir()
    before = tree(tmp_path)
    proc = cli(
        "fit",
        str(job),
        "--output",
        "out/o.zarr",
        "--set",
        f"output.work_dir={work_dir}",
        "--set",
        "output.overwrite=true",
        cwd=tmp_path,
    )
    fails(
        proc,
        2,
        f"output.work_dir: {str(tmp_path / work_dir)!r} {relation} output.store",
        str(tmp_path / "out" / "o.zarr"),
    )
    assert "cluster:" not in proc.stdout  # refused before any cluster or pass
    assert tree(tmp_path) == before


############################################################################################
# E: a failure before any finished pass leaves nothing


def test_unreachable_scheduler_leaves_nothing(tmp_path):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    assert load_config(job).cluster["connect_timeout"] == "30s"  # the default wait
    wait = ("--set", "cluster.connect_timeout=3s")
    # said during the wait (after its first second), so a log shows what the job waits for
    said = "waiting for the scheduler at tcp://127.0.0.1:1 (up to 3s: cluster.connect_timeout)"
    proc, after = cli_after_line(
        "fit", str(job), "--scheduler", "tcp://127.0.0.1:1", *wait, cwd=tmp_path, line=said
    )
    fails(proc, 2, "--scheduler: cannot reach 'tcp://127.0.0.1:1'")
    # a scheduler still starting is waited for, as long as asked: 2-3 s after the line, not
    # about 30 as with the default
    assert after is not None and 1.5 <= after < 15, after
    assert tree(tmp_path) == before


def test_an_interrupt_before_any_finished_pass_leaves_nothing(tmp_path, scheduler):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    # after the work directory is taken, during the first pass
    interrupt(load_config(job), "      the archive", scheduler)
    assert tree(tmp_path) == before
    # after the first pass: kept for --resume
    interrupt(load_config(job), "[2/5]", scheduler)
    work = tmp_path / "result.zarr.work"
    assert set(_passes(work)) == {"preprocessing.zarr"}


def test_an_interrupt_once_the_result_is_written_says_it_is_complete(tmp_path, scheduler):
    """Ctrl-C while the job printed its groups, after the result was written, said "before
    any pass: nothing was kept" beside a complete result: it names the result."""
    job = write_job(tmp_path)

    def echo(line):
        if line.startswith("[5/5]"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        run_job(load_config(job), scheduler=scheduler, echo=echo)
    assert str(caught.value) == f"written and complete: {tmp_path / 'result.zarr'}"
    assert load_result(tmp_path / "result.zarr").n_groups > 0
    assert not (tmp_path / "result.zarr.work").exists()


############################################################################################
# F: a closed stdout


def _closed_pipe() -> int:
    """The write end of a pipe whose reader is gone."""
    r, w = os.pipe()
    os.close(r)
    return w


def test_inspect_into_a_closed_pipe_exits_141_quietly(tmp_path, scheduler):
    job = write_job(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    w = _closed_pipe()
    try:
        proc = _start("inspect", "result.zarr", cwd=tmp_path, stdout=w)
    finally:
        os.close(w)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err
    assert err == "", err  # no "Broken pipe", no "Exception ignored"


def test_fit_into_a_closed_pipe_stops_and_keeps_only_finished_passes(tmp_path, scheduler):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    # closed from the start: stopped at the first line, before any pass; nothing left
    w = _closed_pipe()
    try:
        proc = _start("fit", str(job), "--scheduler", scheduler, cwd=tmp_path, stdout=w)
    finally:
        os.close(w)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 141, err
    assert err.strip().splitlines()[-1] == (
        "dcfa: stdout was closed; stopped (finished passes are kept: rerun with --resume to "
        "continue)"
    )
    assert "Broken pipe" not in err and "dcfa: error" not in err
    assert tree(tmp_path) == before

    # closed once the first pass is done (`| head`): its work is kept and resumed
    proc = _start("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    for line in proc.stdout:
        if line.startswith("[2/5]"):
            break
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=300)
    assert proc.returncode == 141, err
    assert "stdout was closed" in err and "Broken pipe" not in err
    work = tmp_path / "result.zarr.work"
    assert "preprocessing.zarr" in _passes(work)
    assert not (tmp_path / "result.zarr").exists()
    again = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "preprocessing: reused" in again.stdout and not work.exists()


@pytest.mark.parametrize(
    "error, code, said, fixed",
    [
        ("RuntimeError('worker lost')", 1, "RuntimeError: worker lost", ""),
        # bad input only the passes reveal fails the same way on resume until it is fixed
        (
            "MemoryBudgetError('the matrix needs 9 GiB')",
            2,
            "the matrix needs 9 GiB",
            "once the cause is fixed (by keys outside [input], [target] and [method], whose "
            "change starts over), ",
        ),
    ],
)
def test_a_fault_after_a_finished_pass_says_to_resume(
    tmp_path, scheduler, error, code, said, fixed
):
    """A fault after the passes (here an error as the features are computed, raised in the
    real command line's process): its exit code, the error, then where the finished passes
    are kept and to rerun with --resume; the rerun reuses them and writes the result."""
    job = write_job(tmp_path)
    work = tmp_path / "result.zarr.work"
    fault = (
        "import sys, dcfa.batch.job as job\n"
        "from dcfa.memory import MemoryBudgetError\n"
        "def boom(*a, **k):\n"
        f"    raise {error}\n"
        "job.region_series = boom\n"
        "from dcfa.cli import main\n"
        f"sys.exit(main(['fit', {str(job)!r}, '--scheduler', {scheduler!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", fault], capture_output=True, text=True, cwd=tmp_path, timeout=600
    )
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-2].startswith(f"dcfa: error: {said}"), lines
    assert lines[-1] == (
        f"dcfa: the finished passes are kept in {str(work)!r}: {fixed}rerun with --resume to "
        "continue from them"
    ), lines
    assert {"preprocessing.zarr", "moments"} <= set(_passes(work))
    assert not (tmp_path / "result.zarr").exists()
    again = cli("fit", str(job), "--scheduler", scheduler, "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "reused" in again.stdout
    assert (tmp_path / "result.zarr").is_dir() and not work.exists()


def test_help_documents_the_exit_status():
    proc = subprocess.run(
        [sys.executable, "-m", "dcfa", "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0
    assert "exit status:" in proc.stdout and "141" in proc.stdout

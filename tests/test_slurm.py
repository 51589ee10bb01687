"""A real SLURM cluster on this machine: munged, slurmctld and slurmd, one node.

``deploy/slurm/local-slurm.sh`` starts it (installing Debian's ``slurm-wlm`` and ``munge``
with apt-get when they are missing) and stops it, so the script users run on a laptop is the
one tested. Nothing is mocked: jobs are submitted with ``sbatch``, dask-jobqueue submits the
Dask workers as SLURM jobs, and ``squeue`` / ``scontrol`` say what ran and how it ended.

- ``deploy/slurm/dcfa-job.sbatch`` runs a job end to end, the driver itself a SLURM job;
- ``dcfa fit --set cluster.kind=slurm`` runs its workers as SLURM jobs (with the shipped
  ``jobqueue.yaml``, sized down by ``DASK_JOBQUEUE__SLURM__*`` variables) and leaves none
  behind, also when the driver gets SIGTERM, or SIGKILL (its watchdog cancels the jobs), or
  SIGKILL together with the watchdog (the workers stop when the scheduler is gone);
- a worker job cancelled in the middle of the moments pass does not change the result.

Every result is compared with the same job run in-process (``run_job`` on a LocalCluster).
Needs root (skipped otherwise) and, when slurm-wlm and munge are missing, apt-get.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support import _job

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("apt")]  # apt-get: pyproject

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
LOCAL_SLURM = DEPLOY / "slurm" / "local-slurm.sh"
BASH = shutil.which("bash") or "/bin/bash"
BIN = Path(sys.executable).parent
COMMANDS = ("slurmctld", "slurmd", "munged", "sinfo")


def test_the_apt_group_holds_under_xdist(request):
    """The tests that run apt-get or a SLURM cluster share xdist's group "apt" (pyproject), so
    one worker runs them one after the other. pytest 9.2 silently drops the group from the
    test ids (pytest-xdist#1386): both workers then started a cluster, and ran apt-get, at
    once (CI, 2026-11-24). pyproject keeps pytest below 9.2; this says when that stops."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not request.config.getvalue("loadgroup"):
        pytest.skip("not under pytest-xdist with --dist loadgroup")
    assert request.node.nodeid.endswith("@apt"), request.node.nodeid


# --------------------------------------------------------------------------------------------
# the cluster


@dataclass(frozen=True)
class Slurm:
    """The running cluster: its directory and ``slurm.conf``, and the client commands."""

    dir: Path
    conf: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a process that talks to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def run(self, *cmd: str) -> str:
        """A client command's output; it must succeed."""
        proc = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr}"
        return proc.stdout

    def jobs(self) -> dict[str, tuple[str, str]]:
        """squeue: job id -> (name, state)."""
        lines = self.run("squeue", "-h", "-o", "%i|%j|%T").split()
        return {i: (name, state) for i, name, state in (line.split("|") for line in lines)}

    def job(self, job_id: str) -> dict[str, str]:
        """scontrol show job: the record of a job (kept for MinJobAge after it ended)."""
        return dict(re.findall(r"(\w+)=(\S*)", self.run("scontrol", "show", "job", "-o", job_id)))


def _port_pair() -> int:
    """A free port whose successor is free too (slurmctld's and slurmd's)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


def _processes_of(base: Path) -> list[str]:
    """Live processes (zombies excluded) whose command line or environment names ``base``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                continue
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            continue
        if str(base) in cmdline or str(base) in environ:
            found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A one-node cluster, started by ``local-slurm.sh start`` and stopped by ``stop``; at the
    end no daemon, job step or job of it may be left."""
    if os.geteuid() != 0:
        pytest.skip("a local SLURM cluster needs root (slurmd runs jobs as their users; apt-get)")
    if not all(shutil.which(c) for c in COMMANDS) and shutil.which("apt-get") is None:
        pytest.skip("slurm-wlm and munge are not installed, and there is no apt-get for them")
    base = tmp_path_factory.mktemp("slurm")
    env = {
        **os.environ,
        "DEBIAN_FRONTEND": "noninteractive",
        "DCFA_SLURM_PORT": str(_port_pair()),
    }
    start = subprocess.run(
        [BASH, str(LOCAL_SLURM), "start", str(base)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,  # a first apt-get install
    )
    if start.returncode != 0:
        pytest.fail(f"local-slurm.sh start: exit {start.returncode}\n{start.stdout}{start.stderr}")
    assert f"export SLURM_CONF={base / 'slurm.conf'}" in start.stdout
    try:
        yield Slurm(base, base / "slurm.conf")
    finally:
        stop = subprocess.run(
            [BASH, str(LOCAL_SLURM), "stop", str(base)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        left = _processes_of(base)
        assert not left, "left running after local-slurm.sh stop:\n" + "\n".join(left)


@pytest.fixture
def no_jobs_left(slurm):
    """The test's cluster; afterwards, jobs a failed test left behind are cancelled, so they
    cannot disturb the next test (each test asserts an empty queue itself)."""
    yield slurm
    left = list(slurm.jobs())
    if left:
        subprocess.run(["scancel", *left], env=slurm.env(), capture_output=True, timeout=60)
        _wait(lambda: not slurm.jobs(), 60, f"the leftover jobs {left} to end")


def _wait(predicate, timeout: float, what: str, interval: float = 0.25):
    """``predicate()``'s first true value, polled every ``interval`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# the jobs and their in-process results


def _job_and_reference(
    tmp_path_factory, cluster_address, name: str, n_time: int
) -> tuple[Path, Path]:
    from dcfa.batch.config import load_config
    from dcfa.batch.job import run_job

    path = tmp_path_factory.mktemp(name)
    job = _job(path, n_time)  # the job of test_processes; every run here gives --output
    reference = run_job(
        load_config(job),
        scheduler=cluster_address,
        output=str(path / "reference.zarr"),
        echo=lambda *args: None,
    )
    return job, reference


@pytest.fixture(scope="module")
def small_job(tmp_path_factory, cluster_address):
    """600 months: each pass takes about a second on two workers."""
    return _job_and_reference(tmp_path_factory, cluster_address, "small-job", 600)


@pytest.fixture(scope="module")
def big_job(tmp_path_factory, cluster_address):
    """2400 months: a moments pass of several seconds, time to kill something in it."""
    return _job_and_reference(tmp_path_factory, cluster_address, "big-job", 2400)


def _assert_same_result(result: Path, reference: Path) -> None:
    got = xr.open_zarr(result, consolidated=False)
    want = xr.open_zarr(reference, consolidated=False)
    assert got.attrs["dcfa_kind"] == want.attrs["dcfa_kind"] == "result"
    np.testing.assert_array_equal(got.region.values, want.region.values)  # the same map
    np.testing.assert_array_equal(got.group_size.values, want.group_size.values)
    np.testing.assert_allclose(got.features.values, want.features.values, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------
# the driver


def _dcfa_env(slurm: Slurm, tmp_path: Path, **extra: str) -> dict[str, str]:
    """deploy/slurm/jobqueue.yaml as shipped, with worker jobs sized for a small machine: one
    Dask worker of one thread per job, this venv's Python, the scheduler on loopback."""
    return slurm.env(
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        DCFA_VENV=sys.prefix,  # what the prologue and dcfa-job.sbatch activate
        DASK_CONFIG=str(DEPLOY / "slurm"),
        DASK_JOBQUEUE__SLURM__CORES="1",
        DASK_JOBQUEUE__SLURM__PROCESSES="1",
        DASK_JOBQUEUE__SLURM__MEMORY="768MiB",  # SLURM reserves memory: 3 GB in all
        DASK_JOBQUEUE__SLURM__JOB_MEM="1G",
        DASK_JOBQUEUE__SLURM__WALLTIME="00:30:00",
        DASK_JOBQUEUE__SLURM__PYTHON=sys.executable,
        DASK_JOBQUEUE__SLURM__LOG_DIRECTORY=str(tmp_path / "dask-logs"),
        DASK_JOBQUEUE__SLURM__LOCAL_DIRECTORY=str(tmp_path / "dask-scratch"),
        DASK_JOBQUEUE__SLURM__SCHEDULER_OPTIONS=repr(
            {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
        ),
        OMP_NUM_THREADS="1",
        **extra,
    )


class _Driver:
    """``dcfa fit JOB --set cluster.kind=slurm`` as a subprocess, its output read by threads."""

    def __init__(self, slurm: Slurm, job: Path, tmp_path: Path, n_workers: int = 2):
        self.proc = subprocess.Popen(
            [
                str(BIN / "dcfa"),
                "fit",
                str(job),
                "--set",
                "cluster.kind=slurm",
                "--set",
                f"cluster.n_workers={n_workers}",
                "--output",
                str(tmp_path / "result.zarr"),
            ],
            cwd=tmp_path,
            env=_dcfa_env(slurm, tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, lines), daemon=True)
            for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def has(self, pattern: str) -> bool:
        """Whether a line of its standard output matches ``pattern`` (a regex, from the start)."""
        return any(re.match(pattern, line) for line in list(self.out))

    def finish(self, timeout: float = 300) -> int:
        """Its exit code, once it and whatever holds its output pipes (the watchdog) ended."""
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        for reader in self._readers:
            reader.join(timeout=60)
        return code

    def log(self) -> str:
        return "\n".join(["--- stdout", *self.out, "--- stderr", *self.err])

    def watchdog_pid(self) -> int:
        """The pid of its watchdog process (a child that runs dcfa.batch.cluster._WATCHDOG)."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        for pid in children.split():
            with contextlib.suppress(OSError):
                if b"the driver is gone" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
        raise AssertionError(f"no watchdog among the children {children.split()} of the driver")


def _workers(jobs: dict[str, tuple[str, str]], state: str | None = None) -> set[str]:
    """The ids of the dask-jobqueue worker jobs among ``jobs`` (in ``state``, if given)."""
    return {i for i, (name, s) in jobs.items() if name == "dcfa-worker" and state in (None, s)}


def _running_workers(slurm: Slurm, n: int) -> set[str] | None:
    """The running worker jobs, once there are ``n`` of them."""
    running = _workers(slurm.jobs(), "RUNNING")
    return running if len(running) == n else None


# --------------------------------------------------------------------------------------------
# the tests


def test_sbatch_driver_job_end_to_end(no_jobs_left, small_job, tmp_path):
    """deploy/slurm/dcfa-job.sbatch as shipped: the driver a SLURM job, two worker jobs."""
    slurm = no_jobs_left
    job, reference = small_job
    if not (Path(sys.prefix) / "bin" / "activate").is_file():
        pytest.skip(f"the tests' Python is not in a venv ({sys.prefix}/bin/activate is missing)")
    env = _dcfa_env(slurm, tmp_path, DCFA_DEPLOY_DIR=str(DEPLOY), DCFA_WORKER_JOBS="2")
    del env["DASK_CONFIG"], env["DASK_JOBQUEUE__SLURM__LOG_DIRECTORY"]  # the script's own
    submit = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--cpus-per-task=1",  # sbatch's options override the script's #SBATCH lines
            "--mem=1G",
            f"--chdir={tmp_path}",
            str(DEPLOY / "slurm" / "dcfa-job.sbatch"),
            str(job),
            "--output",  # from here on: dcfa fit's
            str(tmp_path / "result.zarr"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert submit.returncode == 0, submit.stderr
    driver = submit.stdout.strip().split(";")[0]
    seen: dict[str, tuple[str, str]] = {}

    def ended() -> bool:
        jobs = slurm.jobs()
        seen.update(jobs)
        return driver not in jobs

    _wait(ended, 240, f"the driver job {driver} to end")
    record = slurm.job(driver)
    log = (tmp_path / f"dcfa-driver-{driver}.out").read_text()
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), log
    assert seen[driver][0] == "dcfa-driver"
    workers = _workers(seen)
    assert len(workers) == 2, seen  # DCFA_WORKER_JOBS worker jobs, seen in squeue
    assert f"job {driver}; config {job}" in log and "[5/5]" in log
    # the workers wrote their logs to jobqueue.yaml's log-directory, in the driver's directory
    assert {p.name for p in (tmp_path / "dask-logs").glob("*.err")} == {
        f"dcfa-worker-{i}.err" for i in workers
    }
    _wait(lambda: not slurm.jobs(), 30, "no job left")
    assert {slurm.job(i)["JobState"] for i in workers} == {"CANCELLED"}  # by the driver's close
    _assert_same_result(tmp_path / "result.zarr", reference)


def test_dcfa_fit_runs_its_workers_as_slurm_jobs(no_jobs_left, small_job, tmp_path):
    slurm = no_jobs_left
    job, reference = small_job
    driver = _Driver(slurm, job, tmp_path)
    seen: dict[str, tuple[str, str]] = {}
    scripts: dict[str, str] = {}
    try:
        while driver.proc.poll() is None:
            jobs = slurm.jobs()
            seen.update(jobs)
            for i in _workers(jobs, "RUNNING") - set(scripts):
                with contextlib.suppress(AssertionError):  # it may have ended meanwhile
                    scripts[i] = slurm.run("scontrol", "write", "batch_script", i, "-")
            time.sleep(0.25)
    finally:
        code = driver.finish()
    assert code == 0, driver.log()
    workers = _workers(seen)
    assert len(workers) == 2 and set(scripts) == workers, (seen, list(scripts))
    for script in scripts.values():  # what dask-jobqueue submitted
        assert f"{sys.executable} -m distributed.cli.dask_worker tcp://127.0.0.1:" in script
        assert "--death-timeout 120" in script and "#SBATCH -J dcfa-worker" in script
    cluster = next(line for line in driver.out if "cluster: <Client" in line)
    assert "'tcp://127.0.0.1:" in cluster and "dashboard http://127.0.0.1:" in cluster
    _wait(lambda: not slurm.jobs(), 30, "no job left")
    assert {slurm.job(i)["JobState"] for i in workers} == {"CANCELLED"}  # by the driver's close
    assert "the driver is gone" not in "\n".join(driver.err)  # the watchdog had nothing to do
    _assert_same_result(tmp_path / "result.zarr", reference)


@pytest.mark.parametrize("kill", ["SIGTERM", "SIGKILL", "SIGKILL to the driver and its watchdog"])
def test_no_worker_job_outlives_the_driver(no_jobs_left, big_job, tmp_path, kill):
    """SIGTERM: dcfa closes the cluster (scancel). SIGKILL: the watchdog cancels the jobs.
    Both killed: the workers stop by themselves when the scheduler is gone."""
    slurm = no_jobs_left
    job, _ = big_job
    driver = _Driver(slurm, job, tmp_path)
    try:
        # both worker jobs run and compute: a pass has made progress
        running = _wait(lambda: _running_workers(slurm, 2), 120, "two running worker jobs")
        _wait(lambda: driver.has(r"\s+[1-9]\d*% done"), 120, "a pass to make progress")
        watchdog = driver.watchdog_pid()
        t0 = time.monotonic()
        if kill == "SIGTERM":
            driver.proc.send_signal(signal.SIGTERM)
        else:
            if kill != "SIGKILL":
                os.kill(watchdog, signal.SIGKILL)
            driver.proc.kill()
        code = driver.finish(60)
        _wait(lambda: not slurm.jobs(), 60, "the worker jobs to end")
        gone = time.monotonic() - t0
    finally:
        if driver.proc.poll() is None:
            driver.proc.kill()
    assert gone < 30, f"worker jobs left {gone:.1f} s after {kill}"
    states = {slurm.job(i)["JobState"] for i in running}
    err = "\n".join(driver.err)
    told = re.search(r"the driver is gone; cancelling its worker jobs (.*)", err)
    if kill == "SIGTERM":
        assert code == 1 and "dcfa: interrupted" in err, driver.log()  # not killed by it
        assert states == {"CANCELLED"} and told is None, (states, err)
        # a failed run leaves nothing behind but finished passes. Stopped in the first pass,
        # nothing is kept. The first pass ends 0.8 s after its first progress line once the
        # workers run, and on a loaded machine the signal sent at that line can come later:
        # then that pass is kept, and the message says to resume. The driver's own message
        # says which; the disk must agree with it.
        work = tmp_path / "result.zarr.work"
        if "no pass had finished: nothing was kept" in err:
            assert not work.exists()
        else:
            assert "dcfa: interrupted; SIGTERM received; the finished passes are kept" in err, err
            assert (work / "preprocessing.zarr").is_dir(), sorted(work.iterdir())
    elif kill == "SIGKILL":
        assert code == -signal.SIGKILL
        assert told and set(told.group(1).split()) == running, err
        assert states == {"CANCELLED"}, states
    else:
        assert code == -signal.SIGKILL and told is None, err
        assert states == {"COMPLETED"}, states  # the workers exited 0; nobody cancelled them
    assert not (tmp_path / "result.zarr").exists()


def test_a_worker_job_cancelled_mid_pass(no_jobs_left, big_job, tmp_path):
    """scancel of one of the two worker jobs while the moments pass runs: Dask recomputes its
    tasks on the other worker, and the result is that of an undisturbed run."""
    slurm = no_jobs_left
    job, reference = big_job
    driver = _Driver(slurm, job, tmp_path)
    try:
        _wait(lambda: driver.has(r"\[2/5\]"), 180, "the preprocessing pass to end")
        running = _workers(slurm.jobs(), "RUNNING")
        assert len(running) == 2, slurm.jobs()
        victim = min(running, key=int)
        slurm.run("scancel", victim)
        _wait(lambda: victim not in slurm.jobs(), 30, f"the worker job {victim} to end")
        assert not driver.has(r"\[3/5\]"), "the moments pass ended before the worker was gone"
        code = driver.finish()
    finally:
        if driver.proc.poll() is None:
            driver.proc.kill()
    assert code == 0, driver.log()
    assert slurm.job(victim)["JobState"] == "CANCELLED"
    log = (tmp_path / "dask-logs" / f"dcfa-worker-{victim}.err").read_text()
    assert f"JOB {victim} ON" in log and "CANCELLED AT" in log  # slurmstepd's own line
    assert "Reason: signal-15" in log  # the worker's nanny got scancel's SIGTERM and closed
    _wait(lambda: not slurm.jobs(), 30, "no job left")
    _assert_same_result(tmp_path / "result.zarr", reference)

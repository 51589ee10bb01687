"""Getting a Dask cluster for a batch job: attach to one, or start one.

In order of precedence: an explicit scheduler address (``--scheduler`` or
``cluster.scheduler``); the ``DASK_SCHEDULER_ADDRESS`` environment variable (set by the Dask
Kubernetes operator's DaskJob); otherwise a cluster of ``cluster.kind``: a
``distributed.LocalCluster`` with per-worker memory limits, or a dask-jobqueue ``SLURMCluster`` /
``PBSCluster`` whose job settings come from its ``jobqueue.yaml`` (deploy/slurm, deploy/pbs).

SIGTERM (``kill``, SLURM's ``scancel`` of the driver job or its walltime, a Kubernetes pod
deleted) stops a run as Ctrl-C does, whichever the cluster: the job keeps its finished passes
and says to resume. A cluster dcfa starts is shut down however the driver ends:

- normally, or on an error or Ctrl-C: the cluster is closed, and dask-jobqueue cancels its
  worker jobs (``scancel`` / ``qdel``);
- on SIGTERM (``kill``, SLURM's ``scancel`` of the driver job or its walltime): SIGTERM is
  turned into ``KeyboardInterrupt`` while the cluster is up, so the same close runs;
- killed outright (SIGKILL, the OOM killer), when nothing in the driver runs: a watchdog
  process, started before the first worker job is submitted, is told every job id; when its
  pipe from the driver closes without the driver saying the jobs are gone, it cancels them,
  queued ones included. Running workers also leave by themselves: a worker stops when its
  connection to the scheduler breaks, and one that starts after the driver is gone gives up
  after jobqueue's ``death-timeout``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading

from dcfa._errors import InputError
from dcfa._interrupts import held_interrupt

__all__ = ["SchedulerUnreachable", "make_cluster", "open_client"]


class SchedulerUnreachable(ConnectionError, InputError):
    """The scheduler a job names (``--scheduler``, ``cluster.scheduler`` or
    ``DASK_SCHEDULER_ADDRESS``) cannot be reached: bad input, not a fault of the run."""


def make_cluster(cluster: dict, *, on_job=None):
    """A cluster object for ``cluster.kind`` (not yet connected to).

    Parameters
    ----------
    cluster : dict
        The job file's ``[cluster]`` section.
    on_job : callable, optional
        For the batch-system kinds: called with each worker job's id once it is submitted.

    Returns
    -------
    distributed.LocalCluster or dask_jobqueue.JobQueueCluster
    """
    kind = cluster.get("kind", "local")
    if kind == "local":
        from distributed import LocalCluster

        with held_interrupt() as interrupted:  # half a cluster cannot be closed
            local = LocalCluster(
                n_workers=cluster["n_workers"],
                threads_per_worker=cluster["threads_per_worker"],
                memory_limit=cluster["memory_limit"],
                # the dashboard shows the job's data: loopback unless the config says so
                dashboard_address=cluster.get("dashboard_address", "127.0.0.1:0") or None,
                # a failed task reaches the driver as its exception, which dcfa reports in
                # one line: the workers' ERROR logs of it would print tracebacks beside it
                silence_logs=logging.CRITICAL,
                # Ctrl-C is the driver's: the workers ignore it (no traceback from each)
                preload=["dcfa.batch.worker_signals"],
            )
        if interrupted:
            local.close()
            raise KeyboardInterrupt
        return local
    cls = _jobqueue_class(kind)
    options = {} if on_job is None else {"job_cls": _reporting(cls.job_cls, on_job)}
    # cores, memory, queue, walltime, ... from the jobqueue.yaml in the dask config
    try:
        job = cls(**options)
    except ValueError as exc:  # no or incomplete jobqueue settings: say where they go
        reason = " ".join(str(exc).split())
        raise InputError(
            f"cluster.kind: {kind!r} takes the workers' cores, memory, queue and walltime "
            f"from the Dask config's jobqueue.{kind} section (copy deploy/{kind}/jobqueue.yaml "
            f"to ~/.config/dask/ and edit it); dask-jobqueue says: {reason}"
        ) from None
    job.scale(jobs=cluster["n_workers"])
    return job


def _jobqueue_class(kind: str):
    try:
        import dask_jobqueue
    except ImportError:
        raise InputError(
            f"cluster.kind: {kind!r} needs dask-jobqueue (pip install 'dcfa[deploy]')"
        ) from None
    return {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]


def _reporting(job_cls, on_job):
    """``job_cls`` whose jobs call ``on_job(job_id)`` as soon as they are submitted."""

    class Reporting(job_cls):
        async def start(self):
            try:
                await super().start()
            finally:  # submitted but the worker failed to start: still a job to cancel
                if self.job_id:
                    on_job(self.job_id)

    Reporting.__name__ = Reporting.__qualname__ = job_cls.__name__
    return Reporting


@contextlib.contextmanager
def open_client(
    cluster: dict,
    address: str | None = None,
    echo=lambda *a: None,
    wait_key: str = "cluster.connect_timeout",
):
    """A connected ``distributed.Client``, closed (and a started cluster shut down) on exit.

    Parameters
    ----------
    cluster : dict
        The job file's ``[cluster]`` section.
    address : str, optional
        A running scheduler to attach to (``--scheduler``); then nothing is started.
    echo : callable, optional
        Where to say that a scheduler is being waited for (after a second without it).
    wait_key : str, optional
        What sets the wait (``cluster["connect_timeout"]``), named in that line.

    Yields
    ------
    distributed.Client
    """
    from distributed import Client

    from dcfa._compute import feeds_ended

    address = address or cluster.get("scheduler") or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        # a scheduler that is not up yet (a driver started beside it) is waited for, and
        # the log says so once the wait is noticeable
        wait = cluster.get("connect_timeout", "30s")
        line = f"      waiting for the scheduler at {address} (up to {wait}: {wait_key})"
        said = threading.Timer(1.0, _quietly(echo), [line])
        said.start()
        try:
            client = Client(address, timeout=wait)
        except OSError as exc:
            raise SchedulerUnreachable(f"--scheduler: cannot reach {address!r}: {exc}") from None
        finally:
            said.cancel()
        with client, _sigterm_interrupts():  # the run stops as on Ctrl-C; the cluster stays
            yield client
        return
    kind = cluster.get("kind", "local")
    if kind == "local":
        with (
            make_cluster(cluster) as started,
            Client(started) as client,
            feeds_ended(),
            _sigterm_interrupts(),
        ):
            yield client
        return
    cancel = shlex.split(_jobqueue_class(kind).job_cls.cancel_command)
    with _Watchdog(cancel) as watchdog:
        started = make_cluster(cluster, on_job=watchdog.add)
        try:
            with Client(started) as client, feeds_ended(), _sigterm_interrupts():
                yield client
        finally:
            started.close()  # cancels the worker jobs
            watchdog.done()


def _quietly(echo):
    """``echo`` for another thread: a closed stdout is the main thread's to notice."""

    def say(line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            echo(line)

    return say


@contextlib.contextmanager
def _sigterm_interrupts():
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` (once; a second one is ignored
    while the cluster shuts down), so the cluster is closed as on Ctrl-C."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# The watchdog: a separate, minimal Python process (no imports beyond the standard library), in
# its own session so that signals meant for the driver's terminal or process group do not
# reach it. Its stdin is a pipe from the driver: one job id per line, then "done" once the
# driver has cancelled the jobs itself. End of file without "done" means the driver died.
_WATCHDOG = """\
import signal, subprocess, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
cancel, ids = sys.argv[1:], []
for line in sys.stdin:
    if line.strip() == "done":
        sys.exit(0)
    ids.append(line.strip())
if ids:
    print("dcfa: the driver is gone; cancelling its worker jobs", *ids, file=sys.stderr)
    subprocess.run(cancel + ids, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


class _Watchdog:
    """Cancels the worker jobs it was told about if the driver dies without cancelling them.

    Parameters
    ----------
    cancel : list of str
        The batch system's cancel command (``["scancel"]``, ``["qdel"]``); job ids are appended.
    """

    def __init__(self, cancel: list[str]):
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG, *cancel],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._lock = threading.Lock()

    def add(self, job_id: str) -> None:
        """Remember a submitted job (called from the cluster's event loop)."""
        self._send(f"{job_id}\n")

    def done(self) -> None:
        """The driver cancelled its jobs itself: the watchdog exits without cancelling."""
        self._send("done\n")

    def _send(self, text: str) -> None:
        with self._lock, contextlib.suppress(OSError, ValueError):  # the watchdog is gone
            self._proc.stdin.write(text)
            self._proc.stdin.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with contextlib.suppress(OSError):
            self._proc.stdin.close()  # end of file: the watchdog cancels unless told "done"
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass  # a hanging cancel command: leave it to finish on its own

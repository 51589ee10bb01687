"""Getting a Dask cluster for a batch job: attach to one, or start one.

In order of precedence: an explicit scheduler address (``--scheduler`` or
``cluster.scheduler``); the ``DASK_SCHEDULER_ADDRESS`` environment variable (set by the Dask
Kubernetes operator's DaskJob); otherwise a cluster of ``cluster.kind``: a
``distributed.LocalCluster`` with per-worker memory limits, or a dask-jobqueue ``SLURMCluster`` /
``PBSCluster`` whose job settings come from its ``jobqueue.yaml`` (deploy/slurm, deploy/pbs).
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["make_cluster", "open_client"]


def make_cluster(cluster: dict):
    """A cluster object for ``cluster.kind`` (not yet connected to)."""
    kind = cluster.get("kind", "local")
    if kind == "local":
        from distributed import LocalCluster

        return LocalCluster(
            n_workers=cluster["n_workers"],
            threads_per_worker=cluster["threads_per_worker"],
            memory_limit=cluster["memory_limit"],
            # the dashboard shows the job's data: loopback unless the config says otherwise
            dashboard_address=cluster.get("dashboard_address", "127.0.0.1:0") or None,
            silence_logs=40,
        )
    try:
        import dask_jobqueue
    except ImportError:
        raise ValueError(
            f"cluster.kind: {kind!r} needs dask-jobqueue (pip install 'dcfa[deploy]')"
        ) from None
    cls = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[kind]
    job = cls()  # cores, memory, queue, walltime, ... from the jobqueue.yaml in the dask config
    job.scale(jobs=cluster["n_workers"])
    return job


@contextlib.contextmanager
def open_client(cluster: dict, address: str | None = None):
    """A connected ``distributed.Client``, closed (and a started cluster shut down) on exit."""
    from distributed import Client

    address = address or cluster.get("scheduler") or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        try:
            client = Client(address, timeout="30s")
        except OSError as exc:
            raise ConnectionError(f"--scheduler: cannot reach {address!r}: {exc}") from None
        with client:
            yield client
        return
    with make_cluster(cluster) as started, Client(started) as client:
        yield client

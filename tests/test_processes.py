"""A cluster of real processes: ``dask scheduler`` and ``dask worker`` on 127.0.0.1.

The command line attaches to it, survives a worker killed in the middle of a job, and a
moments pass over a Zarr store larger than the workers' total memory completes with no worker
killed and the NumPy result.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from support import _job

import dcfa
from dcfa._compute import scheduler_workers

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


@contextlib.contextmanager
def dask_cluster(tmp_path, *, n_workers=2, memory_limit="1GB", nanny=True):
    """Start ``dask scheduler`` and ``dask worker`` processes; yield (address, worker procs)."""
    from distributed import Client

    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    procs = [
        subprocess.Popen(
            [
                str(BIN / "dask"),
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                ":0",
                "--scheduler-file",
                str(sched_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    ]
    workers = []
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        for _ in range(n_workers):
            cmd = [
                str(BIN / "dask"),
                "worker",
                "--scheduler-file",
                str(sched_file),
                "--nthreads",
                "1",
                "--memory-limit",
                memory_limit,
                "--host",
                "127.0.0.1",
                "--local-directory",
                str(tmp_path / "dask-worker-space"),
            ]
            if not nanny:
                cmd.append("--no-nanny")
            workers.append(
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            )
        procs += workers
        with Client(scheduler_file=str(sched_file), timeout="60s") as client:
            client.wait_for_workers(n_workers, timeout=120)
            address = client.scheduler.address
        yield address, workers
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def _reference(tmp_path):
    """The same job in memory, with NumPy: labels per cell (-1 for land) and features."""
    ds = xr.open_zarr(tmp_path / "field.zarr", consolidated=False).load()
    x = ds.field.astype("float64")
    anomalies = (x.groupby("time.month") - x.groupby("time.month").mean()).values
    flat = anomalies.reshape(anomalies.shape[0], -1)
    has_data = ~np.isnan(flat).all(axis=0)
    model = dcfa.LinCFA(random_state=0, compare="mean").fit(flat[:, has_data], ds.target.values)
    labels = np.full(flat.shape[1], -1.0)
    labels[has_data] = model.labels_
    return labels, model.transform(flat[:, has_data])


def _check(result_path, tmp_path):
    labels, features = _reference(tmp_path)
    result = xr.open_zarr(result_path, consolidated=False)
    np.testing.assert_array_equal(np.nan_to_num(result.region.values.ravel(), nan=-1), labels)
    np.testing.assert_allclose(result.features.values, features, atol=1e-4)


def test_cli_on_a_cluster_of_processes(tmp_path):
    job = _job(tmp_path)
    with dask_cluster(tmp_path, memory_limit="1GB") as (address, _):
        proc = subprocess.run(
            [str(BIN / "dcfa"), "fit", str(job), "--scheduler", address],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    assert address in proc.stdout  # attached, did not start its own cluster
    _check(tmp_path / "result.zarr", tmp_path)


def test_a_worker_killed_mid_job(tmp_path):
    job = _job(tmp_path, n_time=2400)
    with dask_cluster(tmp_path, memory_limit="1GB", nanny=False) as (address, workers):
        proc = subprocess.Popen(
            [str(BIN / "dcfa"), "fit", str(job), "--scheduler", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("[2/5]"):  # the moments pass starts now
                workers[0].kill()
                break
        out, err = proc.communicate(timeout=600)
    assert workers[0].poll() is not None
    assert proc.returncode == 0, "".join(seen) + out + err
    _check(tmp_path / "result.zarr", tmp_path)


def test_moments_of_a_store_larger_than_the_cluster_memory(tmp_path):
    """1.5 GB on disk, 2 workers of 300 MB: no worker killed, the NumPy result.

    Chunks of 5 MB: a working worker holds ~190 MiB of libraries and buffers plus about 4
    chunks (docs/user-guide/memory.md, Worker memory)."""
    n, d = 312_500, 600
    store = tmp_path / "big.zarr"
    X = da.random.default_rng(7).standard_normal((n, d), chunks=(3_125, 200))
    X = X + da.arange(d, chunks=200) * 0.01  # distinct means per column
    da.to_zarr(X, str(store))
    assert sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) > 1.2e9
    from distributed import Client

    with dask_cluster(tmp_path, memory_limit="300MB") as (address, _):
        with Client(address) as client:
            pids = set(client.run(os.getpid).values())
            m = dcfa.moments(da.from_zarr(str(store)))
            assert set(client.run(os.getpid).values()) == pids  # nobody was restarted
            assert len(scheduler_workers(client)) == 2
    import zarr

    ref = zarr.open_array(str(store), mode="r")[...]  # the reference: no Dask, no cluster
    mean = ref.mean(axis=0)
    ref -= mean
    cross = ref.T @ ref
    np.testing.assert_allclose(m.mean, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.cross, cross, rtol=1e-9, atol=1e-6)

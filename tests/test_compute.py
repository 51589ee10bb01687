"""dcfa's compute policy on the local schedulers (``dcfa._compute``): under the threaded
scheduler, configured or the collections' own default, BLAS runs on one thread per task,
since the scheduler's threads already use every core."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from dcfa._compute import compute


def _blas_threads(block):
    """The BLAS threads a task sees, as one value per block."""
    return np.array([max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")])


def _seen(scheduler):
    x = da.zeros(4, chunks=2).map_blocks(_blas_threads, dtype=int, chunks=(1,))
    # no client: the session's cluster, when one exists, is the configured scheduler
    with dask.config.set(scheduler=scheduler), threadpool_limits(limits=2, user_api="blas"):
        (seen,) = compute([x], progress=False)  # nested, as the estimators pass them
        after = _blas_threads(None)[0]
    return set(seen[0].tolist()), after


@pytest.mark.parametrize("scheduler", [None, "threads"])
def test_blas_runs_on_one_thread_per_task_under_the_threaded_scheduler(scheduler):
    """With no scheduler configured (a Dask array's default is the threaded one), BLAS kept
    its pool per thread: dcfa.moments of 1 200 x 5 000 float32 took 0.49 s, 0.40 s once
    pinned, against 0.37 s with scheduler="threads" set (benchmarks/bench_lincfa.py)."""
    seen, after = _seen(scheduler)
    assert seen == {1}
    assert after == 2  # restored when the computation ends


def test_blas_keeps_its_threads_under_the_synchronous_scheduler():
    seen, _ = _seen("sync")
    assert seen == {2}

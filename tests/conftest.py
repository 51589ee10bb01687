"""Shared fixtures: seeded data, a real multi-process Dask cluster, a compute counter."""

from __future__ import annotations

import contextlib
import os

import dask
import numpy as np
import pytest
from hypothesis import settings
from threadpoolctl import threadpool_limits

# Two xdist workers share the machine's cores: a BLAS pool per worker makes each wait for the
# other's threads at every small product (the fast lane took 4:51 instead of 4:08 on 2
# cores). The processes the tests start (CLI runs, Dask workers) inherit the variable; a test
# of dcfa's own BLAS settings sets its own limits.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
threadpool_limits(limits=1, user_api="blas")

# CI runs on a fresh machine, without Hypothesis's example database: a counterexample found
# there is printed with the line that replays it anywhere (@reproduce_failure(...))
settings.register_profile("dcfa", print_blob=True)
settings.load_profile("dcfa")

# The longest tests and groups (pytest --durations), started first: the suite runs on two
# xdist workers (pyproject), and a worker left alone at the end with one of these is what
# makes the run long. Whole modules keep their module-scoped fixtures set up once.
FIRST = (
    "tests/test_slurm.py",  # with weka's datasets: the xdist group "apt", 5-6 minutes
    # 4-5 minutes, on a cluster of its own
    "tests/gbmap/test_gbmap_paper.py::test_table4_gbmap_synth_cos_at_the_paper_size",
    "tests/test_notebooks.py",
    "tests/test_processes.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        return next((i for i, first in enumerate(FIRST) if item.nodeid.startswith(first)), None)

    items.sort(key=lambda item: len(FIRST) if rank(item) is None else rank(item))


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def local_cluster(**options):
    """A LocalCluster with 2 single-threaded worker *processes* (real pickling, real
    transfer); ``options`` go to it."""
    from distributed import LocalCluster

    kwargs = dict(n_workers=2, threads_per_worker=1, dashboard_address=None, silence_logs=40)
    return LocalCluster(**{**kwargs, **options})


@contextlib.contextmanager
def local_client(**options):
    """A client of a :func:`local_cluster` of its own; ``options`` go to the cluster."""
    from distributed import Client

    with local_cluster(**options) as cluster, Client(cluster) as c:
        yield c


@pytest.fixture(scope="session")
def cluster_address():
    """The address of the session's 2-process cluster, 2 GiB a worker, started once per test
    process: for jobs (and module fixtures that run them), which connect their own client."""
    with local_cluster(memory_limit="2GiB") as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def client(cluster_address):
    """A client of the session's cluster, the default scheduler for this test only: a test
    that does not ask for it computes with Dask's own default, whichever tests ran before it
    in the same process (a session-wide default client sent every later test's small graphs
    through the cluster, about 4 ms a task)."""
    from distributed import Client

    with Client(cluster_address, set_as_default=True) as c:
        yield c


@pytest.fixture
def scheduler(cluster_address):
    """The address of the session's cluster, so jobs that get as far as a pass do not each
    start one."""
    return cluster_address


class _CountingScheduler:
    """A scheduler that counts how many times it is asked to compute (xarray/flox idiom)."""

    def __init__(self, max_computes: int):
        self.max_computes = max_computes
        self.total = 0

    def __call__(self, dsk, keys, **kwargs):
        self.total += 1
        if self.total > self.max_computes:
            raise RuntimeError(f"Too many computes: {self.total} > {self.max_computes}")
        return dask.get(dsk, keys, **kwargs)


@contextlib.contextmanager
def count_computes(max_computes: int = 0):
    """Fail if the block asks Dask to compute more than ``max_computes`` times."""
    sched = _CountingScheduler(max_computes)
    with dask.config.set(scheduler=sched):
        yield sched


def correlated_data(rng, n=200, D=12, k_latent=3, offset=0.0, noise=None):
    """Features sharing a few latent series (so groups exist), with a linear target."""
    latent = rng.normal(size=(n, k_latent))
    which = rng.integers(0, k_latent, D)
    noise = rng.uniform(0.2, 1.5) if noise is None else noise
    X = latent[:, which] + noise * rng.normal(size=(n, D)) + offset + rng.normal(size=D)
    y = (X - X.mean(0)) @ rng.normal(size=D) * 0.3 + rng.normal(size=n) * rng.uniform(0.5, 5)
    return X, y


def grid_data(seed, n=120, shape=(9, 11), land=True):
    """Regions of correlated cells on a grid (kelvin-like offsets, land), a linear target."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 4))
    region = rng.integers(0, 4, shape)
    X = latent[:, region] + rng.uniform(0.3, 1.0) * rng.normal(size=(n, *shape)) + 280
    if land:
        X[:, 0, :2] = np.nan
    y = latent @ rng.normal(size=4) + rng.normal(size=n)
    return X, y

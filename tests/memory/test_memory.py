"""The memory check before a dense pass: estimate right, refusal before any compute, budget."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import correlated_data, count_computes
from sklearn.model_selection import TimeSeriesSplit
from support import _traced_peak

import dcfa
from dcfa import GenLinCFA, LinCFA, NonLinCFA
from dcfa._compute import scheduler_workers
from dcfa.memory import (
    MemoryBudgetError,
    check_dense,
    estimate_dense,
    estimate_moments,
    memory_budget,
)
from dcfa.stats.moments import _runs_in_memory

N, D_BIG = 100, 60_000  # the reported case: 26.8 GiB per (D+1) x (D+1) float64 matrix


# -- the estimate is an upper bound of what a fit holds -------------------------------------


@pytest.mark.parametrize(
    "make, n, D",
    [
        (lambda: LinCFA(), 200, 3000),
        (lambda: LinCFA(missing="pairwise"), 200, 2000),
        # one Moments per fold segment, merged training sets: the estimate counts them all
        (lambda: NonLinCFA(eps=1e-3, compare="seed", scan="single"), 300, 2000),
        (lambda: NonLinCFA(eps=1e-3, cv=TimeSeriesSplit(5), compare="seed"), 300, 2000),
    ],
    ids=["lincfa", "lincfa-pairwise", "nonlincfa-kfold", "nonlincfa-timeseries"],
)
def test_estimate_bounds_the_measured_peak(make, n, D):
    rng = np.random.default_rng(3)
    X, y = correlated_data(rng, n=n, D=D, k_latent=5)
    if make().get_params().get("missing") == "pairwise":
        X[rng.random(X.shape) < 0.01] = np.nan
    estimate = estimate_dense(make(), n, D, data=X).driver_bytes
    measured = _traced_peak(lambda: make().fit(X, y))
    # the matrices dominate (the one-pass merges hold ~1.3 of them in memory): the test can tell
    assert measured > (D + 1) ** 2 * 8
    assert measured <= estimate <= 4 * measured, (estimate / 2**20, measured / 2**20)


def test_the_estimate_bounds_a_short_wide_pass_run_in_memory():
    """A short, wide chunked pass on the local scheduler loads its rows and runs one kernel
    (:func:`dcfa.moments`): the estimate, made for its tiles, still bounds what it holds,
    offsets and the target's column included."""
    rng = np.random.default_rng(4)
    n, D = 300, 2000
    X = (rng.normal(size=(n, D)) + 280.0).astype(np.float32)  # kelvin: the rows are shifted
    y = rng.normal(size=n)
    Xd = da.from_array(X, chunks=(60, D))
    estimate = estimate_moments(n, D, n_targets=1, data=Xd).driver_bytes
    with dask.config.set(scheduler="threads"):
        assert _runs_in_memory(Xd, 1, "exclude")
        measured = _traced_peak(lambda: dcfa.moments(Xd, y))
    assert measured > (D + 1) ** 2 * 8
    assert measured <= estimate <= 4 * measured, (estimate / 2**20, measured / 2**20)


# -- the reported case: refused at once, nothing computed -----------------------------------


def test_dask_input_too_large_is_refused_before_any_compute():
    X = da.random.default_rng(0).random((N, D_BIG), chunks=(N, D_BIG))
    y = np.random.default_rng(1).normal(size=N)
    with count_computes(0), pytest.raises(MemoryBudgetError) as info:
        LinCFA(mode="dense").fit(X, y)
    msg = str(info.value)
    assert "LinCFA" in msg and "GiB" in msg and "60,001 x 60,001" in msg
    assert "dcfa.memory_budget" in msg and "available" in msg  # the budget and its source
    assert "mode='auto'" in msg and "neighborhood='seed'" in msg  # what runs instead
    assert 'dask.config.set({"dcfa.memory_budget"' in msg and "DASK_DCFA__MEMORY_BUDGET" in msg
    assert "Nothing was computed" in msg
    # the CLI maps ValueError to exit status 2; MemoryError for callers that catch that
    assert isinstance(info.value, ValueError) and isinstance(info.value, MemoryError)


def test_numpy_input_too_large_is_refused_with_the_message():
    X = np.zeros((N, D_BIG), dtype=np.float32)
    y = np.random.default_rng(1).normal(size=N)
    with pytest.raises(MemoryBudgetError, match=r"dense pass would hold about [\d,.]+ GiB"):
        LinCFA(mode="dense").fit(X, y)


@pytest.mark.parametrize("cls", [LinCFA, NonLinCFA, GenLinCFA])
def test_the_natural_call_runs_without_the_matrix(cls):
    """The reported case (200 x 300 cells) no longer builds the 26.8 GiB matrix: ``mode="auto"``
    runs the series (96 MB); ``mode="dense"`` is refused, naming what runs instead."""
    field = xr.DataArray(da.zeros((N, 200, 300), chunks=(N, 100, 150)), dims=("time", "y", "x"))
    with count_computes(0):
        assert cls(neighbors=1).execution_for(field) == "series"
        with pytest.raises(MemoryBudgetError) as info:
            cls(neighbors=1, mode="dense").fit(field, np.arange(N) % 7)
    msg = str(info.value)
    assert f"{cls.__name__}(mode='auto') (the default) runs the same partition" in msg
    assert "coarsen" in msg and "features would fit" in msg


def test_functional_moments_are_checked_only_when_they_are_built():
    X = da.zeros((N, D_BIG), chunks=(N, 6000))
    with count_computes(0):
        with pytest.raises(MemoryBudgetError, match="dcfa.moments: the dense pass"):
            dcfa.moments(X)
        lazy = dcfa.moments(X, compute=False)  # a graph only: nothing is built yet
    assert lazy.is_lazy


def test_neighbour_and_seed_row_modes_of_the_same_size_are_not_refused():
    field = xr.DataArray(
        da.random.default_rng(2).standard_normal((N, 200, 300), chunks=(N, 100, 150)),
        dims=("time", "lat", "lon"),
    )
    y = np.random.default_rng(3).normal(size=N)
    near = LinCFA(mode="grid", neighbors=1, neighborhood="seed")
    assert check_dense(near, N, D_BIG) is None
    with dask.config.set({"dcfa.memory_budget": "1GiB"}):
        near.fit(field, y)
    assert near.labels_.shape == (D_BIG,)
    assert check_dense(LinCFA(mode="rows"), N, D_BIG) is None


def test_metadata_check_for_a_batch_job():
    """What a job calls before its first pass: shapes and parameters only."""
    with count_computes(0):
        with pytest.raises(MemoryBudgetError, match="NonLinCFA"):
            check_dense(NonLinCFA(cv=5), 360, 64_800)  # a 1 degree grid, 30 years monthly
        small = check_dense(NonLinCFA(cv=5), 360, 500)
    # 5 fold segments, each assembled from its gathered blocks (the folds' training sets are
    # read row by row, never merged into new matrices)
    assert small.driver_bytes >= 10 * 501**2 * 8


# -- the budget ------------------------------------------------------------------------------


def test_the_config_key_sets_the_budget():
    rng = np.random.default_rng(4)
    X, y = correlated_data(rng, n=60, D=400)
    need = estimate_dense(LinCFA(), 60, 400, data=X).driver_bytes
    with dask.config.set({"dcfa.memory_budget": need - 1}):
        with pytest.raises(MemoryBudgetError, match=r"\(dcfa.memory_budget = [\d.]+ MiB\)"):
            LinCFA(mode="dense").fit(X, y)
        assert LinCFA().fit(X, y).execution_ == "series"  # auto: the next that fits
    with dask.config.set({"dcfa.memory_budget": need}):
        assert LinCFA().fit(X, y).execution_ == "dense"
    with dask.config.set({"dcfa.memory_budget": "1 MiB"}):
        assert memory_budget().driver == 2**20
        with pytest.raises(MemoryBudgetError):
            dcfa.moments(X, y)
    # NumPy's numbers as Python's (np.int64 was refused, np.float32(0.5) read as 0 bytes)
    with dask.config.set({"dcfa.memory_budget": np.int64(2**20)}):
        assert memory_budget().driver == 2**20
    with dask.config.set({"dcfa.memory_budget": np.float32(0.5)}):
        assert memory_budget().source.startswith("dcfa.memory_budget = 0.5 x ")
    # a fraction of what is available; the default is 0.5
    with dask.config.set({"dcfa.memory_budget": 1e-9}):
        assert memory_budget().driver < 2**10
        with pytest.raises(MemoryBudgetError, match=r"1e-09 x .* available"):
            LinCFA(mode="dense").fit(X, y)
    assert dask.config.get("dcfa.memory_budget") == 0.5
    assert 0 < memory_budget().driver < float("inf")
    # raising it lets the reported case through the check (we stop before computing)
    with dask.config.set({"dcfa.memory_budget": "1PiB"}):
        assert check_dense(LinCFA(), N, D_BIG).driver_bytes > 2 * 26 * 2**30


@pytest.mark.parametrize("bad", [0, -1, "lots", True, float("nan"), "", " ", "1e400"])
def test_a_bad_budget_names_the_key(bad):
    """An empty value (an unset environment variable) was a budget of 1 byte, dask's reading
    of ""; "1e400" raised dask's OverflowError."""
    with dask.config.set({"dcfa.memory_budget": bad}), pytest.raises(ValueError) as info:
        memory_budget()
    assert "dcfa.memory_budget" in str(info.value)
    assert not isinstance(info.value, MemoryBudgetError)


@pytest.mark.slow
def test_the_budget_follows_the_workers_of_a_cluster():
    """Tiles are built on the workers: a worker too small for the widest tile refuses the fit
    before the pass, narrower feature chunks fit; the driver keeps its own budget."""
    from distributed import Client, LocalCluster, get_task_stream

    rng = np.random.default_rng(5)
    X, y = correlated_data(rng, n=100, D=3000, k_latent=5)
    # in-process workers measure this whole process: keep their memory monitor from pausing
    # them (only the reported memory_limit matters here)
    quiet = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause")}
    with (
        dask.config.set(quiet),
        LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=False,
            memory_limit="80MB",
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        Client(cluster) as client,
    ):
        limits = {a: w["memory_limit"] for a, w in scheduler_workers(client).items()}
        budget = memory_budget()
        assert {a: b for a, (b, _, _) in budget.workers.items()} == {
            a: int(0.5 * lim) for a, lim in limits.items()
        }
        assert budget.driver > 10 * max(limits.values())  # this machine: not the limit
        # the finished tiles wait on the workers, 20-23 MiB on each here (0.58-0.67 of the
        # matrix); one 3000-column chunk: the dense pass cuts it into three, tiles of 1000 x
        # 1000 (2 x 26 MiB at once on a worker's two threads: over its 38 MiB budget); 500
        # columns: 2 x 7.3 MiB
        wide = da.from_array(X, chunks=(100, 3000))
        with get_task_stream(client) as stream, pytest.raises(MemoryBudgetError) as info:
            LinCFA(mode="dense").fit(wide, y)
        assert not stream.data  # refused before any task ran
        msg = str(info.value)
        assert "on a worker" in msg and "memory_limit of worker" in msg
        assert "X.rechunk({1:" in msg
        # a 3001 x 3001 result fits the driver; 500-column tiles fit the workers
        narrow = da.from_array(X, chunks=(100, 500))
        model = LinCFA(random_state=0).fit(narrow, y)
        assert model.execution_ == "dense"
        np.testing.assert_array_equal(model.labels_, LinCFA(random_state=0).fit(X, y).labels_)
        # workers too small for the finished tiles themselves: no rechunking helps
        with (
            dask.config.set({"dcfa.memory_budget": 0.25}),
            pytest.raises(MemoryBudgetError, match="finished tiles, held by the workers"),
        ):
            LinCFA(mode="dense").fit(narrow, y)
        assert LinCFA(random_state=0).fit(narrow, y).execution_ == "dense"
        # an absolute budget is capped by a worker's memory_limit
        with dask.config.set({"dcfa.memory_budget": "1TiB"}):
            assert {b for b, _, _ in memory_budget().workers.values()} == set(limits.values())


def test_the_estimates_check_their_arguments():
    """mode="full" (dense's old name) skipped the check of a 15 TB pass without a word, and
    any mode was accepted; a GBMAP estimator, an unknown ``missing`` and a negative size
    raised AttributeError, KeyError and ZeroDivisionError."""
    huge = estimate_dense(LinCFA(), 100, 10**6, mode="dense").driver_bytes
    assert huge > 10 * 2**40
    with pytest.warns(FutureWarning, match="mode='full' is now mode='dense'"):
        assert estimate_dense(LinCFA(), 100, 10**6, mode="full").driver_bytes == huge
    with dask.config.set({"dcfa.memory_budget": "1GiB"}), pytest.raises(MemoryBudgetError):
        with pytest.warns(FutureWarning):
            check_dense(LinCFA(), 100, 10**6, mode="full")
    assert estimate_dense(LinCFA(), 100, 10**6, mode="series") is None
    with pytest.raises(ValueError, match=r"^The 'mode' parameter of LinCFA must be .*'bogus'"):
        estimate_dense(LinCFA(), 100, 10**6, mode="bogus")
    with pytest.raises(TypeError, match=r"^estimator: expected a CFA estimator .*GBMAPRe"):
        check_dense(dcfa.GBMAPRegressor(), 100, 1000)
    with pytest.raises(dcfa.InputError, match=r"^missing: expected one of .*got 'pairwize'"):
        estimate_moments(100, 50, missing="pairwize")
    for bad in (-1, 0, 10.5, True):
        with pytest.raises(
            dcfa.InputError, match=rf"^n_features: expected an integer >= 1, got {bad!r}"
        ):  # noqa: E501
            estimate_dense(LinCFA(), 100, bad)
    with pytest.raises(dcfa.InputError, match=r"^n_targets: expected an integer >= 0, got -1"):
        estimate_moments(100, 50, n_targets=-1)

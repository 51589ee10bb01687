"""On a real cluster: 2 worker processes, data and tasks shipped between processes."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from conftest import correlated_data

import dcfa
from dcfa import LinCFA
from dcfa._compute import scheduler_workers

pytestmark = pytest.mark.slow


def test_fit_on_a_cluster_gives_the_in_memory_partition(client, rng):
    X, y = correlated_data(rng, n=400, D=40, offset=280.0)
    X[:, 7] = np.nan
    local = LinCFA(random_state=5).fit(X, y)
    Xd = da.from_array(X, chunks=(50, 15)).persist()
    remote = LinCFA(random_state=5).fit(Xd, y)
    np.testing.assert_array_equal(remote.labels_, local.labels_)
    assert remote.excluded_ == local.excluded_
    out = remote.transform(Xd).compute()
    np.testing.assert_allclose(out, local.transform(X), atol=1e-10)
    assert len(scheduler_workers(client)) == 2


def test_moments_on_a_cluster(client, rng):
    X = rng.normal(size=(3000, 30)) + 1e6
    y = rng.normal(size=3000)
    m = dcfa.moments(da.from_array(X, chunks=(300, 10)), y)
    ref = np.corrcoef(np.column_stack([X, y]), rowvar=False)
    assert np.abs(m.corr() - ref).max() < 1e-9


def test_progress_leaves_no_graph_behind_for_the_next_one(client, caplog):
    """With dcfa.progress and a Client, a fit on lazy anomalies made the scheduler log
    "Detected different run_spec for key ('reshape-...')": a computation's futures released
    their keys after the next graph, which shares them but fuses them otherwise, had arrived."""
    import logging

    import dask
    import xarray as xr

    from dcfa._compute import compute

    t = np.arange("2000-01", "2020-01", dtype="datetime64[M]").astype("datetime64[ns]")
    data = da.random.default_rng(0).standard_normal((t.size, 6, 8), chunks=(60, 6, 8))
    X = xr.DataArray(data, dims=("time", "lat", "lon"),
                     coords={"time": t, "lat": np.arange(6.0), "lon": np.arange(8.0)})  # fmt: skip
    y = np.random.default_rng(1).standard_normal(t.size)
    caplog.set_level(logging.WARNING, logger="distributed.scheduler")  # in this process
    with dask.config.set({"dcfa.progress": True}):
        for _ in range(5):  # a race: each round made the warning about one time in two
            A = dcfa.Anomalies().fit(X).transform(X)
            dcfa.RegionsCV().fit(A, y)
            # released before compute returns, not when the client's loop gets to it
            total = A.sum()
            compute(total.data)
            assert not set(client.refcount) & set(dask.core.flatten(total.__dask_keys__()))
    assert "different `run_spec`" not in caplog.text

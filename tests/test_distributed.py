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

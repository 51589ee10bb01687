"""LinCFA beyond a D x D matrix: the neighbour mode (grid moments) and the seed-row mode.

Each must give exactly the full-matrix partition under the same options, and hold far less
than a D x D matrix at any time.
"""

from __future__ import annotations

from collections import Counter
from functools import partial

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import grid_data
from dask.diagnostics import CacheProfiler
from dask.sizeof import sizeof
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from strategies import chunks

import dcfa
from dcfa import LinCFA
from dcfa.cfa.driver import partition_moments
from dcfa.cfa.grid_partition import grid_partition
from dcfa.cfa.rules import lincfa_rule
from dcfa.datasets import make_regions_field
from dcfa.neighbors import grid_adjacency
from dcfa.stats.grid import grid_moments
from dcfa.stats.kinds import load_moments
from dcfa.stats.stencil import half_offsets


def test_half_offsets_cover_every_pair_once():
    for ndim, r in [(1, 2), (2, 1), (2, 2), (3, 1)]:
        o = half_offsets(ndim, r)
        both = {tuple(v) for v in o} | {tuple(-v) for v in o}
        assert len(both) == 2 * len(o) == (2 * r + 1) ** ndim - 1


@settings(max_examples=12, deadline=None)
@given(
    t=chunks(60, 4),
    a=chunks(7, 3),
    b=chunks(8, 3),
    radius=st.integers(1, 3),
    periodic=st.booleans(),
)
def test_grid_moments_equal_the_dense_ones(t, a, b, radius, periodic):
    rng = np.random.default_rng(len(t) + 10 * radius)
    X = rng.normal(size=(60, 7, 8)).cumsum(axis=2) + 1e4
    X[:, 2, 3] = np.nan
    y = rng.normal(size=60)
    field = xr.DataArray(da.from_array(X, chunks=(t, a, b)), dims=("time", "lat", "lon"))
    gm = grid_moments(field, y, radius=radius, periodic=(1,) if periodic else ())
    m = dcfa.moments(X.reshape(60, -1), y)
    cells = np.arange(56)
    nbr, _ = gm.neighbours(cells)
    pa, pb = np.repeat(cells, nbr.shape[1]), nbr.ravel()
    ok = (pb >= 0) & (pa != 19) & (pb != 19)  # cell 19 = (2, 3) is all NaN
    np.testing.assert_allclose(
        gm.pair_cross(pa[ok], pb[ok]), m.cross[pa[ok], pb[ok]], rtol=1e-9, atol=1e-7
    )
    keep = cells != 19
    np.testing.assert_allclose(gm.mean[keep], m.mean[:56][keep], rtol=1e-12)
    np.testing.assert_allclose(gm.diag[keep], np.diag(m.cross)[:56][keep], rtol=1e-10)
    np.testing.assert_allclose(gm.target_cross[keep], m.cross[:56, 56][keep], rtol=1e-9, atol=1e-8)
    assert gm.excluded == {19: "all values missing"}
    assert len(gm.offsets) == ((2 * radius + 1) ** 2 - 1) // 2


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("radius", [1, 2])
@pytest.mark.parametrize("compare", ["seed", "mean"])
@pytest.mark.parametrize("scan", ["single", "restart"])
def test_neighbour_mode_is_the_full_partition(seed, radius, compare, scan):
    X, y = grid_data(seed)
    field = xr.DataArray(da.from_array(X, chunks=(40, 4, 11)), dims=("time", "lat", "lon"))
    gm = grid_moments(field, y, radius=2 * radius)
    m = dcfa.moments(X.reshape(120, -1), y)
    accept = partial(lincfa_rule, strict=True)
    for shuffle in (False, True):
        full = partition_moments(
            m,
            accept,
            standardize=True,
            shuffle=shuffle,
            random_state=seed,
            compare=compare,
            scan=scan,
            neighbors=grid_adjacency((9, 11), radius),
            neighborhood="seed",
        )
        grid = grid_partition(
            gm,
            accept,
            radius=radius,
            shuffle=shuffle,
            random_state=seed,
            compare=compare,
            scan=scan,
        )
        np.testing.assert_array_equal(grid, full)


@pytest.mark.parametrize("compare", ["seed", "mean"])
def test_lincfa_neighbour_mode(compare):
    X, y = grid_data(7)
    field = xr.DataArray(
        da.from_array(X, chunks=(50, 5, 11)),
        dims=("time", "lat", "lon"),
        coords={"lat": np.arange(9.0), "lon": np.arange(11.0)},
    )
    kw = dict(neighbors=1, neighborhood="seed", compare=compare, random_state=3)
    full = LinCFA(**kw).fit(field, y)
    near = LinCFA(mode="grid", **kw).fit(field, y)
    np.testing.assert_array_equal(near.labels_, full.labels_)
    np.testing.assert_allclose(
        near.transform(field).values, full.transform(field).values, atol=1e-9
    )
    assert near.label_map_.dims == ("lat", "lon") and near.excluded_ == full.excluded_
    assert type(near.moments_).__name__ == "GridMoments"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("row_batch", [3, 256])
def test_seed_row_mode_is_the_full_partition(seed, row_batch):
    X, y = grid_data(seed, land=seed == 0)
    flat = X.reshape(120, -1)
    full = LinCFA(random_state=seed).fit(flat, y)
    rows = LinCFA(random_state=seed, mode="rows", row_batch=row_batch).fit(
        da.from_array(flat, chunks=(40, 25)), y
    )
    np.testing.assert_array_equal(rows.labels_, full.labels_)
    np.testing.assert_allclose(rows.transform(flat), full.transform(flat), atol=1e-9)
    assert rows.excluded_ == full.excluded_


def _largest_result(fit):
    with dask.config.set(scheduler="threads"), CacheProfiler(metric=sizeof) as prof:
        fit()
    return max(r.metric for r in prof.results)


def test_no_mode_but_full_holds_a_d_by_d_matrix():
    """With D = 3600 cells a D x D float64 matrix is 104 MB; the other modes never hold one.
    The full mode holds its upper tiles (about half of it), never the whole in one task."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 60, 60))
    y = X[:, 10:20, 10:20].mean(axis=(1, 2)) + rng.normal(size=200)
    field = xr.DataArray(da.from_array(X, chunks=(50, 20, 60)), dims=("time", "lat", "lon"))
    dd = 3600 * 3600 * 8
    near = _largest_result(
        lambda: LinCFA(mode="grid", neighbors=1, neighborhood="seed").fit(field, y)
    )
    rows = _largest_result(lambda: LinCFA(mode="rows", row_batch=64).fit(field, y))
    dense = LinCFA()
    full = _largest_result(lambda: dense.fit(field, y))
    assert near < dd / 20 and rows < dd / 20, (near, rows)
    assert full < dd / 20, full  # tiles: no task holds the matrix in one piece
    # the full mode does hold the upper D x D tiles when gathered: the bound can tell
    assert dense.execution_ == "dense" and dense.moments_.cross.nbytes > dd / 2


def test_stored_moments_of_every_mode(tmp_path):
    X, y = grid_data(2)
    field = xr.DataArray(X, dims=("time", "lat", "lon"))
    for mode, kw in [("grid", dict(neighbors=1, neighborhood="seed")), ("rows", {})]:
        first = LinCFA(mode=mode, random_state=1, **kw).fit(field, y)
        back = load_moments(first.moments_.save(tmp_path / f"{mode}.zarr"))
        again = LinCFA(mode=mode, random_state=1, **kw).fit(field, y, moments=back)
        np.testing.assert_array_equal(again.labels_, first.labels_)
    with pytest.raises(TypeError, match="moments: mode='rows' reuses ColumnMoments"):
        LinCFA(mode="rows").fit(field, y, moments=dcfa.moments(X.reshape(120, -1), y))


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(mode="grid"), "neighbors: mode='grid' needs an int radius"),
        (dict(mode="grid", neighbors=1), "neighborhood: mode='grid' keeps a group"),
        (dict(mode="rows", compare="mean"), "compare: mode='rows'"),
        (dict(mode="rows", strategy="greedy"), "strategy: mode='rows'"),
        (dict(mode="grid", neighbors=1, neighborhood="seed", missing="pairwise"), "missing"),
        (dict(mode="columns"), "mode"),  # no such execution
    ],
)
def test_mode_options_are_checked_before_the_pass(params, match):
    from conftest import count_computes

    X, y = grid_data(0)
    field = xr.DataArray(da.from_array(X, chunks=40), dims=("time", "lat", "lon"))
    with count_computes(0), pytest.raises(ValueError, match=match):
        LinCFA(**params).fit(field, y)


def test_known_regions_are_recovered():
    """On the synthetic grid, no group mixes a region that drives the target with another
    cell's region, in either mode, and each such region gives a group correlated with it."""
    ds = make_regions_field(
        n_time=400, shape=(20, 30), n_regions=8, noise=0.5, land_fraction=0.1, seed=3
    ).load()
    true = ds.region.values.ravel()
    active = np.flatnonzero(ds.beta.values != 0)
    for kw in (
        dict(neighbors=1, compare="mean"),
        dict(neighbors=1, neighborhood="seed", mode="grid"),
    ):
        model = LinCFA(random_state=0, **kw).fit(ds.field, ds.target)
        labels = model.labels_
        assert (labels[true < 0] == -1).all()  # land
        for g in np.unique(labels[np.isin(true, active)]):
            assert len(set(true[labels == g])) == 1
        Xt = model.transform(ds.field).values
        for r in active:
            groups = Counter(labels[true == r]).most_common(3)
            best = max(abs(np.corrcoef(Xt[:, g], ds.target)[0, 1]) for g, _ in groups)
            assert best > 0.15 * abs(ds.beta.values[r]) / np.abs(ds.beta.values).sum()


def test_auto_passes_over_the_matrix_when_the_series_are_faster():
    """mode='auto' took the dense matrix whenever it fit: for 11 340 cells with a
    neighbourhood, 28.5-33.6 s against 4.6 s for the series. Above DENSE_TIME_LIMIT features
    with neighbours it runs the series when it can, with the same partition."""
    from dcfa.cfa.executions.dense import DENSE_TIME_LIMIT

    ds = make_regions_field(120, (60, 140), 8, n_active=2, seed=2)  # 8 400 cells
    X, y = ds.field.values.reshape(120, -1), ds.target.values
    assert X.shape[1] > DENSE_TIME_LIMIT
    A = grid_adjacency((60, 140), 1)
    for est in (dcfa.LinCFA(neighbors=A, random_state=0), dcfa.GenLinCFA(neighbors=A)):
        assert est.execution_for(X) == "series"
        auto = clone(est).fit(X, y)
        dense = clone(est).set_params(mode="dense").fit(X, y)
        np.testing.assert_array_equal(auto.labels_, dense.labels_)
        assert auto.execution_ == "series"
    small = X[:, :DENSE_TIME_LIMIT]
    assert dcfa.GenLinCFA(neighbors=A[:DENSE_TIME_LIMIT][:, :DENSE_TIME_LIMIT]).execution_for(
        small
    ) == "dense"  # fmt: skip
    # no neighbourhood, or options the series cannot run: the matrix, as before
    assert dcfa.GenLinCFA(neighbors=None).execution_for(X[:, :5000]) == "dense"
    assert dcfa.GenLinCFA(neighbors=A, missing="pairwise").execution_for(X) == "dense"


@pytest.fixture
def second_dense():
    """A copy of the dense execution registered right after it, as a plugin placed there."""
    from dcfa.cfa import executions
    from dcfa.cfa.executions.dense import Dense

    class DenseCopy(Dense):
        name = "densecopy"

    saved = dict(executions.EXECUTIONS)
    later = [n for n in saved if n != "dense"]
    for name in later:
        executions.unregister(name)
    executions.register(DenseCopy())
    for name in later:
        executions.register(saved[name])
    yield
    executions.unregister("densecopy")


def test_auto_asks_every_execution_that_can_run_whether_it_is_slower(second_dense):
    """Only the first execution that could run was asked: a second one as slow as the
    dense matrix, registered after it, was run instead of the series."""
    from dcfa.cfa.executions.dense import DENSE_TIME_LIMIT

    ds = make_regions_field(60, (60, 140), 6, n_active=2, seed=4)  # 8 400 cells
    X = ds.field.values.reshape(60, -1)
    assert X.shape[1] > DENSE_TIME_LIMIT
    A = grid_adjacency((60, 140), 1)
    assert dcfa.LinCFA(neighbors=A).execution_for(X) == "series"
    # where the series cannot run, the first of the slower ones, as before
    assert dcfa.LinCFA(neighbors=A, missing="pairwise").execution_for(X) == "dense"

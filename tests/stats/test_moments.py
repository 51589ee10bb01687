"""The moments engine against plain NumPy, on easy and hostile data and any chunking."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import count_computes
from dask.core import get_dependencies
from dask.diagnostics import CacheProfiler
from dask.sizeof import sizeof
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

import dcfa
from dcfa import Moments
from dcfa.stats.graph import SLAB_ROWS, column_summary, segment_rows, slab_rows
from dcfa.stats.moments import compute_all

CHUNKINGS = [None, -1, 1, 3, (3, 5, 4)]


def reference(X, y=None):
    """Two-pass float64 NumPy: means, centred cross-products, correlations."""
    Z = np.asarray(X, dtype=np.float64)
    if y is not None:
        Z = np.column_stack([Z, np.asarray(y, dtype=np.float64).reshape(len(Z), -1)])
    mean = Z.mean(axis=0)
    C = (Z - mean).T @ (Z - mean)
    d = np.sqrt(np.diag(C))
    return mean, C, C / np.outer(d, d)


def as_input(X, kind, row_chunks, col_chunks=None):
    if kind == "numpy":
        return X
    if kind == "dask":
        return da.from_array(X, chunks=(row_chunks, col_chunks or -1))
    return xr.DataArray(
        da.from_array(X.reshape(len(X), 3, -1), chunks=(row_chunks, -1, -1)),
        dims=("time", "lat", "lon"),
    )


@pytest.mark.parametrize("kind", ["numpy", "dask", "xarray"])
@pytest.mark.parametrize("row_chunks", [-1, 1, 5, (4, 9, 7)])
def test_matches_numpy_on_random_data(rng, kind, row_chunks):
    X = rng.normal(size=(20, 12)) * rng.uniform(0.1, 10, 12) + rng.normal(size=12)
    y = rng.normal(size=20)
    m = dcfa.moments(as_input(X, kind, row_chunks), y)
    mean, C, R = reference(X, y)
    assert m.n == 20 and m.n_features == 12 and m.n_targets == 1
    np.testing.assert_allclose(m.mean, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.cross, C, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.corr(), R, atol=1e-12)
    np.testing.assert_allclose(m.target_corr()[:, 0], R[:12, 12], atol=1e-12)
    np.testing.assert_allclose(m.feature_corr(), R[:12, :12], atol=1e-12)
    np.testing.assert_allclose(m.cov(), np.cov(np.column_stack([X, y]), rowvar=False), rtol=1e-10)
    np.testing.assert_allclose(m.target_var(), [np.var(y, ddof=1)], rtol=1e-10)
    np.testing.assert_allclose(m.target_var(ddof=0), [np.var(y)], rtol=1e-10)
    assert m.excluded == {}


@pytest.mark.parametrize("col_chunks", [1, 4, 5, (2, 7, 3)])
@pytest.mark.parametrize("row_chunks", [7, (1, 19, 10)])
def test_tiles_along_features(rng, row_chunks, col_chunks):
    X = rng.normal(size=(30, 12)) + 5
    Y = rng.normal(size=(30, 2))
    m = dcfa.moments(da.from_array(X, chunks=(row_chunks, col_chunks)), Y)
    mean, C, R = reference(X, Y)
    np.testing.assert_allclose(m.cross, C, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.corr(), R, atol=1e-12)
    assert m.target_corr().shape == (12, 2)


@pytest.mark.parametrize("offset", [1e6, 1e8, 273.15])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_large_offsets_keep_every_digit(rng, offset, dtype):
    """Kelvin-like offsets with small anomalies: the Chan merge of centred blocks keeps the
    correlations to 1e-9 where the naive sum of squares loses them."""
    n, D = 4000, 6
    spread = 1.0 if dtype == np.float64 or offset < 1e7 else 64.0  # float32 resolution
    X = (offset + spread * rng.normal(size=(n, D))).astype(dtype)
    X[:, 1] = X[:, 0] + (0.3 * spread * rng.normal(size=n)).astype(dtype)
    y = rng.normal(size=n)
    Xd = da.from_array(X, chunks=(97, 4))
    m = dcfa.moments(Xd, y)
    _, _, R = reference(X, y)  # the same float32 values, centred in float64
    assert np.abs(m.corr() - R).max() < 1e-9
    # the naive formula on the same data is far off: the test can tell
    Z = np.column_stack([X.astype(np.float64), y])
    naive = Z.T @ Z - n * np.outer(Z.mean(0), Z.mean(0))
    d = np.sqrt(np.abs(np.diag(naive)))
    with np.errstate(invalid="ignore", divide="ignore"):
        naive_r = naive / np.outer(d, d)
    if offset >= 1e6:
        assert not np.nanmax(np.abs(naive_r - R)) < 1e-6


def _shift_of_whole_columns(a):
    """dcfa's shift policy in plain NumPy over whole columns: the mean of the first 512 rows'
    finite values where it is over 10 of their standard deviations, else 0."""
    a = np.asarray(a[:512], dtype=np.float64)
    obs = np.isfinite(a)
    count = obs.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, np.where(obs, a, 0.0).sum(0) / count, 0.0)
        dev = np.where(obs, a - mean, 0.0)
        std = np.where(count > 0, np.sqrt((dev * dev).sum(0) / count), 0.0)
    return np.where(np.abs(mean) > 10 * std, mean, 0.0)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 600),
    columns=st.sampled_from([1, 2, 3, 2047, 2048, 2049, 2050, 4097, 5000]),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_the_shift_taken_in_column_pieces_is_that_of_whole_columns(rows, columns, seed, dtype):
    """column_shift sums row by row into vectors of the block's width (no temporary of the
    block's size): bit for bit the whole-column result, a single column included; and the grid
    pass's shift of a block with its halo is that of the extended block."""
    from dcfa.stats.kernels import column_shift
    from dcfa.stats.stencil import padded, stencil_shift

    rng = np.random.default_rng(seed)
    a = rng.normal(rng.normal(0, 30, columns), rng.uniform(0.01, 5, columns), (rows, columns))
    a = a.astype(dtype)
    a[rng.random(a.shape) < 0.3] = np.nan
    a[:, rng.integers(columns)] = np.nan
    got = column_shift(a)
    expected = _shift_of_whole_columns(a)
    if got is None:
        assert not expected.any()
    else:
        np.testing.assert_array_equal(got, expected)
    block = a[:, : columns - columns % 4].reshape(rows, 4, -1) if columns >= 4 else None
    if block is not None:
        extended = padded(block, 1, ("nan", "wrap"))
        whole = _shift_of_whole_columns(extended.reshape(rows, -1)).reshape(extended.shape[1:])
        np.testing.assert_array_equal(stencil_shift(block, 1, ("nan", "wrap")), whole)


def test_nan_and_constant_columns_are_excluded_and_reported(rng):
    X = rng.normal(size=(50, 8)) + 280
    X[:, 2] = np.nan  # land cell
    X[:, 5] = 273.15  # constant
    X[10:13, 6] = np.nan  # gappy series
    y = rng.normal(size=50)
    for Xin in (X, da.from_array(X, chunks=(7, 3))):
        m = dcfa.moments(Xin, y)
        assert set(m.excluded) == {2, 5, 6}
        assert m.excluded[2] == "all values missing"
        assert m.excluded[5].startswith("constant")
        assert "3 of 50 values missing" in m.excluded[6]
        assert m.valid.tolist() == [True, True, False, True, True, False, False, True]
        keep = [0, 1, 3, 4, 7]
        _, _, R = reference(X[:, keep], y)
        cols = keep + [8]
        np.testing.assert_allclose(m.corr()[np.ix_(cols, cols)], R, atol=1e-12)


def test_pairwise_complete_statistics(rng):
    n, D = 60, 5
    X = rng.normal(size=(n, D)) + 1e4
    X[rng.uniform(size=(n, D)) < 0.2] = np.nan
    y = rng.normal(size=n)
    m = dcfa.moments(da.from_array(X, chunks=(11, 2)), y, missing="pairwise")
    Z = np.column_stack([X, y])
    for i in range(D + 1):
        for j in range(D + 1):
            both = ~np.isnan(Z[:, i]) & ~np.isnan(Z[:, j])
            assert m.count[i, j] == both.sum()
            np.testing.assert_allclose(m.mean[i, j], Z[both, i].mean(), rtol=1e-13)
            expect = np.corrcoef(Z[both, i], Z[both, j])[0, 1]
            np.testing.assert_allclose(m.corr()[i, j], expect, atol=1e-12)
    assert m.excluded == {}
    np.testing.assert_allclose(m.column_count[:D], (~np.isnan(X)).sum(0))


@settings(max_examples=40, deadline=None)
@given(
    split=st.integers(1, 39),
    row_chunks=chunks(40),
    col_chunks=chunks(6),
    pairwise=st.booleans(),
)
def test_merge_of_two_halves_equals_the_whole(split, row_chunks, col_chunks, pairwise):
    rng = np.random.default_rng(split)
    X = rng.normal(size=(40, 6)) * 3 + 100
    if pairwise:
        X[rng.uniform(size=X.shape) < 0.1] = np.nan
    y = rng.normal(size=40)
    missing = "pairwise" if pairwise else "exclude"
    whole = dcfa.moments(da.from_array(X, chunks=(row_chunks, col_chunks)), y, missing=missing)
    a = dcfa.moments(X[:split], y[:split], missing=missing)
    b = dcfa.moments(X[split:], y[split:], missing=missing)
    merged = a.merge(b)
    assert merged.n == whole.n == 40
    np.testing.assert_allclose(merged.cross, whole.cross, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(merged.column_mean, whole.column_mean, rtol=1e-12)
    np.testing.assert_array_equal(merged.count, whole.count)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(row_chunks=chunks(33), col_chunks=chunks(7))
def test_same_result_for_any_chunking_and_numpy(row_chunks, col_chunks):
    rng = np.random.default_rng(len(row_chunks) * 10 + len(col_chunks))
    X = rng.normal(size=(33, 7)) + 50
    y = rng.normal(size=33)
    ref = dcfa.moments(X, y)
    m = dcfa.moments(da.from_array(X, chunks=(row_chunks, col_chunks)), y)
    np.testing.assert_allclose(m.cross, ref.cross, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(m.mean, ref.mean, rtol=1e-13)


@settings(max_examples=25, deadline=None)
@given(
    row_chunks=chunks(33),
    col_chunks=chunks(7),
    offset=st.sampled_from([0.0, 273.15, 1e8]),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_column_summary_matches_numpy_for_any_chunking(row_chunks, col_chunks, offset, dtype):
    """The standardisation pass (GBMAP's): NumPy's means and centred sums of squares, the
    exact constant-column test and the non-finite count, for any chunking, in memory or not."""
    rng = np.random.default_rng(len(row_chunks) * 10 + len(col_chunks))
    spread = np.geomspace(1e-4, 10, 7) * max(offset, 1)  # above float32's resolution
    X = (rng.normal(size=(33, 7)) * spread + offset).astype(dtype)
    X[:, 2] = X[0, 2]  # constant, though its mean may not round to that value
    x = X.astype(np.float64)
    mean = x.mean(axis=0)
    m2 = ((x - mean) ** 2).sum(axis=0)
    for data in (X, da.from_array(X, chunks=(row_chunks, col_chunks))):
        s = column_summary(data)
        if isinstance(data, da.Array):
            (s,) = dask.compute(s, scheduler="sync")
        assert s["n"] == 33 and s["nonfinite"] == 0
        np.testing.assert_array_equal(s["count"], 33)
        # a mean's rounding error is relative to the values' size, not to the mean (near 0)
        error = np.abs(s["shift"] + s["centre"] - mean)
        np.testing.assert_array_less(error, 1e-14 * (np.abs(mean) + offset + spread))
        np.testing.assert_allclose(s["m2"], m2, rtol=1e-9, atol=1e-12 * 33)
        assert s["constant"].tolist() == [j == 2 for j in range(7)]


def test_column_summary_counts_non_finite_entries(rng):
    X = rng.normal(size=(40, 5))
    X[3, 1], X[30, 1], X[7, 4] = np.nan, np.inf, -np.inf
    for data in (X, da.from_array(X, chunks=(9, 2))):
        s = column_summary(data)
        if isinstance(data, da.Array):
            (s,) = dask.compute(s, scheduler="sync")
        assert s["nonfinite"] == 3
        np.testing.assert_array_equal(s["count"], [40, 38, 40, 40, 39])
        clean = [0, 2, 3]  # a non-finite value never leaks into another column
        np.testing.assert_allclose(s["centre"][clean] + s["shift"][clean], X[:, clean].mean(0))


def test_column_summary_holds_no_column_by_column_tile(rng):
    """Per-column statistics only: no task of the pass returns a ``p x p`` product."""
    X = da.from_array(rng.normal(size=(64, 300)), chunks=(16, 300))
    with CacheProfiler(metric=sizeof) as prof:
        dask.compute(column_summary(X), scheduler="sync")
    assert max(r.metric for r in prof.results) < 300 * 300 * 8 / 10


def test_segments_are_the_moments_of_each_row_range(rng):
    X = rng.normal(size=(50, 4))
    y = rng.normal(size=50)
    bounds = [0, 13, 14, 40, 50]
    parts = dcfa.moments(da.from_array(X, chunks=(9, 3)), y, segments=bounds)
    assert [p.n for p in parts] == [13, 1, 26, 10]
    for p, (a, b) in zip(parts, zip(bounds[:-1], bounds[1:], strict=True), strict=True):
        if b - a > 1:
            _, C, _ = reference(X[a:b], y[a:b])
            np.testing.assert_allclose(p.cross, C, rtol=1e-10, atol=1e-12)
    whole = Moments.merge_all(parts)
    np.testing.assert_allclose(whole.cross, reference(X, y)[1], rtol=1e-10)


def test_whole_pass_is_one_compute_and_lazy_is_none(rng):
    X = da.from_array(rng.normal(size=(40, 6)), chunks=(10, 3))
    y = rng.normal(size=40)
    with count_computes(0):
        lazy = dcfa.moments(X, y, compute=False, segments=[0, 20, 40])
    assert lazy[0].is_lazy
    with count_computes(1) as counter:
        dcfa.moments(X, y)
    assert counter.total == 1
    done = [p.compute() for p in lazy]
    np.testing.assert_allclose(Moments.merge_all(done).cross, dcfa.moments(X, y).cross, atol=1e-10)


def test_no_task_reads_more_than_two_input_chunks(rng):
    X = da.from_array(rng.normal(size=(60, 20)), chunks=(10, 5))
    lazy = dcfa.moments(X, rng.normal(size=60), compute=False)
    graph = dict(lazy.cross.__dask_graph__())
    x_keys = {k for k in graph if isinstance(k, tuple) and k[0] == X.name}
    tiles = [k for k in graph if isinstance(k, tuple) and "tiles" in str(k[0]) and k[1] == "chunk"]
    assert len(tiles) == 6 * (5 * 6 // 2)  # row chunks x tiles of 5 blocks (4 of X, 1 of y)
    for k in tiles:
        deps = get_dependencies(graph, k) & x_keys
        assert len(deps) <= 2


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=12),
    cuts=st.lists(st.integers(0, 400), max_size=4),
    width=st.integers(1, 120),
)
def test_slabs_join_whole_chunks_of_one_segment_up_to_their_cap(sizes, cuts, width):
    n = sum(sizes)
    bounds = sorted({0, n, *(c % n for c in cuts)})
    slabs, seg = slab_rows(tuple(sizes), bounds, width)
    cap = min(SLAB_ROWS, 2 * width)
    edges = np.cumsum((0, *slabs))
    assert edges[-1] == n
    # only chunk edges and segment bounds, and every segment bound
    assert set(edges) <= set(np.cumsum((0, *sizes))) | set(bounds)
    assert set(bounds) <= set(edges)
    pieces, _ = segment_rows(tuple(sizes), bounds)
    for k, (a, b) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        assert bounds[seg[k]] <= a < b <= bounds[seg[k] + 1]
        inside = [p for p in np.cumsum((0, *pieces)) if a < p < b]
        assert b - a <= cap or not inside  # over the cap only as one piece
    # greedy: no two neighbours of one segment fit in one slab
    for k in range(len(slabs) - 1):
        assert seg[k] != seg[k + 1] or slabs[k] + pieces_after(pieces, edges[k + 1]) > cap


def pieces_after(pieces, start):
    """The size of the piece (chunk cut at segment bounds) that starts at row ``start``."""
    edges = np.cumsum((0, *pieces))
    return pieces[int(np.flatnonzero(edges == start)[0])]


def test_a_dense_pass_multiplies_slabs_and_merges_less(rng):
    """Short row chunks of wide blocks are joined: one product per slab and tile, not one
    product and a merge of the whole tile per chunk; the numbers are NumPy's."""
    X = rng.normal(size=(300, 120)) + 50.0
    y = rng.normal(size=300)
    lazy = dcfa.moments(da.from_array(X, chunks=(30, 60)), y, compute=False, tiles=True)
    graph = dict(lazy.cross.tiles[0, 0].__dask_graph__())
    products = [k for k in graph if isinstance(k, tuple) and k[1:2] == ("chunk",)]
    # 6 upper tiles of 3 blocks (2 of X, y) x 3 slabs of at most 120 rows (4, 4, 2 chunks)
    assert len(products) == 6 * 3
    m = lazy.compute()
    mean, C, _ = reference(X, y)
    np.testing.assert_allclose(m.mean, mean, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(m.cross), C, rtol=1e-10, atol=1e-9)


def test_a_wide_chunk_is_cut_into_tiles_that_run_in_parallel(rng):
    """One 2 500-column chunk was one task (one product, on one pinned BLAS thread); its
    columns are now cut to tiles of at most 1 024, and the matrix is still NumPy's."""
    X = rng.normal(size=(40, 2_500))
    lazy = dcfa.moments(da.from_array(X, chunks=(40, 2_500)), compute=False)
    graph = dict(lazy.cross.__dask_graph__())
    products = [k for k in graph if isinstance(k, tuple) and k[1:2] == ("chunk",)]
    assert len(products) == 6  # the upper tiles of 3 blocks of 834, 833 and 833 columns
    _, C, _ = reference(X)
    np.testing.assert_allclose(lazy.compute().cross, C, rtol=1e-10, atol=1e-9)


def test_data_held_does_not_grow_with_n():
    """Peak bytes of live task results (input chunks, tiles, partial merges) during the pass
    over a lazily generated array stay at a few chunks, for 16 or 256 row chunks alike (if they
    grew with n, 256 chunks would be far above the bound). Measured with the synchronous
    scheduler: what keeps the held data flat is the graph's order and tree reduction, and one
    thread makes the peak a property of the graph (2.6 and 3.3 chunks); with two threads it also
    depends on the machine's load (3.6 typically, 8.1 once in CI beside the parallel suite)."""
    chunk_bytes = 2_000 * 50 * 8

    def peak_in_chunks(n):
        X = da.random.default_rng(0).normal(size=(n, 100), chunks=(2_000, 50))
        with (
            dask.config.set(scheduler="sync"),
            CacheProfiler(metric=sizeof) as prof,
        ):
            dcfa.moments(X)
        events = sorted(
            [(r.cache_time, r.metric) for r in prof.results]
            + [(r.free_time, -r.metric) for r in prof.results]
        )
        return max(np.cumsum([d for _, d in events])) / chunk_bytes

    assert peak_in_chunks(32_000) < 8
    assert peak_in_chunks(512_000) < 8


def test_save_load_round_trip_and_refuses_to_overwrite(rng, tmp_path):
    X = rng.normal(size=(30, 5))
    X[:, 1] = np.nan
    for missing in ("exclude", "pairwise"):
        m = dcfa.moments(X, rng.normal(size=30), missing=missing)
        path = m.save(tmp_path / f"m-{missing}.zarr")
        back = Moments.load(path)
        assert back.n == m.n and back.pairwise == m.pairwise and back.excluded == m.excluded
        np.testing.assert_array_equal(back.cross, m.cross)
        np.testing.assert_array_equal(back.mean, m.mean)
        with pytest.raises(FileExistsError, match="overwrite=True"):
            m.save(path)
        m.save(path, overwrite=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp leftovers
    with pytest.raises(FileNotFoundError, match="path"):
        Moments.load(tmp_path / "missing.zarr")


def test_merge_rejects_incompatible_moments(rng):
    a = dcfa.moments(rng.normal(size=(10, 3)))
    b = dcfa.moments(rng.normal(size=(10, 4)))
    with pytest.raises(ValueError, match="other: can only merge"):
        a.merge(b)
    with pytest.raises(TypeError, match="other"):
        a.merge(np.zeros(3))
    with pytest.raises(ValueError, match="parts: can only merge"):
        Moments.merge_all([a, a, b])
    with pytest.raises(TypeError, match="parts: expected Moments, got ndarray"):
        Moments.merge_all([a, np.zeros(3)])
    with pytest.raises(ValueError, match="parts: need at least one"):
        Moments.merge_all([])


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(missing="drop"), ValueError, "missing: expected one of"),
        (dict(segments=[0, 5, 5, 10]), ValueError, "segments: expected strictly increasing"),
        (dict(segments=[1, 10]), ValueError, "segments"),
        (dict(split_every=1), ValueError, "split_every"),
    ],
)
def test_bad_arguments(rng, kwargs, err, match):
    X = da.from_array(rng.normal(size=(10, 3)), chunks=5)
    with pytest.raises(err, match=match):
        dcfa.moments(X, **kwargs)


class _Keys(dask.callbacks.Callback):
    """The keys of the tasks a local computation runs."""

    def __init__(self):
        super().__init__()
        self.keys = []

    def _pretask(self, key, dask, state):
        self.keys.append(key)


def _ran_tiles(keys) -> bool:
    return any("dcfa-moments-tiles" in str(k) for k in keys)


@pytest.fixture
def threads():
    """The local threaded scheduler, even where an earlier test left its client as the
    default (whose tasks would run on the cluster, unseen by :class:`_Keys`)."""
    with dask.config.set(scheduler="threads"):
        yield


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_short_wide_local_pass_runs_as_one_kernel_with_the_tiles_numbers(rng, dtype, threads):
    """A pass whose rows take less memory than the matrix, on the local scheduler, loads the
    rows and runs one kernel; the tiles give the same moments (and exclude the same columns)."""
    X = (rng.normal(size=(60, 300)) * rng.uniform(0.5, 2, 300) + 280.0).astype(dtype)
    X[7, 11] = np.nan
    Xd = da.from_array(X, chunks=(20, 100))
    y = rng.normal(size=60)
    with _Keys() as seen, count_computes(1):
        m = dcfa.moments(Xd, y, segments=[0, 30, 60])
    assert seen.keys
    assert not _ran_tiles(seen.keys)
    with _Keys() as seen:
        tiled = Moments.merge_all(
            compute_all(dcfa.moments(Xd, y, segments=[0, 30, 60], compute=False))
        )
    assert _ran_tiles(seen.keys)
    whole = Moments.merge_all(m)
    assert whole.excluded == tiled.excluded
    assert list(whole.excluded) == [11]
    keep = np.flatnonzero(~np.isin(np.arange(301), [11]))
    np.testing.assert_allclose(whole.mean[keep], tiled.mean[keep], rtol=1e-13)
    np.testing.assert_allclose(
        whole.cross[np.ix_(keep, keep)], tiled.cross[np.ix_(keep, keep)], rtol=1e-10, atol=1e-8
    )
    Z = np.column_stack([np.delete(X, 11, axis=1).astype(np.float64), y])
    Zc = Z - Z.mean(axis=0)
    np.testing.assert_allclose(whole.cross[np.ix_(keep, keep)], Zc.T @ Zc, rtol=1e-9, atol=1e-7)


def test_a_tall_pass_and_a_tiled_one_keep_the_tiles(rng, threads):
    X = da.from_array(rng.normal(size=(400, 300)), chunks=(100, 100))
    with _Keys() as seen:
        dcfa.moments(X)
    assert _ran_tiles(seen.keys)  # rows as large as the matrix: the tiles hold less
    wide = da.from_array(rng.normal(size=(40, 300)), chunks=(20, 100))
    with _Keys() as seen:
        dcfa.moments(wide, tiles=True)
    assert _ran_tiles(seen.keys)  # asked for tiles: never a whole matrix

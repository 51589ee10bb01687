"""The upper block tiles of the dense pass (dcfa.stats.symmetric): read like the matrix they
stand for, the same moments as the assembled pass, merged bit for bit like the matrices."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

import dcfa
from dcfa import Moments
from dcfa.stats.symmetric import TILE_COLUMNS, SymmetricTiles, tile_columns


def _random_tiles(rng, widths):
    """Tiles of random numbers; the diagonal ones deliberately not symmetric."""
    edges = np.cumsum((0, *widths))
    n = len(widths)
    tiles = {(i, j): rng.normal(size=(widths[i], widths[j])) for i in range(n) for j in range(i, n)}
    return SymmetricTiles(edges, tiles)


def _assembled(m: SymmetricTiles) -> np.ndarray:
    """The matrix, built independently: upper tiles as they are, the lower blocks their
    transposes."""
    e = m.edges
    full = np.zeros(m.shape)
    for (i, j), t in m.tiles.items():
        full[e[i] : e[i + 1], e[j] : e[j + 1]] = t
        if i != j:
            full[e[j] : e[j + 1], e[i] : e[i + 1]] = t.T
    return full


@settings(max_examples=40, deadline=None)
@given(widths=chunks(23), seed=st.integers(0, 2**16))
def test_tiles_read_as_the_matrix(widths, seed):
    rng = np.random.default_rng(seed)
    m = _random_tiles(rng, widths)
    full = _assembled(m)
    p = full.shape[0]
    np.testing.assert_array_equal(np.asarray(m), full)
    np.testing.assert_array_equal(m.diagonal(), np.diagonal(full))
    rows = rng.choice(p, size=rng.integers(1, p + 1), replace=False)
    cols = rng.integers(0, p, size=rng.integers(1, 2 * p))  # repeats too
    for a in (0, p - 1, -1, int(rng.integers(p))):
        np.testing.assert_array_equal(m[a], full[a])
        np.testing.assert_array_equal(m[a, cols], full[a, cols])
        np.testing.assert_array_equal(m[rows, a], full[rows, a])
        assert m[a, int(cols[0])] == full[a, cols[0]]
    np.testing.assert_array_equal(m[np.ix_(rows, cols)], full[np.ix_(rows, cols)])
    np.testing.assert_array_equal(m[3:17, 2:], full[3:17, 2:])
    np.testing.assert_array_equal(m[:, :], full)
    with pytest.raises(IndexError, match="np.ix_"):
        m[rows, rows]
    with pytest.raises(IndexError):
        m[p]


def test_tile_columns_cut_wide_chunks_only():
    assert tile_columns((2500,)) == (834, 833, 833)
    assert tile_columns((300, 2048, 1024)) == (300, 1024, 1024, 1024)
    for widths in [(1,), (TILE_COLUMNS + 1, 5), (11_340,), (7, 60_000)]:
        out = tile_columns(widths)
        assert sum(out) == sum(widths) and max(out) <= TILE_COLUMNS
    assert len(tile_columns((11_340,))) == 12


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(row_chunks=chunks(60), col_chunks=chunks(9), cut=st.integers(1, 59))
def test_tiled_moments_are_the_assembled_moments_bit_for_bit(row_chunks, col_chunks, cut):
    """Chunks narrower than TILE_COLUMNS are kept: the same tasks, so the same numbers."""
    rng = np.random.default_rng(len(row_chunks) + 10 * len(col_chunks))
    X = rng.normal(size=(60, 9)) + 280.0
    X[:, 4] = X[:, 3] + 0.1 * rng.normal(size=60)
    y = rng.normal(size=60)
    Xd = da.from_array(X, chunks=(row_chunks, col_chunks))
    segments = [0, cut, 60]
    tiled = dcfa.moments(Xd, y, segments=segments, tiles=True)
    full = dcfa.moments(Xd, y, segments=segments)
    for t, f in zip(tiled, full, strict=True):
        assert isinstance(t.cross, SymmetricTiles) and t.cross.n_blocks == len(col_chunks) + 1
        np.testing.assert_array_equal(np.asarray(t.cross), f.cross)
        np.testing.assert_array_equal(t.mean, f.mean)
        np.testing.assert_array_equal(t.count, f.count)
        np.testing.assert_array_equal(t.corr(), f.corr())
        np.testing.assert_array_equal(t.cov(), f.cov())
    # merged tile by tile: the Chan merge of the matrices, element for element
    np.testing.assert_array_equal(
        np.asarray(Moments.merge_all(tiled).cross), Moments.merge_all(full).cross
    )
    merged_t, merged_f = Moments.merge_all(tiled), Moments.merge_all(full)
    assert isinstance(merged_t.cross, SymmetricTiles)
    np.testing.assert_array_equal(merged_t.mean, merged_f.mean)
    np.testing.assert_array_equal(merged_t.count, merged_f.count)
    assert merged_t.n == merged_f.n == 60


def test_a_wide_chunk_is_cut_into_tiles_holding_about_half_the_matrix(rng, tmp_path):
    D = 2500
    X = rng.normal(size=(40, D)) @ np.diag(rng.uniform(0.5, 2, D)) + 10.0
    y = X[:, :3].sum(axis=1) + rng.normal(size=40)
    m = dcfa.moments(da.from_array(X, chunks=(10, D)), y, tiles=True)
    assert m.cross.n_blocks == 4  # 834 + 833 + 833 columns, and the target
    w = np.array([834, 833, 833, 1])
    assert m.cross.nbytes == 8 * (w.sum() ** 2 + (w * w).sum()) // 2 < 0.7 * 8 * (D + 1) ** 2
    Z = np.column_stack([X, y])
    Zc = Z - Z.mean(axis=0)
    np.testing.assert_allclose(np.asarray(m.cross), Zc.T @ Zc, rtol=1e-10, atol=1e-8)
    # the public value keeps working: statistics, and a store that loads as the matrix
    np.testing.assert_allclose(m.target_corr()[:, 0], np.corrcoef(Z.T)[:D, D], atol=1e-12)
    back = Moments.load(m.save(tmp_path / "m.zarr"))
    np.testing.assert_array_equal(back.cross, np.asarray(m.cross))


def test_tiles_need_the_exclude_policy(rng):
    with pytest.raises(ValueError, match="tiles: .*missing='exclude'"):
        dcfa.moments(rng.normal(size=(10, 3)), missing="pairwise", tiles=True)


def test_in_memory_tiles_are_one_tile_of_the_kernels_matrix(rng):
    X = rng.normal(size=(50, 6))
    m = dcfa.moments(X, tiles=True)
    assert m.cross.n_blocks == 1
    np.testing.assert_array_equal(np.asarray(m.cross), dcfa.moments(X).cross)


@pytest.mark.parametrize("name", ["LinCFA", "GenLinCFA", "NonLinCFA"])
def test_a_dense_fit_keeps_its_moments_as_tiles(rng, name):
    """mode='dense' on Dask input: the partition reads the tiles; refitting from the fitted
    moments, and fitting in memory, give the same labels."""
    X = rng.normal(size=(100, 5)).repeat(4, axis=1) + 0.4 * rng.normal(size=(100, 20))
    y = X[:, 0] - X[:, 10] + rng.normal(size=100)
    est = getattr(dcfa, name)(mode="dense", random_state=0)
    got = est.fit(da.from_array(X, chunks=(25, 7)), y)
    stats = getattr(got, "segment_moments_", None) or [got.moments_]
    assert all(isinstance(m.cross, SymmetricTiles) for m in stats)
    ref = getattr(dcfa, name)(mode="dense", random_state=0).fit(X, y)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    again = getattr(dcfa, name)(mode="dense", random_state=0).fit(
        X, y, moments=stats if name == "NonLinCFA" else stats[0]
    )
    np.testing.assert_array_equal(again.labels_, ref.labels_)

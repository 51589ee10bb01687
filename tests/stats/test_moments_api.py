"""The statistics API and the memory guard as a demanding user tries them: merges that keep
every digit, refusals that say what fits, estimates that bound the peak, saves that never
write into a user's store, loads that say what a path holds, lazy moments.

References are independent of dcfa: exact rational arithmetic (``fractions``) for the centred
cross-products, NumPy for the rest; memory is measured with ``tracemalloc``.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import chunks
from support import _traced_peak

import dcfa
from dcfa.memory import MemoryBudgetError, estimate_moments
from dcfa.stats.grid import GridMoments
from dcfa.stats.kinds import load_moments
from dcfa.storage.store import OutputError


def _exact(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and centred cross-products of the float64 values of ``Z``, computed
    exactly (rationals) and rounded once."""
    n, p = Z.shape
    F = [[Fraction(float(v)) for v in row] for row in Z]
    mu = [sum(F[r][j] for r in range(n)) / n for j in range(p)]
    C = np.empty((p, p))
    for i in range(p):
        for j in range(i, p):
            C[i, j] = C[j, i] = float(sum((F[r][i] - mu[i]) * (F[r][j] - mu[j]) for r in range(n)))
    return np.array([float(m) for m in mu]), C


def _offset_data(seed=0, n=60, D=5):
    """Anomalies of unit (and one of 1e-3) spread on an offset of 1e8, a target likewise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) + 1e8
    X[:, 1] = rng.normal(size=n) * 1e-3 + 1e8
    y = rng.normal(size=n) + 1e8
    return X, y


def _cross_error(m, C) -> float:
    scale = np.sqrt(np.outer(np.diag(C), np.diag(C)))
    return float(np.max(np.abs(np.asarray(m.cross) - C) / scale))


# -- merging two periods loses no digits --------------------------------------------------


@pytest.mark.parametrize("kind", ["numpy", "dask", "tiles", "pairwise"])
def test_merge_of_two_periods_keeps_every_digit_on_a_large_offset(kind):
    """Moments of two periods merged = moments of their concatenation, to float64 rounding
    (the rounded means of values near 1e8 are 1.5e-8 off: subtracting them cost 7 digits)."""
    X, y = _offset_data()
    mu, C = _exact(np.column_stack([X, y]))

    def moments(rows):
        Xp = X[rows] if kind in ("numpy", "pairwise") else da.from_array(X[rows], chunks=(7, 2))
        missing = "pairwise" if kind == "pairwise" else "exclude"
        return dcfa.moments(Xp, y[rows], missing=missing, tiles=kind == "tiles")

    a, b = moments(slice(0, 23)), moments(slice(23, None))
    for merged in (
        a.merge(b),
        dcfa.Moments.merge_all([moments(slice(i, i + 1)) for i in range(60)]),
    ):
        assert _cross_error(merged, C) < 1e-13
        # the means: as rounded as always (a few ulps of 1e8), and with their rounding
        # error kept: mean + mean_lo within one rounding of the exact ones
        assert np.all(np.abs(merged.column_mean - mu) <= 4 * np.spacing(mu))
        lo = np.diagonal(merged.mean_lo) if merged.pairwise else merged.mean_lo
        assert np.all(np.abs((merged.column_mean - mu) + lo) <= np.spacing(mu))
        assert merged.n == 60


def test_saved_moments_merge_as_precisely_and_old_stores_still_load(tmp_path):
    X, y = _offset_data(1)
    mu, C = _exact(np.column_stack([X, y]))
    a, b = dcfa.moments(X[:30], y[:30]), dcfa.moments(X[30:], y[30:])
    a.save(tmp_path / "a.zarr")
    b.save(tmp_path / "b.zarr")
    la, lb = dcfa.Moments.load(tmp_path / "a.zarr"), dcfa.Moments.load(tmp_path / "b.zarr")
    assert _cross_error(la.merge(lb), C) < 1e-13
    # a store written before the residual of the means was kept: it loads, and merges
    # with the rounded means (the precision of then)
    old = tmp_path / "b.zarr"
    for entry in old.iterdir():
        if entry.name == "mean_lo":
            for f in sorted(entry.rglob("*"), reverse=True):
                f.unlink() if f.is_file() else f.rmdir()
            entry.rmdir()
    meta = json.loads((old / "zarr.json").read_text())
    assert "mean_lo" not in json.dumps(meta.get("consolidated_metadata") or {})
    lo = dcfa.Moments.load(old)
    assert lo.mean_lo is None
    assert np.array_equal(lo.cross, b.cross) and np.array_equal(lo.mean, b.mean)
    assert _cross_error(la.merge(lo), C) < 1e-6


@pytest.mark.parametrize("cuts", [(23,), (10, 31, 47), tuple(range(1, 60))])
def test_fold_rows_are_the_merge_bit_for_bit_on_a_large_offset(cuts):
    """NonLinCFA's training folds read rows of merged segments without building the matrix
    (dcfa.cfa.basis.MergedMoments): every row, mean and diagonal equals Moments.merge_all's
    bit for bit, and keeps its digits at a 1e8 offset (before, the fold rows merged the
    rounded means: 1e-9 off, and no longer the merge's numbers)."""
    from dcfa.stats.merged import MergedMoments

    X, y = _offset_data(2)
    _, C = _exact(np.column_stack([X, y]))
    edges = [0, *cuts, X.shape[0]]
    parts = [dcfa.moments(X[a:b], y[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    merged, rows = dcfa.Moments.merge_all(parts), MergedMoments(parts)
    np.testing.assert_array_equal(rows.mean, merged.mean)
    np.testing.assert_array_equal(rows.column_m2, np.diagonal(merged.cross))
    block = rows.block(np.arange(rows.n_columns), np.arange(rows.n_columns))
    np.testing.assert_array_equal(block, merged.cross)
    assert _cross_error(merged, C) < 1e-13


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_merged_periods_match_the_whole_across_chunkings(data):
    """Any cut into two periods, any chunking of each: merge == one pass, to 1e-12."""
    X, y = _offset_data(2, n=40, D=4)
    cut = data.draw(st.integers(1, 39))
    whole = dcfa.moments(X, y)

    def part(rows):
        Xp = X[rows]
        c = (data.draw(chunks(Xp.shape[0])), data.draw(chunks(Xp.shape[1])))
        return dcfa.moments(da.from_array(Xp, chunks=c), y[rows])

    merged = part(slice(0, cut)).merge(part(slice(cut, None)))
    scale = np.sqrt(np.outer(np.diag(whole.cross), np.diag(whole.cross)))
    assert np.max(np.abs(merged.cross - whole.cross) / scale) < 1e-12
    assert np.array_equal(merged.count, whole.count)


# -- what would fit does fit ----------------------------------------------------------------


def _would_fit(message: str) -> int:
    return int(re.search(r"About ([\d,]+) features would fit", message).group(1).replace(",", ""))


@pytest.mark.parametrize("who", ["moments", "LinCFA"])
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_the_features_the_refusal_says_would_fit_do_fit(who, kind):
    """The refusal's "About K features would fit": the same call on K is not refused (the old
    count scaled the whole estimate as p^2, but the input's chunks grow as p)."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=2000)
    X = (
        rng.normal(size=(2000, 3000))
        if kind == "numpy"
        else da.zeros((2000, 3000), chunks=(500, 1000))
    )

    def run(X):
        if who == "moments":
            return dcfa.moments(X, y, compute=False)  # the check runs for an in-memory X
        return dcfa.LinCFA(mode="dense").fit(X, y)

    budget = "60MB" if kind == "dask" else "100MB"
    # the local scheduler (a session cluster left as the default client would make it a
    # worker's refusal, which counts chunks, not features)
    with dask.config.set({"dcfa.memory_budget": budget, "scheduler": "threads"}):
        with pytest.raises(MemoryBudgetError) as info:
            if who == "moments" and kind == "dask":
                dcfa.moments(X, y)
            else:
                run(X)
        k = _would_fit(str(info.value))
        assert 0 < k < 3000
        fits = X[:, :k]
        if who == "moments":
            estimate = estimate_moments(2000, k, n_targets=1, data=fits)
            assert estimate.driver_bytes <= dcfa.memory.memory_budget().driver
        else:
            dcfa.memory.check_dense(dcfa.LinCFA(mode="dense"), 2000, k, data=fits)


# -- the estimate bounds the measured peak under the local scheduler ------------------------


def test_estimate_bounds_the_moments_pass_of_a_dask_input_on_one_thread():
    """Small tiles keep the tree: each row chunk's partial tile of every tile waits for its
    merge (the scheduler runs a row chunk's tasks across tiles to release that chunk). The
    estimate counted only the running tasks and fell below the measured peak (0.83 of it)."""
    n, D = 1000, 3000
    X = da.random.default_rng(0).normal(size=(n, D), chunks=(n // 4, D // 2))
    y = np.random.default_rng(1).normal(size=n)
    with dask.config.set(scheduler="sync"):
        dcfa.moments(X[:, :20], y)  # imports and caches outside the measurement
        estimate = estimate_moments(n, D, n_targets=1, data=X).driver_bytes
        # tracemalloc counts every thread of the process: the least of two runs leaves out
        # what another test's threads allocated meanwhile (xdist runs many in one process)
        measured = min(_traced_peak(lambda: dcfa.moments(X, y)) for _ in range(2))
    assert measured <= estimate <= 2 * measured, (estimate / 2**20, measured / 2**20)


# -- saving never writes inside someone else's store; loading says what is there ---------


def _listing(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_save_refuses_a_path_inside_a_zarr_store_dcfa_did_not_write(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 9)), rng.normal(size=30)
    store = tmp_path / "input.zarr"
    xr.Dataset({"sst": (("time", "cell"), X)}).to_zarr(store, zarr_format=3, consolidated=False)
    before = _listing(tmp_path)
    m = dcfa.moments(X, y)
    for where in (store / "moments", store / "sst" / "moments.zarr"):
        with pytest.raises(OutputError, match=r"inside the Zarr store .*did not write"):
            m.save(where)
    g = dcfa.grid_moments(
        xr.DataArray(X.reshape(30, 3, 3), dims=("time", "lat", "lon")), y, radius=1
    )
    with pytest.raises(OutputError, match="inside the Zarr store"):
        g.save(store / "grid")
    assert _listing(tmp_path) == before  # nothing written, nothing left behind
    # beside it, or inside a directory that is no store, is fine
    m.save(tmp_path / "m.zarr")
    (tmp_path / "plain").mkdir()
    m.save(tmp_path / "plain" / "m.zarr")
    assert np.array_equal(dcfa.Moments.load(tmp_path / "plain" / "m.zarr").cross, m.cross)


def test_load_says_what_the_path_holds(tmp_path):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 9)), rng.normal(size=30)
    dcfa.moments(X, y).save(tmp_path / "m.zarr")
    dcfa.grid_moments(
        xr.DataArray(X.reshape(30, 3, 3), dims=("time", "lat", "lon")), y, radius=1
    ).save(tmp_path / "g.zarr")
    (tmp_path / "notes.txt").write_text("mine")
    xr.Dataset({"v": (("t",), y)}).to_zarr(
        tmp_path / "other.zarr", zarr_format=3, consolidated=False
    )
    with pytest.raises(ValueError, match=r"holds dcfa GridMoments, not Moments.*load_moments"):
        dcfa.Moments.load(tmp_path / "g.zarr")
    with pytest.raises(ValueError, match=r"holds dcfa Moments, not GridMoments"):
        GridMoments.load(tmp_path / "m.zarr")
    for load in (dcfa.Moments.load, GridMoments.load, load_moments):
        with pytest.raises(ValueError, match=r"'.*notes.txt' is not a dcfa"):
            load(tmp_path / "notes.txt")
        with pytest.raises(ValueError, match=r"'.*other.zarr' is not a dcfa"):
            load(tmp_path / "other.zarr")
        with pytest.raises(FileNotFoundError, match="no moments store"):
            load(tmp_path / "missing.zarr")
    assert (tmp_path / "notes.txt").read_text() == "mine"


# -- lazy moments -------------------------------------------------------------------------


def test_lazy_moments_say_how_to_compute_and_fit_computes_them():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 6)), rng.normal(size=50)
    lazy = dcfa.moments(da.from_array(X, chunks=10), y, compute=False)
    assert "lazy" in repr(lazy)
    for use in (
        lambda m: m.excluded,
        lambda m: m.corr(),
        lambda m: m.target_corr(),
        lambda m: m.cov(),
        lambda m: m.column_var(),
        lambda m: m.merge(m),
    ):
        with pytest.raises(ValueError, match=r"lazy.*m\.compute\(\)"):
            use(lazy)
    done = lazy.compute()
    assert np.allclose(done.corr(), np.corrcoef(np.column_stack([X, y]), rowvar=False))
    fitted = dcfa.LinCFA(random_state=0).fit(X, y, moments=lazy)
    assert np.array_equal(fitted.labels_, dcfa.LinCFA(random_state=0).fit(X, y).labels_)


# -- grid moments: the same digits on a large offset ---------------------------------------


def _grid_case(seed=0, n=90, shape=(4, 5)):
    rng = np.random.default_rng(seed)
    field = rng.normal(size=(n, *shape)) + 1e8
    y = rng.normal(size=n) + 1e8
    Z = np.column_stack([field.reshape(n, -1), y])
    return xr.DataArray(field, dims=("time", "lat", "lon")), y, _exact(Z)


def _grid_errors(g, exact) -> dict:
    mu, C = exact
    D = g.n_features
    nbr = g.offset_cells()
    sd = np.sqrt(np.diag(C))
    ref = np.where(nbr >= 0, C[np.arange(D)[:, None], np.maximum(nbr, 0)], 0.0)
    return {
        "cross": np.max(np.abs(g.cross - ref) / (sd[:D, None] * sd[np.maximum(nbr, 0)])),
        "diag": np.max(np.abs(g.diag - np.diag(C)[:D]) / np.diag(C)[:D]),
        "target_cross": np.max(np.abs(g.target_cross - C[:D, D]) / (sd[:D] * sd[D])),
        "target_ss": abs(g.target_ss - C[D, D]) / C[D, D],
    }


@pytest.mark.parametrize("time_chunk", [90, 13, 1])
def test_grid_moments_of_an_offset_target_keep_every_digit_across_time_chunks(time_chunk):
    """The target's chunk means were merged as 1e8 + anomaly: 2e-9 of its sum of squares and
    cross-products lost with time chunks (the field's cells were shifted, the target not)."""
    field, y, exact = _grid_case()
    g = dcfa.grid_moments(field.chunk({"time": time_chunk}), y, radius=1)
    assert max(_grid_errors(g, exact).values()) < 1e-13
    assert abs(g.target_mean - exact[0][-1]) <= np.spacing(1e8)


def test_grid_moments_of_two_periods_merge_to_the_whole(tmp_path):
    field, y, exact = _grid_case(1)
    a = dcfa.grid_moments(field[:37], y[:37], radius=1)
    b = dcfa.grid_moments(field[37:], y[37:], radius=1)
    assert max(_grid_errors(GridMoments.merge_all([a, b]), exact).values()) < 1e-13
    # through a save and a load, and from a store written before the residuals were kept
    a.save(tmp_path / "a.zarr")
    b.save(tmp_path / "b.zarr")
    la, lb = GridMoments.load(tmp_path / "a.zarr"), GridMoments.load(tmp_path / "b.zarr")
    assert np.array_equal(la.mean_lo, a.mean_lo) and la.target_mean_lo == a.target_mean_lo
    assert max(_grid_errors(GridMoments.merge_all([la, lb]), exact).values()) < 1e-13
    old = tmp_path / "b.zarr"
    for f in sorted((old / "mean_lo").rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    (old / "mean_lo").rmdir()
    meta = json.loads((old / "zarr.json").read_text())
    del meta["attributes"]["target_mean_lo"]
    (old / "zarr.json").write_text(json.dumps(meta))
    lo = GridMoments.load(old)
    assert lo.mean_lo is None and lo.target_mean_lo is None
    assert max(_grid_errors(GridMoments.merge_all([la, lo]), exact).values()) < 1e-6


def test_moments_on_a_cluster_match_the_threaded_scheduler(client):
    """The new fields (the means' rounding errors) come through the workers too."""
    X, y = _offset_data(3, n=80, D=9)
    X[5:9, 2] = np.nan
    Xd = da.from_array(X, chunks=((1, 40, 39), (4, 5)))
    field = xr.DataArray(X.reshape(80, 3, 3), dims=("time", "lat", "lon")).chunk({"time": 17})
    with dask.config.set(scheduler="threads"):
        local = [dcfa.moments(Xd, y, missing=m) for m in ("exclude", "pairwise")]
        grid = dcfa.grid_moments(field, y, radius=1)
    remote = [dcfa.moments(Xd, y, missing=m) for m in ("exclude", "pairwise")]
    for a, b in zip(local, remote, strict=True):
        ok = np.isfinite(a.cross)
        assert np.allclose(a.cross[ok], b.cross[ok], rtol=1e-12, atol=0)
        assert np.array_equal(a.mean, b.mean) and np.array_equal(a.mean_lo, b.mean_lo)
        assert a.excluded == b.excluded
    g = dcfa.grid_moments(field, y, radius=1)
    assert np.array_equal(np.isfinite(g.cross), np.isfinite(grid.cross))
    ok = np.isfinite(g.cross)
    assert np.allclose(g.cross[ok], grid.cross[ok], rtol=1e-12, atol=0)
    assert g.target_mean == grid.target_mean and g.target_mean_lo == grid.target_mean_lo

"""One pass, segments: climatology, spread and the anomalies' moments from the raw field.

The batch job gathers the calendar months' means (the climatology), the anomalies' spread and
the anomalies' grid moments in a single pass over the archive (:func:`dcfa.stats.grid.grid_pass`
with months as segments). Each is checked against plain NumPy on the anomalies computed
explicitly, for any chunking, with land cells and gaps.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

import dcfa
from dcfa import io
from dcfa.io.preprocess import preprocessing_pass
from dcfa.stats.grid import grid_pass


def monthly_field(n=60, shape=(7, 8), seed=0):
    rng = np.random.default_rng(seed)
    time = pd.date_range("1990-01-01", periods=n, freq="MS")
    cycle = 5 * np.sin(2 * np.pi * (time.month.values - 1) / 12)[:, None, None]
    X = rng.normal(size=(n, *shape)).cumsum(axis=2) + 280 + cycle * rng.uniform(0.5, 2, shape)
    X[:, 2, 3] = np.nan  # land
    y = X[:, 4, 4] - X[:, 4, 4].mean() + rng.normal(size=n)
    return time, X, y


def anomalies_numpy(X, months):
    out = X.copy()
    for m in np.unique(months):
        out[months == m] -= X[months == m].mean(axis=0)
    return out


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(t=chunks(60, 5), a=chunks(7, 3), b=chunks(8, 3), periodic=st.booleans())
def test_month_segments_give_the_anomalies_moments(t, a, b, periodic):
    time, X, y = monthly_field()
    months = time.month.values - 1
    data = da.from_array(X, chunks=(t, a, b))
    done = grid_pass(
        data, y, radius=1, segments=months, n_segments=12, periodic=(1,) if periodic else ()
    )
    A = anomalies_numpy(X, months)
    ref = dcfa.moments(A.reshape(60, -1), y)
    gm = done.moments
    keep = np.arange(56) != 19
    np.testing.assert_allclose(
        done.segment_mean[:, keep.reshape(7, 8)].reshape(12, -1),
        np.stack([X[months == m].reshape(-1, 56)[:, keep].mean(axis=0) for m in range(12)]),
        rtol=1e-12,
    )
    np.testing.assert_array_equal(done.segment_count, np.bincount(months, minlength=12))
    np.testing.assert_allclose(gm.diag[keep], np.diag(ref.cross)[:56][keep], rtol=1e-9)
    np.testing.assert_allclose(
        gm.target_cross[keep], ref.cross[:56, 56][keep], rtol=1e-8, atol=1e-8
    )
    assert gm.target_mean == pytest.approx(y.mean(), rel=1e-12)
    assert gm.target_ss == pytest.approx(((y - y.mean()) ** 2).sum(), rel=1e-10)
    cells = np.flatnonzero(keep)
    nbr, _ = gm.neighbours(cells)
    pa, pb = np.repeat(cells, nbr.shape[1]), nbr.ravel()
    ok = (pb >= 0) & (pb != 19)
    np.testing.assert_allclose(
        gm.pair_cross(pa[ok], pb[ok]), ref.cross[pa[ok], pb[ok]], rtol=1e-8, atol=1e-8
    )
    assert gm.excluded == {19: "all values missing"}


def test_one_segment_is_grid_moments():
    """Without segments the pass is :func:`dcfa.grid_moments`, to the bit."""
    _, X, y = monthly_field()
    data = da.from_array(X, chunks=(13, 4, 8))
    a = grid_pass(data, y, radius=2).moments
    b = dcfa.grid_moments(data, y, radius=2)
    for name in ("count", "mean", "diag", "cross", "target_cross"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@pytest.mark.parametrize("standardize", [False, True])
@pytest.mark.parametrize("anomalies", [False, True])
def test_preprocessing_pass_equals_numpy(anomalies, standardize):
    time, X, y = monthly_field(seed=3)
    X[5:9, 1, 1] = np.nan  # a gap: the climatology skips it
    field = xr.DataArray(
        da.from_array(X, chunks=(25, 4, 8)),
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": np.arange(7.0), "lon": np.arange(8.0)},
    )
    prep, gm = preprocessing_pass(field, y, anomalies=anomalies, standardize=standardize, radius=1)
    months = time.month.values
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning, match="empty"):
        clim = np.stack([np.nanmean(X[months == m], axis=0) for m in range(1, 13)])
    A = X - clim[months - 1] if anomalies else X
    np.testing.assert_array_equal(prep.has_data.values, ~np.isnan(X).all(axis=0))
    if anomalies:
        np.testing.assert_allclose(prep.climatology.values, clim, rtol=1e-12)
        assert list(prep.climatology.month.values) == list(range(1, 13))
    else:
        assert prep.climatology is None
    if standardize:
        with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
            std = np.nanstd(A, axis=0, ddof=1)
        np.testing.assert_allclose(prep.std.values, std, rtol=1e-10)
        A = A / std
    # the grid moments of the prepared field, from the same pass
    complete = ~np.isnan(X).any(axis=0)
    ref = dcfa.moments(np.where(complete, A, 0).reshape(60, -1), y)
    keep = complete.ravel()
    np.testing.assert_allclose(gm.diag[keep], np.diag(ref.cross)[:56][keep], rtol=1e-9)
    np.testing.assert_allclose(
        gm.target_cross[keep], ref.cross[:56, 56][keep], rtol=1e-8, atol=1e-8
    )
    np.testing.assert_allclose(gm.mean[keep], ref.mean[:56][keep], rtol=1e-9, atol=1e-9)
    assert set(gm.excluded) == set(np.flatnonzero(~keep))
    # the same preprocessing applied as the features pass applies it
    out = io.apply_preprocessing(field, prep).values
    np.testing.assert_allclose(out[:, complete], A[:, complete], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "module",
    [
        "dcfa.stats.grid",
        "dcfa.stats.stencil",
        "dcfa.stats.moments",
        "dcfa.stats.kernels",
        "dcfa.stats.columns",
        "dcfa.stats.summary",
        "dcfa.stats.symmetric",
        "dcfa.gbmap._losses",  # GBMAP's chunk kernels and the actors' arithmetic
        "dcfa.gbmap._learners",  # unpickled by the actors at every step
    ],
)
def test_worker_kernels_import_numpy_only(module):
    """A worker that unpickles a kernel imports its module: no scikit-learn, xarray, pandas
    or SciPy (``dcfa`` itself brings NumPy and ``dask.config`` only)."""
    import subprocess
    import sys

    heavy = ("sklearn", "xarray", "pandas", "scipy", "dask.array", "distributed")
    code = (
        f"import sys, {module}; heavy = {heavy!r}; "
        "print(sorted(m for m in sys.modules if m in heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout

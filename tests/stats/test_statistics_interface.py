"""Every statistics value answers the same questions by the same names (``Statistics``), and
the answers agree with plain NumPy on the same data."""

from __future__ import annotations

import numpy as np
import pytest

import dcfa
from dcfa.stats.columns import column_pass
from dcfa.stats.grid import grid_moments
from dcfa.stats.merged import MergedMoments
from dcfa.stats.summary import Statistics

MEMBERS = [
    name for name in ("n", "pairwise", "missing", *Statistics.__dict__) if not name.startswith("_")
]


def _data(seed=0, n=80, shape=(5, 6)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, *shape)) * rng.uniform(0.5, 3, shape) + 10
    X[:, 0, 0] = 3.0  # constant: excluded
    y = X[:, 2, 3] - X[:, 1, 1] + rng.normal(size=n)
    return X, y


def _kinds(X, y):
    import dask.array as da

    flat = X.reshape(X.shape[0], -1)
    half = X.shape[0] // 2
    parts = [dcfa.moments(flat[:half], y[:half]), dcfa.moments(flat[half:], y[half:])]
    return {
        "Moments": dcfa.moments(flat, y),
        "GridMoments": grid_moments(X, y, radius=1),
        "ColumnMoments": column_pass(da.from_array(flat, chunks=(30, 7)), y),
        "MergedMoments": MergedMoments(parts),
    }


@pytest.mark.parametrize("kind", ["Moments", "GridMoments", "ColumnMoments", "MergedMoments"])
def test_every_kind_answers_the_interface_alike(kind):
    X, y = _data()
    m = _kinds(X, y)[kind]
    flat = X.reshape(X.shape[0], -1)
    D = flat.shape[1]
    missing = [name for name in MEMBERS if not hasattr(m, name)]
    assert not missing, f"{kind} lacks {missing}"
    assert (m.n, m.n_features, m.pairwise, m.missing) == (80, D, False, "exclude")
    np.testing.assert_array_equal(m.column_count[:D], np.full(D, 80))
    np.testing.assert_allclose(m.column_mean[:D], flat.mean(axis=0), rtol=1e-12)
    centred = flat - flat.mean(axis=0)
    np.testing.assert_allclose(m.column_m2[:D], (centred**2).sum(axis=0), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(m.column_std(ddof=1)[:D], flat.std(axis=0, ddof=1), rtol=1e-9)
    assert list(m.excluded) == [0] and m.excluded[0].code == "constant"
    assert m.valid.sum() == D - 1
    target = m.target_moments()
    if kind == "MergedMoments":  # the merge serves the loop's rows, not the target checks
        assert target is None
        return
    yc = y - y.mean()
    np.testing.assert_allclose(target.mean, [y.mean()], rtol=1e-12)
    np.testing.assert_allclose(target.m2, [yc @ yc], rtol=1e-12)
    np.testing.assert_allclose(target.cross[:, 0], centred.T @ yc, rtol=1e-9, atol=1e-9)


def test_lazy_moments_have_no_target_yet():
    import dask.array as da

    X, y = _data()
    lazy = dcfa.moments(da.from_array(X.reshape(80, -1), chunks=40), y, compute=False)
    assert lazy.is_lazy and lazy.target_moments() is None
    assert dcfa.moments(X.reshape(80, -1)).target_moments() is None  # no target

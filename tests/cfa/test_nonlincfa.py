"""NonLinCFA: exact partitions of the authors' per-candidate CV refits, any input, any chunking."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import correlated_data, count_computes
from hypothesis import given, settings
from reference import nonlincfa_authors
from sklearn.model_selection import KFold, TimeSeriesSplit, cross_val_score
from strategies import chunks

import dcfa
from dcfa import NonLinCFA
from dcfa.cfa.folds import make_folds


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scan", ["restart", "single"])
@pytest.mark.parametrize("eps", [1e-4, 1e-3, 3e-2])
def test_partition_equals_cross_val_score_refits(seed, scan, eps):
    rng = np.random.default_rng(seed)
    X, y = correlated_data(rng, n=100, D=9, noise=0.6)
    got = NonLinCFA(eps=eps, scan=scan).fit(X, y).labels_
    np.testing.assert_array_equal(got, nonlincfa_authors(X, y, eps=eps, scan=scan))


@pytest.mark.parametrize("cv", [3, KFold(4), TimeSeriesSplit(5), TimeSeriesSplit(3, gap=5)])
def test_any_contiguous_splitter(rng, cv):
    X, y = correlated_data(rng, n=150, D=8, noise=0.6)
    got = NonLinCFA(eps=1e-3, cv=cv).fit(X, y).labels_
    np.testing.assert_array_equal(got, nonlincfa_authors(X, y, eps=1e-3, cv=cv))


def test_seed_compare_and_shuffle(rng):
    X, y = correlated_data(rng, n=90, D=10, noise=0.5)
    got = NonLinCFA(eps=1e-3, compare="seed", shuffle=True, random_state=3).fit(X, y).labels_
    order = np.random.RandomState(3).permutation(10)
    expected = nonlincfa_authors(X, y, eps=1e-3, compare="seed", order=order)
    np.testing.assert_array_equal(got, expected)


def test_fold_r2_from_moments_is_cross_val_score(rng):
    """The rule's CV R^2 on one candidate equals scikit-learn's, digit for digit."""
    from sklearn.linear_model import LinearRegression

    from dcfa.cfa.rules import _cv_r2_bivariate, _cv_r2_univariate

    n = 200
    g, c = rng.normal(size=n), rng.normal(size=n)
    y = g + 0.5 * c + rng.normal(size=n)
    Z = np.column_stack([g, c, y])
    splits = list(TimeSeriesSplit(4).split(Z))

    def moments_of(rows):
        part = Z[rows]
        centred = part - part.mean(0)
        return len(rows), part.mean(0)[None], (centred.T @ centred)[None]

    def stack(sets):
        n_, m_, c_ = zip(*[moments_of(rows) for rows in sets], strict=True)
        return np.array(n_, float)[:, None], np.array(m_), np.array(c_)

    tr, te = stack([a for a, _ in splits]), stack([b for _, b in splits])
    sk_biv = cross_val_score(LinearRegression(), Z[:, :2], y, cv=TimeSeriesSplit(4))
    sk_uni = cross_val_score(LinearRegression(), (g + c)[:, None], y, cv=TimeSeriesSplit(4))
    np.testing.assert_allclose(_cv_r2_bivariate(tr, te)[:, 0], sk_biv, rtol=1e-12)
    np.testing.assert_allclose(_cv_r2_univariate(tr, te)[:, 0], sk_uni, rtol=1e-12)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(row_chunks=chunks(120), col_chunks=chunks(10))
def test_same_partition_for_numpy_dask_and_any_chunking(row_chunks, col_chunks):
    rng = np.random.default_rng(len(row_chunks) + 7 * len(col_chunks))
    X, y = correlated_data(rng, n=120, D=10, noise=0.6, offset=300.0)
    ref = NonLinCFA(eps=1e-3, inputs="square").fit(X, y)
    Xd = da.from_array(X, chunks=(row_chunks, col_chunks))
    got = NonLinCFA(eps=1e-3, inputs="square").fit(Xd, y)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.transform(Xd).compute(), ref.transform(X), rtol=1e-10)


def test_xarray_input_gives_the_numpy_partition(rng):
    X, y = correlated_data(rng, n=100, D=12, noise=0.6)
    field = xr.DataArray(
        da.from_array(X.reshape(100, 3, 4), chunks=(25, 3, 2)), dims=("time", "lat", "lon")
    )
    got = NonLinCFA(eps=1e-3).fit(field, y)
    np.testing.assert_array_equal(got.labels_, NonLinCFA(eps=1e-3).fit(X, y).labels_)
    assert got.label_map_.shape == (3, 4)


def test_fit_is_one_pass_for_every_fold(rng):
    X, y = correlated_data(rng, n=100, D=6)
    with count_computes(1):
        model = NonLinCFA(eps=1e-3, cv=TimeSeriesSplit(4)).fit(da.from_array(X, chunks=(30, 3)), y)
    assert model.folds_.n_segments == 5


def test_inputs_and_aggregation(rng):
    X, y = correlated_data(rng, n=80, D=6, noise=0.4)
    mean = NonLinCFA(eps=1e-2, inputs="square").fit(X, y)
    total = NonLinCFA(eps=1e-2, inputs="square", aggregation="sum").fit(X, y)
    custom = NonLinCFA(eps=1e-2, inputs=np.square).fit(X, y)
    np.testing.assert_array_equal(mean.labels_, total.labels_)
    np.testing.assert_array_equal(mean.labels_, custom.labels_)
    Phi = X**2
    for g in range(mean.n_features_out_):
        members = mean.labels_ == g
        np.testing.assert_allclose(mean.transform(X)[:, g], Phi[:, members].mean(1), rtol=1e-10)
        np.testing.assert_allclose(total.transform(X)[:, g], Phi[:, members].sum(1), rtol=1e-10)
    expected = nonlincfa_authors(Phi, y, eps=1e-2)
    np.testing.assert_array_equal(mean.labels_, expected)
    lazy = NonLinCFA(eps=1e-2, inputs="square").fit(da.from_array(X, chunks=20), y)
    np.testing.assert_array_equal(lazy.labels_, mean.labels_)


def test_functional_twin(rng):
    X, y = correlated_data(rng, n=90, D=7)
    folds = make_folds(5, 90)
    parts = dcfa.moments(X, y, segments=folds.bounds)
    labels = dcfa.nonlincfa(parts, folds, eps=1e-3)
    np.testing.assert_array_equal(labels, NonLinCFA(eps=1e-3).fit(X, y).labels_)
    with pytest.raises(ValueError, match="parts: expected the moments of the 5 segments"):
        dcfa.nonlincfa(parts[:2], folds, eps=1e-3)


@pytest.mark.parametrize(
    "params, n, match",
    [
        (dict(eps=-0.1), 50, "eps"),
        (dict(eps=1.5), 50, "eps"),
        (dict(cv=1), 50, "'cv' parameter of NonLinCFA must be an int in the range"),
        (dict(cv=10), 12, "cv: 10 folds need at least 20 samples"),
        (dict(cv=KFold(5, shuffle=True, random_state=0)), 50, "not made of contiguous row"),
        (dict(cv=TimeSeriesSplit(5)), 11, "cv: fold 0 trains on 6 and tests on 1 samples"),
        (dict(cv="time"), 50, "cv"),
        (dict(inputs="log"), 50, "inputs"),
        (dict(aggregation="max"), 50, "aggregation"),
    ],
)
def test_bad_parameters_fail_before_the_pass(rng, params, n, match):
    X, y = correlated_data(rng, n=n, D=4)
    with count_computes(0), pytest.raises((ValueError, TypeError), match=match):
        NonLinCFA(**params).fit(da.from_array(X, chunks=10), y)


def test_folds_segments():
    folds = make_folds(TimeSeriesSplit(3, gap=2), 30)
    assert folds.bounds[0] == 0 and folds.bounds[-1] == 30
    for (tr, te), (tr_idx, te_idx) in zip(
        folds.splits, TimeSeriesSplit(3, gap=2).split(np.zeros((30, 1))), strict=True
    ):
        rows = lambda segs: sorted(  # noqa: E731
            i for s in segs for i in range(folds.bounds[s], folds.bounds[s + 1])
        )
        assert rows(tr) == tr_idx.tolist() and rows(te) == te_idx.tolist()


def test_neighbors_on_a_grid(rng):
    X, y = correlated_data(rng, n=120, D=12, k_latent=2, noise=0.4)
    field = xr.DataArray(X.reshape(120, 3, 4), dims=("time", "lat", "lon"))
    from dcfa.neighbors import grid_adjacency

    by_radius = NonLinCFA(eps=1e-3, neighbors=1).fit(field, y)
    by_matrix = NonLinCFA(eps=1e-3, neighbors=grid_adjacency((3, 4), 1)).fit(X, y)
    np.testing.assert_array_equal(by_radius.labels_, by_matrix.labels_)
    A = grid_adjacency((3, 4), 1).toarray()
    for g in range(by_matrix.n_features_out_):
        members = np.flatnonzero(by_matrix.labels_ == g)
        if members.size > 1:
            assert all(A[i, members].any() for i in members)


def test_constant_target_in_a_test_fold_scores_zero(rng):
    """A contiguous fold where y is constant: its R^2 is 0 (r2_score's force_finite), not the
    -1e32 that rounding in a z-scored constant gives to cross_val_score."""
    from sklearn.metrics import make_scorer, r2_score

    def r2_constant_fold_is_zero(y_true, y_pred):
        return 0.0 if np.ptp(y_true) < 1e-9 * np.abs(y_true).max() else r2_score(y_true, y_pred)

    X, y = correlated_data(rng, n=100, D=6, noise=0.5)
    y[:20] = 1.0  # the first of 5 folds sees a constant target
    got = NonLinCFA(eps=1e-3).fit(X, y).labels_
    scorer = make_scorer(r2_constant_fold_is_zero)
    np.testing.assert_array_equal(got, nonlincfa_authors(X, y, eps=1e-3, scoring=scorer))


def test_fit_with_stored_segment_moments(rng):
    X, y = correlated_data(rng, n=100, D=6)
    first = NonLinCFA(eps=1e-3).fit(X, y)
    parts = dcfa.moments(X, y, segments=first.folds_.bounds)
    with count_computes(0):
        again = NonLinCFA(eps=1e-3).fit(da.from_array(X, chunks=25), y, moments=parts)
    np.testing.assert_array_equal(again.labels_, first.labels_)
    with pytest.raises(ValueError, match="moments: expected 5 Moments"):
        NonLinCFA(eps=1e-3).fit(X, y, moments=parts[0])


def test_the_fit_holds_one_matrix_per_segment_and_merges_them_when_read(rng):
    """The dense fit keeps the segments' matrices only; ``moments_`` (all rows) is their
    merge, built on first read: the same numbers as ``Moments.merge_all`` and, up to rounding,
    as one pass over all rows."""
    X, y = correlated_data(rng, n=120, D=8)
    X = X + 300.0  # kelvin-like offsets
    model = NonLinCFA(eps=1e-3, mode="dense").fit(da.from_array(X, chunks=(25, 4)), y)
    assert not isinstance(model.__dict__["_moments"], dcfa.Moments)  # no p x p built yet
    merged = dcfa.Moments.merge_all(model.segment_moments_)
    m = model.moments_
    assert isinstance(m, dcfa.Moments) and model.moments_ is m  # built once, then kept
    for name in ("count", "mean", "cross"):
        np.testing.assert_array_equal(getattr(m, name), getattr(merged, name))
    whole = dcfa.moments(X, y)
    np.testing.assert_allclose(m.cross, whole.cross, rtol=1e-10, atol=1e-9)
    np.testing.assert_array_equal(model.mean_, m.column_mean[:8])
    assert not hasattr(NonLinCFA(), "moments_")

"""LinCFA: exact agreement with the printed pseudo-code, any input type, any chunking."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import xarray as xr
from conftest import correlated_data, count_computes
from hypothesis import given, settings
from reference import lincfa_algorithm1, lincfa_greedy, standardize
from sklearn.utils import check_random_state
from strategies import chunks

import dcfa
from dcfa import LinCFA
from dcfa.neighbors import grid_adjacency


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("shuffle", [False, True])
def test_partition_equals_algorithm1(seed, shuffle):
    rng = np.random.default_rng(seed)
    X, y = correlated_data(rng, n=int(rng.integers(30, 120)), D=int(rng.integers(5, 16)))
    model = LinCFA(shuffle=shuffle, random_state=seed).fit(X, y)
    order = check_random_state(seed).permutation(X.shape[1]) if shuffle else None
    np.testing.assert_array_equal(model.labels_, lincfa_algorithm1(X, y, order=order))
    assert model.n_features_out_ == model.labels_.max() + 1


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("compare", ["seed", "mean"])
@pytest.mark.parametrize("scan", ["single", "restart"])
@pytest.mark.parametrize("strict", [True, False])
def test_every_variant_equals_its_reference(seed, compare, scan, strict):
    rng = np.random.default_rng(100 + seed)
    X, y = correlated_data(rng, n=80, D=12)
    model = LinCFA(compare=compare, scan=scan, strict=strict, random_state=seed).fit(X, y)
    order = check_random_state(seed).permutation(12)
    expected = lincfa_algorithm1(X, y, order=order, compare=compare, scan=scan, strict=strict)
    np.testing.assert_array_equal(model.labels_, expected)


@pytest.mark.parametrize("seed", range(5))
def test_greedy_equals_remark_13(seed):
    rng = np.random.default_rng(200 + seed)
    X, y = correlated_data(rng, n=60, D=10)
    model = LinCFA(strategy="greedy").fit(X, y)
    np.testing.assert_array_equal(model.labels_, lincfa_greedy(X, y))


@pytest.mark.parametrize("seed", range(6))
def test_greedy_with_neighbors_equals_remark_13_on_the_adjacency_graph(seed):
    """Remark 13 restricted to adjacent groups: the brute-force reference (every pair of
    current groups with adjacent members, the most correlated passing one merged)."""
    rng = np.random.default_rng(300 + seed)
    X, y = correlated_data(rng, n=60, D=12)
    A = rng.random((12, 12)) < 0.25
    A = A | A.T | np.eye(12, dtype=bool)
    if seed % 2:  # a chain: the order of the features on a line
        A = np.abs(np.subtract.outer(np.arange(12), np.arange(12))) <= 1
    model = LinCFA(strategy="greedy", neighbors=sp.csr_array(A.astype(float))).fit(X, y)
    expected = lincfa_greedy(X, y, neighbors=A)
    np.testing.assert_array_equal(model.labels_, expected)


def test_greedy_on_a_grid_gives_connected_groups():
    """An int radius on an xarray grid: every group is one connected patch of the grid."""
    from dcfa.datasets import make_regions_field
    from dcfa.geo import group_patches

    ds = make_regions_field(n_time=120, shape=(8, 10), n_regions=4, seed=0).compute()
    X, y = ds.field, ds.target
    model = LinCFA(strategy="greedy", neighbors=1, periodic=False).fit(X, y)
    patches = group_patches(model.label_map_, periodic=False)
    assert model.n_features_out_ < X.sizes["lat"] * X.sizes["lon"] / 4  # it aggregates
    np.testing.assert_array_equal(patches, 1)
    free = LinCFA(strategy="greedy").fit(X, y)  # without the restriction: not all connected
    assert (group_patches(free.label_map_, periodic=False) > 1).any()


def test_variants_differ_somewhere():
    """The options are not cosmetic: on some data they give different partitions."""
    seen = set()
    for seed in range(20):
        rng = np.random.default_rng(seed)
        X, y = correlated_data(rng, n=60, D=12)
        for kw in (dict(), dict(compare="mean"), dict(strategy="greedy")):
            seen.add((tuple(LinCFA(shuffle=False, **kw).fit(X, y).labels_), str(kw)))
    by_variant = {}
    for labels, kw in seen:
        by_variant.setdefault(labels, set()).add(kw)
    assert any(len(v) == 1 for v in by_variant.values())


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(row_chunks=chunks(90), col_chunks=chunks(14))
def test_same_partition_for_numpy_dask_and_any_chunking(row_chunks, col_chunks):
    rng = np.random.default_rng(sum(row_chunks) + len(col_chunks))
    X, y = correlated_data(rng, n=90, D=14, offset=280.0)
    ref = LinCFA(random_state=3).fit(X, y)
    Xd = da.from_array(X, chunks=(row_chunks, col_chunks))
    got = LinCFA(random_state=3).fit(Xd, y)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.transform(Xd).compute(), ref.transform(X), atol=1e-10)


def test_transform_is_group_mean_of_standardised_members(rng):
    X, y = correlated_data(rng, n=70, D=9, offset=1e5)
    model = LinCFA(random_state=0).fit(X, y)
    Z = standardize(X)
    expected = np.column_stack(
        [Z[:, model.labels_ == g].mean(axis=1) for g in range(model.n_features_out_)]
    )
    np.testing.assert_allclose(model.transform(X), expected, atol=1e-9)
    np.testing.assert_allclose(model.fit_transform(X, y), expected, atol=1e-9)
    # inverse_transform then transform gives back the reduced features
    back = model.inverse_transform(expected)
    np.testing.assert_allclose(model.transform(back), expected, atol=1e-9)
    assert model.get_feature_names_out().tolist() == [
        f"lincfa{g}" for g in range(model.n_features_out_)
    ]


def test_transform_of_dask_is_lazy_and_one_compute(rng):
    X, y = correlated_data(rng, n=60, D=8)
    Xd = da.from_array(X, chunks=(15, 3))
    model = LinCFA(random_state=0).fit(X, y)
    with count_computes(0):
        out = model.transform(Xd)
    assert isinstance(out, da.Array)
    with count_computes(1):
        out.compute()


def test_fit_on_dask_is_one_compute(rng):
    X, y = correlated_data(rng, n=60, D=8)
    with count_computes(1):
        LinCFA(random_state=0).fit(da.from_array(X, chunks=(15, 3)), y)
    # a Dask target is validated (computed: n numbers) before the pass over X
    with count_computes(2):
        LinCFA(random_state=0).fit(da.from_array(X, chunks=(15, 3)), da.from_array(y, 20))


def test_xarray_in_xarray_out(rng):
    n, nlat, nlon = 80, 3, 4
    X, y = correlated_data(rng, n=n, D=nlat * nlon, offset=273.15)
    X[:, 5] = np.nan  # a land cell
    time = np.arange(n)
    field = xr.DataArray(
        da.from_array(X.reshape(n, nlat, nlon), chunks=(20, 3, 2)),
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": [10.0, 20.0, 30.0], "lon": [0.0, 5.0, 10.0, 15.0]},
        attrs={"units": "K"},
        name="sst",
    )
    target = xr.DataArray(y, dims="time", coords={"time": time})
    model = LinCFA(random_state=1).fit(field, target)
    np_model = LinCFA(random_state=1).fit(X, y)
    np.testing.assert_array_equal(model.labels_, np_model.labels_)
    assert model.labels_[5] == -1 and 5 in model.excluded_
    assert model.label_map_.dims == ("lat", "lon")
    assert model.label_map_.sel(lat=20.0, lon=5.0).item() == -1
    np.testing.assert_array_equal(model.label_map_.values.ravel(), model.labels_)
    out = model.transform(field)
    # LinCFA's features are means of standardised cells: dimensionless, not kelvin
    assert out.dims == ("time", "group") and out.attrs["units"] == "1"
    np.testing.assert_array_equal(out.time.values, time)
    assert isinstance(out.data, da.Array)
    np.testing.assert_allclose(out.values, np_model.transform(X), atol=1e-9)


@pytest.mark.parametrize("estimator", [LinCFA(random_state=1), dcfa.GenLinCFA()], ids=repr)
def test_fitted_on_an_array_it_labels_a_dataarray_by_its_samples(rng, estimator):
    """Fitted on an array, then given the field as a DataArray, transform stopped on
    ``AttributeError: ... no attribute 'label_map_'`` (it named the groups after their
    places, which an array's features do not have)."""
    X, y = correlated_data(rng, n=60, D=12)
    time = pd.date_range("2000-01-01", periods=60, freq="MS")
    field = xr.DataArray(X.reshape(60, 3, 4), dims=("time", "lat", "lon"),
                         coords={"time": time, "lat": [0.0, 1.0, 2.0]})  # fmt: skip
    model = estimator.fit(X, y)
    out = model.transform(field)
    assert out.dims == ("time", "group") and "group_name" not in out.coords
    np.testing.assert_array_equal(out.time.values, time.values)
    np.testing.assert_array_equal(out.group.values, np.arange(model.n_features_out_))
    np.testing.assert_allclose(out.values, model.transform(X), atol=1e-12)


def test_other_sample_dim_name(rng):
    X, y = correlated_data(rng, n=40, D=6)
    field = xr.DataArray(X.T, dims=("cell", "sample"))
    model = LinCFA(sample_dim="sample", random_state=0).fit(field, y)
    np.testing.assert_array_equal(model.labels_, LinCFA(random_state=0).fit(X, y).labels_)


def test_excluded_columns_get_minus_one_and_never_leak(rng):
    X, y = correlated_data(rng, n=50, D=8)
    X2 = X.copy()
    X2[:, 0] = np.nan
    X2[:, 3] = 7.0
    model = LinCFA(shuffle=False).fit(X2, y)
    assert model.labels_[0] == model.labels_[3] == -1
    assert set(model.excluded_) == {0, 3}
    keep = [1, 2, 4, 5, 6, 7]
    sub = LinCFA(shuffle=False).fit(X[:, keep], y)
    np.testing.assert_array_equal(model.labels_[keep], sub.labels_)
    out = model.transform(X2)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, sub.transform(X[:, keep]), atol=1e-10)


def test_pairwise_missing_on_gappy_data(rng):
    X, y = correlated_data(rng, n=120, D=8)
    gappy = X.copy()
    gappy[rng.uniform(size=X.shape) < 0.05] = np.nan
    model = LinCFA(missing="pairwise", random_state=0).fit(gappy, y)
    assert (model.labels_ >= 0).all()
    # the default treatment drops every gappy column instead: here, all of them
    with pytest.raises(
        ValueError,
        match="X: every one of the 8 features was excluded \\(8 features: e.g. .* missing",
    ):
        LinCFA(random_state=0).fit(gappy, y)
    # transform: mean over the members observed in each sample
    Z = (gappy - np.nanmean(gappy, 0)) / np.nanstd(gappy, 0, ddof=1)
    out = model.transform(gappy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows where a group is all missing
        expected = [np.nanmean(Z[:, model.labels_ == g], axis=1) for g in range(out.shape[1])]
    np.testing.assert_allclose(out, np.column_stack(expected), atol=1e-9)
    out_dask = model.transform(da.from_array(gappy, chunks=(30, 3))).compute()
    np.testing.assert_allclose(out_dask, out, atol=1e-9)


def test_neighbors_restrict_groups_to_touching_cells(rng):
    shape = (4, 5)
    X, y = correlated_data(rng, n=100, D=20, k_latent=1, noise=0.3)
    model = LinCFA(neighbors=grid_adjacency(shape, 1), shuffle=False, compare="mean").fit(X, y)
    A = grid_adjacency(shape, 1).toarray()
    for g in range(model.n_features_out_):
        members = np.flatnonzero(model.labels_ == g)
        # every group is connected on the grid
        reached = {members[0]}
        frontier = [members[0]]
        while frontier:
            k = frontier.pop()
            for j in members:
                if A[k, j] and j not in reached:
                    reached.add(j)
                    frontier.append(j)
        assert reached == set(members.tolist())
    # an int radius on a gridded DataArray means the same adjacency
    field = xr.DataArray(X.reshape(100, *shape), dims=("time", "lat", "lon"))
    by_radius = LinCFA(neighbors=1, shuffle=False, compare="mean").fit(field, y)
    np.testing.assert_array_equal(by_radius.labels_, model.labels_)


def test_neighbors_with_seed_compare_match_a_loop(rng):
    """Seed comparison restricted to the group's neighbours, against a plain loop."""
    shape = (3, 4)
    X, y = correlated_data(rng, n=90, D=12, k_latent=2)
    A = grid_adjacency(shape, 1)
    for scan in ("single", "restart"):
        got = LinCFA(neighbors=A, shuffle=False, scan=scan).fit(X, y).labels_
        np.testing.assert_array_equal(got, _seed_neighbors_loop(X, y, A.toarray(), scan))


def _seed_neighbors_loop(X, y, A, scan, compare="seed", neighborhood="group"):
    """The neighbour-restricted loop, literally: a candidate is adjacent to a member (or to
    the seed) and is tested against the seed (or the group's mean)."""
    from reference import lincfa_pair_test

    Z = standardize(X)
    D = X.shape[1]
    labels = np.full(D, -1)
    g = 0
    for i in range(D):
        if labels[i] >= 0:
            continue
        G = [i]
        labels[i] = g
        pointer = i
        while True:
            near = G if neighborhood == "group" else [i]
            cands = [
                j
                for j in range(D)
                if labels[j] < 0
                and any(A[k, j] for k in near)
                and (scan == "restart" or j > pointer)
            ]
            agg = Z[:, i] if compare == "seed" else standardize(Z[:, G].mean(axis=1))
            hit = next((j for j in cands if lincfa_pair_test(agg, Z[:, j], y)), None)
            if hit is None:
                break
            G.append(hit)
            labels[hit] = g
            pointer = hit
        g += 1
    return labels


def test_functional_twin_is_what_the_estimator_runs(rng):
    X, y = correlated_data(rng, n=50, D=9)
    m = dcfa.moments(X, y)
    np.testing.assert_array_equal(
        dcfa.lincfa(m, random_state=4), LinCFA(random_state=4).fit(X, y).labels_
    )


def test_sparse_neighbors_are_validated(rng):
    X, y = correlated_data(rng, n=30, D=6)
    with pytest.raises(ValueError, match=r"neighbors: expected an adjacency of shape \(6, 6\)"):
        LinCFA(neighbors=sp.eye(5)).fit(X, y)
    with pytest.raises(ValueError, match="neighbors: an int radius needs the grid"):
        LinCFA(neighbors=1).fit(X, y)
    with pytest.raises(ValueError, match="neighborhood: strategy='greedy' merges adjacent"):
        LinCFA(neighbors=sp.eye(6), strategy="greedy", neighborhood="seed").fit(X, y)


def test_fit_with_stored_moments_skips_the_pass(rng, tmp_path):
    X, y = correlated_data(rng, n=60, D=8)
    Xd = da.from_array(X, chunks=(20, 4))
    first = LinCFA(random_state=2).fit(Xd, y)
    path = first.moments_.save(tmp_path / "m.zarr")
    with count_computes(0):
        again = LinCFA(random_state=2).fit(Xd, y, moments=dcfa.Moments.load(path))
    np.testing.assert_array_equal(again.labels_, first.labels_)
    with pytest.raises(ValueError, match="moments: they describe 60 samples x 8 features"):
        LinCFA().fit(X[:, :5], y, moments=first.moments_)
    with pytest.raises(ValueError, match="moments: computed with missing='exclude'"):
        LinCFA(missing="pairwise").fit(X, y, moments=first.moments_)
    with pytest.raises(TypeError, match="moments: expected a Moments"):
        LinCFA().fit(X, y, moments=np.zeros(3))


@pytest.mark.parametrize("compare", ["seed", "mean"])
@pytest.mark.parametrize("scan", ["single", "restart"])
def test_seed_neighborhood_matches_a_loop(rng, compare, scan):
    """neighborhood="seed": candidates are the seed's neighbours only."""
    shape = (4, 5)
    X, y = correlated_data(rng, n=100, D=20, k_latent=2, noise=0.4)
    A = grid_adjacency(shape, 1).toarray()
    got = (
        LinCFA(
            neighbors=grid_adjacency(shape, 1),
            neighborhood="seed",
            shuffle=False,
            compare=compare,
            scan=scan,
        )
        .fit(X, y)
        .labels_
    )
    labels = _seed_neighbors_loop(X, y, A, scan, compare=compare, neighborhood="seed")
    np.testing.assert_array_equal(got, labels)
    radius_ok = all(
        A[min(np.flatnonzero(got == k))][np.flatnonzero(got == k)[1:]].all()
        for k in range(got.max() + 1)
    )
    assert radius_ok  # every member is a neighbour of its group's first cell

"""``neighbors=`` as a user gives it: matrices of any form, radii on narrow grids, and the
errors that name the argument to change.

References are independent of dcfa: adjacency built cell by cell from the coordinates with
NumPy, groups checked with :func:`scipy.sparse.csgraph.connected_components`, and the dense
execution (``mode="dense"``) as the partition every other execution must give.
"""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr
from conftest import count_computes
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

import dcfa
from dcfa import GenLinCFA, LinCFA, NonLinCFA
from dcfa.neighbors import grid_adjacency, resolve_neighbors


def field(seed: int, lat, lon, n: int = 60) -> tuple[xr.DataArray, np.ndarray]:
    """A ``(time, lat, lon)`` field with a shared signal (so groups grow) and a target."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, len(lat), len(lon))) + rng.normal(size=(n, 1, 1))
    X = xr.DataArray(
        data,
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(n), "lat": np.asarray(lat), "lon": np.asarray(lon)},
        name="sst",
        attrs={"units": "K"},
    )
    y = data[:, 0, 0] + data[:, -1, -1] + rng.normal(size=n)
    return X, y


def brute_adjacency(lat, lon, radius: int, periodic: bool) -> np.ndarray:
    """Cells within ``radius`` steps of each other, pair by pair (the wrap by the shorter
    way round when ``periodic``)."""
    L, M = len(lat), len(lon)
    A = np.zeros((L * M, L * M), dtype=bool)
    for i in range(L * M):
        for j in range(L * M):
            (a, b), (c, d) = divmod(i, M), divmod(j, M)
            dl = abs(b - d)
            if periodic:
                dl = min(dl, M - dl)
            A[i, j] = i != j and abs(a - c) <= radius and dl <= radius
    return A


def assert_contiguous(labels: np.ndarray, A) -> None:
    """Every group is one connected component of the adjacency ``A`` restricted to it."""
    A = sp.csr_array(A)
    for g in np.unique(labels[labels >= 0]):
        idx = np.flatnonzero(labels == g)
        n, _ = connected_components(A[idx][:, idx], directed=False)
        assert n == 1, f"group {g} ({idx.tolist()}) is {n} pieces"


LAT = np.arange(-10.0, 10.1, 5.0)
LON = np.arange(0.0, 360.0, 30.0)


# -- a matrix, as users hold one ------------------------------------------------------------


def test_opposite_weights_do_not_cancel_an_edge():
    """A signed, one-sided weight matrix (``W[i, j] = 1``, ``W[j, i] = -1``) draws the same
    graph as its pattern. The symmetrisation was ``(A + A.T) != 0``: every edge cancelled,
    every cell became its own group."""
    X, y = field(0, LAT, LON)
    A = brute_adjacency(LAT, LON, 1, periodic=True)
    W = np.triu(A).astype(float) - np.tril(A).astype(float)
    np.testing.assert_array_equal(resolve_neighbors(sp.csr_array(W), A.shape[0]).toarray(), A)
    for weights in (sp.csr_matrix(W), sp.csr_array(W), W, 2.5 * W):
        got = GenLinCFA(neighbors=weights, mode="dense").fit(X, y).labels_
        ref = GenLinCFA(neighbors=sp.csr_array(A), mode="dense").fit(X, y).labels_
        np.testing.assert_array_equal(got, ref)
        assert_contiguous(got, A)
        assert got.max() < got.size - 1  # groups did form


def test_any_matrix_form_gives_the_graph_it_draws():
    """Upper triangle only, self-loops, explicit zeros, repeated COO entries summing to 0,
    a dense ndarray and a list of lists: the adjacency is the pattern, symmetric, no
    diagonal."""
    D = 6
    rng = np.random.default_rng(1)
    pattern = np.triu(rng.random((D, D)) < 0.4, 1)
    ref = pattern | pattern.T
    upper = sp.csr_array(np.where(pattern, -3.0, 0.0) + np.eye(D))  # one-sided, self-loops
    zeros = upper.copy()
    zeros.data[:] = 0.0  # stored entries that are zero: no edge
    rows, cols = np.nonzero(pattern)
    summed = sp.coo_array(  # (i, j) stored twice as +1 and -1: scipy's value 0, no edge
        (np.r_[np.ones(rows.size), -np.ones(rows.size)], (np.r_[rows, rows], np.r_[cols, cols])),
        shape=(D, D),
    )
    cases = {
        "upper": (upper, ref),
        "zeros": (zeros, np.zeros((D, D), bool)),
        "summed": (summed, np.zeros((D, D), bool)),
        "dense": (pattern.astype(np.int8), ref),
        "list": (pattern.astype(int).tolist(), ref),
    }
    for name, (matrix, expect) in cases.items():
        got = resolve_neighbors(matrix, D)
        assert got.dtype == bool, name
        np.testing.assert_array_equal(got.toarray(), expect, err_msg=name)
    assert summed.nnz == 2 * rows.size  # the user's matrix is left as given


def test_a_list_of_lists_fits_as_the_array():
    """The estimators accept an array-like ``neighbors``; a list of lists was a TypeError
    after validation let it through."""
    X, y = field(2, LAT, LON)
    A = brute_adjacency(LAT, LON, 1, periodic=True)
    by_list = LinCFA(neighbors=A.astype(int).tolist(), shuffle=False).fit(X, y)
    by_array = LinCFA(neighbors=A, shuffle=False).fit(X, y)
    np.testing.assert_array_equal(by_list.labels_, by_array.labels_)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_are_refused(bad):
    """NaN said neither edge nor no edge; it was taken for an edge."""
    X, y = field(3, LAT, LON)
    W = brute_adjacency(LAT, LON, 1, periodic=True).astype(float)
    W[0, 1] = bad
    with count_computes(0), pytest.raises(ValueError, match="neighbors: .*NaN or infinite"):
        LinCFA(neighbors=sp.csr_array(W)).fit(X, y)


def test_matrices_of_the_wrong_shape_or_kind_are_named():
    X, y = field(4, LAT, LON)
    with pytest.raises(ValueError, match=r"neighbors: .*shape \(60, 60\), got \(5, 5\)"):
        LinCFA(neighbors=sp.eye(5, format="csr")).fit(X, y)
    with pytest.raises(TypeError, match="neighbors: expected a numeric or bool adjacency"):
        LinCFA(neighbors=np.full((60, 60), "x")).fit(X, y)


def test_true_is_not_a_radius():
    """``neighbors=True`` passes the estimators' Integral check; the error said only 'got
    bool'."""
    X, y = field(5, LAT, LON)
    with pytest.raises(TypeError, match="neighbors: True is not a radius.*neighbors=1"):
        GenLinCFA(neighbors=True).fit(X, y)


def test_grid_adjacency_radius_must_be_an_int():
    """``grid_adjacency(shape, 1.0)`` failed inside ``range`` ('float' object cannot be
    interpreted as an integer)."""
    for radius in (1.0, 2.5, True):
        with pytest.raises(ValueError, match="neighbors: expected an int radius"):
            grid_adjacency((3, 4), radius)
    np.testing.assert_array_equal(
        grid_adjacency((3, 4), np.int64(1)).toarray(), brute_adjacency(range(3), range(4), 1, False)
    )


# -- the grid execution on narrow grids -----------------------------------------------------


@pytest.mark.parametrize(
    ("lat", "lon", "params", "dim"),
    [
        ([0.0], LON, dict(neighbors=1), "'lat' has 1"),  # one row; compare='mean': reach 2
        (LAT, [0.0, 120.0, 240.0], dict(neighbors=1), "'lon' has 3"),
        (LAT, LON, dict(neighbors=3), "'lat' has 5"),  # reach 6 needs 13
    ],
)
def test_the_grid_execution_refuses_a_narrow_grid_by_name(lat, lon, params, dim):
    """It failed in the pass with 'radius: 2 is too large for a grid of shape (1, 12)' (a
    radius the user never gave, no parameter named); auto now takes what runs, with the
    partition of the dense execution."""
    X, y = field(6, lat, lon)
    model = GenLinCFA(mode="grid", neighborhood="seed", **params)
    with count_computes(0), pytest.raises(ValueError, match=f"^neighbors: mode='grid'.*{dim}"):
        model.fit(X, y)
    with pytest.raises(ValueError, match="mode='series' or 'dense' run this grid"):
        model.execution_for(X)
    auto = GenLinCFA(neighborhood="seed", **params).fit(X, y)
    full = GenLinCFA(mode="dense", neighborhood="seed", **params).fit(X, y)
    np.testing.assert_array_equal(auto.labels_, full.labels_)


def test_auto_under_a_small_budget_says_why_the_grid_does_not_run():
    """When nothing else fits, auto's refusal explains the grid execution's reason (it
    picked the grid execution, whose pass then failed on the narrow dim)."""
    X, y = field(7, [0.0, 5.0], np.arange(0.0, 360.0, 2.0), n=200)
    with dask.config.set({"dcfa.memory_budget": "100 KiB"}):
        with count_computes(0), pytest.raises(dcfa.MemoryBudgetError, match="'lat' has 2"):
            LinCFA(neighbors=1, neighborhood="seed", compare="mean").fit(X, y)


def test_seed_rows_names_neighbors():
    """With compare='seed' the setting that stops mode='rows' is neighbors; the error
    named compare."""
    X, y = field(8, LAT, LON)
    with count_computes(0), pytest.raises(ValueError, match="^neighbors: mode='rows'"):
        LinCFA(neighbors=1, mode="rows").fit(X, y)


def test_periodic_names_the_stacked_dims():
    X, y = field(9, LAT, LON)
    cells = X.stack(cell=("lat", "lon"))
    with pytest.raises(ValueError, match=r"\['cell'\] not among .*stacked into X's cell dim"):
        LinCFA(neighbors=1, periodic=("cell",)).fit(cells, y)


# -- invariants over grids and executions ---------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_lat=st.integers(1, 6),
    n_lon=st.integers(1, 9),
    convention=st.sampled_from(["0..360", "-180..180", "regional"]),
    rule=st.sampled_from(["lincfa", "genlincfa", "nonlincfa"]),
)
def test_groups_are_connected_in_every_execution(seed, n_lat, n_lon, convention, rule):
    """On any grid (one row, one column, one cell, global or not) every group is one
    connected component of the brute-force adjacency, and every execution that runs gives
    the dense partition."""
    lat = np.arange(n_lat) * 2.0
    if convention == "regional":
        lon = 10.0 + np.arange(n_lon) * 2.0
    else:
        lon = np.arange(n_lon) * 360.0 / n_lon - (180.0 if convention == "-180..180" else 0.0)
    X, y = field(seed, lat, lon, n=40)
    keep = np.random.default_rng(seed).random((n_lat, n_lon)) > 0.2
    keep[0, 0] = True  # not every cell missing
    X = X.where(keep)
    periodic = convention != "regional" and n_lon > 1
    A = brute_adjacency(lat, lon, 1, periodic)
    cls, kw = {
        "lincfa": (LinCFA, dict(shuffle=False, compare="mean", scan="restart")),
        "genlincfa": (GenLinCFA, {}),
        "nonlincfa": (NonLinCFA, dict(eps=0.05)),
    }[rule]
    for neighborhood in ("group", "seed"):
        full = cls(neighbors=1, neighborhood=neighborhood, mode="dense", **kw).fit(X, y)
        assert_contiguous(full.labels_, A)
        modes = ["series", "auto"] + (["grid"] if neighborhood == "seed" else [])
        for mode in modes:
            model = cls(neighbors=1, neighborhood=neighborhood, mode=mode, **kw)
            try:
                model.fit(X, y)
            except ValueError as exc:  # only the grid execution may refuse, by name
                assert mode == "grid" and str(exc).startswith("neighbors: mode="), exc
                continue
            np.testing.assert_array_equal(model.labels_, full.labels_)
            assert model.label_map_.dims == ("lat", "lon")
            np.testing.assert_array_equal(model.label_map_.lon, lon)
            # the same series (to rounding: each execution has its own spreads), labelled alike
            got, ref = model.transform(X), full.transform(X)
            xr.testing.assert_allclose(got, ref, rtol=1e-10)
            assert got.dims == ref.dims and got.attrs == ref.attrs and got.name == ref.name


def _flood_sizes(inside: np.ndarray, radius: int, wrap: bool) -> np.ndarray:
    """Each cell's patch size by a breadth-first flood over a 2-D mask (the reference)."""
    ny, nx = inside.shape
    sizes = np.zeros(inside.shape, dtype=np.int64)
    seen = np.zeros(inside.shape, dtype=bool)
    for start in zip(*np.nonzero(inside), strict=True):
        if seen[start]:
            continue
        patch, todo = [], [start]
        seen[start] = True
        while todo:
            i, j = todo.pop()
            patch.append((i, j))
            for di in range(-radius, radius + 1):
                for dj in range(-radius, radius + 1):
                    a, b = i + di, j + dj
                    if wrap:
                        b %= nx
                    if 0 <= a < ny and 0 <= b < nx and inside[a, b] and not seen[a, b]:
                        seen[a, b] = True
                        todo.append((a, b))
        for cell in patch:
            sizes[cell] = len(patch)
    return sizes


@pytest.mark.parametrize("radius", [1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_patch_sizes_are_a_flood_fills_on_a_global_grid(radius, seed):
    from dcfa.neighbors import patch_sizes

    rng = np.random.default_rng(seed)
    lon = np.arange(0.0, 360.0, 20.0)  # global: the first and last columns touch
    values = rng.normal(size=(5, 9, lon.size))
    values[:, rng.random((9, lon.size)) < 0.55] = np.nan  # land in blobs of every size
    values[2, 0, 0] = np.nan  # one missing month: a gap, left out as the fit leaves it
    field = xr.DataArray(values, dims=("time", "lat", "lon"),
                         coords={"lat": np.arange(9.0) * 20 - 80, "lon": lon})  # fmt: skip
    got = patch_sizes(field, radius)
    inside = np.isfinite(values).all(axis=0)
    np.testing.assert_array_equal(got.values, _flood_sizes(inside, radius, wrap=True))
    assert got.dims == ("lat", "lon") and (got.lon == lon).all()
    cut = patch_sizes(field, radius, periodic=False)
    np.testing.assert_array_equal(cut.values, _flood_sizes(inside, radius, wrap=False))


def test_small_patches_left_out_leave_the_map_their_regions():
    """A lake of a few cells is a region of its own in a map of contiguous regions (a
    walkthrough's Great Lakes took 5 of 9 regions); the docs' recipe leaves them out."""
    from dcfa.datasets import make_regions_field
    from dcfa.neighbors import patch_sizes

    ds = make_regions_field(240, (12, 24), 6, seed=1)
    X, y = ds.field.compute(), ds.target.compute()
    land = np.zeros((12, 24), dtype=bool)
    land[4:8, 2:7] = True  # an island of land around a lake of two cells
    land[5, 3:5] = False
    X = X.where(~xr.DataArray(land, dims=("lat", "lon")))
    sizes = patch_sizes(X)
    assert sorted(np.unique(sizes.values).tolist()) == [0, 2, 12 * 24 - 18 - 2]  # 18 land
    with_lake = dcfa.RegionsCV(n_splits=3).fit(X, y)
    lake = with_lake.labels_.reshape(12, 24)[5, 3:5]
    assert lake[0] == lake[1] and (with_lake.labels_ == lake[0]).sum() == 2  # its own region
    without = dcfa.RegionsCV(n_splits=3).fit(X.where(sizes >= 20), y)
    assert (without.labels_.reshape(12, 24)[5, 3:5] == -1).all()

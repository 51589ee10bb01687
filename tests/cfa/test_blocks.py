"""Variables, time scales and lags never mix: a group lies within one feature block.

A field with a ``variable`` (or ``window``, ``lag``) dim besides its grid has one block of
cells per entry of that dim; the neighbour restriction only links cells of the same block, in
every execution (the dense adjacency and the grid moments), so even two perfectly correlated
variables are never aggregated together.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import dcfa
from dcfa import LinCFA
from dcfa.neighbors import block_axes, grid_adjacency, grid_adjacency_for


def two_variables(n=120, shape=(6, 9), seed=0, chunks=None):
    """Two variables on one grid; the second is the first plus a little noise."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 3))
    region = rng.integers(0, 3, shape)
    a = latent[:, region] + 0.5 * rng.normal(size=(n, *shape))
    b = a + 0.01 * rng.normal(size=a.shape)
    X = np.stack([a, b], axis=1)
    y = latent @ np.array([1.0, -0.5, 0.2]) + rng.normal(size=n)
    data = X if chunks is None else da.from_array(X, chunks=chunks)
    field = xr.DataArray(
        data,
        dims=("time", "variable", "lat", "lon"),
        coords={"variable": ["a", "b"], "lat": np.arange(shape[0]), "lon": np.arange(shape[1])},
    )
    return field, y


def test_adjacency_never_links_two_blocks():
    A = grid_adjacency((2, 4, 5), 1, blocks=(0,))
    rows, cols = A.nonzero()
    assert rows.size and not np.any(rows // 20 != cols // 20)
    within = grid_adjacency((4, 5), 1)
    assert A[:20, :20].nnz == within.nnz  # and inside a block it is the plain grid's
    field, _ = two_variables()
    assert block_axes(("variable", "lat", "lon")) == (0,)
    B = grid_adjacency_for(field, 1, periodic=False)
    assert B.nnz == 2 * grid_adjacency((6, 9), 1).nnz


@pytest.mark.parametrize("mode", ["dense", "grid"])
def test_groups_stay_within_a_variable(mode):
    field, y = two_variables(chunks=(40, 1, 3, 9) if mode == "grid" else None)
    kw = {"neighborhood": "seed"} if mode == "grid" else {}
    model = LinCFA(neighbors=1, mode=mode, random_state=0, **kw).fit(field, y)
    labels = model.label_map_.values  # (variable, lat, lon)
    used = labels >= 0
    in_a = set(labels[0][used[0]])
    in_b = set(labels[1][used[1]])
    assert in_a and in_b and not in_a & in_b
    # without the block dim the two copies would merge: the same data as one 3-D "grid"
    merged = LinCFA(neighbors=1, random_state=0).fit(field.rename(variable="depth"), y)
    m = merged.label_map_.values
    assert set(m[0][m[0] >= 0]) & set(m[1][m[1] >= 0])


def test_the_grid_execution_is_the_dense_partition_with_blocks():
    field, y = two_variables(n=150, shape=(5, 7), seed=2)
    dense = LinCFA(neighbors=1, neighborhood="seed", random_state=1).fit(field, y)
    lazy = field.chunk({"time": 50, "variable": 1, "lat": 2})
    grid = LinCFA(neighbors=1, neighborhood="seed", mode="grid", random_state=1).fit(lazy, y)
    np.testing.assert_array_equal(grid.labels_, dense.labels_)


def test_grid_moments_with_blocks_equal_the_dense_ones():
    field, y = two_variables(n=80, shape=(5, 6), seed=4, chunks=(30, 1, 2, 6))
    gm = dcfa.grid_moments(field, y, radius=1, blocks=(0,))
    X = field.values.reshape(80, -1)
    m = dcfa.moments(X, y)
    cells = np.arange(60)
    nbr, offsets = gm.neighbours(cells)
    assert not np.any(offsets[:, 0])  # no offset along the variable dim
    pa, pb = np.repeat(cells, nbr.shape[1]), nbr.ravel()
    ok = pb >= 0
    assert not np.any(pa[ok] // 30 != pb[ok] // 30)
    np.testing.assert_allclose(gm.pair_cross(pa[ok], pb[ok]), m.cross[pa[ok], pb[ok]], rtol=1e-9)
    np.testing.assert_allclose(gm.target_cross, m.cross[:60, 60], rtol=1e-9, atol=1e-9)


def test_a_two_variable_global_grid_runs_on_the_grid():
    """The grid execution once refused this: "radius 1 is too large for a grid of shape
    (2, 49, 144)" (the variable dim was taken for space)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2, 49, 144)).astype(np.float32)
    field = xr.DataArray(
        da.from_array(X, chunks=(20, 1, 49, 144)),
        dims=("time", "variable", "lat", "lon"),
        coords={"lon": np.arange(0.0, 360.0, 2.5), "lat": np.linspace(-90, 90, 49)},
    )
    y = X[:, 0, 20, 30] + rng.normal(size=40)
    model = LinCFA(neighbors=1, neighborhood="seed", mode="grid", random_state=0)
    model.fit(field, y)
    labels = model.label_map_.values
    assert not set(labels[0].ravel()) & set(labels[1].ravel()) - {-1}
    assert model.moments_.blocks == (0,) and model.moments_.periodic == (2,)

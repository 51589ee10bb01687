"""Stacked cells keep their grid: ``field.stack(cell=("lat", "lon")).dropna("cell")``.

An ocean-only field is usually handled as a stacked ``cell`` dim without the land cells. The
cell dim's MultiIndex still knows where each cell sits on the grid, so an int ``neighbors``
radius, the periodic longitude and the visiting order must be those of the grid (not of a 1-D
chain along the cell dim), and every rule must give the partition of the unstacked field whose
land cells are NaN (excluded). The references below are written from the coordinates alone.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dcfa
from dcfa.datasets import make_regions_field
from dcfa.neighbors import resolve_neighbors
from dcfa.stacking import stack_features


def field_with_land(seed: int, shape=(10, 24), n_time=160, lon0=0.0, land=0.3):
    """A global (time, lat, lon) field of 8 regions, ``land`` of its cells all-NaN."""
    ds = make_regions_field(
        n_time=n_time, shape=shape, n_regions=8, n_active=2, land_fraction=land, seed=seed
    )
    field = ds.field.load()
    lon = (field.lon.values + lon0 + 180.0) % 360.0 - 180.0  # any longitude convention
    return field.assign_coords(lon=lon), ds.target.values


def reference_adjacency(lat_idx, lon_idx, n_lon, radius=1, periodic=True):
    """Cells within ``radius`` grid steps along both axes, the longitude wrapping."""
    dlat = np.abs(lat_idx[:, None] - lat_idx[None, :])
    dlon = np.abs(lon_idx[:, None] - lon_idx[None, :])
    if periodic:
        dlon = np.minimum(dlon, n_lon - dlon)
    A = (dlat <= radius) & (dlon <= radius)
    np.fill_diagonal(A, False)
    return A


def ocean_cells(field):
    return field.stack(cell=("lat", "lon")).dropna("cell", how="all")


@pytest.mark.parametrize("lon0", [0.0, 180.0])
def test_a_radius_on_stacked_cells_is_the_grids(lon0):
    field, _ = field_with_land(0, lon0=lon0)
    cells = ocean_cells(field)
    _, layout = stack_features(cells, "time")
    A = resolve_neighbors(1, cells.sizes["cell"], layout, periodic="auto")
    # each cell's place along the field's own axes (the ring of longitudes in array order)
    lat_idx = np.array([field.lat.values.tolist().index(v) for v in cells.lat.values])
    lon_idx = np.array([field.lon.values.tolist().index(v) for v in cells.lon.values])
    ref = reference_adjacency(lat_idx, lon_idx, field.sizes["lon"])
    np.testing.assert_array_equal(A.toarray(), ref)
    # not the chain along the cell dim: cells one row apart are neighbours
    assert ref[np.flatnonzero(lat_idx == lat_idx[0])[0]].sum() > 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: dcfa.LinCFA(neighbors=1, random_state=0),
        lambda: dcfa.GenLinCFA(neighbors=1),
        lambda: dcfa.NonLinCFA(neighbors=1, eps=3e-2),
    ],
    ids=["LinCFA", "GenLinCFA", "NonLinCFA"],
)
def test_every_rule_gives_the_partition_of_the_grid(make):
    field, y = field_with_land(1, lon0=180.0)
    on_grid = make().fit(field, y)
    stacked = make().fit(ocean_cells(field), y)
    kept = on_grid.labels_ >= 0
    assert kept.sum() == stacked.n_features_in_
    np.testing.assert_array_equal(on_grid.labels_[kept], stacked.labels_)
    assert on_grid.n_features_out_ == stacked.n_features_out_


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), order_seed=st.integers(0, 2**16))
def test_the_order_of_the_cells_does_not_change_the_partition(seed, order_seed):
    """Cells are visited in the grid's order, wherever they sit along the cell dim."""
    field, y = field_with_land(seed % 5, shape=(8, 18), n_time=120)
    cells = ocean_cells(field)
    perm = np.random.default_rng(order_seed).permutation(cells.sizes["cell"])
    given_order = dcfa.GenLinCFA(neighbors=1).fit(cells, y)
    shuffled = dcfa.GenLinCFA(neighbors=1).fit(cells.isel(cell=perm), y)
    np.testing.assert_array_equal(shuffled.labels_, given_order.labels_[perm])


def test_variables_never_mix_on_stacked_cells():
    field, y = field_with_land(2, shape=(8, 18), n_time=120)
    two = xr.concat([field, 2.0 * field + 1.0], dim="variable").transpose("time", "variable", ...)
    two = two.assign_coords(variable=["sst", "other"])
    cells = two.stack(cell=("variable", "lat", "lon")).dropna("cell", how="all")
    model = dcfa.GenLinCFA(neighbors=1).fit(cells, y)
    var = cells["variable"].values
    for g in range(model.n_features_out_):
        assert np.unique(var[model.labels_ == g]).size == 1
    on_grid = dcfa.GenLinCFA(neighbors=1).fit(two, y)
    kept = on_grid.labels_ >= 0
    np.testing.assert_array_equal(on_grid.labels_[kept], model.labels_)


def test_the_grid_execution_refuses_stacked_cells_before_any_compute():
    field, y = field_with_land(3, shape=(8, 18), n_time=120)
    cells = ocean_cells(field).chunk({"time": 40})
    model = dcfa.LinCFA(neighbors=1, neighborhood="seed", mode="grid")
    with pytest.raises(ValueError, match="neighbors: mode='grid' reads the whole grid"):
        model.fit(cells, y)
    # auto picks an execution that runs them
    assert dcfa.LinCFA(neighbors=1, neighborhood="seed").fit(cells, y).execution_ != "grid"


@settings(max_examples=80, deadline=None)
@given(
    positions=st.one_of(
        st.lists(st.integers(0, 11), max_size=12),
        st.tuples(st.integers(0, 11), st.integers(0, 12), st.booleans()).map(
            lambda t: list(range(t[0], max(t[0], t[1])))[:: -1 if t[2] else 1]
        ),
    ),
    lazy=st.booleans(),
)
def test_isel_positions_selects_the_positions(positions, lazy):
    """The indexer that label matching and leads/lags use selects exactly ``positions``, in
    their order (a run becomes a slice, increasing or decreasing, and a Dask array keeps its
    chunks through it)."""
    from dcfa.stacking import isel_positions

    x = xr.DataArray(np.arange(12.0) * 10, dims="t", coords={"t": np.arange(12)})
    if lazy:
        x = x.chunk({"t": 5})
    got = x.isel(t=isel_positions(np.asarray(positions, dtype=np.intp)))
    np.testing.assert_array_equal(got.values, np.asarray(positions, dtype=float) * 10)
    np.testing.assert_array_equal(got.t.values, positions)

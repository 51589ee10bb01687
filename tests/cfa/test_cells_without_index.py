"""Stacked cells without a MultiIndex keep their grid: ``cells.reset_index("cell")``.

Saving stacked cells to netCDF or Zarr needs ``reset_index("cell")``: the MultiIndex goes and
``lat`` / ``lon`` stay as plain coordinates along ``cell``. The grid is rebuilt from them
(:meth:`dcfa.stacking.CellGrid.from_coords`), so an int ``neighbors`` radius, the periodic
longitude and the visiting order are those of the grid, as for the MultiIndex input and the
unstacked field, not those of a 1-D chain along the cell dim. Coordinates that place no cells
on a grid raise, when the grid is asked for.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dcfa
from dcfa._errors import InputError
from dcfa.datasets import make_regions_field
from dcfa.neighbors import resolve_grid
from dcfa.stacking import stack_features

ESTIMATORS = {
    "LinCFA": lambda: dcfa.LinCFA(neighbors=1, random_state=0),
    "GenLinCFA": lambda: dcfa.GenLinCFA(neighbors=1),
    "NonLinCFA": lambda: dcfa.NonLinCFA(neighbors=1, eps=3e-2),
}


def field_with_land(seed=1, shape=(10, 24), n_time=160, lon0=None, land=0.3):
    """A global (time, lat, lon) field of 8 regions, ``land`` of its cells all-NaN: longitudes
    0..360, or shifted by ``lon0`` into -180..180 (0: non-monotonic across the seam)."""
    ds = make_regions_field(
        n_time=n_time, shape=shape, n_regions=8, n_active=2, land_fraction=land, seed=seed
    )
    field = ds.field.load()
    if lon0 is not None:
        field = field.assign_coords(lon=(field.lon.values + lon0 + 180.0) % 360.0 - 180.0)
    return field, ds.target.values


def land_row_and_column(field, row=4, column=9):
    """The field with one interior latitude row and one longitude column all land."""
    mask = xr.ones_like(field.isel(time=0), dtype=bool)
    mask[row, :] = False
    mask[:, column] = False
    return field.where(mask)


@pytest.mark.parametrize(
    "lon0", [None, 0.0, 180.0], ids=["lon0..360", "lon-180..180-seam", "lon-180..180"]
)
@pytest.mark.parametrize("cells_of", ["all", "ocean", "shuffled", "land-row"])
@pytest.mark.parametrize("rule", list(ESTIMATORS))
def test_reset_cells_give_the_partition_of_the_grid(rule, cells_of, lon0):
    make = ESTIMATORS[rule]
    field, y = field_with_land(lon0=lon0)
    if cells_of == "land-row":  # a whole row and a whole column dropped: a gap to fill
        field = land_row_and_column(field)
    cells = field.stack(cell=("lat", "lon"))
    if cells_of != "all":
        cells = cells.dropna("cell", how="all")
    if cells_of == "shuffled":
        cells = cells.isel(cell=np.random.default_rng(3).permutation(cells.sizes["cell"]))
    reset = cells.reset_index("cell")
    assert "cell" not in reset.indexes  # only lat and lon along the cell dim

    on_grid = make().fit(field, y)
    stacked = make().fit(cells, y)
    rebuilt = make().fit(reset, y)
    np.testing.assert_array_equal(rebuilt.labels_, stacked.labels_)
    assert rebuilt.n_features_out_ == stacked.n_features_out_ == on_grid.n_features_out_
    # the grid input's labels, cell for cell (its land cells are excluded)
    place = {(la, lo): i for i, (la, lo) in enumerate(zip(*_grid_places(field), strict=True))}
    where = [place[(la, lo)] for la, lo in zip(reset.lat.values, reset.lon.values, strict=True)]
    np.testing.assert_array_equal(rebuilt.labels_, on_grid.labels_[where])


def _grid_places(field):
    lat, lon = xr.broadcast(field.lat, field.lon)
    return lat.values.ravel(), lon.values.ravel()


def test_the_repro_of_the_report():
    ds = make_regions_field(300, (20, 40), 8, land_fraction=0.2, seed=1)
    f, y = ds.field.compute(), ds.target
    cells = f.stack(cell=("lat", "lon"))
    a = dcfa.GenLinCFA(neighbors=1).fit(cells, y)
    b = dcfa.GenLinCFA(neighbors=1).fit(cells.reset_index("cell"), y)
    assert b.n_features_out_ == a.n_features_out_
    np.testing.assert_array_equal(b.labels_, a.labels_)


def test_variables_never_mix_on_reset_cells():
    field, y = field_with_land(2, shape=(8, 18), n_time=120)
    two = xr.concat([field, 2.0 * field + 1.0], dim="variable").transpose("time", "variable", ...)
    two = two.assign_coords(variable=["sst", "other"])  # not sorted: the stacked order counts
    cells = two.stack(cell=("variable", "lat", "lon")).dropna("cell", how="all")
    reset = cells.reset_index("cell")
    model = dcfa.GenLinCFA(neighbors=1).fit(reset, y)
    np.testing.assert_array_equal(model.labels_, dcfa.GenLinCFA(neighbors=1).fit(cells, y).labels_)
    on_grid = dcfa.GenLinCFA(neighbors=1).fit(two, y)
    np.testing.assert_array_equal(on_grid.labels_[on_grid.labels_ >= 0], model.labels_)
    var = reset["variable"].values
    for g in range(model.n_features_out_):
        assert np.unique(var[model.labels_ == g]).size == 1


def test_a_netcdf_round_trip_keeps_the_grid(tmp_path):
    """What reset_index is for: the stored cells, read back, give the same partition."""
    field, y = field_with_land(4, shape=(8, 18), n_time=120, lon0=180.0)
    field = field.isel(lat=slice(None, None, -1))  # latitudes from north to south
    cells = field.stack(cell=("lat", "lon")).dropna("cell", how="all")
    cells.reset_index("cell").rename("sst").to_netcdf(tmp_path / "cells.nc")
    with xr.open_dataarray(tmp_path / "cells.nc") as stored:
        read = dcfa.GenLinCFA(neighbors=1).fit(stored.load(), y)
    np.testing.assert_array_equal(read.labels_, dcfa.GenLinCFA(neighbors=1).fit(cells, y).labels_)


def test_the_grid_execution_refuses_reset_cells():
    field, y = field_with_land(3, shape=(8, 18), n_time=120)
    reset = field.stack(cell=("lat", "lon")).dropna("cell", how="all").reset_index("cell")
    model = dcfa.LinCFA(neighbors=1, neighborhood="seed", mode="grid")
    with pytest.raises(ValueError, match="neighbors: mode='grid' reads the whole grid"):
        model.fit(reset.chunk({"time": 40}), y)


def _bad_cells():
    """(name, cells along ``cell`` whose coordinates do not place them on a grid, message)."""
    field, _ = field_with_land(5, shape=(6, 12), n_time=60)
    reset = field.stack(cell=("lat", "lon")).reset_index("cell")
    n = reset.sizes["cell"]
    rng = np.random.default_rng(0)
    return [
        (  # two variables without a variable coordinate: every place twice
            "duplicates",
            xr.concat([reset, reset + 1.0], dim="cell"),
            r"X: an int neighbors radius needs the grid of the cells along 'cell'.*one cell per "
            r"place on the grid of \('lat', 'lon'\).*set_index",
        ),
        (
            "non-numeric",
            reset.assign_coords(lat=("cell", reset.lat.values.astype(str))),
            r"X: .*the coordinate 'lat' is not numeric.*set_index",
        ),
        (
            "missing",
            reset.assign_coords(
                lon=("cell", np.where(np.arange(n) == 3, np.nan, reset.lon.values))
            ),
            r"X: .*the coordinate 'lon' has missing",
        ),
        (  # a curvilinear grid's lat and lon, or scattered points
            "scattered",
            reset.assign_coords(
                lat=("cell", rng.uniform(-80, 80, n)), lon=("cell", rng.uniform(0, 360, n))
            ),
            r"X: .*only \d+ of its 72 cells have a neighbour.*do not place the cells on a grid",
        ),
        (
            "two latitudes",
            reset.assign_coords(latitude=("cell", reset.lat.values)),
            r"X: .*expected one latitude and one longitude coordinate.*\['lat', 'latitude'\]",
        ),
    ]


@pytest.mark.parametrize("case", range(5), ids=[c[0] for c in _bad_cells()])
def test_coordinates_that_are_no_grid_raise_when_the_grid_is_needed(case):
    _, cells, message = _bad_cells()[case]
    y = np.random.default_rng(1).normal(size=cells.sizes["time"])
    with pytest.raises(InputError, match=message):
        dcfa.GenLinCFA(neighbors=1).fit(cells, y)
    # nothing asks for the grid without an int radius: the coordinates are not read as one
    model = dcfa.GenLinCFA().fit(cells, y)
    assert model.n_features_in_ == cells.sizes["cell"]


def _layout_grid(cells):
    _, layout = stack_features(cells, "time")
    return resolve_grid(1, cells.sizes["cell"], layout, periodic="auto")


@st.composite
def cell_sets(draw):
    """A (lat, lon) grid, some cells dropped (maybe a whole interior row and column), in
    stacked or shuffled order, its longitude global in any convention or regional, its
    latitude either way (visited from south to north). Shuffled cells are placed on
    ascending axes, so a regional longitude across 0 east keeps its order only in stacked
    order."""
    n_lat, n_lon = draw(st.integers(4, 7)), draw(st.integers(4, 12))
    lon0 = draw(st.sampled_from([0.0, 90.0, 180.0, 200.0]))
    step = 360.0 / n_lon
    lon = (np.arange(n_lon) * step + step / 2 + lon0 + 180.0) % 360.0 - 180.0
    shuffled = draw(st.booleans())
    regional = draw(st.sampled_from(["global", "regional"] + ["across 0"] * (not shuffled)))
    if regional != "global":  # no wrap; maybe written across 0 east (0..360: 350, ..., 0, 5)
        lon = np.linspace(100.0, 100.0 + 2.5 * (n_lon - 1), n_lon)
        if regional == "across 0":
            lon = (lon - 105.0) % 360.0
    lat = np.linspace(-60.0, 60.0, n_lat)
    if draw(st.booleans()):
        lat = lat[::-1]  # north to south
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    keep = rng.uniform(size=(n_lat, n_lon)) < draw(st.floats(0.6, 1.0))
    # a whole column dropped inside the grid (a global longitude whose first or last column,
    # in the array's order or by value, has no cell cannot be told from a regional one)
    inside = set(range(1, n_lon - 1)) - {int(np.argmin(lon)), int(np.argmax(lon))}
    row = draw(st.sampled_from([None, *range(1, n_lat - 1)]))
    column = draw(st.sampled_from([None, *sorted(inside)]))
    for i in range(n_lat):  # every other row and column keeps a cell
        keep[i, rng.choice([j for j in range(n_lon) if j != column])] = True
    for j in range(n_lon):
        keep[rng.choice([i for i in range(n_lat) if i != row]), j] = True
    if row is not None:
        keep[row] = False
    if column is not None:
        keep[:, column] = False
    # cells on a grid, not scattered points: most cells have another among their 8 neighbours
    # (without that the coordinates are refused, by design, as placing no cell on a grid)
    padded = np.pad(keep, 1)
    near = sum(
        padded[1 + di : 1 + di + n_lat, 1 + dj : 1 + dj + n_lon]
        for di in (-1, 0, 1)
        for dj in (-1, 0, 1)
        if di or dj
    )
    assume(2 * int((keep & (near > 0)).sum()) >= int(keep.sum()))
    field = xr.DataArray(
        rng.normal(size=(3, n_lat, n_lon)),
        dims=("time", "lat", "lon"),
        coords={"lat": lat, "lon": lon},
    ).where(keep)
    cells = field.stack(cell=("lat", "lon")).dropna("cell", how="all")
    if shuffled:
        cells = cells.isel(cell=rng.permutation(cells.sizes["cell"]))
    return cells


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cells=cell_sets())
def test_reset_cells_have_the_adjacency_periodicity_and_order_of_the_multiindex(cells):
    stacked = _layout_grid(cells)
    rebuilt = _layout_grid(cells.reset_index("cell"))
    assert rebuilt.periodic == stacked.periodic
    np.testing.assert_array_equal(rebuilt.adjacency.toarray(), stacked.adjacency.toarray())
    n = cells.sizes["cell"]
    order = [np.arange(n) if g.order is None else g.order for g in (stacked, rebuilt)]
    np.testing.assert_array_equal(order[1], order[0])

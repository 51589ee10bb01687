"""Maps and place names across a grid's seams: a regional grid across Greenwich (0..360) or the
dateline (-180..180) is drawn and projected as one piece, a multi-variable label map is refused
with the selection to make, and the demo names the Caribbean and the Gulf of Mexico as the
Atlantic's."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr


def test_plot_regions_names_the_extra_dim_of_a_multi_variable_map():
    """label_map_ of a multi-variable fit has a variable dim: the message says to select."""
    pytest.importorskip("matplotlib")
    from dcfa.plot import plot_regions

    region = xr.DataArray(
        np.zeros((2, 3, 4), dtype=int),
        dims=("variable", "lat", "lon"),
        coords={"variable": ["sst", "u10"], "lat": [0.0, 5.0, 10.0], "lon": [0.0, 5, 10, 15]},
    )
    with pytest.raises(ValueError, match=r"region.sel\(variable=\.\.\.\)"):
        plot_regions(region, coastlines=False)


def test_demo_counts_the_caribbean_and_the_gulf_of_mexico_as_atlantic():
    """The demo's line for a region of four Caribbean cells (15N, 75W-60W, the one the README
    names) said 'Pacific 25%, Atlantic 75%': basins were cut at 70W at every latitude."""
    from dcfa.batch.demo import _where

    lat = np.array([-5.0, 5.0, 15.0, 25.0])
    lon = np.arange(250.0, 305.0, 5.0)
    region = xr.DataArray(
        np.full((lat.size, lon.size), -1), dims=("lat", "lon"), coords={"lat": lat, "lon": lon}
    )
    region.loc[{"lat": 15.0, "lon": [285.0, 290.0, 295.0, 300.0]}] = 0  # Caribbean
    region.loc[{"lat": 25.0, "lon": [265.0, 270.0, 275.0]}] = 1  # Gulf of Mexico
    region.loc[{"lat": [-5.0, 5.0], "lon": [260.0, 270.0, 275.0]}] = 2  # off Ecuador, Panama
    assert _where(region, 0).endswith("; Atlantic 100%")
    assert _where(region, 1).endswith("; Atlantic 100%")
    assert _where(region, 2).endswith("; Pacific 100%")
    # one row wide: its latitude once, not "15°N-15°N"
    assert _where(region, 0).startswith("15°N, 75°W-60°W, centre 15°N 68°W")


@pytest.mark.parametrize(
    "lon",
    [
        [340.0, 350.0, 0.0, 10.0, 20.0],  # across Greenwich in 0..360
        [150.0, 160.0, 170.0, -180.0, -170.0],  # across the dateline in -180..180
    ],
)
def test_plot_regions_draws_a_grid_across_the_seam_as_one_piece(lon):
    """A regional 10-degree grid across the seam of its convention: every drawn cell is 10
    degrees wide and shows the label of the cell whose longitude (mod 360) is its centre.
    The old map sorted 0..20 before 340..350: the cell at 340 spanned 20..345 and the map
    ran across the globe (and at the dateline, -170 and 150 met at -10)."""
    pytest.importorskip("matplotlib")
    import matplotlib
    import matplotlib.pyplot

    matplotlib.use("Agg")
    from matplotlib.collections import QuadMesh

    from dcfa.plot import plot_regions

    labels = np.array([[0, 0, 1, 1, -1], [0, 2, 2, 1, 1]])
    region = xr.DataArray(
        labels, dims=("lat", "lon"), coords={"lat": [40.0, 50.0], "lon": np.array(lon)}
    )
    ax = plot_regions(region, coastlines=False)
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    edges = mesh.get_coordinates()[0, :, 0]
    np.testing.assert_allclose(np.diff(edges), 10.0)
    centres = (edges[:-1] + edges[1:]) / 2
    drawn = mesh.get_array()
    for j, c in enumerate(centres):
        k = int(
            np.flatnonzero(
                np.isclose((np.array(lon) - c) % 360, 0)
                | np.isclose((np.array(lon) - c) % 360, 360)
            )[0]
        )
        for i in range(2):
            want = labels[i, k]
            assert np.ma.getmaskarray(drawn)[i, j] if want < 0 else drawn[i, j] == want, (i, j)
    matplotlib.pyplot.close(ax.figure)


@pytest.mark.parametrize(
    "lon, centre",
    [([340.0, 350.0, 0.0, 10.0], 0.0), ([-175.0, -165.0, 165.0, 175.0], 180.0)],
)
def test_map_projection_keeps_a_grid_across_the_seam_off_the_map_edge(lon, centre):
    """The projection made for axes beforehand centres the map on the grid (a European box in
    0..360 was put on a dateline-centred map, a Pacific box in -180..180 on a Greenwich one:
    split between the map's two edges)."""
    pytest.importorskip("cartopy")
    from dcfa.geo import circular_mean
    from dcfa.plot import map_projection

    region = xr.DataArray(
        np.zeros((2, 4), dtype=int), dims=("lat", "lon"), coords={"lat": [0.0, 5.0], "lon": lon}
    )
    central = map_projection(region).proj4_params["pm"]
    assert central == centre
    assert abs((circular_mean(lon) - central + 180.0) % 360.0 - 180.0) < 90.0


def test_transform_names_each_group_by_its_variable_and_centre():
    """A two-variable fit's features had only a group number: which variable, and where, was
    a lookup in label_map_. They carry group_name, as a result store's features do."""
    import dcfa
    from dcfa.datasets import make_regions_field

    ds = make_regions_field(120, (12, 24), 6, n_active=2, seed=1)
    X, y = ds.field.compute(), ds.target.compute()
    X2 = xr.concat([X, 2.0 * X], "variable").assign_coords(variable=["sst", "slp"])
    model = dcfa.RegionsCV(n_splits=3).fit(X2.transpose("time", ...), y)
    names = model.transform(X2)["group_name"].values
    region = model.label_map_
    for g, name in enumerate(names):
        cells = region.where(region == g).stack(c=region.dims).dropna("c")
        # independently: the variable of its cells, and the mean latitude of its cells
        (variable,) = set(cells["variable"].values.tolist())
        lat = float(cells["lat"].mean())
        whole = int(np.sign(lat) * np.floor(abs(lat) + 0.5))  # halves away from zero
        assert name.startswith(f"{variable}_{abs(whole)}{'S' if whole < 0 else 'N'}_")
    assert len(set(names)) == len(names)

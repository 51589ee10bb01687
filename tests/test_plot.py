"""dcfa.plot: what is drawn is the data (mesh values and edges, labels, offsets, lines)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import QuadMesh  # noqa: E402

import dcfa  # noqa: E402
from dcfa.plot import (  # noqa: E402
    map_projection,
    plot_drift,
    plot_embedding,
    plot_regions,
    plot_stability,
)

ROOT = Path(__file__).resolve().parents[1]
NAN = np.nan


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def no_cartopy(monkeypatch):
    """Make ``import cartopy`` fail even where cartopy is installed."""
    monkeypatch.setitem(sys.modules, "cartopy", None)
    monkeypatch.setitem(sys.modules, "cartopy.crs", None)


# irregular spacing on purpose: edges are midpoints, not centre +- a constant half step
LAT = np.array([-30.0, -10.0, 0.0, 20.0])
LON = np.array([100.0, 110.0, 120.0, 140.0, 150.0, 160.0])
LAT_EDGES = np.array([-40.0, -20.0, -5.0, 10.0, 30.0])
LON_EDGES = np.array([95.0, 105.0, 115.0, 130.0, 145.0, 155.0, 165.0])
LABELS = np.array(
    [
        [-1, 0, 0, 1, 1, 1],
        [0, 0, NAN, 1, 1, 2],
        [0, -1, 2, 2, 2, 2],
        [NAN, 0, 2, -1, 2, 2],
    ]
)


def _region(labels=LABELS, lat=LAT, lon=LON) -> xr.DataArray:
    return xr.DataArray(labels, dims=("lat", "lon"), coords={"lat": lat, "lon": lon})


def _mesh(ax) -> QuadMesh:
    meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 1
    assert ax.collections[0] is meshes[0]
    return meshes[0]


def _mesh_edges(mesh: QuadMesh) -> tuple[np.ndarray, np.ndarray]:
    """(lon edges, lat edges) of a rectilinear mesh, checking it is rectilinear."""
    xy = mesh.get_coordinates()  # (n_lat + 1, n_lon + 1, 2)
    lon_edges, lat_edges = xy[0, :, 0], xy[:, 0, 1]
    np.testing.assert_allclose(xy[..., 0], np.broadcast_to(lon_edges, xy.shape[:2]))
    np.testing.assert_allclose(xy[..., 1], np.broadcast_to(lat_edges[:, None], xy.shape[:2]))
    return lon_edges, lat_edges


def _assert_mesh_shows(ax, region: xr.DataArray, lat="lat", lon="lon"):
    """Every drawn cell holds the label of the region cell at its centre (masked if unused)."""
    mesh = _mesh(ax)
    lon_edges, lat_edges = _mesh_edges(mesh)
    arr = mesh.get_array()
    assert arr.shape == (lat_edges.size - 1, lon_edges.size - 1)
    assert arr.size == region.size
    mask = np.ma.getmaskarray(arr)
    lat_centres = (lat_edges[:-1] + lat_edges[1:]) / 2
    lon_centres = (lon_edges[:-1] + lon_edges[1:]) / 2
    for i, la in enumerate(lat_centres):
        for j, lo in enumerate(lon_centres):
            # centres of irregular cells are not the coordinates: pick the enclosing cell
            want = float(region.sel({lat: la, lon: lo}, method="nearest"))
            if np.isnan(want) or want < 0:
                assert mask[i, j], (i, j, want)
            else:
                assert not mask[i, j], (i, j, want)
                assert arr[i, j] == want, (i, j)
    return mesh


def _texts(ax) -> dict[int, tuple[float, float]]:
    return {int(t.get_text()): t.get_position() for t in ax.texts}


def _assert_same_positions(got: dict, want: dict):
    assert set(got) == set(want)
    for g in want:
        assert got[g] == pytest.approx(want[g]), g


def _centroids(region: xr.DataArray) -> dict[int, tuple[float, float]]:
    lat2d, lon2d = xr.broadcast(region.lat, region.lon)
    out = {}
    for g in np.unique(region.values[np.isfinite(region.values) & (region.values >= 0)]):
        cells = (region == g).values
        lats = lat2d.transpose(*region.dims).values[cells]
        lons = lon2d.transpose(*region.dims).values[cells]
        out[int(g)] = (lons.mean(), lats.mean())
    return out


############################################################################################
# plot_regions


def test_regions_mesh_values_and_mask(no_cartopy):
    region = _region()
    ax = plot_regions(region)
    mesh = _assert_mesh_shows(ax, region)
    # ascending coords: the array is the region itself, masked where -1 / NaN
    arr = mesh.get_array()
    unused = np.isnan(LABELS) | (LABELS < 0)
    np.testing.assert_array_equal(np.ma.getmaskarray(arr), unused)
    np.testing.assert_array_equal(arr.compressed(), LABELS[~unused])


def test_regions_edges_are_midpoints_and_half_steps(no_cartopy):
    ax = plot_regions(_region())
    lon_edges, lat_edges = _mesh_edges(_mesh(ax))
    np.testing.assert_allclose(lat_edges, LAT_EDGES)
    np.testing.assert_allclose(lon_edges, LON_EDGES)
    assert ax.get_xlim() == pytest.approx((95.0, 165.0))
    assert ax.get_ylim() == pytest.approx((-40.0, 30.0))


def test_regions_regular_grid_edges(no_cartopy):
    lat, lon = np.arange(4) * 2.5 + 41.25, np.arange(6) * 2.5 + 1.25
    ax = plot_regions(_region(lat=lat, lon=lon))
    lon_edges, lat_edges = _mesh_edges(_mesh(ax))
    np.testing.assert_allclose(lat_edges, np.arange(5) * 2.5 + 40.0)
    np.testing.assert_allclose(lon_edges, np.arange(7) * 2.5)


def test_regions_latitude_edges_clipped_at_poles(no_cartopy):
    lat = np.array([-90.0, -30.0, 30.0, 90.0])
    ax = plot_regions(_region(lat=lat))
    _, lat_edges = _mesh_edges(_mesh(ax))
    np.testing.assert_allclose(lat_edges, [-90.0, -60.0, 0.0, 60.0, 90.0])


def _inside(region: xr.DataArray) -> dict[int, tuple[float, float]]:
    """Brute force: each group's cell farthest from its edge (Euclidean, in cells; outside
    the grid counts as outside), the nearest to its centroid (in cells) among equals."""
    labels = region.transpose("lat", "lon").values
    out = {}
    for g in np.unique(labels[np.isfinite(labels) & (labels >= 0)]):
        inside = np.argwhere(labels == g)
        outside = [
            (i, j)
            for i in range(-1, labels.shape[0] + 1)
            for j in range(-1, labels.shape[1] + 1)
            if not (0 <= i < labels.shape[0] and 0 <= j < labels.shape[1]) or labels[i, j] != g
        ]
        depth = [min(np.hypot(i - a, j - b) for a, b in outside) for i, j in inside]
        centre = inside.mean(axis=0)
        best = min(
            (k for k in range(len(inside)) if depth[k] == max(depth)),
            key=lambda k: np.sum((inside[k] - centre) ** 2),
        )
        i, j = inside[best]
        out[int(g)] = (float(region.lon[j]), float(region.lat[i]))
    return out


def test_regions_annotations_inside_each_region(no_cartopy):
    region = _region()
    ax = plot_regions(region)
    texts = _texts(ax)
    assert set(texts) == {0, 1, 2}
    assert texts == pytest.approx(_inside(region))
    # a C-shaped region: its centroid (the gap) is another region's; its label is on itself
    c = np.array([[0, 0, 0], [0, 1, 1], [0, 0, 0]], dtype=float)
    shaped = _region(c, lat=np.array([0.0, 10.0, 20.0]), lon=np.array([0.0, 10.0, 20.0]))
    placed = _texts(plot_regions(shaped))
    centroid = _centroids(shaped)[0]
    assert float(shaped.sel(lon=10.0, lat=10.0)) == 1  # the cell of the C's centroid
    assert centroid == pytest.approx((60 / 7, 10.0))  # in cell (lon 10, lat 10)
    lon0, lat0 = placed[0]
    assert float(shaped.sel(lon=lon0, lat=lat0)) == 0


def test_regions_no_annotation_when_disabled(no_cartopy):
    assert len(plot_regions(_region(), annotate=False).texts) == 0


def test_regions_categorical_colours(no_cartopy):
    mesh = _mesh(plot_regions(_region()))
    colours = [tuple(mesh.cmap(mesh.norm(g))) for g in (0, 1, 2)]
    assert len(set(colours)) == 3
    # the colours are the ones the QuadMesh paints: group g is colour g of tab20
    tab20 = matplotlib.colormaps["tab20"]
    for g in (0, 1, 2):
        assert mesh.cmap(mesh.norm(g)) == pytest.approx(tab20(g))
    # unused cells get the "bad" colour, which is none of the group colours
    bad = tuple(mesh.cmap(np.ma.masked_array([0], mask=[True]))[0])
    assert bad not in colours


def test_regions_descending_coords_same_picture(no_cartopy):
    region = _region()
    reference = _mesh(plot_regions(region))
    flipped = region.isel(lat=slice(None, None, -1), lon=slice(None, None, -1))
    ax = plot_regions(flipped)
    mesh = _assert_mesh_shows(ax, flipped)
    np.testing.assert_allclose(mesh.get_coordinates(), reference.get_coordinates())
    np.testing.assert_array_equal(
        np.ma.getmaskarray(mesh.get_array()), np.ma.getmaskarray(reference.get_array())
    )
    np.testing.assert_array_equal(mesh.get_array().filled(-9), reference.get_array().filled(-9))
    _assert_same_positions(_texts(ax), _texts(plot_regions(region)))


def test_regions_lon_lat_dim_order_same_picture(no_cartopy):
    region = _region()
    reference = _mesh(plot_regions(region))
    transposed = region.transpose("lon", "lat")
    ax = plot_regions(transposed)
    mesh = _assert_mesh_shows(ax, transposed)
    np.testing.assert_allclose(mesh.get_coordinates(), reference.get_coordinates())
    np.testing.assert_array_equal(mesh.get_array().filled(-9), reference.get_array().filled(-9))
    _assert_same_positions(_texts(ax), _inside(region))


def test_regions_latitude_longitude_names_found(no_cartopy):
    region = _region().rename(lat="latitude", lon="longitude")
    ax = plot_regions(region)
    _assert_mesh_shows(ax, region, lat="latitude", lon="longitude")
    np.testing.assert_allclose(_mesh_edges(_mesh(ax))[1], LAT_EDGES)


def test_regions_custom_coordinate_names(no_cartopy):
    region = _region().rename(lat="y", lon="x")
    ax = plot_regions(region, lat="y", lon="x")
    _assert_mesh_shows(ax, region, lat="y", lon="x")


def test_regions_int_labels_with_fill_and_many_groups(no_cartopy):
    rng = np.random.default_rng(0)
    labels = rng.permutation(np.arange(-1, 24).repeat(2))[:48].reshape(6, 8)
    region = _region(labels, lat=np.arange(6.0), lon=np.arange(8.0))
    ax = plot_regions(region)
    _assert_mesh_shows(ax, region)
    groups = set(np.unique(labels[labels >= 0]).tolist())
    assert set(_texts(ax)) == groups
    assert len(groups) > 20  # tab20 cycles: group g + 20 has the colour of group g
    mesh = _mesh(ax)
    assert mesh.cmap(mesh.norm(21)) == pytest.approx(mesh.cmap(mesh.norm(1)))


def test_regions_no_annotation_beyond_30_groups(no_cartopy):
    labels = np.arange(48).reshape(6, 8)
    region = _region(labels, lat=np.arange(6.0), lon=np.arange(8.0))
    ax = plot_regions(region)
    assert len(ax.texts) == 0
    _assert_mesh_shows(ax, region)


def test_regions_without_cartopy_plain_axes(no_cartopy):
    fig, given = plt.subplots()
    ax = plot_regions(_region(), ax=given, coastlines=True, title="groups")
    assert ax is given
    assert ax.get_xlabel() == "longitude"
    assert ax.get_ylabel() == "latitude"
    assert ax.get_title() == "groups"
    assert ax.get_aspect() == 1.0


def test_longitudes_and_latitudes_are_labelled_east_west_north_south(no_cartopy):
    from dcfa.plot import latitude_label, longitude_label

    cases = {0: "0°", 20: "20°E", 180: "180°", 200: "160°W", 300: "60°W", -160: "160°W",
             360: "0°", 359.5: "0.5°W"}  # fmt: skip
    assert {x: longitude_label(x) for x in cases} == cases
    assert [latitude_label(y) for y in (-10, 0, 30)] == ["10°S", "0°", "30°N"]
    lon = np.array([160.0, 200.0, 240.0, 280.0])  # a Pacific grid in 0..360
    ax = plot_regions(_region(np.zeros((2, 4)), lat=np.array([-5.0, 5.0]), lon=lon))
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(t[-1] in "EW°" for t in ticks), ticks
    assert "160°W" in ticks or "120°W" in ticks, ticks  # never 200 or 240 "°E"


def test_regions_coloured_by_their_correlation(no_cartopy):
    corr = xr.DataArray([0.6, -0.3, 0.1], dims="group", name="group_target_corr",
                        attrs={"long_name": "correlation with the target"})  # fmt: skip
    ax = plot_regions(_region(), values=corr)
    mesh = _mesh(ax)
    arr = mesh.get_array()
    used = ~(np.isnan(LABELS) | (LABELS < 0))
    np.testing.assert_array_equal(np.ma.getmaskarray(arr), ~used)
    np.testing.assert_allclose(arr[used], corr.values[LABELS[used].astype(int)])
    assert mesh.norm.vmin == -0.6 and mesh.norm.vmax == 0.6  # symmetric: the sign is the hue
    assert mesh.cmap.name.startswith("RdBu_r")
    bars = [a for a in ax.figure.axes if a is not ax]
    assert len(bars) == 1 and bars[0].get_ylabel() == "correlation with the target"
    with pytest.raises(ValueError, match="values: 2 values for 3 groups"):
        plot_regions(_region(), values=[0.1, 0.2])


def test_regions_with_cartopy_geoaxes():
    """A map with coastlines when cartopy has the data; offline (CI, compute nodes) a warning
    and no coastlines, and the figure still draws (cartopy alone would fail at draw time)."""
    pytest.importorskip("cartopy")
    import cartopy.crs as ccrs
    from cartopy.io import shapereader

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # cartopy's DownloadWarning
            shapereader.natural_earth(resolution="110m", category="physical", name="coastline")
        offline = False
    except OSError:
        offline = True
    lon = np.linspace(100.0, 260.0, 6)  # crosses the dateline in 0..360
    region = _region(lon=lon)
    with pytest.warns(UserWarning, match="without coastlines") if offline else nullcontext():
        ax = plot_regions(region)
    assert hasattr(ax, "coastlines")
    dateline = ccrs.PlateCarree(central_longitude=180)
    assert ax.projection == dateline and map_projection(region) == dateline
    assert map_projection(_region()) == ccrs.PlateCarree()  # 95E-165E: not crossing 180
    assert set(_texts(ax)) == {0, 1, 2}
    ax.figure.savefig(io.BytesIO(), format="png")  # draws without the network


@pytest.mark.parametrize("draw", ["plot_regions", "plot_stability"])
def test_offline_the_map_names_its_own_function_once_at_the_users_line(draw):
    """Offline, one warning: the function called, at the caller's line (not cartopy's
    "Downloading" warning too, nor plot_regions for a stability map)."""
    pytest.importorskip("cartopy")
    from cartopy.io import shapereader

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            shapereader.natural_earth(resolution="110m", category="physical", name="coastline")
        pytest.skip("cartopy has the coastlines here: there is no warning to check")
    except OSError:
        pass
    region = _region()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if draw == "plot_regions":
            plot_regions(region)
        else:
            plot_stability(xr.ones_like(region, dtype=float))
    assert [str(w.message).split(":")[0] for w in caught] == [draw]
    assert caught[0].filename == __file__


@pytest.mark.parametrize(
    ("lon", "lat"),
    [
        (np.arange(0.0, 360.0, 2.0), np.arange(39.0, -41.0, -2.0)),  # 0..358, lat descending
        (np.arange(-179.0, 180.0, 2.0), np.arange(-39.0, 41.0, 2.0)),  # -180..180 edges
        (np.arange(0.0, 360.0, 2.0), np.arange(-89.0, 0.0, 2.0)),  # a hemisphere
        (np.arange(0.0, 360.0, 2.0), np.arange(-89.0, 90.0, 2.0)),  # the globe
    ],
)
@pytest.mark.parametrize("draw", ["regions", "stability"])
def test_a_band_around_the_globe_fills_the_map(lon, lat, draw):
    """A field on every longitude but not pole to pole (a tropical band, as SST products are
    often cut) was drawn as an empty strip: a 360-degree extent wraps to zero width. The map
    now spans the band's latitudes and every longitude, its seam on the grid's own edge, with
    no warning from matplotlib or cartopy (coastlines aside, which offline are not there)."""
    ccrs = pytest.importorskip("cartopy.crs")
    values = (lon[None, :] // 40 + 10 * (lat[:, None] > 0)).astype(float)
    values[: lat.size // 3, : lon.size // 4] = np.nan  # land
    region = xr.DataArray(values, dims=("lat", "lon"), coords={"lat": lat, "lon": lon})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if draw == "regions":
            ax = plot_regions(region)
        else:
            ax = plot_stability(xr.full_like(region, 0.5).where(region.notnull()), region=region)
        ax.figure.savefig(io.BytesIO(), format="png")
    caught = [w for w in caught if "coastline" not in str(w.message)]
    assert not caught, [str(w.message) for w in caught]
    centre = (lon.min() + lon.max()) / 2  # of the edges, a half step (1 degree) beyond
    assert ax.projection == ccrs.PlateCarree(central_longitude=centre)
    x0, x1, y0, y1 = ax.get_extent(ccrs.PlateCarree(central_longitude=centre))
    assert (x0, x1) == pytest.approx((-180.0, 180.0))
    assert (y0, y1) == pytest.approx((max(lat.min() - 1, -90), min(lat.max() + 1, 90)))


def test_map_projection_without_cartopy(no_cartopy):
    assert map_projection(_region()) is None


@pytest.mark.parametrize(
    "bad",
    [
        xr.DataArray(np.zeros((4, 6)), dims=("lat", "lon")),  # no coordinates
        xr.DataArray(np.zeros((4, 6)), dims=("a", "b"), coords={"a": LAT, "b": LON}),
        xr.DataArray(np.zeros(4), dims="lat", coords={"lat": LAT}),  # 1-D
        xr.DataArray(
            np.zeros((2, 4, 6)),
            dims=("time", "lat", "lon"),
            coords={"lat": LAT, "lon": LON},
        ),
    ],
)
def test_regions_rejects_non_grid(bad):
    with pytest.raises(ValueError, match="region"):
        plot_regions(bad)


def test_regions_rejects_non_integer_labels_and_arrays():
    with pytest.raises(ValueError, match="region"):
        plot_regions(_region(LABELS + 0.5))
    with pytest.raises(
        TypeError, match=r"^region: .* got ndarray \(a fitted estimator's label_map_"
    ):
        plot_regions(LABELS)
    stacked = _region(LABELS).stack(cell=("lat", "lon"))
    with pytest.raises(ValueError, match=r"\(stacked\); unstack it: region.unstack\('cell'\)$"):
        plot_regions(stacked)
    plot_regions(stacked.unstack("cell"))  # as the message says


############################################################################################
# plot_embedding


@pytest.fixture
def embedding():
    return np.random.default_rng(1).normal(size=(40, 3))


def test_embedding_offsets_are_chosen_columns(embedding):
    ax = plot_embedding(embedding, components=(2, 0), scale=False)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), embedding[:, [2, 0]])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("f_3(x)", "f_1(x)")
    assert ax.collections[0].colorbar is None
    assert len(ax.figure.axes) == 1


def test_embedding_components_are_drawn_over_their_spread_by_default(embedding):
    """Components 100x apart drew as a line along one axis."""
    wide = embedding * np.array([100.0, 1.0, 0.01])
    ax = plot_embedding(wide, components=(0, 1))
    want = wide[:, [0, 1]] / wide[:, [0, 1]].std(axis=0)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), want)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("f_1(x) / sd", "f_2(x) / sd")


def test_embedding_coloured_by_y_with_colorbar(embedding):
    y = np.linspace(-1.0, 1.0, 40)
    ax = plot_embedding(embedding, y, title="GBMAP", scale=False)
    points = ax.collections[0]
    np.testing.assert_allclose(points.get_offsets(), embedding[:, [0, 1]])
    np.testing.assert_allclose(points.get_array(), y)
    assert points.colorbar is not None
    assert len(ax.figure.axes) == 2
    assert ax.get_title() == "GBMAP"


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["no", "yes"])[np.arange(40) % 2],
        np.arange(40) % 2 == 1,
        pd.Categorical(np.array(["no", "yes"])[np.arange(40) % 2]),
    ],
    ids=["str", "bool", "categorical"],
)
def test_embedding_coloured_by_class_labels_with_a_legend(embedding, labels):
    """A classifier's predict (string labels) failed in matplotlib: "'c' argument must be
    a color, a sequence of colors, or a sequence of numbers"."""
    ax = plot_embedding(embedding, labels, scale=False)
    assert len(ax.collections) == 2 and len(ax.figure.axes) == 1  # no colorbar
    values = np.asarray(labels)
    for points, label in zip(ax.collections, np.unique(values), strict=True):
        np.testing.assert_allclose(points.get_offsets(), embedding[values == label][:, [0, 1]])
    names = [t.get_text() for t in ax.get_legend().get_texts()]
    assert names == [str(v) for v in np.unique(values)]


def test_embedding_dataarray_and_dask(embedding):
    import dask.array as da

    xa = xr.DataArray(embedding, dims=("time", "boost"))
    y = xr.DataArray(np.arange(40.0), dims="time", name="target")
    ax = plot_embedding(xa, y, components=(1, 2), scale=False)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), embedding[:, [1, 2]])
    assert ax.collections[0].colorbar.ax.get_ylabel() == "target"
    ax = plot_embedding(da.from_array(embedding, chunks=(10, 3)), components=(0, 2), scale=False)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), embedding[:, [0, 2]])


def test_embedding_single_component(embedding):
    one = embedding[:, :1]
    ax = plot_embedding(one, scale=False)
    np.testing.assert_allclose(
        ax.collections[0].get_offsets(), np.column_stack([np.arange(40), one[:, 0]])
    )
    assert ax.get_ylabel() == "f_1(x)"
    y = np.linspace(3.0, 5.0, 40)
    ax = plot_embedding(one[:, 0], y, scale=False)  # 1-D input is one component too
    np.testing.assert_allclose(ax.collections[0].get_offsets(), np.column_stack([y, one[:, 0]]))


@pytest.mark.parametrize("components", [(0, 0), (0, 3), (-1, 1), (1,)])
def test_embedding_rejects_bad_components(embedding, components):
    with pytest.raises(ValueError, match="components"):
        plot_embedding(embedding, components=components)


def test_embedding_rejects_bad_shapes(embedding):
    with pytest.raises(ValueError, match="y"):
        plot_embedding(embedding, np.zeros(39))
    with pytest.raises(ValueError, match="embedding"):
        plot_embedding(np.zeros((2, 3, 4)))


############################################################################################
# plot_drift


def test_drift_line_is_the_score():
    score = np.array([0.1, 0.5, 0.2, 0.9, 0.3])
    ax = plot_drift(score)
    line = ax.lines[0]
    np.testing.assert_allclose(line.get_xdata(), np.arange(5))
    np.testing.assert_allclose(line.get_ydata(), score)
    assert ax.get_ylabel() == "drift score |f(x) − kNN mean|"
    assert len(ax.lines) == 1 and len(ax.collections) == 0


def test_drift_threshold_highlights_exactly_points_above():
    rng = np.random.default_rng(2)
    score = rng.uniform(size=50)
    time = np.arange(50) * 0.5 + 2000.0
    ax = plot_drift(score, time, threshold=0.7)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), time)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), score)
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [0.7, 0.7])
    above = score > 0.7
    assert 0 < above.sum() < 50
    np.testing.assert_allclose(
        ax.collections[0].get_offsets(), np.column_stack([time[above], score[above]])
    )


def test_drift_threshold_above_everything_highlights_nothing():
    ax = plot_drift(np.array([0.1, 0.2, 0.3]), threshold=0.3)  # strictly above
    assert len(ax.collections[0].get_offsets()) == 0


def test_drift_dataarray_time_coordinate_and_override():
    import pandas as pd

    t = pd.date_range("2000-01-01", periods=6, freq="MS")
    score = xr.DataArray([0.0, 1.0, 4.0, 1.0, 0.5, 3.0], dims="time", coords={"time": t})
    ax = plot_drift(score, threshold=2.0)
    np.testing.assert_array_equal(ax.lines[0].get_xdata(orig=True), t.values)
    assert ax.get_xlabel() == "time"
    highlighted = matplotlib.dates.num2date(ax.collections[0].get_offsets()[:, 0])
    assert [d.strftime("%Y-%m") for d in highlighted] == ["2000-03", "2000-06"]
    ax = plot_drift(score, time=np.arange(6) * 10.0)
    np.testing.assert_allclose(ax.lines[0].get_xdata(), np.arange(6) * 10.0)


def test_drift_rejects_bad_shapes():
    with pytest.raises(ValueError, match="score"):
        plot_drift(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="time"):
        plot_drift(np.zeros(3), time=np.arange(4))


############################################################################################
# imports


def test_import_does_not_import_matplotlib():
    code = "import sys, dcfa.plot; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install .*dcfa\[demo\].*matplotlib"):
        plot_drift(np.zeros(3))


############################################################################################
# forecasts: a region against the target, predicted against observed, the CV path


def test_series_are_standardised_and_titled_with_their_correlation():
    from dcfa.plot import plot_series

    t = np.arange("2000-01", "2010-01", dtype="datetime64[M]").astype("datetime64[ns]")
    rng = np.random.default_rng(0)
    target = rng.standard_normal(t.size)
    series = xr.DataArray(300 + 2.0 * (target + rng.standard_normal(t.size)), dims="time",
                          coords={"time": t})  # fmt: skip
    ax = plot_series(series, target, label="Nino box")
    region, observed = ax.lines[0].get_ydata(), ax.lines[1].get_ydata()
    np.testing.assert_allclose(region, (series - series.mean()) / series.std())
    np.testing.assert_allclose(observed, (target - target.mean()) / target.std())
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), t)
    r = np.corrcoef(series.values, target)[0, 1]
    assert ax.get_title() == f"Nino box: r = {r:+.2f}"
    with pytest.raises(ValueError, match="target: 5 samples, the series has 120; pair them"):
        plot_series(series, target[:5])
    # dated series are paired by date, as dcfa.align pairs them: a series of fewer months
    # and the whole dated target, or a target stamped ten years off, which was drawn by
    # position with the same r
    dated = pd.Series(target, index=t, name="flow")
    ax = plot_series(series[3:], dated)
    aligned = plot_series(*dcfa.align(series[3:], dated))
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), t[3:])
    for mine, theirs in zip(ax.lines[:2], aligned.lines[:2], strict=True):
        np.testing.assert_array_equal(mine.get_ydata(), theirs.get_ydata())
    assert ax.get_title() == aligned.get_title()
    later = pd.Series(target, index=t + np.timedelta64(3653, "D"), name="flow")
    with pytest.raises(ValueError, match="^target: no label in common with series"):
        plot_series(series, later)
    # a transform's every region at once: it said "the series has 600" samples
    regions = xr.concat([series] * 5, "group").transpose("time", "group")
    pick = r"; pick one, e.g. series.isel\(group=0\)"
    with pytest.raises(ValueError, match=r"^series: expected one series, got shape \(120, 5\) "
                       r"with dims \('time', 'group'\)" + pick):  # fmt: skip
        plot_series(regions, target)
    assert plot_series(series.expand_dims(group=1, axis=1), target).lines  # one region: fine
    # a result store's group: named by its place, with its units (each line is standardised)
    named = series.assign_coords(group_name="sst_2S_129W", group_units="K")
    assert plot_series(named, target).get_legend().get_texts()[0].get_text() == "sst_2S_129W (K)"
    plain = series.assign_attrs(units="m s-1")
    assert plot_series(plain, target).get_title().startswith("region (m s-1): r = ")
    # an estimator's transform: the region by its number, the target by its name
    picked = plain.expand_dims(group=[3], axis=1).isel(group=0)
    named_y = xr.DataArray(target, dims="time", coords={"time": t}, name="myindex")
    texts = [x.get_text() for x in plot_series(picked, named_y).get_legend().get_texts()]
    assert texts == ["region 3 (m s-1)", "myindex"]

    ax = plot_series(picked, pd.Series(target, name="flow"))
    assert ax.get_legend().get_texts()[1].get_text() == "flow"
    _assert_labels_inside(ax)


def test_predicted_against_observed_with_its_r2():
    from dcfa.plot import plot_predicted

    rng = np.random.default_rng(1)
    observed = rng.standard_normal(50)
    predicted = 0.8 * observed + 0.3 * rng.standard_normal(50)
    ax = plot_predicted(observed, predicted)
    np.testing.assert_allclose(ax.collections[0].get_offsets(), np.c_[observed, predicted])
    r2 = 1 - np.sum((observed - predicted) ** 2) / np.sum((observed - observed.mean()) ** 2)
    assert ax.get_title() == f"pooled R² = {r2:+.2f}"
    _assert_labels_inside(ax)


def test_predicted_and_observed_series_are_paired_by_their_dates():
    """Two series of the same length were paired by position: a forecast labelled from
    2000-04 against observations from 2000-01 put each prediction beside the observation
    three months before it. Labelled series are paired by date (a forecast's target_time
    first), else by calendar month; arrays still by position."""
    from dcfa.plot import plot_predicted

    rng = np.random.default_rng(2)
    months = pd.date_range("1999-01-01", periods=60, freq="MS")
    truth = pd.Series(rng.standard_normal(60), index=months + pd.Timedelta(days=14))  # mid-month
    # an applied forecast: labelled by its predictors' months, target_time 3 months later
    made = months[9:33]
    forecast = xr.DataArray(
        truth.values[12:36] + 0.1 * rng.standard_normal(24),
        dims="time",
        coords={"time": made, "target_time": ("time", made + pd.DateOffset(months=3))},
    )
    ax = plot_predicted(truth, forecast)
    frame = pd.DataFrame({"o": truth.values}, index=truth.index.to_period("M")).join(
        pd.DataFrame(
            {"p": forecast.values},
            index=pd.DatetimeIndex(forecast.target_time.values).to_period("M"),
        ),
        how="inner",
    )
    np.testing.assert_array_equal(ax.collections[0].get_offsets(), frame[["o", "p"]].values)

    # a model's stamps (the 16th at noon, the 15th...) a lead later: a few dates match
    # exactly, every month does; all of them are paired, by month
    stamps = xr.date_range("1850-01-01", periods=48, freq="MS", calendar="noleap")
    stamps = [
        d.replace(day=15 if d.month == 2 else 16, hour=0 if d.month in (2, 4) else 12)
        for d in stamps
    ]
    model = xr.DataArray(rng.standard_normal(48), dims="time", coords={"time": stamps})
    ahead = [
        d.replace(month=d.month + 3)
        if d.month <= 9
        else d.replace(year=d.year + 1, month=d.month - 9)
        for d in stamps[:40]
    ]
    made = xr.DataArray(
        rng.standard_normal(40),
        dims="time",
        coords={"time": stamps[:40], "target_time": ("time", ahead)},
    )
    assert 0 < len(set(ahead) & set(stamps)) < 37  # some exact matches, not all
    points = plot_predicted(model, made).collections[0].get_offsets()
    np.testing.assert_array_equal(points, np.c_[model.values[3:43], made.values])

    # same length, other dates: only the months in common, by exact date
    observed = xr.DataArray(rng.standard_normal(24), dims="time", coords={"time": months[:24]})
    later = xr.DataArray(rng.standard_normal(24), dims="time", coords={"time": months[3:27]})
    points = plot_predicted(observed, later).collections[0].get_offsets()
    np.testing.assert_array_equal(points, np.c_[observed.values[3:], later.values[:21]])
    # a model on a 360-day calendar, stamped on the 1st as the observations are: by month
    # (cftime refused to compare its dates with the observations', a TypeError)
    days360 = xr.date_range("1999-04-01", periods=24, freq="MS", calendar="360_day")
    model360 = later.assign_coords(time=days360)
    points = plot_predicted(observed, model360).collections[0].get_offsets()
    np.testing.assert_array_equal(points, np.c_[observed.values[3:], later.values[:21]])
    # arrays, or one side without labels: by position
    points = plot_predicted(observed.values, later).collections[0].get_offsets()
    np.testing.assert_array_equal(points, np.c_[observed.values, later.values])
    with pytest.raises(dcfa.InputError, match="predicted: no label in common with observed"):
        plot_predicted(
            observed, later.assign_coords(time=pd.date_range("2050-01-01", periods=24, freq="MS"))
        )


def test_a_lead_targets_cv_predictions_pair_as_they_were_made():
    """forward_cv's predictions carry the target's coords (target_time too): pairing them by
    date with the target they were made for is pairing them by position."""
    import dcfa
    from dcfa.datasets import make_regions_field
    from dcfa.plot import plot_predicted

    ds = make_regions_field(n_time=120, shape=(6, 8), n_regions=4, seed=3)
    X, y, _ = dcfa.lead_target(ds.field, ds.target, lead=2)
    assert "target_time" in y.coords
    skill = dcfa.forward_cv(dcfa.LinCFA(neighbors=1), X, y, n_splits=3, gap=2)
    assert "target_time" in skill.predictions.coords
    keep = np.isfinite(skill.predictions.values)
    points = plot_predicted(y, skill.predictions).collections[0].get_offsets()
    np.testing.assert_array_equal(points, np.c_[y.values[keep], skill.predictions.values[keep]])


def test_the_path_of_each_cv_estimator_is_drawn_with_the_climatology():
    import dcfa
    from dcfa.datasets import make_regions_field
    from dcfa.plot import plot_path

    ds = make_regions_field(n_time=120, shape=(6, 8), n_regions=4, seed=3)
    rcv = dcfa.RegionsCV(neighbors=1).fit(ds.field, ds.target)
    ax = plot_path(rcv.cv_path_, chosen=(rcv.level_, rcv.n_features_out_))
    path = rcv.cv_path_
    for line, level in zip(ax.lines, path["level"].values, strict=False):
        skill = path["mean_r2"].sel(level=level).values
        np.testing.assert_array_equal(line.get_ydata(), skill[np.isfinite(skill)])
    star = [ln for ln in ax.lines if ln.get_marker() == "*"][0]
    chosen = float(path["mean_r2"].sel(level=rcv.level_, n_groups=rcv.n_features_out_))
    assert star.get_ydata()[0] == chosen
    assert any(ln.get_ydata()[0] == 0 and ln.get_linestyle() == "--" for ln in ax.lines)

    gen = dcfa.GenLinCFACV(neighbors=1, epsilons=[0.6, 0.8], n_splits=3)
    gen.fit(ds.field, ds.target)
    ax = plot_path(gen.cv_path_, chosen=gen.eps_)
    bars = ax.containers[0]
    np.testing.assert_array_equal(bars.lines[0].get_ydata(), gen.cv_path_["mean_cv_r2"].values)
    np.testing.assert_array_equal(bars.lines[0].get_xdata(), gen.cv_path_["n_groups"].values)
    with pytest.raises(ValueError, match="path: expected a cv_path_"):
        plot_path(xr.Dataset())
    _assert_labels_inside(ax)  # a walkthrough's saved path lost its "regions" label


def _assert_labels_inside(ax) -> None:
    """The axis labels of ``ax`` lie inside its figure, as savefig writes it by default."""
    fig = ax.figure
    fig.canvas.draw()
    for label in (x for x in (ax.xaxis.label, ax.yaxis.label) if x.get_text()):
        box = label.get_window_extent(fig.canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width, label.get_text()
        assert 0 <= box.y0 and box.y1 <= fig.bbox.height, label.get_text()


def test_drift_has_a_reference_line_of_the_training_months():
    """The drift curve had no reference: what a score of a fitted-like month reaches."""
    rng = np.random.default_rng(4)
    train, test = rng.gamma(2.0, size=200), rng.gamma(2.0, size=50) + 1.0
    ax = plot_drift(test, reference=train, threshold=6.0)
    assert ax.lines[1].get_ydata()[0] == 6.0  # the threshold, then the reference
    level = ax.lines[2].get_ydata()[0]
    assert level == pytest.approx(np.percentile(train, 95))
    assert ax.lines[2].get_linestyle() == ":"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("95th percentile of the reference") for t in labels), labels
    ax = plot_drift(test, reference=2.5)
    assert ax.lines[1].get_ydata()[0] == 2.5


@pytest.mark.parametrize("calendar", ["noleap", "360_day"])
def test_series_and_drift_on_a_model_calendar_are_drawn_in_decimal_years(calendar):
    """matplotlib cannot place cftime dates without nc-time-axis: plot_series raised
    ``TypeError: float() argument must be ... not 'cftime._cftime.DatetimeNoLeap'``."""
    from dcfa.plot import plot_drift, plot_series

    t = xr.date_range("2001-01-01", periods=24, freq="MS", calendar=calendar, use_cftime=True)
    rng = np.random.default_rng(0)
    series = xr.DataArray(rng.standard_normal(24), dims="time", coords={"time": t})
    x = plot_series(series, rng.standard_normal(24)).lines[0].get_xdata()
    days = 360.0 if calendar == "360_day" else 365.0
    day_of_year = np.array([d.dayofyr for d in t], dtype=float)
    np.testing.assert_allclose(x, [d.year for d in t] + (day_of_year - 1) / days)
    assert x[0] == 2001.0 and 2002.0 < x[-1] < 2003.0
    drawn = plot_drift(series.copy(data=np.abs(series.values))).lines[0].get_xdata()
    np.testing.assert_allclose(drawn, x)


def test_a_pandas_series_is_drawn_on_its_index():
    """plot_drift and plot_series drew a Series indexed by dates against 0 .. n - 1."""
    import pandas as pd

    from dcfa.plot import plot_drift, plot_series

    t = pd.date_range("2000-01-01", periods=6, freq="MS", name="time")
    score = pd.Series([0.0, 1.0, 4.0, 1.0, 0.5, 3.0], index=t)
    ax = plot_drift(score, threshold=2.0)
    np.testing.assert_array_equal(ax.lines[0].get_xdata(orig=True), t.values)
    assert ax.get_xlabel() == "time"
    highlighted = matplotlib.dates.num2date(ax.collections[0].get_offsets()[:, 0])
    assert [d.strftime("%Y-%m") for d in highlighted] == ["2000-03", "2000-06"]
    ax = plot_series(score, score.values[::-1])
    np.testing.assert_array_equal(ax.lines[0].get_xdata(orig=True), t.values)
    plain = pd.Series(score.values)  # the default index: the sample number, as before
    np.testing.assert_array_equal(plot_drift(plain).lines[0].get_xdata(), np.arange(6))
    assert plot_drift(plain).get_xlabel() == "sample"


def _borders_by_hand(labels, lat_edges, lon_edges) -> set:
    """Every edge between two used cells of different groups, cell pair by cell pair."""
    edges = set()
    n_lat, n_lon = labels.shape
    for i in range(n_lat):
        for j in range(n_lon):
            a = labels[i, j]
            if not a >= 0:
                continue
            if j + 1 < n_lon and labels[i, j + 1] >= 0 and labels[i, j + 1] != a:
                x = lon_edges[j + 1]
                edges.add(((x, lat_edges[i]), (x, lat_edges[i + 1])))
            if i + 1 < n_lat and labels[i + 1, j] >= 0 and labels[i + 1, j] != a:
                y = lat_edges[i + 1]
                edges.add(((lon_edges[j], y), (lon_edges[j + 1], y)))
    return edges


def _drawn_borders(ax) -> set:
    from matplotlib.collections import LineCollection

    (lines,) = [c for c in ax.collections if isinstance(c, LineCollection)]
    return {tuple(map(tuple, np.round(seg, 9))) for seg in lines.get_segments()}


def test_regions_of_equal_values_keep_their_borders(no_cartopy):
    """Coloured by a value, two neighbouring regions of the same value (a correlation rounded
    alike, or none) were drawn as one; their borders are now drawn, and only theirs."""
    ax = plot_regions(_region(), values=[0.5, 0.5, 0.5])
    expected = _borders_by_hand(LABELS, LAT_EDGES, LON_EDGES)
    assert len(expected) == 6  # 0|1, 1|2 (four edges) and 0|2; none to an unused cell
    assert _drawn_borders(ax) == expected


def test_stability_draws_the_regions_borders_on_cell_edges(no_cartopy):
    stability = xr.full_like(_region(), 0.5).where(_region() >= 0)
    ax = plot_stability(stability, region=_region())
    assert _drawn_borders(ax) == _borders_by_hand(LABELS, LAT_EDGES, LON_EDGES)


def test_labels_that_are_not_integers_are_refused_by_the_map_and_the_agreement():
    """One check of a map's labels serves plot_regions and map_agreement: 1.5 is no region;
    NaN and -1 are cells in none."""
    grid = {"lat": [0.0, 1.0], "lon": [10.0, 20.0]}
    bad = xr.DataArray([[0.0, 1.5], [1.0, np.nan]], dims=("lat", "lon"), coords=grid)
    good = bad.where(bad != 1.5, -1)
    with pytest.raises(ValueError, match="region: region labels must be integers"):
        dcfa.plot.plot_regions(bad, coastlines=False)
    with pytest.raises(ValueError, match=re.escape("others[0]: region labels must be integers")):
        dcfa.map_agreement(good, [bad])
    ax = dcfa.plot.plot_regions(good, coastlines=False)
    assert ax.collections[0].get_array().mask.tolist() == [[False, True], [False, True]]
    plt.close("all")


def test_maps_are_titled_by_their_regions_and_labels_of_one_value():
    """No title by default left a member's maps side by side unnamed. plot_regions says how
    many regions and, as xarray titles a slice, the labels of one value; "" is none."""
    grid = {"lat": [0.0, 1.0], "lon": [10.0, 20.0, 30.0]}
    region = xr.DataArray([[0, 0, 1], [2, -1, 1]], dims=("lat", "lon"), coords=grid)
    one = region.assign_coords(member="r1i1p1f1", height=2.0)
    assert plot_regions(region, coastlines=False).get_title() == "3 regions"
    assert plot_regions(one, coastlines=False).get_title() == (
        "3 regions, member = r1i1p1f1, height = 2"
    )
    assert (
        plot_regions(one.where(one != 2, -1), coastlines=False)
        .get_title()
        .startswith("2 regions, ")
    )
    assert plot_regions(one, coastlines=False, title="").get_title() == ""
    stability = xr.full_like(one, 0.5, dtype=float)
    assert plot_stability(stability, coastlines=False).get_title() == (
        "member = r1i1p1f1, height = 2"
    )
    assert (
        plot_stability(stability.drop_vars(["member", "height"]), coastlines=False).get_title()
        == ""
    )
    plt.close("all")

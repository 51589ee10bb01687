"""Maps on a lat/lon grid: the regions (by number, or coloured by a value such as their
correlation with the target) and their stability across folds, with longitudes labelled east
and west, on a cartopy projection when cartopy is installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dcfa._errors import InputError, InputTypeError, outside_stacklevel
from dcfa._terminal import counted
from dcfa._validation import region_labels
from dcfa.geo import latitude_label, longitude_label
from dcfa.plot._figure import cartopy_crs as _cartopy_crs
from dcfa.plot._figure import pyplot as _pyplot

if TYPE_CHECKING:
    import cartopy.crs
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap

__all__ = [
    "latitude_label",
    "longitude_label",
    "map_projection",
    "plot_regions",
    "plot_stability",
]

_MAX_ANNOTATED_GROUPS = 30
_UNUSED_COLOUR = (0.85, 0.85, 0.85, 1.0)  # light grey: cells not used (land, no data)
_LAT_NAMES = ("lat", "latitude")
_LON_NAMES = ("lon", "longitude")


def _lat_lon_values(grid: xr.DataArray, lat: str, lon: str, name: str):
    """``(lats, lons, values)`` of a 2-D lat/lon DataArray: both coordinates ascending (a
    grid across its convention's seam made contiguous), ``values`` float64 (n_lat, n_lon)."""
    import pandas as pd
    import xarray as xr

    if not isinstance(grid, xr.DataArray):
        raise InputTypeError(
            f"{name}: expected an xarray.DataArray on the (lat, lon) grid, got "
            f"{type(grid).__name__} (a fitted estimator's label_map_ and stability_map_ are "
            "its labels_ and stability_ on the grid)"
        )
    stacked = [d for d in grid.dims if isinstance(grid.indexes.get(d), pd.MultiIndex)]
    if grid.ndim == 1 and stacked:
        raise InputError(
            f"{name}: expected a 2-D (lat, lon) grid, got dims {grid.dims} (stacked); "
            f"unstack it: {name}.unstack({stacked[0]!r})"
        )
    if grid.ndim != 2:
        # a multi-variable fit's label_map_ has a variable dim (or a window / lag one): one
        # map per value, which the message names
        extra = [d for d in grid.dims if d not in (lat, lon, *_LAT_NAMES, *_LON_NAMES)]
        hint = (
            f"; select one map, e.g. {name}.sel({extra[0]}=...) or {name}.isel({extra[0]}=0)"
            if grid.ndim > 2 and extra
            else ""
        )
        raise InputError(f"{name}: expected a 2-D (lat, lon) grid, got dims {grid.dims}{hint}")
    lat_name = _grid_coord(grid, lat, _LAT_NAMES, "latitude")
    lon_name = _grid_coord(grid, lon, _LON_NAMES, "longitude")
    lat_dim, lon_dim = grid[lat_name].dims[0], grid[lon_name].dims[0]
    if lat_dim == lon_dim:
        raise InputError(
            f"{name}: latitude {lat_name!r} and longitude {lon_name!r} share the dim {lat_dim!r}"
        )
    grid = grid.transpose(lat_dim, lon_dim).sortby([lat_name, lon_name])
    lats = np.asarray(grid[lat_name].values, dtype=np.float64)
    lons = np.asarray(grid[lon_name].values, dtype=np.float64)
    for coord, c in ((lat_name, lats), (lon_name, lons)):
        if not np.all(np.isfinite(c)) or np.any(np.diff(c) <= 0):
            raise InputError(f"{name}: coordinate {coord!r} has repeated or non-finite values")
    values = np.asarray(grid.values, dtype=np.float64)
    # a grid across its convention's seam (350, 0, 10 in 0..360) is drawn as one piece
    seamless = _seamless(lons)
    if seamless is not lons:
        order = np.argsort(seamless, kind="stable")
        lons, values = seamless[order], values[:, order]
    return lats, lons, values


def plot_regions(
    region: xr.DataArray,
    *,
    ax: Axes | None = None,
    coastlines: bool = True,
    title: str | None = None,
    cmap: str | Colormap | None = None,
    annotate: bool = True,
    values: Any = None,
    vmax: float | None = None,
    lat: str = "lat",
    lon: str = "lon",
) -> Axes:
    """Map of the groups (regions) found on a lat/lon grid.

    Parameters
    ----------
    region : xarray.DataArray of shape (n_lat, n_lon) or (n_lon, n_lat)
        Integer group label of every cell, e.g. ``label_map_`` of a fitted LinCFA or the
        ``region`` variable of a result store. A negative label (-1) or NaN marks a cell that
        was not used (land, no data, excluded); such cells are drawn in light grey. Needs 1-D
        latitude and longitude coordinates along its two dimensions, in any order.
    ax : matplotlib.axes.Axes, optional
        Axes to draw on (a cartopy GeoAxes gets coastlines and the right transform). By default
        a new figure, with a cartopy PlateCarree map when ``coastlines`` and cartopy is
        installed.
    coastlines : bool, default=True
        Draw coastlines when cartopy is importable; silently ignored otherwise.
    title : str, optional
        Title of the Axes. By default the number of regions and the map's labels of one
        value (``12 regions, member = r1i1p1f1``), as xarray titles a slice; ``""`` for none.
    cmap : str or matplotlib.colors.Colormap, optional
        Without ``values`` ("tab20" by default), the colours of the groups, which are
        categorical: group ``g`` gets colour ``g`` of a listed colormap (cycled when there are
        more groups than colours) or, for a continuous colormap, an evenly spaced sample of
        it. With ``values`` ("RdBu_r" by default), a diverging colormap centred on 0.
    annotate : bool, default=True
        Write each group's number at a point inside it, when there are at most 30 groups: the
        cell of the group farthest from its edge (the nearest to its centroid among equals),
        so a C-shaped region or one around an island is labelled on itself.
    values : array-like or xarray.DataArray of shape (n_groups,), optional
        A value per group, e.g. ``group_target_corr`` of a result store: each region is
        coloured by it (the sign and strength of its correlation with the target), symmetric
        around 0, with a colour bar named after the DataArray's ``long_name`` or name, and
        the borders between regions drawn, so that neighbours of equal values stay two.
    vmax : float, optional
        With ``values``, the colour scale's end (``-vmax .. vmax``): the same on several maps
        makes them comparable. Default: the largest ``abs(values)``.
    lat, lon : str, default="lat", "lon"
        Names of the coordinates; "latitude" / "longitude" are found automatically.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes; ``ax.collections[0]`` is the QuadMesh of the groups (of their ``values``
        when given), with latitude and longitude ascending whatever the order of the
        coordinates; with ``values``, a LineCollection holds the borders.

    Raises
    ------
    TypeError
        If ``region`` is not an xarray.DataArray.
    ValueError
        If ``region`` is not 2-D, lacks latitude/longitude coordinates along its dimensions,
        has repeated coordinate values or labels that are not integers.

    Notes
    -----
    Cell edges are halfway between neighbouring cell centres, and half a step beyond the
    first and last centres, so regular and irregular grids are both drawn exactly. Latitude
    edges are clipped to [-90, 90].
    """
    lats, lons, labels = _lat_lon_values(region, lat, lon, "region")
    labels = region_labels(labels, "region")
    labels_drawn = np.ma.masked_array(np.maximum(labels, 0), mask=labels < 0)
    groups = np.unique(labels[labels >= 0])

    lat_edges, lon_edges = _lat_edges(lats), _edges(lons)
    ax, kw = _map_axes(ax, coastlines, lons)

    if values is None:
        colormap, norm = _categorical(cmap or "tab20", int(groups.max()) + 1 if groups.size else 1)
        ax.pcolormesh(lon_edges, lat_edges, labels_drawn, cmap=colormap, norm=norm,
                      shading="flat", **kw)  # fmt: skip
    else:
        _by_value(ax, lon_edges, lat_edges, labels_drawn, values, cmap or "RdBu_r", vmax, kw)
        # neighbouring regions of equal (or near) values would show as one
        _draw_borders(ax, labels, lat_edges, lon_edges, "0.25", kw)

    if annotate and 0 < groups.size <= _MAX_ANNOTATED_GROUPS:
        for g in groups:
            i, j = _inside_point(labels == g, lats, lons)
            ax.text(
                float(lons[j]),
                float(lats[i]),
                str(int(g)),
                ha="center",
                va="center",
                fontsize="small",
                fontweight="bold",
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.7},
                **kw,
            )

    if title is None:
        title = _map_title(region, counted(groups.size, "region"))
    _finish_map(ax, bool(kw), lat_edges, lon_edges, title, "plot_regions")
    return ax


def _map_title(grid: xr.DataArray, *first: str) -> str:
    """``first`` and the map's labels of one value (``member = r1i1p1f1``), as xarray titles
    a plot of one slice."""
    scalars = [f"{k} = {_label(c.values.item())}" for k, c in grid.coords.items() if c.ndim == 0]
    return ", ".join([*first, *scalars])


def _label(value) -> str:
    """A label of one value in a title: a number briefly, a date or a name as written."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _by_value(ax, lon_edges, lat_edges, labels, values, cmap, vmax, kw) -> None:
    """Each region coloured by its value (``values[label]``), diverging around 0, with a
    colour bar."""
    import matplotlib as mpl

    v = np.asarray(getattr(values, "values", values), dtype=np.float64).ravel()
    n = int(labels.max()) + 1 if labels.count() else 0
    if v.size < n:
        raise InputError(f"values: {v.size} values for {n} groups; expected one per group")
    drawn = np.ma.masked_array(v[labels.filled(0)], mask=np.ma.getmaskarray(labels))
    drawn = np.ma.masked_invalid(drawn)
    top = float(np.nanmax(np.abs(v[:n]))) if n and np.isfinite(v[:n]).any() else 1.0
    top = top if vmax is None else float(vmax)
    colormap = mpl.colormaps[cmap] if isinstance(cmap, str) else cmap
    mesh = ax.pcolormesh(lon_edges, lat_edges, drawn, shading="flat", vmin=-top, vmax=top,
                         cmap=colormap.with_extremes(bad=_UNUSED_COLOUR), **kw)  # fmt: skip
    attrs = getattr(values, "attrs", {}) or {}
    label = attrs.get("long_name") or getattr(values, "name", None) or "value of the region"
    ax.figure.colorbar(mesh, ax=ax, shrink=0.7, label=str(label))


def _draw_borders(ax, labels: np.ndarray, lat_edges, lon_edges, colour, kw) -> None:
    """Lines along the cell edges between two used cells (labels >= 0) of different groups;
    an unused cell's grey marks its own edge."""
    from matplotlib.collections import LineCollection

    segments = _border_segments(labels, lat_edges, lon_edges)
    if segments.size:
        ax.add_collection(LineCollection(segments, colors=colour, linewidths=0.8, **kw))


def _border_segments(labels: np.ndarray, lat_edges, lon_edges) -> np.ndarray:
    """The cell edges between neighbouring used cells of different groups, as segments
    ``(n, 2, 2)`` of ``(lon, lat)`` points; ``labels`` (n_lat, n_lon), -1 for unused cells."""
    lat_edges, lon_edges = np.asarray(lat_edges), np.asarray(lon_edges)
    used = labels >= 0
    # east-west neighbours share the edge lon_edges[j + 1], from lat_edges[i] to [i + 1]
    i, j = np.nonzero(used[:, :-1] & used[:, 1:] & (labels[:, :-1] != labels[:, 1:]))
    x = lon_edges[j + 1]
    vertical = np.stack([np.stack([x, lat_edges[i]], -1), np.stack([x, lat_edges[i + 1]], -1)], 1)
    # north-south neighbours share lat_edges[i + 1], from lon_edges[j] to [j + 1]
    i, j = np.nonzero(used[:-1] & used[1:] & (labels[:-1] != labels[1:]))
    y = lat_edges[i + 1]
    across = np.stack([np.stack([lon_edges[j], y], -1), np.stack([lon_edges[j + 1], y], -1)], 1)
    return np.concatenate([vertical, across]).reshape(-1, 2, 2)


def _inside_point(cells: np.ndarray, lats: np.ndarray, lons: np.ndarray) -> tuple[int, int]:
    """The cell of a region farthest from its edge, in cells (the nearest to the region's
    centroid among equals): a point inside any shape, where the centroid of a C or a ring
    lies outside it."""
    from scipy.ndimage import distance_transform_edt

    depth = distance_transform_edt(np.pad(cells, 1))[1:-1, 1:-1]
    rows, cols = np.nonzero(cells)
    centre = np.array([rows.mean(), cols.mean()])
    deepest = depth[rows, cols] == depth[rows, cols].max()
    off = (rows[deepest] - centre[0]) ** 2 + (cols[deepest] - centre[1]) ** 2
    k = int(np.argmin(off))
    return int(rows[deepest][k]), int(cols[deepest][k])


def plot_stability(
    stability: xr.DataArray,
    *,
    ax: Axes | None = None,
    coastlines: bool = True,
    title: str | None = None,
    cmap: str | Colormap = "viridis",
    region: xr.DataArray | None = None,
    lat: str = "lat",
    lon: str = "lon",
) -> Axes:
    """Map of how much each cell's region recurs across cross-validation folds.

    Parameters
    ----------
    stability : xarray.DataArray of shape (n_lat, n_lon)
        Values in [0, 1], e.g. ``stability_map_`` of a fitted :class:`dcfa.RegionsCV` or the
        ``stability`` variable of a result store: 1 where the cell's region holds the same
        cells in every fold's map. NaN (cells not used) is drawn in light grey.
    ax, coastlines, lat, lon
        As in :func:`plot_regions`.
    title : str, optional
        Title of the Axes. By default the map's labels of one value (``member =
        r1i1p1f1``), as xarray titles a slice; ``""`` for none.
    cmap : str or matplotlib.colors.Colormap, default="viridis"
    region : xarray.DataArray, optional
        The region map on the same grid (``label_map_``): its borders, the cell edges between
        two regions, are drawn in white (a LineCollection).

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.collections[0]`` is the QuadMesh of the values, with a colour bar.
    """
    lats, lons, values = _lat_lon_values(stability, lat, lon, "stability")
    lat_edges, lon_edges = _lat_edges(lats), _edges(lons)
    ax, kw = _map_axes(ax, coastlines, lons)
    masked = np.ma.masked_invalid(values)
    import matplotlib as mpl

    colormap = mpl.colormaps[cmap] if isinstance(cmap, str) else cmap
    colormap = colormap.with_extremes(bad=_UNUSED_COLOUR)
    mesh = ax.pcolormesh(lon_edges, lat_edges, masked, cmap=colormap, vmin=0.0, vmax=1.0,
                         shading="flat", **kw)  # fmt: skip
    ax.figure.colorbar(mesh, ax=ax, shrink=0.7, label="region recurrence across folds")
    if region is not None:
        _, rlons, labels = _lat_lon_values(region, lat, lon, "region")
        if labels.shape != values.shape or not np.allclose(rlons, lons):
            raise InputError("region: expected the grid of stability")
        _draw_borders(ax, region_labels(labels, "region"), lat_edges, lon_edges, "w", kw)
    if title is None:
        title = _map_title(stability)
    _finish_map(ax, bool(kw), lat_edges, lon_edges, title, "plot_stability")
    return ax


def _lat_edges(lats: np.ndarray) -> np.ndarray:
    edges = _edges(lats)
    return np.clip(edges, -90.0, 90.0) if np.all(np.abs(lats) <= 90) else edges


def _map_axes(ax, coastlines: bool, lons: np.ndarray):
    """The Axes to draw a map on (a new one: a cartopy map when asked and available) and the
    keyword arguments that put data on it."""
    plt = _pyplot()
    ccrs = _cartopy_crs() if coastlines else None
    if ax is None:
        if ccrs is not None:
            _, ax = plt.subplots(
                subplot_kw={"projection": _projection(ccrs, lons)}, layout="constrained"
            )
        else:
            _, ax = plt.subplots(layout="constrained")
    geo = ccrs is not None and hasattr(ax, "coastlines")
    return ax, ({"transform": ccrs.PlateCarree()} if geo else {})


def _finish_map(ax, geo: bool, lat_edges, lon_edges, title: str | None, caller: str) -> None:
    """Coastlines, gridlines and extent of a cartopy map (``geo``), or plain axes' limits and
    labels; ``caller``, the public function drawing, is named by the coastlines' warning."""
    if geo:
        ccrs = _cartopy_crs()
        _add_coastlines(ax, caller)
        gl = ax.gridlines(draw_labels=True, linewidth=0.3, color="grey", alpha=0.6)
        gl.top_labels = gl.right_labels = False
        all_longitudes = lon_edges[-1] - lon_edges[0] >= 359.0
        if all_longitudes and lat_edges[-1] - lat_edges[0] >= 179.0:
            ax.set_global()
        elif all_longitudes:
            # a band around the globe: set_extent would wrap a span of 360 degrees to an
            # empty one; the whole map's width, cut to the band's latitudes
            ax.set_global()
            centre = ax.projection.proj4_params.get("lon_0", 0.0)
            y = ax.projection.transform_points(
                ccrs.PlateCarree(), np.full(2, centre), np.asarray(lat_edges)[[0, -1]]
            )[:, 1]
            ax.set_ylim(y.min(), y.max())
        else:
            ax.set_extent(
                [lon_edges[0], lon_edges[-1], lat_edges[0], lat_edges[-1]], crs=ccrs.PlateCarree()
            )
    else:
        from matplotlib.ticker import FuncFormatter

        ax.set_xlim(lon_edges[0], lon_edges[-1])
        ax.set_ylim(lat_edges[0], lat_edges[-1])
        ax.set_aspect("equal", adjustable="box")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: longitude_label(x)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: latitude_label(y)))
        ax.set_xlabel("longitude")
        ax.set_ylabel("latitude")
    if title is not None:
        ax.set_title(title)


def _add_coastlines(ax, caller: str) -> None:
    """Natural Earth 110m coastlines, or a warning when cartopy has not got them and cannot
    download them (compute nodes are often offline; cartopy would fail at draw time)."""
    import warnings

    from cartopy.io import DownloadWarning, shapereader

    try:
        with warnings.catch_warnings():
            # cartopy's "Downloading ...": offline, the warning below says what happened
            warnings.simplefilter("ignore", DownloadWarning)
            shapereader.natural_earth(resolution="110m", category="physical", name="coastline")
    except OSError as exc:  # urllib's URLError is an OSError
        warnings.warn(
            f"{caller}: drawn without coastlines: cartopy has no Natural Earth coastline "
            f"data on disk and cannot download them ({exc}). Download them once where there "
            "is network (cartopy's data_dir), or pass coastlines=False.",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
        return
    ax.coastlines(resolution="110m")


def map_projection(region: xr.DataArray, *, lon: str = "lon") -> cartopy.crs.Projection | None:
    """The cartopy projection :func:`plot_regions` draws ``region`` on, or None without cartopy.

    For axes made beforehand, e.g. ``plt.subplots(2, subplot_kw={"projection": p})`` with
    ``p = map_projection(region)`` (when it is not None).
    """
    ccrs = _cartopy_crs()
    if ccrs is None:
        return None
    name = _grid_coord(region, lon, _LON_NAMES, "longitude")
    # the longitudes as plot_regions draws them: a grid across its seam in one piece
    lons = np.sort(np.asarray(region[name].values, dtype=float))
    return _projection(ccrs, _seamless(lons))


def _projection(ccrs, lons: np.ndarray):
    """PlateCarree, centred on the dateline when the grid crosses it in 0..360; for a grid
    around the globe, on the middle of its cells' edges, so that the map's seam is the
    grid's own edge and no cell straddles it (a cell across the seam needs a transparent
    colour for unused cells, where dcfa draws them grey)."""
    edges = _edges(np.sort(lons))
    if edges[-1] - edges[0] >= 359.0:
        return ccrs.PlateCarree(central_longitude=float(edges[0] + edges[-1]) / 2)
    crosses_dateline = lons.min() >= 0 and lons.max() <= 360 and lons.min() < 180 < lons.max()
    return ccrs.PlateCarree(central_longitude=180 if crosses_dateline else 0)


def _grid_coord(region: xr.DataArray, name: str, standard: Sequence[str], what: str) -> str:
    """The name of the 1-D ``what`` coordinate of ``region`` along one of its dims."""
    candidates = [name, *(s for s in standard if s != name)]
    for c in candidates:
        if c in region.coords:
            coord = region.coords[c]
            if coord.ndim != 1 or coord.dims[0] not in region.dims:
                raise InputError(
                    f"region: {what} coordinate {c!r} must be 1-D along one of the dims "
                    f"{region.dims}, got dims {coord.dims}"
                )
            return c
    raise InputError(
        f"region: no {what} coordinate (looked for {candidates}); coordinates are "
        f"{list(region.coords)}. Pass the name with lat=/lon=."
    )


def _seamless(lons: np.ndarray) -> np.ndarray:
    """Ascending longitudes of a grid that straddles the seam of its convention, made
    contiguous; ``lons`` itself when they already are.

    Sorted as given, a regional grid across Greenwich in 0..360 (0, 10, 350) or across the
    dateline in -180..180 (-170, 170) has an inner gap wider than the rest of the circle, and
    its cells would be drawn from one end of the map to the other. The part past the gap
    moves by 360 degrees: below 0 in 0..360 (-10, 0, 10), above 180 in -180..180 (170, 190).
    A global grid (no gap wider than the others) is left alone.
    """
    if lons.size < 2 or lons[0] < -180.0 or lons[-1] > 360.0 or lons[-1] - lons[0] >= 360.0:
        return lons
    gaps = np.diff(lons)
    i = int(np.argmax(gaps))
    seam = 360.0 - (lons[-1] - lons[0])  # the gap across the map's edge
    if gaps[i] <= seam * (1.0 + 1e-6) + 1e-9:
        return lons
    out = lons.copy()
    if lons[0] >= 0.0:
        out[i + 1 :] -= 360.0
    else:
        out[: i + 1] += 360.0
    return out


def _edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges from ascending cell centres: midpoints, extended half a step at both ends."""
    if centres.size == 1:
        return np.array([centres[0] - 0.5, centres[0] + 0.5])
    mid = (centres[:-1] + centres[1:]) / 2
    first = centres[0] - (centres[1] - centres[0]) / 2
    last = centres[-1] + (centres[-1] - centres[-2]) / 2
    return np.concatenate([[first], mid, [last]])


def _categorical(cmap: str | Colormap, n: int):
    """A ListedColormap of ``n`` categories from ``cmap`` and its BoundaryNorm."""
    import matplotlib as mpl
    from matplotlib.colors import BoundaryNorm, ListedColormap

    base = mpl.colormaps[cmap] if isinstance(cmap, str) else cmap
    if isinstance(base, ListedColormap) and base.N < 256:
        palette = [base(i) for i in range(base.N)]
        colors = [palette[i % len(palette)] for i in range(n)]
    else:
        colors = [base(x) for x in np.linspace(0.0, 1.0, n)]
    colormap = ListedColormap(colors, name="dcfa_groups").with_extremes(bad=_UNUSED_COLOUR)
    norm = BoundaryNorm(np.arange(n + 1) - 0.5, n)
    return colormap, norm

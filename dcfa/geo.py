"""Longitudes on the circle: circular means, conventions and global (periodic) grids.

A longitude of 179 and one of -179 are 2 degrees apart, and so are 359 and 1. The arithmetic
mean of a region that spans the seam of its convention (the dateline on a -180..180 grid,
Greenwich on a 0..360 grid) lands on the other side of the globe; :func:`circular_mean` does
not. :func:`is_global_longitude` tells a regularly spaced longitude axis that closes on itself
(its last cell is a neighbour of its first) from a regional one. Everything here takes plain
arrays (degrees) and returns plain values: no xarray, no Dask.

:func:`group_mean` is the arithmetic counterpart of :func:`group_circular_mean`, for latitudes
and other per-cell values. :func:`latitude_label`, :func:`longitude_label` and
:func:`extent_text` write places as a reader does (``10°S``, ``170°E-170°W``).

:func:`group_patches` counts the connected patches of every group of a ``(lat, lon)`` label map
(a fitted estimator's ``label_map_``), with the neighbours of the ``neighbors=1`` grid
restriction and across the longitude seam of a global grid: how readable a map of groups is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dcfa._errors import InputError

__all__ = [
    "box_positions",
    "circular_mean",
    "extent_text",
    "group_circular_mean",
    "group_mean",
    "group_patches",
    "hemisphere",
    "is_global_longitude",
    "is_longitude",
    "latitude_label",
    "longitude_arc",
    "longitude_axes",
    "longitude_convention",
    "longitude_label",
    "unwrapped_mean",
    "whole_degrees",
    "wrap_longitude",
]

LONGITUDE_NAMES = ("lon", "longitude")
# CF units of longitude (lower case, without spaces)
_LONGITUDE_UNITS = frozenset(
    {"degrees_east", "degree_east", "degrees_e", "degree_e", "degreese", "degreee"}
)
_LATITUDE_UNITS = frozenset(
    {"degrees_north", "degree_north", "degrees_n", "degree_n", "degreesn", "degreen"}
)
# below this mean resultant length the mean direction is undefined (points spread evenly)
_UNDEFINED = 1e-9


def longitude_convention(lon) -> float:
    """The lower bound of the convention ``lon`` is written in: -180.0 or 0.0.

    -180..180 when any finite value is negative, else 0..360 (a grid in 0..360 may be
    non-monotonic across its seam, e.g. 180, ..., 355, 0, ..., 175, and stays 0..360).
    """
    values = np.asarray(lon, dtype=np.float64)
    finite = values[np.isfinite(values)]
    return -180.0 if finite.size and finite.min() < 0 else 0.0


def hemisphere(value: float, axis: str) -> tuple[float, str]:
    """``(degrees, letter)`` of a latitude (``axis="lat"``: N from 0 up, S below) or of a
    longitude in any convention (``"lon"``: E from 0 to 180, W from there to 360), what
    ``10°S`` or ``160°W`` is written from."""
    v = float(value)
    if axis == "lat":
        return abs(v), ("S" if v < 0 else "N")
    v = v % 360.0
    return (v, "E") if v <= 180.0 else (360.0 - v, "W")


def whole_degrees(value: float, axis: str = "lat") -> int:
    """A latitude (``axis="lat"``) or longitude (``"lon"``, any convention, taken into
    -180..180 first) in whole degrees, halves away from zero: one cell gets one degree in
    every convention, and the cells on either side of a whole degree (43.5 and 44.5) get two,
    where Python's ``round`` (halves to even) gives both 44."""
    v = float(value)
    if axis == "lon":
        v = float(wrap_longitude(v))
    v = round(v, 6)  # a mean's float noise (-100.49999999) is a half
    whole = math.floor(abs(v) + 0.5)
    return int(math.copysign(whole, v)) if whole else 0


def longitude_label(x: float) -> str:
    """``160°W``, ``20°E``, ``0°``, ``180°``: a longitude of any convention (0..360 too)."""
    degrees, letter = hemisphere(x, "lon")
    if np.isclose(degrees, 180.0) or np.isclose(degrees, 0.0):
        return f"{round(degrees):g}°"
    return f"{degrees:g}°{letter}"


def latitude_label(y: float) -> str:
    """``10°S``, ``0°``, ``30°N``."""
    degrees, letter = hemisphere(y, "lat")
    return "0°" if np.isclose(degrees, 0.0) else f"{degrees:g}°{letter}"


def longitude_arc(lon) -> tuple[float, float]:
    """``(west, east)``, in [0, 360): the shortest arc, eastwards from ``west`` to ``east``,
    that holds every longitude ``lon`` (across the dateline or Greenwich too)."""
    u = np.unique(np.asarray(lon, dtype=np.float64) % 360.0)
    if u.size == 1:
        return float(u[0]), float(u[0])
    gaps = np.diff(np.r_[u, u[0] + 360.0])  # the last: from the easternmost round to the first
    i = int(np.argmax(gaps))
    return float(u[(i + 1) % u.size]), float(u[i])


def extent_text(lat, lon) -> str:
    """Where cells lie, in whole degrees: ``"5°S-3°N, 170°E-170°W"``, their latitudes' range
    and the shortest arc of longitude that holds them; one value for one row or column;
    ``"all longitudes"`` for cells evenly spaced all round (a band around the globe), which
    no arc is the shortest to hold."""
    lat = np.asarray(lat, dtype=np.float64)

    def span(low: str, high: str) -> str:
        return low if low == high else f"{low}-{high}"

    # rounded before labelled: the equator as 0°, not 0°N; the dateline as 180°
    lats = span(*(latitude_label(whole_degrees(v)) for v in (lat.min(), lat.max())))
    u = np.unique(np.asarray(lon, dtype=np.float64) % 360.0)
    if u.size > 2 and np.allclose(np.diff(np.r_[u, u[0] + 360.0]), 360.0 / u.size):
        return f"{lats}, all longitudes"
    west, east = longitude_arc(u)
    lons = (longitude_label(whole_degrees(v, "lon")) for v in (west, east))
    return f"{lats}, {span(*lons)}"


def wrap_longitude(lon, lower: float = -180.0):
    """``lon`` (degrees) wrapped into ``[lower, lower + 360)``; NaN stays NaN."""
    values = np.asarray(lon, dtype=np.float64)
    out = np.mod(values - lower, 360.0) + lower
    # np.mod(-1e-20, 360) is 360.0 in floating point: fold that back to the lower bound
    out = np.where(out >= lower + 360.0, lower, out)
    return out if out.ndim else float(out)


def box_positions(values, bounds, *, longitude: bool = False) -> np.ndarray:
    """Positions of the labels ``values`` within ``bounds = (a, b)``, ends included (up to
    float rounding): between the two, in the labels' order; for a longitude (degrees, any
    convention), eastward from ``a`` to ``b`` and in that order (``(120, -70)`` and
    ``(120, 290)`` are one box, ``(-30, 30)`` crosses Greenwich, ``(0, 360)`` is the circle).
    """
    v = np.asarray(values, dtype=np.float64)
    a, b = float(bounds[0]), float(bounds[1])
    finite = np.abs(v[np.isfinite(v)])
    tol = 1e-6 * max(1.0, float(finite.max()) if finite.size else 1.0)
    if not longitude:
        low, high = min(a, b), max(a, b)
        return np.flatnonzero((v >= low - tol) & (v <= high + tol))
    span = (b - a) % 360.0
    if span == 0.0 and a != b:
        span = 360.0
    offset = (v - a) % 360.0
    offset = np.where(offset > 360.0 - tol, 0.0, offset)  # ``a`` itself, rounded below it
    inside = np.flatnonzero(offset <= span + tol)
    return inside[np.argsort(offset[inside], kind="stable")]


def circular_mean(lon, weights=None, *, lower: float | None = None) -> float:
    """Mean direction of longitudes (degrees): the angle of the mean of ``exp(i lon)``.

    Parameters
    ----------
    lon : array-like
        Longitudes in degrees, any convention (mixed is fine). NaN values are ignored.
    weights : array-like, optional
        Non-negative weights of the same shape (e.g. cell areas).
    lower : float, optional
        Report the mean in ``[lower, lower + 360)``; default: the convention of ``lon``
        (:func:`longitude_convention`).

    Returns
    -------
    float
        The circular mean, NaN when there is no finite value or when the mean direction is
        undefined (the points are spread evenly around the circle, e.g. a full latitude band).
    """
    values = np.asarray(lon, dtype=np.float64).ravel()
    w = np.ones_like(values) if weights is None else np.asarray(weights, np.float64).ravel()
    if w.shape != values.shape:
        raise InputError(f"weights: expected {values.shape[0]} values, got {w.shape[0]}")
    ok = np.isfinite(values) & np.isfinite(w)
    lower = longitude_convention(values) if lower is None else float(lower)
    labels = np.zeros(values.size, dtype=np.int64)
    labels[~ok] = -1
    return float(group_circular_mean(labels, np.where(ok, values, 0.0), 1, w, lower=lower)[0])


def unwrapped_mean(lon, *, lower: float | None = None) -> float:
    """Arithmetic mean of longitudes unwrapped around their circular mean (degrees).

    Each value is taken within 180 degrees of :func:`circular_mean` before averaging: for
    points that do not straddle the seam of their convention this is exactly their
    arithmetic mean, and for points that do it is the arithmetic mean on a map centred on
    them. The centroid of a region as drawn on a map (where :func:`dcfa.plot.plot_regions`
    puts a group's number). NaN where :func:`circular_mean` is.
    """
    values = np.asarray(lon, dtype=np.float64).ravel()
    values = values[np.isfinite(values)]
    lower = longitude_convention(values) if lower is None else float(lower)
    centre = circular_mean(values, lower=lower)
    if not np.isfinite(centre):
        return float("nan")
    offset = wrap_longitude(values - centre, -180.0)
    return float(wrap_longitude(centre + np.mean(offset), lower))


def group_mean(labels, values, n_groups: int) -> np.ndarray:
    """The arithmetic mean of the values of every group at once: latitudes, or any per-cell
    value (the counterpart of :func:`group_circular_mean` for what is not an angle).

    ``labels`` gives the group of each value, ``0 .. n_groups - 1``; other labels are
    ignored. NaN for a group without values.
    """
    labels = np.asarray(labels).ravel()
    values = np.asarray(values, dtype=np.float64).ravel()
    use = (labels >= 0) & (labels < n_groups)
    g = labels[use].astype(np.int64)
    sizes = np.bincount(g, minlength=n_groups)
    total = np.bincount(g, weights=values[use], minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sizes > 0, total / sizes, np.nan)


def group_circular_mean(labels, lon, n_groups: int, weights=None, *, lower: float = 0.0):
    """:func:`circular_mean` of the longitudes of every group at once.

    Parameters
    ----------
    labels : array-like of int
        Group of each value, ``0 .. n_groups - 1``; negative labels are ignored.
    lon : array-like of the same shape
        Longitudes in degrees; NaN values are ignored.
    n_groups : int
    weights : array-like of the same shape, optional
    lower : float, default=0.0
        The means are reported in ``[lower, lower + 360)``.

    Returns
    -------
    ndarray of shape (n_groups,)
        NaN for a group without finite values or whose mean direction is undefined.
    """
    labels = np.asarray(labels).ravel()
    values = np.asarray(lon, dtype=np.float64).ravel()
    w = np.ones_like(values) if weights is None else np.asarray(weights, np.float64).ravel()
    if not (labels.shape == values.shape == w.shape):
        raise InputError(
            f"labels, lon, weights: expected the same shape, got {labels.shape}, "
            f"{values.shape}, {w.shape}"
        )
    use = (labels >= 0) & (labels < n_groups) & np.isfinite(values) & np.isfinite(w)
    g, rad, w = labels[use].astype(np.int64), np.deg2rad(values[use]), w[use]
    total = np.bincount(g, weights=w, minlength=n_groups)
    c = np.bincount(g, weights=w * np.cos(rad), minlength=n_groups)
    s = np.bincount(g, weights=w * np.sin(rad), minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        resultant = np.hypot(c, s) / total
    mean = np.rad2deg(np.arctan2(s, c))
    defined = (total > 0) & (resultant > _UNDEFINED)
    return np.where(defined, wrap_longitude(mean, lower), np.nan)


def is_longitude(name: str, attrs: Mapping | None = None) -> bool:
    """Whether a coordinate is a longitude in degrees, from its CF attributes or its name.

    ``standard_name = "longitude"`` or units ``degrees_east`` (any CF spelling) say so
    whatever the name (``x``, ``nav_lon``, ...); without them a coordinate named ``lon`` or
    ``longitude`` is one unless its units say it is not in degrees.
    """
    attrs = {} if attrs is None else attrs
    units = str(attrs.get("units", "")).lower().replace(" ", "")
    if attrs.get("standard_name") == "longitude" or units in _LONGITUDE_UNITS:
        return True
    if units and "degree" not in units:
        return False
    return str(name).lower() in LONGITUDE_NAMES


def is_global_longitude(lon, *, rtol: float = 0.01) -> bool:
    """Whether a 1-D longitude axis is regular and closes on itself around the globe.

    True when every step between consecutive values, taken modulo 360 and including the step
    from the last value back to the first, is ``360 / size`` (within ``rtol`` of it), in
    either direction. So 0, 15, ..., 345 and -180, -165, ..., 165 and 180, ..., 345, 0, ...,
    165 (non-monotonic across the seam) are global; 100, 105, ..., 300 is not, and neither is
    a global grid with a missing column (its spacing times its size is not 360).
    """
    values = np.asarray(lon, dtype=np.float64)
    if values.ndim != 1 or values.size < 2 or not np.isfinite(values).all():
        return False
    step = 360.0 / values.size
    steps = np.diff(np.append(values, values[0]))
    tol = rtol * step
    for sign in (1.0, -1.0):
        d = np.mod(sign * steps, 360.0)
        if np.all(np.abs(d - step) <= tol):
            return True
    return False


def longitude_axes(dims, coords: Mapping) -> dict[int, np.ndarray | None]:
    """Which of ``dims`` are longitude axes, with their longitude values (None if unknown).

    ``coords`` maps names to coordinate variables (anything with ``dims``, ``attrs`` and
    ``values``, e.g. ``DataArray.coords``). A dim is a longitude axis when its own coordinate
    is a longitude (:func:`is_longitude`); when it has no coordinate of its own, when a
    single 1-D coordinate along it is (``x`` with ``lon(x)``), or, without any, when the dim
    is named ``lon`` / ``longitude`` (values unknown). A dim with both a latitude and a
    longitude along it (cells stacked into one dim) is not an axis.
    """
    out: dict[int, np.ndarray | None] = {}
    for axis, dim in enumerate(dims):
        if dim in coords:
            c = coords[dim]
            if tuple(c.dims) == (dim,) and is_longitude(dim, c.attrs):
                out[axis] = np.asarray(c.values)
            continue
        along = {k: c for k, c in coords.items() if tuple(c.dims) == (dim,)}
        lons = [k for k, c in along.items() if is_longitude(k, c.attrs)]
        lats = [k for k, c in along.items() if _is_latitude(k, c.attrs)]
        if len(lons) == 1 and not lats:
            out[axis] = np.asarray(along[lons[0]].values)
        elif not along and str(dim).lower() in LONGITUDE_NAMES:
            out[axis] = None
    return out


def latitude_axes(dims, coords: Mapping) -> dict[int, np.ndarray]:
    """Which of ``dims`` are latitude axes (their own 1-D coordinate is a numeric latitude),
    with their values. ``coords`` as in :func:`longitude_axes`."""
    out: dict[int, np.ndarray] = {}
    for axis, dim in enumerate(dims):
        c = coords.get(dim)
        if c is None or tuple(c.dims) != (dim,) or not _is_latitude(dim, c.attrs):
            continue
        values = np.asarray(c.values)
        if np.issubdtype(values.dtype, np.number):
            out[axis] = values.astype(np.float64)
    return out


def _is_latitude(name: str, attrs: Mapping) -> bool:
    units = str(attrs.get("units", "")).lower().replace(" ", "")
    return (
        attrs.get("standard_name") == "latitude"
        or units in _LATITUDE_UNITS
        or str(name).lower() in ("lat", "latitude")
    )


# the half of the 8-neighbourhood: every unordered pair of touching cells once (same lat row:
# the next lon; next lat row: lon - 1, lon, lon + 1), as dcfa.neighbors.grid_adjacency(shape, 1)
_HALF_NEIGHBOURHOOD = ((0, 1), (1, -1), (1, 0), (1, 1))


def group_patches(label_map, periodic: bool = False, *, n_groups: int | None = None) -> np.ndarray:
    """Number of connected patches of every group of a 2-D label map.

    Two cells touch when they differ by at most one step in latitude and in longitude
    (8-connectivity: diagonals touch), the adjacency of
    ``dcfa.neighbors.grid_adjacency(shape, 1)``; on a periodic grid the first and last
    longitude columns touch as well. A patch of a group is a maximal set of its cells linked
    through touching cells of the same group.

    Parameters
    ----------
    label_map : array-like or xarray.DataArray of shape (n_lat, n_lon)
        Group of every cell, ``0 .. n_groups - 1``; negative (``-1``: excluded, not assigned,
        land) or NaN cells belong to no group and link nothing. A DataArray (e.g. an
        estimator's ``label_map_``) is read through ``.values``; its dims must be in
        (latitude, longitude) order when ``periodic`` is true.
    periodic : bool, default=False
        Whether the longitude axis (the last one) wraps around the globe (see
        :func:`is_global_longitude`).
    n_groups : int, optional
        Length of the result; default ``max(label) + 1``. Groups without cells have 0 patches.

    Returns
    -------
    ndarray of int64, shape (n_groups,)
        Patches per group: 1 for a contiguous group.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, -1, 0],
    ...                    [1,  1, -1],
    ...                    [-1, -1, 1]])
    >>> group_patches(labels)  # group 0: two cells with a gap; group 1: linked diagonally
    array([2, 1])
    >>> group_patches(labels, periodic=True)  # the first and last columns touch
    array([1, 1])
    >>> float((group_patches(labels) == 1).mean())  # share of groups that are one patch
    0.5
    """
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    values = np.asarray(getattr(label_map, "values", label_map))
    if values.ndim != 2:
        raise InputError(f"label_map: expected a 2-D (lat, lon) map, got shape {values.shape}")
    if values.dtype.kind == "f":
        if np.any(np.isfinite(values) & (values != np.round(values))):
            raise InputError("label_map: expected integer group labels")
        values = np.where(np.isfinite(values), values, -1)
    elif values.dtype.kind not in "iu":
        raise InputError(f"label_map: expected integer group labels, got dtype {values.dtype}")
    labels = values.astype(np.int64)
    top = int(labels.max(initial=-1)) + 1
    if n_groups is None:
        n_groups = top
    elif int(n_groups) != n_groups or n_groups < top:
        raise InputError(f"n_groups: expected an int >= {top} (max label + 1), got {n_groups!r}")
    n_groups = int(n_groups)
    nlat, nlon = labels.shape
    index = np.arange(labels.size).reshape(labels.shape)
    rows, cols = [], []
    for di, dj in _HALF_NEIGHBOURHOOD:
        a, la = index[: nlat - di], labels[: nlat - di]
        b, lb = index[di:], labels[di:]
        if periodic:
            b, lb = np.roll(b, -dj, axis=1), np.roll(lb, -dj, axis=1)
        elif dj:
            keep_a = slice(0, nlon - 1) if dj > 0 else slice(1, nlon)
            keep_b = slice(1, nlon) if dj > 0 else slice(0, nlon - 1)
            a, la, b, lb = a[:, keep_a], la[:, keep_a], b[:, keep_b], lb[:, keep_b]
        same = (la == lb) & (la >= 0)
        rows.append(a[same])
        cols.append(b[same])
    r, c = np.concatenate(rows), np.concatenate(cols)
    graph = coo_array((np.ones(r.size, dtype=np.int8), (r, c)), shape=(labels.size,) * 2)
    n_components, component = connected_components(graph, directed=False)
    flat = labels.ravel()
    member = flat >= 0
    # every component lies within one group: the group of its cells
    group_of = np.full(n_components, -1, dtype=np.int64)
    group_of[component[member]] = flat[member]
    return np.bincount(group_of[group_of >= 0], minlength=n_groups).astype(np.int64)

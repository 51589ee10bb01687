"""Longitudes on the circle: circular means, conventions and global (periodic) grids.

A longitude of 179 and one of -179 are 2 degrees apart, and so are 359 and 1. The arithmetic
mean of a region that spans the seam of its convention (the dateline on a -180..180 grid,
Greenwich on a 0..360 grid) lands on the other side of the globe; :func:`circular_mean` does
not. :func:`is_global_longitude` tells a regularly spaced longitude axis that closes on itself
(its last cell is a neighbour of its first) from a regional one. Everything here takes plain
arrays (degrees) and returns plain values: no xarray, no Dask.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = [
    "circular_mean",
    "group_circular_mean",
    "is_global_longitude",
    "is_longitude",
    "longitude_axes",
    "longitude_convention",
    "unwrapped_mean",
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


def wrap_longitude(lon, lower: float = -180.0):
    """``lon`` (degrees) wrapped into ``[lower, lower + 360)``; NaN stays NaN."""
    values = np.asarray(lon, dtype=np.float64)
    out = np.mod(values - lower, 360.0) + lower
    # np.mod(-1e-20, 360) is 360.0 in floating point: fold that back to the lower bound
    out = np.where(out >= lower + 360.0, lower, out)
    return out if out.ndim else float(out)


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
        raise ValueError(f"weights: expected {values.shape[0]} values, got {w.shape[0]}")
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
        raise ValueError(
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


def _is_latitude(name: str, attrs: Mapping) -> bool:
    units = str(attrs.get("units", "")).lower().replace(" ", "")
    return (
        attrs.get("standard_name") == "latitude"
        or units in _LATITUDE_UNITS
        or str(name).lower() in ("lat", "latitude")
    )

"""What every plot needs: pyplot, imported when a plot is drawn, cartopy when there is, and
sample coordinates that matplotlib can place."""

from __future__ import annotations

from typing import Any


def pyplot():
    """``matplotlib.pyplot``, or an ImportError that says how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(
            'dcfa.plot needs matplotlib: pip install "dcfa[demo]" or pip install matplotlib'
        ) from err
    return plt


def cartopy_crs():
    """``cartopy.crs``, or None when cartopy is not importable."""
    try:
        import cartopy.crs as ccrs
    except ImportError:
        return None
    return ccrs


def axis_values(coord: Any) -> Any:
    """Values of a sample coordinate that matplotlib can place: datetime64 and numbers as
    they are; cftime dates (model calendars: noleap, 360_day, ...), which matplotlib cannot
    place without nc-time-axis, as decimal years (``2001.5`` is mid-2001)."""
    import numpy as np

    values = np.asarray(coord.values)
    if values.dtype != object or not values.size or not hasattr(values.flat[0], "calendar"):
        return values
    days = coord.dt.days_in_year.values.astype(np.float64)
    return coord.dt.year.values + (coord.dt.dayofyear.values - 1) / days


def default_index(index) -> bool:
    """Whether a pandas index is a Series' own ``0 .. n - 1`` (positions, not labels)."""
    return getattr(index, "start", None) == 0 and getattr(index, "step", None) == 1


def sample_axis(values: Any, n: int) -> tuple[Any, str]:
    """The x values of a series and their label: a 1-D DataArray's coordinate, a pandas
    Series' index (other than the default ``0 .. n - 1``), else the sample number."""
    import numpy as np

    dims = getattr(values, "dims", None)
    coords = getattr(values, "coords", None)
    if dims and coords is not None and len(dims) == 1 and dims[0] in coords:
        return axis_values(coords[dims[0]]), str(dims[0])
    index = getattr(values, "index", None)
    if index is not None and hasattr(index, "is_monotonic_increasing") and len(index) == n:
        if not default_index(index):
            import xarray as xr

            coord = xr.DataArray(np.asarray(index), dims="sample")
            return axis_values(coord), str(index.name) if index.name is not None else "sample"
    return np.arange(n), "sample"

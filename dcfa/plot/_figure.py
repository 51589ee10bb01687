"""What every plot needs: pyplot, imported when a plot is drawn, and cartopy when there is."""

from __future__ import annotations


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

"""Plots of dcfa results: the regions found on a lat/lon grid, how sure and how skilful they
are, GBMAP embeddings, drift scores.

matplotlib is imported when a function is called, not when this package is imported, so the
rest of dcfa never needs it (``pip install "dcfa[demo]"`` or ``pip install matplotlib``).
cartopy is optional: with it, :func:`plot_regions` draws coastlines on a map projection;
without it, plain longitude/latitude axes labelled east and west.

Every function draws on ``ax`` when given (a new figure otherwise) and returns the Axes.
"""

from dcfa.plot.embedding import plot_drift, plot_embedding
from dcfa.plot.forecasts import plot_path, plot_predicted, plot_series
from dcfa.plot.maps import (
    latitude_label,
    longitude_label,
    map_projection,
    plot_regions,
    plot_stability,
)

__all__ = [
    "latitude_label",
    "longitude_label",
    "map_projection",
    "plot_drift",
    "plot_embedding",
    "plot_path",
    "plot_predicted",
    "plot_regions",
    "plot_series",
    "plot_stability",
]

"""Forecast predictors: leads, lags and trailing time windows of a gridded field.

A forecast predicts the target at ``t + lead`` from the predictors known at ``t``. The
predictors are a field ``(time, lat, lon)`` and, optionally, its past: lagged copies
(:func:`lagged`, the field at ``t - lag``) and running means or sums over trailing windows
(:func:`trailing_windows`, the ``w`` samples ending at ``t``). Each adds one dim (``lag``,
``window``) to the field; every (variable, window, lag) combination is one *feature block*
(:func:`feature_blocks`) and a later aggregation must never put features of two blocks in one
group. :func:`lead_target` pairs the predictors with the target ``lead`` samples later and
reports the alignment (:class:`LeadAlignment`).

Everything here is xarray in, xarray out: dims, coordinates, names and attributes are kept, the
sample dim is trimmed to the samples where every lag or window is complete, and a Dask-backed
field stays lazy (slices, a rechunk onto the output's chunks and elementwise sums; nothing is
computed). A window's sum adds its samples one by one in a fixed order, so a field chunked any
way along time gives exactly (bit for bit) the in-memory result.
"""

from dcfa.forecast.leads import LeadAlignment, lead_target
from dcfa.forecast.predictors import (
    BLOCK_DIMS,  # noqa: F401  (a module attribute before the split; not in __all__)
    feature_blocks,
    lagged,
    trailing_windows,
)

__all__ = ["LeadAlignment", "feature_blocks", "lagged", "lead_target", "trailing_windows"]

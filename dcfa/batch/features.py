"""The region series of a fitted reduction on an archive's grid: the features pass of
``dcfa fit`` and what ``dcfa apply`` computes for other months, one function for both, so a
result applied to its own archive gives its stored features bit for bit.

A group's value is the mean (or sum) over its cells of ``cell_scale * (a - cell_centre)``,
``a`` the cell's anomaly ``(x - climatology[month]) / spread``
(:func:`dcfa.io.apply_preprocessing`). With the plain aggregation the anomalies are folded
into the sweep that sums each row of samples into its groups
(:func:`dcfa.cfa.aggregate.aggregate` with ``anomalies=``): the raw block is read once, the
anomalies of a whole block are never written out, and the cells outside the reduction are
skipped without a gather. The values are those of the anomalies aggregated, bit for bit.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import xarray as xr

from dcfa import io
from dcfa.cfa.aggregate import aggregate
from dcfa.cfa.reduction import Reduction
from dcfa.io.calendars import months_of
from dcfa.stacking import stack_features

__all__ = ["region_series"]


def region_series(
    field: xr.DataArray,
    prep: io.Preprocessing,
    reduction: Reduction,
    keep: np.ndarray,
    *,
    sample_dim: str,
) -> xr.DataArray:
    """The ``(sample_dim, group)`` float64 series of ``field`` (raw, on the grid of ``prep``;
    lazy for a Dask-backed field), with the sample coordinates of ``field``.

    ``reduction`` is a fitted estimator's ``reduction_``; ``keep`` holds the flat places on
    the grid of its inputs, in its order. The grid execution reads every cell of the grid, in
    order (``keep`` is ``arange``); the others the cells that hold data, in the grid's order.
    """
    r = reduction
    keep = np.asarray(keep, dtype=np.int64)
    grid = [d for d in field.dims if d != sample_dim]
    if not r.plain:
        # anomalies first, then the inputs phi(a) and the aggregation (NaN-aware)
        prepared = io.apply_preprocessing(field, prep, sample_dim=sample_dim)
        cells = prepared.stack(cell=grid).isel(cell=keep)
        data, _ = stack_features(cells, sample_dim)
        Xt = r.apply(data)
    else:  # every cell of the grid, raw; the cells outside the reduction in no group
        data, _ = stack_features(field, sample_dim)
        size = data.shape[1]

        def on_grid(values, fill):
            out = np.full(size, fill, dtype=np.asarray(values).dtype)
            out[keep] = values
            return out

        clim, spread = prep.arrays(grid, lazy=isinstance(data, da.Array))
        months = None
        if clim is not None:
            months = months_of(field[sample_dim], "input.anomalies") - 1
            clim = clim.reshape(12, size)
        if spread is not None:
            spread = spread.reshape(size)
        Xt = aggregate(
            data,
            on_grid(r.labels, -1),
            on_grid(r.scale, 0.0),
            on_grid(r.centre, 0.0),
            how=r.aggregation,
            weights=None if r.weights is None else on_grid(r.weights, 0.0),
            anomalies=(clim, spread, months),
        )
    coords = {k: c.variable for k, c in field.coords.items() if set(c.dims) == {sample_dim}}
    return xr.DataArray(
        Xt,
        dims=(sample_dim, "group"),
        coords={**coords, "group": np.arange(Xt.shape[1])},
        name="features",
    )

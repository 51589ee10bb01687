"""Block kernels that run on Dask workers outside the moments engine: NumPy only.

A worker unpickles a task's function by importing its module; keeping these here (not beside
the estimators that use them) spares every worker scikit-learn, xarray and pandas.
"""

from __future__ import annotations

import numpy as np

__all__ = ["anomaly_block"]


def anomaly_block(block, clim, scale, groups, *, out_dtype):
    """``(block - clim[groups]) / scale`` in float64 (either may be None), as ``out_dtype``."""
    out = np.array(block, dtype=np.float64)  # a copy we own: the rest is in place
    if clim is None:  # standardisation only
        pass
    elif clim.shape[0] == 1:
        out -= clim[0]
    else:
        for g in np.unique(groups):  # one month at a time: no (rows, *grid) temporary
            rows = np.flatnonzero(groups == g)
            out[rows] -= clim[g]
    if scale is not None:
        out /= scale
    return out.astype(out_dtype, copy=False)

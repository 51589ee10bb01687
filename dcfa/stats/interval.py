"""How sure a correlation is, when both series are autocorrelated.

Monthly climate series remember their past: ``n`` months of two red series carry far fewer
independent pairs than ``n``, and the usual interval of a correlation is too narrow. The
interval here is Fisher's ``z`` one with the effective sample size of two AR(1) series
(Bretherton et al. 1999, J. Climate 12, eq. 31)::

    n_eff = n (1 - rho_x rho_y) / (1 + rho_x rho_y)

from the lag-1 autocorrelations ``rho_x`` and ``rho_y``, never more than ``n``. Every function
is elementwise with NumPy ufuncs, so it serves NumPy, Dask and xarray values alike.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

__all__ = ["correlation_interval", "effective_sample_size", "lag1_autocorrelation"]


def lag1_autocorrelation(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """The lag-1 autocorrelation of every series of ``x`` along ``axis`` (around its mean,
    over the pairs of consecutive samples that are both observed)."""
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, 0)
    c = x - np.nanmean(x, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(c[1:] * c[:-1], axis=0) / np.nansum(c * c, axis=0)


def effective_sample_size(n, rho_x, rho_y):
    """``n (1 - rho_x rho_y) / (1 + rho_x rho_y)``, at most ``n`` (anti-persistent series
    gain nothing) and at least 2."""
    p = rho_x * rho_y
    return np.maximum(np.minimum(n * (1.0 - p) / (1.0 + p), n), 2.0)


def correlation_interval(r, n_eff, level: float = 0.95):
    """The ``level`` interval of a correlation ``r`` of ``n_eff`` effective pairs: Fisher's
    ``z = atanh(r)`` with standard error ``1 / sqrt(n_eff - 3)`` (the whole of -1 .. 1 when
    ``n_eff <= 3``). Returns ``(low, high)``."""
    q = norm.ppf(0.5 + level / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.arctanh(np.minimum(np.maximum(r, -1.0 + 1e-12), 1.0 - 1e-12))
        half = q / np.sqrt(np.maximum(n_eff - 3.0, 0.0))
    return np.tanh(z - half), np.tanh(z + half)

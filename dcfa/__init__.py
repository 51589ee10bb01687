"""dcfa: supervised, interpretable dimensionality reduction for data larger than memory.

Feature aggregation with a theory-driven test (LinCFA, NonLinCFA, GenLinCFA) and gradient
boosting mapping (GBMAP), computed from one pass of blockwise moments on Dask.

The public names are imported on first use: a Dask worker that unpickles a kernel from
``dcfa._moments`` then imports NumPy only, not scikit-learn, xarray and pandas (about 60 MB
less per worker process).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dcfa")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

_EXPORTS = {
    "Anomalies": "dcfa.anomalies",
    "blocked_cv": "dcfa.skill",
    "forward_cv": "dcfa.skill",
    "lagged": "dcfa.forecast",
    "lead_target": "dcfa.forecast",
    "load_result": "dcfa.results",
    "apply_result": "dcfa.results",
    "trailing_windows": "dcfa.forecast",
    "GBMAPClassifier": "dcfa.gbmap",
    "GBMAPKNeighborsClassifier": "dcfa.gbmap",
    "GBMAPKNeighborsRegressor": "dcfa.gbmap",
    "GBMAPRegressor": "dcfa.gbmap",
    "drift_score": "dcfa.gbmap",
    "embedding_distance": "dcfa.gbmap",
    "GenLinCFA": "dcfa._genlincfa",
    "GenLinCFACV": "dcfa.tolerance",
    "GridMoments": "dcfa._stencil",
    "grid_moments": "dcfa._stencil",
    "genlincfa": "dcfa._genlincfa",
    "LinCFA": "dcfa._lincfa",
    "lincfa": "dcfa._lincfa",
    "Moments": "dcfa._moments",
    "MemoryBudgetError": "dcfa.memory",
    "moments": "dcfa._moments",
    "NonLinCFA": "dcfa._nonlincfa",
    "NonLinCFACV": "dcfa.tolerance",
    "nonlincfa": "dcfa._nonlincfa",
}

# registers the Dask config default of ``dcfa.memory_budget`` (imports only dask.config, NumPy)
from dcfa import memory  # noqa: E402

__all__ = sorted(_EXPORTS) + ["__version__", "memory"]


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dcfa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__

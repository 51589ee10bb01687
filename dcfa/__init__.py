"""dcfa: supervised, interpretable dimensionality reduction for data larger than memory.

Feature aggregation with a theory-driven test (LinCFA, NonLinCFA, GenLinCFA) and gradient
boosting mapping (GBMAP), computed from one pass of blockwise moments on Dask.

The public names are imported on first use: a Dask worker that unpickles a kernel from
``dcfa.stats.moments`` then imports NumPy only, not scikit-learn, xarray and pandas (about 60 MB
less per worker process).
"""

from __future__ import annotations

from dcfa._lazy import lazy_attributes
from dcfa._version import __version__

_EXPORTS = {
    "Anomalies": "dcfa.anomalies",
    "blocked_cv": "dcfa.skill",
    "forward_cv": "dcfa.skill",
    "align": "dcfa.io.target",
    "fit_each": "dcfa.targets",
    "lagged": "dcfa.forecast",
    "lead_target": "dcfa.forecast",
    "load_result": "dcfa.batch.results",
    "apply_result": "dcfa.batch.apply",
    "trailing_windows": "dcfa.forecast",
    "GBMAPClassifier": "dcfa.gbmap",
    "GBMAPKNeighborsClassifier": "dcfa.gbmap",
    "GBMAPKNeighborsRegressor": "dcfa.gbmap",
    "GBMAPRegressor": "dcfa.gbmap",
    "drift_score": "dcfa.gbmap",
    "embedding_distance": "dcfa.gbmap",
    "GenLinCFA": "dcfa.cfa.genlincfa",
    "GenLinCFACV": "dcfa.cfa.tolerance",
    "GridMoments": "dcfa.stats.grid",
    "GappyCellsWarning": "dcfa._errors",
    "InputError": "dcfa._errors",
    "NothingToFitError": "dcfa._errors",
    "NoSkillWarning": "dcfa._errors",
    "PatchesWarning": "dcfa._errors",
    "grid_moments": "dcfa.stats.grid",
    "genlincfa": "dcfa.cfa.genlincfa",
    "LabelledRegressor": "dcfa.labelled",
    "LinCFA": "dcfa.cfa.lincfa",
    "lincfa": "dcfa.cfa.lincfa",
    "Moments": "dcfa.stats.moments",
    "RegionsCV": "dcfa.cfa.regions",
    "MemoryBudgetError": "dcfa.memory",
    "moments": "dcfa.stats.moments",
    "NonLinCFA": "dcfa.cfa.nonlincfa",
    "NonLinCFACV": "dcfa.cfa.tolerance",
    "nonlincfa": "dcfa.cfa.nonlincfa",
    "patch_sizes": "dcfa.neighbors",
    "map_agreement": "dcfa.cfa.agreement",
}

# registers the Dask config default of ``dcfa.memory_budget`` (imports only dask.config, NumPy)
from dcfa import memory  # noqa: E402

__all__ = sorted(_EXPORTS) + ["__version__", "memory"]


# reached as attributes after a plain ``import dcfa`` (``dcfa.gbmap.drift_experiment``)
_SUBMODULES = frozenset(
    {
        "anomalies", "batch", "cfa", "datasets", "forecast", "gbmap", "geo", "io",
        "labelled", "neighbors", "plot", "skill", "stacking", "stats", "storage", "targets",
    }
)  # fmt: skip
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, __all__, _SUBMODULES)

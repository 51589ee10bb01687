"""GBMAP: gradient boosting mapping for supervised embeddings (Patron et al. 2024), on Dask.

:class:`GBMAPRegressor` and :class:`GBMAPClassifier` fit an additive model of one-neuron
softplus learners stagewise; their outputs are the embedding. Every L-BFGS evaluation is one
map-reduce over the row chunks of the data (``_rows``), driven by the boosting loop
(``_solver``); the losses and activations are
array-agnostic kernels (``_losses``); :mod:`dcfa.gbmap.drift` has the embedding distance, the
kNN drift score and the EUCLID baseline; :class:`GBMAPKNeighborsRegressor` and
:class:`GBMAPKNeighborsClassifier` are k-NN in the embedding distance (the paper's
KNN-GBMAP); :func:`drift_experiment` is the paper's out-of-distribution experiment.
"""

from dcfa._lazy import lazy_attributes

_EXPORTS = {
    "CheckpointMismatch": "dcfa.gbmap._checkpoint",
    "DriftExperimentResult": "dcfa.gbmap.experiment",
    "GBMAPClassifier": "dcfa.gbmap._estimator",
    "GBMAPKNeighborsClassifier": "dcfa.gbmap._neighbors",
    "GBMAPKNeighborsRegressor": "dcfa.gbmap._neighbors",
    "GBMAPRegressor": "dcfa.gbmap._estimator",
    "INACTIVE_SHARE": "dcfa.gbmap._base",
    "InactiveLearnersWarning": "dcfa.gbmap._base",
    "Standardizer": "dcfa.gbmap._losses",
    "drift_experiment": "dcfa.gbmap.experiment",
    "drift_score": "dcfa.gbmap.drift",
    "embedding_distance": "dcfa.gbmap.drift",
    "euclid_drift_score": "dcfa.gbmap.drift",
    "knn_mean": "dcfa.gbmap.drift",
}
__all__ = sorted(_EXPORTS)


# imported on first use, as in ``dcfa``: a worker that unpickles a kernel of ``_losses``
# imports NumPy only, not scikit-learn, SciPy and dask.array
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, __all__)

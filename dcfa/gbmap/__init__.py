"""GBMAP: gradient boosting mapping for supervised embeddings (Patron et al. 2024), on Dask.

:class:`GBMAPRegressor` and :class:`GBMAPClassifier` fit an additive model of one-neuron
softplus learners stagewise; their outputs are the embedding. Every L-BFGS evaluation is one
map-reduce over the row chunks of the data (``_solver``); the losses and activations are
array-agnostic kernels (``_losses``); :mod:`dcfa.gbmap.drift` has the embedding distance, the
kNN drift score and the EUCLID baseline; :class:`GBMAPKNeighborsRegressor` and
:class:`GBMAPKNeighborsClassifier` are k-NN in the embedding distance (the paper's
KNN-GBMAP); :func:`drift_experiment` is the paper's out-of-distribution experiment.
"""

from dcfa.gbmap._estimator import GBMAPClassifier, GBMAPRegressor
from dcfa.gbmap._neighbors import GBMAPKNeighborsClassifier, GBMAPKNeighborsRegressor
from dcfa.gbmap.drift import drift_score, embedding_distance, euclid_drift_score, knn_mean
from dcfa.gbmap.experiment import DriftExperimentResult, drift_experiment

__all__ = [
    "DriftExperimentResult",
    "GBMAPClassifier",
    "GBMAPKNeighborsClassifier",
    "GBMAPKNeighborsRegressor",
    "GBMAPRegressor",
    "drift_experiment",
    "drift_score",
    "embedding_distance",
    "euclid_drift_score",
    "knn_mean",
]

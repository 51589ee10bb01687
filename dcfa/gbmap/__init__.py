"""GBMAP: gradient boosting mapping for supervised embeddings (Patron et al. 2024), on Dask.

:class:`GBMAPRegressor` and :class:`GBMAPClassifier` fit an additive model of one-neuron
softplus learners stagewise; their outputs are the embedding. Every L-BFGS evaluation is one
map-reduce over the row chunks of the data (``_solver``); the losses and activations are
array-agnostic kernels (``_losses``); :mod:`dcfa.gbmap.drift` has the embedding distance and
the kNN drift score.
"""

from dcfa.gbmap._estimator import GBMAPClassifier, GBMAPRegressor
from dcfa.gbmap.drift import drift_score, embedding_distance, knn_mean

__all__ = [
    "GBMAPClassifier",
    "GBMAPRegressor",
    "drift_score",
    "embedding_distance",
    "knn_mean",
]

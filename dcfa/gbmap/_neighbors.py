"""k-nearest neighbours in the GBMAP embedding: Table 4's KNN-GBMAP columns as estimators.

Patron et al. (2024), Sections 4.1 and 4.3: a ``k``-NN regressor / classifier (``k = 10``)
whose distance is the embedding distance of Eq. (7), the L1 distance between the learners'
outputs. ``fit`` is a GBMAP fit (the same code, parameters and attributes as
:class:`~dcfa.gbmap.GBMAPRegressor` / :class:`~dcfa.gbmap.GBMAPClassifier`) that keeps the
training embedding; ``predict`` averages the training targets (or votes the labels) of the
``n_neighbors`` nearest training points with the chunk-wise search of
:func:`dcfa.gbmap.drift.knn_reduce`, the one behind the drift score.
"""

from __future__ import annotations

from numbers import Integral

import dask.array as da
import numpy as np

from dcfa._compute import compute
from dcfa._errors import InputError
from dcfa._validation import InputData, Interval
from dcfa.gbmap import drift as _drift
from dcfa.gbmap._base import _BaseGBMAP
from dcfa.gbmap._docs import _doc
from dcfa.gbmap._estimator import (
    _PROBA_ATTRS,
    _GBMAPClassifierBase,
    _GBMAPRegressorBase,
    _labels,
)

__all__ = ["GBMAPKNeighborsClassifier", "GBMAPKNeighborsRegressor"]

_KNN_PARAMETER = """
    n_neighbors : int, default=10
        ``k``: neighbours averaged (regressor) or voting (classifier), in the embedding
        distance. The paper uses ``k = 10``.
"""

_KNN_NOTES = """
    Neighbours are searched by brute force, chunk-wise: for a Dask ``X`` (or a fit on Dask
    data, whose training embedding stays lazy) one task per pair of query and training
    chunks keeps a running top-``k``, and the partial lists are merged in a tree; ties in
    distance go to the lowest training row, whatever the chunking. The cost is
    ``O(n_query x n_train x n_boosts)``.
"""


def _two_columns(p1: np.ndarray) -> np.ndarray:
    return np.stack([1.0 - p1, p1], axis=1)


class _KNeighborsMixin:
    """The neighbour search of the kNN estimators (before the GBMAP bases in the MRO)."""

    _parameter_constraints: dict = {
        **_BaseGBMAP._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
    }

    # both estimators take GBMAP's parameters after ``n_neighbors``: one signature for both
    def __init__(
        self,
        n_neighbors: int = 10,
        *,
        n_boosts: int = 10,
        beta: float = 10.0,
        penalty: float = 0.1,
        max_iter: int = 100,
        tol: float = 1e-3,
        n_restarts: int = 1,
        random_state=None,
        persist="auto",
        checkpoint=None,
        sample_dim: str = "time",
        f0=None,
    ):
        _BaseGBMAP.__init__(
            self,
            n_boosts=n_boosts,
            beta=beta,
            penalty=penalty,
            max_iter=max_iter,
            tol=tol,
            n_restarts=n_restarts,
            random_state=random_state,
            persist=persist,
            checkpoint=checkpoint,
            sample_dim=sample_dim,
            f0=f0,
        )
        self.n_neighbors = n_neighbors

    def _check_neighbors(self, inp: InputData) -> None:
        if inp.n_samples < self.n_neighbors:
            raise InputError(
                f"n_neighbors: {self.n_neighbors} neighbours requested but the training set "
                f"has {inp.n_samples} samples"
            )

    def _knn(self, X, values: str):
        """``(mean of the attribute values over the k nearest training rows, input)``;
        computed for in-memory ``X`` (one compute after a fit on Dask data), lazy for Dask
        ``X``."""
        inp = self._check_input(X)
        E = self._embed(inp.data)
        out = _drift.knn_mean(E, self.train_embedding_, getattr(self, values), self.n_neighbors)
        if isinstance(out, da.Array) and not inp.is_dask:
            (out,) = compute(out)
        return out, inp


class GBMAPKNeighborsRegressor(_KNeighborsMixin, _GBMAPRegressorBase):
    __doc__ = _doc(
        """k-nearest-neighbour regression in the GBMAP embedding distance (KNN-GBMAP).

    Fits a GBMAP regressor, then predicts the mean training target of the ``n_neighbors``
    nearest training points in the embedding distance of Eq. (7) (Patron et al. 2024,
    Section 4.3; Table 4's KNN-GBMAP column). The embedding ignores directions irrelevant to
    the target, so the neighbours are neighbours *for the task*.

    Parameters
    ----------
    n_neighbors : int, default=10
        ``k``: the training targets of the ``k`` nearest points are averaged. The paper uses
        ``k = 10``.
%(parameters)s

    Attributes
    ----------
%(attributes)s
    y_mean_, y_scale_ : float
        Standardisation of the target for the GBMAP fit.
    train_values_ : ndarray of shape (n_samples,)
        The training targets that the neighbours average.

    See Also
    --------
    GBMAPRegressor : the GBMAP model itself (its ``predict`` is the boosted model).
    sklearn.neighbors.KNeighborsRegressor : the Euclidean baseline (Table 4's KNN).

    Notes
    -----
%(notes)s
"""
        + _KNN_NOTES
        + """
%(references)s

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa.gbmap import GBMAPKNeighborsRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 6))  # only the first column matters
    >>> y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=400)
    >>> model = GBMAPKNeighborsRegressor(n_boosts=4, beta=5.0, random_state=0)
    >>> bool(model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.8)
    True
    """
    )

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        self._check_neighbors(inp)
        return super()._encode_target(y, inp)

    def predict(self, X):
        """Mean training target of the ``n_neighbors`` nearest points in the embedding.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        out, inp = self._knn(X, "train_values_")
        return self._wrap_samples(
            out, inp, "prediction", self._score_attrs("k-NN prediction of the target")
        )


class GBMAPKNeighborsClassifier(_KNeighborsMixin, _GBMAPClassifierBase):
    __doc__ = _doc(
        """k-nearest-neighbour classification in the GBMAP embedding distance (KNN-GBMAP).

    Fits a binary GBMAP classifier, then votes the labels of the ``n_neighbors`` nearest
    training points in the embedding distance of Eq. (7) (Patron et al. 2024, Section 4.3;
    Table 4's KNN-GBMAP column). ``predict_proba`` is the fraction of neighbours of each
    class; a tied vote goes to ``classes_[0]`` (as scikit-learn's ``KNeighborsClassifier``).

    Parameters
    ----------
    n_neighbors : int, default=10
        ``k``: the ``k`` nearest training points vote. The paper uses ``k = 10``.
%(parameters)s

    Attributes
    ----------
%(attributes)s
    classes_ : ndarray of shape (2,)
        The two labels.

    See Also
    --------
    GBMAPClassifier : the GBMAP model itself.
    sklearn.neighbors.KNeighborsClassifier : the Euclidean baseline (Table 4's KNN).

    Notes
    -----
%(notes)s
"""
        + _KNN_NOTES
        + """
%(references)s

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa.gbmap import GBMAPKNeighborsClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 6))
    >>> y = np.where(np.abs(X[:, 0]) > 0.7, "far", "near")
    >>> model = GBMAPKNeighborsClassifier(n_boosts=4, beta=5.0, random_state=0)
    >>> bool(model.fit(X[:300], y[:300]).score(X[300:], y[300:]) > 0.9)
    True
    """
    )

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        self._check_neighbors(inp)
        target = super()._encode_target(y, inp)
        self._train_positive = (target > 0).astype(np.float64)
        return target

    def _positive_fraction(self, X):
        return self._knn(X, "_train_positive")

    def predict_proba(self, X):
        """Fractions of the ``n_neighbors`` nearest training points in each class.

        Returns
        -------
        proba : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, 2)
            Columns in the order of ``classes_``; lazy for Dask input.
        """
        p1, inp = self._positive_fraction(X)
        if isinstance(p1, da.Array):
            P = p1.map_blocks(
                _two_columns, new_axis=1,
                chunks=(p1.chunks[0], (2,)), dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )  # fmt: skip
        else:
            P = _two_columns(p1)
        if inp.layout is None:
            return P
        return inp.layout.samples(
            P, dim="class", coords={"class": self.classes_}, name="proba", attrs=_PROBA_ATTRS
        )

    def predict(self, X):
        """The majority label of the ``n_neighbors`` nearest training points.

        Returns
        -------
        labels : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input. A tie goes to ``classes_[0]``.
        """
        p1, inp = self._positive_fraction(X)
        # ``_labels`` picks classes_[1] where its argument is > 0: more than half the votes
        if isinstance(p1, da.Array):
            labels = (p1 - 0.5).map_blocks(
                _labels, self.classes_, dtype=self.classes_.dtype,
                meta=np.empty((0,), dtype=self.classes_.dtype),
            )  # fmt: skip
        else:
            labels = _labels(p1 - 0.5, self.classes_)
        return self._wrap_samples(labels, inp, "prediction")

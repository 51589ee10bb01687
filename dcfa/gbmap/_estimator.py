"""The GBMAP regressor and classifier: the target each fits, and its predictions.

:class:`GBMAPRegressor` (squared loss) and :class:`GBMAPClassifier` (logistic loss) add the
target handling and ``predict`` and friends to the shared base
:class:`dcfa.gbmap._base._BaseGBMAP` (``fit``, the initial model ``f0``, ``transform``) and
its uses of the embedding (:mod:`dcfa.gbmap._embedding`); their docstrings are filled from
:mod:`dcfa.gbmap._docs`. ``_GBMAPRegressorBase`` and ``_GBMAPClassifierBase`` are shared
with the kNN estimators (:mod:`dcfa.gbmap._neighbors`). The public classes stay in this
module so that pickles of fitted estimators keep loading.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.utils.multiclass import type_of_target

from dcfa._errors import InputError
from dcfa._validation import InputData, single_target
from dcfa.gbmap._base import _BaseGBMAP
from dcfa.gbmap._base import _f0_block as _f0_block  # named in the Dask graphs of old pickles
from dcfa.gbmap._docs import _doc
from dcfa.gbmap._losses import sigmoid

__all__ = ["GBMAPClassifier", "GBMAPRegressor"]

# Attrs of class probabilities (never X's: its units are not theirs).
_PROBA_ATTRS = {"long_name": "class probability", "units": "1"}


############################################################################################
# blockwise helpers


def _labels(scores: np.ndarray, classes: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores)
    if not np.isfinite(scores).all():
        # a NaN in a row of a lazy X (checked only when computed): no label, not classes_[0]
        raise InputError("X: contains NaN or infinite values; GBMAP needs finite features")
    return classes[(scores > 0).astype(np.intp)]


def _proba(scores: np.ndarray) -> np.ndarray:
    p1 = sigmoid(np.asarray(scores, dtype=np.float64))
    return np.stack([1.0 - p1, p1], axis=1)


def _log_proba(scores: np.ndarray) -> np.ndarray:
    f = np.asarray(scores, dtype=np.float64)
    return np.stack([-np.logaddexp(0.0, f), -np.logaddexp(0.0, -f)], axis=1)


def _target_column(y, inp: InputData, numeric: bool) -> np.ndarray:
    values = single_target(y, inp, numeric=numeric, allow_constant=True)
    return values[:, 0]


def _units_of(y) -> str | None:
    """The ``units`` attr of a DataArray (or pandas) target, if it has one."""
    attrs = getattr(y, "attrs", None)
    units = attrs.get("units") if isinstance(attrs, dict) else None
    return units if isinstance(units, str) else None


class _GBMAPRegressorBase(RegressorMixin, _BaseGBMAP):
    """The squared-loss target handling shared by the GBMAP regressors (not for direct use)."""

    _loss = "squared"

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        values = _target_column(y, inp, numeric=True)
        scale = float(values.std())
        if not scale > 0:
            raise InputError("y: the target is constant; there is nothing to predict")
        self.y_mean_ = float(values.mean())
        self.y_scale_ = scale
        self._y_units = _units_of(y)  # the units of the score and the embedding
        self.train_values_ = values
        self._fit_target = values
        return (values - self.y_mean_) / self.y_scale_

    def _target_fingerprint(self) -> dict:
        return {}

    def _target_stats(self) -> np.ndarray:
        return np.array([self.y_mean_, self.y_scale_])

    def _train_values(self):
        return self.train_values_

    @property
    def _out_scale(self) -> float:
        return self.y_scale_

    @property
    def _target_shift(self) -> float:
        return self.y_mean_

    @property
    def _target_scale(self) -> float:
        return self.y_scale_

    def _f0_default(self) -> float:
        return self.y_mean_

    @property
    def _score_units(self) -> str | None:
        return getattr(self, "_y_units", None)  # absent from pickles of older fits

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of :meth:`predict` (scikit-learn's ``score``); a DataArray or date-indexed
        ``y`` must have ``X``'s sample coordinate (as in ``fit``), else ``ValueError``."""
        return super().score(X, self._aligned_target(X, y), sample_weight)


class GBMAPRegressor(_GBMAPRegressorBase):
    __doc__ = _doc(
        """Gradient boosting mapping (GBMAP) regressor and supervised embedding, on Dask.

    An additive model of ``n_boosts`` one-neuron softplus learners fitted stagewise to the
    squared loss; ``transform`` gives the learners' outputs as new features (Patron et al.
    2024). ``y`` is standardised for the fit (as in the authors' code) and ``predict`` undoes
    it.

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
%(attributes)s
    y_mean_, y_scale_ : float
        Standardisation of the target: the learners fit ``(y - y_mean_) / y_scale_``.
    train_values_ : ndarray of shape (n_samples,)
        The training targets, kept for :meth:`drift_score` (kNN average of ``y``).

    See Also
    --------
    GBMAPClassifier : the logistic-loss version.
    dcfa.gbmap.drift.drift_score : the drift score on precomputed embeddings.

    Notes
    -----
%(notes)s

    ``transform`` returns the learners' outputs times ``y_scale_`` (target units), so
    ``predict(X) = y_mean_ + transform(X).sum(axis=1)`` (``f_0(X) + ...`` with an ``f0``);
    xarray outputs carry the target's ``units`` attr, if it has one. ``intercept_`` and
    ``train_loss_`` stay in standardised units. For :meth:`drift_score` the model keeps the
    training targets (``n`` floats) and the training embedding (``train_embedding_``).

%(references)s

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa.gbmap import GBMAPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3))
    >>> y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=500)
    >>> model = GBMAPRegressor(n_boosts=4, beta=5.0, random_state=0).fit(X, y)
    >>> model.transform(X).shape
    (500, 4)
    >>> bool(model.score(X, y) > 0.8)
    True
    """
    )

    def predict(self, X):
        """Predicted targets ``f_0(x) + sum_j phi_j(x)`` (``f_0 = y_mean_`` by default).

        Returns
        -------
        y : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(
            self._scores(self._embed(inp.data), inp.data),
            inp,
            "prediction",
            self._score_attrs("GBMAP prediction of the target"),
        )


class _GBMAPClassifierBase(ClassifierMixin, _BaseGBMAP):
    """The logistic-loss target handling shared by the GBMAP classifiers (not for direct use)."""

    _loss = "logistic"

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        values = _target_column(y, inp, numeric=False)
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            bad = int((~np.isfinite(values)).sum())
            raise InputError(f"y: contains {bad} NaN or infinite values; drop those samples")
        try:
            kind = type_of_target(values, input_name="y")
        except TypeError as exc:  # e.g. None among string labels: sorting them fails
            raise InputError(
                f"y: labels of mixed types cannot be ordered ({exc}); missing labels (None) "
                "must be dropped"
            ) from None
        if kind not in ("binary", "multiclass"):
            raise InputError(
                f"y: Unknown label type: {kind}; {type(self).__name__} needs two class labels "
                "(use GBMAPRegressor for a continuous target)"
            )
        try:
            classes = np.unique(values)
        except TypeError as exc:
            raise InputError(f"y: labels of mixed types cannot be ordered ({exc})") from None
        if classes.shape[0] != 2:
            raise InputError(
                f"y: Only binary classification is supported. {type(self).__name__} needs "
                f"exactly 2 classes, got {classes.shape[0]} class(es): {classes[:10].tolist()}"
            )
        self.classes_ = classes
        self._fit_target = values
        return np.where(values == classes[1], 1.0, -1.0)

    def _check_f0_kind(self, f0) -> None:
        pass  # a classifier's scores, or a regressor's output as the score

    def _f0_target(self, f0) -> np.ndarray:
        """A classifier is fitted on the labels; a regressor, whose output is taken as the
        score, on the +1 / -1 coding of the two classes the boosting fits, so that its
        scores do not depend on what numbers name the classes."""
        if is_classifier(f0):
            return self._fit_target
        return np.where(self._fit_target == self.classes_[1], 1.0, -1.0)

    def _f0_output_method(self, f0) -> str:
        if not is_classifier(f0):
            return "predict"  # a regressor's output is taken as the score (logit)
        classes = getattr(f0, "classes_", None)
        if classes is None or not np.array_equal(np.asarray(classes), self.classes_):
            raise InputError(
                f"f0: its classes {None if classes is None else list(classes)} are not "
                f"{self.classes_.tolist()}"
            )
        return "decision_function" if hasattr(f0, "decision_function") else "proba"

    def _target_fingerprint(self) -> dict:
        return {"classes": [str(c) for c in self.classes_]}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _target_stats(self) -> np.ndarray:
        return np.zeros(0)

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy of :meth:`predict` (scikit-learn's ``score``); a DataArray or date-indexed
        ``y`` must have ``X``'s sample coordinate (as in ``fit``), else ``ValueError``."""
        return super().score(X, self._aligned_target(X, y), sample_weight)

    def _train_values(self):
        return self._train_scores


class GBMAPClassifier(_GBMAPClassifierBase):
    __doc__ = _doc(
        """Gradient boosting mapping (GBMAP) binary classifier and supervised embedding, on Dask.

    An additive logit model of ``n_boosts`` one-neuron softplus learners fitted stagewise to
    the logistic loss ``log(1 + exp(-y f))`` with the labels mapped to {-1, +1}
    (``classes_[1]`` is +1); ``transform`` gives the learners' outputs as new features
    (Patron et al. 2024).

    Parameters
    ----------
%(parameters)s

    Attributes
    ----------
%(attributes)s
    classes_ : ndarray of shape (2,)
        The two labels; ``classes_[1]`` is the positive class (score > 0).

    See Also
    --------
    GBMAPRegressor : the squared-loss version.

    Notes
    -----
%(notes)s

    The embedding is in logit units and sums to :meth:`decision_function` (minus
    ``f_0(x)`` with an ``f0``). For :meth:`drift_score` the kNN average is over the model's
    own training scores (``f_0`` plus the row sums of ``train_embedding_``), as in the paper.

%(references)s

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa.gbmap import GBMAPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3))
    >>> y = np.where(np.abs(X[:, 0]) > 0.7, "far", "near")
    >>> model = GBMAPClassifier(n_boosts=4, beta=5.0, random_state=0).fit(X, y)
    >>> model.classes_.tolist()
    ['far', 'near']
    >>> bool(model.score(X, y) > 0.9)
    True
    """
    )

    def decision_function(self, X):
        """The score (logit) ``f(x) = f_0(x) + sum_j phi_j(x)``; positive means ``classes_[1]``.

        Returns
        -------
        score : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(
            self._scores(self._embed(inp.data), inp.data),
            inp,
            "decision_function",
            self._score_attrs("GBMAP score (logit)"),
        )

    def predict(self, X):
        """The class of ``sign(f(x))``: ``classes_[1]`` where the score is positive.

        Returns
        -------
        labels : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        scores = self._scores(self._embed(inp.data), inp.data)
        if isinstance(scores, da.Array):
            labels = scores.map_blocks(
                _labels, self.classes_, dtype=self.classes_.dtype,
                meta=np.empty((0,), dtype=self.classes_.dtype),
            )  # fmt: skip
        else:
            labels = _labels(scores, self.classes_)
        return self._wrap_samples(labels, inp, "prediction")

    def predict_proba(self, X):
        """``[1 - sigmoid(f(x)), sigmoid(f(x))]`` for ``classes_``.

        Returns
        -------
        proba : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, 2)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        scores = self._scores(self._embed(inp.data), inp.data)
        if isinstance(scores, da.Array):
            P = scores.map_blocks(
                _proba, new_axis=1, chunks=(scores.chunks[0], (2,)), dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )  # fmt: skip
        else:
            P = _proba(scores)
        if inp.layout is None:
            return P
        return inp.layout.samples(
            P, dim="class", coords={"class": self.classes_}, name="proba", attrs=_PROBA_ATTRS
        )

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (computed stably from the score)."""
        inp = self._check_input(X)
        scores = self._scores(self._embed(inp.data), inp.data)
        if isinstance(scores, da.Array):
            L = scores.map_blocks(
                _log_proba, new_axis=1, chunks=(scores.chunks[0], (2,)), dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )  # fmt: skip
        else:
            L = _log_proba(scores)
        if inp.layout is None:
            return L
        return inp.layout.samples(
            L,
            dim="class",
            coords={"class": self.classes_},
            name="log_proba",
            attrs={"long_name": "log of the class probability"},
        )

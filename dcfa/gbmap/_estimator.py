"""GBMAP estimators: thin scikit-learn shells over :mod:`dcfa.gbmap._solver`.

``fit`` validates at the boundary, runs the first pass (standardisation moments and the
finiteness check of ``X``), builds the row data (persisted when it fits), resumes from a
checkpoint if asked, runs the boosting loop and stores the learners. ``transform``,
``predict`` and friends are blockwise maps: lazy on Dask input.
"""

from __future__ import annotations

import logging
import os
import warnings
from numbers import Integral, Real

import dask.array as da
import numpy as np
import xarray as xr
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.exceptions import DataConversionWarning
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from dcfa._compute import compute
from dcfa._validation import (
    InputData,
    Interval,
    StrOptions,
    check_n_samples,
    check_X,
    check_y,
    validate_params,
)
from dcfa.gbmap import drift as _drift
from dcfa.gbmap._checkpoint import load_checkpoint, save_checkpoint
from dcfa.gbmap._losses import ACTIVATIONS, embed_block, sigmoid
from dcfa.gbmap._solver import Learners, boost, column_stats, make_data, should_persist

__all__ = ["GBMAPClassifier", "GBMAPRegressor"]

logger = logging.getLogger("dcfa")

_SHARED_NOTES = """
    The model (Patron et al. 2024, Eqs. 1-5) is ``f(x) = sum_j f_j(x)`` (``f_0 = 0``) with
    weak learners

    .. math:: f_j(x) = a_j + b_j\\, g_\\beta(w_j^\\top [z(x), 1]), \\qquad
              g_\\beta(u) = \\log(1 + e^{\\beta u}) / \\beta,

    where ``z(x)`` are the standardised features and ``[z, 1]`` appends the intercept column.
    Step ``j`` minimises ``mean_i l(y_i, F_{j-1}(x_i) + f_j(x_i)) + lambda * mean(w_j**2)``
    (Eqs. 3-4, the mean over all ``p + 1`` weights) by L-BFGS for ``b_j = +1`` and ``b_j = -1``
    from the same random start, and keeps the sign with the lower *unpenalised* training loss
    (as the authors' code does). Each evaluation of the objective and its gradient is one
    map-reduce over the row chunks and one ``dask.compute``; the ensemble score ``F`` is a
    persisted Dask array chunked like ``X``'s rows (:mod:`dcfa.gbmap._solver`).

    Where this implementation differs from, or fills in, the paper:

    * L-BFGS is SciPy's L-BFGS-B, not JAXOPT's (other line search and history); it stops,
      like the authors' code, when the gradient's L2 norm is at most ``tol`` or after
      ``max_iter`` iterations (and when no decrease is possible at machine precision).
    * Starting points ``a ~ N(0, 1)``, ``[w, c] ~ N(0, I_{p+1})`` (the authors' code) are drawn
      from ``numpy.random.default_rng([seed, step, restart])`` with ``seed`` drawn once from
      ``random_state``, so a resumed fit restarts from the same points.
    * ``n_restarts > 1`` refits every step from that many starts and keeps the best (the
      authors' "width" refit); their default "depth" refit of the whole sequence is not
      provided.
    * Features are standardised with the population standard deviation; a constant column
      gets scale 1 (it standardises to 0).
    * Learners are not "shrunk" (no learning rate), as in the paper.
    * Non-finite values in a Dask ``X`` are detected by the first pass (the standardisation
      moments, one compute) and raise before any optimisation.
"""

_REFERENCES = """
    References
    ----------
    A. Patron, A. Prasad, H. P. H. Luu, K. Puolamäki. "Gradient Boosting Mapping for
    Dimensionality Reduction and Feature Extraction", arXiv:2405.08486 (2024); Discovery
    Science 2024.
"""

_SHARED_PARAMETERS = """
    n_boosts : int, default=10
        Number of weak learners ``m``, also the embedding dimension.
    beta : float, default=1.0
        Softplus sharpness ``beta > 0`` (ReLU as ``beta -> inf``).
    penalty : float, default=1e-3
        Ridge weight ``lambda`` on ``mean(w**2)`` over the ``p + 1`` weights of a learner
        (the intercept-column weight included, the offset ``a`` not).
    max_iter : int, default=100
        Maximum L-BFGS iterations per learner and sign.
    tol : float, default=1e-3
        L-BFGS stops when the L2 norm of the objective's gradient is at most ``tol``.
    n_restarts : int, default=1
        Random starting points per step; the learner with the lowest training loss is kept.
    random_state : int, RandomState instance or None, default=None
        Seeds the starting points.
    persist : "auto" or bool, default="auto"
        Dask input only: keep the standardised ``X`` (float64) and ``y`` in (cluster) memory
        during the fit. ``"auto"`` persists when they take less than half of the workers'
        memory limits (or of the machine's available memory without a distributed client);
        otherwise every L-BFGS evaluation re-reads ``X`` from its source. The ensemble score
        (``n`` floats) is always persisted.
    checkpoint : str, path-like or None, default=None
        A directory. After each boosting step the learners so far are written to
        ``<checkpoint>/gbmap_checkpoint.npz`` atomically (temporary file + ``os.replace``).
        A fit that finds a checkpoint of the same estimator, parameters (but ``n_boosts``,
        ``persist``, ``checkpoint``) and data (shape and column moments) resumes after its
        last step and gives the same model as an uninterrupted fit; a mismatching checkpoint
        raises ``ValueError``.
    sample_dim : str, default="time"
        The sample dim of xarray input; every other dim is stacked into features.
"""

_SHARED_ATTRIBUTES = """
    coef_ : ndarray of shape (n_boosts, n_features_in_)
        ``w_j``: weights of the **standardised** features ``(x - mean_) / scale_`` inside
        the softplus of each learner.
    bias_ : ndarray of shape (n_boosts,)
        ``c_j``: weight of the intercept column (the bias inside the softplus).
    intercept_ : ndarray of shape (n_boosts,)
        ``a_j``: additive offset of each learner (standardised target units for the
        regressor).
    signs_ : ndarray of shape (n_boosts,)
        ``b_j`` in {-1, +1}.
    mean_, scale_ : ndarray of shape (n_features_in_,)
        Standardisation of ``X``.
    train_loss_ : ndarray of shape (n_boosts,)
        Unpenalised mean training loss after each step (standardised units for regression).
    step_n_iter_, step_n_evals_ : ndarray of shape (n_boosts,)
        L-BFGS iterations and objective evaluations of each step (both signs, all restarts).
    n_iter_ : int
        Total L-BFGS iterations, ``step_n_iter_.sum()``.
    n_evals_ : int
        Objective evaluations made by this call to ``fit`` (each one pass over the data and,
        on Dask input, one ``dask.compute``); steps loaded from a checkpoint are not counted.
    persisted_ : bool
        Whether the standardised data were persisted during the fit (False when there was
        nothing to fit: NumPy input, or every step loaded from the checkpoint).
    train_embedding_ : ndarray or dask.array.Array of shape (n_samples, n_boosts)
        Embedding of the training data, kept for :meth:`drift_score`. An ndarray after a fit
        on in-memory data (``n x m`` floats); after a fit on Dask data a *lazy* Dask array
        that re-reads ``X`` from its source (the fit keeps a reference to the graph of
        ``X``, not a copy of it).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names (a pandas DataFrame).
"""


def _doc(template: str) -> str:
    return (
        template.replace("%(parameters)s", _SHARED_PARAMETERS.strip("\n"))
        .replace("%(attributes)s", _SHARED_ATTRIBUTES.strip("\n"))
        .replace("%(notes)s", _SHARED_NOTES.strip("\n"))
        .replace("%(references)s", _REFERENCES.strip("\n"))
    )


############################################################################################
# blockwise helpers


def _labels(scores: np.ndarray, classes: np.ndarray) -> np.ndarray:
    return classes[(np.asarray(scores) > 0).astype(np.intp)]


def _proba(scores: np.ndarray) -> np.ndarray:
    p1 = sigmoid(np.asarray(scores, dtype=np.float64))
    return np.stack([1.0 - p1, p1], axis=1)


def _log_proba(scores: np.ndarray) -> np.ndarray:
    f = np.asarray(scores, dtype=np.float64)
    return np.stack([-np.logaddexp(0.0, f), -np.logaddexp(0.0, -f)], axis=1)


class _BaseGBMAP(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Shared fit / transform of the GBMAP estimators (not for direct use)."""

    _parameter_constraints: dict = {
        "n_boosts": [Interval(Integral, 1, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "penalty": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_restarts": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "persist": [StrOptions({"auto"}), "boolean"],
        "checkpoint": [None, str, os.PathLike],
        "sample_dim": [str],
    }

    _loss: str = ""  # "squared" or "logistic", set by the subclasses
    # The nonlinearity g. Not a parameter: "identity" (GBMAP without nonlinearity, Lemma 1 of
    # the paper) exists for tests; set it on an instance before ``fit``.
    _activation: str = "softplus"

    def __init__(
        self,
        n_boosts: int = 10,
        *,
        beta: float = 1.0,
        penalty: float = 1e-3,
        max_iter: int = 100,
        tol: float = 1e-3,
        n_restarts: int = 1,
        random_state=None,
        persist="auto",
        checkpoint=None,
        sample_dim: str = "time",
    ):
        self.n_boosts = n_boosts
        self.beta = beta
        self.penalty = penalty
        self.max_iter = max_iter
        self.tol = tol
        self.n_restarts = n_restarts
        self.random_state = random_state
        self.persist = persist
        self.checkpoint = checkpoint
        self.sample_dim = sample_dim

    # -- fit -------------------------------------------------------------------------------

    def fit(self, X, y):
        """Fit ``n_boosts`` weak learners stagewise.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            Samples in rows; a DataArray is stacked along every dim but ``sample_dim``. Must
            be finite: on a Dask array this is checked in the first pass (the
            standardisation moments, one compute), before any optimisation.
        y : array-like of shape (n_samples,)
            Target values (regressor) or two class labels (classifier).

        Returns
        -------
        self
        """
        validate_params(self)
        if self._activation not in ACTIVATIONS:
            raise ValueError(f"_activation: expected one of {sorted(ACTIVATIONS)}")
        if not np.isfinite(self.beta):
            raise ValueError(f"beta: expected a finite softplus sharpness > 0, got {self.beta}")
        inp = check_X(X, sample_dim=self.sample_dim)
        check_n_samples(inp.n_samples, 2, why="the features are standardised")
        target = self._encode_target(y, inp)  # cheap checks of y first: no pass over X yet
        n, p = inp.n_samples, inp.n_features

        standardizer, bad = column_stats(inp.data)  # the first pass
        if bad:
            raise ValueError(
                f"X: contains {bad} NaN or infinite values; GBMAP needs finite features "
                "(impute or drop those samples)"
            )

        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        learners = Learners.empty(p)
        fingerprint, arrays = self._fingerprint(n, p, standardizer.mean, standardizer.scale)
        if self.checkpoint is not None:
            found = load_checkpoint(self.checkpoint, fingerprint, arrays)
            if found is not None:
                learners, seed = found
                learners = learners.head(self.n_boosts)
                logger.info("%s: resuming after step %d", type(self).__name__, len(learners))

        persisted = False
        n_evals = 0
        if len(learners) < self.n_boosts:
            persisted = inp.is_dask and should_persist(self.persist, n, p)
            data = make_data(
                inp.data,
                target,
                standardizer,
                persist=persisted,
                learners=learners,
                beta=float(self.beta),
                activation=self._activation,
            )

            def save(fitted: Learners) -> None:
                save_checkpoint(self.checkpoint, fingerprint, arrays, seed, fitted)

            learners, n_evals = boost(
                data,
                n_boosts=self.n_boosts,
                beta=float(self.beta),
                penalty=float(self.penalty),
                max_iter=self.max_iter,
                tol=float(self.tol),
                n_restarts=self.n_restarts,
                seed=seed,
                loss=self._loss,
                activation=self._activation,
                learners=learners,
                callback=None if self.checkpoint is None else save,
            )
            del data

        self.n_features_in_ = p
        if inp.feature_names is not None:
            self.feature_names_in_ = inp.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.mean_ = standardizer.mean
        self.scale_ = standardizer.scale
        self._standardizer = standardizer
        self.coef_ = learners.coef.copy()
        self.bias_ = learners.bias.copy()
        self.intercept_ = learners.intercept.copy()
        self.signs_ = learners.sign.copy()
        self.train_loss_ = learners.train_loss.copy()
        self.step_n_iter_ = learners.n_iter.copy()
        self.step_n_evals_ = learners.n_evals.copy()
        self.n_iter_ = int(learners.n_iter.sum())
        self.n_evals_ = int(n_evals)
        self.persisted_ = bool(persisted)
        self.train_embedding_ = self._embed(inp.data)
        return self

    def _fingerprint(self, n: int, p: int, mean, scale) -> tuple[dict, dict]:
        rs = self.random_state
        fingerprint = {
            "estimator": type(self).__name__,
            "beta": float(self.beta),
            "penalty": float(self.penalty),
            "max_iter": int(self.max_iter),
            "tol": float(self.tol),
            "n_restarts": int(self.n_restarts),
            "random_state": int(rs) if isinstance(rs, Integral) else None,
            "activation": self._activation,
            "n_samples": int(n),
            "n_features": int(p),
        }
        fingerprint.update(self._target_fingerprint())
        arrays = {"mean": mean, "scale": scale, "target": self._target_stats()}
        return fingerprint, arrays

    @property
    def _n_features_out(self) -> int:
        return int(self.coef_.shape[0])

    # -- outputs ---------------------------------------------------------------------------

    @property
    def _out_scale(self) -> float:
        return 1.0

    def _embed(self, data):
        """Embedding of validated rows: NumPy in memory, a lazy blockwise map on Dask."""
        args = (
            self._standardizer,
            self.intercept_,
            self.coef_,
            self.bias_,
            self.signs_,
            float(self.beta),
            self._activation,
            self._out_scale,
        )
        m = self.coef_.shape[0]
        if isinstance(data, da.Array):
            data = data.rechunk({1: -1})
            return data.map_blocks(
                embed_block,
                *args,
                chunks=(data.chunks[0], (m,)),
                dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )
        return embed_block(data, *args)

    def _check_input(self, X) -> InputData:
        check_is_fitted(self, "coef_")
        inp = check_X(X, sample_dim=self.sample_dim)
        if inp.n_features != self.n_features_in_:
            raise ValueError(
                f"X has {inp.n_features} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        if not inp.is_dask and not np.isfinite(inp.data).all():
            raise ValueError("X: contains NaN or infinite values; GBMAP needs finite features")
        return inp

    def transform(self, X):
        """The embedding ``(f_1(x), ..., f_m(x))`` (Eq. 5): one column per weak learner.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)

        Returns
        -------
        Xt : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, n_boosts)
            Lazy for Dask input (nothing is computed). A DataArray gives a DataArray
            ``(sample_dim, "boost")``. The columns sum to the model's score: the decision
            function (classifier), or ``predict(X) - y_mean_`` (regressor, whose columns are
            in target units).
        """
        inp = self._check_input(X)
        E = self._embed(inp.data)
        if inp.layout is None:
            return E
        return inp.layout.samples(
            E,
            dim="boost",
            coords={"boost": np.arange(E.shape[1])},
            name=f"{type(self).__name__.lower()}_embedding",
        )

    def _scores(self, E):
        """``f(x)`` from the embedding (plus the target mean for the regressor)."""
        return E.sum(axis=1)

    @staticmethod
    def _wrap_samples(values, inp: InputData, name: str):
        if inp.layout is None:
            return values
        return xr.DataArray(
            values,
            dims=(inp.layout.sample_dim,),
            coords=dict(inp.layout.sample_coords),
            name=name,
        )

    def embedding_distance(self, X, Y=None):
        """Pairwise L1 distances between the embeddings of ``X`` and ``Y`` (Eq. 7).

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_a, n_features)
        Y : same as X of shape (n_b, n_features), default=None
            ``None`` means ``Y = X``.

        Returns
        -------
        D : ndarray or dask.array.Array of shape (n_a, n_b)
            Lazy if ``X`` or ``Y`` is a Dask array.
        """
        A = self._embed(self._check_input(X).data)
        B = A if Y is None else self._embed(self._check_input(Y).data)
        return _drift.embedding_distance(A, B)

    def drift_score(self, X, n_neighbors: int = 5):
        """Drift / out-of-distribution score of new points (Section 4.5 of the paper).

        ``|f(x*) - kNN(x*)|`` with ``kNN(x*)`` the mean, over the ``n_neighbors`` nearest
        training points in the embedding distance, of the training targets (regressor, target
        units) or of the model's training scores (classifier). See
        :func:`dcfa.gbmap.drift.drift_score`.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        n_neighbors : int, default=5

        Returns
        -------
        score : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask ``X``. For in-memory ``X`` after a fit on Dask data, the training
            set is re-read chunk-wise (one compute).
        """
        inp = self._check_input(X)
        E = self._embed(inp.data)
        out = _drift.drift_score(
            E, self._scores(E), self.train_embedding_, self._train_values(), n_neighbors
        )
        if isinstance(out, da.Array) and not inp.is_dask:
            (out,) = compute(out)
        return self._wrap_samples(out, inp, "drift_score")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


def _target_column(y, n: int, layout, numeric: bool) -> np.ndarray:
    values = check_y(y, n, layout=layout, numeric=numeric, allow_constant=True)
    if values.shape[1] != 1:
        raise ValueError(f"y: expected a single target column, got {values.shape[1]} columns")
    ndim = getattr(y, "ndim", None)
    if ndim is None:
        ndim = np.asarray(y).ndim
    if ndim == 2:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,
        )
    return values[:, 0]


class GBMAPRegressor(RegressorMixin, _BaseGBMAP):
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
    ``predict(X) = y_mean_ + transform(X).sum(axis=1)``; ``intercept_`` and ``train_loss_``
    stay in standardised units. For :meth:`drift_score` the model keeps the training
    targets (``n`` floats) and the training embedding (``train_embedding_``).

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

    _loss = "squared"

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        values = _target_column(y, inp.n_samples, inp.layout, numeric=True)
        scale = float(values.std())
        if not scale > 0:
            raise ValueError("y: the target is constant; there is nothing to predict")
        self.y_mean_ = float(values.mean())
        self.y_scale_ = scale
        self.train_values_ = values
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

    def _scores(self, E):
        return self.y_mean_ + E.sum(axis=1)

    def predict(self, X):
        """Predicted targets ``y_mean_ + sum_j phi_j(x)``.

        Returns
        -------
        y : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(self._scores(self._embed(inp.data)), inp, "prediction")


class GBMAPClassifier(ClassifierMixin, _BaseGBMAP):
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

    The embedding is in logit units and sums to :meth:`decision_function`. For
    :meth:`drift_score` the kNN average is over the model's own training scores (row sums of
    ``train_embedding_``), as in the paper.

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

    _loss = "logistic"

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        values = _target_column(y, inp.n_samples, inp.layout, numeric=False)
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            bad = int((~np.isfinite(values)).sum())
            raise ValueError(f"y: contains {bad} NaN or infinite values; drop those samples")
        kind = type_of_target(values, input_name="y")
        if kind not in ("binary", "multiclass"):
            raise ValueError(
                f"y: Unknown label type: {kind}; {type(self).__name__} needs two class labels "
                "(use GBMAPRegressor for a continuous target)"
            )
        try:
            classes = np.unique(values)
        except TypeError as exc:
            raise ValueError(f"y: labels of mixed types cannot be ordered ({exc})") from None
        if classes.shape[0] != 2:
            raise ValueError(
                f"y: Only binary classification is supported. {type(self).__name__} needs "
                f"exactly 2 classes, got {classes.shape[0]} class(es): {classes[:10].tolist()}"
            )
        self.classes_ = classes
        return np.where(values == classes[1], 1.0, -1.0)

    def _target_fingerprint(self) -> dict:
        return {"classes": [str(c) for c in self.classes_]}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _target_stats(self) -> np.ndarray:
        return np.zeros(0)

    def _train_values(self):
        return self.train_embedding_.sum(axis=1)

    def decision_function(self, X):
        """The score (logit) ``f(x) = sum_j phi_j(x)``; positive means ``classes_[1]``.

        Returns
        -------
        score : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(self._scores(self._embed(inp.data)), inp, "decision_function")

    def predict(self, X):
        """The class of ``sign(f(x))``: ``classes_[1]`` where the score is positive.

        Returns
        -------
        labels : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        scores = self._scores(self._embed(inp.data))
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
        scores = self._scores(self._embed(inp.data))
        if isinstance(scores, da.Array):
            P = scores.map_blocks(
                _proba, new_axis=1, chunks=(scores.chunks[0], (2,)), dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )  # fmt: skip
        else:
            P = _proba(scores)
        if inp.layout is None:
            return P
        return inp.layout.samples(P, dim="class", coords={"class": self.classes_}, name="proba")

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba` (computed stably from the score)."""
        inp = self._check_input(X)
        scores = self._scores(self._embed(inp.data))
        if isinstance(scores, da.Array):
            L = scores.map_blocks(
                _log_proba, new_axis=1, chunks=(scores.chunks[0], (2,)), dtype=np.float64,
                meta=np.empty((0, 0), dtype=np.float64),
            )  # fmt: skip
        else:
            L = _log_proba(scores)
        if inp.layout is None:
            return L
        return inp.layout.samples(L, dim="class", coords={"class": self.classes_}, name="log_proba")

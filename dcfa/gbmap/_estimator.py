"""GBMAP estimators: thin scikit-learn shells over :mod:`dcfa.gbmap._solver` and ``_rows``.

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
    clone,
    is_classifier,
)
from sklearn.exceptions import DataConversionWarning, NotFittedError
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
from dcfa.gbmap._learners import Learners
from dcfa.gbmap._losses import (
    ACTIVATIONS,
    embed_block,
    local_coef_block,
    path_distance_block,
    sigmoid,
)
from dcfa.gbmap._rows import column_stats, make_data, should_persist
from dcfa.gbmap._solver import boost

__all__ = ["GBMAPClassifier", "GBMAPRegressor"]

logger = logging.getLogger("dcfa")

_SHARED_NOTES = """
    The model (Patron et al. 2024, Eqs. 1-5) is ``f(x) = f_0(x) + sum_j f_j(x)`` with
    weak learners

    .. math:: f_j(x) = a_j + b_j\\, g_\\beta(w_j^\\top [z(x), 1]), \\qquad
              g_\\beta(u) = \\log(1 + e^{\\beta u}) / \\beta,

    where ``z(x)`` are the standardised features and ``[z, 1]`` appends the intercept column.
    Step ``j`` minimises ``mean_i l(y_i, F_{j-1}(x_i) + f_j(x_i)) + lambda * mean(w_j**2)``
    (Eqs. 3-4, the mean over all ``p + 1`` weights) by L-BFGS for ``b_j = +1`` and ``b_j = -1``
    from the same random start, and keeps the sign with the lower *unpenalised* training loss
    (as the authors' code does). Each evaluation of the objective and its gradient is one
    map-reduce over the row chunks and one ``dask.compute``; the ensemble score ``F`` is a
    persisted Dask array chunked like ``X``'s rows (:mod:`dcfa.gbmap._rows`).

    Where this implementation differs from, or fills in, the paper:

    * L-BFGS is SciPy's L-BFGS-B, not JAXOPT's (other line search and history); it stops,
      like the authors' code, when the gradient's L2 norm is at most ``tol`` or after
      ``max_iter`` iterations (and when no decrease is possible at machine precision).
    * Starting points ``a ~ N(0, 1)``, ``[w, c] ~ N(0, I_{p+1} / (p + 1))``: the weights are
      scaled to the fan-in, where the authors' code draws ``N(0, I_{p+1})`` (the paper states
      none). Unscaled, the softplus starts far in its flat or steep part for large ``p`` and
      the fits stop early (at ``p = 200`` the regressor overfits and the classifier's units
      switch off; :func:`dcfa.gbmap._solver.initial_point`). They are drawn from
      ``numpy.random.default_rng([seed, step, restart])`` with ``seed`` drawn once from
      ``random_state``, so a resumed fit restarts from the same points.
    * ``n_restarts > 1`` refits every step from that many starts and keeps the best (the
      authors' "width" refit); their default "depth" refit of the whole sequence is not
      provided.
    * Features are standardised with the population standard deviation; a constant column
      gets scale 1 (it standardises to 0).
    * Learners are not "shrunk" (no learning rate), as in the paper.
    * ``f0`` (Section 5.1): the learners boost from the initial model's output, so they
      model its residuals; ``f_0`` is not an embedding coordinate (Eq. 5), and the distances
      (Eqs. 6-7), :meth:`local_coef` and the embedding cover ``sum_j f_j`` only.
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
    f0 : None, float or scikit-learn estimator, default=None
        The initial model ``f_0`` of Eq. (1) that the learners boost from (Section 5.1).
        ``None``: the default (``f_0 = 0`` on the standardised target, i.e. the target mean
        for the regressor; 0 for the classifier's logit). A float: a constant ``f_0``, in
        target units (regressor) or logit units (classifier). An estimator: its output on the
        raw ``X``; ``predict`` for a regressor, and for a classifier (whose ``classes_`` must
        be the same) ``decision_function``, else the logit of ``predict_proba``. A fitted
        estimator is used as is; an unfitted one is cloned and fitted on the training data
        first (so :func:`sklearn.base.clone`, which unfits it, refits it in every
        cross-validation fold; wrap a pre-trained model in
        :class:`sklearn.frozen.FrozenEstimator` to keep it fixed).
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
        Objective evaluations made by this call to ``fit``, summed over the L-BFGS runs of
        each step; steps loaded from a checkpoint are not counted. The runs of a step (both
        signs, all restarts) share passes over the data: a step makes as many passes (on
        Dask input, ``dask.compute`` calls) as its longest run has evaluations.
    persisted_ : bool
        Whether the standardised data were persisted during the fit (False when there was
        nothing to fit: NumPy input, or every step loaded from the checkpoint).
    train_embedding_ : ndarray or dask.array.Array of shape (n_samples, n_boosts)
        Embedding of the training data, kept for :meth:`drift_score`. An ndarray after a fit
        on in-memory data (``n x m`` floats); after a fit on Dask data a *lazy* Dask array
        that re-reads ``X`` from its source (the fit keeps a reference to the graph of
        ``X``, not a copy of it).
    f0_ : None, float or estimator
        The initial model used (``f0``, or the clone of it fitted by ``fit``).
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


# Probabilities of a classifier ``f0`` are clipped to [eps, 1 - eps] before the logit.
_PROBA_EPS = 1e-15


def _f0_block(X, f0, method: str, feature_names) -> np.ndarray:
    """The output of an estimator ``f0`` on raw rows, as a float64 vector (score units)."""
    if feature_names is not None:
        import pandas as pd

        X = pd.DataFrame(np.asarray(X), columns=feature_names)
    if method == "proba":
        p1 = np.asarray(f0.predict_proba(X), dtype=np.float64)[:, 1]
        p1 = np.clip(p1, _PROBA_EPS, 1.0 - _PROBA_EPS)
        return np.log(p1) - np.log1p(-p1)
    out = np.asarray(getattr(f0, method)(X), dtype=np.float64)
    if out.ndim != 1 and not (out.ndim == 2 and out.shape[1] == 1):
        raise ValueError(f"f0: expected one output per sample, got shape {out.shape}")
    return out.reshape(-1)


def _is_fitted(estimator) -> bool:
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


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
        "f0": "no_validation",  # checked in fit (None, a number or an estimator)
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
        f0=None,
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
        self.f0 = f0

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
        self._fit_feature_names = inp.feature_names
        self._resolve_f0(inp)

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
                F0=self._initial_score(inp.data),
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
        self._train_scores = self._scores(self.train_embedding_, inp.data)
        del self._fit_target
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
        if self.f0 is not None:  # absent otherwise: checkpoints from before f0 still resume
            fingerprint["f0"] = self._f0_descriptor()
        fingerprint.update(self._target_fingerprint())
        arrays = {"mean": mean, "scale": scale, "target": self._target_stats()}
        return fingerprint, arrays

    @property
    def _n_features_out(self) -> int:
        return int(self.coef_.shape[0])

    # -- the initial model f0 --------------------------------------------------------------

    def _resolve_f0(self, inp: InputData) -> None:
        """Check ``f0``; fit a clone of an unfitted estimator on the training data."""
        f0 = self.f0
        self._f0_method = None
        if f0 is None or isinstance(f0, Real):
            if f0 is not None and not np.isfinite(f0):
                raise ValueError(f"f0: expected a finite constant, got {f0}")
            self.f0_ = None if f0 is None else float(f0)
            return
        if not hasattr(f0, "predict"):
            raise TypeError(
                f"f0: expected None, a number or a scikit-learn estimator, got {type(f0).__name__}"
            )
        if not _is_fitted(f0):
            if inp.is_dask:
                raise ValueError(
                    "f0: an unfitted estimator is fitted on the training data first, which "
                    "needs in-memory X; fit it beforehand for Dask input"
                )
            f0 = clone(f0).fit(self._f0_input(inp.data), self._fit_target)
        self._f0_method = self._f0_output_method(f0)
        self.f0_ = f0

    def _f0_output_method(self, f0) -> str:
        if is_classifier(f0):
            raise ValueError("f0: a classifier cannot be the initial model of a regressor")
        return "predict"

    def _f0_descriptor(self):
        f0 = self.f0
        if f0 is None or isinstance(f0, Real):
            return None if f0 is None else float(f0)
        return f"estimator:{type(f0).__module__}.{type(f0).__qualname__}"

    def _f0_input(self, X):
        if getattr(self, "_f0_names", None) is None:
            return X
        import pandas as pd

        return pd.DataFrame(np.asarray(X), columns=self._f0_names)

    @property
    def _f0_names(self):
        return getattr(self, "_fit_feature_names", None)

    def _f0_default(self) -> float:
        """The output of ``f0=None``, in target / score units."""
        return 0.0

    def _f0_raw(self, data):
        """``f_0`` on validated rows, in target (regressor) or logit units: a float, or a
        vector (NumPy) / lazy vector (Dask) for an estimator ``f0``."""
        if self._f0_method is None:
            return self._f0_default() if self.f0_ is None else self.f0_
        if isinstance(data, da.Array):
            data = data.rechunk({1: -1})
            return data.map_blocks(
                _f0_block, self.f0_, self._f0_method, self._f0_names, drop_axis=1,
                dtype=np.float64, meta=np.empty((0,), dtype=np.float64),
            )  # fmt: skip
        return _f0_block(data, self.f0_, self._f0_method, self._f0_names)

    def _initial_score(self, data):
        """``F_0`` on the training rows in the units the learners fit, or None for zero."""
        if self.f0_ is None and self._f0_method is None:
            return None
        F0 = (self._f0_raw(data) - self._target_shift) / self._target_scale
        if np.ndim(F0) == 0:
            n = data.shape[0]
            if isinstance(data, da.Array):
                return da.full(n, float(F0), chunks=(data.chunks[0],), dtype=np.float64)
            return np.full(n, float(F0))
        return F0

    @property
    def _target_shift(self) -> float:
        return 0.0

    @property
    def _target_scale(self) -> float:
        return 1.0

    # -- outputs ---------------------------------------------------------------------------

    @property
    def _out_scale(self) -> float:
        return 1.0

    @property
    def _learners(self) -> tuple:
        """The fitted learners as the block kernels take them (standardizer ... out_scale)."""
        return (
            self._standardizer,
            self.intercept_,
            self.coef_,
            self.bias_,
            self.signs_,
            float(self.beta),
            self._activation,
            self._out_scale,
        )

    def _embed(self, data):
        """Embedding of validated rows: NumPy in memory, a lazy blockwise map on Dask."""
        args = self._learners
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

    def _scores(self, E, data):
        """``f(x) = f_0(x) + sum_j phi_j(x)`` from the embedding of the rows ``data``."""
        f0 = self._f0_raw(data)
        total = E.sum(axis=1)
        if isinstance(f0, da.Array) and isinstance(total, da.Array):
            f0 = f0.rechunk(total.chunks)
        return f0 + total

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
            E, self._scores(E, inp.data), self.train_embedding_, self._train_values(), n_neighbors
        )
        if isinstance(out, da.Array) and not inp.is_dask:
            (out,) = compute(out)
        return self._wrap_samples(out, inp, "drift_score")

    def local_coef(self, X, *, standardized: bool = False):
        """Local linear coefficients of every sample (Section 5.2, Fig. 3 of the paper).

        The gradient of the boosted model ``sum_j f_j`` at each sample,

        .. math:: \\nabla_x f(x) = \\sum_j b_j\\, g'(w_j^\\top [z(x), 1])\\, w_j / s,

        with ``g' = sigmoid(beta u)`` and ``s`` the features' scales: near ``x`` the model
        is the linear model ``f(x') ~ f(x) + coef . (x' - x)``. As ``beta -> inf`` it tends
        to the paper's ``sum`` of ``b_j w_j`` over the learners active at ``x``.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        standardized : bool, default=False
            False: per unit of each raw feature. True: per standard deviation of the feature
            (``coef * scale_``), the paper's coefficients on standardised data, comparable
            across features as importances.

        Returns
        -------
        coef : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            In target units (regressor) or logit units (classifier) per feature unit; lazy
            for Dask input; a DataArray ``(sample_dim, *feature dims)`` for DataArray input.
            An estimator ``f0`` is not differentiated: it is not included.
        """
        inp = self._check_input(X)
        args = (
            self._standardizer,
            self.coef_,
            self.bias_,
            self.signs_,
            float(self.beta),
            self._activation,
            self._out_scale,
            bool(standardized),
        )
        data = inp.data
        if isinstance(data, da.Array):
            data = data.rechunk({1: -1})
            G = data.map_blocks(
                local_coef_block, *args, dtype=np.float64, meta=np.empty((0, 0), dtype=np.float64)
            )
        else:
            G = local_coef_block(data, *args)
        if inp.layout is None:
            return G
        lay = inp.layout
        return xr.DataArray(
            G.reshape((G.shape[0],) + tuple(lay.feature_shape)),
            dims=(lay.sample_dim,) + tuple(lay.feature_dims),
            coords={**dict(lay.sample_coords), **dict(lay.feature_coords)},
            name="local_coef",
        )

    def path_distance(self, X, Y, *, n_grid: int = 64):
        """The path distance of Eq. (6) between the paired rows of ``X`` and ``Y``.

        ``d_path(x, y) = int_0^1 |d/dt f(x + t (y - x))| dt``: the total change of the model
        along the segment, between ``|f(y) - f(x)|`` and the embedding distance (Eq. 8).
        Computed exactly as the total variation over the segment's turning points (Lemma 3),
        located on a grid of ``n_grid`` points plus every learner's knee and refined by
        bisection; a turning point pair closer than the grid step is missed (a lower bound).

        Parameters
        ----------
        X, Y : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            The pairs ``(X[i], Y[i])``.
        n_grid : int, default=64

        Returns
        -------
        d : ndarray or dask.array.Array of shape (n_samples,)
            In target (regressor) or logit (classifier) units; lazy if ``X`` or ``Y`` is a
            Dask array. Of ``sum_j f_j``: an estimator ``f0`` is not included.
        """
        a, b = self._check_input(X), self._check_input(Y)
        if a.n_samples != b.n_samples:
            raise ValueError(
                f"X and Y: expected paired rows, got {a.n_samples} and {b.n_samples} samples"
            )
        if int(n_grid) < 2:
            raise ValueError(f"n_grid: expected an int >= 2, got {n_grid}")
        args = (*self._learners, int(n_grid))
        A, B = a.data, b.data
        if not isinstance(A, da.Array) and not isinstance(B, da.Array):
            return path_distance_block(A, B, *args)
        A = _drift._as_dask(A).rechunk({1: -1})
        B = _drift._as_dask(B).rechunk({0: A.chunks[0], 1: -1})
        return da.map_blocks(
            path_distance_block, A, B, *args, drop_axis=1, dtype=np.float64,
            meta=np.empty((0,), dtype=np.float64),
        )  # fmt: skip

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


class _GBMAPRegressorBase(RegressorMixin, _BaseGBMAP):
    """The squared-loss target handling shared by the GBMAP regressors (not for direct use)."""

    _loss = "squared"

    def _encode_target(self, y, inp: InputData) -> np.ndarray:
        values = _target_column(y, inp.n_samples, inp.layout, numeric=True)
        scale = float(values.std())
        if not scale > 0:
            raise ValueError("y: the target is constant; there is nothing to predict")
        self.y_mean_ = float(values.mean())
        self.y_scale_ = scale
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

    def predict(self, X):
        """Predicted targets ``f_0(x) + sum_j phi_j(x)`` (``f_0 = y_mean_`` by default).

        Returns
        -------
        y : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(self._scores(self._embed(inp.data), inp.data), inp, "prediction")


class _GBMAPClassifierBase(ClassifierMixin, _BaseGBMAP):
    """The logistic-loss target handling shared by the GBMAP classifiers (not for direct use)."""

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
        self._fit_target = values
        return np.where(values == classes[1], 1.0, -1.0)

    def _f0_output_method(self, f0) -> str:
        if not is_classifier(f0):
            return "predict"  # a regressor's output is taken as the score (logit)
        classes = getattr(f0, "classes_", None)
        if classes is None or not np.array_equal(np.asarray(classes), self.classes_):
            raise ValueError(
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

    def decision_function(self, X):
        """The score (logit) ``f(x) = f_0(x) + sum_j phi_j(x)``; positive means ``classes_[1]``.

        Returns
        -------
        score : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples,)
            Lazy for Dask input.
        """
        inp = self._check_input(X)
        return self._wrap_samples(
            self._scores(self._embed(inp.data), inp.data), inp, "decision_function"
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
        return inp.layout.samples(P, dim="class", coords={"class": self.classes_}, name="proba")

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
        return inp.layout.samples(L, dim="class", coords={"class": self.classes_}, name="log_proba")

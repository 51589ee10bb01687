"""The shared base of the GBMAP estimators: parameters, ``fit``, the initial model, ``transform``.

``fit`` validates at the boundary, runs the first pass (standardisation moments and the
finiteness check of ``X``), builds the row data (persisted when it fits), resumes from a
checkpoint if asked, runs the boosting loop (:mod:`dcfa.gbmap._solver`) and stores the
learners. ``transform`` and the scores are blockwise maps: lazy on Dask input. What the
target is (regression or classification) is left to the subclasses in
:mod:`dcfa.gbmap._estimator`; the uses of the fitted embedding are in
:mod:`dcfa.gbmap._embedding`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from numbers import Integral, Real

import dask.array as da
import joblib
import numpy as np
import xarray as xr
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    clone,
    is_classifier,
)
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from dcfa._compute import compute
from dcfa._errors import InputError, InputTypeError, outside_stacklevel
from dcfa._validation import (
    InputData,
    Interval,
    StrOptions,
    check_fitted_X,
    check_n_samples,
    check_X,
    check_y,
    pandas_output,
    validate_params,
)
from dcfa.gbmap._checkpoint import check_directory, load_checkpoint, save_checkpoint
from dcfa.gbmap._embedding import _EmbeddingMixin
from dcfa.gbmap._learners import Learners, boost_labels
from dcfa.gbmap._losses import ACTIVATIONS, LOSSES, embed_block
from dcfa.gbmap._rows import column_stats, make_data, row_digest, should_persist
from dcfa.gbmap._solver import boost

logger = logging.getLogger("dcfa")

# Probabilities of a classifier ``f0`` are clipped to [eps, 1 - eps] before the logit.
_PROBA_EPS = 1e-15
#: A step that lowers the training loss by less than this share of the loss before the first
#: step is switched off (``inactive_steps_``, :class:`InactiveLearnersWarning`): for the
#: regressor, 0.1 % of the target's variance.
INACTIVE_SHARE = 1e-3


class InactiveLearnersWarning(UserWarning):
    """Some GBMAP steps lowered the training loss by (almost) nothing: their learners are
    switched off, and their embedding coordinates carry (almost) nothing."""


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
        raise InputError(f"f0: expected one output per sample, got shape {out.shape}")
    return out.reshape(-1)


def _is_fitted(estimator) -> bool:
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def loss_drops(initial_loss: float, train_loss: np.ndarray) -> np.ndarray:
    """How much each step lowered the training loss (``initial_loss``: before the first)."""
    return np.concatenate([[initial_loss], train_loss[:-1]]) - train_loss


def inactive_steps(initial_loss: float, train_loss: np.ndarray) -> np.ndarray:
    """Steps whose training loss fell by less than :data:`INACTIVE_SHARE` of
    ``initial_loss`` (the loss before the first step)."""
    return loss_drops(initial_loss, train_loss) < INACTIVE_SHARE * abs(initial_loss)


def _mean_loss(loss: str, target: np.ndarray, F0) -> float:
    """The mean training loss of the initial model: its score ``F0`` (None: 0) on ``target``
    (standardised, or labels in {-1, +1}). A lazy ``F0`` (an estimator ``f0`` on Dask input)
    is computed."""
    F = 0.0 if F0 is None else F0
    if isinstance(F, da.Array):
        (F,) = compute(F)
    return float(np.mean(LOSSES[loss].pointwise_loss(target, np.asarray(F))))


class _BaseGBMAP(_EmbeddingMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
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
        inp, target, standardizer = self._checked_input(X, y)  # with the first pass
        learners, seed, save = self._resumed(inp, standardizer, target)
        F0 = self._initial_score(inp.data)
        initial_loss = _mean_loss(self._loss, target, F0)
        n_evals, persisted = 0, False
        if len(learners) < self.n_boosts:
            learners, n_evals, persisted = self._boost(
                inp, target, standardizer, F0, learners, seed, save
            )
        self._set_fitted(inp, standardizer, learners, initial_loss, n_evals, persisted)
        del self._fit_target
        return self

    def _checked_input(self, X, y) -> tuple[InputData, np.ndarray, object]:
        """The parameters, ``X`` and ``y`` checked, ``f0`` fitted and the first pass over
        ``X`` (its columns' standardisation moments) done: ``(inp, target, standardizer)``."""
        validate_params(self)
        if self._activation not in ACTIVATIONS:
            raise ValueError(f"_activation: expected one of {sorted(ACTIVATIONS)}")
        if not np.isfinite(self.beta):
            raise InputError(f"beta: expected a finite softplus sharpness > 0, got {self.beta}")
        inp = check_X(X, sample_dim=self.sample_dim)
        check_n_samples(inp.n_samples, 2, why="the features are standardised")
        target = self._encode_target(y, inp)  # cheap checks of y first: no pass over X yet
        self._fit_feature_names = inp.feature_names
        self._resolve_f0(inp)
        if self.checkpoint is not None:
            check_directory(self.checkpoint)  # a bad path fails now, not after step 1
        standardizer, bad, empty = column_stats(inp.data, empty_columns=True)  # the first pass
        if bad:
            # a masked grid (land in a sea-surface field) is NaN in whole features, not in
            # some samples: say so, since dropping samples would drop them all
            where = (
                f"; {empty} of the {inp.n_features} features have no finite value at all "
                "(masked cells such as land? keep the valid ones, e.g. "
                "X.stack(cell=['lat', 'lon']).dropna('cell', how='all'))"
                if empty
                else " (impute or drop those samples)"
            )
            raise InputError(
                f"X: contains {bad} NaN or infinite values; GBMAP needs finite features{where}"
            )
        # after the NaN check: masked cells would count as features
        if inp.n_features >= inp.n_samples:
            warnings.warn(
                f"{type(self).__name__}: {inp.n_features:,} features for {inp.n_samples:,} "
                f"samples: one learner's {inp.n_features:,} weights can fit the training "
                "samples exactly, and the model then predicts other samples worse than a "
                "linear model does. Reduce the features first (RegionsCV's region means, as "
                "a batch job's [gbmap] does).",
                UserWarning,
                stacklevel=outside_stacklevel(),
            )
        return inp, target, standardizer

    def _resumed(self, inp: InputData, standardizer, target: np.ndarray):
        """The learners to start from (those of a matching checkpoint, or none), the seed of
        the restarts, and the callback that saves each step (None without a checkpoint)."""
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        learners = Learners.empty(inp.n_features)
        if self.checkpoint is None:
            return learners, seed, None
        # the fingerprint hashes y and a fitted f0, and digests X's rows (one pass): a
        # checkpoint of other data, or of the same rows in another order, is not resumed
        fingerprint, arrays = self._fingerprint(
            inp.n_samples, inp.n_features, standardizer.mean, standardizer.scale, target
        )
        arrays["rows"] = row_digest(inp.data, standardizer.mean, standardizer.scale)
        found = load_checkpoint(self.checkpoint, fingerprint, arrays)
        if found is not None:
            learners, seed = found
            learners = learners.head(self.n_boosts)
            logger.info("%s: resuming after step %d", type(self).__name__, len(learners))

        def save(fitted: Learners) -> None:
            save_checkpoint(self.checkpoint, fingerprint, arrays, seed, fitted)

        return learners, seed, save

    def _boost(self, inp: InputData, target, standardizer, F0, learners: Learners, seed, save):
        """The steps after ``learners``, up to ``n_boosts``: ``(learners, n_evals,
        persisted)``."""
        persisted = inp.is_dask and should_persist(self.persist, inp.n_samples, inp.n_features)
        data = make_data(
            inp.data,
            target,
            standardizer,
            persist=persisted,
            learners=learners,
            beta=float(self.beta),
            activation=self._activation,
            F0=F0,
        )
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
            callback=save,
        )
        return learners, n_evals, persisted

    def _set_fitted(
        self, inp: InputData, standardizer, learners: Learners, initial_loss, n_evals, persisted
    ) -> None:
        """The fitted attributes, the training embedding and its scores."""
        self.n_features_in_ = inp.n_features
        self._layout = inp.layout  # the grid a DataArray given to transform is aligned to
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
        self.initial_loss_ = initial_loss
        self.inactive_steps_ = inactive_steps(initial_loss, self.train_loss_)
        self._warn_inactive()
        self.step_n_iter_ = learners.n_iter.copy()
        self.step_n_evals_ = learners.n_evals.copy()
        self.n_iter_ = int(learners.n_iter.sum())
        self.n_evals_ = int(n_evals)
        self.persisted_ = bool(persisted)
        # computed now, not kept lazy: a lazy embedding re-read X's source at every drift
        # score or neighbour query, so a rewritten store changed them silently (and a
        # pickled model kept X's graph); n x n_boosts floats, one pass
        embedding = self._embed(inp.data)
        scores = self._scores(embedding, inp.data)
        if inp.is_dask:
            embedding, scores = compute(embedding, scores)
        self.train_embedding_, self._train_scores = embedding, scores

    def _warn_inactive(self) -> None:
        steps = np.flatnonzero(self.inactive_steps_)
        if steps.size == 0:
            return
        drop = loss_drops(self.initial_loss_, self.train_loss_)
        drops = ", ".join(f"step {j + 1}: {drop[j]:.2g}" for j in steps[:4]) + (
            ", ..." if steps.size > 4 else ""
        )
        warnings.warn(
            f"{type(self).__name__}: {steps.size} of {self.n_boosts} boosting steps lowered "
            f"the training loss by less than {INACTIVE_SHARE:.1%} of its value before the first "
            f"step ({self.initial_loss_:.4g}; {drops}): their learners are switched off and "
            "carry nothing to the embedding. Either the residual holds nothing a learner can "
            f"fit (a target linear in X: the first steps take it all, and fewer n_boosts, now "
            f"{self.n_boosts}, give the same model), or the learners cannot bend: a larger "
            f"beta (now {self.beta:g}: a learner bends only if its output spans about 1/beta "
            "of the target) lets them. Compare the skill with a linear model's; see "
            "inactive_steps_.",
            InactiveLearnersWarning,
            stacklevel=outside_stacklevel(),
        )

    def _fingerprint(self, n: int, p: int, mean, scale, target: np.ndarray) -> tuple[dict, dict]:
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
            if self._f0_method is not None:
                # the fitted model itself, not only its class: learners boosted from
                # another model's residuals are not this fit's
                fingerprint["f0_digest"] = joblib.hash(self.f0_, hash_name="sha1")
        fingerprint.update(self._target_fingerprint())
        # every target value, not only its moments or classes: other labels of the same X
        # (another threshold, a permutation) must not resume this fit's learners
        fingerprint["target_sha256"] = hashlib.sha256(
            np.ascontiguousarray(target, dtype=np.float64).tobytes()
        ).hexdigest()
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
                raise InputError(f"f0: expected a finite constant, got {f0}")
            self.f0_ = None if f0 is None else float(f0)
            return
        if not hasattr(f0, "predict"):
            raise InputTypeError(
                f"f0: expected None, a number or a scikit-learn estimator, got {type(f0).__name__}"
            )
        self._check_f0_kind(f0)  # before a fit on a target of the wrong kind fails
        if not _is_fitted(f0):
            if inp.is_dask:
                raise InputError(
                    "f0: an unfitted estimator is fitted on the training data first, which "
                    "needs in-memory X; fit it beforehand for Dask input"
                )
            f0 = clone(f0).fit(self._f0_input(inp.data), self._f0_target(f0))
        self._f0_method = self._f0_output_method(f0)
        self.f0_ = f0

    def _check_f0_kind(self, f0) -> None:
        if is_classifier(f0):
            raise InputError("f0: a classifier cannot be the initial model of a regressor")

    def _f0_target(self, f0) -> np.ndarray:
        """The target an unfitted ``f0`` is fitted on: the training target."""
        return self._fit_target

    def _f0_output_method(self, f0) -> str:
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

    def _check_input(self, X, name: str = "X") -> InputData:
        check_is_fitted(self, "coef_")
        shape = getattr(X, "shape", None)
        if not isinstance(X, xr.DataArray) and shape is not None and len(shape) == 2:
            # here rather than in check_fitted_X, whose message names X whatever the argument
            if isinstance(shape[1], Integral) and shape[1] != self.n_features_in_:
                raise InputError(
                    f"{name} has {shape[1]} features, but {type(self).__name__} is expecting "
                    f"{self.n_features_in_} features as input"
                )
        inp = check_fitted_X(
            self, X, layout=getattr(self, "_layout", None), sample_dim=self.sample_dim, name=name
        )
        if not inp.is_dask and not np.isfinite(inp.data).all():
            raise InputError(
                f"{name}: contains NaN or infinite values; GBMAP needs finite features"
            )
        return inp

    def transform(self, X):
        """The embedding ``(f_1(x), ..., f_m(x))`` (Eq. 5): one column per weak learner.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            A DataArray, for a model fitted on one, is matched to the fitted features by its
            labels (dims and coordinate labels in any order; others raise); a DataFrame's
            columns must be the fitted ones, in order.

        Returns
        -------
        Xt : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, n_boosts)
            Lazy for Dask input (nothing is computed). A DataArray gives a DataArray
            ``(sample_dim, "boost")``, ``boost`` labelled 1 to m as the learners ``f_j`` are
            (``E.sel(boost=1)`` is ``f_1(x)``), whose attrs are the score's, not ``X``'s
            (``units``: the target's ``units`` for a regressor given a target with that
            attr). The columns
            sum to the boosted part of the score, ``f(x) - f_0(x)``: the decision function
            (classifier, ``f_0 = 0`` by default), or ``predict(X) - y_mean_`` (regressor with
            the default ``f_0``, whose columns are in target units).
        """
        inp = self._check_input(X)
        E = self._embed(inp.data)
        if inp.layout is None:
            return E
        out = inp.layout.samples(
            E,
            dim="boost",
            coords={"boost": boost_labels(E.shape[1])},
            name=f"{type(self).__name__.lower()}_embedding",
            # not X's attrs: the embedding is in the units of the score, not of X
            attrs=self._score_attrs("GBMAP embedding f_j(x)"),
        )
        return pandas_output(self, out)

    def _scores(self, E, data):
        """``f(x) = f_0(x) + sum_j phi_j(x)`` from the embedding of the rows ``data``."""
        f0 = self._f0_raw(data)
        total = E.sum(axis=1)
        if isinstance(f0, da.Array) and isinstance(total, da.Array):
            f0 = f0.rechunk(total.chunks)
        return f0 + total

    def _aligned_target(self, X, y):
        """``y`` for ``score``, checked against a DataArray ``X``'s samples by label, or a
        DataFrame ``X``'s dates, as in ``fit`` (a target with the same dates in another order
        raises, instead of being compared row by row); other inputs are left to
        scikit-learn."""
        inp = self._check_input(X)
        if inp.layout is None and inp.sample_dates is None:
            return y
        values = check_y(y, inp, numeric=False, allow_constant=True)
        return values[:, 0] if values.shape[1] == 1 else values

    @property
    def _score_units(self) -> str | None:
        """The units of the score, the embedding and the drift score, when known: the
        target's ``units`` attr for a regressor; None for the classifier's logit."""
        return None

    def _score_attrs(self, long_name: str) -> dict:
        """Attrs of an output in score units (never ``X``'s attrs, e.g. its ``units``)."""
        attrs = {"long_name": long_name}
        if self._score_units is not None:
            attrs["units"] = self._score_units
        return attrs

    @staticmethod
    def _wrap_samples(values, inp: InputData, name: str, attrs: dict | None = None):
        if inp.layout is None:
            return values
        return inp.layout.samples(values, name=name, attrs=attrs or {})

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags

"""Cross-validated skill of a reduction or a regressor, judged out of sample and in time order.

Climate samples are autocorrelated, so shuffled folds leak the test months' neighbours into the
training set and flatter every method. Two splitters keep time in blocks:

* :func:`blocked_cv`: K contiguous blocks of time (scikit-learn's ``KFold`` without
  shuffling); each block is predicted by a model fitted on the others, before and after it,
  optionally less the ``gap`` samples on either side of it (a purged K-fold: the samples next
  to a test block share its months through leads, lags, windows and autocorrelation).
* :func:`forward_cv`: forward chaining (scikit-learn's ``TimeSeriesSplit``): each block is
  predicted by a model fitted on an expanding window of the samples before it, optionally
  ending ``gap`` samples earlier (a purge against autocorrelation and leads). It never trains on
  the future, as a forecast could not.

Both clone and refit the whole model in every fold: a reduction (LinCFA, PCA, ...) is scored as
``reduction -> OLS``, and a pipeline such as ``make_pipeline(Anomalies(), LinCFA())`` fits its
climatology on the training rows of each fold, so no statistic of a test month is used to fit
anything. The refits' :class:`dcfa.NoSkillWarning` (a fold's map that predicts no better than
the climatology) is not shown: the skill returned gives every fold's.

Both read ``X`` into memory, and the refits run in this process on Dask's local threads, even
with a distributed ``Client``: shipping the in-memory array to the workers inside every fold's
graphs takes as long and makes distributed warn of "large graphs".
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral

import dask
import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import BaseCrossValidator, KFold, TimeSeriesSplit, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline

from dcfa._errors import GappyCellsWarning, InputError, NoSkillWarning, outside_stacklevel
from dcfa._terminal import counted
from dcfa._validation import (
    check_target_dates,
    check_time_order,
    model_steps,
    numeric_array,
    refuse_dataset,
    refuse_other_columns,
    sample_dim_of,
)
from dcfa.forecast.leads import warn_if_purge_short
from dcfa.stats.seasonal import has_large_cycle

__all__ = ["Skill", "as_regressor", "blocked_cv", "blocked_folds", "forward_cv", "regression_for"]

MIN_TRAIN = 4  # samples in the smallest training window of forward_cv (LinCFA divides by n - 3)
MIN_BLOCK = 12  # samples in a test block, a year of months: an R^2 over fewer scores noise
MIN_TEST = 2  # samples per test block of forward_cv (a test R^2 needs two)


@dataclass(frozen=True)
class Skill:
    """Out-of-sample skill of one model on K folds.

    Attributes
    ----------
    name : str
    r2 : ndarray of shape (n_splits,)
        Test R^2 of every fold, in time order.
    n_features : ndarray of shape (n_splits,)
        Features the final regression saw in every fold (groups, components, cells).
    fit_time : float
        Mean seconds to fit on one training block (reduction and regression).
    extra : dict
        ``"folds"``: the ``(train, test)`` sample indices of every fold, in time order (for
        :func:`blocked_cv` and :func:`forward_cv`).
    predictions : ndarray or DataArray of shape (n_samples,), or None
        Every test sample's prediction by the model of its fold (out of sample), NaN for the
        samples no test block holds (a forward CV's first training window); a DataArray
        along ``X``'s sample coordinate when ``X`` was one (for
        :func:`dcfa.plot.plot_predicted` and time-series plots), with the target's attrs and
        its other coords along the samples (a lead target's ``target_time``, the month each
        prediction is for).
    """

    name: str
    r2: np.ndarray
    n_features: np.ndarray
    fit_time: float
    extra: dict = field(default_factory=dict, repr=False)
    predictions: np.ndarray | xr.DataArray | None = field(default=None, repr=False)

    @property
    def mean(self) -> float:
        return float(np.mean(self.r2))

    @property
    def std(self) -> float:
        return float(np.std(self.r2))

    def row(self) -> str:
        """One line of a comparison table."""
        k = self.n_features
        feats = f"{int(k[0])}" if k.min() == k.max() else f"{int(k.min())}-{int(k.max())}"
        return (
            f"{self.name:<40s} {self.mean:+.3f} ± {self.std:.3f}   {feats:>8s}   "
            f"{self.fit_time:7.2f} s"
        )


HEADER = f"{'model':<40s} {'R² (mean ± sd)':>14s}   {'features':>8s}   {'fit time':>9s}"


def as_regressor(model: BaseEstimator) -> Pipeline:
    """``model`` itself if it predicts, else ``model ->`` the regression its last step was
    made for (``regressor()``, as :meth:`dcfa.RegionsCV.regressor`), or ``LinearRegression``
    (a reduction + OLS)."""
    if is_regressor(model) or hasattr(model, "predict"):
        return model
    return make_pipeline(model, regression_for(model))


def regression_for(model: BaseEstimator) -> BaseEstimator:
    """The regression to fit on the features of ``model`` (a reduction, or a pipeline ending
    in one), new and unfitted: the one its last step was made for (``regressor()``, as
    :meth:`dcfa.RegionsCV.regressor`), else ``LinearRegression`` (OLS)."""
    last = model[-1] if isinstance(model, Pipeline) else model
    make = getattr(last, "regressor", None)
    return make() if callable(make) else LinearRegression()


def _refuse_classifier(model, function: str) -> None:
    """A classifier's R^2 is that of its 0/1 labels, not a skill score: refused, naming a
    classification score on the same folds."""
    if not is_classifier(model):
        return
    folds = (
        "blocked_folds(len(y), n_splits, gap)"
        if function == "blocked_cv"
        else "TimeSeriesSplit(n_splits, gap=gap)"
    )
    raise InputError(
        f"model: {function} scores R^2 of a regression; {type(model).__name__} is a classifier, "
        "whose R^2 of predicted labels is no skill score. Score it on the same folds with "
        f"scikit-learn: cross_val_score(model, X, y, cv={folds}, scoring='balanced_accuracy')"
    )


def _n_features(fitted) -> int:
    """How many features the last step (the regression) received."""
    final = fitted[-1] if isinstance(fitted, Pipeline) else fitted
    return int(getattr(final, "n_features_in_", 0))


def _check_y(y) -> np.ndarray:
    """``y`` as 1-D float64, every value finite: a test R^2 needs every target, and a NaN
    found by a fold's scorer would be reported as 'Input contains NaN' after the fits."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InputError(
            f"y: expected one target, a 1-D series; got shape {y.shape}: forward_cv scores one "
            "target at a time"
        )
    y = numeric_array(y, "y").astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise InputError(
            f"y: {bad.size} of {y.size} values are NaN or infinite (the first at sample "
            f"{bad[0]}); drop those samples from X and y first: X, y = dcfa.align(X, y) for "
            "a field and a target with dates (it leaves out the samples where y is NaN), or "
            "keep = np.isfinite(y); X[keep], y[keep] for arrays with the samples first"
        )
    return y


def _warn_if_target_cycle(model, y) -> None:
    """Warn, at the user's line, when ``model`` takes the anomalies of ``X`` (a
    :class:`dcfa.Anomalies` step) but ``y``, a dated series, is mostly its own seasonal cycle:
    anomalies cannot predict it, so it stays in the error and in the skill said (a river's
    flow: forward-CV R^2 +0.14 with its cycle, +0.63 for its anomalies, on the same map)."""
    from dcfa.anomalies import Anomalies  # layout: the same layer, read only here
    from dcfa.io.calendars import months_of

    if not any(isinstance(s, Anomalies) for s in model_steps(model)):
        return
    if not isinstance(y, xr.DataArray | pd.Series) or np.ndim(y) != 1:
        return
    dates = y[y.dims[0]] if isinstance(y, xr.DataArray) else xr.DataArray(y.index, dims="time")
    try:
        months = months_of(dates, "y")
    except InputError:  # not dates: no calendar months
        return
    values = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(values)
    share = has_large_cycle(values[ok], np.asarray(months)[ok])
    if share is not None:
        warnings.warn(
            f"y: its mean seasonal cycle is {share:.0%} of its variance; the model's Anomalies "
            "remove the seasonal cycle of X, not of y, so it stays in the error and the skill. "
            "To score y's anomalies: dcfa.Anomalies().fit(y_train).transform(y)",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )


def _warn_if_purges_short(model, y, gap) -> None:
    """Warn when ``y`` is a target at a lead (:func:`dcfa.lead_target`) longer than the
    CV's ``gap`` or than the ``gap`` of a step of ``model`` (RegionsCV's own folds): the
    refits see ``y`` as an array, so the steps cannot tell."""
    purges = {"gap": gap} if _is_int(gap, 0) else {}
    for step in model_steps(model):
        if _is_int(inner := getattr(step, "gap", None), 0):
            purges[f"{type(step).__name__}.gap"] = inner
    warn_if_purge_short(y, purges, sample_dim=sample_dim_of(model))


def _samples_first(model, X):
    """A DataArray ``X`` with the model's sample dim first (:func:`sample_dim_of`): the folds
    cut the first dim, and the estimators find the samples by name, in any position."""
    refuse_dataset(X, "X")
    if not isinstance(X, xr.DataArray):
        return X
    dim = sample_dim_of(model)
    if dim in X.dims and X.dims[0] != dim:
        return X.transpose(dim, ...)
    return X


def _check_inputs(X, y) -> tuple[np.ndarray | xr.DataArray, np.ndarray]:
    """``X`` in memory as float64 (a DataArray stays one, keeping its dates), ``y`` 1-D;
    ``y`` (its dates against X's, as ``fit`` checks them) and the shapes are checked before
    a DataArray is read."""
    refuse_dataset(y, "y")
    refuse_other_columns(y, "y")
    if isinstance(X, xr.DataArray) and X.ndim >= 1:
        dim = X.dims[0]
        check_target_dates(y, str(dim), X[dim].values if dim in X.coords else None)
    y = _check_y(y)
    if isinstance(X, xr.DataArray):
        if X.ndim < 2:
            raise InputError(
                f"X: expected samples along the first dim and features along the others, got "
                f"dims {X.dims}"
            )
        dim = X.dims[0]
        check_time_order(
            X[dim].values if dim in X.coords else None, str(dim), why="the CV's blocks of time"
        )
        if X.shape[0] != y.shape[0]:
            raise InputError(f"X and y: {X.shape[0]} samples in X but {y.shape[0]} in y")
        X = X.astype(np.float64).compute()
    elif isinstance(X, pd.DataFrame):  # kept: its index holds the dates Anomalies reads
        X = X.astype(np.float64)
    else:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise InputError(
                f"X: expected a 2-D (n_samples, n_features) array, got shape {X.shape}"
            )
    if X.shape[0] != y.shape[0]:
        raise InputError(f"X and y: {X.shape[0]} samples in X but {y.shape[0]} in y")
    return X, y


def _cross_validated_skill(
    model,
    X,
    y,
    cv: BaseCrossValidator | list[tuple[np.ndarray, np.ndarray]],
    name: str | None,
    labels: tuple[dict, dict],
) -> Skill:
    """Clone and refit ``as_regressor(model)`` on every training fold of ``cv`` (a splitter or
    a list of (train, test) indices); test R^2. The predictions carry the target's
    ``labels`` (:func:`_target_labels`). A refit's :class:`dcfa.NoSkillWarning` is
    not shown: the skill returned says more, fold by fold. The refits'
    :class:`dcfa.GappyCellsWarning` is shown once, the first fold's, with how many folds
    warned; their other warnings as they came."""
    caught, folds = [], None
    try:
        with (
            warnings.catch_warnings(record=True) as caught,
            dask.config.set(scheduler="threads"),
        ):
            warnings.simplefilter("always")
            warnings.simplefilter("ignore", NoSkillWarning)
            out = _refits(model, X, y, cv)
            folds = list(zip(out["indices"]["train"], out["indices"]["test"], strict=True))
            predictions = _out_of_sample(out["estimator"], X, folds, labels)
    finally:  # a failed refit's warnings may say why
        _warn_again(caught, folds)
    return Skill(
        name=name or type(model).__name__,
        r2=np.asarray(out["test_score"]),
        n_features=np.array([_n_features(e) for e in out["estimator"]]),
        fit_time=float(np.mean(out["fit_time"])),
        extra={"folds": folds},
        predictions=predictions,
    )


def _refits(model, X, y, cv):
    """scikit-learn's ``cross_validate`` of ``as_regressor(model)``, its estimators and
    indices kept; NaN that a fold's test gaps bring to the regression is said to be the
    data's."""
    try:
        return cross_validate(
            as_regressor(model),
            X,
            y,
            cv=cv,
            scoring="r2",
            return_estimator=True,
            return_indices=True,
            error_score="raise",
        )
    except ValueError as exc:
        if "contains NaN" not in str(exc) or not (gappy := _gappy_features(X)):
            raise
        raise InputError(
            f"X: {counted(gappy, 'feature')} with values missing in some samples: a fold "
            "whose training samples have none of a feature's gaps keeps it, and its test "
            "samples' gaps reach the regression as NaN. Fill the gaps, or leave those "
            "features out first, as a fit on every sample does (in xarray: X.where("
            'X.notnull().all("time"))); LinCFA and GenLinCFA keep them with '
            "missing='pairwise'"
        ) from exc


def _gappy_features(X) -> int:
    """How many features of ``X`` (samples first) have some, not all, values missing."""
    values = np.asarray(X.values if isinstance(X, (xr.DataArray, pd.DataFrame)) else X)
    missing = np.isnan(values.reshape(values.shape[0], -1).astype(np.float64))
    return int((missing.any(axis=0) & ~missing.all(axis=0)).sum())


def _warn_again(caught: list, folds: list | None) -> None:
    """The refits' warnings ``caught``, shown under the caller's filters: each once, and the
    gappy cells' once for all ``folds`` (the folds' counts differ, so their texts do; None
    when a refit failed)."""
    gappy = [w for w in caught if issubclass(w.category, GappyCellsWarning)]
    if gappy:
        of = "" if folds is None else f" of {len(folds)}"
        warnings.warn(
            f"{len(gappy)}{of} folds' refits: {gappy[0].message}",
            GappyCellsWarning,
            stacklevel=outside_stacklevel(),
        )
    seen: dict = {}
    for w in caught:
        if not issubclass(w.category, GappyCellsWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=seen)


def _target_labels(y) -> tuple[dict, dict]:
    """The target's attrs (its units) and its other coords along its samples (a lead
    target's ``target_time``: the month each prediction is for), for the predictions."""
    attrs = dict(getattr(y, "attrs", {}))
    if not isinstance(y, xr.DataArray) or y.ndim != 1:
        return attrs, {}
    dim = y.dims[0]
    coords = {
        name: (c.values, dict(c.attrs))
        for name, c in y.coords.items()
        if name != dim and c.dims == (dim,)
    }
    return attrs, coords


def _out_of_sample(estimators, X, folds, labels: tuple[dict, dict]):
    """Each test sample predicted by its fold's fitted model, NaN elsewhere; along ``X``'s
    sample coordinate, with the target's ``labels``, for a DataArray ``X``."""
    predicted = np.full(X.shape[0], np.nan)
    for estimator, (_, test) in zip(estimators, folds, strict=True):
        if isinstance(X, xr.DataArray):
            rows = X.isel({X.dims[0]: test})
        elif isinstance(X, pd.DataFrame):
            rows = X.iloc[test]
        else:
            rows = X[test]
        values = estimator.predict(rows)
        predicted[test] = np.asarray(getattr(values, "values", values)).reshape(-1)
    if not isinstance(X, xr.DataArray):
        return predicted
    dim = X.dims[0]
    attrs, target_coords = labels
    coords = {dim: X[dim]} if dim in X.coords else {}
    coords |= {name: (dim, *value) for name, value in target_coords.items()}
    return xr.DataArray(predicted, dims=dim, coords=coords, name="prediction", attrs=attrs)


def blocked_cv(
    model: BaseEstimator,
    X: ArrayLike | xr.DataArray,
    y: ArrayLike,
    *,
    n_splits: int = 5,
    gap: int = 0,
    name: str | None = None,
) -> Skill:
    """Score ``model`` (a regressor, or a reduction followed by OLS) on contiguous time blocks.

    The samples are cut into ``n_splits`` contiguous blocks, as scikit-learn's ``KFold``
    without shuffling cuts them; each block is predicted by a model fitted on the samples of
    the other blocks, except the ``gap`` samples just before and just after it (a purged
    K-fold). Without the purge, the training samples that border a test block share its
    months (a sample's information spans its predictors' months, back through its lags and
    trailing windows, and its target's month, ``lead`` ahead) and the autocorrelation of
    both, so the score is flattered. A gap of ``lead + max(lags) + max(windows) - 1``
    samples leaves no training sample sharing a month with a test sample; a longer one also
    clears the autocorrelation's reach.

    Parameters
    ----------
    model : estimator
        A scikit-learn regressor, or a transformer (LinCFA, PCA, ...) that is scored as
        ``model -> LinearRegression`` (:class:`dcfa.RegionsCV`: ``model ->`` the regression
        its map is chosen for, :meth:`~dcfa.RegionsCV.regressor`). It is cloned and refitted
        on every training block.
    X : array-like or xarray.DataArray of shape (n_samples, n_features)
        Samples in time order. A DataArray (samples along the model's ``sample_dim``,
        ``"time"`` by default, in any position, else its first dim; features along the
        others) is read into memory as float64 and passed on as a DataArray, so that a
        pipeline starting with :class:`dcfa.Anomalies` finds its dates.
    y : array-like of shape (n_samples,)
    n_splits : int, default=5
        Number of contiguous blocks.
    gap : int, default=0
        Samples left out of training on each side of the test block (counted in samples,
        whatever the dates: drop no months in between, or count them in).
    name : str, optional
        Label for tables; the model's class name by default.

    Returns
    -------
    Skill
        ``extra["folds"]`` holds each fold's (train, test) sample indices.

    Raises
    ------
    ValueError
        For ``n_splits`` outside ``[2, n_samples // 4]``, or a ``gap`` that leaves a fold fewer
        than 4 samples to train on, before ``X`` is read; for a classifier ``model`` (its
        R^2 of labels is no skill score), naming a classification score.

    See Also
    --------
    forward_cv : train on the past only (an expanding window), with a purge gap.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> X = np.random.default_rng(0).normal(size=(60, 3))
    >>> skill = blocked_cv(LinearRegression(), X, X @ [1.0, 2.0, 0.0], n_splits=3, gap=4)
    >>> [len(train) for train, test in skill.extra["folds"]]  # 40 - 4, 40 - 8, 40 - 4
    [36, 32, 36]
    """
    _refuse_classifier(model, "blocked_cv")
    X = _samples_first(model, X)
    labels = _target_labels(y)  # before _check_inputs makes y an array
    _warn_if_purges_short(model, y, gap)
    _warn_if_target_cycle(model, y)
    lazy = isinstance(X, xr.DataArray) and X.ndim >= 2  # read by _check_inputs: n_splits first
    if not lazy:
        X, y = _check_inputs(X, y)
    n = X.shape[0]
    if not _is_int(n_splits, 2) or n_splits > n // 4:
        raise InputError(
            f"n_splits: expected an int in [2, {n // 4}] (4 samples per block), got {n_splits!r}"
        )
    folds = blocked_folds(n, int(n_splits), gap)
    warn_if_blocks_small(n, int(n_splits))
    _check_monthly_anomalies(model, X, folds, "n_splits")
    if lazy:
        X, y = _check_inputs(X, y)
    return _cross_validated_skill(model, X, y, folds, name, labels)


def blocked_folds(n: int, n_splits: int, gap: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) indices of :func:`blocked_cv`: ``n_splits`` contiguous test blocks,
    each trained on the other samples less ``gap`` on either side of it (``gap`` checked
    against ``n``: a ValueError names it when a fold would train on too few samples)."""
    if not _is_int(gap, 0):
        raise InputError(f"gap: expected an int >= 0, got {gap!r}")
    if n_splits > n:
        raise InputError(f"n_splits: {n_splits} test blocks of {n} samples; use fewer blocks")
    folds = _purged_blocks(n, n_splits, int(gap))
    fewest = min(train.size for train, _ in folds)
    if fewest < MIN_TRAIN:
        fits = [g for g in range(gap) if _fewest_train(n, n_splits, g) >= MIN_TRAIN]
        need = f"need gap <= {fits[-1]}" if fits else "even gap=0 does not"
        raise InputError(
            f"gap: {gap} samples on each side of a test block leave {fewest} of the {n} "
            f"samples to train a fold on (n_splits={n_splits}), fewer than {MIN_TRAIN}; {need}"
        )
    return folds


def warn_if_blocks_small(n: int, n_splits: int) -> None:
    """Warn, at the user's line, when ``n_splits`` blocked folds of ``n`` samples leave test
    blocks of fewer than :data:`MIN_BLOCK` samples, where ``n`` has room for larger ones: an
    R^2 over a few months scores noise, and a map chosen by it too (472 samples in 100 blocks
    gave a mean CV R^2 of -0.35 where 5 gave +0.67, with a warning that blamed the target)."""
    size = n // n_splits
    if size >= MIN_BLOCK or n < 2 * MIN_BLOCK:
        return
    warnings.warn(
        f"n_splits: {n_splits} test blocks of {n} samples hold {size} or {size + 1} samples "
        f"each: an R^2 over so few scores noise, and a map chosen by it too; n_splits <= "
        f"{n // MIN_BLOCK} gives blocks of {MIN_BLOCK} or more",
        UserWarning,
        stacklevel=outside_stacklevel(),
    )


def _purged_blocks(n: int, n_splits: int, gap: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``KFold``'s contiguous blocks, each training set less ``gap`` samples either side."""
    folds = []
    for _, test in KFold(n_splits, shuffle=False).split(np.zeros((n, 1))):
        keep = np.ones(n, dtype=bool)
        keep[max(test[0] - gap, 0) : test[-1] + 1 + gap] = False
        folds.append((np.flatnonzero(keep), test))
    return folds


def _fewest_train(n: int, n_splits: int, gap: int) -> int:
    return min(train.size for train, _ in _purged_blocks(n, n_splits, gap))


def _is_int(value, low: int) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= low


def _forward_splitter(
    n: int,
    *,
    n_splits: int,
    gap: int,
    min_train: int | None,
    test_size: int | None,
    max_train_size: int | None,
) -> TimeSeriesSplit:
    """The ``TimeSeriesSplit`` of :func:`forward_cv`, its arguments checked against ``n``."""
    for arg, value, low in (("n_splits", n_splits, 2), ("gap", gap, 0)):
        if not _is_int(value, low):
            raise InputError(f"{arg}: expected an int >= {low}, got {value!r}")
    for arg, value, low in (
        ("min_train", min_train, 1),
        ("test_size", test_size, MIN_TEST),
        ("max_train_size", max_train_size, 1),
    ):
        if value is not None and not _is_int(value, low):
            raise InputError(f"{arg}: expected None or an int >= {low}, got {value!r}")
    # a rolling window shorter than the first training window would train every fold on
    # fewer samples than min_train promises (or than a fit needs): said here, not by a fold
    shortest = max(MIN_TRAIN, min_train or 0)
    if max_train_size is not None and max_train_size < shortest:
        why = f"min_train={min_train}" if (min_train or 0) > MIN_TRAIN else "a fit"
        raise InputError(
            f"max_train_size: expected None or an int >= {shortest} (the samples {why} "
            f"needs to train on), got {max_train_size}"
        )
    size, first = _layout(n, n_splits, gap, min_train, test_size)
    if size < MIN_TEST or first < max(MIN_TRAIN, min_train or 0):
        raise InputError(_infeasible(n, n_splits, gap, min_train, test_size))
    return TimeSeriesSplit(n_splits, gap=gap, test_size=size, max_train_size=max_train_size)


def _layout(
    n: int, n_splits: int, gap: int, min_train: int | None, test_size: int | None
) -> tuple[int, int]:
    """The test block length of :func:`forward_cv`'s folds and its first training window."""
    if test_size is not None:
        size = test_size
    elif min_train is not None:
        size = (n - gap - max(MIN_TRAIN, min_train)) // n_splits
    else:
        size = n // (n_splits + 1)  # scikit-learn's default
    return size, n - gap - n_splits * size


def _fits(n: int, n_splits: int, gap: int, min_train: int | None, test_size: int | None) -> bool:
    size, first = _layout(n, n_splits, gap, min_train, test_size)
    return size >= MIN_TEST and first >= max(MIN_TRAIN, min_train or 0)


def _most_splits(
    n: int, n_splits: int, gap: int, min_train: int | None, test_size: int | None
) -> int | None:
    """The most folds below ``n_splits`` that fit in ``n`` samples with the other arguments
    as given (None if none do)."""
    fitting = (
        k
        for k in range(min(n_splits - 1, n // MIN_TEST), 1, -1)
        if _fits(n, k, gap, min_train, test_size)
    )
    return next(fitting, None)


def _infeasible(
    n: int, n_splits: int, gap: int, min_train: int | None, test_size: int | None
) -> str:
    """Why :func:`forward_cv`'s folds do not fit in ``n`` samples, naming the argument at
    fault and the value it needs: ``gap`` when the same folds fit without the purge, else the
    argument that sizes the test blocks (``test_size``, ``min_train``, or ``n_splits`` by
    default), else ``n_splits``."""
    need = max(MIN_TRAIN, min_train or 0)
    size, first = _layout(n, n_splits, gap, min_train, test_size)
    given = f"{n} samples, n_splits={n_splits}, gap={gap}"
    given += "".join(
        f", {k}={v}"
        for k, v in (("min_train", min_train), ("test_size", test_size))
        if v is not None
    )
    if size < MIN_TEST:
        if min_train is not None:
            left = f"min_train={min_train} and gap={gap} leave {max(n - gap - need, 0)} samples"
        else:
            left = f"{n} // (n_splits + 1) = {max(size, 0)}"
        why = (
            f"{n_splits} test blocks would hold {max(size, 0)} sample(s) each ({left}); a "
            f"test R² needs {MIN_TEST}"
        )
    else:
        why = (
            f"{n_splits} test blocks of {size} samples ({n_splits * size} in all)"
            + (f" and the gap of {gap}" if gap else "")
            + f" leave {max(first, 0)} of the {n} to train the first fold on, fewer than "
            f"{need}" + (" (min_train)" if min_train is not None and min_train > MIN_TRAIN else "")
        )
    if gap > 0 and _fits(n, n_splits, 0, min_train, test_size):
        if test_size is not None:
            best = n - n_splits * test_size - need
        elif min_train is not None:
            best = n - need - n_splits * MIN_TEST
        else:
            best = n - n_splits * (n // (n_splits + 1)) - need
        return f"gap: {given}: {why}; need gap <= {best}"
    if test_size is not None and (n - gap - need) // n_splits >= MIN_TEST:
        return f"test_size: {given}: {why}; need test_size <= {(n - gap - need) // n_splits}"
    room = n - gap - n_splits * (test_size or MIN_TEST)  # the longest first window possible
    best = _most_splits(n, n_splits, gap, min_train, test_size)
    if min_train is not None and room >= MIN_TRAIN:
        fewer = "" if best is None else f", or n_splits <= {best}"  # keeping min_train
        return f"min_train: {given}: {why}; need min_train <= {room}{fewer}"
    if best is not None:
        return f"n_splits: {given}: {why}; need n_splits <= {best}"
    culprit = "test_size" if test_size else "min_train" if min_train else "n_splits"
    if test_size is not None and n - gap - need >= 2 * MIN_TEST:
        return f"test_size: {given}: {why}; need n_splits * test_size <= {n - gap - need}"
    if min_train is None and n - gap - need >= 2 * MIN_TEST:  # the default blocks are long
        best = (n - gap - need) // MIN_TEST
        return f"n_splits: {given}: {why}; need n_splits <= {best} with test_size={MIN_TEST}"
    if test_size is not None or min_train is not None:  # two blocks of 2 after the first
        fewest, with_ = 2 * MIN_TEST + gap + need, " and test_size=2" if test_size else ""
    else:  # n = 3m + r: two blocks of m, a first window of m + r - gap
        fewest, with_ = min(3 * max(gap + need - r, MIN_TEST) + r for r in range(3)), ""
    return f"{culprit}: {given}: {why}; too few samples: even n_splits=2{with_} needs {fewest}"


def forward_cv(
    model: BaseEstimator,
    X: ArrayLike | xr.DataArray,
    y: ArrayLike,
    *,
    n_splits: int = 5,
    gap: int = 0,
    min_train: int | None = None,
    test_size: int | None = None,
    max_train_size: int | None = None,
    name: str | None = None,
) -> Skill:
    """Score ``model`` by forward chaining: fit on the past, predict the next block.

    The last ``n_splits * test_size`` samples form ``n_splits`` consecutive test blocks; each
    is predicted by a model fitted on every sample before it (an expanding window, or the last
    ``max_train_size``) except the ``gap`` samples just before it. The folds are those of
    scikit-learn's ``TimeSeriesSplit(n_splits, gap=gap, test_size=...)``.

    Parameters
    ----------
    model : estimator
        A scikit-learn regressor, or a transformer (LinCFA, PCA, a pipeline such as
        ``make_pipeline(Anomalies(), LinCFA())``) that is scored as
        ``model -> LinearRegression`` (:class:`dcfa.RegionsCV` last: ``model ->`` the
        regression its map is chosen for, :meth:`~dcfa.RegionsCV.regressor`). It is cloned
        and refitted, every step of it, on every training window: no statistic of a test
        sample is used to fit anything.
    X : array-like or xarray.DataArray of shape (n_samples, n_features)
        Samples in time order. A DataArray (samples along the model's ``sample_dim``,
        ``"time"`` by default, in any position, else its first dim; features along the
        others, e.g. ``(time, lat, lon)``) is read into memory as float64 and passed on as a
        DataArray, so that :class:`dcfa.Anomalies` finds its dates.
    y : array-like of shape (n_samples,)
    n_splits : int, default=5
        Number of test blocks (folds).
    gap : int, default=0
        Samples left out between the end of each training window and its test block (a
        purge: with a lead of L samples, or autocorrelated targets, use ``gap >= L``).
    min_train : int, optional
        Smallest first training window: the test blocks are then
        ``(n_samples - gap - max(min_train, 4)) // n_splits`` samples long. With
        :class:`dcfa.Anomalies` ``by="month"`` on monthly data, use at least 24: a calendar
        month present once in a training window would have anomalies of 0 in every cell
        (refused, naming ``min_train``).
    test_size : int, optional
        Samples per test block; by default ``n_samples // (n_splits + 1)`` (scikit-learn's
        default), or from ``min_train``.
    max_train_size : int, optional
        Train on at most the last ``max_train_size`` samples before the gap (a rolling
        window) instead of on all of them; at least 4, and at least ``min_train``.
    name : str, optional
        Label for tables; the model's class name by default.

    Returns
    -------
    Skill
        ``extra["folds"]`` holds the train and test indices of every fold.

    Raises
    ------
    ValueError
        Before a DataArray ``X`` is read, naming the argument at fault (``gap`` when the folds fit
        without the purge, else ``test_size``, ``min_train`` or ``n_splits``) and the value
        it needs, when the folds would have fewer than 2 test samples or a first training
        window shorter than 4 samples (or ``min_train``); when ``max_train_size`` is below
        that; when ``y`` holds NaN or infinite values (naming the first); for a classifier
        ``model`` (its R^2 of labels is no skill score), naming a classification score.

    See Also
    --------
    blocked_cv : K contiguous blocks, each predicted from all the others.
    """
    _refuse_classifier(model, "forward_cv")
    X = _samples_first(model, X)
    labels = _target_labels(y)  # before _check_inputs makes y an array
    _warn_if_purges_short(model, y, gap)
    _warn_if_target_cycle(model, y)
    lazy = isinstance(X, xr.DataArray) and X.ndim >= 2  # read by _check_inputs: folds first
    if not lazy:
        X, y = _check_inputs(X, y)
    cv = _forward_splitter(
        X.shape[0],
        n_splits=n_splits,
        gap=gap,
        min_train=min_train,
        test_size=test_size,
        max_train_size=max_train_size,
    )
    _check_monthly_anomalies(model, X, list(cv.split(np.empty((X.shape[0], 1)))), "min_train")
    if lazy:
        X, y = _check_inputs(X, y)
    return _cross_validated_skill(model, X, y, cv, name, labels)


def _check_monthly_anomalies(model, X, folds, argument: str) -> None:
    """Refuse a fold whose training rows hold a calendar month once when a step of
    ``model`` makes monthly anomalies (:meth:`dcfa.Anomalies.months_once`): that month's
    climatology would be its one sample, and its anomalies 0 in every cell (on a short first
    window, every feature is then constant); with ``by="dayofyear"``, a month of one year
    only. Reads the dates only; names ``argument``, the one to change."""
    seasonal = [
        s
        for s in model_steps(model)
        if getattr(s, "by", None) in ("month", "dayofyear") and hasattr(s, "months_once")
    ]
    if not seasonal or not isinstance(X, xr.DataArray):
        return
    from dcfa.io.calendars import MONTH_NAMES, calendar_of, months_of, need_dates

    sample_dim = X.dims[0]
    if calendar_of(X[sample_dim]) is not None:  # a missing date named in X, not in a fold
        need_dates(X[sample_dim], "X", "the model's anomalies need dates")
    for i, (train, test) in enumerate(folds):
        rows = X.isel({sample_dim: train})
        dates = rows[sample_dim]
        if calendar_of(dates) is None:  # no dates: Anomalies' own fit says what it needs
            continue
        where = (
            f"{argument}: the training rows of fold {i} ({train.size} samples, "
            f"{_month(dates[0])} .. {_month(dates[-1])})"
        )
        for step in seasonal:
            once = step.months_once(rows)
            if once and step.by == "month":
                raise InputError(
                    f"{where} hold {', '.join(once)} only once: the model's "
                    "Anomalies(by='month') would make their anomalies 0 in every cell. Monthly "
                    "anomalies need each calendar month at least twice in every training "
                    "window " + _MORE_TRAINING[argument]
                )
            if once:
                raise InputError(
                    f"{where} hold {', '.join(once)} in one year only: the model's "
                    "Anomalies(by='dayofyear') would take their climatology from that year. "
                    "It needs each calendar month in at least two years of every training "
                    "window " + _MORE_TRAINING[argument]
                )
        if all(s.by == "dayofyear" and s.harmonics is not None for s in seasonal):
            continue  # the fitted annual cycle gives every day a climatology
        # daily samples: a short window holds each month many times, or not at all
        absent = np.setdiff1d(
            months_of(X[sample_dim].isel({sample_dim: test}), "X"), months_of(dates, "X")
        )
        if absent.size:
            raise InputError(
                f"{where} hold no {', '.join(MONTH_NAMES[m - 1] for m in absent)}, which its "
                "test rows hold: the model's Anomalies has no climatology for them. Every "
                "training window needs each calendar month " + _MORE_TRAINING[argument]
            )


# how to give every fold more training rows, by the argument named
_MORE_TRAINING = {
    "min_train": "(min_train >= 24 on monthly samples, 730 on daily ones, or a longer record)",
    "n_splits": "(more blocks, n_splits, leave more training rows; or a longer record)",
}


def _month(date: xr.DataArray) -> str:
    return str(date.dt.strftime("%Y-%m").item())

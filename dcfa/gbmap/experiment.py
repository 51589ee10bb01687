"""The out-of-distribution experiment of the GBMAP paper (Patron et al. 2024, Section 4.5).

:func:`drift_experiment` follows the paper step by step (Sections 4.1 and 4.5):

1. Standardise the covariates (the paper preprocesses every dataset this way).
2. For every covariate ``c``: sort the rows by ``c`` and split them into halves **a**
   (lower values) and **b** (upper values); split **a** at random into **a1** and **a2** of
   (roughly) equal size; drop ``c``; fit GBMAP on **a1**; the drift of ``c`` is the mean
   loss on **b** minus the mean loss on **a2** (squared loss for regression, logistic loss
   for classification). Keep the covariate of largest drift.
3. With that split, the ground-truth loss of a test point of **a2** or **b** is
   ``(y - f(x))^2`` (regression) or ``(s - f(x))^2`` (classification, ``s`` the score of a
   logistic regression fitted on the complete data); a point *drifts* when its loss exceeds
   the 95 % quantile of the losses on **a2**.
4. Two drift indicators, neither of which sees ``y``: the GBMAP drifter
   ``|f(x) - kNN mean|`` over the ``k = 5`` nearest points of **a1** in the embedding
   distance (:meth:`GBMAPRegressor.drift_score`), and the EUCLID drifter, the Euclidean
   distance to the 5th nearest point of **a1** in the standardised covariates
   (:func:`dcfa.gbmap.drift.euclid_drift_score`).
5. The ROC AUC of each indicator at telling the drifting points of **a2** and **b** apart.

GBMAP parameters default to the paper's for this experiment: ``m = 20``, ``beta = 5``,
``lambda = 1e-3``, at most 200 L-BFGS iterations. The experiment needs the rows in memory
(it sorts them by every covariate); a Dask ``X`` is computed first.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.utils.multiclass import type_of_target

from dcfa._errors import InputError
from dcfa.gbmap._base import InactiveLearnersWarning
from dcfa.gbmap._estimator import GBMAPClassifier, GBMAPRegressor
from dcfa.gbmap.drift import euclid_drift_score

__all__ = ["DriftExperimentResult", "drift_experiment"]


@dataclass(frozen=True)
class DriftExperimentResult:
    """The outcome of :func:`drift_experiment`.

    Attributes
    ----------
    auc_gbmap, auc_euclid : float
        ROC AUC of the GBMAP and EUCLID drifters (Table 4's AUC-GBMAP and AUC-EUCLID); NaN
        if no test point (or every one) drifts.
    feature : int
        Index of the covariate that splits the data into **a** and **b**.
    feature_name : str or None
        Its name, for a pandas ``X``.
    feature_drift : ndarray of shape (n_features,)
        Mean loss on **b** minus mean loss on **a2** for every candidate covariate (NaN for
        those not tried, and for a classification split whose **a1** holds one class).
    threshold : float
        The loss quantile on **a2** above which a point drifts.
    drift_rate_a2, drift_rate_b : float
        Fractions of drifting points in **a2** (about ``1 - quantile`` by construction) and
        in **b**.
    task : str
        ``"regression"`` or ``"classification"``.
    train_index : ndarray of shape (n_a1,)
        Rows of **a1** in ``X``.
    test_index : ndarray of shape (n_test,)
        Rows of the test points in ``X``: **a2**, then **b**.
    in_b : ndarray of shape (n_test,)
        Whether each test point is in **b**.
    loss, gbmap_score, euclid_score : ndarray of shape (n_test,)
        The ground-truth loss and the two indicators of every test point.
    model : GBMAPRegressor or GBMAPClassifier
        The model fitted on **a1** (without the split covariate).
    """

    auc_gbmap: float
    auc_euclid: float
    feature: int
    feature_name: str | None
    feature_drift: np.ndarray
    threshold: float
    drift_rate_a2: float
    drift_rate_b: float
    task: str
    train_index: np.ndarray = field(repr=False)
    test_index: np.ndarray = field(repr=False)
    in_b: np.ndarray = field(repr=False)
    loss: np.ndarray = field(repr=False)
    gbmap_score: np.ndarray = field(repr=False)
    euclid_score: np.ndarray = field(repr=False)
    model: object = field(repr=False)


def _standardize(X: np.ndarray) -> np.ndarray:
    scale = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def _splits(X: np.ndarray, c: int, rng: np.random.Generator):
    """Rows of **a1**, **a2** and **b** for the covariate ``c``."""
    order = np.argsort(X[:, c], kind="stable")
    half = X.shape[0] // 2
    a, b = order[:half], order[half:]
    a = rng.permutation(a)
    return a[: a.size // 2], a[a.size // 2 :], b


def _pointwise_loss(task: str, model, X: np.ndarray, t: np.ndarray) -> np.ndarray:
    if task == "regression":
        return (t - model.predict(X)) ** 2
    return np.logaddexp(0.0, -t * model.decision_function(X))


def drift_experiment(
    X: ArrayLike,
    y: ArrayLike,
    *,
    task: str = "auto",
    n_boosts: int = 20,
    beta: float = 5.0,
    penalty: float = 1e-3,
    max_iter: int = 200,
    n_neighbors: int = 5,
    quantile: float = 0.95,
    feature: int | None = None,
    score_model: BaseEstimator | None = None,
    classification_loss: str = "score",
    random_state: int | None = None,
) -> DriftExperimentResult:
    """Run the drift (out-of-distribution) experiment of Section 4.5 of the GBMAP paper.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Numeric covariates (categorical ones one-hot encoded); standardised here.
    y : array-like of shape (n_samples,)
        Real target (regression) or two class labels (classification).
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"``: classification for a binary ``y``, else regression.
    n_boosts, beta, penalty, max_iter : GBMAP parameters
        The paper's values for this experiment by default (20, 5, 1e-3, 200).
    n_neighbors : int, default=5
        ``k`` of both drifters.
    quantile : float, default=0.95
        A test point drifts if its loss exceeds this quantile of the losses on **a2**.
    feature : int or None, default=None
        The covariate that splits the data; None searches all of them (step 2).
    score_model : classifier or None, default=None
        Classification only: the model of the "true" score ``s`` on the complete data. None
        is scikit-learn's ``LogisticRegression()`` (L2, ``C = 1``): the paper's unpenalised
        fit diverges on separable data such as BREAST-CANCER.
    classification_loss : {"score", "logistic"}, default="score"
        Classification only: the ground-truth loss of a test point. ``"score"``:
        ``(s - f(x))^2`` with ``s`` from ``score_model`` (the definition of Section 4.5);
        ``"logistic"``: GBMAP's logistic loss on the label (the section's first paragraph,
        which the paper also uses to pick the split covariate).
    random_state : int or None, default=None
        Seeds the a1/a2 splits and the GBMAP fits.

    Returns
    -------
    DriftExperimentResult
        ``auc_gbmap`` and ``auc_euclid`` are Table 4's last two columns.

    Notes
    -----
    A classification split whose **a1** holds a single class is skipped (GBMAP cannot be
    trained on it). Where the paper is silent: **a** is the lower half of the sorted
    covariate (ties in it kept in row order); each candidate covariate gets its own random
    a1/a2 split (drawn in order from ``random_state``) and GBMAP seed, and the chosen
    covariate's fit is the one evaluated; the score model of a classification task sees
    every covariate (the split one too) and every row; the EUCLID drifter works in the
    standardised covariates without the split one (the space the model sees).
    """
    names = getattr(X, "columns", None)
    X, y, task, feature = _checked(X, y, task, n_neighbors, quantile, feature, classification_loss)
    Xs = _standardize(X)
    t, cls = _signed_target(y, task)
    params = dict(n_boosts=n_boosts, beta=beta, penalty=penalty, max_iter=max_iter)
    rng = np.random.default_rng(random_state)
    candidates = range(X.shape[1]) if feature is None else [feature]
    drift, (c, a1, a2, b, keep, model) = _split_of_largest_drift(
        Xs, t, task, cls(**params), candidates, rng
    )
    model._warn_inactive()
    test = np.concatenate([a2, b])
    in_b = np.concatenate([np.zeros(a2.size, bool), np.ones(b.size, bool)])
    Xtest = Xs[test][:, keep]
    if task == "regression":
        loss = (t[test] - model.predict(Xtest)) ** 2
    elif classification_loss == "logistic":
        loss = _pointwise_loss(task, model, Xtest, t[test])
    else:
        scorer = LogisticRegression() if score_model is None else clone(score_model)
        s = scorer.fit(Xs, t).decision_function(Xs)
        loss = (s[test] - model.decision_function(Xtest)) ** 2
    threshold = float(np.quantile(loss[~in_b], quantile))
    is_drift = loss > threshold
    gbmap_score = np.asarray(model.drift_score(Xtest, n_neighbors=n_neighbors))
    euclid_score = np.asarray(euclid_drift_score(Xtest, Xs[a1][:, keep], n_neighbors))

    def auc(score):
        if is_drift.all() or not is_drift.any():
            return float("nan")
        return float(roc_auc_score(is_drift, score))

    return DriftExperimentResult(
        auc_gbmap=auc(gbmap_score),
        auc_euclid=auc(euclid_score),
        feature=int(c),
        feature_name=None if names is None else str(names[c]),
        feature_drift=drift,
        threshold=threshold,
        drift_rate_a2=float(is_drift[~in_b].mean()),
        drift_rate_b=float(is_drift[in_b].mean()),
        task=task,
        train_index=a1,
        test_index=test,
        in_b=in_b,
        loss=loss,
        gbmap_score=gbmap_score,
        euclid_score=euclid_score,
        model=model,
    )


def _checked(X, y, task, n_neighbors, quantile, feature, classification_loss):
    """``X`` and ``y`` as float rows and labels, the task resolved, ``feature`` as an index;
    every argument checked before the first of the fits."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y).reshape(-1)
    if X.ndim != 2 or X.shape[0] != y.shape[0]:
        raise InputError(f"X and y: expected (n, p) and (n,), got {X.shape} and {y.shape}")
    if X.shape[1] < 2:
        raise InputError("X: the experiment drops the split covariate; it needs >= 2 covariates")
    bad = int((~np.isfinite(X)).sum())
    if bad:  # before the standardisation, which would spread a NaN over its column
        raise InputError(
            f"X: contains {bad} NaN or infinite values; the experiment needs finite "
            "covariates (impute or drop those samples)"
        )
    if classification_loss not in ("score", "logistic"):
        raise InputError(
            f"classification_loss: expected 'score' or 'logistic', got {classification_loss!r}"
        )
    if not 0.0 < quantile < 1.0:
        raise InputError(f"quantile: expected a number in (0, 1), got {quantile}")
    if task == "auto":
        task = "classification" if type_of_target(y) == "binary" else "regression"
    if task not in ("regression", "classification"):
        raise InputError(f"task: expected 'auto', 'regression' or 'classification', got {task!r}")
    n, p = X.shape
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, Integral) or n_neighbors < 1:
        raise InputError(f"n_neighbors: expected an int >= 1, got {n_neighbors!r}")
    if feature is not None:
        if isinstance(feature, bool) or not isinstance(feature, Integral) or not -p <= feature < p:
            raise InputError(
                f"feature: expected None or the index of one of X's {p} columns, got {feature!r}"
            )
        feature = int(feature) % p  # as NumPy indexes: -1 is the last covariate
    if n // 4 < n_neighbors:
        raise InputError(f"X: {n} samples leave fewer than n_neighbors={n_neighbors} in a1")
    if task == "classification" and np.unique(y).size != 2:
        raise InputError(f"y: expected two classes, got {np.unique(y).size}")
    return X, y, task, feature


def _signed_target(y: np.ndarray, task: str):
    """The target GBMAP is fitted to (labels as -1 and +1 for classification), and the
    estimator class of the task."""
    if task == "classification":
        return np.where(y == np.unique(y)[1], 1.0, -1.0), GBMAPClassifier
    return y.astype(np.float64), GBMAPRegressor


def _split_of_largest_drift(Xs, t, task: str, template, candidates, rng):
    """Step 2: every candidate covariate's drift (NaN where not tried), and the split of the
    largest, ``(c, a1, a2, b, keep, model)``. Each candidate draws its a1/a2 split and its
    GBMAP seed, in order, from ``rng``."""
    p = Xs.shape[1]
    drift = np.full(p, np.nan)
    best = None
    for c in candidates:
        a1, a2, b = _splits(Xs, c, rng)
        seed = int(rng.integers(np.iinfo(np.int32).max))
        if task == "classification" and np.unique(t[a1]).size < 2:
            continue  # a1 holds one class: no classifier to train, no drift to measure
        keep = np.delete(np.arange(p), c)
        with warnings.catch_warnings():  # one per candidate; the chosen one's is said after
            warnings.simplefilter("ignore", InactiveLearnersWarning)
            model = clone(template).set_params(random_state=seed).fit(Xs[a1][:, keep], t[a1])
        loss_a2 = _pointwise_loss(task, model, Xs[a2][:, keep], t[a2])
        loss_b = _pointwise_loss(task, model, Xs[b][:, keep], t[b])
        drift[c] = loss_b.mean() - loss_a2.mean()
        if best is None or drift[c] > drift[best[0]]:
            best = (c, a1, a2, b, keep, model)
    if best is None:
        raise InputError("y: every split leaves a single class in a1; nothing to train")
    return drift, best

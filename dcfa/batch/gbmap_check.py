"""Does GBMAP earn its place in a job? Its skill next to the linear models on the same features.

A job fits GBMAP on the region features; :func:`gbmap_against_linear` scores it by
forward-chaining cross-validation (scikit-learn's ``TimeSeriesSplit``, purged by the lead)
next to OLS and ridge (regression) or a logistic regression (classification) on the very same
features, refitting every model on every training window. The job prints the verdict and
keeps it in the result store (``gbmap_skill``): a GBMAP that does not beat the linear model is
said so. :func:`extremes_separation` asks the embedding's own question: do the months at the
target's extremes (its lowest and highest quintiles) lie apart in the embedding, better than
in the region features themselves? Both use the features of a partition fitted on all
months, so they compare GBMAP with the linear models, not the reduction with anything else.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager

import numpy as np

__all__ = [
    "extremes_separation",
    "gbmap_against_linear",
    "inactive_line",
    "step_spans",
    "verdict_line",
]


def _folds(n: int, n_splits: int, gap: int):
    from sklearn.model_selection import TimeSeriesSplit

    return list(TimeSeriesSplit(n_splits, gap=gap).split(np.zeros((n, 1))))


@contextmanager
def _quiet():
    """The refits of the folds, without their warnings (the job's own fit gave them) and
    their log lines (one per step and fold)."""
    from dcfa.gbmap import InactiveLearnersWarning

    log = logging.getLogger("dcfa")
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InactiveLearnersWarning)
            yield
    finally:
        log.setLevel(level)


def _quiet_clone(gbmap):
    from sklearn.base import clone

    return clone(gbmap).set_params(checkpoint=None)


def gbmap_against_linear(gbmap, features, target, *, gap: int = 0, n_splits: int = 5) -> dict:
    """Forward-chaining CV of GBMAP (its parameters, refitted per fold) against linear models.

    Parameters
    ----------
    gbmap : GBMAPRegressor or GBMAPClassifier
        Cloned (without its checkpoint) and refitted on every training window.
    features : array-like of shape (n_samples, n_features)
        The region features, in time order.
    target : array-like of shape (n_samples,)
    gap : int, default=0
        Samples between each training window and its test block (the forecast lead).
    n_splits : int, default=5

    Returns
    -------
    dict
        ``metric`` ("r2" or "accuracy"), ``n_splits``, ``gap``, ``scores`` (model name to
        the per-fold scores), ``mean`` (model name to the mean), ``best_linear`` (its
        name) and ``beats`` (whether GBMAP's mean is above the best linear model's).
    """
    from sklearn.base import is_classifier
    from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeCV
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(target).reshape(-1)
    if is_classifier(gbmap):
        metric = "accuracy"
        linear = {"logistic": make_pipeline(StandardScaler(), LogisticRegression())}
    else:
        metric = "r2"
        linear = {
            "ols": LinearRegression(),
            "ridge": make_pipeline(StandardScaler(), RidgeCV(np.logspace(-3, 3, 13))),
        }
    cv = _folds(len(y), n_splits, gap)
    scores = {}
    with _quiet():
        for name, model in {"gbmap": _quiet_clone(gbmap), **linear}.items():
            scores[name] = cross_val_score(model, X, y, cv=cv, scoring=metric).tolist()
    mean = {name: float(np.mean(s)) for name, s in scores.items()}
    best = max(linear, key=mean.get)
    return {
        "metric": metric,
        "n_splits": n_splits,
        "gap": gap,
        "scores": scores,
        "mean": mean,
        "best_linear": best,
        "beats": bool(mean["gbmap"] > mean[best]),
    }


def step_spans(steps) -> str:
    """Increasing step numbers as runs: ``[2, 3, 4, 7, 9, 10]`` -> ``"2-4, 7, 9-10"``, so that
    a summary line stays one line when hundreds of steps are listed."""
    steps = np.asarray(steps, dtype=np.int64)
    if steps.size == 0:
        return ""
    runs = np.split(steps, np.flatnonzero(np.diff(steps) != 1) + 1)
    return ", ".join(f"{r[0]}" if r.size == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def inactive_line(gbmap) -> str | None:
    """The job's line on the fitted ``gbmap``'s switched-off steps (its ``inactive_steps_``),
    or None when every step lowered the training loss."""
    from dcfa.gbmap import INACTIVE_SHARE

    off = np.flatnonzero(gbmap.inactive_steps_) + 1
    if not off.size:
        return None
    return (
        f"GBMAP: {off.size} of {gbmap.n_boosts} steps ({step_spans(off)}) lowered the training "
        f"loss by less than {INACTIVE_SHARE * 100:g} % of its first value: switched off (see "
        f"gbmap.beta, now {gbmap.beta:g}, and gbmap.n_boosts)"
    )


def verdict_line(result: dict, n_features: int) -> str:
    """One line for a job's summary: GBMAP's skill, the linear models', and the verdict."""
    metric = "R²" if result["metric"] == "r2" else "accuracy"
    m = result["mean"]
    others = " and ".join(
        f"{'OLS' if k == 'ols' else k} {v:+.2f}" if metric == "R²" else f"{k} {v:.2f}"
        for k, v in m.items()
        if k != "gbmap"
    )
    own = f"{m['gbmap']:+.2f}" if metric == "R²" else f"{m['gbmap']:.2f}"
    verdict = (
        "GBMAP beats the linear model"
        if result["beats"]
        else "GBMAP does not beat the linear model on this task"
    )
    return (
        f"GBMAP forward-CV {metric} {own} against {others} on the same {n_features} features "
        f"({result['n_splits']} folds, gap {result['gap']}): {verdict}"
    )


def _extremes(y: np.ndarray, rows: np.ndarray, bounds) -> tuple[np.ndarray, np.ndarray]:
    """The ``rows`` at or beyond the two ``bounds`` of ``y``, and 1 for the upper ones."""
    lo, hi = bounds
    keep = rows[(y[rows] <= lo) | (y[rows] >= hi)]
    return keep, (y[keep] >= hi).astype(int)


def extremes_separation(
    gbmap, features, target, *, gap: int = 0, n_splits: int = 5, quantile: float = 0.2, k: int = 5
) -> dict:
    """How well the months at the target's extremes are told apart in GBMAP's embedding and
    in the features themselves, out of sample.

    In every forward-chaining fold, GBMAP is refitted on the training window; the training
    months in the lowest and highest ``quantile`` of the training target are two classes, and
    a ``k``-nearest-neighbour classifier on them (in the embedding, and in the standardised
    features) labels the test months beyond the same thresholds. Each space has its own
    distance: GBMAP's embedding the L1 distance it is defined with (the learners' outputs
    add up to the prediction, so L1 weighs each by what it adds), the features the Euclidean.

    The two spaces label the same test months, so they are compared on the months where they
    disagree (McNemar's exact test): with about a hundred test months, accuracies a few
    hundredths apart are often a handful of months, within the noise.

    Returns
    -------
    dict
        ``embedding`` and ``features``: the mean test accuracy over the folds; ``folds``:
        both per fold; ``n_test``: test months at the extremes per fold; ``only``: the test
        months each space labels right and the other wrong; ``p_value``: McNemar's exact
        two-sided p-value of those counts.
    """
    from scipy.stats import binomtest
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.preprocessing import StandardScaler

    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(target, dtype=np.float64).reshape(-1)
    right = {"embedding": [], "features": []}  # per fold, each test month labelled right
    n_test = []
    for train, test in _folds(len(y), n_splits, gap):
        bounds = np.quantile(y[train], [quantile, 1.0 - quantile])
        tr, ytr = _extremes(y, train, bounds)
        te, yte = _extremes(y, test, bounds)
        n_test.append(int(te.size))
        with _quiet():
            model = _quiet_clone(gbmap).fit(X[train], y[train])
        scaler = StandardScaler().fit(X[train])
        spaces = {
            "embedding": (model.transform(X[tr]), model.transform(X[te]), "manhattan"),
            "features": (scaler.transform(X[tr]), scaler.transform(X[te]), "euclidean"),
        }
        for name, (a, b, metric) in spaces.items():
            knn = KNeighborsClassifier(min(k, len(tr)), metric=metric).fit(a, ytr)
            right[name].append(knn.predict(b) == yte if te.size else np.zeros(0, dtype=bool))
    acc = {
        name: [float(hit.mean()) if hit.size else float("nan") for hit in hits]
        for name, hits in right.items()
    }
    emb, feat = (np.concatenate(right[name]) for name in ("embedding", "features"))
    only = {"embedding": int(np.sum(emb & ~feat)), "features": int(np.sum(feat & ~emb))}
    n_split = sum(only.values())
    p_value = binomtest(only["embedding"], n_split).pvalue if n_split else 1.0
    return {
        "embedding": float(np.nanmean(acc["embedding"])),
        "features": float(np.nanmean(acc["features"])),
        "folds": acc,
        "n_test": n_test,
        "only": only,
        "p_value": float(p_value),
        "quantile": quantile,
        "k": k,
    }


def extremes_verdict(result: dict, level: float = 0.05) -> str:
    """How the embedding compares with the features in :func:`extremes_separation`'s
    ``result``: better or worse where McNemar's test finds a difference at ``level``, within
    the noise otherwise; with the months on which the two disagree."""
    only = result["only"]
    if result["p_value"] < level:
        word = "better" if only["embedding"] > only["features"] else "worse"
        verdict = f"the embedding separates them {word} than the regions"
    else:
        verdict = "the difference is within the noise"
    return (
        f"{verdict} (they disagree on {only['embedding'] + only['features']} months, "
        f"{only['embedding']} of them right in the embedding; McNemar p = "
        f"{result['p_value']:.2f})"
    )

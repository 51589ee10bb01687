"""Choosing a map by cross-validated skill: the pure functions behind :class:`dcfa.RegionsCV`.

* :func:`ols_skill`: the test R^2 of ``LinearRegression()`` on group series, as scikit-learn
  fits it, for one fold.
* :func:`within_noise`: the smallest map whose skill is within the noise of the best one
  (a one-standard-error rule, as glmnet's ``lambda.1se``, with the standard error of the
  *paired* differences over the folds).
* :func:`comembership`: how much of each cell's region recurs in other maps (the folds').
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["comembership", "ols_skill", "within_noise"]

# the Cholesky factor's smallest diagonal over its largest below which the normal equations'
# solution is left to least squares (a condition number of the Gram matrix above 1e8)
_CONDITION = 1e-4


def ols_skill(G: np.ndarray, y: np.ndarray, train, test) -> float:
    """R^2 on ``test`` rows of ``LinearRegression()`` fitted on ``train`` rows of ``y`` on the
    groups ``G`` (groups x samples): centred least squares, the minimum-norm solution when there
    are more groups than training rows, as scikit-learn solves it. ``train`` and ``test`` are
    slices or index arrays."""
    A, b = G[:, train].T, y[train]
    am, bm = A.mean(axis=0), b.mean()
    A = A - am
    try:  # the normal equations, when they are well conditioned: the cheapest solve
        if A.shape[1] >= A.shape[0]:  # as many groups as rows: no unique solution
            raise np.linalg.LinAlgError
        factor = scipy.linalg.cho_factor(A.T @ A, check_finite=False)
        diag = np.abs(np.diag(factor[0]))
        if diag.min() <= _CONDITION * diag.max():  # near-collinear groups: lose digits
            raise np.linalg.LinAlgError
        coef = scipy.linalg.cho_solve(factor, A.T @ (b - bm), check_finite=False)
    except np.linalg.LinAlgError:  # more groups than rows, or collinear: the minimum norm
        coef = np.linalg.lstsq(A, b - bm, rcond=None)[0]  # as LinearRegression (SVD)
    pred = bm + (G[:, test].T - am) @ coef
    yt = y[test]
    sst = np.sum((yt - yt.mean()) ** 2)
    return float(1.0 - np.sum((yt - pred) ** 2) / sst) if sst > 0 else float("nan")


def within_noise(skill: np.ndarray, sizes: np.ndarray, parsimony: float = 1.0) -> int:
    """The candidate with the fewest groups whose skill is within ``parsimony`` standard errors
    of the best candidate's.

    Parameters
    ----------
    skill : ndarray of shape (n_candidates, n_folds)
        Each candidate map's test skill in each fold; a candidate with a NaN fold is never
        chosen.
    sizes : ndarray of shape (n_candidates,)
        Each candidate's number of groups.
    parsimony : float, default=1.0
        How many standard errors below the best mean skill a smaller map may be. The standard
        error is that of the candidate's fold-by-fold difference from the best candidate (the
        folds are shared, so the years that are hard for every map cancel out, which a
        standard error of the best candidate's own skill would count as noise). 0 takes the
        best mean skill.

    Returns
    -------
    int
        The chosen candidate: the fewest groups among those within the noise; among those, the
        best mean skill (then the first).
    """
    skill = np.asarray(skill, dtype=np.float64)
    sizes = np.asarray(sizes)
    scored = np.isfinite(skill).all(axis=1)
    if not scored.any():
        raise ValueError("no candidate map could be scored in every fold")
    mean = np.where(scored, skill.mean(axis=1) if skill.shape[1] else 0.0, -np.inf)
    best = int(np.argmax(mean))
    diff = skill - skill[best]
    k = skill.shape[1]
    se = diff.std(axis=1, ddof=1) / np.sqrt(k) if k > 1 else np.zeros(len(skill))
    ok = scored & (diff.mean(axis=1) >= -parsimony * se - 1e-12)
    fewest = sizes[ok].min()
    pick = np.flatnonzero(ok & (sizes == fewest))
    return int(pick[np.argmax(mean[pick])])


def comembership(labels: np.ndarray, others: list[np.ndarray]) -> np.ndarray:
    """How much of each item's group recurs in each of ``others``: the mean over the other
    maps of the Jaccard index of the item's two groups (1: the same cells around it in every
    map). Items labelled -1 in ``labels`` get NaN; an item labelled -1 in another map counts 0
    for that map.
    """
    labels = np.asarray(labels)
    out = np.zeros(labels.size)
    keep = labels >= 0
    if not others:
        return np.where(keep, 1.0, np.nan)
    for other in others:
        other = np.asarray(other)
        both = keep & (other >= 0)
        a, b = labels[both], other[both]
        # contingency of the two maps over the items both keep
        na, nb = int(labels[keep].max()) + 1, int(other.max()) + 1
        pair = a * nb + b
        inter = np.bincount(pair, minlength=na * nb)
        size_a = np.bincount(labels[keep], minlength=na)
        size_b = np.bincount(other[other >= 0], minlength=nb)
        union = size_a[a] + size_b[b] - inter[pair]
        jac = np.zeros(labels.size)
        jac[both] = inter[pair] / union
        out += jac
    out /= len(others)
    return np.where(keep, out, np.nan)

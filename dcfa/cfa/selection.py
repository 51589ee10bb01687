"""Choosing a map by cross-validated skill: the pure functions behind :class:`dcfa.RegionsCV`.

* :func:`ols_skill`: the test R^2 of ``LinearRegression()`` on group series, as scikit-learn
  fits it, for one fold.
* :func:`ridge_skill`: the same for ridge on the standardised group series, its penalty by
  leave-one-out on the training rows (``StandardScaler() -> RidgeCV``).
* :data:`REGRESSIONS`: each regression a map can be chosen for, its skill and its estimator.
* :func:`within_noise`: the smallest map whose skill is within the noise of the best one
  (a one-standard-error rule, as glmnet's ``lambda.1se``, with the standard error of the
  *paired* differences over the folds).
* :func:`first_within_noise`: the same, preferring one family of maps to another unless it
  falls out of the noise of the other's best and behind it by more than :data:`LEAST_GAIN`;
  the other family's best map when it does.
* :func:`fold_skill`: a map's mean test R^2 over the folds, its standard error, and whether
  it beats the climatology by more than that.
* :func:`json_scores`: scores as a result store keeps them.
* :func:`warn_if_no_skill`: a :class:`NoSkillWarning` when the map kept predicts no better
  than the climatology.
* :func:`ridge_weights`: each piece's weight per cell in a ridge regression on all cells, from
  which :func:`dcfa.cfa.hierarchy.ward_merges` makes regions of alike weight.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from dcfa._errors import NoSkillWarning, outside_stacklevel
from dcfa.stats.kernels import row_blocks

__all__ = [
    "LEAST_GAIN",
    "NO_SKILL_ADVICE",
    "REGION_ALPHAS",
    "REGRESSIONS",
    "Regression",
    "RIDGE_ALPHAS",
    "FoldSkill",
    "first_within_noise",
    "fold_skill",
    "json_scores",
    "ols_skill",
    "regression",
    "ridge_skill",
    "ridge_weights",
    "scaled_gram",
    "uses_gram",
    "warn_if_no_skill",
    "within_noise",
]

#: the least gain in mean test R^2 over the first family's best map for which
#: :func:`first_within_noise` takes the second family: a gain of under 1 % of the target's
#: variance is not worth a map that no longer keeps each signal in a region of its own
LEAST_GAIN = 0.01

# the Cholesky factor's smallest diagonal over its largest below which the normal equations'
# solution is left to least squares (a condition number of the Gram matrix above 1e8)
_CONDITION = 1e-4


@dataclass(frozen=True)
class FoldSkill:
    """A map's test R^2 over the folds: its ``mean``, the ``se`` of that mean and how many
    folds scored it (``n_folds``)."""

    mean: float
    se: float
    n_folds: int

    @property
    def skilful(self) -> bool:
        """Whether the map beats the climatology's 0 by more than one standard error."""
        return self.mean > self.se


def fold_skill(scores) -> FoldSkill | None:
    """The :class:`FoldSkill` of the finite scores among ``scores`` (one test R^2 per fold);
    None when no fold scored."""
    folds = np.asarray(scores, dtype=np.float64).ravel()
    folds = folds[np.isfinite(folds)]
    if not folds.size:
        return None
    se = folds.std(ddof=1) / np.sqrt(folds.size) if folds.size > 1 else 0.0
    return FoldSkill(float(folds.mean()), float(se), int(folds.size))


def json_scores(values, digits: int | None = 6) -> list:
    """``values`` (scores) as JSON numbers, rounded to ``digits`` decimals, NaN as null."""
    return [
        None if np.isnan(v) else float(v) if digits is None else round(float(v), digits)
        for v in np.asarray(values, dtype=np.float64)
    ]


# what to change when the map kept has no skill: said by the estimators and by the job's summary
NO_SKILL_ADVICE = "Check the target and its lead, or use a longer record"


def warn_if_no_skill(
    who: str,
    candidates: str,
    mean,
    kept,
    chosen: str,
    *,
    hint: str = "",
) -> None:
    """Warn when the map kept does not beat the climatology: the mean of its CV R^2 ``kept``
    (one per fold) is <= 0, or within one standard error of 0 (:func:`fold_skill`). It is
    then the least bad of candidates without skill (every finite mean CV R^2 in ``mean`` is
    <= 0), or within the noise of such maps: not a map of predictors. The selection's own
    scores are those of the best of many maps, and so flatter it: on white-noise targets the
    map kept can score a few thousandths above 0, never out of its noise. ``who`` names the
    estimator, ``candidates`` what was scored ("tolerance", "map"), ``chosen`` the map kept;
    ``hint`` is added to the advice."""
    skill = fold_skill(kept)
    if skill is None or skill.skilful:
        return
    score, se = skill.mean, skill.se
    scored = np.asarray(mean, dtype=np.float64)
    scored = scored[np.isfinite(scored)]
    if (scored <= 0).all():
        what = (
            f"no {candidates} beats the climatology (mean CV R^2 from {scored.min():+.2f} "
            f"to {scored.max():+.2f}); {chosen} is the least bad"
        )
    elif score <= 0:
        what = (
            f"{chosen} does not beat the climatology (mean CV R^2 {score:+.2f}; the best "
            f"{candidates}'s {scored.max():+.2f} is within the noise of it)"
        )
    else:
        what = (
            f"{chosen}'s mean CV R^2 ({score:+.3f}) is within one standard error "
            f"({se:.3f}) of the climatology's 0, and scored as the best of many"
        )
    warnings.warn(
        f"{who}: {what}, not a map of predictors. {NO_SKILL_ADVICE}.{hint}",
        NoSkillWarning,
        stacklevel=outside_stacklevel(),
    )


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
    return _test_r2(y[test], bm + (G[:, test].T - am) @ coef)


def _test_r2(yt: np.ndarray, pred: np.ndarray) -> float:
    """R^2 of ``pred`` on the test rows ``yt``; NaN when ``yt`` is constant."""
    sst = np.sum((yt - yt.mean()) ** 2)
    return float(1.0 - np.sum((yt - pred) ** 2) / sst) if sst > 0 else float("nan")


#: the penalties :func:`ridge_skill` tries on standardised group series (the ENSO
#: comparison's ridge on all cells tries the same)
REGION_ALPHAS = np.logspace(-1, 6, 30)


def ridge_skill(G: np.ndarray, y: np.ndarray, train, test) -> float:
    """R^2 on ``test`` rows of ``make_pipeline(StandardScaler(), RidgeCV(REGION_ALPHAS))``
    fitted on ``train`` rows of ``y`` on the groups ``G`` (groups x samples), as scikit-learn
    fits it: each group standardised on the training rows, the penalty the one of least
    leave-one-out squared error there (the intercept unpenalised), ties to the smallest.

    Ridge keeps every region of a map, shrinking the ones the training years cannot pin
    down, where OLS fits each coefficient in full: a region that carries a little of the
    signal costs OLS more in new years than it brings, and ridge less.
    """
    A, b = G[:, train].T, y[train]
    n = A.shape[0]
    am = A.mean(axis=0)
    var = A.var(axis=0)
    # StandardScaler leaves a column constant to rounding unscaled (its bound)
    eps = np.finfo(np.float64).eps
    sd = np.where(var <= n * eps * var + (n * am * eps) ** 2, 1.0, np.sqrt(var))
    bm = b.mean()
    U, s, Vt = np.linalg.svd((A - am) / sd, full_matrices=False)
    uy = U.T @ (b - bm)
    s2 = s[:, None] ** 2
    shrink = s2 / (s2 + REGION_ALPHAS)  # (components, alphas)
    # leave-one-out residuals of every penalty at once: the hat matrix's diagonal, with the
    # unpenalised intercept's 1/n
    hat = 1.0 / n + (U**2) @ shrink
    loo = ((b - bm)[:, None] - U @ (shrink * uy[:, None])) / (1.0 - hat)
    alpha = REGION_ALPHAS[np.argmin(np.mean(loo**2, axis=0))]
    coef = Vt.T @ (s / (s**2 + alpha) * uy)
    return _test_r2(y[test], bm + ((G[:, test].T - am) / sd) @ coef)


@dataclass(frozen=True)
class Regression:
    """A regression on group series that a map can be chosen for: its test R^2 in one fold
    (``skill(G, y, train, test)``), and the scikit-learn estimator that fits it
    (``estimator()``, unfitted). ``G`` holds each group's mean up to a constant per group
    (the selection centres them), where the estimator sees the means themselves: the skill
    must not move with such a constant (a regression with an intercept)."""

    skill: Callable[..., float]
    estimator: Callable[[], object]


def _ols():
    from sklearn.linear_model import LinearRegression

    return LinearRegression()


def _ridge():
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), RidgeCV(alphas=REGION_ALPHAS))


#: the regressions :class:`dcfa.RegionsCV` can choose its map for (its ``regression``)
REGRESSIONS: dict[str, Regression] = {
    "ols": Regression(ols_skill, _ols),
    "ridge": Regression(ridge_skill, _ridge),
}


def regression(name: str):
    """A new, unfitted scikit-learn estimator of the regression ``name`` of
    :data:`REGRESSIONS`: the one to fit on the region means of a map chosen for it, which
    predicts a DataArray of region means along its samples (:class:`dcfa.LabelledRegressor`).
    """
    from dcfa.labelled import LabelledRegressor

    return LabelledRegressor(REGRESSIONS[name].estimator())


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
    ok = scored & _within(skill, skill[best], parsimony)
    fewest = sizes[ok].min()
    pick = np.flatnonzero(ok & (sizes == fewest))
    return int(pick[np.argmax(mean[pick])])


def first_within_noise(
    first: np.ndarray,
    first_sizes: np.ndarray,
    second: np.ndarray,
    second_sizes: np.ndarray,
    parsimony: float = 1.0,
    least_gain: float = LEAST_GAIN,
) -> tuple[int, int]:
    """:func:`within_noise` among the ``first`` candidates, unless the best of them falls out
    of the noise of the best of the ``second`` and below it by more than ``least_gain``: then
    the best of the second.

    Two families of maps (two merge orders) are not alike. The first is preferred: it has a
    size of its own (the few regions that carry the signal, and a background), which the
    smallest map within the noise finds. The second is taken only where it is clearly more
    skilful than anything the first offers: the first family's best map, not only its
    smallest within the noise, is out of the noise of the second's best, and behind it by
    more than ``least_gain`` in mean skill. A few folds of a few years can make a gain of a
    thousandth look significant; the second family's maps mix the first's regions, so a
    gain that small does not buy them. The second family coarsens one pattern that spans the
    grid, so its skill rises with every region up to its best; with a few folds of a few
    years the noise of that rise is wide, and its smallest map within the noise gives up
    skill that new years show. Its map is its most skilful among the sizes scored (those up
    to a cap).

    Parameters
    ----------
    first, second : ndarray of shape (n_candidates, n_folds)
        Each family's skill; a family never scored is all NaN.
    first_sizes, second_sizes : ndarray of shape (n_candidates,)
        Each candidate's number of groups.
    parsimony : float, default=1.0
    least_gain : float, default=LEAST_GAIN
        The least gain in mean skill of the second family's best map over the first's best
        for the second to be taken.

    Returns
    -------
    (int, int)
        The family (0 or 1) and the candidate in it.
    """
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if not np.isfinite(first).all(axis=1).any():
        return 1, within_noise(second, second_sizes, 0.0)
    pick = within_noise(first, first_sizes, parsimony)
    if np.isfinite(second).all(axis=1).any():
        own_best = within_noise(first, first_sizes, 0.0)
        other_best = within_noise(second, second_sizes, 0.0)
        gain = second[other_best].mean() - first[own_best].mean()
        if gain > least_gain and not _within(first[[own_best]], second[other_best], parsimony)[0]:
            return 1, other_best
    return 0, pick


def _within(skill: np.ndarray, best: np.ndarray, parsimony: float) -> np.ndarray:
    """Which candidates (rows of ``skill``, folds along its columns) are within ``parsimony``
    standard errors of the paired differences from ``best`` (one skill per fold)."""
    diff = skill - best
    k = skill.shape[1]
    se = diff.std(axis=1, ddof=1) / np.sqrt(k) if k > 1 else np.zeros(len(skill))
    return diff.mean(axis=1) >= -parsimony * se - 1e-12


# bytes of the items' sums that ridge_weights scales at a time
_BLOCK_BYTES = 8 << 20

#: ridge penalties tried, relative to the mean eigenvalue of the Gram matrix
RIDGE_ALPHAS = np.logspace(-6, 3, 37)


def scaled_gram(sums: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``Z.T @ Z`` for ``Z = sums / sqrt(size)`` (items x samples), a block of items at a time:
    the Gram matrix of every sample pair, from which :func:`ridge_weights` takes any
    fold's."""
    gram = np.zeros((sums.shape[1], sums.shape[1]))
    for b in row_blocks(sums.shape[0], sums.shape[1], _BLOCK_BYTES):
        Z = sums[b] / np.sqrt(size[b])[:, None]
        gram += Z.T @ Z
    return gram


def uses_gram(n_items: int, n_rows: int) -> bool:
    """Whether :func:`ridge_weights` solves on the ``rows x rows`` Gram matrix (fewer
    training samples than items, as monthly records have) rather than the ``items x items``
    one (daily records of a few thousand samples)."""
    return n_rows <= n_items


def ridge_weights(
    sums: np.ndarray, size: np.ndarray, y: np.ndarray, rows, gram: np.ndarray | None = None
) -> np.ndarray:
    """Each item's weight per cell in a ridge regression of ``y`` on all cells, every cell of
    an item sharing the item's weight, fitted on the samples ``rows``.

    With ``x_i`` the sum of an item's ``n_i`` cells and ``c_i`` the weight of each of its
    cells, the prediction is ``sum_i c_i x_i`` and the penalty ``sum_i n_i c_i^2`` (that of
    ridge on the cells themselves): ridge on ``z_i = x_i / sqrt(n_i)`` with weights
    ``b_i = sqrt(n_i) c_i``, centred on ``rows``. It is solved on the smaller of the two
    Gram matrices (:func:`uses_gram`): the ``rows x rows`` one of the samples (its dual
    form) or the ``items x items`` one; both have the same non-zero eigenvalues, so the
    penalty, chosen by generalised cross-validation among :data:`RIDGE_ALPHAS` times the
    mean eigenvalue of the samples' Gram matrix (so the choice does not depend on the
    field's units), is the same either way.

    Parameters
    ----------
    sums : ndarray of shape (n_items, n_samples)
        Each item's sum of its cells' series.
    size : ndarray of shape (n_items,)
        Cells per item.
    y : ndarray of shape (n_samples,)
    rows : slice or ndarray of int
        The training samples.
    gram : ndarray of shape (n_samples, n_samples), optional
        :func:`scaled_gram` of ``sums`` and ``size``, when several folds share it (read only
        where :func:`uses_gram`).

    Returns
    -------
    ndarray of shape (n_items,)
    """
    rows = np.arange(sums.shape[1])[rows]
    yt = y[rows] - y[rows].mean()
    m = yt.size
    if not uses_gram(sums.shape[0], m):
        return _ridge_on_items(sums, size, yt, rows)
    gram = (scaled_gram(sums, size) if gram is None else gram)[np.ix_(rows, rows)]
    # centred on the rows: H G H with H = I - 11'/m
    gram = gram - gram.mean(axis=0) - gram.mean(axis=1)[:, None] + gram.mean()
    s, U = np.linalg.eigh(gram)
    s = np.clip(s, 0.0, None)
    uy = U.T @ yt
    alpha = _gcv_alpha(s, uy**2, m)
    dual = U @ (uy / (s + alpha))
    dual -= dual.mean()  # a constant shift of the dual is no change of the centred fit
    out = np.empty(sums.shape[0])
    for b in row_blocks(sums.shape[0], m, _BLOCK_BYTES):
        out[b] = (sums[b][:, rows] @ dual) / size[b]
    return out


def _ridge_on_items(sums, size, yt, rows) -> np.ndarray:
    """:func:`ridge_weights` from the ``items x items`` Gram matrix of the centred scaled
    items ``Z``: ``b = (Z Z' + alpha I)^-1 Z y``. The samples' Gram matrix ``Z' Z`` has the
    same non-zero eigenvalues ``s`` and, for those, ``(u' y)^2 = (w' Z y)^2 / s``; its other
    ``m - rank`` eigenvalues are 0 and take the rest of ``|y|^2``."""
    m = yt.size
    Z = sums[:, rows] / np.sqrt(size)[:, None]
    Z -= Z.mean(axis=1, keepdims=True)
    s, W = np.linalg.eigh(Z @ Z.T)
    s = np.clip(s, 0.0, None)
    wzy = W.T @ (Z @ yt)
    nonzero = s > s.max(initial=0.0) * s.size * np.finfo(float).eps
    uy2 = np.zeros(m)
    uy2[: nonzero.sum()] = wzy[nonzero] ** 2 / s[nonzero]
    uy2[nonzero.sum() :] = max(float(yt @ yt) - uy2.sum(), 0.0) / max(m - nonzero.sum(), 1)
    eigen = np.zeros(m)
    eigen[: nonzero.sum()] = s[nonzero]
    alpha = _gcv_alpha(eigen, uy2, m)
    return (W @ (wzy / (s + alpha))) / np.sqrt(size)


def _gcv_alpha(s: np.ndarray, uy2: np.ndarray, m: int) -> float:
    """The penalty among :data:`RIDGE_ALPHAS` times the mean of the samples' Gram
    eigenvalues ``s`` with the least generalised cross-validation error, from ``s`` and the
    target's squared coordinates ``uy2`` on their eigenvectors."""
    best, alpha = np.inf, 1.0
    for a in RIDGE_ALPHAS * max(s.mean(), np.finfo(float).tiny):
        gcv = m * np.sum((a / (s + a)) ** 2 * uy2) / (m - np.sum(s / (s + a))) ** 2
        if gcv < best:
            best, alpha = gcv, a
    return alpha

"""Acceptance rules: does a candidate join the current group?

A rule is a pure function of :class:`PairMoments`, the moments of ``[g, c, y]`` for the
current group aggregate ``g``, every candidate ``c`` of the step (vectorised over candidates)
and the target ``y``, per row segment. It returns a boolean mask over the candidates. The
aggregate of the group enlarged by ``c`` is ``g + c`` (the driver scales candidates so this
holds for mean and sum aggregation alike; every test here is invariant to the scale of a
single regressor).

==============  ==========================================================  ============
rule            aggregate iff                                               reference
==============  ==========================================================  ============
``lincfa``      (r_g - r_c)^2 <(=) 2 (1 - R2_gc)(1 - rho_gc) / (n - 3)       LinCFA Eq. 17
``nonlincfa``   CV-R2(y ~ g, c) - CV-R2(y ~ g + c) <= eps                    NonLinCFA Alg. 1
``genlincfa``   k(|r_g| + |r_c|) + b/2 - eps [k |r_(g+c)| + b (1 + rho)] <= 0  GenLinCFA Alg. 2
``genlincfa`` (simple form)  k(|r_g| + |r_c|) <= eps (1 + rho_gc)             authors' notebooks
==============  ==========================================================  ============

``r`` are correlations with the target, ``rho_gc`` the correlation of ``g`` and ``c``,
``R2_gc`` the R^2 of the OLS of ``y`` on ``(g, c)``, ``k = n / (n - 1)`` (see the Algorithms
page of the documentation).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "PairMoments",
    "SegmentMoments",
    "lincfa_rule",
    "nonlincfa_rule",
    "nonlincfa_margin",
    "nonlincfa_bounded",
    "IntervalBoundRule",
    "genlincfa_rule",
    "genlincfa_margin",
    "genlincfa_bounded",
    "DriftBoundRule",
    "eq17_threshold",
    "RULES",
    "lincfa_bounded",
]

# 1 - rho below this is "the same feature", |r_g - r_c| below this "equally relevant":
# both aggregate (Eq. 17's threshold is -inf or both sides vanish); rounding, not data
_RHO_ONE = 1e-12
_SAME_R = 1e-12


@dataclass(frozen=True)
class PairMoments:
    """Moments of ``[g, c, y]`` for ``J`` candidates ``c`` and ``S`` row sets.

    One row set (all the data) for LinCFA and GenLinCFA; for NonLinCFA the ``K`` folds'
    training rows followed by their test rows.

    Attributes
    ----------
    n : ndarray of shape (S, J)
        Rows in each segment (per candidate, for pairwise-complete statistics).
    mean : ndarray of shape (S, J, 3)
    cross : ndarray of shape (S, J, 3, 3)
        Centred cross-products within each segment.
    """

    n: np.ndarray
    mean: np.ndarray
    cross: np.ndarray

    @property
    def n_candidates(self) -> int:
        return self.cross.shape[1]

    def pooled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(n, mean, cross)`` per candidate, for moments of a single row set."""
        if self.n.shape[0] != 1:
            raise ValueError(f"expected the moments of one row set, got {self.n.shape[0]}")
        return self.n[0].astype(np.float64), self.mean[0], self.cross[0]


@dataclass(frozen=True)
class SegmentMoments:
    """The pieces of :class:`PairMoments` per row segment, as a growing group keeps them.

    ``gg, gy, gm`` (S,): the group aggregate's centred sum of squares, cross-product with
    the target and mean; ``gc, cc, cy, cm`` (S, J): each candidate's cross-product with the
    group, its own sum of squares, cross-product with the target and mean; ``yy, ym`` (S,):
    the target's; ``n``: rows, (S,) or per candidate (S, J).
    """

    n: np.ndarray
    gg: np.ndarray
    gc: np.ndarray
    gy: np.ndarray
    gm: np.ndarray
    cc: np.ndarray
    cy: np.ndarray
    cm: np.ndarray
    yy: np.ndarray
    ym: np.ndarray

    def take(self, idx) -> SegmentMoments:
        """The same moments for the candidates ``idx`` only."""
        n = np.asarray(self.n)
        return replace(
            self,
            n=n[:, idx] if n.ndim == 2 else n,
            **{key: getattr(self, key)[:, idx] for key in ("gc", "cc", "cy", "cm")},
        )

    def pair_moments(self) -> PairMoments:
        """The moments of ``[g, c, y]`` per segment and candidate."""
        S, J = self.gc.shape
        n = np.asarray(self.n, dtype=np.float64)
        n = np.broadcast_to(n[:, None] if n.ndim == 1 else n, (S, J))
        cross = np.empty((S, J, 3, 3))
        cross[:, :, 0, 0] = self.gg[:, None]
        cross[:, :, 0, 1] = cross[:, :, 1, 0] = self.gc
        cross[:, :, 0, 2] = cross[:, :, 2, 0] = self.gy[:, None]
        cross[:, :, 1, 1] = self.cc
        cross[:, :, 1, 2] = cross[:, :, 2, 1] = self.cy
        cross[:, :, 2, 2] = self.yy[:, None]
        mean = np.empty((S, J, 3))
        mean[:, :, 0] = self.gm[:, None]
        mean[:, :, 1] = self.cm
        mean[:, :, 2] = self.ym[:, None]
        return PairMoments(n=n, mean=mean, cross=cross)


def correlation(cross, ss_a, ss_b) -> np.ndarray:
    """``cross / sqrt(ss_a ss_b)`` clipped to [-1, 1]: a correlation from a centred
    cross-product and two centred sums of squares; 0 where either vanishes (undefined)."""
    den = np.sqrt(np.multiply(ss_a, ss_b, dtype=np.float64))
    if den.shape != np.shape(cross):  # the partition's many small calls skip the broadcast
        den = np.broadcast_to(den, np.broadcast_shapes(np.shape(cross), den.shape))
    r = np.divide(cross, den, out=np.zeros(den.shape), where=den > 0)
    return np.clip(r, -1.0, 1.0, out=r)


def _corr(cross: np.ndarray, a: int, b: int) -> np.ndarray:
    """Correlation of columns ``a`` and ``b`` of stacked 3x3 moments; 0 where undefined."""
    return correlation(cross[..., a, b], cross[..., a, a], cross[..., b, b])


def _union(cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variance-like and target cross-product of ``u = g + c`` from the 3x3 moments."""
    uu = cross[..., 0, 0] + 2 * cross[..., 0, 1] + cross[..., 1, 1]
    uy = cross[..., 0, 2] + cross[..., 1, 2]
    return uu, uy


############################################################################################
# LinCFA


def lincfa_rule(pm: PairMoments, *, strict: bool = True) -> np.ndarray:
    """LinCFA's test (journal Eq. 17 with the bivariate OLS plug-ins), in correlations.

    ``rho_gc >(=) 1 - 2 s^2 / ((n - 1)(w_g - w_c)^2)`` with ``w`` and ``s^2 = RSS/(n - 3)`` of the
    OLS of ``y`` on the standardised pair is, exactly (the Algorithms page, section "LinCFA"),
    ``(r_g - r_c)^2 <(=) 2 (1 - R2_gc)(1 - rho_gc) / (n - 3)``.
    ``strict`` is the journal's ``>`` (the 2021 preprint and the authors' code use ``>=``).
    Candidates with ``r_g == r_c`` or ``rho_gc == 1`` always aggregate.
    """
    n, _, cross = pm.pooled()
    rho = _corr(cross, 0, 1)
    rg = _corr(cross, 0, 2)
    rc = _corr(cross, 1, 2)
    one_minus_rho = 1.0 - rho
    den = (1.0 - rho) * (1.0 + rho)
    r2 = np.divide(
        rg * rg + rc * rc - 2.0 * rho * rg * rc, den, out=np.ones_like(den), where=den > 0
    )
    np.minimum(r2, 1.0, out=r2)
    lhs = (rg - rc) ** 2
    rhs = 2.0 * (1.0 - r2) * one_minus_rho / (n - 3.0)
    passed = lhs < rhs if strict else lhs <= rhs
    return passed | (np.abs(rg - rc) <= _SAME_R) | (one_minus_rho <= _RHO_ONE)


def eq17_threshold(w_i, w_j, sigma2, n):
    """The LinCFA threshold of Eq. 17: ``1 - 2 sigma^2 / ((n - 1)(w_i - w_j)^2)``.

    With the true coefficients and noise variance this is the paper's "theoretical"
    threshold (Tables 1, 6, 7); ``-inf`` when ``w_i == w_j``.
    """
    w_i, w_j = np.asarray(w_i, dtype=float), np.asarray(w_j, dtype=float)
    with np.errstate(divide="ignore"):
        return 1.0 - 2.0 * sigma2 / ((n - 1.0) * (w_i - w_j) ** 2)


############################################################################################
# NonLinCFA


def nonlincfa_rule(pm: PairMoments, *, eps: float) -> np.ndarray:
    """NonLinCFA's test: the cross-validated R^2 gain of keeping ``c`` apart is at most ``eps``
    (:func:`nonlincfa_margin` ``<= 0``)."""
    return nonlincfa_margin(pm, eps=eps) <= 0.0


def nonlincfa_margin(pm: PairMoments, *, eps: float) -> np.ndarray:
    """The cross-validated R^2 gain of keeping ``c`` apart, minus ``eps``.

    ``pm`` holds ``2 K`` moment sets: the ``K`` folds' training rows, then their test rows.
    For each fold both OLS models (``y ~ g + c`` as two regressors, and ``y ~ (g + c)`` as one)
    are solved from the training moments and scored on the test moments exactly as
    ``sklearn.model_selection.cross_val_score(LinearRegression(), ..., scoring="r2")`` would,
    with no refitting; all folds at once.
    """
    k = pm.n.shape[0] // 2
    tr = (pm.n[:k], pm.mean[:k], pm.cross[:k])
    te = (pm.n[k:], pm.mean[k:], pm.cross[k:])
    gain = _cv_r2_bivariate(tr, te) - _cv_r2_univariate(tr, te)
    return gain.mean(axis=0) - eps


def _cv_r2_univariate(tr, te) -> np.ndarray:
    _, m_tr, c_tr = tr
    n_te, m_te, c_te = te
    uu, uy = _union(c_tr)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(uu > 0, uy / uu, 0.0)
    intercept = m_tr[..., 2] - slope * (m_tr[..., 0] + m_tr[..., 1])
    uu_te, uy_te = _union(c_te)
    resid_mean = m_te[..., 2] - slope * (m_te[..., 0] + m_te[..., 1]) - intercept
    sse = c_te[..., 2, 2] - 2 * slope * uy_te + slope * slope * uu_te + n_te * resid_mean**2
    return _r2(sse, c_te[..., 2, 2])


def _cv_r2_bivariate(tr, te) -> np.ndarray:
    _, m_tr, c_tr = tr
    n_te, m_te, c_te = te
    w = _solve2(c_tr[..., :2, :2], c_tr[..., :2, 2])
    intercept = m_tr[..., 2] - np.einsum("...k,...k->...", w, m_tr[..., :2])
    resid_mean = m_te[..., 2] - np.einsum("...k,...k->...", w, m_te[..., :2]) - intercept
    quad = np.einsum("...k,...kl,...l->...", w, c_te[..., :2, :2], w)
    sse = c_te[..., 2, 2] - 2 * np.einsum("...k,...k->...", w, c_te[..., :2, 2]) + quad
    sse = sse + n_te * resid_mean**2
    return _r2(sse, c_te[..., 2, 2])


def _r2(sse: np.ndarray, sst: np.ndarray) -> np.ndarray:
    """``1 - sse / sst`` per fold; on a fold where y is constant (``sst`` is rounding noise
    next to the other folds') 1 if the fit is perfect, else 0, as sklearn's ``r2_score``."""
    varies = sst > 1e-12 * sst.max(axis=0, keepdims=True)
    ratio = np.divide(sse, sst, out=np.zeros_like(sse), where=varies)
    return np.where(varies, 1.0 - ratio, np.where(sse <= 0, 1.0, 0.0))


def _solve2(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched 2x2 least squares; minimum-norm (as ``lstsq``) where ``A`` is singular."""
    det = A[..., 0, 0] * A[..., 1, 1] - A[..., 0, 1] * A[..., 1, 0]
    ok = np.abs(det) > 1e-12 * np.abs(A[..., 0, 0] * A[..., 1, 1])
    w = np.empty_like(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        w[..., 0] = (A[..., 1, 1] * b[..., 0] - A[..., 0, 1] * b[..., 1]) / det
        w[..., 1] = (A[..., 0, 0] * b[..., 1] - A[..., 1, 0] * b[..., 0]) / det
    if not ok.all():
        bad = ~ok
        w[bad] = np.einsum("jkl,jl->jk", np.linalg.pinv(A[bad]), b[bad])
    return w


############################################################################################
# GenLinCFA


def genlincfa_rule(
    pm: PairMoments, *, eps: float, curvature: float = 1.0, form: str = "full"
) -> np.ndarray:
    """GenLinCFA's moment bound (Algorithm 2, Eq. 15), no model fitted.

    ``form="full"``: ``k(|r_g| + |r_c|) + b/2 - eps [k |r_(g+c)| + b (1 + rho_gc)] <= 0``;
    ``form="simple"``: ``k(|r_g| + |r_c|) <= eps (1 + rho_gc)`` (the real-data notebooks).
    ``b = curvature`` is ``b''(0)`` of the GLM family and ``k = n / (n - 1)``.
    """
    return genlincfa_margin(pm, eps=eps, curvature=curvature, form=form) <= 0.0


def genlincfa_margin(
    pm: PairMoments, *, eps: float, curvature: float = 1.0, form: str = "full"
) -> np.ndarray:
    """The left-hand side of :func:`genlincfa_rule` minus its right-hand side: a candidate
    joins iff it is ``<= 0``."""
    n, _, cross = pm.pooled()
    kappa = n / (n - 1.0)
    rho = _corr(cross, 0, 1)
    rgc = np.abs(_corr(cross, 0, 2))
    rgc += np.abs(_corr(cross, 1, 2))  # |r_g| + |r_c|
    if form == "simple":
        return kappa * rgc - eps * (1.0 + rho)
    uu, uy = _union(cross)
    den = np.sqrt(uu * cross[:, 2, 2])
    ru = np.abs(np.divide(uy, den, out=np.zeros_like(den), where=den > 0))
    return kappa * rgc + curvature / 2.0 - eps * (kappa * ru + curvature * (1.0 + rho))


@dataclass(frozen=True)
class DriftBoundRule:
    """A rule ``margin(pm) <= 0`` that can bound a candidate's margin without a test.

    ``lower_bound(n, gg, gy, yy, cc, cy, rho0, turned)`` is the smallest margin a candidate
    can have when the group's sum has variance-like ``gg`` and target cross-product ``gy``
    (the target's ``yy``; all centred over the ``n`` rows), the candidate's are ``cc`` and
    ``cy``, and its correlation with the group, ``rho0`` when last tested, has moved by at
    most ``turned`` (the angle the group's sum has turned through since). The driver skips a
    candidate while it is above 0 (:class:`dcfa.cfa.skips.DriftSkips`). Calling it is the rule.
    """

    margin: object  # PairMoments -> ndarray of margins
    lower_bound: object

    def __call__(self, pm: PairMoments) -> np.ndarray:
        return self.margin(pm) <= 0.0


@dataclass(frozen=True)
class IntervalBoundRule:
    """A rule ``margin(pm) <= 0`` that bounds a candidate's margin over the group states
    within a relative drift of the one tested.

    ``bounds(seg, parts, rel)`` takes the :class:`SegmentMoments` of a test, the row sets
    the rule reads as a 0/1 matrix over segments, and drifts ``rel`` (L,); it returns
    ``(lo, hi)`` of shape (L, J) (:mod:`dcfa.cfa.bounds`). The driver keeps a verdict while
    the group stays within the largest drift whose bounds exclude 0
    (:class:`dcfa.cfa.skips.Allowances`). Calling it is the rule.
    """

    margin: object  # PairMoments -> ndarray of margins
    bounds: object

    def __call__(self, pm: PairMoments) -> np.ndarray:
        return self.margin(pm) <= 0.0


def nonlincfa_bounded(eps: float) -> IntervalBoundRule:
    """:func:`nonlincfa_rule` with the bounds of :func:`dcfa.cfa.bounds.nonlincfa_margin_bounds`."""
    from functools import partial

    from dcfa.cfa.bounds import nonlincfa_margin_bounds

    return IntervalBoundRule(
        partial(nonlincfa_margin, eps=eps), partial(nonlincfa_margin_bounds, eps=eps)
    )


def genlincfa_bounded(eps: float, curvature: float = 1.0, form: str = "full") -> DriftBoundRule:
    """:func:`genlincfa_rule` with the lower bound of its margin (see :class:`DriftBoundRule`)."""
    from functools import partial

    options = {"eps": eps, "curvature": curvature, "form": form}
    return DriftBoundRule(
        partial(genlincfa_margin, **options), partial(_genlincfa_lower_bound, **options)
    )


def _genlincfa_lower_bound(
    n, gg, gy, yy, cc, cy, rho0, turned, *, eps: float, curvature: float, form: str
) -> np.ndarray:
    """The margin of :func:`genlincfa_margin` is ``k(|r_g| + |r_c|) + b/2 - eps k |r_u|
    - eps b (1 + rho)``: ``r_g`` and ``r_c`` are known, ``rho`` lies within ``turned`` of
    ``rho0``, and ``|r_u| = |gy + cy| / sqrt(yy (gg + 2 rho sqrt(gg cc) + cc))`` is largest
    at the smallest ``rho`` (at most 1, a correlation). Each term at its worst end."""
    kappa = n / (n - 1.0)
    rg = abs(gy) / np.sqrt(gg * yy) if gg * yy > 0 else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rc = np.where(cc * yy > 0, np.abs(cy) / np.sqrt(cc * yy), 0.0)
        hi = np.minimum(rho0 + turned, 1.0)
        if form == "simple":
            return kappa * (rg + rc) - eps * (1.0 + hi)
        lo = np.maximum(rho0 - turned, -1.0)
        uu = (gg + 2.0 * lo * np.sqrt(gg * cc) + cc) * yy
        # |r_u| at its largest: 1 where the union may vanish
        ru = np.where(uu > 0, np.minimum(np.abs(gy + cy) / np.sqrt(uu), 1.0), 1.0)
    return kappa * (rg + rc) + curvature / 2.0 - eps * (kappa * ru + curvature * (1.0 + hi))


def lincfa_bounded(strict: bool = True):
    """:func:`lincfa_rule` with its comparison bound (it needs no bounds on the margin)."""
    from functools import partial

    return partial(lincfa_rule, strict=strict)


#: Every rule by name, as a function of its parameters giving the bound rule the driver
#: applies; a new rule is its functions above and one entry here, applied by an estimator
#: whose ``_accept`` returns it (as LinCFA's does).
RULES = {
    "lincfa": lincfa_bounded,
    "nonlincfa": nonlincfa_bounded,
    "genlincfa": genlincfa_bounded,
}

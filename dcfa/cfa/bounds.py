"""Bounds of NonLinCFA's margin while a group grows: how long a verdict provably holds.

With ``scan="restart"`` every acceptance rescans the group's frontier, and a large group's
frontier is mostly cells that fail (or pass) every time: retesting them is the cost of a
fit at climate resolution. A group changes little per member once it is large, so a verdict
can be kept until the group has moved enough to change it. This module bounds how far.

Between the test of a candidate ``c`` and now, the group's sum ``g`` gained members ``x_j``.
In each row segment ``s`` its centred series moved by at most ``A_s = sum_j ||x_j,s||`` and
its mean, relative to a constant common to all segments (a test does not see such a
constant), by at most ``B_s = sum_j |m_j,s - m_j|`` (``m_j`` the member's mean over all rows).
If ``A_s <= r sqrt(gg_s)`` and ``B_s <= r sqrt(gg_s / n_s)`` for a relative drift ``r``,
then by Cauchy-Schwarz every moment of the group that the test reads lies in an interval:
``gg_s (1 +- r)^2``, ``gc_s +- A_s sqrt(cc_s)``, ``gy_s +- A_s sqrt(yy_s)``, its segment means
within ``B_s``. :func:`nonlincfa_margin_bounds` carries those intervals through the rule's
own formulas (interval arithmetic: merging segments into folds, the two OLS fits per fold,
their test-fold R^2), so the margin at any such state lies in ``[lo, hi]``. A candidate
whose ``lo > 0`` still fails and one whose ``hi < 0`` still passes, whatever joined: the
driver (:class:`dcfa.cfa.skips.Allowances`) keeps its verdict without a test until the
group's drift exceeds the largest ``r`` that is safe. The bound is loose (intervals forget
that the moments move together), but a large group's drift per member is small, so a
verdict lasts many steps; the partition is exactly the one of testing everything.

Everything here is NumPy on small arrays, vectorised over candidates and drift levels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nonlincfa_margin_bounds"]

_INF = np.inf
# the two-regressor fit is bounded only where its 2x2 system is this far from singular
# (relative determinant): there the rule's rounding is far below the margins kept
_CONDITION = 1e-4

# An interval is a pair (lo, hi) of arrays (a tuple: on a step's few candidates NumPy's
# elementwise calls are cheap and stacking is not). Unbounded ends are -inf / inf; a NaN
# end (inf - inf) means "unknown" and makes the margin unbounded.


def _interval(centre, radius):
    return (centre - radius, centre + radius)


def _add(a, b):
    return (a[0] + b[0], a[1] + b[1])


def _sub(a, b):
    return (a[0] - b[1], a[1] - b[0])


def _shift(a, k):
    """``a + k`` for an exact ``k``."""
    return (a[0] + k, a[1] + k)


def _times(k, a):
    """``k * a`` for an exact ``k >= 0``."""
    return (k * a[0], k * a[1])


def _scale(k, a):
    """``k * a`` for an exact ``k`` of any sign."""
    lo, hi = k * a[0], k * a[1]
    return (np.minimum(lo, hi), np.maximum(lo, hi))


def _mul(a, b):
    p = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return (np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3])),
            np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3])))  # fmt: skip


def _square(a):
    lo2, hi2 = a[0] * a[0], a[1] * a[1]
    straddles = (a[0] <= 0) & (a[1] >= 0)
    return (np.where(straddles, 0.0, np.minimum(lo2, hi2)), np.maximum(lo2, hi2))


def _div_positive(a, b, floor):
    """``a / b`` where ``b`` is known to exceed ``floor`` (>= 0); unbounded elsewhere."""
    ok = b[0] > floor
    lo, hi = _mul(a, (1.0 / np.where(ok, b[1], 1.0), 1.0 / np.where(ok, b[0], 1.0)))
    return (np.where(ok, lo, -_INF), np.where(ok, hi, _INF))


def nonlincfa_margin_bounds(seg, parts: np.ndarray, *, eps: float, rel: np.ndarray):
    """Bounds of NonLinCFA's margin (:func:`dcfa.cfa.rules.nonlincfa_margin`) for every
    candidate and every relative drift ``rel`` of the group (module docstring).

    Parameters
    ----------
    seg : SegmentMoments
        Per row segment: the group's ``gg, gy, gm`` (S,), the candidates' ``gc, cc, cy, cm``
        (S, J), the target's ``yy, ym`` (S,), the rows ``n`` (S,).
    parts : ndarray of shape (2K, S)
        Which segments make up each row set the rule reads (0/1): the ``K`` folds' training
        rows, then their test rows.
    eps : float
        The rule's tolerance.
    rel : ndarray of shape (L,)
        Relative drifts ``r >= 0``.

    Returns
    -------
    lo, hi : ndarrays of shape (L, J)
        The margin lies in ``[lo, hi]`` at every group state within drift ``r``; at ``r = 0``
        both are the margin itself (up to rounding).
    """
    with np.errstate(all="ignore"):  # infinite ends are expected; NaN ones are unbounded
        lo, hi = _bounds(seg, np.asarray(parts, dtype=np.float64), eps, rel)
    return np.where(np.isnan(lo), -_INF, lo), np.where(np.isnan(hi), _INF, hi)


def _bounds(seg, A, eps, rel):
    n = np.asarray(seg.n, dtype=np.float64)
    r = np.asarray(rel, dtype=np.float64)[:, None, None]  # (L, 1, 1)
    gg = seg.gg[None, :, None]
    a = r * np.sqrt(gg)  # (L, S, 1): the centred series' drift
    b = r[:, :, 0] * np.sqrt(seg.gg / n)[None, :]  # (L, S): the segment means' drift

    # the group's per-segment moments as intervals
    GG = (gg * np.maximum(1.0 - r, 0.0) ** 2, gg * (1.0 + r) ** 2)  # (L, S, 1)
    GC = _interval(seg.gc[None], a * np.sqrt(seg.cc)[None])  # (L, S, J)
    GY = _interval(seg.gy[None, :, None], a * np.sqrt(seg.yy)[None, :, None])  # (L, S, 1)
    gm = seg.gm - n @ seg.gm / n.sum()  # relative to the common constant

    # merge segments into row sets: centred sums plus the spread of segment means
    n_p = A @ n
    W = A * n[None, :] / n_p[:, None]  # (P, S): weights of the pooled mean
    dev = gm[None, :] - (W @ gm)[:, None]  # (P, S): segment mean - row set mean, group
    # |delta m_s - sum_t W_pt delta m_t| <= b_s (1 - W_ps) + sum_{t != s} W_pt b_t
    rad = b[:, None, :] * (1.0 - 2.0 * W[None]) + (b @ W.T)[:, :, None]  # (L, P, S)
    DEV = _interval(dev[None], rad)
    e = seg.cm[None, :, :] - (W @ seg.cm)[:, None, :]  # (P, S, J): candidates, exact
    f = seg.ym[None, :] - (W @ seg.ym)[:, None]  # (P, S): target, exact
    An = A * n[None, :]  # (P, S)
    # sums over a row set's segments with exact nonnegative weights keep the ends apart
    sq, de, df = (
        _square(DEV),
        _scale(e[None], (DEV[0][..., None], DEV[1][..., None])),
        _scale(f[None], DEV),
    )
    G = tuple(A @ GG[i] + (An * sq[i]).sum(axis=-1)[..., None] for i in (0, 1))  # (L, P, 1)
    GCp = tuple(A @ GC[i] + (An[..., None] * de[i]).sum(axis=-2) for i in (0, 1))  # (L, P, J)
    GYp = tuple(A @ GY[i] + (An * df[i]).sum(axis=-1)[..., None] for i in (0, 1))  # (L, P, 1)
    CC = A @ seg.cc + (An[..., None] * e * e).sum(axis=1)  # (P, J)
    CY = A @ seg.cy + (An[..., None] * e * f[:, :, None]).sum(axis=1)
    YY = A @ seg.yy + (An * f * f).sum(axis=1)  # (P,)

    K = A.shape[0] // 2
    tr, te = slice(0, K), slice(K, 2 * K)
    # test minus training means (only differences enter: the intercept absorbs the rest)
    Wd = W[te] - W[tr]  # (K, S)
    centre = (Wd @ gm)[None, :, None]
    radius = (b @ np.abs(Wd).T)[:, :, None]  # (L, K, 1)
    dmg = _interval(centre, radius)
    dmc = (Wd @ seg.cm)[None]  # (1, K, J), exact
    dmy = (Wd @ seg.ym)[None, :, None]
    n_te = n_p[te][None, :, None]

    def rows(x, s):
        return (x[0][:, s], x[1][:, s])

    g_tr, gc_tr, gy_tr = rows(G, tr), rows(GCp, tr), rows(GYp, tr)
    g_te, gc_te, gy_te = rows(G, te), rows(GCp, te), rows(GYp, te)
    cc_tr, cy_tr, cc_te, cy_te = CC[tr][None], CY[tr][None], CC[te][None], CY[te][None]
    yy_te = YY[te][None, :, None]

    # sse_uni - sse_biv, per fold: the target's sum of squares cancels
    # y ~ (g + c): one regressor
    uu = _shift(_add(g_tr, _times(2.0, gc_tr)), cc_tr)
    slope = _div_positive(_shift(gy_tr, cy_tr), uu, 0.0)
    uu_te = _shift(_add(g_te, _times(2.0, gc_te)), cc_te)
    resid = _sub((dmy, dmy), _mul(slope, _shift(dmg, dmc)))
    uni = _sub(
        _add(_mul(_square(slope), uu_te), _times(n_te, _square(resid))),
        _times(2.0, _mul(slope, _shift(gy_te, cy_te))),
    )
    # y ~ g + c: two regressors by Cramer's rule, only where well conditioned (elsewhere
    # unbounded: the rule's own solve, and its rounding, take over)
    det = _sub(_times(cc_tr, g_tr), _square(gc_tr))
    floor = _CONDITION * g_tr[1] * cc_tr
    w0 = _div_positive(_sub(_times(cc_tr, gy_tr), _scale(cy_tr, gc_tr)), det, floor)
    w1 = _div_positive(_sub(_scale(cy_tr, g_tr), _mul(gc_tr, gy_tr)), det, floor)
    resid = _sub(_sub((dmy, dmy), _mul(w0, dmg)), _scale(dmc, w1))
    quad = _add(
        _add(_mul(_square(w0), g_te), _times(2.0, _mul(_mul(w0, w1), gc_te))),
        _times(cc_te, _square(w1)),
    )
    fit = _add(_mul(w0, gy_te), _scale(cy_te, w1))
    biv = _sub(_add(quad, _times(n_te, _square(resid))), _times(2.0, fit))
    # R2_biv - R2_uni = (sse_uni - sse_biv) / sst
    gain = _sub(uni, biv)
    lo = (gain[0] / yy_te).mean(axis=1) - eps  # a NaN fold: unbounded (the caller)
    hi = (gain[1] / yy_te).mean(axis=1) - eps
    # a fold where y hardly varies takes another branch in the rule (sklearn's r2_score)
    if not np.all(YY[te] > 1e-12 * YY[te].max()):
        lo[:], hi[:] = -_INF, _INF
    return lo, hi

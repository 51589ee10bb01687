"""Which candidates a growing group need not test again: verdicts that provably hold.

With ``scan="restart"`` every acceptance rescans the group's frontier, and a large group's
frontier is mostly cells whose verdict does not change from one step to the next. Two ways of
knowing that without a test, each for the rules that give the bound it needs:

:class:`DriftSkips`
    GenLinCFA (:class:`dcfa.cfa.rules.DriftBoundRule`): the smallest margin a candidate can
    have, from the angle the group's sum has turned since its test, checked at every step.
:class:`Allowances`
    NonLinCFA (:class:`dcfa.cfa.rules.IntervalBoundRule`): at its test, how far the group may
    drift before the verdict can change (:mod:`dcfa.cfa.bounds`), checked by one comparison.

Both keep only certain verdicts: the loop (:mod:`dcfa.cfa.sequential`) gives the partition of
testing every candidate, with fewer tests.
"""

from __future__ import annotations

import numpy as np


class DriftSkips:
    """Which candidates a growing group need not test again (rules with a drift bound).

    Between two tests of a candidate ``c`` the group's sum ``s`` changes; what a test reads of
    ``s`` alone (its variance, its cross-product with the target) is known exactly at every
    step, and only the correlation ``rho`` of ``s`` and ``c`` is not. That moves by at most the
    angle ``s`` has turned through since, the sum of the angles between ``s`` and ``s + x_j``
    over the members ``x_j`` joined (each exact from ``x_j``'s own test). The rule's
    ``lower_bound`` turns that into the smallest margin the candidate can have now: while it
    is above 0 the candidate still fails and is not tested. Skipping only what provably fails
    keeps the partition exactly that of testing everything (:class:`dcfa.cfa.rules.DriftBoundRule`).
    """

    TOL = 1e-9  # margins this close to 0 are always retested (rounding)

    def __init__(self, n_features: int, accept):
        self.accept = accept
        self.group = np.full(n_features, -1, dtype=np.int64)  # which group tested it
        self.rho = np.zeros(n_features)  # its correlation with the group then
        self.turn = np.zeros(n_features)  # the group's turning angle then
        self.gc = np.zeros(n_features)
        self.cc = np.zeros(n_features)
        self.cy = np.zeros(n_features)
        self.serial = -1

    def open(self) -> None:
        self.serial += 1
        self.turned = 0.0
        self.state = None  # (n, gg, gy, yy) of the group now, from its last test

    def test(self, group, cand: np.ndarray) -> np.ndarray:
        pm = group.pair_moments(cand)
        margin = self.accept.margin(pm)
        if pm.n.shape[0] == 1 and cand.size:  # one row set: the bound applies
            x = pm.cross[0]
            self.state = (
                float(pm.n[0, 0]),
                float(x[0, 0, 0]),
                float(x[0, 0, 2]),
                float(x[0, 2, 2]),
            )
            self.rho[cand] = _cosine(x[:, 0, 1], x[:, 0, 0] * x[:, 1, 1])
            self.gc[cand] = x[:, 0, 1]
            self.cc[cand] = x[:, 1, 1]
            self.cy[cand] = x[:, 1, 2]
            self.group[cand] = self.serial
            self.turn[cand] = self.turned
        return margin <= 0.0

    def split(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``cand`` without the candidates that still provably fail, and no standing pass
        (the interface of :meth:`Allowances.split`)."""
        return self._keep(cand), cand[:0]

    def _keep(self, cand: np.ndarray) -> np.ndarray:
        if self.state is None:
            return cand
        known = self.group[cand] == self.serial
        if not known.any():
            return cand
        c = cand[known]
        n, gg, gy, yy = self.state
        lower = self.accept.lower_bound(
            n, gg, gy, yy, self.cc[c], self.cy[c], self.rho[c], self.turned - self.turn[c]
        )
        fails = np.zeros(cand.size, dtype=bool)
        fails[known] = lower > self.TOL
        return cand[~fails]

    def moved(self, j: int) -> None:
        """``j`` joined (tested at this step, in this state): the group's sum turns and grows."""
        if self.state is None or self.group[j] != self.serial:
            self.serial += 1  # nothing known of j: forget every verdict of this group
            self.state = None
            return
        n, gg, gy, yy = self.state
        gc, cc = self.gc[j], self.cc[j]
        root = np.sqrt(gg)
        ortho = np.sqrt(max(cc - gc * gc / gg, 0.0)) if gg > 0 else np.inf
        self.turned += float(np.arctan2(ortho, root + gc / root)) if gg > 0 else np.pi
        self.state = (n, gg + 2.0 * gc + cc, gy + self.cy[j], yy)


class Allowances:
    """Verdicts a growing group keeps without a test (rules with interval bounds).

    A test also bounds the candidate's margin over every state of the group within a
    relative drift ``r`` of the tested one (:mod:`dcfa.cfa.bounds`), for a few ``r`` measured
    in typical members' steps. The largest ``r`` whose bounds exclude 0 becomes the
    candidate's allowance: how much more the group's drift sums may grow before the verdict
    must be tested again. Until then a candidate that failed is skipped and one that passed
    is taken without a test when its turn comes. Only certain verdicts are kept, so the
    partition is exactly that of testing everything.

    The drift sums are kept as two numbers, each member adding its largest step over the
    segments (an upper bound of every segment's sum), and an allowance is ``r`` times the
    group's smallest segment scale: one comparison per candidate and step.
    """

    TOL = 1e-9  # margins this close to 0 are always retested (rounding)
    SURE = 1e-6  # a margin this far from 0 has the bound's sign (its rounding is far below)
    STEPS = 4.0 ** np.arange(6)  # allowances tried, in typical members' drift: 1 ... 1024
    WIDEST = 0.25  # beyond this relative drift the bounds are too loose to keep anything

    def __init__(self, basis, accept):
        D = basis.n_features
        self.basis = basis
        self.accept = accept
        a, b = basis.member_drift()  # (S, D)
        self.step_a, self.step_b = a.max(axis=0), b.max(axis=0)
        self.typical_a, self.typical_b = np.median(self.step_a), np.median(self.step_b)
        self.group = np.full(D, -1, dtype=np.int64)  # which group holds a verdict on it
        self.passes = np.zeros(D, dtype=bool)
        self.limit_a = np.zeros(D)  # drift sums up to which the verdict holds
        self.limit_b = np.zeros(D)
        self.serial = -1

    def open(self) -> None:
        self.serial += 1
        self.drift_a = self.drift_b = 0.0

    def moved(self, j: int) -> None:
        self.drift_a += self.step_a[j]
        self.drift_b += self.step_b[j]

    def split(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``cand`` (in order) without the standing failures, cut at the first standing
        pass: the candidates to test before it, and that pass (length 0 or 1). The first of
        the former that passes is the step's member, else the latter."""
        held = (
            (self.group[cand] == self.serial)
            & (self.limit_a[cand] >= self.drift_a)
            & (self.limit_b[cand] >= self.drift_b)
        )
        fails = held & ~self.passes[cand]
        live, known = cand[~fails], held[~fails]
        first = int(np.argmax(known)) if known.any() else live.size
        return live[:first], live[first : first + 1]

    def test(self, group, cand: np.ndarray) -> np.ndarray:
        seg = group.segment_moments(cand)
        scale_a = np.sqrt(np.min(seg.gg))  # the group's smallest segment scales
        scale_b = np.sqrt(np.min(seg.gg / seg.n))
        rel = self._drifts(scale_a, scale_b)
        lo, hi = self.accept.bounds(seg, self.basis.A, rel=rel)
        # at no drift the bounds are the margin: its sign is the verdict unless rounding
        # could flip it (or the bound gave up); those candidates get the rule itself
        passed = hi[0] < 0.0
        unsure = ~(np.minimum(np.abs(lo[0]), np.abs(hi[0])) > self.SURE) | (passed != (lo[0] < 0))
        if unsure.any():
            pm = self.basis.parts_moments(seg.take(unsure).pair_moments())
            passed[unsure] = self.accept.margin(pm) <= 0.0
        self.group[cand] = -1
        if rel.size > 1:
            # intervals widen with r: the safe drifts are a prefix of ``rel``
            safe = np.where(passed, hi[1:] < -self.TOL, lo[1:] > self.TOL) & ~unsure
            n_safe = np.cumprod(safe, axis=0).sum(axis=0)
            kept = n_safe > 0
            c = cand[kept]
            r = rel[n_safe[kept]]
            self.group[c] = self.serial
            self.passes[c] = passed[kept]
            self.limit_a[c] = self.drift_a + r * scale_a
            self.limit_b[c] = self.drift_b + r * scale_b
        return passed

    def _drifts(self, scale_a: float, scale_b: float) -> np.ndarray:
        """0, then the relative drifts to try: multiples of a typical member's step, up to
        WIDEST (none while the group is small)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            step = max(self.typical_a / scale_a, self.typical_b / scale_b)
        rel = step * self.STEPS if np.isfinite(step) else self.STEPS[:0]
        return np.concatenate(([0.0], rel[(rel > 0) & (rel <= self.WIDEST)]))


def _cosine(a: np.ndarray, squared_norms: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(squared_norms > 0, a / np.sqrt(squared_norms), 0.0)

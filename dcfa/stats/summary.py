"""Per-column statistics and the exclusion rules shared by every kind of moments value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

# A column whose standard deviation is below this fraction of its mean magnitude is
# constant up to float64 rounding (a truly constant column gives ~1e-16 relative).
_CONSTANT_RTOL = 1e-10

# The magnitudes a column's values may have: the rules multiply two columns' sums of squares
# (about n^2 x^4), which leave float64's range (1e-308 .. 1.8e308) for x beyond about 1e+-75,
# and the partition then changes with the units. Columns outside are excluded, by name.
SCALE_RANGE = (1e-60, 1e60)


class Exclusion(str):
    """Why a feature is excluded: the message (a ``str``), and a stable ``code`` that
    callers match instead of the wording.

    Codes: ``"all-missing"``, ``"gappy"`` (some values missing, ``missing="exclude"``),
    ``"too-few"`` (fewer than 2 observed values), ``"scale"`` (values of a magnitude outside
    :data:`SCALE_RANGE`), ``"constant"``.
    """

    code: str

    def __new__(cls, code: str, message: str) -> Exclusion:
        self = super().__new__(cls, message)
        self.code = code
        return self

    def __getnewargs__(self) -> tuple[str, str]:
        return self.code, str(self)


@dataclass(frozen=True, eq=False)
class TargetMoments:
    """The target(s) of a statistics value: their means ``(k,)``, centred sums of squares
    ``(k,)``, and the features' centred cross-products with them ``(D, k)``."""

    mean: np.ndarray
    m2: np.ndarray
    cross: np.ndarray


class Statistics(Protocol):
    """What every statistics value answers, by the same names: :class:`dcfa.Moments`,
    :class:`~dcfa.stats.grid.GridMoments`, :class:`~dcfa.stats.columns.ColumnMoments` and
    :class:`~dcfa.stats.merged.MergedMoments`. Their consumers (the executions, the driver,
    the checks of stored statistics) read these and nothing else."""

    n: int
    pairwise: bool
    missing: str

    @property
    def n_features(self) -> int: ...

    @property
    def n_targets(self) -> int: ...

    @property
    def column_count(self) -> np.ndarray: ...

    @property
    def column_mean(self) -> np.ndarray: ...

    @property
    def column_m2(self) -> np.ndarray:
        """Every column's centred sum of squares."""

    def column_std(self, ddof: int = 1) -> np.ndarray: ...

    @property
    def excluded(self) -> dict[int, Exclusion]: ...

    @property
    def valid(self) -> np.ndarray: ...

    def target_moments(self) -> TargetMoments | None:
        """The target's statistics, or None when there is no target (or, lazy, not yet)."""


class ColumnSummary:
    """Per-column statistics of the moment summaries that hold no full matrix (the grid
    and row executions): they keep ``count``, ``mean`` and the columns' centred sums of
    squares ``column_m2``, and exclude columns by the rules of :class:`Moments`."""

    @property
    def column_count(self) -> np.ndarray:
        return self.count

    @property
    def column_mean(self) -> np.ndarray:
        return self.mean

    def column_std(self, ddof: int = 1) -> np.ndarray:
        count = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(np.where(count - ddof > 0, self.column_m2 / (count - ddof), np.nan))

    @property
    def excluded(self) -> dict[int, str]:
        return exclusions(self)

    @property
    def valid(self) -> np.ndarray:
        return ~excluded_mask(self)

    # one target at most: its cross-products (D,), mean and centred sum of squares
    target_cross: np.ndarray | None = None
    target_mean: float | None = None
    target_m2: float | None = None

    def target_moments(self) -> TargetMoments | None:
        if self.target_cross is None:
            return None
        return TargetMoments(
            mean=np.array([self.target_mean], dtype=np.float64),
            m2=np.array([self.target_m2], dtype=np.float64),
            cross=np.asarray(self.target_cross, dtype=np.float64).reshape(-1, 1),
        )


def _rules(m) -> tuple:
    """The exclusion rules as masks over the features: all missing, gappy (some missing,
    ``missing="exclude"``), too few observed values, constant; with the counts and means."""
    d = m.n_features
    count = m.column_count[:d]
    mean = m.column_mean[:d]
    std = m.column_std(ddof=0)[:d]
    none = count == 0
    gappy = (count > 0) & (count < m.n) if not m.pairwise else np.zeros(d, dtype=bool)
    few = (count > 0) & (count < 2)
    size = _magnitude(mean, std)
    scale = (count > 0) & outside_scale(size)
    constant = (count >= 2) & ~(std > _CONSTANT_RTOL * np.abs(mean))
    return none, gappy, few, scale, constant, count, mean, size


def outside_scale(size: np.ndarray) -> np.ndarray:
    """Where a magnitude lies outside :data:`SCALE_RANGE` (0, a constant zero, is inside)."""
    low, high = SCALE_RANGE
    return (size > high) | ((size > 0) & (size < low))


def rescale_hint(size: float) -> str:
    """`` (multiply by 1e+158)``: the power of ten that brings ``size`` near 1 ("" for inf)."""
    if not np.isfinite(size):
        return ""
    return f" (multiply by {10.0 ** -np.round(np.log10(size)):.0e})"


def _magnitude(mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """The size of a column's values: the larger of its mean's magnitude and its spread (the
    mean's where the sums of squares overflowed to NaN)."""
    return np.fmax(np.abs(mean), std)


def excluded_mask(m) -> np.ndarray:
    """True for every feature of ``m`` that :func:`exclusions` names (without the reasons)."""
    none, gappy, few, scale, constant = _rules(m)[:5]
    return none | gappy | few | scale | constant


def exclusions(m) -> dict[int, Exclusion]:
    """Every excluded feature of ``m`` (any moments value) with its :class:`Exclusion`;
    the first rule that applies names it. Features with the same message share one value."""
    none, gappy, few, scale, constant, count, mean, size = _rules(m)
    reasons: dict[int, Exclusion] = {}
    missing = Exclusion("all-missing", "all values missing")
    reasons.update(dict.fromkeys(np.flatnonzero(none).tolist(), missing))
    for i in np.flatnonzero(gappy):
        reasons[int(i)] = Exclusion(
            "gappy",
            f"{m.n - int(count[i])} of {m.n} values missing "
            "(LinCFA and GenLinCFA keep such a cell with missing='pairwise', pairwise-complete "
            "statistics)",
        )
    too_few = Exclusion("too-few", "fewer than 2 observed values")
    for i in np.flatnonzero(few).tolist():
        reasons.setdefault(i, too_few)
    for i in np.flatnonzero(scale).tolist():
        reasons.setdefault(
            i,
            Exclusion(
                "scale",
                f"values of magnitude {size[i]:.3g}, outside {SCALE_RANGE[0]:.0e} .. "
                f"{SCALE_RANGE[1]:.0e}, where float64's sums of products lose the digits the "
                "rules compare; rescale the data" + rescale_hint(size[i]),
            ),
        )
    for i in np.flatnonzero(constant):
        reasons.setdefault(int(i), Exclusion("constant", f"constant (value {mean[i]:.6g})"))
    return dict(sorted(reasons.items()))

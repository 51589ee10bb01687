"""How much of a series its seasonal cycle is: the share of its variance that its calendar
months' means explain, and the F test of no cycle. A target with a large share is mostly its
cycle, which anomalies of a field cannot predict."""

from __future__ import annotations

import numpy as np

__all__ = ["CYCLE_P", "CYCLE_SHARE", "has_large_cycle", "seasonal_share"]

# a cycle this large a share of a target's variance, and this clear, is worth a note: the
# field's anomalies cannot predict it (white noise's 12 monthly means explain about 11/n)
CYCLE_SHARE, CYCLE_P = 0.2, 1e-3


def seasonal_share(values: np.ndarray, months: np.ndarray) -> tuple[float, float]:
    """The share of the variance of ``values`` that their calendar months' means explain
    (one-way analysis of variance by month), and the F test's p-value of no cycle: (0, 1)
    when a month present holds a single value or fewer than two months are present."""
    from scipy import stats

    y = np.asarray(values, dtype=np.float64)
    present, group, counts = np.unique(months, return_inverse=True, return_counts=True)
    if present.size < 2 or (counts < 2).any() or y.size <= present.size:
        return 0.0, 1.0
    means = np.bincount(group, weights=y) / counts
    total = float(((y - y.mean()) ** 2).sum())
    between = float((counts * (means - y.mean()) ** 2).sum())
    if total == 0.0:
        return 0.0, 1.0
    within = max(total - between, 0.0)
    df1, df2 = present.size - 1, y.size - present.size
    f = np.inf if within == 0.0 else (between / df1) / (within / df2)
    return between / total, float(stats.f.sf(f, df1, df2))


def has_large_cycle(values: np.ndarray, months: np.ndarray) -> float | None:
    """The share of :func:`seasonal_share` when it is at least :data:`CYCLE_SHARE` with a
    p-value under :data:`CYCLE_P`, else None."""
    share, p = seasonal_share(values, months)
    return share if share >= CYCLE_SHARE and p < CYCLE_P else None

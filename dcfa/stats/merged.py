"""A merge of disjoint row sets' moments read row by row: :class:`MergedMoments`."""

from __future__ import annotations

import numpy as np

from dcfa.stats.kernels import chan_factors
from dcfa.stats.summary import ColumnSummary

__all__ = ["MergedMoments"]


def _lo(m) -> np.ndarray | float:
    """The rounding error of ``m.mean`` (:class:`dcfa.Moments`' ``mean_lo``; 0 when unknown)."""
    return 0.0 if m.mean_lo is None else m.mean_lo


class MergedMoments(ColumnSummary):
    """``Moments.merge_all(parts)`` without its ``p x p`` matrix: the same numbers, by rows.

    Merging disjoint row sets (a cross-validation fold's training segments) builds a new
    ``p x p`` matrix per merge, plus temporaries. The partition reads only a few rows of each,
    so they are computed when asked for: counts, means and the diagonal at once (O(S p)), a row
    or a column of the cross-products as the same chain of Chan updates that
    :meth:`dcfa.Moments.merge` applies to the whole matrix, restricted to that row. Every
    operation is elementwise, so each number equals the merged matrix's bit for bit.

    Answers what the partition needs (``n``, ``n_features``, ``valid``, ``column_std``, ``mean``
    and the rows of :class:`Basis`) in O(S p) memory besides the parts.
    """

    pairwise = False
    missing = "exclude"

    def __init__(self, parts):
        parts = list(parts)
        if not parts or any(p.pairwise or p.n == 0 for p in parts):
            raise ValueError("MergedMoments: non-empty parts of missing='exclude' moments only")
        first = parts[0]
        self.parts = parts
        self.n_targets = first.n_targets
        n, mean, count = first.n, first.mean, first.count
        lo = _lo(first)
        diag = first.cross.diagonal()
        self._steps = []
        for p in parts[1:]:  # Moments.merge's chain: differences of the exact means
            n, w, f = chan_factors(n, p.n)
            d = ((p.mean - mean) + _lo(p)) - lo  # (mean + lo) of p less that of the merge
            self._steps.append((p.cross, d, f))
            diag = diag + p.cross.diagonal() + d * d * f
            rel = lo + d * w
            mean, previous = mean + (p.mean - mean) * w + 0.0, mean
            lo = (previous - mean) + rel
            count = count + p.count
        self.n, self.mean, self.count, self.column_m2 = n, mean, count, diag

    @property
    def n_columns(self) -> int:
        return self.mean.size

    @property
    def n_features(self) -> int:
        return self.n_columns - self.n_targets

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_columns, self.n_columns)

    def row(self, c: int, cols=None) -> np.ndarray:
        """Row ``c`` of the merged cross-products, at ``cols`` (every column by default)."""
        r = np.array(self.parts[0].cross[c], dtype=np.float64)
        t = np.empty_like(r)
        for cross, d, f in self._steps:  # r + cross[c] + d[c] * d * f, in place
            np.multiply(d[c], d, out=t)
            t *= f
            r += cross[c]
            r += t
        return r if cols is None else r[cols]

    def column(self, rows, c: int) -> np.ndarray:
        """Column ``c`` of the merged cross-products, at ``rows``."""
        r = self.parts[0].cross[rows, c]
        for cross, d, f in self._steps:
            r = r + cross[rows, c] + d[rows] * d[c] * f
        return r

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The merged cross-products at ``np.ix_(rows, cols)`` (a copy)."""
        return np.stack([self.row(c, cols) for c in rows])

    def materialize(self):
        """``Moments.merge_all(parts)``: the merged value with its ``p x p`` matrix."""
        from dcfa.stats.moments import Moments

        return Moments.merge_all(self.parts)

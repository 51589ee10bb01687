"""A merge of disjoint row sets' moments read row by row: :class:`MergedMoments`."""

from __future__ import annotations

import numpy as np

from dcfa.stats.kernels import between_parts, merge_parts, relative_mean, sum_parts, two_sum
from dcfa.stats.summary import ColumnSummary

__all__ = ["MergedMoments"]


class MergedMoments(ColumnSummary):
    """``Moments.merge_all(parts)`` without its ``p x p`` matrix: the same numbers, by rows.

    Merging disjoint row sets (a cross-validation fold's training segments) builds a new
    ``p x p`` matrix per merge, plus temporaries. The partition reads only a few rows of each,
    so they are computed when asked for: counts, means and the diagonal at once (O(S p)), a row
    or a column of the cross-products from the same Chan update for all parts at once
    (:func:`~dcfa.stats.kernels.merge_parts`, :func:`~dcfa.stats.kernels.between_parts`) that
    :meth:`dcfa.Moments.merge_all` applies to the whole matrix. Every operation is
    elementwise, so each number equals the merged matrix's bit for bit.

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
        ref = first.mean  # the first part's exact means: deviations keep every digit
        rel = np.stack([relative_mean(p.mean, p.mean_lo, ref) for p in parts])
        self._n_s = np.array([p.n for p in parts], dtype=np.float64)
        _, rel, self._dev = merge_parts(self._n_s, rel)
        self.mean, self.mean_lo = two_sum(ref, rel)
        self.n = sum(p.n for p in parts)
        self.count = sum_parts([p.count for p in parts])
        self.column_m2 = sum_parts([p.cross.diagonal() for p in parts]) + between_parts(
            self._n_s, self._dev
        )

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
        r = sum_parts([p.cross[c] for p in self.parts])
        r += between_parts(self._n_s, self._dev[:, c], self._dev)
        return r if cols is None else r[cols]

    def column(self, rows, c: int) -> np.ndarray:
        """Column ``c`` of the merged cross-products, at ``rows``."""
        r = sum_parts([p.cross[rows, c] for p in self.parts])
        r += between_parts(self._n_s, self._dev[:, rows], self._dev[:, c])
        return r

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The merged cross-products at ``np.ix_(rows, cols)`` (a copy)."""
        return np.stack([self.row(c, cols) for c in rows])

    def materialize(self):
        """``Moments.merge_all(parts)``: the merged value with its ``p x p`` matrix."""
        from dcfa.stats.moments import Moments

        return Moments.merge_all(self.parts)

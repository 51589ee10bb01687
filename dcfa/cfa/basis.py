"""What the partition loop reads: per-segment moments of the scaled features and the target.

A :class:`Basis` holds, for each row segment (all rows, or the row sets of cross-validation
folds), the scaled cross-products of the kept features and the target; :class:`MergedMoments`
reads the union of several disjoint row sets row by row instead of building it
(:func:`fold_parts`, :func:`merge_rows`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from dcfa.cfa.rules import PairMoments, SegmentMoments
from dcfa.stats.kernels import row_blocks
from dcfa.stats.merged import MergedMoments


@dataclass(frozen=True)
class Basis:
    """Per-segment moments of ``D`` scaled features and one target (last column).

    A view on :class:`~dcfa.Moments`: the ``p x p`` matrices are kept as they are and only the
    rows the driver touches are gathered and scaled, so building a basis costs O(D), not
    O(D^2). Column ``k`` of the basis is column ``cols[k]`` of the moments times ``scale[k]``.

    Attributes
    ----------
    n : ndarray of shape (S,)
        Rows per segment.
    mean, diag, target : ndarray of shape (S, D + 1)
        Scaled means, variances-like diagonal, and cross-products with the target.
    crosses : list of S ndarrays of shape (p, p)
        The segments' centred cross-products (or the correlation matrix, pairwise).
    cols, scale : ndarray of shape (D + 1,)
    count : ndarray of shape (p, p) or None
        Pairwise-complete counts (one segment only): the ``n`` of a test is then the
        smallest count between the candidate and a member of the group.
    """

    n: np.ndarray
    mean: np.ndarray
    diag: np.ndarray
    target: np.ndarray
    crosses: list
    cols: np.ndarray
    scale: np.ndarray
    count: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        return self.cols.size - 1

    # what the loop asks of any basis (the series' basis answers the same): a group opened at
    # a seed; a hook told which seeds may come next (the seed rows' basis computes them
    # ahead); how far a member moves a group (the series' basis: interval bounds), or None
    prefetch = None
    member_drift = None

    def open_group(self, seed: int) -> BasisGroup:
        return BasisGroup(self, seed)

    @property
    def n_segments(self) -> int:
        return len(self.crosses)

    def row(self, j: int) -> np.ndarray:
        """Scaled cross-products of basis column ``j`` with every column, shape (S, D + 1)."""
        c = self.cols[j]
        cols = None if self._all_columns else self.cols
        rows = [_cross_row(m, c, cols) for m in self.crosses]
        return np.stack(rows) * (self.scale[j] * self.scale)

    def count_row(self, j: int) -> np.ndarray:
        c = self.cols[j]
        return self.count[c] if self._all_columns else self.count[c, self.cols]

    def dense(self) -> np.ndarray:
        """All scaled cross-products, shape (S, D + 1, D + 1) (a copy)."""
        cols, scale = self.cols, self.scale
        K = np.empty((self.n_segments, cols.size, cols.size))
        for s, m in enumerate(self.crosses):  # by row blocks: no second p x p temporary
            for b in row_blocks(cols.size):
                if isinstance(m, MergedMoments):
                    K[s, b] = m.block(cols[b], cols)
                else:
                    K[s, b] = m[np.ix_(cols[b], cols)]
                K[s, b] *= np.outer(scale[b], scale)
        return K

    def dense_count(self) -> np.ndarray | None:
        return None if self.count is None else self.count[np.ix_(self.cols, self.cols)]

    @property
    def _all_columns(self) -> bool:
        p = self.crosses[0].shape[0]
        return self.cols.size == p and bool((self.cols == np.arange(p)).all())

    @classmethod
    def from_moments(cls, parts, features: np.ndarray, scale: np.ndarray, target: int = 0):
        """Basis over ``features`` (indices) of one or several :class:`~dcfa.Moments`.

        Feature ``k`` is multiplied by ``scale[k]`` (``1/std`` to average standardised
        features, ``1`` to aggregate them as they are).
        """
        parts = list(parts)
        cols = np.append(np.asarray(features), parts[0].n_features + target)
        w = np.append(np.asarray(scale, dtype=np.float64), 1.0)
        y = cols[-1]
        if parts[0].pairwise:
            if len(parts) != 1:
                raise ValueError("pairwise-complete statistics support a single segment only")
            m = parts[0]
            # correlation space: unit scale, zero means; counts carry the sample sizes
            corr = m.corr()
            sign = np.sign(w)
            return cls(
                n=np.array([m.n]),
                mean=np.zeros((1, cols.size)),
                diag=np.ones((1, cols.size)),
                target=(corr[cols, y] * sign)[None],
                crosses=[corr],
                cols=cols,
                scale=sign,
                count=m.count,
            )
        return cls(
            n=np.array([m.n for m in parts]),
            mean=np.stack([m.mean[cols] * w for m in parts]),
            diag=np.stack([_cross_diagonal(m)[cols] * w * w for m in parts]),
            target=np.stack([_cross_column(m, cols, y) * w for m in parts]),
            crosses=[m if isinstance(m, MergedMoments) else m.cross for m in parts],
            cols=cols,
            scale=w,
        )


class BasisGroup:
    """Running moments of a group aggregate ``g = sum of its (scaled) members``."""

    def __init__(self, basis: Basis, seed: int):
        self.basis = basis
        self.u = basis.row(seed)  # cross(g, every column), (S, D+1)
        self.q = basis.diag[:, seed].copy()  # cross(g, g), (S,)
        self.m = basis.mean[:, seed].copy()  # mean(g), (S,)
        self.nmin = None if basis.count is None else basis.count_row(seed).copy()

    def add(self, j: int) -> None:
        b = self.basis
        self.q += 2.0 * self.u[:, j] + b.diag[:, j]
        self.u += b.row(j)
        self.m += b.mean[:, j]
        if self.nmin is not None:
            np.minimum(self.nmin, b.count_row(j), out=self.nmin)

    def segment_moments(self, cand: np.ndarray) -> SegmentMoments:
        b = self.basis
        y = b.n_features
        if self.nmin is None:
            n = b.n.astype(np.float64)
        else:
            n = self.nmin[cand][None, :].astype(np.float64)
        return SegmentMoments(
            n=n,
            gg=self.q,
            gc=self.u[:, cand],
            gy=self.u[:, y],
            gm=self.m,
            cc=b.diag[:, cand],
            cy=b.target[:, cand],
            yy=b.target[:, y],
            cm=b.mean[:, cand],
            ym=b.mean[:, y],
        )

    def pair_moments(self, cand: np.ndarray) -> PairMoments:
        return self.segment_moments(cand).pair_moments()


@dataclass(frozen=True)
class SeedRowBasis(Basis):
    """A :class:`Basis` whose rows a :class:`~dcfa.stats.columns.RowSource` computes when a
    seed needs them (the rows execution): ``prefetch`` tells it which features may open
    the next groups, so that one pass computes a batch of them."""

    source: object = None

    def prefetch(self, upcoming: np.ndarray) -> None:
        self.source.prefetch(self.cols[np.asarray(upcoming, dtype=np.int64)])


def seed_rows(data, stats, folds=None, *, batch_size: int = 256):
    """What the rows execution partitions from: ``(whole, make_basis, source)``.

    ``stats`` are the :class:`~dcfa.stats.columns.ColumnMoments` of all rows, or of each row
    segment of ``folds`` (NonLinCFA); ``whole`` answers the driver's exclusions and spreads,
    ``make_basis(valid, scale)`` is the basis over the row sets the rule reads (all rows; each
    fold's training and test rows, merged from the segments as :func:`fold_parts` merges the
    dense moments), its rows computed from ``data`` (Dask) by ``source``.
    """
    from dcfa.stats.columns import RowSource, SegmentColumns

    segments = [stats] if folds is None else list(stats)
    bounds = [0, data.shape[0]] if folds is None else folds.bounds
    source = RowSource(data, segments, bounds, batch_size=batch_size)
    parts = [SegmentColumns(cm, source, s) for s, cm in enumerate(segments)]
    rowsets, whole = (parts, stats) if folds is None else fold_parts(parts, folds)

    def make_basis(valid, scale):
        basis = SeedRowBasis.from_moments(rowsets, valid, scale)
        return dataclasses.replace(basis, source=source)

    return whole, make_basis, source


def merged_columns(parts):
    """The :class:`~dcfa.stats.columns.ColumnMoments` of the union of the row segments'
    ``parts`` (the merge :class:`MergedMoments` applies)."""
    from dcfa.stats.columns import ColumnMoments, SegmentColumns

    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    m = MergedMoments([SegmentColumns(cm) for cm in parts])
    d = parts[0].n_features
    return ColumnMoments(
        n=int(m.n),
        count=m.count[:d],
        mean=m.mean[:d],
        m2=m.column_m2[:d],
        target_cross=m.column(np.arange(d), d),
        target_mean=float(m.mean[d]),
        target_m2=float(m.column_m2[d]),
    )


def fold_parts(parts, folds):
    """NonLinCFA's row sets from per-segment moments: each fold's training sets, then their
    test sets (merged row by row when read, :class:`MergedMoments`), and all rows."""
    train = [merge_rows([parts[s] for s in tr]) for tr, _ in folds.splits]
    test = [merge_rows([parts[s] for s in te]) for _, te in folds.splits]
    return train + test, merge_rows(parts)


def merge_rows(parts):
    """The union of disjoint row sets for the partition: the one part itself, a
    :class:`MergedMoments` (no new ``p x p`` matrix), or for pairwise statistics the merge."""
    from dcfa.stats.moments import Moments

    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    if any(p.pairwise or p.n == 0 for p in parts):
        return Moments.merge_all(parts)
    return MergedMoments(parts)


def _cross_row(m, c: int, cols) -> np.ndarray:
    """Row ``c`` of a cross-product matrix (or of :class:`MergedMoments`), at ``cols``."""
    if isinstance(m, MergedMoments):
        return m.row(c, cols)
    return m[c] if cols is None else m[c, cols]


def _cross_column(m, rows: np.ndarray, c: int) -> np.ndarray:
    return m.column(rows, c) if isinstance(m, MergedMoments) else m.cross[rows, c]


def _cross_diagonal(m) -> np.ndarray:
    return m.column_m2 if isinstance(m, MergedMoments) else m.cross.diagonal()

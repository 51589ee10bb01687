"""Column statistics, and the rows execution's rows: the unrestricted algorithms
without the ``D x D`` matrix.

With ``compare="seed"`` every candidate is tested against its group's *seed*, so the
partition only ever reads the rows of the cross-product matrix of the features that open a
group. A first pass computes the per-column statistics and the cross-products with the target
(:class:`ColumnMoments`, O(D); one per row segment for NonLinCFA's folds); a
:class:`RowSource` then computes rows on demand, in batches of the ``B`` features that may be
the next seeds (one pass over the data per batch, every segment's rows at once, memory
O(S B D)), and :class:`SegmentColumns` serves each segment as the partition's basis and the
merge of row segments read a :class:`dcfa.Moments`: the partition is that of the full matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcfa.stats.store import StoredFields
from dcfa.stats.summary import ColumnSummary

__all__ = ["ColumnMoments", "RowSource", "SegmentColumns", "column_pass"]


@dataclass(frozen=True, eq=False)
class ColumnMoments(StoredFields, ColumnSummary):
    """Per-column count, mean and centred sum of squares, and cross-products with one target.

    Answers what the partition needs from :class:`~dcfa.Moments` (``n``, ``n_features``,
    ``excluded``, ``valid``, ``column_mean``, ``column_std``) in O(D) memory.
    """

    n: int
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    target_cross: np.ndarray
    target_mean: float
    target_m2: float

    pairwise = False
    missing = "exclude"
    n_targets = 1

    @property
    def n_features(self) -> int:
        return self.count.size

    @property
    def column_m2(self) -> np.ndarray:
        return self.m2

    _ARRAYS = ("count", "mean", "m2", "target_cross")
    _ATTRS = ("n", "target_mean", "target_m2")

    def __repr__(self) -> str:
        return f"ColumnMoments(n={self.n}, n_features={self.n_features})"


def column_pass(X, y, *, segments=None) -> ColumnMoments | list[ColumnMoments]:
    """One pass over ``X`` (Dask) and ``y``: the :class:`ColumnMoments`, or with ``segments``
    (row bounds ``[0, ..., n]``) one per row segment, from the same pass."""
    import dask.array as da

    from dcfa._compute import compute
    from dcfa.stats.graph import column_moments

    y = np.asarray(y, dtype=np.float64).reshape(-1, 1)
    Y = da.from_array(y, chunks=(X.chunks[0], 1))
    bounds = [0, X.shape[0]] if segments is None else [int(b) for b in segments]
    parts = compute(column_moments(X, Y, segments=bounds))[0]
    out = [
        ColumnMoments(
            n=int(hi - lo),
            count=c["count"],
            mean=c["mean"],
            m2=c["m2"],
            target_cross=c["target_cross"][:, 0],
            target_mean=float(c["target_mean"][0]),
            target_m2=float(c["target_m2"][0]),
        )
        for c, lo, hi in zip(parts, bounds[:-1], bounds[1:], strict=True)
    ]
    return out[0] if segments is None else out


class RowSource:
    """The rows of the centred cross-products of ``X``'s features with every feature and the
    target, per row segment, computed when a seed needs one.

    :meth:`prefetch` is told which features may open the next groups; :meth:`row`
    computes, when asked for an uncached row, the rows of the next ``batch_size`` of them in
    one pass over ``X`` (every segment's at once), and forgets rows of earlier batches.
    """

    def __init__(self, X, segments: list[ColumnMoments], bounds, batch_size: int = 256):
        self.X = X
        self.segments = list(segments)
        self.bounds = [int(b) for b in bounds]
        self.batch_size = int(batch_size)
        self.n_passes = 0
        self._rows: dict[int, list[np.ndarray]] = {}
        self._upcoming = np.zeros(0, dtype=np.int64)

    def prefetch(self, upcoming: np.ndarray) -> None:
        """The features (columns of ``X``) that may open the next groups, in order."""
        self._upcoming = np.asarray(upcoming)

    def row(self, s: int, c: int) -> np.ndarray:
        """Row ``c`` of segment ``s``: feature ``c``'s cross-products with every feature,
        then with the target."""
        if c not in self._rows:
            self._fetch(c)
        return self._rows[c][s]

    def _fetch(self, c: int) -> None:
        from dcfa._compute import compute
        from dcfa.stats.graph import row_moments

        batch = [c] + [int(k) for k in self._upcoming if k != c][: self.batch_size - 1]
        single = len(self.bounds) == 2
        rows = compute(
            row_moments(self.X, np.asarray(batch), segments=None if single else self.bounds)
        )[0]
        rows = [rows] if single else rows
        self.n_passes += 1
        pairs = list(zip(rows, self.segments, strict=True))
        self._rows = {
            k: [np.append(r[:, b], cm.target_cross[k]) for r, cm in pairs]
            for b, k in enumerate(batch)
        }


class SegmentColumns:
    """One row segment's :class:`ColumnMoments` in the form of a :class:`dcfa.Moments` with
    the target as its last column (what the partition's basis and the merge of row segments
    read): ``n``, ``count``, ``mean``, and ``cross``, which gives its diagonal and the
    target's column from the column statistics and any feature's row from ``rows``
    (a :class:`RowSource`, segment ``s``)."""

    pairwise = False
    missing = "exclude"
    n_targets = 1
    mean_lo = None

    def __init__(self, cm: ColumnMoments, rows: RowSource | None = None, s: int = 0):
        self.cm, self.rows, self.s = cm, rows, s
        self.n = cm.n
        self.n_features = cm.n_features
        self.count = np.append(cm.count, cm.n)
        self.mean = np.append(cm.mean, cm.target_mean)
        self.shape = (cm.n_features + 1, cm.n_features + 1)
        self._target = np.append(cm.target_cross, cm.target_m2)

    @property
    def cross(self) -> SegmentColumns:
        return self

    def diagonal(self) -> np.ndarray:
        return np.append(self.cm.m2, self.cm.target_m2)

    def __getitem__(self, index) -> np.ndarray:
        """``[c]`` (a row), ``[c, cols]``, or ``[rows, c]`` (the symmetric column)."""
        a, b = index if isinstance(index, tuple) else (index, None)
        if np.ndim(a) == 1:  # [rows, c]: column c at rows, row c of the symmetric matrix
            return self[int(b)][a]
        c = int(a)
        if c == self.n_features:
            row = self._target
        else:
            if self.rows is None:
                raise ValueError("SegmentColumns: a feature's row needs a RowSource")
            row = self.rows.row(self.s, c)
        return row if b is None else row[b]

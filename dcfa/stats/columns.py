"""The seed-row mode of LinCFA: the unrestricted algorithm without the ``D x D`` matrix.

Algorithm 1 tests every candidate against its group's *seed*, so it only ever reads the rows of
the correlation matrix of the features that open a group. A first pass computes the
per-column statistics and the correlations with the target (:class:`ColumnMoments`, O(D));
:class:`RowBasis` then computes rows on demand, in batches of the ``B`` features that may be
the next seeds (one pass over the data per batch, memory O(B D)), and the partition is exactly
that of the full matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcfa.stats.store import StoredFields
from dcfa.stats.summary import ColumnSummary

__all__ = ["ColumnMoments", "RowBasis", "column_pass"]


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


def column_pass(X, y) -> ColumnMoments:
    """One pass over ``X`` (Dask) and ``y``: the :class:`ColumnMoments`."""
    import dask.array as da

    from dcfa._compute import compute
    from dcfa.stats.graph import column_moments

    y = np.asarray(y, dtype=np.float64).reshape(-1, 1)
    Y = da.from_array(y, chunks=(X.chunks[0], 1))
    c = compute(column_moments(X, Y))[0]
    return ColumnMoments(
        n=int(X.shape[0]),
        count=c["count"],
        mean=c["mean"],
        m2=c["m2"],
        target_cross=c["target_cross"][:, 0],
        target_mean=float(c["target_mean"][0]),
        target_m2=float(c["target_m2"][0]),
    )


class RowBasis:
    """A :class:`~dcfa.cfa.basis.Basis` whose rows are computed when a seed needs them.

    Basis column ``k`` is feature ``cols[k]`` of ``X`` times ``scale[k]``; the last column is the
    target. :meth:`prefetch` is told which features may open the next groups;
    :meth:`row` computes, when asked for an uncached row, the rows of the next ``batch_size``
    of them in one pass, and forgets rows of earlier batches.
    """

    def __init__(
        self, X, cm: ColumnMoments, cols: np.ndarray, scale: np.ndarray, batch_size: int = 256
    ):
        self.X = X
        self.cols = np.append(np.asarray(cols), -1)  # -1: the target
        self.scale = np.append(np.asarray(scale, dtype=np.float64), 1.0)
        c, w = self.cols[:-1], self.scale[:-1]
        self.n = np.array([cm.n])
        self.mean = np.append(cm.mean[c] * w, cm.target_mean)[None]
        self.diag = np.append(cm.m2[c] * w * w, cm.target_m2)[None]
        self.target = np.append(cm.target_cross[c] * w, cm.target_m2)[None]
        self.count = None
        self.batch_size = int(batch_size)
        self.n_passes = 0
        self._rows: dict[int, np.ndarray] = {}
        self._upcoming = np.zeros(0, dtype=np.int64)

    @property
    def n_features(self) -> int:
        return self.cols.size - 1

    @property
    def n_segments(self) -> int:
        return 1

    def prefetch(self, upcoming: np.ndarray) -> None:
        self._upcoming = np.asarray(upcoming)

    def row(self, j: int) -> np.ndarray:
        if j not in self._rows:
            self._fetch(j)
        return self._rows[j].copy()

    def _fetch(self, j: int) -> None:
        from dcfa._compute import compute
        from dcfa.stats.graph import row_moments

        batch = [j] + [int(k) for k in self._upcoming if k != j][: self.batch_size - 1]
        features = self.cols[batch]
        rows = compute(row_moments(self.X, features))[0]  # (all columns of X) x B
        self.n_passes += 1
        self._rows = {}
        c, w = self.cols[:-1], self.scale[:-1]
        for b, k in enumerate(batch):
            r = np.append(rows[c, b] * w, self.target[0, k] / self.scale[k])
            self._rows[k] = (r * self.scale[k])[None]

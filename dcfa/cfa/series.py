"""The series execution: every rule and loop option without the ``D x D`` matrix.

A test of candidate ``c`` against group ``g`` needs the moments of ``[g, c, y]`` in each row
set the rule reads (all rows; a fold's training and test rows for NonLinCFA). The dense
execution takes them from ``(D+1) x (D+1)`` moments. Here the features' series are held in
memory instead (``n x D`` float64, the data itself, ``n / D`` of the matrix), centred per row
segment and never changed afterwards: a basis scales what it reads (a member's series as it
joins a group, a candidate's cross-products), so the folds of a tolerance path, each with its
own spreads, read the same numbers a fit on their rows alone would. A group keeps its
aggregate's series and a test computes ``cross(g, c)`` for its candidates from the series,
O(n) each. With ``neighbors`` a group only ever tests the
cells next to it, so a fit costs O(n) per test, linear in the grid's size. It gives the dense
partition for every rule and option (``compare``, ``scan``, ``neighborhood="group"``, folds),
up to rounding in the last digits of the moments.

Two passes over the data: the per-column statistics (:func:`dcfa.stats.columns.column_pass`,
which decide exclusions as the dense moments do), then the kept columns' series.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcfa.cfa.rules import PairMoments, SegmentMoments
from dcfa.stats.columns import ColumnMoments

__all__ = [
    "SeriesData",
    "SeriesBasis",
    "column_statistics",
    "load_series",
    "over_budget",
    "series_bytes",
]


def series_bytes(n_samples: int, n_features: int) -> int:
    """Peak bytes the series execution holds on the driver: the float64 series, their
    squares' sums per segment, and one block in flight while they load."""
    return int(8 * n_samples * n_features * 1.15 + 64 * n_features)


def over_budget(
    n_samples: int, n_features: int, *, copies: float = 1.0, blocks: int = 0, hint: bool = False
) -> str | None:
    """Why the series of ``n_samples x n_features`` (and what is made of them: ``copies``
    times their size in all, plus ``blocks`` bytes of working blocks) would not fit
    ``dcfa.memory_budget`` on the driver, or None when they fit; with ``hint``, how to
    raise the budget."""
    from dcfa.memory import gib, memory_budget
    from dcfa.memory.check import raise_hint

    need = int(copies * series_bytes(n_samples, n_features)) + blocks
    budget = memory_budget()
    if need <= budget.driver:
        return None
    made = f" and what is made of them ({copies:g}x their size)" if copies != 1 else ""
    if blocks:
        made += f" and {gib(blocks)} of working blocks"
    return (
        f"the series ({n_samples:,} x {n_features:,} float64){made} would hold {gib(need)}, "
        f"over the budget of {gib(budget.driver)} ({budget.source})"
    ) + (f"; {raise_hint(need)}" if hint else "")


_COPY_BYTES = 8 * 2**20  # a block of features copied into the series at a time


def load_series(data, cols: np.ndarray) -> np.ndarray:
    """Columns ``cols`` (increasing) of ``data`` (n x D, NumPy or Dask) as a ``(len(cols), n)``
    float64 array, one feature per row. With a distributed client the blocks are copied in as they
    arrive (no second full-size copy); locally :func:`dask.array.store` writes into it."""
    import dask.array as da

    cols = np.asarray(cols, dtype=np.int64)
    n = data.shape[0]
    out = np.empty((cols.size, n), dtype=np.float64)
    if not isinstance(data, da.Array):
        from dcfa.stats.kernels import row_blocks

        data = np.asarray(data)
        for b in row_blocks(cols.size, n, _COPY_BYTES):  # no full-size temporary copies
            out[b] = data[:, cols[b]].T
        return out
    from dcfa._compute import active_client, compute

    client = active_client()
    if client is None:
        sub = data[:, cols] if cols.size < data.shape[1] else data
        compute(da.store(sub.astype(np.float64), out.T, lock=False, compute=False))
        return out
    from distributed import as_completed

    # whole blocks, the kept columns picked here: indexing in the graph would ship the
    # index of every kept cell to the scheduler (tens of MB at a million cells)
    row0 = np.cumsum((0, *data.chunks[0]))
    col0 = np.cumsum((0, *data.chunks[1]))
    first = np.searchsorted(cols, col0)  # rows of ``out`` held by each column chunk
    blocks = data.to_delayed()
    index = [
        (i, j)
        for i in range(blocks.shape[0])
        for j in range(blocks.shape[1])
        if first[j + 1] > first[j]
    ]
    # one graph: the blocks share what they are computed from (e.g. a climatology)
    futures = client.compute([blocks[i, j] for i, j in index])
    where = {f.key: ij for f, ij in zip(futures, index, strict=True)}
    for f, block in as_completed(futures, with_results=True):
        i, j = where[f.key]
        local = cols[first[j] : first[j + 1]] - col0[j]
        out[first[j] : first[j + 1], row0[i] : row0[i + 1]] = np.asarray(
            block[:, local], dtype=np.float64
        ).T
        f.release()
    return out


def column_statistics(data, y):
    """The :class:`~dcfa.stats.columns.ColumnMoments` of ``data`` (NumPy or Dask) and ``y``:
    the column pass that decides which features are kept, before their series are read."""
    import dask.array as da

    from dcfa.stats.columns import column_pass

    X = data if isinstance(data, da.Array) else da.from_array(data, chunks=(-1, "auto"))
    return column_pass(X, y)


@dataclass
class SeriesData:
    """The kept features' series, centred per row segment: what the series execution holds.

    Attributes
    ----------
    columns : ColumnMoments
        Per-column statistics of all rows (exclusions, means, spreads: as the dense moments).
    series : ndarray of shape (V, n)
        Feature ``cols[k]`` in row ``k``, centred on its mean in each segment (unscaled).
    y : ndarray of shape (n,)
        The target, centred per segment.
    cols : ndarray of shape (V,)
        The kept features (``columns.valid``).
    bounds : ndarray of shape (S + 1,)
        Row segments ``[bounds[s], bounds[s+1])``.
    parts : list of lists of int
        The row sets the rule reads, as lists of segments.
    seg_mean : ndarray of shape (S, V)
        Each kept feature's mean in each segment; ``y_mean`` (S,) the target's.
    """

    columns: ColumnMoments
    series: np.ndarray
    y: np.ndarray
    cols: np.ndarray
    bounds: np.ndarray
    parts: list
    seg_mean: np.ndarray
    y_mean: np.ndarray
    _cc: np.ndarray | None = None
    _cy: np.ndarray | None = None

    @classmethod
    def gather(cls, data, y, *, bounds=None, parts=None, columns=None) -> SeriesData:
        """The two passes: column statistics (unless given), then the kept columns' series."""
        n = data.shape[0]
        if columns is None:
            columns = column_statistics(data, y)
        cols = np.flatnonzero(columns.valid)
        series = load_series(data, cols)
        bounds = np.array([0, n] if bounds is None else bounds, dtype=np.int64)
        parts = [[0]] if parts is None else [list(p) for p in parts]
        starts = bounds[:-1]
        counts = np.diff(bounds)
        seg_mean = (np.add.reduceat(series, starts, axis=1) / counts).T  # (S, V)
        yv = np.asarray(y, dtype=np.float64).ravel()
        y_mean = np.add.reduceat(yv, starts) / counts
        for s in range(counts.size):  # centre in place, segment by segment
            series[:, bounds[s] : bounds[s + 1]] -= seg_mean[s][:, None]
        yc = yv - np.repeat(y_mean, counts)
        return cls(columns, series, yc, cols, bounds, parts, seg_mean, y_mean)

    @property
    def n_features(self) -> int:
        return self.columns.n_features

    def segments(self, lo: int, hi: int) -> list[int]:
        """The segments that make up rows ``[lo, hi)`` (both must be segment bounds)."""
        starts = self.bounds[:-1]
        if lo not in self.bounds or hi not in self.bounds:
            raise ValueError(f"rows [{lo}, {hi}) do not start and end on segment bounds")
        return np.flatnonzero((starts >= lo) & (starts < hi)).tolist()

    def group_series(
        self, labels: np.ndarray, weights=None, how: str = "mean", scale=None
    ) -> np.ndarray:
        """Each group's aggregate of its members' series times ``scale`` (the partition's
        scale of each kept feature; None: 1), segment means added back: the
        (``weights``-weighted) mean or the sum, shape ``(n_groups, n)``, as ``transform``
        gives it up to each group's constant. ``labels`` over the kept features, -1 for none."""
        import scipy.sparse as sp

        keep = labels >= 0
        K = int(labels.max()) + 1 if keep.any() else 0
        w = np.ones(labels.size) if weights is None else np.asarray(weights, dtype=np.float64)
        if how == "mean":
            w = w / np.bincount(labels[keep], weights=w[keep], minlength=K)[np.maximum(labels, 0)]
        if scale is not None:
            w = w * scale
        M = sp.csr_array(
            (w[keep], (labels[keep], np.flatnonzero(keep))),
            shape=(K, labels.size),
        )
        counts = np.diff(self.bounds)
        return M @ self.series + np.repeat(M @ self.seg_mean.T, counts, axis=1)

    def segment_sums(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row segment ``(S, V)``: each held series' sum of squares and its cross-product
        with the target (both centred per segment, unscaled), computed once."""
        if self._cc is None:
            self._cc, self._cy = self._sums()
        return self._cc, self._cy

    def _sums(self) -> tuple[np.ndarray, np.ndarray]:
        X, y, b = self.series, self.y, self.bounds
        S = b.size - 1
        cc, cy = np.empty((S, X.shape[0])), np.empty((S, X.shape[0]))
        for s in range(S):
            block = X[:, b[s] : b[s + 1]]
            cc[s] = np.einsum("ij,ij->i", block, block)
            cy[s] = block @ y[b[s] : b[s + 1]]
        return cc, cy

    @property
    def nbytes(self) -> int:
        return int(self.series.nbytes)

    def basis(self, valid: np.ndarray, scale: np.ndarray, parts=None) -> SeriesBasis:
        """The basis over ``valid`` (indices among all features), scaled by ``scale``, for
        the row sets ``parts`` (lists of segments; default: :attr:`parts`).

        The held series are not changed: the basis scales what it reads. The per-segment
        sums of squares and cross-products are taken once (O(n D)) and serve every basis
        (other row sets, other scales: the folds of a tolerance path).
        """
        if valid.size != self.cols.size or not np.array_equal(valid, self.cols):
            raise ValueError("the series hold other columns than the partition keeps")
        scale = np.asarray(scale, dtype=np.float64)
        return SeriesBasis(self, self.parts if parts is None else parts, scale)


class SeriesBasis:
    """What :func:`dcfa.cfa.sequential.sequential_partition` reads, from series in memory.

    Exposes ``n_features`` and :meth:`open_group`; a group's tests are computed from its
    aggregate's series (see the module docstring), merged into the row sets ``parts``.
    """

    def __init__(self, data: SeriesData, parts, scale: np.ndarray):
        self.data = data
        self.scale = scale  # of each held feature: its series as the rule reads it
        b = data.bounds
        self.starts = b[:-1]
        self.counts = np.diff(b).astype(np.float64)
        cc, cy = data.segment_sums()
        self.cc, self.cy = cc * (scale * scale), cy * scale
        self.seg_mean = data.seg_mean * scale
        self.yy = np.add.reduceat(data.y * data.y, self.starts)
        # part p is the union of its segments: A[p, s] = 1
        self.A = np.zeros((len(parts), self.counts.size))
        for p, segs in enumerate(parts):
            self.A[p, list(segs)] = 1.0
        self.count = None

    @property
    def n_features(self) -> int:
        return self.data.series.shape[0]

    prefetch = None  # the series are all in memory

    def open_group(self, seed: int) -> _SeriesGroup:
        return _SeriesGroup(self, seed)

    def member_drift(self) -> tuple[np.ndarray, np.ndarray]:
        """How far each feature moves a group it joins, per segment (S, D): the norm of its
        centred series, and its segment mean's distance from its mean over all rows
        (:mod:`dcfa.cfa.bounds`)."""
        m = self.seg_mean
        return np.sqrt(self.cc), np.abs(m - self.counts @ m / self.counts.sum())

    def parts_moments(self, seg: PairMoments) -> PairMoments:
        """Per-segment moments of ``[g, c, y]`` merged into the rule's row sets.

        ``cross`` of a union is the segments' centred sums plus their means' spread
        around the union's mean (the merge of :meth:`dcfa.Moments.merge`, for many at once).
        """
        A = self.A
        n_s, mean_s, cross_s = self.counts, seg.mean, seg.cross
        if A.shape == (1, 1):
            n = np.full((1, mean_s.shape[1]), n_s[0])
            return PairMoments(n=n, mean=mean_s, cross=cross_s)
        # the segments' means as deviations from all rows' mean c: a union's spread of means
        # is sum_s n_s (m_s - c)(m_s - c)' - n_p (M_p - c)(M_p - c)', all small numbers
        w = A * n_s[None, :]  # (P, S)
        n_p = w.sum(axis=1)
        c = np.tensordot(n_s, mean_s, axes=(0, 0)) / n_s.sum()  # (J, 3)
        dev = mean_s - c  # (S, J, 3)
        spread = n_s[:, None, None, None] * dev[..., :, None] * dev[..., None, :]
        cross_p = np.tensordot(A, cross_s + spread, axes=(1, 0))  # (P, J, 3, 3)
        dev_p = np.tensordot(w, dev, axes=(1, 0)) / n_p[:, None, None]  # (P, J, 3)
        cross_p -= n_p[:, None, None, None] * dev_p[..., :, None] * dev_p[..., None, :]
        mean_p = dev_p + c
        J = mean_s.shape[1]
        return PairMoments(n=np.repeat(n_p[:, None], J, axis=1), mean=mean_p, cross=cross_p)


class _SeriesGroup:
    """A growing group: its aggregate's series and per-segment moments (as
    :class:`~dcfa.cfa.basis.BasisGroup` on dense moments)."""

    def __init__(self, basis: SeriesBasis, seed: int):
        self.basis = basis
        d = basis.data
        self.g = d.series[seed] * basis.scale[seed]
        self.mean = basis.seg_mean[:, seed].copy()  # (S,)
        self._refresh()

    def _refresh(self) -> None:
        b = self.basis
        g = self.g
        self.gg = np.add.reduceat(g * g, b.starts)
        self.gy = np.add.reduceat(g * b.data.y, b.starts)

    def add(self, j: int) -> None:
        b = self.basis
        self.g += b.data.series[j] * b.scale[j]
        self.mean += b.seg_mean[:, j]
        self._refresh()

    def segment_moments(self, cand: np.ndarray) -> SegmentMoments:
        b = self.basis
        d = b.data
        Xc = d.series[cand]  # (J, n): a copy, scaled in place
        Xc *= b.scale[cand][:, None]
        bounds = d.bounds
        gc = np.empty((bounds.size - 1, cand.size))
        for s in range(gc.shape[0]):  # a product per segment: no (J, n) temporary
            gc[s] = Xc[:, bounds[s] : bounds[s + 1]] @ self.g[bounds[s] : bounds[s + 1]]
        return SegmentMoments(
            n=b.counts,
            gg=self.gg,
            gc=gc,
            gy=self.gy,
            gm=self.mean,
            cc=b.cc[:, cand],
            cy=b.cy[:, cand],
            cm=b.seg_mean[:, cand],
            yy=b.yy,
            ym=d.y_mean,
        )

    def pair_moments(self, cand: np.ndarray) -> PairMoments:
        return self.basis.parts_moments(self.segment_moments(cand).pair_moments())

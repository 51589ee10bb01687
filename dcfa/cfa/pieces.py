"""The pieces of :class:`dcfa.RegionsCV`'s first stage, and the statistics every fold reads.

* :func:`first_stage`: the pieces at every level, made once from ``X`` alone
  (:func:`dcfa.cfa.hierarchy.correlation_merges`), as a :class:`FirstStage`; the finest
  level's sums of the cells' series take the series' memory.
* :class:`Segments`: the runs of consecutive samples of which every fold's training rows are
  a union.
* :class:`Pieces`: one level's pieces, and the second stage on any fold's training rows from
  their per-segment sums (:meth:`Pieces.regions`, :meth:`Pieces.alike`) with each map's
  skill (:meth:`Pieces.skill_of`), without reading the series again; or, where the groups
  that carry one signal merge first, from the pieces' sums on the fold's rows.

The estimator, its choice between levels, sizes and orders, lives in
:mod:`dcfa.cfa.regions`; the merge orders in :mod:`dcfa.cfa.hierarchy`; the skill of one
fold and the rule that picks a map in :mod:`dcfa.cfa.selection`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from dcfa.cfa.hierarchy import (
    PAIR_BYTES,
    Merges,
    chain,
    correlation_merges,
    cut,
    group_adjacency,
    membership,
    neighbourhood_means,
    projection_merges,
    relevance_order,
    segment_pair_cross,
    sums_in_place,
    upper_pairs,
    ward_merges,
)
from dcfa.cfa.selection import ridge_weights, scaled_gram, uses_gram
from dcfa.cfa.signal_order import regions_merges
from dcfa.stats.kernels import row_blocks

__all__ = ["FirstStage", "Pieces", "Segments", "first_stage", "kept_adjacency"]


def kept_adjacency(grid, cols: np.ndarray) -> sp.csr_array:
    """The neighbour graph among the kept features; never across two blocks."""
    if grid.adjacency is None:
        A = sp.csr_array(np.ones((cols.size, cols.size), dtype=bool))
    else:
        A = sp.csr_array(grid.adjacency)[cols][:, cols]
    if grid.blocks is not None:
        b = np.asarray(grid.blocks)[cols]
        rows, cs = A.nonzero()
        same = b[rows] == b[cs]
        A = sp.csr_array(
            (np.ones(int(same.sum()), dtype=bool), (rows[same], cs[same])), shape=A.shape
        )
    A = A.tolil()
    A.setdiag(False)
    return sp.csr_array(A)


@dataclass(frozen=True, eq=False)
class FirstStage:
    """What the first stage makes of ``X`` alone: the kept features, their neighbour graph,
    the finest level's piece of each kept cell and those pieces' sums of the cells' series
    (centred; every level's pieces are unions of them), and the pieces at every level
    (``correlation_merges``' snapshots)."""

    cols: np.ndarray
    adjacency: sp.csr_array
    finest: np.ndarray
    sums: np.ndarray
    snapshots: dict


def first_stage(series: np.ndarray, cols: np.ndarray, adjacency, levels) -> FirstStage:
    """The pieces at every level of ``levels`` (highest first) of the kept cells ``cols``,
    whose series (cells x samples, centred) are ``series``: the most correlated adjacent
    pair of group means merges first, down to the lowest level. ``series`` is overwritten
    by the finest level's pieces' sums (every level's pieces are unions of the finest's),
    in the same memory."""
    snapshots: dict = {}
    correlation_merges(
        series, adjacency, floor=float(min(levels)), levels=levels, snapshots=snapshots
    )
    finest = snapshots[levels[0]][1]
    return FirstStage(cols, adjacency, finest, sums_in_place(series, finest), snapshots)


class Segments:
    """Consecutive runs of samples of which every fold's training rows are a union: the
    sums over each run give any fold's statistics without reading its rows again."""

    def __init__(self, n: int, row_sets: list[np.ndarray]):
        inside = np.zeros((len(row_sets), n), dtype=bool)
        for k, rows in enumerate(row_sets):
            inside[k, rows] = True
        change = np.flatnonzero((inside[:, 1:] != inside[:, :-1]).any(axis=0)) + 1
        self.n = n
        self.starts = np.concatenate([[0], change]).astype(np.int64)
        self.lengths = np.diff(np.append(self.starts, n))

    def of(self, rows) -> np.ndarray:
        """Which segments make up the samples ``rows`` (a slice or indices): a boolean mask."""
        inside = np.zeros(self.n, dtype=bool)
        inside[rows] = True
        take = inside[self.starts]
        if not np.array_equal(np.repeat(take, self.lengths), inside):
            raise AssertionError("rows are not a union of segments")
        return take


class Pieces:
    """The pieces of one level: their sums over all samples, sizes and adjacency, and the
    sums over each segment that the second stage reads in every fold."""

    def __init__(
        self,
        cell_labels: np.ndarray,
        first: FirstStage,
        segments: Segments,
        y: np.ndarray,
        skill: Callable[..., float],
        *,
        signal: bool = False,
    ):
        self.cell_labels = cell_labels  # piece of each kept cell
        self.first = first
        self.size = np.bincount(cell_labels).astype(np.float64)
        self.n = self.size.size
        self.adjacency = group_adjacency(first.adjacency, cell_labels, self.n)
        self.segments = segments
        self.y = y
        self.skill = skill  # a map's test R^2 in one fold (REGRESSIONS)
        self.signal = signal  # merge the groups that carry one signal first

    @cached_property
    def sums(self) -> np.ndarray:
        """Each piece's sum of its cells' series, ``(n_pieces, n_samples)``, centred over all
        samples: the sum of its finest pieces' sums (both numbered by their first cell, so
        the finest level's are the first stage's own)."""
        if self.n == self.first.sums.shape[0]:
            return self.first.sums
        piece = np.empty(self.first.sums.shape[0], dtype=np.int64)
        piece[self.first.finest] = self.cell_labels  # each finest piece's piece here
        return membership(piece, self.n) @ self.first.sums

    def drop_sums(self) -> None:
        """Forget :attr:`sums` (made again when next read): the driver holds the finest
        level's and one other level's at a time."""
        self.__dict__.pop("sums", None)

    @cached_property
    def _segment_sums(self) -> dict:
        """Per segment: each piece's sum, sum of squares and products with ``y``, the
        target's sum and sum of squares, the adjacent pairs' products (one pass)."""
        starts = self.segments.starts
        rows, cols = upper_pairs(self.adjacency)
        s, sq, sy = (np.empty((self.n, starts.size)) for _ in range(3))
        for b in row_blocks(self.n, self.sums.shape[1], PAIR_BYTES):  # no copy of the sums
            s[b] = np.add.reduceat(self.sums[b], starts, axis=1)
            sq[b] = np.add.reduceat(self.sums[b] ** 2, starts, axis=1)
            sy[b] = np.add.reduceat(self.sums[b] * self.y, starts, axis=1)
        return {
            "s": s,
            "ss": sq,
            "sy": sy,
            "y": np.add.reduceat(self.y, starts),
            "yy": np.add.reduceat(self.y * self.y, starts),
            "rows": rows,
            "cols": cols,
            "cross": segment_pair_cross(self.sums, rows, cols, starts),
        }

    def regions(self, rows):
        """The second stage on the samples ``rows`` (a fold's training rows, or every
        sample): its merges of these pieces, from the series centred on those rows. With
        :attr:`signal`, the groups that carry one signal merge first
        (:func:`dcfa.cfa.signal_order.regions_merges`), from the pieces' sums on those rows."""
        c = self.centred(rows)
        if self.signal:
            return regions_merges(self.sums, self.y, self.adjacency, rows=rows, start=c)
        return relevance_order(c["rows"], c["cols"], c["ss"], c["sy"], c["yy"], c["cross"])

    def centred(self, rows) -> dict:
        """The pieces' statistics centred on the samples ``rows`` (a union of segments), from
        the per-segment sums: what :func:`dcfa.cfa.hierarchy.centred_statistics` computes
        from the series."""
        t = self._segment_sums
        take = self.segments.of(rows)
        n = float(self.segments.lengths[take].sum())
        tot = t["s"][:, take].sum(axis=1)
        mean = tot / n
        ymean = t["y"][take].sum() / n
        return {
            "tot": tot,
            "ss": t["ss"][:, take].sum(axis=1) - n * mean * mean,
            "sy": t["sy"][:, take].sum(axis=1) - n * mean * ymean,
            "yy": float(t["yy"][take].sum() - n * ymean * ymean),
            "rows": t["rows"],
            "cols": t["cols"],
            "cross": t["cross"][:, take].sum(axis=1) - n * mean[t["rows"]] * mean[t["cols"]],
        }

    def weights(self, rows) -> np.ndarray:
        """Each piece's weight per cell in a ridge regression of the target on all cells,
        fitted on the samples ``rows``."""
        n_rows = np.arange(self.sums.shape[1])[rows].size
        gram = self._gram if uses_gram(self.n, n_rows) else None
        return ridge_weights(self.sums, self.size, self.y, rows, gram)

    def alike(self, rows, c: np.ndarray, *, ward_groups: int, smoothing: int = 0):
        """The second stage's other order on the samples ``rows``, from the pieces'
        :meth:`weights` ``c`` on those samples: adjacent pieces of alike weight merge first
        (Ward's criterion, each piece weighing its cells) down to ``ward_groups`` groups;
        then the pair whose merged mean loses least of ridge's prediction
        (:func:`dcfa.cfa.hierarchy.projection_merges`). With ``smoothing``, Ward's criterion
        reads the weights averaged over each piece's neighbourhood that many times
        (:func:`dcfa.cfa.hierarchy.neighbourhood_means`)."""
        v = neighbourhood_means(c, self.size, self.adjacency, smoothing) if smoothing else c
        ward = ward_merges(v, self.size, self.adjacency)
        k = int(np.clip(self.n - ward_groups, 0, len(ward)))
        labels = cut(ward, k)
        M = membership(labels, self.n - k)
        size = M @ self.size
        sums = (M @ self.sums)[:, rows]
        A = group_adjacency(self.adjacency, labels, self.n - k)
        return chain(ward, k, projection_merges(sums, size, (M @ (self.size * c)) / size, A))

    @cached_property
    def _gram(self) -> np.ndarray:
        """The scaled pieces' Gram matrix over all samples, which every fold's ridge reads."""
        return scaled_gram(self.sums, self.size)

    def skill_along(self, path, sizes: np.ndarray, train, test) -> np.ndarray:
        """The test R^2 of the regression on the region means of each map of ``sizes``
        regions that ``path`` makes (fitted on ``train``); NaN for sizes the path does not
        reach."""
        out = np.full(sizes.size, np.nan)
        js = [j for j, k in enumerate(sizes) if path.min_groups <= k <= self.n]
        if not js:  # fewer pieces than the smallest size, or more patches than the largest
            return out
        for j, G in zip(js, self.means_along(path, sizes[js]), strict=True):
            out[j] = self.skill(G, self.y, train, test)
        return out

    def skill_of(self, paths, sizes: np.ndarray, folds) -> np.ndarray:
        """:meth:`skill_along` of each fold's path (one per fold, in order): shape
        ``(sizes, folds)``."""
        pairs = zip(paths, folds, strict=True)
        return np.stack([self.skill_along(p, sizes, tr, te) for p, (tr, te) in pairs], axis=1)

    def means_along(self, path, sizes) -> list[np.ndarray]:
        """Each region's mean series (regions x samples, up to a constant per region) in the
        maps of ``sizes`` regions that ``path`` makes: the largest map from the pieces, the
        others from its regions (every map of a path is a union of its larger maps')."""
        k0 = self.n - max(sizes)
        largest = cut(path, k0)
        M = membership(largest)
        sums, size = M @ self.sums, M @ self.size
        # the path's later merges, of the largest map's regions: every smaller map is cut
        # from these few regions, not from the pieces again
        rest = Merges(sums.shape[0], largest[path.a[k0:]], largest[path.b[k0:]], path.value[k0:])
        out = []
        for k in sizes:
            M = membership(cut(rest, self.n - k - k0), k)
            out.append((M @ sums) / (M @ size)[:, None])
        return out

    def cells(self, piece_labels: np.ndarray) -> np.ndarray:
        return piece_labels[self.cell_labels]

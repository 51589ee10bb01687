"""Moments between neighbouring grid cells only: the ``D x k`` band of a ``D x D`` matrix.

On a grid, a candidate that must lie within ``r`` cells of its group's seed only ever needs the
moments of pairs of cells within ``r`` (seed comparison) or ``2 r`` (comparison with the
group's mean) of each other. :func:`grid_moments` computes those, and only those, in one pass
over a ``(sample, *grid)`` field: every block is read with a halo of ``R`` cells
(``dask.array.overlap``); for each of the ``k`` offsets of the half-neighbourhood, one
elementwise product of the centred block with its shifted self, summed over samples. Blocks of
samples are merged with the update of Chan et al., as for :class:`dcfa.Moments`. Cost
O(n D k), memory O(D k): a 0.25 degree grid (10^6 cells) fits where its 8 TB correlation
matrix does not. The kernels on one block are in :mod:`dcfa.stats.stencil`; here are the
value (:class:`GridMoments`) and the pass that builds it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING

import numpy as np

from dcfa._errors import InputError
from dcfa.stats.kernels import (
    between_parts,
    column_shift,
    merge_parts,
    relative_mean,
    sum_parts,
    two_sum,
)
from dcfa.stats.stencil import (
    half_offsets,
    interior,
    offset_steps,
    stencil_chunk,
    stencil_combine,
    stencil_shift,
)
from dcfa.stats.store import StoredFields
from dcfa.stats.summary import ColumnSummary

if TYPE_CHECKING:  # hints only: the workers that unpickle the kernels load NumPy alone
    from collections.abc import Sequence

    import dask.array as da
    import xarray as xr
    from numpy.typing import ArrayLike

__all__ = [
    "GridMoments",
    "GridSegments",
    "SegmentedPass",
    "grid_moments",
    "grid_pass",
    "segment_grid_moments",
]


############################################################################################
# the value


@dataclass(frozen=True, eq=False)
class GridMoments(StoredFields, ColumnSummary):
    """Moments of the cells of a grid with their neighbours within ``radius`` (and a target).

    Cell ``i`` is the flat (C-order) index on ``shape``; ``cross[i, k]`` is the centred
    cross-product of cell ``i`` with cell ``i + offsets[k]`` (0 where that is off the grid).
    It answers what the partition needs from :class:`dcfa.Moments` (``n``, ``n_features``,
    ``excluded``, ``valid``, ``column_mean``, ``column_std``) without the ``D x D`` matrix.
    """

    n: int
    shape: tuple[int, ...]
    radius: int
    periodic: tuple[int, ...]
    offsets: np.ndarray  # (k, ndim)
    count: np.ndarray  # (D,)
    mean: np.ndarray  # (D,)
    diag: np.ndarray  # (D,): centred sum of squares
    cross: np.ndarray  # (D, k)
    target_cross: np.ndarray | None = None  # (D,)
    target_mean: float | None = None
    target_ss: float | None = None
    blocks: tuple[int, ...] = ()  # grid dims along which cells are never neighbours
    # the rounding errors of mean and target_mean (see dcfa.Moments.mean_lo): what lets
    # merge_all subtract means of values with a large offset without losing digits; None in
    # stores written before dcfa kept them (then counted as 0)
    mean_lo: np.ndarray | None = None  # (D,)
    target_mean_lo: float | None = None

    pairwise = False
    missing = "exclude"

    @property
    def n_features(self) -> int:
        return int(np.prod(self.shape))

    @property
    def n_targets(self) -> int:
        return 0 if self.target_cross is None else 1

    @property
    def column_m2(self) -> np.ndarray:
        return self.diag

    @property
    def target_m2(self) -> float | None:  # the name every statistics value uses
        return self.target_ss

    def neighbours(
        self, cells: np.ndarray, radius: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Flat indices of the cells within ``radius`` of each of ``cells`` (-1 off the grid).

        Returns ``(nbr, offset)``: ``nbr`` of shape ``(len(cells), K)`` over the full
        neighbourhood (both signs of every offset, ``K = (2 radius + 1)^ndim - 1``) and the
        offsets, in a fixed order.
        """
        radius = self.radius if radius is None else radius
        steps = [offset_steps(ax, radius, self.blocks) for ax in range(len(self.shape))]
        full = np.array([o for o in itertools.product(*steps) if any(o)]).reshape(
            -1, len(self.shape)
        )
        return self._shifted(np.asarray(cells), full), full

    def _shifted(self, cells: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Flat index of ``cells[i] + offsets[k]``, shape (len(cells), k): wrapped along
        periodic dims, -1 off the grid."""
        coords = np.stack(np.unravel_index(cells, self.shape), axis=-1)
        target = coords[:, None, :] + offsets[None, :, :]
        ok = np.ones(target.shape[:2], dtype=bool)
        for ax, size in enumerate(self.shape):
            if ax in self.periodic:
                target[..., ax] %= size
            else:
                ok &= (target[..., ax] >= 0) & (target[..., ax] < size)
        flat = np.ravel_multi_index(
            tuple(np.where(ok, target[..., ax], 0) for ax in range(len(self.shape))), self.shape
        )
        return np.where(ok, flat, -1)

    def pair_cross(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Centred cross-products of cells ``a`` and ``b`` (arrays; each pair within radius).

        ``a == b`` gives the diagonal. Raises if a pair is farther apart than the radius.
        """
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        ca = np.stack(np.unravel_index(a.ravel(), self.shape), axis=-1)
        cb = np.stack(np.unravel_index(b.ravel(), self.shape), axis=-1)
        diff = cb - ca
        for ax in self.periodic:
            size = self.shape[ax]
            diff[:, ax] = (diff[:, ax] + size // 2) % size - size // 2
        if np.abs(diff).max(initial=0) > self.radius:
            raise ValueError("pair_cross: a pair of cells is farther apart than the radius")
        # (a, b) with b - a = o in the half set: cross[a, o]; else cross[b, -o]
        first = np.zeros(len(diff), dtype=np.int64)
        for ax in reversed(range(diff.shape[1])):
            first = np.where(diff[:, ax] != 0, ax, first)
        flip = diff[np.arange(len(diff)), first] < 0
        o = np.where(flip[:, None], -diff, diff)
        cell = np.where(flip, b.ravel(), a.ravel())
        same = ~np.any(diff, axis=1)
        k = self._offset_index(o)
        out = np.where(same, self.diag[a.ravel()], self.cross[cell, np.maximum(k, 0)])
        return out.reshape(a.shape)

    def _offset_index(self, o: np.ndarray) -> np.ndarray:
        """Index into ``offsets`` of each row of ``o`` (-1 for the zero offset)."""
        width = 2 * self.radius + 1
        weights = width ** np.arange(o.shape[1] - 1, -1, -1)
        table = np.full(width ** o.shape[1], -1, dtype=np.int64)
        table[(self.offsets + self.radius) @ weights] = np.arange(len(self.offsets))
        return table[(o + self.radius) @ weights]

    def scaled(self, scale: np.ndarray) -> GridMoments:
        """The moments of the field with every cell divided by ``scale`` (D,), e.g. its
        standard deviation; cells whose scale is not finite and positive get no values
        (``count`` 0: excluded as "all values missing", as if they had been set to NaN)."""
        scale = np.asarray(scale, dtype=np.float64).reshape(self.shape)
        ok = np.isfinite(scale) & (scale > 0)
        s = np.where(ok, scale, 1.0)
        R = self.radius
        padded = s
        for ax in range(s.ndim):  # the halo: the other edge of a periodic dim, else 1
            width = [(0, 0)] * s.ndim
            width[ax] = (R, R)
            wrap = ax in self.periodic
            padded = np.pad(
                padded,
                width,
                mode="wrap" if wrap else "constant",
                **({} if wrap else {"constant_values": 1.0}),
            )
        cross = self.cross.copy()
        for k, o in enumerate(self.offsets):
            cross[:, k] /= (s * padded[interior(R, self.shape, o)]).ravel()
        flat = s.ravel()
        return replace(
            self,
            count=np.where(ok.ravel(), self.count, 0),
            mean=self.mean / flat,
            mean_lo=None,  # a quotient's rounding is not kept
            diag=self.diag / flat**2,
            cross=cross,
            target_cross=None if self.target_cross is None else self.target_cross / flat,
        )

    def offset_cells(self) -> np.ndarray:
        """Flat index of cell ``i + offsets[k]`` for every cell and half offset, shape (D, k);
        -1 where it is off the grid (what ``cross[i, k]`` pairs cell ``i`` with)."""
        return self._shifted(np.arange(self.n_features), self.offsets)

    @classmethod
    def merge_all(cls, parts: list[GridMoments]) -> GridMoments:
        """The moments of the union of disjoint row sets (Chan's update, all parts at once):
        co-moments add, plus ``sum_s n_s (m_s - m)(m_s' - m')`` of the parts' means around
        the union's. Parts must share the grid, radius and treatment of the target."""
        parts = list(parts)
        first = parts[0]
        if len(parts) == 1:
            return first
        for p in parts[1:]:
            if (p.shape, p.radius, p.periodic, p.blocks, p.n_targets) != (
                first.shape,
                first.radius,
                first.periodic,
                first.blocks,
                first.n_targets,
            ):
                raise InputError("parts: grid moments of different grids cannot be merged")
        n_s = np.array([p.n for p in parts], dtype=np.float64)
        # the parts' exact means (mean + mean_lo) relative to the first's: differences of
        # close means are exact, so the deviations keep every digit on a large offset
        ref = first.mean
        means = np.stack([relative_mean(p.mean, p.mean_lo, ref) for p in parts])  # (S, D)
        n, rel, dev = merge_parts(n_s, means)
        mean, mean_lo = two_sum(ref, rel)
        nbr = first.offset_cells()
        cross = sum_parts([p.cross for p in parts])
        for k in range(nbr.shape[1]):  # one (S, D) temporary at a time, as ``dev``
            cross[:, k] += between_parts(n_s, dev, dev[:, np.maximum(nbr[:, k], 0)])
        merged = {
            "n": int(n),
            "count": sum_parts([p.count for p in parts]),
            "mean": mean,
            "mean_lo": mean_lo,
            "diag": sum_parts([p.diag for p in parts]) + between_parts(n_s, dev),
            "cross": np.where(nbr < 0, 0.0, cross),
        }
        if first.target_cross is not None:
            y_ref = first.target_mean
            ym_s = np.array([relative_mean(p.target_mean, p.target_mean_lo, y_ref) for p in parts])
            _, ym, ydev = merge_parts(n_s, ym_s)
            y_mean, y_lo = two_sum(y_ref, float(ym))
            merged["target_mean"] = float(y_mean)
            merged["target_mean_lo"] = float(y_lo)
            merged["target_ss"] = float(
                sum_parts([p.target_ss for p in parts]) + between_parts(n_s, ydev)
            )
            merged["target_cross"] = sum_parts([p.target_cross for p in parts]) + between_parts(
                n_s, ydev, dev
            )
        return replace(first, **merged)

    _ARRAYS = ("offsets", "count", "mean", "diag", "cross", "target_cross", "mean_lo")
    _ATTRS = (
        "n",
        "shape",
        "radius",
        "periodic",
        "target_mean",
        "target_ss",
        "blocks",
        "target_mean_lo",
    )

    def __repr__(self) -> str:
        return (
            f"GridMoments(n={self.n}, shape={self.shape}, radius={self.radius}, "
            f"offsets={len(self.offsets)}, excluded={len(self.excluded)})"
        )


############################################################################################
# the pass


def grid_moments(
    field: xr.DataArray | np.ndarray | da.Array,
    y: ArrayLike | None = None,
    *,
    radius: int,
    sample_dim: str = "time",
    periodic: Sequence[int] = (),
    blocks: Sequence[int] = (),
    split_every: int | None = None,
) -> GridMoments:
    """One pass over a gridded field: the moments of every cell with its neighbours.

    Parameters
    ----------
    field : xarray.DataArray (sample_dim, ``*grid``) or array of that shape
        NumPy or Dask-backed; chunks along any dim.
    y : array-like of shape (n_samples,), default=None
    radius : int
        Neighbours are the cells within ``radius`` steps along every grid dim.
    periodic : sequence of int
        Grid dims (by position, 0 = first grid dim) that wrap around (a global longitude).
    blocks : sequence of int
        Grid dims (by position) that are not space: variables, time scales, lags. Cells that
        differ along them are never neighbours.
    """
    if int(radius) != radius or radius < 1:
        raise InputError(f"radius: expected an int >= 1, got {radius!r}")
    return grid_pass(
        field,
        y,
        radius=radius,
        sample_dim=sample_dim,
        periodic=periodic,
        blocks=blocks,
        split_every=split_every,
    ).moments


class GridSegments(list):
    """One :class:`GridMoments` per row segment; ``whole`` is their merge (all rows)."""

    @cached_property
    def whole(self) -> GridMoments:
        return GridMoments.merge_all(self)


def segment_grid_moments(
    field, y=None, *, bounds, radius: int, sample_dim: str = "time", **kwargs
) -> GridSegments:
    """:func:`grid_moments` of each row segment ``bounds[s]:bounds[s + 1]`` (NonLinCFA's
    folds): every row is read once, one pass per segment."""
    if hasattr(field, "dims"):
        field = field.transpose(sample_dim, ...).data
    y = None if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
    return GridSegments(
        grid_moments(field[lo:hi], None if y is None else y[lo:hi], radius=radius, **kwargs)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    )


@dataclass(frozen=True, eq=False)
class SegmentedPass:
    """What :func:`grid_pass` gathers: the within-segment moments and every segment's means.

    ``moments`` are the moments of the field with every sample's segment mean removed (its
    ``mean`` is therefore 0); with calendar months as segments, the moments of the anomalies.
    ``segment_mean`` (n_segments, *grid) and ``segment_count`` (n_segments,) are the segments'
    means (the climatology) and sizes, ``segment_seen`` (n_segments, *grid) every cell's
    finite values in every segment (its mean is 0 where there are none).
    """

    moments: GridMoments
    segment_mean: np.ndarray
    segment_count: np.ndarray
    segment_seen: np.ndarray


def grid_pass(
    field,
    y=None,
    *,
    radius: int = 0,
    segments=None,
    n_segments: int = 1,
    sample_dim: str = "time",
    periodic=(),
    blocks=(),
    split_every: int | None = None,
) -> SegmentedPass:
    """One pass over a ``(sample, *grid)`` field: per-segment means and pooled moments.

    ``radius = 0`` gathers every cell's count, mean and sum of squares only (a preprocessing
    pass); ``radius >= 1`` adds every cell's co-moments with its neighbours. ``segments``
    (int per sample, ``0 .. n_segments - 1``) pools the moments within segments (see
    :func:`dcfa.stats.stencil.stencil_chunk`); without them there is one segment and the pass is
    :func:`grid_moments`. Grid dims stored as one chunk get their halo inside the kernel (no
    copy through Dask's overlap); others through ``dask.array.overlap``.
    """
    import dask.array as da
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    from dcfa._compute import compute
    from dcfa.stats.graph import combine_tree

    R = int(radius)
    if hasattr(field, "dims"):
        if sample_dim not in field.dims:
            raise InputError(f"field: no sample dim {sample_dim!r} among {field.dims}")
        field = field.transpose(sample_dim, ...)
        data = field.data
    else:
        data = field
    n, *shape = data.shape
    g = len(shape)
    blocks = tuple(int(b) for b in blocks)
    if any(s < 2 * R + 1 for ax, s in enumerate(shape) if ax not in blocks):
        raise InputError(f"radius: {R} is too large for a grid of shape {tuple(shape)}")
    offsets = half_offsets(g, R, blocks)
    y = None if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
    if y is not None and y.size != n:
        raise InputError(f"y: {y.size} values for {n} samples")
    # the target around a reference value, as the field's cells (column_shift): its chunks'
    # means are then merged as small numbers, not as 1e8 +- anomaly (which lost 7 digits)
    y_shift = 0.0
    if y is not None:
        found = column_shift(y[:, None])
        if found is not None:
            y_shift = float(found[0])
            y = y - y_shift
    if segments is not None:
        segments = np.asarray(segments, dtype=np.int64).reshape(-1)
        if segments.size != n or segments.min(initial=0) < 0 or segments.max() >= n_segments:
            raise InputError(f"segments: expected {n} labels in 0..{n_segments - 1}")
    # the blocks' results (in memory: one) into the whole grid's
    assemble = partial(
        _assemble,
        n=n,
        shape=tuple(shape),
        R=R,
        periodic=tuple(periodic),
        offsets=offsets,
        has_y=y is not None,
        blocks=blocks,
        y_shift=y_shift,
    )
    if not isinstance(data, da.Array):  # in memory: the kernel on the whole array
        pad = tuple(("wrap" if ax in periodic else "nan") if R else None for ax in range(g))
        shift = stencil_shift(data, R, pad)
        part = stencil_chunk(data, y, segments, shift, R, offsets, n_segments, pad)
        return assemble([(part, shift)], [(0,) * g], [(s,) for s in shape])
    # every block along a grid dim must be at least R wide for the halo; the dims of blocks
    # (never neighbours: their halo is only shape) are one chunk
    data = data.rechunk(
        {
            ax + 1: -1
            if ax in blocks
            else da.overlap.ensure_minimum_chunksize(R, data.chunks[ax + 1])
            for ax in range(g)
        }
    )
    whole = [len(data.chunks[ax + 1]) == 1 for ax in range(g)]
    pad = tuple(
        (("wrap" if ax in periodic else "nan") if whole[ax] and R else None) for ax in range(g)
    )
    depth = {0: 0, **{ax + 1: 0 if whole[ax] else R for ax in range(g)}}
    boundary = {
        0: "none",
        **{ax + 1: ("periodic" if ax in periodic else np.nan) for ax in range(g)},
    }
    haloed = (
        da.overlap.overlap(data, depth=depth, boundary=boundary) if any(depth.values()) else data
    )
    # one task per block of samples and grid block, a tree over the samples per grid block
    t_edges = np.cumsum((0, *data.chunks[0]))
    spatial = list(itertools.product(*[range(len(c)) for c in data.chunks[1:]]))
    name = "dcfa-grid-" + tokenize(haloed, y, segments, R, offsets, n_segments, pad, split_every)
    dsk: dict = {}
    ids = itertools.count()

    def rows(v, t):
        return None if v is None else v[t_edges[t] : t_edges[t + 1]]

    tops = []
    for s in spatial:
        shift = (name, "shift", *s)
        dsk[shift] = (stencil_shift, (haloed.name, 0, *s), R, pad)
        keys = [(name, "chunk", t, *s) for t in range(len(data.chunks[0]))]
        for t, key in enumerate(keys):
            block = (haloed.name, t, *s)
            args = (rows(y, t), rows(segments, t), shift, R, offsets, n_segments, pad)
            dsk[key] = (stencil_chunk, block, *args)
        root = combine_tree(
            dsk, name, keys, stencil_combine, R, offsets, split_every=split_every, ids=ids
        )
        tops.append((root, shift))
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[haloed])
    results = [(Delayed(r, graph, layer=name), Delayed(s, graph, layer=name)) for r, s in tops]
    return assemble(compute(results)[0], spatial, data.chunks[1:])


def _assemble(
    done, spatial, chunks, n, shape, R, periodic, offsets, has_y, blocks=(), y_shift=0.0
) -> SegmentedPass:
    edges = [np.cumsum((0, *c)) for c in chunks]
    n_seg = len(done[0][0]["n"])
    seg_mean = np.empty((n_seg, *shape))
    seg_lo = np.empty((n_seg, *shape))
    seg_seen = np.empty((n_seg, *shape), dtype=np.int64)
    count = np.empty(shape, dtype=np.int64)
    diag = np.empty(shape)
    cross = np.empty((len(offsets), *shape))
    ty = np.empty(shape) if has_y else None
    for (part, shift), s in zip(done, spatial, strict=True):
        box = tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, s, strict=True))
        inner = tuple(b.stop - b.start for b in box)
        core = (slice(None), *interior(R, inner))
        seg_seen[(slice(None), *box)] = part["seen"][core]
        seen = seg_seen[(slice(None), *box)] > 0
        hi, lo = two_sum(shift, part["mean"])  # the mean and its rounding error
        seg_mean[(slice(None), *box)] = np.where(seen, hi[core], 0.0)
        seg_lo[(slice(None), *box)] = np.where(seen, lo[core], 0.0)
        count[box] = part["count"]
        diag[box] = part["diag"]
        cross[(slice(None), *box)] = part["cross"]
        if has_y:
            ty[box] = part["ty"]
    first = done[0][0]
    seg_count = first["n"]
    ymean = yss = ylo = None
    if has_y:  # the target's own moments: the segments merged back (Chan), around y_shift
        n_s = np.asarray(seg_count, dtype=np.float64)
        _, rel, ydev = merge_parts(n_s, first["ymean"])
        yss = float(sum_parts(first["yy"]) + between_parts(n_s, ydev))
        ymean, ylo = (float(v) for v in two_sum(y_shift, float(rel)))
    mean = seg_mean[0] if n_seg == 1 else np.zeros(shape)
    mean_lo = seg_lo[0] if n_seg == 1 else np.zeros(shape)
    moments = GridMoments(
        n=n,
        shape=shape,
        radius=R,
        periodic=periodic,
        offsets=offsets,
        count=count.ravel(),
        mean=mean.ravel(),
        diag=diag.ravel(),
        cross=cross.reshape(len(offsets), int(np.prod(shape))).T.copy(),
        target_cross=None if ty is None else ty.ravel(),
        target_mean=ymean,
        target_ss=yss,
        blocks=tuple(blocks),
        mean_lo=mean_lo.ravel(),
        target_mean_lo=ylo,
    )
    return SegmentedPass(moments, seg_mean, seg_count, seg_seen)

"""Moments between neighbouring grid cells only: the ``D x k`` band of a ``D x D`` matrix.

On a grid, a candidate that must lie within ``r`` cells of its group's seed only ever needs the
moments of pairs of cells within ``r`` (seed comparison) or ``2 r`` (comparison with the
group's mean) of each other. :func:`grid_moments` computes those, and only those, in one pass
over a ``(sample, *grid)`` field: every block is read with a halo of ``R`` cells
(``dask.array.overlap``); for each of the ``k`` offsets of the half-neighbourhood, one
elementwise product of the centred block with its shifted self, summed over samples. Blocks of
samples are merged with the update of Chan et al., as for :class:`dcfa.Moments`. Cost
O(n D k), memory O(D k): a 0.25 degree grid (10^6 cells) fits where its 8 TB correlation
matrix does not.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from dcfa._moments import ColumnSummary

__all__ = ["GridMoments", "grid_moments", "half_offsets"]


def half_offsets(ndim: int, radius: int) -> np.ndarray:
    """Offsets ``o`` with ``max |o_i| <= radius`` whose first non-zero entry is positive.

    Every unordered pair of cells within ``radius`` is ``(i, i + o)`` for exactly one of them.
    """
    out = [
        o
        for o in itertools.product(range(-radius, radius + 1), repeat=ndim)
        if any(o) and next(v for v in o if v) > 0
    ]
    return np.array(out, dtype=np.int64).reshape(-1, ndim)


############################################################################################
# kernels on one block (samples x haloed grid block)


def _interior(R: int, shape: tuple[int, ...], offset=None) -> tuple[slice, ...]:
    offset = (0,) * len(shape) if offset is None else offset
    return tuple(slice(R + o, R + o + s) for o, s in zip(offset, shape, strict=True))


def stencil_chunk(block, y, shift, R: int, offsets: np.ndarray) -> dict:
    """Moments of one block of samples of a haloed grid block.

    ``block`` is ``(m, *halo_shape)`` with ``R`` cells of halo on every grid side (NaN outside
    the grid), ``y`` the target over those samples (or None), ``shift`` a per-cell reference
    (halo shape) subtracted first.
    """
    a = np.asarray(block, dtype=np.float64) - shift
    m = a.shape[0]
    obs = np.isfinite(a)
    a[~obs] = 0.0
    mean = a.mean(axis=0)
    a -= mean
    a[~obs] = 0.0
    inner = tuple(s - 2 * R for s in a.shape[1:])
    core = (slice(None), *_interior(R, inner))
    ci = a[core]
    cross = np.empty((len(offsets), *inner))
    for k, o in enumerate(offsets):
        cross[k] = np.einsum("t...,t...->...", ci, a[(slice(None), *_interior(R, inner, o))])
    out = {
        "n": m,
        "mean": mean,
        "count": obs[core].sum(axis=0),
        "diag": np.einsum("t...,t...->...", ci, ci),
        "cross": cross,
    }
    if y is not None:
        y = np.asarray(y, dtype=np.float64)
        ym = y.mean()
        yc = y - ym
        out.update(ymean=ym, yy=float(yc @ yc), ty=np.tensordot(yc, ci, axes=(0, 0)))
    return out


def stencil_combine(parts: list[dict], R: int, offsets: np.ndarray) -> dict:
    """Merge the moments of consecutive blocks of samples of the same grid block (Chan)."""
    out = parts[0]
    for b in parts[1:]:
        out = _merge(out, b, R, offsets)
    return out


def _merge(x: dict, y: dict, R: int, offsets: np.ndarray) -> dict:
    n = x["n"] + y["n"]
    f = x["n"] * y["n"] / n
    d = y["mean"] - x["mean"]
    inner = x["diag"].shape
    di = d[_interior(R, inner)]
    cross = x["cross"] + y["cross"]
    for k, o in enumerate(offsets):
        cross[k] += f * di * d[_interior(R, inner, o)]
    out = {
        "n": n,
        "mean": x["mean"] + d * (y["n"] / n),
        "count": x["count"] + y["count"],
        "diag": x["diag"] + y["diag"] + f * di * di,
        "cross": cross,
    }
    if "ty" in x:
        dy = y["ymean"] - x["ymean"]
        out.update(
            ymean=x["ymean"] + dy * (y["n"] / n),
            yy=x["yy"] + y["yy"] + f * dy * dy,
            ty=x["ty"] + y["ty"] + f * di * dy,
        )
    return out


############################################################################################
# the value


@dataclass(frozen=True, eq=False)
class GridMoments(ColumnSummary):
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

    def neighbours(self, cells: np.ndarray, radius: int | None = None):
        """Flat indices of the cells within ``radius`` of each of ``cells`` (-1 off the grid).

        Returns ``(nbr, offset)``: ``nbr`` of shape ``(len(cells), K)`` over the full
        neighbourhood (both signs of every offset, ``K = (2 radius + 1)^ndim - 1``) and the
        offsets, in a fixed order.
        """
        radius = self.radius if radius is None else radius
        full = np.array(
            [
                o
                for o in itertools.product(range(-radius, radius + 1), repeat=len(self.shape))
                if any(o)
            ]
        )
        coords = np.stack(np.unravel_index(np.asarray(cells), self.shape), axis=-1)
        target = coords[:, None, :] + full[None, :, :]
        ok = np.ones(target.shape[:2], dtype=bool)
        for ax, size in enumerate(self.shape):
            if ax in self.periodic:
                target[..., ax] %= size
            else:
                ok &= (target[..., ax] >= 0) & (target[..., ax] < size)
        flat = np.ravel_multi_index(
            tuple(np.where(ok, target[..., ax], 0) for ax in range(len(self.shape))), self.shape
        )
        return np.where(ok, flat, -1), full

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

    _ARRAYS = ["offsets", "count", "mean", "diag", "cross", "target_cross"]
    _ATTRS = ["n", "shape", "radius", "periodic", "target_mean", "target_ss"]

    def save(self, path, *, overwrite: bool = False):
        """Write to a Zarr store, atomically (see :meth:`dcfa.Moments.save`)."""
        from dcfa._moments import save_fields

        return save_fields(
            self, path, "GridMoments", self._ARRAYS, self._ATTRS, overwrite=overwrite
        )

    @classmethod
    def load(cls, path) -> GridMoments:
        from dcfa._moments import load_fields

        return load_fields(cls, path, "GridMoments", cls._ARRAYS, cls._ATTRS)

    def __repr__(self) -> str:
        return (
            f"GridMoments(n={self.n}, shape={self.shape}, radius={self.radius}, "
            f"offsets={len(self.offsets)}, excluded={len(self.excluded)})"
        )


############################################################################################
# the pass


def grid_moments(
    field, y=None, *, radius: int, sample_dim: str = "time", periodic=(), split_every: int = 8
) -> GridMoments:
    """One pass over a gridded field: the moments of every cell with its neighbours.

    Parameters
    ----------
    field : xarray.DataArray (sample_dim, *grid) or array of that shape
        NumPy or Dask-backed; chunks along any dim.
    y : array-like of shape (n_samples,), default=None
    radius : int
        Neighbours are the cells within ``radius`` steps along every grid dim.
    periodic : sequence of int
        Grid dims (by position, 0 = first grid dim) that wrap around (a global longitude).
    """
    import dask
    import dask.array as da

    from dcfa._compute import compute

    if int(radius) != radius or radius < 1:
        raise ValueError(f"radius: expected an int >= 1, got {radius!r}")
    R = int(radius)
    if hasattr(field, "dims"):
        if sample_dim not in field.dims:
            raise ValueError(f"field: no sample dim {sample_dim!r} among {field.dims}")
        field = field.transpose(sample_dim, ...)
        data = field.data
    else:
        data = field
    if not isinstance(data, da.Array):
        data = da.from_array(np.asarray(data), chunks=(max(1, data.shape[0] // 4), *data.shape[1:]))
    n, *shape = data.shape
    g = len(shape)
    if any(s < 2 * R + 1 for s in shape):
        raise ValueError(f"radius: {R} is too large for a grid of shape {tuple(shape)}")
    offsets = half_offsets(g, R)
    depth = {0: 0, **{ax + 1: R for ax in range(g)}}
    boundary = {
        0: "none",
        **{ax + 1: ("periodic" if ax in periodic else np.nan) for ax in range(g)},
    }
    # every block along a grid dim must be at least R wide for the halo
    data = data.rechunk(
        {ax + 1: da.overlap.ensure_minimum_chunksize(R, data.chunks[ax + 1]) for ax in range(g)}
    )
    haloed = da.overlap.overlap(data.astype(np.float64, copy=False), depth=depth, boundary=boundary)
    blocks = haloed.to_delayed()
    y = None if y is None else np.asarray(y, dtype=np.float64).reshape(-1)
    if y is not None and y.size != n:
        raise ValueError(f"y: {y.size} values for {n} samples")
    t_edges = np.cumsum((0, *data.chunks[0]))
    spatial = list(itertools.product(*[range(len(c)) for c in data.chunks[1:]]))
    kernel = dask.delayed(stencil_chunk, pure=True)
    combine = dask.delayed(stencil_combine, pure=True)
    shift_of = dask.delayed(_shift, pure=True)
    results = []
    for s in spatial:
        shift = shift_of(blocks[(0, *s)])
        parts = [
            kernel(
                blocks[(t, *s)],
                None if y is None else y[t_edges[t] : t_edges[t + 1]],
                shift,
                R,
                offsets,
            )
            for t in range(len(data.chunks[0]))
        ]
        while len(parts) > 1:
            parts = [
                combine(parts[i : i + split_every], R, offsets)
                for i in range(0, len(parts), split_every)
            ]
        results.append((parts[0], shift))
    done = compute(results)[0]
    return _assemble(
        done, spatial, data.chunks[1:], n, tuple(shape), R, tuple(periodic), offsets, y is not None
    )


def _shift(block) -> np.ndarray:
    """A per-cell reference (the first block's NaN-mean) so merged means stay small."""
    a = np.asarray(block, dtype=np.float64)
    obs = np.isfinite(a)
    cnt = obs.sum(axis=0)
    return np.divide(np.where(obs, a, 0).sum(axis=0), cnt, out=np.zeros(a.shape[1:]), where=cnt > 0)


def _assemble(done, spatial, chunks, n, shape, R, periodic, offsets, has_y) -> GridMoments:
    edges = [np.cumsum((0, *c)) for c in chunks]
    mean = np.empty(shape)
    count = np.empty(shape, dtype=np.int64)
    diag = np.empty(shape)
    cross = np.empty((len(offsets), *shape))
    ty = np.empty(shape) if has_y else None
    for (part, shift), s in zip(done, spatial, strict=True):
        box = tuple(slice(e[i], e[i + 1]) for e, i in zip(edges, s, strict=True))
        inner = tuple(b.stop - b.start for b in box)
        mean[box] = (shift + part["mean"])[_interior(R, inner)]
        count[box] = part["count"]
        diag[box] = part["diag"]
        cross[(slice(None), *box)] = part["cross"]
        if has_y:
            ty[box] = part["ty"]
    first = done[0][0]
    return GridMoments(
        n=n,
        shape=shape,
        radius=R,
        periodic=periodic,
        offsets=offsets,
        count=count.ravel(),
        mean=mean.ravel(),
        diag=diag.ravel(),
        cross=cross.reshape(len(offsets), -1).T.copy(),
        target_cross=None if ty is None else ty.ravel(),
        target_mean=first.get("ymean"),
        target_ss=first.get("yy"),
    )

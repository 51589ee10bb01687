"""The NumPy kernels of the grid pass (:mod:`dcfa.stats.grid`): one block of samples of a
haloed grid block to its within-segment moments with its neighbours, and their Chan merge.

Every pair of cells within ``R`` of each other is ``(i, i + o)`` for exactly one offset ``o``
of the half-neighbourhood (:func:`half_offsets`); a block's moments are, per offset, one
elementwise product of the centred block with its shifted self, summed over samples. Workers
unpickle these functions: NumPy only.
"""

from __future__ import annotations

import itertools

import numpy as np

from dcfa.stats.kernels import chan_factors, column_shift, subtract_by_group

__all__ = [
    "half_offsets",
    "interior",
    "padded",
    "stencil_chunk",
    "stencil_combine",
    "stencil_merge",
    "stencil_shift",
    "offset_steps",
]


def half_offsets(ndim: int, radius: int, blocks=()) -> np.ndarray:
    """Offsets ``o`` with ``max |o_i| <= radius`` whose first non-zero entry is positive.

    Every unordered pair of cells within ``radius`` is ``(i, i + o)`` for exactly one of them.
    Along the ``blocks`` dims (by position: variables, time scales, lags) no cell is another's
    neighbour: their offsets are 0.
    """
    out = [
        o
        for o in itertools.product(*(offset_steps(ax, radius, blocks) for ax in range(ndim)))
        if any(o) and next(v for v in o if v) > 0
    ]
    return np.array(out, dtype=np.int64).reshape(-1, ndim)


def offset_steps(ax: int, radius: int, blocks) -> range:
    return range(0, 1) if ax in blocks else range(-radius, radius + 1)


def interior(R: int, shape: tuple[int, ...], offset=None) -> tuple[slice, ...]:
    offset = (0,) * len(shape) if offset is None else offset
    return tuple(slice(R + o, R + o + s) for o, s in zip(offset, shape, strict=True))


def padded(block, R: int, pad: tuple[str | None, ...], shift=None) -> np.ndarray:
    """``block`` as float64 with the halo of the grid dims that are one chunk (``pad[ax]``:
    ``"wrap"`` round a periodic dim, ``"nan"`` off the grid's edge, None where Dask's overlap
    already added it), in one new array; ``shift`` (the extended block's shape), if given, is
    subtracted as the values are copied (the same numbers as subtracting afterwards, one sweep
    fewer)."""
    block = np.asarray(block)
    if R == 0 or not any(pad):
        if shift is None:
            return block.astype(np.float64)
        return np.subtract(block, shift, dtype=np.float64)
    width = [R if how else 0 for how in pad]
    a = np.empty(
        (block.shape[0], *(s + 2 * w for s, w in zip(block.shape[1:], width, strict=True)))
    )
    inner = (slice(None), *(slice(w, w + s) for s, w in zip(block.shape[1:], width, strict=True)))
    if shift is None:
        a[inner] = block
    else:
        np.subtract(block, np.asarray(shift)[inner[1:]], out=a[inner])
    for ax, how in enumerate(pad, start=1):
        if not how:
            continue
        lo = [slice(None)] * a.ndim
        hi = [slice(None)] * a.ndim
        lo[ax], hi[ax] = slice(0, R), slice(-R, None)
        if how == "wrap":  # the halo is the other edge (filled after the earlier dims')
            a[tuple(lo)] = a[tuple([*lo[:ax], slice(-2 * R, -R), *lo[ax + 1 :]])]
            a[tuple(hi)] = a[tuple([*hi[:ax], slice(R, 2 * R), *hi[ax + 1 :]])]
        else:
            a[tuple(lo)] = np.nan
            a[tuple(hi)] = np.nan
    return a


def stencil_chunk(
    block, y, segments, shift, R: int, offsets: np.ndarray, n_segments: int = 1, pad=()
) -> dict:
    """Moments of one block of samples of a haloed grid block, pooled within segments.

    ``block`` is ``(m, *halo_shape)`` with ``R`` cells of halo on every grid side (NaN outside
    the grid; or added here, see :func:`_pad`), ``y`` the target over those samples (or None),
    ``segments`` the segment (``0 .. n_segments - 1``) of every sample (None: one segment),
    ``shift`` a per-cell reference subtracted first. Every sample is centred on the mean of its
    segment in this block, so ``diag``, ``cross`` and ``ty`` are pooled within-segment
    co-moments: with calendar months as segments, the moments of the anomalies.
    """
    a = padded(block, R, pad, shift)
    m = a.shape[0]
    seg = np.zeros(m, dtype=np.int64) if segments is None else np.asarray(segments, np.int64)
    missing = np.isfinite(a)
    np.logical_not(missing, out=missing)  # in place: one bool array, not two
    np.putmask(a, missing, 0.0)  # twice as fast as a[missing] = 0.0
    n = np.bincount(seg, minlength=n_segments)
    # every cell's observed values per segment, and their mean
    flat = a.reshape(m, -1)
    holes = missing.reshape(m, -1)
    empty = holes.all(axis=0)  # no value in this block (land): none seen in any segment
    gaps = np.flatnonzero(holes.any(axis=0) & ~empty)
    if n_segments == 1:
        seen = (m - missing.sum(axis=0))[None]
        mean = a.sum(axis=0)[None] / np.maximum(seen, 1)
        a -= mean[0]
    else:  # one-hot products (BLAS) rather than one boolean copy per segment
        onehot = np.zeros((n_segments, m))
        onehot[seg, np.arange(m)] = 1.0
        seen = np.broadcast_to(n[:, None], (n_segments, flat.shape[1])).copy()
        seen[:, empty] = 0
        if gaps.size:  # missing values per segment, row by row (no float copy of the mask)
            lost = np.zeros((n_segments, gaps.size), dtype=np.int64)
            for t, s in enumerate(seg.tolist()):
                lost[s] += holes[t, gaps]
            seen[:, gaps] -= lost
        mean = (onehot @ flat) / np.maximum(seen, 1)
        subtract_by_group(flat, mean, seg)
        seen = seen.reshape(n_segments, *a.shape[1:])
        mean = mean.reshape(n_segments, *a.shape[1:])
    # a cell with no value in the block has mean 0 and stays 0; only the cells with some
    # values missing had their holes moved by the centring
    if gaps.size:
        part = flat[:, gaps]
        part[holes[:, gaps]] = 0.0
        flat[:, gaps] = part
    inner = tuple(s - 2 * R for s in a.shape[1:])
    core = (slice(None), *interior(R, inner))
    out = {"n": n, "seen": seen, "mean": mean, "count": m - missing[core].sum(axis=0)}
    yc = None
    if y is not None:
        y = np.asarray(y, dtype=np.float64)
        ymean = np.bincount(seg, weights=y, minlength=n_segments) / np.maximum(n, 1)
        yc = y - ymean[seg]
        yy = np.bincount(seg, weights=yc * yc, minlength=n_segments)
        out.update(ymean=ymean, yy=yy)
    out.update(_products(a, yc, R, inner, offsets))
    return out


_BAND_BYTES = 4 * 2**20


def _products(a: np.ndarray, yc, R: int, inner: tuple[int, ...], offsets: np.ndarray) -> dict:
    """Every cell's sums over samples of its products with itself (``diag``), its neighbours
    at ``offsets`` (``cross``) and the target (``ty``), from the centred, haloed ``a``.

    Taken a band of the first grid dim at a time, so that the band's values stay in cache
    across the products instead of streaming the whole block from memory once per product;
    each cell's sum is the same sequence of operations whatever the band, so the same bits.
    """
    diag = np.empty(inner)
    cross = np.empty((len(offsets), *inner))
    ty = None if yc is None else np.empty(inner)
    row = a[:, 0].nbytes
    step = max(1, _BAND_BYTES // max(row, 1) - 2 * R)
    for r0 in range(0, inner[0], step):
        r1 = min(r0 + step, inner[0])
        band = (slice(None), slice(R + r0, R + r1), *interior(R, inner[1:]))
        ci = a[band]
        diag[r0:r1] = np.einsum("t...,t...->...", ci, ci)
        for k, o in enumerate(offsets):
            near = (
                slice(None),
                slice(R + o[0] + r0, R + o[0] + r1),
                *interior(R, inner[1:], o[1:]),
            )
            cross[k, r0:r1] = np.einsum("t...,t...->...", ci, a[near])
        if yc is not None:
            ty[r0:r1] = np.einsum("t,t...->...", yc, ci)
    out = {"diag": diag, "cross": cross}
    if yc is not None:
        out["ty"] = ty
    return out


def stencil_combine(parts: list[dict], R: int, offsets: np.ndarray) -> dict:
    """Merge the moments of consecutive blocks of samples of the same grid block (Chan).

    The parts are merged in order; after the first merge the running result is this
    function's own, so the later merges update it in place, with one set of scratch arrays
    (no fresh memory per merge: a worker's allocator maps and faults in every new array of
    this size).
    """
    out = parts[0]
    work: dict = {}
    for k, b in enumerate(parts[1:]):
        out = stencil_merge(out, b, R, offsets, work=work, inplace=k > 0)
    return out


def stencil_merge(
    x: dict, y: dict, R: int, offsets: np.ndarray, *, work: dict | None = None, inplace=False
) -> dict:
    """Chan's update, all segments at once: within-segment co-moments add, plus
    ``n_x n_y / n`` times the product of the differences of the segment's means (``n``:
    every cell's observed values in the segment).

    ``inplace``: ``x``'s arrays are overwritten with the result (a running merge's own);
    ``work``: scratch arrays kept between the merges of one combine. Either way the numbers
    are those of :func:`dcfa.stats.kernels.chan_factors` and the same sums, bit for bit.
    """
    work = {} if work is None else work

    def scratch(name, like, dtype=np.float64):
        a = work.get(name)
        if a is None or a.shape != like.shape:
            a = work[name] = np.empty(like.shape, dtype=dtype)
        return a

    nx, ny = x["seen"], y["seen"]
    # chan_factors(nx, ny): counts are >= 0, so where n = 0 both numerators are 0 and
    # dividing by max(n, 1) gives its 0.0 without a mask
    prod = np.multiply(nx, ny, out=scratch("prod", nx, nx.dtype))
    seen = np.add(nx, ny, out=nx if inplace else None)
    denom = np.maximum(seen, 1, out=scratch("denom", nx, nx.dtype))
    w = np.divide(ny, denom, out=scratch("w", nx))
    f = np.divide(prod, denom, out=scratch("f", nx))
    inner = x["diag"].shape
    core = (slice(None), *interior(R, inner))
    d = np.subtract(y["mean"], x["mean"], out=scratch("d", w))
    dw = np.multiply(d, w, out=scratch("dw", w))
    mean = np.add(x["mean"], dw, out=x["mean"] if inplace else None)
    np.putmask(d, f == 0, 0.0)  # a cell seen in one part only (f = 0): no term
    fd = np.multiply(f[core], d[core], out=scratch("fd", f[core]))
    cross = np.add(x["cross"], y["cross"], out=x["cross"] if inplace else None)
    for k, o in enumerate(offsets):
        cross[k] += _segment_sum(fd, d[(slice(None), *interior(R, inner, o))], work)
    diag = np.add(x["diag"], y["diag"], out=x["diag"] if inplace else None)
    diag += _segment_sum(fd, d[core], work)
    out = {
        "n": x["n"] + y["n"],
        "seen": seen,
        "mean": mean,
        "count": np.add(x["count"], y["count"], out=x["count"] if inplace else None),
        "diag": diag,
        "cross": cross,
    }
    if "ty" in x:
        both = (x["n"] > 0) & (y["n"] > 0)
        with np.errstate(invalid="ignore"):
            dy = np.where(both, y["ymean"] - x["ymean"], 0.0)
        _, wy, fy = chan_factors(x["n"], y["n"])
        ty = np.add(x["ty"], y["ty"], out=x["ty"] if inplace else None)
        ty += _segment_sum(fd, dy, work)
        out.update(
            ymean=np.where(x["n"] > 0, x["ymean"] + dy * wy, y["ymean"]),
            yy=x["yy"] + y["yy"] + fy * dy * dy,
            ty=ty,
        )
    return out


def _segment_sum(a: np.ndarray, b: np.ndarray, work: dict) -> np.ndarray:
    """``(a * b).sum(axis=0)`` (``b`` of one value per segment, or like ``a``) without the
    ``a * b`` temporary: the products of one segment at a time, added in the same order."""
    out = work.get("sum")
    if out is None or out.shape != a.shape[1:]:
        out = work["sum"] = np.empty(a.shape[1:])
        work["term"] = np.empty(a.shape[1:])
    term = work["term"]
    np.multiply(a[0], b[0], out=out)
    for s in range(1, a.shape[0]):
        np.multiply(a[s], b[s], out=term)
        out += term
    return out


def stencil_shift(block, R: int = 0, pad=()) -> np.ndarray:
    """A per-cell reference so merged means stay small: the shift policy of every pass,
    :func:`dcfa.stats.kernels.column_shift`, for the halo-extended first block.

    Taken per cell from the block itself and then extended like the block (a wrapped halo
    cell gets its twin's shift, a cell off the grid's edge, all NaN, none): the same numbers
    as from the extended block, without a float64 copy of it.
    """
    block = np.asarray(block)
    shift = column_shift(block.reshape(block.shape[0], -1))
    shift = np.zeros(block.shape[1:]) if shift is None else shift.reshape(block.shape[1:])
    extended = padded(shift[None], R, pad)[0]
    return np.where(np.isnan(extended), 0.0, extended)

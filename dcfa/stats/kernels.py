"""NumPy kernels of the statistics engine: what runs on Dask workers. NumPy only.

A worker unpickles a task's function by importing its module; nothing here imports
scikit-learn, xarray, pandas or dask (checked in a fresh interpreter by the tests).

The moments kernels follow the chunk / combine / finalize pattern of dask and flox reductions
(finalize, which builds the :class:`~dcfa.stats.moments.Moments` value, is in
:mod:`dcfa.stats.moments`):

``chunk``
    moments of one row block of a pair of column blocks (a *tile*): count, means and centred
    cross-products, accumulated in float64 whatever the input dtype;
``combine``
    the pairwise update of Chan, Golub & LeVeque (1979) merging two centred tiles, never
    ``sum(x**2)/n - mean**2``, which loses every digit on data with a large offset.

A merge of many parts known at once (a fold's training segments, a grid pass's blocks of
samples) uses the same update for ``S`` parts: :func:`merge_parts` and :func:`between_parts`.

Two treatments of missing values:

``missing="exclude"``
    the plain statistics. A column with any NaN gets meaningless moments and is excluded
    (and reported) afterwards; a NaN never leaks into another column's statistics.
``missing="pairwise"``
    pairwise-complete statistics: entry ``(i, j)`` uses the rows where both ``i`` and ``j`` are
    observed. Every per-column quantity then becomes a ``(p, p)`` matrix (the mean of column
    ``i`` over the rows shared with ``j``), at about six times the cost.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "anomaly_block",
    "chunk_columns",
    "chunk_exclude",
    "chunk_pairwise",
    "column_shift",
    "between_parts",
    "combine",
    "merge_parts",
    "self_product",
    "subtract_by_group",
    "two_sum",
]


############################################################################################
# chunk: one row block of one tile


# Data whose mean is within this many standard deviations of the shift lose at most ~2
# digits in ``c.T @ c - s s^T / m``; beyond it a block is shifted (copied) first.
_SHIFT_RATIO = 10.0
_SHIFT_ROWS = 512  # rows of the first chunk used to choose the shift


def _as_float64(a: np.ndarray, shift: np.ndarray | None) -> np.ndarray:
    """A private float64 copy of ``a`` minus ``shift`` (the kernels then work in place)."""
    if shift is None:
        return np.array(a, dtype=np.float64, copy=True)
    return np.subtract(a, shift, dtype=np.float64)


def column_shift(a: np.ndarray) -> np.ndarray | None:
    """A per-column reference value for a column block, from its first row chunk.

    Every row block of a column is shifted by the same reference before its moments are
    taken, so the sums that the merge subtracts from each other are of the size of the spread,
    not of the offset (kelvin temperatures, 1e6 counts). Columns whose mean is already within
    a few standard deviations of 0 are not shifted; ``None`` when no column needs it, which
    lets the kernels use the input block without a copy.
    """
    a = a[:_SHIFT_ROWS]
    n = a.shape[1]
    # Row by row into a few vectors of the block's width, not (rows, n) temporaries: the
    # same additions in the same order as sum(axis=0), and no fresh memory. Dask's nannies set
    # MALLOC_TRIM_THRESHOLD_, which pins glibc's mmap threshold at 128 KiB: every larger
    # temporary is a new mapping whose pages are faulted in (on a 1 degree grid, pieces of
    # 2 048 columns took 0.24 s in a worker, 0.04 s elsewhere). A single column is summed
    # as a contiguous vector (pairwise), as before.
    shift = _column_shift(a) if n == 1 else _column_shift_rows(a)
    return shift if shift.any() else None


@np.errstate(invalid="ignore", over="ignore")  # inf and huge values: no shift, no warning
def _column_shift(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    obs = np.isfinite(a)
    count = obs.sum(axis=0)
    a0 = np.where(obs, a, 0.0)
    mean = np.divide(a0.sum(axis=0), count, out=np.zeros(a.shape[1]), where=count > 0)
    dev = np.where(obs, a - mean, 0.0)
    std = np.sqrt(
        np.divide((dev * dev).sum(axis=0), count, out=np.zeros(a.shape[1]), where=count > 0)
    )
    return np.where(np.abs(mean) > _SHIFT_RATIO * std, mean, 0.0)


@np.errstate(invalid="ignore", over="ignore")
def _column_shift_rows(a: np.ndarray) -> np.ndarray:
    """:func:`_column_shift` of a block of several columns, the same numbers, a row at a time."""
    n = a.shape[1]
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    obs = np.empty(n, dtype=bool)
    lost = np.empty(n, dtype=bool)
    row64 = np.empty(n)
    for row in a:
        np.isfinite(row, out=obs)
        count += obs
        np.logical_not(obs, out=lost)
        np.copyto(row64, row)
        np.putmask(row64, lost, 0.0)
        total += row64
    mean = np.divide(total, count, out=np.zeros(n), where=count > 0)
    squares = np.zeros(n)
    for row in a:
        np.isfinite(row, out=obs)
        np.logical_not(obs, out=lost)
        np.subtract(row, mean, out=row64)
        np.putmask(row64, lost, 0.0)
        np.multiply(row64, row64, out=row64)
        squares += row64
    std = np.sqrt(np.divide(squares, count, out=np.zeros(n), where=count > 0))
    return np.where(np.abs(mean) > _SHIFT_RATIO * std, mean, 0.0)


def _prepare(a, shift):
    """``(c, column sums, observed counts)`` of a block, ``c`` shifted with NaN set to 0.

    Float64 blocks that need no shift and hold no NaN are used as they are (no copy).
    """
    m = a.shape[0]
    if shift is None and a.dtype == np.float64:
        s = a.sum(axis=0)
        if np.isfinite(s).all():
            return a, s, np.full(a.shape[1], m)
    c = _as_float64(a, shift)
    s = c.sum(axis=0)
    count = np.full(a.shape[1], m)
    if not np.isfinite(s).all():
        bad = ~np.isfinite(c)
        c[bad] = 0.0
        count = m - bad.sum(axis=0)
        s = c.sum(axis=0)
    return c, s, count


# Widest self-product left to BLAS's symmetric kernel: OpenBLAS's threaded syrk crashes the
# process (SIGSEGV) on AVX-512 machines for outputs of about 19 000 columns and more (0.3.31,
# SkylakeX kernels); its general product does not.
SYRK_COLUMNS = 8192


def self_product(c: np.ndarray) -> np.ndarray:
    """``c.T @ c``: BLAS syrk up to :data:`SYRK_COLUMNS` columns, a general product beyond.

    NumPy calls syrk when both operands are the same array; a copy of ``c`` makes it call
    gemm instead: twice the flops (about 1.5x the time of a threaded syrk at 500 x 20 000),
    and never the syrk that crashes.
    """
    if c.shape[1] <= SYRK_COLUMNS:
        return c.T @ c
    return c.T @ c.copy()


def chunk_exclude(a, b=None, shift_a=None, shift_b=None, *, column_stats=False) -> dict:
    """Moments of one row block of the column blocks ``a`` (m x I) and ``b`` (m x J).

    ``b=None`` marks a diagonal tile (``b`` is ``a``); only diagonal tiles carry the
    per-column count of observed values, which is what exclusion needs. Means are returned
    relative to the shifts (see :func:`column_shift`). Non-finite values are treated as
    missing; their column's moments are then meaningless and the column is excluded later.
    ``column_stats``: also the count and centred sum of squares of every column of ``a``
    (``count_a``, ``m2_a``), for passes that skip the diagonal tiles.
    """
    m = a.shape[0]
    ca, sa, count_a = _prepare(a, shift_a)
    mean_a = sa / m if m else np.zeros(a.shape[1])
    if b is None:
        if ca is not a and m < a.shape[1]:
            # a short, wide block of our own: centring its m x I values costs less than
            # taking the mean's rank-one term off the I x I product
            ca -= mean_a
            cross = self_product(ca)
        else:
            cross = self_product(ca)
            _sub_outer(cross, sa, mean_a)
        return {"n": m, "count_a": count_a, "mean_a": mean_a, "mean_b": mean_a, "cross": cross}
    cb, sb, _ = _prepare(b, shift_b)
    mean_b = sb / m if m else np.zeros(b.shape[1])
    cross = ca.T @ cb
    _sub_outer(cross, sa, mean_b)
    out = {"n": m, "mean_a": mean_a, "mean_b": mean_b, "cross": cross}
    if column_stats:
        out["count_a"] = count_a
        out["m2_a"] = np.einsum("ij,ij->j", ca, ca) - sa * mean_a
    return out


def chunk_columns(a, b=None, shift_a=None, shift_b=None) -> dict:
    """Per-column moments and range of one row block of the column block ``a`` (m x I), and
    its count of non-finite entries: what a standardisation needs, without the ``I x I`` tile.

    The per-column fields of :func:`chunk_exclude` with ``column_stats`` (``count_a``, ``mean_a``
    relative to ``shift_a``, the centred sum of squares ``m2_a``), merged by the same
    :func:`combine`, plus ``min_a`` / ``max_a`` of the shifted values (an exact constant-column
    test: ``min_a == max_a``) and ``bad``. The sum of squares is taken around the block's own
    mean (two passes over the block). Non-finite values count as missing, as in
    :func:`chunk_exclude`: their column's moments are meaningless, no other column's change.
    ``b`` and ``shift_b`` are unused: the signature of a diagonal tile's kernel.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        c = np.asarray(a, dtype=np.float64)
        finite = np.isfinite(c)
        count = finite.sum(axis=0)
        bad = int(c.size - count.sum())
        if shift_a is not None:
            c = c - shift_a
        if bad:  # as missing: the column's moments are meaningless, the others' untouched
            c = np.where(finite, c, 0.0)
        m = c.shape[0]
        if m == 0:
            zeros = np.zeros(c.shape[1])
            return {"n": 0, "count_a": count, "mean_a": zeros, "mean_b": zeros, "m2_a": zeros,
                    "min_a": zeros + np.inf, "max_a": zeros - np.inf, "bad": 0}  # fmt: skip
        mean = c.mean(axis=0)
        dev = c - mean
        return {
            "n": m,
            "count_a": count,
            "mean_a": mean,
            "mean_b": mean,
            "m2_a": np.einsum("ij,ij->j", dev, dev),
            "min_a": c.min(axis=0),
            "max_a": c.max(axis=0),
            "bad": bad,
        }


# rank-one updates of a tile are applied by row blocks of this many bytes: never a second
# p x p temporary, and the same float operations on every element
_BLOCK_BYTES = 2**24


def row_blocks(n_rows: int, n_cols: int | None = None, nbytes: int = _BLOCK_BYTES) -> list[slice]:
    """Row slices of an ``n_rows x n_cols`` float64 array (square by default), ``nbytes`` each."""
    step = max(1, nbytes // (8 * max(n_cols or n_rows, 1)))
    return [slice(i, i + step) for i in range(0, n_rows, step)]


def _sub_outer(cross: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """``cross -= outer(u, v)`` in place, by row blocks."""
    for b in row_blocks(u.size, v.size):
        cross[b] -= np.multiply.outer(u[b], v)


def chunk_pairwise(a, b=None, shift_a=None, shift_b=None) -> dict:
    """Pairwise-complete moments of one row block of a tile.

    Entry ``(i, j)`` of every returned matrix uses the rows where ``a[:, i]`` and ``b[:, j]``
    are both observed. Within the block, columns are centred on their block mean first, so
    the sums are of small numbers and the final subtraction loses little.
    """
    diagonal = b is None
    a, obs_a, sa = _centred(a, shift_a)
    if diagonal:
        b, obs_b, sb = a, obs_a, sa
    else:
        b, obs_b, sb = _centred(b, shift_b)
    count = obs_a.T @ obs_b
    sum_a = a.T @ obs_b
    sum_b = obs_a.T @ b
    with np.errstate(invalid="ignore", divide="ignore"):
        ma = np.where(count > 0, sum_a / count, 0.0)
        mb = np.where(count > 0, sum_b / count, 0.0)
    m2_a = (a * a).T @ obs_b - sum_a * ma
    m2_b = obs_a.T @ (b * b) - sum_b * mb
    cross = a.T @ b - sum_a * mb
    return {
        "n": a.shape[0],
        "count": count,
        "mean_a": sa[:, None] + ma,
        "mean_b": sb[None, :] + mb,
        "m2_a": np.maximum(m2_a, 0.0),
        "m2_b": np.maximum(m2_b, 0.0),
        "cross": cross,
    }


def _centred(a, shift):
    a = _as_float64(a, shift)
    obs = np.isfinite(a)
    a[~obs] = 0.0
    count = obs.sum(axis=0)
    centre = np.divide(a.sum(axis=0), count, out=np.zeros(a.shape[1]), where=count > 0)
    a -= centre
    a[~obs] = 0.0
    return a, obs.astype(np.float64), centre


def two_sum(a, b) -> tuple:
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly (Knuth's TwoSum).

    A mean taken around a shift (``shift + mean_of_shifted``) rounds to the ulp of the
    shift: at 1e8 that is 1.5e-8, far more than an anomaly's mean can tolerate when two
    values' means are later subtracted (:meth:`dcfa.Moments.merge`). ``e`` keeps the digits.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf or huge: no residual to keep
        s = a + b
        bb = s - a
        e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(e), e, 0.0)


############################################################################################
# combine: Chan et al. merge of two centred tiles


def combine(parts: list[dict]) -> dict:
    """Merge the moments of disjoint row blocks of the same tile (in order: a left fold)."""
    out = parts[0]
    owned = False  # whether out's matrix is this call's own, so later merges may reuse it
    for part in parts[1:]:
        if "count" in out:
            out = _merge_pairwise(out, part)
        else:
            fresh = out["n"] > 0 and part["n"] > 0
            out = _merge_exclude(out, part, into="x" if owned else None)
            owned = owned or fresh
    return out


def fold_chunk(acc: dict, kernel, *args) -> dict:
    """``combine([acc, kernel(*args)])``, the chunk's own matrix reused for the result.

    One step of a row-chunk fold: the task holds the running tile and one chunk's tile,
    never the ``split_every`` chunk tiles of a ``combine`` at once. Same numbers bit for bit.
    """
    part = kernel(*args)
    if "count" in part or acc["n"] == 0 or part["n"] == 0:
        return combine([acc, part])
    return _merge_exclude(acc, part, into="y")


def chan_factors(n_x, n_y):
    """The factors of Chan, Golub & LeVeque's update merging two disjoint sets of ``n_x`` and
    ``n_y`` observations: the merged count ``n``, ``w = n_y / n`` (the mean moves by ``w d``
    towards the second set's, ``d`` the difference of their means) and ``f = n_x n_y / n``
    (the centred co-moments gain ``f d d'``). Elementwise for array counts, 0 where ``n == 0``.

    Every merge of dcfa applies these to its own layout of co-moments (a tile's outer
    product, a stencil's offsets, one column's sum of squares).
    """
    n = n_x + n_y
    if np.ndim(n) == 0:
        return n, (n_y / n if n else 0.0), (n_x * n_y / n if n else 0.0)
    some = n > 0  # divided where there is something to divide: no NaN to mask afterwards
    w = np.divide(n_y, n, out=np.zeros(np.shape(n)), where=some)
    f = np.divide(n_x * n_y, n, out=np.zeros(np.shape(n)), where=some)
    return n, w, f


def relative_mean(mean, lo, ref) -> np.ndarray:
    """``mean + lo - ref``: the difference first (exact for close values), then ``lo`` (the
    mean's rounding error, :func:`two_sum`'s; None when unknown). What :func:`merge_parts`
    takes, relative to one part's exact mean."""
    rel = np.subtract(mean, ref)
    return rel if lo is None else rel + lo


def merge_parts(n_s: np.ndarray, means: np.ndarray) -> tuple:
    """Chan's update for ``S`` disjoint parts at once, the means: ``(n, mean, dev)``.

    ``n_s`` holds the parts' counts, shape (S,), or one count per element of ``means``
    (pairwise statistics); ``means`` (S, ...) their means, relative to any common reference
    (the result is then relative to it too: keep the reference close, so the deviations keep
    their digits). ``n = sum(n_s)``, ``mean = sum(n_s means) / n`` (0 where ``n == 0``) and
    ``dev = means - mean``. The union's centred (co-)moments are the parts' own, summed, plus
    :func:`between_parts` of these deviations.

    Every merge of several row sets' statistics values goes through this function and
    :func:`between_parts`: the moments, their rows read one at a time, the grid's and the
    column statistics.
    """
    n_s = np.asarray(n_s, dtype=np.float64)
    means = np.asarray(means, dtype=np.float64)
    if n_s.ndim == 1:
        n = n_s.sum()
        mean = n_s @ means / n
        return n, mean, means - mean
    n = n_s.sum(axis=0)
    mean = np.divide((n_s * means).sum(axis=0), n, out=np.zeros(np.shape(n)), where=n > 0)
    return n, mean, means - mean


def sum_parts(values) -> np.ndarray:
    """The parts' own values (counts, sums of squares, co-moments) added in order, into a new
    array: what :func:`between_parts` is added to."""
    out = np.array(values[0])
    for v in values[1:]:
        out += v
    return out


def between_parts(n_s: np.ndarray, dev_a: np.ndarray, dev_b: np.ndarray | None = None):
    """``sum_s n_s[s] dev_a[s] dev_b[s]``: what the parts' spread around the union's mean adds
    to its centred co-moments (the ``S``-part form of :func:`chan_factors`' ``f d d'``).

    ``dev_a`` and ``dev_b`` (``dev_a`` by default) are :func:`merge_parts` deviations with the
    parts on their first axis; a ``dev_a`` with fewer axes is broadcast over ``dev_b``'s
    trailing ones (a target's deviations against every column's, a row's against a block's).
    ``n_s`` is (S,) or per element, as in :func:`merge_parts`.

    Summed part by part, element by element: any row, column or block of a merged matrix is
    the same number as the whole matrix's, bit for bit, however it is cut.
    """
    if dev_b is None:
        dev_b = dev_a
    dev_a = np.reshape(dev_a, np.shape(dev_a) + (1,) * (np.ndim(dev_b) - np.ndim(dev_a)))
    out = dev_a[0] * dev_b[0]
    out *= n_s[0]
    if np.ndim(out) == 0:  # scalars (a target's sum of squares)
        for s in range(1, len(n_s)):
            out = out + dev_a[s] * dev_b[s] * n_s[s]
        return out
    t = np.empty_like(out)  # one temporary for every part
    for s in range(1, len(n_s)):
        np.multiply(dev_a[s], dev_b[s], out=t)
        t *= n_s[s]
        out += t
    return out


def _merge_exclude(x: dict, y: dict, into: str | None = None) -> dict:
    """Chan et al. merge; ``into="x"`` / ``"y"`` writes the result into that side's matrix."""
    if x["n"] == 0 or y["n"] == 0:
        return dict(y if x["n"] == 0 else x)
    n, w, f = chan_factors(x["n"], y["n"])
    d_a = y["mean_a"] - x["mean_a"]
    d_b = d_a if y["mean_b"] is y["mean_a"] else y["mean_b"] - x["mean_b"]
    out = {
        "n": n,
        "mean_a": x["mean_a"] + d_a * w,
    }
    if "cross" in x:  # x + y + outer(d_a, d_b) * f, element by element in that order
        cross = {"x": x["cross"], "y": y["cross"], None: None}[into]
        cross = np.add(x["cross"], y["cross"], out=cross)
        for b in row_blocks(d_a.size, d_b.size):
            t = np.multiply.outer(d_a[b], d_b)
            t *= f  # in place: one row block's temporary, not two
            cross[b] += t
        out["cross"] = cross
    out["mean_b"] = out["mean_a"] if x["mean_b"] is x["mean_a"] else x["mean_b"] + d_b * w
    if "count_a" in x:
        out["count_a"] = x["count_a"] + y["count_a"]
    if "m2_a" in x:
        out["m2_a"] = x["m2_a"] + y["m2_a"] + d_a * d_a * f
    if "min_a" in x:  # chunk_columns' range and non-finite count
        out["min_a"] = np.minimum(x["min_a"], y["min_a"])
        out["max_a"] = np.maximum(x["max_a"], y["max_a"])
        out["bad"] = x["bad"] + y["bad"]
    return out


def _merge_pairwise(x: dict, y: dict) -> dict:
    n, w, f = chan_factors(x["count"], y["count"])
    d_a = y["mean_a"] - x["mean_a"]
    d_b = y["mean_b"] - x["mean_b"]
    return {
        "n": x["n"] + y["n"],
        "count": n,
        "mean_a": x["mean_a"] + d_a * w,
        "mean_b": x["mean_b"] + d_b * w,
        "m2_a": x["m2_a"] + y["m2_a"] + d_a * d_a * f,
        "m2_b": x["m2_b"] + y["m2_b"] + d_b * d_b * f,
        "cross": x["cross"] + y["cross"] + d_a * d_b * f,
    }


############################################################################################
# other block kernels (the preprocessing's anomalies)


def subtract_by_group(out: np.ndarray, table: np.ndarray, groups) -> None:
    """``out[t] -= table[groups[t]]`` for every row ``t``, in place: row by row, in cache,
    rather than an ``(m, ...)`` temporary (``table[groups]``) or a gather and scatter per group;
    the same float operations, so the same bits."""
    for t, g in enumerate(np.asarray(groups).tolist()):
        out[t] -= table[g]


def anomaly_block(block, clim, scale, groups, *, out_dtype):
    """``(block - clim[groups]) / scale`` in float64 (either may be None), as ``out_dtype``."""
    out = np.array(block, dtype=np.float64)  # a copy we own: the rest is in place
    if clim is None:  # standardisation only
        pass
    elif clim.shape[0] == 1:
        out -= clim[0]
    else:
        subtract_by_group(out, clim, groups)
    if scale is not None:
        out /= scale
    return out.astype(out_dtype, copy=False)

"""Sufficient statistics of ``[X, y]``: the ``Moments`` value and its NumPy kernels.

Everything LinCFA, NonLinCFA and GenLinCFA decide is a function of the sample count, the
column means and the centred cross-product matrix of ``Z = [X, Y]`` (ALGORITHMS.md section 1).
This module holds the arithmetic on in-memory blocks; :mod:`dcfa._graph` runs the same kernels
over the tiles of a chunked Dask array.

The kernels follow the chunk / combine / finalize pattern of dask and flox reductions:

``chunk``
    moments of one row block of a pair of column blocks (a *tile*): count, means and centred
    cross-products, accumulated in float64 whatever the input dtype;
``combine``
    the pairwise update of Chan, Golub & LeVeque (1979) merging two centred tiles, never
    ``sum(x**2)/n - mean**2``, which loses every digit on data with a large offset;
``finalize``
    assembling the tiles into a :class:`Moments`.

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

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Moments", "moments", "MISSING_POLICIES"]

MISSING_POLICIES = ("exclude", "pairwise")

# A column whose standard deviation is below this fraction of its mean magnitude is
# constant up to float64 rounding (a truly constant column gives ~1e-16 relative).
_CONSTANT_RTOL = 1e-10


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
    a = np.asarray(a[:_SHIFT_ROWS], dtype=np.float64)
    obs = np.isfinite(a)
    count = obs.sum(axis=0)
    a0 = np.where(obs, a, 0.0)
    mean = np.divide(a0.sum(axis=0), count, out=np.zeros(a.shape[1]), where=count > 0)
    dev = np.where(obs, a - mean, 0.0)
    std = np.sqrt(
        np.divide((dev * dev).sum(axis=0), count, out=np.zeros(a.shape[1]), where=count > 0)
    )
    shift = np.where(np.abs(mean) > _SHIFT_RATIO * std, mean, 0.0)
    return shift if shift.any() else None


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
        cross = ca.T @ ca  # syrk
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


# rank-one updates of a tile are applied by row blocks of this many bytes: never a second
# p x p temporary, and the same float operations on every element
_BLOCK_BYTES = 2**24


def _row_blocks(n_rows: int, n_cols: int) -> list[slice]:
    step = max(1, _BLOCK_BYTES // (8 * max(n_cols, 1)))
    return [slice(i, i + step) for i in range(0, n_rows, step)]


def _sub_outer(cross: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
    """``cross -= outer(u, v)`` in place, by row blocks."""
    for b in _row_blocks(u.size, v.size):
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


def _merge_exclude(x: dict, y: dict, into: str | None = None) -> dict:
    """Chan et al. merge; ``into="x"`` / ``"y"`` writes the result into that side's matrix."""
    n = x["n"] + y["n"]
    if x["n"] == 0 or y["n"] == 0:
        return dict(y if x["n"] == 0 else x)
    f = x["n"] * y["n"] / n
    d_a = y["mean_a"] - x["mean_a"]
    d_b = d_a if y["mean_b"] is y["mean_a"] else y["mean_b"] - x["mean_b"]
    out = {
        "n": n,
        "mean_a": x["mean_a"] + d_a * (y["n"] / n),
    }
    # x + y + outer(d_a, d_b) * f, element by element in that order (+ is commutative)
    cross = {"x": x["cross"], "y": y["cross"], None: None}[into]
    cross = np.add(x["cross"], y["cross"], out=cross)
    for b in _row_blocks(d_a.size, d_b.size):
        cross[b] += np.multiply.outer(d_a[b], d_b) * f
    out["cross"] = cross
    out["mean_b"] = (
        out["mean_a"] if x["mean_b"] is x["mean_a"] else x["mean_b"] + d_b * (y["n"] / n)
    )
    if "count_a" in x:
        out["count_a"] = x["count_a"] + y["count_a"]
    if "m2_a" in x:
        out["m2_a"] = x["m2_a"] + y["m2_a"] + d_a * d_a * f
    return out


def _merge_pairwise(x: dict, y: dict) -> dict:
    n = x["count"] + y["count"]
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(n > 0, y["count"] / n, 0.0)
        f = np.where(n > 0, x["count"] * y["count"] / n, 0.0)
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
# finalize: tiles -> Moments


def finalize(tile: dict, n_targets: int, missing: str, shift=None) -> Moments:
    """Moments from the single (diagonal) tile covering every column."""
    shift = np.zeros(tile["cross"].shape[0]) if shift is None else shift
    if missing == "pairwise":
        return Moments(
            n=int(tile["n"]),
            n_targets=n_targets,
            count=tile["count"],
            mean=tile["mean_a"] + np.asarray(shift)[..., None],
            cross=tile["cross"],
            m2=tile["m2_a"],
        )
    return Moments(
        n=int(tile["n"]),
        n_targets=n_targets,
        count=tile["count_a"],
        mean=tile["mean_a"] + shift,
        cross=tile["cross"],
    )


def from_numpy(Z: np.ndarray, n_targets: int, missing: str = "exclude") -> Moments:
    """In-memory path: ``finalize(chunk(Z))``, the same code as each Dask tile."""
    kernel = chunk_pairwise if missing == "pairwise" else chunk_exclude
    shift = column_shift(Z[:1000])
    return finalize(kernel(Z, shift_a=shift), n_targets, missing, shift)


############################################################################################
# the public entry point


def moments(
    X,
    y=None,
    *,
    sample_dim: str = "time",
    missing: str = "exclude",
    segments=None,
    split_every: int | None = None,
    compute: bool = True,
):
    """One pass over ``X`` (and the target(s) ``y``) giving their :class:`Moments`.

    Parameters
    ----------
    X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        Samples in rows. A Dask array may be chunked along either axis or both; the
        ``(p, p)`` result is assembled from tiles so no task holds more than two input chunks.
        A DataArray is stacked: every dim but ``sample_dim`` becomes a feature.
    y : array-like of shape (n_samples,) or (n_samples, k), default=None
        Target(s), appended as the last ``k`` columns. Must be finite.
    sample_dim : str, default="time"
        The dim of a DataArray ``X`` (and ``y``) that indexes samples.
    missing : {"exclude", "pairwise"}, default="exclude"
        ``"exclude"``: columns with any NaN are reported in :attr:`Moments.excluded` (all-NaN
        land cells, gappy series) and their statistics are not used. ``"pairwise"``:
        pairwise-complete statistics, each pair of columns over the rows where both are
        observed.
    segments : sequence of int, default=None
        Row boundaries ``[0, b1, ..., n]`` of contiguous segments (e.g. cross-validation
        folds) reduced separately in the same pass; a list of :class:`Moments` is returned.
    split_every : int, default=8
        Fan-in of the tree that merges row chunks.
    compute : bool, default=True
        If False, return :class:`Moments` holding Dask arrays; call :meth:`Moments.compute`
        (one ``dask.compute``) to get the numbers.

    Returns
    -------
    Moments or list of Moments

    Examples
    --------
    >>> import numpy as np, dask.array as da, dcfa
    >>> rng = np.random.default_rng(0)
    >>> X = da.from_array(rng.normal(size=(1000, 6)) + 1e6, chunks=(250, 3))
    >>> m = dcfa.moments(X, rng.normal(size=1000))
    >>> m.n, m.n_features, m.target_corr().shape
    (1000, 6, (6, 1))
    """
    from dcfa._graph import tiled_moments
    from dcfa._validation import check_X, check_y

    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing: expected one of {MISSING_POLICIES}, got {missing!r}")
    inp = check_X(X, sample_dim=sample_dim)
    n = inp.n_samples
    if n < 1:
        raise ValueError(f"X: expected at least 1 sample, got {n}")
    Y = None if y is None else check_y(y, n, layout=inp.layout, allow_constant=True)
    k = 0 if Y is None else Y.shape[1]
    bounds = _check_segments(segments, n)
    if compute or not inp.is_dask:  # the p x p result is built now: it must fit the budget
        from dcfa.memory import check_moments

        check_moments(
            n,
            inp.n_features,
            n_targets=k,
            segments=bounds,
            missing=missing,
            data=inp.data,
            split_every=split_every,
        )

    if inp.is_dask:
        Yd = None if Y is None else _dask_target(Y, inp.data.chunks[0])
        lazy = tiled_moments(
            inp.data, Yd, missing=missing, segments=bounds, split_every=split_every
        )
        result = [
            Moments(n=b1 - b0, n_targets=k, m2=f.pop("m2", None), **f)
            for (b0, b1), f in zip(_pairs_of(bounds), lazy, strict=True)
        ]
        if compute:
            result = compute_all(result)
    else:
        Z = inp.data if Y is None else np.column_stack([inp.data, Y])
        result = [from_numpy(Z[b0:b1], k, missing) for b0, b1 in _pairs_of(bounds)]
    return result[0] if segments is None else result


def compute_all(parts: list[Moments]) -> list[Moments]:
    """Compute lazy :class:`Moments` (from ``compute=False``) in one ``dask.compute``."""
    from dcfa._compute import compute

    fields = [(p.count, p.mean, p.cross, p.m2) for p in parts]
    done = compute(fields)[0]
    return [
        Moments(n=p.n, n_targets=p.n_targets, count=c, mean=mu, cross=cr, m2=m2)
        for p, (c, mu, cr, m2) in zip(parts, done, strict=True)
    ]


def _dask_target(Y: np.ndarray, row_chunks):
    import dask.array as da

    return da.from_array(Y, chunks=(row_chunks, Y.shape[1]))


def _pairs_of(bounds: list[int]):
    return zip(bounds[:-1], bounds[1:], strict=True)


def _check_segments(segments, n: int) -> list[int]:
    if segments is None:
        return [0, n]
    b = np.asarray(segments)
    if b.ndim != 1 or b.size < 2 or not np.issubdtype(b.dtype, np.integer):
        raise ValueError(
            f"segments: expected increasing int boundaries [0, ..., {n}], got {segments!r}"
        )
    if b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
        raise ValueError(
            f"segments: expected strictly increasing boundaries from 0 to n={n}, got {list(b)}"
        )
    return [int(v) for v in b]


############################################################################################
# the value


@dataclass(frozen=True, eq=False)
class Moments:
    """Count, means and centred cross-products of ``Z = [X, Y]`` (``p = D + k`` columns).

    Build one with :func:`dcfa.moments`; this class holds the result and derives covariance,
    correlation and correlation with the target(s) from it. Two values computed on disjoint
    row sets merge into the value of their union (:meth:`merge`); :meth:`save` and
    :meth:`load` round-trip through a Zarr store.

    Parameters
    ----------
    n : int
        Number of rows (samples) seen.
    n_targets : int
        Number ``k`` of target columns; they are the last ``k`` columns of ``Z``.
    count : ndarray of shape (p,) or (p, p)
        Observed (non-NaN) values per column, or per pair of columns when ``m2`` is given.
    mean : ndarray of shape (p,) or (p, p)
        Column means; pairwise: ``mean[i, j]`` is the mean of column ``i`` over the rows where
        ``i`` and ``j`` are both observed.
    cross : ndarray of shape (p, p)
        Centred cross-products ``sum_r (z_ri - mean_i)(z_rj - mean_j)``.
    m2 : ndarray of shape (p, p) or None
        Pairwise only: ``m2[i, j]`` is the sum of squared deviations of column ``i`` over the
        rows shared with ``j``. ``None`` for ``missing="exclude"`` statistics.

    Notes
    -----
    Accumulation is float64, and blocks are merged with the centred update of Chan, Golub &
    LeVeque (1979); on data with an offset of 1e6 and unit spread the correlations agree with a
    two-pass float64 computation to about 1e-12.
    """

    n: int
    n_targets: int
    count: np.ndarray
    mean: np.ndarray
    cross: np.ndarray
    m2: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_lazy(self) -> bool:
        """Whether the fields are Dask arrays (from ``moments(..., compute=False)``)."""
        return not isinstance(self.cross, np.ndarray)

    def compute(self) -> Moments:
        """The computed value (itself when already computed)."""
        return compute_all([self])[0] if self.is_lazy else self

    # -- shape ---------------------------------------------------------------------------

    @property
    def pairwise(self) -> bool:
        """Whether these are pairwise-complete statistics."""
        return self.m2 is not None

    @property
    def missing(self) -> str:
        return "pairwise" if self.pairwise else "exclude"

    @property
    def n_columns(self) -> int:
        return self.cross.shape[0]

    @property
    def n_features(self) -> int:
        return self.n_columns - self.n_targets

    # -- per-column statistics -------------------------------------------------------------

    @property
    def column_count(self) -> np.ndarray:
        """Observed values per column, shape (p,)."""
        return np.diagonal(self.count).copy() if self.pairwise else self.count

    @property
    def column_mean(self) -> np.ndarray:
        """Mean of each column over its observed values, shape (p,)."""
        return np.diagonal(self.mean).copy() if self.pairwise else self.mean

    def column_var(self, ddof: int = 1) -> np.ndarray:
        """Variance of each column over its observed values, shape (p,)."""
        ss = np.diagonal(self.m2 if self.pairwise else self.cross)
        denom = self.column_count - ddof
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denom > 0, ss / denom, np.nan)

    def column_std(self, ddof: int = 1) -> np.ndarray:
        return np.sqrt(self.column_var(ddof))

    # -- exclusion --------------------------------------------------------------------------

    @property
    def excluded(self) -> dict[int, str]:
        """Features (not targets) that carry no usable information, with the reason.

        All-NaN columns, columns with missing values under ``missing="exclude"``, columns with
        fewer than 2 observed values, and constant columns.
        """
        if "excluded" not in self._cache:
            self._cache["excluded"] = _exclusions(self)
        return dict(self._cache["excluded"])

    @property
    def valid(self) -> np.ndarray:
        """Boolean mask over the ``D`` features: True where the feature is usable."""
        mask = np.ones(self.n_features, dtype=bool)
        mask[list(self.excluded)] = False
        return mask

    # -- second moments -------------------------------------------------------------------

    def cov(self, ddof: int = 1) -> np.ndarray:
        """Covariance matrix of all ``p`` columns (pairwise: over each pair's shared rows)."""
        denom = (self.count if self.pairwise else self.n) - ddof
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denom > 0, self.cross / denom, np.nan)

    def corr(self) -> np.ndarray:
        """Correlation matrix of all ``p`` columns, clipped to [-1, 1]; NaN where undefined."""
        if "corr" not in self._cache:
            self._cache["corr"] = self._corr_block(slice(None), slice(None))
        return self._cache["corr"]

    def feature_corr(self) -> np.ndarray:
        """Correlations among the ``D`` features, shape (D, D)."""
        d = self.n_features
        return self._corr_block(slice(0, d), slice(0, d))

    def target_corr(self) -> np.ndarray:
        """Correlation of each feature with each target, shape (D, k)."""
        d = self.n_features
        return self._corr_block(slice(0, d), slice(d, None))

    def target_var(self, ddof: int = 1) -> np.ndarray:
        return self.column_var(ddof)[self.n_features :]

    def _corr_block(self, rows: slice, cols: slice) -> np.ndarray:
        if "corr" in self._cache:
            return self._cache["corr"][rows, cols]
        if self.pairwise:
            ss_r, ss_c = self.m2[rows, cols], self.m2.T[rows, cols]
        else:
            diag = np.diagonal(self.cross)
            ss_r, ss_c = diag[rows][:, None], diag[cols][None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self.cross[rows, cols] / np.sqrt(ss_r * ss_c)
        r[~np.isfinite(r)] = np.nan
        return np.clip(r, -1.0, 1.0, out=r)

    # -- algebra ----------------------------------------------------------------------------

    def merge(self, other: Moments) -> Moments:
        """Moments of the union of two disjoint row sets (same columns, same treatment)."""
        if not isinstance(other, Moments):
            raise TypeError(f"other: expected Moments, got {type(other).__name__}")
        if (other.n_columns, other.n_targets, other.pairwise) != (
            self.n_columns,
            self.n_targets,
            self.pairwise,
        ):
            raise ValueError(
                "other: can only merge moments of the same columns and missing-value treatment; "
                f"got {other.n_columns} columns/{other.n_targets} targets/{other.missing} "
                f"and {self.n_columns}/{self.n_targets}/{self.missing}"
            )
        merged = combine([self._as_tile(), other._as_tile()])
        return finalize(merged, self.n_targets, self.missing)

    @classmethod
    def merge_all(cls, parts: list[Moments]) -> Moments:
        """Merge several disjoint row sets (e.g. the training folds of a cross-validation)."""
        if not parts:
            raise ValueError("parts: need at least one Moments to merge")
        out = parts[0]
        for p in parts[1:]:
            out = out.merge(p)
        return out

    def _as_tile(self) -> dict:
        if self.pairwise:
            return {
                "n": self.n,
                "count": self.count,
                "mean_a": self.mean,
                "mean_b": self.mean.T,
                "m2_a": self.m2,
                "m2_b": self.m2.T,
                "cross": self.cross,
            }
        return {
            "n": self.n,
            "count_a": self.count,
            "mean_a": self.mean,
            "mean_b": self.mean,
            "cross": self.cross,
        }

    # -- storage ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write to a Zarr (v3) store at ``path``, atomically.

        The store is written under a temporary name next to ``path`` and renamed into place,
        so an interrupted save never leaves a store that looks complete.
        """
        from dcfa import __version__

        return write_zarr_atomic(
            path,
            arrays={
                "count": self.count,
                "mean": self.mean,
                "cross": self.cross,
                **({"m2": self.m2} if self.pairwise else {}),
            },
            attrs={
                "dcfa_kind": "Moments",
                "dcfa_version": __version__,
                "n": int(self.n),
                "n_targets": int(self.n_targets),
                "missing": self.missing,
            },
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> Moments:
        """Read moments written by :meth:`save`."""
        import zarr

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"path: no moments store at {str(path)!r}")
        group = zarr.open_group(str(path), mode="r")
        attrs = dict(group.attrs)
        if attrs.get("dcfa_kind") != "Moments":
            raise ValueError(f"path: {str(path)!r} is not a dcfa Moments store")
        return cls(
            n=int(attrs["n"]),
            n_targets=int(attrs["n_targets"]),
            count=group["count"][...],
            mean=group["mean"][...],
            cross=group["cross"][...],
            m2=group["m2"][...] if attrs["missing"] == "pairwise" else None,
        )

    def __repr__(self) -> str:
        return (
            f"Moments(n={self.n}, n_features={self.n_features}, n_targets={self.n_targets}, "
            f"missing={self.missing!r}, excluded={len(self.excluded)})"
        )


def load_moments(path: str | os.PathLike):
    """Read any moments dcfa saves: :class:`Moments`, grid (neighbour mode) or column moments
    (seed-row mode), by the kind recorded in the store."""
    import zarr

    from dcfa._seedrows import ColumnMoments
    from dcfa._stencil import GridMoments

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: no moments store at {str(path)!r}")
    kind = zarr.open_group(str(path), mode="r").attrs.get("dcfa_kind")
    classes = {"Moments": Moments, "GridMoments": GridMoments, "ColumnMoments": ColumnMoments}
    if kind not in classes:
        raise ValueError(f"path: {str(path)!r} is not a dcfa moments store")
    return classes[kind].load(path)


def save_fields(
    value, path, kind: str, arrays: list[str], attrs: list[str], *, overwrite: bool = False
) -> Path:
    """Save the named array and scalar fields of a moments value (atomically)."""
    from dcfa import __version__

    return write_zarr_atomic(
        path,
        arrays={a: getattr(value, a) for a in arrays if getattr(value, a) is not None},
        attrs={
            "dcfa_kind": kind,
            "dcfa_version": __version__,
            **{a: _plain(getattr(value, a)) for a in attrs},
        },
        overwrite=overwrite,
    )


def load_fields(cls, path, kind: str, arrays: list[str], attrs: list[str]):
    """Inverse of :func:`save_fields`."""
    import zarr

    group = zarr.open_group(str(path), mode="r")
    meta = dict(group.attrs)
    if meta.get("dcfa_kind") != kind:
        raise ValueError(f"path: {str(path)!r} holds {meta.get('dcfa_kind')!r}, not {kind}")
    fields = {a: (group[a][...] if a in group else None) for a in arrays}
    # attributes added in later versions are absent from older stores: their defaults apply
    fields.update(
        {a: (tuple(meta[a]) if isinstance(meta[a], list) else meta[a]) for a in attrs if a in meta}
    )
    return cls(**fields)


def _plain(v):
    if isinstance(v, tuple | list | np.ndarray):
        return [int(x) for x in v]
    return (
        v
        if v is None or isinstance(v, str | bool)
        else float(v)
        if isinstance(v, float | np.floating)
        else int(v)
    )


class ColumnSummary:
    """Per-column statistics of the moment summaries that hold no full matrix (the stencil
    and seed-row modes): they keep ``count``, ``mean`` and the columns' centred sums of
    squares ``column_m2``, and exclude columns by the rules of :class:`Moments`."""

    @property
    def column_count(self) -> np.ndarray:
        return self.count

    @property
    def column_mean(self) -> np.ndarray:
        return self.mean

    def column_std(self, ddof: int = 1) -> np.ndarray:
        count = self.count
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(np.where(count - ddof > 0, self.column_m2 / (count - ddof), np.nan))

    @property
    def excluded(self) -> dict[int, str]:
        return _exclusions(self)

    @property
    def valid(self) -> np.ndarray:
        mask = np.ones(self.n_features, dtype=bool)
        mask[list(self.excluded)] = False
        return mask


def _exclusions(m: Moments) -> dict[int, str]:
    d = m.n_features
    count = m.column_count[:d]
    mean = m.column_mean[:d]
    std = m.column_std(ddof=0)[:d]
    reasons: dict[int, str] = {}
    for i in np.flatnonzero(count == 0):
        reasons[int(i)] = "all values missing"
    if not m.pairwise:
        for i in np.flatnonzero((count > 0) & (count < m.n)):
            reasons[int(i)] = (
                f"{m.n - int(count[i])} of {m.n} values missing "
                "(use missing='pairwise' for pairwise-complete statistics)"
            )
    for i in np.flatnonzero((count > 0) & (count < 2)):
        reasons.setdefault(int(i), "fewer than 2 observed values")
    constant = (count >= 2) & ~(std > _CONSTANT_RTOL * np.abs(mean))
    for i in np.flatnonzero(constant):
        reasons.setdefault(int(i), f"constant (value {mean[i]:.6g})")
    return dict(sorted(reasons.items()))


def write_zarr_atomic(
    path: str | os.PathLike,
    *,
    arrays: dict[str, np.ndarray],
    attrs: dict,
    overwrite: bool = False,
) -> Path:
    """Write arrays and attributes as a Zarr v3 group, atomically (:func:`dcfa._store.atomic_store`;
    ``overwrite`` replaces only a store dcfa wrote)."""
    import zarr

    from dcfa._store import atomic_store

    with atomic_store(path, overwrite=overwrite) as tmp:
        group = zarr.open_group(str(tmp), mode="a", zarr_format=3)
        for name, value in arrays.items():
            value = np.asarray(value)
            group.create_array(name, shape=value.shape, dtype=value.dtype)[...] = value
        group.attrs.update(attrs)
    return Path(path)

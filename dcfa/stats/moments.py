"""The :class:`Moments` value: sufficient statistics of ``[X, y]``, and :func:`moments`.

Everything LinCFA, NonLinCFA and GenLinCFA decide is a function of the sample count, the
column means and the centred cross-product matrix of ``Z = [X, Y]`` (the Algorithms page of
the documentation, section "Moments: one pass over the data").
The NumPy kernels (chunk, combine) are in :mod:`dcfa.stats.kernels`; :mod:`dcfa.stats.graph`
runs them over the tiles of a chunked Dask array; ``finalize`` here assembles a value. In
memory the value is ``finalize(chunk(Z))``: NumPy and Dask share the code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dcfa._errors import InputError, InputTypeError
from dcfa.stats.kernels import (
    SYRK_COLUMNS,
    between_parts,
    chunk_exclude,
    chunk_pairwise,
    column_shift,
    merge_parts,
    relative_mean,
    row_blocks,
    sum_parts,
    two_sum,
)
from dcfa.stats.store import write_zarr_atomic
from dcfa.stats.summary import excluded_mask, exclusions
from dcfa.stats.symmetric import SymmetricTiles

if TYPE_CHECKING:  # hints only: a worker that unpickles a kernel from here loads NumPy alone
    from collections.abc import Sequence

    import dask.array as da
    import xarray as xr
    from numpy.typing import ArrayLike

    from dcfa.stats.summary import TargetMoments

__all__ = ["Moments", "moments", "MISSING_POLICIES"]

MISSING_POLICIES = ("exclude", "pairwise")

############################################################################################
# finalize: tiles -> Moments


def finalize(tile: dict, n_targets: int, missing: str, shift=None) -> Moments:
    """Moments from the single (diagonal) tile covering every column.

    The tile's means are relative to ``shift``; the value keeps ``shift + mean`` rounded
    (``mean``) and its rounding error (``mean_lo``), so a later merge loses no digits.
    """
    shift = np.zeros(tile["cross"].shape[0]) if shift is None else np.asarray(shift)
    pairwise = missing == "pairwise"  # per-pair means, counts and m2: a column of shifts
    mean, lo = two_sum(shift[..., None] if pairwise else shift, tile["mean_a"])
    return Moments(
        n=int(tile["n"]),
        n_targets=n_targets,
        count=np.asarray(tile["count" if pairwise else "count_a"], dtype=np.float64),
        mean=mean,
        cross=tile["cross"],
        m2=tile["m2_a"] if pairwise else None,
        mean_lo=lo,
    )


def from_numpy(Z: np.ndarray, n_targets: int, missing: str = "exclude") -> Moments:
    """In-memory path: ``finalize(chunk(Z))``, the same code as each Dask tile."""
    kernel = chunk_pairwise if missing == "pairwise" else chunk_exclude
    shift = column_shift(Z[:1000])
    return finalize(kernel(Z, shift_a=shift), n_targets, missing, shift)


############################################################################################
# the public entry point


# The check of a pass against the memory budget: :func:`dcfa.memory.check_moments`. The memory
# package lies above the statistics engine (its estimates follow this module's passes tile by
# tile), so it hands its check down when imported, which ``import dcfa`` does before anything
# here can run (README, "Layout"); this module never imports it.
_budget_check: Callable[..., None] | None = None


def use_budget_check(check: Callable[..., None]) -> None:
    """Have :func:`moments` call ``check`` with the pass's shapes before it builds a result in
    memory (:mod:`dcfa.memory` installs :func:`dcfa.memory.check_moments` on import)."""
    global _budget_check
    _budget_check = check


def moments(
    X: ArrayLike | da.Array | xr.DataArray,
    y: ArrayLike | None = None,
    *,
    sample_dim: str = "time",
    missing: str = "exclude",
    segments: Sequence[int] | None = None,
    split_every: int | None = None,
    compute: bool = True,
    tiles: bool = False,
) -> Moments | list[Moments]:
    """One pass over ``X`` (and the target(s) ``y``) giving their :class:`Moments`.

    Parameters
    ----------
    X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        Samples in rows. A Dask array may be chunked along either axis or both; the
        ``(p, p)`` result is assembled from tiles of at most 1 024 columns, so no task holds
        more than two column blocks of a row slab.
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
    tiles : bool, default=False
        Keep each ``(p, p)`` cross-product matrix as its upper block tiles
        (:class:`~dcfa.stats.symmetric.SymmetricTiles`: about half the memory, never
        assembled; ``np.asarray(m.cross)`` gives the matrix). ``missing="exclude"`` only.
        Either way a Dask ``X``'s feature chunks are cut to at most 1 024 columns, so that
        the tiles' products run in parallel.

    Returns
    -------
    Moments or list of Moments

    Notes
    -----
    A Dask ``X`` is reduced tile by tile, except on a local scheduler when the rows (loaded,
    plus their float64 copy) take less memory than half the matrix, there are at most 8 192
    columns and neither ``tiles`` nor ``missing="pairwise"`` is asked: then the rows are
    loaded and the in-memory kernel runs once, which is faster than the tiles. The moments
    agree to rounding either way.

    Examples
    --------
    >>> import numpy as np, dask.array as da, dcfa
    >>> rng = np.random.default_rng(0)
    >>> X = da.from_array(rng.normal(size=(1000, 6)) + 1e6, chunks=(250, 3))
    >>> m = dcfa.moments(X, rng.normal(size=1000))
    >>> m.n, m.n_features, m.target_corr().shape
    (1000, 6, (6, 1))
    """
    from dcfa._validation import check_X, check_y
    from dcfa.stats.graph import tiled_moments

    if missing not in MISSING_POLICIES:
        raise InputError(f"missing: expected one of {MISSING_POLICIES}, got {missing!r}")
    if tiles and missing != "exclude":
        raise InputError("tiles: tiled cross-products need missing='exclude'")
    inp = check_X(X, sample_dim=sample_dim)
    n = inp.n_samples
    if n < 1:
        raise InputError(f"X: expected at least 1 sample, got {n}")
    Y = None if y is None else check_y(y, inp, allow_constant=True)
    k = 0 if Y is None else Y.shape[1]
    bounds = _check_segments(segments, n)
    if compute or not inp.is_dask:  # the p x p result is built now: it must fit the budget
        if _budget_check is None:  # dcfa.memory failed to import: never run unchecked
            raise RuntimeError("dcfa.memory has not installed the memory budget check")
        _budget_check(
            n,
            inp.n_features,
            n_targets=k,
            segments=bounds,
            missing=missing,
            data=inp.data,
            split_every=split_every,
            tiles=tiles,
        )

    if inp.is_dask and not (compute and _runs_in_memory(inp.data, k, missing, tiles)):
        Yd = None if Y is None else _dask_target(Y, inp.data.chunks[0])
        lazy = tiled_moments(
            inp.data, Yd, missing=missing, segments=bounds, split_every=split_every, tiles=tiles
        )
        result = [
            Moments(n=b1 - b0, n_targets=k, m2=f.pop("m2", None), **f)  # mean_lo among f
            for (b0, b1), f in zip(_pairs_of(bounds), lazy, strict=True)
        ]
        if compute:
            result = compute_all(result)
    else:
        data = inp.data
        if inp.is_dask:
            from dcfa._compute import compute as run

            (data,) = run(data)
        Z = data if Y is None else np.column_stack([data, Y])
        result = [from_numpy(Z[b0:b1], k, missing) for b0, b1 in _pairs_of(bounds)]
        if tiles:  # one tile: the in-memory kernel's matrix
            result = [_as_one_tile(m) for m in result]
    return result[0] if segments is None else result


def _runs_in_memory(data, n_targets: int, missing: str, tiles: bool = False) -> bool:
    """Whether a Dask input's pass runs as one in-memory kernel instead of tile by tile.

    Only on a local scheduler, where the chunks come to this process anyway, for a whole
    matrix (not ``tiles``), and only where the tiles would be overhead: ``missing="exclude"``,
    a product narrow enough for BLAS's symmetric kernel, and rows (loaded, plus their float64
    copy) that take no more memory than the upper tiles a tiled pass holds besides the
    finished matrix.
    """
    from dcfa._compute import active_client

    n, p = data.shape[0], data.shape[1] + n_targets
    rows = n * p * (data.dtype.itemsize + 8)
    return (
        not tiles
        and missing == "exclude"
        and p <= SYRK_COLUMNS
        and 2 * rows <= 8 * p * p
        and active_client() is None
    )


def compute_all(parts: list[Moments]) -> list[Moments]:
    """Compute lazy :class:`Moments` (from ``compute=False``) in one ``dask.compute``."""
    from dcfa._compute import compute

    fields = [(p.count, p.mean, _lazy_cross(p.cross), p.m2, p.mean_lo) for p in parts]
    done = compute(fields)[0]
    return [
        Moments(
            n=p.n,
            n_targets=p.n_targets,
            count=c,
            mean=mu,
            cross=_cross_of(p.cross, cr),
            m2=m2,
            mean_lo=lo,
        )
        for p, (c, mu, cr, m2, lo) in zip(parts, done, strict=True)
    ]


def _as_one_tile(m: Moments) -> Moments:
    cross = SymmetricTiles([0, m.n_columns], {(0, 0): m.cross})
    return Moments(
        n=m.n, n_targets=m.n_targets, count=m.count, mean=m.mean, cross=cross, mean_lo=m.mean_lo
    )


def _lazy_cross(cross):
    return cross.tiles if isinstance(cross, SymmetricTiles) else cross


def _cross_of(lazy, computed):
    return lazy.with_tiles(computed) if isinstance(lazy, SymmetricTiles) else computed


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
        raise InputError(
            f"segments: expected increasing int boundaries [0, ..., {n}], got {segments!r}"
        )
    if b[0] != 0 or b[-1] != n or np.any(np.diff(b) <= 0):
        raise InputError(
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
    cross : ndarray or SymmetricTiles of shape (p, p)
        Centred cross-products ``sum_r (z_ri - mean_i)(z_rj - mean_j)``; with
        ``moments(..., tiles=True)`` (the estimators' dense fits) their upper block tiles
        (:class:`~dcfa.stats.symmetric.SymmetricTiles`; ``np.asarray(cross)`` is the matrix).
    m2 : ndarray of shape (p, p) or None
        Pairwise only: ``m2[i, j]`` is the sum of squared deviations of column ``i`` over the
        rows shared with ``j``. ``None`` for ``missing="exclude"`` statistics.
    mean_lo : ndarray of the shape of ``mean``, or None
        The rounding error of ``mean``: ``mean + mean_lo`` is the mean to twice float64's
        precision. :meth:`merge` subtracts two values' means; with an offset of 1e8 the
        rounded means alone are 1.5e-8 apart from the true ones, which would cost the merged
        cross-products up to half their digits. ``None`` (moments saved before dcfa kept it, or
        built by hand) counts as zeros.

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
    mean_lo: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_lazy(self) -> bool:
        """Whether the fields are Dask arrays (from ``moments(..., compute=False)``)."""
        if isinstance(self.cross, SymmetricTiles):
            return self.cross.is_lazy
        return not isinstance(self.cross, np.ndarray)

    def compute(self) -> Moments:
        """The computed value (itself when already computed)."""
        return compute_all([self])[0] if self.is_lazy else self

    def _check_computed(self, what: str) -> None:
        """The statistics derived from the fields need their numbers: say how to get them."""
        if self.is_lazy:
            raise ValueError(
                f"{what}: these Moments are lazy (dcfa.moments(..., compute=False)); "
                "m = m.compute() computes them (dcfa.stats.moments.compute_all computes "
                "several in one pass)"
            )

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
        self._check_computed("column_var")
        ss = np.diagonal(self.m2) if self.pairwise else self.cross.diagonal()
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
            self._check_computed("excluded")
            self._cache["excluded"] = exclusions(self)
        return dict(self._cache["excluded"])

    @property
    def valid(self) -> np.ndarray:
        """Boolean mask over the ``D`` features: True where the feature is usable."""
        self._check_computed("excluded")  # the message .valid has always given
        return ~excluded_mask(self)

    # -- second moments -------------------------------------------------------------------

    def cov(self, ddof: int = 1) -> np.ndarray:
        """Covariance matrix of all ``p`` columns (pairwise: over each pair's shared rows)."""
        self._check_computed("cov")
        denom = (self.count if self.pairwise else self.n) - ddof
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denom > 0, np.asarray(self.cross) / denom, np.nan)

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

    @property
    def column_m2(self) -> np.ndarray:
        """Every column's centred sum of squares (features, then targets)."""
        return self.column_var(ddof=0) * self.column_count

    def target_moments(self) -> TargetMoments | None:
        """The targets' statistics (:class:`~dcfa.stats.summary.TargetMoments`), or None
        without a target or while lazy (nothing is computed here)."""
        from dcfa.stats.summary import TargetMoments

        if self.is_lazy or self.n_targets == 0:
            return None
        D, k = self.n_features, self.n_targets
        m2 = self.column_m2
        cross = np.stack([np.asarray(self.cross[:D, D + t]) for t in range(k)], axis=1)
        return TargetMoments(mean=self.column_mean[D:], m2=m2[D:], cross=cross)

    def _corr_block(self, rows: slice, cols: slice) -> np.ndarray:
        if "corr" in self._cache:
            return self._cache["corr"][rows, cols]
        self._check_computed("corr")
        if self.pairwise:
            ss_r, ss_c = self.m2[rows, cols], self.m2.T[rows, cols]
        else:
            diag = self.cross.diagonal()
            ss_r, ss_c = diag[rows][:, None], diag[cols][None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = self.cross[rows, cols] / np.sqrt(ss_r * ss_c)
        r[~np.isfinite(r)] = np.nan
        return np.clip(r, -1.0, 1.0, out=r)

    # -- algebra ----------------------------------------------------------------------------

    def merge(self, other: Moments) -> Moments:
        """Moments of the union of two disjoint row sets (same columns, same treatment)."""
        return _merged([self, other], "other")

    @classmethod
    def merge_all(cls, parts: list[Moments]) -> Moments:
        """Merge several disjoint row sets (e.g. the training folds of a cross-validation).

        Chan's update for all parts at once (:func:`dcfa.stats.kernels.merge_parts`), around
        the first part's exact means (``mean + mean_lo``): the deviations keep every digit on
        a large offset. Tiles stay tiles, each merged as the same elements of the matrix.
        """
        return _merged(list(parts), "parts")

    # -- storage ----------------------------------------------------------------------------

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write to a Zarr (v3) store at ``path``, atomically.

        The store is written under a temporary name next to ``path`` and renamed into place,
        so an interrupted save never leaves a store that looks complete.
        """
        from dcfa._version import __version__

        return write_zarr_atomic(
            path,
            arrays={
                "count": self.count,
                "mean": self.mean,
                "cross": self.cross,
                **({"m2": self.m2} if self.pairwise else {}),
                **({"mean_lo": self.mean_lo} if self.mean_lo is not None else {}),
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
        from dcfa.stats.store import open_stored

        group = open_stored(path, "Moments")
        attrs = dict(group.attrs)
        return cls(
            n=int(attrs["n"]),
            n_targets=int(attrs["n_targets"]),
            count=group["count"][...],
            mean=group["mean"][...],
            cross=group["cross"][...],
            m2=group["m2"][...] if attrs["missing"] == "pairwise" else None,
            # absent from stores written before dcfa kept it: merges then use the rounded means
            mean_lo=group["mean_lo"][...] if "mean_lo" in group else None,
        )

    def __repr__(self) -> str:
        return (
            f"Moments(n={self.n}, n_features={self.n_features}, n_targets={self.n_targets}, "
            f"missing={self.missing!r}, "
            + ("lazy)" if self.is_lazy else f"excluded={len(self.excluded)})")
        )


def _merged(parts: list, name: str) -> Moments:
    """The checked merge of ``parts`` (the argument ``name`` of the caller)."""
    if not parts:
        raise InputError(f"{name}: need at least one Moments to merge")
    first = parts[0]
    for p in parts:
        if not isinstance(p, Moments):
            raise InputTypeError(f"{name}: expected Moments, got {type(p).__name__}")
        p._check_computed("merge")
        if (p.n_columns, p.n_targets, p.pairwise) != (
            first.n_columns,
            first.n_targets,
            first.pairwise,
        ):
            raise InputError(
                f"{name}: can only merge moments of the same columns and missing-value "
                f"treatment; got {p.n_columns} columns/{p.n_targets} targets/{p.missing} "
                f"and {first.n_columns}/{first.n_targets}/{first.missing}"
            )
    full = [p for p in parts if p.n > 0]
    if len(full) <= 1:
        return full[0] if full else first
    return _merge_parts(full)


def _merge_parts(parts: list[Moments]) -> Moments:
    """:meth:`Moments.merge_all` of checked, non-empty parts: every array through
    :func:`~dcfa.stats.kernels.merge_parts` and :func:`~dcfa.stats.kernels.between_parts`."""
    first = parts[0]
    pairwise = first.pairwise
    # around the first part's exact means (pairwise: column i's, for every pair (i, j))
    ref = first.column_mean[:, None] if pairwise else first.column_mean
    n_s = np.stack([p.count if pairwise else np.float64(p.n) for p in parts])
    rel = np.stack([relative_mean(p.mean, p.mean_lo, ref) for p in parts])
    _, rel, dev = merge_parts(n_s, rel)
    mean, lo = two_sum(ref, rel)
    out = dict(
        n=sum(p.n for p in parts),
        n_targets=first.n_targets,
        count=sum_parts([p.count for p in parts]),
        mean=mean,
        mean_lo=lo,
    )
    if pairwise:  # element (i, j): column i over the rows shared with j, against column j
        out["m2"] = sum_parts([p.m2 for p in parts])
        out["m2"] += between_parts(n_s, dev)
        out["cross"] = sum_parts([p.cross for p in parts])
        out["cross"] += between_parts(n_s, dev, dev.transpose(0, 2, 1))
    elif all(_same_tiles(p.cross, first.cross) for p in parts):
        tiles = first.cross
        edges = [tiles._slice(i) for i in range(tiles.n_blocks)]
        out["cross"] = tiles.with_tiles(
            {
                (i, j): _merged_block(
                    [p.cross.tiles[i, j] for p in parts], n_s, dev, edges[i], edges[j]
                )
                for i, j in tiles.tiles
            }
        )
    else:
        out["cross"] = _merged_block([np.asarray(p.cross) for p in parts], n_s, dev)
    return Moments(**out)


def _merged_block(crosses, n_s, dev, rows=slice(None), cols=slice(None)) -> np.ndarray:
    """The merged cross-products at ``rows`` x ``cols`` of the matrix (``crosses``: the
    parts' own there), by row blocks: one block's temporary at a time."""
    out = sum_parts(crosses)
    dev_r, dev_c = dev[:, rows], dev[:, None, cols]
    for b in row_blocks(out.shape[0], out.shape[1]):
        out[b] += between_parts(n_s, dev_r[:, b], dev_c)
    return out


def _same_tiles(a, b) -> bool:
    return (
        isinstance(a, SymmetricTiles)
        and isinstance(b, SymmetricTiles)
        and np.array_equal(a.edges, b.edges)
    )

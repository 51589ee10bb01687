"""What a dense pass holds at its peak, from the shapes only (nothing is computed).

:func:`estimate_dense` (an estimator's dense fit) and :func:`estimate_moments`
(:func:`dcfa.moments`) add up the driver's peak (the matrices, their copies and temporaries,
per-fold moments, the tiles in flight under the local scheduler) and the peak of each tile
task of a chunked input, as a :class:`DenseEstimate`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np

from dcfa._compute import SPLIT_EVERY
from dcfa._errors import InputError, InputTypeError

if TYPE_CHECKING:  # hints only: ``import dcfa`` imports this package, with NumPy alone
    from collections.abc import Sequence

    import dask.array as da

__all__ = ["DenseEstimate", "estimate_dense", "estimate_moments"]

_F8 = 8  # bytes of a float64
_SHIFT_ROWS = 512  # rows dcfa.stats.kernels.column_shift reads

# Peak p x p float64 arrays alive inside one moments kernel call (dcfa.stats.moments): "exclude"
# holds the product (centred in place, by row blocks); "pairwise" the counts, sums, means,
# sums of squares and cross-products of both sides with their temporaries. Fields per
# finished tile / Moments.
_KERNEL_PEAK = {"exclude": 1, "pairwise": 14}
_TILE_FIELDS = {"exclude": 1, "pairwise": 6}
_RESULT_FIELDS = {"exclude": 1, "pairwise": 4}
# float64 values per column and part the driver holds besides the matrices (means, counts,
# the partition's basis rows, group sums, candidates' 3 x 3 moments, the rules' temporaries)
_VECTORS_PER_COLUMN = 64
# tree merge of partial tiles: the running result and temporaries, beyond the inputs (an
# "exclude" merge writes into its own result, by row blocks)
_MERGE_EXTRA = {"exclude": 1, "pairwise": 16}


@dataclass(frozen=True)
class DenseEstimate:
    """The memory a dense pass holds at its peak, from shapes only.

    Attributes
    ----------
    who : str
        What makes the pass (an estimator, ``dcfa.moments``).
    n_samples, n_features, n_targets : int
        The matrices are ``p x p`` float64, ``p = n_features + n_targets``.
    driver_bytes : int
        Peak on the driver (this process).
    driver_terms : tuple of (str, int)
        What ``driver_bytes`` is made of at that peak.
    tasks : tuple of (int, int)
        Tile tasks of a chunked input, largest first: ``(peak bytes of one task, how many
        tasks of that tile)``; empty when the input is in memory or its chunks are unknown.
    task_width : int
        Widest column block (the widest tile is ``task_width x task_width``).
    local_tasks : bool
        Whether the tile tasks run in this process (local scheduler) or on workers.
    result_bytes : int
        The pass's finished results (tiles or blocks of the matrices), which the workers hold
        until ``dask.compute`` gathers them.
    """

    who: str
    n_samples: int
    n_features: int
    n_targets: int
    driver_bytes: int
    driver_terms: tuple
    tasks: tuple = ()
    task_width: int = 0
    local_tasks: bool = True
    result_bytes: int = 0

    @property
    def n_columns(self) -> int:
        return self.n_features + self.n_targets

    @property
    def matrix_bytes(self) -> int:
        """Bytes of one ``p x p`` float64 matrix."""
        return _F8 * self.n_columns**2

    @property
    def task_bytes(self) -> int | None:
        """Peak of the largest tile task; None without tile tasks."""
        return self.tasks[0][0] if self.tasks else None

    def tasks_at_once(self, n_threads: int) -> tuple[int, int]:
        """Bytes of the ``n_threads`` largest tile tasks running together, and how many."""
        return _tasks_at_once(self.tasks, n_threads)


def _tasks_at_once(tasks: tuple, n_threads: int) -> tuple[int, int]:
    total = running = 0
    for peak, count in tasks:
        take = min(count, n_threads - running)
        total += take * peak
        running += take
        if running == n_threads:
            break
    return total, running


def _matrices(n: int) -> str:
    return f"{n} matrix" if n == 1 else f"{n} matrices"


def _kind_of(data) -> str:
    """``"numpy"``, ``"dask"`` or ``"unknown"`` (no data: a chunked input, chunks unknown)."""
    if data is None:
        return "unknown"
    import dask.array as da

    return "dask" if isinstance(data, da.Array) else "numpy"


def _n_local_threads() -> int:
    import dask.local
    from dask.base import get_scheduler

    if get_scheduler() is dask.local.get_sync:
        return 1
    return int(dask.config.get("num_workers", None) or os.cpu_count() or 1)


def _tile_tasks(
    data,
    p: int,
    bounds: list[int],
    missing: str,
    isz: int,
    split_every: int | None,
    tiles: bool,
    inputs_held: bool = False,
) -> tuple[tuple, int, int]:
    """Peak bytes of the tile tasks of :func:`dcfa.stats.graph.tiled_moments`, largest first.

    A chunk task holds a row block of two column blocks (and float64 copies of them), the
    tile's product and temporaries, and the running tile of its fold (the first level of the
    tree is a chain of chunk tasks, each merging its chunk into the previous one's result:
    :func:`dcfa.stats.graph._fold_chunks`); a tree merge over the folds holds ``split_every``
    partial tiles plus its running result and temporaries. Each tile has one chunk task per
    row chunk and a merge task per node of its segments' trees above the folds.
    ``inputs_held``: the input chunks a task reads are counted elsewhere (the local
    scheduler's term for them), so only the task's float64 copies are its own.

    Returns ``(tasks, widest block, waiting)``: ``waiting`` is the bytes of the row chunks'
    partial tiles that wait for their merge at once. A tile that is not folded keeps the
    tree, and the scheduler runs a row chunk's tasks of every tile (to release that input
    chunk) before the merges: each such tile then holds up to ``split_every`` partial tiles
    per segment, where the finished results count one.
    """
    from dcfa.stats.graph import fold_tile
    from dcfa.stats.kernels import row_blocks

    rows, seg_of, widths = _layout(data, p, bounds, missing)
    m = max(rows)
    se = max(split_every or SPLIT_EVERY, 2)
    per_seg = np.bincount(seg_of)
    folds = -(-per_seg // se)  # per segment: chains of up to split_every chunks
    # input (unless counted elsewhere) + float64 copies, per value
    copy = (0 if inputs_held else isz) + (_F8 if missing == "exclude" else 26)
    peaks: dict[int, int] = {}
    waiting = 0
    for i, wi in enumerate(widths):
        for j in range(i, len(widths)):
            wj = widths[j]
            T = _F8 * wi * wj
            side = m * (wi if i == j else wi + wj) * copy  # a diagonal tile reads one block
            folded = tiles or fold_tile(wi, wj)
            # a fold step also holds the running tile of its chain; the rank-one updates of
            # "exclude" a row block's temporary (dcfa.stats.kernels.row_blocks)
            temp = _F8 * wj * min(row_blocks(wi, wj)[0].stop, wi) if missing == "exclude" else 0
            chunk = (_KERNEL_PEAK[missing] + folded * _TILE_FIELDS[missing]) * T + side + temp
            peaks[chunk] = peaks.get(chunk, 0) + len(rows)
            if not folded:  # beyond the finished result each (segment, tile) counts
                waiting += (
                    int(np.minimum(per_seg, se).sum() - len(per_seg)) * T * (_TILE_FIELDS[missing])
                )
            leaves = folds if folded else per_seg
            fan = min(se, int(leaves.max()))
            merges = sum(_tree_merges(int(r), se) for r in leaves)
            if merges:
                merge = (_TILE_FIELDS[missing] * fan + _MERGE_EXTRA[missing]) * T
                peaks[merge] = peaks.get(merge, 0) + merges
    return tuple(sorted(peaks.items(), reverse=True)), max(widths), waiting


def _layout(data, p: int, bounds, missing: str) -> tuple[tuple, list, list[int]]:
    """The pass's row chunks (its slabs), their segments and its column blocks, the targets'
    last: those of :func:`dcfa.stats.graph.moments_layout`."""
    from dcfa.stats.graph import moments_layout

    rows, cols, seg_of = moments_layout(data.chunks, list(bounds), missing)
    k = p - data.shape[1]
    return rows, seg_of, [*cols, k] if k else list(cols)


def _tiles_bytes(widths: list[int]) -> int:
    """Bytes of the upper tiles ``(I, J)``, ``I <= J``, of these column blocks."""
    w = np.asarray(widths, dtype=np.int64)
    return int(_F8 * (w.sum() ** 2 + (w * w).sum()) // 2)


def _tree_merges(n_chunks: int, split_every: int) -> int:
    """Merge tasks of :func:`dcfa.stats.graph.tiled_moments`'s tree over ``n_chunks`` row chunks.

    (A ``split_every`` below 2 is refused by the graph; counted here as 2.)
    """
    split_every = max(split_every, 2)
    merges = 0
    while n_chunks > 1:
        groups = -(-n_chunks // split_every)
        merges += groups - (n_chunks % split_every == 1)  # a group of one is passed on
        n_chunks = groups
    return merges


def _pass_terms(
    n: int,
    p: int,
    bounds: list[int],
    *,
    missing: str,
    data,
    inputs_copy: bool,
    split_every: int | None,
    client_active: bool,
    tiles: bool = False,
) -> tuple[int, tuple, tuple, int, int]:
    """Peak driver bytes of the moments pass itself, its tile tasks and its results.

    Returns ``(driver_bytes, terms, tasks, width, result_bytes)``.
    """
    kind = _kind_of(data)
    M = _F8 * p * p
    S = len(bounds) - 1
    F = _RESULT_FIELDS[missing]
    if kind == "numpy":
        # dcfa.stats.moments.from_numpy: Z = [X, y] (a copy), the shift from its first rows, then
        # per segment a float64 copy of the rows (shifted, NaN zeroed) and the kernel's
        # matrices; earlier segments' results stay
        seg_rows = max(b1 - b0 for b0, b1 in zip(bounds[:-1], bounds[1:], strict=True))
        copies = n * p * _F8 + min(n, _SHIFT_ROWS) * p * (4 * _F8 + 1)
        copies += seg_rows * p * (_F8 if missing == "exclude" else 3 * _F8 + 2)
        if inputs_copy:
            copies += n * (p - 1) * _F8
        held = (S - 1) * F + _KERNEL_PEAK[missing]
        terms = (
            (
                f"{_matrices(held)}: earlier row segments' results, the product and temporaries",
                held * M,
            ),
            ("in-memory copies of the data", copies),
        )
        return held * M + copies, terms, (), 0, 0
    # chunked: the driver receives every block of the results and concatenates them (tiled:
    # keeps the upper tiles as they come); it also holds per-column vectors and the graph
    vectors = _VECTORS_PER_COLUMN * S * p * _F8
    if tiles and kind == "dask":
        held = S * _tiles_bytes(_layout(data, p, bounds, missing)[2])
        gathered = held + vectors
        terms = ((f"the upper tiles of {_matrices(S)} ({held / (S * M):.2f} of each)", gathered),)
    else:
        held = S * F * M
        gathered = 2 * held + vectors
        what = f"{_matrices(S * F)} assembled from as many matrices of gathered blocks"
        terms = ((what, gathered),)
    if kind != "dask":
        return gathered, terms, (), 0, held
    isz = _F8 if inputs_copy else int(np.dtype(data.dtype).itemsize)
    if client_active:
        tasks, width, _ = _tile_tasks(data, p, bounds, missing, isz, split_every, tiles)
        return gathered, terms, tasks, width, held
    # the input's chunks are one term below: a task's share of them is not counted again
    tasks, width, waiting = _tile_tasks(data, p, bounds, missing, isz, split_every, tiles, True)
    # the local scheduler runs the tile tasks here, while finished blocks accumulate; the
    # input's chunks stay until every tile that reads them is done, and each thread may be
    # making one (read, decoded or computed: float64 with two temporaries)
    inflight, running = _tasks_at_once(tasks, _n_local_threads())
    chunks = n * data.shape[1] * isz
    # read and decoded, or joined into a slab of a column block
    rows, _, widths = _layout(data, p, bounds, missing)
    slab = max(rows) * max(widths)
    chunks += running * 3 * _F8 * max(max(data.chunks[0]) * max(data.chunks[1]), slab)
    during = held + vectors + waiting + inflight + chunks
    if during > gathered:
        terms = (
            (f"{terms[0][0]}: finished blocks", held + vectors),
            *((("row chunks' tiles waiting for their merge", waiting),) if waiting else ()),
            (f"{running} tile tasks running in this process", inflight),
            ("the input's chunks", chunks),
        )
        return during, terms, tasks, width, held
    return gathered, terms, tasks, width, held


def estimate_moments(
    n_samples: int,
    n_features: int,
    *,
    n_targets: int = 0,
    segments: Sequence[int] | None = None,
    missing: str = "exclude",
    data: np.ndarray | da.Array | None = None,
    split_every: int | None = None,
    tiles: bool = False,
) -> DenseEstimate:
    """Peak memory of :func:`dcfa.moments` with these shapes (nothing is computed).

    Parameters
    ----------
    n_samples, n_features, n_targets : int
    segments : sequence of int, default=None
        Row boundaries, as in :func:`dcfa.moments`.
    missing : {"exclude", "pairwise"}, default="exclude"
    data : ndarray or dask.array.Array, default=None
        The ``(n_samples, n_features)`` input, for its kind and chunks (not read). ``None``:
        a chunked input whose chunks are not known yet (no tile-task figures).
    split_every : int, default=None
    tiles : bool, default=False
        As in :func:`dcfa.moments`.

    Returns
    -------
    DenseEstimate
    """
    _check_shape(n_samples=n_samples, n_features=n_features, n_targets=n_targets)
    if missing not in _RESULT_FIELDS:
        raise InputError(f"missing: expected one of {sorted(_RESULT_FIELDS)}, got {missing!r}")
    bounds = [0, n_samples] if segments is None else [int(b) for b in segments]
    client_active = _client_active()
    driver, terms, tasks, width, results = _pass_terms(
        n_samples,
        n_features + n_targets,
        bounds,
        missing=missing,
        data=data,
        inputs_copy=False,
        split_every=split_every,
        client_active=client_active,
        tiles=tiles,
    )
    return DenseEstimate(
        who="dcfa.moments",
        n_samples=n_samples,
        n_features=n_features,
        n_targets=n_targets,
        driver_bytes=int(driver),
        driver_terms=terms,
        tasks=tasks,
        task_width=width,
        local_tasks=not client_active,
        result_bytes=results,
    )


def fit_options(estimator):
    """A CFA fit's options (:class:`dcfa.cfa.options.FitOptions`): given, or the
    estimator's."""
    resolve = getattr(estimator, "fit_options", None)
    if resolve is None and not (dataclasses.is_dataclass(estimator) and hasattr(estimator, "mode")):
        raise InputTypeError(
            "estimator: expected a CFA estimator (LinCFA, NonLinCFA, GenLinCFA, RegionsCV, "
            f"...) or its FitOptions, got {type(estimator).__name__}; the moments pass of "
            "others: estimate_moments"
        )
    return estimator if resolve is None else resolve()


def _with_mode(estimator, mode: str | None):
    """``estimator`` with ``mode`` in its place: an estimator's copy checked as its ``fit``
    checks it (naming ``mode`` and the executions; an old name is renamed when its options
    are read), or the fit options with that mode."""
    if mode is None:
        return estimator
    if dataclasses.is_dataclass(estimator):
        return dataclasses.replace(estimator, mode=mode)
    from sklearn.base import clone

    from dcfa._validation import validate_params

    estimator = clone(estimator).set_params(mode=mode)
    validate_params(estimator)
    return estimator


def _check_shape(**sizes: int) -> None:
    """Refuse a size that is not a whole number (``n_targets`` may be 0, the others not)."""
    for name, value in sizes.items():
        least = 0 if name == "n_targets" else 1
        if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
            raise InputError(f"{name}: expected an integer >= {least}, got {value!r}")


def _client_active() -> bool:
    from dcfa._compute import active_client

    return active_client() is not None


def estimate_dense(
    estimator: Any,  # LinCFA, NonLinCFA, GenLinCFA or their FitOptions (dcfa.cfa is above)
    n_samples: int,
    n_features: int,
    *,
    data: np.ndarray | da.Array | None = None,
    mode: str | None = None,
) -> DenseEstimate | None:
    """Peak memory of ``estimator.fit`` on ``n_samples x n_features`` (nothing is computed).

    Parameters
    ----------
    estimator : LinCFA, NonLinCFA, GenLinCFA or their FitOptions
        Its options decide the pass (mode, folds, missing values, strategy, inputs).
    n_samples, n_features : int
        The shape of ``X`` (an upper bound on ``n_features`` is fine).
    data : ndarray or dask.array.Array, default=None
        ``X`` as the estimator sees it (stacked), for its kind and chunks (not read).
    mode : str, default=None
        The execution to estimate (default: the estimator's ``mode``; ``"auto"`` is
        estimated as ``"dense"``, the execution it tries first).

    Returns
    -------
    DenseEstimate or None
        None when the execution builds no ``D x D`` matrix.
    """
    _check_shape(n_samples=n_samples, n_features=n_features)
    opts = fit_options(_with_mode(estimator, mode))
    if opts.mode not in ("dense", "auto"):
        return None
    missing = opts.missing
    bounds, n_parts = [0, n_samples], 1
    folds = opts.folds(n_samples)
    if folds is not None:  # NonLinCFA: one Moments per row segment of the folds
        bounds = folds.bounds
        n_parts = 2 * len(folds.splits)  # the partition reads every fold's training and test
    p = n_features + 1
    M = _F8 * p * p
    S = len(bounds) - 1
    F = _RESULT_FIELDS[missing]
    tiled = missing == "exclude"  # the dense execution keeps the upper tiles (Dense.gather)
    client_active = _client_active()
    driver, terms, tasks, width, results = _pass_terms(
        n_samples,
        p,
        bounds,
        missing=missing,
        data=data,
        inputs_copy=opts.copies_inputs,
        split_every=None,
        client_active=client_active,
        tiles=tiled,
    )
    # then the partition, on the driver, from what the pass returned: per row segment the
    # upper tiles of a Dask input's pass, else F matrices (one whole matrix in memory)
    R = results // S if results else F * M
    extra, why = 0, f"the moments of {S} row segment(s), {R / M:.2f} matrix each"
    if folds is not None:
        # the folds' training and test sets are read row by row (dcfa.cfa.basis.MergedMoments);
        # the fit then merges all rows (moments_) tile by tile: the running result and the next
        extra = 2 * R
        why += ", all rows merged (the fitted moments) and the running merge"
    if missing == "pairwise":
        extra += 3 * M
        why = f"the {F} pairwise matrices, the correlations and 2 temporaries"
    if opts.strategy == "greedy":
        extra += (S + 5 + (missing == "pairwise")) * M
        why += ", the greedy variant's copy of them, its list of passing pairs, temporaries"
    # and per-candidate vectors of every part the rule reads
    partition = S * R + extra + _VECTORS_PER_COLUMN * n_parts * p * _F8
    if partition > driver:
        driver, terms = partition, ((f"{partition / M:.1f} matrices: {why}", partition),)
    return DenseEstimate(
        who=opts.estimator,
        n_samples=n_samples,
        n_features=n_features,
        n_targets=1,
        driver_bytes=int(driver),
        driver_terms=terms,
        tasks=tasks,
        task_width=width,
        local_tasks=not client_active,
        result_bytes=results,
    )

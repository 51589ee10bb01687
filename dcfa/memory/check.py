"""The check before a dense pass: the estimate against the budget, refused before any compute.

:func:`check_dense` (estimators) and :func:`check_moments` (:func:`dcfa.moments`) raise
:class:`MemoryBudgetError` when the driver's peak or one worker's tile tasks exceed the budget,
saying how many features would fit and what to change.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from dask.utils import format_bytes

from dcfa._errors import InputError
from dcfa.memory.budget import CONFIG_KEY, _budget_setting, memory_budget
from dcfa.memory.estimate import DenseEstimate, estimate_dense, estimate_moments, fit_options

if TYPE_CHECKING:  # hints only: ``import dcfa`` imports this package, with NumPy alone
    from collections.abc import Sequence

    import dask.array as da
    import numpy as np

__all__ = ["MemoryBudgetError", "check_dense", "check_moments", "gib", "raise_hint"]


class MemoryBudgetError(MemoryError, InputError):
    """A dense pass would hold more memory than ``dcfa.memory_budget`` allows.

    Raised before anything is computed. A :class:`ValueError` (the ``dcfa`` command exits
    with status 2) and a :class:`MemoryError`.
    """


def check_dense(
    estimator: Any,  # LinCFA, NonLinCFA, GenLinCFA or their FitOptions (dcfa.cfa is above)
    n_samples: int,
    n_features: int,
    *,
    data: np.ndarray | da.Array | None = None,
    mode: str | None = None,
) -> DenseEstimate | None:
    """Refuse a dense fit that would not fit ``dcfa.memory_budget``, before any compute.

    What ``fit`` of LinCFA, NonLinCFA and GenLinCFA calls before the moments pass; a batch
    job calls it with the shape it knows from metadata before its first pass.

    Parameters
    ----------
    estimator : LinCFA, NonLinCFA, GenLinCFA or their FitOptions
    n_samples, n_features : int
        The shape of ``X`` (an upper bound on ``n_features`` is fine).
    data : ndarray or dask.array.Array, default=None
        ``X`` as the estimator sees it, for its kind and chunks (not read). Without it the
        tile tasks' memory is not checked (``fit`` checks it again with the data).

    Returns
    -------
    DenseEstimate or None
        The estimate (None when the estimator's mode builds no ``D x D`` matrix).

    Raises
    ------
    MemoryBudgetError
        When the driver's peak or one worker's tile tasks exceed the budget.
    """
    estimate = estimate_dense(estimator, n_samples, n_features, data=data, mode=mode)
    if estimate is not None:

        def at(k: int) -> DenseEstimate:
            return estimate_dense(estimator, n_samples, k, data=_narrow(data, k), mode=mode)

        _enforce(estimate, _hint_for(estimator), at)
    return estimate


def check_moments(
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
    """:func:`check_dense` for :func:`dcfa.moments` (parameters of :func:`estimate_moments`)."""

    def at(k: int) -> DenseEstimate:
        return estimate_moments(
            n_samples,
            k,
            n_targets=n_targets,
            segments=segments,
            missing=missing,
            data=_narrow(data, k),
            split_every=split_every,
            tiles=tiles,
        )

    estimate = at(n_features)
    _enforce(
        estimate,
        "compute the moments of fewer columns (coarsen the grid, e.g. "
        "X.coarsen(lat=2, lon=2).mean(), or select a region); for a partition, "
        "the CFA estimators' mode='auto' avoids the matrix when it does not fit",
        at,
    )
    return estimate


def _narrow(data, k: int):
    """The first ``k`` columns of ``data`` (not read: a view, or a lazy slice), or None."""
    return None if data is None else data[:, :k]


def _hint_for(estimator) -> str:
    name = fit_options(estimator).estimator
    return (
        f"{name}(mode='auto') (the default) runs the same partition from the features' "
        "series in memory (n x D float64) when they fit; on an xarray.DataArray grid, "
        "neighbors=1 with neighborhood='seed' runs from the moments of nearby cells only "
        "(memory O(D k)); or reduce D (coarsen the grid, e.g. "
        "X.coarsen(lat=2, lon=2).mean(), or select a region)"
    )


def gib(b: float) -> str:
    return f"{b / 2**30:,.1f} GiB" if b >= 2**30 else format_bytes(int(b))


def raise_hint(need: int) -> str:
    """How to raise ``dcfa.memory_budget`` to hold ``need`` bytes (with 10 % to spare)."""
    size = f"{math.ceil(need / 2**30 * 1.1)}GiB"
    return (
        f'raise the budget: dask.config.set({{"{CONFIG_KEY}": "{size}"}}) (or a fraction of '
        f"the available memory, e.g. 0.8; environment: DASK_DCFA__MEMORY_BUDGET={size})"
    )


def _enforce(est: DenseEstimate, hint: str, at) -> None:
    """Raise :class:`MemoryBudgetError` if ``est`` exceeds the budget; ``at(k)`` is the
    estimate of the same pass on the first ``k`` features (for what would fit)."""
    budget = memory_budget()
    p = est.n_columns
    if est.driver_bytes > budget.driver:
        parts = "; ".join(f"{what}: {gib(b)}" for what, b in est.driver_terms)
        fit = _largest_fitting(est, budget.driver, at)
        raise MemoryBudgetError(
            f"{est.who}: the dense pass would hold about {gib(est.driver_bytes)} in this "
            f"process ({p:,} x {p:,} float64 matrices of {gib(est.matrix_bytes)} each; "
            f"{parts}), over the memory budget of {gib(budget.driver)} ({budget.source}). "
            f"Nothing was computed. About {fit:,} features would fit. Options: {hint}; or "
            f"{raise_hint(est.driver_bytes)}."
        )
    if not est.tasks or est.local_tasks:
        return
    # the finished tiles wait on the workers (spread over them) until they are gathered
    share = est.result_bytes // max(len(budget.workers), 1)
    for addr, (limit, nthreads, mem_limit) in budget.workers.items():
        tasks, running = est.tasks_at_once(nthreads)
        need = tasks + share
        if need <= limit:
            continue
        where = (
            f"over the worker budget of {gib(limit)} ({_budget_word()} of the "
            f"{gib(mem_limit)} memory_limit of worker {addr}). Nothing was computed."
        )
        if share >= limit:  # the results themselves: narrower tiles would not help
            raise MemoryBudgetError(
                f"{est.who}: the dense pass's finished tiles, held by the workers until "
                f"gathered, would take about {gib(share)} on each of the "
                f"{len(budget.workers)} workers ({gib(need)} with its running tile tasks), "
                f"{where} Give the cluster more workers or memory"
                f"{_worker_raise_hint(need, mem_limit)}, or {hint}."
            )
        w = _widest_tile(est, (limit - share) / running)
        raise MemoryBudgetError(
            f"{est.who}: the tile tasks of the dense pass would hold about {gib(tasks)} on a "
            f"worker ({running} at once on its {nthreads} threads, up to "
            f"{gib(est.task_bytes)} each: tiles of up to {est.task_width:,} x "
            f"{est.task_width:,} float64 from the widest feature chunk) besides "
            f"{gib(share)} of finished tiles, {where} Rechunk the feature axis to at most "
            f"about {w:,} columns per chunk (X.rechunk({{1: {w}}})), give the workers more "
            f"memory{_worker_raise_hint(need, mem_limit)}, or {hint}."
        )


def _worker_raise_hint(need: int, mem_limit: int) -> str:
    """A worker's budget can grow up to its memory_limit: a larger fraction, if that fits."""
    fraction = math.ceil(100 * need / mem_limit) / 100
    if fraction > 0.95:
        return ""
    return (
        f", raise the budget to a larger fraction of the workers' memory (dask.config.set("
        f'{{"{CONFIG_KEY}": {fraction:g}}}))'
    )


def _budget_word() -> str:
    fraction, absolute = _budget_setting()
    if absolute is None:
        return f"{CONFIG_KEY} = {fraction:g}"
    return f"{CONFIG_KEY} = {format_bytes(absolute)}, capped"


def _largest_fitting(est: DenseEstimate, budget: int, at) -> int:
    """The most features whose estimate fits ``budget`` (bisection over the estimate itself:
    its terms grow as p^2, n p and with the chunks, so no single power law says it)."""
    lo, hi = 0, est.n_features  # at(lo) fits (nothing), at(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).driver_bytes <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def _widest_tile(est: DenseEstimate, per_task: float) -> int:
    quad = est.task_bytes / max(est.task_width, 1) ** 2
    return max(int(math.sqrt(max(per_task, 0) / quad)), 1)

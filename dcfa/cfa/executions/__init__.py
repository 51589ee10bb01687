"""How a CFA fit gets its statistics: a registry of executions behind one partition driver.

Every rule (LinCFA, NonLinCFA, GenLinCFA) is a function of :mod:`dcfa.cfa.rules`; what differs
between executions is only where the moments of ``[group, candidate, target]`` come from. Each
execution is one module:

``"dense"`` (:mod:`.dense`)
    the ``(D+1) x (D+1)`` moments: every option; memory O(D^2).
``"series"`` (:mod:`.series`)
    the kept features' series in memory: memory O(n D).
``"grid"`` (:mod:`.grid`)
    the moments of cells near each other on an xarray grid: memory O(D k).
``"rows"`` (:mod:`.rows`)
    per-column statistics, then the rows of the features that open a group: memory
    O(row_batch D).

All give the partition of ``"dense"`` under the same options (tests). ``mode="auto"`` (the
estimators' default) takes the first in :data:`EXECUTIONS` that supports the options and fits
the memory budget (:mod:`dcfa.memory`), so a natural call runs at any size, passing over one
that says a later one would be faster (``Execution.slower``: the dense matrix with a
neighbourhood above :data:`dense.DENSE_TIME_LIMIT` features); an explicit ``mode`` is an
override.

A new execution is one module with a subclass of :class:`Execution` (the interface says why it
cannot run, what memory it needs, its plan, the pass, the partition, which stored statistics
it reads and how it checks them) and one entry in the tuple registered below. The ``mode``
parameter accepts it from the registry; the pages and docstrings that list the modes name it
by hand (docs/contributing.md lists them).
"""

from __future__ import annotations

import logging

from dcfa._errors import InputError
from dcfa._validation import InputData
from dcfa.cfa.executions._base import Execution, Plan, grid_of
from dcfa.cfa.executions.dense import Dense
from dcfa.cfa.executions.grid import Grid
from dcfa.cfa.executions.rows import Rows
from dcfa.cfa.executions.series import Series
from dcfa.cfa.options import RENAMED, FitOptions

__all__ = [
    "EXECUTIONS",
    "MODES",
    "RENAMED",
    "Execution",
    "Plan",
    "choose",
    "grid_of",
    "reader_of",
    "register",
    "require",
    "unregister",
    "current_name",
]

logger = logging.getLogger("dcfa")

#: The executions by name, in the order ``mode="auto"`` tries them.
EXECUTIONS: dict[str, Execution] = {}
#: The values of ``mode``: a live set the estimators' parameter check reads.
MODES: set[str] = {"auto"}
MODES.update(RENAMED)  # the names before the rename still run, with a FutureWarning


def register(execution: Execution) -> Execution:
    """Add ``execution`` to :data:`EXECUTIONS` (last in ``mode="auto"``'s order), so
    ``mode=execution.name`` runs it."""
    if not execution.name or execution.name in MODES or execution.name in EXECUTIONS:
        raise ValueError(f"execution: the name {execution.name!r} is empty or taken")
    EXECUTIONS[execution.name] = execution
    MODES.add(execution.name)
    return execution


def current_name(name: str) -> str:
    """An execution's name (a ``mode``, or an ``execution`` attribute of a result written
    before the rename) as it is today."""
    return RENAMED.get(name, name)


def unregister(name: str) -> None:
    """Remove the execution ``name`` (a plugin's, a test's)."""
    EXECUTIONS.pop(name)
    MODES.discard(name)


for _execution in (Dense(), Series(), Grid(), Rows()):
    register(_execution)


def choose(opts: FitOptions, inp: InputData, folds) -> Execution:
    """The execution a fit runs on ``inp``: its ``mode``, or for ``"auto"`` the first that
    supports the options, fits the memory budget and would not be slower than a later one
    that can run (:meth:`Execution.slower`); failing that, the first slower one.

    Raises
    ------
    ValueError
        An explicit ``mode`` that cannot run these options (naming why).
    MemoryBudgetError
        ``"auto"`` and nothing fits: the dense estimate and why each other execution does not
        apply.
    """
    from dcfa.memory import MemoryBudgetError

    if opts.mode != "auto":
        return require(EXECUTIONS[opts.mode], opts, inp, folds)
    reasons, slower = {}, None
    for name, execution in EXECUTIONS.items():
        why = execution.why_not(opts, inp, folds)
        why = why[1] if why is not None else execution.fits(opts, inp, folds)
        if why is None:
            why = execution.slower(opts, inp, folds)
            if why is not None and slower is None:
                slower = execution  # runs if no later one can
        if why is None:
            if reasons:
                logger.info(
                    "%s: mode='auto' runs mode=%r (%s)",
                    opts.estimator,
                    name,
                    "; ".join(r.split(" (")[0] for r in reasons.values()),
                )
            return execution
        reasons[name] = why
    if slower is not None:
        return slower
    first, *others = reasons.values()
    raise MemoryBudgetError(f"{first} No other execution applies ({'; '.join(others)}).")


def require(execution: Execution, opts: FitOptions, inp: InputData, folds) -> Execution:
    """``execution``, checked: a ValueError naming the parameter when it cannot run these
    options, a :class:`dcfa.MemoryBudgetError` when it would not fit the budget."""
    from dcfa.memory import MemoryBudgetError

    why = execution.why_not(opts, inp, folds)
    if why is not None:
        raise InputError(f"{why[0]}: {why[1]}")
    why = execution.fits(opts, inp, folds)
    if why is not None:
        raise MemoryBudgetError(why)
    return execution


def reader_of(opts: FitOptions, inp: InputData, folds, moments) -> Execution:
    """The execution that reuses stored ``moments`` (``fit(..., moments=...)``): the
    ``mode``, or for ``"auto"`` the cheapest execution that reads their kind and can run."""
    if opts.mode != "auto":
        return choose(opts, inp, folds)
    readers = [e for e in reversed(EXECUTIONS.values()) if e.reads(moments, folds)]
    for execution in readers:
        if execution.why_not(opts, inp, folds) is None:
            return execution
    if not readers:  # of no kind: the dense execution refuses them, saying what it reads
        return next(iter(EXECUTIONS.values()))
    last = readers[-1]
    why = last.why_not(opts, inp, folds)
    raise InputError(f"moments: they are those of mode={last.name!r}; {why[0]}: {why[1]}")

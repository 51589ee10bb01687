"""What every execution answers, and the typed plan it hands from one step to the next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dcfa._errors import InputError, InputTypeError
from dcfa._validation import InputData
from dcfa.cfa.options import FitOptions

__all__ = ["Execution", "Plan", "grid_of", "sequential_only"]


@dataclass(frozen=True, kw_only=True, eq=False)
class Plan:
    """What :meth:`Execution.plan` decides before any pass, read by the later steps.

    Attributes
    ----------
    folds : Folds or None
        The rule's folds (NonLinCFA), or None.
    order : ndarray or None
        The visiting order of the features before any shuffle (a grid's order).
    blocks : ndarray or None
        Every feature's block (a variable, a lag): a group never spans two.
    neighbors : sparse matrix or None
        The features' adjacency (``neighbors``).
    """

    folds: Any = None
    order: np.ndarray | None = None
    blocks: np.ndarray | None = None
    neighbors: Any = None


class Execution:
    """One way to gather the statistics of a CFA fit and run its partition.

    A new execution is a module with a subclass of this and one entry in
    :data:`dcfa.cfa.executions.EXECUTIONS` (:func:`dcfa.cfa.executions.register`). Every
    method takes the fit's :class:`~dcfa.cfa.options.FitOptions`, never an estimator.

    Attributes
    ----------
    name : str
        Its ``mode``, recorded as the fit's ``execution_``.
    statistics : type
        The statistics value it gathers and reuses (:data:`dcfa.stats.kinds.KINDS`).
    whole_grid : bool
        Whether it reads every cell of the grid, in order (cells without data included), as
        the grid pass does; the others read the cells that hold data.
    """

    name = ""
    statistics: type = object
    whole_grid = False

    def why_not(self, opts: FitOptions, inp: InputData, folds) -> tuple[str, str] | None:
        """Why it cannot run these options on ``inp``: (the parameter to change, the
        reason), or None if it can."""
        return None

    def fits(self, opts: FitOptions, inp: InputData, folds) -> str | None:
        """Why it would not fit the memory budget (None if it fits); reads no data.

        Every execution says it: ``mode="auto"`` takes the first that can run and fits, so
        one that answered nothing would be taken whatever it holds.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.fits: say whether mode={self.name!r} fits the memory "
            "budget (dcfa.memory.memory_budget()): the reason it does not, or None"
        )

    def slower(self, opts: FitOptions, inp: InputData, folds) -> str | None:
        """Why ``mode="auto"`` should run a later execution first, when one can run: this
        one would be slower on ``inp`` (None: no reason)."""
        return None

    def plan(self, opts: FitOptions, inp: InputData, folds) -> Plan:
        """What the later steps read (checked, cheap)."""
        return Plan(folds=folds)

    def gather(self, opts: FitOptions, data, Y: np.ndarray, plan: Plan):
        """The one pass (or two) over the data: the statistics the partition reads."""
        raise NotImplementedError

    def partition(self, opts: FitOptions, stats, inp: InputData, plan: Plan) -> np.ndarray:
        """Every feature's group (-1: excluded)."""
        raise NotImplementedError

    def summary(self, stats):
        """Per-column statistics of all rows (exclusions, means, spreads) of ``stats``."""
        return stats

    def reads(self, moments, folds) -> bool:
        """Whether stored ``moments`` (``fit(..., moments=...)``) are of the kind it reuses."""
        return isinstance(moments, self.statistics)

    def checked(self, opts: FitOptions, moments, inp: InputData, Y: np.ndarray, folds):
        """Stored ``moments`` checked for their form (kind, parts, samples, features)."""
        return _check_stored(self.name, self.statistics, moments, inp, folds)

    def reuse(self, opts: FitOptions, stats, inp: InputData, data, Y, plan: Plan):
        """The statistics the partition reads, from checked stored ones."""
        return stats

    def grid_pass(self, plan: Plan) -> dict | None:
        """The grid pass another caller may gather for it (:func:`dcfa.grid_moments`'s
        options), or None when it reads no grid moments."""
        return None


def grid_of(opts: FitOptions, inp: InputData, *, adjacency: bool = True):
    """The features' grid: adjacency, visiting order, blocks (:func:`resolve_grid`)."""
    from dcfa.neighbors import resolve_grid

    return resolve_grid(
        opts.neighbors,
        inp.n_features,
        inp.layout,
        periodic=opts.periodic,
        adjacency=adjacency,
    )


def sequential_only(name: str, opts: FitOptions) -> tuple[str, str] | None:
    """What the grid and rows executions share: the sequential loop, complete cells."""
    if opts.strategy != "sequential":
        return "strategy", f"mode={name!r} needs strategy='sequential'"
    if opts.missing != "exclude":
        return "missing", f"mode={name!r} needs missing='exclude'"
    return None


def as_dask(data):
    import dask.array as da

    return data if isinstance(data, da.Array) else da.from_array(data, chunks="auto")


def _check_stored(name: str, kind: type, moments, inp: InputData, folds):
    """Stored per-column or grid statistics: one value, or NonLinCFA's one per row segment."""
    if isinstance(moments, list | tuple):
        if not moments or not all(isinstance(m, kind) for m in moments):
            raise InputTypeError(f"moments: expected a list of {kind.__name__} (one per segment)")
        n = sum(m.n for m in moments)
        if n != inp.n_samples or moments[0].n_features != inp.n_features:
            raise InputError(
                f"moments: they describe {n} samples x {moments[0].n_features} "
                f"features, but X has {inp.n_samples} x {inp.n_features}"
            )
        return list(moments)
    if not isinstance(moments, kind):
        raise InputTypeError(
            f"moments: mode={name!r} reuses {kind.__name__}, got {type(moments).__name__}"
        )
    if moments.n != inp.n_samples or moments.n_features != inp.n_features:
        raise InputError(
            f"moments: they describe {moments.n} samples x {moments.n_features} "
            f"features, but X has {inp.n_samples} x {inp.n_features}"
        )
    return moments

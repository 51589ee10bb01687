"""What a CFA fit was asked to do, resolved once: :class:`FitOptions`.

The estimators keep scikit-learn's flat parameters; ``fit`` turns them into one frozen value
(:meth:`dcfa.cfa.base.BaseCFA.fit_options`). Below the estimator module, the executions, the
driver and the memory estimate read that value, never an estimator. A parameter an estimator
does not have takes the default written here, once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from dcfa._errors import outside_stacklevel

__all__ = ["FitOptions", "RENAMED"]

#: The executions' names before they were named after what they hold (``mode``, and the
#: ``execution`` of results written before): they still run, with a FutureWarning, until
#: the next release.
RENAMED = {"full": "dense", "neighbors": "grid", "seed-rows": "rows"}


@dataclass(frozen=True, eq=False)
class FitOptions:
    """The options of one CFA fit (see the estimators for each parameter).

    Attributes
    ----------
    estimator : str
        The estimator's class name, for messages and logs.
    rule : callable
        The aggregation rule of :mod:`dcfa.cfa.rules` with its parameters bound.
    cv : int, splitter, iterable or None
        NonLinCFA's folds (:meth:`folds`; None is 5 folds there).
    reads_folds : bool
        Whether the rule reads folds (the estimator has ``cv``).
    """

    estimator: str
    rule: Callable | None = None
    mode: str = "auto"
    inputs: Any = "identity"
    aggregation: str = "mean"
    standardize: bool = True
    missing: str = "exclude"
    strategy: str = "sequential"
    compare: str = "seed"
    scan: str = "single"
    shuffle: bool = False
    random_state: Any = None
    neighbors: Any = None
    neighborhood: str = "group"
    periodic: Any = "auto"
    row_batch: int = 256
    cv: Any = None
    reads_folds: bool = False

    @classmethod
    def of(cls, params: dict, *, estimator: str, rule: Callable | None = None) -> FitOptions:
        """The options from an estimator's ``get_params()``: the fields it has, the defaults
        here for the others (LinCFA has no ``inputs``, GenLinCFA no ``strategy``)."""
        names = {f.name for f in fields(cls)} - {"estimator", "rule", "reads_folds"}
        given = {k: params[k] for k in names & set(params)}
        old = given.get("mode")
        if isinstance(old, str) and old in RENAMED:
            warnings.warn(
                f"mode={old!r} is now mode={RENAMED[old]!r} (the executions are named after "
                "what they hold); the old name stops working in the next release",
                FutureWarning,
                stacklevel=outside_stacklevel(),
            )
            given["mode"] = RENAMED[old]
        return cls(estimator=estimator, rule=rule, reads_folds="cv" in params, **given)

    def folds(self, n_samples: int):
        """The rule's cross-validation folds on ``n_samples`` rows (:class:`Folds`), or None."""
        if not self.reads_folds:
            return None
        from dcfa.cfa.folds import make_folds

        return make_folds(self.cv, n_samples)

    @property
    def copies_inputs(self) -> bool:
        """Whether the fit computes new inputs (not the identity): a copy of the data."""
        return not (isinstance(self.inputs, str) and self.inputs == "identity")

    def loop(self, *, order=None, blocks=None) -> dict:
        """The options of :func:`dcfa.cfa.driver.drive`'s loop."""
        return {
            "standardize": self.standardize,
            "shuffle": self.shuffle,
            "random_state": self.random_state,
            "compare": self.compare,
            "scan": self.scan,
            "strategy": self.strategy,
            "neighborhood": self.neighborhood,
            "order": order,
            "blocks": blocks,
        }

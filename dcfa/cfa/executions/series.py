"""``"series"``: the kept features' series held in memory (:mod:`dcfa.cfa.series`).

Every rule and option but ``strategy="greedy"`` and ``missing="pairwise"``; memory O(n D), a
test O(n) per candidate.
"""

from __future__ import annotations

import logging
import time

from dcfa._errors import InputTypeError
from dcfa.cfa.executions._base import Execution, sequential_only
from dcfa.cfa.executions.dense import dense_plan
from dcfa.stats.columns import ColumnMoments

logger = logging.getLogger("dcfa")

# where the options the series cannot run do run
_ELSEWHERE = {"strategy": "greedy", "missing": "pairwise"}


class Series(Execution):
    name = "series"
    statistics = ColumnMoments

    def why_not(self, opts, inp, folds):
        why = sequential_only(self.name, opts)
        if why is None:
            return None
        key, reason = why
        return key, f"{reason} ({_ELSEWHERE[key]}: mode='dense')"

    def fits(self, opts, inp, folds):
        from dcfa.cfa.series import over_budget

        why = over_budget(inp.n_samples, inp.n_features)
        return None if why is None else f"mode='series': {why}"

    def plan(self, opts, inp, folds):
        return dense_plan(opts, inp, folds)

    def gather(self, opts, data, Y, plan, columns=None):
        from dcfa.cfa.series import SeriesData

        t = time.perf_counter()
        bounds = parts = None
        if plan.folds is not None:
            bounds, splits = plan.folds.bounds, plan.folds.splits
            parts = [list(tr) for tr, _ in splits] + [list(te) for _, te in splits]
        stats = SeriesData.gather(data, Y[:, 0], bounds=bounds, parts=parts, columns=columns)
        logger.info(
            "%s: the series of %d cells x %d samples (%.0f MiB) gathered in %.1f s",
            opts.estimator,
            stats.series.shape[0],
            stats.series.shape[1],
            stats.nbytes / 2**20,
            time.perf_counter() - t,
        )
        return stats

    def partition(self, opts, stats, inp, plan):
        from dcfa.cfa.driver import drive

        return drive(
            stats.columns,
            stats.basis,
            opts.rule,
            neighbors=plan.neighbors,
            **opts.loop(order=plan.order, blocks=plan.blocks),
        )

    def summary(self, stats):
        return stats.columns

    def checked(self, opts, moments, inp, Y, folds):
        if isinstance(moments, list | tuple):
            raise InputTypeError(
                "moments: mode='series' reuses one ColumnMoments (of all rows); a list "
                "of them, one per row segment, is what mode='rows' reuses"
            )
        return super().checked(opts, moments, inp, Y, folds)

    def reuse(self, opts, stats, inp, data, Y, plan):
        return self.gather(opts, data, Y, plan, columns=stats)

"""``"rows"``: per-column statistics, then the correlation rows of the features that
open a group (``compare="seed"``, no ``neighbors``); memory O(row_batch D).

For NonLinCFA's folds, both per row segment from the same passes, merged into the folds' row
sets as the dense moments are.
"""

from __future__ import annotations

import logging

from dcfa._errors import InputError
from dcfa.cfa.executions._base import Execution, Plan, as_dask, grid_of, sequential_only
from dcfa.stats.columns import ColumnMoments

logger = logging.getLogger("dcfa")


class Rows(Execution):
    name = "rows"
    statistics = ColumnMoments

    def why_not(self, opts, inp, folds):
        if opts.compare != "seed" or opts.neighbors is not None:
            # name the parameter that is set: with compare='seed', it is neighbors
            bad = "compare" if opts.compare != "seed" else "neighbors"
            return bad, (
                "mode='rows' computes only the seeds' rows: it needs compare='seed' and "
                "no neighbors"
            )
        return sequential_only(self.name, opts)

    def fits(self, opts, inp, folds):
        from dcfa.memory import gib, memory_budget

        batch = opts.row_batch
        segments = 1 if folds is None else folds.n_segments
        # a batch's rows per segment, held twice while a pass's result replaces the last
        per_row = 2 * 8 * segments * (inp.n_features + 1)
        need = batch * per_row
        budget = memory_budget()
        if need > budget.driver:
            fit = max(1, budget.driver // per_row)
            return (
                f"mode='rows': {batch} rows of {inp.n_features:,} features per pass"
                + (f" in each of {segments} row segments" if segments > 1 else "")
                + f" would hold {gib(need)}, over the budget of {gib(budget.driver)} "
                f"({budget.source}); row_batch={fit} fits"
            )
        return None

    def plan(self, opts, inp, folds):
        return Plan(folds=folds, blocks=grid_of(opts, inp, adjacency=False).blocks)

    def gather(self, opts, data, Y, plan):
        from dcfa.stats.columns import column_pass

        # NonLinCFA: one per row segment, from the same pass
        bounds = None if plan.folds is None else plan.folds.bounds
        return column_pass(as_dask(data), Y[:, 0], segments=bounds)

    def partition(self, opts, stats, inp, plan):
        from dcfa.cfa.basis import seed_rows
        from dcfa.cfa.driver import drive
        from dcfa.cfa.inputs import apply_inputs

        data = as_dask(apply_inputs(inp.data, opts.inputs))
        batch = opts.row_batch
        whole, make_basis, source = seed_rows(data, stats, plan.folds, batch_size=batch)
        labels = drive(whole, make_basis, opts.rule, **opts.loop(blocks=plan.blocks))
        logger.info(
            "%s rows execution: %d passes of %d rows", opts.estimator, source.n_passes, batch
        )
        return labels

    def summary(self, stats):
        from dcfa.cfa.basis import merged_columns

        # NonLinCFA's segments: the column statistics of all rows, merged
        return merged_columns(stats) if isinstance(stats, list | tuple) else stats

    def reads(self, moments, folds):
        if isinstance(moments, list | tuple):  # NonLinCFA's: one per row segment
            return len(moments) > 0 and all(isinstance(m, ColumnMoments) for m in moments)
        # one value of all rows: the series reuse it as well (with folds, only they do)
        return isinstance(moments, ColumnMoments) and folds is None

    def checked(self, opts, moments, inp, Y, folds):
        segments = 0 if folds is None else folds.n_segments
        if isinstance(moments, list | tuple):
            if moments and all(isinstance(m, ColumnMoments) for m in moments):
                if len(moments) != segments:
                    expect = "one value" if folds is None else f"one per row segment ({segments})"
                    raise InputError(
                        f"moments: {len(moments)} ColumnMoments, expected {expect} for this "
                        "estimator"
                    )
        elif isinstance(moments, ColumnMoments) and folds is not None:
            raise InputError(
                f"moments: mode='rows' reuses one ColumnMoments per row segment of "
                f"the folds ({folds.n_segments}, segment_moments_), got one value"
            )
        return super().checked(opts, moments, inp, Y, folds)

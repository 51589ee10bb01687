"""``"dense"``: the ``(D+1) x (D+1)`` moments (one per row segment for NonLinCFA's folds).

Every option runs here; memory O(D^2), checked against the budget before the pass.
"""

from __future__ import annotations

from dcfa._errors import InputError, InputTypeError
from dcfa.cfa.executions._base import Execution, Plan, grid_of
from dcfa.stats.moments import Moments


def dense_plan(opts, inp, folds) -> Plan:
    """What the executions over a dense matrix (full, series) pass to their loops."""
    grid = grid_of(opts, inp)
    return Plan(folds=folds, neighbors=grid.adjacency, order=grid.order, blocks=grid.blocks)


#: kept features above which, with a neighbourhood, the series execution is faster: the
#: matrix costs n D^2 products, the series loop n D k for k neighbours. GenLinCFA(neighbors=1),
#: 600 months, in memory: dense / series 1.0x at 1 800 features, 1.8x at 7 200, 3.0x at 12
#: 800 (LinCFA 2.0x, 2.6x); NonLinCFA, whose tests cost more, 0.9x-1.1x up to 7 200
DENSE_TIME_LIMIT = 8_000


class Dense(Execution):
    name = "dense"
    statistics = Moments

    def slower(self, opts, inp, folds):
        if opts.neighbors is None or inp.n_features <= DENSE_TIME_LIMIT:
            return None
        return (
            f"with neighbours, the series execution tests only them: faster than the "
            f"{inp.n_features:,} x {inp.n_features:,} matrix above {DENSE_TIME_LIMIT:,} features"
        )

    def fits(self, opts, inp, folds):
        from dcfa.memory import MemoryBudgetError, check_dense

        try:
            check_dense(opts, inp.n_samples, inp.n_features, data=inp.data, mode="dense")
        except MemoryBudgetError as exc:
            return str(exc)
        return None

    def plan(self, opts, inp, folds):
        return dense_plan(opts, inp, folds)

    def gather(self, opts, data, Y, plan):
        from dcfa.stats.moments import moments

        # the partition reads rows: each matrix kept as its upper tiles, never assembled
        tiles = opts.missing == "exclude"
        if plan.folds is None:
            return moments(data, Y, missing=opts.missing, tiles=tiles)
        bounds = plan.folds.bounds
        return moments(data, Y, segments=bounds, missing=opts.missing, tiles=tiles)

    def partition(self, opts, stats, inp, plan):
        from dcfa.cfa.basis import fold_parts
        from dcfa.cfa.driver import partition_moments

        folds = plan.folds
        parts, whole = ([stats], stats) if folds is None else fold_parts(stats, folds)
        return partition_moments(
            parts,
            opts.rule,
            whole=whole,
            neighbors=plan.neighbors,
            **opts.loop(order=plan.order, blocks=plan.blocks),
        )

    def summary(self, stats):
        from dcfa.cfa.basis import merge_rows

        # NonLinCFA's segments: merged row by row, the p x p matrix built only when asked for
        # (the fitted moments_), so the fit holds one matrix per segment and no more
        return merge_rows(stats) if isinstance(stats, list | tuple) else stats

    def reads(self, moments, folds):
        if isinstance(moments, list | tuple):  # NonLinCFA's: one per row segment
            return len(moments) > 0 and all(isinstance(m, Moments) for m in moments)
        return isinstance(moments, Moments)

    def checked(self, opts, moments, inp, Y, folds):
        parts = [moments] if isinstance(moments, Moments) else list(moments)
        if not parts or not all(isinstance(p, Moments) for p in parts):
            raise InputTypeError("moments: expected a Moments value (or a list of them)")
        expect = 1 if folds is None else folds.n_segments
        if len(parts) != expect:
            raise InputError(
                f"moments: expected {expect} Moments for this estimator, got {len(parts)}"
            )
        n = sum(p.n for p in parts)
        if parts[0].n_features != inp.n_features or n != inp.n_samples:
            raise InputError(
                f"moments: they describe {n} samples x {parts[0].n_features} features, but X "
                f"has {inp.n_samples} x {inp.n_features}"
            )
        if parts[0].n_targets != Y.shape[1]:
            raise InputError(f"moments: {parts[0].n_targets} targets, expected {Y.shape[1]}")
        if opts.missing != parts[0].missing:
            raise InputError(
                f"moments: computed with missing={parts[0].missing!r}, the estimator has "
                f"missing={opts.missing!r}"
            )
        return moments if isinstance(moments, Moments) else parts

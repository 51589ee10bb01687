"""``"grid"``: the moments of cells near each other on an xarray grid.

:func:`dcfa.grid_moments` gives them; a group stays within the radius of its seed
(``neighborhood="seed"``); memory O(D k). For NonLinCFA's folds, one grid pass per row segment
(every row read once), merged for the exclusions and scales, and each group grows on a local
basis of its fold sets. Every grid dim but the block dims must hold a neighbourhood:
``2 reach + 1`` cells, ``reach`` the radius for seed tests, twice it for a group's mean or
folds.
"""

from __future__ import annotations

from dataclasses import dataclass

from dcfa._errors import InputError
from dcfa.cfa.executions._base import Execution, Plan, grid_of, sequential_only
from dcfa.stats.grid import GridMoments


@dataclass(frozen=True, kw_only=True, eq=False)
class GridPlan(Plan):
    """The grid pass: the radius of the rule, how far apart the gathered cells may be
    (``reach``), the grid's shape, which of its axes wrap and which are blocks."""

    radius: int
    reach: int
    grid: tuple
    periodic: tuple
    block_axes: tuple


class Grid(Execution):
    name = "grid"
    statistics = GridMoments
    whole_grid = True

    def why_not(self, opts, inp, folds):
        from dcfa.neighbors import is_radius

        if not is_radius(opts.neighbors) or inp.layout is None:
            return "neighbors", (
                "mode='grid' needs an int radius and an xarray.DataArray X (its feature "
                "dims are the grid)"
            )
        if inp.layout.cell_grid is not None:
            return "neighbors", (
                "mode='grid' reads the whole grid: X's feature dims must be the grid dims, "
                f"not the stacked cell dim {inp.layout.feature_dims[0]!r} (pass the unstacked "
                "field, cells without data as NaN: they are excluded)"
            )
        if opts.neighborhood != "seed":
            return "neighborhood", (
                "mode='grid' keeps a group within the radius of its seed; set "
                "neighborhood='seed' (mode='series' grows groups through any member)"
            )
        # NonLinCFA's folds: one grid pass per row segment, merged for exclusions and scales
        why = sequential_only(self.name, opts)
        return why if why is not None else _narrow_dim(inp.layout, opts, folds)

    def fits(self, opts, inp, folds):
        return None  # a few moments per cell (one per neighbour), as the series' columns

    def plan(self, opts, inp, folds):
        from dcfa.neighbors import block_axes

        wrap = grid_of(opts, inp, adjacency=False)
        return GridPlan(
            folds=folds,
            order=wrap.order,
            radius=int(opts.neighbors),
            reach=_reach(opts, folds),
            grid=tuple(inp.layout.feature_shape),
            periodic=tuple(int(a) for a in wrap.periodic),
            block_axes=block_axes(inp.layout.feature_dims),
        )

    def grid_pass(self, plan):
        return {"radius": plan.reach, "periodic": plan.periodic, "blocks": plan.block_axes}

    def gather(self, opts, data, Y, plan):
        from dcfa.stats.grid import grid_moments, segment_grid_moments

        field = data.reshape((data.shape[0], *plan.grid))
        options = self.grid_pass(plan)
        if plan.folds is None:
            return grid_moments(field, Y[:, 0], **options)
        return segment_grid_moments(field, Y[:, 0], bounds=plan.folds.bounds, **options)

    def partition(self, opts, stats, inp, plan):
        from dcfa.cfa.grid_partition import grid_partition

        segments = stats if isinstance(stats, list) else None
        return grid_partition(
            self.summary(stats),
            opts.rule,
            segments=segments,
            folds=plan.folds if segments is not None else None,
            radius=plan.radius,
            standardize=opts.standardize,
            shuffle=opts.shuffle,
            random_state=opts.random_state,
            compare=opts.compare,
            scan=opts.scan,
            order=plan.order,
        )

    def summary(self, stats):
        return stats.whole if isinstance(stats, list) else stats

    def reads(self, moments, folds):
        if isinstance(moments, list | tuple):  # NonLinCFA's: one per row segment
            return len(moments) > 0 and all(isinstance(m, GridMoments) for m in moments)
        return isinstance(moments, GridMoments)

    def reuse(self, opts, stats, inp, data, Y, plan):
        from dcfa.stats.grid import GridSegments

        _check_grid(stats, plan, plan.folds)
        return GridSegments(stats) if isinstance(stats, list | tuple) else stats


def _check_grid(stats, plan: GridPlan, folds) -> None:
    """Stored grid moments: one per row segment of the folds, of this grid, reaching far
    enough, with the same wrapping and blocks."""
    if folds is not None:
        if not isinstance(stats, list) or len(stats) != folds.n_segments:
            raise InputError(
                f"moments: expected the grid moments of the {folds.n_segments} row "
                "segments of the folds (the estimator's segment_moments_)"
            )
        for part in stats:
            _check_grid(part, plan, None)
        return
    if stats.shape != plan.grid or stats.radius < plan.reach:
        raise InputError(
            f"moments: grid {stats.shape}, radius {stats.radius}; need grid "
            f"{plan.grid}, radius >= {plan.reach}"
        )
    wraps = tuple(int(a) for a in stats.periodic)
    if wraps != plan.periodic:
        raise InputError(
            f"moments: computed with periodic grid dims {wraps}, the estimator's grid "
            f"wraps along {plan.periodic} (see periodic=)"
        )
    if tuple(stats.blocks) != tuple(plan.block_axes):
        raise InputError(
            f"moments: computed with block dims {tuple(stats.blocks)} (never "
            f"neighbours), X has {tuple(plan.block_axes)}"
        )


def _reach(opts, folds) -> int:
    """How far apart the cells whose moments the grid execution gathers may be: seed tests
    read pairs within the radius; a group's mean (or fold sets, built on a local basis)
    pairs within twice the radius."""
    radius = int(opts.neighbors)
    return radius if opts.compare == "seed" and folds is None else 2 * radius


def _narrow_dim(layout, opts, folds) -> tuple[str, str] | None:
    """Why the grid pass cannot run on this grid: a grid dim (not a block dim) narrower than
    the ``2 reach + 1`` cells of a neighbourhood (the pass refuses it, and a periodic dim
    that narrow would meet a cell twice), or None."""
    from dcfa.neighbors import block_axes

    reach = _reach(opts, folds)
    dims, shape = layout.feature_dims, layout.feature_shape
    blocks = block_axes(dims)
    narrow = [
        (d, s)
        for ax, (d, s) in enumerate(zip(dims, shape, strict=True))
        if ax not in blocks and s < 2 * reach + 1
    ]
    if not narrow:
        return None
    why = ""
    if reach != int(opts.neighbors):
        why = ", twice the radius: " + (
            f"compare={opts.compare!r}" if folds is None else "NonLinCFA's folds"
        )
    sizes = ", ".join(f"{d!r} has {s}" for d, s in narrow)
    return "neighbors", (
        f"mode='grid' gathers the moments of cells up to {reach} steps apart "
        f"(neighbors={int(opts.neighbors)}{why}), so every grid dim needs at least "
        f"{2 * reach + 1} cells; {sizes} (mode='series' or 'dense' run this grid)"
    )

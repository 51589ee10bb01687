"""How a CFA fit gets its statistics: a registry of executions behind one partition driver.

Every rule (LinCFA, NonLinCFA, GenLinCFA) is a function of :mod:`dcfa.cfa.rules`; what differs
between executions is only where the moments of ``[group, candidate, target]`` come from:

``"full"``
    the ``(D+1) x (D+1)`` moments (one per row segment for NonLinCFA's folds): every option;
    memory O(D^2).
``"series"``
    the kept features' series held in memory (:mod:`dcfa.cfa.series`): every rule and option but
    ``strategy="greedy"`` and ``missing="pairwise"``; memory O(n D), a test O(n) per candidate.
``"neighbors"``
    the moments of cells near each other on an xarray grid (:func:`dcfa.grid_moments`): a
    group stays within the radius of its seed (``neighborhood="seed"``); memory O(D k). For
    NonLinCFA's folds, one grid pass per row segment (every row read once), merged for the
    exclusions and scales, and each group grows on a local basis of its fold sets. Every grid
    dim but the block dims must hold a neighbourhood: ``2 reach + 1`` cells, ``reach`` the
    radius for seed tests, twice it for a group's mean or folds (else auto takes another).
``"seed-rows"``
    per-column statistics, then the correlation rows of the features that open a group
    (``compare="seed"``, no ``neighbors``); memory O(row_batch D). For NonLinCFA's folds, both
    per row segment from the same passes, merged into the folds' row sets as the dense
    moments are.

All give the partition of ``"full"`` under the same options (tests). ``mode="auto"`` (the
estimators' default) takes the first of full, series, neighbors, seed-rows that supports the
options and fits the memory budget (:mod:`dcfa.memory`), so a natural call runs at any size; an
explicit ``mode`` is an override. A new execution is one class with the five methods of
:class:`Execution` and one entry in :data:`EXECUTIONS`.
"""

from __future__ import annotations

import logging

import numpy as np

from dcfa._validation import InputData

__all__ = ["EXECUTIONS", "MODES", "choose", "execution_for_moments"]

logger = logging.getLogger("dcfa")


class Execution:
    """One way to gather statistics and run the partition (subclass and register)."""

    name = ""

    def why_not(self, est, inp: InputData, folds) -> tuple[str, str] | None:
        """Why this execution cannot run ``est`` on ``inp``: (the parameter to change, the
        reason), or None if it can."""
        return None

    def fits(self, est, inp: InputData, folds) -> str | None:
        """Why it would not fit the memory budget (None if it fits)."""
        return None

    def prepare(self, est, inp: InputData, folds) -> dict:
        """Keyword arguments of :meth:`gather` and :meth:`partition` (checked, cheap)."""
        return {}

    def gather(self, est, data, Y, extras: dict):
        """The one pass (or two) over the data: the statistics the partition reads."""
        raise NotImplementedError

    def partition(self, est, stats, inp: InputData, extras: dict) -> np.ndarray:
        raise NotImplementedError

    def summary(self, stats):
        """Per-column statistics of all rows (exclusions, means, spreads) of ``stats``."""
        return stats

    def reuse(self, est, moments, data, Y, extras: dict):
        """The statistics from stored ``moments`` (``fit(..., moments=...)``), checked."""
        return moments


def _loop(est, extras: dict) -> dict:
    """The driver's options from the estimator's parameters."""
    p = est.get_params(deep=False)
    return {
        "standardize": est._standardize,
        "shuffle": p.get("shuffle", False),
        "random_state": p.get("random_state"),
        "compare": p.get("compare", "seed"),
        "scan": p.get("scan", "single"),
        "strategy": p.get("strategy", "sequential"),
        "neighborhood": p.get("neighborhood", "group"),
        "order": extras.get("order"),
        "blocks": extras.get("feature_blocks"),
    }


def _dense_extras(est, inp: InputData, folds) -> dict:
    """What the executions over a dense matrix (full, series) pass to their loops."""
    grid = _grid(est, inp)
    return {
        "folds": folds,
        "neighbors": grid.adjacency,
        "order": grid.order,
        "feature_blocks": grid.blocks,
    }


def _grid(est, inp: InputData, *, adjacency: bool = True):
    from dcfa.neighbors import resolve_grid

    p = est.get_params(deep=False)
    return resolve_grid(
        p.get("neighbors"),
        inp.n_features,
        inp.layout,
        periodic=p.get("periodic", "auto"),
        adjacency=adjacency,
    )


class Full(Execution):
    name = "full"

    def fits(self, est, inp, folds):
        from dcfa.memory import MemoryBudgetError, check_dense

        try:
            check_dense(est, inp.n_samples, inp.n_features, data=inp.data, mode="full")
        except MemoryBudgetError as exc:
            return str(exc)
        return None

    def prepare(self, est, inp, folds):
        return _dense_extras(est, inp, folds)

    def gather(self, est, data, Y, extras):
        from dcfa.stats.moments import moments

        folds = extras["folds"]
        missing = est.get_params(deep=False).get("missing", "exclude")
        # the partition reads rows: each matrix kept as its upper tiles, never assembled
        tiles = missing == "exclude"
        if folds is None:
            return moments(data, Y, missing=missing, tiles=tiles)
        return moments(data, Y, segments=folds.bounds, missing=missing, tiles=tiles)

    def partition(self, est, stats, inp, extras):
        from dcfa.cfa.basis import fold_parts
        from dcfa.cfa.driver import partition_moments

        folds = extras["folds"]
        parts, whole = ([stats], stats) if folds is None else fold_parts(stats, folds)
        return partition_moments(
            parts,
            est._accept(),
            whole=whole,
            neighbors=extras["neighbors"],
            **_loop(est, extras),
        )

    def summary(self, stats):
        from dcfa.cfa.basis import merge_rows

        # NonLinCFA's segments: merged row by row, the p x p matrix built only when asked for
        # (the fitted moments_), so the fit holds one matrix per segment and no more
        return merge_rows(stats) if isinstance(stats, list | tuple) else stats


class Series(Execution):
    name = "series"

    def why_not(self, est, inp, folds):
        p = est.get_params(deep=False)
        if p.get("strategy", "sequential") != "sequential":
            return "strategy", "mode='series' needs strategy='sequential' (greedy: mode='full')"
        if p.get("missing", "exclude") != "exclude":
            return "missing", "mode='series' needs missing='exclude' (pairwise: mode='full')"
        return None

    def fits(self, est, inp, folds):
        from dcfa.cfa.series import over_budget

        why = over_budget(inp.n_samples, inp.n_features)
        return None if why is None else f"mode='series': {why}"

    def prepare(self, est, inp, folds):
        return _dense_extras(est, inp, folds)

    def gather(self, est, data, Y, extras, columns=None):
        import time

        from dcfa.cfa.series import SeriesData

        t = time.perf_counter()
        folds = extras["folds"]
        bounds = parts = None
        if folds is not None:
            bounds, splits = folds.bounds, folds.splits
            parts = [list(tr) for tr, _ in splits] + [list(te) for _, te in splits]
        stats = SeriesData.gather(data, Y[:, 0], bounds=bounds, parts=parts, columns=columns)
        logger.info(
            "%s: the series of %d cells x %d samples (%.0f MiB) gathered in %.1f s",
            type(est).__name__,
            stats.series.shape[0],
            stats.series.shape[1],
            stats.nbytes / 2**20,
            time.perf_counter() - t,
        )
        return stats

    def reuse(self, est, moments, data, Y, extras):
        return self.gather(est, data, Y, extras, columns=moments)

    def partition(self, est, stats, inp, extras):
        from dcfa.cfa.driver import drive

        return drive(
            stats.columns,
            stats.basis,
            est._accept(),
            neighbors=extras["neighbors"],
            **_loop(est, extras),
        )

    def summary(self, stats):
        return stats.columns


class Grid(Execution):
    name = "neighbors"

    def why_not(self, est, inp, folds):
        from dcfa.neighbors import is_radius

        p = est.get_params(deep=False)
        if not is_radius(p.get("neighbors")) or inp.layout is None:
            return "neighbors", (
                "mode='neighbors' needs an int radius and an xarray.DataArray X (its feature "
                "dims are the grid)"
            )
        if inp.layout.cell_grid is not None:
            return "neighbors", (
                "mode='neighbors' reads the whole grid: X's feature dims must be the grid dims, "
                f"not the stacked cell dim {inp.layout.feature_dims[0]!r} (pass the unstacked "
                "field, cells without data as NaN: they are excluded)"
            )
        if p.get("neighborhood", "group") != "seed":
            return "neighborhood", (
                "mode='neighbors' keeps a group within the radius of its seed; set "
                "neighborhood='seed' (mode='series' grows groups through any member)"
            )
        # NonLinCFA's folds: one grid pass per row segment, merged for exclusions and scales
        why = _sequential_only(self.name, p)
        return why if why is not None else _narrow_dim(inp.layout, p, folds)

    def prepare(self, est, inp, folds):
        from dcfa.neighbors import block_axes

        wrap = _grid(est, inp, adjacency=False)
        p = est.get_params(deep=False)
        return {
            "radius": int(p["neighbors"]),
            "reach": _reach(p, folds),
            "folds": folds,
            "grid": tuple(inp.layout.feature_shape),
            "periodic": tuple(int(a) for a in wrap.periodic),
            "blocks": block_axes(inp.layout.feature_dims),
            "order": wrap.order,
        }

    def gather(self, est, data, Y, extras):
        from dcfa.stats.grid import grid_moments, segment_grid_moments

        field = data.reshape((data.shape[0], *extras["grid"]))
        options = {
            "radius": extras["reach"],
            "periodic": extras["periodic"],
            "blocks": extras["blocks"],
        }
        if extras["folds"] is None:
            return grid_moments(field, Y[:, 0], **options)
        return segment_grid_moments(field, Y[:, 0], bounds=extras["folds"].bounds, **options)

    def partition(self, est, stats, inp, extras):
        from dcfa.cfa.grid_partition import grid_partition

        loop = _loop(est, extras)
        segments = stats if isinstance(stats, list) else None
        return grid_partition(
            self.summary(stats),
            est._accept(),
            segments=segments,
            folds=extras["folds"] if segments is not None else None,
            radius=extras["radius"],
            standardize=loop["standardize"],
            shuffle=loop["shuffle"],
            random_state=loop["random_state"],
            compare=loop["compare"],
            scan=loop["scan"],
            order=loop["order"],
        )

    def summary(self, stats):
        return stats.whole if isinstance(stats, list) else stats

    def reuse(self, est, moments, data, Y, extras):
        from dcfa.stats.grid import GridSegments

        return GridSegments(moments) if isinstance(moments, list | tuple) else moments

    def check_reused(self, stats, inp, extras) -> None:
        folds = extras["folds"]
        if folds is not None:
            if not isinstance(stats, list) or len(stats) != folds.n_segments:
                raise ValueError(
                    f"moments: expected the grid moments of the {folds.n_segments} row "
                    "segments of the folds (the estimator's segment_moments_)"
                )
            for part in stats:
                self.check_reused(part, inp, dict(extras, folds=None))
            return
        need = extras["reach"]
        if stats.shape != extras["grid"] or stats.radius < need:
            raise ValueError(
                f"moments: grid {stats.shape}, radius {stats.radius}; need grid "
                f"{extras['grid']}, radius >= {need}"
            )
        wraps = tuple(int(a) for a in stats.periodic)
        if wraps != extras["periodic"]:
            raise ValueError(
                f"moments: computed with periodic grid dims {wraps}, the estimator's grid "
                f"wraps along {extras['periodic']} (see periodic=)"
            )
        if tuple(stats.blocks) != tuple(extras["blocks"]):
            raise ValueError(
                f"moments: computed with block dims {tuple(stats.blocks)} (never "
                f"neighbours), X has {tuple(extras['blocks'])}"
            )


class SeedRows(Execution):
    name = "seed-rows"

    def why_not(self, est, inp, folds):
        p = est.get_params(deep=False)
        if p.get("compare", "seed") != "seed" or p.get("neighbors") is not None:
            # name the parameter that is set: with compare='seed', it is neighbors
            bad = "compare" if p.get("compare", "seed") != "seed" else "neighbors"
            return bad, (
                "mode='seed-rows' computes only the seeds' rows: it needs compare='seed' and "
                "no neighbors"
            )
        return _sequential_only(self.name, p)

    def fits(self, est, inp, folds):
        from dcfa.memory import gib, memory_budget

        batch = est.get_params(deep=False).get("row_batch", 256)
        segments = 1 if folds is None else folds.n_segments
        # a batch's rows per segment, held twice while a pass's result replaces the last
        per_row = 2 * 8 * segments * (inp.n_features + 1)
        need = batch * per_row
        budget = memory_budget()
        if need > budget.driver:
            fit = max(1, budget.driver // per_row)
            return (
                f"mode='seed-rows': {batch} rows of {inp.n_features:,} features per pass"
                + (f" in each of {segments} row segments" if segments > 1 else "")
                + f" would hold {gib(need)}, over the budget of {gib(budget.driver)} "
                f"({budget.source}); row_batch={fit} fits"
            )
        return None

    def prepare(self, est, inp, folds):
        return {"folds": folds, "feature_blocks": _grid(est, inp, adjacency=False).blocks}

    def gather(self, est, data, Y, extras):
        from dcfa.stats.columns import column_pass

        folds = extras["folds"]  # NonLinCFA: one per row segment, from the same pass
        bounds = None if folds is None else folds.bounds
        return column_pass(_as_dask(data), Y[:, 0], segments=bounds)

    def partition(self, est, stats, inp, extras):
        from dcfa.cfa.basis import seed_rows
        from dcfa.cfa.driver import drive
        from dcfa.cfa.inputs import apply_inputs

        data = _as_dask(apply_inputs(inp.data, est._inputs))
        batch = est.get_params(deep=False).get("row_batch", 256)
        whole, make_basis, source = seed_rows(data, stats, extras["folds"], batch_size=batch)
        labels = drive(whole, make_basis, est._accept(), **_loop(est, extras))
        logger.info(
            "%s seed-row execution: %d passes of %d rows",
            type(est).__name__,
            source.n_passes,
            batch,
        )
        return labels

    def summary(self, stats):
        from dcfa.cfa.basis import merged_columns

        # NonLinCFA's segments: the column statistics of all rows, merged
        return merged_columns(stats) if isinstance(stats, list | tuple) else stats


def _reach(p: dict, folds) -> int:
    """How far apart the cells whose moments the grid execution gathers may be: seed tests
    read pairs within the radius; a group's mean (or fold sets, built on a local basis)
    pairs within twice the radius."""
    radius = int(p["neighbors"])
    return radius if p.get("compare") == "seed" and folds is None else 2 * radius


def _narrow_dim(layout, p: dict, folds) -> tuple[str, str] | None:
    """Why the grid pass cannot run on this grid: a grid dim (not a block dim) narrower than
    the ``2 reach + 1`` cells of a neighbourhood (the pass refuses it, and a periodic dim
    that narrow would meet a cell twice), or None."""
    from dcfa.neighbors import block_axes

    reach = _reach(p, folds)
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
    if reach != int(p["neighbors"]):
        why = ", twice the radius: " + (
            f"compare={p.get('compare')!r}" if folds is None else "NonLinCFA's folds"
        )
    sizes = ", ".join(f"{d!r} has {s}" for d, s in narrow)
    return "neighbors", (
        f"mode='neighbors' gathers the moments of cells up to {reach} steps apart "
        f"(neighbors={int(p['neighbors'])}{why}), so every grid dim needs at least "
        f"{2 * reach + 1} cells; {sizes} (mode='series' or 'full' run this grid)"
    )


def _sequential_only(name: str, p: dict) -> tuple[str, str] | None:
    """What the grid and seed-row executions share: the sequential loop, complete cells."""
    if p.get("strategy", "sequential") != "sequential":
        return "strategy", f"mode={name!r} needs strategy='sequential'"
    if p.get("missing", "exclude") != "exclude":
        return "missing", f"mode={name!r} needs missing='exclude'"
    return None


def _as_dask(data):
    import dask.array as da

    return data if isinstance(data, da.Array) else da.from_array(data, chunks="auto")


EXECUTIONS: dict[str, Execution] = {e.name: e for e in (Full(), Series(), Grid(), SeedRows())}
MODES = ("auto", *EXECUTIONS)


def choose(est, inp: InputData, folds) -> str:
    """The execution ``est.fit`` runs on ``inp``: its ``mode``, or for ``"auto"`` the first
    that supports the options and fits the memory budget.

    Raises
    ------
    ValueError
        An explicit ``mode`` that cannot run these options (naming why).
    MemoryBudgetError
        ``"auto"`` and nothing fits: the dense estimate and why each other execution does not
        apply.
    """
    from dcfa.memory import MemoryBudgetError

    mode = est.get_params(deep=False).get("mode", "auto")
    if mode != "auto":
        why = EXECUTIONS[mode].why_not(est, inp, folds)
        if why is not None:
            raise ValueError(f"{why[0]}: {why[1]}")
        why = EXECUTIONS[mode].fits(est, inp, folds)
        if why is not None:
            raise MemoryBudgetError(why)
        return mode
    reasons = {}
    for name, execution in EXECUTIONS.items():
        why = execution.why_not(est, inp, folds)
        why = why[1] if why is not None else execution.fits(est, inp, folds)
        if why is None:
            if name != "full":
                logger.info(
                    "%s: mode='auto' runs mode=%r (%s)",
                    type(est).__name__,
                    name,
                    "; ".join(r.split(" (")[0] for r in reasons.values()),
                )
            return name
        reasons[name] = why
    dense = reasons.pop("full")
    others = "; ".join(reasons.values())
    raise MemoryBudgetError(f"{dense} No other execution applies ({others}).")


def execution_for_moments(est, inp: InputData, folds, moments) -> str:
    """The execution that reads stored ``moments`` (``fit(..., moments=...)``)."""
    from dcfa.stats.columns import ColumnMoments
    from dcfa.stats.grid import GridMoments

    mode = est.get_params(deep=False).get("mode", "auto")
    if mode != "auto":
        return choose(est, inp, folds)

    def parts_of(kind) -> bool:  # NonLinCFA's: one per row segment
        listed = isinstance(moments, list | tuple) and len(moments) > 0
        return listed and all(isinstance(m, kind) for m in moments)

    if isinstance(moments, GridMoments) or parts_of(GridMoments):
        name = "neighbors"
    elif parts_of(ColumnMoments):  # the seed rows read the data again, segment by segment
        name = "seed-rows"
    elif isinstance(moments, ColumnMoments):  # both read the data again: the same labels
        # (with NonLinCFA's folds the seed rows reuse one per row segment, not these)
        seed_rows = folds is None and EXECUTIONS["seed-rows"].why_not(est, inp, folds) is None
        name = "seed-rows" if seed_rows else "series"
    else:
        name = "full"
    why = EXECUTIONS[name].why_not(est, inp, folds)
    if why is not None:
        raise ValueError(f"moments: they are those of mode={name!r}; {why[0]}: {why[1]}")
    return name

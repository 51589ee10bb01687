"""What a job's result holds beyond the features: the region map and every cell's place in
the reduction on the grid (what ``dcfa apply`` reads back), and the summary printed after a
run. Where it writes is :mod:`dcfa.batch.destination`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

if TYPE_CHECKING:  # a hint only: `dcfa inspect` imports this module, not the estimators
    from dcfa.cfa.reduction import Reduction
    from dcfa.cfa.selection import FoldSkill

__all__ = ["application", "print_groups", "region_on_grid", "result_skill", "skill_text"]


def group_label(dataset: xr.Dataset, g: int) -> str:
    """`` (sst_2S_129W)``: group ``g``'s name, when the result has one (earlier ones do not)."""
    return f" ({dataset['group_name'].values[g]})" if "group_name" in dataset.coords else ""


def cells(n: int) -> str:
    """``"cell"`` or ``"cells"``, for a count of ``n``."""
    return "cell" if n == 1 else "cells"


def corr_interval_text(dataset: xr.Dataset, g: int) -> str:
    """`` [+0.71, +0.90]``: group ``g``'s 95 % interval of its correlation with the target,
    when the result has it (earlier results do not)."""
    if "group_target_corr_low" not in dataset:
        return ""
    low = float(dataset["group_target_corr_low"][g])
    high = float(dataset["group_target_corr_high"][g])
    return f" [{low:+.2f}, {high:+.2f}]"


def recurrence_text(dataset: xr.Dataset, g: int) -> str:
    """``, recurs 0.84``: how much group ``g`` recurs across the CV folds' maps, when the
    result has it (RegionsCV's; earlier results do not)."""
    if "group_stability" not in dataset:
        return ""
    return f", recurs {float(dataset['group_stability'][g]):.2f}"


#: what ``recurs`` means, said once above the groups that show it
RECURRENCE_LEGEND = "recurs: how much of the region the CV folds' maps make again, 1 = all of it"


def result_skill(attrs: dict) -> FoldSkill | None:
    """The chosen map's :class:`dcfa.cfa.selection.FoldSkill` in the selection's folds, from a
    result's ``cv_r2`` (RegionsCV's and the tolerance paths'); None for a result without it."""
    import json

    from dcfa.cfa.selection import fold_skill

    return fold_skill([np.nan if v is None else v for v in json.loads(attrs.get("cv_r2", "[]"))])


def skill_text(skill: FoldSkill | None) -> str | None:
    """How well a result's chosen map predicted in the selection's folds (its
    :func:`result_skill`): its mean and standard error, or that it does not beat the
    climatology, so that a map without skill is not read as one of predictors. None without
    a skill."""
    if skill is None:
        return None
    score = (
        f"mean CV R^2 {skill.mean:+.3f} (standard error {skill.se:.3f} over "
        f"{skill.n_folds} folds of the selection)"
    )
    if skill.skilful:
        # the folds chose the map among many: on a target of noise it still scores above 0
        return (
            f"skill of the chosen map: {score}; optimistic, as the map was chosen on these "
            "folds: dcfa.forward_cv scores the whole fit on months it did not see"
        )
    from dcfa.cfa.selection import NO_SKILL_ADVICE

    return (
        f"NO SKILL: the chosen map's {score} does not beat the climatology's 0 by a standard "
        f"error: its regions are not predictors of the target. {NO_SKILL_ADVICE}"
    )


def missing_chunk_lines(absent: dict) -> list[str]:
    """A warning per variable with chunks missing from the store (``missing_chunks`` of
    :func:`dcfa.io.open_archive`), which Zarr reads as the fill value."""
    return [
        f"warning: {c['missing']} of the {c['chunks']} chunks of {name!r} are missing from the "
        f"store and read as its fill value ({c['fill_value']}): a store written with "
        "write_empty_chunks = False leaves out the chunks that hold only the fill value (land), "
        "else the store is incomplete (recorded in the output as missing_chunks)"
        for name, c in absent.items()
    ]


def application(reduction: Reduction, keep: np.ndarray, prep) -> dict:
    """What applying the result to new months needs, on the grid: the preprocessing (the
    climatology and spread the features were computed with) and every cell's place in the
    reduction (``features[:, g]`` aggregates ``cell_scale * (x - cell_centre)`` over the cells
    of group ``g``, taken in ``cell_index`` order; see :func:`dcfa.cfa.aggregate.aggregate`):
    the fitted :class:`~dcfa.cfa.reduction.Reduction` the features were computed with, on
    the cells ``keep`` of the grid, stored."""

    def on_grid(values, fill, name, attrs):
        grid = np.full(prep.has_data.size, fill, dtype=np.asarray(values).dtype)
        grid[keep] = values
        out = prep.has_data.copy(data=grid.reshape(prep.has_data.shape)).rename(name)
        out.attrs = attrs
        out.encoding = {}
        return out

    out = {
        "cell_index": on_grid(
            np.arange(keep.size, dtype=np.int64),
            -1,
            "cell_index",
            {
                "long_name": "position of the cell in the reduction's input (-1: not used)",
                "aggregation": reduction.aggregation,
            },
        ),
        "cell_scale": on_grid(reduction.scale, 0.0, "cell_scale", {"long_name": "cell weight"}),
        "cell_centre": on_grid(
            reduction.centre, 0.0, "cell_centre", {"long_name": "value removed first"}
        ),
        "has_data": prep.has_data.rename("has_data").drop_encoding(),
    }
    if reduction.weights is not None:  # weights = "area" or given
        out["cell_weight"] = on_grid(
            reduction.weights,
            0.0,
            "cell_weight",
            {"long_name": "weight of the cell in its group's mean (method.params.weights)"},
        )
    if prep.climatology is not None:
        out["climatology"] = prep.climatology.rename("climatology").drop_encoding()
        out["climatology"].attrs = {"long_name": "mean of every calendar month (anomalies)"}
    if prep.std is not None:
        out["spread"] = prep.std.rename("spread").drop_encoding()
        out["spread"].attrs = {"long_name": "standard deviation the anomalies were divided by"}
    return out


def region_on_grid(labels: np.ndarray, keep: np.ndarray, has_data: xr.DataArray):
    return on_grid(labels, keep, has_data, fill=-1, dtype=np.int32).rename("region")


def on_grid(values: np.ndarray, keep: np.ndarray, has_data: xr.DataArray, *, fill, dtype):
    """Per-cell ``values`` of the cells ``keep`` (flat places) on the grid of ``has_data``,
    ``fill`` elsewhere."""
    grid = np.full(has_data.size, fill, dtype=dtype)
    grid[keep] = values
    return has_data.copy(data=grid.reshape(has_data.shape))


def print_groups(dataset: xr.Dataset, echo, top: int = 8, indent: str = "      ") -> None:
    """The ``top`` groups most correlated with the target, a line each (the job's summary and
    ``dcfa inspect``): block, size, place, correlation, its interval and the recurrence; then
    how many more the result holds."""
    from dcfa.io.result import group_extent, group_place
    from dcfa.stacking import BLOCK_DIMS

    # the centres are named after the grid's coordinates: lat/lon or latitude/longitude
    names = ["group_target_corr", "group_size", "group_lat", "group_lon", "region"]
    names += ["group_latitude", "group_longitude"]
    names += ["group_target_corr_low", "group_target_corr_high", "group_name", "group_stability"]
    dataset = dataset[[n for n in names if n in dataset]].load()  # one read, not per line
    r = dataset["group_target_corr"].values
    sizes = dataset["group_size"].values
    order = np.argsort(-np.nan_to_num(np.abs(r)))[:top]
    # which variable, window and lag each group is of (a group lies in one: the blocks)
    blocks = [d for d in BLOCK_DIMS if "region" in dataset and d in dataset["region"].dims]
    region = dataset["region"].transpose(*blocks, ...).values if blocks else None
    echo(
        f"{indent}groups most correlated with the target"
        + (" (95 % interval, autocorrelation)" if "group_target_corr_low" in dataset else "")
        + (f"; {RECURRENCE_LEGEND}" if "group_stability" in dataset else "")
        + ":"
    )
    lat, lon = group_place(dataset)
    for g in order:
        block = ""
        if region is not None and (region == g).any():
            at = np.argwhere(region == g)[0]
            block = " " + ", ".join(
                str(dataset[d].values[i]) if d == "variable" else f"{d} {dataset[d].values[i]}"
                for d, i in zip(blocks, at, strict=False)
            )
        where = ""
        extent = group_extent(dataset["region"], int(g)) if "region" in dataset else None
        if extent is not None:
            where = f", {extent}"
        elif lat is not None and lon is not None:
            where = f" around lat {float(lat[g]):6.1f}, lon {float(lon[g]):6.1f}"
        echo(
            f"{indent}  group {g:4d}{group_label(dataset, g)}:{block} {sizes[g]:5d} "
            f"{cells(int(sizes[g]))}{where}, corr {r[g]:+.2f}"
            + corr_interval_text(dataset, g)
            + recurrence_text(dataset, g)
        )
    if r.size > top:
        echo(f"{indent}  ... and {r.size - top} more (all in the result)")

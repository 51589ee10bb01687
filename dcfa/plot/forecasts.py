"""How well the regions predict: a region's series against the target, predictions against
observations, and the cross-validated skill along a CV estimator's path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa.io.calendars import calendar_of, month_numbers, same_calendar
from dcfa.plot._figure import default_index, sample_axis
from dcfa.plot._figure import pyplot as _pyplot

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes

__all__ = ["plot_path", "plot_predicted", "plot_series"]


def _one_series(values: Any, name: str) -> np.ndarray:
    """``values`` as one 1-D float series; bad input naming ``name`` otherwise."""
    v = np.asarray(getattr(values, "values", values), dtype=np.float64)
    if v.ndim > 1 and v.size != max(v.shape):
        dims = getattr(values, "dims", None)
        other = [d for d in dims[1:] if values.sizes[d] > 1][:1] if dims else []
        pick = f"{name}.isel({other[0]}=0)" if other else f"{name}[:, 0]"
        raise InputError(
            f"{name}: expected one series, got shape {v.shape}"
            + (f" with dims {dims}" if dims else "")
            + f"; pick one, e.g. {pick}"
        )
    return v.ravel()


def _standardised(v: np.ndarray, name: str) -> np.ndarray:
    spread = np.nanstd(v)
    if not np.isfinite(spread) or spread == 0:
        raise InputError(f"{name}: a constant or empty series cannot be standardised")
    return (v - np.nanmean(v)) / spread


def plot_series(
    series: xr.DataArray,
    target: Any,
    *,
    ax: Axes | None = None,
    label: str | None = None,
    target_label: str | None = None,
    title: str | None = None,
) -> Axes:
    """A region's series against the target, both standardised, with their correlation.

    Parameters
    ----------
    series : xarray.DataArray or pandas.Series of shape (n_samples,)
        The region's aggregate, e.g. ``result.features.sel(group=g)`` of a result store; its
        sample coordinate (dates), or a Series' index, is the x axis.
    target : array-like of shape (n_samples,)
        The target. Dated (a DataArray or a pandas Series, e.g. a job's target from
        :func:`dcfa.io.open_target`), it is paired with a dated series by their sample labels,
        the same dates or the same calendar months, whichever pairs more (a lead target's
        labels are its predictors'); an array is paired by position, on the same samples.
    ax : matplotlib.axes.Axes, optional
    label : str, optional
        The region's name in the legend. Default: its ``group_name`` coordinate (a result
        store's), else ``"region <g>"`` for its ``group`` coordinate (an estimator's
        ``transform``), else ``"region"``, followed by its units (``group_units``, or the
        series' ``units``) when known: each line is standardised, so the units say what it
        was.
    target_label : str, optional
        The target's name in the legend. Default: its ``name`` (a DataArray's or a pandas
        Series'), else ``"target"``.
    title : str, optional
        Default: ``"<label>: r = +0.52"``.

    Returns
    -------
    matplotlib.axes.Axes
        Its first line is the region, its second the target (each minus its mean, over its
        standard deviation: series in other units on one axis).
    """
    x, y = _one_series(series, "series"), _one_series(target, "target")
    if label is None:
        label = _series_label(series)
    if target_label is None:
        name = getattr(target, "name", None)
        target_label = str(name) if name is not None else "target"
    t, _ = sample_axis(series, x.size)
    # by their own sample labels (a lead target's are its predictors'), else by position
    pairs = _pairs(
        _labels(series, predicted=False),
        _labels(target, predicted=False),
        x.size,
        y.size,
        ("series", "target"),
    )
    if pairs is not None:
        x, y, t = x[pairs[0]], y[pairs[1]], t[pairs[0]]
    elif x.size != y.size:
        raise InputError(
            f"target: {y.size} samples, the series has {x.size}; pair them by date first: "
            "series, target = dcfa.align(series, target)"
        )
    x, y = _standardised(x, "series"), _standardised(y, "target")
    ok = np.isfinite(x) & np.isfinite(y)
    r = float(np.corrcoef(x[ok], y[ok])[0, 1])
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3), layout="constrained")
    ax.plot(t, x, lw=1.2, label=label)
    ax.plot(t, y, lw=1.0, color="k", alpha=0.7, label=target_label)
    ax.axhline(0.0, color="grey", lw=0.5)
    ax.set_ylabel("standardised anomaly (sd)")
    ax.legend(loc="upper left", frameon=False, ncols=2)
    ax.set_title(f"{label}: r = {r:+.2f}" if title is None else title)
    return ax


def _series_label(series: Any) -> str:
    """``sst_2S_129W (degC)``: a series' group name and units, where it carries them."""
    coords = getattr(series, "coords", {})
    if "group_name" in coords:
        name = str(coords["group_name"].values)
    elif "group" in coords and coords["group"].size == 1:  # a fitted transform's group
        name = f"region {coords['group'].values.item()}"
    else:
        name = "region"
    units = (
        str(coords["group_units"].values)
        if "group_units" in coords
        else str(getattr(series, "attrs", {}).get("units", ""))
    )
    return f"{name} ({units})" if units else name


def _labels(values: Any, *, predicted: bool = True) -> np.ndarray | None:
    """The dates (or other labels) of a 1-D DataArray or pandas Series: a forecast's
    ``target_time`` (what each value predicts, with ``predicted``) before its own sample
    labels; None for an array or a Series on the default ``0 .. n - 1``."""
    coords = getattr(values, "coords", None)
    if coords is not None and getattr(values, "ndim", 0) == 1:
        if predicted and "target_time" in coords and coords["target_time"].ndim == 1:
            return np.asarray(coords["target_time"].values)
        dim = values.dims[0]
        return np.asarray(values[dim].values) if dim in coords else None
    index = getattr(values, "index", None)
    if index is None or callable(index):
        return None
    return None if default_index(index) else np.asarray(index)


def _paired(observed: Any, predicted: Any) -> tuple[np.ndarray, np.ndarray]:
    """The two series' values paired: by their labels when both have some (the same labels,
    or for dates at most one a month the same calendar month, whichever pairs more), by
    position otherwise."""
    o = np.asarray(getattr(observed, "values", observed), dtype=np.float64).ravel()
    p = np.asarray(getattr(predicted, "values", predicted), dtype=np.float64).ravel()
    pairs = _pairs(_labels(observed), _labels(predicted), o.size, p.size, ("observed", "predicted"))
    if pairs is None:
        if o.size != p.size:
            raise InputError(f"predicted: {p.size} values for {o.size} observed ones")
        return o, p
    return o[pairs[0]], p[pairs[1]]


def _pairs(lo, lp, no: int, np_: int, names: tuple[str, str]) -> tuple | None:
    """The positions of the pairs of labels ``lo`` and ``lp`` (of ``no`` and ``np_`` values):
    the same labels, or for dates at most one a month the same calendar month, whichever
    pairs more; None when either has no labels (pair by position). Bad input, naming the
    second of ``names``, when they have none in common."""
    if lo is None or lp is None or lo.size != no or lp.size != np_:
        return None
    # the same labels, or the same calendar months, whichever pairs more: a model's monthly
    # stamps (the 16th at noon, the 15th) a lead later are seldom its own stamps
    # dates of two calendars are never the same date (and cftime refuses to compare them)
    co, cp = calendar_of(xr.DataArray(lo, dims="s")), calendar_of(xr.DataArray(lp, dims="s"))
    alike = co == cp or (lo.dtype.kind == lp.dtype.kind and same_calendar(co, cp))
    keyings = [(list(lo), list(lp))] if alike else []
    mo, mp = month_numbers(lo), month_numbers(lp)
    if mo is not None and mp is not None:
        keyings.append((mo.tolist(), mp.tolist()))
    pairings = []
    for ko, kp in keyings:
        if len(set(ko)) < len(ko) or len(set(kp)) < len(kp):  # several a date, or a month
            continue
        at = {k: i for i, k in enumerate(ko)}
        pairings.append([(at[k], j) for j, k in enumerate(kp) if k in at])
    both = max(pairings, key=len, default=[])  # the first of equals: exact dates
    if both:
        i, j = np.array(both).T
        return i, j
    first, second = names
    raise InputError(
        f"{second}: no label in common with {first} (neither the same dates nor the same "
        f"months: {first} {lo[0]} .. {lo[-1]}, {second} {lp[0]} .. {lp[-1]}); pass arrays to "
        "pair them by position"
    )


def plot_predicted(
    observed: Any, predicted: Any, *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Predicted against observed, with the 1:1 line and the R^2 of the predictions.

    Parameters
    ----------
    observed, predicted : array-like of shape (n_samples,)
        E.g. a target and its out-of-sample predictions: ``Skill.predictions`` of
        :func:`dcfa.forward_cv` (NaN outside the test blocks, left out here). Two labelled
        series (DataArrays, pandas Series) are paired by their dates: the same dates, or the
        same calendar months (a target stamped mid-month, a forecast on the 1st), whichever
        pairs more; a
        forecast's ``target_time`` (``dcfa apply``'s, :meth:`dcfa.FittedResult.forecast`)
        gives the dates it predicts. Arrays are paired by position.

    Returns
    -------
    matplotlib.axes.Axes
        ``ax.collections[0]`` holds the points (observed, predicted); the title gives
        ``R^2 = 1 - SS_res / SS_tot`` of the predictions, all points pooled ("pooled R²"):
        the mean over :func:`dcfa.forward_cv`'s test blocks scores each block against its
        own mean, so the two differ.
    """
    o, p = _paired(observed, predicted)
    ok = np.isfinite(o) & np.isfinite(p)
    if ok.sum() < 2:
        raise InputError(f"predicted: {int(ok.sum())} pair(s) with both values finite; need >= 2")
    o, p = o[ok], p[ok]
    r2 = 1.0 - np.sum((o - p) ** 2) / np.sum((o - o.mean()) ** 2)
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4), layout="constrained")
    ax.scatter(o, p, s=10, alpha=0.6)
    lo, hi = float(min(o.min(), p.min())), float(max(o.max(), p.max()))
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("observed")
    ax.set_ylabel("predicted")
    ax.set_title(f"pooled R² = {r2:+.2f}" if title is None else title)
    return ax


def plot_path(path: xr.Dataset, *, chosen: Any = None, ax: Axes | None = None) -> Axes:
    """Cross-validated skill along a CV estimator's path (``cv_path_``), against the number
    of regions, with the climatology (R^2 = 0) as the reference.

    Parameters
    ----------
    path : xarray.Dataset
        :class:`dcfa.RegionsCV`'s ``cv_path_`` (``mean_r2`` over ``level`` and ``n_groups``:
        one line per level) or :class:`dcfa.GenLinCFACV`'s (``mean_cv_r2`` and its standard
        error over ``eps``).
    chosen : optional
        The chosen map, marked: ``(level, n_groups)`` for RegionsCV (``(model.level_,
        model.n_features_out_)``), the tolerance ``eps_`` for GenLinCFACV.

    Returns
    -------
    matplotlib.axes.Axes
        One line per level (RegionsCV), or one line with error bars (GenLinCFACV), over the
        number of regions.
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
    if "mean_r2" in path:
        for level in path["level"].values:
            skill = path["mean_r2"].sel(level=level)
            reached = np.isfinite(skill.values)
            ax.plot(path["n_groups"].values[reached], skill.values[reached], marker=".",
                    lw=1.0, label=f"pieces at r ≥ {level:g}")  # fmt: skip
        if chosen is not None:
            level, k = chosen
            ax.plot([k], [float(path["mean_r2"].sel(level=level, n_groups=k))], "k*", ms=12,
                    label="chosen")  # fmt: skip
        ax.legend(fontsize="small", frameon=False, ncols=2)
    elif "mean_cv_r2" in path:
        groups = path["n_groups"].values
        ax.errorbar(groups, path["mean_cv_r2"].values, yerr=path["se_cv_r2"].values,
                    marker="o", capsize=3, lw=1.0)  # fmt: skip
        for e, g, r in zip(path["eps"].values, groups, path["mean_cv_r2"].values, strict=True):
            ax.annotate(f"eps {e:g}", (g, r), textcoords="offset points", xytext=(4, 4),
                        fontsize="x-small")  # fmt: skip
        if chosen is not None:
            at = path.sel(eps=chosen)
            ax.plot([int(at["n_groups"])], [float(at["mean_cv_r2"])], "k*", ms=12)
    else:
        raise InputError("path: expected a cv_path_ of RegionsCV (mean_r2) or GenLinCFACV")
    ax.axhline(0.0, color="grey", lw=0.8, ls="--")  # the climatology
    ax.set_xscale("log")
    ax.set_xlabel("regions")
    ax.set_ylabel("mean CV R²")
    return ax

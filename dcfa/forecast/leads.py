"""The target at ``t + lead``: :func:`lead_target` pairs the predictors at ``t`` with the target
``lead`` time steps later (months for monthly dates, by label, across gaps) and reports the
alignment (:class:`LeadAlignment`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import InputError, outside_stacklevel
from dcfa.forecast._checks import (
    _DURATIONS,
    _check_sample_dim,
    _date_fields,
    _label_steps,
    _Steps,
)
from dcfa.io.calendars import calendar_of, date_label, need_dates, refuse_repeated
from dcfa.stacking import isel_positions

__all__ = ["LeadAlignment", "lead_of", "lead_target", "target_time", "warn_if_purge_short"]


@dataclass(frozen=True)
class LeadAlignment:
    """How predictors and target were paired by :func:`lead_target`, for logs and CLIs.

    Attributes
    ----------
    lead : int
        Time steps between a predictor and its target (:attr:`step`).
    n_samples : int
        Pairs kept.
    n_input : int
        Samples of the field given.
    first_predictor, last_predictor : object
        Sample labels (dates, or positions when the field has none) of the first and last
        predictors kept.
    first_target, last_target : object
        Valid times of their targets.
    n_gaps : int, default=0
        Predictors dropped because the target has no sample ``lead`` steps after them inside
        its record (a gap of the labels, e.g. a month missing from both series).
    first_gap : object, default=None
        The first of those predictors' labels.
    step : str, default="sample"
        One time step of the labels: ``"month"``, ``"year"``, ``"day"``, ... (``"sample"``
        without labels). ``str()`` names it after the lead unless it is a month or a sample
        (``lead 3 days: ...`` on daily dates, ``lead 3: ...`` on monthly ones).
    """

    lead: int
    n_samples: int
    n_input: int
    first_predictor: Any
    last_predictor: Any
    first_target: Any
    last_target: Any
    n_gaps: int = 0
    first_gap: Any = None
    step: str = "sample"

    def __str__(self) -> str:
        # months (and samples) go unnamed; another step is named, so that lead=3 on daily
        # dates reads "lead 3 days", never as the 3 months a reader would assume
        unit = "" if self.step in ("month", "sample") else self._steps(self.lead)
        unit = f" ({unit})" if "step" in unit else f" {unit}" if unit else ""
        text = (
            f"lead {self.lead}{unit}: predictors {date_label(self.first_predictor)} .. "
            f"{date_label(self.last_predictor)} -> targets {date_label(self.first_target)} .. "
            f"{date_label(self.last_target)}, {self.n_samples} of {self.n_input} samples kept"
        )
        if self.n_gaps:
            step = self._steps(self.lead)
            what = (
                "predictor dropped at a gap" if self.n_gaps == 1 else "predictors dropped at gaps"
            )
            text += (
                f"; {self.n_gaps} {what}: no target {self.lead} {step} later (first "
                f"{date_label(self.first_gap)})"
            )
        return text

    def _steps(self, n: int) -> str:
        return steps_name(n, self.step)


def steps_text(n: int, step: str) -> str:
    """``n`` steps of ``step`` in words: ``"3 months"``, ``"14 days"``, ``"1 day"``."""
    return f"{n} {steps_name(n, step)}"


def steps_name(n: int, step: str) -> str:
    """What ``n`` steps of ``step`` are called: ``"month"`` for 1, ``"days"``, ``"6-hour
    steps"``, ``"steps of 0.5"``."""
    if n == 1:
        return step
    return step.replace("step of", "steps of") if step.startswith("step of") else f"{step}s"


def _as_target(target, sample_dim: str) -> tuple[xr.DataArray, pd.Index | None]:
    """The target as a DataArray along ``sample_dim`` and its sample labels (None if it has
    none: a NumPy or Dask array, a Series on a default ``0 .. n - 1`` index)."""
    if isinstance(target, xr.Dataset | pd.DataFrame):
        names = list(target.data_vars if isinstance(target, xr.Dataset) else target.columns)
        raise InputError(
            f"target: expected one series, got a {type(target).__name__} of {names}; pass the "
            f"one to predict (target[{names[0] if names else 'name'!r}])"
        )
    if isinstance(target, xr.DataArray):
        if sample_dim not in target.dims:
            raise InputError(
                f"target: has no {sample_dim!r} dim (dims {target.dims}); give it the field's "
                "sample dim"
            )
        if target.ndim != 1:  # several series: which one is predicted is the user's choice
            raise InputError(
                f"target: expected a series along {sample_dim!r}, got dims {target.dims}; "
                "select one (target.sel(...) or target.isel(...))"
            )
        return target, target.indexes.get(sample_dim)
    if isinstance(target, pd.Series):
        index = target.index
        plain = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        name = target.name if target.name is not None else "target"
        out = xr.DataArray(target.to_numpy(), dims=(sample_dim,), name=name)
        return out, None if plain else index
    data = target if hasattr(target, "ndim") and hasattr(target, "shape") else np.asarray(target)
    if data.ndim != 1:
        raise InputError(
            f"target: expected a DataArray, a pandas Series or a 1-D array, got an array of "
            f"shape {data.shape}"
        )
    return xr.DataArray(data, dims=(sample_dim,), name="target"), None


def _months(labels: pd.Index | None, what: str, dim: str) -> pd.PeriodIndex:
    """The calendar months of dates (datetime64 or cftime, any calendar), for ``match="month"``."""
    if labels is None:
        raise InputError(
            f"match: 'month' pairs calendar months, which needs dates on both sides; the {what} "
            f"has no {dim!r} labels"
        )
    coord = xr.DataArray(np.asarray(labels), dims=dim, name=dim)
    try:
        ordinals = (np.asarray(coord.dt.year) - 1970) * 12 + np.asarray(coord.dt.month) - 1
    except (AttributeError, TypeError, ValueError):
        raise InputError(
            f"match: 'month' pairs calendar months, which needs dates on both sides; the "
            f"{what}'s {dim!r} labels are {labels.dtype}{_kind(labels)}"
        ) from None
    need_dates(coord, what, "match='month' needs dates")  # a missing one (NaT) named
    months = pd.PeriodIndex([pd.Period(ordinal=int(k), freq="M") for k in ordinals])
    if months.has_duplicates:
        refuse_repeated(pd.Index(labels), what, dim)  # a row written twice: not a month's
        twice = months[months.duplicated()][0]
        raise InputError(
            f"match: the {what} holds {int((months == twice).sum())} samples in {twice}; "
            "'month' pairs one sample a month (average it to one value a month first, e.g. "
            f"xarray's resample({dim}='MS').mean())"
        )
    return months


def _positions(
    field_labels: pd.Index | None, target_labels: pd.Index | None, n: int, n_target: int, dim
) -> np.ndarray:
    """For every predictor sample, the position of the same sample in the target (-1: the
    target's record does not cover it)."""
    if field_labels is None or target_labels is None:
        if n_target != n:
            raise InputError(
                f"target: has {n_target} samples and the field {n} along {dim!r}; without "
                "labels on both, the target must hold one value per sample of the field"
            )
        return np.arange(n)
    if not (target_labels.is_unique and target_labels.is_monotonic_increasing):
        refuse_repeated(target_labels, "target", dim)
        raise InputError(f"target: its {dim!r} labels must be unique and increasing")
    pos = np.asarray(target_labels.get_indexer(field_labels))
    missing = pos < 0
    if missing.all():
        raise InputError(
            f"target: none of the field's {dim!r} labels ({date_label(field_labels[0])} .. "
            f"{date_label(field_labels[-1])}{_kind(field_labels)}) is among the target's "
            f"({date_label(target_labels[0])} .. {date_label(target_labels[-1])}"
            f"{_kind(target_labels)}); put both on the same sample labels"
            f"{_same_months(field_labels, target_labels)}"
        )
    if missing.any():
        lost = field_labels[missing]
        inside = np.asarray((lost > target_labels[0]) & (lost < target_labels[-1]))
        if inside.any():
            raise InputError(
                f"target: has no sample labelled {date_label(lost[inside][0])}, inside its record "
                f"({date_label(target_labels[0])} .. {date_label(target_labels[-1])}), though the "
                f"field has one ({int(inside.sum())} such sample(s)); give the target every "
                "sample of the field inside its record, or leave those samples out of both "
                "(xr.align(field, target, join='inner'))"
            )
    return pos


def _kind(labels: pd.Index) -> str:
    """``", noleap calendar"``, ``", strings"``, ``", time zone UTC"``: what kind of labels,
    so that two spans that print alike (a noleap and a standard 2000-01-01) are told apart."""
    if isinstance(labels, pd.DatetimeIndex) and labels.tz is not None:
        return f", time zone {labels.tz}"
    if isinstance(labels, pd.PeriodIndex):
        return f", periods {labels.freqstr}"
    try:  # datetime64 or cftime dates (not dcfa.io.calendars: importing dcfa.io is heavy)
        return f", {xr.DataArray(np.asarray(labels), dims='s').dt.calendar} calendar"
    except (AttributeError, TypeError, ValueError):
        pass
    if labels.inferred_type == "string":
        return ", strings (pd.to_datetime them)"
    return f", {labels.dtype}"


def _same_months(field_labels: pd.Index, target_labels: pd.Index) -> str:
    """A hint when both are dates of the same calendar months: on two calendars (a noleap
    field and a standard target), or stamped on other days (a mid-month field and a
    first-of-month target)."""
    try:
        dates = [xr.DataArray(np.asarray(i), dims="s").dt for i in (field_labels, target_labels)]
        months = [set((12 * d.year + d.month).values.tolist()) for d in dates]
        calendars = [d.calendar for d in dates]
    except (AttributeError, TypeError, ValueError):  # not dates (or not one calendar each)
        return ""
    if not months[0] & months[1]:
        return ""
    if calendars[0] != calendars[1]:
        return (
            f": they share calendar months on two calendars; pair them with match='month', "
            f"or convert the target (target.convert_calendar({calendars[0]!r}, "
            "align_on='date'))"
        )
    return (
        ": they share calendar months, stamped on other days of the month (the field's "
        f"{date_label(field_labels[0])}); pair them with match='month', or give the target the "
        "field's stamps"
    )


def lead_target(
    field: xr.DataArray | xr.Dataset,
    target: xr.DataArray | pd.Series | np.ndarray,
    lead: int,
    *,
    sample_dim: str = "time",
    min_samples: int = 2,
    match: str = "exact",
) -> tuple[xr.DataArray | xr.Dataset, xr.DataArray, LeadAlignment]:
    """Pair the predictors at ``t`` with the target at ``t + lead``.

    Parameters
    ----------
    field : DataArray or Dataset
        The predictors, with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy). It may
        already be trimmed by :func:`lagged` or :func:`trailing_windows`.
    target : DataArray, pandas Series or 1-D array
        The target series. With sample labels on both sides (a DataArray with a coordinate on
        ``sample_dim``, a Series with a non-default index), it is matched by label: a
        predictor is paired with the target labelled ``lead`` steps later, whether or not
        the target has a value at the predictor's own label (a record that starts later, or
        leaves out the months it lacks); labels on no regular step are matched one by one,
        every sample of the field inside the target's record must be in it, and its labels
        must be unique and increasing. Otherwise it holds one value per sample of the field,
        in order (and then has the field's labels). A Dask-backed DataArray stays lazy. One
        series: a Dataset, a DataFrame or a DataArray with another dim is refused (select the
        one to predict). A missing (NaN) target value is kept as NaN in the returned target
        (drop those pairs with ``y.notnull()``: the cross-validations refuse a NaN in ``y``).
    lead : int
        Non-negative lead in time steps of the labels: calendar months for monthly dates (3:
        predict April from January), years for yearly dates, days, hours... (any calendar,
        cftime included), or the numeric step of numeric labels. The predictor at ``t`` is
        paired with the target labelled ``t + lead`` steps, across gaps of the labels: a
        predictor whose target falls in a gap of the target's labels (a month missing from
        both series) is dropped, and the alignment counts it. Without labels, or with labels
        on no regular step, ``lead`` counts samples of the target.
    sample_dim : str, default="time"
    min_samples : int, default=2
        Fewest pairs to keep.
    match : {"exact", "month"}, default="exact"
        How a predictor's sample is found in the target's labels: identical labels, or
        ``"month"``: the same calendar month, whatever the day or either side's calendar (SST
        stamped mid-month, an index on the 1st), as :func:`dcfa.align` pairs them. With
        ``"month"`` both need dates, one a month, and ``lead`` counts calendar months. Pair
        here, before dropping the months where the target is missing: a predictor whose
        target ``lead`` months later exists is kept, where aligning first would drop the
        predictors of those months too.

    Returns
    -------
    field : DataArray or Dataset
        The predictors whose target ``lead`` steps later exists.
    target : DataArray
        The target values at ``t + lead``, labelled with the predictors' ``sample_dim``
        coordinate; their own valid time is the coordinate ``target_time`` (along
        ``sample_dim``; the positions when neither side has labels). The target's name and
        attributes are kept; its other coordinates along ``sample_dim`` are dropped.
    alignment : LeadAlignment
        First and last predictor and target dates, the samples kept and those dropped at a
        gap of the labels; ``str()`` of it is one line for a log.

    Raises
    ------
    ValueError
        Naming ``lead`` (not a non-negative int, or leaving fewer than ``min_samples``
        pairs), ``target`` (its samples do not match the field's, or lie on a finer step:
        daily values for a monthly field) or ``sample_dim``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=6, freq="MS")
    >>> x = xr.DataArray(np.arange(6.0), dims="time", coords={"time": time})
    >>> X, y, info = lead_target(x, np.arange(6.0) * 10, lead=3)
    >>> y.values
    array([30., 40., 50.])
    >>> print(info)
    lead 3: predictors 2000-01-01 .. 2000-03-01 -> targets 2000-04-01 .. 2000-06-01, 3 of 6 samples kept
    """  # noqa: E501
    _check_sample_dim(field, sample_dim)
    if not isinstance(lead, Integral) or isinstance(lead, bool | np.bool_) or lead < 0:
        raise InputError(
            f"lead: expected a non-negative int number of time steps of the labels (months "
            f"for monthly dates), got {lead!r}"
        )
    lead = int(lead)
    if not isinstance(min_samples, Integral) or min_samples < 1:
        raise InputError(f"min_samples: expected a positive int, got {min_samples!r}")
    if match not in ("exact", "month"):
        raise InputError(f"match: expected 'exact' or 'month', got {match!r}")
    y, target_labels = _as_target(target, sample_dim)
    n, n_target = field.sizes[sample_dim], y.sizes[sample_dim]
    field_labels = field.indexes.get(sample_dim)
    pos = None
    if match == "month":
        field_months = _months(field_labels, "field", sample_dim)
        target_months = _months(target_labels, "target", sample_dim)
        steps = _Steps([field_months.asi8, target_months.asi8], "month", "months")
    else:
        steps = None
        if field_labels is not None:  # an unlabelled target has the field's labels
            labels = field_labels if target_labels is None else target_labels
            steps = _label_steps(field_labels, labels)
            if target_labels is not None:
                _refuse_a_finer_target(field_labels, target_labels, steps, sample_dim)
        if (
            steps is None
            or target_labels is None
            or _other_stamps(steps, field_labels, target_labels)
        ):
            pos = _positions(field_labels, target_labels, n, n_target, sample_dim)
            steps = steps if target_labels is None else None
    if steps is None:  # no labels, or on no regular step: lead counts samples of the target
        at_all = np.where(pos >= 0, pos + lead, n_target)
    else:  # by label: a predictor needs its target lead steps on, not a target of its own
        at_all = _later(steps, lead, n_target)
    kept = np.flatnonzero((at_all >= 0) & (at_all < n_target))
    gaps = np.flatnonzero(at_all == -1)
    if kept.size < min_samples and pos is None and match == "exact":
        # labels that share no step with the target's (other days of the month): say so
        _positions(field_labels, target_labels, n, n_target, sample_dim)
    if kept.size < min_samples and field_labels is not None and target_labels is not None:
        _check_overlap(field_labels, target_labels, pos, steps, lead, kept.size, min_samples)
    if kept.size < min_samples:
        raise InputError(
            f"lead: lead={lead} leaves {kept.size} pair(s) of predictor and target "
            f"({n} predictor samples, {n_target} target samples along {sample_dim!r}); need "
            f"at least {min_samples}"
        )
    at = at_all[kept]
    X = field.isel({sample_dim: isel_positions(kept)})
    y = y.isel({sample_dim: isel_positions(at)})
    if target_labels is not None:
        valid = np.asarray(target_labels[at])
    elif field_labels is not None:  # one target value per field sample: the field's dates
        valid = np.asarray(field_labels[at])
    else:
        valid = at
    predictors = np.asarray(field_labels[kept]) if field_labels is not None else kept
    y = y.drop_vars([k for k, c in y.coords.items() if sample_dim in c.dims])
    coords = {"target_time": xr.Variable(sample_dim, valid, attrs=_TARGET_TIME_ATTRS)}
    if field_labels is not None:
        coords[sample_dim] = X[sample_dim].variable
    y = y.assign_coords(coords)
    alignment = LeadAlignment(
        lead=lead,
        n_samples=int(kept.size),
        n_input=int(n),
        first_predictor=_scalar(predictors[0]),
        last_predictor=_scalar(predictors[-1]),
        first_target=_scalar(valid[0]),
        last_target=_scalar(valid[-1]),
        n_gaps=int(gaps.size),
        first_gap=_scalar(np.asarray(field_labels[gaps[:1]])[0]) if gaps.size else None,
        step="sample" if steps is None else steps.unit,
    )
    return X, y, alignment


def _refuse_a_finer_target(
    field_labels: pd.Index, target_labels: pd.Index, steps: _Steps | None, dim: str
) -> None:
    """A target on a finer step than the field's own (daily values for a monthly field):
    ``lead`` would count the target's steps, 2 days where 2 months were meant, and pair each
    predictor with one day of its month. Refuse it, as :func:`dcfa.align` does."""
    own = _label_steps(field_labels) if len(field_labels) > 1 else None
    if steps is None or own is None or own.unit == steps.unit:
        return
    monthly = own.unit in ("month", "year") or own.unit.endswith("-month step")
    raise InputError(
        f"target: its {dim!r} labels are on a finer step ({steps.unit}) than the field's "
        f"({own.unit}), so lead would count {steps.units} and pair each predictor with a "
        f"single {steps.unit} of the target; average the target to the field's step first"
        + (
            f" (e.g. xarray's resample({dim}='MS').mean() for a monthly field), then pass "
            "match='month'"
            if monthly
            else ""
        )
    )


def _check_overlap(
    field_labels: pd.Index,
    target_labels: pd.Index,
    pos: np.ndarray | None,
    steps: _Steps | None,
    lead: int,
    n_pairs: int,
    min_samples: int,
) -> None:
    """Refuse the target, not the lead, when too few pairs are left because the two records
    barely overlap (a target of other years): no lead is then what to change."""
    n_target = len(target_labels)
    at = np.where(pos >= 0, pos, n_target) if steps is None else _later(steps, 0, n_target)
    shared = int(((at >= 0) & (at < n_target)).sum())
    if shared >= min_samples:
        return
    what = f"{shared} sample(s)" if steps is None else steps.span(shared)
    raise InputError(
        f"target: its record ({date_label(target_labels[0])} .. {date_label(target_labels[-1])}"
        f"{_kind(target_labels)}) and the field's ({date_label(field_labels[0])} .. "
        f"{date_label(field_labels[-1])}{_kind(field_labels)}) share {what}, and "
        f"lead={lead} pairs {n_pairs} predictor(s) with a target (need at least "
        f"{min_samples}); give the target the field's years"
    )


def _other_stamps(steps: _Steps, field_labels: pd.Index, target_labels: pd.Index) -> bool:
    """Whether a step both sides have is stamped differently (the 1st and the 2nd of a
    month): ``match="exact"`` pairs identical labels, so those are refused by label."""
    field_keys, target_keys = steps.keys
    at = pd.Index(target_keys).get_indexer(field_keys)
    shared = at >= 0
    return not np.array_equal(
        np.asarray(field_labels)[shared], np.asarray(target_labels)[at[shared]]
    )


def _later(steps: _Steps, lead: int, n_target: int) -> np.ndarray:
    """For every predictor, the target's position ``lead`` steps after its label: ``-1`` in a
    gap of the target's labels, ``n_target`` before the target's start or past its end."""
    field_keys, target_keys = steps.keys
    wanted = field_keys + lead
    at = pd.Index(target_keys).get_indexer(wanted)
    outside = (wanted > target_keys.max()) | (wanted < target_keys.min())
    return np.where(outside, n_target, at)


_TARGET_TIME_ATTRS = {"long_name": "valid time of the target"}


def target_time(labels: xr.DataArray, lead: int, step: str) -> xr.DataArray | None:
    """The valid time of a forecast made at each of ``labels`` (a 1-D sample coordinate):
    ``lead`` steps of ``step`` later (a :class:`LeadAlignment`'s ``step``), as a
    ``target_time`` coordinate along the labels' dim. Months, years and ``"3-month step"``
    move the calendar month and keep the day (the month's last day when it has fewer, as
    pandas' ``DateOffset`` does), in the labels' own calendar, cftime included; a duration
    (days, hours, ``"6-hour step"``) is added; ``"step of 0.5"`` adds to numbers. None for
    ``"sample"`` (labels on no regular step) and for labels that are not dates on a step of
    dates, which give no date to add to."""
    numeric = step == "sample" or step.startswith("step of ")
    if not numeric and calendar_of(labels) is None:
        return None
    months = _STEP_MONTHS.get(step) or _leading_int(step, "-month step")
    values = np.asarray(labels.values)
    if months:
        later = _months_later(values, lead * months)
    elif step.startswith("step of "):
        size = float(step.removeprefix("step of "))
        whole = size.is_integer() and values.dtype.kind in "iu"  # integer labels stay integers
        later = values + lead * (int(size) if whole else size)
    else:
        for name, size in _DURATIONS:  # the step's length in microseconds
            k = 1 if step == name else _leading_int(step, f"-{name} step")
            if k:
                delta = np.timedelta64(lead * k * size, "us")
                # cftime dates add a datetime.timedelta
                later = values + (delta if values.dtype.kind == "M" else delta.item())
                break
        else:
            return None
    return xr.DataArray(later, dims=labels.dims, attrs=_TARGET_TIME_ATTRS, name="target_time")


_STEP_MONTHS = {"month": 1, "year": 12}


def _leading_int(text: str, suffix: str) -> int | None:
    """``3`` of ``"3-month step"`` with ``suffix`` ``"-month step"``; None otherwise."""
    head = text.removesuffix(suffix)
    return int(head) if head != text and head.isdigit() else None


def _months_later(dates: np.ndarray, n: int) -> np.ndarray:
    """``dates`` (datetime64 or cftime) ``n`` calendar months later, the day kept or clipped
    to the month's last."""
    if dates.dtype.kind == "M":
        return np.asarray(pd.DatetimeIndex(dates) + pd.DateOffset(months=n), dtype=dates.dtype)
    out = []
    for d in dates:
        k = 12 * d.year + d.month - 1 + n
        first = d.replace(year=k // 12, month=k % 12 + 1, day=1)
        out.append(first.replace(day=min(d.day, first.daysinmonth)))
    return np.array(out, dtype=object)


def lead_of(y, sample_dim: str = "time") -> tuple[int, str] | None:
    """The lead of a target made by :func:`lead_target`, read from its labels.

    Parameters
    ----------
    y : object
        A target; only a DataArray with a ``target_time`` coordinate along ``sample_dim``
        and labels on ``sample_dim`` has a lead to read.
    sample_dim : str, default="time"

    Returns
    -------
    (int, str) or None
        The time steps from each sample's label to its ``target_time`` and one step's name
        (``"month"``, ``"day"``, ``"sample"``...); None when ``y`` has no such labels, or
        they are not one number of steps apart throughout.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=12, freq="MS")
    >>> x = xr.DataArray(np.arange(12.0), dims="time", coords={"time": time})
    >>> _, y, _ = lead_target(x, x, lead=3)
    >>> lead_of(y)
    (3, 'month')
    """
    if not isinstance(y, xr.DataArray) or "target_time" not in y.coords:
        return None
    if y["target_time"].dims != (sample_dim,) or sample_dim not in y.coords:
        return None
    labels, valid = y[sample_dim].values, y["target_time"].values
    steps = _label_steps(pd.Index(labels), pd.Index(valid))
    if steps is None:  # two calendars (a noleap field, a target's datetime64 dates)
        return _months_apart(labels, valid)
    leads = np.unique(steps.keys[1] - steps.keys[0])
    return (int(leads[0]), steps.unit) if leads.size == 1 else None


def _months_apart(labels: np.ndarray, valid: np.ndarray) -> tuple[int, str] | None:
    """The calendar months from each of ``labels`` to its ``valid`` date when each side is
    monthly on its own calendar and they are one number of months apart; else None."""
    months = []
    for dates in (labels, valid):
        steps = _label_steps(pd.Index(dates))
        fields = _date_fields(dates)
        if steps is None or steps.unit != "month" or fields is None:
            return None
        months.append(12 * fields["year"] + fields["month"])
    leads = np.unique(months[1] - months[0])
    return (int(leads[0]), "month") if leads.size == 1 else None


def warn_if_purge_short(y, purges: Mapping[str, int], *, sample_dim: str = "time") -> None:
    """Warn when ``y`` is a target at a lead (:func:`lead_of`) that one of ``purges`` (a
    cross-validation's ``gap``, by the name to give it) is shorter than.

    A training sample closer to a test block than the lead has its target on a test
    predictor's date (before the block) or its predictors on a test target's date (after
    it): the test score is flattered, and a selection scored on such folds favours
    what fits the overlap.
    """
    found = lead_of(y, sample_dim)
    if found is None:
        return
    lead, unit = found
    short = {name: int(gap) for name, gap in purges.items() if int(gap) < lead}
    if not short:
        return
    given = " and ".join(f"{name}={gap}" for name, gap in short.items())
    wanted = ", ".join(f"{name}={lead}" for name in short)
    warnings.warn(
        f"{given}: y is a target {steps_text(lead, unit)} ahead (its target_time, as "
        "lead_target makes it): training samples closer to a test block than that share its "
        "dates (their targets fall on its predictors' dates, or their predictors on its "
        f"targets'), and the cross-validated skill is flattered; pass {wanted} (plus "
        "the predictors' longest lag and trailing window - 1, when they have them)",
        UserWarning,
        stacklevel=outside_stacklevel(),
    )


def _scalar(value):
    """A label as a plain Python object: a pandas Timestamp for datetime64, int, cftime."""
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value)
    if isinstance(value, np.generic):
        return value.item()
    return value

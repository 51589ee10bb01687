"""The argument checks that :mod:`dcfa.forecast`'s functions share: the field and its sample
dim, lists of lags or window lengths, a new dim's name and the field's length; and the time
step of sample labels (:func:`_label_steps`), which leads and lags count."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import InputError, InputTypeError


def _check_sample_dim(field, sample_dim: str) -> None:
    if not isinstance(field, xr.DataArray | xr.Dataset):
        raise InputTypeError(f"field: expected an xarray DataArray or Dataset, got {type(field)}")
    if sample_dim not in field.dims:
        raise InputError(
            f"sample_dim: {sample_dim!r} is not among the field's dims {tuple(field.dims)}"
        )


def _int_list(values, name: str, minimum: int) -> list[int]:
    """``values`` as a non-empty list of unique ints ``>= minimum``, or a ValueError naming it."""
    example = "[0, 1, 2]" if minimum == 0 else "[1, 3, 6, 12]"
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise InputError(f"{name}: expected a list of ints such as {example}, got {values!r}")
    values = list(values)
    if not values:
        raise InputError(f"{name}: expected at least one value, such as {example}")
    for v in values:
        if not isinstance(v, Integral) or isinstance(v, bool | np.bool_):
            raise InputError(f"{name}: expected ints, got {v!r} in {values!r}")
        if v < minimum:
            what = "non-negative" if minimum == 0 else "positive"
            raise InputError(f"{name}: expected {what} numbers of samples, got {v} in {values!r}")
    out = [int(v) for v in values]
    if len(set(out)) != len(out):
        raise InputError(f"{name}: values must be unique, got {values!r}")
    return out


def _check_new_dim(field, dim: str) -> None:
    if dim in field.dims:
        raise InputError(f"field: already has a {dim!r} dim; give each {dim} once")


def _check_length(field, sample_dim: str, needed: int, name: str, values: list[int]) -> None:
    n = field.sizes[sample_dim]
    if needed > n:
        raise InputError(
            f"{name}: {values} need at least {needed} samples along {sample_dim!r}; the field "
            f"has {n}"
        )


########################################################################################
# the time step of sample labels: leads and lags count steps of the calendar, not samples


@dataclass(frozen=True)
class _Steps:
    """Sample labels as numbers of time steps on one regular grid (see :func:`_label_steps`).

    Attributes
    ----------
    keys : list of ndarray of int64
        Per index given, the step number of each of its labels (a common origin).
    unit, units : str
        One step and several, for messages: ``"month"``/``"months"``, ``"year"``/``"years"``,
        ``"day"``/``"days"``, ``"6-hour step"``/``"6-hour steps"``...
    """

    keys: list[np.ndarray]
    unit: str
    units: str

    def span(self, n: int) -> str:
        return f"{n} {self.unit if n == 1 else self.units}"


_MONTH_SPREAD = 0.1  # the labels of a monthly grid sit at one point of their month, +- this
_DURATIONS = (("day", 86_400_000_000), ("hour", 3_600_000_000), ("minute", 60_000_000))


def _label_steps(*indexes: pd.Index) -> _Steps | None:
    """The labels of ``indexes`` as step numbers on one regular grid, or None without one.

    The grid is inferred from the sorted union of the labels: calendar months (dates at one
    point of their month, start, middle or end, or at one point per run of dates when the
    convention changes within the record, at most one per month; a step of 12 months
    for yearly dates, 3 for seasons), else a fixed duration (days, hours; any calendar,
    cftime included), else a fixed numeric step (numbers). The step is the smallest spacing,
    and every spacing must be a whole number of steps, so a gap (a missing month) shows as a
    jump of the step numbers. None when some index repeats a label, the labels cannot be
    compared or no regular step fits: the caller then counts samples.
    """
    values = [np.asarray(idx) for idx in indexes]
    if any(not pd.Index(v).is_unique for v in values):
        return None
    try:
        union = pd.Index(np.concatenate(values)).unique().sort_values()
    except (TypeError, ValueError):  # labels of different kinds (dates and numbers...)
        return None
    u = np.asarray(union)
    if u.size < 2:
        return _Steps([np.zeros(v.size, dtype=np.int64) for v in values], "sample", "samples")
    found = _month_steps(u) or _duration_steps(u) or _number_steps(u)
    if found is None:
        return None
    keys, unit, units = found
    return _Steps([keys[union.get_indexer(v)] for v in values], unit, units)


def _date_fields(u: np.ndarray) -> dict | None:
    """Year, month, day, seconds into the day and days in the month of dates (datetime64 or
    cftime), None when ``u`` holds no dates."""
    try:
        dt = xr.DataArray(u, dims="s").dt
        fields = {k: np.asarray(getattr(dt, k).values, dtype=np.int64) for k in _FIELDS}
    except (AttributeError, TypeError, ValueError):
        return None
    fields["seconds"] = fields["hour"] * 3600 + fields["minute"] * 60 + fields["second"]
    return fields


_FIELDS = ("year", "month", "day", "hour", "minute", "second", "days_in_month")


def _regular(diffs: np.ndarray) -> int | None:
    """The step of increasing integer spacings when each is a whole number of the smallest."""
    if diffs.size == 0 or (diffs <= 0).any():
        return None
    step = int(diffs.min())
    return step if (diffs % step == 0).all() else None


def _one_point_per_run(where: np.ndarray) -> bool:
    """Whether the dates sit at one point of their month (``where``: the fraction of the
    month elapsed), +- :data:`_MONTH_SPREAD`, or at one such point per run of at least two
    dates, runs less than half a month apart: a record joined from two sources, stamped
    first-of-month then mid-month, is still on months. Dates drifting through their months
    (every 35 days) are not: each step moves them by more than the spread."""
    if np.ptp(where) <= _MONTH_SPREAD:
        return True
    jumps = np.abs(np.diff(where))
    if (jumps >= 0.5).any():
        return False
    runs = np.split(where, np.flatnonzero(jumps > _MONTH_SPREAD) + 1)
    return all(r.size >= 2 and np.ptp(r) <= _MONTH_SPREAD for r in runs)


def _month_steps(u: np.ndarray):
    fields = _date_fields(u)
    if fields is None:
        return None
    month = 12 * fields["year"] + fields["month"] - 1
    step = _regular(np.diff(month))
    where = (fields["day"] - 1 + fields["seconds"] / 86_400) / fields["days_in_month"]
    if step is None or not _one_point_per_run(where):
        return None
    keys = (month - month[0]) // step
    if step == 1:
        return keys, "month", "months"
    if step == 12:
        return keys, "year", "years"
    return keys, f"{step}-month step", f"{step}-month steps"


def _duration_steps(u: np.ndarray):
    if u.dtype.kind in "Mm":  # datetime64 or timedelta64
        unit = "datetime64[us]" if u.dtype.kind == "M" else "timedelta64[us]"
        diffs = np.diff(u.astype(unit)).astype(np.int64)
    elif _date_fields(u) is not None:  # cftime dates: differences are datetime.timedelta
        one = np.timedelta64(1, "us").item()
        diffs = np.array([d // one for d in np.diff(u)], dtype=np.int64)
    else:
        return None
    step = _regular(diffs)
    if step is None:
        return None
    keys = np.concatenate([[0], np.cumsum(diffs // step)])
    for name, size in _DURATIONS:
        if step % size == 0:
            k = step // size
            if k == 1:
                return keys, name, f"{name}s"
            return keys, f"{k}-{name} step", f"{k}-{name} steps"
    return keys, f"{step}-microsecond step", f"{step}-microsecond steps"


def _number_steps(u: np.ndarray):
    if u.dtype.kind in "iu":
        step = _regular(np.diff(u.astype(np.int64)))
        if step is None:
            return None
        keys = (u.astype(np.int64) - int(u[0])) // step
    elif u.dtype.kind == "f":
        diffs = np.diff(u.astype(np.float64))
        if not np.isfinite(diffs).all() or (diffs <= 0).any():
            return None
        step = float(diffs.min())
        ratio = diffs / step
        if np.abs(ratio - np.rint(ratio)).max() > 1e-6:
            return None
        keys = np.concatenate([[0], np.cumsum(np.rint(ratio).astype(np.int64))])
    else:
        return None
    return keys, f"step of {step:g}", f"steps of {step:g}"

"""Dates of any CF calendar: calendar names, date fields, month numbers, spans for messages."""

from __future__ import annotations

import re
from functools import partial

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import InputError

#: the calendar months' names, for messages
MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def date_span(coord: xr.DataArray, calendar: str | None, match: str) -> str:
    """``"noleap calendar, 2250-01 .. 2290-12, 492 samples"``: first and last sample, for
    messages (months when matching by month)."""
    n = coord.size
    if n == 0:
        return "empty"
    order = np.argsort(coord.values, kind="stable")  # datetime64, cftime dates or numbers
    ends = coord.isel({coord.dims[0]: [order[0], order[-1]]})
    if calendar is None:
        return f"{ends.values[0]} .. {ends.values[1]}, {n} samples"
    parts = date_fields(ends)
    labels = []
    for k in range(2):
        y, mo, d, h, mi, s, _ = (int(f[k]) for f in parts)
        label = f"{y:04d}-{mo:02d}"
        if match != "month":
            label += f"-{d:02d}" + (f" {h:02d}:{mi:02d}:{s:02d}" if h or mi or s else "")
        labels.append(label)
    return f"{calendar} calendar, {labels[0]} .. {labels[1]}, {n} samples"


# CF calendars, and the ones that name the same calendar (dates after 1582-10-15 for the first)
CALENDARS = frozenset(
    {
        "standard",
        "gregorian",
        "proleptic_gregorian",
        "noleap",
        "365_day",
        "all_leap",
        "366_day",
        "360_day",
        "julian",
    }
)


_CALENDAR_ALIASES = {
    "standard": "gregorian",
    "proleptic_gregorian": "gregorian",
    "365_day": "noleap",
    "366_day": "all_leap",
}


# xarray's warning when it decodes dates out of datetime64[ns]'s range to cftime
CFTIME_FALLBACK = "Unable to decode time axis into full numpy.datetime64"


_DATE_PATTERN = (  # ISO 8601 text: 2001-02, 2001-02-30, 2001-02-30T12:00:00.5
    r"^\s*(-?\d{1,4})-(\d{1,2})(?:-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6})\d*)?)?)?)?\s*$"
)


def calendar_of(coord: xr.DataArray) -> str | None:
    """The CF calendar of a sample coordinate (``"proleptic_gregorian"`` for datetime64),
    None when it does not hold dates."""
    if coord.size == 0 and coord.dtype == object:
        return None
    try:
        return coord.dt.calendar
    except (AttributeError, TypeError, ValueError):  # not dates (or mixed calendars)
        return None


def same_calendar(a: str, b: str) -> bool:
    return _CALENDAR_ALIASES.get(a, a) == _CALENDAR_ALIASES.get(b, b)


def date_fields(coord: xr.DataArray) -> list[np.ndarray]:
    """Year, month, day, hour, minute, second and microsecond of datetime64 or cftime dates."""
    fields = ("year", "month", "day", "hour", "minute", "second", "microsecond")
    return [np.asarray(getattr(coord.dt, f).values, dtype=np.int64) for f in fields]


def sample_keys(coord: xr.DataArray, calendar: str | None, match: str) -> pd.Index:
    """What pairs samples: the month number ``12 * year + month - 1`` (by month), the date's
    fields (exact, on dates of any calendar) or the coordinate's values (not dates)."""
    if calendar is None:
        return pd.Index(coord.values)
    if match == "month":
        year, month = date_fields(coord)[:2]
        return pd.Index(12 * year + month - 1)
    return pd.MultiIndex.from_arrays(date_fields(coord))


def month_numbers(values) -> np.ndarray | None:
    """The month number ``12 * year + month - 1`` of each date of ``values`` (datetime64 or
    cftime, any calendar: :func:`sample_keys` by month), or None when they are not dates."""
    coord = xr.DataArray(np.asarray(values), dims="sample")
    calendar = calendar_of(coord)
    return None if calendar is None else np.asarray(sample_keys(coord, calendar, "month"))


def parse_dates(
    column: pd.Series, calendar: str | None, where: str, date_format: str | None = None
) -> np.ndarray:
    """A CSV column's dates: datetime64 (pandas) for the standard calendars, else cftime
    dates of ``calendar`` from ISO 8601 text (``2001-02-30``, ``2001-02-30 12:00``...).

    Standard-calendar dates with a time zone must be UTC (``Z``, ``+00:00``: the zone is
    dropped); another zone is refused, naming ``target.time_column``. Dates written day and
    month as two numbers (``01/02/2000``) are read in the order ``date_format`` gives
    (``target.date_format``, a ``strftime`` format), or in the only order every row allows;
    when both orders fit every row they are refused, as 1 February and 2 January cannot be told
    apart. A row without a date (empty, ``NaT``) is refused by its row number.
    """
    if date_format is not None and not (calendar is None or same_calendar(calendar, "standard")):
        raise InputError(
            f"target.date_format: {date_format!r} is for dates of the standard calendar; dates "
            f"of the {calendar!r} calendar (target.calendar) are read as ISO 8601 (2001-02-30)"
        )
    if calendar is None or same_calendar(calendar, "standard"):
        key = "target.date_format" if date_format is not None else "target.time_column"
        if date_format is None and pd.api.types.is_numeric_dtype(column):
            # pandas reads numbers as nanoseconds after 1970-01-01: every row in one month
            raise InputError(
                f"{key}: {where} holds numbers (e.g. {column.iloc[0]}), not dates; set "
                "target.date_format for integers such as 199001 ('%Y%m') or 19900115 "
                "('%Y%m%d'), or write the dates as text (1990-01-15)"
            )
        fmt = date_format or _numeric_day_month_format(column, where)
        try:
            dates = pd.to_datetime(column, format=fmt)
        except (ValueError, TypeError, OverflowError) as exc:
            reason = str(exc).splitlines()[0].removesuffix(" You might want to try:")
            hint = (
                "check target.date_format"
                if date_format is not None
                else "for a model calendar set target.calendar (e.g. 'noleap', '360_day'), for "
                "another order of day and month target.date_format (e.g. '%d/%m/%Y')"
            )
            parsed = pd.to_datetime(column, format=fmt or "mixed", errors="coerce")  # row by row
            bad = np.flatnonzero(pd.isna(parsed).to_numpy() & pd.notna(column).to_numpy())
            first = (
                f"{bad.size} value(s) that are not dates of the standard calendar, the first "
                f"{column.iloc[bad[0]]!r} in row {bad[0] + 2} of the file"
                if bad.size
                else "a value that is not a date of the standard calendar"
            )
            raise InputError(f"{key}: {where} holds {first} ({reason}); {hint}") from None
        _no_missing_dates(dates, column, where)
        if isinstance(dates.dtype, pd.DatetimeTZDtype):
            return _utc_dates(dates, where)
        return dates.to_numpy()
    import cftime

    pattern = re.compile(_DATE_PATTERN)
    # the calendar's own date type, as xarray decodes a netCDF time: CFTimeIndex builds its
    # selections (sel(time="2000-04")) from the type of its dates, a plain cftime.datetime
    # standing for the standard calendar
    date_type = {
        "noleap": cftime.DatetimeNoLeap,
        "365_day": cftime.DatetimeNoLeap,
        "all_leap": cftime.DatetimeAllLeap,
        "366_day": cftime.DatetimeAllLeap,
        "360_day": cftime.Datetime360Day,
        "julian": cftime.DatetimeJulian,
        "standard": cftime.DatetimeGregorian,
        "gregorian": cftime.DatetimeGregorian,
        "proleptic_gregorian": cftime.DatetimeProlepticGregorian,
    }.get(calendar.lower(), partial(cftime.datetime, calendar=calendar))
    dates = []
    for row, text in enumerate(column.astype(str)):
        m = pattern.match(text)
        try:
            if m is None:
                raise ValueError("not an ISO 8601 date such as 2001-02-30 or 2001-02-30 12:00")
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups()[:6])
            us = int(m.group(7).ljust(6, "0")) if m.group(7) else 0
            dates.append(date_type(y, mo, d or 1, h, mi, s, us))
        except ValueError as exc:
            raise InputError(
                f"target.time_column: {where}, row {row + 2} of the file: {text!r} is not a "
                f"date of the {calendar!r} calendar (target.calendar) ({exc})"
            ) from None
    return np.array(dates, dtype=object)


# day and month as two numbers then the year: 01/02/2000, 1.2.2000, 01-02-00 (12:00)
_DAY_MONTH = re.compile(r"^\s*(\d{1,2})([/.-])(\d{1,2})\2(\d{2}|\d{4})(?=\s|T|$)")


def _numeric_day_month_format(column: pd.Series, where: str) -> str | None:
    """The format of dates written as ``NN/NN/YYYY`` (any of ``/``, ``.``, ``-``), where
    pandas would take the first number for the month unless the first row says otherwise: the
    order every row allows (a first number above 12 is a day, a second above 12 too), or a
    refusal when both orders fit every row. None for any other writing (ISO 8601, names of
    months...), which pandas reads unambiguously."""
    texts = column.dropna().astype(str)
    texts = texts[~texts.str.strip().isin(("", "NaT", "nat", "NaN", "nan"))]
    found = texts.str.extract(_DAY_MONTH)
    if texts.empty or found[0].isna().any():
        return None
    first, second = found[0].astype(int), found[2].astype(int)
    day_first, month_first = bool((second <= 12).all()), bool((first <= 12).all())
    sep = found[1].iloc[0]
    year = "%Y" if len(found[3].iloc[0]) == 4 else "%y"
    if len(set(found[1])) > 1 or len(set(found[3].str.len())) > 1:
        return None  # mixed writings: pandas' own error names the row
    first_text = texts.iloc[0]
    rest = first_text[_DAY_MONTH.match(first_text).end() :].rstrip()
    time = " %H:%M" if re.fullmatch(r"\s+\d{1,2}:\d{2}", rest) else ""
    if rest and not time:
        return None
    if day_first and month_first:
        example = texts.iloc[0].strip()
        raise InputError(
            f"target.date_format: {where} writes dates as {example!r}, which reads as day "
            "first or month first in every row; set target.date_format = "
            f"'%d{sep}%m{sep}{year}{time}' (day first) or '%m{sep}%d{sep}{year}{time}' "
            "(month first)"
        )
    if day_first:
        return f"%d{sep}%m{sep}{year}{time}"
    if month_first:
        return f"%m{sep}%d{sep}{year}{time}"
    return None  # neither order fits every row: pandas names the row


def _no_missing_dates(dates: pd.Series, column: pd.Series, where: str) -> None:
    """Refuse a row without a date: its value cannot be placed in time."""
    missing = np.flatnonzero(pd.isna(dates).to_numpy())
    if missing.size:
        row = int(missing[0])
        raise InputError(
            f"target.time_column: {where} has no date in {missing.size} row(s), the first "
            f"row {row + 2} of the file ({column.iloc[row]!r}); give each row its date or "
            "remove the row"
        )


def _utc_dates(dates: pd.Series, where: str) -> np.ndarray:
    """Dates written with a time zone as plain datetime64: UTC ones (``2001-02-01T00:00Z``,
    pandas' ``+00:00``) without it; any other zone is refused, as converting to UTC would move
    a monthly value stamped at local midnight of the 1st into the month before, and dropping
    the zone would shift sub-daily values by its offset: which one is meant is the user's."""
    local = dates.dt.tz_localize(None)
    if local.equals(dates.dt.tz_convert("UTC").dt.tz_localize(None)):  # every offset 0
        return local.to_numpy()
    raise InputError(
        f"target.time_column: {where} holds dates in the time zone {dates.dt.tz}; dcfa's dates "
        "are UTC (as CF times): write them in UTC, or without a zone for the local dates"
    )


def months_once(months: np.ndarray) -> list[str]:
    """The names of the calendar months (1..12) that ``months`` holds exactly once: a monthly
    climatology of those samples would be the one sample of each, its anomalies 0."""
    present, counts = np.unique(np.asarray(months), return_counts=True)
    return [MONTH_NAMES[int(m) - 1] for m in present[counts == 1]]


def months_in_one_year(coord: xr.DataArray) -> list[str]:
    """The names of the calendar months whose samples in ``coord`` all lie in one year: a
    climatology of those samples would be that year's values, its anomalies that year's
    departures from itself (0 for monthly samples)."""
    year, month = date_fields(coord)[:2]
    year_months = np.unique(12 * year + month - 1)
    return months_once(year_months % 12 + 1)


# the first day of each month of a leap year (0-based): 1 March is one position every year
_LEAP_MONTH_STARTS = np.cumsum([0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30])
# the days of a year of the calendars whose years are all alike
_YEAR_DAYS = {"noleap": 365, "all_leap": 366, "360_day": 360}


def calendar_days(coord: xr.DataArray, key: str) -> tuple[np.ndarray, int]:
    """The calendar day of every sample (0-based) and the days of the calendar's year.

    Calendars whose years are all alike (noleap, all_leap, 360_day) count the day of the year
    (365, 366 or 360 days). Those with leap years (standard, proleptic_gregorian, julian) place
    every date in a leap year's 366 days, so that 1 March is one day in every year and 29
    February its own.
    """
    need_dates(coord, key, "day-of-year anomalies need dates")
    calendar = calendar_of(coord)
    calendar = _CALENDAR_ALIASES.get(calendar, calendar)
    if calendar in _YEAR_DAYS:
        days = np.asarray(coord.dt.dayofyear.values, dtype=np.int64) - 1
        return days, _YEAR_DAYS[calendar]
    month, day = date_fields(coord)[1:3]
    return _LEAP_MONTH_STARTS[month - 1] + day - 1, 366


def samples_per_month(coord: xr.DataArray) -> float:
    """The median number of samples in a (year, month) of ``coord``'s dates: 1 for monthly
    samples, about 30 for daily ones (0 without dates)."""
    if calendar_of(coord) is None or coord.size == 0:
        return 0.0
    keys = np.asarray(coord.dt.year.values, np.int64) * 12 + coord.dt.month.values
    return float(np.median(np.unique(keys, return_counts=True)[1]))


#: What monthly anomalies of daily samples leave in them, for the warnings that say so.
SUB_MONTHLY = (
    "a monthly climatology leaves the seasonal cycle within each month in the anomalies (a "
    "ramp from each month's first day to its last)"
)


def need_dates(coord: xr.DataArray, key: str, need: str) -> None:
    """Refuse a sample coordinate ``coord`` that does not hold dates, or misses some (NaT),
    naming ``key`` and saying why dates are needed (``need``)."""
    if calendar_of(coord) is None:
        raise InputError(
            f"{key}: the sample coordinate {coord.name!r} holds {coord.dtype} values, not "
            f"dates; {need}"
        )
    missing = np.flatnonzero(pd.isna(np.asarray(coord.values)))
    if missing.size:
        raise InputError(
            f"{key}: the sample coordinate {coord.name!r} misses the date of "
            f"{missing.size} sample(s) (NaT; the first is sample {missing[0]}); {need}: "
            "drop those samples or give them their dates"
        )


def months_of(
    coord: xr.DataArray, key: str, need: str = "monthly anomalies need dates"
) -> np.ndarray:
    """The calendar month (1..12) of every sample, for datetime64 or cftime dates; other
    values refused as :func:`need_dates` does."""
    need_dates(coord, key, need)
    return np.asarray(coord.dt.month.values, dtype=np.int64)


def date_label(value) -> str:
    """A date as ``1991-01-01`` (with the time of day when it is not midnight)."""
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if hasattr(value, "isoformat") and hasattr(value, "hour"):
        text = value.isoformat()
        return text[: -len("T00:00:00")] if text.endswith("T00:00:00") else text
    return str(value)


def refuse_repeated(labels: pd.Index, who: str, dim) -> None:
    """Refuse ``labels`` that repeat one label, naming it and ``who`` (the argument or key
    that holds them): a date typed twice for two months is a mistake in the file, not
    several samples of a month to average."""
    if labels.is_unique:
        return
    twice = labels[labels.duplicated()][0]
    raise InputError(
        f"{who}: holds the {dim!r} label {date_label(twice)} {int((labels == twice).sum())} times; "
        "each sample needs a label of its own (a date typed twice?)"
    )

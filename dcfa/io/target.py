"""Targets: a series from a Zarr store, a netCDF or a CSV file, aligned with an archive."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import LARGEST_TARGET, InputError, InputNotFoundError, outside_stacklevel
from dcfa._terminal import first_labels
from dcfa._units import same_units
from dcfa.io.archive import open_zarr
from dcfa.io.calendars import (
    CALENDARS,
    CFTIME_FALLBACK,
    calendar_of,
    date_span,
    parse_dates,
    refuse_repeated,
    same_calendar,
    sample_keys,
    samples_per_month,
)
from dcfa.io.sources import exists, location


@dataclass(frozen=True)
class PairingKeys:
    """How the pairing's errors name what to change: a batch job's keys (``target.match =
    'month'``) or :func:`align`'s arguments (``match='month'``)."""

    match: str = "target.match"
    target: str = "target"
    assign: str = " = "
    #: how to put the target on the input's calendar ({calendar}: the input's)
    convert: str = (
        "set target.calendar = {calendar!r} to read the target's dates on the input's "
        "calendar, leaving out the dates it lacks first (a 'noleap' calendar has no Feb 29)"
    )

    def set(self, value: str) -> str:
        return f"{self.match}{self.assign}{value!r}"


JOB_KEYS = PairingKeys()
ALIGN_ARGUMENTS = PairingKeys(
    match="match",
    target="y",
    assign="=",
    convert="convert y to the input's calendar first, e.g. "
    "y.convert_calendar({calendar!r}, align_on='date')",
)


def open_target(
    path: str | os.PathLike,
    variable: str | None = None,
    *,
    time_column: str = "time",
    sample_dim: str = "time",
    calendar: str | None = None,
    date_format: str | None = None,
    missing: Sequence[float] = (),
    units: str | None = None,
    select: Mapping[str, str | float] | None = None,
    storage_options: dict | None = None,
) -> xr.DataArray:
    """A 1-D target series over ``sample_dim`` from a Zarr store, a netCDF or a CSV file.

    Parameters
    ----------
    path : str or path-like
        A ``.csv`` file, a netCDF file or a Zarr store (``target.path``).
    variable : str, optional
        The variable (netCDF, Zarr) or column (CSV) to read; needed when there are several
        (``target.variable``).
    time_column : str
        The CSV column holding the dates (``target.time_column``).
    sample_dim : str
        The name of the returned series' dim.
    calendar : str, optional
        The CF calendar of a CSV file's dates (``target.calendar``): unset, or one of
        ``"standard"``, ``"gregorian"``, ``"proleptic_gregorian"``, the dates are read by pandas
        (any year: pandas picks a coarser resolution past 2262); a model calendar
        (``"noleap"``, ``"360_day"``, ...) reads them as cftime dates of that calendar, so
        ``2001-02-30`` is a date of ``"360_day"``. Dates written with a time zone must be in
        UTC (``2001-02-01T00:00Z``, ``+00:00``; the zone is dropped): another zone is refused,
        as local midnight of the 1st is in the month before in UTC. netCDF and Zarr targets
        carry their calendar (xarray decodes them to cftime where numpy cannot hold them); a
        ``calendar`` that contradicts the file's is an error.
    date_format : str, optional
        A CSV file's date format (``target.date_format``), as ``strftime`` writes it:
        ``"%d/%m/%Y"`` for day-first dates such as ``01/02/2000``. Unset, dates written as two
        numbers and a year are read in the order every row allows, and refused when both
        orders fit every row.
    missing : sequence of float
        Values that mark a missing sample (``target.missing``): read as NaN, as an empty CSV
        cell is (equal to within float32 rounding, as a netCDF file may store them). When
        none is given, a value far outside the series' others (more than ``CODE_DISTANCE``
        robust standard deviations from its median) that it repeats, or that is written in
        nines alone, is named in a UserWarning: a missing-value code such as ``-99.99`` read
        as data. So is a negative value in nines in a series otherwise >= 0 (a flow).
    units : str, optional
        The target's units (``target.units``), for a CSV file, which cannot say them. They
        become the series' ``units`` attribute, which a result and its forecast then carry.
        A netCDF or Zarr target keeps its own ``units``; a ``units`` given must agree with
        them (``"m3/s"`` and ``"m3 s-1"`` do).
    select : mapping, optional
        One label of each of the variable's other dims (``target.select``): ``{"member":
        "r1i1p1f1"}`` keeps one member's series of a ``(member, time)`` variable. netCDF and
        Zarr targets only.
    storage_options : dict, optional
        For a URL ``path`` (``s3://...``): passed to fsspec (``target.storage_options``).

    Returns
    -------
    DataArray
        The series over ``sample_dim``, loaded, with datetime64 or cftime dates.

    Raises
    ------
    FileNotFoundError
        No file or store at ``path``.
    ValueError
        Naming the key: an unknown column or variable, a date that is not one of the
        calendar's, an unknown calendar, a series that is not 1-D over ``sample_dim``.
    """
    if units is not None and (not isinstance(units, str) or not units.strip()):
        raise InputError(f"target.units: expected a text such as 'm3 s-1', got {units!r}")
    p = location(path)
    if not exists(p, storage_options):
        raise InputNotFoundError(f"target.path: no such file or store {str(p)!r}")
    if calendar is not None and calendar not in CALENDARS:
        raise InputError(
            f"target.calendar: unknown calendar {calendar!r}; one of {sorted(CALENDARS)}"
        )
    remote = isinstance(p, str)
    if os.fspath(p).lower().endswith(".csv"):
        if select:
            raise InputError(
                f"target.select: {str(p)!r} is a CSV file, one series per column; "
                "target.select keeps one label of a netCDF or Zarr variable's other dims"
            )
        frame = pd.read_csv(p, storage_options=storage_options if remote else None)
        if time_column not in frame.columns:
            raise InputError(
                f"target.time_column: {time_column!r} is not a column of {str(p)!r} "
                f"({list(frame.columns)})" + _date_column_hint(frame)
            )
        values = [c for c in frame.columns if c != time_column]
        column = _pick(variable, values, p)
        times = parse_dates(
            frame[time_column], calendar, f"{time_column!r} of {str(p)!r}", date_format
        )
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InputError(
                f"target.variable: column {column!r} of {str(p)!r} holds a value that is not a "
                f"number: {frame[column].iloc[row]!r} (row {row + 2} of the file); leave a "
                "missing value empty"
            )
        series = xr.DataArray(
            values.to_numpy(dtype=float), dims=sample_dim, coords={sample_dim: times}, name=column
        )
        return _finished(series, missing, units, p, sample_dim)
    with warnings.catch_warnings():  # dates numpy cannot hold are decoded to cftime: wanted
        warnings.filterwarnings("ignore", CFTIME_FALLBACK, xr.SerializationWarning)
        if _is_dir(p, storage_options):
            ds = open_zarr(p, "target.path", storage_options=storage_options)
        else:
            try:
                ds = _open_netcdf(p, storage_options)
            except Exception as exc:
                raise InputError(f"target.path: cannot read {str(p)!r} ({exc})") from None
    name = _pick(variable, list(ds.data_vars), p)
    series = _selected(ds[name], dict(select or {}), sample_dim, p).squeeze(drop=True)
    if series.ndim != 1:
        raise InputError(
            f"target.variable: {name!r} in {str(p)!r} has dims {ds[name].dims}; expected a series "
            f"over one dim, its time" + _select_hint(series, sample_dim)
        )
    if series.dims != (sample_dim,):  # the file's own name for time ('valid_time', 'date')
        (dim,) = series.dims
        if sample_dim in series.coords and series[sample_dim].dims == (dim,):
            series = series.swap_dims({dim: sample_dim})
        else:
            series = series.drop_vars([sample_dim], errors="ignore").rename({dim: sample_dim})
    found = calendar_of(series[sample_dim]) if sample_dim in series.coords else None
    if calendar is not None and found is not None and not same_calendar(calendar, found):
        raise InputError(
            f"target.calendar: {calendar!r}, but {str(p)!r} is on the {found!r} calendar (a "
            "netCDF or Zarr target carries its calendar; target.calendar is for CSV files)"
        )
    return _finished(series.load(), missing, units, p, sample_dim)


def _finished(series: xr.DataArray, missing, units: str | None, p, sample_dim: str):
    """A file's series read: its missing-value codes as NaN, checked finite, in time order,
    with ``units`` (:func:`_with_units`), whichever kind of file it came from."""
    series = _in_time_order(_finite(_coded(series, missing, p), p), sample_dim)
    return _with_units(series, units, p)


def _with_units(series: xr.DataArray, units: str | None, p) -> xr.DataArray:
    """``series`` with ``units`` as its ``units`` attribute; the file's own must agree."""
    if units is None:
        return series
    own = series.attrs.get("units")
    if own is not None and not same_units(str(own), units):
        raise InputError(
            f"target.units: {units!r}, but {series.name!r} in {str(p)!r} is in {own!r} (a "
            "netCDF or Zarr target carries its units; target.units is for CSV files)"
        )
    return series.assign_attrs(units=units if own is None else own)


# a value this many robust standard deviations from the median, repeated or written in nines,
# is a code, not data: NOAA's -99.99 lies hundreds away from an index's values, a flood peak
# a handful
CODE_DISTANCE = 10.0


def _all_nines(values: np.ndarray) -> np.ndarray:
    """Whether each value is written in nines alone (``-99.99``, ``-999``, ``9999.9``), as
    missing-value codes are: a code used once looks like no other value but for that."""
    digits = (f"{abs(v):.6f}".replace(".", "").strip("0") for v in values)
    return np.array([d != "" and set(d) == {"9"} for d in digits], dtype=bool)


def _coded(series: xr.DataArray, missing: Sequence[float], p) -> xr.DataArray:
    """``series`` with the values of ``missing`` as NaN; with none given, a warning naming a
    value far outside the series' others that it repeats or that is written in nines."""
    values = np.asarray(series.values, dtype=np.float64)
    if len(missing):
        codes = np.isclose(
            values[:, None], np.asarray(missing, dtype=np.float64)[None], rtol=1e-6, atol=0.0
        )
        return series.where(~codes.any(axis=1))
    finite = values[np.isfinite(values)]
    if finite.size < 4:
        return series
    centre = np.median(finite)
    spread = 1.4826 * np.median(np.abs(finite - centre))  # the normal's sd from the MAD
    if spread == 0:
        return series
    codes, counts = np.unique(finite, return_counts=True)
    nines = _all_nines(codes)
    far = np.abs(codes - centre) > CODE_DISTANCE * spread
    far &= (counts > 1) | nines
    # a flow or a rain total: its only negative values, written in nines, are codes however
    # near (-99.99 lies 8 robust standard deviations below a flow of about 100)
    signed = (codes < 0) & nines if (codes[~nines] >= 0).all() else np.zeros_like(far)
    if (far | signed).any():
        code = codes[far | signed][np.argmax(counts[far | signed])]
        at = _stamp(series[series.dims[0]], int(np.flatnonzero(values == code)[0]))
        n = int(counts[codes == code][0])
        why = (
            f"{abs(code - centre) / spread:.0f} robust standard deviations from its median"
            if far[codes == code][0]
            else "negative where every other value is >= 0"
        )
        warnings.warn(
            f"target.variable: {series.name!r} in {str(p)!r} holds {code:g} "
            f"{'once' if n == 1 else f'{n} times'} ({'at' if n == 1 else 'first at'} {at}), "
            f"{why}: if it marks missing samples, set target.missing = {code:g}",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
    return series


def _finite(series: xr.DataArray, p) -> xr.DataArray:
    """Refuse infinite values and values whose squares overflow the statistics (NaN is a
    missing month, left out when aligned): found here, before any pass over the archive."""
    values = np.asarray(series.values, dtype=np.float64)
    infinite = np.flatnonzero(np.isinf(values))
    if infinite.size:
        i = int(infinite[0])
        raise InputError(
            f"target.variable: {series.name!r} in {str(p)!r} holds {infinite.size} infinite "
            f"value(s), the first {values[i]} at {_stamp(series[series.dims[0]], i)}; leave a "
            "missing value empty (NaN)"
        )
    big = float(np.nanmax(np.abs(values), initial=0.0))
    if big > LARGEST_TARGET:
        raise InputError(
            f"target.variable: {series.name!r} in {str(p)!r} holds values up to {big:.3g}, "
            f"which overflow float64 in the sums of squares (above about {LARGEST_TARGET:.0e}); "
            f"rescale it, e.g. divide it by {10 ** np.floor(np.log10(big)):.0e}"
        )
    return series


def _in_time_order(series: xr.DataArray, sample_dim: str) -> xr.DataArray:
    """The series sorted by date (stable: repeated dates keep the file's order), so a lead
    or a join counts months, never rows of the file."""
    index = series.indexes.get(sample_dim)
    if index is None or index.is_monotonic_increasing:
        return series
    return series.isel({sample_dim: np.argsort(index.values, kind="stable")})


def _is_dir(p, storage_options) -> bool:
    if isinstance(p, str):
        from dcfa.storage.objectstore import url_fs

        fs, key = url_fs(p, storage_options)
        return bool(fs.isdir(key))
    return p.is_dir()


def _open_netcdf(p, storage_options) -> xr.Dataset:
    """A netCDF file, local or at a URL (a target is one series: read whole into memory)."""
    if not isinstance(p, str):
        return xr.open_dataset(p)
    import tempfile

    import fsspec

    with fsspec.open(p, "rb", **(storage_options or {})) as f:
        data = f.read()
    with tempfile.NamedTemporaryFile(suffix=".nc") as tmp:
        tmp.write(data)
        tmp.flush()
        return xr.open_dataset(tmp.name).load()


def _no_samples_between(
    f_coord, t_coord, f_key, t_key, f_cal, t_cal, keys, coarse="input", fine="target"
) -> None:
    """With exact stamps against a monthly (or coarser) ``coarse`` side, refuse a ``fine``
    side with samples in its months but off its stamps (daily or irregular dates): exact
    matching would keep the few that fall on a stamp and silently drop the rest. Called both
    ways round: a daily target against a monthly input, a daily input against a monthly
    target."""
    f_month = sample_keys(f_coord, f_cal, "month")
    if f_month.has_duplicates:  # several samples a month: exact stamps are the only pairing
        return
    t_month = sample_keys(t_coord, t_cal, "month")
    off = t_month.isin(f_month) & ~t_key.isin(f_key)
    if not off.any():
        return
    i = int(np.flatnonzero(off)[0])
    n_in = int(t_month.isin(f_month).sum())
    several = t_month.has_duplicates
    raise InputError(
        f"{keys.match}: {int(off.sum())} of the {fine}'s {n_in} samples in the {coarse}'s "
        f"months are not on the {coarse}'s stamps (the {fine} has {_stamp(t_coord, i)}, the "
        f"{coarse} {_stamp(f_coord, int(f_month.get_loc(t_month[i])))}), so "
        f"{keys.set('exact')} (identical stamps) would drop them"
        + (
            _several_a_month(t_coord, t_cal)
            + f"; average the {fine} to one value a month first (e.g. xarray's "
            f"resample(time='MS').mean()), then set {keys.set('month')}"
            if several
            else f"; set {keys.set('month')} to pair the same calendar months"
        )
    )


def _stamp(coord, i: int) -> str:
    return str(coord.values[i])[:19].replace("T", " ").removesuffix(" 00:00:00")


def _several_a_month(coord, calendar) -> str:
    """``" (up to 31 samples in one month, 2000-01: daily?)"``, for messages."""
    months = pd.Series(sample_keys(coord, calendar, "month")).value_counts()
    year, month = divmod(int(months.index[0]), 12)
    return f" (up to {int(months.iloc[0])} samples in one month, {year:04d}-{month + 1:02d})"


def _labels(coord: xr.DataArray | None, size: int) -> list:
    """A dim's labels as Python values (its positions when it has no coordinate)."""
    if coord is None or coord.ndim != 1:
        return list(range(size))
    return coord.values.tolist()


def _selected(variable: xr.DataArray, select: dict, sample_dim: str, p) -> xr.DataArray:
    """``variable`` with the one label ``select`` names of each of its other dims; a dim it
    lacks, the dim of the dates, or a label it lacks is named."""
    for dim, label in select.items():
        key = f"target.select.{dim}"
        if dim not in variable.dims:
            raise InputError(
                f"{key}: {dim!r} is not a dim of {variable.name!r} in {str(p)!r} {variable.dims}"
            )
        if dim == sample_dim or _is_dates(variable.coords.get(dim)):
            raise InputError(f"{key}: the target's dates are paired with the input's, not selected")
        labels = _labels(variable.coords.get(dim), variable.sizes[dim])
        same = [i for i, v in enumerate(labels) if _same_label(v, label)]
        if not same:
            raise InputError(
                f"{key}: {label!r} is not among the {dim!r} labels of {variable.name!r} "
                f"({first_labels(labels)})"
            )
        variable = variable.isel({dim: same[0]}, drop=True)
    return variable


def _same_label(value, label) -> bool:
    """Whether a dim's ``value`` is the ``label`` a job names: names as text, numbers as
    numbers (``2`` is the label ``2.0``)."""
    if isinstance(label, str):
        return str(value) == label
    return not isinstance(value, str | bool) and value == label


def _is_dates(coord: xr.DataArray | None) -> bool:
    return coord is not None and calendar_of(coord) is not None


def _select_hint(series: xr.DataArray, sample_dim: str) -> str:
    """``; keep one label of each other dim with target.select = {member = 'r1'}``, naming
    the first label of each dim that is not the dates."""
    others = [d for d in series.dims if d != sample_dim and not _is_dates(series.coords.get(d))]
    if not others or len(others) == series.ndim:
        return ""
    picks = ", ".join(
        f"{d} = {_labels(series.coords.get(d), series.sizes[d])[0]!r}" for d in others
    )
    return f"; keep one label of each other dim with target.select = {{{picks}}}"


def _pick(variable, names, p) -> str:
    if variable is None:
        if len(names) != 1:
            raise InputError(f"target.variable: {str(p)!r} has {names}; name the one to use")
        return names[0]
    if variable not in names:
        raise InputError(f"target.variable: {variable!r} not in {str(p)!r} (it has {names})")
    return variable


def _date_column_hint(frame: pd.DataFrame) -> str:
    """``; set target.time_column = "date"`` when exactly one column of ``frame`` holds text
    that reads as dates (numbers are values, not dates: a flow of 12.5 is no date)."""
    dated = []
    for name in frame.columns:
        column = frame[name].dropna()
        if column.empty or column.dtype.kind != "O":
            continue
        with warnings.catch_warnings():  # pandas' "could not infer format"
            warnings.simplefilter("ignore", UserWarning)
            read = pd.to_datetime(column.astype(str), errors="coerce", format="mixed")
        if read.notna().all():
            dated.append(name)
    return f"; set target.time_column = {dated[0]!r}" if len(dated) == 1 else ""


def align(
    X: xr.DataArray, y: xr.DataArray | pd.Series, *, match: str = "exact", sample_dim: str = "time"
) -> tuple[xr.DataArray, xr.DataArray]:
    """``X`` and ``y`` on the samples they share, ready for ``fit(X, y)``.

    What a batch job does with its archive and target (``target.match``): the samples where
    ``y`` is missing (NaN) are left out, and ``match="month"`` pairs the same calendar month
    whatever the day (SST stamped mid-month, an index on the 1st) and whatever either side's
    calendar. For a target ``lead`` months later, pair with
    ``dcfa.lead_target(X, y, lead, match="month")`` instead, then leave out the missing
    values: aligning first would drop the predictors of the target's missing months too.

    Parameters
    ----------
    X : DataArray
        The field, with dates along ``sample_dim``.
    y : DataArray or pandas.Series
        The target: a series over ``sample_dim`` (a Series indexed by dates).
    match : {"exact", "month"}
        Identical stamps, or the same (year, month).
    sample_dim : str
        The sample dim of ``X``.

    Returns
    -------
    X, y : DataArray
        Both on their common samples, in ``X``'s order; ``y`` on ``X``'s dates.

    Raises
    ------
    ValueError
        As :func:`align_target`: no samples in common, repeated samples, stamps off a
        monthly ``X``'s with ``match="exact"`` (daily or irregular dates), ...

    Examples
    --------
    >>> X, y = dcfa.align(sst_anomalies, soi, match="month")  # doctest: +SKIP
    >>> dcfa.RegionsCV(neighbors=1).fit(X, y)  # doctest: +SKIP
    """
    from dcfa._validation import pandas_on_dim, refuse_dataset

    refuse_dataset(X, "X")
    refuse_dataset(y, "y")
    if isinstance(y, pd.Series):
        y = pandas_on_dim(y, sample_dim, dtype=float).rename(y.name)
    if not isinstance(y, xr.DataArray) or y.ndim != 1:
        raise InputError(
            f"y: expected a series over {sample_dim!r} (a DataArray or a pandas Series indexed "
            "by dates)"
        )
    y = y.rename({y.dims[0]: sample_dim}) if y.dims[0] != sample_dim else y
    X, y, _ = align_target(
        X.transpose(sample_dim, ...), y, sample_dim=sample_dim, match=match, keys=ALIGN_ARGUMENTS
    )
    return X, y


def align_target(
    field: xr.DataArray,
    target: xr.DataArray,
    *,
    sample_dim: str = "time",
    match: str = "exact",
    keys: PairingKeys = JOB_KEYS,
) -> tuple[xr.DataArray, xr.DataArray, int]:
    """Keep the samples present in both; ``match="month"`` pairs the same calendar month.

    Dates may be numpy datetime64 or cftime dates of any CF calendar (``noleap``,
    ``360_day``, a proleptic Gregorian axis past 2262, ...).

    Parameters
    ----------
    field : DataArray
        The input, ``sample_dim`` first.
    target : DataArray
        A series over ``sample_dim``. A sample whose target value is missing (NaN) is not
        present: records with gaps, or put on a longer time axis, lose those samples here.
    sample_dim : str
        The sample dim of both.
    match : {"exact", "month"}
        ``"month"`` pairs the samples of the same (year, month), whatever the day and
        whatever either side's calendar (a ``noleap`` input with a standard-calendar index);
        ``"exact"`` pairs identical stamps (to the microsecond), which needs both sides on
        the same calendar (``standard``, ``gregorian`` and ``proleptic_gregorian`` count as
        one, as do the aliases ``noleap``/``365_day`` and ``all_leap``/``366_day``).
    keys : PairingKeys, default=JOB_KEYS
        How the errors name what to change: the job's keys, or :func:`align`'s arguments.

    Returns
    -------
    field, target : DataArray
        Both on their common samples, in the input's order; the target takes the field's
        sample coordinate (so the input's calendar).
    n_common : int
        How many samples they have in common.

    Raises
    ------
    ValueError
        Naming ``keys.match`` (an unknown mode, repeated samples, no dates to match by month,
        calendars that exact matching cannot compare) or ``keys.target`` (no samples in
        common).
    """
    if match not in ("exact", "month"):
        raise InputError(f"{keys.match} must be 'exact' or 'month', got {match!r}")
    target = target.isel({sample_dim: np.flatnonzero(target.notnull().values)})
    f_coord, t_coord = field[sample_dim], target[sample_dim]
    f_cal, t_cal = calendar_of(f_coord), calendar_of(t_coord)
    if t_coord.size == 0:
        raise InputError(f"{keys.target}: every target value is missing (NaN); nothing to fit on")
    if match == "month" or (f_cal is None) != (t_cal is None):
        for cal, coord, what in ((f_cal, f_coord, "input"), (t_cal, t_coord, "target")):
            if cal is None:
                # monthly periods (pandas' PeriodIndex) are dates in all but type
                periods = str(coord.dtype).startswith("period")
                raise InputError(
                    f"{keys.match}: the {what}'s {sample_dim!r} holds {coord.dtype} values, not "
                    f"dates; matching with {keys.set(match)} needs dates on both sides"
                    + ("; for pandas periods: series.to_timestamp()" if periods else "")
                )
    if match == "exact" and f_cal is not None and not same_calendar(f_cal, t_cal):
        # daily samples: a month holds many, so pairing by month cannot be the remedy
        daily = max(samples_per_month(f_coord), samples_per_month(t_coord)) >= 2
        raise InputError(
            f"{keys.match}: the input is on the {f_cal!r} calendar and the target on the "
            f"{t_cal!r} calendar, so no stamp can be identical; "
            + (
                keys.convert.format(calendar=f_cal)
                if daily
                else f"use {keys.set('month')} to pair the same calendar months"
            )
        )
    f_key = sample_keys(f_coord, f_cal, match)
    t_key = sample_keys(t_coord, t_cal, match)
    if match == "exact" and f_cal is not None:
        _no_samples_between(f_coord, t_coord, f_key, t_key, f_cal, t_cal, keys)
        _no_samples_between(
            t_coord, f_coord, t_key, f_key, t_cal, f_cal, keys, coarse="target", fine="input"
        )
    for key, coord, what in ((f_key, f_coord, "input"), (t_key, t_coord, "target")):
        if key.has_duplicates:
            # a date typed twice, not several samples of a month to average
            who = keys.target if what == "target" else what
            refuse_repeated(pd.Index(coord.values), who, coord.name)
            raise InputError(
                f"{keys.match}: the {what} has repeated samples when matched by {match!r}"
                + (
                    _several_a_month(coord, calendar_of(coord))
                    + (
                        "; average it to one value a month first (e.g. xarray's "
                        "resample(time='MS').mean())"
                        if what == "target"
                        else ""
                    )
                    if match == "month"
                    else ""
                )
            )
    common = f_key.intersection(t_key)
    if len(common) == 0:
        raise InputError(
            f"{keys.target}: no samples in common between the input "
            f"({date_span(f_coord, f_cal, match)}) and the target "
            f"({date_span(t_coord, t_cal, match)}) with {keys.set(match)}"
        )
    f_idx = f_key.get_indexer(common)
    t_idx = t_key.get_indexer(common)
    order = np.argsort(f_idx)
    field = field.isel({sample_dim: f_idx[order]})
    values = target.isel({sample_dim: t_idx[order]}).values
    aligned = xr.DataArray(
        values,
        dims=sample_dim,
        coords={sample_dim: field[sample_dim].values},
        name=target.name,
        attrs=dict(target.attrs),
    )
    return field, aligned, int(len(common))

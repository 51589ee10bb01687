"""Zarr archives in, Zarr results out.

Reading
    :func:`open_archive` opens variables of a Zarr store (format 2 or 3) lazily as one
    ``(sample, ...features)`` DataArray; :func:`plan_chunks` re-chunks archives whose chunks are
    too thin in time for the passes ahead (one time step per chunk is common) and says what that
    costs; :func:`fit_preprocessing` computes, in one pass, which cells hold data (land cells
    hold none), the mean seasonal cycle and the anomalies' standard deviation;
    :func:`apply_preprocessing` applies them lazily.
Targets
    :func:`open_target` reads a target series from a Zarr store, a netCDF file or a CSV file;
    :func:`align_target` keeps the samples both have (optionally matching on the calendar
    month) and says how many.
Writing
    :func:`write_result` writes the reduced features, the map of groups on the original grid
    (NaN where a cell was not used), group sizes and correlations, the GBMAP embedding, the
    moments and provenance to a new Zarr store, through a temporary store and a rename.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

__all__ = [
    "open_archive",
    "plan_chunks",
    "Preprocessing",
    "fit_preprocessing",
    "apply_preprocessing",
    "open_target",
    "align_target",
    "result_dataset",
    "write_result",
    "write_dataset",
    "ChunkWarning",
]

_TARGET_CHUNK_BYTES = 64 * 2**20
_MIN_TIME_CHUNK = 32  # rows per chunk below which the passes are dominated by overhead


class ChunkWarning(UserWarning):
    """The archive's chunks are re-chunked for the passes; the message says what it costs."""


############################################################################################
# archives


def open_archive(
    store: str | os.PathLike,
    variables: list[str] | str,
    *,
    sample_dim: str = "time",
    time: tuple | list | None = None,
    storage_options: dict | None = None,
) -> xr.DataArray:
    """Open ``variables`` of a Zarr store lazily as one DataArray, ``sample_dim`` first.

    Several variables must share their dims; they are stacked along a leading ``variable``
    feature dim. ``time`` selects ``[start, stop]`` of the sample dim (labels, inclusive).
    ``store`` is a local path or an fsspec URL (``s3://bucket/sst.zarr``, with
    ``storage_options`` such as ``{"endpoint_url": ...}``).
    """
    path = _location(store)
    if not _exists(path, storage_options):
        raise FileNotFoundError(f"input.store: no Zarr store at {str(path)!r}")
    so = {"storage_options": storage_options} if storage_options else {}
    ds = _open_zarr(path, "input.store", chunks={}, **so)
    names = [variables] if isinstance(variables, str) else list(variables)
    missing = [v for v in names if v not in ds.data_vars]
    if missing:
        raise ValueError(
            f"input.variables: {missing} not in {str(path)!r} (it has {sorted(ds.data_vars)})"
        )
    dims = {v: ds[v].dims for v in names}
    for v, d in dims.items():
        if sample_dim not in d:
            raise ValueError(
                f"input.variables: {v!r} has dims {d}, without the sample dim {sample_dim!r} "
                "(set input.sample_dim)"
            )
        if len(d) < 2:
            raise ValueError(f"input.variables: {v!r} has only the sample dim; need a grid")
    if len({dims[v] for v in names}) > 1:
        raise ValueError(f"input.variables: the variables must share their dims, got {dims}")
    for v in names:
        if ds[v].dtype.kind not in "iuf":
            raise ValueError(
                f"input.variables: {v!r} in {str(path)!r} holds {ds[v].dtype} values; "
                "expected numbers (integer or floating point)"
            )
    empty = [v for v in names if _stores_no_chunks(path, v, storage_options)]
    if empty:
        raise ValueError(
            f"input.variables: {empty} in {str(path)!r} hold no data (no chunk was ever "
            "written: every value is the fill value)"
        )
    if time is not None:
        ds = select_time(ds, time, sample_dim=sample_dim, key="input.time", where=str(path))
    if len(names) == 1:
        field = ds[names[0]]
    else:
        field = ds[names].to_array("variable").transpose(sample_dim, "variable", ...)
        field.attrs = {"variables": names}
    field.attrs = {**field.attrs, "source": str(path)}
    return field.transpose(sample_dim, ...)


def select_time(obj, time, *, sample_dim: str, key: str, where: str):
    """``obj`` from ``time[0]`` to ``time[1]`` (labels, inclusive) along ``sample_dim``; a
    ValueError naming ``key`` when the labels cannot be compared or nothing is left."""
    try:
        obj = obj.sel({sample_dim: slice(time[0], time[1])})
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise ValueError(
            f"{key}: cannot select {list(time)} on the {sample_dim!r} axis of {where!r} "
            f"(expected dates such as '1991-01'): {exc}"
        ) from None
    if obj.sizes[sample_dim] == 0:
        raise ValueError(f"{key}: no samples of {where!r} in {list(time)}")
    return obj


def _location(path) -> Path | str:
    """A local path as a Path, a URL (``s3://...``) as it is."""
    from dcfa._objectstore import is_url

    return os.fspath(path) if is_url(path) else Path(path)


def _exists(path: Path | str, storage_options: dict | None) -> bool:
    from dcfa._objectstore import exists

    return exists(path, storage_options) if isinstance(path, str) else path.exists()


def _stores_no_chunks(path, name: str, storage_options: dict | None = None) -> bool:
    """True when a Zarr array has no chunk stored (Zarr skips chunks that hold only the fill
    value, so an all-missing variable has none): known from the listing, before any pass."""
    import zarr

    try:
        array = zarr.open_array(
            str(path), path=name, mode="r", storage_options=storage_options or None
        )
        return array.size > 0 and array.nchunks_initialized == 0
    except Exception:  # not a plain array of this store: the passes will tell
        return False


def _open_zarr(path: Path, key: str, **kwargs) -> xr.Dataset:
    """Open a Zarr store of format 2 or 3, consolidated or not, without xarray's warnings (a
    time axis past 2262 or in a model calendar is decoded to cftime, as it should be)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _CFTIME_FALLBACK, xr.SerializationWarning)
            try:
                return xr.open_zarr(path, consolidated=True, **kwargs)
            except (KeyError, ValueError, FileNotFoundError):
                return xr.open_zarr(path, consolidated=False, **kwargs)
    except Exception as exc:  # zarr raises several types for a non-store
        raise ValueError(f"{key}: {str(path)!r} is not a readable Zarr store ({exc})") from None


def plan_chunks(
    field: xr.DataArray, *, sample_dim: str = "time", target_bytes: int = _TARGET_CHUNK_BYTES
) -> xr.DataArray:
    """Chunks fit for the passes: many samples per chunk, blocks of cells along the first grid dim.

    An archive stored one time step per chunk is read as it is stored but re-chunked to
    ``(>= 32 samples, a block of rows of the grid, full other dims)`` of about
    ``target_bytes``, so time reductions and the moments pass see few, large blocks with
    bounded memory. A :class:`ChunkWarning` says what that costs.
    """
    data = field.data
    if not hasattr(data, "chunks"):
        return field.chunk({sample_dim: -1})
    n = field.sizes[sample_dim]
    time_chunks = field.chunksizes.get(sample_dim, (n,))
    grid = [d for d in field.dims if d != sample_dim]
    cells = int(np.prod([field.sizes[d] for d in grid]))
    item = field.dtype.itemsize
    rows = max(_MIN_TIME_CHUNK, min(n, target_bytes // max(1, cells * item)))
    first = grid[0]
    per_first = cells // field.sizes[first]
    first_block = max(1, min(field.sizes[first], target_bytes // max(1, rows * per_first * item)))
    want = {sample_dim: int(min(rows, n)), first: int(first_block), **{d: -1 for d in grid[1:]}}
    if np.median(time_chunks) >= _MIN_TIME_CHUNK and all(
        len(field.chunksizes[d]) == 1 for d in grid[1:]
    ):
        return field
    task_mib = rows * per_first * first_block * item / 2**20
    if field.nbytes < target_bytes:  # small archive: re-chunk silently, it costs nothing
        return field.chunk(want)
    warnings.warn(
        f"the archive is chunked {dict(field.chunksizes)} ({len(time_chunks)} chunks along "
        f"{sample_dim!r}); reading it re-chunked to {want}: every stored chunk is read once per "
        f"pass and shuffled between workers (about {field.nbytes / 2**30:.2f} GiB per pass, "
        f"~{task_mib:.0f} MiB per task). Store the archive in larger time chunks (e.g. with "
        "rechunker) to avoid it.",
        ChunkWarning,
        stacklevel=2,
    )
    return field.chunk(want)


@dataclass(frozen=True)
class Preprocessing:
    """What :func:`fit_preprocessing` learned: NaN cells, seasonal cycle, spread.

    Attributes
    ----------
    has_data : DataArray of bool on the grid
        False for cells with no value at any sample (land in an SST archive).
    climatology : DataArray (month, ...grid) or None
        The mean of each calendar month, for anomalies.
    std : DataArray on the grid or None
        Standard deviation of the (anomaly) series, for standardisation.
    """

    has_data: xr.DataArray
    climatology: xr.DataArray | None = None
    std: xr.DataArray | None = None

    def to_dataset(self) -> xr.Dataset:
        ds = xr.Dataset({"has_data": self.has_data})
        if self.climatology is not None:
            ds["climatology"] = self.climatology
        if self.std is not None:
            ds["std"] = self.std
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Preprocessing:
        ds = ds.load()
        return cls(
            has_data=ds["has_data"].astype(bool),
            climatology=ds["climatology"] if "climatology" in ds else None,
            std=ds["std"] if "std" in ds else None,
        )


def fit_preprocessing(
    field: xr.DataArray,
    *,
    sample_dim: str = "time",
    anomalies: bool = False,
    standardize: bool = False,
) -> Preprocessing:
    """One pass: cells with data, monthly climatology and anomaly spread (as needed)."""
    return preprocessing_pass(
        field, sample_dim=sample_dim, anomalies=anomalies, standardize=standardize
    )[0]


def preprocessing_pass(
    field: xr.DataArray,
    y=None,
    *,
    sample_dim: str = "time",
    anomalies: bool = False,
    standardize: bool = False,
    radius: int = 0,
    periodic=(),
    blocks=(),
):
    """One pass over the raw field: the preprocessing, and with ``radius >= 1`` the grid
    moments of the preprocessed field (with ``y``) from the same pass.

    Calendar months are the pass's segments (:func:`dcfa._stencil.grid_pass`): their means
    are the climatology, the moments pooled within them are the anomalies' moments, and the
    anomalies' spread is their diagonal; no second pass over the anomalies, and no
    ``sum of squares - n mean^2`` (ALGORITHMS.md section 1).

    Returns
    -------
    (Preprocessing, GridMoments or None)
    """
    from dcfa._stencil import grid_pass

    grid = [d for d in field.dims if d != sample_dim]
    months = _months(field[sample_dim], "input.anomalies") - 1 if anomalies else None
    with warnings.catch_warnings():  # cells without data give all-NaN blocks: expected
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        done = grid_pass(
            field,
            y,
            radius=radius,
            segments=months,
            n_segments=12 if anomalies else 1,
            sample_dim=sample_dim,
            periodic=periodic,
            blocks=blocks,
        )
    moments = done.moments
    template = field.isel({sample_dim: 0}, drop=True).drop_encoding()
    count = moments.count.reshape(template.shape)
    has_data = template.copy(data=count > 0).rename("has_data")
    has_data.attrs = {}
    clim = std = None
    if anomalies:
        present = np.flatnonzero(done.segment_count)
        seen = done.segment_seen[present] > 0
        clim = xr.DataArray(
            np.where(seen, done.segment_mean[present], np.nan),
            dims=("month", *grid),
            coords={"month": present + 1, **{c: template[c] for c in template.coords}},
        )
    if standardize:
        spread = moments.column_std(ddof=1).reshape(template.shape)
        std = template.copy(data=spread).rename(None)
        std.attrs = {}
        std = std.where(std > 0)
        if radius:
            moments = moments.scaled(std.values.ravel())
    return Preprocessing(has_data=has_data, climatology=clim, std=std), (
        moments if radius else None
    )


def apply_preprocessing(
    field: xr.DataArray, prep: Preprocessing, *, sample_dim: str = "time"
) -> xr.DataArray:
    """Anomalies and standardisation, lazily and keeping the field's chunks.

    (xarray's ``groupby(...) - climatology`` would split a Dask field into one time step per
    chunk; here each block subtracts the climatology of its own rows' months.) Cells without
    data stay NaN (and are excluded downstream).
    """
    import dask.array as da

    from dcfa._kernels import anomaly_block
    from dcfa.anomalies import lazy_anomalies

    if prep.climatology is None and prep.std is None:
        return field
    grid = field.dims[1:]
    if prep.climatology is not None:
        months = _months(field[sample_dim], "input.anomalies") - 1  # any calendar's dates
        clim = prep.climatology.transpose("month", *grid)
        clim = clim.reindex(month=np.arange(1, 13)).values  # months absent from the fit: NaN
    else:
        months, clim = np.zeros(field.sizes[sample_dim], dtype=np.int64), None
    std = None if prep.std is None else prep.std.transpose(*grid).values
    # float64: the anomalies keep their digits (the result store casts the features)
    if isinstance(field.data, da.Array):
        data = lazy_anomalies(field.data, clim, std, months, np.float64)
    else:
        data = anomaly_block(field.data, clim, std, months, out_dtype=np.float64)
    out = field.copy(data=data)
    out.attrs = dict(field.attrs)
    return out


############################################################################################
# targets


def open_target(
    path: str | os.PathLike,
    variable: str | None = None,
    *,
    time_column: str = "time",
    sample_dim: str = "time",
    calendar: str | None = None,
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
        ``2001-02-30`` is a date of ``"360_day"``. netCDF and Zarr targets carry their calendar
        (xarray decodes them to cftime where numpy cannot hold them); a ``calendar`` that
        contradicts the file's is an error.
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
    p = _location(path)
    if not _exists(p, storage_options):
        raise FileNotFoundError(f"target.path: no such file or store {str(p)!r}")
    if calendar is not None and calendar not in _CALENDARS:
        raise ValueError(
            f"target.calendar: unknown calendar {calendar!r}; one of {sorted(_CALENDARS)}"
        )
    remote = isinstance(p, str)
    if os.fspath(p).lower().endswith(".csv"):
        frame = pd.read_csv(p, storage_options=storage_options if remote else None)
        if time_column not in frame.columns:
            raise ValueError(
                f"target.time_column: {time_column!r} is not a column of {str(p)!r} "
                f"({list(frame.columns)})"
            )
        values = [c for c in frame.columns if c != time_column]
        column = _pick(variable, values, p)
        times = _parse_dates(frame[time_column], calendar, f"{time_column!r} of {str(p)!r}")
        return xr.DataArray(
            frame[column].to_numpy(dtype=float),
            dims=sample_dim,
            coords={sample_dim: times},
            name=column,
        )
    with warnings.catch_warnings():  # dates numpy cannot hold are decoded to cftime: wanted
        warnings.filterwarnings("ignore", _CFTIME_FALLBACK, xr.SerializationWarning)
        if _is_dir(p, storage_options):
            so = {"storage_options": storage_options} if storage_options else {}
            ds = _open_zarr(p, "target.path", **so)
        else:
            try:
                ds = _open_netcdf(p, storage_options)
            except Exception as exc:
                raise ValueError(f"target.path: cannot read {str(p)!r} ({exc})") from None
    name = _pick(variable, list(ds.data_vars), p)
    series = ds[name].squeeze(drop=True)
    if series.dims != (sample_dim,):
        raise ValueError(
            f"target.variable: {name!r} in {str(p)!r} has dims {ds[name].dims}; expected a series "
            f"over {sample_dim!r}"
        )
    found = _calendar(series[sample_dim]) if sample_dim in series.coords else None
    if calendar is not None and found is not None and not _same_calendar(calendar, found):
        raise ValueError(
            f"target.calendar: {calendar!r}, but {str(p)!r} is on the {found!r} calendar (a "
            "netCDF or Zarr target carries its calendar; target.calendar is for CSV files)"
        )
    return series.load()


def _is_dir(p, storage_options) -> bool:
    if isinstance(p, str):
        from dcfa._objectstore import url_fs

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


def _pick(variable, names, p) -> str:
    if variable is None:
        if len(names) != 1:
            raise ValueError(f"target.variable: {str(p)!r} has {names}; name the one to use")
        return names[0]
    if variable not in names:
        raise ValueError(f"target.variable: {variable!r} not in {str(p)!r} (it has {names})")
    return variable


def align_target(
    field: xr.DataArray, target: xr.DataArray, *, sample_dim: str = "time", match: str = "exact"
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
        Naming the key: ``target.match`` (an unknown mode, repeated samples, no dates to
        match by month, calendars that exact matching cannot compare) or ``target`` (no
        samples in common).
    """
    if match not in ("exact", "month"):
        raise ValueError(f"target.match must be 'exact' or 'month', got {match!r}")
    target = target.isel({sample_dim: np.flatnonzero(target.notnull().values)})
    f_coord, t_coord = field[sample_dim], target[sample_dim]
    f_cal, t_cal = _calendar(f_coord), _calendar(t_coord)
    if t_coord.size == 0:
        raise ValueError("target: every target value is missing (NaN); nothing to fit on")
    if match == "month" or (f_cal is None) != (t_cal is None):
        for cal, coord, what in ((f_cal, f_coord, "input"), (t_cal, t_coord, "target")):
            if cal is None:
                raise ValueError(
                    f"target.match: the {what}'s {sample_dim!r} holds {coord.dtype} values, not "
                    f"dates; matching with target.match = {match!r} needs dates on both sides"
                )
    if match == "exact" and f_cal is not None and not _same_calendar(f_cal, t_cal):
        raise ValueError(
            f"target.match: the input is on the {f_cal!r} calendar and the target on the "
            f"{t_cal!r} calendar, so no stamp can be identical; use target.match = 'month' to "
            "pair the same calendar months"
        )
    f_key = _sample_keys(f_coord, f_cal, match)
    t_key = _sample_keys(t_coord, t_cal, match)
    for key, what in ((f_key, "input"), (t_key, "target")):
        if key.has_duplicates:
            raise ValueError(
                f"target.match: the {what} has repeated samples when matched by {match!r}"
            )
    common = f_key.intersection(t_key)
    if len(common) == 0:
        raise ValueError(
            f"target: no samples in common between the input ({_span(f_coord, f_cal, match)}) "
            f"and the target ({_span(t_coord, t_cal, match)}) with target.match = {match!r}"
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


def _span(coord: xr.DataArray, calendar: str | None, match: str) -> str:
    """``"noleap calendar, 2250-01 .. 2290-12, 492 samples"``: first and last sample, for
    messages (months when matching by month)."""
    n = coord.size
    if n == 0:
        return "empty"
    order = np.argsort(coord.values, kind="stable")  # datetime64, cftime dates or numbers
    ends = coord.isel({coord.dims[0]: [order[0], order[-1]]})
    if calendar is None:
        return f"{ends.values[0]} .. {ends.values[1]}, {n} samples"
    parts = _date_fields(ends)
    labels = []
    for k in range(2):
        y, mo, d, h, mi, s, _ = (int(f[k]) for f in parts)
        label = f"{y:04d}-{mo:02d}"
        if match != "month":
            label += f"-{d:02d}" + (f" {h:02d}:{mi:02d}:{s:02d}" if h or mi or s else "")
        labels.append(label)
    return f"{calendar} calendar, {labels[0]} .. {labels[1]}, {n} samples"


# CF calendars, and the ones that name the same calendar (dates after 1582-10-15 for the first)
_CALENDARS = frozenset(
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
_CFTIME_FALLBACK = "Unable to decode time axis into full numpy.datetime64"
_DATE_PATTERN = (  # ISO 8601 text: 2001-02, 2001-02-30, 2001-02-30T12:00:00.5
    r"^\s*(-?\d{1,4})-(\d{1,2})(?:-(\d{1,2})"
    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6})\d*)?)?)?)?\s*$"
)


def _calendar(coord: xr.DataArray) -> str | None:
    """The CF calendar of a sample coordinate (``"proleptic_gregorian"`` for datetime64),
    None when it does not hold dates."""
    if coord.size == 0 and coord.dtype == object:
        return None
    try:
        return coord.dt.calendar
    except (AttributeError, TypeError, ValueError):  # not dates (or mixed calendars)
        return None


def _same_calendar(a: str, b: str) -> bool:
    return _CALENDAR_ALIASES.get(a, a) == _CALENDAR_ALIASES.get(b, b)


def _date_fields(coord: xr.DataArray) -> list[np.ndarray]:
    """Year, month, day, hour, minute, second and microsecond of datetime64 or cftime dates."""
    fields = ("year", "month", "day", "hour", "minute", "second", "microsecond")
    return [np.asarray(getattr(coord.dt, f).values, dtype=np.int64) for f in fields]


def _sample_keys(coord: xr.DataArray, calendar: str | None, match: str) -> pd.Index:
    """What pairs samples: the month number ``12 * year + month - 1`` (by month), the date's
    fields (exact, on dates of any calendar) or the coordinate's values (not dates)."""
    if calendar is None:
        return pd.Index(coord.values)
    if match == "month":
        year, month = _date_fields(coord)[:2]
        return pd.Index(12 * year + month - 1)
    return pd.MultiIndex.from_arrays(_date_fields(coord))


def _parse_dates(column: pd.Series, calendar: str | None, where: str) -> np.ndarray:
    """A CSV column's dates: datetime64 (pandas) for the standard calendars, else cftime
    dates of ``calendar`` from ISO 8601 text (``2001-02-30``, ``2001-02-30 12:00``...)."""
    if calendar is None or _same_calendar(calendar, "standard"):
        try:
            return pd.to_datetime(column).to_numpy()
        except (ValueError, TypeError, OverflowError) as exc:
            reason = str(exc).splitlines()[0].removesuffix(" You might want to try:")
            raise ValueError(
                f"target.time_column: {where} holds a value that is not a date of the standard "
                f"calendar ({reason}); for a model calendar set target.calendar (e.g. 'noleap', "
                "'360_day')"
            ) from None
    import re

    import cftime

    pattern = re.compile(_DATE_PATTERN)
    dates = []
    for row, text in enumerate(column.astype(str)):
        m = pattern.match(text)
        try:
            if m is None:
                raise ValueError("not an ISO 8601 date such as 2001-02-30 or 2001-02-30 12:00")
            y, mo, d, h, mi, s = (int(g) if g else 0 for g in m.groups()[:6])
            us = int(m.group(7).ljust(6, "0")) if m.group(7) else 0
            dates.append(cftime.datetime(y, mo, d or 1, h, mi, s, us, calendar=calendar))
        except ValueError as exc:
            raise ValueError(
                f"target.time_column: {where}, row {row + 1}: {text!r} is not a date of the "
                f"{calendar!r} calendar (target.calendar) ({exc})"
            ) from None
    return np.array(dates, dtype=object)


def _months(coord: xr.DataArray, key: str) -> np.ndarray:
    """The calendar month (1..12) of every sample, for datetime64 or cftime dates."""
    if _calendar(coord) is None:
        raise ValueError(
            f"{key}: the sample coordinate {coord.name!r} holds {coord.dtype} values, not "
            "dates; monthly anomalies need dates"
        )
    return np.asarray(coord.dt.month.values, dtype=np.int64)


############################################################################################
# results


def result_dataset(
    model,
    field: xr.DataArray,
    *,
    region: xr.DataArray | None = None,
    target=None,
    sample_dim: str = "time",
    features=None,
    embedding=None,
    gbmap=None,
    attrs: dict | None = None,
) -> xr.Dataset:
    """The result of a fit as a Dataset (lazy when the field is Dask-backed).

    ``region`` is the map of groups on the grid (-1 where a cell was not used); by default the
    model's ``label_map_``. With ``target``, each group's correlation with it is computed from
    the features in the same pass that writes them. ``features``: ``model.transform(field)``
    when the caller has it already (computed or persisted).
    """
    features = model.transform(field) if features is None else features
    region = (model.label_map_ if region is None else region).astype("int32")
    region.attrs = {
        "long_name": "group of each cell",
        "description": "-1 (NaN when decoded): cell not used (no data, constant or gappy)",
    }
    g = np.arange(model.n_features_out_)
    ds = xr.Dataset(
        {
            "features": features.astype("float32").rename(None),
            "region": region,
            "group_size": ("group", model.group_sizes_.astype("int64")),
        },
        coords={"group": g},
        attrs=dict(attrs or {}),
    )
    if target is not None:
        ds["group_target_corr"] = _corr_with(features, target, sample_dim)
    ds["features"].attrs = {"long_name": f"{type(model).__name__} group aggregates"}
    for name, values in _group_centres(region, model.n_features_out_).items():
        ds[name] = ("group", values)
    if embedding is not None:
        ds["embedding"] = embedding.astype("float32")
        ds["embedding"].attrs = {"long_name": "GBMAP embedding (f_1(x), ..., f_m(x))"}
    if gbmap is not None:
        ds["gbmap_coef"] = (("boost", "group"), gbmap.coef_)
        ds["gbmap_intercept"] = ("boost", gbmap.intercept_)
        ds["gbmap_sign"] = ("boost", gbmap.signs_)
        ds.attrs["gbmap"] = json.dumps(gbmap.get_params(), default=str, sort_keys=True)
        # -- what applying the GBMAP to new months needs (dcfa.results.load_result): the bias
        # inside the softplus, the input standardisation (shift and centre kept apart, as
        # GBMAP subtracts them) and the target's scale (regressor) or labels (classifier)
        std = gbmap._standardizer
        ds["gbmap_bias"] = ("boost", np.asarray(gbmap.bias_, dtype=np.float64))
        ds["gbmap_shift"] = ("group", np.asarray(std.shift, dtype=np.float64))
        ds["gbmap_centre"] = ("group", np.asarray(std.centre, dtype=np.float64))
        ds["gbmap_scale"] = ("group", np.asarray(std.scale, dtype=np.float64))
        f0 = gbmap.f0_
        fitted = {
            "estimator": type(gbmap).__name__,
            "activation": gbmap._activation,
            "f0": f0 if f0 is None or isinstance(f0, float) else f"estimator {type(f0).__name__}",
        }
        if hasattr(gbmap, "y_mean_"):
            fitted.update(y_mean=float(gbmap.y_mean_), y_scale=float(gbmap.y_scale_))
        if hasattr(gbmap, "classes_"):
            fitted["classes"] = np.asarray(gbmap.classes_).tolist()
        ds.attrs["gbmap_fitted"] = json.dumps(fitted, sort_keys=True)
        # -- end of what applying needs
    ds["region"].encoding["_FillValue"] = np.int32(-1)
    return ds


def _corr_with(features: xr.DataArray, target, sample_dim: str) -> xr.DataArray:
    """Correlation of every column of ``features`` with ``target`` (lazy if they are)."""
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    tc = xr.DataArray(t - t.mean(), dims=sample_dim)
    fc = features - features.mean(sample_dim)
    corr = (fc * tc).sum(sample_dim) / np.sqrt((fc**2).sum(sample_dim) * float(tc @ tc))
    corr.attrs = {"long_name": "correlation of the group's aggregate with the target"}
    return corr.drop_vars([c for c in corr.coords if c != "group"])


def _group_centres(region: xr.DataArray, n_groups: int) -> dict:
    """Centre latitude/longitude of each group's cells, when the grid has such coordinates.

    Latitude: the arithmetic mean of the cells' latitudes (unweighted). Longitude: their
    circular mean (:func:`dcfa.geo.group_circular_mean`), in the convention of the grid's
    longitudes (-180..180 if any is negative, else 0..360), so a region across the dateline
    or Greenwich is centred where it is; NaN when undefined (cells evenly all round the globe).
    """
    from dcfa.geo import group_circular_mean, is_longitude, longitude_convention

    labels = region.values
    out = {}
    for coord in ("lat", "latitude", "lon", "longitude"):
        if coord in region.coords and set(region[coord].dims) <= set(region.dims):
            values = region[coord].broadcast_like(region).values
            if is_longitude(coord, region[coord].attrs):
                lower = longitude_convention(region[coord].values)
                out[f"group_{coord}"] = group_circular_mean(labels, values, n_groups, lower=lower)
                continue
            use = (labels >= 0) & (labels < n_groups)
            g = labels[use].astype(np.int64)
            sizes = np.bincount(g, minlength=n_groups)
            total = np.bincount(g, weights=values[use].astype(np.float64), minlength=n_groups)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[f"group_{coord}"] = np.where(sizes > 0, total / sizes, np.nan)
    return out


def write_result(
    path: str | os.PathLike,
    dataset: xr.Dataset,
    *,
    moments=None,
    overwrite: bool = False,
    storage_options: dict | None = None,
) -> Path | str:
    """Write a result Dataset (and its moments, as a ``moments`` sub-group) atomically.

    Everything goes to a temporary store next to ``path`` that is renamed into place once
    complete (:func:`dcfa._store.atomic_store`), so an interrupted write never leaves a store
    that looks finished; on object storage (a URL) the store is complete once its root
    metadata, written last, exists (:mod:`dcfa._objectstore`). ``overwrite`` replaces only an
    earlier dcfa result, never a store or file that dcfa did not write.
    """
    from dcfa._compute import compute
    from dcfa._store import atomic_store

    path = _location(path)
    so = {"storage_options": storage_options} if isinstance(path, str) and storage_options else {}
    dataset = _uniform_chunks(dataset)
    dataset.attrs = {
        **dataset.attrs,
        "dcfa_kind": "result",
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    with atomic_store(
        path, overwrite=overwrite, key="output.store", kinds=("result",), **so
    ) as tmp:
        compute(to_zarr(dataset, tmp, mode="a", compute=False, **so))
        if moments is not None:
            _save_moments_into(moments, tmp, storage_options)
    return path


def write_dataset(ds: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a Dataset that is already in memory (or cheap) to a Zarr store, atomically
    (:func:`dcfa._store.atomic_store`: ``overwrite`` replaces only a store dcfa wrote)."""
    from dcfa._store import atomic_store

    with atomic_store(path, overwrite=overwrite) as tmp:
        to_zarr(ds, tmp, mode="a")
    return Path(path)


def _save_moments_into(moments, store, storage_options) -> None:
    """The moments as a ``moments`` sub-group of ``store`` (local, or uploaded to a URL)."""
    if not isinstance(store, str):
        moments.save(store / "moments")
        return
    import tempfile

    from dcfa._objectstore import url_fs

    fs, key = url_fs(store, storage_options)
    with tempfile.TemporaryDirectory() as local:
        moments.save(Path(local) / "moments")
        fs.put(str(Path(local) / "moments"), f"{key}/moments", recursive=True)


def to_zarr(ds: xr.Dataset, path, **kwargs):
    """``ds.to_zarr`` as dcfa writes stores: Zarr format 3 with consolidated metadata (so
    readers open them quickly and without xarray's warning), in dcfa's own encoding.

    The encoding a variable carries from its source (a format 2 archive's Blosc compressor,
    its chunks, int16 packing) is dropped; only an integer variable's ``_FillValue`` is kept.
    """
    fill = {
        name: {"_FillValue": var.encoding["_FillValue"]}
        for name, var in ds.variables.items()
        if "_FillValue" in var.encoding and var.dtype.kind in "iu"
    }
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Consolidated metadata is currently not part")
        return ds.drop_encoding().to_zarr(
            path, zarr_format=3, consolidated=True, encoding=fill, **kwargs
        )


def _uniform_chunks(ds: xr.Dataset) -> xr.Dataset:
    """Zarr needs equal chunks (but the last): a sliced archive gives uneven ones."""
    out = ds.copy()
    for name, var in ds.data_vars.items():
        if var.chunks is not None:
            out[name] = var.chunk({d: max(c) for d, c in var.chunksizes.items()})
    return out


def provenance(
    config_raw: dict, *, method: str, params: dict, input_store: str, target: str, n_common: int
) -> dict:
    """Attributes recording how a result was made."""
    from dcfa import __version__

    return {
        "dcfa_version": __version__,
        "method": method,
        "parameters": json.dumps(params, default=str, sort_keys=True),
        "input_store": str(input_store),
        "target": str(target),
        "n_samples_used": int(n_common),
        "config": json.dumps(config_raw, default=str, sort_keys=True),
    }

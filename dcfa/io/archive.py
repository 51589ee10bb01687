"""Reading archives: variables of a Zarr store (or netCDF files, a kerchunk reference, an
icechunk repository: :func:`archive_kind`) as one lazy ``(sample, ...features)`` DataArray,
and chunks fit for the passes ahead."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from dcfa._errors import InputError, InputNotFoundError, outside_stacklevel
from dcfa.io.calendars import CFTIME_FALLBACK
from dcfa.io.sources import (
    archive_kind,
    archive_name,
    exists,
    location,
    netcdf_files,
    referenced_files,
    references,
)
from dcfa.stacking import BLOCK_DIMS

_TARGET_CHUNK_BYTES = 64 * 2**20


_MIN_TIME_CHUNK = 32  # rows per chunk below which the passes are dominated by overhead


class ChunkWarning(UserWarning):
    """The archive's chunks are re-chunked for the passes; the message says what it costs."""


def open_archive(
    store: str | os.PathLike,
    variables: list[str] | str,
    *,
    sample_dim: str = "time",
    time: tuple | list | None = None,
    storage_options: dict | None = None,
    opened: xr.Dataset | None = None,
) -> xr.DataArray:
    """Open ``variables`` of an archive (:func:`open_store`) lazily as one DataArray,
    ``sample_dim`` first.

    ``opened``: the Dataset :func:`open_store` gave for ``store``, when the caller opened it
    already (to check it): it is not opened, nor its existence checked, again.

    Several variables must share their dims; they are stacked along a leading ``variable``
    feature dim. ``time`` selects ``[start, stop]`` of the sample dim (labels, inclusive).
    ``store`` is a local path or an fsspec URL (``s3://bucket/sst.zarr``, with
    ``storage_options`` such as ``{"endpoint_url": ...}``).

    Besides ``source``, the DataArray's attributes say what its caller records of the store,
    read with it, as JSON text (:func:`take_record` takes them): ``variable_attrs``, each
    variable's :data:`IDENTIFYING_ATTRS` (stacking drops them), and ``missing_chunks`` when a
    variable's store lacks chunks (Zarr reads them as the fill value).
    """
    path = location(store)
    ds = opened
    if ds is None:
        if not exists(path, storage_options):
            raise InputNotFoundError(f"input.store: no {archive_name(path)} at {str(path)!r}")
        ds = open_store(path, "input.store", storage_options=storage_options)
    names = [variables] if isinstance(variables, str) else list(variables)
    _check_variables(ds, names, sample_dim, path)
    zarr = archive_kind(path) == "zarr"  # listed chunk by chunk
    counts = {v: chunk_counts(path, v, storage_options) if zarr else None for v in names}
    empty = [v for v, c in counts.items() if c is not None and c[1] > 0 and c[0] == 0]
    if empty:
        raise InputError(
            f"input.variables: {empty} in {str(path)!r} hold no data (no chunk was ever "
            "written: every value is the fill value)"
        )
    ds = _in_time_order(ds, sample_dim, path)
    if time is not None:
        ds = select_time(ds, time, sample_dim=sample_dim, key="input.time", where=str(path))
    if len(names) == 1:
        field = ds[names[0]]
    else:
        field = ds[names].to_array("variable").transpose(sample_dim, "variable", ...)
        field.attrs = {"variables": names}
    field = _loaded_coords(field, sample_dim)
    field.attrs = {**field.attrs, "source": str(path)}
    field.attrs["variable_attrs"] = json.dumps(
        {v: {a: str(ds[v].attrs[a]) for a in IDENTIFYING_ATTRS if a in ds[v].attrs} for v in names}
    )
    absent = {
        v: {"missing": c[1] - c[0], "chunks": c[1], "fill_value": c[2]}
        for v, c in counts.items()
        if c is not None and c[0] < c[1]
    }
    if absent:  # Zarr reads them as the fill value: the caller says so
        field.attrs["missing_chunks"] = json.dumps(absent)
    return field.transpose(sample_dim, ...)


def _check_variables(ds: xr.Dataset, names: list[str], sample_dim: str, path) -> None:
    """Each of ``names`` is a numeric variable of ``ds`` over ``sample_dim`` and a grid, all
    over the same dims."""
    missing = [v for v in names if v not in ds.data_vars]
    if missing:
        raise InputError(
            f"input.variables: {missing} not in {str(path)!r} (it has {sorted(ds.data_vars)})"
        )
    dims = {v: ds[v].dims for v in names}
    for v, d in dims.items():
        if sample_dim not in d:
            raise InputError(
                f"input.variables: {v!r} has dims {d}, without the sample dim {sample_dim!r} "
                "(set input.sample_dim)"
            )
        if len(d) < 2:
            raise InputError(f"input.variables: {v!r} has only the sample dim; need a grid")
    if len({dims[v] for v in names}) > 1:
        raise InputError(f"input.variables: the variables must share their dims, got {dims}")
    for v in names:
        if ds[v].dtype.kind not in "iuf":
            raise InputError(
                f"input.variables: {v!r} in {str(path)!r} holds {ds[v].dtype} values; "
                "expected numbers (integer or floating point)"
            )


def _in_time_order(ds: xr.Dataset, sample_dim: str, path) -> xr.Dataset:
    """``ds`` sorted along ``sample_dim``; refused when a label repeats."""
    index = ds.indexes.get(sample_dim)
    if index is not None and not (index.is_monotonic_increasing and index.is_unique):
        if not index.is_unique:
            raise InputError(
                f"input.store: {str(path)!r} holds repeated {sample_dim!r} labels (e.g. "
                f"{index[index.duplicated()][0]}); expected one sample per label"
            )
        # a store written latest-first (or appended out of order): the job's forward folds,
        # leads, windows and lags read the samples in time order
        ds = ds.sortby(sample_dim)
    return ds


def _loaded_coords(field: xr.DataArray, sample_dim: str) -> xr.DataArray:
    """``field`` with its lazy non-index coordinates read (ERA5's ``expver`` along the
    samples, a curvilinear grid's 2-D latitudes): chunked as stored, they would not follow
    the data when the passes re-chunk it. A coordinate as large as the data (along the
    samples and the grid) is dropped: nothing reads it."""
    grid = set(field.dims) - {sample_dim}
    lazy = [k for k, c in field.coords.items() if k not in field.indexes and c.chunks is not None]
    huge = [k for k in lazy if sample_dim in field[k].dims and grid & set(field[k].dims)]
    field = field.drop_vars(huge)
    return field.assign_coords({k: field[k].compute() for k in lazy if k not in huge})


def select_time(obj, time, *, sample_dim: str, key: str, where: str):
    """``obj`` from ``time[0]`` to ``time[1]`` (labels, inclusive) along ``sample_dim``; a
    ValueError naming ``key`` when the labels cannot be compared or nothing is left."""
    try:
        chosen = obj.sel({sample_dim: slice(time[0], time[1])})
        # the two ends swapped: the selection is empty though the span holds samples (of an
        # axis in time order: a latest-first one selects from its later end)
        swapped = (
            chosen.sizes[sample_dim] == 0
            and obj.indexes[sample_dim].is_monotonic_increasing
            and obj.sel({sample_dim: slice(time[1], time[0])}).sizes[sample_dim] > 0
        )
    except (ValueError, TypeError, KeyError, OverflowError) as exc:
        raise InputError(
            f"{key}: cannot select {list(time)} on the {sample_dim!r} axis of {where!r} "
            f"(expected dates such as '1991-01'): {exc}"
        ) from None
    if swapped:
        raise InputError(
            f"{key}: {list(time)} starts after it ends; give the start first ({[time[1], time[0]]})"
        )
    if chosen.sizes[sample_dim] == 0:
        raise InputError(f"{key}: no samples of {where!r} in {list(time)}")
    return chosen


def open_store(path: Path | str, key: str, *, storage_options: dict | None = None) -> xr.Dataset:
    """An archive lazily, whatever holds it (:func:`archive_kind`): a Zarr store
    (:func:`open_zarr`); netCDF files, one or a glob, combined along their coordinates
    (``xarray.open_mfdataset``) and chunked one file per block, which the passes re-chunk
    (:func:`plan_chunks`); a kerchunk reference file, read through fsspec's reference file
    system; or the tip of an icechunk repository's ``main`` branch (``pip install icechunk``)."""
    kind = archive_kind(path)
    if kind == "zarr":
        return open_zarr(path, key, chunks={}, storage_options=storage_options)
    if kind == "kerchunk":
        return _open_kerchunk(path, key)
    if kind == "icechunk":
        return _open_icechunk(path, key)
    files = netcdf_files(path)
    if not files:
        raise InputNotFoundError(f"{key}: no netCDF file matches {str(path)!r}")
    spans: list = []  # each file's variables and indexes, recorded as it is opened

    def record(ds: xr.Dataset) -> xr.Dataset:
        name = Path(ds.encoding.get("source", "?")).name
        spans.append((name, frozenset(map(str, ds.data_vars)), dict(ds.indexes)))
        return ds

    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", CFTIME_FALLBACK, xr.SerializationWarning)
            combined = xr.open_mfdataset(
                files,
                combine="by_coords",
                chunks={},
                data_vars="minimal",
                coords="minimal",
                compat="override",
                join="exact",
                preprocess=record,
            )
    except Exception as exc:  # netCDF4, h5netcdf and xarray raise several types
        overlap = _overlap(spans) if len(spans) == len(files) else None
        raise InputError(
            f"{key}: cannot read the netCDF file(s) {str(path)!r} as one archive ("
            + (overlap or str(exc))
            + ")"
        ) from None
    overlap = _overlap(spans)  # xarray keeps one of two files that start together, silently
    if overlap:
        combined.close()
        raise InputError(f"{key}: in {str(path)!r}, {overlap}")
    return combined


def _overlap(spans: list) -> str | None:
    """Two files of the same variables that hold some of the same points: their spans meet
    along every dim and differ along one (a file of 1890-1909 beside one of 1900-1949), named
    with their spans along it, or None. Tiles of a grid side by side do not overlap.

    Checked on every netCDF glob opened, so by a sweep, not every pair: the files sorted by
    where they start along a dim they differ in, each compared with those still open there
    (a decade of daily files is 3 650 files, 6.7 million pairs)."""
    groups: dict = {}
    for i, (name, variables, indexes) in enumerate(spans):
        box = {d: (ix.min(), ix.max()) for d, ix in indexes.items() if len(ix)}
        groups.setdefault(variables, []).append((i, name, box, indexes))
    for files in groups.values():
        dims = sorted({d for *_, box, _ in files for d in box})
        moving = [d for d in dims if len({f[2].get(d) for f in files}) > 1] or dims
        if not moving:
            continue
        sweep = moving[0]
        active: list = []
        for f in sorted((f for f in files if sweep in f[2]), key=lambda f: f[2][sweep][0]):
            active = [a for a in active if a[2][sweep][1] >= f[2][sweep][0]]
            for a in active:
                shared = [d for d in a[2] if d in f[2]]
                if all(a[2][d][0] <= f[2][d][1] and f[2][d][0] <= a[2][d][1] for d in shared):
                    (_, n1, b1, x1), (_, n2, b2, x2) = sorted((a, f), key=lambda g: g[0])
                    d = next((d for d in shared if not x1[d].equals(x2[d])), shared[0])
                    return (
                        f"{n1!r} ({b1[d][0]} .. {b1[d][1]}) and {n2!r} ({b2[d][0]} .. "
                        f"{b2[d][1]}) overlap along {d!r}; leave one of them out of the glob"
                    )
            active.append(f)
    return None


def _open_kerchunk(path: Path, key: str) -> xr.Dataset:
    try:
        refs = references(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"{key}: {str(path)!r} is not a kerchunk reference file ({exc})") from None
    missing = [f for f in referenced_files(refs, path) if not f.is_file()]
    if missing:
        raise InputNotFoundError(
            f"{key}: the kerchunk reference {str(path)!r} points into {len(missing)} missing "
            f"file(s), e.g. {str(missing[0])!r}"
        )
    return open_zarr("reference://", key, chunks={}, storage_options={"fo": os.fspath(path)})


def _open_icechunk(path: Path, key: str) -> xr.Dataset:
    try:
        import icechunk
    except ImportError:
        raise InputError(
            f"{key}: {str(path)!r} is an icechunk repository; reading it needs the icechunk "
            "package: pip install icechunk"
        ) from None
    try:
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(os.fspath(path)))
        session = repo.readonly_session(branch="main")
    except Exception as exc:  # icechunk's own error types
        raise InputError(
            f"{key}: cannot open the icechunk repository {str(path)!r} ({exc})"
        ) from None
    return open_zarr(session.store, key, chunks={})


def chunk_counts(path, name: str, storage_options: dict | None = None) -> tuple | None:
    """``(stored, total, fill value)``: how many of a Zarr array's chunks the store holds, from
    its listing, before any pass (None when it is not a plain array of the store: the passes
    will tell). Zarr reads a chunk that is not stored as the fill value: an array written with
    ``write_empty_chunks=False`` leaves out the chunks that hold only it (land), a damaged or
    half-copied store loses others, and the two look the same."""
    import zarr

    try:
        array = zarr.open_array(
            str(path), path=name, mode="r", storage_options=storage_options or None
        )
        fill = array.fill_value
        fill = None if fill is None else float(fill) if np.isfinite(fill) else str(fill)
        return int(array.nchunks_initialized), int(array.nchunks), fill
    except Exception:
        return None


def open_zarr(path: Path, key: str, *, storage_options: dict | None = None, **kwargs) -> xr.Dataset:
    """Open a Zarr store of format 2 or 3, consolidated or not, without xarray's warnings (a
    time axis past 2262 or in a model calendar is decoded to cftime, as it should be).
    ``storage_options`` (fsspec's, for a URL) are passed on when given."""
    if storage_options:
        kwargs["storage_options"] = storage_options
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", CFTIME_FALLBACK, xr.SerializationWarning)
            try:
                return xr.open_zarr(path, consolidated=True, **kwargs)
            except (KeyError, ValueError, FileNotFoundError):
                return xr.open_zarr(path, consolidated=False, **kwargs)
    except Exception as exc:  # zarr raises several types for a non-store
        raise InputError(f"{key}: {str(path)!r} is not a readable Zarr store ({exc})") from None


def take_record(field: xr.DataArray, name: str) -> dict:
    """Remove the record ``name`` (``variable_attrs``, ``missing_chunks``) that
    :func:`open_archive` left in ``field``'s attributes, and return it ({} when absent)."""
    return json.loads(field.attrs.pop(name, "{}"))


# what identifies a variable's quantity: a result records them, dcfa apply compares them
IDENTIFYING_ATTRS = ("units", "standard_name")


def plan_chunks(
    field: xr.DataArray, *, sample_dim: str = "time", target_bytes: int = _TARGET_CHUNK_BYTES
) -> xr.DataArray:
    """Chunks fit for the passes: many samples per chunk, blocks of cells along the first grid dim.

    An archive stored one time step per chunk is read as it is stored but re-chunked to
    ``(>= 32 samples, a block of rows of the grid, full other dims)`` of about
    ``target_bytes``, so time reductions and the moments pass see few, large blocks with
    bounded memory. A :class:`ChunkWarning` says what that costs. Variables, windows and lags
    (:data:`dcfa.stacking.BLOCK_DIMS`) may stay one chunk each: each is a block of cells.
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
    # a variable, window or lag is a block of cells of its own, one chunk wide as made
    if np.median(time_chunks) >= _MIN_TIME_CHUNK and all(
        len(field.chunksizes[d]) == 1 for d in grid[1:] if d not in BLOCK_DIMS
    ):
        return field
    task_mib = rows * per_first * first_block * item / 2**20
    if field.nbytes < target_bytes:  # small archive: re-chunk silently, it costs nothing
        return field.chunk(want)
    from dcfa.memory.check import gib

    warnings.warn(
        f"the archive is chunked {dict(field.chunksizes)} ({len(time_chunks)} chunks along "
        f"{sample_dim!r}); reading it re-chunked to {want}: every stored chunk is read once per "
        f"pass and shuffled between workers (about {gib(field.nbytes)} per pass, "
        f"~{task_mib:.0f} MiB per task). Store the archive in larger time chunks (e.g. with "
        "rechunker) to avoid it.",
        ChunkWarning,
        stacklevel=outside_stacklevel(),
    )
    return field.chunk(want)

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
import shutil
import uuid
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
) -> xr.DataArray:
    """Open ``variables`` of a Zarr store lazily as one DataArray, ``sample_dim`` first.

    Several variables must share their dims; they are stacked along a leading ``variable``
    feature dim. ``time`` selects ``[start, stop]`` of the sample dim (labels, inclusive).
    """
    path = Path(store)
    if not path.exists():
        raise FileNotFoundError(f"input.store: no Zarr store at {str(path)!r}")
    ds = _open_zarr(path, "input.store", chunks={})
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
    if time is not None:
        ds = ds.sel({sample_dim: slice(time[0], time[1])})
        if ds.sizes[sample_dim] == 0:
            raise ValueError(f"input.time: no samples of {str(path)!r} in {list(time)}")
    if len(names) == 1:
        field = ds[names[0]]
    else:
        field = ds[names].to_array("variable").transpose(sample_dim, "variable", ...)
        field.attrs = {"variables": names}
    field.attrs = {**field.attrs, "source": str(path)}
    return field.transpose(sample_dim, ...)


def _open_zarr(path: Path, key: str, **kwargs) -> xr.Dataset:
    """Open a Zarr store of format 2 or 3, consolidated or not, without xarray's warning."""
    try:
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
    from dcfa._compute import compute

    month = f"{sample_dim}.month"
    has_data = field.notnull().any(sample_dim)
    parts = {"has_data": has_data}
    x = field.astype("float64")  # float32 means would cost the anomalies' digits
    if anomalies:
        parts["clim"] = x.groupby(month).mean(sample_dim)
        if standardize:
            parts["sumsq"] = (x**2).groupby(month).sum(sample_dim)
            parts["count"] = field.notnull().groupby(month).sum(sample_dim)
    elif standardize:
        parts["std"] = x.std(sample_dim, ddof=1)
    keys = list(parts)
    with warnings.catch_warnings():  # cells without data give all-NaN reductions: expected
        warnings.filterwarnings("ignore", "Degrees of freedom", RuntimeWarning)
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        values = compute(*[parts[k].data for k in keys])
    done = {k: parts[k].copy(data=v) for k, v in zip(keys, values, strict=True)}
    clim = done.get("clim")
    std = done.get("std")
    if anomalies and standardize:
        ss = (done["sumsq"] - done["count"] * clim**2).sum("month")
        n = done["count"].sum("month")
        std = np.sqrt(ss.clip(min=0) / (n - 1).where(n > 1))
    if std is not None:
        std = std.where(std > 0)
    return Preprocessing(has_data=done["has_data"], climatology=clim, std=std)


def apply_preprocessing(
    field: xr.DataArray, prep: Preprocessing, *, sample_dim: str = "time"
) -> xr.DataArray:
    """Anomalies and standardisation, lazily and keeping the field's chunks.

    (xarray's ``groupby(...) - climatology`` would split a Dask field into one time step per
    chunk; here each block subtracts the climatology of its own rows' months.) Cells without
    data stay NaN (and are excluded downstream).
    """
    import dask.array as da

    data = field.data
    if prep.climatology is not None:
        months = field[sample_dim].dt.month.values - 1
        clim = prep.climatology.transpose("month", *field.dims[1:])
        clim = clim.reindex(month=np.arange(1, 13)).values  # months absent from the fit: NaN
        if isinstance(data, da.Array):
            spatial = data.chunks[1:]
            clim_d = da.from_array(clim, chunks=((12,), *spatial))
            months_d = da.from_array(months, chunks=(data.chunks[0],))
            idx = "".join(chr(ord("i") + k) for k in range(data.ndim))
            data = da.blockwise(
                _subtract_climatology,
                idx,
                data,
                idx,
                clim_d,
                "m" + idx[1:],
                months_d,
                idx[0],
                dtype=np.result_type(data.dtype, np.float32),
                concatenate=True,
            )
        else:
            data = _subtract_climatology(data, clim, months)
    if prep.std is not None:
        data = data / prep.std.transpose(*field.dims[1:]).values
    out = field.copy(data=data)
    out.attrs = dict(field.attrs)
    return out


def _subtract_climatology(block, clim, months):
    return block - clim[months]


############################################################################################
# targets


def open_target(
    path: str | os.PathLike,
    variable: str | None = None,
    *,
    time_column: str = "time",
    sample_dim: str = "time",
) -> xr.DataArray:
    """A 1-D target series over ``sample_dim`` from a Zarr store, a netCDF or a CSV file."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"target.path: no such file or store {str(p)!r}")
    if p.suffix.lower() == ".csv":
        frame = pd.read_csv(p)
        if time_column not in frame.columns:
            raise ValueError(
                f"target.time_column: {time_column!r} is not a column of {str(p)!r} "
                f"({list(frame.columns)})"
            )
        values = [c for c in frame.columns if c != time_column]
        column = _pick(variable, values, p)
        times = pd.to_datetime(frame[time_column])
        return xr.DataArray(
            frame[column].to_numpy(dtype=float),
            dims=sample_dim,
            coords={sample_dim: times.values},
            name=column,
        )
    if p.is_dir():
        ds = _open_zarr(p, "target.path")
    else:
        try:
            ds = xr.open_dataset(p)
        except Exception as exc:
            raise ValueError(f"target.path: cannot read {str(p)!r} ({exc})") from None
    name = _pick(variable, list(ds.data_vars), p)
    series = ds[name].squeeze(drop=True)
    if series.dims != (sample_dim,):
        raise ValueError(
            f"target.variable: {name!r} in {str(p)!r} has dims {ds[name].dims}; expected a series "
            f"over {sample_dim!r}"
        )
    return series.load()


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

    A sample whose target value is missing (NaN) is not present: records with gaps, or put on
    a longer time axis, lose those samples here. Returns the field and target on their common
    samples (the target takes the field's sample coordinate) and how many there are. Raises
    when there are none.
    """
    target = target.isel({sample_dim: np.flatnonzero(target.notnull().values)})
    f_time = pd.DatetimeIndex(field[sample_dim].values) if match == "month" else None
    if match == "month":
        f_key = f_time.to_period("M")
        t_key = pd.DatetimeIndex(target[sample_dim].values).to_period("M")
    else:
        f_key = pd.Index(field[sample_dim].values)
        t_key = pd.Index(target[sample_dim].values)
    for key, what in ((f_key, "input"), (t_key, "target")):
        if key.has_duplicates:
            raise ValueError(
                f"target.match: the {what} has repeated samples when matched by {match!r}"
            )
    common = f_key.intersection(t_key)
    if len(common) == 0:
        raise ValueError(
            f"target: no samples in common between the input ({_span(f_key)}) and the target "
            f"({_span(t_key)}) with target.match = {match!r}"
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


def _span(index) -> str:
    if len(index) == 0:
        return "empty"
    return f"{index.min()} .. {index.max()}, {len(index)} samples"


############################################################################################
# results


def result_dataset(
    model,
    field: xr.DataArray,
    *,
    region: xr.DataArray | None = None,
    target=None,
    sample_dim: str = "time",
    embedding=None,
    gbmap=None,
    attrs: dict | None = None,
) -> xr.Dataset:
    """The result of a fit as a Dataset (lazy when the field is Dask-backed).

    ``region`` is the map of groups on the grid (-1 where a cell was not used); by default the
    model's ``label_map_``. With ``target``, each group's correlation with it is computed from
    the features in the same pass that writes them.
    """
    features = model.transform(field)
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
    """Mean latitude/longitude of each group's cells, when the grid has such coordinates."""
    labels = region.values
    out = {}
    for coord in ("lat", "latitude", "lon", "longitude"):
        if coord in region.coords and set(region[coord].dims) <= set(region.dims):
            values = region[coord].broadcast_like(region).values
            out[f"group_{coord}"] = np.array(
                [
                    values[labels == g].mean() if (labels == g).any() else np.nan
                    for g in range(n_groups)
                ]
            )
    return out


def write_result(
    path: str | os.PathLike,
    dataset: xr.Dataset,
    *,
    moments=None,
    overwrite: bool = False,
) -> Path:
    """Write a result Dataset (and its moments, as a ``moments`` sub-group) atomically.

    Everything goes to a temporary store next to ``path`` that is renamed into place once
    complete, so an interrupted write never leaves a store that looks finished.
    """
    from dcfa._compute import compute

    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"output.store: {str(path)!r} exists; set output.overwrite = true")
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        dataset = _uniform_chunks(dataset)
        dataset.attrs = {
            **dataset.attrs,
            "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        delayed = to_zarr(dataset, tmp, mode="w-", compute=False)
        compute(delayed)
        if moments is not None:
            moments.save(tmp / "moments")
        from dcfa._moments import _replace_dir

        _replace_dir(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def to_zarr(ds: xr.Dataset, path, **kwargs):
    """``ds.to_zarr`` as dcfa writes stores: Zarr format 3 with consolidated metadata (so
    readers open them quickly and without xarray's warning)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Consolidated metadata is currently not part")
        return ds.to_zarr(path, zarr_format=3, consolidated=True, **kwargs)


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

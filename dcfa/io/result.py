"""Writing results: the reduced features, the map of groups, provenance, to a new Zarr store."""

from __future__ import annotations

import datetime as _dt
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from dcfa.io.sources import location

if TYPE_CHECKING:  # hints only: writing a result needs neither scikit-learn nor the moments
    from numpy.typing import ArrayLike
    from sklearn.base import BaseEstimator

    from dcfa.stats.columns import ColumnMoments
    from dcfa.stats.grid import GridMoments
    from dcfa.stats.moments import Moments

#: the attributes of a target that is a logarithm (``target.transform = "log"``) holding
#: the name and units of the quantity: a forecast brought back with the exponential has them
LOG_OF = "log_of"
LOG_OF_UNITS = "log_of_units"
#: what a result's ``target`` is, beside its own name
TARGET_DESCRIPTION = "the target the features were fitted for (of sample t: the target at t + lead)"


def result_dataset(
    model: BaseEstimator,
    field: xr.DataArray,
    *,
    region: xr.DataArray | None = None,
    target: ArrayLike | None = None,
    sample_dim: str = "time",
    features: xr.DataArray | None = None,
    embedding: xr.DataArray | None = None,
    gbmap: BaseEstimator | None = None,
    stability: xr.DataArray | None = None,
    units: dict | None = None,
    attrs: dict | None = None,
) -> xr.Dataset:
    """The result of a fit as a Dataset (lazy when the field is Dask-backed).

    ``region`` is the map of groups on the grid (-1 where a cell was not used); by default the
    model's ``label_map_``. ``stability``: how much each cell's region recurs across the
    folds, on the same grid (NaN where a cell was not used); by default the model's
    ``stability_map_`` when it has one (:class:`dcfa.RegionsCV`), and its ``group_stability_``
    per group. With ``target``, each group's correlation with it is computed from the
    features in the same pass that writes them, and the target is kept (``target``, along
    ``sample_dim``: what :func:`dcfa.load_result` fits the forecast's regression to).
    ``features``: ``model.transform(field)`` when the caller has it already (computed or
    persisted). ``units``: each input
    variable's units (the field's own ``units`` when None); every group gets those of its
    variable's aggregates (``group_units``), and the features get them as their ``units``
    when all groups share them.
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
    if stability is None:
        stability = getattr(model, "stability_map_", None)
    if stability is not None:
        ds["stability"] = stability.astype("float32").rename(None)
        ds["stability"].attrs = {
            "long_name": "recurrence of each cell's region across the CV folds",
            "description": "mean Jaccard index of the cell's region in the chosen map and in "
            "each fold's map (1: the same cells in every fold); NaN: cell not used",
            "units": "1",
        }
    if getattr(model, "group_stability_", None) is not None:
        ds["group_stability"] = ("group", model.group_stability_.astype("float32"))
        ds["group_stability"].attrs = {
            "long_name": "recurrence of each group across the CV folds",
            "description": "mean of stability over the group's cells (1: the same cells in "
            "every fold)",
            "units": "1",
        }
    if target is not None:
        ds["target"] = (sample_dim, np.asarray(target, dtype=np.float64).reshape(-1))
        own = getattr(target, "attrs", {}).get("long_name") or getattr(target, "name", None)
        ds["target"].attrs = {
            # its own name, which a forecast of it is then named by
            "long_name": str(own) if own is not None else TARGET_DESCRIPTION,
            "description": TARGET_DESCRIPTION,
        }
        for key in ("units", LOG_OF, LOG_OF_UNITS):
            if getattr(target, "attrs", {}).get(key) is not None:
                ds["target"].attrs[key] = str(target.attrs[key])
        gappy = getattr(model, "missing", "exclude") == "pairwise"  # NaN in the features
        ds["group_target_corr"] = _corr_with(features, target, sample_dim, gappy=gappy)
        ds = ds.assign(_corr_bounds(features, target, ds["group_target_corr"], sample_dim))
    ds["features"].attrs = {"long_name": f"{type(model).__name__} group aggregates"}
    if units is None and "units" in field.attrs:
        units = {"": field.attrs["units"]}
    reduction = getattr(model, "reduction_", None)
    per_group = None
    if reduction is not None:
        per_group = group_units(region, model.n_features_out_, units or {}, reduction)
    if per_group is not None:
        ds = ds.assign_coords(group_units=("group", per_group))
        ds["group_units"].attrs = {"long_name": "units of the group's aggregate"}
        if len(set(per_group)) == 1:
            ds["features"].attrs["units"] = str(per_group[0])
    centres = group_centres(region, model.n_features_out_)
    for name, values in centres.items():
        ds[name] = ("group", values)
    ds = ds.assign_coords(group_name=("group", group_names(region, centres, model.n_features_out_)))
    ds["group_name"].attrs = {"long_name": "the group's block (variable, window, lag) and centre"}
    if embedding is not None:
        ds["embedding"] = embedding.astype("float32")
        ds["embedding"].attrs = {"long_name": "GBMAP embedding (f_1(x), ..., f_m(x))"}
    if gbmap is not None:
        ds["gbmap_coef"] = (("boost", "group"), gbmap.coef_)
        ds["gbmap_intercept"] = ("boost", gbmap.intercept_)
        ds["gbmap_sign"] = ("boost", gbmap.signs_)
        # labelled 1 to m, as GBMAP's transform labels the learners f_1 ... f_m
        ds = ds.assign_coords(boost=np.arange(1, gbmap.coef_.shape[0] + 1))
        ds.attrs["gbmap"] = json.dumps(gbmap.get_params(), default=str, sort_keys=True)
        # -- what applying the GBMAP to new months needs (dcfa.batch.results.load_result): the bias
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


def _corr_with(features: xr.DataArray, target, sample_dim: str, *, gappy: bool) -> xr.DataArray:
    """Correlation of every column of ``features`` with ``target`` (lazy if they are).

    Complete features take their moments from the statistics engine's column pass
    (:func:`dcfa.stats.graph.column_moments`: one kernel per block of samples, merged with
    Chan's update), computed with the blocks the result store writes; ``gappy`` ones (a
    NaN-aware aggregation) over their observed samples.
    """
    import dask.array as da

    from dcfa.stats.graph import column_moments

    t = np.asarray(target, dtype=np.float64).reshape(-1)
    attrs = {"long_name": "correlation of the group's aggregate with the target"}
    if gappy:
        tc = xr.DataArray(t - t.mean(), dims=sample_dim)
        fc = features - features.mean(sample_dim)
        corr = (fc * tc).sum(sample_dim) / np.sqrt((fc**2).sum(sample_dim) * float(tc @ tc))
        corr.attrs = attrs
        return corr.drop_vars([c for c in corr.coords if c != "group"])
    data = features.transpose(sample_dim, "group").data
    lazy = isinstance(data, da.Array)
    X = data if lazy else da.from_array(data, chunks=-1)
    c = column_moments(X, da.from_array(t[:, None], chunks=(X.chunks[0], 1)))
    corr = c["target_cross"][:, 0] / da.sqrt(c["m2"] * c["target_m2"][0])
    if not lazy:  # in memory: here, not shipped to a cluster
        corr = corr.compute(scheduler="sync")
    return xr.DataArray(corr, dims="group", coords={"group": features["group"].values}, attrs=attrs)


def _corr_bounds(features: xr.DataArray, target, corr: xr.DataArray, sample_dim: str) -> dict:
    """The 95 % interval of every group's correlation with the target, from Fisher's z and
    the effective sample size of the two series' lag-1 autocorrelations
    (:mod:`dcfa.stats.interval`), lazy with the features (the same pass computes them)."""
    from dcfa.stats.interval import correlation_interval, effective_sample_size
    from dcfa.stats.interval import lag1_autocorrelation as lag1

    rho_y = float(lag1(np.asarray(target, dtype=np.float64).reshape(-1)))
    f = features.astype(np.float64)
    fc = f - f.mean(sample_dim)
    rho_x = (fc * fc.shift({sample_dim: 1})).sum(sample_dim) / (fc * fc).sum(sample_dim)
    n_eff = effective_sample_size(f.count(sample_dim), rho_x, rho_y)
    low, high = correlation_interval(corr, n_eff)
    how = (
        "Fisher's z with the effective sample size n (1 - a b) / (1 + a b) of the group's and "
        "the target's lag-1 autocorrelations a and b"
    )
    out = {
        "group_target_corr_low": (low, "lower end of the 95 % interval of group_target_corr"),
        "group_target_corr_high": (high, "upper end of the 95 % interval of group_target_corr"),
        "group_target_n_eff": (n_eff, "effective number of independent samples"),
    }
    made = {}
    for name, (value, long_name) in out.items():
        value = value.drop_vars([c for c in value.coords if c != "group"])
        value.attrs = {"long_name": long_name, "description": how}
        made[name] = value
    return made


def group_units(region: xr.DataArray, n_groups: int, units: dict, reduction) -> np.ndarray | None:
    """The units of each group's aggregate: those of its variable (``units``: variable name to
    units; one entry for a single variable), as the reduction makes them (``"1"`` when it
    standardises, squared for squared inputs: ``reduction.output_units``); ``""`` for a group
    whose variable has none. None when no variable has units."""
    if not any(units.values()):
        return None
    if "variable" in region.dims:
        per = [units.get(str(b.get("variable"))) for b in group_blocks(region, n_groups)]
    else:
        per = [next(iter(units.values()))] * n_groups
    return np.array([reduction.output_units(u) for u in per], dtype=object)


def group_blocks(region: xr.DataArray, n_groups: int) -> list[dict]:
    """Each group's block: the value of every block dim of ``region`` (variable, window, lag:
    :data:`dcfa.stacking.BLOCK_DIMS`) at its cells, which share them ({} for a group with no
    cell, or a grid without such dims). One sort of the labels, not a scan per group."""
    from dcfa.stacking import BLOCK_DIMS

    blocks = [d for d in BLOCK_DIMS if d in region.dims]
    out: list[dict] = [{} for _ in range(n_groups)]
    if not blocks:
        return out
    labels = region.transpose(*blocks, ...).values
    ids, first = np.unique(labels.ravel(), return_index=True)  # a cell of each group
    use = (ids >= 0) & (ids < n_groups)
    at = np.unravel_index(first[use], labels.shape)
    values = [region[d].values[at[k]].tolist() for k, d in enumerate(blocks)]
    for g, *block in zip(ids[use].astype(np.int64).tolist(), *values, strict=True):
        out[g] = dict(zip(blocks, block, strict=True))
    return out


def group_place(centres) -> tuple:
    """Each group's centre latitude and longitude (None where absent) from ``centres``, a
    dict or a result Dataset: :func:`group_centres` names them after the grid's coordinates,
    ``group_lat``/``group_lon`` or ``group_latitude``/``group_longitude``."""

    def first(*names):
        return next((centres[n] for n in names if n in centres), None)

    return first("group_lat", "group_latitude"), first("group_lon", "group_longitude")


def _lat_lon_names(region: xr.DataArray) -> dict:
    """``{"lat": name, "lon": name}`` of the latitude and longitude coordinates of ``region``
    along its dims, those it has."""
    from dcfa.geo import is_longitude

    names: dict = {}
    for coord in ("lat", "latitude", "lon", "longitude"):
        if coord in region.coords and set(region[coord].dims) <= set(region.dims):
            names.setdefault("lon" if is_longitude(coord, region[coord].attrs) else "lat", coord)
    return names


def group_extent(region: xr.DataArray, g: int) -> str | None:
    """Where group ``g``'s cells lie on the map ``region``: ``"5°S-3°N, 170°E-170°W"``
    (:func:`dcfa.geo.extent_text`); None without latitude and longitude coordinates, or
    without a cell of ``g``."""
    from dcfa.geo import extent_text

    names = _lat_lon_names(region)
    cells = (region == g).values
    if len(names) < 2 or not cells.any():
        return None
    lat, lon = (region[names[k]].broadcast_like(region).values[cells] for k in ("lat", "lon"))
    return extent_text(lat, lon)


def group_names(region: xr.DataArray, centres: dict, n_groups: int) -> np.ndarray:
    """A readable name per group: its block (the variable, window and lag its cells share,
    where the input has several) and its centre, e.g. ``2N_120W``, ``sst_2N_120W`` or
    ``u10_w3_lag1_0N_160E``; ``g3`` parts where the grid has neither; a repeated name gets
    ``_2``, ``_3``... in group order.

    A group whose centre lies outside it (a ring or a basin-wide background around another
    region: its centre is in the region it surrounds, whose name it would nearly take) is
    named by its extent instead, ``30S-30N_35E-75W`` (:func:`outside_centre`)."""
    lat, lon = group_place(centres)
    outside = outside_centre(region, lat, lon, n_groups)
    names, seen = [], {}
    for g, block in enumerate(group_blocks(region, n_groups)):
        parts = [str(v) if d == "variable" else f"{d[0]}{v}" for d, v in block.items()]
        if outside is not None and outside[g] is not None:
            parts.append(outside[g])
        elif lat is not None and lon is not None and np.isfinite(lat[g]) and np.isfinite(lon[g]):
            parts.append(_degrees(float(lat[g]), "lat"))
            parts.append(_degrees(float(lon[g]), "lon"))
        else:
            parts.append(f"g{g}")
        name = "_".join(parts)
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return np.array(names, dtype=object)  # variable-length: a Zarr v3 type with a spec


def _degrees(value: float, axis: str) -> str:
    """Whole degrees of a latitude (``axis="lat"``) or a longitude of any convention
    (``"lon"``) with their hemisphere, as names write them: ``2N``, ``129W``, ``0N``
    (:func:`dcfa.geo.whole_degrees`, as the summary's extents round them)."""
    from dcfa.geo import whole_degrees

    whole = whole_degrees(value, axis)
    positive, negative = ("N", "S") if axis == "lat" else ("E", "W")
    return f"{abs(whole)}{negative if whole < 0 else positive}"


def outside_centre(region: xr.DataArray, lat, lon, n_groups: int) -> list | None:
    """Per group, its extent as a name part (``30S-30N_35E-75W``) when its centre lies
    outside it, farther than one and a half grid steps from its nearest cell; else None.
    None for a grid without latitude and longitude coordinates."""
    from dcfa.geo import longitude_arc

    if lat is None or lon is None:
        return None
    names = _lat_lon_names(region)
    if len(names) < 2:
        return None
    labels = region.values.ravel()
    cell_lat, cell_lon = (
        np.asarray(region[names[k]].broadcast_like(region).values, dtype=np.float64).ravel()
        for k in ("lat", "lon")
    )
    cy, cx = np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
    used = (labels >= 0) & (labels < n_groups) & np.isfinite(cell_lat) & np.isfinite(cell_lon)
    # a group without a centre (cells evenly all round the globe) keeps its g-name
    known = np.isfinite(cy) & np.isfinite(cx)
    used[used] = known[labels[used].astype(np.int64)]
    g = labels[used].astype(np.int64)
    # degrees on the map: longitude differences wrapped and shrunk by the centre's latitude
    dy = cell_lat[used] - cy[g]
    dx = ((cell_lon[used] - cx[g] + 180.0) % 360.0 - 180.0) * np.cos(np.radians(cy[g]))
    nearest = np.full(n_groups, np.inf)
    np.minimum.at(nearest, g, np.hypot(dx, dy))
    steps = [np.diff(np.unique(c[used])) for c in (cell_lat, cell_lon)]
    step = max((float(np.median(s)) for s in steps if s.size), default=0.0)
    out: list = [None] * n_groups
    for k in np.flatnonzero(np.isfinite(nearest) & (nearest > 1.5 * step) & (step > 0)):
        mine = g == k
        y = cell_lat[used][mine]
        west, east = longitude_arc(cell_lon[used][mine])
        lats = [_degrees(float(y.min()), "lat"), _degrees(float(y.max()), "lat")]
        lons = [_degrees(v, "lon") for v in (west, east)]
        out[int(k)] = "_".join(a if a == b else f"{a}-{b}" for a, b in (lats, lons))
    return out


def group_centres(region: xr.DataArray, n_groups: int) -> dict:
    """Centre latitude/longitude of each group's cells, when the grid has such coordinates.

    Latitude: the arithmetic mean of the cells' latitudes (unweighted). Longitude: their
    circular mean (:func:`dcfa.geo.group_circular_mean`), in the convention of the grid's
    longitudes (-180..180 if any is negative, else 0..360), so a region across the dateline
    or Greenwich is centred where it is; NaN when undefined (cells evenly all round the globe).
    """
    from dcfa.geo import group_circular_mean, group_mean, is_longitude, longitude_convention

    labels = region.values
    out = {}
    for coord in ("lat", "latitude", "lon", "longitude"):
        if coord in region.coords and set(region[coord].dims) <= set(region.dims):
            values = region[coord].broadcast_like(region).values
            if is_longitude(coord, region[coord].attrs):
                lower = longitude_convention(region[coord].values)
                out[f"group_{coord}"] = group_circular_mean(labels, values, n_groups, lower=lower)
                continue
            out[f"group_{coord}"] = group_mean(labels, values, n_groups)
    return out


def write_result(
    path: str | os.PathLike,
    dataset: xr.Dataset,
    *,
    moments: Moments | GridMoments | ColumnMoments | None = None,
    overwrite: bool = False,
    storage_options: dict | None = None,
    before_publish: Callable[..., None] | None = None,
) -> Path | str:
    """Write a result Dataset (and its moments, as a ``moments`` sub-group) atomically.

    Everything goes to a temporary store next to ``path`` that is renamed into place once
    complete (:func:`dcfa.storage.store.atomic_store`), so an interrupted write never leaves a store
    that looks finished; on object storage (a URL) the store is complete once its root
    metadata, written last, exists (:mod:`dcfa.storage.objectstore`). ``overwrite`` replaces only an
    earlier dcfa result, never a store or file that dcfa did not write. ``before_publish``, a
    callable, runs once everything is written (the last read of the inputs done) and before
    the store is published: an error it raises leaves ``path`` as it was.
    """
    from dcfa.storage.store import atomic_store

    path = location(path)
    so = {"storage_options": storage_options} if isinstance(path, str) and storage_options else {}
    dataset = stamped(uniform_chunks(dataset), "result")
    with atomic_store(
        path, overwrite=overwrite, key="output.store", kinds=("result",), **so
    ) as tmp:
        write_into(dataset, tmp, **so)
        if moments is not None:
            _save_moments_into(moments, tmp, storage_options)
        if before_publish is not None:
            before_publish()
    return path


def write_dataset(ds: xr.Dataset, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write a Dataset to a Zarr store, atomically (:func:`dcfa.storage.store.atomic_store`:
    ``overwrite`` replaces only a store dcfa wrote; :func:`write_into`)."""
    from dcfa.storage.store import atomic_store

    with atomic_store(path, overwrite=overwrite) as tmp:
        write_into(ds, tmp)
    return Path(path)


def write_into(ds: xr.Dataset, store, **kwargs) -> None:
    """Write ``ds`` into ``store``, the temporary store of an atomic write. Its Dask
    variables are written in one :func:`dcfa._compute.compute`, which a failure leaves only
    once no chunk is still being written; a Dataset in memory is written here, on the driver
    (no round trip to a cluster)."""
    from dcfa._compute import compute

    written = to_zarr(ds, store, mode="a", compute=False, **kwargs)
    if any(v.chunks is not None for v in ds.variables.values()):
        compute(written)
    else:  # only the metadata is left to finalise
        written.compute(scheduler="sync")


def stamped(ds: xr.Dataset, kind: str) -> xr.Dataset:
    """``ds`` with the attributes that say which dcfa store it is, and when it was written."""
    ds.attrs = {
        **ds.attrs,
        "dcfa_kind": kind,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    return ds


def _save_moments_into(moments, store, storage_options) -> None:
    """The moments as a ``moments`` sub-group of ``store`` (local, or uploaded to a URL)."""
    if not isinstance(store, str):
        moments.save(store / "moments")
        return
    import tempfile

    from dcfa.storage.objectstore import url_fs

    fs, key = url_fs(store, storage_options)
    with tempfile.TemporaryDirectory() as local:
        moments.save(Path(local) / "moments")
        fs.put(str(Path(local) / "moments"), f"{key}/moments", recursive=True)


def to_zarr(ds: xr.Dataset, path, **kwargs):
    """``ds.to_zarr`` as dcfa writes stores: Zarr format 3 with consolidated metadata (so
    readers open them quickly and without xarray's warning), in dcfa's own encoding.

    The encoding a variable carries from its source (a format 2 archive's Blosc compressor,
    its chunks, int16 packing) is dropped; only an integer variable's ``_FillValue`` is kept.
    A coordinate that is no index (a forecast's ``target_time``) is stored in the chunks of
    the Dask variables along its dims, so that the store opens with one chunking per dim.
    """
    encoding = {
        name: {"_FillValue": var.encoding["_FillValue"]}
        for name, var in ds.variables.items()
        if "_FillValue" in var.encoding and var.dtype.kind in "iu"
    }
    sizes = {
        d: c[0] for var in ds.data_vars.values() if var.chunks for d, c in var.chunksizes.items()
    }
    for name, c in ds.coords.items():
        if name not in ds.indexes and c.dims and all(d in sizes for d in c.dims):
            encoding.setdefault(name, {})["chunks"] = tuple(sizes[d] for d in c.dims)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Consolidated metadata is currently not part")
        return ds.drop_encoding().to_zarr(
            path, zarr_format=3, consolidated=True, encoding=encoding, **kwargs
        )


def uniform_chunks(ds: xr.Dataset) -> xr.Dataset:
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
    from dcfa._version import __version__

    return {
        "dcfa_version": __version__,
        "method": method,
        "parameters": json.dumps(params, default=str, sort_keys=True),
        "input_store": str(input_store),
        "target": str(target),
        "n_samples_used": int(n_common),
        "config": json.dumps(config_raw, default=str, sort_keys=True),
    }

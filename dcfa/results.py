"""Apply a fitted result to new data: :func:`load_result` and ``dcfa apply``.

A result store written by ``dcfa fit`` holds everything needed to compute its region series
for other months: the preprocessing (``climatology``, ``spread``), every cell's place in the
reduction (``cell_index``, ``cell_scale``, ``cell_centre``, ``region``), the job's
configuration (variables, sample dim, method parameters) and, with a GBMAP, its learners and
input standardisation. :func:`load_result` turns that into a :class:`FittedResult` whose
``transform`` runs the job's own steps lazily (the job's trailing windows and lags,
``dcfa._job._time_scales``, then :func:`dcfa.io.plan_chunks`,
:func:`dcfa.io.apply_preprocessing`, the job's stacking of the cells, and
:func:`dcfa._aggregate.aggregate` with the stored weights), so a result applied to its own
training months gives its ``features`` exactly. :func:`apply_result` (``dcfa apply``) checks
an archive against the result (grid, variables, calendar months of the climatology) and
writes the series, and the GBMAP embedding and prediction, to a new store, atomically, never
over, into or around its inputs (:mod:`dcfa._store`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time as _time
from dataclasses import dataclass, field
from pathlib import Path

import dask.array as da
import numpy as np
import xarray as xr

from dcfa import io

__all__ = ["FittedResult", "load_result", "apply_result"]

# how errors name the arguments: the Python API's parameters, or the command line's
PYTHON_NAMES = {
    "result": "result",
    "archive": "archive",
    "output": "output",
    "time": "time",
    "overwrite": "pass overwrite=True",
}
CLI_NAMES = {
    "result": "RESULT",
    "archive": "ARCHIVE",
    "output": "--output",
    "time": "--time",
    "overwrite": "pass --overwrite",
}
# the [input] keys whose effect ``apply`` reproduces; any other key set to a value that is not
# its default (a feature of a later dcfa) makes the result one ``apply`` cannot reproduce
_INPUT_KEYS = frozenset(
    {
        "store",
        "variables",
        "sample_dim",
        "time",
        "anomalies",
        "standardize",
        "storage_options",
        "windows",
        "lags",
        "aggregate",
    }
)
_TIME_SCALE_KEYS = ("windows", "lags", "aggregate")  # what ``_time_scales`` reads of [input]
_APPLIED = "region series"  # the dcfa_kind of the stores apply writes


@dataclass
class FittedResult:
    """A fitted result, ready to be applied to new months (from :func:`load_result`).

    Attributes
    ----------
    path : str
        The result store.
    variables : list of str
        The input variables, in the job's order.
    sample_dim : str
    region : xarray.DataArray of int on the grid
        Every cell's group, -1 where a cell is not used; its dims and coordinates are the grid
        a field must have.
    preprocessing : dcfa.io.Preprocessing
        The climatology and spread the features are computed with.
    method : str
        The CFA estimator (``"LinCFA"``, ...); ``estimator`` is it, unfitted, with the job's
        parameters.
    gbmap : GBMAPRegressor, GBMAPClassifier or None
        The fitted GBMAP of the result (``transform``, ``predict``, ...), when the result
        holds one with everything needed to apply it.
    attrs : dict
        The result's attributes (provenance).
    time_scales : dict
        The job's ``input.windows``, ``input.lags`` and ``input.aggregate``: ``transform``
        computes them (``dcfa._job._time_scales``) before anything else, so a field is given
        as the archive stores it and the result's ``window`` / ``lag`` dims are made here.
    lead : int
        The job's ``target.lead``: the features (and the GBMAP's prediction) of sample ``t``
        predict the target at ``t + lead`` samples.
    """

    path: str
    variables: list
    sample_dim: str
    region: xr.DataArray
    preprocessing: io.Preprocessing
    method: str
    estimator: object
    keep: np.ndarray  # flat grid index of every input of the reduction, in its order
    labels: np.ndarray  # their groups
    scale: np.ndarray  # s_k
    centre: np.ndarray  # mu_k
    aggregation: str
    weight: np.ndarray | None = None  # w_k of weighted means (method.params.weights), or None
    gbmap: object = None
    gbmap_missing: str | None = None  # why a stored GBMAP cannot be applied
    attrs: dict = field(default_factory=dict, repr=False)
    time_scales: dict = field(default_factory=dict)
    lead: int = 0

    @property
    def n_groups(self) -> int:
        return int(self.labels.max()) + 1 if (self.labels >= 0).any() else 0

    @property
    def grid(self) -> tuple:
        """The dims of the reduction's grid (with ``window`` / ``lag`` when the job made them)."""
        return tuple(self.region.dims)

    @property
    def windows(self) -> list:
        return list(self.time_scales.get("windows", [1]))

    @property
    def lags(self) -> list:
        return list(self.time_scales.get("lags", [0]))

    @property
    def history(self) -> int:
        """Earlier samples the first computed one needs: ``max(windows) - 1 + max(lags)``."""
        return max(self.windows) - 1 + max(self.lags)

    @property
    def added_dims(self) -> tuple:
        """The grid dims the job's windows and lags add to the archive's."""
        return (("window",) if self.windows != [1] else ()) + (("lag",) if self.lags != [0] else ())

    @property
    def archive_grid(self) -> tuple:
        """The grid dims a field must have: the result's, without ``window`` / ``lag``."""
        return tuple(d for d in self.grid if d not in self.added_dims)

    # -- the region series -------------------------------------------------------------------

    def transform(self, field, *, time=None, _names: dict | None = None) -> xr.DataArray:
        """The region series of ``field``: a lazy ``(sample_dim, group)`` float64 DataArray.

        ``field`` is a Dataset holding the result's variables, or a DataArray as
        :func:`dcfa.io.open_archive` gives (the variables along a ``variable`` dim when there
        are several), on the result's grid (without the ``window`` / ``lag`` dims: those are
        made here). The job's steps are applied in its order: its trailing windows and lags
        (``dcfa._job._time_scales``; the first ``history`` samples, whose windows or lags
        reach before the field's start, are dropped), chunks planned
        (:func:`dcfa.io.plan_chunks`, Dask fields), the stored climatology and spread
        (:func:`dcfa.io.apply_preprocessing`), the cells taken in the reduction's order, and
        :func:`dcfa._aggregate.aggregate` with the stored weights. Nothing is computed for a
        Dask-backed field. The result store keeps these values as float32.

        ``time = (start, stop)`` keeps the samples between these labels (inclusive), selected
        after the windows and lags are computed: the first selected samples take their windows
        and lags from the samples before them, which the field must hold (``history`` of
        them; a ValueError names ``time`` otherwise).

        A field opened as the job opens its input (:func:`dcfa.io.open_archive`, or
        ``xr.open_zarr(..., chunks={})``) gives the stored features bit for bit. Other chunks
        of the grid (or an in-memory field) sum each group's cells in other blocks: the same
        values up to float64 rounding, which the float32 features almost always hide.
        """
        names = _names or {**PYTHON_NAMES, "archive": "field"}
        field = self._checked_field(field, names, time)
        return self._series(field)

    def embedding(self, field) -> xr.DataArray:
        """The GBMAP embedding ``(sample_dim, boost)`` of ``field`` (lazy for Dask)."""
        return self._require_gbmap().transform(self.transform(field)).rename("embedding")

    def predict(self, field) -> xr.DataArray:
        """The GBMAP prediction of ``field``: the target (regressor) or the class (classifier)."""
        return self._require_gbmap().predict(self.transform(field))

    def _require_gbmap(self):
        if self.gbmap is None:
            why = self.gbmap_missing or "the result holds no GBMAP"
            raise ValueError(f"result {self.path!r}: {why}")
        return self.gbmap

    def _series(self, field: xr.DataArray) -> xr.DataArray:
        from dcfa._aggregate import aggregate
        from dcfa._base import apply_inputs
        from dcfa._job import _cells_with_data
        from dcfa.stacking import stack_features

        dim = self.sample_dim
        if isinstance(field.data, da.Array):
            field = io.plan_chunks(field, sample_dim=dim)
        prepared = io.apply_preprocessing(field, self.preprocessing, sample_dim=dim)
        estimator = self.estimator
        if "execution" in self.attrs:  # the execution the job ran
            grid_run = self.attrs["execution"] == "neighbors"
        else:  # results written before dcfa recorded it
            grid_run = estimator.grid_pass_request(field) is not None
        if grid_run:
            # the job's grid execution: the reduction read every cell of the grid, in order
            if not np.array_equal(self.keep, np.arange(self.region.size)):
                raise ValueError(
                    f"result {self.path!r}: cell_index does not cover the grid in order, as "
                    f"mode={estimator.get_params().get('mode')!r} has it"
                )
            cells = prepared
        else:  # the cells the reduction used, in its order
            used = self.region.copy(data=np.zeros(self.region.shape, dtype=bool))
            used.values.flat[self.keep] = True
            cells, _ = _cells_with_data(prepared, used, list(self.grid), self.keep)
        data, _ = stack_features(cells, dim)
        params = estimator.get_params()
        Xt = aggregate(
            apply_inputs(data, params.get("inputs", "identity")),
            self.labels,
            self.scale,
            self.centre,
            how=self.aggregation,
            nan_aware=params.get("missing", "exclude") == "pairwise",
            weights=self.weight,
        )
        coords = {k: c.variable for k, c in field.coords.items() if set(c.dims) == {dim}}
        return xr.DataArray(
            Xt,
            dims=(dim, "group"),
            coords={**coords, "group": np.arange(self.n_groups)},
            name="features",
            attrs={"long_name": f"{self.method} group aggregates"},
        )

    # -- checks ------------------------------------------------------------------------------

    def _checked_field(self, field, names: dict, time=None) -> xr.DataArray:
        """``field`` as one DataArray ``(sample_dim, *grid)``, checked against the result, with
        the job's windows and lags, the samples of ``time``."""
        key = names["archive"]
        dim = self.sample_dim
        if isinstance(field, xr.Dataset):
            missing = [v for v in self.variables if v not in field.data_vars]
            if missing:
                raise ValueError(
                    f"{key}: variable(s) {missing} of the result are not in it (it has "
                    f"{sorted(map(str, field.data_vars))})"
                )
            if len(self.variables) == 1:
                field = field[self.variables[0]]
            else:
                for v in self.variables:
                    if dim not in field[v].dims:
                        raise ValueError(
                            f"{key}: {v!r} has dims {field[v].dims}, without the sample dim {dim!r}"
                        )
                field = field[self.variables].to_array("variable")
        if not isinstance(field, xr.DataArray):
            raise TypeError(
                f"{key}: expected an xarray Dataset or DataArray, got {type(field).__name__}"
            )
        if dim not in field.dims:
            raise ValueError(f"{key}: dims {field.dims} lack the result's sample dim {dim!r}")
        grid = tuple(d for d in field.dims if d != dim)
        expect = self.archive_grid  # the windows and lags are made here, not given
        if set(grid) != set(expect):
            hint = ""
            if self.added_dims and set(grid) == set(self.grid):
                hint = (
                    f"; give it without the {list(self.added_dims)} dims, as the archive stores "
                    "it: the result's windows and lags are computed from it"
                )
            raise ValueError(f"{key}: its grid dims {grid} differ from the result's {expect}{hint}")
        for d in expect:
            if field.sizes[d] != self.region.sizes[d]:
                raise ValueError(
                    f"{key}: dim {d!r} has {field.sizes[d]} cells, the result's grid "
                    f"{self.region.sizes[d]}"
                )
        self._check_coords(field, key, archive=True)
        field = field.transpose(dim, *expect)
        if field.dtype.kind not in "iuf":
            raise ValueError(f"{key}: holds {field.dtype} values; expected numbers")
        if field.sizes[dim] == 0:
            raise ValueError(f"{key}: no samples")
        field = self._time_scaled(field, names, time)
        self._check_months(field[dim], names)
        return field

    def _check_coords(self, field: xr.DataArray, key: str, *, archive: bool) -> None:
        """The result's grid coordinates in ``field``: those of the archive's grid
        (``archive``), or those along the dims the windows and lags add."""
        added = set(self.added_dims)
        for name, coord in self.region.coords.items():
            if bool(added & set(coord.dims)) == archive:
                continue
            if name not in field.coords:
                raise ValueError(f"{key}: it has no coordinate {name!r}; the result's grid has one")
            theirs = field[name]
            if set(theirs.dims) != set(coord.dims) or not _same_values(
                coord.values, theirs.transpose(*coord.dims).values
            ):
                raise ValueError(
                    f"{key}: coordinate {name!r} differs from the result's grid "
                    f"({_first_difference(coord, field[name])})"
                )

    def _time_scaled(self, field: xr.DataArray, names: dict, time) -> xr.DataArray:
        """The job's windows and lags of ``field`` (``dcfa._job._time_scales``), then the
        samples of ``time``: each selected sample's windows and lags from the ones before."""
        from dcfa._job import _time_scales

        key, dim, need = names["archive"], self.sample_dim, self.history
        n = field.sizes[dim]
        what = " and ".join(
            f"input.{k} {v}"
            for k, v, default in (("windows", self.windows, [1]), ("lags", self.lags, [0]))
            if v != default
        )
        if n <= need:
            raise ValueError(
                f"{key}: holds {n} sample(s) along {dim!r}; the result's {what} need {need} "
                f"earlier sample(s) before the first one computed, so at least {need + 1}"
            )
        if time is not None:
            if isinstance(time, str | bytes) or len(time) != 2:
                got = time if isinstance(time, str | bytes) else list(time)
                raise ValueError(f"{names['time']}: expected START END, got {got!r}")
            where = str(field.attrs.get("source", key))
            position = xr.DataArray(np.arange(n), dims=dim, coords={dim: field[dim].variable})
            chosen = io.select_time(position, time, sample_dim=dim, key=names["time"], where=where)
            first, last = int(chosen.values[0]), int(chosen.values[-1])
            if first < need:
                raise ValueError(
                    f"{names['time']}: its first sample, {_date(field[dim].values[first])}, "
                    f"has {first} earlier sample(s) in {key}; the result's {what} need {need}: "
                    f"start {names['time']} at {_date(field[dim].values[need])} or later, or "
                    f"give {key} with {need - first} earlier sample(s)"
                )
            # exactly the selected samples, and the ones their windows and lags reach back to
            field = field.isel({dim: slice(first - need, last + 1)})
        if not self.added_dims:
            return field
        inp = {
            "sample_dim": dim,
            "variables": self.variables,
            "windows": self.windows,
            "lags": self.lags,
            "aggregate": self.time_scales.get("aggregate", "mean"),
        }
        field = _time_scales(field, inp)
        self._check_coords(field, key, archive=False)
        return field.transpose(dim, *self.grid)

    def _check_months(self, coord: xr.DataArray, names: dict) -> None:
        clim = self.preprocessing.climatology
        if clim is None:
            return
        key = names["archive"]
        if io._calendar(coord) is None:
            raise ValueError(
                f"{key}: its sample coordinate {coord.name!r} holds {coord.dtype} values, not "
                "dates; the result's monthly climatology needs dates"
            )
        months = np.unique(np.asarray(coord.dt.month.values, dtype=np.int64))
        known = set(np.asarray(clim["month"].values, dtype=np.int64).tolist())
        outside = [int(m) for m in months if int(m) not in known]
        if outside:
            first = coord.isel({coord.dims[0]: np.flatnonzero(coord.dt.month.isin(outside))[:1]})
            raise ValueError(
                f"{key}: calendar month(s) {outside} of its samples (first "
                f"{_date(first.values[0])}) are not in the result's climatology, which has "
                f"months {sorted(known)}; select other samples (with {names['time']})"
            )


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "f" or b.dtype.kind in "f":
        try:
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
        except (TypeError, ValueError):
            return False
        span = float(np.nanmax(np.abs(a64))) if a64.size else 0.0
        # equal up to float32 storage of the same coordinates
        return bool(np.allclose(a64, b64, rtol=1e-6, atol=1e-6 * max(span, 1.0), equal_nan=True))
    return bool(np.array_equal(a, b))


def _first_difference(ours: xr.DataArray, theirs: xr.DataArray) -> str:
    a, b = np.asarray(ours.values), np.asarray(theirs.values)
    if set(ours.dims) != set(theirs.dims) or a.shape != np.asarray(b).shape:
        return f"result {dict(ours.sizes)}, here {dict(theirs.sizes)}"
    b = theirs.transpose(*ours.dims).values
    try:
        where = np.argwhere(~np.isclose(a.astype(np.float64), b.astype(np.float64)))
    except (TypeError, ValueError):
        where = np.argwhere(a != b)
    if not where.size:
        return "the values differ"
    i = tuple(int(k) for k in where[0])
    at = ", ".join(f"{d}={k}" for d, k in zip(ours.dims, i, strict=True))
    return f"at {at}: result {a[i]}, here {b[i]}"


def _date(value) -> str:
    text = str(value)
    return text[:10] if len(text) >= 10 else text


############################################################################################
# loading


def load_result(path, storage_options: dict | None = None, *, _key: str = "result"):
    """The fitted result of ``dcfa fit`` at ``path``, ready to apply to other months.

    Parameters
    ----------
    path : str or path-like
        A result store (local, or an fsspec URL with ``storage_options``).

    Returns
    -------
    FittedResult
        ``transform(field)`` gives the region series of a field on the result's grid (lazy
        for Dask), ``embedding`` / ``predict`` the GBMAP's (when the result holds one);
        ``gbmap`` is the fitted GBMAP estimator.
    """
    from dcfa._store import incomplete_reason

    loc = io._location(path)
    key = _key
    if not io._exists(loc, storage_options):
        raise FileNotFoundError(f"{key}: no Zarr store at {str(loc)!r}")
    reason = incomplete_reason(loc, storage_options)
    if reason is not None:
        raise ValueError(f"{key}: {reason}")
    so = {"storage_options": storage_options} if storage_options and isinstance(loc, str) else {}
    ds = io._open_zarr(loc, key, **so)
    if ds.attrs.get("dcfa_kind") != "result" or "region" not in ds:
        raise ValueError(
            f"{key}: {str(loc)!r} is not a result of dcfa fit (no dcfa_kind = 'result' "
            "attribute and region map)"
        )
    needed = ["cell_index", "cell_scale", "cell_centre", "has_data"]
    absent = [v for v in needed if v not in ds]
    if absent or "config" not in ds.attrs:
        raise ValueError(
            f"{key}: {str(loc)!r} lacks {absent or ['its configuration']}, which applying it "
            "needs (written by an earlier dcfa); run the job again with this version"
        )
    config = _config_of(ds, key, loc)
    inp = config.input
    dim = inp["sample_dim"]
    optional = ("region", "climatology", "spread", "cell_weight")
    small = ds[[v for v in (*needed, *optional) if v in ds]].load()

    index = small["cell_index"].values.astype(np.int64).ravel()
    used = np.flatnonzero(index >= 0)
    keep = np.empty(used.size, dtype=np.int64)
    if not np.array_equal(np.sort(index[used]), np.arange(used.size)):
        raise ValueError(f"{key}: {str(loc)!r}: cell_index is not a permutation of its cells")
    keep[index[used]] = used
    region_values = small["region"].values
    if region_values.dtype.kind == "f":  # decoded with its _FillValue -1 as NaN
        region_values = np.where(np.isnan(region_values), -1, region_values)
    region_values = region_values.astype(np.int64)
    region = small["region"].copy(data=region_values)
    region.attrs, region.encoding = {}, {}
    labels = region_values.ravel()[keep]
    scale = small["cell_scale"].values.astype(np.float64).ravel()[keep]
    centre = small["cell_centre"].values.astype(np.float64).ravel()[keep]
    weight = (  # method.params.weights: the groups' weighted means
        small["cell_weight"].values.astype(np.float64).ravel()[keep]
        if "cell_weight" in small
        else None
    )
    prep = io.Preprocessing(
        has_data=small["has_data"].astype(bool),
        climatology=small["climatology"] if "climatology" in small else None,
        std=small["spread"] if "spread" in small else None,
    )
    from dcfa._job import build_estimator

    estimator = build_estimator(config.method)
    estimator.set_params(sample_dim=dim)
    aggregation = ds["cell_index"].attrs.get(
        "aggregation", estimator.get_params().get("aggregation", "mean")
    )
    gbmap, why = _gbmap_of(ds, dim)
    return FittedResult(
        path=str(loc),
        variables=list(inp["variables"]),
        sample_dim=dim,
        region=region,
        preprocessing=prep,
        method=str(ds.attrs.get("method", type(estimator).__name__)),
        estimator=estimator,
        keep=keep,
        labels=labels,
        scale=scale,
        centre=centre,
        weight=weight,
        aggregation=str(aggregation),
        gbmap=gbmap,
        gbmap_missing=why,
        attrs=dict(ds.attrs),
        time_scales={k: inp[k] for k in _TIME_SCALE_KEYS},
        lead=int(config.target["lead"]),
    )


def _config_of(ds: xr.Dataset, key: str, loc):
    """The job's configuration, every default filled in (:func:`dcfa.config.load_config`)."""
    from dcfa.config import _SCHEMA, ConfigError, load_config

    try:
        raw = json.loads(ds.attrs["config"])
        config = load_config(base=raw)
    except (ValueError, TypeError, ConfigError) as exc:
        raise ValueError(
            f"{key}: the job configuration stored in {str(loc)!r} cannot be read by this dcfa "
            f"({exc})"
        ) from None
    defaults = _SCHEMA["input"]
    other = sorted(
        k
        for k, v in config.input.items()
        if k not in _INPUT_KEYS and v != (defaults[k][1] if k in defaults else None)
    )
    if other:
        raise ValueError(
            f"{key}: {str(loc)!r} was fitted with input key(s) {other}, which dcfa apply "
            "does not reproduce yet"
        )
    return config


def _gbmap_of(ds: xr.Dataset, sample_dim: str):
    """The result's fitted GBMAP (None without one) and, when it cannot be rebuilt, why."""
    if "gbmap_coef" not in ds:
        return None, None
    need = ["gbmap_bias", "gbmap_shift", "gbmap_centre", "gbmap_scale"]
    if any(v not in ds for v in need) or "gbmap_fitted" not in ds.attrs:
        return None, (
            "its GBMAP was written by an earlier dcfa without its input standardisation and "
            "biases (gbmap_bias, gbmap_shift, gbmap_centre, gbmap_scale); run the job again "
            "to apply it"
        )
    from dcfa import GBMAPClassifier, GBMAPRegressor
    from dcfa.gbmap._losses import Standardizer

    info = json.loads(ds.attrs["gbmap_fitted"])
    cls = {"GBMAPRegressor": GBMAPRegressor, "GBMAPClassifier": GBMAPClassifier}.get(
        info.get("estimator")
    )
    f0 = info.get("f0")
    if cls is None or isinstance(f0, str):
        what = f"an initial model f0 ({f0})" if isinstance(f0, str) else info.get("estimator")
        return None, f"its GBMAP ({what}) cannot be rebuilt from the store"
    params = json.loads(ds.attrs.get("gbmap", "{}"))
    allowed = set(cls().get_params()) - {"checkpoint", "f0", "sample_dim"}
    model = cls(**{k: v for k, v in params.items() if k in allowed})
    model.set_params(sample_dim=sample_dim, f0=f0)
    arrays = {v: ds[v].values.astype(np.float64) for v in ("gbmap_coef", *need)}
    arrays["gbmap_intercept"] = ds["gbmap_intercept"].values.astype(np.float64)
    arrays["gbmap_sign"] = ds["gbmap_sign"].values.astype(np.float64)
    standardizer = Standardizer(
        arrays["gbmap_shift"], arrays["gbmap_centre"], arrays["gbmap_scale"]
    )
    # the attributes GBMAP's fit sets that transform and predict read
    model._activation = info.get("activation", "softplus")
    model.n_features_in_ = int(arrays["gbmap_coef"].shape[1])
    model._standardizer = standardizer
    model.mean_ = standardizer.mean
    model.scale_ = standardizer.scale
    model.coef_ = arrays["gbmap_coef"]
    model.bias_ = arrays["gbmap_bias"]
    model.intercept_ = arrays["gbmap_intercept"]
    model.signs_ = arrays["gbmap_sign"]
    model.f0_ = f0
    model._f0_method = None
    model._fit_feature_names = None
    if "y_mean" in info:
        model.y_mean_, model.y_scale_ = float(info["y_mean"]), float(info["y_scale"])
    if "classes" in info:
        model.classes_ = np.asarray(info["classes"])
    return model, None


############################################################################################
# applying


def apply_result(
    result,
    archive,
    output,
    *,
    overwrite: bool = False,
    time=None,
    storage_options: dict | None = None,
    echo=print,
    _names: dict | None = None,
):
    """Compute a fitted result's region series for the samples of ``archive``; write them.

    The archive is opened as the job opened its input (:func:`dcfa.io.open_archive` with the
    result's variables and sample dim) and checked before anything is computed: the same grid
    (dims, sizes, coordinate values), every variable, and, with anomalies, every calendar
    month of its samples in the result's climatology; a ValueError names what differs. The
    output must not be, contain or lie inside the result or the archive, and ``overwrite``
    replaces only an earlier output of ``apply_result``.

    Parameters
    ----------
    result : str, path-like or FittedResult
        A store written by ``dcfa fit`` (or :func:`load_result`'s value).
    archive : str or path-like
        A Zarr store with the result's variables on its grid: other months, or the training
        archive with months appended.
    output : str or path-like
        The store to write: ``features`` ``(sample_dim, group)`` float32, and with a GBMAP
        ``embedding`` ``(sample_dim, boost)`` float32 and ``prediction`` (with
        ``decision_function`` for a classifier); attributes name the result and the archive.
    time : (start, stop), optional
        Only the samples between these labels (inclusive), selected after the result's
        windows and lags are computed: the archive must hold the ``history`` samples before
        the first one (:meth:`FittedResult.transform`).
    storage_options : dict, optional
        fsspec options for URLs (the result, the archive and the output).

    Returns
    -------
    The output's path (a Path, or the URL).
    """
    from dcfa._store import check_apart, check_writable

    t0 = _time.perf_counter()
    names = _names or PYTHON_NAMES
    so = storage_options or None
    out = io._location(output)
    out = out if isinstance(out, str) else Path(os.path.abspath(out))
    result_path = result.path if isinstance(result, FittedResult) else os.fspath(result)
    check_apart(
        output,
        {names["result"]: result_path, names["archive"]: os.fspath(archive)},
        names["output"],
    )
    _check_replaceable(io._location(output), overwrite, names, so)  # named as given
    check_writable(out, names["output"], so)
    fitted = (
        result
        if isinstance(result, FittedResult)
        else load_result(result, so, _key=names["result"])
    )
    field = _open(fitted, archive, names, so)
    # the windows and lags first, then the samples of time (they reach back before it)
    features = fitted.transform(field, time=time, _names=names)
    dim = fitted.sample_dim
    data = {"features": features.astype("float32").rename(None)}
    data["features"].attrs = dict(features.attrs)
    gbmap = fitted.gbmap
    if gbmap is not None:
        embedding = gbmap.transform(features).rename(None)
        data["embedding"] = embedding.astype("float32")
        data["embedding"].attrs = {"long_name": "GBMAP embedding (f_1(x), ..., f_m(x))"}
        if hasattr(gbmap, "classes_"):
            data["decision_function"] = gbmap.decision_function(features).rename(None)
            data["decision_function"].attrs = {"long_name": "GBMAP score (logit)"}
        data["prediction"] = gbmap.predict(features).rename(None)
        data["prediction"].attrs = {"long_name": "GBMAP prediction of the target"}
    elif fitted.gbmap_missing:
        echo(f"      note: the GBMAP is not applied: {fitted.gbmap_missing}")
    span = io._span(features[dim], io._calendar(features[dim]), "exact")
    n_samples = int(features.sizes[dim])
    attrs = {
        "dcfa_version": _version(),
        "result": fitted.path,
        "archive": str(io._location(archive)),
        "method": fitted.method,
        "variables": json.dumps(fitted.variables),
        "samples": span,
        "n_samples": n_samples,
        "n_groups": fitted.n_groups,
        # the predictors of sample t; the target they (and the prediction) are for: t + lead
        "lead": fitted.lead,
        "windows": json.dumps(fitted.windows),
        "lags": json.dumps(fitted.lags),
    }
    if time is not None:
        attrs["time"] = json.dumps([str(t) for t in time])
    dataset = xr.Dataset(data, attrs=attrs)
    echo(
        f"[1/2] {fitted.path}: {fitted.method}, {fitted.n_groups} groups"
        + (f", GBMAP of {gbmap.coef_.shape[0]} learners" if gbmap is not None else "")
        + f"; {io._location(archive)}: {fitted.variables}, {span}"
        + (
            f"; windows {fitted.windows}, lags {fitted.lags} (each sample needs the "
            f"{fitted.history} before it)"
            if fitted.added_dims
            else ""
        )
        + (f"; lead {fitted.lead}: for the target at t + {fitted.lead}" if fitted.lead else "")
    )
    _write(out, dataset, overwrite, names, so)
    written = xr.open_zarr(out, **({"storage_options": so} if so and isinstance(out, str) else {}))
    gaps = int(written["features"].isnull().any("group").sum())
    echo(
        f"[2/2] {out}: {n_samples} samples x {fitted.n_groups} groups"
        + (f" ({gaps} samples with a missing group value)" if gaps else "")
        + f" in {_time.perf_counter() - t0:.1f} s"
    )
    return out


def _open(fitted: FittedResult, archive, names: dict, so) -> xr.DataArray:
    """The archive's variables as the job opens its input (every sample: ``time`` is
    selected after the windows and lags, by :meth:`FittedResult.transform`)."""
    key = names["archive"]
    loc = io._location(archive)
    if not io._exists(loc, so):
        raise FileNotFoundError(f"{key}: no Zarr store at {str(loc)!r}")
    so = so if isinstance(loc, str) else None  # fsspec options are for URLs
    ds = io._open_zarr(loc, key, chunks={}, **({"storage_options": so} if so else {}))
    missing = [v for v in fitted.variables if v not in ds.data_vars]
    if missing:
        raise ValueError(
            f"{key}: variable(s) {missing} of the result are not in {str(loc)!r} (it has "
            f"{sorted(map(str, ds.data_vars))})"
        )
    for v in fitted.variables:
        dims = tuple(ds[v].dims)
        if fitted.sample_dim not in dims:
            raise ValueError(
                f"{key}: {v!r} has dims {dims}, without the result's sample dim "
                f"{fitted.sample_dim!r}"
            )
        grid = tuple(d for d in dims if d != fitted.sample_dim)
        expect = fitted.archive_grid
        if len(fitted.variables) > 1:  # open_archive stacks them along "variable"
            expect = tuple(d for d in expect if d != "variable")
        if set(grid) != set(expect):
            raise ValueError(f"{key}: {v!r} has grid dims {grid}, the result's grid is {expect}")
    try:
        field = io.open_archive(
            loc, fitted.variables, sample_dim=fitted.sample_dim, storage_options=so
        )
    except ValueError as exc:  # messages of the job's keys, about this archive
        text = str(exc)
        for prefix in ("input.variables: ", "input.store: "):
            text = text.removeprefix(prefix)
        raise ValueError(f"{key}: {text}") from None
    return field


def _check_replaceable(out, overwrite: bool, names: dict, so) -> None:
    """A new path, or with ``overwrite`` an earlier output of apply (never a result, never a
    store or file that dcfa did not write, never through a symbolic link)."""
    from dcfa._store import OutputError, check_replaceable, dcfa_kind

    key = names["output"]
    link = isinstance(out, Path) and out.is_symlink()
    exists = io._exists(out, so) if isinstance(out, str) else out.exists()
    if exists and not link:
        if not overwrite:
            raise OutputError(
                f"{key}: {str(out)!r} exists; {names['overwrite']} to replace it, or choose another"
            )
        kind = dcfa_kind(out, so)
        if kind not in (None, _APPLIED, "incomplete"):
            raise OutputError(
                f"{key}: {str(out)!r} is a dcfa {kind} store, not an output of apply; "
                "overwrite replaces only those. Choose another path"
            )
    check_replaceable(out, overwrite=overwrite, key=key, kinds=(_APPLIED,), storage_options=so)


def _write(out, dataset: xr.Dataset, overwrite: bool, names: dict, so) -> None:
    """As :func:`dcfa.io.write_result` writes a result: atomically, one compute."""
    from dcfa._compute import compute
    from dcfa._store import atomic_store

    kw = {"storage_options": so} if isinstance(out, str) and so else {}
    dataset = io._uniform_chunks(dataset)
    dataset.attrs = {
        **dataset.attrs,
        "dcfa_kind": _APPLIED,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    with atomic_store(
        out, overwrite=overwrite, key=names["output"], kinds=(_APPLIED,), **kw
    ) as tmp:
        compute(io.to_zarr(dataset, tmp, mode="a", compute=False, **kw))


def _version() -> str:
    from dcfa import __version__

    return __version__

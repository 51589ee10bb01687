"""Reading a result store: :func:`load_result`.

A result store written by ``dcfa fit`` holds everything needed to compute its region series
for other months: the preprocessing (``climatology``, ``spread``), every cell's place in the
reduction (``cell_index``, ``cell_scale``, ``cell_centre``, ``region``), the job's
configuration (variables, sample dim, method parameters) and, with a GBMAP, its learners and
input standardisation. :func:`load_result` checks the store and turns it into a
:class:`dcfa.batch.fitted.FittedResult`, which applies it.
"""

from __future__ import annotations

import json
import os

import numpy as np
import xarray as xr

from dcfa import io
from dcfa._errors import InputError
from dcfa.batch.destination import PYTHON_NAMES
from dcfa.batch.fitted import FittedResult, _months
from dcfa.io.archive import open_zarr
from dcfa.io.calendars import calendar_of
from dcfa.io.result import LOG_OF, LOG_OF_UNITS, TARGET_DESCRIPTION
from dcfa.io.sources import existing

__all__ = ["load_result", "FittedResult", "PYTHON_NAMES"]

# the [input] keys whose effect ``apply`` reproduces; any other key set to a value that is not
# its default (a feature of a later dcfa) makes the result one ``apply`` cannot reproduce
_INPUT_KEYS = frozenset(
    {
        "store",
        "variables",
        "sample_dim",
        "time",
        "drop_time",  # apply reads every sample it is given
        "select",  # apply takes the result's cells by their labels (FittedResult._grid_order)
        "anomalies",
        "standardize",
        "storage_options",
        "windows",
        "lags",
        "aggregate",
    }
)


_TIME_SCALE_KEYS = ("windows", "lags", "aggregate")  # what ``time_scales`` reads of [input]


def load_result(
    path: str | os.PathLike, storage_options: dict | None = None, *, _key: str = "result"
) -> FittedResult:
    """The fitted result of ``dcfa fit`` at ``path``, ready to apply to other months.

    Parameters
    ----------
    path : str or path-like
        A result store (local, or an fsspec URL with ``storage_options``).

    Returns
    -------
    FittedResult
        ``transform(field)`` gives the region series of a field on the result's grid (lazy
        for Dask), ``forecast`` the target predicted from them by the regression fitted to
        the result's features (``regression``), ``embedding`` / ``predict`` the GBMAP's (when
        the result holds one); ``gbmap`` is the fitted GBMAP estimator.
    """
    from dcfa.storage.store import incomplete_reason

    key = _key
    loc = existing(path, key, storage_options, "Zarr store")
    reason = incomplete_reason(loc, storage_options)
    if reason is not None:
        raise InputError(f"{key}: {reason}")
    ds = open_zarr(loc, key, storage_options=storage_options if isinstance(loc, str) else None)
    if ds.attrs.get("dcfa_kind") != "result" or "region" not in ds:
        raise InputError(
            f"{key}: {str(loc)!r} is not a result of dcfa fit (no dcfa_kind = 'result' "
            "attribute and region map)"
        )
    needed = ["cell_index", "cell_scale", "cell_centre", "has_data"]
    absent = [v for v in needed if v not in ds]
    if absent or "config" not in ds.attrs:
        raise InputError(
            f"{key}: {str(loc)!r} lacks {absent or ['its configuration']}, which applying it "
            "needs: it was written from Python (dcfa.io.write_result), or by a dcfa fit "
            "older than this version. load_result and dcfa apply read the results of dcfa "
            "fit; a fit made in Python is applied by its fitted estimator or pipeline (keep "
            "it with joblib.dump or pickle)"
        )
    config = _config_of(ds, key, loc)
    inp = config.input
    dim = inp["sample_dim"]
    # the features were computed with these: without them the series would silently be of
    # the raw values (a store edited or half copied), so they are required, not optional
    lost = [
        f"{name} (input.{flag} = true)"
        for name, flag in (("climatology", "anomalies"), ("spread", "standardize"))
        if inp.get(flag) and name not in ds
    ]
    if lost:
        raise InputError(
            f"{key}: {str(loc)!r} lacks {', '.join(lost)}, which its features were computed "
            "with; the store is damaged or incomplete: run the job again"
        )
    optional = ("region", "climatology", "spread", "cell_weight")
    small = ds[[v for v in (*needed, *optional) if v in ds]].load()

    index = small["cell_index"].values.astype(np.int64).ravel()
    used = np.flatnonzero(index >= 0)
    keep = np.empty(used.size, dtype=np.int64)
    if not np.array_equal(np.sort(index[used]), np.arange(used.size)):
        raise InputError(f"{key}: {str(loc)!r}: cell_index is not a permutation of its cells")
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
    from dcfa.batch.method import build_estimator

    estimator = build_estimator(config.method)
    estimator.set_params(sample_dim=dim)
    aggregation = ds["cell_index"].attrs.get("aggregation", estimator.fit_options().aggregation)
    gbmap, why = _gbmap_of(ds, dim)
    regression, no_regression = _regression_of(ds, estimator, gbmap, dim)
    logged = config.target["transform"] == "log"  # the target fitted was its logarithm
    monthly = None
    if dim in ds.coords and calendar_of(ds[dim]) is not None and ds.sizes[dim] > 1:
        # the job's samples (the features' dates): one per calendar month?
        months = _months(ds[dim])
        monthly = bool(np.unique(months).size == months.size)
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
        regression=regression,
        regression_missing=no_regression,
        target_units=_target_attrs(ds).get(LOG_OF_UNITS if logged else "units"),
        target_name=_target_attrs(ds).get(LOG_OF) if logged else _target_name(ds),
        target_transform=str(config.target["transform"]),
        attrs=dict(ds.attrs),
        time_scales={k: inp[k] for k in _TIME_SCALE_KEYS},
        lead=int(config.target["lead"]),
        lead_step=str(ds.attrs.get("lead_step", "sample")),
        target_months=config.target.get("months"),
        monthly=monthly,
        group_coords={
            c: ("group", ds[c].values, dict(ds[c].attrs))
            for c in ("group_name", "group_units")
            if c in ds.coords and ds[c].dims == ("group",)
        },
        units=ds["features"].attrs.get("units") if "features" in ds else None,
        trained=ds["features"].transpose(dim, "group").values if "features" in ds else None,
    )


def _target_attrs(ds: xr.Dataset) -> dict:
    return dict(ds["target"].attrs) if "target" in ds else {}


def _target_name(ds: xr.Dataset) -> str | None:
    """The target's own name, as the result keeps it; None for a result without a target,
    or whose target had none."""
    if "target" not in ds:
        return None
    name = ds["target"].attrs.get("long_name")
    return None if name in (None, TARGET_DESCRIPTION) else str(name)


def _config_of(ds: xr.Dataset, key: str, loc):
    """The job's configuration, every default filled in (:func:`dcfa.batch.config.load_config`)."""
    from dcfa.batch.config import _SCHEMA, ConfigError, load_config

    try:
        raw = json.loads(ds.attrs["config"])
        config = load_config(base=raw)
    except (ValueError, TypeError, ConfigError) as exc:
        raise InputError(
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
        raise InputError(
            f"{key}: {str(loc)!r} was fitted with input key(s) {other}, which dcfa apply "
            "does not reproduce yet"
        )
    return config


def _regression_of(ds: xr.Dataset, estimator, gbmap, sample_dim: str):
    """The regression of the result's target on its features, fitted here, as
    :func:`dcfa.forward_cv` fits it after the estimator (:func:`dcfa.skill.regression_for`:
    ridge on the standardised region means for RegionsCV, OLS for the others), on the samples
    where the target and every feature have a value; and, when there is none, why."""
    from dcfa.batch.method import binary_key
    from dcfa.skill import regression_for

    if "target" not in ds or "features" not in ds:
        return None, (
            "it holds no target (written by a dcfa fit older than this version): run the "
            "job again to forecast"
        )
    if binary_key(getattr(estimator, "family", None), gbmap) is not None:
        return None, "its target is of two classes: no regression is fitted to it"
    X = ds["features"].transpose(sample_dim, "group").values.astype(np.float64)
    y = ds["target"].values.astype(np.float64)
    rows = np.isfinite(y) & np.isfinite(X).all(axis=1)
    if rows.sum() < 3:
        return None, f"only {int(rows.sum())} samples hold the target and every feature"
    fitted = regression_for(estimator).fit(X[rows], y[rows])
    # the scikit-learn regression itself: a LabelledRegressor's labels are for DataArrays
    return getattr(fitted, "estimator_", fitted), None


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
    from dcfa.gbmap import Standardizer

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

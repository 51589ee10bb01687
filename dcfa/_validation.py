"""Checks at the boundary: inputs become (n, D) NumPy/Dask arrays before any heavy work.

Every check here is cheap (shapes, dtypes, and the small target vector); a bad input is
reported naming the argument and what was expected. This is also the only module that
touches scikit-learn's private helpers, so a change there is mended in one place.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import dask.array as da
import numpy as np
import pandas as pd
import scipy.sparse as sp
import xarray as xr
from sklearn.utils._param_validation import (  # noqa: F401 (re-export)
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import _check_feature_names, _get_feature_names

from dcfa._errors import LARGEST_TARGET, InputError, InputTypeError, outside_stacklevel
from dcfa._units import same_units
from dcfa.geo import is_longitude
from dcfa.stacking import FeatureLayout, is_ensemble, isel_positions, stack_features

__all__ = [
    "region_labels",
    "Interval",
    "InvalidParameterError",
    "StrOptions",
    "InputData",
    "align_features",
    "check_X",
    "check_fitted_X",
    "check_units",
    "check_y",
    "single_target",
    "feature_order",
    "label_positions",
    "same_coordinates",
    "check_n_samples",
    "check_time_order",
    "validate_params",
]


def validate_params(estimator) -> None:
    """Check an estimator's parameters against its ``_parameter_constraints``."""
    estimator._validate_params()


@dataclass(frozen=True)
class InputData:
    """A validated feature matrix and what is needed to label results."""

    data: np.ndarray | da.Array
    layout: FeatureLayout | None = None
    feature_names: np.ndarray | None = None
    #: a DataFrame's dates (its DatetimeIndex or CFTimeIndex), which a dated target must have
    sample_dates: np.ndarray | None = None

    @property
    def n_samples(self) -> int:
        return int(self.data.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.data.shape[1])

    @property
    def is_dask(self) -> bool:
        return isinstance(self.data, da.Array)


def _check_numeric(dtype, name: str) -> None:
    if np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{name}: Complex data not supported; expected a real dtype, got {dtype}")
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
        raise InputTypeError(f"{name}: expected a numeric dtype, got {dtype}")


def numeric_array(values: np.ndarray, name: str) -> np.ndarray:
    """Object arrays of numbers become float64; anything else must already be numeric."""
    if values.dtype == object:
        try:
            return values.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InputTypeError(f"{name}: expected a numeric dtype, got object ({exc})") from None
    _check_numeric(values.dtype, name)
    return values


def region_labels(values, name: str) -> np.ndarray:
    """A map's region labels as int64, -1 for a cell in no region (NaN or negative); bad
    input, naming ``name``, when a label is not an integer."""
    values = np.asarray(values, dtype=np.float64)
    used = np.isfinite(values) & (values >= 0)
    if np.any(values[used] != np.round(values[used])):
        raise InputError(f"{name}: region labels must be integers (-1 or NaN for no region)")
    return np.where(used, values, -1).astype(np.int64)


def model_steps(model) -> list:
    """The steps of a scikit-learn pipeline, or the model itself."""
    from sklearn.pipeline import Pipeline

    return [step for _, step in model.steps] if isinstance(model, Pipeline) else [model]


def sample_dim_of(model, default: str = "time") -> str:
    """The sample dim ``model`` reads a DataArray by: its ``sample_dim``, or that of the
    first step of a pipeline that has one; else ``default``."""
    named = [
        s.sample_dim for s in model_steps(model) if isinstance(getattr(s, "sample_dim", None), str)
    ]
    return named[0] if named else default


def refuse_dataset(value, name: str) -> None:
    """An xarray Dataset where one array is expected: say which to select."""
    if isinstance(value, xr.Dataset):
        how = (
            "ds['sst']), or stack several with ds.to_dataarray('variable'): each variable's "
            "cells then form groups of their own"
            if name == "X"
            else "ds['soi'])"
        )
        raise InputTypeError(f"{name}: got an xarray.Dataset; select one variable ({how}")


def refuse_other_columns(y, name: str) -> None:
    """A DataFrame target with columns that are not numbers (the dates ``y.to_dataframe()``
    keeps from a DataArray's coordinates): name them and the column to select."""
    if not isinstance(y, pd.DataFrame):
        return
    other = [c for c in y.columns if not pd.api.types.is_numeric_dtype(y[c].dtype)]
    if other:
        numeric = [c for c in y.columns if c not in other]
        raise InputTypeError(
            f"{name}: the DataFrame's column(s) {other} are not numbers; select the target's "
            f"column" + (f" (y[{numeric[0]!r}])" if numeric else "")
        )


def check_X(X, *, sample_dim: str = "time", name: str = "X") -> InputData:
    """Validate ``X`` (NumPy, Dask, pandas or xarray) as an ``(n_samples, n_features)`` matrix."""
    layout = None
    feature_names = sample_dates = None
    refuse_dataset(X, name)
    if sp.issparse(X):
        raise InputTypeError(
            f"{name}: sparse input is not supported; pass a dense NumPy array, or a Dask array "
            "for data larger than memory"
        )
    if isinstance(X, xr.DataArray):
        _check_numeric(X.dtype, name)
        data, layout = stack_features(X, sample_dim, name=name)
    elif isinstance(X, da.Array):
        data = X
    elif hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas DataFrame
        # scikit-learn's rule: names when every column name is a string (else None), so
        # what fit stores is what _check_feature_names compares later
        feature_names = _get_feature_names(X)
        if isinstance(getattr(X, "index", None), pd.DatetimeIndex | xr.CFTimeIndex):
            sample_dates = np.asarray(X.index)
        data = X.to_numpy()
    else:
        data = np.asarray(X)
    if not isinstance(data, da.Array):
        data = numeric_array(data, name)
    _check_numeric(data.dtype, name)
    if data.ndim != 2:
        if data.ndim > 2:
            hint = " (use an xarray.DataArray with a named sample dim to stack grids)"
        else:
            hint = ". Reshape your data with X.reshape(-1, 1) if it is a single feature"
        raise InputError(
            f"{name}: expected a 2-D array (samples x features), got {data.ndim}-D with "
            f"shape {data.shape}{hint}"
        )
    if any(np.isnan(s) for s in data.shape):
        raise InputError(f"{name}: the array has unknown chunk sizes; call X.compute_chunk_sizes()")
    if data.shape[1] == 0:
        raise InputError(
            f"{name}: 0 feature(s) (shape={data.shape}) while a minimum of 1 is required."
        )
    return InputData(
        data=data, layout=layout, feature_names=feature_names, sample_dates=sample_dates
    )


def check_n_features(estimator, n_features: int) -> None:
    """``X`` has the number of features ``estimator`` was fitted on (scikit-learn's message)."""
    if n_features != estimator.n_features_in_:
        raise InputError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input"
        )


def check_units(fitted, given, fitted_what: str, name: str = "X") -> None:
    """Refuse data in other units than the training data's (both known): what was fitted
    (``fitted_what``: "the climatology", "the map's centres") would meet values of another
    scale, silently. An InputError naming ``name``. Data without units, where the training
    data had them, are taken as they are, with a warning: a field in degC read from a file
    without the attribute gave anomalies of -273 K in silence."""
    if fitted is not None and given is None:
        warnings.warn(
            f"{name}: no units attribute, where the training data's were {str(fitted)!r}; "
            f"{name} is taken to be in them ({fitted_what} was fitted in them): set "
            f"{name}.attrs['units'] to have them checked",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
        return
    if fitted is None or given is None or same_units(str(fitted), str(given)):
        return
    raise InputError(
        f"{name}: its units {str(given)!r} differ from the training data's {str(fitted)!r}; "
        f"{fitted_what} was fitted in {str(fitted)!r} and dcfa converts no units: convert "
        f"{name} first"
    )


def check_fitted_X(
    estimator,
    X,
    *,
    layout: FeatureLayout | None = None,
    sample_dim: str = "time",
    name: str = "X",
) -> InputData:
    """:func:`check_X` for a fitted ``estimator`` (``transform``, ``predict``, ...).

    Column names of a DataFrame are checked against ``feature_names_in_`` by scikit-learn's
    own rule (reordered or other names raise); a DataArray, when the estimator was fitted on
    one (``layout``), is aligned to the fitted grid by its labels (:func:`align_features`);
    then the number of features is checked.
    """
    _check_feature_names(estimator, X, reset=False)
    if layout is not None and isinstance(X, xr.DataArray):
        fitted = layout.attrs.get("units")
        check_units(fitted, X.attrs.get("units"), type(estimator).__name__, name)
        X = align_features(X, layout, name=name)
    elif layout is not None and (layout.feature_coords or len(layout.feature_dims) > 1):
        # scikit-learn's rule for a DataFrame fit and an array after it: say so, go on
        warnings.warn(
            f"{name} ({type(X).__name__}) has no labels, but {type(estimator).__name__} "
            f"was fitted on a DataArray of dims {(layout.sample_dim, *layout.feature_dims)}: "
            f"its columns are taken as the fitted cells in their order ({layout.feature_dims} "
            "flattened). Pass a DataArray to have the cells matched by their labels.",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
    inp = check_X(X, sample_dim=sample_dim, name=name)
    check_n_features(estimator, inp.n_features)
    return inp


def pandas_output(estimator, out):
    """``out`` (a 2-D DataArray ``(sample, column)``) as a DataFrame indexed by the samples
    when ``estimator.set_output(transform="pandas")`` asked for pandas, else ``out``."""
    if isinstance(out, xr.DataArray) and out.ndim == 2:
        if _get_output_config("transform", estimator)["dense"] == "pandas":
            return out.to_pandas()
    return out


############################################################################################
# a DataArray against the grid an estimator was fitted on

# coordinates equal up to float32 storage of the same values (dcfa.batch.fitted's rule)
_RTOL = 1e-6


def feature_order(X: xr.DataArray, layout: FeatureLayout, *, name: str = "X") -> dict:
    """How ``X``'s grid maps onto the fitted one (``layout``), by labels.

    ``X`` must have the sample dim and the fitted feature dims (in any order), each of the
    fitted size. Along a dim with an index coordinate both at fit and in ``X``, the labels
    must be the fitted ones, in any order: the same values (up to float32 rounding), the
    same longitudes in another convention (modulo 360, when the coordinate is a longitude,
    :func:`dcfa.geo.is_longitude`), or, for a stacked (MultiIndex) dim, the same cells with
    the levels stacked in any order. Other grid coordinates present in both must then agree.
    Reads coordinates only: O(grid), never the data.

    Returns ``{dim: positions}``: for each feature dim whose labels are in another order, the
    position in ``X`` of each fitted label (``X.isel({dim: positions})`` is in the fitted
    order). Raises a ValueError naming ``name`` and the dim or coordinate otherwise.
    """
    _check_dims(X, layout, name)
    order, levels = _label_orders(X, layout, name)
    _check_other_coords(X, layout, order, levels, name)
    return order


def _check_dims(X: xr.DataArray, layout: FeatureLayout, name: str) -> None:
    """``X`` has the sample dim and the fitted feature dims, each of the fitted size."""
    dim = layout.sample_dim
    grid = tuple(layout.feature_dims)
    if dim not in X.dims:
        raise InputError(
            f"{name}: the sample dim {dim!r} is not among the dims {X.dims}; the estimator was "
            f"fitted on dims {(dim, *grid)}"
        )
    if len(X.dims) != len(grid) + 1 or set(X.dims) != {dim, *grid}:
        raise InputError(f"{name}: expected dims {(dim, *grid)} (in any order), got {X.dims}")
    for d, size in zip(grid, layout.feature_shape, strict=True):
        if X.sizes[d] != size:
            raise InputError(
                f"{name}: dim {d!r} has {X.sizes[d]} entries, the training data had {size}"
                + _members_advice(X, d)
            )


def _label_orders(X: xr.DataArray, layout: FeatureLayout, name: str) -> tuple[dict, set]:
    """For each feature dim whose labels are the fitted ones in another order, the position
    in ``X`` of each fitted label; and the names of the fitted MultiIndex levels."""
    grid = tuple(layout.feature_dims)
    coords = layout.feature_coords
    order: dict = {}
    levels: set = set()
    for d in grid:
        ours = coords.get(d)
        if ours is None or tuple(ours.dims) != (d,) or d not in X.coords:
            continue  # no labels at fit or here: the positions are all there is
        a, b = _index_of(ours), X.indexes.get(d)
        if b is None:
            b = X[d].to_index()
        if isinstance(a, pd.MultiIndex):
            levels.update(str(n) for n in a.names)
        names = [str(n) for n in a.names] if isinstance(a, pd.MultiIndex) else [d]
        circular = {n for n in names if is_longitude(n, coords.get(n, ours).attrs)}
        positions = label_positions(a, b, circular)
        if positions is None:
            raise InputError(
                f"{name}: the {d!r} coordinate differs from the training data's "
                f"({_label_difference(a, b)}); the estimator was fitted on another grid"
                + _members_advice(X, d)
            )
        if not np.array_equal(positions, np.arange(positions.size)):
            order[d] = positions
    return order, levels


def _check_other_coords(
    X: xr.DataArray, layout: FeatureLayout, order: dict, levels: set, name: str
) -> None:
    """The grid coordinates other than the dims' own (2-D latitudes, a height) agree with
    the fitted ones, read in the fitted order."""
    grid = tuple(layout.feature_dims)
    coords = layout.feature_coords
    for k, ours in coords.items():
        if k in grid or k in levels or not ours.dims or k not in X.coords:
            continue
        theirs = X[k]
        if set(theirs.dims) != set(ours.dims):
            raise InputError(
                f"{name}: coordinate {k!r} has dims {theirs.dims}, the training data's {ours.dims}"
            )
        if _is_lazy(ours) or _is_lazy(theirs.variable):
            continue  # a Dask-backed coordinate is not read here
        theirs = theirs.isel({d: p for d, p in order.items() if d in theirs.dims})
        same = same_coordinates(
            np.asarray(ours.values),
            np.asarray(theirs.transpose(*ours.dims).values),
            circular=is_longitude(str(k), ours.attrs),
        )
        if not same:
            raise InputError(
                f"{name}: coordinate {k!r} differs from the training data's; the estimator "
                "was fitted on another grid"
            )


def _members_advice(X: xr.DataArray, dim) -> str:
    """For a dim of an ensemble's members: each fitted member has its own climatology (or
    cells), which other members cannot take."""
    if not is_ensemble(X, dim):
        return ""
    return (
        " (its members: each fitted member's climatology is its own; fit on the new "
        "members, e.g. dcfa.Anomalies().fit_transform(X))"
    )


def align_features(X: xr.DataArray, layout: FeatureLayout, *, name: str = "X") -> xr.DataArray:
    """``X`` on the fitted grid: dims ``(sample_dim, *feature_dims)`` and every feature dim's
    labels in the fitted order (:func:`feature_order`; lazy for Dask, nothing computed)."""
    order = feature_order(X, layout, name=name)
    X = X.transpose(layout.sample_dim, *layout.feature_dims)
    if order:
        X = X.isel({d: isel_positions(p) for d, p in order.items()})
    return X


def _index_of(var) -> pd.Index:
    return var.to_index() if hasattr(var, "to_index") else pd.Index(np.asarray(var.values))


def _is_lazy(var) -> bool:
    return getattr(var, "chunks", None) is not None


def _keys(index: pd.Index, circular: set) -> pd.Index:
    """The labels to match: longitudes modulo 360 (rounded to 1e-6 degree)."""

    def level(values: pd.Index, is_lon: bool):
        if is_lon and np.issubdtype(values.dtype, np.number):
            return pd.Index(np.round(np.mod(values.to_numpy(np.float64), 360.0), 6) % 360.0)
        return values

    if isinstance(index, pd.MultiIndex):
        return pd.MultiIndex.from_arrays(
            [level(index.get_level_values(n), str(n) in circular) for n in index.names],
            names=index.names,
        )
    return level(index, bool(circular))


def label_positions(
    ours: pd.Index, theirs: pd.Index, circular: set, *, subset: bool = False
) -> np.ndarray | None:
    """Position in ``theirs`` of each label of ``ours``, or None when the labels differ
    (``subset``: ``theirs`` may hold more labels than ``ours``, and None when it lacks one)."""
    if isinstance(ours, pd.MultiIndex) != isinstance(theirs, pd.MultiIndex):
        return None
    if isinstance(ours, pd.MultiIndex):
        if sorted(map(str, ours.names)) != sorted(map(str, theirs.names)):
            return None
        theirs = theirs.reorder_levels(list(ours.names))
    a, b = _keys(ours, circular), _keys(theirs, circular)
    within = subset and len(a) < len(b)
    if len(a) != len(b) and not within:
        return None
    if a.equals(b):
        return np.arange(len(a))
    if a.is_unique and b.is_unique:
        positions = b.get_indexer(a)
        if (positions >= 0).all():
            return positions
    # pandas' own dtypes (a StringDtype of member ids) are no NumPy dtypes to test
    if isinstance(a, pd.MultiIndex) or not (
        pd.api.types.is_float_dtype(a.dtype) or pd.api.types.is_float_dtype(b.dtype)
    ):
        return None
    try:  # floats: equal up to rounding, in any order
        x, y = a.to_numpy(np.float64), b.to_numpy(np.float64)
    except (TypeError, ValueError):
        return None
    if within:  # each of ours, the nearest of theirs within the rounding
        order = np.argsort(y, kind="stable")
        near = pd.Index(y[order]).get_indexer(x, method="nearest", tolerance=_tolerance(y))
        return order[near] if b.is_unique and (near >= 0).all() else None
    if same_coordinates(x, y):
        return np.arange(x.size)
    sx, sy = np.argsort(x, kind="stable"), np.argsort(y, kind="stable")
    tol = _tolerance(x)
    if not same_coordinates(x[sx], y[sy]) or np.any(np.diff(x[sx]) <= 2 * tol):
        return None
    positions = np.empty(x.size, dtype=np.int64)
    positions[sx] = sy
    return positions


def _tolerance(values: np.ndarray) -> float:
    finite = np.abs(values[np.isfinite(values)])
    return _RTOL * max(float(finite.max()) if finite.size else 0.0, 1.0)


def same_coordinates(a: np.ndarray, b: np.ndarray, *, circular: bool = False) -> bool:
    """Whether two coordinate arrays hold the same values: exactly, unless one is float; then
    up to float32 storage of the same values (``circular``: longitudes, modulo 360). The one
    rule of every check of a later input's grid (``transform``, :mod:`dcfa.batch.fitted`)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind != "f" and b.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    try:
        a, b = a.astype(np.float64), b.astype(np.float64)
    except (TypeError, ValueError):
        return False
    atol = _tolerance(a)
    if circular:  # longitudes: the same point in any convention
        diff = np.abs(np.mod(a - b + 180.0, 360.0) - 180.0)
        return bool(np.all((diff <= atol) | (np.isnan(a) & np.isnan(b))))
    return bool(np.allclose(a, b, rtol=0.0, atol=atol, equal_nan=True))


def _label_difference(ours: pd.Index, theirs: pd.Index) -> str:
    """A few labels of one side that the other lacks, for an error message."""
    ours_names, their_names = list(ours.names), list(theirs.names)
    if len(ours_names) > 1 or len(their_names) > 1:
        if sorted(map(str, ours_names)) != sorted(map(str, their_names)):
            return f"fitted levels {ours_names}, here {their_names}"

    def shown(labels) -> str:
        labels = list(labels)
        text = ", ".join(str(v) for v in labels[:3])
        return f"[{text}{', ...' if len(labels) > 3 else ''}]"

    missing = ours.difference(theirs, sort=False)
    extra = theirs.difference(ours, sort=False)
    if len(missing) or len(extra):
        return f"fitted labels not here: {shown(missing)}; labels here not fitted: {shown(extra)}"
    return "repeated labels"


def check_time_order(labels, dim: str, *, why: str, name: str = "X") -> None:
    """That the sample labels of ``name`` increase, when time-ordered folds will read its rows
    (``why``): a field stored latest-first would train forward-chaining folds on the future.
    ``labels`` None (NumPy input: rows are taken as ordered) passes."""
    if labels is None:
        return
    index = pd.Index(np.asarray(labels))
    if index.is_monotonic_increasing and index.is_unique:
        return
    values = index.to_numpy()
    bad = next((i for i in range(1, len(values)) if not values[i - 1] < values[i]), len(values) - 1)

    def show(v) -> str:
        text = str(pd.Timestamp(v)) if isinstance(v, np.datetime64) else str(v)
        return text.removesuffix(" 00:00:00")

    if values[bad - 1] == values[bad]:  # sorting would not help
        raise InputError(
            f"{name}: its {dim!r} labels repeat {show(values[bad])} (samples {bad - 1} and "
            f"{bad}); {why} take each sample once, in time order: drop the duplicates first "
            f"({name}.drop_duplicates({dim!r}), and y with it)"
        )
    raise InputError(
        f"{name}: its {dim!r} labels are not increasing ({show(values[bad - 1])} then "
        f"{show(values[bad])}, samples {bad - 1} and {bad}); {why} take the samples in time "
        f"order: sort them first ({name}.sortby({dim!r}), and y with it)"
    )


def check_n_samples(n: int, minimum: int, *, why: str) -> None:
    if n < minimum:
        raise InputError(f"X: expected at least {minimum} samples ({why}), got n_samples = {n}")


def check_y(
    y,
    inp: InputData,
    *,
    name: str = "y",
    numeric: bool = True,
    allow_constant: bool = False,
) -> np.ndarray:
    """Validate the target(s) of the checked ``X`` ``inp`` and return them in memory as an
    ``(n_samples, k)`` array.

    The target is small (n values per column), so it is computed here: a NaN or constant
    target must fail before the pass over ``X``, not after. A target with dates is checked
    against ``X``'s: a DataArray ``X``'s sample coordinate (``inp.layout``), or a DataFrame
    ``X``'s dates (:attr:`InputData.sample_dates`).
    """
    n_samples, layout, dates = inp.n_samples, inp.layout, inp.sample_dates
    if y is None:
        raise InputError(
            f"{name}: a target is required: this estimator requires y to be passed, but the "
            "target y is None"
        )
    refuse_dataset(y, name)
    if numeric:
        refuse_other_columns(y, name)
    y = _dated_target(y, layout, name)
    if dates is not None and isinstance(y, pd.Series | pd.DataFrame):
        check_target_dates(y, "index", dates, name, frame=True)
    if isinstance(y, xr.DataArray):
        _check_sample_alignment(y, layout, name)
        if layout is not None:
            y = y.transpose(layout.sample_dim, ...)
        values = y.values
    elif isinstance(y, da.Array):
        values = y.compute()
    else:
        values = np.asarray(y)
    if values.ndim == 0 or values.ndim > 2:
        raise InputError(f"{name}: expected a 1-D or 2-D target, got shape {values.shape}")
    if values.shape[0] != n_samples:
        raise InputError(
            f"{name}: X has {n_samples} samples but {name} has {values.shape[0]}; they must "
            "have the same length"
        )
    values = values.reshape(n_samples, -1)
    if not numeric:
        return values
    values = numeric_array(values, name).astype(np.float64)
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise InputError(
            f"{name}: contains {bad} NaN or infinite values; drop those samples "
            "(X, y = dcfa.align(X, y) leaves out the samples where y is NaN, as a batch job does)"
        )
    big = float(np.abs(values).max(initial=0.0))
    if big > LARGEST_TARGET:
        raise InputError(
            f"{name}: values up to {big:.3g} overflow float64 in the sums of squares every "
            f"statistic needs (above about {LARGEST_TARGET:.0e}); rescale the target, e.g. "
            f"divide it by {10 ** np.floor(np.log10(big)):.0e}"
        )
    if not allow_constant:
        span = values.max(axis=0) - values.min(axis=0)
        if np.any(span == 0):
            raise InputError(f"{name}: the target is constant; there is nothing to predict")
    return values


def single_target(y, inp: InputData, **checks) -> np.ndarray:
    """:func:`check_y` of an estimator that predicts one target: ``(n_samples, 1)``. More
    columns are refused; a column vector warns, as scikit-learn's single-output estimators
    do (``DataConversionWarning``)."""
    values = check_y(y, inp, **checks)
    if values.shape[1] != 1:
        raise InputError(f"y: expected a single target, got {values.shape[1]} columns")
    ndim = getattr(y, "ndim", None)
    if (np.asarray(y).ndim if ndim is None else ndim) == 2:
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=outside_stacklevel(),
        )
    return values


def _dated_target(y, layout: FeatureLayout | None, name: str):
    """A pandas Series (or DataFrame) indexed by dates, for an ``X`` with a sample coordinate,
    checked against ``X``'s dates (refused in its own terms, its index) and returned as the
    DataArray on those dates: never used by position."""
    if layout is None or layout.sample_dim not in layout.sample_coords:
        return y
    if not isinstance(y, pd.Series | pd.DataFrame):
        return y
    if not isinstance(y.index, pd.DatetimeIndex | xr.CFTimeIndex):
        return y
    dim = layout.sample_dim
    check_target_dates(y, dim, layout.sample_coords[dim].values, name)
    return pandas_on_dim(y, dim)


def pandas_on_dim(y: pd.Series | pd.DataFrame, dim: str, dtype=None) -> xr.DataArray:
    """A pandas Series (or a DataFrame, its columns along ``"target"``) as a DataArray along
    ``dim``, on its index whatever the index is named: a CSV's ``index_col="date"`` would
    otherwise become a second dim. The index is kept as pandas has it (a time zone too)."""
    values = y.to_numpy(dtype=dtype)
    dims = (dim,) if values.ndim == 1 else (dim, "target")
    return xr.DataArray(values, dims=dims, coords={dim: y.index.rename(dim)})


def _is_cftime(dates: np.ndarray) -> bool:
    """Whether ``dates`` are cftime dates (a calendar of their own), not NumPy's or pandas'
    (a time zone's Timestamps are objects too, on the same calendar)."""
    return dates.dtype == object and dates.size > 0 and hasattr(dates.flat[0], "calendar")


def _check_sample_alignment(y: xr.DataArray, layout: FeatureLayout | None, name: str) -> None:
    if layout is None:
        return
    dim = layout.sample_dim
    if dim not in y.dims:
        raise InputError(f"{name}: expected the sample dim {dim!r} of X among {y.dims}")
    if dim in layout.sample_coords:
        check_target_dates(y, dim, layout.sample_coords[dim].values, name)


def check_target_dates(y, dim: str, dates, name: str = "y", *, frame: bool = False) -> None:
    """Refuse a target whose dates (a DataArray's ``dim`` coordinate, a pandas index of dates)
    are not ``dates``, X's: such a target is never paired with X by position. A target
    without dates, or an ``X`` without them (``dates`` None), is paired by position.
    ``frame``: ``dates`` are a DataFrame ``X``'s index, and the message says how pandas
    pairs them."""
    if dates is None:
        return
    if isinstance(y, pd.Series | pd.DataFrame):
        index = y.index
        if not isinstance(index, pd.DatetimeIndex | xr.CFTimeIndex):
            return
        if isinstance(index, pd.DatetimeIndex) and index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)  # its instants, as xarray has them
        theirs = np.asarray(index)
    elif isinstance(y, xr.DataArray):
        if dim not in y.dims:
            raise InputError(f"{name}: expected the sample dim {dim!r} of X among {y.dims}")
        if dim not in y.coords:
            return
        theirs = np.asarray(y[dim].values)
    else:
        return
    ours = np.asarray(dates)
    try:
        same = ours.shape == theirs.shape and bool(np.array_equal(ours, theirs))
    except TypeError:  # cftime dates never compare with NumPy's: another calendar
        same = False
    if same:
        return
    calendars = _is_cftime(ours) != _is_cftime(theirs)
    if frame:  # a DataFrame X: pandas pairs them
        how = (
            "; pair them by date first, e.g. y = y.loc[X.index] (the same dates in X's "
            "order) or X, y = X.align(y, join='inner', axis=0)"
        )
    else:
        how = (
            "; align them first: X, y = dcfa.align(X, y) keeps the samples with identical "
            "stamps, dcfa.align(X, y, match='month') pairs calendar months (e.g. a field "
            "stamped mid-month and an index on the 1st)"
        )
    if frame:
        what = "the dates of its index differ from X's"
    elif isinstance(y, pd.Series | pd.DataFrame):  # named as the user holds it: its index
        index = f" ({y.index.name!r})" if y.index.name is not None else ""
        what = f"the dates of its index{index} differ from X's {dim!r} coordinate"
    else:
        what = f"its {dim!r} coordinate differs from X's"
    raise InputError(
        f"{name}: "
        + what
        + (" (their dates are on different calendars)" if calendars else "")
        + how
    )


# beyond these the applied series are not the same quantity as the training ones: a field in
# degC for a fit in K lies hundreds of standard deviations off, one in kg m-2 s-1 for a fit in
# mm/day varies 86 400 times less; a century of warming moves SST anomalies a few standard
# deviations
FAR_OFFSET = 30.0
FAR_RATIO = 20.0
FAR_COLUMNS = 256


def far_off(
    applied,
    mean,
    sd,
    n_fitted: int,
    *,
    inputs=None,
    fitted: str = "the fit",
    columns: str = "columns",
) -> str | None:
    """How the columns of ``applied`` ``(sample, column)`` lie outside those a model was
    fitted on (each column's ``mean`` and standard deviation ``sd``, from ``n_fitted``
    samples), in words, or None: the median over the columns of each column's median
    distance from its mean, in its standard deviations, above ``FAR_OFFSET``, or of its
    spread's ratio to ``sd`` beyond ``FAR_RATIO`` either way (with at least 12 samples of
    each, so that a season's months are not taken for a smaller spread). ``inputs``, an
    elementwise function, makes the columns read what ``mean`` and ``sd`` are of (a CFA
    estimator's ``phi(x)``); ``fitted`` and ``columns`` name the model and the columns in the
    words.

    At most :data:`FAR_COLUMNS` columns, evenly spaced, are read: a median over that many
    says the same, and a transform of 20 000 columns x 1 200 samples is not made 4 s slower.
    """
    mean, sd = np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    usable = np.flatnonzero(np.isfinite(sd) & (sd > 0) & np.isfinite(mean))
    if not usable.size or np.shape(applied)[0] == 0:
        return None
    if usable.size > FAR_COLUMNS:
        usable = usable[np.linspace(0, usable.size - 1, FAR_COLUMNS).astype(np.int64)]
    x = applied[:, usable]
    x = np.asarray(x if inputs is None else inputs(x), dtype=np.float64)
    mean, sd = mean[usable], sd[usable]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column without values: NaN
        offset = float(np.nanmedian(np.nanmedian(np.abs(x - mean) / sd, axis=0)))
        if offset > FAR_OFFSET:
            return f"lie a median of {offset:.0f} training standard deviations from {fitted}'s mean"
        if np.median(np.isfinite(x).sum(axis=0)) < 12 or n_fitted < 12:
            return None
        ratio = float(np.nanmedian(np.nanstd(x, axis=0) / sd))
    if ratio > FAR_RATIO or ratio < 1 / FAR_RATIO:
        return f"vary {ratio:.3g} times as much as the training series (the median over {columns})"
    return None


def gaps_text(X: np.ndarray, labels, places, grid: xr.DataArray | None) -> str | None:
    """Where the in-memory ``X`` ``(sample, feature)`` holds NaN in a feature of a group, in
    words, or None: how many such features and samples, and the first feature, by its labels
    on ``grid`` (``places``: each feature's flat place on it) or its number, with its group."""
    labels = np.asarray(labels)
    used = np.flatnonzero(labels >= 0)
    nan = np.isnan(X[:, used])
    if not nan.any():
        return None
    cols = used[nan.any(axis=0)]
    k = int(cols[0])
    where = f"feature {k}"
    if grid is not None:
        at = np.unravel_index(int(places[k]), grid.shape)
        where = ", ".join(
            f"{d} {grid[d].values[i]}" if d in grid.coords else f"{d} {i}"
            for d, i in zip(grid.dims, at, strict=True)
        )
    return (
        f"{cols.size} of its cells hold NaN in {int(nan.any(axis=1).sum())} of {X.shape[0]} "
        f"samples (the first: {where}, of group {labels[k]})"
    )

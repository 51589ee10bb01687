"""Checks at the boundary: inputs become (n, D) NumPy/Dask arrays before any heavy work.

Every check here is cheap (shapes, dtypes, and the small target vector); a bad input is
reported naming the argument and what was expected. This is also the only module that
touches scikit-learn's private helpers, so a change there is mended in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp
import xarray as xr
from sklearn.utils._param_validation import Interval, StrOptions  # noqa: F401 (re-export)

from dcfa.stacking import FeatureLayout, stack_features

__all__ = [
    "Interval",
    "StrOptions",
    "InputData",
    "check_X",
    "check_y",
    "check_n_samples",
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
        raise ValueError(f"{name}: Complex data not supported; expected a real dtype, got {dtype}")
    if not (np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)):
        raise TypeError(f"{name}: expected a numeric dtype, got {dtype}")


def _numeric_array(values: np.ndarray, name: str) -> np.ndarray:
    """Object arrays of numbers become float64; anything else must already be numeric."""
    if values.dtype == object:
        try:
            return values.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}: expected a numeric dtype, got object ({exc})") from None
    _check_numeric(values.dtype, name)
    return values


def check_X(X, *, sample_dim: str = "time", name: str = "X") -> InputData:
    """Validate ``X`` (NumPy, Dask, pandas or xarray) as an ``(n_samples, n_features)`` matrix."""
    layout = None
    feature_names = None
    if isinstance(X, xr.Dataset):
        raise TypeError(
            f"{name}: got an xarray.Dataset; select one variable (ds['sst']) or use "
            "dcfa.io.open_archive to stack several"
        )
    if sp.issparse(X):
        raise TypeError(
            f"{name}: sparse input is not supported; pass a dense NumPy array, or a Dask array "
            "for data larger than memory"
        )
    if isinstance(X, xr.DataArray):
        _check_numeric(X.dtype, name)
        data, layout = stack_features(X, sample_dim, name=name)
    elif isinstance(X, da.Array):
        data = X
    elif hasattr(X, "columns") and hasattr(X, "to_numpy"):  # pandas DataFrame
        feature_names = np.asarray([str(c) for c in X.columns], dtype=object)
        data = X.to_numpy()
    else:
        data = np.asarray(X)
    if not isinstance(data, da.Array):
        data = _numeric_array(data, name)
    _check_numeric(data.dtype, name)
    if data.ndim != 2:
        if data.ndim > 2:
            hint = " (use an xarray.DataArray with a named sample dim to stack grids)"
        else:
            hint = ". Reshape your data with X.reshape(-1, 1) if it is a single feature"
        raise ValueError(
            f"{name}: expected a 2-D array (samples x features), got {data.ndim}-D with "
            f"shape {data.shape}{hint}"
        )
    if any(np.isnan(s) for s in data.shape):
        raise ValueError(f"{name}: the array has unknown chunk sizes; call X.compute_chunk_sizes()")
    if data.shape[1] == 0:
        raise ValueError(
            f"{name}: 0 feature(s) (shape={data.shape}) while a minimum of 1 is required."
        )
    return InputData(data=data, layout=layout, feature_names=feature_names)


def check_n_features(estimator, n_features: int) -> None:
    """``X`` has the number of features ``estimator`` was fitted on (scikit-learn's message)."""
    if n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input"
        )


def check_n_samples(n: int, minimum: int, *, why: str) -> None:
    if n < minimum:
        raise ValueError(f"X: expected at least {minimum} samples ({why}), got n_samples = {n}")


def check_y(
    y,
    n_samples: int,
    *,
    name: str = "y",
    layout: FeatureLayout | None = None,
    numeric: bool = True,
    allow_constant: bool = False,
) -> np.ndarray:
    """Validate the target(s) and return them in memory as an ``(n_samples, k)`` array.

    The target is small (n values per column), so it is computed here: a NaN or constant
    target must fail before the pass over ``X``, not after.
    """
    if y is None:
        raise ValueError(
            f"{name}: a target is required: this estimator requires y to be passed, but the "
            "target y is None"
        )
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
        raise ValueError(f"{name}: expected a 1-D or 2-D target, got shape {values.shape}")
    if values.shape[0] != n_samples:
        raise ValueError(
            f"{name}: X has {n_samples} samples but {name} has {values.shape[0]}; they must "
            "have the same length"
        )
    values = values.reshape(n_samples, -1)
    if not numeric:
        return values
    values = _numeric_array(values, name).astype(np.float64)
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        raise ValueError(f"{name}: contains {bad} NaN or infinite values; drop those samples")
    if not allow_constant:
        span = values.max(axis=0) - values.min(axis=0)
        if np.any(span == 0):
            raise ValueError(f"{name}: the target is constant; there is nothing to predict")
    return values


def _check_sample_alignment(y: xr.DataArray, layout: FeatureLayout | None, name: str) -> None:
    if layout is None:
        return
    dim = layout.sample_dim
    if dim not in y.dims:
        raise ValueError(f"{name}: expected the sample dim {dim!r} of X among {y.dims}")
    if dim in y.coords and dim in layout.sample_coords:
        ours = np.asarray(layout.sample_coords[dim].values)
        theirs = np.asarray(y[dim].values)
        if ours.shape != theirs.shape or not np.array_equal(ours, theirs):
            raise ValueError(
                f"{name}: its {dim!r} coordinate differs from X's; align them first, e.g. "
                f"X, y = xarray.align(X, y, join='inner')"
            )

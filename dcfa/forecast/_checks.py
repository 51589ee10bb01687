"""The argument checks that :mod:`dcfa.forecast`'s functions share: the field and its sample
dim, lists of lags or window lengths, a new dim's name and the field's length."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np
import xarray as xr


def _check_sample_dim(field, sample_dim: str) -> None:
    if not isinstance(field, xr.DataArray | xr.Dataset):
        raise TypeError(f"field: expected an xarray DataArray or Dataset, got {type(field)}")
    if sample_dim not in field.dims:
        raise ValueError(
            f"sample_dim: {sample_dim!r} is not among the field's dims {tuple(field.dims)}"
        )


def _int_list(values, name: str, minimum: int) -> list[int]:
    """``values`` as a non-empty list of unique ints ``>= minimum``, or a ValueError naming it."""
    example = "[0, 1, 2]" if minimum == 0 else "[1, 3, 6, 12]"
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise ValueError(f"{name}: expected a list of ints such as {example}, got {values!r}")
    values = list(values)
    if not values:
        raise ValueError(f"{name}: expected at least one value, such as {example}")
    for v in values:
        if not isinstance(v, Integral) or isinstance(v, bool | np.bool_):
            raise ValueError(f"{name}: expected ints, got {v!r} in {values!r}")
        if v < minimum:
            what = "non-negative" if minimum == 0 else "positive"
            raise ValueError(f"{name}: expected {what} numbers of samples, got {v} in {values!r}")
    out = [int(v) for v in values]
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: values must be unique, got {values!r}")
    return out


def _check_new_dim(field, dim: str) -> None:
    if dim in field.dims:
        raise ValueError(f"field: already has a {dim!r} dim; give each {dim} once")


def _check_length(field, sample_dim: str, needed: int, name: str, values: list[int]) -> None:
    n = field.sizes[sample_dim]
    if needed > n:
        raise ValueError(
            f"{name}: {values} need at least {needed} samples along {sample_dim!r}; the field "
            f"has {n}"
        )

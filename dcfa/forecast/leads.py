"""The target at ``t + lead``: :func:`lead_target` pairs the predictors at ``t`` with the target
``lead`` samples later and reports the alignment (:class:`LeadAlignment`)."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from dcfa.forecast._checks import _check_sample_dim

__all__ = ["LeadAlignment", "lead_target"]


@dataclass(frozen=True)
class LeadAlignment:
    """How predictors and target were paired by :func:`lead_target`, for logs and CLIs.

    Attributes
    ----------
    lead : int
        Samples between a predictor and its target.
    n_samples : int
        Pairs kept.
    n_input : int
        Samples of the field given.
    first_predictor, last_predictor : object
        Sample labels (dates, or positions when the field has none) of the first and last
        predictors kept.
    first_target, last_target : object
        Valid times of their targets.
    """

    lead: int
    n_samples: int
    n_input: int
    first_predictor: Any
    last_predictor: Any
    first_target: Any
    last_target: Any

    def __str__(self) -> str:
        return (
            f"lead {self.lead}: predictors {_label(self.first_predictor)} .. "
            f"{_label(self.last_predictor)} -> targets {_label(self.first_target)} .. "
            f"{_label(self.last_target)}, {self.n_samples} of {self.n_input} samples kept"
        )


def _label(value) -> str:
    """A date as ``1991-01-01`` (with the time of day when it is not midnight)."""
    if isinstance(value, np.datetime64):
        value = pd.Timestamp(value)
    if hasattr(value, "isoformat") and hasattr(value, "hour"):
        text = value.isoformat()
        return text[: -len("T00:00:00")] if text.endswith("T00:00:00") else text
    return str(value)


def _as_target(target, sample_dim: str) -> tuple[xr.DataArray, pd.Index | None]:
    """The target as a DataArray along ``sample_dim`` and its sample labels (None if it has
    none: a NumPy or Dask array, a Series on a default ``0 .. n - 1`` index)."""
    if isinstance(target, xr.DataArray):
        if sample_dim not in target.dims:
            raise ValueError(
                f"target: has no {sample_dim!r} dim (dims {target.dims}); give it the field's "
                "sample dim"
            )
        return target, target.indexes.get(sample_dim)
    if isinstance(target, pd.Series):
        index = target.index
        plain = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        name = target.name if target.name is not None else "target"
        out = xr.DataArray(target.to_numpy(), dims=(sample_dim,), name=name)
        return out, None if plain else index
    data = target if hasattr(target, "ndim") and hasattr(target, "shape") else np.asarray(target)
    if data.ndim != 1:
        raise ValueError(
            f"target: expected a DataArray, a pandas Series or a 1-D array, got an array of "
            f"shape {data.shape}"
        )
    return xr.DataArray(data, dims=(sample_dim,), name="target"), None


def _positions(
    field_labels: pd.Index | None, target_labels: pd.Index | None, n: int, n_target: int, dim
) -> np.ndarray:
    """For every predictor sample, the position of the same sample in the target (-1: the
    target's record does not cover it)."""
    if field_labels is None or target_labels is None:
        if n_target != n:
            raise ValueError(
                f"target: has {n_target} samples and the field {n} along {dim!r}; without "
                "labels on both, the target must hold one value per sample of the field"
            )
        return np.arange(n)
    if not (target_labels.is_unique and target_labels.is_monotonic_increasing):
        raise ValueError(f"target: its {dim!r} labels must be unique and increasing")
    pos = np.asarray(target_labels.get_indexer(field_labels))
    missing = pos < 0
    if missing.all():
        raise ValueError(
            f"target: none of the field's {dim!r} labels ({_label(field_labels[0])} .. "
            f"{_label(field_labels[-1])}) is among the target's ({_label(target_labels[0])} "
            f".. {_label(target_labels[-1])}); put both on the same sample labels"
        )
    if missing.any():
        lost = field_labels[missing]
        inside = np.asarray((lost > target_labels[0]) & (lost < target_labels[-1]))
        if inside.any():
            raise ValueError(
                f"target: has no sample labelled {_label(lost[inside][0])}, inside its record "
                f"({_label(target_labels[0])} .. {_label(target_labels[-1])}); "
                f"{int(inside.sum())} predictor sample(s) have no target value"
            )
    return pos


def _indexer(idx: np.ndarray):
    """A slice when the indices are one contiguous increasing run (cheaper on Dask)."""
    if idx.size and (idx.size == 1 or (np.diff(idx) == 1).all()):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def lead_target(
    field: xr.DataArray | xr.Dataset,
    target,
    lead: int,
    *,
    sample_dim: str = "time",
    min_samples: int = 2,
) -> tuple[xr.DataArray | xr.Dataset, xr.DataArray, LeadAlignment]:
    """Pair the predictors at ``t`` with the target at ``t + lead``.

    Parameters
    ----------
    field : DataArray or Dataset
        The predictors, with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy). It may
        already be trimmed by :func:`lagged` or :func:`trailing_windows`.
    target : DataArray, pandas Series or 1-D array
        The target series. With sample labels on both sides (a DataArray with a coordinate on
        ``sample_dim``, a Series with a non-default index), it is matched by label: every
        sample of the field must be in the target's record, except before its start or after
        its end (those samples are dropped), and ``lead`` counts samples of the target, so its
        labels must be unique and increasing, without gaps. Otherwise it holds one value per
        sample of the field, in order. A Dask-backed DataArray stays lazy.
    lead : int
        Non-negative lead in samples (3 with monthly samples: predict April from January).
    sample_dim : str, default="time"
    min_samples : int, default=2
        Fewest pairs to keep.

    Returns
    -------
    field : DataArray or Dataset
        The predictors whose target ``lead`` samples later exists.
    target : DataArray
        The target values at ``t + lead``, labelled with the predictors' ``sample_dim``
        coordinate; their own valid time is the coordinate ``target_time`` (along
        ``sample_dim``; the positions when neither side has labels). The target's name and
        attributes are kept; its other coordinates along ``sample_dim`` are dropped.
    alignment : LeadAlignment
        First and last predictor and target dates and the samples kept; ``str()`` of it is
        one line for a log.

    Raises
    ------
    ValueError
        Naming ``lead`` (not a non-negative int, or leaving fewer than ``min_samples``
        pairs), ``target`` (its samples do not match the field's) or ``sample_dim``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=6, freq="MS")
    >>> x = xr.DataArray(np.arange(6.0), dims="time", coords={"time": time})
    >>> X, y, info = lead_target(x, np.arange(6.0) * 10, lead=3)
    >>> y.values
    array([30., 40., 50.])
    >>> print(info)
    lead 3: predictors 2000-01-01 .. 2000-03-01 -> targets 2000-04-01 .. 2000-06-01, 3 of 6 samples kept
    """  # noqa: E501
    _check_sample_dim(field, sample_dim)
    if not isinstance(lead, Integral) or isinstance(lead, bool | np.bool_) or lead < 0:
        raise ValueError(f"lead: expected a non-negative int number of samples, got {lead!r}")
    lead = int(lead)
    if not isinstance(min_samples, Integral) or min_samples < 1:
        raise ValueError(f"min_samples: expected a positive int, got {min_samples!r}")
    y, target_labels = _as_target(target, sample_dim)
    n, n_target = field.sizes[sample_dim], y.sizes[sample_dim]
    field_labels = field.indexes.get(sample_dim)
    pos = _positions(field_labels, target_labels, n, n_target, sample_dim)
    keep = (pos >= 0) & (pos + lead < n_target)
    kept = np.flatnonzero(keep)
    if kept.size < min_samples:
        raise ValueError(
            f"lead: lead={lead} leaves {kept.size} pair(s) of predictor and target "
            f"({n} predictor samples, {n_target} target samples along {sample_dim!r}); need "
            f"at least {min_samples}"
        )
    at = pos[kept] + lead
    X = field.isel({sample_dim: _indexer(kept)})
    y = y.isel({sample_dim: _indexer(at)})
    if target_labels is not None:
        valid = np.asarray(target_labels[at])
    elif field_labels is not None:  # one target value per field sample: the field's dates
        valid = np.asarray(field_labels[at])
    else:
        valid = at
    predictors = np.asarray(field_labels[kept]) if field_labels is not None else kept
    y = y.drop_vars([k for k, c in y.coords.items() if sample_dim in c.dims])
    coords = {"target_time": xr.Variable(sample_dim, valid, attrs=_TARGET_TIME_ATTRS)}
    if field_labels is not None:
        coords[sample_dim] = X[sample_dim].variable
    y = y.assign_coords(coords)
    alignment = LeadAlignment(
        lead=lead,
        n_samples=int(kept.size),
        n_input=int(n),
        first_predictor=_scalar(predictors[0]),
        last_predictor=_scalar(predictors[-1]),
        first_target=_scalar(valid[0]),
        last_target=_scalar(valid[-1]),
    )
    return X, y, alignment


_TARGET_TIME_ATTRS = {"long_name": "valid time of the target"}


def _scalar(value):
    """A label as a plain Python object: a pandas Timestamp for datetime64, int, cftime."""
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value)
    if isinstance(value, np.generic):
        return value.item()
    return value

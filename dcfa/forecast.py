"""Forecast predictors: leads, lags and trailing time windows of a gridded field.

A forecast predicts the target at ``t + lead`` from the predictors known at ``t``. The
predictors are a field ``(time, lat, lon)`` and, optionally, its past: lagged copies
(:func:`lagged`, the field at ``t - lag``) and running means or sums over trailing windows
(:func:`trailing_windows`, the ``w`` samples ending at ``t``). Each adds one dim (``lag``,
``window``) to the field; every (variable, window, lag) combination is one *feature block*
(:func:`feature_blocks`) and a later aggregation must never put features of two blocks in one
group. :func:`lead_target` pairs the predictors with the target ``lead`` samples later and
reports the alignment (:class:`LeadAlignment`).

Everything here is xarray in, xarray out: dims, coordinates, names and attributes are kept, the
sample dim is trimmed to the samples where every lag or window is complete, and a Dask-backed
field stays lazy (slices, a rechunk onto the output's chunks and elementwise sums; nothing is
computed). A window's sum adds its samples one by one in a fixed order, so a field chunked any
way along time gives exactly (bit for bit) the in-memory result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["LeadAlignment", "feature_blocks", "lagged", "lead_target", "trailing_windows"]

BLOCK_DIMS = ("variable", "window", "lag")
"""Dims (or stacked coordinates) whose values separate feature blocks, by default."""

_AGGREGATES = ("mean", "sum")


########################################################################################
# validation


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


########################################################################################
# lagged copies and trailing windows (one kernel: shifted slices on the output's chunks)


def _shifted(field: xr.DataArray, shift: int, start: int, sample_dim: str):
    """The data of ``field`` at ``t - shift`` for the samples ``t >= start``.

    Returns the raw array (NumPy or Dask) of ``field.isel(sample_dim=slice(start - shift,
    n - shift))``, rechunked along ``sample_dim`` onto the chunks of the samples ``start:``, so
    every shift has the same chunks (stacking them does not fragment the chunks).
    """
    n = field.sizes[sample_dim]
    data = field.isel({sample_dim: slice(start - shift, n - shift)}).data
    if shift and _is_dask(data):
        axis = field.get_axis_num(sample_dim)
        target = field.isel({sample_dim: slice(start, None)}).data.chunks[axis]
        data = data.rechunk({axis: target})
    return data


def _is_dask(data) -> bool:
    return hasattr(data, "dask") and hasattr(data, "chunks") and hasattr(data, "rechunk")


def _stack_new_dim(
    blocks: list, field: xr.DataArray, start: int, sample_dim: str, dim: str, coord: dict
) -> xr.DataArray:
    """Stack same-shaped ``blocks`` along a new ``dim`` right after ``sample_dim``."""
    base = field.isel({sample_dim: slice(start, None)})
    axis = base.get_axis_num(sample_dim) + 1
    if any(_is_dask(b) for b in blocks):
        import dask.array

        data = dask.array.stack(blocks, axis=axis)
    else:
        data = np.stack(blocks, axis=axis)
    dims = (*base.dims[:axis], dim, *base.dims[axis:])
    out = xr.DataArray(data, dims=dims, coords=base.coords, name=base.name, attrs=base.attrs)
    return out.assign_coords({dim: xr.Variable(dim, coord["values"], attrs=coord["attrs"])})


def _lagged_array(field: xr.DataArray, lags: list[int], sample_dim: str) -> xr.DataArray:
    _check_new_dim(field, "lag")
    start = max(lags)
    blocks = [_shifted(field, lag, start, sample_dim) for lag in lags]
    coord = {"values": np.asarray(lags, dtype=np.int64), "attrs": _LAG_ATTRS}
    return _stack_new_dim(blocks, field, start, sample_dim, "lag", coord)


def _windows_array(
    field: xr.DataArray, windows: list[int], how: str, sample_dim: str
) -> xr.DataArray:
    _check_new_dim(field, "window")
    start = max(windows) - 1
    dtype = field.dtype if field.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    # the sum over the last w samples, for w = 1, 2, ..., max(windows): strictly left to
    # right from t, so any chunking rounds alike; any missing sample makes the window missing
    sums = {}
    total = None
    for k in range(max(windows)):
        piece = _shifted(field, k, start, sample_dim).astype(np.float64, copy=False)
        total = piece if total is None else total + piece
        if k + 1 in windows:
            sums[k + 1] = total
    blocks = [
        (sums[w] / w if how == "mean" else sums[w]).astype(dtype, copy=False) for w in windows
    ]
    coord = {"values": np.asarray(windows, dtype=np.int64), "attrs": _WINDOW_ATTRS}
    out = _stack_new_dim(blocks, field, start, sample_dim, "window", coord)
    out.attrs["window_aggregate"] = how
    return out


_LAG_ATTRS = {"long_name": "lag of the predictor behind its sample", "units": "samples"}
_WINDOW_ATTRS = {
    "long_name": "length of the trailing window ending at the sample",
    "units": "samples",
}


def _per_variable(
    ds: xr.Dataset, sample_dim: str, func: Callable[[Any, xr.DataArray], xr.DataArray]
) -> xr.Dataset:
    """``func(name, variable)`` on every data variable along ``sample_dim``; others kept."""
    if not any(sample_dim in v.dims for v in ds.data_vars.values()):
        raise ValueError(f"sample_dim: no data variable of the field has the dim {sample_dim!r}")
    out = {name: func(name, v) if sample_dim in v.dims else v for name, v in ds.data_vars.items()}
    return xr.Dataset(out, attrs=dict(ds.attrs))


def lagged(field: xr.DataArray | xr.Dataset, lags, *, sample_dim: str = "time"):
    """Stack lagged copies of ``field``: the predictor at ``t - lag`` for every lag.

    Parameters
    ----------
    field : DataArray or Dataset
        A field with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy). For a Dataset,
        every data variable along ``sample_dim`` is lagged; the others are kept as they are.
    lags : list of int
        Unique non-negative lags, in samples (``[0, 1, 2]``: this month, the month before and
        the one before that).
    sample_dim : str, default="time"
        The dim the lags run along.

    Returns
    -------
    DataArray or Dataset
        The field with a new dim ``lag`` (coordinate ``lags``, in the given order) right after
        ``sample_dim``: ``out.sel(lag=L)`` at sample ``t`` is ``field`` at ``t - L``. The first
        ``max(lags)`` samples (where a lag reaches before the start) are dropped; the others
        keep their coordinates, the name and the attributes. On Dask, every lag has the
        chunks of the lag-0 block.

    Raises
    ------
    ValueError
        Naming ``lags`` (not a list of unique non-negative ints, or as long as the field),
        ``sample_dim`` (not a dim of the field) or ``field`` (it already has a ``lag`` dim).

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=5, freq="MS")
    >>> x = xr.DataArray(np.arange(5.0), dims="time", coords={"time": time})
    >>> out = lagged(x, [0, 2])
    >>> out.sel(lag=2).values  # x at t - 2 for t = March, April, May
    array([0., 1., 2.])
    >>> out.sizes["time"]
    3
    """
    _check_sample_dim(field, sample_dim)
    lags = _int_list(lags, "lags", 0)
    _check_length(field, sample_dim, max(lags) + 1, "lags", lags)
    if isinstance(field, xr.Dataset):
        return _per_variable(field, sample_dim, lambda _, v: _lagged_array(v, lags, sample_dim))
    return _lagged_array(field, lags, sample_dim)


def _aggregates(aggregate, field) -> Callable[[Any], str]:
    """Which aggregate each variable gets: one for all, or per variable (Dataset only)."""
    if isinstance(aggregate, Mapping):
        if not isinstance(field, xr.Dataset):
            raise ValueError(
                "aggregate: a per-variable mapping needs a Dataset field; pass 'mean' or "
                "'sum' for a DataArray"
            )
        unknown = [k for k in aggregate if k not in field.data_vars]
        if unknown:
            raise ValueError(
                f"aggregate: {unknown} are not data variables of the field "
                f"({list(field.data_vars)})"
            )
        values = list(aggregate.values())
    else:
        values = [aggregate]
    for how in values:
        if not isinstance(how, str) or how not in _AGGREGATES:
            raise ValueError(f"aggregate: expected 'mean' or 'sum', got {how!r}")
    if isinstance(aggregate, Mapping):
        return lambda name: aggregate.get(name, "mean")
    return lambda name: aggregate


def trailing_windows(
    field: xr.DataArray | xr.Dataset,
    windows,
    *,
    aggregate: str | Mapping[str, str] = "mean",
    sample_dim: str = "time",
):
    """Running means (or sums) over trailing windows: the ``w`` samples ending at ``t``.

    Parameters
    ----------
    field : DataArray or Dataset
        A field with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy, and any
        chunking along ``sample_dim`` gives exactly the in-memory values). For a Dataset, every
        data variable along ``sample_dim`` is windowed; the others are kept as they are.
    windows : list of int
        Unique positive window lengths, in samples (``[1, 3, 6, 12]`` months; 1 is the field).
    aggregate : {"mean", "sum"} or dict, default="mean"
        ``"sum"`` for accumulated quantities (precipitation). A Dataset takes a mapping from
        variable name to ``"mean"`` or ``"sum"``; variables not in it are averaged.
    sample_dim : str, default="time"
        The dim the windows run along.

    Returns
    -------
    DataArray or Dataset
        The field with a new dim ``window`` (coordinate ``windows``, in the given order) right
        after ``sample_dim``. At sample ``t``, window ``w`` holds the mean (sum) of the field at
        ``t - w + 1, ..., t``; a window with any missing value is missing (NaN). The first
        ``max(windows) - 1`` samples (where the longest window is incomplete) are dropped for
        every window, so all blocks share one time axis. Coordinates, name and attributes are
        kept, with ``attrs["window_aggregate"]`` set to the aggregate. Float32 fields stay
        float32 (summed in float64); other dtypes give float64.

    Raises
    ------
    ValueError
        Naming ``windows`` (not unique positive ints, or longer than the field),
        ``aggregate`` (not ``"mean"``/``"sum"``, a mapping for a DataArray or naming unknown
        variables), ``sample_dim`` or ``field`` (it already has a ``window`` dim).

    Notes
    -----
    The window sums are built from the field shifted by ``0, 1, ..., max(windows) - 1``
    samples (each slice rechunked onto the output's chunks, so chunk boundaries are crossed
    lazily) and added one shift at a time in a fixed order: the same additions in the same
    order whatever the chunking. The mean is that sum divided by ``w``.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=5, freq="MS")
    >>> x = xr.DataArray([1.0, 2.0, 3.0, 4.0, 5.0], dims="time", coords={"time": time})
    >>> out = trailing_windows(x, [1, 3], aggregate="sum")
    >>> out.sel(window=3).values  # Jan-Mar, Feb-Apr, Mar-May
    array([ 6.,  9., 12.])
    >>> str(out.time.values[0])[:10]
    '2000-03-01'
    """
    _check_sample_dim(field, sample_dim)
    windows = _int_list(windows, "windows", 1)
    how = _aggregates(aggregate, field)
    _check_length(field, sample_dim, max(windows), "windows", windows)
    if isinstance(field, xr.Dataset):
        return _per_variable(
            field, sample_dim, lambda name, v: _windows_array(v, windows, how(name), sample_dim)
        )
    return _windows_array(field, windows, how(field.name), sample_dim)


########################################################################################
# feature blocks


def feature_blocks(
    da: xr.DataArray, sample_dim: str = "time", *, block_dims: Sequence[str] | None = None
) -> np.ndarray:
    """An integer block label per stacked feature: one block per (variable, window, lag).

    Features of different blocks measure different things (another variable, time scale or
    lag), so a feature aggregation given these labels must never put two blocks' features in
    one group: groups are formed within each block.

    Parameters
    ----------
    da : DataArray
        Predictors with a ``sample_dim``: unstacked (``time, lag, window, lat, lon``; a Dataset
        becomes one with ``ds.to_dataarray("variable")``) or already stacked to ``(time,
        feature)`` with the block dims among the stacked levels, after any ``dropna``.
    sample_dim : str, default="time"
    block_dims : list of str, optional
        Dims or stacked coordinates whose values separate blocks. By default those of
        ``("variable", "window", "lag")`` that ``da`` has; with none, every feature is in
        block 0.

    Returns
    -------
    ndarray of int64, shape (n_features,)
        Labels ``0 .. n_blocks - 1``, numbered in order of first appearance, for the features
        in the order :func:`dcfa.stacking.stack_features` (and ``.values.reshape(n, -1)`` on
        ``da.transpose(sample_dim, ...)``) flattens them: every dim but ``sample_dim``, in
        ``da``'s order.

    Raises
    ------
    ValueError
        Naming ``sample_dim`` or ``block_dims`` (a name that is no dim or coordinate of
        ``da``, or one along ``sample_dim``).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> x = xr.DataArray(np.zeros((4, 2, 3)), dims=("time", "window", "cell"),
    ...                  coords={"window": [1, 3]})
    >>> feature_blocks(x)
    array([0, 0, 0, 1, 1, 1])
    """
    if isinstance(da, xr.Dataset):
        raise TypeError(
            'da: expected a DataArray; make one block per variable with ds.to_dataarray("variable")'
        )
    _check_sample_dim(da, sample_dim)
    feature_dims = tuple(d for d in da.dims if d != sample_dim)
    sizes = {d: da.sizes[d] for d in feature_dims}
    n_features = int(np.prod(list(sizes.values()), dtype=np.int64))
    if block_dims is None:
        block_dims = [d for d in BLOCK_DIMS if d in da.dims or d in da.coords]
    elif isinstance(block_dims, str):
        block_dims = [block_dims]
    columns = []
    for name in block_dims:
        if name in da.coords:
            var = da.coords[name].variable
        elif name in da.dims:
            var = xr.Variable(name, np.arange(da.sizes[name]))
        else:
            raise ValueError(f"block_dims: {name!r} is no dim or coordinate of the predictors")
        if sample_dim in var.dims:
            raise ValueError(f"block_dims: {name!r} runs along the sample dim {sample_dim!r}")
        columns.append(var.set_dims(sizes).transpose(*feature_dims).values.ravel())
    if not columns:
        return np.zeros(n_features, dtype=np.int64)
    codes, _ = pd.MultiIndex.from_arrays(columns).factorize()
    return codes.astype(np.int64)


########################################################################################
# the target at t + lead


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

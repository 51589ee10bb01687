"""Predictors from a field's past: lagged copies (:func:`lagged`), running means or sums over
trailing windows (:func:`trailing_windows`) and the feature block of every (variable, window,
lag) combination (:func:`feature_blocks`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from dcfa._errors import InputError, InputTypeError, outside_stacklevel
from dcfa.forecast._checks import (
    _check_length,
    _check_new_dim,
    _check_sample_dim,
    _int_list,
    _label_steps,
)
from dcfa.io.calendars import date_label
from dcfa.neighbors import BLOCK_DIMS, block_labels
from dcfa.stacking import isel_positions

__all__ = ["BLOCK_DIMS", "feature_blocks", "lagged", "trailing_windows"]

_AGGREGATES = ("mean", "sum")


########################################################################################
# lagged copies and trailing windows (one kernel: shifted slices on the output's chunks)


def _rows(
    field: xr.DataArray, shifts: list[int], sample_dim: str, name: str, values: list[int]
) -> tuple[slice | np.ndarray, dict[int, slice | np.ndarray]]:
    """The samples ``t`` kept and, for every shift ``s``, the samples at ``t - s`` steps.

    Without gaps in the labels (or without labels on a regular step: positions) the samples
    ``t >= max(shifts)`` are kept, ``t - s`` is ``s`` positions earlier, and both are slices.
    When the labels have gaps (a month missing) or are stored in another order than time
    (latest-first), ``t - s`` is found by label
    (:func:`dcfa.forecast._checks._label_steps`), and a sample is kept when every shift of
    it is in the field; the samples dropped for a gap are counted in a warning (on a gappy
    daily record, 30-day windows lose most samples). Labels out of order on no regular step
    are refused.
    """
    n = field.sizes[sample_dim]
    start = max(shifts)
    labels = field.indexes.get(sample_dim)
    steps = None if labels is None else _label_steps(labels)
    if steps is None and labels is not None and not labels.is_monotonic_increasing:
        # counting positions in a field stored latest-first would take its future as its
        # past (lag 1 of December = January): refuse rather than leak
        raise InputError(
            f"field: its {sample_dim!r} labels do not increase and are on no regular time "
            f"step, so {name} cannot be counted by date; sort it first "
            f"(field.sortby({sample_dim!r}))"
        )
    if steps is None or np.array_equal(steps.keys[0], np.arange(n)):
        return slice(start, None), {s: slice(start - s, n - s) for s in shifts}
    keys = steps.keys[0]
    index = pd.Index(keys)
    source = {s: index.get_indexer(keys - s) for s in shifts}
    kept = np.flatnonzero(np.logical_and.reduce([src >= 0 for src in source.values()]))
    if kept.size == 0:
        order = np.argsort(keys, kind="stable")  # in time order, whatever the storage order
        jump = order[int(np.flatnonzero(np.diff(keys[order]) > 1)[0])]
        raise InputError(
            f"{name}: {values} leave no sample with all its {name} in the field: its "
            f"{sample_dim!r} labels have gaps (the first after {date_label(labels[jump])}) within "
            f"{steps.span(start)} before every sample"
        )
    _warn_of_gaps(keys, kept, start, labels, name, values)
    return isel_positions(kept), {s: isel_positions(src[kept]) for s, src in source.items()}


#: how the warning of samples dropped at gaps begins (the batch job counts them itself)
DROPPED_AT_GAPS = "samples dropped at gaps"


def _warn_of_gaps(keys, kept, start: int, labels, name: str, values) -> None:
    """Warn of the samples dropped because a shift reaches a step missing from the labels
    (not those whose shifts reach before the record: that is every field's edge)."""
    inside = keys - start >= keys.min()
    lost = inside.copy()
    lost[kept] = False
    if not lost.any():
        return
    first = labels[np.flatnonzero(lost)[np.argmin(keys[lost])]]
    warnings.warn(
        f"{name}: {int(lost.sum())} of {int(inside.sum())} {DROPPED_AT_GAPS} ("
        f"{lost.sum() / inside.sum():.0%}): their {name} {values} reach a date missing from "
        f"the field (the first such sample {date_label(first)}). Fill the short gaps first "
        "(reindex to every step, then interpolate_na with a max_gap), or use shorter "
        f"{name}",
        UserWarning,
        stacklevel=outside_stacklevel(),
    )


def _shifted(field: xr.DataArray, source, kept, shift: int, sample_dim: str):
    """The data of ``field`` at the samples ``source`` (``t - shift`` of the samples kept).

    Returns the raw array (NumPy or Dask) of ``field.isel(sample_dim=source)``, rechunked along
    ``sample_dim`` onto the chunks of the samples ``kept``, so every shift has the same chunks
    (stacking them does not fragment the chunks).
    """
    data = field.isel({sample_dim: source}).data
    if shift and _is_dask(data):
        axis = field.get_axis_num(sample_dim)
        target = field.isel({sample_dim: kept}).data.chunks[axis]
        data = data.rechunk({axis: target})
    return data


def _is_dask(data) -> bool:
    return hasattr(data, "dask") and hasattr(data, "chunks") and hasattr(data, "rechunk")


def _stack_new_dim(
    blocks: list, field: xr.DataArray, kept, sample_dim: str, dim: str, coord: dict
) -> xr.DataArray:
    """Stack same-shaped ``blocks`` along a new ``dim`` right after ``sample_dim``."""
    base = field.isel({sample_dim: kept})
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
    kept, rows = _rows(field, lags, sample_dim, "lags", lags)
    blocks = [_shifted(field, rows[lag], kept, lag, sample_dim) for lag in lags]
    coord = {"values": np.asarray(lags, dtype=np.int64), "attrs": _LAG_ATTRS}
    return _stack_new_dim(blocks, field, kept, sample_dim, "lag", coord)


def _windows_array(
    field: xr.DataArray, windows: list[int], how: str, sample_dim: str
) -> xr.DataArray:
    _check_new_dim(field, "window")
    kept, rows = _rows(field, list(range(max(windows))), sample_dim, "windows", windows)
    dtype = field.dtype if field.dtype in (np.float32, np.float64) else np.dtype(np.float64)
    # the sum over the last w samples, for w = 1, 2, ..., max(windows): strictly left to
    # right from t, so any chunking rounds alike; any missing sample makes the window missing
    sums = {}
    total = None
    for k in range(max(windows)):
        piece = _shifted(field, rows[k], kept, k, sample_dim).astype(np.float64, copy=False)
        total = piece if total is None else total + piece
        if k + 1 in windows:
            sums[k + 1] = total
    blocks = [
        (sums[w] / w if how == "mean" else sums[w]).astype(dtype, copy=False) for w in windows
    ]
    coord = {"values": np.asarray(windows, dtype=np.int64), "attrs": _WINDOW_ATTRS}
    out = _stack_new_dim(blocks, field, kept, sample_dim, "window", coord)
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
        raise InputError(f"sample_dim: no data variable of the field has the dim {sample_dim!r}")
    out = {name: func(name, v) if sample_dim in v.dims else v for name, v in ds.data_vars.items()}
    return xr.Dataset(out, attrs=dict(ds.attrs))


def lagged(
    field: xr.DataArray | xr.Dataset, lags: list[int], *, sample_dim: str = "time"
) -> xr.DataArray | xr.Dataset:
    """Stack lagged copies of ``field``: the predictor at ``t - lag`` for every lag.

    Parameters
    ----------
    field : DataArray or Dataset
        A field with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy). For a Dataset,
        every data variable along ``sample_dim`` is lagged; the others are kept as they are.
    lags : list of int
        Unique non-negative lags, in time steps of the sample labels, as
        :func:`lead_target`'s ``lead`` (``[0, 1, 2]`` on monthly dates: this month, the month
        before and the one before that, by date, across gaps of the labels); in samples when
        the field has no labels on a regular step.
    sample_dim : str, default="time"
        The dim the lags run along.

    Returns
    -------
    DataArray or Dataset
        The field with a new dim ``lag`` (coordinate ``lags``, in the given order) right after
        ``sample_dim``: ``out.sel(lag=L)`` at sample ``t`` is ``field`` at ``t - L``. The first
        ``max(lags)`` samples (where a lag reaches before the start) are dropped, and, when
        the labels have gaps (a month missing), every sample a lag of which falls in a gap;
        the others keep their coordinates, the name and the attributes. A field stored
        latest-first is lagged by date too (its earliest samples are dropped, its order is
        kept); one whose labels are out of order on no regular step is refused. On Dask,
        every lag has the chunks of the lag-0 block.

    Raises
    ------
    ValueError
        Naming ``lags`` (not a list of unique non-negative ints, or as long as the field),
        ``sample_dim`` (not a dim of the field) or ``field`` (it already has a ``lag`` dim,
        or its labels are out of order on no regular time step).

    Warns
    -----
    UserWarning
        When samples are dropped because a lag reaches a date missing from the labels, with
        their count and share.

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
            raise InputError(
                "aggregate: a per-variable mapping needs a Dataset field; pass 'mean' or "
                "'sum' for a DataArray"
            )
        unknown = [k for k in aggregate if k not in field.data_vars]
        if unknown:
            raise InputError(
                f"aggregate: {unknown} are not data variables of the field "
                f"({list(field.data_vars)})"
            )
        values = list(aggregate.values())
    else:
        values = [aggregate]
    for how in values:
        if not isinstance(how, str) or how not in _AGGREGATES:
            raise InputError(f"aggregate: expected 'mean' or 'sum', got {how!r}")
    if isinstance(aggregate, Mapping):
        return lambda name: aggregate.get(name, "mean")
    return lambda name: aggregate


def trailing_windows(
    field: xr.DataArray | xr.Dataset,
    windows: list[int],
    *,
    aggregate: str | Mapping[str, str] = "mean",
    sample_dim: str = "time",
) -> xr.DataArray | xr.Dataset:
    """Running means (or sums) over trailing windows: the ``w`` samples ending at ``t``.

    Parameters
    ----------
    field : DataArray or Dataset
        A field with a ``sample_dim`` (NumPy or Dask; a Dask field stays lazy, and any
        chunking along ``sample_dim`` gives exactly the in-memory values). For a Dataset, every
        data variable along ``sample_dim`` is windowed; the others are kept as they are.
    windows : list of int
        Unique positive window lengths, in time steps of the sample labels as ``lags``
        (``[1, 3, 6, 12]`` months on monthly dates; 1 is the field).
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
        every window, and, when the labels have gaps (a month missing), every sample whose
        longest window reaches into a gap, so all blocks share one time axis (a field stored
        latest-first is windowed by date too, its order kept). Coordinates,
        name and attributes are kept, with ``attrs["window_aggregate"]`` set to the
        aggregate. Float32 fields stay float32 (summed in float64); other dtypes give float64.

    Raises
    ------
    ValueError
        Naming ``windows`` (not unique positive ints, or longer than the field),
        ``aggregate`` (not ``"mean"``/``"sum"``, a mapping for a DataArray or naming unknown
        variables), ``sample_dim`` or ``field`` (it already has a ``window`` dim, or its
        labels are out of order on no regular time step).

    Warns
    -----
    UserWarning
        When samples are dropped because a window reaches a date missing from the labels,
        with their count and share (on a daily record missing 5 % of its days at random,
        30-day windows drop about four samples in five).

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
        raise InputTypeError(
            'da: expected a DataArray; make one block per variable with ds.to_dataarray("variable")'
        )
    _check_sample_dim(da, sample_dim)
    feature_dims = tuple(d for d in da.dims if d != sample_dim)
    if isinstance(block_dims, str):
        block_dims = [block_dims]
    for name in block_dims or ():
        if name not in da.coords and name not in da.dims:
            raise InputError(f"block_dims: {name!r} is no dim or coordinate of the predictors")
        if name in da.coords and sample_dim in da.coords[name].dims:
            raise InputError(f"block_dims: {name!r} runs along the sample dim {sample_dim!r}")
    coords = {k: c.variable for k, c in da.coords.items() if sample_dim not in c.dims}
    return block_labels(feature_dims, tuple(da.sizes[d] for d in feature_dims), coords, block_dims)

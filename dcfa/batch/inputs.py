"""The job's inputs as the passes read them: the field's time scales (``input.windows``,
``input.lags``), the target ``target.lead`` steps later, what is predicted from what, and a
store whose chunks cannot be decoded named as bad input."""

from __future__ import annotations

import contextlib
import os
import warnings

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa._terminal import first_labels
from dcfa.batch.config import select_names
from dcfa.stacking import ensemble_dim, ensemble_text, single_members

__all__ = [
    "InputDataError",
    "alignment",
    "check_anomaly_months",
    "drop_samples",
    "in_target_months",
    "months_absent",
    "reading",
    "select_cells",
    "target_at_lead",
    "time_scales",
]


class InputDataError(InputError):
    """Bad input data found by a pass (no data at all, an undecodable chunk): the run's work
    directory, finished passes included, is removed (nothing of it is worth resuming)."""


def drop_samples(field: xr.DataArray, inp: dict) -> tuple[xr.DataArray, list]:
    """The field without the samples ``input.drop_time`` names (each label as ``sel`` takes
    it: a partial date names every sample inside it), and the labels left out; bad input
    when a label names no sample, or every sample is left out."""
    from dcfa.io.calendars import date_label

    dim, labels = inp["sample_dim"], inp["drop_time"]
    if not labels:
        return field, []
    axis = field[dim]
    out = []
    for label in labels:
        try:
            found = np.atleast_1d(axis.sel({dim: label}).values)
        except (KeyError, ValueError, TypeError) as exc:
            span = f"{date_label(axis.values[0])} .. {date_label(axis.values[-1])}"
            raise InputError(
                f"input.drop_time: {label!r} names no sample of {dim!r} ({span}"
                + (", with input.time" if inp["time"] else "")
                + f"): {type(exc).__name__}"
            ) from None
        out.extend(v for v in found if v not in out)
    if len(out) == axis.size:
        raise InputError(f"input.drop_time: {labels} leaves out every sample of {dim!r}")
    return field.drop_sel({dim: out}), out


def select_cells(field: xr.DataArray, inp: dict) -> tuple[xr.DataArray, str]:
    """The field within the box ``input.select`` gives (``{lat = [-30, 30], lon = [120, 290]}``:
    the labels of each grid dim between two values, a longitude's eastward from the first).
    A box across the seam of the stored longitudes (``[-30, 30]`` on 0..360) is taken
    eastward and written in the convention that keeps it increasing (-180..180 there), so
    its cells lie side by side as on the globe. Returns the field and what was kept, in words
    (``lat 61 of 180 (-30 .. 30)``; empty without a box). Bad input names the key; so does
    a grid that still holds several members of an ensemble (:func:`dcfa.stacking.ensemble_dim`),
    which the job would take for cells. One member left is a label, its dim dropped."""
    from dcfa.geo import box_positions, is_longitude, wrap_longitude

    dim = inp["sample_dim"]
    grid = [d for d in field.dims if d != dim]
    kept = []
    for name, bounds in inp["select"].items():
        key = f"input.select.{name}"
        if name == dim:
            raise InputError(f"{key}: the samples are selected by input.time, not input.select")
        if name not in grid:
            raise InputError(f"{key}: {name!r} is not a dim of the archive's grid {tuple(grid)}")
        coord = field.coords.get(name)
        names = select_names(bounds)
        if names is not None:
            field, text = _select_named(field, name, names, key)
            kept.append(text)
            continue
        if coord is None or coord.dims != (name,) or coord.dtype.kind not in "iuf":
            raise InputError(f"{key}: {name!r} has no coordinate of numbers to select by")
        longitude = is_longitude(name, coord.attrs)
        positions = box_positions(coord.values, bounds, longitude=longitude)
        if not positions.size:
            raise InputError(
                f"{key}: no {name!r} label lies within {list(bounds)} (they run "
                f"{coord.values[0]:g} .. {coord.values[-1]:g})"
            )
        field = field.isel({name: positions})
        if longitude and (np.diff(positions) != 1).any():
            for lower in (0.0, -180.0):
                labels = wrap_longitude(field[name].values, lower)
                if (np.diff(labels) > 0).all():
                    field = field.assign_coords({name: field[name].copy(data=labels)})
                    break
        labels = field[name].values
        kept.append(f"{name} {positions.size} of {coord.size} ({labels[0]:g} .. {labels[-1]:g})")
    members = ensemble_dim(field, grid)
    if members is not None:
        raise InputError(
            f"input.store: {ensemble_text(members, field.sizes[members])}. The job fits one "
            f"member: keep one with input.select = {{{members} = [k, k]}} (for labels that "
            "are numbers), or write one member's store"
        )
    # one member left is a label: the result then applies to any member's store
    return field.squeeze(single_members(field), drop=True), ", ".join(kept)


def _select_named(field: xr.DataArray, name: str, wanted: list, key: str):
    """``field`` with the labels ``wanted`` of ``name`` (names, such as member ids), in that
    order, and what was kept, in words; a label the archive lacks is named."""
    coord = field.coords.get(name)
    labels = [] if coord is None or coord.dims != (name,) else [str(v) for v in coord.values]
    missing = [w for w in wanted if w not in labels]
    if missing:
        raise InputError(
            f"{key}: {missing} not among the {name!r} labels of the archive "
            f"({first_labels(labels)})"
        )
    chosen = field.isel({name: [labels.index(w) for w in wanted]})
    return chosen, f"{name} {len(wanted)} of {len(labels)} ({', '.join(wanted)})"


def months_absent(labels: xr.DataArray) -> tuple[int, str] | None:
    """How many calendar months within the span of monthly ``labels`` have no sample (a file
    of the archive missing), and the first run of them (``1900-01 .. 1949-12``); None when
    none is missing, the labels are not monthly (not dates, several a month) or hold some
    calendar months only (the winters)."""
    from dcfa.io.calendars import calendar_of, sample_keys

    calendar = calendar_of(labels)
    if calendar is None or labels.size < 2:
        return None
    keys = np.asarray(sample_keys(labels, calendar, "month"))
    if np.unique(keys).size < keys.size:  # daily or sub-monthly samples: no months to count
        return None
    if np.unique(keys % 12).size < 12:  # some calendar months only (winters): by design
        return None
    keys = np.sort(keys)
    step = np.diff(keys)
    if step.min() != 1 and np.median(step) != 1:  # seasonal or yearly samples
        return None
    holes = np.flatnonzero(step > 1)
    if not holes.size:
        return None
    first, last = keys[holes[0]] + 1, keys[holes[0] + 1] - 1
    run = f"{first // 12:04d}-{first % 12 + 1:02d}"
    if last > first:
        run += f" .. {last // 12:04d}-{last % 12 + 1:02d}"
    return int((step[holes] - 1).sum()), run


def time_scales(field: xr.DataArray, inp: dict) -> xr.DataArray:
    """``input.windows`` (trailing running means or sums) and ``input.lags`` (earlier
    samples), lazily; each window and lag is its own feature block (``window`` / ``lag``
    dims: groups never mix them, :data:`dcfa.neighbors.BLOCK_DIMS`)."""
    from dcfa.forecast.predictors import DROPPED_AT_GAPS

    try:
        with warnings.catch_warnings():  # the job counts the samples kept in its own terms
            warnings.filterwarnings("ignore", f".*{DROPPED_AT_GAPS}", UserWarning)
            return _windows_and_lags(field, inp)
    except InputError as exc:  # the forecast functions name their arguments: name the keys
        text = str(exc)
        if text.startswith(("lags:", "windows:")):
            raise InputError(f"input.{text}") from None
        raise


def _windows_and_lags(field: xr.DataArray, inp: dict) -> xr.DataArray:
    from dcfa.forecast import lagged, trailing_windows

    dim, windows, lags, agg = inp["sample_dim"], inp["windows"], inp["lags"], inp["aggregate"]
    if windows != [1]:
        per = agg if isinstance(agg, dict) else {}
        if "variable" in field.dims and per:
            parts = [
                trailing_windows(
                    field.sel(variable=[v]), windows, aggregate=per.get(v, "mean"), sample_dim=dim
                )
                for v in inp["variables"]
            ]
            field = xr.concat(parts, dim="variable").transpose(*parts[0].dims)
        else:
            how = per.get(inp["variables"][0], "mean") if per else agg
            field = trailing_windows(field, windows, aggregate=how, sample_dim=dim)
    if lags != [0]:
        field = lagged(field, lags, sample_dim=dim)
    return field


def target_at_lead(
    target: xr.DataArray, lead: int, dim: str, predictors: xr.DataArray, match: str = "exact"
):
    """The target ``lead`` steps of its dates later (months for monthly dates: a month missing
    from the file is skipped by date, never by row), labelled with the dates of
    ``predictors`` (the input's sample coordinate) it is predicted from, the dates the values
    belong to (:func:`dcfa.lead_target` of the input's dates, with ``match``), the step
    ``lead`` counts (``"month"`` for monthly dates), and the input dates dropped because
    their target falls in a gap of the target's dates (their count and the first). Every
    input date whose target ``lead`` steps on exists is kept, whether or not the target has
    a value at that date itself."""
    from dcfa.forecast import lead_target

    valid = target[dim].values
    if not lead:
        return target, valid, "sample", (0, None)
    if lead >= valid.size - 3:
        raise InputError(
            f"target.lead = {lead} (time steps of the dates) leaves at most "
            f"{max(valid.size - lead, 0)} of the target's {valid.size} values to predict; "
            "need >= 4"
        )
    dates = xr.DataArray(np.zeros(predictors.size), dims=dim, coords={dim: predictors.values})
    try:
        _, later, how = lead_target(dates, target, lead, sample_dim=dim, min_samples=4, match=match)
    except InputError as exc:  # in the job file's keys: the lead, or the target's dates
        said = str(exc)
        if said.startswith("target: "):  # lead_target's field is the job's input
            said = said.removeprefix("target: ").replace("the field's", "the input's")
            raise InputError(f"target.path: {said}") from None
        raise InputError(f"target.lead = {lead}: {said.removeprefix('lead: ')}") from None
    gaps = (how.n_gaps, how.first_gap)
    return later.drop_vars("target_time"), later["target_time"].values, how.step, gaps


def in_target_months(target: xr.DataArray, valid, months: list) -> tuple[xr.DataArray, np.ndarray]:
    """``target`` (1-D) with its values outside ``target.months`` missing, by the calendar
    month of ``valid`` (the dates its values belong to, :func:`target_at_lead`'s), and which
    of its samples those are."""
    from dcfa.io.calendars import months_of

    when = xr.DataArray(np.asarray(valid), dims="sample", name=target.dims[0])
    outside = ~np.isin(months_of(when, "target.months", "calendar months need dates"), months)
    return target.where(xr.DataArray(~outside, dims=target.dims)), outside


def check_anomaly_months(field: xr.DataArray, dim: str, lead: int) -> None:
    """``input.anomalies`` subtract each calendar month's mean over the samples: a month
    present once would have anomalies of 0 in every cell. Refused before any pass, naming
    the months and the record (a long ``target.lead`` leaves few samples)."""
    from dcfa.io.calendars import months_of, months_once

    months = months_of(field[dim], "input.anomalies")
    once = months_once(months)
    if not once:
        return
    at = f" at target.lead = {lead}" if lead else ""
    raise InputError(
        f"input.anomalies: the {months.size} samples the input and the target have in common"
        f"{at} hold {', '.join(once)} only once: the anomalies from a "
        "monthly climatology would be 0 in every cell of those months. Monthly anomalies "
        "need each month at least twice (two years of samples); set input.anomalies = false"
        + (", or a shorter target.lead" if lead else "")
    )


def alignment(
    field,
    valid: np.ndarray,
    lead: int,
    step: str,
    n_input: int,
    inp: dict,
    dim: str,
    gaps: tuple = (0, None),
    history: tuple[int, int] = (0, 0),
) -> str:
    """What is predicted from what: the first and last predictor dates, their targets', the
    samples kept of the ``n_input`` predictors (after the windows and lags), those dropped at
    a gap of the target's dates (``gaps``: their count and the first), and the archive's
    first samples that only feed the windows and lags (``history``: how many, of how many);
    the others the windows and lags leave out reach a month missing from the archive."""
    from dcfa.forecast import LeadAlignment

    text = str(
        LeadAlignment(
            lead=lead,
            step=step,
            n_samples=int(field.sizes[dim]),
            n_input=n_input,
            first_predictor=field[dim].values[0],
            last_predictor=field[dim].values[-1],
            first_target=valid[0],
            last_target=valid[-1],
            n_gaps=gaps[0],
            first_gap=gaps[1],
        )
    )
    if inp["windows"] != [1]:
        text += f"; windows {inp['windows']} ({inp['aggregate']})"
    if inp["lags"] != [0]:
        text += f"; lags {inp['lags']}"
    first, n_kept = history
    at_gaps = n_kept - first - n_input
    reach = f"{'reaches' if at_gaps == 1 else 'reach'} a month it misses"
    if first > 0:
        text += f" (the archive's first {first} of {n_kept} samples only feed them"
        text += f"; {at_gaps} more {reach})" if at_gaps > 0 else ")"
    elif at_gaps > 0:
        text += f" ({at_gaps} of the archive's {n_kept} samples {reach})"
    return text


@contextlib.contextmanager
def reading(store: str, variables: list[str], key: str = "input.store"):
    """Name the store (as ``key``) when a chunk of it cannot be decoded (a truncated or
    corrupt file gives a codec's bare error, raised on a worker, that names no path): bad
    input, not a fault."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, InputError) or not _from_codec(exc):
            raise
        raise InputDataError(
            f"{key}: a chunk of {variables} in {store!r} cannot be decoded (a truncated "
            f"or corrupt file?): {type(exc).__name__}: {exc}"
        ) from exc


def _from_codec(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if "/zarr/codecs/" in name or "numcodecs" in name or "/zarr/abc/codec" in name:
            return True
        tb = tb.tb_next
    return False

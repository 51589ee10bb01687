"""``dcfa apply``: a fitted result's region series for other months, written to a new store.

:func:`apply_result` checks an archive against a result loaded by
:func:`~dcfa.batch.results.load_result` (grid, variables, calendar months of the climatology)
and writes the series, and the GBMAP embedding and prediction, to a new store, atomically,
never over, into or around its inputs (:mod:`dcfa.storage.store`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time as _time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import dask.array as da
import xarray as xr

from dcfa import _version, io
from dcfa._compute import active_client
from dcfa._errors import InputError, NoSkillWarning, outside_stacklevel
from dcfa._terminal import counted
from dcfa.batch.destination import APPLIED, PYTHON_NAMES, check_applied_output
from dcfa.batch.fitted import FittedResult, far_from_training, members_hint, regression_text
from dcfa.batch.output import missing_chunk_lines, result_skill, skill_text
from dcfa.batch.results import load_result
from dcfa.io.archive import open_store, open_zarr, take_record
from dcfa.io.calendars import calendar_of, date_span
from dcfa.io.result import stamped, uniform_chunks, write_into
from dcfa.io.sources import location
from dcfa.stacking import single_members


def apply_result(
    result: str | os.PathLike | FittedResult,
    archive: str | os.PathLike,
    output: str | os.PathLike,
    *,
    overwrite: bool = False,
    time: tuple[Any, Any] | None = None,
    storage_options: dict | None = None,
    echo: Callable[..., None] = print,
    _names: dict | None = None,
) -> Path | str:
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
        The store to write: ``features`` ``(sample_dim, group)`` float32, ``forecast``
        ``(sample_dim,)`` (:meth:`FittedResult.forecast`: the target at ``t + lead``
        predicted from the features of ``t``; the coordinate ``target_time`` holds
        ``t + lead``), and with a GBMAP
        ``embedding`` ``(sample_dim, boost)`` float32 and ``prediction`` (with
        ``decision_function`` for a classifier); attributes name the result and the archive,
        whose own attributes are kept (dcfa's over any of the same name, a line added to
        its ``history``), as are its labels of one value (a member kept) on each variable.
    time : (start, stop), optional
        Only the samples between these labels (inclusive), selected after the result's
        windows and lags are computed: the archive must hold the ``history`` samples before
        the first one (:meth:`FittedResult.transform`).
    storage_options : dict, optional
        fsspec options for URLs (the result, the archive and the output).

    Returns
    -------
    The output's path (a Path, or the URL).

    Raises
    ------
    ValueError
        Bad input, naming the argument: an unknown URL protocol, another grid, a missing
        variable, samples finer than the result's or in months its climatology lacks, a
        chunk of the archive that cannot be decoded. A KeyboardInterrupt says nothing was
        written (the temporary store is removed).

    Warns
    -----
    dcfa.NoSkillWarning
        When the result's map did not beat the climatology in its selection's folds (its
        ``cv_r2``, as ``dcfa inspect`` shows it).
    UserWarning
        When the written series lie far outside the result's own (:func:`far_from_training`):
        a field in other units whose variable has no ``units`` attribute to check.
    """
    try:
        return _apply(result, archive, output, overwrite, time, storage_options, echo, _names)
    except KeyboardInterrupt:
        # the command line's default advice (--resume) is the batch job's: apply has none
        raise KeyboardInterrupt(
            "nothing was written (a temporary store is removed); run dcfa apply again"
        ) from None


def _apply(
    result,
    archive,
    output,
    overwrite: bool,
    time,
    storage_options: dict | None,
    echo,
    _names: dict | None,
):
    """:func:`apply_result`'s steps (the same arguments)."""
    t0 = _time.perf_counter()
    names = _names or PYTHON_NAMES
    loaded = isinstance(result, FittedResult)
    so = storage_options or None
    out = check_applied_output(
        result.path if loaded else result,
        archive,
        output,
        overwrite=overwrite,
        names=names,
        storage_options=so,
        loaded=loaded,
    )
    fitted = result if loaded else load_result(result, so, _key=names["result"])
    field, archive_attrs = _open(fitted, archive, names, so)
    absent = take_record(field, "missing_chunks")
    take_record(field, "variable_attrs")  # checked above, on the store's own metadata
    client = active_client()
    if client is not None and isinstance(field.data, da.Array):
        # sent to the workers once, not in the graph: 26 MB for a forecast job at 1 degree
        fitted = replace(
            fitted, preprocessing=fitted.preprocessing.held(client, dict(field.chunksizes))
        )
    # the windows and lags first, then the samples of time (they reach back before it)
    features = fitted.transform(field, time=time, _names=names)
    dim = fitted.sample_dim
    data = {"features": features.astype("float32").rename(None)}
    data["features"].attrs = dict(features.attrs)
    if fitted.regression is not None:
        data["forecast"] = fitted.forecast_of(features).rename(None)
    else:
        echo(f"      note: no forecast: {fitted.regression_missing}")
    gbmap = fitted.gbmap
    if gbmap is not None:  # NaN in the samples that miss a group's series
        outputs = {k: v.rename(None) for k, v in fitted.gbmap_outputs(features).items()}
        data["embedding"] = outputs["embedding"].astype("float32")
        data["embedding"].attrs = {"long_name": "GBMAP embedding (f_1(x), ..., f_m(x))"}
        data["prediction"] = outputs["prediction"]  # a regressor's in the target's units
        if "decision_function" in outputs:  # a classifier's (FittedResult.gbmap_outputs)
            data["decision_function"] = outputs["decision_function"]
            data["decision_function"].attrs = {"long_name": "GBMAP score (logit)"}
            data["prediction"].attrs = {"long_name": "GBMAP prediction of the target"}
    elif fitted.gbmap_missing:
        echo(f"      note: the GBMAP is not applied: {fitted.gbmap_missing}")
    span = date_span(features[dim], calendar_of(features[dim]), "exact")
    n_samples = int(features.sizes[dim])
    attrs = {
        "dcfa_version": _version.__version__,
        # provenance that still names the stores when read from another directory
        "result": _absolute(fitted.path),
        "archive": _absolute(archive),
        "method": fitted.method,
        "variables": json.dumps(fitted.variables),
        "samples": span,
        "n_samples": n_samples,
        "n_groups": fitted.n_groups,
        # the predictors of sample t; the target they (and the prediction) are for: t + lead
        "lead": fitted.lead,
        "lead_step": fitted.lead_step,
        "windows": json.dumps(fitted.windows),
        "lags": json.dumps(fitted.lags),
    }
    if time is not None:
        attrs["time"] = json.dumps([str(t) for t in time])
    if absent:
        attrs["missing_chunks"] = json.dumps(absent)
    dataset = xr.Dataset(data, attrs=_with_archive_attrs(attrs, archive_attrs, archive))
    echo(
        f"[1/2] {fitted.path}: {fitted.method}, {counted(fitted.n_groups, 'group')}"
        + (
            f", forecast by {regression_text(fitted.regression)}"
            if fitted.regression is not None
            else ""
        )
        + (f", GBMAP of {gbmap.coef_.shape[0]} learners" if gbmap is not None else "")
        + f"; {location(archive)}: {fitted.variables}, {span}"
        + (
            f"; windows {fitted.windows}, lags {fitted.lags} (each sample needs the "
            f"{fitted.history} before it)"
            if fitted.added_dims
            else ""
        )
        + (
            f"; lead {fitted.lead_text}: for the target at t + {fitted.lead_text}"
            if fitted.lead
            else ""
        )
        + (
            f"; the samples for the target's months {fitted.target_months} (target.months)"
            if fitted.target_months
            else ""
        )
    )
    from dcfa.batch.inputs import months_absent, reading

    holes = months_absent(features[dim])  # as dcfa fit says it of its archive
    if holes:
        echo(
            f"      note: no series in {counted(holes[0], 'month')} within the span written (the "
            f"first {holes[1]}): months missing from the archive, or whose windows and lags "
            "reach one"
        )
    for line in missing_chunk_lines(absent):
        echo(f"      {line}")
    skill = result_skill(fitted.attrs)
    if skill is not None and not skill.skilful:
        warnings.warn(
            f"{names['result']}: {skill_text(skill)}. Its series"
            + (" and forecast" if "forecast" in data else "")
            + " predict the target no better than the climatology",
            NoSkillWarning,
            stacklevel=outside_stacklevel(),
        )
    # reading: an undecodable chunk is exit 2, naming the archive
    with reading(str(location(archive)), fitted.variables, names["archive"]):
        _write(out, dataset, overwrite, names, so)
    # dcfa's reader: dates past 2262 or in a model calendar are cftime, without a warning
    written = open_zarr(out, names["output"], storage_options=so if isinstance(out, str) else None)
    gaps = int(written["features"].isnull().any("group").sum())
    url = isinstance(location(fitted.path), str)
    trained = open_zarr(fitted.path, names["result"], storage_options=so if url else None)
    blocks = trained["group_units"].values if "group_units" in trained.coords else None
    far = far_from_training(written["features"].values, trained["features"].values, blocks)
    if far:
        units = json.loads(fitted.attrs.get("input_units", "{}"))
        fitted_in = ", ".join(f"{v!r} in {u!r}" for v, u in units.items()) or "no units"
        warnings.warn(
            f"{names['archive']}: the series of {str(location(archive))!r} {far}, far outside "
            f"what the result was fitted on: a field in other units than the result's "
            f"({fitted_in}) or of another quantity does this (a variable without a units "
            "attribute is not checked)",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
    echo(
        f"[2/2] {out}: {counted(n_samples, 'sample')} x {counted(fitted.n_groups, 'group')}"
        + (f" ({gaps} samples with a missing group value)" if gaps else "")
        + f" in {_time.perf_counter() - t0:.1f} s"
    )
    return out


def _open(fitted: FittedResult, archive, names: dict, so) -> tuple[xr.DataArray, dict]:
    """The archive's variables as the job opens its input (every sample: ``time`` is
    selected after the windows and lags, by :meth:`FittedResult.transform`), and the
    archive's global attributes."""
    key = names["archive"]
    loc = location(archive)  # there: check_applied_output said so
    so = so if isinstance(loc, str) else None  # fsspec options are for URLs
    ds = open_store(loc, key, storage_options=so)
    missing = [v for v in fitted.variables if v not in ds.data_vars]
    if missing:
        raise InputError(
            f"{key}: variable(s) {missing} of the result are not in {str(loc)!r} (it has "
            f"{sorted(map(str, ds.data_vars))})"
        )
    fitted.check_units(ds, key, where=f" in {str(loc)!r}")
    for v in fitted.variables:
        dims = tuple(ds[v].dims)
        if fitted.sample_dim not in dims:
            raise InputError(
                f"{key}: {v!r} has dims {dims}, without the result's sample dim "
                f"{fitted.sample_dim!r}"
            )
        expect = fitted.archive_grid
        if len(fitted.variables) > 1:  # open_archive stacks them along "variable"
            expect = tuple(d for d in expect if d != "variable")
        one = single_members(ds[v], expect)  # taken by transform
        grid = tuple(d for d in dims if d != fitted.sample_dim and d not in one)
        if set(grid) != set(expect):
            raise InputError(
                f"{key}: {v!r} has grid dims {grid}, the result's grid is {expect}"
                + members_hint(ds[v], set(grid) - set(expect))
            )
    try:
        field = io.open_archive(
            loc, fitted.variables, sample_dim=fitted.sample_dim, storage_options=so, opened=ds
        )
    except InputError as exc:  # messages of the job's keys, about this archive
        text = str(exc)
        for prefix in ("input.variables: ", "input.store: "):
            text = text.removeprefix(prefix)
        raise InputError(f"{key}: {text}") from None
    return field, dict(ds.attrs)


def _with_archive_attrs(attrs: dict, archive_attrs: dict, archive) -> dict:
    """The output's attributes: the archive's (a model run's ``experiment_id``, ...), then
    dcfa's over any of the same name, and a line added to the archive's ``history`` as CF
    asks of a program that derives data."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = f"{stamp}: dcfa apply {attrs['result']} {_absolute(archive)}"
    history = str(archive_attrs.get("history", "")).rstrip("\n")
    kept = {k: v for k, v in archive_attrs.items() if k not in attrs and k != "history"}
    return {**kept, **attrs, "history": f"{history}\n{line}" if history else line}


def _write(out, dataset: xr.Dataset, overwrite: bool, names: dict, so) -> None:
    """As :func:`dcfa.io.write_result` writes a result: atomically, one compute."""
    from dcfa.batch.destination import NO_ROOM
    from dcfa.storage.store import atomic_store

    kw = {"storage_options": so} if isinstance(out, str) and so else {}
    dataset = stamped(uniform_chunks(dataset), APPLIED)
    try:
        with atomic_store(
            out, overwrite=overwrite, key=names["output"], kinds=(APPLIED,), **kw
        ) as tmp:
            write_into(dataset, tmp, **kw)
    except OSError as exc:
        if exc.errno not in NO_ROOM:
            raise
        # the storage's error names no path: say where (nothing was written)
        raise OSError(
            exc.errno,
            f"{names['output']}: {exc.strerror or os.strerror(exc.errno)} while writing "
            f"{str(out)!r}; nothing was written",
        ) from exc


def _absolute(path) -> str:
    """A URL as it is, a local path made absolute (symbolic links kept, as the user named it)."""
    loc = location(path)
    return loc if isinstance(loc, str) else os.path.abspath(loc)

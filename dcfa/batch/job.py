"""The batch job behind ``dcfa fit CONFIG.toml``.

Every check that needs no pass over the data comes first (the output path, stores, variables,
dims, dtypes, target, overlap, estimator parameters, memory), so a bad job exits before it
writes anything; the output must not be, contain or lie inside an input, and it replaces only
an earlier dcfa result (:mod:`dcfa.storage.store`).
Then, on the cluster:

1. preprocessing pass: which cells hold data, the seasonal cycle, the spread;
2. moments pass (cells without data are dropped first);
3. the partition, on the driver, from the moments;
4. the result store (a third pass computes the reduced features), written atomically.

Finished passes are kept in ``<output>.work/`` with the identity of the configuration, the
input store's content and the target's values (:mod:`dcfa.batch.workdir`), so a killed job rerun
with ``--resume`` skips them, and only when nothing they depend on changed; the directory is
removed once the result is written, when the job stops on bad input data or on an archive that
changed while the job read it (checked once the last read is done, before the result is
published), or when a run fails before any pass finished. The run holds the directory (a
lock) from the moment it writes to it, which is after the cluster is connected.

A job is reproducible: a method (or ``[gbmap]``) with a ``random_state`` the configuration does
not set gets :data:`DEFAULT_RANDOM_STATE`, printed, part of the job's identity (so ``--resume``
redraws nothing) and recorded in the result's ``parameters`` (and ``gbmap``) attributes.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import dask
import numpy as np
import xarray as xr

from dcfa import io
from dcfa._errors import (
    GappyCellsWarning,
    InputError,
    NothingToFitError,
    PatchesWarning,
    exclusion_reasons,
)
from dcfa._terminal import counted
from dcfa.batch.config import JobConfig, target_leads
from dcfa.batch.destination import NO_ROOM, destinations, no_room, work_dir
from dcfa.batch.features import region_series
from dcfa.batch.holding import held_for_targets, held_if_small
from dcfa.batch.identity import COMPARED, InputChangedError, check_unchanged, job_identity
from dcfa.batch.inputs import (
    InputDataError,
    alignment,
    check_anomaly_months,
    drop_samples,
    in_target_months,
    months_absent,
    reading,
    select_cells,
    target_at_lead,
    time_scales,
)
from dcfa.batch.method import (
    DEFAULT_RANDOM_STATE,
    PURGE_RULE,
    build_estimator,
    build_gbmap,
    check_classes,
    check_record,
    purge,
    purged,
    seeded,
)
from dcfa.batch.missing import months_missed, nothing_to_fit
from dcfa.batch.output import (
    application,
    missing_chunk_lines,
    on_grid,
    print_groups,
    region_on_grid,
    result_skill,
    skill_text,
)
from dcfa.batch.shared import SharedFits, cells_digest
from dcfa.batch.transform import check_transform, transformed_target
from dcfa.batch.workdir import WorkDir
from dcfa.cfa.reduction import Reduction
from dcfa.gbmap import CheckpointMismatch
from dcfa.io.archive import open_zarr, take_record
from dcfa.io.calendars import (
    SUB_MONTHLY,
    date_label,
    months_of,
    samples_per_month,
)
from dcfa.io.preprocess import preprocessing_pass
from dcfa.io.result import provenance
from dcfa.stats.seasonal import has_large_cycle
from dcfa.stats.summary import Exclusion
from dcfa.storage.store import OutputError

__all__ = ["run_job", "build_estimator", "build_gbmap", "InputDataError", "DEFAULT_RANDOM_STATE"]

_IN_MEMORY_BYTES = 256 * 2**20
# what a result records of its input variables, which dcfa apply compares (JSON attributes)
_IDENTIFYING = {"units": "input_units", "standard_name": "input_standard_names"}


def run_job(
    config: JobConfig,
    *,
    scheduler: str | None = None,
    output: str | None = None,
    resume: bool = False,
    echo=print,
) -> Path | list[Path]:
    """Run the job; return the path of the result store (a list of them, one per target and
    lead, when ``target.variable`` or ``target.lead`` names several: targets first).

    Bad input found during a pass (no data at all, an unreadable chunk) raises an
    :class:`InputDataError` (a ValueError) naming the key or path, and the work directory is
    removed; any other failure keeps the finished passes for ``--resume`` (a work directory
    with none is removed). With several targets, the archive is read once and held in the
    workers' memory (spilled to their disks beyond it) for every target's passes; each target
    has its own result and work directory, so ``--resume`` continues where the job stopped.
    The targets on the same months are fitted together when the estimator shares work between
    targets (:class:`dcfa.batch.shared.SharedFits`: RegionsCV's pieces made once).
    """
    t0 = time.perf_counter()
    config, unset = seeded(config)
    dest = destinations(config, output=output, resume=resume)
    configs, outs, written = dest.configs, dest.outs, dest.written
    several = len(configs) > 1
    inp = config.input
    field = io.open_archive(
        inp["store"],
        inp["variables"],
        sample_dim=inp["sample_dim"],
        time=inp["time"],
        storage_options=inp["storage_options"],
    )
    stored = dict(field.sizes)  # as the user knows the archive: said before windows and lags
    field, box = select_cells(field, inp)
    absent, quantities = (take_record(field, name) for name in ("missing_chunks", "variable_attrs"))
    holes = months_absent(field[inp["sample_dim"]])  # a file of the archive missing
    field, dropped = drop_samples(field, inp)  # before windows and lags: they see the gap
    kept = field[inp["sample_dim"]].values
    archive = _Archive(absent, quantities, stored, box, dropped, holes, kept)
    field = time_scales(field, inp)  # input.windows and input.lags checked
    configs, gaps = zip(*(purged(job) for job in configs), strict=True)
    tasks = [
        _task(job, gap, out, field, archive, several=several, resume=resume, echo=echo)
        for job, gap, out in zip(configs, gaps, outs, strict=True)
    ]
    for task in tasks:
        task.several_leads = len(target_leads(config)) > 1
        if task.out in written:
            _check_written(task, echo)
    if unset:
        echo(
            f"      random_state = {DEFAULT_RANDOM_STATE} ({' and '.join(unset)} not set: "
            "fixed, so the job gives the same result run again or resumed; set it to change)"
        )
    set_gaps = {
        t.config.target["lead"]: g for t, g in zip(tasks, gaps, strict=True) if g is not None
    }
    if set_gaps:
        text = ", ".join(f"{g} at lead {lead}" for lead, g in sorted(set_gaps.items()))
        text = text if len(set(set_gaps.values())) > 1 else str(next(iter(set_gaps.values())))
        echo(
            f"      method.params.gap = {text} (not set: {PURGE_RULE}, so that no training "
            "sample of the method's folds shares a month with a test block; set it to change)"
        )
    from dcfa.batch.cluster import open_client

    bound = {"dcfa.no_workers_timeout": config.cluster["no_workers_timeout"]}
    done = []  # the results written, each once it is complete
    try:
        with dask.config.set(bound), open_client(config.cluster, scheduler, echo) as client:
            echo(f"      cluster: {client} (dashboard {client.dashboard_link})")
            if not several:
                _run_task(tasks[0], None, client, echo, since=t0, done=done)
                return outs[0]
            held = held_for_targets(field, inp["sample_dim"], client, echo)  # read once for all
            todo = [task for task in tasks if task.out not in written]
            shared = SharedFits(
                {t.name: t.field[inp["sample_dim"]].values for t in todo},
                {t.name: t.target for t in todo},
            )
            for i, task in enumerate(tasks):
                if task.out in written:
                    done.append(task.out)
                    continue
                echo(f"target {i + 1}/{len(tasks)}: {task.name} -> {task.out}")
                _run_task(
                    task, held, client, echo, since=time.perf_counter(), done=done, shared=shared
                )
    except KeyboardInterrupt as exc:
        if not done:
            raise
        # stopped while printing a result or closing the cluster: what is written is whole
        said = f"{exc}; " if str(exc) else ""
        written = ", ".join(str(o) for o in done)
        raise KeyboardInterrupt(f"{said}written and complete: {written}") from None
    echo(f"{counted(len(tasks), 'result')} in {time.perf_counter() - t0:.1f} s")
    return outs


@dataclass(eq=False)
class _Task:
    """One target of the job, checked before any pass: its configuration and result, the
    target at the lead, the field and the target on the months they share, the estimators
    and the work directory (not yet written)."""

    config: JobConfig
    out: Path | str
    target: xr.DataArray
    field: xr.DataArray
    read: _Read
    estimator: object
    gbmap: object
    workdir: WorkDir
    at_lead: xr.DataArray
    several_leads: bool = False

    @property
    def name(self) -> str:
        """The target, and its lead when the job has several (unique within a job)."""
        tgt = self.config.target
        name = "target" if tgt["variable"] is None else str(tgt["variable"])
        return name + (f" at lead {tgt['lead']}" if self.several_leads else "")


@dataclass(frozen=True)
class _Archive:
    """What the job read of the archive, for every target: each variable's chunks missing
    from the store and its units (:func:`dcfa.io.open_archive`), its sizes as stored (said
    before windows and lags), the cells of ``input.select`` in words, the samples
    ``input.drop_time`` left out, the months within its span it has no sample of
    (:func:`months_absent`), and the labels of the samples it keeps, before windows and
    lags."""

    absent: dict
    quantities: dict
    stored: dict
    box: str
    dropped: list
    holes: tuple[int, str] | None
    kept: np.ndarray


def _task(
    config, gap, out, field, archive: _Archive, *, several: bool, resume: bool, echo
) -> _Task:
    """Open and align one target, build its estimators and say what the job will fit (``gap``:
    the method's purge the job set, None if the file sets it or the method takes none)."""
    inp, tgt = config.input, config.target
    dim = inp["sample_dim"]
    target = io.open_target(
        tgt["path"],
        tgt["variable"],
        time_column=tgt["time_column"],
        sample_dim=dim,
        calendar=tgt["calendar"],
        date_format=tgt["date_format"],
        missing=tgt["missing"],
        units=tgt["units"],
        select=tgt["select"],
        storage_options=tgt["storage_options"],
    )
    n_input = int(field.sizes[dim])
    if tgt["lead"]:  # the pairing's checks of the target's own dates (daily, other stamps)
        io.align_target(field, target, sample_dim=dim, match=tgt["match"])
    at_lead, valid_time, step, gaps = target_at_lead(
        target, tgt["lead"], dim, field[dim], tgt["match"]
    )
    outside = np.zeros(at_lead.size, dtype=bool)
    if tgt["months"]:
        at_lead, outside = in_target_months(at_lead, valid_time, tgt["months"])
    aligned, target, n_common = io.align_target(field, at_lead, sample_dim=dim, match=tgt["match"])
    # where each target value comes from: the position in at_lead of every field month it
    # pairs with, then of those that hold a value (aligned as the values are)
    index = at_lead.copy(data=np.arange(at_lead.size, dtype=np.float64))
    _, paired, n_paired = io.align_target(field, index, sample_dim=dim, match=tgt["match"])
    paired = paired.values.astype(int)
    position = paired[at_lead.notnull().values[paired]]
    n_outside = int(outside[paired].sum())
    # missing among the field's months, not the whole file's
    n_gaps = n_paired - n_common - n_outside
    if n_common < 4:
        raise InputError(
            f"target: only {n_common} samples in common with the input"
            + (f" at target.lead = {tgt['lead']}" if tgt["lead"] else "")
            + (f" for target.variable {tgt['variable']!r}" if tgt["variable"] else "")
            + "; need >= 4"
        )
    values = target.values[np.isfinite(target.values)]
    if values.size and values.min() == values.max():  # found here, not after the passes
        raise InputError(
            f"target: {tgt['path']}"
            + (f" ({tgt['variable']})" if tgt["variable"] else "")
            + f" is {values[0]:g} in all {n_common} samples in common with the input"
            + (f" at target.lead = {tgt['lead']}" if tgt["lead"] else "")
            + ": there is nothing to predict; give another target.path or target.variable"
        )
    estimator = build_estimator(config.method)
    check_record(estimator, n_common, config, filled_gap=gap)
    if inp["anomalies"]:
        check_anomaly_months(aligned, dim, tgt["lead"])
    gbmap = build_gbmap(config)
    check_classes(gbmap, config, target)
    check_transform(tgt["transform"], config.method["params"], gbmap)
    echo(
        f"[1/5] {inp['store']}: {inp['variables']} {archive.stored}; target "
        f"{tgt['path']}"
        + (f" ({tgt['variable']})" if several and tgt["variable"] is not None else "")
        + f": {n_common} samples in common"
        + (f" ({n_gaps} missing target values left out)" if n_gaps else "")
        + (
            f" ({counted(n_outside, 'sample')} outside target.months {tgt['months']} left out)"
            if n_outside
            else ""
        )
    )
    valid = valid_time[position]
    target = transformed_target(target, tgt["transform"], valid)
    # the samples before the first that windows and lags leave: those only feed them
    history = int(np.searchsorted(archive.kept, field[dim].values[0])), archive.kept.size
    said = alignment(aligned, valid, tgt["lead"], step, n_input, inp, dim, gaps, history)
    echo(f"      {said}")
    if tgt["transform"] == "log":
        echo(
            f"      target.transform = 'log': fitted on the logarithm of the target (from "
            f"{np.exp(np.nanmin(target)):.3g} to {np.exp(np.nanmax(target)):.3g}); skill is "
            "that of the logarithm, and dcfa apply's forecast is the target's median"
        )
    if archive.box:
        echo(f"      input.select: {archive.box}")
    if archive.holes:
        n, run = archive.holes
        echo(
            f"      note: the archive has no sample in {counted(n, 'month')} within its span (the "
            f"first {run}): leads, windows, lags and anomalies take the months it has, by date"
        )
    if archive.dropped:
        echo(
            f"      input.drop_time: {counted(len(archive.dropped), 'sample')} left out ("
            + ", ".join(date_label(v) for v in archive.dropped[:6])
            + (", ..." if len(archive.dropped) > 6 else "")
            + ")"
        )
    for line in missing_chunk_lines(archive.absent):
        echo(f"      {line}")
    if inp["anomalies"]:
        _say_target_cycle(target.values, valid, dim, echo)
    per_month = samples_per_month(aligned[dim]) if inp["anomalies"] else 0.0
    if per_month >= 2:
        echo(
            f"      warning: input.anomalies on {per_month:.0f} samples a month: {SUB_MONTHLY}; "
            "store daily anomalies and set input.anomalies = false"
        )
    work = work_dir(out, config.output["work_dir"])
    # every check of the work directory (another run holding it, --resume's identity) before
    # a cluster is started; nothing is written before the cluster is connected
    workdir = WorkDir(work, job_identity(config, target), resume=resume, echo=echo, open=False)
    read = _Read(n_common, archive.absent, archive.quantities, step)
    return _Task(config, out, target, aligned, read, estimator, gbmap, workdir, at_lead)


def _say_target_cycle(values: np.ndarray, valid: np.ndarray, dim: str, echo) -> None:
    """With ``input.anomalies``, note a target whose own mean seasonal cycle is a large share
    of its variance: anomalies of the field cannot predict it, so it stays in the error of
    every fit and in the skill said (a flow's cycle took a job's CV R2 from 0.89 to 0.57)."""
    try:
        months = months_of(xr.DataArray(valid, dims=dim), "target")
    except InputError:  # not dates: no calendar months
        return
    share = has_large_cycle(values, months)
    if share is not None:
        echo(
            f"      note: the target's mean seasonal cycle is {share:.0%} of its variance; the "
            "field's anomalies (input.anomalies) do not predict it, so it stays in the error "
            "and the skill. To fit and score the target's anomalies, subtract its monthly "
            "means from the target file first"
        )


def _check_written(task: _Task, echo) -> None:
    """A target's result already written (``--resume`` of several targets): kept when it
    records this job's identity for it (configuration, input and target), refused otherwise."""
    so = task.config.output["storage_options"]
    recorded = json.loads(
        open_zarr(task.out, "output.store", storage_options=so).attrs.get("job_identity", "null")
    )
    if recorded != {k: task.workdir.identity[k] for k in COMPARED}:
        raise OutputError(
            f"output.store: {str(task.out)!r} exists and was not written by this job with "
            "these inputs (--resume keeps only the results of its own targets); set "
            "output.overwrite = true (dcfa fit --overwrite) to replace it, or choose another"
        )
    echo(f"target {task.name}: {task.out} was written by this job's earlier run: kept")


def _run_task(
    task: _Task, held, client, echo, *, since: float, done: list, shared: SharedFits | None = None
) -> None:
    """One target's passes and result; on failure, its work directory kept or removed as
    the failure deserves, and the results of the targets before it named."""
    config, workdir, out = task.config, task.workdir, task.out
    inp = config.input
    field = task.field
    if held is not None:  # the months this target shares with the held archive
        match = config.target["match"]
        field = io.align_target(held, task.at_lead, sample_dim=inp["sample_dim"], match=match)[0]
    try:
        try:
            with reading(inp["store"], inp["variables"]):
                task.estimator = _run_passes(
                    config,
                    field,
                    task.target,
                    task.read,
                    task.estimator,
                    task.gbmap,
                    workdir,
                    out,
                    client,
                    echo,
                    held=held is not None,
                    shared=shared,
                )
        except BaseException as exc:
            if done and isinstance(exc, Exception):
                written = ", ".join(str(o) for o in done)
                exc.add_note(f"the results of the targets before it are written: {written}")
            _failed(exc, workdir, out)
        done.append(out)
        workdir.remove()
    finally:
        workdir.close()
    echo(
        f"[5/5] {out}: {counted(task.estimator.n_features_out_, 'group')}; "
        f"{time.perf_counter() - since:.1f} s"
    )
    so = config.output["storage_options"]
    opened = open_zarr(out, "output.store", storage_options=so)
    skill = skill_text(result_skill(opened.attrs))
    if skill:
        echo(f"      {skill}")
    print_groups(opened, echo)  # from the store: no second pass


def _failed(exc: BaseException, workdir: WorkDir, out) -> None:
    """Keep or remove the work directory as the failure deserves, then raise it, saying
    what to do."""
    work = workdir.path
    # bad input data: nothing of this run is worth resuming; any other failure (Ctrl-C, a
    # lost worker, a closed stdout) keeps the finished passes; passes of an archive that
    # changed under them are not worth resuming either
    kept = workdir.abandon(bad_input=isinstance(exc, InputDataError | InputChangedError))
    if isinstance(exc, KeyboardInterrupt) and not kept:
        raise KeyboardInterrupt("no pass had finished: nothing was kept") from None
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or SIGTERM (cluster.py)
        raise KeyboardInterrupt(
            (f"{exc} received; " if str(exc) else "")
            + f"the finished passes are kept in {str(work)!r}: rerun with --resume to "
            "continue from them"
        ) from None
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:
        # Zarr's error names no path: say where, and what is left to resume
        raise OSError(exc.errno, no_room(exc, out, work, kept)) from exc
    if kept and isinstance(exc, Exception):  # the CLI prints it after the error
        # bad input found after the passes (a setting the data cannot meet) fails the same
        # way on resume: say what a resume keeps
        fixed = (
            "once the cause is fixed (by keys outside [input], [target] and [method], whose "
            "change starts over), "
            if isinstance(exc, InputError)
            else ""
        )
        exc.add_note(
            f"the finished passes are kept in {str(work)!r}: {fixed}rerun with --resume to "
            "continue from them"
        )
    raise exc


def _run_passes(
    config,
    field,
    target,
    read,
    estimator,
    gbmap,
    workdir,
    out,
    client,
    echo,
    *,
    held=False,
    shared: SharedFits | None = None,
):
    """The job's steps, in order: plan, prepare, fit, features, write (``held``: the field
    is held on the workers already, in the passes' chunks; ``shared``: the fits of the
    targets that read the same cells). Returns the fitted estimator."""
    dim = config.input["sample_dim"]
    estimator.set_params(sample_dim=dim)
    planned = _plan(estimator, field, dim, echo)
    workdir.open()  # the first write of the run: the cluster runs, the checks are done
    if not held:
        field = io.plan_chunks(field, sample_dim=dim)
        field = held_if_small(field, client, echo)
    step = _prepare(config, field, target, estimator, workdir, client, echo)
    estimator = _fit(config, estimator, step, target, planned, workdir, echo, shared=shared)
    reduced = _features(config, field, target, estimator, gbmap, step, workdir, echo)
    _write(config, out, estimator, gbmap, step, target, read, reduced, echo, workdir.identity)
    return estimator


def _plan(estimator, field: xr.DataArray, dim: str, echo) -> str:
    """The execution the fit will run, chosen as fit chooses it: a fit that cannot run
    within the memory budget is refused before the first pass (metadata only)."""
    from dcfa.memory import MemoryBudgetError

    n_grid = int(np.prod([s for d, s in field.sizes.items() if d != dim]))
    try:
        planned = estimator.execution_for(field)
    except MemoryBudgetError as exc:
        raise MemoryBudgetError(
            f"{exc} (counted for all {n_grid:,} cells of the grid: which of them hold data is "
            "known only after the first pass)"
        ) from None
    echo(f"      execution: {planned}")
    return planned


@dataclass(frozen=True, eq=False)
class _Prepared:
    """What the preprocessing pass (or an interrupted run) gives the fit: the
    preprocessing (``held``: the same on the workers), the grid moments when the fit gathers
    them from that pass, the cells the fit reads and their flat places on the grid
    (``keep``)."""

    prep: io.Preprocessing
    held: io.Preprocessing
    moments: object
    cells: xr.DataArray
    keep: np.ndarray
    grid_pass: bool
    action: str


def _prepare(config, field, target, estimator, workdir: WorkDir, client, echo) -> _Prepared:
    """The preprocessing pass (climatology, spread, and the grid moments a grid fit reads),
    or what an interrupted run kept of it; then the cells the fit reads, and the
    preprocessing held on the workers for the later passes' graphs."""
    inp = config.input
    dim = inp["sample_dim"]
    work = workdir.path
    # an estimator that gathers grid moments gets them from the preprocessing pass
    request = estimator.grid_pass_request(field)
    prep_path = workdir.reuse("preprocessing.zarr")
    if prep_path is None:  # moments are of the preprocessed field: recomputed with it
        workdir.discard("moments")
    moments = _load_moments(workdir)
    action = "reused" if moments is not None else "from the pass" if request else "pass"
    if prep_path is not None and (request is None or moments is not None):
        prep = io.Preprocessing.from_dataset(xr.open_zarr(prep_path))
        echo("[2/5] preprocessing: reused from the interrupted run")
    else:
        t = time.perf_counter()
        prep, moments = preprocessing_pass(
            field,
            target.values if request else None,
            sample_dim=dim,
            anomalies=inp["anomalies"],
            standardize=inp["standardize"],
            key=f"input.variables: {inp['variables']} in {inp['store']!r}",
            **(request or {}),
        )
        _check_has_data(prep, inp)
        if prep_path is None:
            io.write_dataset(prep.to_dataset(), work / "preprocessing.zarr")
            workdir.record("preprocessing.zarr")
        if moments is not None:
            moments.save(work / "moments")
            workdir.record("moments")
        echo(
            f"[2/5] one pass: {int(prep.has_data.sum())} of {int(prep.has_data.size)} "
            "cells hold data"
            + ("; climatology" if inp["anomalies"] else "")
            + ("; spread" if inp["standardize"] else "")
            + ("; grid moments" if request else "")
            + f" in {time.perf_counter() - t:.1f} s"
        )
    held = prep.held(client, dict(field.chunksizes))
    prepared = io.apply_preprocessing(field, held, sample_dim=dim)
    if request is not None:  # the grid execution reads the grid; cells without data excluded
        cells, keep = prepared, np.arange(prep.has_data.size)
    else:  # the other executions skip the cells without data; the stacked cells keep
        # their place on the grid, so a neighbors radius and the visiting order are the
        # grid's (dcfa.stacking.CellGrid)
        grid = [d for d in field.dims if d != dim]
        cells, keep = _cells_with_data(prepared, prep.has_data, grid)
    return _Prepared(prep, held, moments, cells, keep, request is not None, action)


def _fit(
    config,
    estimator,
    step: _Prepared,
    target,
    planned: str,
    workdir: WorkDir,
    echo,
    *,
    shared: SharedFits | None = None,
):
    """The estimator's fit on the prepared cells, or its fit with the targets that read the
    same cells (``shared``); its moments kept for --resume. Returns the fitted estimator."""
    if not step.grid_pass:  # the cells that hold data, known now: the execution fit will run
        chosen = estimator.execution_for(step.cells)
        if chosen != planned:
            echo(f"      execution: {chosen} for the {step.keep.size:,} cells that hold data")
    t = time.perf_counter()
    name = str(config.target["variable"])
    together = None
    try:
        with warnings.catch_warnings():  # the job says these in its own terms below
            warnings.simplefilter("ignore", GappyCellsWarning)
            warnings.simplefilter("ignore", PatchesWarning)
            if shared is not None and step.moments is None:  # (resumed moments: fitted alone)
                months = step.cells[config.input["sample_dim"]].values
                digest = cells_digest(months, step.keep, step.prep)
                together = shared.fit(name, estimator, step.cells, digest)
            if together is None:
                estimator.fit(step.cells, target, moments=step.moments)
        if together is not None:
            estimator, names = together
            echo(
                f"      one first stage for targets {', '.join(names)} (the same cells)"
                if names[0] == name
                else f"      fitted with target {names[0]}'s first stage (the same cells)"
            )
    except NothingToFitError as exc:  # the input's fault, in the job's terms; nothing kept
        raise InputDataError(nothing_to_fit(exc, config.input, step.cells)) from None
    if step.moments is None:
        _save_moments(workdir.path, estimator)
        workdir.record("moments")
    echo(
        f"[3/5] moments {step.action} and partition: {counted(step.keep.size, 'cell')} -> "
        f"{counted(estimator.n_features_out_, 'group')} ({len(estimator.excluded_)} excluded) in "
        f"{time.perf_counter() - t:.1f} s"
    )
    if estimator.excluded_:  # each reason's count, the gappy ones' remedy said below
        brief = {
            k: Exclusion(w.code, w.split(" (LinCFA")[0]) for k, w in estimator.excluded_.items()
        }
        echo(f"      excluded: {exclusion_reasons(brief, 'cells')}")
    _say_patches(estimator, config.input, echo)
    gaps = sum(why.code == "gappy" for why in estimator.excluded_.values())
    if gaps and "missing" in estimator.get_params():  # left out whole: why, and the remedy
        echo(
            f"      {gaps} of the excluded cells miss some months (each cell must be complete "
            "with missing = 'exclude'); method.params.missing = \"pairwise\" keeps them "
            "(pairwise-complete statistics, the dense execution)"
        )
    elif gaps:
        echo(
            f"      {gaps} of the excluded cells miss some months ({config.method['name']} needs "
            "every month of a cell): fill them, or leave those months out with input.time or "
            "input.drop_time; "
            'method.name = "lincfa" or "genlincfa" takes method.params.missing = "pairwise"'
        )
    if gaps:
        echo(f"      e.g. {months_missed(step.cells, config.input, estimator.excluded_)}")
    return estimator


@dataclass(frozen=True, eq=False)
class _Read:
    """What the result records of the inputs as read: the samples in common with the target,
    each variable's chunks missing from the store (read as the fill value), each variable's
    units and standard name (:func:`dcfa.io.open_archive`), and the step ``target.lead``
    counts (``"month"``, ``"day"``, ``"sample"``)."""

    n_common: int
    missing_chunks: dict
    variable_attrs: dict
    lead_step: str = "sample"


def _say_patches(estimator, inp: dict, echo) -> None:
    """A note when the cells form more separate patches than ``max_groups`` (RegionsCV's
    ``PatchesWarning``), with the job's ways to fewer: a box of the grid, fewer blocks."""
    patches, most = getattr(estimator, "n_patches_", 0), estimator.get_params().get("max_groups")
    if most is None or patches <= most:
        return
    blocks = len(inp["variables"]) * len(inp["windows"]) * len(inp["lags"])
    echo(
        f"      note: the cells form {patches} separate patches"
        + (f" in {blocks} blocks (variables x windows x lags)" if blocks > 1 else "")
        + f", more than method.params.max_groups = {most}; no region spans two, so the map "
        "has a region for each. A box of the grid (input.select)"
        + (" or fewer windows and lags" if blocks > 1 else "")
        + " makes fewer"
    )


@dataclass(frozen=True, eq=False)
class _Reduced:
    """What the features pass gives the result: the region features (lazy without GBMAP:
    computed as the result is written), GBMAP's embedding and its skill against the linear
    models (None without GBMAP)."""

    features: xr.DataArray
    embedding: xr.DataArray | None
    gbmap_skill: dict | None


def _features(config, field, target, estimator, gbmap, step: _Prepared, workdir, echo) -> _Reduced:
    """The features pass: computed once, for GBMAP and the result store, as dcfa apply
    computes them (from the raw field: the anomalies are folded into the sums); then GBMAP
    on them."""
    reduction = estimator.reduction_
    dim = config.input["sample_dim"]
    features = region_series(field, step.held, reduction, step.keep, sample_dim=dim)
    if gbmap is None:
        return _Reduced(features, None, None)
    t = time.perf_counter()
    # samples x groups is small: fit GBMAP in memory, not one round trip to the cluster per
    # L-BFGS evaluation; else keep it on the workers
    features = features.compute() if features.nbytes < _IN_MEMORY_BYTES else features.persist()
    _fit_gbmap(gbmap, features, target, workdir, _partition_digest(reduction, step.keep))
    embedding = gbmap.transform(features).rename(None)
    echo(
        f"      GBMAP: {gbmap.n_boosts} learners on the {estimator.n_features_out_} "
        f"features in {time.perf_counter() - t:.1f} s"
    )
    skill = _gbmap_summary(gbmap, features, target, purge(config), echo)
    return _Reduced(features, embedding, skill)


def _write(
    config,
    out,
    estimator,
    gbmap,
    step,
    target,
    read: _Read,
    reduced: _Reduced,
    echo,
    identity: dict,
) -> None:
    """The result store: the region map, the features, GBMAP, every cell's place in the
    reduction and the provenance (with the job's ``identity``), written atomically; published
    only if the input store still has that identity once the last read is done."""
    inp, tgt = config.input, config.target
    dim = inp["sample_dim"]
    region = region_on_grid(estimator.labels_, step.keep, step.prep.has_data)
    stability = None
    if hasattr(estimator, "stability_"):  # how much each region recurs across the folds
        stability = on_grid(
            estimator.stability_, step.keep, step.prep.has_data, fill=np.nan, dtype="f8"
        )
    # the units and quantities the cells were fitted on: dcfa apply refuses an archive of others
    identifying = {
        name: {v: read.variable_attrs[v].get(attr) for v in inp["variables"]}
        for attr, name in _IDENTIFYING.items()
    }
    dataset = io.result_dataset(
        estimator,
        step.cells,
        region=region,
        target=target,  # its values, and its units for the forecast
        sample_dim=dim,
        features=reduced.features,
        embedding=reduced.embedding,
        gbmap=gbmap,
        stability=stability,
        units=identifying["input_units"],
        attrs=provenance(
            config.raw,
            method=type(estimator).__name__,
            params=config.method["params"],  # random_state included (seeded)
            input_store=inp["store"],
            target=tgt["path"],
            n_common=read.n_common,
        ),
    )
    dataset = dataset.assign(application(estimator.reduction_, step.keep, step.prep))
    for name, recorded in identifying.items():
        dataset.attrs[name] = json.dumps(recorded)
    # what --resume of several targets compares to keep this result (_check_written)
    dataset.attrs["job_identity"] = json.dumps({k: identity[k] for k in COMPARED})
    if tgt["lead"]:  # what the lead counts: 14 means days on daily dates
        dataset.attrs["lead_step"] = read.lead_step
    if tgt["variable"]:  # which of the file's series (one result per target)
        dataset.attrs["target_variable"] = str(tgt["variable"])
    if read.missing_chunks:
        dataset.attrs["missing_chunks"] = json.dumps(read.missing_chunks)
    if reduced.gbmap_skill is not None:
        dataset.attrs["gbmap_skill"] = json.dumps(reduced.gbmap_skill)
    # the execution (how dcfa apply reads the cells), and what the estimator chose
    dataset.attrs.update(estimator.fit_record())
    if hasattr(estimator, "eps_"):  # a tolerance chosen by CV: say which, among what
        path = estimator.cv_path_
        echo(
            f"      eps = {estimator.eps_:g} chosen by forward CV among "
            + ", ".join(
                f"{e:g} ({counted(int(g), 'group')}, R2 {r:.2f})"
                for e, g, r in zip(
                    path["eps"].values,
                    path["n_groups"].values,
                    path["mean_cv_r2"].values,
                    strict=True,
                )
            )
        )
    echo(
        "[4/5] writing the result"
        + ("" if gbmap is not None else " (a pass computes the reduced features)")
    )
    io.write_result(
        out,
        dataset,
        moments=estimator.moments_,
        overwrite=config.output["overwrite"],
        storage_options=config.output["storage_options"],
        before_publish=partial(check_unchanged, identity, inp["store"], inp["storage_options"]),
    )


def _gbmap_summary(gbmap, features, target, gap: int, echo) -> dict | None:
    """Say which GBMAP steps switched off, and whether GBMAP beats the linear models on the
    same features (forward-chaining CV, purged by ``gap``: the lead, lags and windows); the
    comparison, or None when the record is too short for it."""
    from dcfa.batch.gbmap_check import gbmap_against_linear, inactive_line, verdict_line

    line = inactive_line(gbmap)
    if line:
        echo("      " + line)
    try:
        skill = gbmap_against_linear(gbmap, features.values, target.values, gap=gap)
    except ValueError as exc:  # too few samples for the folds
        echo(f"      GBMAP against the linear models: not scored ({exc})")
        return None
    echo("      " + verdict_line(skill, features.shape[1]))
    return skill


def _fit_gbmap(gbmap, features, target, workdir: WorkDir, partition: str) -> None:
    """Fit GBMAP with its checkpoints in the work directory: resumed when the checkpoint was
    written for the same ``[gbmap]`` settings (but ``n_boosts``: boosting is stagewise) and the
    same partition, else discarded, said so, and GBMAP starts afresh."""
    settings = {"estimator": type(gbmap).__name__}
    settings.update(
        (k, v)
        for k, v in gbmap.get_params().items()
        if k not in ("n_boosts", "persist", "checkpoint")
    )
    where = workdir.gbmap_checkpoint(settings, partition)
    gbmap.set_params(checkpoint=str(where))
    try:
        gbmap.fit(features, target)
    except CheckpointMismatch as exc:  # a checkpoint that still does not fit these data
        workdir.discard_gbmap(f"it does not match this fit ({exc.details})")
        gbmap.fit(features, target)


def _partition_digest(reduction: Reduction, keep: np.ndarray) -> str:
    """A hash of what the features are made of: every cell's place, group, scale, centre."""
    h = hashlib.sha256()
    keep = np.asarray(keep, dtype=np.int64)
    for a in (keep, reduction.labels, reduction.scale, reduction.centre):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    if reduction.weights is not None:
        h.update(np.ascontiguousarray(reduction.weights, dtype=np.float64).tobytes())
    h.update(repr((reduction.aggregation, str(reduction.inputs), reduction.nan_aware)).encode())
    return h.hexdigest()


def _check_has_data(prep, inp: dict) -> None:
    if not bool(prep.has_data.any()):
        raise InputDataError(
            f"input.variables: {inp['variables']} in {inp['store']!r} hold no data (every value "
            "is missing" + (" in input.time" if inp["time"] else "") + ")"
        )


def _cells_with_data(field: xr.DataArray, has_data: xr.DataArray, grid: list[str], order=None):
    """The field stacked to (sample, cell) over the cells that hold data, and their flat
    places on the grid: in ``order`` (flat places, as a result's ``cell_index`` has them) when
    given, else in the grid's order. The cell dim keeps its MultiIndex (the cells' places on
    the grid, :class:`dcfa.stacking.CellGrid`)."""
    flat = has_data.values.ravel()
    keep = np.flatnonzero(flat) if order is None else np.asarray(order)[flat[order]]
    return field.stack(cell=grid).isel(cell=keep), keep


def _save_moments(work: Path, estimator) -> None:
    """Keep what the pass produced: one Moments, or one per row segment (NonLinCFA)."""
    parts = getattr(estimator, "segment_moments_", None)
    if parts is None:
        estimator.moments_.save(work / "moments")
        return
    (work / "moments").mkdir()
    for i, m in enumerate(parts):
        m.save(work / "moments" / f"part-{i:03d}")


def _load_moments(workdir: WorkDir):
    from dcfa.stats.kinds import load_moments

    path = workdir.reuse("moments")
    if path is None:
        return None
    parts = sorted(path.glob("part-*"))
    return [load_moments(p) for p in parts] if parts else load_moments(path)

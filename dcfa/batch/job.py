"""The batch job behind ``dcfa fit CONFIG.toml``.

Every check that needs no pass over the data comes first (the output path, stores, variables,
dims, dtypes, target, overlap, estimator parameters, memory), so a bad job exits before it
writes anything; the output must not be, contain or lie inside an input, and it replaces only
an earlier dcfa result (:mod:`dcfa.io.store`).
Then, on the cluster:

1. preprocessing pass: which cells hold data, the seasonal cycle, the spread;
2. moments pass (cells without data are dropped first);
3. the partition, on the driver, from the moments;
4. the result store (a third pass computes the reduced features), written atomically.

Finished passes are kept in ``<output>.work/`` with the identity of the configuration, the
input store's content and the target's values (:mod:`dcfa.batch.workdir`), so a killed job rerun
with ``--resume`` skips them, and only when nothing they depend on changed; the directory is
removed once the result is written, when the job stops on bad input data, or when a run fails
before any pass finished. The run holds the directory (a lock) from the moment it writes to it,
which is after the cluster is connected.

A job is reproducible: a method (or ``[gbmap]``) with a ``random_state`` the configuration does
not set gets :data:`DEFAULT_RANDOM_STATE`, printed, part of the job's identity (so ``--resume``
redraws nothing) and recorded in the result's ``parameters`` (and ``gbmap``) attributes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import xarray as xr

from dcfa import io
from dcfa._compute import scheduler_workers
from dcfa.batch.config import ConfigError, JobConfig
from dcfa.batch.features import Reduction, region_series
from dcfa.batch.workdir import WorkDir, job_identity
from dcfa.io.archive import location, open_zarr
from dcfa.io.preprocess import preprocessing_pass
from dcfa.io.result import provenance
from dcfa.io.store import check_apart, check_replaceable, check_writable

__all__ = ["run_job", "build_estimator", "build_gbmap", "InputDataError", "DEFAULT_RANDOM_STATE"]

_IN_MEMORY_BYTES = 256 * 2**20
# the seed of a shuffling method (and of GBMAP) when the job does not choose one: the same job
# gives the same result, run again or resumed
DEFAULT_RANDOM_STATE = 0


class InputDataError(ValueError):
    """Bad input data found by a pass (no data at all, an undecodable chunk): the run's work
    directory, finished passes included, is removed (nothing of it is worth resuming)."""


def _checked(cls, params: dict, key: str, reserved: frozenset = frozenset()):
    """``cls(**params)`` with its parameters checked now (before any pass); errors name
    ``key``, the config section they come from."""
    from dcfa._validation import validate_params

    allowed = set(cls().get_params()) - reserved
    unknown = set(params) - allowed
    if unknown:
        raise ConfigError(
            f"{key}: unknown or reserved parameter(s) {sorted(unknown)} for {cls.__name__}; it "
            f"takes {sorted(allowed)}"
        )
    estimator = cls(**params)
    try:
        validate_params(estimator)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return estimator


def _method_class(name: str):
    from dcfa import GenLinCFA, GenLinCFACV, LinCFA, NonLinCFA, NonLinCFACV

    return {
        "lincfa": LinCFA,
        "nonlincfa": NonLinCFA,
        "genlincfa": GenLinCFA,
        "genlincfacv": GenLinCFACV,
        "nonlincfacv": NonLinCFACV,
    }[name]


def build_estimator(method: dict):
    """The estimator named in ``[method]``, its parameters checked now."""
    return _checked(_method_class(method["name"]), dict(method["params"]), "method.params")


def _seeded(config: JobConfig) -> tuple[JobConfig, list[str]]:
    """``config`` with :data:`DEFAULT_RANDOM_STATE` for every ``random_state`` it leaves unset
    (the method's, if it takes one, and GBMAP's), and the keys so set."""
    keys = []
    method = config.method
    params = method["params"]
    takes = "random_state" in _method_class(method["name"])().get_params()
    if takes and "random_state" not in params:
        method = {**method, "params": {**params, "random_state": DEFAULT_RANDOM_STATE}}
        keys.append("method.params.random_state")
    gbmap = config.gbmap
    if gbmap is not None and "random_state" not in gbmap:
        gbmap = {**gbmap, "random_state": DEFAULT_RANDOM_STATE}
        keys.append("gbmap.random_state")
    return dataclasses.replace(config, method=method, gbmap=gbmap), keys


def _check_classes(gbmap, config: JobConfig, target: xr.DataArray) -> None:
    """A binary task (a GBMAP classifier, a ``bernoulli`` family) needs a target of two
    classes: checked on the target, before any pass, naming the key that asks for it."""
    values = np.unique(target.values[np.isfinite(target.values)])
    if values.size == 2:
        return
    found = f"{values.size} distinct values" + (
        f" ({', '.join(f'{v:g}' for v in values[:4])}{', ...' if values.size > 4 else ''})"
    )
    if config.method["params"].get("family") == "bernoulli":
        raise ValueError(
            f"method.params.family: 'bernoulli' needs a target of two classes; "
            f"{config.target['variable']!r} holds {found}"
        )
    from dcfa import GBMAPClassifier

    if isinstance(gbmap, GBMAPClassifier):
        raise ValueError(
            f"gbmap.task: 'classification' needs a target of two classes; "
            f'{config.target["variable"]!r} holds {found} (use task = "regression")'
        )


def build_gbmap(config: JobConfig):
    """The GBMAP estimator of ``[gbmap]`` (None without one), its parameters checked now.

    ``task = "regression"`` or ``"classification"`` picks the estimator (default: regression,
    classification for GenLinCFA with ``family = "bernoulli"``); every other key is a
    parameter of :class:`~dcfa.GBMAPRegressor` / :class:`~dcfa.GBMAPClassifier`.
    """
    if config.gbmap is None:
        return None
    from dcfa import GBMAPClassifier, GBMAPRegressor

    params = dict(config.gbmap)
    family = config.method["params"].get("family")
    task = params.pop("task", "classification" if family == "bernoulli" else "regression")
    if task not in ("regression", "classification"):
        raise ConfigError(f"gbmap.task must be 'regression' or 'classification', got {task!r}")
    cls = GBMAPClassifier if task == "classification" else GBMAPRegressor
    # checkpoints go to the job's work directory
    return _checked(cls, params, "gbmap", reserved=frozenset({"checkpoint"}))


def run_job(
    config: JobConfig,
    *,
    scheduler: str | None = None,
    output: str | None = None,
    resume: bool = False,
    echo=print,
) -> Path:
    """Run the job; return the path of the result store.

    Bad input found during a pass (no data at all, an unreadable chunk) raises an
    :class:`InputDataError` (a ValueError) naming the key or path, and the work directory is
    removed; any other failure keeps the finished passes for ``--resume`` (a work directory
    with none is removed).
    """
    t0 = time.perf_counter()
    config, seeded = _seeded(config)
    inp, tgt = config.input, config.target
    dim = inp["sample_dim"]
    out = location(output or config.output["store"])
    out = out if isinstance(out, str) else Path(os.path.abspath(out))
    work = _work_dir(out, config.output["work_dir"])
    _check_output(out, work, config)
    field = io.open_archive(
        inp["store"],
        inp["variables"],
        sample_dim=dim,
        time=inp["time"],
        storage_options=inp["storage_options"],
    )
    target = io.open_target(
        tgt["path"],
        tgt["variable"],
        time_column=tgt["time_column"],
        sample_dim=dim,
        calendar=tgt["calendar"],
        storage_options=tgt["storage_options"],
    )
    field = _time_scales(field, inp)
    n_input = int(field.sizes[dim])
    n_gaps = int(target.isnull().sum())
    target, valid_time, step = _lead(target, tgt["lead"], dim)
    # where each target value comes from: its position, aligned as the values are
    position = target.copy(data=np.arange(target.size, dtype=np.float64)).where(target.notnull())
    field, target, n_common = io.align_target(field, target, sample_dim=dim, match=tgt["match"])
    _, position, _ = io.align_target(field, position, sample_dim=dim, match=tgt["match"])
    if n_common < 4:
        raise ValueError(
            f"target: only {n_common} samples in common with the input"
            + (f" at target.lead = {tgt['lead']}" if tgt["lead"] else "")
            + "; need >= 4"
        )
    estimator = build_estimator(config.method)
    gbmap = build_gbmap(config)
    _check_classes(gbmap, config, target)
    echo(
        f"[1/5] {inp['store']}: {inp['variables']} {dict(field.sizes)}; target "
        f"{tgt['path']}: {n_common} samples in common"
        + (f" ({n_gaps} missing target values left out)" if n_gaps else "")
    )
    valid = valid_time[position.values.astype(int)]
    echo(f"      {_alignment(field, valid, tgt['lead'], step, n_input, inp, dim)}")
    if seeded:
        echo(
            f"      random_state = {DEFAULT_RANDOM_STATE} ({' and '.join(seeded)} not set: "
            "fixed, so the job gives the same result run again or resumed; set it to change)"
        )
    # every check of the work directory (another run holding it, --resume's identity) before
    # a cluster is started; nothing is written before the cluster is connected
    workdir = WorkDir(work, job_identity(config, target), resume=resume, echo=echo, open=False)
    from dcfa.batch.cluster import open_client

    try:
        with open_client(config.cluster, scheduler) as client:
            echo(f"      cluster: {client} (dashboard {client.dashboard_link})")
            try:
                with _reading(inp["store"], inp["variables"]):
                    _run_passes(
                        config,
                        field,
                        target,
                        n_common,
                        estimator,
                        gbmap,
                        workdir,
                        out,
                        client,
                        echo,
                    )
            except BaseException as exc:
                # bad input data: nothing of this run is worth resuming; any other failure
                # (Ctrl-C, a lost worker, a closed stdout) keeps the finished passes
                kept = workdir.abandon(bad_input=isinstance(exc, InputDataError))
                if isinstance(exc, KeyboardInterrupt) and not kept:
                    raise KeyboardInterrupt("no pass had finished: nothing was kept") from None
                if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
                    # Zarr's error names no path: say where, and what is left to resume
                    raise OSError(exc.errno, _no_room(exc, out, work, kept)) from exc
                raise
            workdir.remove()
    finally:
        workdir.close()
    echo(f"[5/5] {out}: {estimator.n_features_out_} groups; {time.perf_counter() - t0:.1f} s")
    so = config.output["storage_options"]
    opened = open_zarr(out, "output.store", **({"storage_options": so} if so else {}))
    _print_groups(opened, echo)  # from the store: no second pass
    return out


_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def _no_room(exc: OSError, out: Path | str, work: Path, kept: bool) -> str:
    """The message of a write that failed for want of room (a full disk, a quota, a file
    system turned read-only): where, and what a rerun can reuse."""
    return (
        f"output.store: {exc.strerror or os.strerror(exc.errno)} while writing "
        f"{str(out)!r} or its work directory {str(work)!r}; "
        + (
            f"the finished passes are kept in {str(work)!r}: make room, then rerun with --resume"
            if kept
            else "nothing was kept"
        )
    )


def _time_scales(field: xr.DataArray, inp: dict) -> xr.DataArray:
    """``input.windows`` (trailing running means or sums) and ``input.lags`` (earlier
    samples), lazily; each window and lag is its own feature block (``window`` / ``lag``
    dims: groups never mix them, :data:`dcfa.neighbors.BLOCK_DIMS`)."""
    try:
        return _windows_and_lags(field, inp)
    except ValueError as exc:  # the forecast functions name their arguments: name the keys
        text = str(exc)
        if text.startswith(("lags:", "windows:")):
            raise ValueError(f"input.{text}") from None
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


def _lead(target: xr.DataArray, lead: int, dim: str):
    """The target ``lead`` steps of its dates later (months for monthly dates: a month missing
    from the file is skipped by date, never by row), labelled with the dates it is predicted
    from, the dates the values belong to (:func:`dcfa.lead_target` of the series on itself),
    and the step ``lead`` counts (``"month"`` for monthly dates)."""
    from dcfa.forecast import lead_target

    valid = target[dim].values
    if not lead:
        return target, valid, "sample"
    if lead >= valid.size - 3:
        raise ValueError(
            f"target.lead = {lead} (time steps of the dates) leaves at most "
            f"{max(valid.size - lead, 0)} of the target's {valid.size} values to predict; "
            "need >= 4"
        )
    if not target.indexes[dim].is_unique:  # repeated dates: no calendar step, count rows
        return target.shift({dim: -lead}).isel({dim: slice(0, -lead)}), valid[lead:], "sample"
    try:
        _, later, how = lead_target(target, target, lead, sample_dim=dim, min_samples=4)
    except ValueError as exc:
        raise ValueError(f"target.lead = {lead}: {str(exc).removeprefix('lead: ')}") from None
    return later.drop_vars("target_time"), later["target_time"].values, how.step


def _alignment(
    field, valid: np.ndarray, lead: int, step: str, n_input: int, inp: dict, dim: str
) -> str:
    """What is predicted from what: the first and last predictor dates, their targets', and
    the samples kept of the ``n_input`` predictors (after the windows and lags)."""
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
        )
    )
    if inp["windows"] != [1]:
        text += f"; windows {inp['windows']} ({inp['aggregate']})"
    if inp["lags"] != [0]:
        text += f"; lags {inp['lags']}"
    return text


def _work_dir(out: Path | str, given: str | None) -> Path:
    """Where the finished passes are kept: ``output.work_dir``, else ``<output>.work`` next to
    a local output, else (an output on object storage) ``<name>-<hash>.work`` in the working
    directory: resume state stays local, where renames are atomic."""
    if given:
        return Path(os.path.abspath(given))
    if isinstance(out, Path):
        return out.with_name(out.name + ".work")
    tag = hashlib.sha256(out.encode()).hexdigest()[:8]
    return Path.cwd() / f"{out.rstrip('/').rsplit('/', 1)[-1]}-{tag}.work"


def _check_output(out: Path | str, work: Path, config: JobConfig) -> None:
    """Before anything is read: the output and its work directory are apart from every input
    and from each other, replaceable (only an earlier dcfa result, with overwrite) and
    writable."""
    inputs = {
        "input.store": config.input["store"],
        "target.path": config.target["path"],
    }
    if config.source != "<config>":
        inputs["the job file"] = config.source
    given = bool(config.output["work_dir"])
    check_apart(out, inputs, "output.store")
    check_apart(work, inputs, "output.work_dir" if given else "output.store")
    if isinstance(out, Path):
        o, w = Path(os.path.realpath(out)), Path(os.path.realpath(work))
        rel = (
            "is"
            if o == w
            else "lies inside"
            if o in w.parents
            else "contains"
            if w in o.parents
            else None
        )
        if rel:
            raise ConfigError(
                f"output.work_dir: {str(work)!r} {rel} output.store {str(out)!r}; the work "
                "directory and the result store must lie apart (choose another output.work_dir, "
                "or leave it unset for <output.store>.work)"
            )
    if given:
        check_writable(work, "output.work_dir")
    so = config.output["storage_options"]
    check_replaceable(
        out,
        overwrite=config.output["overwrite"],
        key="output.store",
        kinds=("result",),
        storage_options=so,
    )
    check_writable(out, "output.store", so)


@contextlib.contextmanager
def _reading(store: str, variables: list[str], key: str = "input.store"):
    """Name the store (as ``key``) when a chunk of it cannot be decoded (a truncated or
    corrupt file gives a codec's bare error, raised on a worker, that names no path): bad
    input, not a fault."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, ValueError) or not _from_codec(exc):
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


def _run_passes(
    config, field, target, n_common, estimator, gbmap, workdir, out, client, echo
) -> None:
    inp, tgt = config.input, config.target
    dim = inp["sample_dim"]
    grid = [d for d in field.dims if d != dim]
    work = workdir.path

    # the execution the fit will run, chosen as fit chooses it; a fit that cannot run
    # within the memory budget is refused before the first pass (metadata only)
    estimator.set_params(sample_dim=dim)
    from dcfa.memory import MemoryBudgetError

    n_grid = int(np.prod([field.sizes[d] for d in grid]))
    try:
        planned = estimator.execution_for(field)
    except MemoryBudgetError as exc:
        raise MemoryBudgetError(
            f"{exc} (counted for all {n_grid:,} cells of the grid: which of them hold data is "
            "known only after the first pass)"
        ) from None
    echo(f"      execution: {planned}")
    workdir.open()  # the first write of the run: the cluster runs, the checks are done
    field = io.plan_chunks(field, sample_dim=dim)
    field = _held_if_small(field, client, echo)

    estimator.set_params(sample_dim=dim)
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
    prepared = io.apply_preprocessing(field, prep, sample_dim=dim)
    if request is not None:  # the grid execution reads the grid; cells without data excluded
        cells, keep = prepared, np.arange(prep.has_data.size)
    else:  # the other executions skip the cells without data; the stacked cells keep
        # their place on the grid, so a neighbors radius and the visiting order are the
        # grid's (dcfa.stacking.CellGrid)
        cells, keep = _cells_with_data(prepared, prep.has_data, grid)

    if request is None:  # the cells that hold data, known now: the execution fit will run
        chosen = estimator.execution_for(cells)
        if chosen != planned:
            echo(f"      execution: {chosen} for the {keep.size:,} cells that hold data")
    t = time.perf_counter()
    estimator.fit(cells, target, moments=moments)
    if moments is None:
        _save_moments(work, estimator)
        workdir.record("moments")
    echo(
        f"[3/5] moments {action} and partition: {keep.size} cells -> "
        f"{estimator.n_features_out_} groups ({len(estimator.excluded_)} excluded) in "
        f"{time.perf_counter() - t:.1f} s"
    )
    gaps = sum(
        "values missing (use missing='pairwise'" in why for why in estimator.excluded_.values()
    )
    if gaps:  # a cell with one missing month is left out whole: say why, and the remedy
        echo(
            f"      {gaps} of the excluded cells miss some months (each cell must be complete "
            "with missing = 'exclude'); method.params.missing = \"pairwise\" keeps them "
            "(pairwise-complete statistics, the dense execution)"
        )

    # the features pass: computed once, for GBMAP and the result store, as dcfa apply
    # computes them (from the raw field: the anomalies are folded into the sums)
    reduction = Reduction.of(estimator, keep)
    features = region_series(field, prep, reduction, sample_dim=dim)
    embedding = None
    if gbmap is not None:
        t = time.perf_counter()
        # samples x groups is small: fit GBMAP in memory, not one round trip to the
        # cluster per L-BFGS evaluation; else keep it on the workers
        features = features.compute() if features.nbytes < _IN_MEMORY_BYTES else features.persist()
        _fit_gbmap(gbmap, features, target, workdir, reduction)
        embedding = gbmap.transform(features).rename(None)
        echo(
            f"      GBMAP: {gbmap.n_boosts} learners on the {estimator.n_features_out_} "
            f"features in {time.perf_counter() - t:.1f} s"
        )
    region = _region_on_grid(estimator.labels_, keep, prep.has_data)
    dataset = io.result_dataset(
        estimator,
        cells,
        region=region,
        target=target.values,
        sample_dim=dim,
        features=features,
        embedding=embedding,
        gbmap=gbmap,
        attrs=provenance(
            config.raw,
            method=type(estimator).__name__,
            params=config.method["params"],  # random_state included (_seeded)
            input_store=inp["store"],
            target=tgt["path"],
            n_common=n_common,
        ),
    )
    dataset = dataset.assign(_application(reduction, prep))
    record = estimator.fit_record()  # the execution (how dcfa apply reads the cells), ...
    dataset.attrs.update(record)
    if "eps_path" in record:  # a tolerance chosen by CV: say which, among what
        path = json.loads(record["eps_path"])
        echo(
            f"      eps = {record['eps']:g} chosen by forward CV among "
            + ", ".join(
                f"{e:g} ({g} groups, R2 {float('nan') if r is None else r:.2f})"
                for e, g, r in zip(path["eps"], path["n_groups"], path["mean_cv_r2"], strict=True)
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
    )


def _fit_gbmap(gbmap, features, target, workdir: WorkDir, reduction: Reduction) -> None:
    """Fit GBMAP with its checkpoints in the work directory: resumed when the checkpoint was
    written for the same ``[gbmap]`` settings (but ``n_boosts``: boosting is stagewise) and the
    same partition, else discarded, said so, and GBMAP starts afresh."""
    settings = {"estimator": type(gbmap).__name__}
    settings.update(
        (k, v)
        for k, v in gbmap.get_params().items()
        if k not in ("n_boosts", "persist", "checkpoint")
    )
    where = workdir.gbmap_checkpoint(settings, _partition_digest(reduction))
    gbmap.set_params(checkpoint=str(where))
    try:
        gbmap.fit(features, target)
    except ValueError as exc:  # a checkpoint that still does not fit these data
        if not (str(exc).startswith("checkpoint:") and where.is_dir() and any(where.iterdir())):
            raise
        found = re.search(r"written by a different fit \((.*)\); use another", str(exc))
        workdir.discard_gbmap(f"it does not match this fit ({found.group(1) if found else exc})")
        gbmap.fit(features, target)


def _partition_digest(reduction: Reduction) -> str:
    """A hash of what the features are made of: every cell's place, group, scale, centre."""
    h = hashlib.sha256()
    for a in (reduction.keep, reduction.labels, reduction.scale, reduction.centre):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    if reduction.weight is not None:
        h.update(np.ascontiguousarray(reduction.weight, dtype=np.float64).tobytes())
    h.update(repr((reduction.aggregation, str(reduction.inputs), reduction.nan_aware)).encode())
    return h.hexdigest()


_HOLD_FRACTION = 0.2  # of the workers' total memory limit


def _held_if_small(field: xr.DataArray, client, echo) -> xr.DataArray:
    """An archive that fits easily in the workers' memory is read once and kept there for
    the second pass (the features): reading and decoding it is a pass's largest cost. A larger
    one is streamed from the store by each pass."""
    workers = scheduler_workers(client).values()
    limits = [w.get("memory_limit") or 0 for w in workers]
    total = sum(limits) if limits and all(limits) else 0
    if not total or field.nbytes > _HOLD_FRACTION * total:
        return field
    echo(
        f"      the archive ({field.nbytes / 2**30:.2f} GiB) is read once and held in the "
        f"workers' memory ({total / 2**30:.1f} GiB) for both passes"
    )
    # below the passes' tasks, so that a block's pass task runs as soon as the block is read
    # (reading and the pass overlap); the first block first, as every pass task needs it
    # (its per-cell shift, dcfa.stats.kernels.column_shift): dask.order reads sibling blocks
    # last to first
    # (unoptimised: the same tasks for the same keys in both calls)
    first = client.persist(_first_blocks(field.data), priority=-1, optimize_graph=False)
    held = client.persist(field, priority=-1, optimize_graph=False)
    del first  # its blocks are held as the field's
    return held


def _first_blocks(data):
    """The blocks of the first chunk of samples of the dask array ``data``, under their own
    keys (persisting them computes and keeps exactly those keys)."""
    import itertools

    import dask.array as da

    keys = {(data.name, 0, *i) for i in itertools.product(*map(range, data.numblocks[1:]))}
    graph = data.__dask_graph__().cull(keys)  # their tasks only
    return da.Array(graph, data.name, ((data.chunks[0][0],), *data.chunks[1:]), meta=data._meta)


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


def _application(reduction: Reduction, prep) -> dict:
    """What applying the result to new months needs, on the grid: the preprocessing (the
    climatology and spread the features were computed with) and every cell's place in the
    reduction (``features[:, g]`` aggregates ``cell_scale * (x - cell_centre)`` over the cells
    of group ``g``, taken in ``cell_index`` order; see :func:`dcfa.cfa.aggregate.aggregate`):
    the :class:`~dcfa.batch.features.Reduction` the features were computed with, stored."""
    keep = reduction.keep

    def on_grid(values, fill, name, attrs):
        grid = np.full(prep.has_data.size, fill, dtype=np.asarray(values).dtype)
        grid[keep] = values
        out = prep.has_data.copy(data=grid.reshape(prep.has_data.shape)).rename(name)
        out.attrs = attrs
        out.encoding = {}
        return out

    out = {
        "cell_index": on_grid(
            np.arange(keep.size, dtype=np.int64),
            -1,
            "cell_index",
            {
                "long_name": "position of the cell in the reduction's input (-1: not used)",
                "aggregation": reduction.aggregation,
            },
        ),
        "cell_scale": on_grid(reduction.scale, 0.0, "cell_scale", {"long_name": "cell weight"}),
        "cell_centre": on_grid(
            reduction.centre, 0.0, "cell_centre", {"long_name": "value removed first"}
        ),
        "has_data": prep.has_data.rename("has_data").drop_encoding(),
    }
    if reduction.weight is not None:  # weights = "area" or given
        out["cell_weight"] = on_grid(
            reduction.weight,
            0.0,
            "cell_weight",
            {"long_name": "weight of the cell in its group's mean (method.params.weights)"},
        )
    if prep.climatology is not None:
        out["climatology"] = prep.climatology.rename("climatology").drop_encoding()
        out["climatology"].attrs = {"long_name": "mean of every calendar month (anomalies)"}
    if prep.std is not None:
        out["spread"] = prep.std.rename("spread").drop_encoding()
        out["spread"].attrs = {"long_name": "standard deviation the anomalies were divided by"}
    return out


def _region_on_grid(labels: np.ndarray, keep: np.ndarray, has_data: xr.DataArray):
    grid = np.full(has_data.size, -1, dtype=np.int32)
    grid[keep] = labels
    return has_data.copy(data=grid.reshape(has_data.shape)).rename("region")


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


def _print_groups(dataset: xr.Dataset, echo, top: int = 8) -> None:
    from dcfa.stacking import BLOCK_DIMS

    names = ["group_target_corr", "group_size", "group_lat", "group_lon", "region"]
    dataset = dataset[[n for n in names if n in dataset]].load()  # one read, not per line
    r = dataset["group_target_corr"].values
    sizes = dataset["group_size"].values
    order = np.argsort(-np.nan_to_num(np.abs(r)))[:top]
    # which variable, window and lag each group is of (a group lies in one: the blocks)
    blocks = [d for d in BLOCK_DIMS if "region" in dataset and d in dataset["region"].dims]
    region = dataset["region"].transpose(*blocks, ...).values if blocks else None
    echo("      groups most correlated with the target:")
    for g in order:
        block = ""
        if region is not None and (region == g).any():
            at = np.argwhere(region == g)[0]
            block = " " + ", ".join(
                str(dataset[d].values[i]) if d == "variable" else f"{d} {dataset[d].values[i]}"
                for d, i in zip(blocks, at, strict=False)
            )
        where = ""
        if "group_lat" in dataset and "group_lon" in dataset:
            where = (
                f" around lat {float(dataset.group_lat[g]):6.1f}, lon "
                f"{float(dataset.group_lon[g]):6.1f}"
            )
        echo(f"        group {g:4d}:{block} {sizes[g]:5d} cells{where}, corr {r[g]:+.2f}")

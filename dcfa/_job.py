"""The batch job behind ``dcfa fit CONFIG.toml``.

Every check that needs no pass over the data comes first (stores, variables, dims, target,
overlap, estimator parameters, output path), so a bad job exits before it writes anything.
Then, on the cluster:

1. preprocessing pass: which cells hold data, the seasonal cycle, the spread;
2. moments pass (cells without data are dropped first);
3. the partition, on the driver, from the moments;
4. the result store (a third pass computes the reduced features), written atomically.

Finished passes are kept in ``<output>.work/`` with a fingerprint of the configuration, so a
killed job rerun with ``--resume`` skips them; the directory is removed once the result is
written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import numpy as np
import xarray as xr

from dcfa import io
from dcfa.config import ConfigError, JobConfig

__all__ = ["run_job", "build_estimator", "build_gbmap"]

_IN_MEMORY_BYTES = 256 * 2**20


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


def build_estimator(method: dict):
    """The estimator named in ``[method]``, its parameters checked now."""
    from dcfa import GenLinCFA, LinCFA, NonLinCFA

    cls = {"lincfa": LinCFA, "nonlincfa": NonLinCFA, "genlincfa": GenLinCFA}[method["name"]]
    return _checked(cls, dict(method["params"]), "method.params")


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
    """Run the job; return the path of the result store."""
    t0 = time.perf_counter()
    inp, tgt = config.input, config.target
    dim = inp["sample_dim"]
    out = Path(output or config.output["store"])
    if out.exists() and not config.output["overwrite"]:
        raise FileExistsError(
            f"output.store: {str(out)!r} exists; set output.overwrite = true or choose another"
        )
    field = io.open_archive(inp["store"], inp["variables"], sample_dim=dim, time=inp["time"])
    target = io.open_target(
        tgt["path"], tgt["variable"], time_column=tgt["time_column"], sample_dim=dim
    )
    n_gaps = int(target.isnull().sum())
    field, target, n_common = io.align_target(field, target, sample_dim=dim, match=tgt["match"])
    if n_common < 4:
        raise ValueError(f"target: only {n_common} samples in common with the input; need >= 4")
    estimator = build_estimator(config.method)
    gbmap = build_gbmap(config)
    grid = [d for d in field.dims if d != dim]
    echo(
        f"[1/5] {inp['store']}: {inp['variables']} {dict(field.sizes)}; target "
        f"{tgt['path']}: {n_common} samples in common"
        + (f" ({n_gaps} missing target values left out)" if n_gaps else "")
    )
    work = out.with_name(out.name + ".work")
    fingerprint = _fingerprint(config, field)
    _prepare_work(work, fingerprint, resume, echo)

    from dcfa._cluster import open_client

    with open_client(config.cluster, scheduler) as client:
        echo(f"      cluster: {client} (dashboard {client.dashboard_link})")
        field = io.plan_chunks(field, sample_dim=dim)

        prep_path = work / "preprocessing.zarr"
        if prep_path.exists():
            prep = io.Preprocessing.from_dataset(xr.open_zarr(prep_path))
            echo("[2/5] preprocessing: reused from the interrupted run")
        else:
            prep = io.fit_preprocessing(
                field, sample_dim=dim, anomalies=inp["anomalies"], standardize=inp["standardize"]
            )
            _atomic_zarr(prep.to_dataset(), prep_path)
            echo(
                f"[2/5] preprocessing pass: {int(prep.has_data.sum())} of "
                f"{int(prep.has_data.size)} cells hold data"
                + ("; anomalies" if inp["anomalies"] else "")
                + ("; standardised" if inp["standardize"] else "")
            )
        prepared = io.apply_preprocessing(field, prep, sample_dim=dim)
        estimator.set_params(sample_dim=dim)
        on_grid = estimator.get_params().get("mode") == "neighbors"
        if on_grid:  # the neighbour mode reads the grid itself; cells without data are excluded
            cells, keep = prepared, np.arange(prep.has_data.size)
        else:  # the other modes skip the cells without data
            cells, keep = _cells_with_data(prepared, prep.has_data, grid)
            radius = estimator.get_params().get("neighbors")
            if isinstance(radius, int) and not isinstance(radius, bool):
                # a radius on the grid, restricted to the cells kept (the stacked input is 1-D)
                from dcfa.neighbors import grid_adjacency

                shape = tuple(field.sizes[d] for d in grid)
                estimator.set_params(neighbors=grid_adjacency(shape, radius)[keep][:, keep])

        moments = _load_moments(work)
        action = "reused from the interrupted run" if moments is not None else "pass"
        t = time.perf_counter()
        estimator.fit(cells, target, moments=moments)
        _save_moments(work, estimator)
        echo(
            f"[3/5] moments {action} and partition: {keep.size} cells -> "
            f"{estimator.n_features_out_} groups ({len(estimator.excluded_)} excluded) in "
            f"{time.perf_counter() - t:.1f} s"
        )

        embedding = None
        if gbmap is not None:
            t = time.perf_counter()
            features = estimator.transform(cells)
            if features.nbytes < _IN_MEMORY_BYTES:
                # samples x groups is small: fit GBMAP in memory, not one round trip to the
                # cluster per L-BFGS evaluation
                features = features.compute()
            gbmap.set_params(checkpoint=str(work / "gbmap"))
            gbmap.fit(features, target)
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
            embedding=embedding,
            gbmap=gbmap,
            attrs=io.provenance(
                config.raw,
                method=type(estimator).__name__,
                params=config.method["params"],
                input_store=inp["store"],
                target=tgt["path"],
                n_common=n_common,
            ),
        )
        echo("[4/5] writing the result (a pass computes the reduced features)")
        io.write_result(
            out, dataset, moments=estimator.moments_, overwrite=config.output["overwrite"]
        )
    shutil.rmtree(work, ignore_errors=True)
    echo(f"[5/5] {out}: {estimator.n_features_out_} groups; {time.perf_counter() - t0:.1f} s")
    _print_groups(xr.open_zarr(out), echo)  # from the store: no second pass
    return out


def _cells_with_data(field: xr.DataArray, has_data: xr.DataArray, grid: list[str]):
    """The field stacked to (sample, cell) over the cells that hold data, with their coords."""
    stacked = field.stack(cell=grid)
    keep = np.flatnonzero(has_data.values.ravel())
    cells = stacked.isel(cell=keep)
    cells = cells.reset_index("cell").assign_coords(cell=np.arange(keep.size))
    return cells, keep


def _region_on_grid(labels: np.ndarray, keep: np.ndarray, has_data: xr.DataArray):
    grid = np.full(has_data.size, -1, dtype=np.int32)
    grid[keep] = labels
    return has_data.copy(data=grid.reshape(has_data.shape)).rename("region")


def _fingerprint(config: JobConfig, field: xr.DataArray) -> str:
    key = {
        "input": {**config.input, "store": str(Path(config.input["store"]).resolve())},
        "target": {**config.target, "path": str(Path(config.target["path"]).resolve())},
        "method": config.method,
        "shape": dict(field.sizes),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _prepare_work(work: Path, fingerprint: str, resume: bool, echo) -> None:
    stamp = work / "fingerprint.json"
    if work.exists() and resume:
        stored = json.loads(stamp.read_text()).get("fingerprint") if stamp.exists() else None
        if stored != fingerprint:
            raise ConfigError(
                f"--resume: the work in {str(work)!r} was made by a different configuration or "
                "input; remove it or run without --resume"
            )
        return
    if work.exists():
        echo(
            f"      found work of an interrupted run in {work}; starting over (use --resume "
            "to reuse it)"
        )
        shutil.rmtree(work)
    work.mkdir(parents=True)
    stamp.write_text(json.dumps({"fingerprint": fingerprint}))


def _atomic_zarr(ds: xr.Dataset, path: Path) -> None:
    from dcfa._moments import _replace_dir

    tmp = path.with_name(f".{path.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    io.to_zarr(ds, tmp, mode="w")
    _replace_dir(tmp, path)


def _save_moments(work: Path, estimator) -> None:
    """Keep what the pass produced: one Moments, or one per row segment (NonLinCFA)."""
    if (work / "moments").exists():
        return
    parts = getattr(estimator, "segment_moments_", None)
    if parts is None:
        estimator.moments_.save(work / "moments")
        return
    for i, m in enumerate(parts):
        m.save(work / "moments" / f"part-{i:03d}")


def _load_moments(work: Path):
    from dcfa._moments import load_moments

    path = work / "moments"
    if not path.exists():
        return None
    parts = sorted(path.glob("part-*"))
    return [load_moments(p) for p in parts] if parts else load_moments(path)


def _print_groups(dataset: xr.Dataset, echo, top: int = 8) -> None:
    r = dataset["group_target_corr"].values
    sizes = dataset["group_size"].values
    order = np.argsort(-np.nan_to_num(np.abs(r)))[:top]
    echo("      groups most correlated with the target:")
    for g in order:
        where = ""
        if "group_lat" in dataset and "group_lon" in dataset:
            where = (
                f" around lat {float(dataset.group_lat[g]):6.1f}, lon "
                f"{float(dataset.group_lon[g]):6.1f}"
            )
        echo(f"        group {g:4d}: {sizes[g]:5d} cells{where}, corr {r[g]:+.2f}")

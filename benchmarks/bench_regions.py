"""Readable, predictive regions at any grid size: every rule on a field with known regions.

    python benchmarks/bench_regions.py --quick              # 4 degree, 240 months (seconds)
    python benchmarks/bench_regions.py                      # 1 degree: 64 800 cells, 1 200 months
    python benchmarks/bench_regions.py --resolution 0.25    # 1 036 800 cells, 500 months
    python benchmarks/bench_regions.py --rows LinCFA-grid   # some rows of SETTINGS only
    python benchmarks/bench_regions.py --oversized          # 10 GB store through 2 x 500 MB
    python benchmarks/bench_regions.py --resolution 0.25 --build-only   # just write the store
    python benchmarks/bench_regions.py --json benchmarks/results/regions_1deg.json

Data: ``dcfa.datasets.make_regions_field`` with 40 Voronoi regions of which 4 drive the target,
30 % land (NaN cells), float32, seed 0; written once to a Zarr store under ``--data`` (default
/tmp/dcfa-bench-regions; one store per set of parameters, reused while it exists, rebuilt when
missing) in chunks of 120 months x a band of latitude rows x every longitude, about
``--chunk-mb`` MB each (100 by default; 24 for ``--oversized``, whose workers hold 500 MB).

Each row of :data:`SETTINGS` is fitted out of core from the store (opened lazily) through a
``distributed.LocalCluster`` of 2 single-threaded worker processes with ``--memory-limit`` each,
one row after the other; a row that fails prints its error and the others still run. Columns:

* ``groups``: ``n_features_out_``;
* ``1-patch``: share of the groups that are one connected patch (:func:`dcfa.geo.group_patches`,
  8-neighbourhood, across the longitude seam: the field is global), and the same share among
  the groups of two cells or more (``multi``: a single cell is trivially one patch);
* ``pure``: driving regions kept pure: >= 95 % of their cells in groups that hold no other
  region's cells (cells the model excluded count as not kept);
* ``foreign``: for each driving region, the cells of other regions in the group that holds
  most of its cells: a group of thousands of a region's cells with one cell of a neighbour is
  not pure, and this says by how much;
* ``enclosed``: of those, the cells in a piece of their own region cut off from the rest of
  it, whose ocean neighbours are all in the driving region's group (:func:`enclosed_cells`):
  no partition into contiguous groups keeps such a piece with its region;
* ``R2/oracle``: blocked-CV R^2 (5 contiguous blocks, ``dcfa.skill.blocked_cv``) of OLS on the
  group series of ``model.transform`` over that of OLS on the true regions' mean series (the
  partition is fitted once on all months; only the regression is cross-validated);
* ``fit s``: wall time of ``fit`` (and, in the results file, the load average after it);
* ``worker MiB``: peak resident memory of each worker process during ``fit`` (the workers are
  restarted before each row and report their ``VmHWM`` after it; polling them during the
  fit slows its Python loop down); ``driver MiB``: this process's peak (its RSS sampled every
  0.2 s by a thread, and ``ru_maxrss`` when the peak is reached during the fit);
  ``restarts``: worker processes that were replaced during the fit (a worker killed by its
  nanny for exceeding the memory limit); ``eval s``: wall time of ``transform`` and the CV.

``--oversized`` fits the LinCFA grid row on 720 x 1440 cells x 2 400 months (about 10 GB of
float32) through 2 workers of 500 MB, i.e. a store 10x the workers' total memory, then again
with ample memory (``--ample-memory``) and says whether the partitions are equal. The free
disk space is checked before any store is written.

``--json PATH`` writes the field, the oracle's skill and every row's measurements (raw: groups,
shares, per driving region its purity and foreign and enclosed cells, R^2, seconds, MiB, the
error of a row that failed, and what a CV estimator chose), and the load average at the start
and the end of the run (benchmarks/_results.py), after each row so that a run cut short leaves
the rows it finished (``"complete": false``); docs/evidence/regions.md renders its tables from
these files.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import shutil
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import dask
import numpy as np
import psutil
import xarray as xr
from _results import write_results  # run as a script: its directory is on sys.path
from sklearn.linear_model import LinearRegression

from dcfa import GenLinCFA, GenLinCFACV, LinCFA, NonLinCFA, NonLinCFACV, RegionsCV
from dcfa.geo import group_patches
from dcfa.neighbors import grid_adjacency, periodic_dims

# (name, estimator class, parameters): the rows of the table; change freely
SETTINGS = [
    ("RegionsCV", RegionsCV, {}),  # the recommended call: its defaults (neighbors=1)
    ("RegionsCV-signal", RegionsCV, {"signal": True}),  # one signal's groups merge first
    (
        "LinCFA-grid",
        LinCFA,
        {"neighbors": 1, "neighborhood": "seed", "mode": "grid", "random_state": 0},
    ),
    ("LinCFA", LinCFA, {"neighbors": 1, "random_state": 0}),
    ("GenLinCFA", GenLinCFA, {"neighbors": 1}),
    ("GenLinCFA-0.6", GenLinCFA, {"neighbors": 1, "eps": 0.6}),
    ("GenLinCFA-0.65", GenLinCFA, {"neighbors": 1, "eps": 0.65}),
    ("GenLinCFA-0.7", GenLinCFA, {"neighbors": 1, "eps": 0.7}),
    ("NonLinCFA-1e-2", NonLinCFA, {"neighbors": 1, "eps": 1e-2}),
    ("NonLinCFA-2e-2", NonLinCFA, {"neighbors": 1, "eps": 2e-2}),
    ("NonLinCFA-3e-2", NonLinCFA, {"neighbors": 1, "eps": 3e-2}),
    (
        "GenLinCFACV",
        GenLinCFACV,
        {"neighbors": 1, "epsilons": (0.5, 0.6, 0.7, 0.8), "n_splits": 2, "max_groups": 100},
    ),
    (  # at 0.25 degree: the tolerance that keeps every driving region pure, and the default
        "GenLinCFACV-0.25",
        GenLinCFACV,
        {"neighbors": 1, "epsilons": (0.65, 0.75), "n_splits": 2},
    ),
    (
        "NonLinCFACV",
        NonLinCFACV,
        {"neighbors": 1, "epsilons": (1e-3, 3e-3, 1e-2, 3e-2), "n_splits": 2, "max_groups": 100},
    ),
    (
        "NonLinCFACV-2",
        NonLinCFACV,
        {"neighbors": 1, "epsilons": (1e-2, 3e-2), "n_splits": 2, "max_groups": 100},
    ),
]

# the field: everything but its size
FIELD = {"n_regions": 40, "n_active": 4, "land_fraction": 0.3, "seed": 0}

# grid (lat, lon) and months per resolution
RESOLUTIONS = {
    "4": ((45, 90), 240),  # --quick
    "1": ((180, 360), 1200),
    "0.25": ((720, 1440), 500),
    "oversized": ((720, 1440), 2400),
}

TIME_CHUNK = 120
PURE = 0.95  # share of a region's cells in pure groups for the region to count as kept pure
SAMPLE_EVERY = 0.2  # seconds between two memory samples
MiB = 2**20


############################################################################################
# the store


def store_chunks(shape: tuple[int, int], n_time: int, chunk_mb: float) -> tuple[int, int]:
    """(months, latitude rows) per chunk: 120 months x the rows of about ``chunk_mb`` MB, every
    longitude in the chunk (the grid pass then wraps the seam inside its kernel, no halo copy)."""
    months = min(TIME_CHUNK, n_time)
    row_bytes = months * shape[1] * 4
    return months, int(np.clip(chunk_mb * 1e6 // row_bytes, 1, shape[0]))


def store_path(data: Path, shape, n_time: int, chunks) -> Path:
    f = FIELD
    name = (
        f"regions_{shape[0]}x{shape[1]}_t{n_time}_r{f['n_regions']}_a{f['n_active']}"
        f"_land{f['land_fraction']:g}_s{f['seed']}_c{chunks[0]}x{chunks[1]}.zarr"
    )
    return data / name


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def size(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / MiB:.1f} MiB"


def check_disk(data: Path, need: int) -> None:
    """Exit (status 2) unless the disk holding ``data`` has ``need`` bytes and a margin."""
    where = data
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    margin = max(need // 2, 5 * 2**30)
    print(
        f"disk: {free / 2**30:.1f} GiB free under {where}; the store needs up to "
        f"{need / 2**30:.1f} GiB (uncompressed) + {margin / 2**30:.1f} GiB margin",
        flush=True,
    )
    if free < need + margin:
        sys.exit(f"not enough free disk space under {where} for the store; nothing written")


def ensure_store(data: Path, shape, n_time: int, chunk_mb: float) -> Path:
    """The Zarr store of the field, written (on this process's threads) when missing."""
    from dcfa.datasets import write_regions_store

    chunks = store_chunks(shape, n_time, chunk_mb)
    path = store_path(data, shape, n_time, chunks)
    if path.exists():
        print(f"store: {path} (cached, {size(directory_bytes(path))})", flush=True)
        return path
    check_disk(data, n_time * shape[0] * shape[1] * 4)
    data.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=2):
        write_regions_store(
            path,
            n_time=n_time,
            shape=shape,
            time_chunk=chunks[0],
            space_chunks=(chunks[1], shape[1]),
            **FIELD,
        )
    seconds = time.perf_counter() - t
    stored = directory_bytes(path)
    mb = chunks[0] * chunks[1] * shape[1] * 4 / 1e6
    print(
        f"store: built {path} in {seconds:.1f} s: {size(stored)} on disk "
        f"({size(n_time * shape[0] * shape[1] * 4)} of float32), chunks "
        f"{chunks[0]} months x {chunks[1]} x {shape[1]} cells ({mb:.0f} MB)",
        flush=True,
    )
    return path


############################################################################################
# metrics


def purity(labels: np.ndarray, region: np.ndarray, regions) -> np.ndarray:
    """Share of every region's cells in groups that hold no other region's cells."""
    labels, region = labels.ravel(), region.ravel()
    used = labels >= 0
    pairs = np.unique(np.column_stack([labels[used], region[used]]), axis=0)
    n_regions_in = np.bincount(pairs[:, 0], minlength=int(labels.max(initial=-1)) + 1)
    in_pure = np.zeros(labels.size, dtype=bool)
    in_pure[used] = n_regions_in[labels[used]] == 1
    return np.array([in_pure[region == r].mean() for r in regions])


def main_group(labels: np.ndarray, region: np.ndarray, r: int) -> int | None:
    """The group holding most of region ``r``'s cells (flat arrays; None: none in a group)."""
    mine = labels[(region == r) & (labels >= 0)]
    return int(np.bincount(mine).argmax()) if mine.size else None


def strays(labels: np.ndarray, region: np.ndarray, r: int) -> np.ndarray:
    """The cells of other regions in region ``r``'s main group (flat indices)."""
    labels, region = labels.ravel(), region.ravel()
    main = main_group(labels, region, r)
    if main is None:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero((labels == main) & (region != r))


def foreign_cells(labels: np.ndarray, region: np.ndarray, regions) -> list[int]:
    """For every region in ``regions``, the cells of other regions in the group holding most
    of its cells (0 when none of its cells is in a group)."""
    return [int(strays(labels, region, r).size) for r in regions]


def enclosed_cells(labels: np.ndarray, region: np.ndarray, regions) -> list[int]:
    """For every region in ``regions``, how many of the cells :func:`foreign_cells` counts lie
    in a piece of their own region (8-neighbourhood, periodic in longitude) whose ocean
    neighbours are all in that group: cut off from the rest of their region by land and the
    driving region, so a partition into contiguous groups can keep the driving region pure only
    by making the piece a group of its own."""
    from scipy.sparse.csgraph import connected_components

    adjacency = grid_adjacency(labels.shape, 1, periodic=(1,)).tocsr()
    labels, region = labels.ravel(), region.ravel()
    out = []
    for r in regions:
        stray = strays(labels, region, r)
        main = labels[stray[0]] if stray.size else None
        n = 0
        for q in np.unique(region[stray]):
            cells = np.flatnonzero(region == q)
            _, piece_of = connected_components(adjacency[cells][:, cells], directed=False)
            for p in np.unique(piece_of[np.isin(cells, stray)]):
                piece = cells[piece_of == p]
                near = np.setdiff1d(adjacency[piece].indices, piece)
                near = near[region[near] >= 0]
                if np.all(labels[near] == main):
                    n += int(np.isin(piece, stray).sum())
        out.append(n)
    return out


def region_means(ds: xr.Dataset) -> np.ndarray:
    """The true regions' mean series (n_time, n_regions), in one pass over the store."""
    from dcfa.cfa.aggregate import aggregate

    data = ds.field.data
    n = data.shape[0]
    X = data.reshape(n, -1)  # every longitude is in one chunk: no rechunk
    labels = ds.region.values.ravel()
    D = labels.size
    return np.asarray(aggregate(X, labels, np.ones(D), np.zeros(D), how="mean").compute())


def cv_r2(Z: np.ndarray, y: np.ndarray, n_splits: int) -> float:
    from dcfa.skill import blocked_cv

    return blocked_cv(LinearRegression(), Z, y, n_splits=n_splits).mean


############################################################################################
# memory


class MemorySampler:
    """Peak RSS of every worker process and of this process during a fit.

    The workers are restarted before the fit and report their own peak (``VmHWM``, kept by
    the kernel) after it: nothing polls them during the fit, whose partition loop is
    Python on this process (polling them through the client's event loop slowed it down
    several times over). This process is sampled by a thread that reads its own RSS.
    """

    def __init__(self, client):
        self.client = client

    def _workers(self) -> dict:
        return self.client.run(lambda: (os.getpid(), _peak_rss()))

    def __enter__(self):
        self.client.restart()
        self.proc = psutil.Process()
        self.maxrss_before = _maxrss()
        self.driver = self.proc.memory_info().rss
        self.start = {addr: pid for addr, (pid, _) in self._workers().items()}
        self.peak: dict = {}
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.driver = max(self.driver, self.proc.memory_info().rss)
            self._stop.wait(SAMPLE_EVERY)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            self.peak = {(addr, pid): v for addr, (pid, v) in self._workers().items()}
        except Exception:
            self.failures += 1
        maxrss = _maxrss()
        if maxrss > self.maxrss_before:
            self.driver = max(self.driver, maxrss)

    @property
    def restarts(self) -> int:
        """Worker processes replaced during the fit (e.g. killed for exceeding their limit)."""
        return sum((addr, pid) not in self.peak for addr, pid in self.start.items())

    def worker_mib(self) -> list[float]:
        return [v / MiB for _, v in sorted(self.peak.items())]


def _peak_rss() -> int:
    """This process's peak RSS since it started its program: ``VmHWM`` (``ru_maxrss`` would
    keep the peak of the process it was forked from, e.g. this driver for a worker)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return _maxrss()


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


############################################################################################
# the runs


@dataclass
class Row:
    name: str
    groups: int | None = None
    one_patch: float | None = None
    one_patch_multi: float | None = None
    pure: str = ""
    foreign: str = ""
    enclosed: str = ""
    ratio: float | None = None
    r2: float | None = None
    fit_seconds: float | None = None
    worker_mib: list = field(default_factory=list)
    driver_mib: float | None = None
    restarts: int | None = None
    eval_seconds: float | None = None
    load: float | None = None
    error: str = ""
    call: str = ""
    purity: list = field(default_factory=list)
    foreign_cells: list = field(default_factory=list)
    enclosed_cells: list = field(default_factory=list)
    chosen: dict = field(default_factory=dict)
    labels: np.ndarray | None = field(default=None, repr=False)

    def record(self) -> dict:
        """The row's measurements for the results file (no labels)."""
        return {k: v for k, v in asdict(self).items() if k != "labels"}


def call(cls, params: dict) -> str:
    """``GenLinCFA(neighbors=1, eps=0.65)``: the row's estimator as it is called."""
    args = ", ".join(
        f'{k}="{v}"' if isinstance(v, str) else f"{k}={v!r}" for k, v in params.items()
    )
    return f"{cls.__name__}({args})"


#: what a cross-validated estimator chose (its fitted attributes, when it has them)
CHOSEN = ("eps_", "level_")


def fit_row(name, cls, params, ds, *, client, periodic, oracle, n_splits, skill) -> Row:
    row = Row(name, call=call(cls, params))
    model = cls(**params)
    y = ds.target.values
    mem = MemorySampler(client)
    try:
        with mem:
            t = time.perf_counter()
            try:
                model.fit(ds.field, y)
            finally:
                row.fit_seconds = time.perf_counter() - t
                row.load = os.getloadavg()[0]  # 1 minute: other work during the fit
    except Exception as exc:  # one row's failure does not stop the others
        row.error = f"{type(exc).__name__}: {_first_line(exc)}"
        if os.environ.get("BENCH_TRACEBACK"):
            traceback.print_exc()
    if hasattr(mem, "peak"):
        row.worker_mib = mem.worker_mib()
        row.driver_mib = mem.driver / MiB
        row.restarts = mem.restarts
    if row.error:
        return row
    row.labels = np.asarray(model.labels_)
    row.chosen = {a: float(getattr(model, a)) for a in CHOSEN if hasattr(model, a)}
    row.groups = int(model.n_features_out_)
    label_map = model.label_map_.transpose("lat", "lon")
    patches = group_patches(label_map, periodic=periodic, n_groups=row.groups)
    sizes = np.asarray(model.group_sizes_)
    row.one_patch = float(np.mean(patches == 1))
    multi = sizes > 1
    row.one_patch_multi = float(np.mean(patches[multi] == 1)) if multi.any() else float("nan")
    driving = np.flatnonzero(ds.beta.values != 0)
    kept = purity(label_map.values, ds.region.values, driving)
    row.purity = kept.tolist()
    row.pure = f"{int((kept >= PURE).sum())}/{driving.size}"
    row.foreign_cells = foreign_cells(label_map.values, ds.region.values, driving)
    row.foreign = ",".join(map(str, row.foreign_cells))
    row.enclosed_cells = enclosed_cells(label_map.values, ds.region.values, driving)
    row.enclosed = ",".join(map(str, row.enclosed_cells))
    if skill:
        t = time.perf_counter()
        try:
            Z = np.asarray(model.transform(ds.field).compute())
            row.r2 = cv_r2(Z, y, n_splits)
            row.ratio = row.r2 / oracle
        except Exception as exc:
            row.error = f"skill: {type(exc).__name__}: {_first_line(exc)}"
        row.eval_seconds = time.perf_counter() - t
    return row


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else ""


def _fmt(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return format(value, spec)


HEADER = (
    f"{'setting':<16s} {'groups':>8s} {'1-patch':>8s} {'multi':>6s} {'pure':>5s} {'foreign':>12s} "
    f"{'enclosed':>12s} {'R2/oracle':>9s} {'fit s':>8s} {'worker MiB':>13s} {'driver MiB':>10s} "
    f"{'restarts':>8s} "
    f"{'eval s':>7s}"
)


def print_row(row: Row) -> None:
    workers = "/".join(f"{v:.0f}" for v in row.worker_mib) or "-"
    print(
        f"{row.name:<16s} {_fmt(row.groups, ',d'):>8s} {_fmt(row.one_patch, '.2f'):>8s} "
        f"{_fmt(row.one_patch_multi, '.2f'):>6s} {row.pure or '-':>5s} {row.foreign or '-':>12s} "
        f"{row.enclosed or '-':>12s} {_fmt(row.ratio, '.3f'):>9s} "
        f"{_fmt(row.fit_seconds, '.1f'):>8s} {workers:>13s} "
        f"{_fmt(row.driver_mib, '.0f'):>10s} {_fmt(row.restarts, 'd'):>8s} "
        f"{_fmt(row.eval_seconds, '.1f'):>7s}" + (f"   {row.error}" if row.error else ""),
        flush=True,
    )


def start_cluster(memory_limit: str):
    import dask
    from distributed import Client, LocalCluster

    # Each row restarts the workers. A LocalCluster checks, lost-worker-timeout (15 s) after a
    # worker leaves, whether a worker of that name is back, and closes its nanny for good if
    # not: a restart that falls 15 s after the previous one (a row whose fit and evaluation
    # take about that long) is caught with its workers away, and they never return. The
    # workers here only ever leave to be restarted.
    dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"})
    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=memory_limit,
        dashboard_address=None,
        silence_logs=40,
    )
    return cluster, Client(cluster)


def run_rows(path, settings, *, memory_limit, n_splits, skill, report=None) -> list[Row]:
    """Fit every row of ``settings`` on the store at ``path``; ``report(field, rows)`` after
    each row, with the field's description (and the oracle's R^2) and the rows so far."""
    ds = xr.open_zarr(path, chunks={})
    periodic = 1 in periodic_dims(ds.field, "auto")
    cluster, client = start_cluster(memory_limit)
    rows = []
    try:
        nlat, nlon = ds.region.shape
        described = {
            "shape": [nlat, nlon],
            "ocean_cells": int((ds.region.values >= 0).sum()),
            "months": ds.sizes["time"],
            "bytes": ds.field.nbytes,
            "workers": 2,
            "memory_limit": memory_limit,
            "periodic": periodic,
            "field": FIELD,
            "pure_share": PURE,
            "splits": n_splits,
        }
        print(
            f"\nfield: {nlat} x {nlon} cells ({int((ds.region.values >= 0).sum()):,d} ocean), "
            f"{ds.sizes['time']} months, {size(ds.field.nbytes)}; 2 workers x "
            f"{memory_limit}; longitude periodic: {periodic}",
            flush=True,
        )
        oracle = float("nan")
        if skill:
            t = time.perf_counter()
            oracle = cv_r2(region_means(ds), ds.target.values, n_splits)
            print(
                f"oracle (OLS on the {FIELD['n_regions']} true region means): blocked-CV R^2 "
                f"{oracle:.3f} ({time.perf_counter() - t:.1f} s)",
                flush=True,
            )
        described["oracle_r2"] = oracle
        print(HEADER, flush=True)
        for name, cls, params in settings:
            if _stale_tasks(client):
                # a released task the last row left on the scheduler makes the restart before
                # the fit fail, and the next graph that shares its key: a new cluster
                client.close()
                cluster.close()
                cluster, client = start_cluster(memory_limit)
            row = fit_row(
                name,
                cls,
                params,
                ds,
                client=client,
                periodic=periodic,
                oracle=oracle,
                n_splits=n_splits,
                skill=skill,
            )
            print_row(row)
            rows.append(row)
            if report is not None:
                report(described, rows)
    finally:
        # a worker's heartbeat racing the scheduler's shutdown logs a harmless error: quiet
        with contextlib.suppress(Exception):
            client.run(_quiet_logs)
        client.close()
        cluster.close()
    return rows


def _stale_tasks(client, wait: float = 5.0) -> int:
    """Tasks the scheduler still holds ``wait`` seconds after the last row (0: none)."""
    gc.collect()  # the last row's model may hold futures until collected
    deadline = time.monotonic() + wait
    while n := client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)):
        if time.monotonic() > deadline:
            print(f"({n} tasks left on the scheduler: a new cluster for the next row)")
            break
        time.sleep(0.5)
    return n


def _quiet_logs() -> None:
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--resolution", choices=["1", "0.25"], default="1")
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="rows of SETTINGS to run")
    parser.add_argument("--quick", action="store_true", help="4 degree, 240 months")
    parser.add_argument(
        "--oversized",
        action="store_true",
        help="720 x 1440 cells x 2400 months (~10 GB) through 2 workers of 500 MB",
    )
    parser.add_argument("--memory-limit", help="per worker (default 4GB; 500MB if --oversized)")
    parser.add_argument(
        "--ample-memory",
        default="4GB",
        help="--oversized: per worker for the reference fit (default 4GB)",
    )
    parser.add_argument(
        "--no-compare", action="store_true", help="--oversized: skip the reference fit"
    )
    parser.add_argument("--data", type=Path, default=Path("/tmp/dcfa-bench-regions"))
    parser.add_argument("--months", type=int, help="override the number of months")
    parser.add_argument("--chunk-mb", type=float, help="store chunk size (default 100; 24)")
    parser.add_argument("--build-only", action="store_true", help="write the store and stop")
    parser.add_argument("--no-skill", action="store_true", help="skip transform and the CV R^2")
    parser.add_argument("--splits", type=int, default=5, help="blocks of the blocked CV")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.json is not None and args.oversized:
        parser.error("--json writes the table of a resolution, not --oversized")

    key = "oversized" if args.oversized else "4" if args.quick else args.resolution
    shape, n_time = RESOLUTIONS[key]
    n_time = args.months or n_time
    chunk_mb = args.chunk_mb or (24.0 if args.oversized else 100.0)
    memory_limit = args.memory_limit or ("500MB" if args.oversized else "4GB")
    names = [name for name, _, _ in SETTINGS]
    wanted = args.rows or (names[:1] if args.oversized else names)
    unknown = [n for n in wanted if n not in names]
    if unknown:
        parser.error(f"--rows: {unknown} not in SETTINGS {names}")
    settings = [s for s in SETTINGS if s[0] in wanted]

    path = ensure_store(args.data, shape, n_time, chunk_mb)
    if args.build_only:
        return
    # skill needs the (months x groups) features in memory and a pass over the store: skipped
    # for the oversized run, whose point is the fit through small workers
    skill = not (args.no_skill or args.oversized)
    load = {"start": os.getloadavg()}
    report = None
    if args.json is not None:

        def report(described: dict, done: list[Row]) -> None:
            load["end"] = os.getloadavg()
            results = {"resolution": key, **described, "store": path}
            results["complete"] = len(done) == len(settings)
            results["rows"] = [r.record() for r in done]
            write_results(args.json, results, argv, script=__file__, load=load)

    rows = run_rows(
        path,
        settings,
        memory_limit=memory_limit,
        n_splits=args.splits,
        skill=skill,
        report=report,
    )
    if args.oversized and not args.no_compare:
        print(f"\nreference fit with {args.ample_memory} per worker:", flush=True)
        ample = run_rows(
            path, settings, memory_limit=args.ample_memory, n_splits=args.splits, skill=False
        )
        for tight, ref in zip(rows, ample, strict=True):
            same = (
                tight.labels is not None
                and ref.labels is not None
                and np.array_equal(tight.labels, ref.labels)
            )
            print(f"{tight.name}: same partition as with ample memory: {same}", flush=True)


if __name__ == "__main__":
    main()

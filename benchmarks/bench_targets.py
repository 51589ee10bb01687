"""Several targets in one job against one job per target, on the same cluster.

    python benchmarks/bench_targets.py                 # 1 degree, 1 200 months, 1/2/4 targets
    python benchmarks/bench_targets.py --quick         # 2 degree, 600 months, 1/2 targets
    python benchmarks/bench_targets.py --json benchmarks/results/targets.json

Data: :func:`dcfa.datasets.write_regions_store` (float32, 30 % land, 40 regions, 8 driving
ones), written once to a temporary directory in chunks of 120 months x the whole grid; the
targets are the means of single driving regions plus noise, in one CSV file. Method: the
job's default (``RegionsCV``), anomalies on. For each number of targets K, the same K
targets are fitted by one job (``target.variable`` a list: the archive read once, held on
the workers) and by K jobs of one target each (each reads the archive), one after the
other on one ``LocalCluster`` of 2 worker processes of ``--memory-limit`` each (small enough
that a one-target job streams the archive instead of holding it). Each is timed from start
to its last result written; the K-target job's time over one single-target job's is what
the goal ("the pass does not grow with the number of targets") is about, and its time over
the K single jobs is the saving.

In Python, on the field loaded into this process (no anomalies, no cluster): for each K,
``dcfa.fit_each(dcfa.RegionsCV(), field, targets)``, which makes RegionsCV's first stage
once (:meth:`dcfa.RegionsCV.fit_targets`), against K separate ``RegionsCV().fit``; their maps
are checked equal.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from _results import write_results  # run as a script: its directory is on sys.path
from distributed import Client, LocalCluster

import dcfa
from dcfa.batch.config import load_config
from dcfa.batch.job import run_job
from dcfa.datasets import write_regions_store

JOB = """
[input]
store = "{store}"
variables = ["field"]
anomalies = true

[target]
path = "{target}"
match = "exact"

[output]
store = "{output}"
overwrite = true
"""


def targets_file(store: Path, path: Path, k: int, seed: int = 0) -> list[str]:
    """``k`` targets, each the mean of one driving region plus noise, as CSV columns."""
    ds = xr.open_zarr(store)
    region = ds.region.values
    rng = np.random.default_rng(seed)
    drivers = [int(r) for r in np.unique(region[region >= 0])][:k]
    table = {"time": ds.time.values}
    names = []
    for r in drivers:
        mean = ds.field.where(ds.region == r).mean(["lat", "lon"]).values
        name = f"region{r}"
        table[name] = (mean - mean.mean()) / mean.std() + rng.standard_normal(mean.size)
        names.append(name)
    pd.DataFrame(table).to_csv(path, index=False)
    return names


def timed_job(job: Path, overrides: list[str], scheduler: str) -> float:
    t = time.perf_counter()
    run_job(load_config(job, overrides), scheduler=scheduler, echo=lambda *a: None)
    return time.perf_counter() - t


def timed_fits(field: xr.DataArray, targets: dict) -> dict:
    """``fit_each`` on all ``targets`` against one ``fit`` per target, the maps compared."""
    t = time.perf_counter()
    shared = dcfa.fit_each(dcfa.RegionsCV(), field, targets)
    together = time.perf_counter() - t
    alone = []
    for name, y in targets.items():
        t = time.perf_counter()
        model = dcfa.RegionsCV().fit(field, y)
        alone.append(time.perf_counter() - t)
        assert np.array_equal(model.labels_, shared[name].labels_), name
    return {"fit_each": together, "separate_fits": alone}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 degree, 600 months, K = 1, 2")
    parser.add_argument("--targets", type=int, nargs="+", default=None, help="values of K")
    parser.add_argument("--memory-limit", default="700MB", help="per worker")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    shape, n_time = ((90, 180), 600) if args.quick else ((180, 360), 1200)
    ks = args.targets or ([1, 2] if args.quick else [1, 2, 4])
    work = Path(tempfile.mkdtemp(prefix="dcfa-bench-targets-"))
    try:
        store = write_regions_store(
            work / "field.zarr", n_time=n_time, shape=shape, n_regions=40, n_active=8,
            land_fraction=0.3, time_chunk=120, seed=0,
        )  # fmt: skip
        nbytes = xr.open_zarr(store).field.nbytes
        names = targets_file(store, work / "targets.csv", max(ks))
        job = work / "job.toml"
        job.write_text(
            JOB.format(store=store, target=work / "targets.csv", output=work / "r-{target}.zarr")
        )
        print(f"{shape[0]} x {shape[1]} cells, {n_time} months: {nbytes / 2**30:.2f} GiB")
        rows = {}
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, memory_limit=args.memory_limit,
                dashboard_address=":0",
            ) as cluster,
            Client(cluster),
        ):  # fmt: skip
            address = cluster.scheduler_address
            timed_job(job, [f"target.variable={names[0]}"], address)  # warm-up
            for k in ks:
                chosen = names[:k]
                listed = "[" + ", ".join(f'"{n}"' for n in chosen) + "]"
                one = timed_job(job, [f"target.variable={listed}"], address)
                each = [timed_job(job, [f"target.variable={n}"], address) for n in chosen]
                rows[k] = {"one_job": one, "separate_jobs": each}
                print(
                    f"K = {k}: one job {one:.1f} s; {k} separate jobs {sum(each):.1f} s "
                    f"({', '.join(f'{t:.1f}' for t in each)}); one job / one target "
                    f"{one / each[0]:.2f}x, / {k} jobs {one / sum(each):.2f}x"
                )
        field = xr.open_zarr(store).field.load()
        table = pd.read_csv(work / "targets.csv", index_col="time", parse_dates=True)
        fits = {}
        for k in ks:
            fits[k] = timed_fits(field, {n: table[n].values for n in names[:k]})
            alone = fits[k]["separate_fits"]
            print(
                f"K = {k}: fit_each {fits[k]['fit_each']:.1f} s; {k} fits {sum(alone):.1f} s "
                f"({fits[k]['fit_each'] / sum(alone):.2f}x)"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json is not None:
        results = {
            "grid": list(shape), "months": n_time, "bytes": nbytes,
            "memory_limit": args.memory_limit, "targets": rows, "fit_each": fits,
        }  # fmt: skip
        write_results(args.json, results, argv, script=__file__)


if __name__ == "__main__":
    main()

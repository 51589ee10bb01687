"""Peak memory of dense (``mode="dense"``) fits, in units of their ``D x D`` float64 matrix.

    python benchmarks/bench_dense_memory.py            # D = 11 340 cells (63 x 180), ~1 GiB matrix
    python benchmarks/bench_dense_memory.py --quick    # D = 3 000 cells (30 x 100)
    python benchmarks/bench_dense_memory.py --in-memory   # the field loaded first (NumPy path)
    python benchmarks/bench_dense_memory.py --json benchmarks/results/dense_memory.json

Data: the synthetic regions field of ``dcfa.datasets.make_regions_field`` (float32, kelvin-like
offsets, 500 monthly samples in chunks of 100, 10 % land), generated lazily chunk by chunk as
in ``bench_scale.py``. Each estimator is fitted with its defaults and ``neighbors=1`` (LinCFA also
without neighbours) on the threaded scheduler (2 cores), in a fresh subprocess, one at a time, so
that one fit's freed memory does not hide the next one's peak. Peak is the child's resident set
size above its level just before ``fit`` (the larger of psutil sampled every 5 ms and the kernel's
``ru_maxrss``); ``peak / matrix`` divides it by ``D * D * 8`` bytes. ``estimate`` is what
``dcfa.memory.estimate_dense`` predicted before the fit (what the memory budget is checked
against), in the same unit. The budget is raised to 0.9 of the available memory for the run.

``--json PATH`` writes every fit's bytes and seconds (benchmarks/_results.py), from which
docs/evidence/performance.md renders its table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import dask
import psutil
from _results import write_results  # run as a script: its directory is on sys.path
from bench_scale import PeakRSS

ESTIMATORS = {
    "LinCFA(neighbors=1)": ("LinCFA", {"neighbors": 1, "random_state": 0}),
    "LinCFA()": ("LinCFA", {"random_state": 0}),
    "GenLinCFA(neighbors=1)": ("GenLinCFA", {"neighbors": 1}),
    "NonLinCFA(neighbors=1)": ("NonLinCFA", {"neighbors": 1}),
}


def field_of(shape, n_time: int = 500, in_memory: bool = False):
    from dcfa.datasets import make_regions_field

    ds = make_regions_field(
        n_time=n_time,
        shape=shape,
        n_regions=40,
        noise=0.5,
        land_fraction=0.1,
        time_chunk=100,
        seed=1,
    )
    field = ds.field.load() if in_memory else ds.field
    return field, ds.target.values


def child(label: str, shape, in_memory: bool) -> None:
    """One fit in this process; prints one JSON line."""
    import dcfa
    from dcfa.memory import estimate_dense

    cls, params = ESTIMATORS[label]
    model = getattr(dcfa, cls)(**params)
    field, y = field_of(shape, in_memory=in_memory)
    D = field.shape[1] * field.shape[2]
    data = field.data.reshape(field.shape[0], D)
    with dask.config.set({"scheduler": "threads", "dcfa.memory_budget": 0.9}):
        estimate = estimate_dense(model, field.shape[0], D, data=data).driver_bytes
        with PeakRSS() as mem:
            t = time.perf_counter()
            model.fit(field, y)
            seconds = time.perf_counter() - t
    held = psutil.Process().memory_info().rss - mem.base
    out = {
        "D": D,
        "seconds": seconds,
        "peak": mem.bytes,
        "held": held,
        "estimate": estimate,
        "groups": model.n_features_out_,
    }
    print(json.dumps(out), flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D = 3 000 instead of 11 340")
    parser.add_argument("--shape", type=int, nargs=2, metavar=("NLAT", "NLON"))
    parser.add_argument("--in-memory", action="store_true", help="fit the loaded field")
    parser.add_argument("--only", choices=list(ESTIMATORS), action="append")
    parser.add_argument("--child", choices=list(ESTIMATORS), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    shape = tuple(args.shape) if args.shape else (30, 100) if args.quick else (63, 180)
    if args.child:
        child(args.child, shape, args.in_memory)
        return
    D = shape[0] * shape[1]
    matrix = D * D * 8
    print(
        f"dense fits on a {shape[0]} x {shape[1]} grid: D = {D:,} cells, 500 samples "
        f"({'in memory' if args.in_memory else 'Dask, chunks of 100 samples'}); "
        f"a D x D float64 matrix is {matrix / 2**30:.2f} GiB"
    )
    print(
        f"{'estimator':24s} {'time':>7s} {'groups':>6s} {'peak':>9s} {'peak / matrix':>13s} "
        f"{'held after':>10s} {'estimate':>8s}"
    )
    fits: dict[str, dict] = {}
    for label in args.only or ESTIMATORS:
        cmd = [sys.executable, __file__, "--child", label, "--shape", *map(str, shape)]
        if args.in_memory:
            cmd.append("--in-memory")
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"{label:24s} failed:\n{run.stderr[-2000:]}", flush=True)
            fits[label] = {"failed": run.stderr[-2000:]}
            continue
        r = json.loads(run.stdout.strip().splitlines()[-1])
        fits[label] = r
        print(
            f"{label:24s} {r['seconds']:6.1f}s {r['groups']:6d} "
            f"{r['peak'] / 2**30:7.2f}GiB {r['peak'] / matrix:12.2f}x "
            f"{r['held'] / matrix:9.2f}x {r['estimate'] / matrix:7.2f}x",
            flush=True,
        )
    if args.json is not None:
        results = {
            "shape": list(shape),
            "D": D,
            "months": 500,
            "in_memory": args.in_memory,
            "matrix_bytes": matrix,
            "fits": fits,
        }
        write_results(args.json, results, argv, script=__file__)


if __name__ == "__main__":
    main()

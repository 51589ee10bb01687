"""The dense pass at D = 5 000, 20 000 and 40 000 columns, in memory and on Dask: none crashes.

    python benchmarks/bench_dense_sweep.py
    python benchmarks/bench_dense_sweep.py --sizes 5000 20000     # a shorter sweep
    python benchmarks/bench_dense_sweep.py --json benchmarks/results/dense_sweep.json

OpenBLAS's threaded syrk (``a.T @ a``, NumPy's call when both operands are one array) crashes
the process (SIGSEGV) on AVX-512 machines for about 19 000 columns and more;
``dcfa.stats.kernels.self_product`` keeps syrk up to 8 192 columns and uses a general product
(gemm, on a copy) beyond. Two tables:

* ``dcfa.moments(X, y)`` on 500 samples x D standard normal columns, as a NumPy array and as
  a Dask array (threaded scheduler, 100 x 2 500 blocks): its time and peak resident memory, or
  the refusal of the memory budget (raised to 0.9 of the machine's memory), or the signal
  that killed the process;
* the cost of the fix on the 500 x D product alone: ``self_product``, the threaded syrk it
  avoids, and syrk bounded to one BLAS thread (threadpoolctl), each timed once.

Every measurement runs in a fresh subprocess, one at a time, so that a crash is reported, not
fatal, and one run's freed memory does not hide the next one's peak.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import psutil
from _results import write_results  # run as a script: its directory is on sys.path

N_SAMPLES = 500

# each child prints one JSON line: {"seconds": ..., "peak": ...} or {"refused": message}
_MOMENTS = """
import json, resource, sys, time
import numpy as np, dask, dask.array as da
import dcfa
D, kind, budget, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
X = rng.standard_normal((n, D))
y = X[:, :10].sum(1)
data = da.from_array(X, chunks=(100, 2500)) if kind == "dask" else X
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with dask.config.set({"dcfa.memory_budget": budget, "scheduler": "threads"}):
    t = time.perf_counter()
    try:
        m = dcfa.moments(data, y)
    except dcfa.MemoryBudgetError as exc:
        print(json.dumps({"refused": str(exc)}))
        sys.exit(0)
    seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
assert m.cross.shape == (D + 1, D + 1) and np.isfinite(m.cross).all()
print(json.dumps({"seconds": seconds, "peak": peak, "before": before}))
"""

_PRODUCT = """
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
from dcfa.stats.kernels import self_product
D, how, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = np.random.default_rng(0).standard_normal((n, D))
t = time.perf_counter()
if how == "self_product":
    out = self_product(c)
elif how == "syrk, threaded":
    out = c.T @ c
else:
    with threadpool_limits(1, user_api="blas"):
        out = c.T @ c
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def run(code: str, *args) -> dict:
    """One child: what it printed, or how it died."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True
    )
    if proc.returncode < 0:
        return {"signal": -proc.returncode}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def show(record: dict) -> str:
    if "seconds" in record and "peak" in record:
        return f"{record['seconds']:7.2f} s, peak {record['peak'] / 2**30:5.2f} GiB"
    if "seconds" in record:
        return f"{record['seconds']:7.2f} s"
    if "refused" in record:
        return "refused: " + record["refused"][:90]
    if "signal" in record:
        return f"CRASHED (signal {record['signal']})"
    return "error: " + record["error"][:90]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 40000])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    budget = int(0.9 * psutil.virtual_memory().available)
    results: dict = {"moments": {}, "product": {}}
    print(f"dcfa.moments on {N_SAMPLES} x D (memory budget {budget / 2**30:.1f} GiB)")
    for D in args.sizes:
        for kind in ("numpy", "dask"):
            got = run(_MOMENTS, D, kind, budget, N_SAMPLES)
            results["moments"][f"{D} {kind}"] = got
            print(f"  D = {D:6,} {kind:5}: {show(got)}", flush=True)
    print(f"the {N_SAMPLES} x D self-product alone")
    for D in args.sizes:
        row = {}
        for how in ("self_product", "syrk, threaded", "syrk, one thread"):
            row[how] = run(_PRODUCT, D, how, N_SAMPLES)
        results["product"][str(D)] = row
        base = row["self_product"].get("seconds")
        parts = []
        for how, got in row.items():
            ratio = (
                f" ({got['seconds'] / base:.2f}x)"
                if base and "seconds" in got and how != "self_product"
                else ""
            )
            parts.append(f"{how} {show(got).strip()}{ratio}")
        print(f"  D = {D:6,}: " + "; ".join(parts), flush=True)
    crashed = [k for k, v in results["moments"].items() if "signal" in v]
    print("none crashed" if not crashed else f"CRASHED: {crashed}")
    if args.json:
        write_results(Path(args.json), results, argv, script=__file__)


if __name__ == "__main__":
    main()

"""GBMAP fit on Dask against the same fit in memory over the paper's Table 3 grid of n and p.

    python benchmarks/bench_gbmap.py                  # every Table 3 row that fits: ~25 min
    python benchmarks/bench_gbmap.py --quick          # n * p <= 2.5e7: 5 rows, ~1.5 min
    python benchmarks/bench_gbmap.py --rows 1e6:25 1e5:800
    python benchmarks/bench_gbmap.py --cluster        # a 2-process LocalCluster column too
    python benchmarks/bench_gbmap.py --json benchmarks/results/gbmap_timings.json

The paper (Patron et al. 2024, Section 4.2, Table 3) fits GBMAP with m = 2, beta = 1,
lambda = 1e-3 and at most 100 L-BFGS iterations (tol 1e-3 in the authors' code) to
SYNTH-COS-C(n, p), on "two processors" (JAX on CPU, the mean of ten runs; its timing covers
the boosting loop only), for n = 1e5 and p = 25 ... 3200, and for p = 25 and n = 1e5 ... 1e7.

Per row, both fits run dcfa's one code path (``GBMAPClassifier.fit``) with the same seed, so
they do the same L-BFGS iterations and give the same model (``max dcoef``: the largest
coefficient difference):

* **NumPy**: ``X`` is an in-memory array; the kernel runs on the whole array in this process
  (one BLAS thread: the solver pins it, which is also the faster setting on this machine).
* **Dask**: ``X`` is a Dask array of a few large row chunks (``--chunks``, default 2) of the
  same in-memory array, fitted with the threaded scheduler (one task per chunk and core);
  every L-BFGS evaluation is one map-reduce over the chunks and one ``dask.compute``, over
  data persisted in memory.
* **cluster** (``--cluster``): a ``LocalCluster`` of 2 single-threaded worker processes, the
  data generated and persisted on the workers.

Fit times include the standardisation pass (and, for Dask, persisting the data); best of
``--repeat``. The ratio column is Dask / NumPy (goal: <= 1.5x); Dask / paper compares the
Dask fit (two cores, like the paper's two processors) with Table 3's seconds. Rows whose
data (``X``, its standardised copy for each fit, ``~ 4 * 8 n p`` bytes) exceed
``--memory-fraction`` of the available memory are skipped and listed. The load average is
printed: this machine's two cores may be shared, which slows both fits.

``--json PATH`` writes every row's raw seconds, n, p, evaluations, the paper's seconds and the
load average after it, the skipped rows, and the load average at the start and the end of the
run (benchmarks/_results.py), from which docs/evidence/gbmap.md renders its timings.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import psutil
from _results import write_results  # run as a script: its directory is on sys.path

from dcfa.gbmap import GBMAPClassifier
from dcfa.gbmap.datasets import make_synth_cos

# Table 3: (n, p) -> GBMAP seconds (2 processors, mean of 10 runs)
PAPER_SECONDS = {
    (100_000, 100): 5.8,
    (100_000, 200): 4.5,
    (100_000, 400): 7.8,
    (100_000, 800): 22.5,
    (100_000, 1600): 79.1,
    (100_000, 3200): 204.2,
    (100_000, 25): 1.4,
    (500_000, 25): 14.3,
    (1_000_000, 25): 14.2,
    (5_000_000, 25): 174.8,
    (10_000_000, 25): 204.9,
}
QUICK_CELLS = 2.5e7  # --quick: the rows with n * p at most this
PARAMS = dict(n_boosts=2, beta=1.0, penalty=1e-3, max_iter=100, random_state=0)


def timed_fit(X, y, *, repeat: int, **params):
    best, model = np.inf, None
    for _ in range(repeat):
        model = None
        gc.collect()
        t = time.perf_counter()
        model = GBMAPClassifier(**params).fit(X, y)
        best = min(best, time.perf_counter() - t)
    return best, model


def parse_row(text: str) -> tuple[int, int]:
    n, p = text.split(":")
    return int(float(n)), int(float(p))


def bytes_needed(n: int, p: int) -> float:
    """``X`` plus the standardised copy of the NumPy fit and the persisted one of the Dask
    fit, plus the same again as headroom for temporaries and the allocator."""
    return 4 * 8.0 * n * p


def cluster_fit(n, p, chunks, repeat, params, client):
    from distributed import wait

    rows = -(-n // chunks)
    Xc, yc = make_synth_cos(n, p, task="classification", random_state=0, chunks=rows)
    Xc, yc = dask.persist(Xc, yc)  # generated on the workers
    wait([Xc, yc])
    y = yc.compute()
    t, model = timed_fit(Xc, y, repeat=repeat, **params)
    del Xc
    client.run(gc.collect)
    return t, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"rows with n*p <= {QUICK_CELLS:g}")
    parser.add_argument("--rows", nargs="*", type=parse_row, help="n:p pairs (default Table 3)")
    parser.add_argument("--chunks", type=int, default=2, help="row chunks of the Dask array")
    parser.add_argument("--repeat", type=int, default=None, help="best of (default 2, quick 3)")
    parser.add_argument("--cluster", action="store_true", help="also time a LocalCluster fit")
    parser.add_argument(
        "--tol", type=float, default=1e-3, help="L-BFGS gradient-norm tolerance (0: run max_iter)"
    )
    parser.add_argument("--memory-fraction", type=float, default=0.8)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    load_start = os.getloadavg()
    rows = args.rows or sorted(PAPER_SECONDS, key=lambda r: (r[1] != 25, r[0] * r[1], r))
    if args.quick:
        rows = [r for r in rows if r[0] * r[1] <= QUICK_CELLS]
    repeat = args.repeat or (3 if args.quick else 2)
    params = dict(PARAMS, tol=args.tol)
    available = args.memory_fraction * psutil.virtual_memory().available
    skipped = [r for r in rows if bytes_needed(*r) > available]
    rows = [r for r in rows if r not in skipped]

    print(
        f"SYNTH-COS-C(n, p), m=2, beta=1, lambda=1e-3, max_iter=100, tol={args.tol:g}; best of "
        f"{repeat}; Dask: {args.chunks} row chunks, threaded scheduler; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
    )
    head = (
        "|      n |    p | evals | NumPy s | Dask s | Dask/NumPy | max dcoef "
        + ("| cluster s | cluster/NumPy " if args.cluster else "")
        + "| paper s | Dask/paper | load |"
    )
    print(head)
    print("|" + "|".join("---" for _ in range(head.count("|") - 1)) + "|")

    client = cluster = None
    if args.cluster:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,
        )
        client = Client(cluster, set_as_default=False)

    worst = 0.0
    measured = []
    try:
        for n, p in rows:
            chunk = -(-n // args.chunks)
            Xd, yd = make_synth_cos(n, p, task="classification", random_state=0, chunks=chunk)
            X, y = dask.compute(Xd, yd, scheduler="threads")
            del Xd, yd
            t_np, ref = timed_fit(X, y, repeat=repeat, **params)
            coef, evals = ref.coef_, ref.n_evals_
            del ref
            Xd = da.from_array(X, chunks=(chunk, p))
            with dask.config.set(scheduler="threads"):
                t_dask, model = timed_fit(Xd, y, repeat=repeat, **params)
            same = np.abs(model.coef_ - coef).max()
            del model, Xd, X
            worst = max(worst, t_dask / t_np)
            cells = [
                f"{n:>8.0e}".replace("e+0", "e"),
                f"{p:4d}",
                f"{evals:5d}",
                f"{t_np:7.2f}",
                f"{t_dask:6.2f}",
                f"**{t_dask / t_np:.2f}x**",
                f"{same:.0e}",
            ]
            row = {"n": n, "p": p, "evals": int(evals), "numpy_s": t_np, "dask_s": t_dask}
            row["max_dcoef"] = float(same)
            if client is not None:
                with client.as_current():
                    t_cl, _ = cluster_fit(n, p, args.chunks, repeat, params, client)
                cells += [f"{t_cl:6.2f}", f"{t_cl / t_np:.2f}x"]
                row["cluster_s"] = t_cl
            paper = PAPER_SECONDS.get((n, p))
            row |= {"paper_s": paper, "load": os.getloadavg()[0]}
            measured.append(row)
            cells += (
                ["-", "-"] if paper is None else [f"{paper:5.1f}", f"{t_dask / paper:.2f}x"]
            ) + [f"{row['load']:.1f}"]
            print("| " + " | ".join(cells) + " |", flush=True)
            gc.collect()
    finally:
        if client is not None:
            client.close()
            cluster.close()
    print(f"worst Dask/NumPy ratio: {worst:.2f}x (goal <= 1.5x)")
    for n, p in skipped:
        print(
            f"skipped n={n:.0e}, p={p}: needs ~{bytes_needed(n, p) / 2**30:.1f} GiB, "
            f"{available / 2**30:.1f} GiB available x {args.memory_fraction}"
        )
    if args.json is not None:
        results = {
            "params": params,
            "chunks": args.chunks,
            "repeat": repeat,
            "cluster": args.cluster,
            "rows": measured,
            "skipped": [
                {"n": n, "p": p, "bytes_needed": bytes_needed(n, p), "bytes_available": available}
                for n, p in skipped
            ],
        }
        load = {"start": load_start, "end": os.getloadavg()}
        write_results(args.json, results, script=__file__, load=load)


if __name__ == "__main__":
    main()

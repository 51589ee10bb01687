"""GBMAP fit on Dask against the same fit in memory: the paper's timing setup (Table 3).

    python benchmarks/bench_gbmap.py                # n = 10**6, p = 25 (the paper's row)
    python benchmarks/bench_gbmap.py --quick        # n = 10**5, a smoke run
    python benchmarks/bench_gbmap.py --cluster      # Dask on a 2-process LocalCluster too

The paper (Patron et al. 2024, Section 4.2, Table 3) fits GBMAP with m = 2, beta = 1,
lambda = 1e-3 and at most 100 L-BFGS iterations to SYNTH-COS-C(n, p) and reports 14.2 s for
n = 10**6, p = 25 on "two processors" (JAX on CPU; its timing covers the boosting loop only).

Both fits below run dcfa's one code path (``GBMAPClassifier.fit``) with the same seed, so they
do the same L-BFGS iterations and give the same model:

* **NumPy**: ``X`` is an in-memory array; the kernel runs on the whole array in this process
  (one BLAS thread: the solver pins it, which is also the faster setting on this machine).
* **Dask**: ``X`` is a Dask array of a few large row chunks (``--chunks``, default 2), fitted
  with the threaded scheduler (one task per chunk and core); every L-BFGS evaluation is one
  map-reduce over the chunks and one ``dask.compute``, over data persisted in memory.

Fit times include the standardisation pass (and, for Dask, persisting the data).
"""

from __future__ import annotations

import argparse
import time

import dask
import dask.array as da
import numpy as np

from dcfa.gbmap import GBMAPClassifier
from dcfa.gbmap.datasets import make_synth_cos

PAPER_SECONDS = 14.2  # Table 3, n = 10**6, p = 25


def timed_fit(X, y, *, repeat: int, **params):
    best, model = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        model = GBMAPClassifier(**params).fit(X, y)
        best = min(best, time.perf_counter() - t)
    return best, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 10**5 (smoke run)")
    parser.add_argument("--n", type=int, default=None, help="samples (default 10**6)")
    parser.add_argument("--p", type=int, default=25)
    parser.add_argument("--chunks", type=int, default=2, help="row chunks of the Dask array")
    parser.add_argument("--repeat", type=int, default=None, help="best of (default 3, quick 2)")
    parser.add_argument("--cluster", action="store_true", help="also time a LocalCluster fit")
    parser.add_argument(
        "--tol", type=float, default=1e-3, help="L-BFGS gradient-norm tolerance (0: run max_iter)"
    )
    args = parser.parse_args()
    n = args.n or (10**5 if args.quick else 10**6)
    repeat = args.repeat or (2 if args.quick else 3)
    p = args.p
    rows = -(-n // args.chunks)
    params = dict(n_boosts=2, beta=1.0, penalty=1e-3, max_iter=100, tol=args.tol, random_state=0)

    Xd, yd = make_synth_cos(n, p, task="classification", random_state=0, chunks=rows)
    X, y = dask.compute(Xd, yd, scheduler="threads")
    Xd = da.from_array(X, chunks=(rows, p))
    print(
        f"SYNTH-COS-C(n={n}, p={p}), m=2, beta=1, lambda=1e-3, max_iter=100, tol={args.tol:g}, "
        f"best of {repeat}"
    )

    t_np, ref = timed_fit(X, y, repeat=repeat, **params)
    print(
        f"  NumPy, in memory, 1 process   {t_np:7.2f} s   {ref.n_evals_:4d} evaluations "
        f"({1e3 * t_np / ref.n_evals_:6.1f} ms each), train accuracy {ref.score(X, y):.3f}"
    )
    with dask.config.set(scheduler="threads"):
        t_dask, model = timed_fit(Xd, y, repeat=repeat, **params)
    same = np.abs(model.coef_ - ref.coef_).max()
    print(
        f"  Dask, threads, {args.chunks} row chunks   {t_dask:7.2f} s   {model.n_evals_:4d} "
        f"evaluations ({1e3 * t_dask / model.n_evals_:6.1f} ms each), "
        f"max |coef difference| {same:.1e}"
    )
    per_eval = (t_dask / model.n_evals_) / (t_np / ref.n_evals_)
    print(
        f"  ratio Dask / NumPy             {t_dask / t_np:5.2f}x   (target <= 1.5x; "
        f"per evaluation {per_eval:4.2f}x)"
    )
    if args.cluster:
        from distributed import Client, LocalCluster, wait

        with (
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=40,
            ) as cluster,
            Client(cluster),
        ):
            Xc, _ = make_synth_cos(n, p, task="classification", random_state=0, chunks=rows)
            Xc = Xc.persist()  # generated on the workers, like X in this process's memory
            wait(Xc)
            t_cl, model = timed_fit(Xc, y, repeat=repeat, **params)
        same = np.abs(model.coef_ - ref.coef_).max()
        print(
            f"  Dask, LocalCluster 2 x 1 proc  {t_cl:7.2f} s   {model.n_evals_:4d} evaluations "
            f"({1e3 * t_cl / model.n_evals_:6.1f} ms each), max |coef difference| {same:.1e}"
        )
        per_eval = (t_cl / model.n_evals_) / (t_np / ref.n_evals_)
        print(
            f"  ratio LocalCluster / NumPy     {t_cl / t_np:5.2f}x   (per evaluation "
            f"{per_eval:4.2f}x)"
        )
    if n == 10**6 and p == 25:
        print(f"  paper (Table 3, 2 processors, JAX): {PAPER_SECONDS} s")


if __name__ == "__main__":
    main()

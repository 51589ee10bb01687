"""Moments pass and LinCFA driver, against the baselines a user would otherwise use.

    python benchmarks/bench_lincfa.py            # the numbers in docs/evidence/performance.md
    python benchmarks/bench_lincfa.py --quick    # smaller sizes, a smoke run
    python benchmarks/bench_lincfa.py --json benchmarks/results/lincfa.json   # the docs' table

Every ratio is measured in this run, on this machine, against:

* moments of a 200 000 x 500 float64 array in (20 000, 500) chunks: in-memory ``X.T @ X``
  (the BLAS limit; it is only the raw product, without centring or correlations) and
  ``dask.array.corrcoef`` on the same Dask array;
* moments of a field's shape, 1 200 months x 5 000 float32 cells in row chunks of 240 (the
  short, wide chunks of a monthly archive): loading the array and ``np.cov``, which a user
  whose data fit in memory would write instead;
* the LinCFA partition: the brute-force per-pair implementation of Algorithm 1 (an OLS refit
  per tested pair, tests/reference.py), at D = 200 and D = 2 000; plus the driver alone at
  D = 20 000.

``--json PATH`` writes the timings (seconds, groups; benchmarks/_results.py), from which
docs/evidence/performance.md renders its table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _results import write_results  # noqa: E402
from reference import lincfa_algorithm1  # noqa: E402

import dcfa  # noqa: E402
from dcfa.datasets import make_lincfa_tree  # noqa: E402


def best_of(f, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_moments(n: int, d: int, chunk: int) -> dict:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    Xd = da.from_array(X, chunks=(chunk, d))
    t_np, _ = best_of(lambda: X.T @ X)
    with dask.config.set(scheduler="threads"):
        t_dcfa, m = best_of(lambda: dcfa.moments(Xd))
        t_corr, R = best_of(lambda: da.corrcoef(Xd, rowvar=False).compute())
    assert np.abs(m.corr() - R).max() < 1e-10
    print(f"moments of {n} x {d} float64, chunks ({chunk}, {d}), threaded scheduler, 2 cores")
    print(f"  in-memory X.T @ X          {t_np:7.2f} s")
    ratio = t_dcfa / t_np
    print(f"  dcfa.moments               {t_dcfa:7.2f} s   {ratio:5.2f}x the in-memory product")
    print(f"  dask.array.corrcoef        {t_corr:7.2f} s   dcfa is {t_corr / t_dcfa:4.1f}x faster")
    return {"n": n, "d": d, "chunk": chunk, "numpy_s": t_np, "dcfa_s": t_dcfa, "corrcoef_s": t_corr}


def bench_field_moments(n: int, d: int, chunk: int) -> dict:
    X = np.random.default_rng(2).normal(size=(n, d)).astype(np.float32)
    Xd = da.from_array(X, chunks=(chunk, d))
    with dask.config.set(scheduler="threads"):
        t_np, C = best_of(lambda: np.cov(Xd.compute(), rowvar=False), repeat=5)
        t_dcfa, m = best_of(lambda: dcfa.moments(Xd), repeat=5)
    # no scheduler configured: a Dask array's own default, the threaded one, as most users run
    with dask.config.set(scheduler=None):
        t_default, _ = best_of(lambda: dcfa.moments(Xd), repeat=5)
    assert np.abs(m.cov() - C).max() < 1e-6
    ratio = t_dcfa / t_np
    print(f"moments of {n} x {d} float32, chunks ({chunk}, {d}), threaded scheduler, 2 cores")
    print(f"  loading + np.cov           {t_np:7.2f} s")
    print(f"  dcfa.moments               {t_dcfa:7.2f} s   {ratio:5.2f}x loading + np.cov")
    print(f"  same, no scheduler set     {t_default:7.2f} s   {t_default / t_np:5.2f}x")
    return {
        "n": n, "d": d, "chunk": chunk, "numpy_s": t_np, "dcfa_s": t_dcfa, "default_s": t_default,
    }  # fmt: skip


def bench_driver(D: int, n: int, brute: bool) -> dict:
    rng = np.random.default_rng(1)
    w = rng.uniform(0, 1, D)
    X, y = make_lincfa_tree(n, w, 10.0, rng)
    t_m, m = best_of(lambda: dcfa.moments(X, y), repeat=1)
    t_drv, labels = best_of(lambda: dcfa.lincfa(m, shuffle=False), repeat=3 if D <= 2000 else 1)
    out = {"D": D, "n": n, "moments_s": t_m, "driver_s": t_drv, "groups": int(labels.max() + 1)}
    line = (
        f"LinCFA D = {D:6d}, n = {n}: moments {t_m:6.2f} s, driver {t_drv:6.3f} s, "
        f"{labels.max() + 1} groups"
    )
    if brute:
        t_b, ref = best_of(lambda: lincfa_algorithm1(X, y), repeat=1)
        assert (ref == labels).all()
        out["brute_s"] = t_b
        line += (
            f"; brute force {t_b:7.1f} s -> driver {t_b / t_drv:7.0f}x, "
            f"moments+driver {t_b / (t_m + t_drv):5.0f}x faster"
        )
    print(line)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    if args.quick:
        moments = bench_moments(20_000, 100, 2_000)
        field = bench_field_moments(240, 1_000, 48)
        driver = [bench_driver(200, 500, brute=True), bench_driver(2_000, 500, brute=False)]
    else:
        moments = bench_moments(200_000, 500, 20_000)
        field = bench_field_moments(1_200, 5_000, 240)
        driver = [
            bench_driver(200, 500, brute=True),
            bench_driver(2_000, 500, brute=True),
            bench_driver(20_000, 500, brute=False),
        ]
    if args.json is not None:
        results = {
            "quick": args.quick, "moments": moments, "field_moments": field, "driver": driver,
        }  # fmt: skip
        write_results(args.json, results, argv, script=__file__)


if __name__ == "__main__":
    main()

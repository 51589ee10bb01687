"""GBMAP in memory: a step's runs one after the other against in lockstep, and the default.

    python benchmarks/bench_gbmap_runs.py             # ~1.5 min on 2 cores
    python benchmarks/bench_gbmap_runs.py --repeat 5

A boosting step fits its learner from both signs; on Dask rows the two L-BFGS runs share
passes over the rows (``dcfa.gbmap._solver._Lockstep``: a thread per run, the points handed
to the driver's thread), which saves round trips to the cluster. NumPy rows have no round
trip to save: below ``dcfa.gbmap._rows.SHARED_PASS_BYTES`` of rows they run one after the
other, and from it on in lockstep, where one read of the rows for both runs pays. Per row,
the same ``GBMAPRegressor.fit`` on the same in-memory table with each schedule (forced by
setting that threshold to infinity or 0), and which one the default takes; both give the
same learners bit for bit (checked), so the ratio is the cost of the thread hand-offs
against that of the reads. Best of ``--repeat``.

The rows: what a job fits GBMAP on (its region means, months x groups, at the job's
``gbmap.n_boosts``), and one table of the paper's Table 3 size (m = 2).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcfa.gbmap import GBMAPRegressor, _rows

# (months or rows, features, n_boosts)
ROWS = [
    (120, 9, 300),
    (600, 30, 100),
    (1_200, 60, 30),
    (20_000, 50, 5),
    (20_000, 200, 3),
    (50_000, 200, 2),
    (100_000, 200, 2),
]


def table(n: int, p: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, 0] + 0.5 * np.sin(2 * X[:, 1]) + 0.5 * rng.standard_normal(n)
    return X, y


def timed(X, y, n_boosts: int, threshold: float, repeat: int):
    _rows.SHARED_PASS_BYTES = threshold
    best, model = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        model = GBMAPRegressor(n_boosts=n_boosts, random_state=0).fit(X, y)
        best = min(best, time.perf_counter() - t)
    return best, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    default = _rows.SHARED_PASS_BYTES
    print(f"{'rows':>8} {'p':>4} {'m':>4} {'MiB':>5}  one by one  lockstep  ratio  default")
    try:
        for n, p, m in ROWS:
            X, y = table(n, p)
            alone, a = timed(X, y, m, np.inf, args.repeat)
            shared, b = timed(X, y, m, 0, args.repeat)
            np.testing.assert_array_equal(a.coef_, b.coef_)
            picked = "lockstep" if X.nbytes >= default else "one by one"
            print(
                f"{n:8d} {p:4d} {m:4d} {X.nbytes / 2**20:5.0f}  {alone:8.2f} s {shared:7.2f} s "
                f"{shared / alone:5.2f}x  {picked}"
            )
    finally:
        _rows.SHARED_PASS_BYTES = default


if __name__ == "__main__":
    main()

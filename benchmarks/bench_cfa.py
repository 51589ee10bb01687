"""NonLinCFA and GenLinCFA from moments vs the authors' per-candidate tests.

    python benchmarks/bench_cfa.py            # D = 100 and D = 500 (the brute force at D = 500
                                              # takes minutes; docs/evidence/performance.md)
    python benchmarks/bench_cfa.py --quick    # D = 100 only
    python benchmarks/bench_cfa.py --json benchmarks/results/cfa.json   # the docs' table

Data: the papers' synthetic generator (n = 2000 training rows). The brute force is the
authors' test as their code computes it, per candidate: z-score, then
``cross_val_score(LinearRegression(), ...)`` of both models on 5 folds (NonLinCFA), or
covariances of z-scored vectors (GenLinCFA), inside the same greedy loop
(tests/reference.py). Both give the same partition (checked here); the ratio is measured in
this run.

``--json PATH`` writes the timings and groups of every fit (benchmarks/_results.py), from which
docs/evidence/performance.md renders its table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _results import write_results  # noqa: E402
from reference import genlincfa_authors, nonlincfa_authors  # noqa: E402

from dcfa import GenLinCFA, NonLinCFA  # noqa: E402
from dcfa.datasets import make_cfa_synthetic  # noqa: E402


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def bench(D: int) -> list[dict]:
    X, y = make_cfa_synthetic(D, 10.0 * D / 100, n_samples=2000)
    cases = [
        ("NonLinCFA", NonLinCFA(eps=1e-3), lambda: nonlincfa_authors(X, y, eps=1e-3)),
        ("GenLinCFA", GenLinCFA(eps=0.77), lambda: genlincfa_authors(X, y, eps=0.77)),
    ]
    out = []
    for name, model, brute in cases:
        t_dcfa, fitted = timed(lambda m=model: m.fit(X, y))
        t_dcfa = min(t_dcfa, timed(lambda m=model: m.fit(X, y))[0])
        t_brute, labels = timed(brute)
        assert (labels == fitted.labels_).all(), "partitions differ"
        print(
            f"{name:9s} D = {D:4d}, n = 2000: dcfa {t_dcfa:7.3f} s, per-candidate refits "
            f"{t_brute:8.1f} s -> {t_brute / t_dcfa:6.0f}x faster ({fitted.n_features_out_} "
            "groups, same partition)",
            flush=True,
        )
        out.append(
            {
                "estimator": name,
                "eps": model.eps,
                "D": D,
                "n": int(X.shape[0]),
                "dcfa_s": t_dcfa,
                "brute_s": t_brute,
                "groups": int(fitted.n_features_out_),
            }
        )
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D = 100 only")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    runs = bench(100)
    if not args.quick:
        runs += bench(500)
    if args.json is not None:
        write_results(args.json, {"quick": args.quick, "runs": runs}, argv, script=__file__)


if __name__ == "__main__":
    main()

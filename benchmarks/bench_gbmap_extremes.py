"""Does GBMAP's embedding tell El Niño from La Niña months apart better than the regions?

    python benchmarks/bench_gbmap_extremes.py               # 9 ENSO tasks x 3 random states
    python benchmarks/bench_gbmap_extremes.py --json results.json

The demo asks it on one task (SST + u10, lead 3). This asks it on the nine tasks of the ENSO
comparison: SST, SST + u10 and SST + u10 + v10, at leads 0, 3 and 6. For each, RegionsCV
(gap = lead) makes the map from all months (anomalies of all months, as a job does), and
:func:`dcfa.batch.gbmap_check.extremes_separation` compares, out of sample (5 forward folds,
GBMAP refitted in each), the 5-nearest-neighbour accuracy on the months in the SOI's lowest
and highest fifths, in GBMAP's embedding (the demo's parameters: 4 learners, penalty 1.0;
``random_state`` 0, 1 and 2) and in the standardised region means, and McNemar's test on the
test months where the two disagree. It also gives, in the
same folds, GBMAP's forward-CV R² of the SOI on the regions (:func:`gbmap_against_linear`,
``random_state`` 0) at the demo's penalty, the default (0.1) and the paper's (1e-3), next to
OLS.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

import numpy as np

import dcfa
from dcfa.batch.gbmap_check import extremes_separation, gbmap_against_linear
from dcfa.datasets import enso_task, load_enso

sys.path.insert(0, str(Path(__file__).parent))
from _results import write_results  # noqa: E402

VARIABLES = (("sst",), ("sst", "u10"), ("sst", "u10", "v10"))
LEADS = (0, 3, 6)
GBMAP = {"n_boosts": 4, "penalty": 1.0}  # the demo's
STATES = (0, 1, 2)
PENALTIES = (1.0, 0.1, 1e-3)  # the demo's, the default, the paper's


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)
    logging.getLogger("dcfa").setLevel(logging.WARNING)
    ds = load_enso().load()
    print(f"{'variables':14s} {'lead':>4s} {'regions':>7s} {'embedding (rs 0/1/2)':>22s} "
          f"{'mean':>6s} {'regions':>7s} {'test months':>11s}   "
          "forward-CV R²: GBMAP penalty "
          f"{' / '.join(f'{p:g}' for p in PENALTIES)}, OLS")  # fmt: skip
    rows = []
    for variables in VARIABLES:
        for lead in LEADS:
            X, y = enso_task(ds, lead=lead, variables=list(variables) if len(variables) > 1
                             else variables[0])  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                features = np.asarray(dcfa.RegionsCV(gap=lead).fit_transform(X, y))
                seps = [
                    extremes_separation(
                        dcfa.GBMAPRegressor(**GBMAP, random_state=s), features, y.values,
                        gap=lead,
                    )
                    for s in STATES
                ]  # fmt: skip
                skill = [
                    gbmap_against_linear(dcfa.GBMAPRegressor(**{**GBMAP, "penalty": p},
                                         random_state=0), features, y.values, gap=lead)
                    for p in PENALTIES
                ]  # fmt: skip
            emb = [s["embedding"] for s in seps]
            row = {"variables": list(variables), "lead": lead, "regions": features.shape[1],
                   "embedding": emb, "features": seps[0]["features"],
                   "p_value": [s["p_value"] for s in seps],
                   "n_test": int(sum(seps[0]["n_test"])),
                   "r2_gbmap": {f"{p:g}": k["mean"]["gbmap"]
                                for p, k in zip(PENALTIES, skill, strict=True)},
                   "r2_ols": skill[0]["mean"]["ols"]}  # fmt: skip
            rows.append(row)
            print(f"{'+'.join(variables):14s} {lead:4d} {row['regions']:7d} "
                  f"{' / '.join(f'{e:.3f}' for e in emb):>22s} {np.mean(emb):6.3f} "
                  f"{row['features']:7.3f} {row['n_test']:11d}   "
                  + " / ".join(f"{v:+.2f}" for v in row["r2_gbmap"].values())
                  + f", {row['r2_ols']:+.2f}", flush=True)  # fmt: skip
    better = sum(np.mean(r["embedding"]) > r["features"] for r in rows)
    clear = sum(max(r["p_value"]) < 0.05 for r in rows)
    print(f"\nthe embedding separates them better (mean over the random states) on {better} "
          f"of {len(rows)} tasks; the two differ at McNemar p < 0.05 for every random state "
          f"on {clear}")  # fmt: skip
    for p in PENALTIES:
        r2 = [r["r2_gbmap"][f"{p:g}"] for r in rows]
        above = sum(v > r["r2_ols"] for v, r in zip(r2, rows, strict=True))
        print(f"GBMAP at penalty {p:g}: forward-CV R² {min(r2):+.2f} to {max(r2):+.2f}, above "
              f"OLS on the same regions in {above} of {len(rows)} tasks")  # fmt: skip
    if args.json is not None:
        write_results(args.json, {"gbmap": GBMAP, "tasks": rows}, argv, script=__file__)


if __name__ == "__main__":
    main()

"""GBMAP on small tables: the numbers the GBMAP guide and the evidence page quote.

    python benchmarks/bench_gbmap_small.py            # all four, ~1.5 min on 2 cores
    python benchmarks/bench_gbmap_small.py --only linear diabetes

* ``linear``: region means of a field whose signal is linear in them
  (:func:`dcfa.datasets.make_regions_field`, 600 months, 24 x 48 cells, 12 regions, data
  seeds 0-2): ``GBMAPRegressor()`` at its defaults on ``RegionsCV()``'s region means
  against ``LinearRegression`` on the same means, 5 blocked folds (``dcfa.blocked_cv``),
  and how many of the 10 boosting steps a fit on all months switched off
  (``inactive_steps_``).
* ``diabetes``: scikit-learn's diabetes table (442 rows, 10 columns), 5-fold CV shuffled
  with seeds 0-2: ``GBMAPRegressor()`` at its defaults, with ``penalty=1.0``, and
  ``RidgeCV``.
* ``breast-cancer``: ``GBMAPClassifier(n_boosts=10, beta=1, max_iter=200)`` and
  ``LogisticRegression``, 5-fold stratified CV shuffled with seed 0 (the setting of
  ``tests/gbmap/test_gbmap.py``; the paper gives 0.965 and no protocol).
* ``synth-cos``: SYNTH-COS(1e4, 20) regression and classification, 1e4 training and 1e4
  test rows, ``GBMAP*(n_boosts=20, beta=5, max_iter=200)`` against ``LinearRegression`` /
  ``LogisticRegression`` (the same tests' setting).

Each prints its scores per seed and the median and worst; nothing is timed.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import LinearRegression, LogisticRegression, RidgeCV
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dcfa
from dcfa.datasets import make_regions_field
from dcfa.gbmap.datasets import make_synth_cos

SEEDS = (0, 1, 2)


def _line(name: str, scores) -> str:
    s = np.asarray(scores)
    fmt = "{:d}" if s.dtype.kind == "i" else "{:.3f}"
    each = " / ".join(fmt.format(v) for v in s)
    median = fmt.format(int(np.median(s))) if s.dtype.kind == "i" else f"{np.median(s):.3f}"
    return f"| {name} | {each} | {median} | {fmt.format(s.min())} |"


def linear() -> list[str]:
    rows = {"GBMAPRegressor()": [], "LinearRegression": [], "steps switched off (of 10)": []}
    for seed in SEEDS:
        ds = make_regions_field(600, (24, 48), 12, seed=seed)
        X, y = ds["field"].compute(), ds["target"].compute()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the inactive steps' warning: counted below
            means = dcfa.RegionsCV().fit(X, y).transform(X).values
            gbmap = dcfa.GBMAPRegressor(random_state=0)
            rows["GBMAPRegressor()"].append(dcfa.blocked_cv(gbmap, means, y.values).r2.mean())
            rows["steps switched off (of 10)"].append(
                int(gbmap.fit(means, y.values).inactive_steps_.sum())
            )
        rows["LinearRegression"].append(
            dcfa.blocked_cv(LinearRegression(), means, y.values).r2.mean()
        )
    return [_line(k, v) for k, v in rows.items()]


def diabetes() -> list[str]:
    X, y = load_diabetes(return_X_y=True)
    models = {
        "GBMAPRegressor()": dcfa.GBMAPRegressor(random_state=0),
        "GBMAPRegressor(penalty=1.0)": dcfa.GBMAPRegressor(penalty=1.0, random_state=0),
        "RidgeCV": make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 25))),
    }
    rows = []
    for name, model in models.items():
        scores = []
        for seed in SEEDS:
            cv = KFold(5, shuffle=True, random_state=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                scores.append(cross_val_score(model, X, y, cv=cv).mean())
        rows.append(_line(name, scores))
    return rows


def breast_cancer() -> list[str]:
    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    gbmap = dcfa.GBMAPClassifier(n_boosts=10, beta=1.0, max_iter=200, random_state=0)
    logistic = make_pipeline(StandardScaler(), LogisticRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [
            _line("GBMAPClassifier (accuracy)", [cross_val_score(gbmap, X, y, cv=cv).mean()]),
            _line("LogisticRegression", [cross_val_score(logistic, X, y, cv=cv).mean()]),
        ]


def synth_cos() -> list[str]:
    rows = []
    for task, gbmap, baseline in (
        ("regression", dcfa.GBMAPRegressor, LinearRegression()),
        ("classification", dcfa.GBMAPClassifier, LogisticRegression()),
    ):
        X, y = make_synth_cos(20_000, 20, task=task, random_state=0)
        train, test = slice(0, 10_000), slice(10_000, None)
        model = gbmap(n_boosts=20, beta=5.0, max_iter=200, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X[train], y[train])
        base = baseline.fit(X[train], y[train])
        what = "R^2" if task == "regression" else "accuracy"
        rows.append(_line(f"{task}: GBMAP ({what})", [model.score(X[test], y[test])]))
        rows.append(_line(f"{task}: {type(base).__name__}", [base.score(X[test], y[test])]))
    return rows


PARTS = {
    "linear": linear,
    "diabetes": diabetes,
    "breast-cancer": breast_cancer,
    "synth-cos": synth_cos,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(PARTS), default=list(PARTS))
    args = parser.parse_args(argv)
    for name in args.only:
        print(f"\n{name}\n\n| model | per seed | median | worst |\n|---|---|---|---|")
        for line in PARTS[name]():
            print(line, flush=True)


if __name__ == "__main__":
    main()

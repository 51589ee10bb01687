"""GBMAP on small tables: the numbers the GBMAP guide and the evidence page quote.

    python benchmarks/bench_gbmap_small.py            # all five, ~4 min on 2 cores
    python benchmarks/bench_gbmap_small.py --only linear diabetes

* ``linear``: region means of a field whose signal is linear in them
  (:func:`dcfa.datasets.make_regions_field`, 600 months, 24 x 48 cells, 12 regions, data
  seeds 0-2): ``GBMAPRegressor()`` at its defaults on ``RegionsCV()``'s region means
  against ``LinearRegression`` on the same means, 5 blocked folds (``dcfa.blocked_cv``),
  and how many of the 10 boosting steps a fit on all months switched off
  (``inactive_steps_``).
* ``diabetes``: scikit-learn's diabetes table (442 rows, 10 columns), 5-fold CV shuffled
  with seeds 0-2: ``GBMAPRegressor()`` at its defaults, with the paper's ``penalty=1e-3``
  and with 1, and ``RidgeCV``.
* ``penalty``: the default penalty (0.1) against 1 and the paper's 1e-3, on what a
  climate record is and on what it is not. Region means of 9 fields
  (``make_regions_field``, 240, 480 and 600 months, 18 x 36 cells, 20 % land, 8-19
  regions, noise 0.3-1; the data seeds drawn from a fixed generator), forward-CV R² of
  ``RegionsCV()`` followed by GBMAP or by OLS (5 folds, ``dcfa.forward_cv``); and a clean
  nonlinear table (|x0| + a step in x1, 240 training and 240 test rows, 5 seeds), GBMAP's
  test R² and, on the target's median split, the classifier's accuracy.
* ``breast-cancer``: ``GBMAPClassifier(n_boosts=10, beta=1, penalty=1e-3, max_iter=200)`` and
  ``LogisticRegression``, 5-fold stratified CV shuffled with seed 0 (the setting of
  ``tests/gbmap/test_gbmap.py``; the paper gives 0.965 and no protocol).
* ``synth-cos``: SYNTH-COS(1e4, 20) regression and classification, 1e4 training and 1e4
  test rows, ``GBMAP*(n_boosts=20, beta=5, penalty=1e-3, max_iter=200)`` against
  ``LinearRegression`` / ``LogisticRegression`` (the same tests' setting).

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
        "GBMAPRegressor(penalty=1e-3)": dcfa.GBMAPRegressor(penalty=1e-3, random_state=0),
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


PENALTIES = (0.1, 1.0, 1e-3)  # the default, the demo's, the paper's


def penalty() -> list[str]:
    from sklearn.metrics import r2_score

    draws = np.random.default_rng(20261203)
    rows = {f"regions, GBMAP penalty={p:g}": [] for p in PENALTIES} | {"regions, OLS": []}
    for n in (240, 240, 240, 480, 480, 480, 600, 600, 600):
        seed, n_regions = int(draws.integers(1000, 10**6)), int(draws.integers(8, 20))
        ds = make_regions_field(n, (18, 36), n_regions, noise=float(draws.uniform(0.3, 1.0)),
                                land_fraction=0.2, seed=seed)  # fmt: skip
        X, y = ds["field"].compute(), ds["target"].compute()
        models = {f"regions, GBMAP penalty={p:g}": dcfa.GBMAPRegressor(penalty=p, random_state=0)
                  for p in PENALTIES} | {"regions, OLS": LinearRegression()}  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, model in models.items():
                cv = dcfa.forward_cv(make_pipeline(dcfa.RegionsCV(), model), X, y, n_splits=5,
                                     min_train=min(120, n // 3))  # fmt: skip
                rows[name].append(cv.r2.mean())
    for p in PENALTIES:
        rows[f"nonlinear, GBMAP penalty={p:g} (R^2)"] = []
        rows[f"nonlinear, classifier penalty={p:g} (accuracy)"] = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(480, 4)) * np.arange(1, 5) + 10.0 * np.arange(4)
        Z = (X - X.mean(0)) / X.std(0)
        y = np.abs(Z[:, 0]) + 0.5 * np.maximum(Z[:, 1], 0) + 0.1 * rng.normal(size=480)
        labels = y > np.median(y[:240])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for p in PENALTIES:
                reg = dcfa.GBMAPRegressor(penalty=p, random_state=0).fit(X[:240], y[:240])
                clf = dcfa.GBMAPClassifier(penalty=p, random_state=0).fit(X[:240], labels[:240])
                rows[f"nonlinear, GBMAP penalty={p:g} (R^2)"].append(
                    r2_score(y[240:], reg.predict(X[240:]))
                )
                rows[f"nonlinear, classifier penalty={p:g} (accuracy)"].append(
                    clf.score(X[240:], labels[240:])
                )
    return [_line(k, v) for k, v in rows.items()]


def breast_cancer() -> list[str]:
    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    gbmap = dcfa.GBMAPClassifier(n_boosts=10, beta=1.0, penalty=1e-3, max_iter=200, random_state=0)
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
        model = gbmap(n_boosts=20, beta=5.0, penalty=1e-3, max_iter=200, random_state=0)
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
    "penalty": penalty,
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

"""Tables of the evidence pages read from the results files the benchmarks write (``--json``).

``{results-table} ../../benchmarks/results/panel.json`` with ``:table: panel`` renders the
table of that file, with the command, the machine and the date it was made on, so that no
number on the page is copied by hand. A new table is one builder in :data:`TABLES`, from the
record (benchmarks/_results.py: the raw measured values under ``"results"``) to a header and
rows of text; in a cell, text between backquotes is code and between double asterisks bold.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from docutils import nodes
from docutils.parsers.rst import Directive, directives
from table_nodes import table

#: the former call the panel compares the recommended one with (``--compare``)
FORMER = "GenLinCFA(neighbors=1)"


def _pair(median: float, worst: float, fmt: str) -> str:
    """``median (worst)``; "-" for an estimator that does not report it (NaN)."""
    if median != median:  # NaN
        return "-"
    return f"{median:{fmt}} ({worst:{fmt}})"


def _goal(ok: bool, text: str) -> str:
    return f"{text} ({'met' if ok else 'missed'})"


def panel_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """The panel's summary: the recommended call (the run's first RegionsCV, at its defaults
    or with the options the run gave it) against the former one, with the goals."""
    res = record["results"]
    names = [n for n in res if n.startswith("RegionsCV(")][:1] + [n for n in (FORMER,) if n in res]
    reg = [res[n]["summary"]["regions"] for n in names]
    smo = [res[n]["summary"]["smooth"] for n in names]
    goals, smooth_goals = reg[0]["goals"], smo[0]["goals"]

    def pure(r: dict) -> str:
        share = r["all_pure_share"]
        return f"{round(share * r['draws'])} of {r['draws']} ({100 * share:.0f} %)"

    def worst_groups(r: dict) -> str:
        w = r["groups_worst"]
        return f"{r['groups_median']:.0f} ({w['2 degree']} / {w['1 degree']})"

    rows = [
        ["regions: groups, median (worst at 2° / 1°)", *map(worst_groups, reg),
         _goal(goals["groups"], "<= 30 at 2°, <= 60 at 1°")],
        ["regions: draws with all 4 driving regions pure", *map(pure, reg),
         _goal(goals["pure"], ">= 90 %")],
        ["regions: R2 / oracle, map on all months, median (worst)",
         *(f"{r['ratio_median']:.3f} ({r['ratio_worst']:.3f})" for r in reg), ""],
        ["regions: the same, refitted in every fold, median (worst)",
         *(f"{r['nested_ratio_median']:.3f} ({r['nested_ratio_worst']:.3f})" for r in reg),
         _goal(goals["ratio_median"] and goals["ratio_worst"], ">= 0.95 (>= 0.90)")],
        ["regions: contiguous groups, worst share",
         *(f"{r['contiguous_worst']:.2f}" for r in reg), _goal(goals["contiguous"], "1.00")],
        ["regions: fold-to-fold ARI of the map, median (worst)",
         *(_pair(r["ari_median"], r["ari_worst"], ".2f") for r in reg), ""],
        ["smooth: groups, median (worst)",
         *(f"{s['groups_median']:.0f} ({s['groups_worst']})" for s in smo),
         _goal(smooth_goals["groups"], "<= 30")],
        ["smooth: R2 minus ridge on all cells, map on all months, median (worst)",
         *(f"{s['gap_median']:+.3f} ({s['gap_worst']:+.3f})" for s in smo), ""],
        ["smooth: the same, refitted in every fold, median (worst)",
         *(f"{s['nested_gap_median']:+.3f} ({s['nested_gap_worst']:+.3f})" for s in smo),
         _goal(smooth_goals["within_ridge"], ">= -0.02")],
        ["regions: fit time, median (worst)",
         *(f"{r['fit_s_median']:.1f} s ({r['fit_s_worst']:.1f} s)" for r in reg), ""],
    ]  # fmt: skip
    if all("ridge_ratio_median" in r for r in reg):  # results since the map is chosen for ridge
        rows.insert(4, ["regions: ridge on the regions / on the true regions, refitted in "
                        "every fold, median (worst)",
                        *(f"{r['ridge_ratio_median']:.3f} ({r['ridge_ratio_worst']:.3f})"
                          for r in reg), ""])  # fmt: skip
    if all("ridge_gap_median" in s for s in smo):
        rows.insert(-1, ["smooth: ridge on the regions minus ridge on all cells, refitted in "
                         "every fold, median (worst)",
                         *(f"{s['ridge_gap_median']:+.3f} ({s['ridge_gap_worst']:+.3f})"
                           for s in smo), ""])  # fmt: skip
    if all("box" in res[n]["summary"] for n in names):  # panels since the box draws
        box = [res[n]["summary"]["box"] for n in names]
        box_goals = box[0]["goals"]
        rows += [
            ["box: regions of one cell, median (worst)",
             *(f"{b['single_median']:.0f} ({b['single_worst']})" for b in box),
             _goal(box_goals["no_single"], "none")],
            ["box: share of the box in one region, median (worst)",
             *(f"{b['box_kept_median']:.2f} ({b['box_kept_worst']:.2f})" for b in box),
             _goal(box_goals["box_kept"], ">= 0.90")],
            ["box: R2 / OLS on the box's mean, refitted in every fold, median (worst)",
             *(f"{b['nested_ratio_median']:.3f} ({b['nested_ratio_worst']:.3f})" for b in box),
             _goal(box_goals["ratio_worst"], "(>= 0.90)")],
        ]  # fmt: skip
    if "time_ratio" in res:
        t = res["time_ratio"]
        rows.append(["fit time against GenLinCFA on the same draw, median (worst)",
                     f"{t['median']:.2f}x ({t['worst']:.2f}x)", "1", "<= 3x"])  # fmt: skip
    return [f"panel seed {record['panel_seed']}", *names, "goal"], rows


def _int(n: int) -> str:
    """``20 000``: thousands apart by a space, as the pages write them."""
    return f"{n:,}".replace(",", " ")


def _sig(x: float, digits: int) -> str:
    """``x`` to ``digits`` significant digits, never in exponent notation."""
    if not x or x != x:  # 0 or NaN
        return f"{x:.{digits - 1}f}"
    decimals = max(digits - 1 - math.floor(math.log10(abs(x))), 0)
    return f"{x:,.{decimals}f}".replace(",", " ")


def _times(ratio: float) -> str:
    """``1 417x``, ``0.94x``: a ratio of times."""
    return f"{_int(round(ratio))}x" if ratio >= 10 else f"{ratio:.2g}x"


#: The baselines a forecaster would use instead of dcfa (bold: the best of them per column).
ENSO_BASELINES = ("PCA", "PLS", "RidgeCV", "LassoCV", "RGDR")
ENSO_RECOMMENDED = "RegionsCV() -> RidgeCV"


def _best_baselines(columns: list[dict], mean) -> list[dict | None]:
    """The baseline (:data:`ENSO_BASELINES`) of the best ``mean`` in each column, its record
    (None in a column without one)."""
    return [
        max(
            (m for name, m in c["models"].items() if name.startswith(ENSO_BASELINES)),
            key=mean,
            default=None,
        )
        for c in columns
    ]


def enso_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_enso.py: test R² mean ± sd over the blocks (the features in brackets, their range
    over the folds) of every model in every column; bold the best baseline of each column."""
    columns = record["results"]["columns"]
    names = list(columns[0]["models"])

    def mean(m: dict) -> float:
        return round(float(np.mean(m["r2"])), 2)

    def cell(m: dict, best: float | None) -> str:
        k = m["n_features"]
        feats = f"{min(k)}" if min(k) == max(k) else f"{min(k)}-{max(k)}"
        r2 = f"{mean(m):+.2f}"
        return f"{f'**{r2}**' if mean(m) == best else r2} ± {np.std(m['r2']):.2f} ({feats})"

    best = [None if b is None else mean(b) for b in _best_baselines(columns, mean)]
    rows = [
        [f"**{name}**" if name == ENSO_RECOMMENDED else name]
        + [
            cell(c["models"][name], b if name.startswith(ENSO_BASELINES) else None)
            for c, b in zip(columns, best, strict=True)
        ]
        for name in names
    ]
    return ["model", *(c["label"] for c in columns)], rows


#: the issue's tolerance: within this much mean R² of the best baseline, or above it
ENSO_TOLERANCE = 0.02
#: a miss beyond the noise: behind the best baseline by more than this many standard errors
#: of the paired differences over the test blocks
ENSO_NOISE = 2.0


def enso_goal_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_enso.py against the goal: for every model, the columns where its mean R² is within
    :data:`ENSO_TOLERANCE` of the best baseline's, or above it (unrounded means), and how far
    behind it is at the median and at worst over the columns; the baselines are held to the
    same bar. The last column says which misses are beyond the test blocks' noise: the columns
    where the model is behind the best baseline by more than the tolerance and by more than
    :data:`ENSO_NOISE` standard errors of the paired differences over the blocks."""
    columns = record["results"]["columns"]
    names = list(columns[0]["models"])

    def mean(m: dict) -> float:
        return float(np.mean(m["r2"]))

    baselines = _best_baselines(columns, mean)
    best = np.array([mean(b) for b in baselines])
    # the best baseline's score in every block, to pair each model's with
    best_r2 = [np.asarray(b["r2"], dtype=float) for b in baselines]
    rows = []
    for name in names:
        gap = np.array([mean(c["models"][name]) for c in columns]) - best
        met = [c["label"] for c, g in zip(columns, gap, strict=True) if g >= -ENSO_TOLERANCE]
        beyond = []
        for c, g, b in zip(columns, gap, best_r2, strict=True):
            d = np.asarray(c["models"][name]["r2"], dtype=float) - b
            se = d.std(ddof=1) / np.sqrt(d.size)
            if g < -ENSO_TOLERANCE and -g > ENSO_NOISE * se:
                beyond.append(c["label"])
        label = f"**{name}**" if name == ENSO_RECOMMENDED else name
        rows.append(
            [
                label,
                f"{len(met)} of {len(columns)}" + (f": {'; '.join(met)}" if met else ""),
                f"{np.median(gap):+.3f} / {gap.min():+.3f}",
                f"{len(beyond)} of {len(columns)}" + (f": {'; '.join(beyond)}" if beyond else ""),
            ]
        )
    header = [
        "model",
        f"within {ENSO_TOLERANCE} of the best baseline, or above",
        "gap median / worst",
        f"behind by more than {ENSO_NOISE:g} paired standard errors",
    ]
    return header, rows


def lincfa_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_lincfa.py: the moments pass against ``X.T @ X`` and ``dask.array.corrcoef``, and
    on a field's shape against loading and ``np.cov``; the LinCFA driver against the brute
    force per pair."""
    res = record["results"]
    m = res["moments"]
    n, d, chunk = _int(m["n"]), _int(m["d"]), _int(m["chunk"])
    rows = [
        [f"moments of {n} x {d} float64, chunks ({chunk}, {d}), threaded",
         f"{m['dcfa_s']:.2f} s", f"in-memory `X.T @ X` {m['numpy_s']:.2f} s",
         f"{m['dcfa_s'] / m['numpy_s']:.2f}x"],
        ["same", "", f"`dask.array.corrcoef` {m['corrcoef_s']:.2f} s",
         f"dcfa {m['corrcoef_s'] / m['dcfa_s']:.1f}x faster"],
    ]  # fmt: skip
    f = res.get("field_moments")  # absent from records before it was measured
    if f is not None:
        n, d, chunk = _int(f["n"]), _int(f["d"]), _int(f["chunk"])
        rows.append(
            [f"moments of {n} x {d} float32, chunks ({chunk}, {d}), threaded",
             f"{f['dcfa_s']:.2f} s", f"loading + `np.cov` {f['numpy_s']:.2f} s",
             f"{f['dcfa_s'] / f['numpy_s']:.2f}x"]
        )  # fmt: skip
        if "default_s" in f:  # measured since BLAS is pinned under the default scheduler too
            rows.append(
                ["same, no scheduler configured (a Dask array's default, threaded)",
                 f"{f['default_s']:.2f} s", f"loading + `np.cov` {f['numpy_s']:.2f} s",
                 f"{f['default_s'] / f['numpy_s']:.2f}x"]
            )  # fmt: skip
    for r in res["driver"]:
        ms = 1e3 * r["driver_s"]
        driver = f"{ms:.0f} ms" if ms >= 1 else f"{ms:.2f} ms"
        brute = r.get("brute_s")
        rows.append(
            [f"LinCFA partition from moments, D = {_int(r['D'])}",
             driver if brute is not None else f"{driver} ({r['groups']} groups)",
             "" if brute is None else f"brute force per pair {brute:.1f} s",
             "" if brute is None else f"{_times(brute / r['driver_s'])} faster"]
        )  # fmt: skip
    return ["what", "dcfa", "baseline", "ratio"], rows


CFA_TITLES = {
    "NonLinCFA": "NonLinCFA: dcfa vs per-candidate CV refits",
    "GenLinCFA": "GenLinCFA: dcfa vs per-candidate tests",
}


def cfa_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_cfa.py: NonLinCFA and GenLinCFA against the authors' per-candidate tests."""
    runs = record["results"]["runs"]
    estimators = list(dict.fromkeys(r["estimator"] for r in runs))
    by = {(r["D"], r["estimator"]): r for r in runs}

    def cell(r: dict | None) -> str:
        if r is None:
            return ""
        ratio = _times(r["brute_s"] / r["dcfa_s"])
        return (
            f"{_sig(r['dcfa_s'], 2)} s vs {_sig(r['brute_s'], 3)} s: **{ratio}** "
            f"({r['groups']} groups)"
        )

    rows = [
        [str(D), *(cell(by.get((D, e))) for e in estimators)]
        for D in dict.fromkeys(r["D"] for r in runs)
    ]
    return ["D", *(CFA_TITLES.get(e, e) for e in estimators)], rows


def job_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_job.py: the batch job against one read pass of the same store, best of the runs
    (wall time) and least of the runs (CPU time of the workers and the driver)."""
    res = record["results"]
    read, job = min(res["read_s"]), min(res["job_s"])
    read_cpu, job_cpu = min(res["read_cpu_s"]), min(res["job_cpu_s"])
    cores = res["cores"]
    runs = f"{res['repeat']} run{'s' * (res['repeat'] != 1)}"
    cached = ", stencil kernel cached" if res.get("kernel_cached") else ""
    rows = [
        [f"wall time, best of {runs}{cached}", f"{read:.2f} s", f"{job:.2f} s",
         f"**{job / read:.1f}x**"],
        ["CPU time, least of the runs", f"{read_cpu:.2f} s", f"{job_cpu:.2f} s",
         f"the job's CPU time over the {cores} cores is **{job_cpu / cores / read:.1f}x** "
         "the read pass"],
    ]  # fmt: skip
    lat, lon = res["shape"]
    grid = f"{lat} x {lon} cells x {_int(res['months'])} months"
    return [grid, "read pass", "job", "ratio"], rows


def scale_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_scale.py: LinCFA's grid (neighbour) and seed-row modes at growing D: time, time
    per cell, peak memory, against the size of a ``D x D`` matrix."""
    rows = []
    for r in record["results"]["runs"]:
        D = r["D"]
        if r["mode"] == "neighbours":
            mode = f"neighbours, r = {r['neighbors']}"
        else:
            mode = f"seed rows, {r['row_batch']} per pass"
        dense = D * D * 8 / 2**30
        rows.append(
            [mode, _int(D) + (" (data persisted)" if r.get("persisted") else ""),
             f"{r['seconds']:.1f} s", f"{r['seconds'] / D * 1e6:.0f} us",
             f"{r['peak_bytes'] / 2**20:.0f} MiB",
             f"{dense:.1f} GiB" if dense < 100 else f"{_int(round(dense))} GiB"]
        )  # fmt: skip
    header = ["mode", "D (cells)", "time", "per cell", "peak memory", "a D x D matrix would be"]
    return header, rows


def dense_memory_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_dense_memory.py: the peak resident memory of dense fits and the budget check's
    estimate, in units of their ``D x D`` float64 matrix."""
    res = record["results"]
    matrix = res["matrix_bytes"]
    rows = []
    for label, r in res["fits"].items():
        if "failed" in r:
            rows.append([label, "failed", "", ""])
            continue
        rows.append(
            [label, f"**{r['peak'] / matrix:.2f}x**", f"{r['estimate'] / matrix:.2f}x",
             f"{r['seconds']:.1f} s"]
        )  # fmt: skip
    return ["estimator", "peak", "estimate (the budget check)", "fit time"], rows


def _outcome(r: dict) -> str:
    """A sweep child's outcome: its time (and peak), the refusal, or the signal."""
    if "seconds" in r:
        peak = f", peak {r['peak'] / 2**30:.1f} GiB" if "peak" in r else ""
        return f"{r['seconds']:.2f} s{peak}"
    if "refused" in r:
        return "refused by the memory budget"
    if "signal" in r:
        return f"**crashed (signal {r['signal']})**"
    return f"error: {r.get('error', '?')}"


def dense_sweep_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_dense_sweep.py: dcfa.moments at each D, in memory and on Dask, and the
    self-product alone three ways (the ratio to dcfa's)."""
    res = record["results"]
    rows = []
    for D, row in res["product"].items():
        base = row["self_product"].get("seconds")

        def versus(r: dict, base=base) -> str:
            ratio = f" ({r['seconds'] / base:.2f}x)" if base and "seconds" in r else ""
            return _outcome(r) + ratio

        rows.append(
            [_int(int(D)), _outcome(res["moments"][f"{D} numpy"]),
             _outcome(res["moments"][f"{D} dask"]), _outcome(row["self_product"]),
             versus(row["syrk, threaded"]), versus(row["syrk, one thread"])]
        )  # fmt: skip
    header = ["D", "dcfa.moments, NumPy", "dcfa.moments, Dask", "self-product (dcfa)",
              "syrk, threaded", "syrk, one BLAS thread"]  # fmt: skip
    return header, rows


#: Table 4's columns, with the paper's precision (the AUCs are given to two decimals).
GBMAP_COLUMNS = {"KNN": 3, "KNN-GBMAP": 3, "AUC-GBMAP": 2, "AUC-EUCLID": 2}


def gbmap_paper_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_gbmap_paper.py (Table 4): paper / dcfa mean ± spread; bold where the paper's
    value is not a plausible single run of the protocol."""

    def cell(c: dict | None, decimals: int) -> str:
        if c is None:
            return "-"
        ours = f"{c['mean']:.3f} ± {c['sd']:.3f}"
        return f"{c['paper']:.{decimals}f} / {ours if c['within'] else f'**{ours}**'}"

    rows = []
    for r in record["results"]["datasets"]:
        name = r["dataset"].upper()
        if "skipped" in r:
            rows.append([name, f"skipped: {r['skipped']}", *[""] * (len(GBMAP_COLUMNS) - 1)])
            continue
        rows.append(
            [name, *(cell(c, d) for c, d in zip(r["cells"], GBMAP_COLUMNS.values(), strict=True))]
        )
    return ["dataset", *GBMAP_COLUMNS], rows


def _seconds(x: float) -> str:
    """``0.51 s``, ``34.5 s``, ``117 s``, ``1 101 s``: a wall time to about three digits."""
    if x < 10:
        return f"{x:.2f} s"
    return f"{x:.1f} s" if x < 100 else f"{_int(round(x))} s"


def _n(n: int) -> str:
    """``1e5``: a power-of-ten size as the paper writes it."""
    return f"{n:.0e}".replace("e+0", "e").replace("e+", "e")


def gbmap_timings_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_gbmap.py (the paper's Table 3 grid): NumPy and Dask fit times, their ratio, the
    cluster's (``--cluster``), the paper's seconds, and the load average after each row."""
    res = record["results"]
    cluster = res["cluster"]
    rows = []
    for r in res["rows"]:
        row = [_n(r["n"]), str(r["p"]), _seconds(r["numpy_s"]), _seconds(r["dask_s"]),
               f"{r['dask_s'] / r['numpy_s']:.2f}x"]  # fmt: skip
        if cluster:
            row += [_seconds(r["cluster_s"]), f"{r['cluster_s'] / r['numpy_s']:.2f}x"]
        paper = r["paper_s"]
        row += ["-", "-"] if paper is None else [f"{paper:.1f} s", f"{r['dask_s'] / paper:.2f}x"]
        rows.append([*row, f"{r['load']:.1f}"])
    width = 8 + 2 * cluster
    for r in res["skipped"]:
        need = r["bytes_needed"] / 2**30
        text = f"skipped: needs ~{need:.0f} GiB, {r['bytes_available'] / 2**30:.0f} available"
        rows.append([_n(r["n"]), str(r["p"]), text, *[""] * (width - 3)])
    header = ["n", "p", "NumPy", "Dask", "Dask / NumPy"]
    header += ["2-process cluster", "cluster / NumPy"] if cluster else []
    return [*header, "paper", "Dask / paper", "load after"], rows


def gbmap_synth_full_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_gbmap_paper.py --synth-full: GBMAP's test score after m steps on SYNTH-COS at the
    paper's size, per draw (or split of saved data), against Table 5; then Table 4's value
    and each fit's time and evaluations."""
    res = record["results"]
    what = "draw" if res["data"] is None else "split"
    rows = []
    for task, t in res["tasks"].items():
        name = f"SYNTH-COS-{task[0].upper()}, " + ("R²" if task == "regression" else "accuracy")
        for m, paper in t["table5"].items():
            scores = [run["scores"][m] for run in t["runs"]]
            rows.append(
                [f"{name} at m = {m}", f"{paper:.2f}", *(f"{v:.3f}" for v in scores),
                 f"{np.mean(scores):.3f}"]
            )  # fmt: skip
        rows.append(
            [f"{name}, Table 4 (m tuned); the fits", f"{t['table4']:.3f}",
             *(f"{_seconds(run['seconds'])}, {_int(run['evals'])} evaluations"
               for run in t["runs"]), ""]
        )  # fmt: skip
    return ["", "paper (Table 5)", *(f"{what} {i}" for i in range(res["draws"])), "mean"], rows


def gbmap_defaults_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_gbmap_paper.py --defaults: the test score of every fit (data seed by
    ``random_state``), the range and median, and the goal held on how many fits."""
    res = record["results"]
    seeds = sorted({f["data_seed"] for t in res["tasks"].values() for f in t["fits"]})
    rows = []
    for task, t in res["tasks"].items():
        fits, goal = t["fits"], t["goal"]
        scores = [f["score"] for f in fits]
        by_seed = [
            " / ".join(f"{f['score']:.3f}" for f in fits if f["data_seed"] == ds) for ds in seeds
        ]
        held = sum(s >= goal for s in scores)
        rows.append(
            [f"SYNTH-COS-{task[0].upper()}, {t['metric'].replace('R2', 'R²')}", *by_seed,
             f"{min(scores):.3f} / {np.median(scores):.3f} / {max(scores):.3f}",
             _goal(held == len(scores), f">= {goal:g}: {held} of {len(scores)}"),
             _seconds(float(np.median([f["seconds"] for f in fits])))]
        )  # fmt: skip
        if "ceiling" in t:  # the most 16 stage-wise learners can reach on each draw
            rows.append(
                [f"ceiling of {res['n_boosts']} stage-wise learners",
                 *(f"{c:.3f}" for c in t["ceiling"]),
                 "", f"{goal:g} within reach on {sum(c >= goal for c in t['ceiling'])} "
                     f"of {len(t['ceiling'])} draws", ""]
            )  # fmt: skip
    states = sorted({f["random_state"] for t in res["tasks"].values() for f in t["fits"]})
    header = [f"test score (random_state {' / '.join(map(str, states))})"]
    header += [f"data seed {ds}" for ds in seeds]
    return [*header, "min / median / max", "goal", "fit time, median"], rows


def regions_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_regions.py: every rule on the field with known regions: groups, contiguity,
    purity, foreign cells, skill against the oracle, fit time and peak memory."""
    rows = []
    for r in record["results"]["rows"]:
        chosen = ", ".join(f"{k.rstrip('_')} {v:g}" for k, v in r.get("chosen", {}).items())
        name = f"`{r['call']}`" + (f" (chose {chosen})" if chosen else "")
        workers = r["worker_mib"]
        peak = "-" if not workers else f"{max(workers) / 1024:.1f}"
        driver = "-" if r["driver_mib"] is None else f"{r['driver_mib'] / 1024:.1f}"
        peak = f"{peak} / {driver} GiB" + (f", {r['restarts']} restarted" if r["restarts"] else "")
        fit = "-" if r["fit_seconds"] is None else _seconds(r["fit_seconds"])
        if r.get("load") is not None:
            fit += f" ({r['load']:.1f})"
        if r["error"]:
            rows.append([name, f"**failed**: {r['error']}", "", "", "", "", fit, peak])
            continue
        foreign = ",".join(map(str, r["foreign_cells"]))
        enclosed = ",".join(map(str, r["enclosed_cells"]))
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        rows.append(
            [name, _int(r["groups"]), f"{r['one_patch']:.2f}", r["pure"],
             f"{foreign} ({enclosed})", ratio, fit, peak]
        )  # fmt: skip
    res = record["results"]
    lat, lon = res["shape"]
    field = (
        f"{lat} x {lon} cells ({_int(res['ocean_cells'])} ocean), {_int(res['months'])} months, "
        f"{res['bytes'] / 1e9:.2f} GB; oracle R² {res['oracle_r2']:.3f}"
    )
    header = [field, "groups", "contiguous", "pure", "foreign (enclosed)", "skill / oracle",
              "fit (load after)", "peak worker / driver"]  # fmt: skip
    return header, rows


#: The tables by name: a builder from the results file's record to (header, rows).
def targets_table(record: dict) -> tuple[list[str], list[list[str]]]:
    """bench_targets.py: K targets by one job against K jobs of one target each, and (when
    measured) ``fit_each`` against K fits in Python."""
    res = record["results"]
    fits = res.get("fit_each")  # absent from records before it was measured
    rows = []
    for k, r in sorted(res["targets"].items(), key=lambda kv: int(kv[0])):
        one, each = r["one_job"], r["separate_jobs"]
        row = [
            str(k), _seconds(one), _seconds(sum(each)),
            f"{one / sum(each):.2f}x", f"{one / each[0]:.2f}x",
        ]  # fmt: skip
        if fits is not None:
            f = fits[str(k)]
            alone = sum(f["separate_fits"])
            row += [_seconds(f["fit_each"]), _seconds(alone), f"{f['fit_each'] / alone:.2f}x"]
        rows.append(row)
    header = [
        "targets K", "one job", "K jobs of one target", "one job / K jobs",
        "one job / a one-target job",
    ]  # fmt: skip
    if fits is not None:
        header += ["`fit_each(RegionsCV())`", "K `RegionsCV().fit`", "fit_each / K fits"]
    return header, rows


TABLES = {
    "panel": panel_table,
    "enso": enso_table,
    "enso_goal": enso_goal_table,
    "lincfa": lincfa_table,
    "cfa": cfa_table,
    "job": job_table,
    "scale": scale_table,
    "dense_memory": dense_memory_table,
    "dense_sweep": dense_sweep_table,
    "gbmap_paper": gbmap_paper_table,
    "gbmap_timings": gbmap_timings_table,
    "gbmap_synth_full": gbmap_synth_full_table,
    "gbmap_defaults": gbmap_defaults_table,
    "regions": regions_table,
    "targets": targets_table,
}


def _run_notes(record: dict) -> str:
    """The load average (1 minute) at the start and the end of the run, when recorded, and
    a run cut short."""
    notes = ""
    if "load" in record:
        start, end = record["load"]["start"][0], record["load"]["end"][0]
        notes += f" Load average (1 minute): {start:.1f} at the start, {end:.1f} at the end."
    if record["results"].get("complete") is False:
        notes += " The run was cut short: only the rows above finished."
    return notes


class ResultsTable(Directive):
    required_arguments = 1
    option_spec = {"table": directives.unchanged_required}

    def run(self):
        env = self.state.document.settings.env
        source = (Path(env.srcdir) / Path(env.docname).parent / self.arguments[0]).resolve()
        env.note_dependency(str(source))
        record = json.loads(source.read_text())
        header, rows = TABLES[self.options["table"]](record)
        made = nodes.paragraph()
        made += nodes.Text("From ")
        made += nodes.literal(text=str(source.relative_to(Path(env.srcdir).resolve().parent)))
        made += nodes.Text(", written by ")
        made += nodes.literal(text=record["command"])
        made += nodes.Text(
            f" on {record['machine']}, {record['date']} (dcfa {record['dcfa']})."
            + _run_notes(record)
        )
        return [table(header, rows), made]


def setup(app):
    app.add_directive("results-table", ResultsTable)
    return {"parallel_read_safe": True, "version": "1"}

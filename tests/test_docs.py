"""The documentation site (docs/): it builds with warnings as errors, every public name has an
API page, and no docstring cites a file that is not in the repository."""

from __future__ import annotations

import functools
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dcfa

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"

# the public modules whose exported names (``__all__``) the API reference lists
PUBLIC = (
    "dcfa",
    "dcfa.gbmap",
    "dcfa.memory",
    "dcfa.io",
    "dcfa.forecast",
    "dcfa.skill",
    "dcfa.plot",
    "dcfa.datasets",
)


def public_names() -> list[tuple[str, str]]:
    """``(module, name)`` for every exported name of the public modules (modules themselves,
    such as ``dcfa.memory``, and ``__version__`` are not API pages)."""
    out = []
    for modname in PUBLIC:
        module = importlib.import_module(modname)
        for name in module.__all__:
            if name == "__version__" or isinstance(getattr(module, name), type(sys)):
                continue
            out.append((modname, name))
    return out


def api_entries() -> set[str]:
    """The fully qualified names listed in the autosummary tables of docs/api.rst."""
    entries, current, in_table = set(), None, False
    for line in (DOCS / "api.rst").read_text().splitlines():
        if m := re.match(r"\.\. currentmodule:: (\S+)", line):
            current, in_table = m.group(1), False
        elif line.startswith(".. autosummary::"):
            in_table = True
        elif in_table and (m := re.match(r"   (~?[\w.]+)$", line)):
            entries.add(f"{current}.{m.group(1).lstrip('~')}")
        elif in_table and line and not line.startswith(" "):
            in_table = False
    return entries


def documented(modname: str, name: str, entries: set[str]) -> bool:
    """Listed under its own module, or, for a name a subpackage shares with the top level
    (``dcfa.gbmap.drift_score`` is ``dcfa.drift_score``), under ``dcfa``."""
    if f"{modname}.{name}" in entries:
        return True
    obj = getattr(importlib.import_module(modname), name)
    return f"dcfa.{name}" in entries and getattr(dcfa, name, None) is obj


def test_every_public_name_is_listed_in_the_api_reference():
    entries = api_entries()
    missing = [f"{m}.{n}" for m, n in public_names() if not documented(m, n, entries)]
    assert not missing, f"add these to docs/api.rst: {missing}"


def test_every_api_entry_is_a_public_name():
    names = {f"{m}.{n}" for m, n in public_names()}
    stale = sorted(api_entries() - names)
    assert not stale, f"docs/api.rst lists names that are not exported: {stale}"


# paths a docstring or comment may cite: Markdown files, notebooks, and files or folders of the
# repository's top-level folders
_CITED = re.compile(
    r"(?<![\w./-])("
    r"(?:\.\./)+[\w./-]+"  # outside the repository
    r"|[\w./-]*[\w-]\.(?:md|ipynb)"
    r"|(?:tests|benchmarks|notebooks|deploy|docs)/[\w./-]*[\w-]"
    r")"
)


def cited_paths() -> dict[str, list[str]]:
    """Every path cited in dcfa/**/*.py, with where."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "dcfa").rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for cited in _CITED.findall(line):
                out.setdefault(cited, []).append(f"{path.relative_to(ROOT)}:{lineno}")
    return out


def test_the_citation_scan_finds_paths():
    found = _CITED.findall(
        "see ALGORITHMS.md, reference/lincfa.md section 2, ../shared/notes.txt, "
        "benchmarks/bench_enso.py and deploy/slurm."
    )
    assert found == [
        "ALGORITHMS.md",
        "reference/lincfa.md",
        "../shared/notes.txt",
        "benchmarks/bench_enso.py",
        "deploy/slurm",
    ]


def test_no_docstring_cites_a_file_outside_the_repository():
    cited = cited_paths()
    assert "deploy/slurm" in cited  # the scan sees the citations there are
    missing = {
        path: where
        for path, where in cited.items()
        if path.startswith("..") or not (ROOT / path).exists()
    }
    assert not missing, f"cited but not in the repository: {missing}"


# a dotted name of dcfa in backquotes, and a module file in backquotes (``hierarchy.py``)
_DOTTED = re.compile(r"`(dcfa(?:\.\w+)+)")
_MODULE_FILE = re.compile(r"`((?:[\w/]+/)?\w+\.py)`")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module or an attribute of one, or a Dask config key that dcfa's
    code reads (``dcfa.memory_budget``)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                break
            obj = getattr(obj, attr)
        else:
            return True
        break
    return f'"{dotted}"' in _dcfa_source()


def modules_with_examples() -> list[str]:
    """Every module of the package whose docstrings hold an example (``>>>``)."""
    package = ROOT / "dcfa"
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in package.rglob("*.py")
        if ">>>" in path.read_text()
    )


@pytest.mark.parametrize("modname", modules_with_examples())
def test_the_docstrings_examples_give_what_they_show(modname):
    """Every example in a docstring runs and prints what it shows: two did not (LinCFA's
    labels since the first release; Anomalies' once a fit on 12 months was refused)."""
    import doctest

    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    module = importlib.import_module(modname)
    result = doctest.testmod(module, optionflags=flags)  # prints each failure
    assert result.failed == 0, f"{modname}: {result.failed} example(s) failed (stdout above)"


def test_the_example_scan_finds_the_estimators():
    assert {"dcfa.cfa.lincfa", "dcfa.anomalies", "dcfa.cfa.regions"} <= set(modules_with_examples())


@functools.cache
def _dcfa_source() -> str:
    """All of dcfa's code, read once: a config key is named there as a string."""
    return "".join(p.read_text() for p in (ROOT / "dcfa").rglob("*.py"))


def _pages() -> list[Path]:
    """The pages that describe the code as it is: the README and the site, not the
    changelog (history names what has gone)."""
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    return [p for p in pages if "_build" not in p.parts and p.name != "changelog.md"]


def test_the_pages_name_only_code_that_exists():
    """A module renamed or a function moved leaves no page pointing at the old name: no
    dotted name of dcfa, and no file in the module map of the contributing guide (other pages
    also name the papers' authors' files)."""
    files = {p.name for p in ROOT.rglob("*.py") if ".venv" not in p.parts}
    stale = []
    for page in _pages():
        text = page.read_text()
        where = page.relative_to(ROOT)
        stale += [f"{where}: {d}" for d in sorted(set(_DOTTED.findall(text))) if not _resolves(d)]
        if page.name == "contributing.md":
            for name in sorted(set(_MODULE_FILE.findall(text))):
                if Path(name).name not in files:
                    stale.append(f"{where}: {name}")
    assert not stale, "named in the pages, not in the code: " + "; ".join(stale)


def test_the_name_check_finds_a_stale_name():
    assert _resolves("dcfa.cfa.selection.ridge_skill") and _resolves("dcfa.memory_budget")
    assert not _resolves("dcfa.batch.job._time_scales")
    assert _MODULE_FILE.findall("`executions/full.py`, `rows.py` and `x.pyc`") == [
        "executions/full.py",
        "rows.py",
    ]


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    out = tmp_path / "html"
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-d", str(tmp_path / "doctrees")]
        + [str(DOCS), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=500,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for page in ("index", "api", "algorithms", "search"):
        assert (out / f"{page}.html").is_file(), page
    entries = api_entries()
    pages = {p.stem for p in (out / "generated").glob("*.html")}
    assert entries <= pages, sorted(entries - pages)
    # an estimator's page documents its methods; a re-exported constant shows its own comment
    assert 'id="dcfa.LinCFA.fit"' in (out / "generated" / "dcfa.LinCFA.html").read_text()
    config_key = (out / "generated" / "dcfa.memory.CONFIG_KEY.html").read_text()
    assert "Dask config key" in config_key and "str(object" not in config_key
    # every example of the gallery ran and drew its figures; the job file's reference is there
    for example in sorted((ROOT / "examples").glob("plot_*.py")):
        page = (out / "auto_examples" / f"{example.stem}.html").read_text()
        assert f"sphx_glr_{example.stem}_001.png" in page, example.name
    batch = (out / "user-guide" / "batch-jobs.html").read_text()
    assert all(f'id="config-{section}"' in batch for section in ("input", "target", "cluster"))


@pytest.mark.parametrize(
    ("name", "estimators"),
    [
        ("panel.json", ["RegionsCV()", "GenLinCFA(neighbors=1)"]),
        ("panel_replay.json", ["RegionsCV()"]),
    ],
)
def test_the_panel_table_is_read_from_its_results_file(name, estimators):
    """The evidence page's panel tables come from their results files: their cells are the
    file's draws summarised again here, independently, with NumPy."""
    import json

    import numpy as np

    results = _docs_extension("results")
    record = json.loads((ROOT / "benchmarks/results" / name).read_text())
    header, rows = results.panel_table(record)
    assert header[0] == f"panel seed {record['panel_seed']}"
    assert header[1:-1] == estimators
    cells = {row[0]: row[1:] for row in rows}
    for col, estimator in enumerate(estimators):
        draws = [d for d in record["results"][estimator]["draws"] if d["kind"] == "regions"]
        pure = sum(d["pure"] == d["driving"] for d in draws)
        assert cells["regions: draws with all 4 driving regions pure"][col].startswith(
            f"{pure} of {len(draws)} "
        )
        ratio = np.array([d["r2"] / d["reference"] for d in draws])
        expect = f"{np.median(ratio):.3f} ({ratio.min():.3f})"
        assert cells["regions: R2 / oracle, map on all months, median (worst)"][col] == expect
        nested = np.array([d["extra"]["nested_r2"] / d["reference"] for d in draws])
        expect = f"{np.median(nested):.3f} ({nested.min():.3f})"
        assert cells["regions: the same, refitted in every fold, median (worst)"][col] == expect
        smooth = [d for d in record["results"][estimator]["draws"] if d["kind"] == "smooth"]
        groups = [d["groups"] for d in smooth]
        expect = f"{np.median(groups):.0f} ({max(groups)})"
        assert cells["smooth: groups, median (worst)"][col] == expect
    page = (ROOT / "docs/evidence/panel.md").read_text()
    assert f"{{results-table}} ../../benchmarks/results/{name}" in page
    assert "1.006 (1.001)" not in page  # no number copied by hand next to the table


def _record(results: dict, **fields) -> dict:
    """A results file's record (benchmarks/_results.py) around ``results``."""
    return {
        "command": "python benchmarks/bench.py --json out.json",
        **fields,
        "date": "2026-01-01",
        "machine": "test machine",
        "dcfa": "0",
        "results": results,
    }


def synthetic_records() -> dict[str, dict]:
    """For every table of docs/_ext/results.py, the least record of the shape its benchmark
    writes with ``--json`` (made up numbers)."""
    goals = {
        "groups": True,
        "pure": False,
        "ratio_median": True,
        "ratio_worst": True,
        "contiguous": True,
    }
    regions = {
        "draws": 2,
        "groups_median": 10.0,
        "groups_worst": {"2 degree": 12, "1 degree": 0},
        "contiguous_worst": 1.0,
        "all_pure_share": 0.5,
        "ratio_median": 1.0,
        "ratio_worst": 0.95,
        "nested_ratio_median": 0.97,
        "nested_ratio_worst": 0.9,
        "ari_median": float("nan"),
        "ari_worst": float("nan"),
        "fit_s_median": 1.0,
        "fit_s_worst": 2.0,
        "goals": goals,
    }
    smooth = {
        "draws": 1,
        "groups_median": 30.0,
        "groups_worst": 40,
        "gap_median": -0.01,
        "gap_worst": -0.05,
        "nested_gap_median": -0.02,
        "nested_gap_worst": -0.07,
        "goals": {"groups": False, "within_ridge": False},
    }
    box = {
        "draws": 1,
        "groups_median": 4.0,
        "groups_worst": 5,
        "single_median": 0.0,
        "single_worst": 1,
        "box_kept_median": 0.8,
        "box_kept_worst": 0.5,
        "box_inside_median": 0.9,
        "ratio_median": 1.0,
        "nested_ratio_median": 0.99,
        "nested_ratio_worst": 0.95,
        "contiguous_worst": 1.0,
        "fit_s_median": 1.0,
        "goals": {"box_kept": False, "no_single": False, "ratio_worst": True},
    }
    summary = {"summary": {"regions": regions, "smooth": smooth, "box": box}}
    panel = {
        "RegionsCV()": summary,
        "GenLinCFA(neighbors=1)": summary,
        "time_ratio": {"median": 1.5, "worst": 3.2},
    }

    def skill(r2: list[float], features: list[int]) -> dict:
        return {"r2": r2, "n_features": features, "fit_time": 0.1}

    models = {
        "Nino-3.4 box mean -> OLS": skill([0.3, 0.5], [1, 1]),
        "PCA/EOF -> OLS (modes by CV)": skill([0.2, 0.4], [3, 5]),
        "RegionsCV() -> RidgeCV": skill([0.4, 0.4], [2, 7]),
        # behind PCA by 0.1 in both blocks (beyond the noise), and by 0.1 on average (within)
        "LinCFA -> OLS": skill([0.1, 0.3], [9, 9]),
        "GenLinCFA(neighbors=1) -> OLS": skill([0.3, 0.1], [9, 9]),
    }
    column = {
        "lead": 0,
        "variables": ["sst"],
        "months": 348,
        "cells": 513,
        "tested": "2001-04 .. 2019-12",
        "models": models,
    }
    enso = {
        "splits": 2,
        "quick": True,
        "seconds": 1.0,
        "columns": [column | {"label": "lead 0, SST"}, column | {"label": "lead 3, SST"}],
    }
    lincfa = {
        "quick": True,
        "moments": {
            "n": 200_000,
            "d": 500,
            "chunk": 20_000,
            "numpy_s": 1.6,
            "dcfa_s": 1.5,
            "corrcoef_s": 3.3,
        },
        "field_moments": {
            "n": 1200,
            "d": 5000,
            "chunk": 240,
            "numpy_s": 0.34,
            "dcfa_s": 0.41,
            "default_s": 0.4,
        },  # fmt: skip
        "driver": [
            {"D": 2000, "n": 500, "moments_s": 0.1, "driver_s": 0.011, "groups": 9, "brute_s": 8.3},
            {"D": 20_000, "n": 500, "moments_s": 9.0, "driver_s": 0.057, "groups": 23},
        ],
    }
    cfa = {
        "quick": False,
        "runs": [
            {
                "estimator": "NonLinCFA",
                "eps": 1e-3,
                "D": 100,
                "n": 2000,
                "dcfa_s": 0.069,
                "brute_s": 33.2,
                "groups": 8,
            },
            {
                "estimator": "GenLinCFA",
                "eps": 0.77,
                "D": 100,
                "n": 2000,
                "dcfa_s": 0.038,
                "brute_s": 1.8,
                "groups": 18,
            },
            {
                "estimator": "NonLinCFA",
                "eps": 1e-3,
                "D": 500,
                "n": 2000,
                "dcfa_s": 0.24,
                "brute_s": 345.0,
                "groups": 16,
            },
        ],
    }
    job = {
        "shape": [180, 360],
        "months": 1200,
        "gigabytes": 0.31,
        "workers": 2,
        "threads_per_worker": 1,
        "cores": 2,
        "repeat": 3,
        "gbmap": False,
        "kernel_cached": False,
        "read_s": [0.6, 0.5, 0.55],
        "job_s": [2.5, 2.4, 2.6],
        "read_cpu_s": [0.95, 0.93, 0.99],
        "job_cpu_s": [3.9, 3.8, 4.0],
    }
    scale = {
        "quick": False,
        "months": 500,
        "runs": [
            {
                "mode": "neighbours",
                "neighbors": 1,
                "persisted": False,
                "D": 999_698,
                "seconds": 19.3,
                "peak_bytes": 582 * 2**20,
                "groups": 40,
            },
            {
                "mode": "rows",
                "row_batch": 512,
                "persisted": True,
                "D": 49_928,
                "seconds": 5.7,
                "peak_bytes": 563 * 2**20,
                "groups": 25,
            },
        ],
    }
    fit = {"D": 3000, "seconds": 4.3, "peak": 46e6, "held": 40e6, "estimate": 48e6, "groups": 9}
    dense = {
        "shape": [30, 100],
        "D": 3000,
        "months": 500,
        "in_memory": False,
        "matrix_bytes": 72e6,
        "fits": {"LinCFA()": fit, "NonLinCFA(neighbors=1)": {"failed": "MemoryError"}},
    }
    ran = {"seconds": 7.3, "peak": 3.4 * 2**30, "before": 0.1 * 2**30}
    sweep = {
        "moments": {
            "20000 numpy": ran,
            "20000 dask": ran,
            "40000 numpy": ran,
            "40000 dask": {"refused": "the dense pass would hold about 38.0 GiB"},
        },
        "product": {
            "20000": {
                "self_product": {"seconds": 3.7},
                "syrk, threaded": {"seconds": 2.4},
                "syrk, one thread": {"seconds": 3.9},
            },
            "40000": {
                "self_product": {"seconds": 18.0},
                "syrk, threaded": {"signal": 11},
                "syrk, one thread": {"seconds": 16.6},
            },
        },
    }
    knn = {"paper": 0.84, "mean": 0.833, "sd": 0.037, "runs": 25, "within": True}
    auc = {"paper": 0.73, "mean": 0.859, "sd": 0.044, "runs": 10, "within": False}
    gbmap = {
        "repeats": 5,
        "draws": 5,
        "seeds": 10,
        "datasets": [
            {
                "dataset": "concrete",
                "task": "regression",
                "cells": [knn, knn, auc, auc],
                "split_covariates": ["age"],
                "seconds": 20.0,
            },
            {
                "dataset": "synth-cos-r",
                "task": "regression",
                "cells": [knn, knn, None, None],
                "split_covariates": [],
                "seconds": 5.0,
            },
            {"dataset": "diabetes", "skipped": "diabetes.arff: not found"},
        ],
    }
    timing = {"n": 100_000, "p": 25, "evals": 44, "numpy_s": 0.51, "dask_s": 0.49}
    timings = {
        "params": {"n_boosts": 2},
        "chunks": 2,
        "repeat": 2,
        "cluster": True,
        "rows": [
            timing | {"max_dcoef": 1e-12, "cluster_s": 0.7, "paper_s": 1.4, "load": 1.2},
            timing
            | {"n": 200_000, "max_dcoef": 0.0, "cluster_s": 0.8, "paper_s": None, "load": 2.0},
        ],
        "skipped": [{"n": 10**7, "p": 25, "bytes_needed": 8e9, "bytes_available": 4e9}],
    }
    runs = [
        {"scores": {"8": 0.105, "16": 0.192}, "seconds": 180.0, "evals": 1234},
        {"scores": {"8": 0.137, "16": 0.198}, "seconds": 170.0, "evals": 1100},
    ]
    synth_full = {
        "draws": 2,
        "data": None,
        "params": {"beta": 10.0},
        "tasks": {"regression": {"table5": {"8": 0.16, "16": 0.23}, "table4": 0.452, "runs": runs}},
    }
    fits = [
        {"data_seed": ds, "random_state": rs, "score": 0.2 + 0.01 * ds + 0.001 * rs, "seconds": 9.0}
        for ds in range(2)
        for rs in range(2)
    ]
    defaults = {
        "n": 200_000,
        "p": 200,
        "test_rows": 20_000,
        "n_boosts": 16,
        "tasks": {
            "regression": {"metric": "R2", "goal": 0.21, "fits": fits, "ceiling": [0.205, 0.23]}
        },
    }
    region_row = {
        "name": "GenLinCFACV",
        "call": "GenLinCFACV(neighbors=1)",
        "groups": 19,
        "one_patch": 1.0,
        "pure": "3/4",
        "foreign_cells": [0, 3, 0, 1],
        "enclosed_cells": [0, 3, 0, 0],
        "ratio": 1.001,
        "fit_seconds": 313.4,
        "load": 2.54,
        "worker_mib": [512.0, 480.0],
        "driver_mib": 1024.0,
        "restarts": 0,
        "error": "",
        "chosen": {"eps_": 0.7},
    }
    refused = region_row | {
        "name": "RegionsCV",
        "call": "RegionsCV()",
        "error": "MemoryBudgetError: the series would need 5.4 GiB",
        "groups": None,
        "chosen": {},
    }
    regions_run = {
        "resolution": "1",
        "shape": [180, 360],
        "ocean_cells": 45_268,
        "months": 1200,
        "bytes": 311e6,
        "oracle_r2": 0.93,
        "complete": False,
        "rows": [region_row, refused],
    }
    load = {"start": [0.5, 0.4, 0.3], "end": [2.0, 1.0, 0.5]}
    targets = {
        "grid": [180, 360], "months": 1200, "bytes": 311e6, "memory_limit": "700MB",
        "targets": {"1": {"one_job": 12.0, "separate_jobs": [11.0]},
                    "2": {"one_job": 18.0, "separate_jobs": [11.0, 13.0]}},
        "fit_each": {"1": {"fit_each": 6.0, "separate_fits": [6.0]},
                     "2": {"fit_each": 9.0, "separate_fits": [6.0, 6.0]}},
    }  # fmt: skip
    return {
        "gbmap_timings": _record(timings, load=load),
        "gbmap_synth_full": _record(synth_full, load=load),
        "gbmap_defaults": _record(defaults, load=load),
        "regions": _record(regions_run, load=load),
        "panel": _record(panel, panel_seed=1),
        "enso": _record(enso),
        "enso_goal": _record(enso),
        "lincfa": _record(lincfa),
        "cfa": _record(cfa),
        "job": _record(job),
        "scale": _record(scale),
        "dense_memory": _record(dense),
        "dense_sweep": _record(sweep),
        "gbmap_paper": _record(gbmap),
        "targets": _record(targets),
    }


def test_every_results_table_builds_from_a_record_of_its_shape():
    """Every builder of the results-table directive, given a record of the shape its benchmark
    writes, makes a header and rows of text of the same width."""
    results = _docs_extension("results")
    records = synthetic_records()
    assert set(records) == set(results.TABLES), "a new table needs its record here"
    built = {}
    for name, record in records.items():
        header, rows = results.TABLES[name](record)
        assert rows and all(isinstance(cell, str) for cell in header), name
        for row in rows:
            assert len(row) == len(header), (name, header, row)
            assert all(isinstance(cell, str) for cell in row), (name, row)
        built[name] = dict(zip([r[0] for r in rows], rows, strict=True))
    # the marks the pages explain: the best baseline of an ENSO column, the recommended call,
    # a paper's value that is not a plausible run, and the ratios as the pages write them
    enso = built["enso"]
    assert enso["PCA/EOF -> OLS (modes by CV)"][1] == "**+0.30** ± 0.10 (3-5)"
    assert enso["Nino-3.4 box mean -> OLS"][1] == "+0.40 ± 0.10 (1)"  # not a baseline
    assert "**RegionsCV() -> RidgeCV**" in enso
    # the goal's bar, the baselines held to it too: PCA is the best baseline (mean 0.3) in both
    # columns, RegionsCV 0.1 above it in both
    goal = built["enso_goal"]
    assert goal["PCA/EOF -> OLS (modes by CV)"][1:] == [
        "2 of 2: lead 0, SST; lead 3, SST",
        "+0.000 / +0.000",
        "0 of 2",
    ]
    assert goal["**RegionsCV() -> RidgeCV**"][1:] == [
        "2 of 2: lead 0, SST; lead 3, SST",
        "+0.100 / +0.100",
        "0 of 2",
    ]
    # a steady lag is beyond the noise, the same mean lag from one bad block is not
    assert goal["LinCFA -> OLS"][1:] == [
        "0 of 2",
        "-0.100 / -0.100",
        "2 of 2: lead 0, SST; lead 3, SST",
    ]
    assert goal["GenLinCFA(neighbors=1) -> OLS"][1:] == ["0 of 2", "-0.100 / -0.100", "0 of 2"]
    box = built["panel"]["box: share of the box in one region, median (worst)"]
    assert box[1:] == ["0.80 (0.50)", "0.80 (0.50)", ">= 0.90 (missed)"]
    assert built["gbmap_paper"]["CONCRETE"][3] == "0.73 / **0.859 ± 0.044**"
    assert built["cfa"]["500"] == ["500", "0.24 s vs 345 s: **1 438x** (16 groups)", ""]
    assert built["lincfa"]["LinCFA partition from moments, D = 20 000"][1] == "57 ms (23 groups)"
    field = built["lincfa"]["moments of 1 200 x 5 000 float32, chunks (240, 5 000), threaded"]
    assert field[1:] == ["0.41 s", "loading + `np.cov` 0.34 s", "1.21x"]
    same = built["lincfa"]["same, no scheduler configured (a Dask array's default, threaded)"]
    assert same[1:] == ["0.40 s", "loading + `np.cov` 0.34 s", "1.18x"]
    sweep = built["dense_sweep"]["40 000"]
    assert sweep[2] == "refused by the memory budget"
    assert sweep[4:] == ["**crashed (signal 11)**", "16.60 s (0.92x)"]
    # the GBMAP tables compute their ratios, summaries and goals from the raw values
    timing = built["gbmap_timings"]["1e5"]
    assert timing[2:] == ["0.51 s", "0.49 s", "0.96x", "0.70 s", "1.37x", "1.4 s", "0.35x", "1.2"]
    assert built["gbmap_timings"]["1e7"][2] == "skipped: needs ~7 GiB, 4 available"
    synth = built["gbmap_synth_full"]
    assert synth["SYNTH-COS-R, R² at m = 16"][1:] == ["0.23", "0.192", "0.198", "0.195"]
    assert synth["SYNTH-COS-R, R², Table 4 (m tuned); the fits"][2] == "180 s, 1 234 evaluations"
    defaults = built["gbmap_defaults"]["SYNTH-COS-R, R²"]
    assert defaults[1:] == [
        "0.200 / 0.201",
        "0.210 / 0.211",
        "0.200 / 0.206 / 0.211",
        ">= 0.21: 2 of 4 (missed)",
        "9.00 s",
    ]
    ceiling = built["gbmap_defaults"]["ceiling of 16 stage-wise learners"]
    assert ceiling[1:] == ["0.205", "0.230", "", "0.21 within reach on 1 of 2 draws", ""]
    regions = built["regions"]
    assert regions["`GenLinCFACV(neighbors=1)` (chose eps 0.7)"][1:] == [
        "19", "1.00", "3/4", "0,3,0,1 (0,3,0,0)", "1.001", "313 s (2.5)", "0.5 / 1.0 GiB"
    ]  # fmt: skip
    assert (
        regions["`RegionsCV()`"][1]
        == "**failed**: MemoryBudgetError: the series would need 5.4 GiB"
    )
    assert built["targets"]["2"][1:] == [
        "18.0 s", "24.0 s", "0.75x", "1.64x", "9.00 s", "12.0 s", "0.75x",
    ]  # fmt: skip
    header = results.regions_table(records["regions"])[0]
    assert header[0] == "180 x 360 cells (45 268 ocean), 1 200 months, 0.31 GB; oracle R² 0.930"
    notes = results._run_notes(records["regions"])
    assert notes == (
        " Load average (1 minute): 0.5 at the start, 2.0 at the end."
        " The run was cut short: only the rows above finished."
    )


#: the evidence tables rendered from results files: (page, results file, table)
RENDERED = [
    ("evidence/gbmap.md", "gbmap_paper.json", "gbmap_paper"),
    ("evidence/gbmap.md", "gbmap_timings.json", "gbmap_timings"),
    ("evidence/gbmap.md", "gbmap_timings_cluster.json", "gbmap_timings"),
    ("evidence/gbmap.md", "gbmap_synth_full.json", "gbmap_synth_full"),
    ("user-guide/gbmap.md", "gbmap_defaults.json", "gbmap_defaults"),
    ("evidence/regions.md", "regions_1deg.json", "regions"),
    ("evidence/regions.md", "regions_025deg.json", "regions"),
    ("evidence/performance.md", "targets.json", "targets"),
]


@pytest.mark.parametrize(("page", "name", "table"), RENDERED)
def test_a_page_renders_its_table_from_a_results_file(page, name, table):
    """The page names the results file and its table, the file is committed, and its table
    builds from it."""
    import json

    text = (DOCS / page).read_text()
    assert f"{{results-table}} ../../benchmarks/results/{name}\n:table: {table}\n" in text
    record = json.loads((ROOT / "benchmarks/results" / name).read_text())
    assert _docs_extension("results").TABLES[table](record)[1]


def test_table_cells_render_code_and_bold():
    from docutils import nodes

    table_nodes = _docs_extension("table_nodes")
    out = table_nodes.inline("a **b** `c **d**` e")
    assert [type(n) for n in out] == [
        nodes.Text,
        nodes.strong,
        nodes.Text,
        nodes.literal,
        nodes.Text,
    ]
    assert [n.astext() for n in out] == ["a ", "b", " ", "c **d**", " e"]


def _docs_extension(name: str):
    """A module of docs/_ext, imported as docs/conf.py imports it (the directive's builders
    need no Sphinx build)."""
    import sys

    ext = str(ROOT / "docs/_ext")
    if ext not in sys.path:
        sys.path.insert(0, ext)
    return importlib.import_module(name)


def undocumented_config_keys() -> list[str]:
    """The job file's keys (``_SCHEMA``) without a description in ``DESCRIPTIONS``."""
    from dcfa.batch import config

    return [
        f"{section}.{key}"
        for section, keys in config._SCHEMA.items()
        for key in keys
        if not config.DESCRIPTIONS.get((section, key), "").strip()
    ]


def test_every_config_key_has_a_description():
    from dcfa.batch import config

    assert not undocumented_config_keys(), "add them to DESCRIPTIONS in dcfa/batch/config.py"
    stale = sorted(
        set(config.DESCRIPTIONS) - {(s, k) for s, ks in config._SCHEMA.items() for k in ks}
    )
    assert not stale, f"DESCRIPTIONS names keys that are not in _SCHEMA: {stale}"
    assert set(config.SECTION_DESCRIPTIONS) == set(config._SCHEMA)
    assert set(config.CHOICES) <= set(config.DESCRIPTIONS)


def test_a_config_key_added_without_a_description_is_found(monkeypatch):
    from dcfa.batch import config

    schema = {**config._SCHEMA, "input": {**config._SCHEMA["input"], "new_key": (int, 0)}}
    monkeypatch.setattr(config, "_SCHEMA", schema)
    assert undocumented_config_keys() == ["input.new_key"]
    with pytest.raises(KeyError, match="new_key"):
        _docs_extension("config_reference").reference()


def test_the_config_reference_lists_every_key_with_its_default():
    from dcfa.batch import config

    ref = _docs_extension("config_reference")
    sections = {section: rows for section, _, rows in ref.reference()}
    assert list(sections) == list(config._SCHEMA)
    for section, keys in config._SCHEMA.items():
        rows = {row[0]: row for row in sections[section]}
        assert list(rows) == [f"`{key}`" for key in keys]
        for key, (_, default) in keys.items():
            row = rows[f"`{key}`"]
            assert (row[2] == "required") == (default is ...), row
            assert row[3].startswith(config.DESCRIPTIONS[(section, key)])
    # the values a key takes are listed with it
    method = {row[0]: row for row in sections["method"]}["`name`"]
    assert all(f"`{name}`" in method[3] for name in config.METHODS)
    assert "`slurm`" in {row[0]: row for row in sections["cluster"]}["`kind`"][3]
    page = (DOCS / "user-guide/batch-jobs.md").read_text()
    assert "```{config-reference}" in page


def test_the_config_choices_are_what_the_check_accepts():
    """``CHOICES`` is data beside the check: every value it lists passes load_config, and a
    value it does not list is refused, naming the key."""
    from dcfa.batch import config

    def load(section: str, key: str, value: str):
        base = {  # a new one each time: load_config sets the overrides in it
            "input": {"store": "in.zarr", "variables": ["sst"]},
            "target": {"path": "target.csv"},
            "output": {"store": "out.zarr"},
        }
        return config.load_config(base=base, overrides=[f'{section}.{key}="{value}"'])

    for (section, key), choices in config.CHOICES.items():
        for value in choices:
            assert getattr(load(section, key, value), section)[key] == value
        with pytest.raises(config.ConfigError, match=rf"{section}\.{key}"):
            load(section, key, "not-a-choice")


def test_the_pages_hold_no_control_characters():
    """A backslash sequence written through a non-raw string (``"\\frac"``) leaves a control
    character in the page, which the site builds without a warning and MathJax then drops."""
    pages = [ROOT / "README.md", *DOCS.glob("*.md"), *DOCS.glob("*/*.md")]
    bad = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
    found = {
        f"{page.relative_to(ROOT)}:{n}": line
        for page in pages
        for n, line in enumerate(page.read_text().split("\n"), 1)
        if bad.search(line)
    }
    assert len(pages) > 20 and not found

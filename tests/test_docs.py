"""The documentation site (docs/): it builds with warnings as errors, every public name has an
API page, and no docstring cites a file that is not in the repository."""

from __future__ import annotations

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
    assert "deploy/example-job.toml" in cited  # the scan sees the citations there are
    missing = {
        path: where
        for path, where in cited.items()
        if path.startswith("..") or not (ROOT / path).exists()
    }
    assert not missing, f"cited but not in the repository: {missing}"


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


def test_the_panel_table_is_read_from_its_results_file():
    """The evidence page's panel table comes from benchmarks/results/panel.json: its cells are
    the file's draws summarised again here, independently, with NumPy."""
    import json

    import numpy as np

    results = _docs_extension("results")
    record = json.loads((ROOT / "benchmarks/results/panel.json").read_text())
    header, rows = results.panel_table(record)
    assert header[1:3] == ["RegionsCV()", "GenLinCFA(neighbors=1)"]
    cells = {row[0]: row[1:] for row in rows}
    for col, name in enumerate(header[1:3]):
        draws = [d for d in record["results"][name]["draws"] if d["kind"] == "regions"]
        pure = sum(d["pure"] == d["driving"] for d in draws)
        assert cells["regions: draws with all 4 driving regions pure"][col].startswith(
            f"{pure} of {len(draws)} "
        )
        ratio = np.array([d["r2"] / d["reference"] for d in draws])
        expect = f"{np.median(ratio):.3f} ({ratio.min():.3f})"
        assert cells["regions: R2 / oracle, median (worst)"][col] == expect
    page = (ROOT / "docs/evidence/panel.md").read_text()
    assert "{results-table} ../../benchmarks/results/panel.json" in page
    assert "1.006 (1.001)" not in page  # no number copied by hand next to the table


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

"""The README's runnable Python example runs as printed, in a fresh interpreter, and gives the
numbers the README quotes next to it (the demo's regions and the level of their pieces, and
the lead-3 skill row of the comparison table); its job file runs as printed with ``dcfa fit``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def _demo_regions(text: str) -> tuple[str, str]:
    """The demo's number of regions and the level of their pieces, as the README quotes."""
    found = re.search(
        r"demo: (\d+) regions \(RegionsCV: .*? pieces at correlation ([\d.]+)\)", text
    )
    return found.groups()


def test_the_enso_example_runs_as_printed_and_gives_the_quoted_numbers(tmp_path):
    text = README.read_text()
    block = next(b for b in python_blocks(text) if "write_enso_store" in b)
    n_regions, level = _demo_regions(text)
    # "RegionsCV() -> RidgeCV   +0.62 ± 0.24   10-17   +0.14 ± 0.17   4-7": lead 3
    quoted = re.search(
        r"RegionsCV\(\) -> RidgeCV +\S+ ± \S+ +\S+ +(\S+) ± (\S+) +(\S+)", text
    ).groups()
    script = tmp_path / "example.py"
    *lines, last = block.rstrip().splitlines()  # the last line shows the skill row
    lines += [f"print('ROW', {last})", "print('FIT', model.level_, model.n_features_out_)"]
    script.write_text("\n".join(lines) + "\n")
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    fit = next(line.split()[1:] for line in run.stdout.splitlines() if line.startswith("FIT"))
    assert float(fit[0]) == float(level) and int(fit[1]) == int(n_regions), (fit, level)
    row = next(line for line in run.stdout.splitlines() if line.startswith("ROW"))
    mean, sd, features = re.search(r"([+-]\d\.\d+) ± (\d\.\d+) +(\S+)", row).groups()
    assert (f"{float(mean):+.2f}", f"{float(sd):.2f}", features) == quoted, row
    # it wrote its store where it ran, and nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enso.zarr", "example.py"]


@pytest.mark.slow
def test_the_enso_job_file_runs_as_printed(tmp_path):
    """The README's job file, saved as printed, is a complete job for ``dcfa fit``: it gives
    the demo's regions and writes its result store next to it, nothing else."""
    text = README.read_text()
    toml = next(b for b in re.findall(r"```toml\n(.*?)```", text, flags=re.S) if "enso" in b)
    n_regions, _ = _demo_regions(text)
    (tmp_path / "job.toml").write_text(toml)
    subprocess.run(
        [sys.executable, "-c", "from dcfa.datasets import write_enso_store as w; w('enso.zarr')"],
        cwd=tmp_path,
        check=True,
    )
    run = subprocess.run(
        [sys.executable, "-m", "dcfa", "fit", "job.toml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(rf"\[5/5\] \S+: {n_regions} groups", run.stdout), run.stdout
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["enso-regions.zarr", "enso.zarr", "job.toml"], names


def test_every_relative_link_of_the_readme_leads_to_a_file():
    """The README is read on GitHub and PyPI, outside the docs' build, where nothing else
    checks its links to the repository's files."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link and not link.startswith("mailto:")]
    assert local, "the README links to its docs"
    missing = [link for link in local if not (README.parent / link).exists()]
    assert not missing, missing


def test_the_forecasting_pages_first_example_runs_on_the_enso_store(tmp_path):
    """Its lead left NaN in ``y`` where the index is missing, and ``forward_cv`` refused it
    ("y: 6 of 471 values are NaN"); the lines that leave them out were in the prose only."""
    page = Path(__file__).parents[1] / "docs" / "user-guide" / "forecasting.md"
    block = python_blocks(page.read_text())[0]
    *lines, last = block.rstrip().splitlines()
    prelude = [
        "import xarray as xr",
        "from dcfa.datasets import write_enso_store",
        "ds = xr.open_zarr(write_enso_store('enso.zarr'))",
        "sst, soi = ds.sst, ds.soi",
    ]
    script = tmp_path / "example.py"
    script.write_text("\n".join([*prelude, *lines, f"print('ROW', {last.split('#')[0]})"]))
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "lead 3: predictors 1991-07-16T12:00:00 .. 2021-09-16T12:00:00 -> targets" in run.stdout
    row = next(line for line in run.stdout.splitlines() if line.startswith("ROW"))
    assert re.search(r"Pipeline +[+-]\d\.\d+ ± \d\.\d+ +\d+-\d+ ", row), row

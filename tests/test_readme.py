"""The README's runnable Python example runs as printed, in a fresh interpreter, and gives the
numbers the README quotes next to it (the demo's chosen tolerance and regions, and the lead-3
skill row of the comparison table)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_enso_example_runs_as_printed_and_gives_the_quoted_numbers(tmp_path):
    text = README.read_text()
    block = next(b for b in python_blocks(text) if "write_enso_store" in b)
    n_regions, eps = re.search(r"demo: (\d+) regions \(GenLinCFACV: eps = ([\d.]+)", text).groups()
    # "GenLinCFA(neighbors=1) -> OLS   +0.67 ± 0.17   17-30   +0.21 ± 0.29   9-16": lead 3
    quoted = re.search(
        r"GenLinCFA\(neighbors=1\) -> OLS +\S+ ± \S+ +\S+ +(\S+) ± (\S+) +(\S+)", text
    ).groups()
    script = tmp_path / "example.py"
    *lines, last = block.rstrip().splitlines()  # the last line shows the skill row
    lines += [f"print('ROW', {last})", "print('FIT', model.eps_, model.n_features_out_)"]
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
    assert float(fit[0]) == float(eps) and int(fit[1]) == int(n_regions), (fit, eps, n_regions)
    row = next(line for line in run.stdout.splitlines() if line.startswith("ROW"))
    mean, sd, features = re.search(r"([+-]\d\.\d+) ± (\d\.\d+) +(\S+)", row).groups()
    assert (f"{float(mean):+.2f}", f"{float(sd):.2f}", features) == quoted, row
    # it wrote its store where it ran, and nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enso.zarr", "example.py"]

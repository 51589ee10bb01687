"""The results file a benchmark writes with ``--json PATH``: one record, the same for all.

    {"command": "python benchmarks/bench_x.py --json ...", "date": "2026-11-28",
     "machine": "AMD EPYC, 2 cores, 24 GiB, x86_64, Python 3.11.7", "dcfa": "0.1.0",
     "results": {...}}

``results`` holds the raw measured values (seconds, bytes, scores; never formatted text); the
docs render them through the ``results-table`` directive (docs/_ext/results.py), whose builder
for the benchmark formats them. Extra top-level fields (such as the panel's seed) come after
the command.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cores() -> int:
    """The cores this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def memory_bytes() -> int:
    """The machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        import psutil

        return psutil.virtual_memory().total


def machine() -> str:
    """``CPU model, N cores, M GiB, architecture, Python version``."""
    return (
        f"{cpu_model()}, {cores()} cores, {memory_bytes() / 2**30:.0f} GiB, "
        f"{platform.machine()}, Python {platform.python_version()}"
    )


def command(script: str, argv: list[str] | None = None) -> str:
    """The command line that ran ``script``, as ``python benchmarks/<name>.py ARGS``."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *map(str, args)])


def _plain(value):
    """NumPy scalars and arrays as JSON numbers and lists."""
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def write_results(
    path: str | Path, results: dict, argv: list[str] | None = None, *, script: str, **fields
) -> dict:
    """Write the record of this run to ``path`` (JSON) and return it.

    ``results``: the benchmark's raw measurements; ``argv``: its arguments (``sys.argv[1:]``
    when None); ``script``: its file (``__file__``); ``fields``: more top-level fields.
    """
    import dcfa

    record = {
        "command": command(script, argv),
        **fields,
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "dcfa": dcfa.__version__,
        "results": results,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=_plain) + "\n")
    print(f"\nwritten: {path}")
    return record

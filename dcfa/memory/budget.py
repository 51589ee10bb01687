"""The memory budget of a dense pass: the Dask config key ``dcfa.memory_budget``, resolved.

:func:`memory_budget` turns the key (a fraction or a size) into bytes for this process (the
machine's available memory, capped by a cgroup or rlimit) and, with a ``distributed.Client``,
for each worker (from its ``memory_limit``). Importing this module registers the key's default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import TYPE_CHECKING

import dask.config
from dask.utils import format_bytes, parse_bytes

from dcfa._compute import scheduler_workers

if TYPE_CHECKING:  # a hint only: ``import dcfa`` imports this module, not distributed
    import distributed

__all__ = ["CONFIG_KEY", "DEFAULT_BUDGET", "Budget", "memory_budget"]

#: The Dask config key of the memory budget (``dask.config.set({CONFIG_KEY: "64GiB"})``, or the
#: environment variable ``DASK_DCFA__MEMORY_BUDGET``).
CONFIG_KEY = "dcfa.memory_budget"
#: The key's default: half of the memory available to the driver and to each worker.
DEFAULT_BUDGET = 0.5

dask.config.update_defaults({"dcfa": {"memory_budget": DEFAULT_BUDGET}})


@dataclass(frozen=True)
class Budget:
    """The memory a dense pass may use, where it comes from.

    Attributes
    ----------
    driver : int
        Bytes for this process.
    source : str
        How ``driver`` was obtained, for messages.
    workers : dict of str to (int, int, int)
        With an active ``distributed.Client``: per worker address, its budget in bytes, its
        ``nthreads`` and its ``memory_limit`` (workers without a limit are left out).
    """

    driver: int
    source: str
    workers: dict = field(default_factory=dict)


def _budget_setting() -> tuple[float | None, int | None]:
    """``(fraction, None)`` or ``(None, bytes)`` from the config key."""
    value = dask.config.get(CONFIG_KEY, DEFAULT_BUDGET)
    bad = ValueError(
        f"{CONFIG_KEY}: expected a fraction in (0, 1], a number of bytes or a size such as "
        f"'64GiB', got {value!r}"
    )
    if isinstance(value, bool) or value is None:
        raise bad
    if isinstance(value, str):
        if not value.strip():  # dask reads "" as 1 byte: an unset variable, not a budget
            raise bad
        try:
            value = float(value) if _is_fraction(value) else parse_bytes(value)
        except (ValueError, TypeError, OverflowError):
            raise bad from None
    if isinstance(value, Integral):  # NumPy's integers too
        value = int(value)
    if not isinstance(value, Real) or not value > 0 or not math.isfinite(value):
        raise bad
    if not isinstance(value, int) and value <= 1:
        return float(value), None
    return None, int(value)


def _is_fraction(text: str) -> bool:
    try:
        return float(text) <= 1
    except ValueError:
        return False


def _driver_available() -> tuple[int, str]:
    """Bytes this process can still allocate, and a description of where that comes from."""
    import psutil

    vm = psutil.virtual_memory()
    available, where = int(vm.available), "available on this machine"
    try:
        from distributed.system import MEMORY_LIMIT
    except ImportError:  # pragma: no cover - distributed is a dependency
        return available, where
    if MEMORY_LIMIT < vm.total:  # a cgroup (container, batch job) or an rlimit caps us
        # the cgroup's usage counts against its own limit only: when the binding limit is an
        # rlimit (SLURM's --mem without a job cgroup) this process's resident memory does
        limit = _cgroup_limit()
        used = _cgroup_usage() if limit is not None and limit <= MEMORY_LIMIT else None
        if used is None:
            used = psutil.Process().memory_info().rss
        capped = max(int(MEMORY_LIMIT) - int(used), 0)
        if capped < available:
            available = capped
            where = f"left of this process's {format_bytes(MEMORY_LIMIT)} limit (cgroup/rlimit)"
    return available, where


def _cgroup_limit() -> int | None:
    """The cgroup's memory limit (v2 ``memory.max`` or v1 ``limit_in_bytes``), if any."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        return None if text == "max" else int(text)
    return None


def _cgroup_usage() -> int | None:
    """Memory the cgroup uses, without reclaimable page cache; None when not readable."""
    for current, stat, cache_key in (
        ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"),
        (
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
            "/sys/fs/cgroup/memory/memory.stat",
            "total_inactive_file",
        ),
    ):
        try:
            with open(current) as f:
                used = int(f.read())
        except (OSError, ValueError):
            continue
        try:
            with open(stat) as f:
                for line in f:
                    key, _, val = line.partition(" ")
                    if key == cache_key:
                        used -= int(val)
                        break
        except (OSError, ValueError):
            pass
        return max(used, 0)
    return None


def memory_budget(client: distributed.Client | None = None) -> Budget:
    """Resolve ``dcfa.memory_budget`` for this process and, with a client, its workers.

    Parameters
    ----------
    client : distributed.Client, default=None
        Whose workers to budget; default: the client dcfa computes on (the default client,
        when it is the active scheduler), none otherwise.

    Returns
    -------
    Budget
    """
    fraction, absolute = _budget_setting()
    if absolute is not None:
        driver, source = absolute, f"{CONFIG_KEY} = {format_bytes(absolute)}"
    else:
        available, where = _driver_available()
        driver = int(fraction * available)
        source = f"{CONFIG_KEY} = {fraction:g} x {format_bytes(available)} {where}"
    if client is None:
        from dcfa._compute import active_client

        client = active_client()
    workers = {}
    if client is not None:
        for addr, info in scheduler_workers(client).items():
            limit = int(info.get("memory_limit") or 0)
            if limit <= 0:
                continue
            budget = int(fraction * limit) if absolute is None else min(absolute, limit)
            workers[addr] = (budget, int(info.get("nthreads") or 1), limit)
    return Budget(driver=driver, source=source, workers=workers)

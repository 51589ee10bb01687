"""Public names imported on first use (PEP 562 module ``__getattr__``).

A Dask worker that unpickles a kernel imports the kernel's module, and with it every parent
package: ``dcfa`` and ``dcfa.gbmap`` therefore import their public names (estimators that
pull in scikit-learn, xarray, pandas) only when they are first used.
"""

from __future__ import annotations

import importlib
import sys


def lazy_attributes(
    package: str, exports: dict[str, str], names: list[str], submodules: frozenset = frozenset()
):
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a name to its module;
    ``submodules`` are reached as attributes too (``dcfa.gbmap.drift_experiment`` after a
    plain ``import dcfa``), imported on that first access."""

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            setattr(sys.modules[package], name, value)  # later lookups skip this function
            return value
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")  # sets the attribute
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*names, *submodules})

    return __getattr__, __dir__

"""The CFA estimators by the name a job file gives them (``[method] name``): one registry,
read by the config check and the job. A new method is its estimator and one entry here."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

__all__ = ["METHODS"]


class _Registry(Mapping[str, type]):
    """Names to estimator classes, each class imported when first looked up: checking a job
    file's names then costs no import of scikit-learn or Dask, so a bad file fails at once."""

    def __init__(self, paths: dict[str, str]):
        self._paths = paths

    def __getitem__(self, name: str) -> type:
        module, _, attr = self._paths[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def __contains__(self, name: object) -> bool:
        return name in self._paths  # Mapping's would look the class up, importing it

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


METHODS: Mapping[str, type] = _Registry(
    {
        "regionscv": "dcfa.cfa.regions:RegionsCV",
        "lincfa": "dcfa.cfa.lincfa:LinCFA",
        "nonlincfa": "dcfa.cfa.nonlincfa:NonLinCFA",
        "genlincfa": "dcfa.cfa.genlincfa:GenLinCFA",
        "genlincfacv": "dcfa.cfa.tolerance:GenLinCFACV",
        "nonlincfacv": "dcfa.cfa.tolerance:NonLinCFACV",
    }
)

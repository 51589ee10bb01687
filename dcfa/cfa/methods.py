"""The CFA estimators by the name a job file gives them (``[method] name``): one registry,
read by the config check and the job. A new method is its estimator and one entry here."""

from __future__ import annotations

from dcfa.cfa.genlincfa import GenLinCFA
from dcfa.cfa.lincfa import LinCFA
from dcfa.cfa.nonlincfa import NonLinCFA
from dcfa.cfa.regions import RegionsCV
from dcfa.cfa.tolerance import GenLinCFACV, NonLinCFACV

__all__ = ["METHODS"]

METHODS: dict[str, type] = {
    "regionscv": RegionsCV,
    "lincfa": LinCFA,
    "nonlincfa": NonLinCFA,
    "genlincfa": GenLinCFA,
    "genlincfacv": GenLinCFACV,
    "nonlincfacv": NonLinCFACV,
}

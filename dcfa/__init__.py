"""dcfa: supervised, interpretable dimensionality reduction for data larger than memory.

Feature aggregation with a theory-driven test (LinCFA, NonLinCFA, GenLinCFA) and gradient
boosting mapping (GBMAP), computed from one pass of blockwise moments on Dask.
"""

from importlib.metadata import PackageNotFoundError, version

from dcfa._genlincfa import GenLinCFA, genlincfa
from dcfa._lincfa import LinCFA, lincfa
from dcfa._moments import Moments, moments
from dcfa._nonlincfa import NonLinCFA, nonlincfa

try:
    __version__ = version("dcfa")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = [
    "GenLinCFA",
    "LinCFA",
    "Moments",
    "NonLinCFA",
    "genlincfa",
    "lincfa",
    "moments",
    "nonlincfa",
    "__version__",
]

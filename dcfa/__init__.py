"""dcfa: supervised, interpretable dimensionality reduction for data larger than memory.

Feature aggregation with a theory-driven test (LinCFA, NonLinCFA, GenLinCFA) and gradient
boosting mapping (GBMAP), computed from one pass of blockwise moments on Dask.
"""

from importlib.metadata import PackageNotFoundError, version

from dcfa._lincfa import LinCFA, lincfa
from dcfa._moments import Moments, moments

try:
    __version__ = version("dcfa")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["LinCFA", "Moments", "lincfa", "moments", "__version__"]

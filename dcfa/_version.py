"""The installed dcfa's version, which every store dcfa writes records and a job's identity
holds (passes of another version are not reused). A leaf module: the parts that record it
import it from here, not from the package, which imports them."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dcfa")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

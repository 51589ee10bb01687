"""The kinds of moments value dcfa gathers, by the name recorded in their stores."""

from __future__ import annotations

import os
from pathlib import Path

from dcfa._errors import InputError
from dcfa.stats.columns import ColumnMoments
from dcfa.stats.grid import GridMoments
from dcfa.stats.moments import Moments

KINDS = {"Moments": Moments, "GridMoments": GridMoments, "ColumnMoments": ColumnMoments}


def load_moments(path: str | os.PathLike):
    """Read any moments dcfa saves: :class:`Moments`, grid (``mode="grid"``) or column moments
    (``mode="rows"``), by the kind recorded in the store."""
    import zarr

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path: no moments store at {str(path)!r}")
    try:
        kind = zarr.open_group(str(path), mode="r").attrs.get("dcfa_kind")
    except zarr.errors.NodeNotFoundError:  # a file, an empty directory, a Zarr array
        kind = None
    if kind not in KINDS:
        raise InputError(f"path: {str(path)!r} is not a dcfa moments store")
    return KINDS[kind].load(path)

"""Where an archive's files are, from its path alone (no xarray: the batch job checks its
output against them before it imports the readers): what kind of archive a path names, the
files a netCDF glob or a kerchunk reference reads, and whether it exists."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dcfa._errors import InputNotFoundError

__all__ = [
    "archive_kind",
    "archive_name",
    "exists",
    "existing",
    "is_netcdf",
    "location",
    "netcdf_files",
    "referenced_files",
    "references",
    "source_files",
]


def location(path) -> Path | str:
    """A local path as a Path, a URL (``s3://...``) as it is."""
    from dcfa.storage.objectstore import is_url

    return os.fspath(path) if is_url(path) else Path(path)


def exists(path: Path | str, storage_options: dict | None) -> bool:
    from dcfa.storage.objectstore import exists

    if isinstance(path, str):
        return exists(path, storage_options)
    return bool(netcdf_files(path)) if is_netcdf(path) else path.exists()


def existing(path, key: str, storage_options: dict | None, what: str | None = None) -> Path | str:
    """``path``'s :func:`location`, or :class:`dcfa.InputNotFoundError` naming ``key`` when
    nothing is there: "``key``: no ``what`` at ..." (``what``: the :func:`archive_name` of
    the path by default)."""
    loc = location(path)
    if not exists(loc, storage_options):
        raise InputNotFoundError(f"{key}: no {what or archive_name(loc)} at {str(loc)!r}")
    return loc


# an archive of netCDF files: one file, or a glob of them (one per year, as most are stored)
_NETCDF_SUFFIXES = (".nc", ".nc4", ".cdf", ".netcdf")


def archive_kind(path: Path | str) -> str:
    """What holds an archive: ``"netcdf"`` (a ``.nc`` file or a glob), ``"kerchunk"`` (a
    kerchunk reference file, ``.json``: Zarr metadata and byte ranges of other files),
    ``"icechunk"`` (a local icechunk repository: ``refs/`` and ``snapshots/``), else
    ``"zarr"`` (a directory, or a URL on object storage)."""
    if isinstance(path, str):  # a URL: Zarr on object storage
        return "zarr"
    name = os.fspath(path)
    if name.lower().endswith(_NETCDF_SUFFIXES) or any(c in name for c in "*?["):
        return "netcdf"
    if name.lower().endswith(".json"):
        return "kerchunk"
    if (path / "refs").is_dir() and (path / "snapshots").is_dir():
        return "icechunk"
    return "zarr"


_KIND_NAMES = {
    "netcdf": "netCDF file",
    "kerchunk": "kerchunk reference file",
    "icechunk": "icechunk repository",
    "zarr": "Zarr store",
}


def is_netcdf(path: Path | str) -> bool:
    """Whether a local ``path`` names netCDF files: a ``.nc`` file, or a glob (``sst/*.nc``)."""
    return archive_kind(path) == "netcdf"


def netcdf_files(path: Path) -> list[Path]:
    """The files a netCDF path names, sorted (a glob's matches; none when nothing matches)."""
    import glob

    name = os.fspath(path)
    if not any(c in name for c in "*?["):
        return [path] if path.is_file() else []
    return [Path(f) for f in sorted(glob.glob(name)) if Path(f).is_file()]


def source_files(path: Path | str) -> list[Path]:
    """The local files an archive reads besides its own path: a netCDF glob's matches, and the
    files a kerchunk reference points into (they are inputs too: never written next to, and
    part of the input's identity). Empty for a Zarr store or an icechunk repository."""
    kind = archive_kind(path)
    if kind == "netcdf" and not Path(path).is_file():
        return netcdf_files(Path(path))
    if kind != "kerchunk":
        return []
    try:
        return referenced_files(references(Path(path)), Path(path))
    except (OSError, ValueError):
        return []  # opening it names the problem


def references(path: Path) -> dict:
    """A kerchunk reference file's ``refs`` (key to inline data or ``[url, offset, size]``);
    a ValueError when it is not one."""
    refs = json.loads(path.read_text())
    if not isinstance(refs, dict) or not isinstance(refs.get("refs", refs), dict):
        raise ValueError("no refs")
    return refs.get("refs", refs)


def referenced_files(refs: dict, path: Path) -> list[Path]:
    """The local files ``refs`` point into (remote ones are read, not guarded), relative
    ones from the reference file's directory."""
    files = set()
    for ref in refs.values():
        if isinstance(ref, list) and ref and isinstance(ref[0], str):
            url = ref[0].removeprefix("file://")
            if "://" not in url:
                files.add(Path(url) if os.path.isabs(url) else path.parent / url)
    return sorted(files)


def archive_name(path) -> str:
    """What holds an archive, in words: "netCDF file", "Zarr store"..."""
    return _KIND_NAMES[archive_kind(path)]

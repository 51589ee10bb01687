"""Where a job or ``dcfa apply`` writes, checked before anything is read: the output apart
from every input, replaceable only when it is an earlier output of the same command and
overwrite says so, and writable; a job's work directory too; and what a write that ran out
of room says.

Nothing here imports xarray or the estimators, so ``dcfa fit`` and ``dcfa apply`` refuse a
bad output path before they load them.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from dcfa.batch.config import ConfigError, JobConfig, for_target, target_leads, target_names
from dcfa.io.sources import existing, exists, location, source_files
from dcfa.storage.objectstore import check_protocol
from dcfa.storage.store import (
    FULL_DISK,
    OutputError,
    check_apart,
    check_replaceable,
    check_writable,
    dcfa_kind,
    relation,
)

__all__ = [
    "APPLIED",
    "CLI_NAMES",
    "NO_ROOM",
    "PYTHON_NAMES",
    "Destinations",
    "check_applied_output",
    "check_output",
    "destinations",
    "no_room",
    "work_dir",
]

APPLIED = "region series"  # the dcfa_kind of the stores dcfa apply writes

# how apply's errors name its arguments: the Python API's parameters, or the command line's
PYTHON_NAMES = {
    "result": "result",
    "archive": "archive",
    "output": "output",
    "time": "time",
    "overwrite": "pass overwrite=True",
}
CLI_NAMES = {
    "result": "RESULT",
    "archive": "ARCHIVE",
    "output": "--output",
    "time": "--time",
    "overwrite": "pass --overwrite",
}


# no room to write: a full disk or quota, or a file system turned read-only
NO_ROOM = FULL_DISK | {errno.EROFS}


def no_room(exc: OSError, out: Path | str, work: Path, kept: bool) -> str:
    """The message of a write that failed for want of room (a full disk, a quota, a file
    system turned read-only): where, and what a rerun can reuse."""
    return (
        f"output.store: {exc.strerror or os.strerror(exc.errno)} while writing "
        f"{str(out)!r} or its work directory {str(work)!r}; "
        + (
            f"the finished passes are kept in {str(work)!r}: make room, then rerun with --resume"
            if kept
            else "nothing was kept"
        )
    )


def work_dir(out: Path | str, given: str | None) -> Path:
    """Where the finished passes are kept: ``output.work_dir``, else ``<output>.work`` next to
    a local output, else (an output on object storage) ``<name>-<hash>.work`` in the working
    directory: resume state stays local, where renames are atomic."""
    if given:
        return Path(os.path.abspath(given))
    if isinstance(out, Path):
        return out.with_name(out.name + ".work")
    tag = hashlib.sha256(out.encode()).hexdigest()[:8]
    return Path.cwd() / f"{out.rstrip('/').rsplit('/', 1)[-1]}-{tag}.work"


# file formats a user may name an output after, expecting that format: every output is a
# Zarr store, a directory (or a prefix on object storage), whatever its name
_FILE_FORMATS = {
    ".csv": "a CSV file",
    ".tsv": "a tab-separated file",
    ".txt": "a text file",
    ".nc": "a netCDF file",
    ".nc4": "a netCDF file",
    ".json": "a JSON file",
    ".parquet": "a Parquet file",
    ".xlsx": "a spreadsheet",
    ".h5": "an HDF5 file",
}


def _check_store_name(out: Path | str, key: str, recipe: str) -> None:
    """Refuse an output named as a file of another format (``forecast.csv``): it would be a
    Zarr directory under that name. ``recipe`` says how to get that format from the store."""
    name = os.fspath(out).rstrip("/")
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _FILE_FORMATS:
        store = name[: -len(suffix)] + ".zarr"
        raise OutputError(
            f"{key}: {name!r} names {_FILE_FORMATS[suffix]}, but the output is a Zarr store (a "
            f"directory); name it e.g. {store!r}. {recipe.format(store=store)}"
        )


def check_output(out: Path | str, work: Path, config: JobConfig) -> None:
    """Before anything is read: the output and its work directory are apart from every input
    and from each other, replaceable (only an earlier dcfa result, with overwrite) and
    writable."""
    inputs = {
        "input.store": config.input["store"],
        "target.path": config.target["path"],
    }
    store = location(config.input["store"])
    if isinstance(store, Path):  # a glob's files, those a kerchunk reference points into
        inputs.update((f"input.store ({f.name})", f) for f in source_files(store))
    if config.source != "<config>":
        inputs["the job file"] = config.source
    given = bool(config.output["work_dir"])
    check_apart(out, inputs, "output.store")
    check_apart(work, inputs, "output.work_dir" if given else "output.store")
    if isinstance(out, Path):
        rel = relation(work, out)
        if rel:
            raise ConfigError(
                f"output.work_dir: {str(work)!r} {rel} output.store {str(out)!r}; the work "
                "directory and the result store must lie apart (choose another output.work_dir, "
                "or leave it unset for <output.store>.work)"
            )
    if given:
        check_writable(work, "output.work_dir")
    so = config.output["storage_options"]
    check_replaceable(
        out,
        overwrite=config.output["overwrite"],
        key="output.store",
        kinds=("result",),
        storage_options=so,
    )
    _check_store_name(
        config.output["store"],
        "output.store",
        "Its region series as CSV: xarray.open_zarr({store!r}).features.to_pandas().to_csv(...)",
    )
    check_writable(out, "output.store", so)


@dataclass(frozen=True)
class Destinations:
    """A job's targets and where each writes, checked.

    Attributes
    ----------
    configs : list of JobConfig
        One per target (``target.variable`` may name several), in the job's order.
    outs : list of Path or str
        Their result stores: an absolute local path, or a URL.
    written : set
        The results that ``--resume`` of several targets skips: written before the job
        stopped (checked against the job's identity once the target is read).
    """

    configs: list[JobConfig]
    outs: list[Path | str]
    written: set


def destinations(config: JobConfig, *, output=None, resume: bool = False) -> Destinations:
    """Every target's output checked (:func:`check_output`) before anything is read.

    ``output`` replaces ``output.store`` (``dcfa fit --output``). A result store that exists
    is refused, unless ``resume`` continues a job of several targets that wrote it.
    """
    if output is not None:
        config = replace(config, output={**config.output, "store": os.fspath(output)})
    configs = [
        for_target(config, name, lead)
        for name in target_names(config)
        for lead in target_leads(config)
    ]
    several = len(configs) > 1
    outs, written = [], set()
    for job in configs:
        out = location(job.output["store"])
        out = out if isinstance(out, str) else Path(os.path.abspath(out))
        try:
            check_output(out, work_dir(out, job.output["work_dir"]), job)
        except OutputError:
            so = job.output["storage_options"]
            if not (resume and several and dcfa_kind(out, so) == "result"):
                raise
            written.add(out)
        outs.append(out)
    return Destinations(configs, outs, written)


def check_applied_output(
    result,
    archive,
    output,
    *,
    overwrite: bool,
    names: dict,
    storage_options: dict | None,
    loaded: bool = False,
) -> Path | str:
    """``dcfa apply``'s paths before anything is read: known URL protocols (but ``result``'s
    when it is ``loaded`` already), the output apart from the result and the archive, a new
    path or, with ``overwrite``, an earlier output of apply (never a result, never a store
    or file that dcfa did not write, never through a symbolic link), and writable; then the
    result and the archive there (:class:`dcfa.InputNotFoundError`). Returns the output's
    location (an absolute local path, or the URL)."""
    so = storage_options or None
    for key, where in (("result", result), ("archive", archive), ("output", output)):
        if not (key == "result" and loaded):
            check_protocol(where, names[key])
    out = location(output)
    inputs = {names["result"]: os.fspath(result), names["archive"]: os.fspath(archive)}
    check_apart(output, inputs, names["output"])
    _check_replaceable(out, overwrite, names, so)  # named as given
    _check_store_name(
        output,
        names["output"],
        "Its forecast as CSV: xarray.open_zarr({store!r}).forecast.to_pandas().to_csv(...)",
    )
    out = out if isinstance(out, str) else Path(os.path.abspath(out))
    check_writable(out, names["output"], so)
    if not loaded:
        existing(result, names["result"], so, "Zarr store")
    existing(archive, names["archive"], so)
    return out


def _check_replaceable(out, overwrite: bool, names: dict, so) -> None:
    """A new path, or with ``overwrite`` an earlier output of apply (never a result, never a
    store or file that dcfa did not write, never through a symbolic link)."""
    key = names["output"]
    link = isinstance(out, Path) and out.is_symlink()
    there = exists(out, so) if isinstance(out, str) else out.exists()
    if there and not link:  # what overwrite cannot replace is said first
        kind = dcfa_kind(out, so)
        if kind not in (None, APPLIED, "incomplete"):
            raise OutputError(
                f"{key}: {str(out)!r} is a dcfa {kind} store, not an output of apply; "
                "overwrite replaces only those. Choose another path"
            )
        if kind is not None and not overwrite:
            raise OutputError(
                f"{key}: {str(out)!r} exists (an earlier output of apply); "
                f"{names['overwrite']} to replace it, or choose another"
            )
    # a store or file dcfa did not write: named as such, with or without overwrite
    check_replaceable(out, overwrite=overwrite, key=key, kinds=(APPLIED,), storage_options=so)

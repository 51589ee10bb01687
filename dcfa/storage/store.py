"""Where dcfa writes, and what it may replace.

Every store dcfa writes (a result, moments, a work file, a synthetic archive) goes through
:func:`atomic_store`: a hidden temporary directory ``.<name>.tmp-<id>`` next to the
destination, with a marker file ``.<name>.tmp-<id>.incomplete`` beside it written before the
directory exists and removed after the directory is renamed into place. A store is complete
exactly when no marker names it. The rules
that keep users' data safe live here, in one place:

- a path that exists is replaced only with ``overwrite`` *and* only when it is a store dcfa
  wrote itself (:func:`dcfa_kind`: its attributes say so, or it carries the incomplete marker);
  never a directory or file of the user's, never through a symbolic link;
- an output must not be, contain or lie inside any input (:func:`check_apart`);
- temporary stores of killed runs (marked, their process gone) are removed by the next write
  to the same destination, and :func:`incomplete_reason` tells readers what they are.

Every function takes local paths and fsspec URLs (``s3://...``, with ``storage_options``);
object stores cannot rename, so there the rule is the final marker of
:mod:`dcfa.storage.objectstore` (the root metadata, written last).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from dcfa._errors import InputError
from dcfa.storage import objectstore
from dcfa.storage.markers import is_marker, is_stale, marker_payload
from dcfa.storage.objectstore import INCOMPLETE, is_url

__all__ = [
    "INCOMPLETE",
    "OutputError",
    "atomic_store",
    "check_apart",
    "check_replaceable",
    "dcfa_kind",
    "incomplete_reason",
    "relation",
    "remove_leftovers",
    "tree_digest",
]


class OutputError(FileExistsError, InputError):
    """An output path dcfa refuses to write (the message names the key and the path)."""


def dcfa_kind(path: str | os.PathLike, storage_options: dict | None = None) -> str | None:
    """What dcfa store ``path`` is (``"result"``, ``"Moments"``, ...), or None if it is not one.

    Read from the store's root attributes (Zarr format 3 ``zarr.json`` or format 2
    ``.zattrs``) without opening it with Zarr, so any directory can be asked. A store that
    still carries the incomplete marker is dcfa's too (``"incomplete"``).
    """
    if is_url(path):
        attrs = objectstore.root_attrs(path, storage_options) or {}
        return _kind_of(attrs)
    p = Path(path)
    if p.is_symlink() or not p.is_dir():
        return None
    if _is_temporary(p):
        return "incomplete"
    return _kind_of(objectstore.root_attributes(lambda name: (p / name).read_bytes()) or {})


def _kind_of(attrs: dict) -> str | None:
    if "dcfa_kind" in attrs:
        return str(attrs["dcfa_kind"])
    if "dcfa_version" in attrs and "method" in attrs:  # results of dcfa 0.1
        return "result"
    return None


def incomplete_reason(path: str | os.PathLike, storage_options: dict | None = None) -> str | None:
    """Why ``path`` is not a complete store (a temporary store of a dcfa write), or None."""
    if is_url(path):
        return objectstore.incomplete_reason(os.fspath(path), storage_options)
    p = Path(path)
    if _is_temporary(p):
        who = _marker(p)
        return (
            f"{str(p)!r} is an incomplete store: a dcfa write that did not finish "
            f"(process {who.get('pid', '?')} on {who.get('host', '?')}, started "
            f"{who.get('started', '?')}); it is safe to delete"
        )
    return None


def _is_temporary(p: Path) -> bool:
    """Whether ``p`` is the temporary store of a dcfa write: named ``.<name>.tmp-<id>``, with
    the marker dcfa writes beside it. Anything else beside a ``.incomplete`` file is not
    dcfa's: a user's ``analysis/`` next to their own ``analysis.incomplete`` is never taken."""
    if not (p.name.startswith(".") and ".tmp-" in p.name and _marker_of(p).is_file()):
        return False
    return is_marker(_marker(p))


def _marker_of(tmp: Path) -> Path:
    return tmp.with_name(tmp.name + INCOMPLETE)


def _marker(p: Path) -> dict:
    try:
        who = json.loads(_marker_of(p).read_text())
    except (OSError, ValueError):
        return {}
    return who if isinstance(who, dict) else {}


def check_replaceable(
    path: str | os.PathLike,
    *,
    overwrite: bool,
    key: str = "path",
    kinds: tuple = (),
    storage_options: dict | None = None,
) -> None:
    """Raise :class:`OutputError` unless dcfa may write a store at ``path``.

    A new path is fine. An existing one needs ``overwrite`` and must be a store dcfa wrote
    (of one of ``kinds``, when given); symbolic links are never written through.
    """
    if is_url(path):
        if not objectstore.exists(os.fspath(path), storage_options):
            return
        _check_existing(path, overwrite, key, kinds, dcfa_kind(path, storage_options), "a store")
        return
    p = Path(path)
    if p.is_symlink():
        raise OutputError(
            f"{key}: {str(p)!r} is a symbolic link; dcfa does not write through links "
            "(choose the real path or another one)"
        )
    if not p.exists():
        return
    what = "a file" if not p.is_dir() else "a directory"
    _check_existing(p, overwrite, key, kinds, dcfa_kind(p), what)


def _check_existing(p, overwrite: bool, key: str, kinds: tuple, kind, what: str) -> None:
    # what cannot be replaced is said first, whatever overwrite says: its hint would lead
    # nowhere
    if kind is None or (kinds and kind not in (*kinds, "incomplete")):
        wanted = " or ".join(kinds) if kinds else "dcfa"
        if kind is None:
            what = f"{what} that dcfa did not write (not a {wanted} store)"
        else:  # ours, of another kind: a fit's result is not replaced by apply's, ...
            what = f"a dcfa {kind} store, not a {wanted} store"
        raise OutputError(
            f"{key}: {str(p)!r} exists and is {what}; overwrite only replaces dcfa's own "
            "results of that kind. Choose another path, or remove it yourself if it is yours "
            "to delete"
        )
    if not overwrite:
        how = (
            "set output.overwrite = true (dcfa fit --overwrite)"
            if key == "output.store"
            else "pass overwrite=True"
        )
        raise OutputError(
            f"{key}: {str(p)!r} exists (an earlier dcfa {kind} store); {how} to replace it, "
            "or choose another"
        )


def check_apart(output: str | os.PathLike, inputs: dict[str, str | os.PathLike], key: str):
    """Raise :class:`OutputError` if ``output`` is, contains or lies inside any input.

    ``inputs`` maps each input's config key to its path; paths are compared as
    :func:`relation` compares them.
    """
    for name, value in inputs.items():
        rel = relation(output, value)
        if rel:
            raise OutputError(
                f"{key}: {str(output)!r} {rel} {name} {str(value)!r}; dcfa never writes over, "
                "into or around its inputs: choose an output path elsewhere"
            )


def relation(path: str | os.PathLike, other: str | os.PathLike) -> str | None:
    """How ``path`` stands to ``other``: ``"is"``, ``"lies inside"``, ``"contains"``, or
    None when they are apart. Symbolic links are resolved, so a link cannot hide a path; URLs
    are compared as URLs (protocol and key)."""
    a, b = _real(path), _real(other)
    if a == b:
        return "is"
    if b in a.parents:
        return "lies inside"
    if a in b.parents:
        return "contains"
    return None


def _real(path) -> Path | PurePosixPath:
    s = os.fspath(path)
    if is_url(s):  # compared as URLs: protocol and key, as POSIX paths
        return PurePosixPath("/" + s.replace("://", "/", 1).rstrip("/"))
    return Path(os.path.realpath(os.path.abspath(s)))


# a full disk or quota: a fault of the machine at this moment, not a path to change
FULL_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _cannot_write(key: str, parent, exc: OSError) -> OutputError:
    if isinstance(exc, FileNotFoundError):
        return OutputError(f"{key}: the directory {str(parent)!r} does not exist; create it first")
    return OutputError(f"{key}: cannot write in {str(parent)!r}: {exc.strerror or exc}")


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove temporary stores of ``path`` left by killed writes; return what was removed.

    Only hidden ``.<name>.tmp-*`` directories whose marker names a process of this machine
    that no longer runs are removed (with their marker): nothing the user made, nothing a
    running write still uses.
    """
    p = Path(path)
    removed = []
    for marker in p.parent.glob(f".{p.name}.tmp-*{INCOMPLETE}"):
        tmp = marker.with_name(marker.name[: -len(INCOMPLETE)])
        if not is_stale(_marker(tmp)):
            continue
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
        if not tmp.exists():
            marker.unlink(missing_ok=True)
    return removed


@contextlib.contextmanager
def atomic_store(
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    key: str = "path",
    kinds: tuple = (),
    storage_options: dict | None = None,
) -> Iterator[Path | str]:
    """Yield a temporary directory to write a store into; rename it to ``path`` on success.

    The destination is checked first (:func:`check_replaceable`) and again just before the
    rename. The marker beside the temporary directory is written before it and removed after
    the rename, so a store no marker names is complete. On any error the
    temporary directory is removed and ``path`` is left as it was. On object storage (a URL)
    the temporary store is a prefix, published by :func:`dcfa.storage.objectstore.staged`.
    """
    if is_url(path):
        check_replaceable(
            path, overwrite=overwrite, key=key, kinds=kinds, storage_options=storage_options
        )
        objectstore.remove_leftovers(os.fspath(path), storage_options)
        with objectstore.staged(os.fspath(path), storage_options) as tmp:
            yield tmp
        return
    path = Path(path)
    check_replaceable(path, overwrite=overwrite, key=key, kinds=kinds)
    remove_leftovers(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    marker = _marker_of(tmp)
    try:
        marker.write_bytes(marker_payload(path))
    except OSError as exc:
        with contextlib.suppress(OSError):  # created, then its bytes found no room
            marker.unlink(missing_ok=True)
        if exc.errno in FULL_DISK:  # the machine's fault, not the path's: exit 1, passes kept
            raise
        raise _cannot_write(key, path.parent, exc) from None
    try:
        tmp.mkdir()
        yield tmp
        check_replaceable(path, overwrite=overwrite, key=key, kinds=kinds)
        _replace_dir(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator:
    """Write one local file atomically: yields a binary file handle on a temporary file in
    the same directory, flushed to disk and moved over ``path`` on success; on any error the
    temporary file is removed and ``path`` is left as it was."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _replace_dir(src: Path, dst: Path) -> None:
    if dst.exists():
        trash = dst.with_name(f".{dst.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(dst, trash)
        os.replace(src, dst)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(src, dst)


def check_writable(path: str | os.PathLike, key: str, storage_options: dict | None = None):
    """Raise :class:`OutputError` unless a store can be created next to ``path`` (a real
    probe, so it holds for root, ACLs, read-only mounts and bucket policies alike)."""
    if is_url(path):
        fs, where = objectstore.url_fs(os.fspath(path), storage_options)
        probe = f"{where}.probe-{uuid.uuid4().hex[:8]}"
        try:
            fs.pipe(probe, b"")
            fs.rm(probe)
        except Exception as exc:  # botocore/aiohttp raise many types: any is "cannot write"
            raise OutputError(f"{key}: cannot write to {os.fspath(path)!r}: {exc}") from None
        return
    p = Path(path)
    probe = p.with_name(f".{p.name}.probe-{uuid.uuid4().hex[:8]}")
    try:
        probe.mkdir()
    except OSError as exc:
        raise _cannot_write(key, p.parent, exc) from None
    probe.rmdir()


def tree_digest(path: str | os.PathLike) -> str:
    """A content hash of a file or directory tree (names and bytes), never following links.

    Raises :class:`OutputError` when the tree holds a symbolic link or anything but regular
    files and directories.
    """
    root = Path(path)
    h = hashlib.blake2b(digest_size=20)
    if root.is_symlink() or not (root.is_dir() or root.is_file()):
        raise OutputError(f"work: {str(root)!r} is not a plain file or directory")
    entries = [root]
    if root.is_dir():
        entries = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            entries += [Path(dirpath, n) for n in dirnames + sorted(filenames)]
        entries.sort()
    for p in entries:
        mode = p.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise OutputError(f"work: {str(p)!r} is a symbolic link; refusing to follow it")
        rel = p.name if p == root else str(p.relative_to(root))
        if stat.S_ISDIR(mode):
            h.update(f"d {rel}\n".encode())
        elif stat.S_ISREG(mode):
            h.update(f"f {rel} {p.stat().st_size}\n".encode())
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
        else:
            raise OutputError(f"work: {str(p)!r} is not a regular file")
    return h.hexdigest()

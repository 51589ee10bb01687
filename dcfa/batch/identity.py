"""What a batch job is made of, for ``--resume`` (:mod:`dcfa.batch.workdir`): its identity.

Three parts, each a hash:

- ``configuration``: every key that changes a result, and the dcfa version;
- ``input``: the input store's content identity: every file's path, size, modification and
  status-change times and inode (Zarr metadata and chunk listing; symbolic links followed, as
  Zarr follows them, and their targets named), so a rewritten chunk or a new variable changes
  it, also when the chunk kept its size and its timestamps were put back (``cp -p``, ``rsync
  -a``): ctime cannot be set back. No data is read for it (a pass reads the data once); on
  object storage every object's key, size and ETag;
- ``target``: a hash of the target's times and values as read;

and ``details`` (each setting, each part of the input store, the target file), kept to say
what changed (:func:`what_changed`) when a recorded identity no longer matches.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from dcfa import _version

__all__ = [
    "InputChangedError",
    "check_unchanged",
    "job_identity",
    "series_identity",
    "store_identity",
    "store_parts",
    "what_changed",
]


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _file_entry(p: Path) -> list:
    """What identifies one file without reading it: size, modification time, status-change
    time and inode. The ctime and inode catch what size and mtime miss: a chunk rewritten with
    its size and timestamps restored (``cp -p``, ``rsync -a``, ``tar x``, ``touch -r``, a
    file system with coarse mtimes) or a file replaced by another; ctime cannot be set back."""
    try:
        st = p.stat()  # a link's target: the bytes Zarr reads
    except OSError as exc:  # a dangling link, a file gone meanwhile: part of the identity
        return ["unreadable", exc.errno]
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _store_listing(root: Path) -> list:
    """Every file under ``root`` (links followed, as Zarr follows them; each real directory
    once), with its :func:`_file_entry`, and every symbolic link's target."""
    listing: list = []
    seen: set = set()

    def walk(d: Path, rel: str) -> None:
        try:
            st = d.stat()
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            listing.append([rel or ".", "unreadable", exc.errno])
            return
        if (st.st_dev, st.st_ino) in seen:  # a link cycle: named, not walked again
            listing.append([rel or ".", "cycle"])
            return
        seen.add((st.st_dev, st.st_ino))
        for e in entries:
            name = f"{rel}/{e.name}" if rel else e.name
            if e.is_symlink():
                listing.append([name, "->", os.readlink(e.path)])
            try:
                is_dir = e.is_dir()  # follows a link
            except OSError:
                is_dir = False
            if is_dir:
                walk(Path(e.path), name)
            else:
                listing.append([name, *_file_entry(Path(e.path))])

    walk(root, "")
    return listing


def store_parts(path: str | os.PathLike, storage_options: dict | None = None) -> dict[str, str]:
    """A hash per top-level entry of a store (a variable, a coordinate, the root metadata):
    what :func:`store_identity` is made of, kept to say which part changed."""
    from dcfa.storage.objectstore import is_url, listing

    if is_url(path):
        entries = listing(os.fspath(path), storage_options)
        return {"": _hash([os.fspath(path), entries])}
    from dcfa.io.sources import archive_kind, source_files

    root = Path(path)
    kind = archive_kind(root)
    if kind == "netcdf" and not root.is_file():  # a glob: each file it matches, by its path
        return {os.fspath(f): _hash([f.name, *_file_entry(f)]) for f in source_files(root)} or {
            "": _hash(["missing", os.fspath(path)])
        }
    if kind == "kerchunk" and root.is_file():  # the references, and each file they point into
        parts = {"": _hash([root.name, *_file_entry(root)])}
        parts.update((os.fspath(f), _hash([f.name, *_file_entry(f)])) for f in source_files(root))
        return parts
    if not root.exists():
        return {"": _hash(["missing", os.fspath(path)])}
    if not root.is_dir():
        return {"": _hash([root.name, *_file_entry(root)])}
    parts: dict[str, list] = {}
    for entry in _store_listing(root):
        parts.setdefault(str(entry[0]).split("/", 1)[0], []).append(entry)
    return {name: _hash(entries) for name, entries in parts.items()}


def store_identity(path: str | os.PathLike, storage_options: dict | None = None) -> str:
    """Every file of a store: relative path, size, modification and status-change times and
    inode (no content read; symbolic links followed and their targets named); on object
    storage every object's key, size and ETag."""
    return _hash(store_parts(path, storage_options))


def series_identity(series) -> str:
    """A hash of a 1-D series' sample coordinate and values, as read."""
    h = hashlib.sha256()
    h.update(np.asarray(series.values, dtype=np.float64).tobytes())
    h.update(repr([str(t) for t in np.asarray(series[series.dims[0]].values)]).encode())
    return h.hexdigest()


def _settings(config) -> dict[str, object]:
    """Every key of ``[input]``, ``[target]`` and ``[method]`` as ``section.key`` -> value
    (``storage_options``: a hash, never the credentials), to name what changed."""
    out: dict[str, object] = {}

    def flat(prefix: str, value) -> None:
        if prefix.endswith("storage_options"):
            out[prefix] = "sha256:" + _hash(value)[:16] if value else {}
        elif isinstance(value, dict) and value and prefix.count(".") < 2:
            for k, v in value.items():
                flat(f"{prefix}.{k}", v)
        else:
            out[prefix] = json.loads(json.dumps(value, default=str))

    for section in ("input", "target", "method"):
        flat(section, getattr(config, section))
    out["dcfa.version"] = _version.__version__
    return out


def job_identity(config, target) -> dict:
    """The three parts a job's finished passes depend on (see the module docstring), and
    ``details`` (each setting, each part of the input store, the target file), kept to say
    what changed."""
    inp, tgt = config.input, config.target
    parts = store_parts(inp["store"], inp["storage_options"])
    return {
        "configuration": _hash(
            {
                "input": config.input,
                "target": config.target,
                "method": config.method,
                "dcfa": _version.__version__,
            }
        ),
        "input": _hash(parts),
        "target": series_identity(target),
        "details": {
            "settings": _settings(config),
            "input": parts,
            "target file": store_identity(tgt["path"], tgt["storage_options"]),
        },
    }


def _changed_parts(a: dict, b: dict) -> str:
    """``"sst, time: "``: the parts of a store whose hash differs (the root's unnamed)."""
    names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k) and k)
    return f"{', '.join(names[:6])}{', ...' if len(names) > 6 else ''}: " if names else ""


class InputChangedError(RuntimeError):
    """The input store changed while a job read it. Not bad input (exit 1): the job file is
    right, and a rerun on the finished archive succeeds."""


def check_unchanged(identity: dict, store: str, storage_options: dict | None) -> None:
    """Refuse to go on when ``store`` is no longer what :func:`job_identity` recorded at the
    start of the job (``identity``): a result read from it would match neither the archive
    before the change nor after it."""
    now = store_parts(store, storage_options)
    was = identity["details"]["input"]
    if now != was:
        raise InputChangedError(
            f"input.store: {str(store)!r} changed while the job read it ({_changed_parts(was, now)}"
            "files added, removed or rewritten); a result would match neither the archive "
            "before the change nor after it, so none was written: rerun the job once the "
            "archive is complete"
        )


COMPARED = ("configuration", "input", "target")  # the parts compared (details only say what)


def _show(value) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def what_changed(old: dict, new: dict, changed: list[str]) -> list[str]:
    """What changed between the recorded identity ``old`` and ``new``, as the user can act on
    it: the keys and their values, the parts of the input store, the target file."""
    was, now = old.get("details") or {}, new.get("details") or {}
    out: list[str] = []
    if "configuration" in changed:
        a, b = was.get("settings"), now.get("settings", {})
        keys = []
        if isinstance(a, dict):
            keys = [
                f"{k}: {_show(a[k]) if k in a else '(unset)'} -> "
                f"{_show(b[k]) if k in b else '(unset)'}"
                for k in sorted(set(a) | set(b))
                if a.get(k, ...) != b.get(k, ...)
            ]
        out.append("the configuration changed" + (f" ({'; '.join(keys)})" if keys else ""))
    if "input" in changed:
        a, b = was.get("input"), now.get("input", {})
        names = _changed_parts(a, b) if isinstance(a, dict) else ""
        out.append(
            f"the input store's content changed (input.store: {names}files added, removed or "
            "rewritten)"
        )
    if "target" in changed:
        file_changed = was.get("target file") != now.get("target file")
        if file_changed or "configuration" not in changed:  # else the changed keys explain it
            out.append(
                "the target's values or dates changed (target.path"
                + (": the file was rewritten" if file_changed and "target file" in was else "")
                + ")"
            )
    return out

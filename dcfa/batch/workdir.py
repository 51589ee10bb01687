"""The batch job's work directory: finished passes kept for ``--resume``, never reused stale.

``<output>.work/`` holds what each finished pass produced (the preprocessing store, the
moments, GBMAP checkpoints) and ``identity.json``: what the job was made of, in three parts,

- ``configuration``: every key that changes a result;
- ``input``: the input store's content identity: every file's path, size and modification time
  (Zarr metadata and chunk listing), so a rewritten chunk or a new variable changes it;
- ``target``: a hash of the target's times and values as read;

and, per finished pass, a content hash of what it wrote. A pass is reused only when all three
parts match the current job and its files still hash to what was recorded: a corrected target
file, a changed archive, or moments planted from another job are never taken for this job's.
Under ``--resume`` a mismatch stops the job (exit 2) and says what changed; without it, a
previous run's work is discarded. The directory is never followed through a symbolic link, and a
directory that dcfa did not make is never removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

from dcfa.batch.config import ConfigError
from dcfa.io.store import OutputError, atomic_file, tree_digest

__all__ = ["WorkDir", "job_identity"]

_STAMP = "identity.json"
_OLD_STAMP = "fingerprint.json"  # dcfa 0.1's work directories


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def store_identity(path: str | os.PathLike, storage_options: dict | None = None) -> str:
    """Every file of a store: relative path, size, modification time (no content read); on
    object storage every object's key, size and ETag."""
    from dcfa.io.objectstore import is_url, listing

    if is_url(path):
        return _hash([os.fspath(path), listing(os.fspath(path), storage_options)])
    root = Path(path)
    if not root.exists():
        return _hash(os.fspath(path))
    if root.is_file():
        st = root.stat()
        return _hash([root.name, st.st_size, st.st_mtime_ns])
    listing = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath, name)
            st = p.stat()
            listing.append((str(p.relative_to(root)), st.st_size, st.st_mtime_ns))
    return _hash(listing)


def series_identity(series) -> str:
    """A hash of a 1-D series' sample coordinate and values, as read."""
    h = hashlib.sha256()
    h.update(np.asarray(series.values, dtype=np.float64).tobytes())
    h.update(repr([str(t) for t in np.asarray(series[series.dims[0]].values)]).encode())
    return h.hexdigest()


def job_identity(config, target) -> dict[str, str]:
    """The three parts a job's finished passes depend on (see the module docstring)."""
    return {
        "configuration": _hash(
            {"input": config.input, "target": config.target, "method": config.method}
        ),
        "input": store_identity(config.input["store"], config.input["storage_options"]),
        "target": series_identity(target),
    }


_WHAT = {
    "configuration": "the configuration ([input], [target] or [method])",
    "input": "the input store's content (input.store: files added, removed or rewritten)",
    "target": "the target's values or dates (target.path)",
}


class WorkDir:
    """The work directory of one job (see the module docstring).

    Parameters
    ----------
    path : Path
        ``<output>.work``.
    identity : dict
        :func:`job_identity` of the job being run.
    resume : bool
        Reuse the finished passes of an interrupted run of the same job.
    echo : callable
        Where messages go.
    """

    def __init__(self, path: Path, identity: dict[str, str], *, resume: bool, echo=print):
        self.path = Path(path)
        self.identity = identity
        self.echo = echo
        self.created = False
        self.passes: dict[str, str] = {}
        self._open(resume)

    def _open(self, resume: bool) -> None:
        p = self.path
        if p.is_symlink():
            raise OutputError(
                f"output.store: the work directory {str(p)!r} is a symbolic link; dcfa never "
                "follows it. Remove the link (or choose another output.store)"
            )
        if p.exists() and not p.is_dir():
            raise OutputError(
                f"output.store: {str(p)!r} (the job's work directory) exists and is not a "
                "directory; dcfa did not make it. Choose another output.store"
            )
        stamp = self._read_stamp() if p.exists() else None
        if p.exists() and stamp is None:
            raise OutputError(
                f"output.store: {str(p)!r} (the job's work directory) exists but dcfa did not "
                "make it; refusing to use or remove it. Choose another output.store"
            )
        if stamp is not None and resume:
            changed = [k for k in _WHAT if stamp.get("identity", {}).get(k) != self.identity[k]]
            if changed:
                raise ConfigError(
                    f"--resume: cannot reuse the work in {str(p)!r}: "
                    + "; ".join(_WHAT[k] for k in changed)
                    + " changed since the interrupted run. Run without --resume to start over"
                )
            self.passes = dict(stamp.get("passes", {}))
            return
        if stamp is not None:
            self.echo(
                f"      found work of an interrupted run in {p}; starting over (use --resume "
                "to reuse it)"
            )
            shutil.rmtree(p)
        if resume:
            self.echo("      --resume: no work of an interrupted run to reuse; starting")
        p.mkdir()
        self.created = True
        self._write_stamp()

    def _read_stamp(self) -> dict | None:
        for name in (_STAMP, _OLD_STAMP):
            f = self.path / name
            if f.is_file() and not f.is_symlink():
                try:
                    stamp = json.loads(f.read_text())
                except ValueError:
                    return {}
                return stamp if name == _STAMP else {}  # 0.1's: ours, but nothing reusable
        return None

    def _write_stamp(self) -> None:
        with atomic_file(self.path / _STAMP) as fh:
            fh.write(json.dumps({"identity": self.identity, "passes": self.passes}).encode())

    def reuse(self, name: str) -> Path | None:
        """``work/name`` if a finished pass left it and its content is what was recorded."""
        p = self.path / name
        if name not in self.passes or not (p.exists() or p.is_symlink()):
            return None
        try:
            same = tree_digest(p) == self.passes[name]
        except OutputError:
            same = False
        if not same:
            self.echo(
                f"      {p} is not what the interrupted run wrote (changed since); recomputing"
            )
            del self.passes[name]
            self._write_stamp()
            if p.is_symlink() or p.is_file():
                p.unlink()
            else:
                shutil.rmtree(p)
            return None
        return p

    def record(self, name: str) -> None:
        """Note that ``work/name`` is complete: its content hash goes into the stamp."""
        self.passes[name] = tree_digest(self.path / name)
        self._write_stamp()

    def remove(self) -> None:
        """Remove the work directory (it is ours: checked when it was opened)."""
        if self.path.is_dir() and not self.path.is_symlink():
            shutil.rmtree(self.path, ignore_errors=True)

"""The batch job's work directory: finished passes kept for ``--resume``, never reused stale.

``<output>.work/`` holds what each finished pass produced (the preprocessing store, the
moments, GBMAP checkpoints) and ``identity.json``: what the job was made of
(:mod:`dcfa.batch.identity`: its configuration, the input store's content, the target's values)
and, per finished pass, a content hash of what it wrote. A pass is reused only when all three
parts match the current job and its files still hash to what was recorded: a corrected target
file, a changed archive, or moments planted from another job are never taken for this job's.
Under ``--resume`` a mismatch stops the job (exit 2) and says what changed (each changed key
with its values, the parts of the store, the target file: ``details`` in the stamp); without it, a
previous run's work is discarded. The directory is never followed through a symbolic link, and a
directory that dcfa did not make is never removed.

GBMAP's checkpoint (``gbmap/``) is resumable work of its own: it depends on the ``[gbmap]``
settings (all but ``n_boosts``: boosting is stagewise) and on the partition, both recorded in
``identity.json``; a checkpoint left by other settings or another partition is discarded (and
said so), GBMAP starts afresh, and the finished passes are still reused.

A run holds its work directory for its whole life: an exclusive ``flock`` on ``run.lock`` inside
it (released by the kernel when the process ends, however it ends), the file naming the host
and process. A second run of the same job while the first runs exits 2 and touches nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

from dcfa.batch.config import ConfigError
from dcfa.batch.identity import COMPARED, what_changed
from dcfa.storage.store import OutputError, atomic_file, tree_digest

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, as before
    fcntl = None

__all__ = ["WorkDir", "WorkDirBusy"]

_STAMP = "identity.json"
_LOCK = "run.lock"  # flock'ed by the run using the directory; names its host and process
_GBMAP = "gbmap"  # GBMAP's checkpoints
_OLD_STAMP = "fingerprint.json"  # dcfa 0.1's work directories


class WorkDirBusy(OutputError):
    """The work directory is held by another run (exit 2; nothing touched)."""


def _busy(path: Path, fd: int | None) -> WorkDirBusy:
    holder = "another dcfa process"
    if fd is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            info = json.loads(os.pread(fd, 4096, 0).decode())
            holder = f"pid {int(info['pid'])} on host {info['host']}, started {info['since']}"
    return WorkDirBusy(
        f"output.store: the work directory {str(path)!r} is in use by another run of this job "
        f"({holder}); wait for it to end (or stop it, then rerun with --resume). Nothing was "
        "touched"
    )


def _open_lock(path: Path, create: bool) -> int | None:
    """A descriptor of ``path/run.lock`` (None if absent and not ``create``); never through a
    symbolic link."""
    flags = os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path / _LOCK, flags | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symbolic link (ELOOP), not ours
        raise OutputError(
            f"output.store: {str(path / _LOCK)!r} cannot be opened ({exc.strerror or exc}); "
            "dcfa did not make it. Choose another output.store"
        ) from None


def _probe(path: Path) -> None:
    """Raise :class:`WorkDirBusy` if a run holds ``path`` (a shared lock, taken and released)."""
    if fcntl is None:
        return
    fd = _open_lock(path, create=False)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _busy(path, fd) from None
    finally:
        os.close(fd)  # releases the probe's lock


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
    open : bool
        Take the directory now (lock, start over, create). With False only the checks are
        made (nothing is written, nothing stays locked) and :meth:`open` takes it later:
        every refusal comes before a cluster is started, nothing is written before it runs.
    """

    def __init__(
        self, path: Path, identity: dict[str, str], *, resume: bool, echo=print, open=True
    ):
        self.path = Path(path)
        self.identity = identity
        self.echo = echo
        self.resume = resume
        self.created = False
        self.opened = False
        self.passes: dict[str, str] = {}
        self.gbmap: dict | None = None
        self._fd: int | None = None
        try:
            self._open(resume, write=open)
        except BaseException:
            self.close()
            raise

    def open(self) -> WorkDir:
        """Take the directory: the checks again, under the run's lock, then the writes."""
        if not self.opened:
            try:
                self._open(self.resume, write=True)
            except BaseException:
                self.close()
                raise
        return self

    def _open(self, resume: bool, *, write: bool, again: bool = False) -> None:
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
        if p.exists():
            if write:
                self._lock(create=False)  # held by another run: refused, nothing touched
            else:
                _probe(p)
            stamp = self._read_stamp()
            if stamp is None and again:  # made a moment ago by another run: its lock next
                time.sleep(0.2)
                return self._open(resume, write=write, again=False)
            if stamp is None:
                raise OutputError(
                    f"output.store: {str(p)!r} (the job's work directory) exists but dcfa did "
                    "not make it; refusing to use or remove it. Choose another output.store"
                )
            if resume:
                recorded = stamp.get("identity")
                if not isinstance(recorded, dict):  # unreadable: nothing can be vouched for
                    raise ConfigError(
                        f"--resume: cannot reuse the work in {str(p)!r}: its {_STAMP} is "
                        "missing or unreadable, so what the finished passes were computed from "
                        "is unknown. Run without --resume to start over"
                    )
                changed = [k for k in COMPARED if recorded.get(k) != self.identity[k]]
                if changed:
                    raise ConfigError(
                        f"--resume: cannot reuse the work in {str(p)!r}: "
                        + "; ".join(what_changed(recorded, self.identity, changed))
                        + " since the interrupted run. Run without --resume to start over"
                    )
                if write:
                    self._lock(create=True)
                    self.passes = dict(stamp.get("passes", {}))
                    self.gbmap = stamp.get("gbmap")
                    self._hold()
                    self.opened = True
                return
            if not write:
                return
            self.echo(
                f"      found work of an interrupted run in {p}; starting over (use --resume "
                "to reuse it)"
            )
            self._lock(create=True)
            self._clear()
        else:
            if not write:
                return
            if resume:
                self.echo("      --resume: no work of an interrupted run to reuse; starting")
            try:
                p.mkdir()
            except FileExistsError:  # made meanwhile by another run: its lock decides
                return self._open(resume, write=write, again=True)
            self._lock(create=True)
        self.created = True
        self.opened = True
        self._hold()
        self._write_stamp()

    def _lock(self, create: bool) -> None:
        """Hold ``run.lock`` (exclusive, for the run's life); :class:`WorkDirBusy` if another
        run holds it. Without the file and ``create``, nothing is done."""
        if fcntl is None or self._fd is not None:
            return
        fd = _open_lock(self.path, create)
        if fd is None:
            return
        for attempt in range(20):  # another run's probe holds it for microseconds
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 19:
                    err = _busy(self.path, fd)
                    os.close(fd)
                    raise err from None
                time.sleep(0.05)
        self._fd = fd

    def _hold(self) -> None:
        """Name this run in the lock file (read by a second run's message)."""
        if self._fd is None:
            return
        info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(info).encode(), 0)

    def _clear(self) -> None:
        """Remove what an earlier run left, but the lock this run holds."""
        for child in self.path.iterdir():
            if child.name == _LOCK:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

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
        stamp = {"identity": self.identity, "passes": self.passes}
        if self.gbmap is not None:
            stamp["gbmap"] = self.gbmap
        with atomic_file(self.path / _STAMP) as fh:
            fh.write(json.dumps(stamp).encode())

    def reuse(self, name: str) -> Path | None:
        """``work/name`` if a finished pass left it and its content is what was recorded."""
        p = self.path / name
        if name not in self.passes:  # never recorded as finished (or forgotten): not reused
            self.discard(name)  # and not in the way of the pass that writes it again
            return None
        if not (p.exists() or p.is_symlink()):
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

    def discard(self, name: str) -> None:
        """Forget ``work/name`` and remove it (a pass to compute again: its input, another
        pass, is recomputed, or it was never recorded as finished)."""
        p = self.path / name
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.exists():
            shutil.rmtree(p)
        if self.passes.pop(name, None) is not None:
            self._write_stamp()

    def record(self, name: str) -> None:
        """Note that ``work/name`` is complete: its content hash goes into the stamp."""
        self.passes[name] = tree_digest(self.path / name)
        self._write_stamp()

    def gbmap_checkpoint(self, settings: dict, partition: str) -> Path:
        """The directory of GBMAP's checkpoints for ``settings`` (the ``[gbmap]`` parameters
        that change the learners) and ``partition`` (a hash of the reduction whose features
        GBMAP fits). A checkpoint that other settings or another partition left is discarded,
        with a line saying what changed: GBMAP starts afresh, the finished passes stay."""
        settings = json.loads(json.dumps(settings, sort_keys=True, default=str))
        mine = {"settings": settings, "partition": partition}
        d = self.path / _GBMAP
        if (d.exists() or d.is_symlink()) and self.gbmap != mine:
            old = (self.gbmap or {}).get("settings")
            if old is None:
                what = "settings not recorded"
            else:
                keys = sorted(set(old) | set(settings))
                what = ", ".join(
                    f"gbmap.{k}: {old.get(k)!r} -> {settings.get(k)!r}"
                    for k in keys
                    if old.get(k) != settings.get(k)
                )
                if (self.gbmap or {}).get("partition") != partition:
                    what = ", ".join(filter(None, [what, "the partition"]))
            self.discard_gbmap(f"it was written for other settings ({what})")
        self.gbmap = mine
        self._write_stamp()
        return d

    def discard_gbmap(self, why: str) -> None:
        """Remove GBMAP's checkpoint (``why`` is printed)."""
        d = self.path / _GBMAP
        self.echo(f"      GBMAP checkpoint in {d} discarded: {why}; GBMAP starts afresh")
        if d.is_symlink() or d.is_file():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)

    def abandon(self, *, bad_input: bool = False) -> bool:
        """After a failure: keep the finished passes for ``--resume``, remove the directory if
        it holds none (or the failure is bad input: nothing is worth resuming). Returns
        whether finished passes were kept."""
        kept = bool(self.opened and self.passes and not bad_input)
        if self.opened and not kept:
            self.remove()
        self.close()
        return kept

    def remove(self) -> None:
        """Remove the work directory (ours: checked when it was opened; the lock goes last)."""
        p = self.path
        if self.opened and p.is_dir() and not p.is_symlink():
            with contextlib.suppress(OSError):
                self._clear()
            (p / _LOCK).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                p.rmdir()
            if p.exists():
                shutil.rmtree(p, ignore_errors=True)
        self.close()

    def close(self) -> None:
        """Release the run's lock (the kernel does so too when the process ends)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

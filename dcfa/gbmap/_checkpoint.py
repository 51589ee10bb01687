"""Checkpoints of a GBMAP fit: the learners after each boosting step, written atomically.

A checkpoint is one ``.npz`` file, ``<directory>/gbmap_checkpoint.npz``, holding the fitted
learners so far (:class:`dcfa.gbmap._learners.Learners`), the seed that drew their starting
points, and a *fingerprint* of the fit: the estimator, every parameter that changes the
learners (all but ``n_boosts``, ``persist`` and ``checkpoint``), the data's shape and its
standardisation moments, a digest of its rows in their order
(:func:`dcfa.gbmap._rows.row_digest`), and digests of every target value and of a fitted
``f0`` model.
It is written to a temporary file in the same directory and moved into place with
:func:`os.replace`, so a crash leaves the previous checkpoint intact.

Boosting is stagewise, so the first ``k`` learners of any fit equal a fit with
``n_boosts=k``: a checkpoint with ``k`` steps resumes any fit with the same fingerprint, and
serves a smaller ``n_boosts`` by truncation.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np

from dcfa._errors import InputError
from dcfa._interrupts import held_interrupt
from dcfa.gbmap._learners import Learners
from dcfa.storage.store import OutputError, atomic_file, check_writable

__all__ = [
    "CHECKPOINT_FILE",
    "CheckpointMismatch",
    "check_directory",
    "load_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_FILE = "gbmap_checkpoint.npz"


class CheckpointMismatch(InputError):
    """A checkpoint written by a different fit (other parameters, data or target).

    Attributes
    ----------
    path : Path
        The checkpoint file.
    details : str
        What differs, ``"; "``-separated.
    """

    def __init__(self, path: str | os.PathLike, details: str) -> None:
        super().__init__(
            f"checkpoint: {path} was written by a different fit ({details}); use another "
            "checkpoint directory or delete the file to start afresh"
        )
        self.path = Path(path)
        self.details = details


_FORMAT = 1
# Standardisation moments of the same data computed with another chunking (or in memory)
# differ by rounding only.
_MOMENTS_RTOL = 1e-9


# Fingerprint entries added after format 1 was written: a checkpoint without them was
# written before they existed and is still resumed (it is checked on the rest).
# Each with what a mismatch says (a digest's hex says nothing).
_LATER_KEYS = {
    "target_sha256": "target: other values",
    "f0_digest": "f0: another fitted model",
}


# What a mismatch of each stored array says; "rows" was added after format 1 was written:
# a checkpoint without it is checked on the rest.
_ARRAYS = {
    "mean": "X: other column means",
    "scale": "X: other column spreads",
    "target": "target: other moments",
    "rows": "X: other rows, or the same rows in another order",
}
_LATER_ARRAYS = {"rows"}


def _atol(value: np.ndarray) -> float:
    """Absolute tolerance: the rounding of sums of numbers as large as the largest entry (a
    mean near 0 computed with another chunking is 1e-17, not 0)."""
    return _MOMENTS_RTOL * max(1.0, float(np.abs(value).max(initial=0.0)))


def _path(directory) -> Path:
    return Path(os.fspath(directory)) / CHECKPOINT_FILE


def check_directory(directory) -> None:
    """Create the checkpoint directory now, so that a path that cannot be one (a file, no
    permission) fails at the start of ``fit``, not when the first step is saved.

    Raises
    ------
    ValueError
        Naming ``checkpoint`` and the path.
    """
    path = Path(os.fspath(directory))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"checkpoint: {path} cannot be a directory ({exc})") from None
    try:  # a real probe (os.access says yes to root on a read-only mount)
        check_writable(path / CHECKPOINT_FILE, "checkpoint")
    except OutputError as exc:
        raise ValueError(str(exc)) from None


def save_checkpoint(
    directory, fingerprint: dict, arrays: dict[str, np.ndarray], seed: int, learners: Learners
) -> Path:
    """Write the learners so far atomically (:func:`dcfa.storage.store.atomic_file`)."""
    path = _path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"format": _FORMAT, "seed": int(seed), "fingerprint": fingerprint})
    payload = {f"learner_{k}": v for k, v in learners.as_dict().items()}
    payload.update({f"data_{k}": np.asarray(v) for k, v in arrays.items()})
    with held_interrupt() as interrupted:  # zipfile cut mid-write raises a ValueError
        with atomic_file(path) as fh:
            np.savez(fh, meta=np.asarray(meta), **payload)
    if interrupted:
        raise KeyboardInterrupt
    return path


def load_checkpoint(
    directory, fingerprint: dict, arrays: dict[str, np.ndarray]
) -> tuple[Learners, int] | None:
    """The learners and seed of a matching checkpoint; None if there is none.

    Raises
    ------
    ValueError
        If a checkpoint exists but was written by a fit with other parameters or other data.
    """
    path = _path(directory)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            stored = {k: f[k] for k in f.files if k != "meta"}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise InputError(
            f"checkpoint: {path} cannot be read ({type(exc).__name__}: {exc}); delete it to "
            "start afresh"
        ) from None
    if meta.get("format") != _FORMAT:
        raise InputError(f"checkpoint: {path} has an unknown format {meta.get('format')!r}")
    theirs = meta["fingerprint"]
    ours = json.loads(json.dumps(fingerprint))  # same normalisation as the stored one
    diff = [
        _LATER_KEYS[k] if k in _LATER_KEYS else f"{k}: {theirs.get(k)!r} -> {ours.get(k)!r}"
        for k in sorted(set(ours) | set(theirs))
        if ours.get(k) != theirs.get(k) and not (k in _LATER_KEYS and k not in theirs)
    ]
    for name, value in arrays.items():
        old = stored.get(f"data_{name}")
        value = np.asarray(value)
        if old is None and name in _LATER_ARRAYS:
            continue
        if (
            old is None
            or old.shape != value.shape
            or not np.allclose(old, value, rtol=_MOMENTS_RTOL, atol=_atol(value))
        ):
            diff.append(_ARRAYS.get(name, f"{name}: other values"))
    if diff:
        raise CheckpointMismatch(path, "; ".join(diff[:6]))
    learners = Learners(
        **{k[len("learner_") :]: v for k, v in stored.items() if k.startswith("learner_")}
    )
    return learners, int(meta["seed"])

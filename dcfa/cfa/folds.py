"""Cross-validation folds as contiguous row segments, so one pass gives every fold's moments.

NonLinCFA scores each candidate by the cross-validated R^2 of two small OLS models. When every
fold's training and test rows are unions of a few contiguous row ranges (scikit-learn's
``KFold`` without shuffle, ``TimeSeriesSplit``, with or without a gap), the moments of each
range are computed in the same pass over the data, and a fold's training moments are the merge
of its ranges': no refit, no second pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral

import numpy as np
from sklearn.model_selection import KFold, check_cv

from dcfa._errors import InputError, InputTypeError

__all__ = ["Folds", "make_folds"]

_MAX_RUNS = 4  # contiguous ranges per train/test set; more means shuffled folds


@dataclass(frozen=True)
class Folds:
    """Row segments and, per fold, which segments it trains and tests on.

    Attributes
    ----------
    bounds : list of int
        ``[0, b1, ..., n]``: segment ``s`` is rows ``bounds[s]:bounds[s + 1]``.
    splits : list of (tuple of int, tuple of int)
        Per fold, the training and the test segments.
    """

    bounds: list[int]
    splits: list[tuple[tuple[int, ...], tuple[int, ...]]]

    @property
    def n_segments(self) -> int:
        return len(self.bounds) - 1


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """Maximal contiguous ranges ``[start, stop)`` of sorted indices."""
    if idx.size == 0:
        return []
    idx = np.sort(idx)
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.concatenate([[idx[0]], idx[breaks + 1]])
    stops = np.concatenate([idx[breaks] + 1, [idx[-1] + 1]])
    return list(zip(starts.tolist(), stops.tolist(), strict=True))


def _describe(cv) -> str:
    """A short description of a ``cv`` value for messages (never whole index arrays)."""
    if hasattr(cv, "split") or cv is None or isinstance(cv, Integral | float | str | bytes):
        text = repr(cv)
        return text if len(text) <= 80 else f"a value of type {type(cv).__name__}"
    if hasattr(cv, "__len__"):
        return f"a {type(cv).__name__} of {len(cv)} item(s)"
    return f"a value of type {type(cv).__name__}"


def _fold_indices(fold, k: int, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Fold ``k``'s training and test indices as 1-D int arrays within ``[0, n_samples)``."""
    if not (hasattr(fold, "__len__") and len(fold) == 2):
        raise InputError(
            f"cv: fold {k} is not a (train, test) pair of index arrays (got {_describe(fold)})"
        )
    out = []
    for part, idx in zip(("train", "test"), fold, strict=True):
        idx = np.asarray(idx)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise InputError(
                f"cv: fold {k}'s {part} set is not a 1-D array of row indices (dtype "
                f"{idx.dtype}, shape {idx.shape})"
            )
        if idx.size and (idx.min() < 0 or idx.max() >= n_samples):
            bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
            raise InputError(
                f"cv: fold {k}'s {part} set holds row {bad}, not among the {n_samples} "
                "samples: its (train, test) pairs were made for other data (a fixed list of "
                "folds suits one number of samples; pass an int or a splitter where several "
                "are partitioned, as in NonLinCFACV)"
            )
        out.append(idx.astype(np.int64, copy=False))
    return out[0], out[1]


def make_folds(cv, n_samples: int, *, min_train: int = 4, min_test: int = 2) -> Folds:
    """The :class:`Folds` of ``cv`` on ``n_samples`` rows.

    Parameters
    ----------
    cv : int, cross-validation splitter, iterable or None
        An int ``K`` means ``KFold(K)`` (contiguous folds, no shuffle), as
        ``cross_val_score(..., cv=K)`` does for a regressor; None means 5. A splitter
        (``KFold``, ``TimeSeriesSplit``, ...) or an iterable of ``(train, test)`` index arrays
        (such as ``list(KFold(4).split(X))``, for ``n_samples`` rows: scikit-learn's
        ``check_cv``) must yield training and test sets made of contiguous row ranges.
    n_samples : int
    min_train, min_test : int
        Fewest rows a fold may train / test on (an OLS with two regressors and an intercept
        needs more than three rows to fit and two to score).
    """
    if cv is None:  # scikit-learn's default (check_cv)
        cv = 5
    if isinstance(cv, Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise InputError(f"cv: expected at least 2 folds, got {cv}")
        if n_samples < cv * min_test:
            raise InputError(
                f"cv: {cv} folds need at least {cv * min_test} samples, got {n_samples}"
            )
        cv = KFold(int(cv))
    given = cv
    try:
        cv = check_cv(cv)  # a splitter as it is; an iterable of (train, test) pairs wrapped
    except (TypeError, ValueError):
        cv = None
    if cv is None or isinstance(given, str | bytes | bool | np.bool_):
        raise InputTypeError(
            "cv: expected an int, a cross-validation splitter or an iterable of (train, "
            f"test) index arrays, got {_describe(given)}"
        )
    try:
        raw = list(cv.split(np.zeros((n_samples, 1))))
    except ValueError as exc:
        if not hasattr(given, "split"):  # an iterable whose items are no (train, test) pairs
            raise InputError(
                f"cv: expected an iterable of (train, test) index array pairs ({exc})"
            ) from None
        raise InputError(f"cv: {exc}") from None
    if not raw:
        raise InputError(f"cv: {_describe(given)} yields no folds for {n_samples} samples")
    cuts = {0, n_samples}
    runs = []
    for k, fold in enumerate(raw):
        train, test = _fold_indices(fold, k, n_samples)
        tr, te = _runs(train), _runs(test)
        if len(tr) > _MAX_RUNS or len(te) > _MAX_RUNS:
            raise InputError(
                f"cv: fold {k} is not made of contiguous row ranges (shuffled folds?); use "
                "KFold without shuffle or TimeSeriesSplit, so fold moments come from one pass"
            )
        if len(train) < min_train or len(test) < min_test:
            raise InputError(
                f"cv: fold {k} trains on {len(train)} and tests on {len(test)} samples; need at "
                f"least {min_train} and {min_test} (too few samples for {len(raw)} folds)"
            )
        for a, b in tr + te:
            cuts.update((a, b))
        runs.append((tr, te))
    bounds = sorted(cuts)
    starts = bounds[:-1]

    def segments(ranges):
        return tuple(s for s, a in enumerate(starts) if any(lo <= a < hi for lo, hi in ranges))

    return Folds(bounds=bounds, splits=[(segments(tr), segments(te)) for tr, te in runs])

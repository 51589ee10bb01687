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
from sklearn.model_selection import KFold

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


def make_folds(cv, n_samples: int, *, min_train: int = 4, min_test: int = 2) -> Folds:
    """The :class:`Folds` of ``cv`` on ``n_samples`` rows.

    Parameters
    ----------
    cv : int or cross-validation splitter
        An int ``K`` means ``KFold(K)`` (contiguous folds, no shuffle), as
        ``cross_val_score(..., cv=K)`` does for a regressor. A splitter (``KFold``,
        ``TimeSeriesSplit``, ...) must yield training and test sets made of contiguous row
        ranges.
    n_samples : int
    min_train, min_test : int
        Fewest rows a fold may train / test on (an OLS with two regressors and an intercept
        needs more than three rows to fit and two to score).
    """
    if isinstance(cv, Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise ValueError(f"cv: expected at least 2 folds, got {cv}")
        if n_samples < cv * min_test:
            raise ValueError(
                f"cv: {cv} folds need at least {cv * min_test} samples, got {n_samples}"
            )
        cv = KFold(int(cv))
    if not hasattr(cv, "split"):
        raise TypeError(f"cv: expected an int or a cross-validation splitter, got {cv!r}")
    try:
        raw = list(cv.split(np.zeros((n_samples, 1))))
    except ValueError as exc:
        raise ValueError(f"cv: {exc}") from None
    if not raw:
        raise ValueError(f"cv: {cv!r} yields no folds for {n_samples} samples")
    cuts = {0, n_samples}
    runs = []
    for k, (train, test) in enumerate(raw):
        tr, te = _runs(np.asarray(train)), _runs(np.asarray(test))
        if len(tr) > _MAX_RUNS or len(te) > _MAX_RUNS:
            raise ValueError(
                f"cv: fold {k} is not made of contiguous row ranges (shuffled folds?); use "
                "KFold without shuffle or TimeSeriesSplit, so fold moments come from one pass"
            )
        if len(train) < min_train or len(test) < min_test:
            raise ValueError(
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

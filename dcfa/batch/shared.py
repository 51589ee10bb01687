"""The targets of one job that read the same cells, fitted together.

An estimator with a ``fit_targets(X, targets)`` method shares work between targets fitted on
the same ``X`` (:meth:`dcfa.RegionsCV.fit_targets`: the pieces depend on the field alone, so
they are made once). Targets on the same months read the same cells: the same archive months,
preprocessed alike. When the first of them reaches its fit, :class:`SharedFits` fits them all
with ``fit_targets``; each later target takes its fitted clone once its own preprocessing
pass has shown that its cells are those the clone was fitted on.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["SharedFits", "cells_digest"]


def cells_digest(months: np.ndarray, keep: np.ndarray, preprocessing) -> str:
    """A digest of what a target's cells are made of: its months, the cells kept and their
    preprocessing (:class:`dcfa.io.Preprocessing`: cells with data, climatology, spread)."""
    h = hashlib.sha256()
    for part in (np.asarray(months), np.asarray(keep)):
        h.update(str(part.dtype).encode())
        h.update(np.ascontiguousarray(part).tobytes())
    ds = preprocessing.to_dataset()
    for name in sorted(ds.data_vars):
        h.update(name.encode())
        h.update(np.ascontiguousarray(ds[name].values).tobytes())
    return h.hexdigest()


class SharedFits:
    """The job's targets grouped by their months; each group fitted once, at its first fit.

    Parameters
    ----------
    months : dict of str to ndarray
        Each target's months (the sample coordinate of its cells), in the job's order.
    targets : dict of str to xarray.DataArray
        Each target on its months.
    """

    def __init__(self, months: dict, targets: dict):
        groups: dict[bytes, list[str]] = {}
        for name, m in months.items():
            m = np.asarray(m)
            groups.setdefault(str(m.dtype).encode() + m.tobytes(), []).append(name)
        self._group = {n: g for g in groups.values() if len(g) > 1 for n in g}
        self._targets = targets
        self._fitted: dict[str, tuple[object, str, list[str]]] = {}

    def fit(self, name: str, estimator, cells, digest: str) -> tuple[object, list[str]] | None:
        """Target ``name``'s estimator fitted on ``cells`` (whose :func:`cells_digest` is
        ``digest``), with the targets it shares them with; None when it shares them with no
        other target, or the estimator shares no work: the job then fits it alone.

        Returns
        -------
        (estimator, list of str) or None
            The fitted clone, and the targets fitted together, in order (the first made the
            shared work).
        """
        if name not in self._group or not hasattr(estimator, "fit_targets"):
            return None
        if name in self._fitted:
            fitted, made_from, together = self._fitted.pop(name)
            return (fitted, together) if made_from == digest else None
        together = self._group[name][self._group[name].index(name) :]
        try:
            fits = estimator.fit_targets(cells, {n: self._targets[n] for n in together})
        except Exception:  # each target then fits alone, and fails in its own step
            for n in together:
                self._group.pop(n, None)
            return None
        for n in together[1:]:
            self._fitted[n] = (fits[n], digest, together)
        return fits[name], together

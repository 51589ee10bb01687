"""The one partition driver shared by LinCFA, NonLinCFA and GenLinCFA.

:func:`drive` decides exclusions, the ``1/std`` scaling and the visiting order once, builds
what the loop reads (a :class:`~dcfa.cfa.basis.Basis` or an execution's equivalent) and runs
the loop: :func:`~dcfa.cfa.sequential.sequential_partition` (the papers' greedy loop) or
:func:`~dcfa.cfa.greedy.greedy_partition` (the order-free variant of LinCFA's Remark 13).
:func:`partition_moments` is :func:`drive` on dense moments. The grid execution's loop is
:func:`~dcfa.cfa.grid_partition.grid_partition`.
"""

from __future__ import annotations

import logging
import time
import warnings

import numpy as np
import scipy.sparse as sp

from dcfa._errors import InputError, outside_stacklevel
from dcfa.cfa.basis import Basis, merge_rows
from dcfa.cfa.greedy import greedy_partition
from dcfa.cfa.sequential import sequential_partition

STRATEGIES = ("sequential", "greedy")
logger = logging.getLogger("dcfa")


def partition_moments(parts, accept, *, whole=None, target: int = 0, **loop) -> np.ndarray:
    """Labels of every feature from moments and a rule: what the three functional twins share.

    Parameters
    ----------
    parts : Moments or list of Moments
        One value, or several row sets the rule reads (cross-validation folds).
    accept : callable
        A rule of :mod:`dcfa.cfa.rules` with its parameters bound.
    whole : Moments, default=None
        The moments of all the data, on which exclusions and standardisation are decided
        (default: ``parts`` merged, for disjoint parts).
    target : int, default=0
        Which target column of the moments the rule reads.
    **loop
        The loop's options, passed to :func:`drive`: ``standardize`` (required), ``shuffle``,
        ``random_state``, ``compare``, ``scan``, ``strategy``, ``neighbors``,
        ``neighborhood``, ``progress`` and ``order``.

    Returns
    -------
    labels : ndarray of shape (n_features,)
        Group of each feature in order of creation; -1 for excluded features.
    """
    from dcfa.stats.moments import Moments

    parts = [parts] if isinstance(parts, Moments) else list(parts)
    if whole is None:
        whole = parts[0] if len(parts) == 1 else merge_rows(parts)
    return drive(
        whole, lambda valid, scale: Basis.from_moments(parts, valid, scale, target), accept, **loop
    )


def drive(
    whole,
    make_basis,
    accept,
    *,
    standardize: bool,
    shuffle: bool = False,
    random_state=None,
    compare: str = "seed",
    scan: str = "single",
    strategy: str = "sequential",
    neighbors=None,
    neighborhood: str = "group",
    progress=None,
    order=None,
    blocks=None,
) -> np.ndarray:
    """The one partition driver: exclusions, scaling, visiting order, then the loop.

    ``whole`` answers ``n_features``, ``valid`` and ``column_std`` (any moments summary);
    ``make_basis(valid, scale)`` builds what the loop reads for the kept features (the dense
    :class:`Basis`, the seed rows' or the series' basis). Every execution but the grid's
    runs through here, so they visit features in the same order and give the same labels.

    Parameters
    ----------
    standardize : bool
        Aggregate standardised features (``1/std`` weights) or the features as they are.
    shuffle, random_state, compare, scan, neighbors, neighborhood, progress
        See :func:`sequential_partition` (``strategy="sequential"``) and
        :func:`greedy_partition` (``"greedy"``).
    order : ndarray of shape (n_features,), default=None
        The order features are visited in before any shuffle (a permutation of all features,
        e.g. :meth:`dcfa.stacking.FeatureLayout.visit_order`); ``None``: ``0 .. D-1``.
        ``shuffle`` permutes this order.
    blocks : ndarray of int of shape (n_features,), default=None
        Every feature's block (a variable, a time scale, a lag:
        :func:`dcfa.neighbors.feature_blocks_of`); a group never holds features of two
        blocks, with or without ``neighbors``. None: one block.
    """
    labels = np.full(whole.n_features, -1, dtype=np.int64)
    if not np.any(whole.valid):
        return labels
    sequential = strategy != "greedy"  # the greedy variant visits no order
    valid, scale, visit = prologue(
        whole,
        standardize=standardize,
        order=order if sequential else None,
        shuffle=shuffle and sequential,
        random_state=random_state,
    )
    n_kept = int(valid.size)
    if neighbors is None and n_kept > COMPLETE_GRAPH_LIMIT:
        warnings.warn(
            f"neighbors: None compares each of the {n_kept:,} features with every group (up to "
            f"{n_kept * (n_kept - 1) / 2:.1e} tests); pass neighbors= (a radius on a gridded "
            "DataArray, or an adjacency matrix) for contiguous regions in far less time",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )
    if progress is None:
        progress = _logged_progress()
    basis = make_basis(valid, scale)
    adj = None if neighbors is None else sp.csr_array(neighbors)[valid][:, valid]
    blocks = None if blocks is None else np.asarray(blocks, dtype=np.int64)[valid]
    if strategy == "greedy":
        if adj is not None and neighborhood != "group":
            raise InputError(
                "neighborhood: strategy='greedy' merges adjacent groups (neighborhood='group'); "
                f"got {neighborhood!r}"
            )
        sub = greedy_partition(basis, accept, neighbors=adj, blocks=blocks, progress=progress)
    else:
        sub = sequential_partition(
            basis,
            accept,
            order=visit,
            compare=compare,
            scan=scan,
            neighbors=adj,
            neighborhood=neighborhood,
            blocks=blocks,
            progress=progress,
        )
    labels[valid] = sub
    return labels


# Kept features above which the complete graph (neighbors=None) is slow: every feature is
# tested against every group, O(D^2) tests (RegionsCV refuses it above this)
COMPLETE_GRAPH_LIMIT = 5000
PROGRESS_EVERY = 10.0  # seconds between two progress lines of a long partition


def _logged_progress():
    """A ``progress(n_assigned, D)`` that logs a line (INFO, as the CLI shows) at most every
    :data:`PROGRESS_EVERY` seconds: a partition of many features can take minutes."""
    start = last = time.perf_counter()

    def report(done: int, total: int) -> None:
        nonlocal last
        now = time.perf_counter()
        if now - last >= PROGRESS_EVERY and done < total:
            last = now
            logger.info(
                "partition: %s of %s features assigned (%.0f%%) after %.0f s",
                f"{done:,}",
                f"{total:,}",
                100 * done / total,
                now - start,
            )

    return report


def prologue(
    whole, *, standardize: bool, order=None, shuffle: bool = False, random_state=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """What every loop decides before its first group, the same way for every execution.

    Returns the kept features (``whole.valid``, indices), their weights in a group's
    aggregate (:func:`feature_scale`) and the visiting order as positions among the kept
    features: ``order`` restricted to them, then permuted with ``shuffle`` (None: in index
    order).
    """
    from sklearn.utils import check_random_state

    valid = np.flatnonzero(whole.valid)
    scale = feature_scale(whole, standardize)
    visit = _base_order(order, valid, whole.n_features)
    if shuffle:
        perm = check_random_state(random_state).permutation(valid.size)
        visit = perm if visit is None else visit[perm]
    return valid, scale, visit


def feature_scale(whole, standardize: bool) -> np.ndarray:
    """The weight of every kept feature (``whole.valid``) in its group's aggregate, as the
    driver gives it to the basis: ``1 / std`` with ``standardize``, else 1."""
    valid = np.flatnonzero(whole.valid)
    return 1.0 / whole.column_std(ddof=1)[valid] if standardize else np.ones(valid.size)


def _base_order(order, valid: np.ndarray, n_features: int) -> np.ndarray | None:
    """``order`` (over all features) as positions among the ``valid`` ones, or None."""
    if order is None:
        return None
    order = np.asarray(order, dtype=np.int64)
    if order.shape != (n_features,):
        raise InputError(f"order: expected a permutation of {n_features} features")
    where = np.full(n_features, -1, dtype=np.int64)
    where[valid] = np.arange(valid.size)
    base = where[order]
    return base[base >= 0]

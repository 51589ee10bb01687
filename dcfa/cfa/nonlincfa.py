"""NonLinCFA: nonlinear correlated features aggregation, regression (CV-R^2 gap rule)."""

from __future__ import annotations

from numbers import Real
from typing import TYPE_CHECKING

import numpy as np

from dcfa._errors import InputError
from dcfa._validation import Interval
from dcfa.cfa.base import CFA_PARAMETERS, INPUT_PARAMETERS, BaseCFA
from dcfa.cfa.basis import fold_parts
from dcfa.cfa.driver import partition_moments
from dcfa.cfa.folds import Folds
from dcfa.cfa.rules import RULES
from dcfa.stats.moments import Moments

if TYPE_CHECKING:
    from collections.abc import Callable

    import scipy.sparse as sp

__all__ = ["NonLinCFA", "nonlincfa"]


def nonlincfa(
    parts: list[Moments],
    folds: Folds,
    *,
    eps: float = 1e-4,
    standardize: bool = False,
    compare: str = "mean",
    scan: str = "restart",
    shuffle: bool = False,
    random_state: int | np.random.RandomState | None = None,
    neighbors: sp.sparray | sp.spmatrix | None = None,
    neighborhood: str = "group",
    target: int = 0,
    progress: Callable[..., None] | None = None,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """NonLinCFA partition from per-segment moments already gathered: :class:`NonLinCFA`'s
    rule and loop (the estimator reaches the loop through its executions).

    Parameters
    ----------
    parts : list of Moments
        Moments of ``[phi(X), y]`` for every row segment of ``folds``
        (``dcfa.moments(..., segments=folds.bounds)``).
    folds : Folds
        From :func:`dcfa.cfa.folds.make_folds`.
    eps, standardize, compare, scan, shuffle, random_state
        As in :class:`NonLinCFA`.
    neighbors : sparse matrix of shape (D, D), default=None
    target : int, default=0
    progress : callable, default=None
    order : ndarray of shape (D,), default=None
        The order inputs are visited in before any shuffle (see
        :func:`dcfa.cfa.driver.partition_moments`).

    Returns
    -------
    labels : ndarray of shape (n_features,)
        -1 for excluded features.
    """
    if len(parts) != folds.n_segments:
        raise InputError(
            f"parts: expected the moments of the {folds.n_segments} segments of folds, "
            f"got {len(parts)}"
        )
    # each fold's training and test moments: merged row by row when the driver reads a row
    # (MergedMoments), never as new p x p matrices; the driver keeps the group's running sums
    # per fold, so a test never merges anything
    sets, whole = fold_parts(parts, folds)
    return partition_moments(
        sets,
        RULES["nonlincfa"](eps),
        whole=whole,
        standardize=standardize,
        shuffle=shuffle,
        random_state=random_state,
        compare=compare,
        scan=scan,
        neighbors=neighbors,
        neighborhood=neighborhood,
        target=target,
        progress=progress,
        order=order,
    )


class NonLinCFA(BaseCFA):
    """Nonlinear correlated features aggregation (regression).

    Groups inputs ``phi_k(x)`` greedily: a candidate joins the current group when keeping it
    apart improves the cross-validated R^2 of an OLS by at most ``eps``: the R^2 of
    ``y ~ h(group) + phi_j`` minus that of ``y ~ h(group + j)``. Every fold's R^2 is computed
    exactly from per-fold moments gathered in one pass; no model is refitted.

    Parameters
    ----------
    eps : float, default=1e-4
        Largest CV-R^2 gain of a separate feature that still aggregates (>= 0). The papers
        use 1e-2 (everything aggregates) to 1e-6; about ``(1 - R^2) / (n - 1)`` is the
        value the theory suggests.
    cv : int, cross-validation splitter or iterable of (train, test), default=5
        ``K`` contiguous folds without shuffle (``KFold(K)``, the synthetic experiments), a
        splitter with contiguous folds, e.g. ``TimeSeriesSplit(5)`` for time series (the
        real-data experiments), or a list of ``(train, test)`` index arrays of contiguous row
        ranges (scikit-learn's ``check_cv``).
    inputs : {"identity", "square"} or callable, default="identity"
        The inputs ``phi_k``: the features, their squares, or an elementwise function
        (applied blockwise, lazily, on Dask arrays).
    aggregation : {"mean", "sum"}, default="mean"
        ``h``: how a group's inputs are combined (the same partition; outputs differ by the
        group size).
    standardize : bool, default=False
        Aggregate standardised inputs instead of the inputs as they are.
    compare : {"mean", "seed"}, default="mean"
        Test candidates against the group's aggregate (paper) or its first input.
    scan : {"restart", "single"}, default="restart"
        Rescan the remaining inputs after each acceptance (the published experiments) or one
        pass per group (the printed pseudo-code).
    shuffle : bool, default=False
        Visit inputs in a random order (the authors permute columns for their real-data runs).
    random_state : int, RandomState instance or None, default=None
    neighbors : int, sparse matrix or None, default=None
        Restrict candidates to grid neighbours of the group (see :class:`LinCFA`).
    neighborhood : {"group", "seed"}, default="group"
        Neighbours of any member, or of the seed only (see :class:`LinCFA`).
    periodic : "auto", bool or tuple of str, default="auto"
        Which grid dims wrap around for an int ``neighbors`` radius (see :class:`LinCFA`).
    weights : {"area"}, array-like or None, default=None
        How ``transform`` averages a group's cells (see :class:`LinCFA`).
    mode : {"auto", "dense", "series", "grid", "rows"}, default="auto"
        Where the statistics come from (see :class:`LinCFA`): the per-fold ``D x D`` moments,
        the series in memory (any number of cells; ``"auto"`` picks it when the matrices
        do not fit the memory budget), with ``neighborhood="seed"`` the grid moments of
        every row segment (memory O(D k)), or with ``compare="seed"`` and no ``neighbors``
        the column statistics of every row segment, then the seeds' rows of every segment,
        ``row_batch`` seeds per pass (memory O(S row_batch D), ``S`` the row segments).
    row_batch : int, default=256
        ``mode="rows"``: seeds whose rows one pass computes.
    sample_dim : str, default="time"

    Attributes
    ----------
    labels_, n_features_out_, group_sizes_, excluded_, mean_, scale_, moments_, label_map_,
    n_features_in_, feature_names_in_
        As in :class:`LinCFA`; ``moments_`` are those of the inputs over all samples.
    folds_ : Folds
        The row segments and folds used.
    segment_moments_ : list of Moments (or of GridMoments, ``mode="grid"``)
        The moments of each row segment of ``folds_`` (pass them to ``fit(..., moments=)`` to
        refit without a pass); ``mode="dense"`` only.
    execution_ : str
        The execution that ran (see ``mode``).

    Notes
    -----
    Algorithm 1 of the NonLinCFA/GenLinCFA paper with the authors' conventions (the Algorithms
    page of the documentation, section "NonLinCFA"): the printed ``R2 - R1 - eps`` has its
    labels swapped, and the rule evaluated is ``CV-R2(biv) - CV-R2(uni) <= eps``. R^2 values are
    cross-validated on the training data, as in the authors' code; OLS R^2 does not change
    under the z-scoring that code applies. With ``scan="restart"``, the first passing input in
    order joins and the scan starts again, as in their code.

    Memory: ``mode="dense"`` holds one ``(D+1) x (D+1)`` float64 matrix per row segment of
    the folds, as its upper tiles on Dask input (about half of it: 2.7 matrices for ``cv=5``;
    the partition reads the folds' training sets row by row, without merging them into new
    matrices; the merge of all rows, ``moments_``, is built tile by tile when first read).
    Before the pass, ``fit`` compares them with the Dask config key ``dcfa.memory_budget``
    (default 0.5 of the available memory; see :mod:`dcfa.memory`): ``mode="auto"`` then runs
    the series execution (``n x D`` float64 in memory, the same partition), an explicit
    ``"dense"`` raises :class:`dcfa.MemoryBudgetError` (a ``ValueError``), computing nothing.

    References
    ----------
    P. Bonetti, A. M. Metelli, M. Restelli. "Nonlinear Feature Aggregation: Two Algorithms
    driven by Theory" (NonLinCFA, GenLinCFA).

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa import NonLinCFA
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(400, 2))
    >>> X = np.repeat(z, 3, axis=1) + 0.3 * rng.normal(size=(400, 6))
    >>> y = z[:, 0] - z[:, 1] + rng.normal(size=400)
    >>> NonLinCFA(eps=1e-3).fit(X, y).labels_
    array([0, 0, 0, 1, 1, 1])
    """

    _parameter_constraints: dict = {
        **CFA_PARAMETERS,
        **INPUT_PARAMETERS,
        "eps": [Interval(Real, 0, 1, closed="left")],
        "cv": ["cv_object"],
    }

    def __init__(
        self,
        *,
        eps=1e-4,
        cv=5,
        inputs="identity",
        aggregation="mean",
        standardize=False,
        compare="mean",
        scan="restart",
        shuffle=False,
        random_state=None,
        neighbors=None,
        neighborhood="group",
        periodic="auto",
        weights=None,
        mode="auto",
        row_batch=256,
        sample_dim="time",
    ):
        self.eps = eps
        self.cv = cv
        self.inputs = inputs
        self.aggregation = aggregation
        self.standardize = standardize
        self.compare = compare
        self.scan = scan
        self.shuffle = shuffle
        self.random_state = random_state
        self.neighbors = neighbors
        self.neighborhood = neighborhood
        self.periodic = periodic
        self.weights = weights
        self.mode = mode
        self.row_batch = row_batch
        self.sample_dim = sample_dim

    def _accept(self):
        return RULES["nonlincfa"](self.eps)

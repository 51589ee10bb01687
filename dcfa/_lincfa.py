"""LinCFA: linear correlated features aggregation (Bonetti, Metelli & Restelli, 2024)."""

from __future__ import annotations

from functools import partial
from numbers import Integral

import numpy as np

from dcfa._base import BaseCFA
from dcfa._moments import MISSING_POLICIES, Moments, moments
from dcfa._validation import Interval, StrOptions
from dcfa.neighbors import resolve_neighbors
from dcfa.partition import COMPARE, NEIGHBORHOODS, SCANS, STRATEGIES, partition_moments
from dcfa.rules import lincfa_rule

__all__ = ["LinCFA", "lincfa"]


def lincfa(
    moments: Moments,
    *,
    shuffle: bool = True,
    random_state=None,
    strict: bool = True,
    compare: str = "seed",
    scan: str = "single",
    strategy: str = "sequential",
    neighbors=None,
    neighborhood: str = "group",
    target: int = 0,
    progress=None,
) -> np.ndarray:
    """LinCFA partition of the features from their moments (the function behind :class:`LinCFA`).

    Parameters
    ----------
    moments : Moments
        Moments of ``[X, y]`` (:func:`dcfa.moments`). Excluded features (all-NaN, constant, ...)
        get label -1.
    shuffle, random_state, strict, compare, scan, strategy
        As in :class:`LinCFA`.
    neighbors : sparse matrix of shape (D, D), default=None
        Only features adjacent to a member of the group (or to its seed) are candidates.
    neighborhood : {"group", "seed"}, default="group"
        As in :class:`LinCFA`.
    target : int, default=0
        Which target column of ``moments`` to use.
    progress : callable, default=None
        ``progress(n_assigned, n_features)`` after each group.

    Returns
    -------
    labels : ndarray of shape (n_features,)
        Group of every feature, numbered in order of creation; -1 for excluded features.
    """
    return partition_moments(
        moments,
        partial(lincfa_rule, strict=strict),
        standardize=True,
        shuffle=shuffle,
        random_state=random_state,
        compare=compare,
        scan=scan,
        strategy=strategy,
        neighbors=neighbors,
        neighborhood=neighborhood,
        target=target,
        progress=progress,
    )


class LinCFA(BaseCFA):
    """Linear correlated features aggregation.

    Partitions the features into groups whose mean predicts the target no worse (in the
    bias-variance sense of the paper) than the features kept apart, and replaces each group
    by the mean of its standardised members. The test (journal Algorithm 1, Eq. 17) needs
    only correlations, so one pass of :func:`dcfa.moments` over the data suffices.

    Parameters
    ----------
    shuffle : bool, default=True
        Visit the features in a random order (the journal's Algorithm 1; the 2021 preprint and
        the authors' synthetic experiments use the given order).
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffle.
    strict : bool, default=True
        Aggregate when the correlation is strictly above the threshold (journal); ``False``
        for ``>=`` (2021 preprint, authors' code).
    compare : {"seed", "mean"}, default="seed"
        Test a candidate against the first feature of the group (paper) or against the mean
        of the group so far (the authors' climate code).
    scan : {"single", "restart"}, default="single"
        One forward pass per group (paper) or rescan the remaining features after each
        acceptance. Identical for ``compare="seed"`` without ``neighbors``.
    strategy : {"sequential", "greedy"}, default="sequential"
        ``"greedy"``: the order-free variant of Remark 13 (repeatedly merge the most
        correlated pair of groups that passes the test); ignores ``shuffle``, ``compare``
        and ``scan``.
    neighbors : int, sparse matrix of shape (n_features, n_features) or None, default=None
        Restrict candidates to features adjacent to the group: an int radius in grid steps
        (needs an xarray input; the grid is its feature dims) or an adjacency.
    neighborhood : {"group", "seed"}, default="group"
        With ``neighbors``: candidates adjacent to any member (groups grow across the grid, as
        in the authors' climate runs) or to the seed only (a group stays within a radius of its
        seed).
    missing : {"exclude", "pairwise"}, default="exclude"
        ``"exclude"``: features with missing values are left out (label -1, reported in
        ``excluded_``). ``"pairwise"``: pairwise-complete correlations; ``transform`` then
        averages the members observed in each sample.
    sample_dim : str, default="time"
        For xarray input, the dim that indexes samples.

    Attributes
    ----------
    labels_ : ndarray of shape (n_features_in_,)
        Group of each input feature; -1 for excluded features.
    n_features_out_ : int
        Number of groups.
    group_sizes_ : ndarray of shape (n_features_out_,)
    excluded_ : dict of int to str
        Excluded features and why (all-NaN, gappy, constant).
    mean_, scale_ : ndarray of shape (n_features_in_,)
        Each feature's mean and ``1/std``: the group value is the mean of
        ``scale_ * (x - mean_)`` over its members. NaN for excluded features.
    moments_ : Moments
        The moments the partition was computed from (save them to reuse the pass).
    label_map_ : xarray.DataArray
        ``labels_`` on the original feature dims (xarray input only).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` has string column names (pandas).

    Notes
    -----
    A feature ``j`` joins the group of the seed ``i`` iff

    .. math::

        \\hat\\rho_{ij} > 1 - \\frac{2 s^2}{(n-1)(\\hat w_i - \\hat w_j)^2},

    with :math:`\\hat w`, :math:`s^2 = RSS/(n-3)` from the OLS of ``y`` on the standardised pair
    (Eq. 17 and Eq. C12). Written in correlations (reference/lincfa.md section 2.6) it is
    :math:`(r_i - r_j)^2 < 2 (1 - R^2_{ij})(1 - \\rho_{ij}) / (n - 3)`, which is what is
    evaluated, for all candidates of a group at once.

    Differences from the printed pseudo-code: features already in a group are not tested
    again (the pseudo-code omits that check; the authors' real-data code has it), so the
    result is a partition. Features are standardised with ``ddof=1``; the authors'
    ``StandardScaler`` (``ddof=0``) changes the threshold by a factor ``n/(n-1)``.

    References
    ----------
    P. Bonetti, A. M. Metelli, M. Restelli. "Interpretable linear dimensionality reduction
    based on bias-variance analysis". Data Mining and Knowledge Discovery, 2024.

    Examples
    --------
    >>> import numpy as np
    >>> from dcfa import LinCFA
    >>> rng = np.random.default_rng(0)
    >>> base = rng.normal(size=(500, 1))
    >>> X = np.hstack([base + 0.1 * rng.normal(size=(500, 3)), rng.normal(size=(500, 2))])
    >>> y = X[:, :3].sum(axis=1) + X[:, 3] - X[:, 4] + rng.normal(size=500)
    >>> model = LinCFA(shuffle=False).fit(X, y)
    >>> model.labels_
    array([0, 0, 0, 1, 2])
    >>> model.transform(X).shape
    (500, 3)
    """

    _parameter_constraints: dict = {
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "strict": ["boolean"],
        "compare": [StrOptions(set(COMPARE))],
        "scan": [StrOptions(set(SCANS))],
        "strategy": [StrOptions(set(STRATEGIES))],
        "neighbors": [
            None,
            Interval(Integral, 1, None, closed="left"),
            "sparse matrix",
            "array-like",
        ],
        "neighborhood": [StrOptions(set(NEIGHBORHOODS))],
        "missing": [StrOptions(set(MISSING_POLICIES))],
        "sample_dim": [str],
    }

    def __init__(
        self,
        *,
        shuffle=True,
        random_state=None,
        strict=True,
        compare="seed",
        scan="single",
        strategy="sequential",
        neighbors=None,
        neighborhood="group",
        missing="exclude",
        sample_dim="time",
    ):
        self.shuffle = shuffle
        self.random_state = random_state
        self.strict = strict
        self.compare = compare
        self.scan = scan
        self.strategy = strategy
        self.neighbors = neighbors
        self.neighborhood = neighborhood
        self.missing = missing
        self.sample_dim = sample_dim

    def _check_params(self, inp, Y):
        adjacency = resolve_neighbors(self.neighbors, inp.n_features, inp.layout)
        if self.strategy == "greedy" and adjacency is not None:
            raise ValueError("neighbors: not supported with strategy='greedy'")
        return {"neighbors": adjacency}

    def _fit_moments(self, data, Y, **extras):
        return moments(data, Y, missing=self.missing)

    def _partition(self, m, inp, neighbors=None):
        return lincfa(
            m,
            shuffle=self.shuffle,
            random_state=self.random_state,
            strict=self.strict,
            compare=self.compare,
            scan=self.scan,
            strategy=self.strategy,
            neighbors=neighbors,
            neighborhood=self.neighborhood,
        )

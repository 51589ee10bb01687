"""LinCFA: linear correlated features aggregation (Bonetti, Metelli & Restelli, 2024)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dcfa._errors import InputError
from dcfa._validation import StrOptions
from dcfa.cfa.base import CFA_PARAMETERS, BaseCFA
from dcfa.cfa.basis import seed_rows
from dcfa.cfa.driver import STRATEGIES, drive, partition_moments
from dcfa.cfa.executions._base import as_dask
from dcfa.cfa.grid_partition import grid_partition
from dcfa.cfa.rules import RULES
from dcfa.stats.columns import ColumnMoments
from dcfa.stats.grid import GridMoments
from dcfa.stats.moments import MISSING_POLICIES, Moments

if TYPE_CHECKING:
    from collections.abc import Callable

    import dask.array as da
    import scipy.sparse as sp

__all__ = ["LinCFA", "lincfa"]


def lincfa(
    moments: Moments,
    *,
    shuffle: bool = True,
    random_state: int | np.random.RandomState | None = None,
    strict: bool = True,
    compare: str = "seed",
    scan: str = "single",
    strategy: str = "sequential",
    neighbors: sp.sparray | sp.spmatrix | None = None,
    neighborhood: str = "group",
    target: int = 0,
    progress: Callable[..., None] | None = None,
    radius: int | None = None,
    data: da.Array | None = None,
    row_batch: int = 256,
    order: np.ndarray | None = None,
) -> np.ndarray:
    """LinCFA partition of the features from statistics already gathered.

    :class:`LinCFA`'s rule and loop, for moments a user holds (a saved :func:`dcfa.moments`,
    say); the estimator reaches the same loop through its executions, not through this.

    Parameters
    ----------
    moments : Moments, GridMoments or ColumnMoments
        Moments of ``[X, y]`` (:func:`dcfa.moments`; the grid execution's
        :func:`dcfa.grid_moments`, with ``radius``; or the row execution's column moments, with
        ``data``). Excluded features (all-NaN, constant, ...) get label -1.
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
    radius : int, default=None
        Neighbour mode: candidates are the cells within ``radius`` of the seed.
    data : dask.array.Array of shape (n_samples, n_features), default=None
        The rows execution: the data the column moments come from; rows are computed from
        it.
    row_batch : int, default=256
        The rows execution: rows computed per pass.
    order : ndarray of shape (n_features,), default=None
        The order features are visited in before any shuffle (see
        :func:`dcfa.cfa.driver.partition_moments`); not used by the row execution.

    Returns
    -------
    labels : ndarray of shape (n_features,)
        Group of every feature, numbered in order of creation; -1 for excluded features.
    """
    accept = RULES["lincfa"](strict)
    if isinstance(moments, GridMoments):
        if radius is None:
            raise InputError("radius: the grid execution needs the radius of the seed's cells")
        return grid_partition(
            moments,
            accept,
            radius=radius,
            shuffle=shuffle,
            random_state=random_state,
            compare=compare,
            scan=scan,
            progress=progress,
            order=order,
        )
    if isinstance(moments, ColumnMoments):
        if data is None:
            raise InputError("data: the row execution computes rows from the data; pass it")
        whole, make_basis, _ = seed_rows(as_dask(data), moments, batch_size=row_batch)
        return drive(
            whole,
            make_basis,
            accept,
            standardize=True,
            shuffle=shuffle,
            random_state=random_state,
            compare="seed",
            scan=scan,
            progress=progress,
        )
    return partition_moments(
        moments,
        accept,
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
        order=order,
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
        and ``scan``. With ``neighbors`` only adjacent groups merge (a merged group borders
        every neighbour of its members), so every group is one connected patch; it runs on
        the dense moments (``mode="dense"``).
    neighbors : int, sparse matrix of shape (n_features, n_features) or None, default=None
        Restrict candidates to features adjacent to the group: an int radius in grid steps
        (needs an xarray input; the grid is its feature dims) or an adjacency (a SciPy sparse
        matrix or array, or a dense array: every non-zero entry, of any sign, is an edge in
        both directions; the diagonal is ignored; NaN is refused). With or
        without it, a group never holds features of two blocks of an xarray input: entries of
        its ``variable``, ``window`` or ``lag`` dims (or stacked levels;
        :data:`dcfa.neighbors.BLOCK_DIMS`).
    neighborhood : {"group", "seed"}, default="group"
        With ``neighbors``: candidates adjacent to any member (groups grow across the grid, as
        in the authors' climate runs) or to the seed only (a group stays within a radius of its
        seed).
    periodic : "auto", bool or tuple of str, default="auto"
        With an int ``neighbors`` radius: which grid dims wrap around, so that the first and
        last longitude columns of a global grid are neighbours. ``"auto"``: a longitude dim
        (named ``lon``/``longitude``, or with ``units="degrees_east"`` /
        ``standard_name="longitude"``) whose coordinate is regularly spaced with spacing x size
        = 360 degrees; a regional grid stays non-periodic. ``True``: every longitude dim;
        ``False``: none (the grid as given); a tuple names the dims. Along a periodic
        longitude, features are visited from longitude 0 east (modulo 360), so 0..360,
        -180..180 or a grid rotated across its seam give the same partition. Ignored
        without an int radius.
    mode : {"auto", "dense", "series", "grid", "rows"}, default="auto"
        Which statistics are computed (:mod:`dcfa.cfa.executions`); ``"auto"`` takes the
        first of dense, series, grid, rows that runs the options within the memory
        budget. ``"dense"``: the ``D x D`` matrix (every option works). ``"series"``: the
        cells' series in memory (not ``strategy="greedy"`` or ``missing="pairwise"``).
        ``"grid"``: only the moments of cells near each other on the grid (memory
        O(D k), time linear in D); needs an xarray X whose feature dims are the grid, an int
        ``neighbors`` radius, ``neighborhood="seed"`` and every grid dim at least
        ``2 r + 1`` cells wide (``r`` the radius, twice it for ``compare="mean"``).
        ``"rows"``: per-feature statistics, then the correlation rows of the features
        that open a group, ``row_batch`` at a time (memory O(row_batch D)); needs
        ``compare="seed"`` and no ``neighbors``. All give exactly the dense execution's partition
        under the same options.
    row_batch : int, default=256
        Seed-row mode: rows computed per pass over the data.
    missing : {"exclude", "pairwise"}, default="exclude"
        ``"exclude"``: features with missing values are left out (label -1, reported in
        ``excluded_``). ``"pairwise"``: pairwise-complete correlations; ``transform`` then
        averages the members observed in each sample.
    weights : {"area"}, array-like or None, default=None
        How ``transform`` averages a group's cells. None: the plain mean (the papers').
        ``"area"``: weighted by the cosine of each cell's latitude (a ``lat`` / ``latitude``
        coordinate of an xarray input), so a region's series is its area-weighted mean; an
        array of one non-negative weight per feature (or on the grid) for other weights. The
        partition is decided as the papers decide it (from plain means); only the reported
        series change. Recorded in ``feature_weights_``.
    sample_dim : str, default="time"
        For xarray input, the dim that indexes samples.

    Attributes
    ----------
    labels_ : ndarray of shape (``n_features_in_``,)
        Group of each input feature; -1 for excluded features.
    n_features_out_ : int
        Number of groups.
    group_sizes_ : ndarray of shape (``n_features_out_``,)
    excluded_ : dict of int to str
        Excluded features and why (all-NaN, gappy, constant).
    mean_, scale_ : ndarray of shape (``n_features_in_``,)
        Each feature's mean and ``1/std``: the group value is the mean of
        ``scale_ * (x - mean_)`` over its members. NaN for excluded features.
    std_ : ndarray of shape (``n_features_in_``,)
        Each feature's standard deviation at fit, of its inputs ``phi(x)`` for an estimator
        that takes them (NaN for excluded features): ``transform``
        warns when an in-memory ``X`` lies far outside ``mean_`` and ``std_`` (a median of
        30 of them off, or 20 times the spread either way), as a field in other units does.
    n_samples_fit_ : int
        The samples of the fit.
    moments_ : Moments
        The moments the partition was computed from (save them to reuse the pass); the
        column statistics (:class:`~dcfa.ColumnMoments`-like) for the executions without a
        ``D x D`` matrix.
    execution_ : str
        The execution that ran (see ``mode``).
    label_map_ : xarray.DataArray
        ``labels_`` on the original feature dims (xarray input only).
    n_features_in_ : int
    feature_weights_ : ndarray of shape (``n_features_in_``,) or None
        The weights ``transform`` averages a group's cells with (``weights``); None for the
        plain mean.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only when ``X`` has string column names (pandas).

    Notes
    -----
    A feature ``j`` joins the group of the seed ``i`` iff

    .. math::

        \\hat\\rho_{ij} > 1 - \\frac{2 s^2}{(n-1)(\\hat w_i - \\hat w_j)^2},

    with :math:`\\hat w`, :math:`s^2 = RSS/(n-3)` from the OLS of ``y`` on the standardised pair
    (Eq. 17 and Eq. C12). Written in correlations (the Algorithms page, section "LinCFA") it is
    :math:`(r_i - r_j)^2 < 2 (1 - R^2_{ij})(1 - \\rho_{ij}) / (n - 3)`, which is what is
    evaluated, for all candidates of a group at once.

    Differences from the printed pseudo-code: features already in a group are not tested
    again (the pseudo-code omits that check; the authors' real-data code has it), so the
    result is a partition. Features are standardised with ``ddof=1``; the authors'
    ``StandardScaler`` (``ddof=0``) changes the threshold by a factor ``n/(n-1)``.

    Memory: ``mode="dense"`` holds a ``(D+1) x (D+1)`` float64 matrix (26.8 GiB for
    ``D = 60 000``; on Dask input its upper tiles, about half of it). Before the pass,
    ``fit`` estimates the bytes it will hold against the Dask config key
    ``dcfa.memory_budget`` (default 0.5 of the available memory; see :mod:`dcfa.memory`):
    ``mode="auto"`` then runs the next execution that fits (the series, ``n x D`` float64),
    an explicit ``mode="dense"`` raises :class:`dcfa.MemoryBudgetError` (a ``ValueError``),
    computing nothing.

    References
    ----------
    P. Bonetti, A. M. Metelli, M. Restelli. "Interpretable linear dimensionality reduction
    based on bias-variance analysis". Data Mining and Knowledge Discovery, 2024.

    Examples
    --------
    Three noisy copies of one signal, and two signals of their own: the copies are averaged
    where the target's noise hides their differences.

    >>> import numpy as np
    >>> from dcfa import LinCFA
    >>> rng = np.random.default_rng(0)
    >>> base = rng.normal(size=(500, 1))
    >>> X = np.hstack([base + 0.1 * rng.normal(size=(500, 3)), rng.normal(size=(500, 2))])
    >>> y = X[:, :3].sum(axis=1) + X[:, 3] - X[:, 4] + 3 * rng.normal(size=500)
    >>> model = LinCFA(shuffle=False).fit(X, y)
    >>> model.labels_
    array([0, 0, 0, 1, 2])
    >>> model.transform(X).shape
    (500, 3)
    """

    _parameter_constraints: dict = {
        **CFA_PARAMETERS,
        "strict": ["boolean"],
        "strategy": [StrOptions(set(STRATEGIES))],
        "missing": [StrOptions(set(MISSING_POLICIES))],
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
        periodic="auto",
        mode="auto",
        row_batch=256,
        missing="exclude",
        weights=None,
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
        self.periodic = periodic
        self.mode = mode
        self.row_batch = row_batch
        self.missing = missing
        self.weights = weights
        self.sample_dim = sample_dim

    def _accept(self):
        return RULES["lincfa"](self.strict)

"""``RegionsCV``: a small map of contiguous regions chosen from the data, no tolerance to pick.

The recommended call of dcfa on a gridded field. Every decision of the pairwise rules
(LinCFA, NonLinCFA, GenLinCFA) is a test between single noisy cells, or between a cell and a
group; within one region such tests fail often enough to fragment it, and between regions a
loose tolerance lets them pass. ``RegionsCV`` decides on group means instead, in two stages,
and lets time-blocked cross-validation decide how far each stage goes:

1. **Pieces** (:func:`dcfa.cfa.hierarchy.correlation_merges`). Adjacent groups merge, the
   most correlated pair of group means first (the order-free greedy of LinCFA's Remark 13 on
   the means of means of Remark 12), for as long as the best pair left is correlated above a
   *level*. The pieces are patches that vary together; they depend on ``X`` alone.
2. **Regions** (:func:`dcfa.cfa.hierarchy.relevance_merges`). Adjacent pieces merge, the
   least relevant pair first (a pair's relevance is the larger absolute correlation of its
   two means with the target): pieces that say nothing about the target merge into a
   background, and a relevant piece stays apart until the end. With ``signal=True`` the
   adjacent pieces that carry one signal of the target merge first
   (:func:`dcfa.cfa.signal_order.signal_merges`: their means correlate at 0.3 or above, and
   their merged mean fits the target as well as the two do by an F test at 1 %), so that a
   region's cells become one group where the field alone does not set the region apart and
   single cells are too noisy to tell (a basin's soil moisture). A second order is scored
   next to it, from each finest piece's weight per cell in a ridge regression of the target
   on all cells (:func:`dcfa.cfa.selection.ridge_weights`): adjacent pieces of alike weight
   merge first (:func:`dcfa.cfa.hierarchy.ward_merges`) down to :data:`WARD_GROUPS` groups,
   then the pair whose merged mean loses least of ridge's prediction
   (:func:`dcfa.cfa.hierarchy.projection_merges`), so that neighbours whose means carry one
   signal merge even where their weights differ. On a field of discrete regions the
   relevance order reaches the best skill with fewer regions; on a smooth field, where the
   target's pattern spans the whole grid, this order approaches ridge's skill with about 30
   regions.
3. **Selection** (:func:`dcfa.cfa.selection.within_noise`). For every level and every number
   of regions, each fold of a purged blocked K-fold (:func:`dcfa.skill.blocked_folds`)
   merges the pieces on its training months (both orders) and scores a regression of the
   target on the region means on its test months: ridge on the standardised means, its
   penalty by leave-one-out on the training months (``regression="ridge"``, the regression a
   forecaster fits on the regions; :func:`dcfa.cfa.selection.ridge_skill`), or OLS. The map
   kept is the smallest whose skill is within ``parsimony`` standard errors (of the paired
   differences over the folds) of the best, among the relevance order's maps of at most
   ``max_groups`` regions. When the
   relevance order's best map is not within the noise of the second order's best map, and
   behind it by more than :data:`dcfa.cfa.selection.LEAST_GAIN` (0.01) in mean skill, the
   second order's best map is kept instead (:func:`dcfa.cfa.selection.first_within_noise`):
   its maps coarsen one pattern, so its skill rises with every region it keeps, and its
   most skilful map within ``max_groups`` is kept, not its smallest within the noise. That
   map is cut from smoothed weights (each piece's weight averaged with its neighbours',
   :data:`SMOOTHING` times, before Ward's criterion): weights fitted on a few hundred months
   are noisy from piece to piece, and the smoothing denoises a pattern that spans the grid.
   The choice of the order is made without it, since a smoothness prior would lift the
   second order's skill on a field of discrete regions too.

Every feature out is the mean of its region's cells (their size-weighted mean: no cell is
rescaled), so a region's series is in the field's units.

This module holds the estimator and its choice; the pieces, and the per-segment sums from
which every fold's second stage and skill are computed, are in :mod:`dcfa.cfa.pieces`.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from numbers import Integral, Real
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from dcfa._compute import one_blas_thread
from dcfa._errors import InputError, NothingToFitError, PatchesWarning, outside_stacklevel
from dcfa._validation import (
    Interval,
    StrOptions,
    check_X,
    validate_params,
)
from dcfa.cfa.agreement import comembership
from dcfa.cfa.base import BaseCFA, checked_moments
from dcfa.cfa.driver import COMPLETE_GRAPH_LIMIT
from dcfa.cfa.executions import EXECUTIONS
from dcfa.cfa.hierarchy import PAIR_BYTES, cut
from dcfa.cfa.pieces import FirstStage, Pieces, Segments, first_stage, kept_adjacency
from dcfa.cfa.selection import (
    REGRESSIONS,
    first_within_noise,
    json_scores,
    regression,
    warn_if_no_skill,
    within_noise,
)
from dcfa.cfa.signal_order import gram_bytes
from dcfa.geo import group_mean

if TYPE_CHECKING:
    import dask.array as da
    from numpy.typing import ArrayLike
    from sklearn.base import BaseEstimator

    from dcfa.cfa.options import FitOptions

__all__ = [
    "RegionsCV",
    "LEVELS",
    "ORDERS",
    "SERIES_COPIES",
    "SIZES",
    "SMOOTHING",
    "WARD_GROUPS",
]


#: default levels of the first stage: the correlation of two pieces' means below which they
#: stay apart (high: many small pieces; low: few large ones)
LEVELS = (0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)
#: the driver's peak over the series' size (with :func:`dcfa.cfa.series.series_bytes`' 15 %):
#: the series, whose memory the finest pieces' sums then take over, and one coarser level's
#: pieces' sums (the merges' rows while the pieces are made are fewer); measured 1.55x (0.25
#: degree) to 1.71x (1 degree) the float64 series, 600 months, with tracemalloc, no cluster
SERIES_COPIES = 1.5
#: and the blocks the merges and the ridge weights work in, a few at once: what dominates
#: on a small field
WORKING_BYTES = 4 * PAIR_BYTES
#: the numbers of regions the cross-validation scores (those the path reaches): a map of more
#: than 100 regions is no small map
SIZES = (*range(1, 31), 35, 40, 45, 50, 60, 70, 80, 100)
#: groups of alike ridge weight the ``"weights"`` order starts its projection merges from: Ward's
#: criterion is cheap and sound while groups are small (neighbours' weights are alike); the
#: covariance of the groups' means decides once they are large. Ten times the largest map
#: scored, so every scored map is made by the projection merges.
WARD_GROUPS = 10 * max(SIZES)
#: rounds of neighbourhood means of the ridge weights that the ``"weights"`` order's kept map
#: is cut from (one round averaged too little on smooth fields; see the design notes)
SMOOTHING = 3
#: the second stage's merge orders: ``"relevance"`` (a background and the relevant pieces)
#: and ``"weights"`` (regions made from ridge's weights, for fields without discrete regions)
ORDERS = ("relevance", "weights")


class RegionsCV(BaseCFA):
    """Contiguous regions whose means predict the target; how many, chosen by cross-validation.

    A map of a few regions, each a patch of neighbouring cells that vary together, from a
    field and a target that nobody has looked at before: no tolerance to set. See the module
    :mod:`dcfa.cfa.regions` for the two stages and the selection.

    Parameters
    ----------
    neighbors : int, sparse matrix or None, default=1
        Which cells may share a region: an int radius in grid steps on an
        :class:`xarray.DataArray` (its feature dims are the grid; cells of different
        variables, time scales or lags never share one), or a ``D x D`` adjacency. None makes
        every pair of features neighbours (at most 5 000 features).
    periodic : "auto", bool or sequence of str, default="auto"
        Grid dims that wrap around (``"auto"``: a global longitude), as in :class:`LinCFA`.
    max_groups : int or None, default=30
        The most regions a map may have: a map a reader can take in. The ``"weights"``
        order's map, when kept, is its most skilful of at most this many regions (None: of
        at most 100). Cells in more separate patches than this (the enclosed seas of a fine
        land mask) make a region each, and leave room for ``max_groups`` more, with a
        warning.
    parsimony : float, default=1.0
        How many standard errors below the best cross-validated skill the chosen (smallest)
        map may be. 0 takes the most skilful map.
    regression : {"ridge", "ols"}, default="ridge"
        The regression on the region means that scores every candidate map, and that the map
        is chosen for (:meth:`regressor` makes it; :func:`dcfa.forward_cv` fits it after
        this estimator): ``"ridge"`` is ``StandardScaler() -> RidgeCV`` (the penalty by
        leave-one-out on the training months), ``"ols"`` is ``LinearRegression()``. Ridge
        keeps a region that carries a little of the signal at a small cost, so its maps may
        hold a few more regions (on the ENSO comparison they predict better: up to 0.09 R²).
    levels : sequence of float, default=:data:`LEVELS`
        Correlations in (-1, 1] at which the first stage stops, each giving its own pieces.
    orders : sequence of {"relevance", "weights"}, default=:data:`ORDERS`
        The second stage's merge orders the cross-validation chooses among. The relevance
        order's map is kept unless its best map falls out of the noise of the best
        ``"weights"`` map (regions made from ridge's weights, which suit smooth fields) and
        behind it by more than :data:`dcfa.cfa.selection.LEAST_GAIN`.
        ``("relevance",)`` scores the first only (faster: no ridge regression and no second
        agglomeration per fold).
    signal : bool, default=False
        Before the relevance order, merge the adjacent groups that carry one signal of the
        target (:func:`dcfa.cfa.signal_order.signal_merges`: means correlated at 0.3 or above,
        and a merged mean that fits the target as well as the two by an F test at 1 %). Where
        a box of cells drives the target and the field does not set it apart, the relevance
        order alone leaves the box's cells as regions of one cell; with ``signal=True`` they
        form one region. It costs about twice the fit (the products of the groups its
        rounds make are computed on every fold's months), holds the merged groups' sums
        beside the pieces', and once 4 096 groups or fewer are left, their products (up to
        128 MiB) and a copy of their series, which the memory check counts
        (:func:`dcfa.cfa.signal_order.gram_bytes`). It meets every goal of the panel that
        the default meets, and is not the default: on the ENSO comparison it is 0.07 R²
        behind it at lead 0 with the wind, and at 0.25 degree (725 465 cells, 500 months)
        a fit did not end in 27 minutes, against 95 s for the default (the panel page and
        the design notes).
    n_splits : int, default=5
        Blocks of the purged blocked K-fold cross-validation.
    gap : int, default=0
        Samples left out on either side of each test block (the forecast lead, or the longest
        time-scale window: no training target then shares a month with the test block).
    sample_dim : str, default="time"

    Attributes
    ----------
    labels_ : ndarray of shape (``n_features_in_``,)
        The region of each feature, -1 for excluded ones (no finite value, constant).
    label_map_ : xarray.DataArray
        ``labels_`` on the input's grid (xarray input).
    n_features_out_ : int
        Regions.
    level_ : float
        The level of the chosen map's pieces.
    order_ : str
        The merge order of the chosen map (``"relevance"`` or ``"weights"``).
    n_pieces_ : dict of float to int
        Pieces at each level.
    n_patches_ : int
        How many separate patches the kept cells form (each variable, window and lag apart):
        no map of contiguous regions has fewer regions.
    cv_r2_ : ndarray of shape (n_splits,)
        The chosen map's test R^2 in each fold of the selection (optimistic, as the best of
        many maps; :func:`dcfa.forward_cv` of the estimator is the honest estimate).
    cv_path_ : xarray.Dataset
        ``r2`` (level, n_groups, fold): each candidate map's test R^2 per fold, of the
        regression on its region means (``regression``, also in the attributes; NaN where
        the path does not reach that size), ``mean_r2`` (level, n_groups), ``n_pieces`` (level),
        the same for the ``"weights"`` order on the finest level's pieces (``r2_weights``:
        n_groups, fold; ``mean_r2_weights``: n_groups; NaN when not scored) and for its maps
        from smoothed weights, scored when that order is kept (``r2_smoothed``,
        ``mean_r2_smoothed``), and the folds' test blocks (``test_start``, ``test_stop``:
        fold).
    stability_ : ndarray of shape (``n_features_in_``,)
        For each cell, the mean over the folds of the Jaccard index of its region in the
        chosen map and its region in the map the fold chose at the same level and size on
        its training months: 1 where the region recurs cell for cell. NaN for excluded cells.
    stability_map_ : xarray.DataArray
        ``stability_`` on the grid (xarray input).
    group_stability_ : ndarray of shape (``n_features_out_``,)
        Each region's mean ``stability_`` over its cells: how much the region recurs in the
        folds' maps, 1 when every fold made it cell for cell.
    fold_ari_ : ndarray of shape (n_splits,)
        Adjusted Rand index of each fold's map against the chosen map (over the kept cells).
    group_sizes_, excluded_, mean_, scale_, n_features_in_, feature_names_in_
        As in :class:`LinCFA`; ``scale_`` is 1 (regions are plain means of their cells).

    Warns
    -----
    dcfa.NoSkillWarning
        When the chosen map's mean CV R^2 is <= 0, or within one standard error of 0 over
        the folds: it predicts no better than the climatology.

    Notes
    -----
    The pieces depend on ``X`` alone: they are made once, from all samples, as an EOF basis
    is. Everything the target enters (which pieces merge into regions, and how many regions)
    is decided in every fold on its training samples only. For an honest estimate of skill,
    cross-validate the whole estimator (:func:`dcfa.forward_cv`), which refits it per fold.

    Memory: the kept features' series are held on the driver (``n x D`` float64, as the
    series execution of :class:`GenLinCFA`), with the merged groups' sums while the pieces
    are made; the finest pieces' sums then take the series' memory, and one coarser level's
    sums are held at a time while they are scored: about :data:`SERIES_COPIES` times the
    series' size at the peak. :class:`dcfa.MemoryBudgetError` is raised before any pass when
    that would not fit ``dcfa.memory_budget``.

    Examples
    --------
    >>> import dcfa
    >>> ds = dcfa.datasets.make_regions_field(240, (18, 36), 6, n_active=2, seed=1)
    >>> model = dcfa.RegionsCV().fit(ds.field, ds.target)
    >>> model.n_features_out_ <= 6
    True
    """

    _parameter_constraints: dict = {
        "neighbors": [
            None,
            Interval(Integral, 1, None, closed="left"),
            "sparse matrix",
            "array-like",
        ],
        "periodic": [StrOptions({"auto"}), "boolean", tuple, list],
        "max_groups": [None, Interval(Integral, 1, None, closed="left")],
        "parsimony": [Interval(Real, 0, None, closed="left")],
        "regression": [StrOptions(REGRESSIONS.keys())],  # live: an entry added later counts
        "levels": ["array-like"],
        "orders": [tuple, list],
        "signal": ["boolean"],
        "n_splits": [Interval(Integral, 2, None, closed="left")],
        "gap": [Interval(Integral, 0, None, closed="left")],
        "sample_dim": [str],
    }

    def __init__(
        self,
        *,
        neighbors=1,
        periodic="auto",
        max_groups=30,
        parsimony=1.0,
        regression="ridge",
        levels=LEVELS,
        orders=ORDERS,
        signal=False,
        n_splits=5,
        gap=0,
        sample_dim="time",
    ):
        self.neighbors = neighbors
        self.periodic = periodic
        self.max_groups = max_groups
        self.parsimony = parsimony
        self.regression = regression
        self.levels = levels
        self.orders = orders
        self.signal = signal
        self.n_splits = n_splits
        self.gap = gap
        self.sample_dim = sample_dim

    def regressor(self) -> BaseEstimator:
        """The regression the map is chosen for (``regression``), new and unfitted: the step
        to put after this estimator in a pipeline. Wrapped in a
        :class:`~dcfa.LabelledRegressor`, it predicts a DataArray of region means (what this
        estimator's ``transform`` gives for a DataArray field) as a DataArray along its samples.

        Examples
        --------
        >>> from sklearn.pipeline import make_pipeline
        >>> import dcfa
        >>> model = dcfa.RegionsCV()
        >>> forecast = make_pipeline(model, model.regressor())
        """
        validate_params(self)
        return regression(self.regression)

    def fit_options(self) -> FitOptions:
        # a region is the plain mean of its cells
        return replace(super().fit_options(), standardize=False)

    def fit(self, X, y, *, moments=None):
        """Choose the map by cross-validation, then make it from all samples.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            Samples in time order. A DataArray is stacked along every dim but
            ``sample_dim``; its coordinate along ``sample_dim`` must increase.
        y : array-like of shape (n_samples,)
        moments : ColumnMoments, default=None
            The per-column statistics of ``X`` and ``y`` from an earlier pass (``moments_`` of
            a previous fit, a resumed batch job): the column pass is then skipped. Checked
            against ``y`` as in :meth:`LinCFA.fit`.

        Returns
        -------
        self
        """
        self._fit(X, y, moments=moments)
        return self

    def fit_targets(self, X: ArrayLike | da.Array | xr.DataArray, targets: dict) -> dict:
        """Fit a clone to each target, the first stage made once for all.

        The pieces depend on ``X`` alone, so the targets share them: each clone then runs
        only its column pass (its target's statistics) and the second stage with its
        selection. Every clone equals ``clone(self).fit(X, y)`` (the same map, path and
        stability). :func:`dcfa.fit_each` calls this, after reading ``X`` once.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            As in :meth:`fit`.
        targets : dict of str to array-like of shape (n_samples,)

        Returns
        -------
        dict of str to RegionsCV
            The fitted clone of each target, in the targets' order.
        """
        from sklearn.base import clone

        if not isinstance(targets, dict) or not targets:
            got = "an empty dict" if isinstance(targets, dict) else type(targets).__name__
            raise InputError(
                "targets: expected a non-empty dict of names to targets of n_samples each, "
                f"got {got} (dcfa.fit_each also takes a DataFrame, a Dataset or a 2-D array)"
            )
        out, first = {}, None
        for name, y in targets.items():
            out[name] = clone(self)
            first = out[name]._fit(X, y, shared=first)
        return out

    def _fit(self, X, y, *, moments=None, shared: FirstStage | None = None) -> FirstStage:
        """:meth:`fit`, from the first stage ``shared`` when given; returns the first stage.

        One BLAS thread on the driver for the selection's thousands of small solves: on a
        machine another process kept busy, a 480 x 480 ``eigh`` took 2.7 s with OpenBLAS's
        threads instead of 0.035 s.
        """
        with one_blas_thread():
            return self._fit_pinned(X, y, moments=moments, shared=shared)

    def _fit_pinned(self, X, y, *, moments, shared: FirstStage | None) -> FirstStage:
        from dcfa.cfa.series import SeriesData, column_statistics
        from dcfa.neighbors import resolve_grid

        levels, orders = self._checked_levels_and_orders()
        inp, Y, folds = self._checked_input(X, y)
        n, D = inp.n_samples, inp.n_features

        opts = self.fit_options()
        if moments is not None:
            moments = checked_moments(EXECUTIONS["series"], opts, moments, inp, Y, None)
        yv = Y[:, 0].astype(np.float64)
        t0 = time.perf_counter()
        if shared is None:
            grid = resolve_grid(self.neighbors, D, inp.layout, periodic=self.periodic)
            data = SeriesData.gather(inp.data, Y[:, 0], columns=moments)
            if data.cols.size == 0:
                raise NothingToFitError(data.columns.excluded)
            adjacency = kept_adjacency(grid, data.cols)
            shared = first_stage(data.series, data.cols, adjacency, levels)
            columns = data.columns  # exclusions, means and spreads of all samples
        else:  # the same X: only this target's column statistics are new
            columns = column_statistics(inp.data, Y[:, 0])
            if not np.array_equal(np.flatnonzero(columns.valid), shared.cols):
                raise AssertionError("fit_targets: the kept features differ between targets")
        segments = Segments(n, [train for train, _ in folds])
        skill = REGRESSIONS[self.regression].skill
        stages = {
            lv: Pieces(shared.snapshots[lv][1], shared, segments, yv, skill, signal=self.signal)
            for lv in levels
        }
        t1 = time.perf_counter()

        self.n_patches_ = _patches(shared.adjacency)
        sizes = _sizes(self.max_groups, self.n_patches_)
        r2 = np.full((levels.size, sizes.size, len(folds)), np.nan)
        fold_paths: dict[int, list] = {}
        if "relevance" in orders:
            r2, fold_paths = _relevance_skill(stages, sizes, folds)
        finest = stages[levels[0]]
        r2_w, coefs = np.full((sizes.size, len(folds)), np.nan), []
        if "weights" in orders:
            r2_w, coefs = _weights_skill(finest, sizes, folds)
        finest.drop_sums()
        chosen = _choose(r2, r2_w, stages, fold_paths, sizes, folds, coefs, self.parsimony)
        pieces = chosen.pieces
        final, *fold_maps = (pieces.cells(cut(path, pieces.n - chosen.k)) for path in chosen.paths)
        t2 = time.perf_counter()

        labels = np.full(D, -1, dtype=np.int64)
        labels[shared.cols] = final
        self.level_ = chosen.level
        self.order_ = chosen.order
        self.cv_r2_ = chosen.r2
        self.n_pieces_ = {float(lv): stages[lv].n for lv in levels}
        self.cv_path_ = _path_dataset(
            r2, r2_w, chosen.r2_smoothed, levels, sizes, stages, folds, self.regression
        )
        detail = (
            f"{chosen.order} order, level {chosen.level:.2f}: {pieces.n} pieces; mean CV R^2 "
            f"{chosen.mean_r2:.3f}; pieces {t1 - t0:.1f} s, selection {t2 - t1:.1f} s"
        )
        self._set_fitted(inp, columns, labels, opts, None, detail)
        self._set_stability(inp, shared.cols, final, fold_maps)
        means = ("mean_r2", "mean_r2_weights", "mean_r2_smoothed")
        scored = [self.cv_path_[v].values.ravel() for v in means]
        warn_if_no_skill(
            "RegionsCV",
            "map",
            np.concatenate(scored),
            self.cv_r2_,
            f"the {chosen.k}-region map",
        )
        return shared

    def _checked_input(self, X, y) -> tuple:
        """``X`` and ``y`` checked, with the selection's folds: the input, the target as a
        column and the purged blocked folds. Raises before the series are read."""
        from dcfa.skill import blocked_folds, warn_if_blocks_small

        inp, Y = self._check_time_series(X, y, why="RegionsCV's blocked folds")
        D = inp.n_features
        if self.neighbors is None and D > COMPLETE_GRAPH_LIMIT:
            raise InputError(
                f"neighbors: None makes all {D:,} features neighbours of each other "
                f"(at most {COMPLETE_GRAPH_LIMIT:,}); pass a radius on a gridded DataArray "
                "or an adjacency matrix"
            )
        folds = _scorable(blocked_folds(inp.n_samples, self.n_splits, self.gap), Y[:, 0])
        warn_if_blocks_small(inp.n_samples, self.n_splits)
        _check_budget(inp.n_samples, D, signal=self.signal)
        return inp, Y, folds

    def check_n_samples(self, n_samples: int) -> None:
        from dcfa.skill import blocked_folds

        super().check_n_samples(n_samples)
        blocked_folds(n_samples, self.n_splits, self.gap)

    def _checked_levels_and_orders(self) -> tuple[np.ndarray, list[str]]:
        """The parameters checked: ``levels`` distinct and highest first, ``orders`` distinct."""
        validate_params(self)
        levels = np.asarray(self.levels, dtype=np.float64).ravel()
        if levels.size == 0 or not np.all((levels > -1) & (levels <= 1)):
            raise InputError(f"levels: expected correlations in (-1, 1], got {levels.tolist()}")
        orders = list(dict.fromkeys(self.orders))
        if not orders or set(orders) - set(ORDERS):
            raise InputError(
                f"orders: expected a non-empty sequence of {list(ORDERS)}, got {list(self.orders)}"
            )
        return np.unique(levels)[::-1], orders

    def _set_stability(self, inp, cols, final, fold_maps) -> None:
        from sklearn.metrics import adjusted_rand_score

        stability = np.full(inp.n_features, np.nan)
        stability[cols] = comembership(final, fold_maps)
        self.stability_ = stability
        # each region's cells' mean: how much the region recurs
        self.group_stability_ = group_mean(self.labels_, stability, self.n_features_out_)
        self.fold_ari_ = np.array([adjusted_rand_score(final, m) for m in fold_maps])
        if inp.layout is not None:
            self.stability_map_ = inp.layout.unstack(
                stability,
                name="stability",
                attrs={
                    "long_name": "recurrence of each cell's region across the CV folds",
                    "description": "mean Jaccard index of the cell's region in the chosen "
                    "map and in each fold's map (1: the same cells in every fold)",
                    "units": "1",
                },
            )
        elif hasattr(self, "stability_map_"):
            del self.stability_map_

    def fit_record(self) -> dict:
        """How this fit was made, as attributes a result store keeps (JSON-able)."""
        import json

        path = self.cv_path_
        return {
            "execution": "series",
            "level": self.level_,
            "order": self.order_,
            # the regression on the region means the map was chosen for
            "regression": self.regression,
            "cv_r2": json.dumps(json_scores(self.cv_r2_)),
            "cv_path": json.dumps(
                {
                    "levels": path["level"].values.tolist(),
                    "n_groups": path["n_groups"].values.tolist(),
                    "mean_r2": [json_scores(row) for row in path["mean_r2"].values],
                }
            ),
        }

    def execution_for(self, X: ArrayLike | da.Array | xr.DataArray) -> str:
        """Always ``"series"``: the pieces are made from the series held in memory. Raises
        :class:`dcfa.MemoryBudgetError` when they would not fit, reading no data."""
        validate_params(self)
        inp = check_X(X, sample_dim=self.sample_dim)
        _check_budget(inp.n_samples, inp.n_features, signal=self.signal)
        return "series"

    def grid_pass_request(self, X: ArrayLike | da.Array | xr.DataArray) -> None:
        return None


def _check_budget(n_samples: int, n_features: int, *, signal: bool = False) -> None:
    from dcfa.cfa.series import over_budget
    from dcfa.memory import MemoryBudgetError

    blocks = WORKING_BYTES + (gram_bytes(n_samples, n_features) if signal else 0)
    why = over_budget(n_samples, n_features, copies=SERIES_COPIES, blocks=blocks, hint=True)
    if why is not None:
        raise MemoryBudgetError(f"RegionsCV holds the series of the kept features: {why}")


def _scorable(folds: list, y: np.ndarray) -> list:
    """The ``folds`` whose test block of ``y`` varies: on a constant block (a dry season's
    rainfall of 0) every map's R^2 is undefined, so that fold can tell no maps apart. Left
    out with a warning; refused when fewer than two folds are left."""
    flat = [i for i, (_, test) in enumerate(folds) if np.ptp(y[test]) == 0]
    if not flat:
        return folds
    blocks = ", ".join(f"{i} (samples {folds[i][1][0]}-{folds[i][1][-1]})" for i in flat)
    if len(folds) - len(flat) < 2:
        raise InputError(
            f"y: constant over the test blocks of folds {blocks} of {len(folds)}: RegionsCV "
            "scores its maps by R^2 on each fold's test block, undefined where the target "
            "does not vary, and needs two folds that score; a smaller n_splits gives longer "
            "blocks"
        )
    warnings.warn(
        f"y: constant over the test blocks of folds {blocks}: the R^2 of a map is undefined "
        f"there, so the map is chosen on the other {len(folds) - len(flat)} folds",
        UserWarning,
        stacklevel=outside_stacklevel(),
    )
    return [f for i, f in enumerate(folds) if i not in flat]


def _relevance_skill(stages: dict, sizes: np.ndarray, folds) -> tuple[np.ndarray, dict]:
    """The relevance order's skill at every level (``stages``, highest first) and size in
    every fold, shape ``(levels, sizes, folds)``: each fold merges the level's pieces on its
    training rows. Levels with as many pieces have the same ones, and are scored once.
    Returns the skill and each level's fold paths (the chosen level's are cut again)."""
    r2 = np.full((len(stages), sizes.size, len(folds)), np.nan)
    scored: dict[int, np.ndarray] = {}
    paths: dict[int, list] = {}
    for i, pieces in enumerate(stages.values()):
        if pieces.n in scored:
            r2[i] = scored[pieces.n]
            continue
        paths[pieces.n] = [pieces.regions(train) for train, _ in folds]
        r2[i] = pieces.skill_of(paths[pieces.n], sizes, folds)
        scored[pieces.n] = r2[i]
        pieces.drop_sums()
    return r2, paths


def _weights_skill(finest: Pieces, sizes: np.ndarray, folds) -> tuple[np.ndarray, list]:
    """The weights order's skill at every size in every fold, shape ``(sizes, folds)``, with
    each fold's ridge weights of the finest pieces that its maps were cut from."""
    coefs = [finest.weights(train) for train, _ in folds]
    paths = (
        finest.alike(train, c, ward_groups=WARD_GROUPS)
        for c, (train, _) in zip(coefs, folds, strict=True)
    )
    return finest.skill_of(paths, sizes, folds), coefs


@dataclass(frozen=True)
class _Choice:
    """The map kept: its order, its pieces' level and pieces, its number of regions ``k``,
    and the merge paths it is cut from (all samples first, then each fold's training rows);
    its CV skill in each fold, and the skill of the smoothed weights' maps (NaN unless
    scored)."""

    order: str
    level: float
    pieces: Pieces
    k: int
    paths: list
    r2: np.ndarray
    r2_smoothed: np.ndarray

    @property
    def mean_r2(self) -> float:
        return float(self.r2.mean())


def _choose(
    r2, r2_w, stages: dict, fold_paths: dict, sizes, folds, coefs, parsimony: float
) -> _Choice:
    """The relevance order's smallest map within ``parsimony`` standard errors of its best,
    unless the weights order's maps are clearly better: then the most skilful map of the
    weights order, cut from smoothed weights (chosen on the weights themselves, since
    smoothed ones would favour this order by the prior they assume). ``fold_paths``: each
    level's fold paths of the relevance order, by its number of pieces."""
    levels = list(stages)
    family, pick = first_within_noise(
        r2.reshape(-1, len(folds)), np.tile(sizes, len(levels)), r2_w, sizes, parsimony
    )
    r2_s = np.full_like(r2_w, np.nan)
    if family == 0:
        i, j = divmod(pick, sizes.size)
        pieces = stages[levels[i]]
        paths = [pieces.regions(slice(None)), *fold_paths[pieces.n]]
        return _Choice(
            "relevance",
            float(levels[i]),
            pieces,
            int(sizes[j]),
            paths,
            r2[i, j],
            r2_s,
        )
    finest = stages[levels[0]]
    smoothed = [
        finest.alike(train, c, ward_groups=WARD_GROUPS, smoothing=SMOOTHING)
        for c, (train, _) in zip(coefs, folds, strict=True)
    ]
    r2_s = finest.skill_of(smoothed, sizes, folds)
    finest.drop_sums()
    j = within_noise(r2_s, sizes, 0.0)
    every = slice(None)
    whole = finest.alike(every, finest.weights(every), ward_groups=WARD_GROUPS, smoothing=SMOOTHING)
    return _Choice(
        "weights",
        float(levels[0]),
        finest,
        int(sizes[j]),
        [whole, *smoothed],
        r2_s[j],
        r2_s,
    )


def _patches(adjacency) -> int:
    """How many separate patches the kept cells form: no map of contiguous regions has
    fewer regions."""
    from scipy.sparse.csgraph import connected_components

    return int(connected_components(adjacency, directed=False)[0])


def _sizes(max_groups: int | None, patches: int) -> np.ndarray:
    """The numbers of regions the cross-validation scores: :data:`SIZES` up to ``max_groups``
    (and ``max_groups`` itself). When the cells form more separate patches than that (the
    enclosed seas of a fine land mask), every patch is a region of its own and the map has
    room for ``max_groups`` regions besides them (with a warning naming ``max_groups``):
    a cap of the patches alone would leave the rest of the field one region. The patches'
    own count is scored too: no path has fewer regions, and the sizes above it may be more
    than the pieces."""
    most = max(SIZES) if max_groups is None else max_groups
    if patches <= most:
        return np.unique(np.array([*(k for k in SIZES if k <= most), most], dtype=np.int64))
    most = patches + (max_groups or 0)
    if max_groups is not None:
        warnings.warn(
            f"max_groups: the kept cells form {patches} separate patches (land, masks, "
            f"blocks of variables), each a region of its own, more than "
            f"max_groups={max_groups}; the map may have up to {most} regions (leave small "
            "patches out first: X.where(dcfa.patch_sizes(X) >= n))",
            PatchesWarning,
            stacklevel=outside_stacklevel(),
        )
    return np.unique(np.array([*(k for k in SIZES if k <= most), patches, most], dtype=np.int64))


def _fold_mean(r2: np.ndarray) -> np.ndarray:
    """The mean over the last axis (the folds), NaN unless every fold is scored."""
    scored = np.isfinite(r2).all(axis=-1)
    return np.where(scored, np.where(np.isfinite(r2), r2, 0.0).mean(axis=-1), np.nan)


def _path_dataset(r2, r2_w, r2_s, levels, sizes, stages, folds, scored_by: str) -> xr.Dataset:
    mean = _fold_mean(r2)
    return xr.Dataset(
        {
            "r2": (
                ("level", "n_groups", "fold"),
                r2,
                {"long_name": "test R^2 of the regression on the region means"},
            ),
            "mean_r2": (("level", "n_groups"), mean, {"long_name": "mean test R^2 over the folds"}),
            "r2_weights": (
                ("n_groups", "fold"),
                r2_w,
                {"long_name": "test R^2 of the regression on the weights order's regions"},
            ),
            "mean_r2_weights": (
                "n_groups",
                _fold_mean(r2_w),
                {"long_name": "mean test R^2 over the folds, regions of the weights order"},
            ),
            "r2_smoothed": (
                ("n_groups", "fold"),
                r2_s,
                {"long_name": "test R^2 of the regression on the smoothed weights' regions"},
            ),
            "mean_r2_smoothed": (
                "n_groups",
                _fold_mean(r2_s),
                {"long_name": "mean test R^2 over the folds, regions of the smoothed weights"},
            ),
            "n_pieces": ("level", np.array([stages[lv].n for lv in levels])),
            "test_start": ("fold", np.array([int(te[0]) for _, te in folds])),
            "test_stop": ("fold", np.array([int(te[-1]) + 1 for _, te in folds])),
        },
        coords={"level": levels, "n_groups": sizes, "fold": np.arange(len(folds))},
        attrs={
            "description": "RegionsCV's candidate maps: purged blocked K-fold skill of the "
            "regression (attribute regression) on their region means",
            "regression": scored_by,
        },
    )

"""The tolerance that fits the data: ``GenLinCFACV`` and ``NonLinCFACV`` (as ``RidgeCV``).

GenLinCFA's and NonLinCFA's ``eps`` decides how much a map aggregates; the papers tune it per
dataset and no value suits every field. These estimators choose it by time-ordered
cross-validation of what a user fits on the groups: for every tolerance of a path and every
forward-chaining fold (train on the months before, test on the months after, with an optional
purge ``gap``), the partition is computed **from the training months only** and an OLS of the
target on its group series is fitted on the same months and scored (R^2) on the test months.
No statistic of a test month enters the partition or the OLS of its fold.

Everything comes from one gather of the data (the series execution, :mod:`dcfa.cfa.series`):
the series are centred per row segment, and the segments include every fold's bounds, so the
moments of any fold's rows are exact merges of segments — no refit, no second pass. The path
(groups and CV skill per tolerance) is kept in ``cv_path_``, so a smaller map can be chosen at
a known cost in skill; ``max_groups`` takes the best tolerance among those giving at most that
many groups on all the data. The final partition is that of the chosen tolerance on all rows,
exactly what ``GenLinCFA(eps=eps_)`` / ``NonLinCFA(eps=eps_)`` gives.
"""

from __future__ import annotations

import logging
import warnings
from contextlib import contextmanager
from functools import partial
from itertools import pairwise
from numbers import Integral
from typing import TYPE_CHECKING

import numpy as np
from sklearn.model_selection import TimeSeriesSplit
from sklearn.utils import check_random_state

from dcfa._errors import InputError, NothingToFitError, outside_stacklevel
from dcfa._validation import (
    Interval,
    check_X,
    validate_params,
)
from dcfa.cfa.base import checked_moments
from dcfa.cfa.driver import drive, feature_scale
from dcfa.cfa.executions import EXECUTIONS, grid_of, require
from dcfa.cfa.genlincfa import GenLinCFA
from dcfa.cfa.inputs import apply_inputs, feature_weights
from dcfa.cfa.nonlincfa import NonLinCFA
from dcfa.cfa.rules import RULES
from dcfa.cfa.selection import json_scores, ols_skill, warn_if_no_skill
from dcfa.stats.columns import ColumnMoments
from dcfa.stats.kernels import between_parts, merge_parts, sum_parts

if TYPE_CHECKING:
    import dask.array as da
    import xarray as xr
    from numpy.typing import ArrayLike

__all__ = ["GenLinCFACV", "NonLinCFACV", "GENLINCFA_PATH", "NONLINCFA_PATH"]

logger = logging.getLogger("dcfa")

#: default tolerances, from aggregating little to aggregating much
GENLINCFA_PATH = (0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9)
NONLINCFA_PATH = (1e-5, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2)

_PATH_PARAMETERS: dict = {
    "epsilons": [None, "array-like"],
    "n_splits": [Interval(Integral, 2, None, closed="left")],
    "gap": [Interval(Integral, 0, None, closed="left")],
    "max_groups": [None, Interval(Integral, 1, None, closed="left")],
}


def _rows_columns(data, seg_sums, stop: int) -> ColumnMoments:
    """The column statistics of rows ``[0, stop)`` (a segment bound) over all features, merged
    from the segments: what a fit on those rows alone computes. A fold decides its exclusions
    (a cell constant over its training months) and its ``standardize`` spreads from them, never
    from a test month. Features the series do not hold count no rows (excluded)."""
    b = data.bounds
    S = int(np.searchsorted(b, stop))
    if b[S] != stop:  # the fold bounds are segment bounds by construction
        raise AssertionError(f"row {stop} is not a segment bound")
    ss, sy, yy = (a[:S] for a in seg_sums)
    n_s = np.diff(b[: S + 1]).astype(np.float64)
    m_s, ym_s = data.seg_mean[:S], data.y_mean[:S]
    _, mean, dev = merge_parts(n_s, m_s)
    _, ymean, ydev = merge_parts(n_s, ym_s)
    D = data.columns.n_features
    count, full_mean = np.zeros(D, dtype=np.int64), np.zeros(D)
    m2, cross = np.zeros(D), np.zeros(D)
    count[data.cols] = stop
    full_mean[data.cols] = mean
    m2[data.cols] = sum_parts(ss) + between_parts(n_s, dev)
    cross[data.cols] = sum_parts(sy) + between_parts(n_s, ydev, dev)
    return ColumnMoments(
        n=int(stop),
        count=count,
        mean=full_mean,
        m2=m2,
        target_cross=cross,
        target_mean=float(ymean),
        target_m2=float(sum_parts(yy) + between_parts(n_s, ydev)),
    )


@contextmanager
def _fold_rows(data, columns: ColumnMoments):
    """The series a fold partitions, in ``data``'s own arrays (no copy of the series), with
    the fold's column statistics (its exclusions and spreads).

    The features the fold keeps are moved, in order, to the front of ``data``'s arrays and
    served as views, with their per-segment sums; on exit every feature goes back to its row
    (the values are never changed: a basis scales what it reads). Only the dropped features'
    rows are copied meanwhile.
    """
    from dcfa.cfa.series import SeriesData

    keep = columns.valid[data.cols]
    cc, cy = data.segment_sums()
    kept, dropped = np.flatnonzero(keep), np.flatnonzero(~keep)
    saved = data.series[dropped].copy(), data.seg_mean[:, dropped].copy()
    moved = [(int(q), int(p)) for q, p in enumerate(kept) if q != p]
    for q, p in moved:  # q < p, in increasing order: nothing is overwritten before it moves
        data.series[q] = data.series[p]
        data.seg_mean[:, q] = data.seg_mean[:, p]
    m = kept.size
    rows = SeriesData(
        columns,
        data.series[:m],
        data.y,
        data.cols[kept],
        data.bounds,
        data.parts,
        data.seg_mean[:, :m],
        data.y_mean,
        cc[:, kept],
        cy[:, kept],
    )
    try:
        yield rows
    finally:
        for q, p in reversed(moved):
            data.series[p] = data.series[q]
            data.seg_mean[:, p] = data.seg_mean[:, q]
        data.series[dropped] = saved[0]
        data.seg_mean[:, dropped] = saved[1]


class _TolerancePath:
    """What GenLinCFACV and NonLinCFACV share (mixed in before the estimator)."""

    _default_path: tuple = ()

    def _accept(self):
        return None  # the rule changes along the path: _rule(eps)

    def fit(self, X, y, *, moments=None):
        """Choose ``eps`` on the path by forward-chaining CV, then partition all rows with it.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        moments : ColumnMoments, default=None
            The per-column statistics of an earlier fit on the same data (``moments_``, a
            resumed batch job): the first of the two passes is skipped.

        Returns
        -------
        self
        """
        from dcfa.cfa.series import SeriesData

        validate_params(self)
        opts = self.fit_options()
        if self.mode not in ("auto", "series"):
            raise InputError(
                f"mode: {type(self).__name__} runs the series execution (the path reads the "
                f"folds' moments from the series), got mode={self.mode!r}"
            )
        why = f"{type(self).__name__}'s forward-chaining folds"
        inp, Y = self._check_time_series(X, y, why=why)
        epsilons = self._checked_epsilons()
        n = inp.n_samples
        splits = self._splits(n)
        series = require(EXECUTIONS["series"], opts, inp, None)
        weights = feature_weights(self.weights, inp)
        grid = grid_of(opts, inp)
        # every row set the path reads: each fold's training prefix (and NonLinCFA's folds
        # within it) and the rule's sets on all rows
        fold_sets = [_row_sets(train, opts.folds(train)) for train, _ in splits]
        rule_folds = opts.folds(n)
        all_sets = _row_sets(n, rule_folds)
        if moments is not None:
            moments = checked_moments(series, opts, moments, inp, Y, None)
        data = SeriesData.gather(
            apply_inputs(inp.data, opts.inputs),
            Y[:, 0],
            bounds=_segment_bounds(n, splits, [*fold_sets, all_sets]),
            columns=moments,
        )
        if data.cols.size == 0:
            raise NothingToFitError(data.columns.excluded)
        loop = self._visiting(opts, grid)

        def partition(rows, eps: float, sets) -> np.ndarray:
            parts = [[s for lo, hi in rs for s in rows.segments(lo, hi)] for rs in sets]
            return drive(
                rows.columns,
                partial(rows.basis, parts=parts),
                self._rule(eps),
                neighbors=grid.adjacency,
                **loop,
            )

        skill, fold_groups = _fold_skill(
            data, partition, epsilons, splits, fold_sets, weights, opts, Y[:, 0]
        )
        labels_all = [partition(data, eps, all_sets) for eps in epsilons]
        groups = np.array([int(labels.max()) + 1 for labels in labels_all], dtype=np.int64)
        finite = np.isfinite(skill)
        with np.errstate(invalid="ignore"):  # a tolerance no fold could score stays NaN
            mean = np.where(finite, skill, 0.0).sum(axis=1) / finite.sum(axis=1)
        for eps, g, m in zip(epsilons, groups, mean, strict=True):
            logger.info("%s: eps=%g: %d groups, CV R^2 %.3f", type(self).__name__, eps, g, m)
        best = self._best(epsilons, groups, mean)
        self.eps_ = float(epsilons[best])
        self.cv_r2_ = skill[best]
        self.cv_path_ = _path_dataset(epsilons, groups, fold_groups, skill, mean, splits)
        warn_if_no_skill(
            type(self).__name__,
            "tolerance",
            mean,
            self.cv_r2_,
            f"eps_={self.eps_:g} ({groups[best]} groups)",
            hint=" Or try fewer groups (max_groups, larger epsilons) or RegionsCV.",
        )
        if rule_folds is not None:
            self.folds_ = rule_folds
        self.execution_ = "series"
        self._set_fitted(inp, data.columns, labels_all[best], opts, weights)
        return self

    def _checked_epsilons(self) -> np.ndarray:
        epsilons = np.asarray(
            self._default_path if self.epsilons is None else self.epsilons, dtype=np.float64
        ).ravel()
        if epsilons.size == 0:
            raise InputError("epsilons: expected at least one tolerance")
        if not np.all(np.isfinite(epsilons)) or not self._valid_eps(epsilons).all():
            raise InputError(f"epsilons: expected {self._eps_range}, got {epsilons.tolist()}")
        return epsilons

    def _visiting(self, opts, grid) -> dict:
        """The driver's loop options; with ``shuffle``, one seed for the whole path."""
        loop = opts.loop(order=grid.order, blocks=grid.blocks)
        if loop["shuffle"] and not isinstance(loop["random_state"], Integral):
            # None or a RandomState would give every partition of the path its own visiting
            # order: one seed drawn here serves every fold, tolerance and the final fit
            loop["random_state"] = int(
                check_random_state(loop["random_state"]).randint(np.iinfo(np.int32).max)
            )
        return loop

    def _best(self, epsilons: np.ndarray, groups: np.ndarray, mean: np.ndarray) -> int:
        """The tolerance of the best mean CV skill among those within ``max_groups``."""
        allowed = np.ones(groups.size, dtype=bool)
        if self.max_groups is not None:
            allowed = groups <= self.max_groups
        if not allowed.any():
            # the documented fallback: the smallest map of the path, said where a user sees it
            # (a logger line is silent unless logging is configured)
            allowed = groups == groups.min()
            warnings.warn(
                f"max_groups: no tolerance of the path gives at most max_groups="
                f"{self.max_groups} groups (fewest: {groups.min()}, at eps="
                f"{', '.join(f'{e:g}' for e in epsilons[allowed])}); {type(self).__name__} "
                "takes the best of those. Add larger tolerances to epsilons or raise max_groups.",
                UserWarning,
                stacklevel=outside_stacklevel(),
            )
        score = np.where(allowed & np.isfinite(mean), mean, -np.inf)
        # no fold scored (a constant target in every test block): the first allowed tolerance,
        # never one that breaks max_groups
        return int(np.argmax(score)) if np.isfinite(score).any() else int(np.argmax(allowed))

    def fit_record(self) -> dict:
        """The execution, the chosen tolerance and the path (tolerance, groups, mean CV R^2)."""
        import json

        path = self.cv_path_
        return {
            **super().fit_record(),
            "eps": self.eps_,
            "cv_r2": json.dumps(json_scores(self.cv_r2_)),
            "eps_path": json.dumps(
                {
                    "eps": path["eps"].values.tolist(),
                    "n_groups": path["n_groups"].values.tolist(),
                    "mean_cv_r2": json_scores(path["mean_cv_r2"].values, digits=None),
                }
            ),
        }

    def execution_for(self, X: ArrayLike | da.Array | xr.DataArray) -> str:
        """Always ``"series"``: the path reads every fold's moments from the series (raises
        :class:`dcfa.MemoryBudgetError` when they do not fit the budget)."""
        validate_params(self)
        inp = check_X(X, sample_dim=self.sample_dim)
        return require(EXECUTIONS["series"], self.fit_options(), inp, None).name

    def grid_pass_request(self, X: ArrayLike | da.Array | xr.DataArray) -> None:
        return None

    def check_n_samples(self, n_samples: int) -> None:
        super().check_n_samples(n_samples)
        opts = self.fit_options()
        for train, _ in self._splits(n_samples):
            opts.folds(train)  # NonLinCFA's own folds, within each training prefix

    def _splits(self, n: int) -> list[tuple[int, tuple[int, int]]]:
        """Forward-chaining folds: (training prefix length, (test start, test stop))."""
        # TimeSeriesSplit's test blocks: n // (n_splits + 1) samples each, the first training
        # prefix what is left before them less the gap
        test = n // (self.n_splits + 1)
        if test < 2:  # a skill needs two test samples
            raise InputError(
                f"n_splits: {self.n_splits} forward folds of {n} samples leave test blocks of "
                f"{test}; need at least 2 samples each: use fewer folds"
            )
        first = n - self.n_splits * test - self.gap
        if first < self._min_samples:
            ahead = f"{self.n_splits} forward folds of {n} samples (test blocks of {test})"
            if self.gap and first + self.gap >= self._min_samples:
                raise InputError(
                    f"gap: {self.gap} leaves {max(first, 0)} samples to train the first of "
                    f"{ahead}; need gap <= {first + self.gap - self._min_samples}"
                )
            raise InputError(
                f"n_splits: the first of {ahead} trains on {max(first, 0)} samples; "
                f"too few (at least {self._min_samples}): use fewer folds"
            )
        raw = TimeSeriesSplit(self.n_splits, gap=self.gap).split(np.zeros((n, 1)))
        return [(int(tr[-1]) + 1, (int(te[0]), int(te[-1]) + 1)) for tr, te in raw]


def _segment_bounds(n: int, splits, row_sets) -> list[int]:
    """The segment bounds the series are summed over: every range of ``row_sets`` and every
    fold's test block, so that any of them is a union of segments."""
    ranges = [r for sets in row_sets for rs in sets for r in rs]
    ranges += [test for _, test in splits]
    return sorted({0, n} | {b for r in ranges for b in r})


def _fold_skill(data, partition, epsilons, splits, fold_sets, weights, opts, y):
    """Each tolerance's test R^2 in each fold (OLS on the group means of the fold's partition
    of its training rows), and the groups it made: two ``(tolerances, folds)`` arrays."""
    E, K = epsilons.size, len(splits)
    skill = np.full((E, K), np.nan)
    fold_groups = np.zeros((E, K), dtype=np.int64)
    # every fold's own column statistics (exclusions, and the spreads standardize= divides
    # by), from its training rows only
    yy = np.array([data.y[lo:hi] @ data.y[lo:hi] for lo, hi in pairwise(data.bounds)])
    seg_sums = (*data.segment_sums(), yy)  # per segment (the series are never scaled)
    for k, (train, test) in enumerate(splits):
        columns = _rows_columns(data, seg_sums, train)
        scale = feature_scale(columns, opts.standardize)
        with _fold_rows(data, columns) as rows:
            for i, eps in enumerate(epsilons):
                labels = partition(rows, eps, fold_sets[k])
                G = rows.group_series(
                    labels[rows.cols],
                    None if weights is None else weights[rows.cols],
                    opts.aggregation,
                    scale,
                )
                fold_groups[i, k] = G.shape[0]
                skill[i, k] = ols_skill(G, y, slice(0, train), slice(*test))
    return skill, fold_groups


def _row_sets(n: int, folds) -> list[list[tuple[int, int]]]:
    """The row sets (unions of ranges) the rule reads when partitioning rows ``[0, n)``: all of
    them, or with NonLinCFA's ``folds`` (on those rows) their training sets then test sets."""
    if folds is None:
        return [[(0, n)]]
    b = folds.bounds
    sets = [tr for tr, _ in folds.splits] + [te for _, te in folds.splits]
    return [[(b[s], b[s + 1]) for s in segs] for segs in sets]


class GenLinCFACV(_TolerancePath, GenLinCFA):
    """GenLinCFA with ``eps`` chosen by forward-chaining cross-validation of OLS skill.

    Parameters
    ----------
    epsilons : array-like or None, default=None
        The tolerances to try (default :data:`GENLINCFA_PATH`, 0.3 to 0.9; larger aggregates
        more).
    n_splits : int, default=4
        Forward-chaining folds (:class:`sklearn.model_selection.TimeSeriesSplit`): fold ``k``
        trains on the months before its test block.
    gap : int, default=0
        Samples (rows: months of a monthly record) left out between each training prefix and
        its test block (purge, e.g. the forecast lead or the longest time-scale window). Across
        months missing from the record they span more months than ``gap``, never fewer.
    max_groups : int or None, default=None
        Take the best CV skill among the tolerances that give at most this many groups on all
        the data (a smaller map at a known cost, read in ``cv_path_``). When no tolerance of
        the path gives so few, the one giving the fewest groups is taken, with a
        ``UserWarning`` naming them (the best CV skill among them when several tie).
    **params
        Every parameter of :class:`GenLinCFA` but ``eps`` (``mode`` must be ``"auto"`` or
        ``"series"``). With ``shuffle=True`` and ``random_state`` None or a
        ``RandomState``, one seed is drawn from it per fit
        (``randint(np.iinfo(np.int32).max)``) and every partition of the path and the final one
        visit the features in the order of that seed.

    Attributes
    ----------
    eps_ : float
        The chosen tolerance.
    cv_r2_ : ndarray of shape (n_splits,)
        The chosen tolerance's test R^2 in each fold (its row of ``cv_path_["cv_r2"]``).
    cv_path_ : xarray.Dataset
        Over the tolerances (dim ``eps``) and the folds (dim ``fold``): ``n_groups`` on all
        data, ``mean_cv_r2`` and its standard error ``se_cv_r2`` over the folds,
        ``fold_groups`` and ``cv_r2`` per tolerance and fold, and per fold its training rows
        ``[0, train_stop)`` and test rows ``[test_start, test_stop)`` (coordinates). Every
        fold's exclusions (cells constant over its training months) and, with
        ``standardize=True``, its spreads are those of its training months, as refitting on
        them gives; a cell missing in any month is left out of every fold. When the chosen
        tolerance's mean CV R^2 is <= 0, or within one standard error of 0 over the folds, a
        :class:`dcfa.NoSkillWarning` says so.
    labels_, n_features_out_, ... : as :class:`GenLinCFA`, for ``eps_``.
    """

    _default_path = GENLINCFA_PATH
    _parameter_constraints: dict = {
        **{
            k: v
            for k, v in GenLinCFA._parameter_constraints.items()
            if k not in ("eps", "missing", "row_batch")
        },
        **_PATH_PARAMETERS,
    }

    def __init__(
        self,
        *,
        epsilons=None,
        n_splits=4,
        gap=0,
        max_groups=None,
        family="gaussian",
        curvature=None,
        form="full",
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
        sample_dim="time",
    ):
        self.epsilons = epsilons
        self.n_splits = n_splits
        self.gap = gap
        self.max_groups = max_groups
        self.family = family
        self.curvature = curvature
        self.form = form
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
        self.sample_dim = sample_dim

    _eps_range = "tolerances in (0, 1]"

    @staticmethod
    def _valid_eps(e):
        return (e > 0) & (e <= 1)

    def _rule(self, eps: float):
        return RULES["genlincfa"](eps, self._curvature, self.form)


class NonLinCFACV(_TolerancePath, NonLinCFA):
    """NonLinCFA with ``eps`` chosen by forward-chaining cross-validation of OLS skill.

    Parameters
    ----------
    epsilons : array-like or None, default=None
        The tolerances to try (default :data:`NONLINCFA_PATH`, 1e-5 to 3e-2; larger
        aggregates more).
    n_splits, gap, max_groups
        As in :class:`GenLinCFACV`.
    cv : int or cross-validation splitter, default=5
        The rule's own folds within each training set (see :class:`NonLinCFA`).
    **params
        Every other parameter of :class:`NonLinCFA` but ``eps`` (``shuffle``, ``random_state``:
        as in :class:`GenLinCFACV`).

    Attributes
    ----------
    eps_, cv_r2_, cv_path_
        As in :class:`GenLinCFACV`.
    labels_, n_features_out_, folds_, ... : as :class:`NonLinCFA`, for ``eps_``.
    """

    _default_path = NONLINCFA_PATH
    _parameter_constraints: dict = {
        **{
            k: v
            for k, v in NonLinCFA._parameter_constraints.items()
            if k not in ("eps", "row_batch")
        },
        **_PATH_PARAMETERS,
    }

    def __init__(
        self,
        *,
        epsilons=None,
        n_splits=4,
        gap=0,
        max_groups=None,
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
        sample_dim="time",
    ):
        self.epsilons = epsilons
        self.n_splits = n_splits
        self.gap = gap
        self.max_groups = max_groups
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
        self.sample_dim = sample_dim

    _eps_range = "tolerances >= 0"

    @staticmethod
    def _valid_eps(e):
        return e >= 0

    def _rule(self, eps: float):
        return RULES["nonlincfa"](eps)


def _path_dataset(epsilons, groups, fold_groups, skill, mean, splits):
    """The path as a Dataset over ``eps`` and ``fold`` (see ``cv_path_``)."""
    import xarray as xr

    finite = np.isfinite(skill)
    count = finite.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dev = np.where(finite, skill - mean[:, None], 0.0)
        se = np.sqrt((dev * dev).sum(axis=1) / (count - 1)) / np.sqrt(count)
    se = np.where(count > 1, se, np.nan)
    return xr.Dataset(
        {
            "n_groups": ("eps", groups, {"long_name": "groups on all samples"}),
            "mean_cv_r2": ("eps", mean, {"long_name": "mean forward-CV R^2 over the folds"}),
            "se_cv_r2": ("eps", se, {"long_name": "standard error of mean_cv_r2"}),
            "fold_groups": (("eps", "fold"), fold_groups),
            "cv_r2": (("eps", "fold"), skill),
        },
        coords={
            "eps": np.asarray(epsilons, dtype=np.float64),
            "fold": np.arange(len(splits)),
            "train_stop": ("fold", [train for train, _ in splits]),
            "test_start": ("fold", [test[0] for _, test in splits]),
            "test_stop": ("fold", [test[1] for _, test in splits]),
        },
    )

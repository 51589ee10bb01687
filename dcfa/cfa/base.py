"""What LinCFA, NonLinCFA and GenLinCFA estimators share: fit -> moments -> partition -> labels.

A subclass says which moments it needs, how it scales features before aggregating them, and
which rule the driver applies; this base does the input checks, calls the subclass' functional
twin, stores the fitted attributes and implements the lazy ``transform``.
"""

from __future__ import annotations

import logging
import warnings
from functools import partial
from numbers import Integral
from typing import TYPE_CHECKING

import dask.array as da
import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dcfa._errors import GappyCellsWarning, InputError, NothingToFitError, outside_stacklevel
from dcfa._terminal import counted
from dcfa._validation import (
    InputData,
    Interval,
    StrOptions,
    check_fitted_X,
    check_n_samples,
    check_time_order,
    check_X,
    far_off,
    gaps_text,
    pandas_output,
    single_target,
    validate_params,
)
from dcfa.cfa.executions import MODES, choose, reader_of
from dcfa.cfa.inputs import INPUTS, WEIGHTS_OPTIONS, apply_inputs, feature_weights, output_attrs
from dcfa.cfa.options import FitOptions
from dcfa.cfa.reduction import Reduction
from dcfa.cfa.sequential import COMPARE, NEIGHBORHOODS, SCANS
from dcfa.forecast.leads import warn_if_purge_short
from dcfa.neighbors import PERIODIC_AUTO
from dcfa.stats.merged import MergedMoments
from dcfa.stats.moments import Moments

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dcfa.stats.columns import ColumnMoments
    from dcfa.stats.grid import GridMoments

__all__ = ["BaseCFA", "CFA_PARAMETERS", "INPUT_PARAMETERS"]

logger = logging.getLogger("dcfa")

#: The parameters LinCFA, NonLinCFA and GenLinCFA share, checked by ``validate_params``.
CFA_PARAMETERS: dict = {
    "compare": [StrOptions(set(COMPARE))],
    "scan": [StrOptions(set(SCANS))],
    "shuffle": ["boolean"],
    "random_state": ["random_state"],
    "neighbors": [None, Interval(Integral, 1, None, closed="left"), "sparse matrix", "array-like"],
    "neighborhood": [StrOptions(set(NEIGHBORHOODS))],
    "periodic": [StrOptions({PERIODIC_AUTO}), "boolean", tuple, list],
    "weights": WEIGHTS_OPTIONS,
    # the live set of the registry: a registered execution is a valid mode
    "mode": [StrOptions(MODES)],
    "row_batch": [Interval(Integral, 1, None, closed="left")],
    "sample_dim": [str],
}
#: What NonLinCFA and GenLinCFA add: the inputs and how a group aggregates them.
INPUT_PARAMETERS: dict = {
    "inputs": [StrOptions(set(INPUTS)), callable],
    "aggregation": [StrOptions({"mean", "sum"})],
    "standardize": ["boolean"],
}


class BaseCFA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of the feature-aggregation estimators (not for direct use).

    Subclasses implement ``_accept()`` (their rule with its parameters bound); ``fit``
    resolves the parameters once into :class:`~dcfa.cfa.options.FitOptions`
    (:meth:`fit_options`), and an execution of :mod:`dcfa.cfa.executions` (``mode``), the
    same for every rule, reads them. Parameters ``inputs``, ``aggregation`` and
    ``standardize``, when a subclass has them, choose the inputs and how groups are
    aggregated (LinCFA: identity, mean of standardised features).
    """

    _min_samples = 4  # the LinCFA test divides by n - 3

    # -- fit -----------------------------------------------------------------------------

    def fit(self, X, y, *, moments=None):
        """Find the partition of the features of ``X`` for predicting ``y``.

        Parameters
        ----------
        X : array-like, dask.array.Array or xarray.DataArray of shape (n_samples, n_features)
            Samples in rows. A DataArray is stacked along every dim but ``sample_dim``.
        y : array-like of shape (n_samples,)
            The target.
        moments : Moments or list of Moments, default=None
            The moments of ``[inputs(X), y]`` from an earlier pass (``self.moments_`` of a
            previous fit, :meth:`Moments.load`, a resumed batch job); the pass over ``X`` is
            then skipped. They must come from the same data, in the form this estimator
            computes (one value; for NonLinCFA one per row segment of its folds). Checked
            against ``y`` (a ValueError names ``moments``): the target's count, mean and
            variance (per row segment), and, for in-memory ``X``, the cross-product with
            ``y`` of one feature, which a reordered ``y`` changes (a Dask ``X`` is not read
            for it). Lazy moments (``dcfa.moments(..., compute=False)``) are computed first.

        Returns
        -------
        self
        """
        validate_params(self)
        opts = self.fit_options()
        inp = check_X(X, sample_dim=self.sample_dim)
        self.check_n_samples(inp.n_samples)
        Y = self._check_target(y, inp)
        folds = opts.folds(inp.n_samples)
        # checked before the pass; used by transform
        weights = feature_weights(self.weights, inp) if "weights" in self.get_params() else None
        if moments is None:
            # auto: the first execution that runs these options within dcfa.memory_budget;
            # refused here, before any compute, when none does
            execution = choose(opts, inp, folds)
        else:
            moments = _computed(moments)
            execution = reader_of(opts, inp, folds, moments)
        plan = execution.plan(opts, inp, folds)
        logger.info(
            "%s: %d samples x %d features (%s), mode=%r",
            opts.estimator,
            inp.n_samples,
            inp.n_features,
            "dask" if inp.is_dask else "in memory",
            execution.name,
        )
        data = apply_inputs(inp.data, opts.inputs)
        if moments is None:
            stats = execution.gather(opts, data, Y, plan)
        else:
            stats = checked_moments(execution, opts, moments, inp, Y, folds)
            stats = execution.reuse(opts, stats, inp, data, Y, plan)
        labels = execution.partition(opts, stats, inp, plan)
        if folds is not None:
            self.folds_ = folds
        if isinstance(stats, list | tuple):  # one Moments per row segment (NonLinCFA)
            self.segment_moments_ = list(stats)
        self.execution_ = execution.name
        self._set_fitted(inp, execution.summary(stats), labels, opts, weights)
        if weights is not None:
            total = np.bincount(labels[labels >= 0], weights=weights[labels >= 0])
            if np.any(total <= 0):
                raise InputError(
                    f"weights: group(s) {np.flatnonzero(total <= 0)[:5].tolist()} have zero "
                    "total weight; their weighted mean is undefined"
                )
        return self

    def _accept(self):
        """The rule of :mod:`dcfa.cfa.rules` with this estimator's parameters bound; None
        for one that runs no rule through the executions (``RegionsCV``)."""
        return None

    def fit_options(self) -> FitOptions:
        """The parameters resolved as ``fit`` reads them: one frozen value that the
        executions, the driver and the memory estimate take (checks nothing)."""
        return FitOptions.of(
            self.get_params(deep=False), estimator=type(self).__name__, rule=self._accept()
        )

    def fit_record(self) -> dict:
        """How this fit was made, as attributes a result store keeps (JSON-able): the
        execution that ran (:func:`dcfa.load_result` reads the cells by it)."""
        check_is_fitted(self, "labels_")
        return {"execution": self.execution_}

    def execution_for(self, X: ArrayLike | da.Array | xr.DataArray) -> str:
        """The execution ``fit(X, y)`` would run (``mode``, or what ``"auto"`` picks).

        Checks the parameters as ``fit`` does and reads no data. Raises
        :class:`dcfa.MemoryBudgetError` when no execution fits the memory budget.
        """
        validate_params(self)
        opts = self.fit_options()
        inp = check_X(X, sample_dim=self.sample_dim)
        return choose(opts, inp, opts.folds(inp.n_samples)).name

    _min_samples_reason = "the aggregation test divides by n - 3"

    def check_n_samples(self, n_samples: int) -> None:
        """Refuse a record too short for a fit, before any data is read.

        What ``fit`` checks first: enough samples for the rule's test, and for every fold the
        fit cuts (NonLinCFA's ``cv``; the blocked or forward folds, less their ``gap``, of
        the estimators that choose by cross-validation). A batch job calls it with the
        samples the input and the target have in common, before its first pass.

        Parameters
        ----------
        n_samples : int

        Raises
        ------
        ValueError
            Naming what to change: the parameter (``gap``, ``n_splits``, ``cv``), or ``X``
            when even the test has too few samples.
        """
        check_n_samples(n_samples, self._min_samples, why=self._min_samples_reason)
        self.fit_options().folds(n_samples)

    def _check_target(self, y, inp: InputData) -> np.ndarray:
        return single_target(y, inp)

    def _check_time_series(self, X, y, *, why: str) -> tuple[InputData, np.ndarray]:
        """``X`` and ``y`` checked for a fit whose cross-validation reads the samples in time
        order (``why`` says which): a DataArray's sample coordinate must increase. A target
        at a lead (:func:`dcfa.lead_target`) longer than the folds' ``gap`` is warned of."""
        inp = check_X(X, sample_dim=self.sample_dim)
        if inp.layout is not None:
            dim = inp.layout.sample_dim
            check_time_order(inp.layout.sample_coords.get(dim), dim, why=why)
        self.check_n_samples(inp.n_samples)
        warn_if_purge_short(y, {"gap": self.gap}, sample_dim=self.sample_dim)
        return inp, self._check_target(y, inp)

    def grid_pass_request(self, X: ArrayLike | da.Array | xr.DataArray) -> dict | None:
        """The grid pass a fit on ``X`` gathers its moments from, or None.

        ``{"radius": R, "periodic": dims, "blocks": dims}`` when the fit runs the grid
        execution (``mode="grid"``, or what ``"auto"`` picks): a caller that makes its own
        pass over the same data (the batch job's preprocessing pass) gathers them there with
        :func:`dcfa.grid_moments` and passes them to ``fit(X, y, moments=...)``. Parameters
        are checked as ``fit`` checks them.
        """
        validate_params(self)
        opts = self.fit_options()
        inp = check_X(X, sample_dim=self.sample_dim)
        folds = opts.folds(inp.n_samples)
        if folds is not None:
            return None  # per-fold grid moments come from the estimator's own passes
        execution = choose(opts, inp, folds)
        return execution.grid_pass(execution.plan(opts, inp, folds))

    def _set_fitted(
        self,
        inp: InputData,
        m: Moments,
        labels: np.ndarray,
        opts: FitOptions,
        weights,
        detail: str = "",
    ) -> None:
        """Set the fitted attributes and log the partition (``detail``: how it was chosen)."""
        D = inp.n_features
        self.n_features_in_ = D
        if inp.feature_names is not None:
            self.feature_names_in_ = inp.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.labels_ = labels
        self.n_features_out_ = int(labels.max()) + 1 if (labels >= 0).any() else 0
        self.group_sizes_ = np.bincount(labels[labels >= 0], minlength=self.n_features_out_)
        self.excluded_ = m.excluded
        mean = m.column_mean[:D].copy()
        std = m.column_std(ddof=1)[:D].copy()
        used = labels >= 0
        self.mean_ = np.where(used, mean, np.nan)
        self.std_ = np.where(used, std, np.nan)
        self.n_samples_fit_ = int(m.n)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = 1.0 / std if opts.standardize else np.ones(D)
        self.scale_ = np.where(used, scale, np.nan)
        self.feature_weights_ = weights
        self.reduction_ = Reduction(
            labels=labels,
            scale=np.nan_to_num(self.scale_),
            # subtracted before aggregating: the means for standardised aggregation, nothing
            # otherwise (a group is then the plain mean or sum of its inputs)
            centre=np.nan_to_num(self.mean_) if opts.standardize else np.zeros(D),
            weights=weights,
            aggregation=opts.aggregation,
            inputs=opts.inputs,
            nan_aware=opts.missing == "pairwise",
            standardized=opts.standardize,
        )
        self._moments = m
        self._layout = inp.layout
        if inp.layout is not None:
            self.label_map_ = inp.layout.unstack(
                labels,
                name="group",
                attrs={"description": f"{type(self).__name__} group of each cell, -1 = excluded"},
            )
        elif hasattr(self, "label_map_"):
            del self.label_map_
        if self.n_features_out_ == 0:
            raise NothingToFitError(dict(self.excluded_))
        _warn_gappy(type(self).__name__, self.excluded_, "missing" in self.get_params())
        logger.info(
            "%s: %s -> %s (%d excluded)%s",
            type(self).__name__,
            counted(D, "feature"),
            counted(self.n_features_out_, "group"),
            len(self.excluded_),
            f"; {detail}" if detail else "",
        )

    @property
    def moments_(self) -> Moments | GridMoments | ColumnMoments:
        """The statistics of all samples (see Attributes).

        NonLinCFA's dense fit keeps one matrix per row segment; their merge, with its own
        ``p x p`` matrix, is built here on first use rather than during ``fit``.
        """
        m = self.__dict__.get("_moments")
        if m is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute 'moments_'")
        if isinstance(m, MergedMoments):
            m = self._moments = m.materialize()
        return m

    @property
    def _n_features_out(self) -> int:
        return self.n_features_out_

    # -- transform -------------------------------------------------------------------------

    def transform(self, X):
        """The group aggregates of ``X``: one column per group.

        Lazy for Dask and Dask-backed xarray input (one sparse product over the feature
        blocks). A DataArray, for an estimator fitted on one, is matched to the fitted grid by
        its labels: its dims in any order, the labels of each grid dim in any order (and
        longitudes in any convention); other dims, sizes or labels raise a ValueError. It
        gives a DataArray ``(sample_dim, "group")`` keeping the sample coordinates and the
        attributes, each group named by its ``group_name`` coordinate (its variable, window
        and lag where ``X`` has several, and its centre: ``sst_2S_129W``), with the units of
        the aggregates: ``"1"`` for standardised features,
        squared (``"K2"``) for ``inputs="square"``, else those of ``X``. A DataFrame's
        columns must be the fitted ones (``feature_names_in_``), in order.

        Returns
        -------
        Xt : ndarray, dask.array.Array or xarray.DataArray of shape (n_samples, n_groups)
        """
        check_is_fitted(self, "labels_")
        inp = check_fitted_X(
            self, X, layout=getattr(self, "_layout", None), sample_dim=self.sample_dim
        )
        reduction = self.reduction_
        if not isinstance(inp.data, da.Array):  # in memory: checked at no cost (a Dask X is not
            # read here; dcfa apply checks what it computes)
            # mean_ and std_ are of the inputs phi(x) the moments were taken of
            phi = partial(apply_inputs, inputs=reduction.inputs)
            far = far_off(inp.data, self.mean_, self.std_, self.n_samples_fit_, inputs=phi)
            if far is not None:
                warnings.warn(
                    f"X: its features {far}, far outside what {type(self).__name__} was "
                    "fitted on: a field in other units (degC for K) or of another quantity "
                    "does this, and its groups and any forecast from them are off by as much",
                    UserWarning,
                    stacklevel=outside_stacklevel(),
                )
        Xt = reduction.apply(inp.data)
        if not isinstance(Xt, da.Array) and np.isnan(Xt).any():
            grid = getattr(self, "label_map_", None)
            gaps = gaps_text(inp.data, self.labels_, np.arange(self.n_features_in_), grid)
            if gaps is not None:
                warnings.warn(
                    f"X: {gaps}: their groups, and any forecast from them, are NaN in those "
                    "samples (a month missing, a changed land mask or a sea-ice edge does "
                    "this); fill those cells, or leave them out of the fit",
                    UserWarning,
                    stacklevel=outside_stacklevel(),
                )
        if inp.layout is None:
            return Xt
        out = inp.layout.samples(
            Xt,
            dim="group",
            coords={"group": np.arange(self.n_features_out_), **self._group_coords()},
            name=f"{type(self).__name__.lower()}_features",
            attrs=output_attrs(
                inp.layout.attrs,
                inputs=reduction.inputs,
                standardized=reduction.standardized,
            ),
        )
        return pandas_output(self, out)

    def _group_coords(self) -> dict:
        """``group_name`` of every group (its variable, window and lag where the input has
        several, and its centre: ``sst_2S_129W``), as a result store names them; none when
        it was fitted on an array, whose features have no places."""
        from dcfa.io.result import group_centres, group_names

        region, n = getattr(self, "label_map_", None), self.n_features_out_
        if region is None:
            return {}
        return {"group_name": ("group", group_names(region, group_centres(region, n), n))}

    def inverse_transform(self, Xt):
        """Every feature gets its group's value, back in its own units (NaN if excluded).

        A DataArray ``(sample_dim, "group")`` (what ``transform`` gives) of an estimator
        fitted on a DataArray comes back on the fitted grid: dims ``(sample_dim, *grid)``
        with ``Xt``'s sample coordinates, the grid's coordinates, and the fitted name and
        attributes. Other input gives an ``(n_samples, n_features)`` array.
        """
        check_is_fitted(self, "labels_")
        layout = getattr(self, "_layout", None)
        labelled = isinstance(Xt, xr.DataArray) and layout is not None
        if labelled and Xt.ndim == 2 and layout.sample_dim in Xt.dims:
            Xt = Xt.transpose(layout.sample_dim, ...)
        values = Xt.values if isinstance(Xt, xr.DataArray) else np.asarray(Xt)
        if values.ndim != 2 or values.shape[1] != self.n_features_out_:
            raise InputError(
                f"Xt: expected shape (n_samples, {self.n_features_out_}), got {values.shape}"
            )
        X = self.reduction_.back(values)
        if not labelled:
            return X
        dim = layout.sample_dim if layout.sample_dim in Xt.dims else Xt.dims[0]
        samples = {k: c.variable for k, c in Xt.coords.items() if set(c.dims) == {dim}}
        return xr.DataArray(
            X.reshape((X.shape[0], *layout.feature_shape)),
            dims=(dim, *layout.feature_dims),
            coords={**dict(layout.feature_coords), **samples},
            name=layout.name,
            attrs=dict(layout.attrs),
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.allow_nan = True
        return tags


def _warn_gappy(name: str, excluded: dict, takes_missing: bool) -> None:
    """Warn when features with some (not all) values missing were left out: unlike land, they
    may lie inside a region that predicts (a sea-ice edge), and the map is silent about them."""
    gappy = [why for why in excluded.values() if why.code == "gappy"]
    if not gappy:
        return
    remedy = (
        "missing='pairwise' keeps them (pairwise-complete statistics)"
        if takes_missing
        else f"{name} needs every sample of a feature: fill the gaps or leave those samples "
        "out; LinCFA and GenLinCFA keep such features with missing='pairwise'"
    )
    warnings.warn(
        f"{name}: {counted(len(gappy), 'feature')} left out of the map because some of their "
        f"values are missing (e.g. {gappy[0].split(' (')[0]}; excluded_ lists them), wherever "
        f"they lie; {remedy}",
        GappyCellsWarning,
        stacklevel=outside_stacklevel(),
    )


def checked_moments(execution, opts: FitOptions, moments, inp: InputData, Y, folds):
    """Stored ``moments`` checked against this fit: their form (kind, samples, features,
    targets, treatment of missing values) and that they describe this ``y``."""
    stats = execution.checked(opts, moments, inp, Y, folds)
    _check_target_moments(stats, inp, Y, folds, opts.inputs)
    return stats


def _computed(moments):
    """Lazy :class:`Moments` (``compute=False``) computed, those of a list in one pass."""
    from dcfa.stats.moments import compute_all

    if isinstance(moments, Moments):
        return moments.compute()
    if isinstance(moments, list | tuple) and all(isinstance(m, Moments) for m in moments):
        if any(m.is_lazy for m in moments):
            return compute_all(list(moments))
    return moments


############################################################################################
# stored moments against the target of this fit

# rounding of float64 sums (and of a float32 copy of the same values) stays far below this
_MOMENTS_RTOL = 1e-6


def _target_stats(m):
    """``(mean, ss, cross, count, m2)`` of the target(s) in stored moments: their means and
    centred sums of squares ``(k,)``, the features' centred cross-products with them
    ``(D, k)``, the features' counts and centred sums of squares ``(D,)``; None when they
    hold no target or are not computed (lazy: nothing is computed here)."""
    target = m.target_moments()
    if target is None:
        return None
    D = m.n_features
    count = np.asarray(m.column_count)[:D]
    return target.mean, target.m2, target.cross, count, np.asarray(m.column_m2)[:D]


def _check_target_moments(stats, inp: InputData, Y: np.ndarray, folds, inputs) -> None:
    """That stored moments describe the target ``Y`` of this fit, in this order of samples.

    Per part (the row segments of the folds for a list): the target's count, mean and sum of
    squares against ``Y``'s rows (O(n)); for in-memory ``X``, also the cross-product of one
    feature (the one most correlated with the target, without missing values) with ``Y``,
    which a reordered ``Y`` changes (O(n), one column of ``X``). Dask ``X`` is never read.
    """
    parts = list(stats) if isinstance(stats, list | tuple) else [stats]
    if len(parts) == 1:
        bounds = [0, inp.n_samples]
    elif folds is not None and len(parts) == folds.n_segments:
        bounds = list(folds.bounds)
    else:
        return  # the number of parts is refused by the checks that follow
    in_memory = isinstance(inp.data, np.ndarray) and not isinstance(inp.data, np.memmap)
    for s, part in enumerate(parts):
        lo, hi = bounds[s], bounds[s + 1]
        where = "" if len(parts) == 1 else f" (segment {s}, rows {lo}:{hi})"
        if part.n != hi - lo:
            raise InputError(
                f"moments: they describe {part.n} samples{where}, y has {hi - lo} there"
            )
        found = _target_stats(part)
        if found is None:
            continue
        mean, ss, cross, count, m2 = found
        y = Y[lo:hi]
        y_mean = y.mean(axis=0)
        yc = y - y_mean
        y_ss = np.einsum("ij,ij->j", yc, yc)
        level = np.sqrt(np.mean(y * y, axis=0))
        bad_mean = np.abs(mean - y_mean) > _MOMENTS_RTOL * np.maximum(level, 1e-300)
        bad_ss = np.abs(ss - y_ss) > _MOMENTS_RTOL * np.maximum(y_ss, 1e-300)
        if np.any(bad_mean | bad_ss):
            t = int(np.flatnonzero(bad_mean | bad_ss)[0])
            n = max(hi - lo, 1)
            raise InputError(
                f"moments: they were computed with another target{where}: their mean and "
                f"variance of y are {mean[t]:.6g} and {ss[t] / n:.6g}, this y's "
                f"{y_mean[t]:.6g} and {y_ss[t] / n:.6g}; pass the y they were computed with "
                "(moments=None computes them from this one)"
            )
        if not in_memory:
            continue
        complete = (count == part.n) & np.isfinite(m2) & (m2 > 0)
        complete &= np.isfinite(cross).all(axis=1)
        if not complete.any():
            continue
        strength = np.where(complete, np.abs(cross[:, 0]) / np.sqrt(np.where(complete, m2, 1)), -1)
        j = int(np.argmax(strength))
        x = np.asarray(apply_inputs(inp.data[lo:hi, j : j + 1], inputs), dtype=np.float64)
        x = x[:, 0] - x[:, 0].mean()
        ours = x @ yc
        tol = _MOMENTS_RTOL * np.sqrt(m2[j] * np.maximum(ss, y_ss))
        bad = np.abs(ours - cross[j]) > tol
        if np.any(bad):
            t = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"moments: they do not match this y in the order of the samples{where}: "
                f"the centred cross-product of feature {j} with y is {ours[t]:.6g} here, "
                f"{cross[j, t]:.6g} in the moments (y reordered, or moments of other data); "
                "pass the moments of this X and y, or moments=None"
            )

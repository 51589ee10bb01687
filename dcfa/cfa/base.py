"""What LinCFA, NonLinCFA and GenLinCFA estimators share: fit -> moments -> partition -> labels.

A subclass says which moments it needs, how it scales features before aggregating them, and
which rule the driver applies; this base does the input checks, calls the subclass' functional
twin, stores the fitted attributes and implements the lazy ``transform``.
"""

from __future__ import annotations

import logging

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dcfa._validation import (
    InputData,
    check_fitted_X,
    check_n_samples,
    check_X,
    check_y,
    pandas_output,
    validate_params,
)
from dcfa.cfa.aggregate import aggregate, broadcast_back
from dcfa.cfa.basis import MergedMoments
from dcfa.cfa.executions import EXECUTIONS, choose, execution_for_moments
from dcfa.cfa.inputs import apply_inputs, feature_weights, output_attrs
from dcfa.stats.moments import Moments

__all__ = ["BaseCFA"]

logger = logging.getLogger("dcfa")


class BaseCFA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of the feature-aggregation estimators (not for direct use).

    Subclasses implement ``_accept()`` (their rule with its parameters bound) and, when the
    rule reads folds, ``_folds(inp)``; where the statistics come from is an execution of
    :mod:`dcfa.cfa.executions` (``mode``), the same for every rule. Parameters ``inputs``,
    ``aggregation`` and ``standardize``, when a subclass has them, choose the inputs and how
    groups are aggregated (LinCFA: identity, mean of standardised features).
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
        inp = check_X(X, sample_dim=self.sample_dim)
        check_n_samples(inp.n_samples, self._min_samples, why=self._min_samples_reason)
        Y = self._check_target(y, inp)
        folds = self._folds(inp)
        # checked before the pass; used by transform
        weights = feature_weights(self.weights, inp) if hasattr(self, "weights") else None
        if moments is None:
            # auto: the first execution that runs these options within dcfa.memory_budget;
            # refused here, before any compute, when none does
            name = choose(self, inp, folds)
        else:
            moments = _computed(moments)
            name = execution_for_moments(self, inp, folds, moments)
        execution = EXECUTIONS[name]
        extras = execution.prepare(self, inp, folds)
        logger.info(
            "%s: %d samples x %d features (%s), mode=%r",
            type(self).__name__,
            inp.n_samples,
            inp.n_features,
            "dask" if inp.is_dask else "in memory",
            name,
        )
        data = apply_inputs(inp.data, self._inputs)
        if moments is None:
            stats = execution.gather(self, data, Y, extras)
        else:
            stats = self._check_moments(moments, inp, Y, folds, name)
            if name == "neighbors":
                execution.check_reused(stats, inp, extras)
            stats = execution.reuse(self, stats, data, Y, extras)
        labels = execution.partition(self, stats, inp, extras)
        if folds is not None:
            self.folds_ = folds
        if isinstance(stats, list | tuple):  # one Moments per row segment (NonLinCFA)
            self.segment_moments_ = list(stats)
        self.execution_ = name
        self._set_fitted(inp, execution.summary(stats), labels)
        self.feature_weights_ = weights
        if weights is not None:
            total = np.bincount(labels[labels >= 0], weights=weights[labels >= 0])
            if np.any(total <= 0):
                raise ValueError(
                    f"weights: group(s) {np.flatnonzero(total <= 0)[:5].tolist()} have zero "
                    "total weight; their weighted mean is undefined"
                )
        return self

    def _check_moments(self, moments, inp: InputData, Y, folds, name: str):
        """Stored ``moments`` checked against this fit: their form (kind, samples, features,
        targets, treatment of missing values) and that they describe this ``y``."""
        stats = self._moments_form(moments, inp, Y, folds, name)
        _check_target_moments(stats, inp, Y, folds, self._inputs)
        return stats

    def _moments_form(self, moments, inp: InputData, Y, folds, name: str):
        if name in ("neighbors", "seed-rows", "series"):
            from dcfa.stats.columns import ColumnMoments
            from dcfa.stats.grid import GridMoments

            kind = GridMoments if name == "neighbors" else ColumnMoments
            if name == "series" and isinstance(moments, list | tuple):
                raise TypeError(
                    "moments: mode='series' reuses one ColumnMoments (of all rows); a list "
                    "of them, one per row segment, is what mode='seed-rows' reuses"
                )
            if isinstance(moments, list | tuple):
                # NonLinCFA's folds: one per row segment, checked against the folds after
                if not moments or not all(isinstance(m, kind) for m in moments):
                    raise TypeError(
                        f"moments: expected a list of {kind.__name__} (one per segment)"
                    )
                segments = 0 if folds is None else folds.n_segments
                if kind is ColumnMoments and len(moments) != segments:
                    expect = "one value" if folds is None else f"one per row segment ({segments})"
                    raise ValueError(
                        f"moments: {len(moments)} {kind.__name__}, expected {expect} for this "
                        "estimator"
                    )
                n = sum(m.n for m in moments)
                if n != inp.n_samples or moments[0].n_features != inp.n_features:
                    raise ValueError(
                        f"moments: they describe {n} samples x {moments[0].n_features} "
                        f"features, but X has {inp.n_samples} x {inp.n_features}"
                    )
                return list(moments)
            if not isinstance(moments, kind):
                raise TypeError(
                    f"moments: mode={name!r} reuses {kind.__name__}, got {type(moments).__name__}"
                )
            if name == "seed-rows" and folds is not None:
                raise ValueError(
                    f"moments: mode='seed-rows' reuses one ColumnMoments per row segment of "
                    f"the folds ({folds.n_segments}, segment_moments_), got one value"
                )
            if moments.n != inp.n_samples or moments.n_features != inp.n_features:
                raise ValueError(
                    f"moments: they describe {moments.n} samples x {moments.n_features} "
                    f"features, but X has {inp.n_samples} x {inp.n_features}"
                )
            return moments
        parts = [moments] if isinstance(moments, Moments) else list(moments)
        if not parts or not all(isinstance(p, Moments) for p in parts):
            raise TypeError("moments: expected a Moments value (or a list of them)")
        expect = 1 if folds is None else folds.n_segments
        if len(parts) != expect:
            raise ValueError(
                f"moments: expected {expect} Moments for this estimator, got {len(parts)}"
            )
        n = sum(p.n for p in parts)
        if parts[0].n_features != inp.n_features or n != inp.n_samples:
            raise ValueError(
                f"moments: they describe {n} samples x {parts[0].n_features} features, but X "
                f"has {inp.n_samples} x {inp.n_features}"
            )
        if parts[0].n_targets != Y.shape[1]:
            raise ValueError(f"moments: {parts[0].n_targets} targets, expected {Y.shape[1]}")
        if getattr(self, "missing", "exclude") != parts[0].missing:
            raise ValueError(
                f"moments: computed with missing={parts[0].missing!r}, the estimator has "
                f"missing={getattr(self, 'missing', 'exclude')!r}"
            )
        return moments if isinstance(moments, Moments) else parts

    def _folds(self, inp: InputData):
        """The cross-validation folds the rule reads (NonLinCFA), or None."""
        return None

    def _accept(self):
        """The rule of :mod:`dcfa.cfa.rules` with this estimator's parameters bound."""
        raise NotImplementedError

    def fit_record(self) -> dict:
        """How this fit was made, as attributes a result store keeps (JSON-able): the
        execution that ran (:func:`dcfa.load_result` reads the cells by it)."""
        check_is_fitted(self, "labels_")
        return {"execution": self.execution_}

    def execution_for(self, X) -> str:
        """The execution ``fit(X, y)`` would run (``mode``, or what ``"auto"`` picks).

        Checks the parameters as ``fit`` does and reads no data. Raises
        :class:`dcfa.MemoryBudgetError` when no execution fits the memory budget.
        """
        validate_params(self)
        inp = check_X(X, sample_dim=self.sample_dim)
        return choose(self, inp, self._folds(inp))

    @property
    def _inputs(self):
        return getattr(self, "inputs", "identity")

    @property
    def _aggregation(self) -> str:
        return getattr(self, "aggregation", "mean")

    @property
    def _standardize(self) -> bool:
        return getattr(self, "standardize", True)

    _min_samples_reason = "the aggregation test divides by n - 3"

    def _check_target(self, y, inp: InputData) -> np.ndarray:
        Y = check_y(y, inp.n_samples, layout=inp.layout)
        if Y.shape[1] != 1:
            raise ValueError(f"y: expected a single target, got {Y.shape[1]} columns")
        return Y

    def grid_pass_request(self, X) -> dict | None:
        """The grid pass a fit on ``X`` gathers its moments from, or None.

        ``{"radius": R, "periodic": dims, "blocks": dims}`` when the fit runs the grid
        execution (``mode="neighbors"``, or what ``"auto"`` picks): a caller that makes its own
        pass over the same data (the batch job's preprocessing pass) gathers them there with
        :func:`dcfa.grid_moments` and passes them to ``fit(X, y, moments=...)``. Parameters
        are checked as ``fit`` checks them.
        """
        validate_params(self)
        inp = check_X(X, sample_dim=self.sample_dim)
        folds = self._folds(inp)
        if folds is not None or choose(self, inp, folds) != "neighbors":
            return None  # per-fold grid moments come from the estimator's own passes
        extras = EXECUTIONS["neighbors"].prepare(self, inp, folds)
        return {
            "radius": extras["reach"],
            "periodic": extras["periodic"],
            "blocks": extras["blocks"],
        }

    def _set_fitted(self, inp: InputData, m: Moments, labels: np.ndarray) -> None:
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
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = 1.0 / std if self._standardize else np.ones(D)
        self.scale_ = np.where(used, scale, np.nan)
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
            raise ValueError(
                "X: every feature was excluded: "
                + "; ".join(f"{k}: {v}" for k, v in list(self.excluded_.items())[:5])
            )
        logger.info(
            "%s: %d features -> %d groups (%d excluded)",
            type(self).__name__,
            D,
            self.n_features_out_,
            len(self.excluded_),
        )

    @property
    def moments_(self):
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
        attributes, with the units of the aggregates: ``"1"`` for standardised features,
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
        Xt = aggregate(
            apply_inputs(inp.data, self._inputs),
            self.labels_,
            np.nan_to_num(self.scale_),
            self._centre,
            how=self._aggregation,
            nan_aware=getattr(self, "missing", "exclude") == "pairwise",
            weights=getattr(self, "feature_weights_", None),
        )
        if inp.layout is None:
            return Xt
        out = inp.layout.samples(
            Xt,
            dim="group",
            coords={"group": np.arange(self.n_features_out_)},
            name=f"{type(self).__name__.lower()}_features",
            attrs=output_attrs(
                inp.layout.attrs, inputs=self._inputs, standardized=self._standardize
            ),
        )
        return pandas_output(self, out)

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
            raise ValueError(
                f"Xt: expected shape (n_samples, {self.n_features_out_}), got {values.shape}"
            )
        X = broadcast_back(
            values,
            self.labels_,
            np.nan_to_num(self.scale_, nan=1.0),
            self._centre,
            how=self._aggregation,
        )
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

    @property
    def _centre(self) -> np.ndarray:
        """What is subtracted before aggregating: the means for standardised aggregation,
        nothing otherwise (a group is then the plain mean or sum of its inputs)."""
        if self._standardize:
            return np.nan_to_num(self.mean_)
        return np.zeros(self.n_features_in_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.allow_nan = True
        return tags


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
    if isinstance(m, Moments):
        if m.is_lazy or m.n_targets == 0:
            return None
        D, k = m.n_features, m.n_targets
        count = m.column_count
        ss = m.column_var(ddof=0) * count
        cross = np.stack([np.asarray(m.cross[:D, D + t]) for t in range(k)], axis=1)
        return m.column_mean[D:], ss[D:], cross, count[:D], ss[:D]
    target = getattr(m, "target_cross", None)
    if target is None:
        return None
    ss = m.target_m2 if hasattr(m, "target_m2") else m.target_ss
    return (
        np.array([m.target_mean], dtype=np.float64),
        np.array([ss], dtype=np.float64),
        np.asarray(target, dtype=np.float64).reshape(-1, 1),
        np.asarray(m.count),
        np.asarray(m.column_m2, dtype=np.float64),
    )


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
            raise ValueError(
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
            raise ValueError(
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
            raise ValueError(
                f"moments: they do not match this y in the order of the samples{where}: "
                f"the centred cross-product of feature {j} with y is {ours[t]:.6g} here, "
                f"{cross[j, t]:.6g} in the moments (y reordered, or moments of other data); "
                "pass the moments of this X and y, or moments=None"
            )

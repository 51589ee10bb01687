"""Anomalies as an estimator: a climatology fitted on the training rows only.

:class:`Anomalies` removes each calendar month's mean (and, optionally, divides by the spread
of the anomalies) with statistics learnt in ``fit``. Inside a :class:`sklearn.pipeline.Pipeline`
(``make_pipeline(Anomalies(), LinCFA())``) that is refitted in every fold of
:func:`dcfa.skill.forward_cv` or :func:`dcfa.skill.blocked_cv`, no statistic of a test month is
used to fit anything, unlike anomalies computed once from the whole record before the
cross-validation.

The statistics come from one pass of dcfa's grid engine (:func:`dcfa.stats.grid.grid_pass`)
with the calendar months as segments: every row block gives, per month and cell, the count
and the mean, and the sum of squared deviations from it (float64); blocks are merged with the
pairwise update of Chan, Golub & LeVeque, never from raw sums of squares. ``transform`` is one
blockwise operation per chunk that keeps the field's chunks
(:func:`dcfa.stats.graph.lazy_anomalies`, shared with :func:`dcfa.io.apply_preprocessing`).
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dcfa._errors import InputError, InputTypeError
from dcfa._validation import (
    StrOptions,
    _check_numeric,
    check_fitted_X,
    check_units,
    check_X,
    feature_order,
    validate_params,
)
from dcfa.io.calendars import (
    SUB_MONTHLY,
    calendar_of,
    months_of,
    months_once,
    samples_per_month,
)
from dcfa.stacking import FeatureLayout
from dcfa.stats.graph import lazy_anomalies  # the Dask side, shared with dcfa.io.preprocess
from dcfa.stats.kernels import anomaly_block

__all__ = ["Anomalies"]

BY = ("month",)
_N_GROUPS = {"month": 12, None: 1}

############################################################################################
# the statistics: one pass of dcfa's grid engine with the months as segments


def _refuse_repeated_dates(coord: xr.DataArray, dim: str) -> None:
    """A date held twice would weigh twice in its month's climatology."""
    index = pd.Index(np.asarray(coord.values))
    if index.is_unique:
        return
    repeated = index[index.duplicated()]
    shown = ", ".join(str(v).removesuffix(" 00:00:00") for v in repeated[:3])
    raise InputError(
        f"X: its {dim!r} labels repeat {shown}{', ...' if len(repeated) > 3 else ''} "
        f"({len(repeated)} repeated); a repeated date would weigh twice in its month's "
        f"climatology: drop the duplicates first (X.drop_duplicates({dim!r}))"
    )


def _frame_dates(X, dim: str) -> xr.DataArray | None:
    """The dates of a pandas DataFrame's rows (a DatetimeIndex without a time zone, a
    PeriodIndex, or cftime dates) as a coordinate named ``dim``, else None."""
    index = getattr(X, "index", None)
    if not isinstance(index, pd.Index) or isinstance(X, xr.DataArray):
        return None
    if isinstance(index, pd.PeriodIndex):
        index = index.to_timestamp()
    coord = xr.DataArray(np.asarray(index), dims=dim, name=dim)
    return coord if calendar_of(coord) is not None else None


def _fit_stats(data, groups: np.ndarray, n_groups: int, standardize: bool):
    """Climatology ``(n_groups, *grid)`` (NaN without data) and spread ``grid`` (or None).

    One :func:`dcfa.stats.grid.grid_pass` over ``data`` (samples first, NumPy or Dask) with
    the groups as segments: their means are the climatology; the moments pooled within them
    are the anomalies'. The spread is the standard deviation (``ddof=1``) of the anomalies:
    the square root of the pooled sums of squared deviations over the count minus one. It is
    NaN where a cell has fewer than two values or is constant up to rounding (the test of
    scikit-learn's ``StandardScaler``).
    """
    from dcfa.stats.grid import grid_pass

    grid = data.shape[1:]
    done = grid_pass(
        data.reshape(-1, 1) if not grid else data, segments=groups, n_segments=n_groups
    )
    seen = done.segment_seen.reshape(-1, *grid)  # a single series: grid ()
    clim = np.where(seen > 0, done.segment_mean.reshape(seen.shape), np.nan)
    if not standardize:
        return clim, None
    n = seen.sum(axis=0)
    m2 = done.moments.diag.reshape(n.shape)
    var = np.divide(m2, n - 1, out=np.full(n.shape, np.nan), where=n > 1)
    eps = np.finfo(np.float64).eps
    level = np.abs(np.where(seen > 0, clim, 0.0)).max(axis=0)  # 0 without data
    constant = var <= n * eps * var + (n * level * eps) ** 2
    return clim, np.sqrt(np.where(constant, np.nan, var))


############################################################################################
# the estimator


# scikit-learn's wrapping of transform's output is off (auto_wrap_output_keys=None): it
# would make a DataFrame of a (time, lat, lon) DataArray and fail; set_output is this
# class's own
class Anomalies(OneToOneFeatureMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Anomalies from a climatology fitted on the training rows: ``(x - clim[month]) / scale``.

    ``fit`` learns, per cell, the mean of every calendar month over the rows it is given
    (``by="month"``) or the overall mean (``by=None``) and, with ``standardize=True``, the
    spread of the anomalies; ``transform`` removes them from any rows. In a
    :class:`~sklearn.pipeline.Pipeline` before a CFA estimator, cross-validation refits it
    on every training fold, so test months never enter the climatology.

    Parameters
    ----------
    by : {"month"} or None, default="month"
        ``"month"``: subtract the mean of each row's calendar month (the month comes from the
        ``sample_dim`` coordinate of an :class:`xarray.DataArray`: ``datetime64`` or cftime
        dates of any calendar; or from a pandas DataFrame's DatetimeIndex or PeriodIndex).
        ``None``: subtract the overall mean (the only choice for NumPy or Dask arrays, which
        carry no dates).
    standardize : bool, default=False
        Also divide by the spread: the standard deviation (``ddof=1``) over the training rows
        of each cell's anomalies (its values minus their month's mean).
    sample_dim : str, default="time"
        The sample dim of an xarray input; every other dim is a feature (grid) dim.

    Attributes
    ----------
    climatology_ : ndarray or xarray.DataArray
        ``by="month"``: shape ``(12, *grid)``, the mean of months 1..12 (a DataArray with a
        ``month`` dim and the grid's coordinates and attributes when fitted on one); NaN for
        months absent from the training rows and for cells without data in a month.
        ``by=None``: shape ``grid`` (``(n_features,)`` for an array), the overall mean.
    scale_ : ndarray, xarray.DataArray or None
        Shape ``grid``: the spread each anomaly is divided by (``standardize=True``), else
        None. NaN where a cell has fewer than two values or is constant (up to rounding) over
        the training rows: those cells' outputs are NaN, as in
        :func:`dcfa.io.apply_preprocessing`, and CFA estimators exclude and report them.
    months_ : ndarray of int
        The calendar months (1..12) of the training rows, sorted (``by="month"`` only).
    n_features_in_ : int
        Number of cells (the product of the grid dims' sizes, or the array's columns).
    n_samples_seen_ : int
        Number of training rows.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Column names of a pandas DataFrame ``X``; only defined when fitted on one.

    See Also
    --------
    dcfa.io.fit_preprocessing : the batch job's climatology (fitted on every month given).
    dcfa.skill.forward_cv : forward-chaining cross-validation that refits it in every fold.

    Notes
    -----
    One pass over the data: every row block gives the count, mean and sum of squared
    deviations of each (month, cell), and blocks are merged with the pairwise update of Chan,
    Golub & LeVeque (float64 throughout), so offsets such as 273.15 K keep the anomalies'
    digits. ``transform`` is lazy on Dask (one blockwise operation per chunk, chunks kept;
    not xarray's ``groupby``, which would split the time axis into one step per chunk) and
    raises if a row's month has no climatology rather than returning NaN.

    Examples
    --------
    >>> import numpy as np, pandas as pd, xarray as xr
    >>> time = pd.date_range("2000-01-01", periods=24, freq="MS")
    >>> X = xr.DataArray(np.arange(24.0), dims="time", coords={"time": time})
    >>> Anomalies().fit(X[:12]).transform(X[12:]).values
    array([12., 12., 12., 12., 12., 12., 12., 12., 12., 12., 12., 12.])
    """

    _parameter_constraints: dict = {
        "by": [StrOptions(set(BY)), None],
        "standardize": ["boolean"],
        "sample_dim": [str],
    }

    def __init__(
        self, by: str | None = "month", standardize: bool = False, sample_dim: str = "time"
    ):
        self.by = by
        self.standardize = standardize
        self.sample_dim = sample_dim

    def months_once(self, X: xr.DataArray | ArrayLike | da.Array) -> list[str]:
        """The calendar months that the samples of ``X`` hold only once (``"Jan"``, ...).

        With ``by="month"`` a month's climatology fitted on these samples would be its one
        sample, and its anomalies 0 in every cell. :func:`dcfa.forward_cv` and
        :func:`dcfa.blocked_cv` ask it of every training window before any fit. Empty for
        ``by=None``, or when ``X`` carries no dates (``fit`` says what it needs). Reads the
        dates only.
        """
        coord = self._dates(X)
        if self.by != "month" or coord is None or calendar_of(coord) is None:
            return []
        return months_once(months_of(coord, "X"))

    # -- fit -----------------------------------------------------------------------------

    def fit(self, X, y=None) -> Anomalies:
        """Learn the climatology (and spread) of ``X``'s rows.

        Parameters
        ----------
        X : xarray.DataArray, array-like or dask.array.Array
            A DataArray with dims ``(sample_dim, *grid)`` in any order (NumPy or Dask backed),
            or an ``(n_samples, n_features)`` array (then ``by`` must be None).
        y : ignored
            Accepted for pipelines.

        Returns
        -------
        self
        """
        validate_params(self)
        data, groups, labelled, _ = self._check_input(X, reset=True)
        if self.by == "month":
            self._warn_sub_monthly(X)
        counts = np.bincount(groups)
        if counts.max(initial=0) < 2:
            per = "calendar month present" if self.by == "month" else "cell"
            raise InputError(
                f"X: every {per} has a single sample in X ({data.shape[0]} samples), so the "
                "anomalies are all 0"
                + (" and have no spread to divide by" if self.standardize else "")
                + "; fit on at least two samples of a "
                + ("month (two years)" if self.by == "month" else "cell")
            )
        if self.by == "month" and (counts == 1).any():
            once = months_once(groups + 1)  # groups are months 0..11
            warnings.warn(
                f"{type(self).__name__}: {', '.join(once)} present once in X, so their "
                "anomalies are 0 in every cell"
                + (" (and their spread is that of the other months)" if self.standardize else "")
                + "; fit on at least two years of each month",
                UserWarning,
                stacklevel=2,
            )
        self._clim, self._scale = _fit_stats(data, groups, _N_GROUPS[self.by], self.standardize)
        clim, scale = self._clim if self.by == "month" else self._clim[0], self._scale
        self.n_samples_seen_ = int(data.shape[0])
        self.n_features_in_ = int(np.prod(self._grid_shape, dtype=np.int64))
        if self.by == "month":
            self.months_ = np.unique(groups) + 1
        elif hasattr(self, "months_"):
            del self.months_
        self.climatology_ = self._labelled(clim, month=self.by == "month") if labelled else clim
        if scale is None:
            self.scale_ = None
        else:
            self.scale_ = self._labelled(scale, month=False) if labelled else scale
        return self

    def _dates(self, X):
        """The sample dates of ``X``: a DataArray's coordinate, a DataFrame's index (None
        where it has none)."""
        coord = getattr(X, "coords", {}).get(self.sample_dim)
        return _frame_dates(X, self.sample_dim) if coord is None else coord

    def _warn_sub_monthly(self, X) -> None:
        """Warn when the samples are daily (or finer): a monthly climatology then leaves the
        seasonal cycle within each month in the anomalies, a ramp from its start to its end."""
        coord = self._dates(X)
        per = 0.0 if coord is None else samples_per_month(coord)
        if per < 2:
            return
        warnings.warn(
            f"{type(self).__name__}: by='month' on {per:.0f} samples a month: {SUB_MONTHLY}. "
            "Remove a daily climatology first, e.g. "
            f"X.groupby('{self.sample_dim}.dayofyear') minus its mean over the training "
            "years, then use by=None.",
            UserWarning,
            stacklevel=3,
        )

    def _check_input(self, X, *, reset: bool):
        """``(data, groups, labelled, order)``: the data with samples first, 0-based groups,
        and where a DataArray's grid labels are in another order than the training data's
        (:func:`dcfa._validation.feature_order`; empty when fitting)."""
        if isinstance(X, xr.DataArray):
            data, groups, order = self._check_dataarray(X, reset=reset)
            return data, groups, True, order
        if reset:
            self._grid_dims = None
        elif self._grid_dims is not None:
            raise InputTypeError(
                f"X: {type(self).__name__} was fitted on an xarray.DataArray; transform needs "
                f"one too (with dims {(self.sample_dim, *self._grid_dims)}), got "
                f"{type(X).__name__}"
            )
        dates = _frame_dates(X, self.sample_dim)
        if self.by == "month" and dates is None:
            raise InputError(
                f"by: 'month' needs the dates of the samples, which a {type(X).__name__} does "
                "not carry; pass an xarray.DataArray with a date coordinate "
                f"{self.sample_dim!r} or a pandas DataFrame on a DatetimeIndex (without a time "
                "zone), or use by=None (the overall mean)"
            )
        inp = check_X(X) if reset else check_fitted_X(self, X)  # column names, count
        data = inp.data
        if data.shape[0] == 0:
            raise InputError(
                f"X: 0 sample(s) (shape={data.shape}) while a minimum of 1 is required."
            )
        if reset:
            self._grid_shape = (int(data.shape[1]),)
            if inp.feature_names is not None:
                self.feature_names_in_ = inp.feature_names
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        if self.by != "month":
            return data, np.zeros(data.shape[0], dtype=np.int64), False, {}
        if reset:
            _refuse_repeated_dates(dates, self.sample_dim)
        return data, months_of(dates, "X") - 1, False, {}

    def _check_dataarray(self, X: xr.DataArray, *, reset: bool):
        _check_numeric(X.dtype, "X")
        dim = self.sample_dim
        if dim not in X.dims:
            raise InputError(f"sample_dim: {dim!r} is not a dim of X, whose dims are {X.dims}")
        if not reset and self._grid_dims is None:
            raise InputTypeError(
                f"X: {type(self).__name__} was fitted on an array; transform needs an array "
                "too, got an xarray.DataArray"
            )
        if not reset:
            check_units(self._attrs.get("units"), X.attrs.get("units"), "the climatology")
        grid_dims = tuple(d for d in X.dims if d != dim) if reset else self._grid_dims
        # the training grid's dims, sizes and labels (in any order, any longitude convention)
        order = {} if reset else feature_order(X, self._fitted_layout, name="X")
        if X.sizes[dim] == 0:
            raise InputError(f"X: 0 samples along {dim!r}; at least 1 is required")
        X = X.transpose(dim, *grid_dims)
        if self.by == "month":
            try:
                groups = months_of(X[dim], "X") - 1
            except InputError as exc:
                raise InputError(f"{exc} (or use by=None, the overall mean)") from None
            if reset:
                _refuse_repeated_dates(X[dim], dim)
        else:
            groups = np.zeros(X.sizes[dim], dtype=np.int64)
        if reset:
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            self._grid_dims = grid_dims
            self._grid_shape = tuple(int(X.sizes[d]) for d in grid_dims)
            self._grid_coords = {
                k: v.variable for k, v in X.coords.items() if dim not in v.dims and k != dim
            }
            self._attrs = dict(X.attrs)
            self._name = X.name
        return X.data, groups, order

    @property
    def _fitted_layout(self) -> FeatureLayout:
        """The training grid, as the checks of :mod:`dcfa._validation` take it."""
        return FeatureLayout(
            sample_dim=self.sample_dim,
            feature_dims=self._grid_dims,
            feature_shape=self._grid_shape,
            feature_coords=self._grid_coords,
            sample_coords={},
            name=self._name,
            attrs=self._attrs,
        )

    def _labelled(self, values: np.ndarray, *, month: bool) -> xr.DataArray:
        dims = ("month", *self._grid_dims) if month else self._grid_dims
        coords = {k: v for k, v in self._grid_coords.items() if set(v.dims) <= set(dims)}
        if month:
            coords["month"] = np.arange(1, 13)
        return xr.DataArray(values, dims=dims, coords=coords, name=self._name, attrs=self._attrs)

    # -- transform -----------------------------------------------------------------------

    def transform(self, X):
        """Subtract the fitted climatology of every row's month (and divide by the spread).

        Parameters
        ----------
        X : xarray.DataArray, array-like or dask.array.Array
            Like the training data (the same grid dims and sizes, in any order, and the
            same coordinate labels, in any order or longitude convention: the statistics
            follow the labels; or the same columns); any rows, whose months must occur in
            the training rows.

        Returns
        -------
        Xt : same type as X
            A DataArray keeps its dims (in their order), coordinates, name and attributes
            (with ``units = "1"`` when ``standardize``: anomalies over their spread); Dask
            input gives a lazy result with the same chunks. Float64 (float32 input stays
            float32; the arithmetic is float64).

        Raises
        ------
        ValueError
            If a row's calendar month does not occur in the training rows (it has no
            climatology), naming the months; if a DataArray's ``units`` attribute names
            other units than the training DataArray's (both set; spellings of one unit,
            ``K`` and ``kelvin``, are the same).
        """
        check_is_fitted(self, "n_features_in_")
        data, groups, labelled, order = self._check_input(X, reset=False)
        if self.by == "month":
            missing = np.setdiff1d(np.unique(groups) + 1, self.months_)
            if missing.size:
                raise InputError(
                    f"X: month(s) {missing.tolist()} do not occur in the training data, so "
                    f"they have no climatology (fitted on months {self.months_.tolist()}); "
                    "fit on rows covering every month to transform"
                )
        clim, scale = self._clim, self._scale
        for d, positions in order.items():  # the statistics in X's order of the labels
            axis = self._grid_dims.index(d)
            inverse = np.empty_like(positions)
            inverse[positions] = np.arange(positions.size)
            clim = np.take(clim, inverse, axis=1 + axis)
            scale = None if scale is None else np.take(scale, inverse, axis=axis)
        dtype = np.result_type(data.dtype, np.float32)
        if isinstance(data, da.Array):
            out = lazy_anomalies(data, clim, scale, groups, dtype)
        else:
            out = anomaly_block(data, clim, scale, groups, out_dtype=dtype)
        if not labelled:
            return self._container(out, X)
        Xt = X.transpose(self.sample_dim, *self._grid_dims).copy(data=out)
        if self.standardize:  # anomalies over their spread: dimensionless
            Xt.attrs = {**Xt.attrs, "units": "1"}
        return Xt.transpose(*X.dims)

    def set_output(self, *, transform: str | None = None) -> Anomalies:
        """The container of :meth:`transform`'s output, as scikit-learn's ``set_output``.

        A DataArray stays a DataArray whatever is asked: its grid and dates are what the
        steps after it need (a pipeline's ``set_output`` reaches every step, and the last
        one gives the table). An in-memory array (or DataFrame) becomes a DataFrame with
        ``transform="pandas"`` (columns :meth:`get_feature_names_out`, a DataFrame input's
        index), or a polars DataFrame with ``"polars"``; a Dask array stays lazy.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"} or None
            None leaves the setting as it is; ``"default"`` follows scikit-learn's global
            ``transform_output``.

        Returns
        -------
        self
        """
        if transform is None:
            return self
        if transform not in ("default", "pandas", "polars"):
            raise ValueError(
                f"transform: expected 'default', 'pandas', 'polars' or None, got {transform!r}"
            )
        # the attribute scikit-learn's clone copies, so that cross-validation keeps it
        self._sklearn_output_config = {"transform": transform}
        return self

    def _container(self, out, X):
        """``out`` (anomalies of unlabelled rows) in the container ``set_output`` asked for."""
        from sklearn.utils._set_output import _get_output_config

        kind = _get_output_config("transform", self)["dense"]
        if kind == "default" or isinstance(out, da.Array) or np.ndim(out) != 2:
            return out
        import pandas as pd

        frame = pd.DataFrame(
            out, columns=self.get_feature_names_out(), index=getattr(X, "index", None)
        )
        if kind == "polars":
            import polars

            return polars.from_pandas(frame)
        return frame

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.requires_fit = True
        return tags

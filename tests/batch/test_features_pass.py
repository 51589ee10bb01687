"""The region series: the groups' sums of every row (``np.add.at`` per batch of rows) are
the sparse product they replace, bit for bit, and the anomalies folded into that sweep are the
anomalies aggregated, bit for bit; the features pass of the job (and ``dcfa apply``) gives
what the fitted estimator's ``transform`` gives on the preprocessed cells."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import chunks

import dcfa.cfa.aggregate as agg
from dcfa import GenLinCFA, LinCFA
from dcfa.batch.features import region_series
from dcfa.io.preprocess import apply_preprocessing, preprocessing_pass
from dcfa.stats.kernels import anomaly_block


def _sparse_product(x, labels, scale, weights=None, how="mean"):
    """The reference: the sparse ``(D, d)`` matrix of the groups, as a SciPy product."""
    W = agg.group_matrix(labels, scale, how=how, weights=weights)
    return np.asarray((W.T @ np.asarray(x, dtype=np.float64).T).T)


def _problem(rng, n, D, float32=False):
    d = int(rng.integers(1, D + 1))
    labels = rng.integers(-1, d, D)
    labels[: min(d, D)] = np.arange(min(d, D))
    x = rng.normal(size=(n, D)) * 10 ** rng.uniform(-3, 3) + rng.normal() * 100
    x[rng.random(x.shape) < 0.02] = np.nan
    x[:, labels < 0] = np.inf  # excluded features: never reach a group, no warning
    return (x.astype(np.float32) if float32 else x), labels, rng.uniform(0.1, 3, D)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 60),
    D=st.integers(1, 300),
    batch=st.sampled_from([1, 7, 64, 1 << 16]),
    weighted=st.booleans(),
    float32=st.booleans(),
    how=st.sampled_from(["mean", "sum"]),
    seed=st.integers(0, 2**16),
)
def test_group_rows_are_the_sparse_product_bit_for_bit(n, D, batch, weighted, float32, how, seed):
    rng = np.random.default_rng(seed)
    x, labels, scale = _problem(rng, n, D, float32)
    weights = rng.uniform(0.1, 2, D) if weighted else None
    old, agg._BATCH_VALUES = agg._BATCH_VALUES, batch  # several rows per batch, or one
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = agg.aggregate(x, labels, scale, np.zeros(D), how=how, weights=weights)
    finally:
        agg._BATCH_VALUES = old
    ref = _sparse_product(x, labels, scale, weights, how)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 40),
    D=st.integers(1, 120),
    climatology=st.booleans(),
    spread=st.booleans(),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_folded_anomalies_are_the_anomalies_aggregated(n, D, climatology, spread, data, seed):
    rng = np.random.default_rng(seed)
    x, labels, scale = _problem(rng, n, D)
    clim = rng.normal(size=(12, D)) * 100 if climatology else None
    std = rng.uniform(0.5, 2, D) if spread else None
    months = rng.integers(0, 12, n)
    mean = rng.normal(size=D)
    anomalies = anomaly_block(x, clim, std, months, out_dtype=np.float64)
    ref = agg.aggregate(anomalies, labels, scale, mean)
    got = agg.aggregate(x, labels, scale, mean, anomalies=(clim, std, months))
    np.testing.assert_array_equal(got, ref)  # NumPy
    c = (data.draw(chunks(n)), data.draw(chunks(D)))
    lazy = agg.aggregate(
        da.from_array(x, chunks=c), labels, scale, mean, anomalies=(clim, std, months)
    )
    assert isinstance(lazy, da.Array)
    # Dask: the same sums per feature block as the anomalies' (bit for bit), and with one
    # feature block the NumPy values
    blocks = agg.aggregate(da.from_array(anomalies, chunks=c), labels, scale, mean)
    np.testing.assert_array_equal(lazy.compute(), blocks.compute())
    if len(c[1]) == 1:
        np.testing.assert_array_equal(lazy.compute(), ref)
    else:
        np.testing.assert_allclose(lazy.compute(), ref, rtol=1e-12, atol=1e-9)


def test_anomalies_are_not_for_the_nan_aware_aggregation():
    x = np.ones((4, 3))
    with pytest.raises(ValueError, match="anomalies: not with nan_aware=True"):
        agg.aggregate(x, [0, 0, 1], np.ones(3), np.zeros(3), nan_aware=True,
                      anomalies=(None, None, None))  # fmt: skip


def _field(chunks=None, n=96, shape=(8, 12), seed=0):
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 4))
    region = rng.integers(0, 4, shape)
    season = 3 * np.sin(2 * np.pi * np.arange(n) / 12)[:, None, None]
    X = 280 + season + latent[:, region] + 0.5 * rng.normal(size=(n, *shape))
    X[:, :2, :3] = np.nan  # land
    X[5, 4, 4] = np.nan  # one gap: that cell is excluded (missing="exclude") or kept
    y = latent @ np.array([1.0, -0.5, 0.2, 0.0]) + rng.normal(size=n)
    data = X if chunks is None else da.from_array(X, chunks=chunks)
    field = xr.DataArray(
        data,
        dims=("time", "lat", "lon"),
        coords={
            "time": pd.date_range("2000-01-01", periods=n, freq="MS"),
            "lat": np.linspace(-30, 30, shape[0]),
            "lon": np.arange(shape[1]) * 10.0,
        },
    )
    return field, y


@pytest.mark.parametrize(
    "estimator",
    [
        LinCFA(neighbors=1),
        LinCFA(neighbors=1, weights="area"),
        GenLinCFA(neighbors=1, aggregation="sum"),
        GenLinCFA(neighbors=1, inputs="square"),
        LinCFA(missing="pairwise"),
    ],
    ids=["lincfa", "area", "sum", "square", "pairwise"],
)
@pytest.mark.parametrize("prep_kind", ["anomalies+standardize", "anomalies", "none"])
def test_the_features_pass_is_the_estimators_transform(estimator, prep_kind):
    """As the job computes them: the estimator fitted on the preprocessed cells that hold data;
    the series of the raw field equal its transform of those cells, bit for bit (the field
    chunked as an archive: samples in blocks, the grid whole)."""
    field, y = _field(chunks=(24, 8, 12))
    prep, _ = preprocessing_pass(
        field, anomalies="anomalies" in prep_kind, standardize="standardize" in prep_kind
    )
    prepared = apply_preprocessing(field, prep)
    keep = np.flatnonzero(prep.has_data.values.ravel())
    cells = prepared.stack(cell=["lat", "lon"]).isel(cell=keep)
    model = estimator.fit(cells, y)
    expected = model.transform(cells).compute()
    got = region_series(field, prep, model.reduction_, keep, sample_dim="time")
    assert isinstance(got.data, da.Array) and got.dims == ("time", "group")
    np.testing.assert_array_equal(got.values, expected.values)
    np.testing.assert_array_equal(got.time.values, field.time.values)
    # in memory: NumPy in, NumPy out, the same values
    eager = region_series(field.load(), prep, model.reduction_, keep, sample_dim="time")
    assert isinstance(eager.data, np.ndarray)
    np.testing.assert_array_equal(eager.values, expected.values)


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_the_features_pass_on_any_chunks(data):
    """Other chunks of the grid sum each group's cells in other blocks: the same values up to
    float64 rounding."""
    c = (data.draw(chunks(96)), data.draw(chunks(8)), data.draw(chunks(12)))
    field, y = _field(chunks=c)
    prep, _ = preprocessing_pass(field, anomalies=True, standardize=True)
    prepared = apply_preprocessing(field.load(), prep)
    keep = np.flatnonzero(prep.has_data.values.ravel())
    cells = prepared.stack(cell=["lat", "lon"]).isel(cell=keep)
    model = LinCFA(neighbors=1).fit(cells, y)
    got = region_series(field, prep, model.reduction_, keep, sample_dim="time").values
    np.testing.assert_allclose(got, model.transform(cells).values, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("feature_chunks", [-1, 700])
@pytest.mark.parametrize("nan_aware", [False, True])
def test_the_constants_are_in_the_graph_once(feature_chunks, nan_aware):
    """The groups, weights, climatology and spread of the features (the NaN-aware sums'
    sparse matrices) are tasks of their own that every block's task reads, not copies inside
    every block's task: the graph is about their size whatever the number of blocks of
    samples (ten here), not ten times it."""
    import pickle

    rng = np.random.default_rng(0)
    D, n = 2_000, 400
    labels = rng.integers(-1, 300, D)
    X = da.random.default_rng(0).normal(size=(n, D), chunks=(n // 10, feature_chunks))
    scale, centre = rng.uniform(0.1, 3, D), rng.normal(size=D)
    if nan_aware:
        out = agg.aggregate(X, labels, scale, centre, nan_aware=True)
        used = labels >= 0
        matrix = agg.group_matrix(labels, scale, how="sum")
        constants = 3 * len(pickle.dumps(matrix)) + 8 * int(used.sum())  # W0, C, M; sizes
    else:
        clim, spread = rng.normal(size=(12, D)), rng.uniform(0.5, 2, D)
        months = np.arange(n) % 12
        out = agg.aggregate(X, labels, scale, centre, anomalies=(clim, spread, months))
        constants = clim.nbytes + spread.nbytes + 2 * D * 8  # + the bins and the values
    graph = dict(out.__dask_graph__())
    size = sum(len(pickle.dumps(task)) for task in graph.values())
    assert size < 1.5 * constants, (size, constants)

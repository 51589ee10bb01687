"""dcfa.fit_each: a map per target, the field read once."""

from __future__ import annotations

import threading

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import dcfa


class _Reads:
    """A Dask-backed field whose blocks count how often they are read."""

    def __init__(self, values: np.ndarray, chunks):
        self.n = 0
        self.lock = threading.Lock()
        source = da.from_array(values, chunks=chunks)
        self.data = source.map_blocks(self._read, dtype=values.dtype)

    def _read(self, block):
        if block.size:  # not map_blocks' call on an empty array, for the meta
            with self.lock:
                self.n += 1
        return block


def test_each_target_gets_its_own_map_from_one_read():
    ds = dcfa.datasets.make_regions_field(240, (12, 24), 6, n_active=2, seed=3)
    field = ds.field.fillna(0.0)  # land as zeros: constant cells, excluded
    y = ds.target.values
    other = field.isel(lat=slice(0, 4), lon=slice(0, 6)).mean(["lat", "lon"]).values
    other = other + 0.2 * np.random.default_rng(0).standard_normal(other.size)
    reads = _Reads(field.values, chunks=(60, 6, 24))
    X = field.copy(data=reads.data)
    with dask.config.set(scheduler="threads"):
        models = dcfa.fit_each(dcfa.RegionsCV(), X, {"target": y, "other": other})
    n_blocks = reads.data.npartitions
    assert reads.n == n_blocks  # every block read once for both targets
    for name, t in [("target", y), ("other", other)]:
        alone = dcfa.RegionsCV().fit(field, t)
        np.testing.assert_array_equal(models[name].labels_, alone.labels_)
    assert not np.array_equal(models["target"].labels_, models["other"].labels_)


@pytest.mark.parametrize("form", ["dataframe", "dataset", "array"])
def test_targets_as_columns_are_named(form):
    ds = dcfa.datasets.make_regions_field(120, (8, 16), 4, n_active=1, seed=4)
    y = ds.target.values
    Y = np.column_stack([y, -y])
    targets = {
        "dataframe": pd.DataFrame(Y, columns=["a", "b"]),
        "dataset": xr.Dataset({"a": ("time", Y[:, 0]), "b": ("time", Y[:, 1])}),
        "array": Y,
    }[form]
    models = dcfa.fit_each(dcfa.GenLinCFA(neighbors=1), ds.field.fillna(0.0), targets)
    assert list(models) == (["0", "1"] if form == "array" else ["a", "b"])


def test_bad_targets_are_named():
    X = np.random.default_rng(0).standard_normal((50, 4))
    with pytest.raises(ValueError, match=r"targets\['b'\]: 49 samples, X has 50"):
        dcfa.fit_each(dcfa.LinCFA(), X, {"a": np.zeros(50), "b": np.zeros(49)})
    with pytest.raises(ValueError, match="targets: no target given"):
        dcfa.fit_each(dcfa.LinCFA(), X, {})
    with pytest.raises(ValueError, match="a 2-D array, got an array of shape"):
        dcfa.fit_each(dcfa.LinCFA(), X, np.zeros(50))


def test_a_field_over_the_budget_is_refused_before_any_read():
    reads = _Reads(np.zeros((100, 50)), chunks=(50, 50))
    with dask.config.set({"dcfa.memory_budget": "10KiB", "scheduler": "threads"}):
        with pytest.raises(dcfa.MemoryBudgetError, match="reading it once for every target"):
            dcfa.fit_each(dcfa.LinCFA(), reads.data, {"a": np.ones(100)})
    assert reads.n == 0


def test_regionscv_makes_its_pieces_once_for_every_target(monkeypatch):
    """The first stage depends on X alone: fit_each makes it once, and every target's model
    is still that of its own fit (map, path, stability and column statistics)."""
    import dcfa.cfa.regions as regions

    calls = []
    real = regions.first_stage

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    ds = dcfa.datasets.make_regions_field(240, (18, 36), 8, n_active=2, seed=6)
    y = ds.target.values
    rng = np.random.default_rng(1)
    targets = {"y": y, "-y": -y, "noise": rng.standard_normal(y.size)}
    monkeypatch.setattr(regions, "first_stage", counted)
    models = dcfa.fit_each(dcfa.RegionsCV(gap=2), ds.field, targets)
    assert len(calls) == 1
    monkeypatch.undo()
    for name, t in targets.items():
        alone, shared = dcfa.RegionsCV(gap=2).fit(ds.field, t), models[name]
        np.testing.assert_array_equal(shared.labels_, alone.labels_)
        assert shared.level_ == alone.level_
        xr.testing.assert_identical(shared.cv_path_, alone.cv_path_)
        np.testing.assert_array_equal(shared.stability_, alone.stability_)
        np.testing.assert_array_equal(shared.fold_ari_, alone.fold_ari_)
        np.testing.assert_array_equal(shared.moments_.target_cross, alone.moments_.target_cross)
        assert shared.get_params() == alone.get_params()
    assert models["noise"].n_features_out_ < models["y"].n_features_out_


def test_fit_targets_names_a_bad_targets_argument():
    X = np.random.default_rng(0).standard_normal((60, 6))
    for bad in ({}, [np.zeros(60)], np.zeros((60, 2))):
        with pytest.raises(ValueError, match="targets: expected a non-empty dict"):
            dcfa.RegionsCV(neighbors=None).fit_targets(X, bad)

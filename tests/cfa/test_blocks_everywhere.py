"""Feature blocks (variables, time scales, lags) never share a group without `neighbors` too:
in every execution and for every rule (tests/cfa/test_blocks.py: with the neighbour restriction).

The reference is the definition: a partition under the block constraint is the union of the
partitions of each block fitted alone (the rules read a group, a candidate and the target,
never another block's cells), so each block's labels must equal those of a fit on that
block only, up to numbering.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import xarray as xr

import dcfa
from dcfa.datasets import make_regions_field
from dcfa.neighbors import block_labels, feature_blocks_of
from dcfa.stacking import stack_features


def _two_variables(seed: int = 1, land: float = 0.0) -> tuple[xr.DataArray, xr.DataArray]:
    """Two variables of one field: the second a scaled noisy copy, so that without the
    constraint the rules happily mix them (checked below)."""
    ds = make_regions_field(240, (6, 9), 4, land_fraction=land, seed=seed)
    f = ds.field.compute()
    noise = np.random.default_rng(seed).standard_normal(f.shape)
    second = f * 0.5 + 0.1 * noise
    X = xr.concat([f, second], dim=xr.DataArray(["a", "b"], dims="variable"))
    return X.transpose("time", "variable", "lat", "lon"), ds.target


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered by first appearance (-1 kept)."""
    out = np.full(labels.shape, -1, dtype=np.int64)
    seen: dict[int, int] = {}
    for i, g in enumerate(labels.tolist()):
        if g >= 0:
            out[i] = seen.setdefault(g, len(seen))
    return out


def _mixed(labels: np.ndarray, blocks: np.ndarray) -> int:
    return sum(
        np.unique(blocks[labels == g]).size > 1 for g in np.unique(labels[labels >= 0]).tolist()
    )


ESTIMATORS = {
    "LinCFA full": lambda: dcfa.LinCFA(shuffle=False, mode="dense"),
    "LinCFA seed-rows": lambda: dcfa.LinCFA(shuffle=False, mode="rows"),
    "LinCFA greedy": lambda: dcfa.LinCFA(strategy="greedy"),
    "LinCFA mean": lambda: dcfa.LinCFA(shuffle=False, compare="mean"),
    "GenLinCFA full": lambda: dcfa.GenLinCFA(mode="dense"),
    "GenLinCFA series": lambda: dcfa.GenLinCFA(mode="series"),
    "NonLinCFA full": lambda: dcfa.NonLinCFA(eps=1e-2, mode="dense"),
    "NonLinCFA series": lambda: dcfa.NonLinCFA(eps=1e-2, mode="series"),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_blocks_never_mix_and_each_block_is_fitted_as_alone(name):
    X, y = _two_variables()
    blocks = np.repeat([0, 1], 6 * 9)
    labels = ESTIMATORS[name]().fit(X, y).labels_
    assert _mixed(labels, blocks) == 0
    for b, v in enumerate(["a", "b"]):
        alone = ESTIMATORS[name]().fit(X.sel(variable=[v]), y).labels_
        np.testing.assert_array_equal(_canonical(labels[blocks == b]), _canonical(alone))


def test_without_the_constraint_the_rules_would_mix_these_blocks():
    """The data of these tests is one where the constraint matters: the same cells, stacked
    as plain columns (no block dim), end up in mixed groups."""
    X, y = _two_variables()
    plain = xr.DataArray(X.values.reshape(X.sizes["time"], -1), dims=("time", "feature"))
    labels = dcfa.GenLinCFA().fit(plain, y).labels_
    assert _mixed(labels, np.repeat([0, 1], 6 * 9)) > 0


def test_stacked_blocks_give_the_partition_of_the_grid():
    X, y = _two_variables()
    grid = dcfa.GenLinCFA().fit(X, y).labels_
    stacked = dcfa.GenLinCFA().fit(X.stack(feature=("variable", "lat", "lon")), y).labels_
    np.testing.assert_array_equal(grid, stacked)


def test_cv_path_partitions_never_mix():
    X, y = _two_variables()
    model = dcfa.GenLinCFACV(epsilons=[0.6, 0.75, 0.9], n_splits=2).fit(X, y)
    assert _mixed(model.labels_, np.repeat([0, 1], 6 * 9)) == 0


def test_an_adjacency_across_blocks_is_not_followed():
    """A user's sparse adjacency that links the two variables' cells: the blocks still hold."""
    X, y = _two_variables()
    D = X[0].size
    A = sp.csr_array(np.ones((D, D), dtype=bool) & ~np.eye(D, dtype=bool))
    for model in (dcfa.GenLinCFA(neighbors=A), dcfa.LinCFA(neighbors=A, strategy="greedy")):
        labels = model.fit(X, y).labels_
        assert _mixed(labels, np.repeat([0, 1], D // 2)) == 0


def test_land_cells_and_windows_and_lags():
    X, y = _two_variables(land=0.3)
    X, y = xr.align(dcfa.lagged(X.isel(variable=0, drop=True), [0, 1]), y, join="inner")
    inp_blocks = feature_blocks_of(stack_features(X, "time")[1])
    labels = dcfa.GenLinCFA().fit(X, y).labels_
    assert inp_blocks is not None and inp_blocks.max() == 1
    assert _mixed(labels, inp_blocks) == 0


def test_block_labels_match_forecast_feature_blocks():
    X, _ = _two_variables()
    W = dcfa.trailing_windows(X.isel(variable=0, drop=True), [1, 3]).isel(time=slice(2, None))
    for da in (X, W, X.stack(cell=("lat", "lon"))):
        dims = tuple(d for d in da.dims if d != "time")
        labels = block_labels(dims, tuple(da.sizes[d] for d in dims), dict(da.coords))
        np.testing.assert_array_equal(labels, dcfa.forecast.feature_blocks(da))

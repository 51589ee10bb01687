"""Every rule in every execution gives the dense partition; ``mode="auto"`` picks one that fits.

The reference is the dense execution (``mode="dense"``, the ``D x D`` moments the papers' rules
were checked against in test_lincfa / test_nonlincfa / test_genlincfa / test_papers).
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import count_computes, grid_data
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.model_selection import TimeSeriesSplit
from strategies import chunks

import dcfa
from dcfa import GenLinCFA, LinCFA, NonLinCFA
from dcfa.cfa.executions import EXECUTIONS


def field(seed, n=96, shape=(7, 9), t_chunks=None, s_chunks=None):
    """:func:`conftest.grid_data` as a Dask-backed DataArray with lat/lon coordinates."""
    X, y = grid_data(seed, n=n, shape=shape)
    data = da.from_array(X, chunks=(t_chunks or 40, *(s_chunks or shape)))
    lat = np.linspace(-30, 30, shape[0])
    lon = np.arange(shape[1]) * 5.0
    return xr.DataArray(data, dims=("time", "lat", "lon"), coords={"lat": lat, "lon": lon}), y


ESTIMATORS = [
    (LinCFA, dict(random_state=1)),
    (LinCFA, dict(random_state=1, compare="mean", scan="restart")),
    (GenLinCFA, dict(eps=0.7)),
    (GenLinCFA, dict(eps=0.6, compare="seed", scan="single", standardize=True)),
    (NonLinCFA, dict(eps=1e-2)),
    (NonLinCFA, dict(eps=1e-3, cv=TimeSeriesSplit(3))),
]


@settings(max_examples=6, deadline=None)
@given(
    rule=st.sampled_from(range(len(ESTIMATORS))),
    neighbors=st.sampled_from([None, 1, 2]),
    neighborhood=st.sampled_from(["group", "seed"]),
    t=chunks(96, 4),
    a=chunks(7, 3),
    seed=st.integers(0, 50),
)
def test_series_gives_the_dense_partition(rule, neighbors, neighborhood, t, a, seed):
    cls, params = ESTIMATORS[rule]
    X, y = field(seed, t_chunks=t, s_chunks=(a, 9))
    params = dict(params, neighbors=neighbors, neighborhood=neighborhood)
    full = cls(mode="dense", **params).fit(X, y)
    series = cls(mode="series", **params).fit(X, y)
    assert series.execution_ == "series"
    np.testing.assert_array_equal(series.labels_, full.labels_)
    assert series.excluded_ == full.excluded_
    np.testing.assert_allclose(series.scale_, full.scale_, rtol=1e-12)
    np.testing.assert_allclose(series.transform(X), full.transform(X), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("cls, params", ESTIMATORS)
def test_every_rule_runs_in_memory_and_on_dask_alike(cls, params):
    """NumPy input: the kernels run on the whole array (no Dask), the same labels."""
    X, y = field(3)
    dense = cls(mode="dense", neighbors=1, **params).fit(X, y)
    series = cls(mode="series", neighbors=1, **params).fit(X.compute(), y)
    np.testing.assert_array_equal(series.labels_, dense.labels_)


@pytest.mark.parametrize(
    "cls, params",
    [
        (LinCFA, dict(random_state=2)),
        (LinCFA, dict(random_state=2, compare="mean", scan="restart")),
        (GenLinCFA, dict(eps=0.7)),
        (GenLinCFA, dict(eps=0.5, compare="seed", scan="single")),
        (NonLinCFA, dict(eps=1e-2)),
        (NonLinCFA, dict(eps=1e-2, compare="seed", scan="single")),
        (NonLinCFA, dict(eps=1e-3, cv=TimeSeriesSplit(3), standardize=True)),
    ],
)
def test_grid_execution_runs_every_rule(cls, params):
    """GenLinCFA and NonLinCFA (its folds: one grid pass per row segment) in the grid
    execution (neighborhood="seed"), exactly the dense partition."""
    X, y = field(5)
    params = dict(params, neighbors=1, neighborhood="seed")
    grid = cls(mode="grid", **params).fit(X, y)
    full = cls(mode="dense", **params).fit(X, y)
    np.testing.assert_array_equal(grid.labels_, full.labels_)
    assert grid.execution_ == "grid"


@settings(max_examples=5, deadline=None)
@given(
    t=chunks(96, 4),
    a=chunks(7, 3),
    seed=st.integers(0, 50),
    eps=st.sampled_from([1e-3, 1e-2, 3e-2]),
    compare=st.sampled_from(["mean", "seed"]),
)
def test_nonlincfa_grid_gives_the_dense_partition(t, a, seed, eps, compare):
    X, y = field(seed, t_chunks=t, s_chunks=(a, 9))
    params = dict(eps=eps, compare=compare, neighbors=1, neighborhood="seed")
    grid = NonLinCFA(mode="grid", **params).fit(X, y)
    full = NonLinCFA(mode="dense", **params).fit(X, y)
    np.testing.assert_array_equal(grid.labels_, full.labels_)
    assert grid.excluded_ == full.excluded_
    np.testing.assert_allclose(grid.scale_, full.scale_, rtol=1e-10)
    # the per-segment grid moments are reusable: no pass, the same labels
    X = X.compute()
    with count_computes(0):
        again = NonLinCFA(**params).fit(X, y, moments=grid.segment_moments_)
    assert again.execution_ == "grid"
    np.testing.assert_array_equal(again.labels_, grid.labels_)


@pytest.mark.parametrize("periodic", [(), (1,)])
def test_merged_segment_grid_moments_are_those_of_all_rows(periodic):
    """``GridMoments.merge_all`` of disjoint row segments = one grid pass over all rows."""
    from dcfa.stats.grid import grid_moments, segment_grid_moments

    X, y = grid_data(4, n=90, shape=(8, 10))
    X[:, 2, 3] = np.nan  # a land cell
    X[:30, 5, 5] += 1e4  # a large offset in one segment only
    parts = segment_grid_moments(X, y, bounds=[0, 25, 31, 90], radius=2, periodic=periodic)
    whole = grid_moments(X, y, radius=2, periodic=periodic)
    merged = parts.whole
    assert merged.n == whole.n == 90
    np.testing.assert_array_equal(merged.count, whole.count)
    ok = whole.count == 90
    for name in ("mean", "diag", "target_cross"):
        np.testing.assert_allclose(
            getattr(merged, name)[ok], getattr(whole, name)[ok], rtol=1e-9, atol=1e-6
        )
    nbr = whole.offset_cells()
    both = ok[:, None] & (nbr >= 0) & ok[np.maximum(nbr, 0)]
    np.testing.assert_allclose(merged.cross[both], whole.cross[both], rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(merged.target_mean, whole.target_mean, rtol=1e-12)
    np.testing.assert_allclose(merged.target_ss, whole.target_ss, rtol=1e-12)


def test_seed_rows_run_genlincfa():
    X, y = field(6)
    params = dict(eps=0.6, compare="seed", scan="single", inputs="square")
    rows = GenLinCFA(mode="rows", **params).fit(X, y)
    full = GenLinCFA(mode="dense", **params).fit(X, y)
    np.testing.assert_array_equal(rows.labels_, full.labels_)


@settings(max_examples=8, deadline=None)
@given(
    t=chunks(96, 4),
    a=chunks(63, 5),
    seed=st.integers(0, 50),
    eps=st.sampled_from([1e-3, 1e-2, 3e-2]),
    cv=st.sampled_from([3, 5, "time"]),
    standardize=st.booleans(),
    batch=st.sampled_from([1, 4, 256]),
)
def test_nonlincfa_seed_rows_give_the_dense_partition(t, a, seed, eps, cv, standardize, batch):
    """NonLinCFA's folds in the seed-row execution: per-segment column statistics and seed
    rows from the same passes, merged into each fold's training and test rows as the dense
    moments are, a batch of seeds per pass: the dense partition, its exclusions and scales;
    and the per-segment column statistics are reusable (no column pass, the same labels)."""
    X, y = field(seed, t_chunks=t)
    X = X.stack(cell=("lat", "lon")).data.rechunk({1: a})
    X[:, 5] = 2.0  # constant: excluded in every execution
    cv = TimeSeriesSplit(3) if cv == "time" else cv
    params = dict(eps=eps, compare="seed", cv=cv, standardize=standardize)
    rows = NonLinCFA(mode="rows", row_batch=batch, **params).fit(X, y)
    full = NonLinCFA(mode="dense", **params).fit(X, y)
    assert rows.execution_ == "rows"
    np.testing.assert_array_equal(rows.labels_, full.labels_)
    assert rows.excluded_ == full.excluded_ and 5 in rows.excluded_
    np.testing.assert_allclose(rows.scale_, full.scale_, rtol=1e-10)
    n = sum(m.n for m in rows.segment_moments_)
    assert n == 96 and len(rows.segment_moments_) == rows.folds_.n_segments
    again = NonLinCFA(**params).fit(X.compute(), y, moments=rows.segment_moments_)
    assert again.execution_ == "rows"
    np.testing.assert_array_equal(again.labels_, rows.labels_)


def test_seed_rows_moments_of_another_form_are_named():
    """NonLinCFA's seed rows reuse one ColumnMoments per row segment: one value, or the
    wrong number of them, is refused naming moments; the series execution reuses one."""
    X, y = field(3)
    X = X.stack(cell=("lat", "lon")).values
    rows = NonLinCFA(mode="rows", compare="seed", eps=1e-2).fit(X, y)
    parts = rows.segment_moments_
    with pytest.raises(ValueError, match=r"^moments: mode='rows' reuses one ColumnMoments"):
        NonLinCFA(mode="rows", compare="seed", eps=1e-2).fit(X, y, moments=rows.moments_)
    with pytest.raises(ValueError, match=r"^moments: 2 ColumnMoments, expected one per row"):
        NonLinCFA(mode="rows", compare="seed", eps=1e-2).fit(X, y, moments=parts[:2])
    with pytest.raises(TypeError, match=r"^moments: mode='series' reuses one ColumnMoments"):
        NonLinCFA(mode="series", compare="seed", eps=1e-2).fit(X, y, moments=parts)
    series = NonLinCFA(mode="series", compare="seed", eps=1e-2).fit(X, y, moments=rows.moments_)
    np.testing.assert_array_equal(series.labels_, rows.labels_)


def test_seed_rows_over_the_budget_name_the_row_batch_that_fits():
    """Each pass holds ``row_batch`` rows per row segment: over the driver's budget an
    explicit mode='rows' is refused before any pass, naming the row_batch that fits,
    which is then accepted."""
    import re

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3000)), rng.normal(size=60)
    with dask.config.set({"dcfa.memory_budget": "20MiB"}):
        with count_computes(0), pytest.raises(dcfa.MemoryBudgetError) as info:
            NonLinCFA(mode="rows", compare="seed").fit(X, y)
        fit = int(re.search(r"row_batch=(\d+) fits", str(info.value)).group(1))
        assert "in each of 5 row segments" in str(info.value)
        assert 16 * 5 * fit * 3001 <= 20 * 2**20 < 16 * 5 * (fit + 1) * 3001
        ok = NonLinCFA(mode="rows", compare="seed", row_batch=fit)
        assert ok.execution_for(X) == "rows"  # no data read


def test_registry_lists_every_execution():
    assert set(EXECUTIONS) == {"dense", "series", "grid", "rows"}
    for cls in (LinCFA, NonLinCFA, GenLinCFA):
        assert cls().get_params()["mode"] == "auto"


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (NonLinCFA, dict(mode="rows"), "compare: mode='rows'"),
        (GenLinCFA, dict(mode="rows"), "compare: mode='rows'"),
        (LinCFA, dict(mode="series", strategy="greedy"), "strategy: mode='series'"),
        (LinCFA, dict(mode="series", missing="pairwise"), "missing: mode='series'"),
        (GenLinCFA, dict(mode="grid", neighbors=1), "neighborhood: mode='grid'"),
    ],
)
def test_an_explicit_mode_that_cannot_run_is_refused_before_the_pass(cls, params, match):
    X, y = field(0)
    with count_computes(0), pytest.raises(ValueError, match=match):
        cls(**params).fit(X, y)


def test_auto_runs_the_series_when_the_matrix_does_not_fit():
    """Budget between the series and the dense matrices: auto runs the series, same labels;
    an explicit mode='dense' is refused before any compute."""
    X, y = field(7, n=200, shape=(30, 40))  # D = 1 200: dense ~ 11.5 MiB a matrix
    params = dict(neighbors=1, eps=0.7)
    reference = GenLinCFA(mode="dense", **params).fit(X, y)
    with dask.config.set({"dcfa.memory_budget": "4 MiB"}):  # series: 1.9 MiB
        auto = GenLinCFA(**params).fit(X, y)
        assert auto.execution_ == "series"
        with count_computes(0), pytest.raises(dcfa.MemoryBudgetError, match="memory budget"):
            GenLinCFA(mode="dense", **params).fit(X, y)
    np.testing.assert_array_equal(auto.labels_, reference.labels_)


def test_auto_falls_back_to_the_grid_then_says_what_would_fit():
    X, y = field(8, n=200, shape=(30, 40))
    with dask.config.set({"dcfa.memory_budget": "1 MiB"}):  # neither matrix nor series
        seed = LinCFA(neighbors=1, neighborhood="seed", random_state=0)
        assert seed.execution_for(X) == "grid"
        fitted = seed.fit(X, y)
        assert fitted.execution_ == "grid"
        with count_computes(0), pytest.raises(dcfa.MemoryBudgetError) as err:
            NonLinCFA(neighbors=1).fit(X, y)
    message = str(err.value)
    assert "mode='series'" in message and "mode='grid'" in message
    assert "Nothing was computed" in message
    reference = LinCFA(mode="dense", neighbors=1, neighborhood="seed", random_state=0).fit(X, y)
    np.testing.assert_array_equal(fitted.labels_, reference.labels_)


def test_series_reuses_column_statistics():
    """``fit(moments=model.moments_)`` of a series fit skips the column pass, same labels."""
    X, y = field(9)
    first = NonLinCFA(mode="series", neighbors=1, eps=1e-2).fit(X, y)
    again = NonLinCFA(neighbors=1, eps=1e-2).fit(X, y, moments=first.moments_)
    assert again.execution_ == "series"
    np.testing.assert_array_equal(again.labels_, first.labels_)


def test_series_on_a_distributed_cluster(client):
    """Blocks are copied in as the workers finish them: the same series as locally."""
    X, y = field(10, t_chunks=30, s_chunks=(4, 5))
    params = dict(neighbors=1, eps=1e-2)
    on_cluster = NonLinCFA(mode="series", **params).fit(X, y)
    with dask.config.set(scheduler="threads"):
        local = NonLinCFA(mode="dense", **params).fit(X, y)
    np.testing.assert_array_equal(on_cluster.labels_, local.labels_)


class _Toy:
    """A fourth execution, written as a contributor would: the dense moments computed in
    plain NumPy (no Dask), the dense loop. Defined in a function so the registry stays clean."""

    @staticmethod
    def make():
        from dcfa.cfa.driver import partition_moments
        from dcfa.cfa.executions import Execution, Plan

        class Toy(Execution):
            name = "toy"
            statistics = dcfa.Moments

            def why_not(self, opts, inp, folds):
                if folds is not None or opts.neighbors is not None:
                    return "neighbors", "mode='toy' runs without folds or neighbours"
                return None

            def fits(self, opts, inp, folds):
                from dcfa.memory import memory_budget

                need = 8 * (inp.n_features + 1) ** 2  # the D x D matrix
                return None if need <= memory_budget().driver else "mode='toy': D x D"

            def plan(self, opts, inp, folds):
                return Plan(folds=folds)

            def gather(self, opts, data, Y, plan):
                return dcfa.moments(np.asarray(data), Y)

            def partition(self, opts, stats, inp, plan):
                return partition_moments([stats], opts.rule, **opts.loop())

        return Toy()


def test_an_execution_must_say_whether_it_fits_the_budget():
    """``mode="auto"`` takes the first execution that can run and fits: one without
    ``fits`` was taken whatever it held (a newcomer's walkthrough)."""
    from dcfa.cfa.executions import Execution

    with pytest.raises(NotImplementedError, match=r"^Execution.fits: say whether mode="):
        Execution().fits(None, None, None)


@pytest.fixture
def toy():
    from dcfa.cfa.executions import MODES, register, unregister

    register(_Toy.make())
    yield
    unregister("toy")
    assert "toy" not in EXECUTIONS and "toy" not in MODES


@pytest.mark.usefixtures("toy")
@pytest.mark.parametrize("cls, params", [(LinCFA, dict(random_state=4)), (GenLinCFA, {})])
def test_a_new_execution_is_one_class_and_one_registry_entry(cls, params):
    """Registering a class is all it takes: ``mode="toy"`` is a valid parameter, the fit runs
    it, stored moments of its kind are reused by it, and its refusal names the parameter."""
    X, y = field(5)
    toy = cls(mode="toy", **params).fit(X, y)
    full = cls(mode="dense", **params).fit(X, y)
    assert toy.execution_ == "toy"
    np.testing.assert_array_equal(toy.labels_, full.labels_)
    np.testing.assert_allclose(toy.transform(X), full.transform(X), rtol=1e-9, atol=1e-10)
    again = cls(mode="toy", **params).fit(X, y, moments=toy.moments_)
    np.testing.assert_array_equal(again.labels_, full.labels_)
    with pytest.raises(ValueError, match=r"^neighbors: mode='toy' runs without folds"):
        cls(mode="toy", neighbors=1, **params).fit(X, y)


def test_an_unregistered_execution_is_not_a_mode():
    X, y = field(5)
    with pytest.raises(ValueError, match="'mode' parameter of LinCFA must be a str among"):
        LinCFA(mode="toy").fit(X, y)


def test_below_the_estimators_nothing_reads_an_estimator():
    """The executions, the loops and the memory estimate take FitOptions: no parameter is
    read by name from an estimator, and no private estimator attribute is reached."""
    import ast
    from pathlib import Path

    root = Path(dcfa.__file__).parent
    below = [
        *sorted((root / "cfa" / "executions").glob("*.py")),
        root / "cfa" / "driver.py",
        root / "cfa" / "grid_partition.py",
        *sorted((root / "memory").glob("*.py")),
    ]
    found = []
    for path in below:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("get_params", "_accept"):
                found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module in (
                "dcfa.cfa.base",
                "dcfa.cfa.lincfa",
                "dcfa.cfa.nonlincfa",
                "dcfa.cfa.genlincfa",
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} imports {node.module}")
    assert not found, found


@pytest.mark.parametrize(
    "old, new", [("full", "dense"), ("neighbors", "grid"), ("seed-rows", "rows")]
)
def test_the_old_execution_names_still_run_with_a_future_warning(old, new):
    """The executions are named after what they hold; the names before the rename run the
    same execution for one release, saying the new name."""
    X, y = field(2)
    kw = dict(neighbors=1, neighborhood="seed") if new == "grid" else {}
    with pytest.warns(FutureWarning, match=f"mode='{old}' is now mode='{new}'"):
        model = LinCFA(mode=old, random_state=0, **kw).fit(X, y)
    assert model.execution_ == new
    ref = LinCFA(mode=new, random_state=0, **kw).fit(X, y)
    np.testing.assert_array_equal(model.labels_, ref.labels_)


def test_a_result_written_with_an_old_execution_name_is_read_by_the_new_one():
    from dcfa.cfa.executions import EXECUTIONS, current_name

    assert current_name("neighbors") == "grid" and EXECUTIONS[current_name("neighbors")].whole_grid
    assert current_name("full") == "dense" and current_name("series") == "series"

"""forward_cv: scikit-learn's TimeSeriesSplit folds, a whole pipeline refitted on the past only."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, TimeSeriesSplit
from sklearn.pipeline import make_pipeline

from dcfa import LinCFA
from dcfa.anomalies import Anomalies
from dcfa.skill import blocked_cv, forward_cv

SEEN: list = []  # what every Spy was fitted on (a module-level log survives sklearn's clone)


class Spy(TransformerMixin, BaseEstimator):
    """Passes X through; records the rows (their time stamps, or column 0) it is fitted on."""

    def fit(self, X, y=None):
        if isinstance(X, xr.DataArray):
            SEEN.append(("data", X["time"].values.copy(), X.values.copy()))
        else:
            SEEN.append(("rows", np.asarray(X)[:, 0].copy(), None))
        self.n_features_in_ = int(np.prod(X.shape[1:]))
        return self

    def transform(self, X):
        return np.asarray(X).reshape(len(X), -1)


def task(rng, n=120, start="1990-01-01"):
    """A monthly (time, lat, lon) field with a seasonal cycle and a latent signal, and y."""
    time = pd.date_range(start, periods=n, freq="MS")
    months = time.month.to_numpy()
    latent = rng.normal(size=(n, 2))
    values = np.repeat(latent, 4, axis=1).reshape(n, 2, 4) + 0.5 * rng.normal(size=(n, 2, 4))
    values += 5.0 * np.cos(2 * np.pi * months / 12)[:, None, None] + 290.0
    X = xr.DataArray(
        values,
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": [0.0, 5.0], "lon": [0.0, 5.0, 10.0, 15.0]},
    )
    y = latent @ [1.0, -1.5] + 0.3 * rng.normal(size=n)
    return X, y, months


def r2(y, pred):
    return 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),
        dict(n_splits=3, gap=4),
        dict(n_splits=4, gap=2, min_train=30),
        dict(n_splits=2, test_size=10, gap=1),
        dict(n_splits=3, gap=3, max_train_size=25),
    ],
)
def test_folds_are_time_series_splits_with_the_gap(rng, kwargs):
    n = 100
    X = np.column_stack([np.arange(n), rng.normal(size=(n, 3))])
    y = X[:, 1:] @ [1.0, 2.0, -1.0] + rng.normal(size=n)
    skill = forward_cv(LinearRegression(), X, y, **kwargs)
    n_splits, gap = kwargs.get("n_splits", 5), kwargs.get("gap", 0)
    test_size = kwargs.get("test_size")
    if "min_train" in kwargs:
        test_size = (n - gap - kwargs["min_train"]) // n_splits
    expected = TimeSeriesSplit(
        n_splits,
        gap=gap,
        test_size=test_size,
        max_train_size=kwargs.get("max_train_size"),
    ).split(X)
    folds = skill.extra["folds"]
    assert len(folds) == n_splits == skill.r2.shape[0]
    for (train, test), (train_ref, test_ref) in zip(folds, expected, strict=True):
        np.testing.assert_array_equal(train, train_ref)
        np.testing.assert_array_equal(test, test_ref)
        assert train.max() + gap < test.min()  # the past only, the gap purged
        assert np.array_equal(test, np.arange(test.min(), test.max() + 1))
    if "min_train" in kwargs:
        assert len(folds[0][0]) >= kwargs["min_train"]
    if "max_train_size" in kwargs:
        assert max(len(tr) for tr, _ in folds) == kwargs["max_train_size"]
    else:  # expanding window, from the first sample
        assert all(tr[0] == 0 for tr, _ in folds)
        assert all(len(a[0]) < len(b[0]) for a, b in zip(folds, folds[1:], strict=False))


@pytest.mark.parametrize("make", [None, lambda: PCA(2), lambda: LinCFA(random_state=0)])
def test_scores_equal_a_manual_forward_loop(rng, make):
    """Each fold: fit on the training window by hand, OLS by lstsq, test R^2."""
    X, y, _ = task(rng)
    cells = X.values.reshape(len(y), -1)
    skill = forward_cv(make() if make else LinearRegression(), cells, y, n_splits=4, gap=3)
    scores = []
    for train, test in TimeSeriesSplit(4, gap=3).split(cells):
        reduce = make().fit(cells[train], y[train]) if make else None
        Z_tr = reduce.transform(cells[train]) if reduce else cells[train]
        Z_te = reduce.transform(cells[test]) if reduce else cells[test]
        A = np.column_stack([np.ones(len(train)), Z_tr])
        coef = np.linalg.lstsq(A, y[train], rcond=None)[0]
        scores.append(r2(y[test], np.column_stack([np.ones(len(test)), Z_te]) @ coef))
    np.testing.assert_allclose(skill.r2, scores, atol=1e-8)


@pytest.mark.parametrize("cv", [forward_cv, blocked_cv])
def test_every_fold_fits_on_its_training_rows_only(rng, cv):
    """A spy in the pipeline sees exactly the training rows of each fold, never a test row."""
    n = 60
    X = np.column_stack([np.arange(n, dtype=float), rng.normal(size=(n, 2))])
    y = X[:, 1] + rng.normal(size=n)
    SEEN.clear()
    skill = cv(Spy(), X, y, n_splits=3)
    assert len(SEEN) == 3
    for (_, rows, _), (train, test) in zip(SEEN, skill.extra["folds"], strict=True):
        np.testing.assert_array_equal(rows, train)
        assert not np.isin(rows, test).any()


def test_in_fold_climatology_ignores_the_test_months(rng):
    """Months after the first training window get a huge offset. Inside every fold, what
    Anomalies hands on equals NumPy anomalies from the per-month means of that fold's training
    rows only; the first fold, trained before the offset, never sees it."""
    X, y, months = task(rng, n=96)
    shifted = X.copy(data=X.values.copy())
    shifted[60:] += 1e6
    SEEN.clear()
    skill = forward_cv(
        make_pipeline(Anomalies(), Spy()), shifted, y, n_splits=3, gap=2, min_train=24
    )
    assert len(SEEN) == 3
    for (_, stamps, seen), (train, _test) in zip(SEEN, skill.extra["folds"], strict=True):
        np.testing.assert_array_equal(stamps, X["time"].values[train])
        x = shifted.values[train]
        clim = np.stack([x[months[train] == k].mean(axis=0) for k in range(1, 13)])
        np.testing.assert_allclose(seen, x - clim[months[train] - 1], rtol=1e-9, atol=1e-9)
    first_train = skill.extra["folds"][0][0]
    assert first_train.max() < 60
    assert np.abs(SEEN[0][2]).max() < 50  # anomalies of the unshifted months only


def test_a_whole_pipeline_on_a_grid(rng):
    """Anomalies -> LinCFA -> OLS, refitted per fold, on a (time, lat, lon) DataArray; equal to
    the same steps done by hand with NumPy anomalies of each training window."""
    X, y, months = task(rng)
    model = make_pipeline(Anomalies(standardize=True), LinCFA(random_state=0))
    skill = forward_cv(model, X, y, n_splits=3, gap=2, min_train=36, name="anom -> LinCFA")
    cells = X.values.reshape(len(y), -1)
    scores, groups = [], []
    for train, test in skill.extra["folds"]:
        clim = np.stack([cells[train][months[train] == k].mean(0) for k in range(1, 13)])
        anom = cells - clim[months - 1]
        spread = anom[train].std(axis=0, ddof=1)
        lin = LinCFA(random_state=0).fit(anom[train] / spread, y[train])
        ols = LinearRegression().fit(lin.transform(anom[train] / spread), y[train])
        scores.append(r2(y[test], ols.predict(lin.transform(anom[test] / spread))))
        groups.append(lin.n_features_out_)
    np.testing.assert_allclose(skill.r2, scores, atol=1e-8)
    np.testing.assert_array_equal(skill.n_features, groups)
    assert skill.mean > 0.5 and skill.row().startswith("anom -> LinCFA")


@pytest.mark.parametrize("regression", ["ridge", "ols"])
def test_regions_cv_is_scored_with_the_regression_its_map_is_chosen_for(rng, regression):
    """A bare RegionsCV, or a pipeline ending in one, is followed by ridge on the standardised
    region means (or OLS): each fold's map by hand, then scikit-learn's StandardScaler and
    RidgeCV (or LinearRegression) on its means."""
    from sklearn.linear_model import RidgeCV
    from sklearn.preprocessing import StandardScaler

    from dcfa import RegionsCV
    from dcfa.cfa.selection import REGION_ALPHAS

    X, y, _ = task(rng)
    model = make_pipeline(Anomalies(), RegionsCV(regression=regression, n_splits=3))
    skill = forward_cv(model, X, y, n_splits=3, gap=2, min_train=48)
    scores = []
    for train, test in skill.extra["folds"]:
        reduce = make_pipeline(Anomalies(), RegionsCV(regression=regression, n_splits=3))
        reduce.fit(X[train], y[train])
        Z_tr, Z_te = reduce.transform(X[train]), reduce.transform(X[test])
        if regression == "ridge":
            reg = make_pipeline(StandardScaler(), RidgeCV(alphas=REGION_ALPHAS))
        else:
            reg = LinearRegression()
        scores.append(r2(y[test], reg.fit(Z_tr, y[train]).predict(Z_te)))
    np.testing.assert_allclose(skill.r2, scores, atol=1e-10)


def test_blocked_cv_keeps_its_folds_and_scores_on_dataarrays(rng):
    """blocked_cv is unchanged: KFold blocks, and a DataArray scores as its values do."""
    X, y, _ = task(rng, n=80)
    cells = X.stack(cell=("lat", "lon"))
    for model in (LinearRegression(), LinCFA(random_state=0)):
        labelled = blocked_cv(model, cells, y, n_splits=4)
        plain = blocked_cv(model, cells.values, y, n_splits=4)
        np.testing.assert_allclose(labelled.r2, plain.r2, rtol=1e-12)
        np.testing.assert_array_equal(labelled.n_features, plain.n_features)
    for (train, test), (train_ref, test_ref) in zip(
        plain.extra["folds"], KFold(4).split(cells.values), strict=True
    ):
        np.testing.assert_array_equal(train, train_ref)
        np.testing.assert_array_equal(test, test_ref)


def test_months_missing_from_a_training_window_are_an_error(rng):
    X, y, _ = task(rng, n=60)
    # one December, the last sample: no training window holds it, the last test block does
    keep = ~((X["time"].dt.month == 12) & (X["time"].dt.year < 1994)).values
    X, y = X[keep], y[keep]
    # refused before any fit, naming the argument (it failed in the last fold's transform)
    SEEN.clear()
    with pytest.raises(ValueError, match=r"^min_train: the training rows of fold 2 .* hold no "
                       r"Dec, which its test rows hold"):  # fmt: skip
        forward_cv(make_pipeline(Anomalies(), Spy()), X, y, n_splits=3, min_train=22)
    assert SEEN == []


@pytest.mark.parametrize(
    ("cv", "kwargs", "argument", "window"),
    [
        (forward_cv, {"n_splits": 5}, "min_train", "fold 0 (10 samples, 1990-01 .. 1990-10)"),
        (forward_cv, {"min_train": 20, "n_splits": 2}, "min_train", "fold 0 (20 samples"),
        (blocked_cv, {"n_splits": 2}, "n_splits", "fold 0 (20 samples, 1991-09 .. 1993-04)"),
    ],
)
def test_a_training_window_with_a_month_once_is_refused_before_reading_x(
    rng, cv, kwargs, argument, window
):
    """With a first window of 10 months, each month's climatology was its one sample: every
    anomaly was 0, and the fit said that every feature was constant, naming no argument."""
    X, y, _ = task(rng, n=60 if cv is forward_cv else 40)
    lazy = X.chunk({"time": 12})
    with count_computes(0), pytest.raises(ValueError) as caught:
        cv(make_pipeline(Anomalies(), LinCFA()), lazy, y, **kwargs)
    message = str(caught.value)
    assert message.startswith(f"{argument}: the training rows of {window}")
    assert "only once: the model's Anomalies(by='month') would make their anomalies 0" in message
    # two years in every training window: scored; without monthly anomalies: no check
    more = {"forward_cv": {"min_train": 24}, "blocked_cv": {"n_splits": 5}}[cv.__name__]
    assert np.isfinite(cv(make_pipeline(Anomalies(), LinCFA()), X, y, **more).r2).all()
    cv(make_pipeline(Anomalies(by=None), LinCFA()), X, y, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_splits=1), "n_splits: expected an int >= 2"),
        (dict(n_splits=2.5), "n_splits: expected an int"),
        (dict(n_splits=True), "n_splits: expected an int"),
        (dict(n_splits=30), "n_splits: 40 samples"),
        (dict(gap=-1), "gap: expected an int >= 0"),
        (dict(gap=25), "gap: 40 samples, n_splits=5, gap=25"),
        (dict(min_train=0), "min_train: expected None or an int >= 1"),
        (dict(min_train=35), "min_train: 40 samples"),
        (dict(test_size=1), "test_size: expected None or an int >= 2"),
        (dict(test_size=8), "test_size: 40 samples"),
        (dict(max_train_size=0), "max_train_size: expected None or an int >= 1"),
    ],
)
def test_bad_arguments_name_the_argument(rng, kwargs, match):
    X = rng.normal(size=(40, 3))
    with pytest.raises(ValueError, match=match):
        forward_cv(LinearRegression(), X, X[:, 0], **kwargs)


def test_bad_inputs(rng):
    X = rng.normal(size=(40, 3))
    with pytest.raises(ValueError, match="X and y"):
        forward_cv(LinearRegression(), X, X[:-1, 0])
    with pytest.raises(ValueError, match="X: expected a 2-D"):
        forward_cv(LinearRegression(), X[:, 0], X[:, 0])
    with pytest.raises(ValueError, match="by: 'month' needs the dates"):
        forward_cv(make_pipeline(Anomalies(), LinCFA()), X, X[:, 0])


@pytest.mark.parametrize("cv", [forward_cv, blocked_cv])
def test_a_target_on_other_dates_is_refused_not_paired_by_position(rng, cv):
    """The CV helpers turned y into a plain array: a target six months off X's dates (a
    forgotten dcfa.lead_target or dcfa.align) was scored as if aligned."""
    X, y, _ = task(rng)
    model = LinCFA(random_state=0)
    dated = xr.DataArray(y, dims="time", coords={"time": X.time.values})
    later = dated.assign_coords(time=dated.time.to_index() + pd.DateOffset(months=6))
    said = {
        "DataArray": r"^y: its 'time' coordinate differs from X's; ",
        "Series": r"^y: the dates of its index \('time'\) differ from X's 'time' coordinate; ",
    }
    for target in (later, later.to_series()):
        with pytest.raises(ValueError, match=said[type(target).__name__]):
            cv(model, X, target, n_splits=3)
    # the same dates, or none: the same folds and scores as a plain array
    plain = cv(model, X, y, n_splits=3).r2
    for target in (dated, dated.to_series(), pd.Series(y)):
        np.testing.assert_array_equal(cv(model, X, target, n_splits=3).r2, plain)


def test_a_target_on_another_calendar_names_align(rng):
    """A noleap field and a target on NumPy's dates raised cftime's TypeError ('cannot compare
    ... different calendars') from the comparison of the dates."""
    X, y, _ = task(rng)
    noleap = xr.date_range("1990-01-01", periods=len(y), freq="MS", calendar="noleap")
    Xn = X.assign_coords(time=noleap)
    target = xr.DataArray(y, dims="time", coords={"time": X.time.values})
    said = r"differs from X's \(their dates are on different calendars\); align them first"
    with pytest.raises(ValueError, match=said):
        LinCFA().fit(Xn, target)
    with pytest.raises(ValueError, match=said):
        forward_cv(LinCFA(), Xn, target, n_splits=3)


@pytest.mark.parametrize("cv", [forward_cv, blocked_cv])
def test_the_refits_do_not_warn_that_a_fold_has_no_skill(cv):
    """A fold's map without skill warned once per fold; the skill returned says it."""
    from dcfa import NoSkillWarning, RegionsCV
    from dcfa.datasets import make_regions_field

    ds = make_regions_field(n_time=240, shape=(12, 24), n_regions=6, seed=3).load()
    noise = ds.target.copy(data=np.random.default_rng(0).standard_normal(240))
    with pytest.warns(NoSkillWarning):  # the fit alone warns on this target
        RegionsCV().fit(ds.field, noise)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoSkillWarning)
        skill = cv(RegionsCV(), ds.field, noise)
    assert skill.mean < 0.1


@pytest.mark.parametrize("cv", [forward_cv, blocked_cv])
def test_the_sample_dim_may_be_anywhere_as_in_fit(rng, cv):
    """A (lat, lon, time) field, which fit takes, was cut along lat: "min_train: 12 samples"
    (forward_cv), "n_splits: expected an int in [2, 3]" (blocked_cv)."""
    X, y, _ = task(rng, n=120)
    model = make_pipeline(Anomalies(), LinCFA(random_state=0))
    want = cv(model, X, y, n_splits=3)
    got = cv(model, X.transpose("lat", "lon", "time"), y, n_splits=3)
    np.testing.assert_array_equal(got.r2, want.r2)
    assert [t.size for t, _ in got.extra["folds"]] == [t.size for t, _ in want.extra["folds"]]


def test_fit_each_counts_the_samples_along_the_sample_dim(rng):
    from dcfa import fit_each

    X, y, _ = task(rng, n=120)
    models = fit_each(LinCFA(random_state=0), X.transpose("lat", "time", "lon"), {"y": y})
    want = LinCFA(random_state=0).fit(X, y)
    np.testing.assert_array_equal(models["y"].labels_, want.labels_)


def test_a_dataset_is_refused_naming_the_variable_to_select(rng):
    """forward_cv raised xarray's "cannot directly convert an xarray.Dataset", align
    AttributeError: 'Dataset' object has no attribute 'shape'."""
    import dcfa

    X, y, _ = task(rng, n=60)
    ds = X.to_dataset(name="sst")
    target = xr.Dataset({"soi": ("time", y)}, coords={"time": X.time})
    for call in (
        lambda: forward_cv(LinCFA(), ds, y),
        lambda: blocked_cv(LinCFA(), ds, y),
        lambda: dcfa.align(ds, target["soi"]),
    ):
        with pytest.raises(TypeError, match=r"^X: got an xarray.Dataset; select one variable"):
            call()
    # the way to several variables it names: a fit whose groups keep to one variable each
    ds["wind"] = ds["sst"].copy(data=rng.normal(size=ds["sst"].shape))
    with pytest.raises(TypeError, match=r"stack several with ds.to_dataarray\('variable'\)"):
        LinCFA().fit(ds, y)
    stacked = ds.to_dataarray("variable")
    labels = LinCFA(random_state=0).fit(stacked, y).labels_.reshape(2, -1)
    assert not set(labels[0]) & set(labels[1])
    for call in (
        lambda: forward_cv(LinCFA(), X, target),
        lambda: dcfa.align(X, target),
    ):
        with pytest.raises(TypeError, match=r"^y: got an xarray.Dataset; .* \(ds\['soi'\]\)$"):
            call()


@pytest.mark.parametrize("function", ["forward_cv", "blocked_cv"])
def test_a_classifier_is_refused_naming_a_classification_score(function):
    """A GBMAP classifier on a thresholded target scored R^2 0.24-0.52 of its 0/1 labels,
    where its accuracy on the same folds was 0.81-0.88: a number that reads as skill."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.preprocessing import StandardScaler

    import dcfa
    from dcfa.gbmap import GBMAPClassifier
    from dcfa.skill import blocked_folds

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=120) > 0).astype(int)
    call = getattr(dcfa, function)
    for model in (
        LogisticRegression(),
        GBMAPClassifier(n_boosts=2),
        make_pipeline(StandardScaler(), LogisticRegression()),
    ):
        with pytest.raises(ValueError, match=f"^model: {function} scores R\\^2 of a regression"):
            call(model, X, y, n_splits=3)
    # the call the message names runs, on the same folds
    folds = blocked_folds(120, 3, 0) if function == "blocked_cv" else TimeSeriesSplit(3, gap=0)
    scores = cross_val_score(LogisticRegression(), X, y, cv=folds, scoring="balanced_accuracy")
    assert scores.shape == (3,) and (scores > 0.6).all()


@pytest.mark.slow
def test_refits_of_in_memory_data_stay_off_the_cluster(client):
    """With a Client, every fold's graph carried X to the workers (distributed warned of
    20-38 MiB graphs in the README's call); X is in memory here, so the refits run here, with
    the same skill."""
    from distributed import get_task_stream

    from dcfa import RegionsCV
    from dcfa.datasets import make_regions_field

    ds = make_regions_field(240, (30, 60), 10, n_active=2, land_fraction=0.3, seed=3)
    X, y = ds.field.compute(), ds.target.compute()
    model = make_pipeline(Anomalies(), RegionsCV(n_splits=3))
    with get_task_stream(client) as stream, warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "Sending large graph ..." among them
        on_cluster = forward_cv(model, X, y, n_splits=3, min_train=120)
        blocked = blocked_cv(model, X, y, n_splits=3)
    assert stream.data == []
    import dask

    with dask.config.set(scheduler="sync"):
        alone = forward_cv(model, X, y, n_splits=3, min_train=120)
    np.testing.assert_allclose(on_cluster.r2, alone.r2, rtol=1e-10)
    assert np.isfinite(blocked.r2).all()


@pytest.mark.parametrize("splitter", ["forward", "blocked"])
def test_the_predictions_are_each_folds_model_on_its_test_block(splitter):
    """Skill held R² only: a plot of the out-of-sample predictions needed the folds rebuilt."""
    rng = np.random.default_rng(4)
    X, y, _ = task(rng)
    from sklearn.preprocessing import FunctionTransformer

    flatten = FunctionTransformer(lambda X: np.asarray(X).reshape(len(X), -1))
    model = make_pipeline(Anomalies(), flatten, PCA(3))
    if splitter == "forward":
        skill = forward_cv(model, X, y, n_splits=4, gap=2, min_train=36)
    else:
        skill = blocked_cv(model, X, y, n_splits=4, gap=2)
    p = skill.predictions
    assert p.dims == ("time",) and (p.time.values == X.time.values).all()
    flat = X.values.reshape(len(y), -1)
    tested = np.zeros(len(y), bool)
    for (train, test), r in zip(skill.extra["folds"], skill.r2, strict=True):
        # independently: the climatology, 3 components and OLS of the training rows, in NumPy
        months = X.time.dt.month.values
        clim = {m: flat[train][months[train] == m].mean(0) for m in np.unique(months)}
        anom = flat - np.array([clim[m] for m in months])
        pca = PCA(3).fit(anom[train])
        ols = LinearRegression().fit(pca.transform(anom[train]), y[train])
        expected = ols.predict(pca.transform(anom[test]))
        np.testing.assert_allclose(p.values[test], expected, rtol=1e-8, atol=1e-8)
        assert r2(y[test], p.values[test]) == pytest.approx(r)
        tested[test] = True
    assert np.isnan(p.values[~tested]).all() and np.isfinite(p.values[tested]).all()
    # NumPy in, NumPy out
    plain = forward_cv(LinearRegression(), flat, y, n_splits=4, min_train=36).predictions
    assert isinstance(plain, np.ndarray) and np.isnan(plain[:36]).all()


def test_a_daily_training_window_without_a_month_is_refused_naming_min_train():
    """Daily samples hold each month many times or not at all: 300 days of training failed
    inside the first fit ('month(s) [3..12] do not occur in the training data'), not naming
    min_train."""
    time = pd.date_range("2000-01-01", periods=3 * 365, freq="D")
    rng = np.random.default_rng(0)
    X = xr.DataArray(
        rng.normal(size=(time.size, 2, 3)), dims=("time", "lat", "lon"), coords={"time": time}
    )
    y = rng.normal(size=time.size)
    model = make_pipeline(Anomalies(), Spy(), PCA(2))
    SEEN.clear()
    with pytest.raises(ValueError, match=r"^min_train: the training rows of fold 0 \(300 "
                       r"samples, 2000-01 \.\. 2000-10\) hold no Nov, Dec, which its test rows "
                       r"hold.*730 on daily ones"):  # fmt: skip
        forward_cv(model, X, y, n_splits=5, min_train=300)
    assert SEEN == []  # refused before any fit
    assert np.isfinite(forward_cv(model, X, y, n_splits=2, min_train=730).r2).all()
    # no dates: Anomalies' own refusal, not a crash of the check
    with pytest.raises(ValueError, match="holds int64 values, not dates; monthly anomalies"):
        forward_cv(model, X.drop_vars("time"), y, n_splits=5, min_train=300)


def test_a_target_table_is_one_numeric_column_and_its_attrs_reach_the_predictions(rng):
    """A DataFrame of the target and its dates failed inside NumPy; two numeric columns were
    flattened into one target twice as long. The predictions keep the target's units."""
    X, y, _ = task(rng, n=60)
    X = X.stack(cell=("lat", "lon"))
    target = xr.DataArray(y, dims="time", coords={"time": X["time"]}, name="rain",
                          attrs={"units": "mm/day"})  # fmt: skip
    dated = target.assign_coords(target_time=("time", X["time"].values + np.timedelta64(90, "D")))
    with pytest.raises(TypeError, match=r"^y: the DataFrame's column\(s\) \['target_time'\] "
                       r"are not numbers; select the target's column \(y\['rain'\]\)"):  # fmt: skip
        forward_cv(LinearRegression(), X, dated.to_dataframe(), n_splits=3, min_train=20)
    two = pd.DataFrame({"a": y, "b": -y}, index=X["time"].to_index())
    with pytest.raises(ValueError, match=r"^y: expected one target, a 1-D series; got shape "
                       r"\(60, 2\)"):  # fmt: skip
        forward_cv(LinearRegression(), X, two, n_splits=3, min_train=20)
    skill = forward_cv(LinearRegression(), X, target, n_splits=3, min_train=20)
    assert skill.predictions.attrs == {"units": "mm/day"}
    one = forward_cv(LinearRegression(), X, target.to_dataframe(), n_splits=3, min_train=20)
    np.testing.assert_allclose(one.r2, skill.r2, rtol=1e-12)


@pytest.mark.parametrize("helper", [forward_cv, blocked_cv])
def test_the_predictions_say_which_month_they_are_for(rng, helper):
    """A lead target's predictions sit on the predictors' dates, as ``X`` does; they also
    carry the target's ``target_time``, the month each one predicts, so that a plot against
    the observed index is not ``lead`` months off."""
    from dcfa import lead_target

    X, y, _ = task(rng, n=96)
    rain = xr.DataArray(y, dims="time", coords={"time": X["time"]}, name="rain",
                        attrs={"units": "mm/day"})  # fmt: skip
    Xl, yl, _ = lead_target(X, rain, 2)
    kwargs = dict(n_splits=3) if helper is blocked_cv else dict(n_splits=3, min_train=30)
    cells = Xl.stack(cell=("lat", "lon"))
    P = helper(LinearRegression(), cells, yl, gap=2, **kwargs).predictions
    np.testing.assert_array_equal(P["time"].values, Xl["time"].values)
    np.testing.assert_array_equal(P["target_time"].values, yl["target_time"].values)
    assert P["target_time"].attrs == yl["target_time"].attrs
    assert P.attrs == {"units": "mm/day"}
    # the values are those of a target without the coord
    plain = helper(LinearRegression(), cells, yl.drop_vars("target_time"), gap=2, **kwargs)
    np.testing.assert_array_equal(P.values, plain.predictions.values)
    assert "target_time" not in plain.predictions.coords


def test_a_nan_target_is_refused_naming_the_pairing_that_drops_it(rng):
    """It said "keep = np.isfinite(y); X[keep], y[keep]", which indexes the first dim: a
    (lat, lon, time) field's latitudes. dcfa.align pairs by date and drops the NaN."""
    import dcfa

    X, y, _ = task(rng, n=120)
    target = xr.DataArray(y, dims="time", coords={"time": X.time}).where(X.time != X.time[40])
    model = make_pipeline(Anomalies(), LinCFA(random_state=0))
    field = X.transpose("lat", "lon", "time")
    with pytest.raises(ValueError, match=r"X, y = dcfa.align\(X, y\) for a field and a target"):
        forward_cv(model, field, target, n_splits=3)
    paired, kept = dcfa.align(field, target)
    assert kept.sizes["time"] == 119 and paired.sizes["time"] == 119
    assert np.isfinite(forward_cv(model, paired, kept, n_splits=3).r2).all()


def test_a_target_that_is_mostly_its_seasonal_cycle_is_said_when_x_is_anomalies():
    """A river's flow: forward-CV R^2 +0.14 with its cycle, +0.63 for its anomalies, and
    nothing said in Python (a batch job notes it)."""
    from dcfa import RegionsCV

    rng = np.random.default_rng(7)
    n = 240
    time = pd.date_range("2000-01-01", periods=n, freq="MS")
    driver = rng.normal(size=n)
    X = xr.DataArray(
        driver[:, None, None] + 0.5 * rng.normal(size=(n, 3, 4))
        + 5 * np.sin(2 * np.pi * time.month.values / 12)[:, None, None],
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": np.arange(3.0), "lon": np.arange(4.0)},
    )  # fmt: skip
    cycle = 3 * np.cos(2 * np.pi * time.month.values / 12)
    flow = xr.DataArray(cycle + driver + 0.3 * rng.normal(size=n), dims="time",
                        coords={"time": time}, name="flow")  # fmt: skip
    model = make_pipeline(Anomalies(), RegionsCV(gap=0, n_splits=3))
    with pytest.warns(UserWarning, match=r"^y: its mean seasonal cycle is \d+% of its var") as w:
        forward_cv(model, X, flow, n_splits=3, min_train=120)
    assert [x.filename for x in w if str(x.message).startswith("y: its")] == [__file__]
    anomalies = Anomalies().fit(flow[:120]).transform(flow)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forward_cv(model, X, anomalies, n_splits=3, min_train=120)  # its anomalies
        forward_cv(RegionsCV(gap=0, n_splits=3), X, flow, n_splits=3, min_train=120)
    assert not [x for x in caught if "seasonal cycle is" in str(x.message)]

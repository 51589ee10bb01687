"""The tolerance path's folds and the skill functions' checks, against independent references:
brute-force refits of GenLinCFA / NonLinCFA on every training fold scored by scikit-learn's
``LinearRegression`` (each fold's own exclusions, spreads and visiting order), scikit-learn's
``KFold``, or the computes a bad argument may start (none)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from conftest import count_computes
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from sklearn.model_selection import KFold
from support import splits_of

from dcfa import GenLinCFA, GenLinCFACV, NonLinCFA, NonLinCFACV
from dcfa.datasets import make_regions_field
from dcfa.skill import blocked_cv, forward_cv


@pytest.fixture(scope="module")
def regions():
    ds = make_regions_field(n_time=180, shape=(10, 14), n_regions=6, land_fraction=0.2, seed=1)
    return ds.field.chunk({"time": 60}), ds.target.values


def refit_path(model, cls, X, y, base: dict) -> tuple[np.ndarray, np.ndarray]:
    """Every fold's groups and test R^2 by refitting ``cls`` on the fold's training rows."""
    path = model.cv_path_
    groups = np.zeros_like(path["fold_groups"].values)
    skill = np.zeros_like(path["cv_r2"].values)
    for i, eps in enumerate(path["eps"].values):
        for k, (train, start, stop) in enumerate(splits_of(path)):
            fold = cls(eps=eps, mode="dense", **base).fit(X[:train], y[:train])
            F = np.asarray(fold.transform(X))
            ols = LinearRegression().fit(F[:train], y[:train])
            groups[i, k] = fold.n_features_out_
            skill[i, k] = r2_score(y[start:stop], ols.predict(F[start:stop]))
    return groups, skill


def assert_path_is_the_refit(model, cls, X, y, base: dict, *, determined: bool = True) -> None:
    """Every fold's groups and R^2 equal refitting ``cls(**base)`` on its training rows, and
    the final labels a fit on all rows at ``eps_``; ``determined``: every fold's OLS has fewer
    groups than training rows (a unique skill to compare)."""
    groups, skill = refit_path(model, cls, X, y, base)
    if determined:
        train_rows = model.cv_path_["train_stop"].values
        assert (groups < train_rows - 1).all()
    np.testing.assert_array_equal(model.cv_path_["fold_groups"].values, groups)
    np.testing.assert_allclose(model.cv_path_["cv_r2"].values, skill, rtol=0, atol=1e-8)
    whole = cls(eps=model.eps_, mode="dense", **base).fit(X, y)
    np.testing.assert_array_equal(model.labels_, whole.labels_)


@pytest.mark.parametrize(
    "cv_cls, cls, params",
    [
        (GenLinCFACV, GenLinCFA, dict(neighbors=1, epsilons=[0.72, 0.8], standardize=True)),
        (NonLinCFACV, NonLinCFA, dict(neighbors=1, epsilons=[1e-3, 1e-2], cv=3, standardize=True)),
    ],
)
def test_standardized_path_scales_every_fold_by_its_training_months(regions, cv_cls, cls, params):
    """standardize=True: each fold's partition and group series use the spread of its
    training months (the old path divided by the spread of all months, test months
    included: fold R^2 off by up to 0.35 from refitting on the fold)."""
    X, y = regions
    model = cv_cls(n_splits=3, **params).fit(X, y)
    base = {k: v for k, v in params.items() if k != "epsilons"}
    assert_path_is_the_refit(model, cls, X, y, base)


@pytest.mark.parametrize(
    "cv_cls, cls, params",
    [
        (GenLinCFACV, GenLinCFA, dict(epsilons=[0.8, 0.9])),
        (GenLinCFACV, GenLinCFA, dict(epsilons=[0.8, 0.9], standardize=True)),
        (NonLinCFACV, NonLinCFA, dict(epsilons=[1e-2, 3e-2], cv=3, standardize=True)),
    ],
)
def test_a_cell_constant_over_a_folds_training_months_is_left_out_of_that_fold(
    regions, cv_cls, cls, params
):
    """A cell constant before some date (a sea-ice cell, a variable filled before its
    record starts) is excluded from the folds that train only on those months, as refitting
    on them excludes it; the old path kept it (all months vary), and its jump at the test
    block ruined the fold: R^2 -11.3 where refitting gives +0.42."""
    X, y = regions
    X = X.load().copy()
    X[:90, 2, 3] = 5.0  # constant over the training months of the first two folds
    model = cv_cls(n_splits=3, **params).fit(X, y)
    base = {k: v for k, v in params.items() if k != "epsilons"}
    # all months: the cell varies and is used, and the folds left every series as it was
    assert_path_is_the_refit(model, cls, X, y, base)
    assert model.labels_[2 * 14 + 3] >= 0


def test_max_groups_that_no_tolerance_meets_warns_and_takes_the_smallest_map(regions):
    """No tolerance gives at most max_groups: a UserWarning naming max_groups (the old code
    only logged it, silent without logging configured), and the fewest groups' tolerance."""
    X, y = regions
    params = dict(neighbors=1, epsilons=[0.5, 0.6], n_splits=2)
    free = GenLinCFACV(**params).fit(X, y)
    fewest = int(free.cv_path_["n_groups"].min())
    with pytest.warns(UserWarning, match=r"max_groups: no tolerance .* at most max_groups=1 "):
        capped = GenLinCFACV(max_groups=1, **params).fit(X, y)
    assert capped.n_features_out_ == fewest
    eps = free.cv_path_["eps"].values
    assert capped.eps_ == eps[np.argmin(free.cv_path_["n_groups"].values)]
    reference = GenLinCFA(neighbors=1, eps=capped.eps_, mode="dense").fit(X, y)
    np.testing.assert_array_equal(capped.labels_, reference.labels_)


def test_blocked_cv_checks_n_splits_before_reading_a_lazy_field(regions):
    """A wrong n_splits is named before the field is read (the old blocked_cv read the whole
    DataArray first); a NumPy integer is an int (the old check refused np.int64(3))."""
    X, y = regions
    with count_computes(0), pytest.raises(ValueError, match=r"n_splits: expected an int in \[2"):
        blocked_cv(GenLinCFA(), X, y, n_splits=100)
    skill = blocked_cv(GenLinCFA(eps=0.8), X, y, n_splits=np.int64(3))
    values = X.values.reshape(X.shape[0], -1)
    reference = []
    for train, test in KFold(3).split(values):
        fold = GenLinCFA(eps=0.8).fit(X[train], y[train])
        F = np.asarray(fold.transform(X))
        ols = LinearRegression().fit(F[train], y[train])
        reference.append(r2_score(y[test], ols.predict(F[test])))
    np.testing.assert_allclose(skill.r2, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize(
    "kwargs, need",
    [(dict(max_train_size=3), 4), (dict(max_train_size=20, min_train=30), 30)],
)
def test_forward_cv_refuses_a_rolling_window_too_short_to_fit(regions, kwargs, need):
    """max_train_size below what a fit needs (or below min_train) is named before any fit;
    the old forward_cv fitted and failed with 'X: expected at least 4 samples'."""
    X, y = regions
    with count_computes(0), pytest.raises(ValueError, match=rf"max_train_size: .* >= {need}"):
        forward_cv(GenLinCFA(), X, y, n_splits=3, **kwargs)


@pytest.mark.parametrize("cv", [forward_cv, blocked_cv])
def test_a_nan_target_is_named_before_the_field_is_read(regions, cv):
    """A NaN in y (an SOI month not yet published) is named as y's, before any read or fit;
    the old forward_cv fitted the folds before it and then failed in the scorer with
    'Input contains NaN.'"""
    X, y = regions
    y = y.copy()
    y[150] = np.nan
    with count_computes(0), pytest.raises(ValueError, match=r"y: 1 of 180 values are NaN .*150"):
        cv(GenLinCFA(), X, y, n_splits=3)


def test_an_unseeded_shuffle_visits_every_fold_in_one_order(regions):
    """shuffle=True with a RandomState: one seed drawn per fit serves the whole path, so it
    equals refitting GenLinCFA with that seed on every fold (the old path drew a new order
    for every fold and tolerance: no single order matched the partitions it scored)."""
    X, y = regions
    params = dict(neighbors=1, epsilons=[0.75, 0.85], n_splits=3, shuffle=True)
    model = GenLinCFACV(random_state=np.random.RandomState(5), **params).fit(X, y)
    seed = int(np.random.RandomState(5).randint(np.iinfo(np.int32).max))
    base = dict(neighbors=1, shuffle=True, random_state=seed)
    assert_path_is_the_refit(model, GenLinCFA, X, y, base, determined=False)


@pytest.mark.parametrize(
    "run, why",
    [
        (lambda X, y: GenLinCFACV(epsilons=[0.8], n_splits=3).fit(X, y), "GenLinCFACV's"),
        (lambda X, y: NonLinCFACV(epsilons=[1e-2], n_splits=2, cv=2).fit(X, y), "NonLinCFACV's"),
        (lambda X, y: forward_cv(GenLinCFA(), X, y.values, n_splits=3), "the CV's blocks"),
        (lambda X, y: blocked_cv(GenLinCFA(), X, y.values, n_splits=3), "the CV's blocks"),
    ],
)
def test_time_ordered_folds_refuse_a_field_stored_latest_first(regions, run, why):
    """A DataArray whose dates decrease: the forward folds would train on the future (the old
    estimators and forward_cv scored it silently, as if in time order). Named with the first
    pair out of order, before any read."""
    X, y = regions
    y = xr.DataArray(y, dims="time", coords={"time": X.time})
    X_rev, y_rev = X.isel(time=slice(None, None, -1)), y.isel(time=slice(None, None, -1))
    with count_computes(0), pytest.raises(ValueError) as err:
        run(X_rev, y_rev)
    message = str(err.value)
    assert message.startswith("X: its 'time' labels are not increasing (1964-12-01 then ")
    assert why in message and "X.sortby('time')" in message


@pytest.mark.parametrize(
    "cv_cls, params",
    [
        (GenLinCFACV, dict(neighbors=1, epsilons=[0.72, 0.8], standardize=True)),
        (NonLinCFACV, dict(neighbors=1, epsilons=[1e-2], cv=3, standardize=True)),
    ],
)
def test_the_folds_leave_the_gathered_series_as_they_were(regions, monkeypatch, cv_cls, params):
    """Every fold and tolerance reads the series gathered once; a basis scales what it reads
    and never the series: after the path, every series and segment mean is the gathered one,
    bit for bit. (The old path scaled them in place, by each fold's spreads and divided back,
    which left about one value in ten an ulp off for the later folds and the final fit, and
    then by the final fit's.)"""
    from dcfa.cfa.series import SeriesData

    gathered = []
    real = SeriesData.gather.__func__

    def spy(cls, *args, **kwargs):
        data = real(cls, *args, **kwargs)
        gathered.append((data, data.series.copy(), data.seg_mean.copy()))
        return data

    monkeypatch.setattr(SeriesData, "gather", classmethod(spy))
    X, y = regions
    X = X.load().copy()
    X[:90, 2, 3] = 5.0  # excluded from the first folds: features move within the arrays
    cv_cls(n_splits=3, **params).fit(X, y)
    ((data, series, seg_mean),) = gathered
    np.testing.assert_array_equal(data.series, series)
    np.testing.assert_array_equal(data.seg_mean, seg_mean)

"""GenLinCFACV / NonLinCFACV: the tolerance path, checked against refitting by brute force.

For every tolerance and forward fold, the reference fits the estimator (dense execution) on
the training months only, then scikit-learn's ``LinearRegression`` on its ``transform`` of the
training months, and scores the test months. The path must give the same groups and R^2 to
1e-8 from its single gather, and the final partition must be ``GenLinCFA(eps=eps_)``'s.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import count_computes
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from support import splits_of

from dcfa import GenLinCFA, GenLinCFACV, NonLinCFA, NonLinCFACV
from dcfa.datasets import make_regions_field


@pytest.fixture(scope="module")
def regions():
    ds = make_regions_field(n_time=180, shape=(10, 14), n_regions=6, land_fraction=0.2, seed=1)
    return ds.field.chunk({"time": 60}), ds.target.values


@pytest.mark.parametrize(
    "cv_cls, cls, params",
    [
        (GenLinCFACV, GenLinCFA, dict(neighbors=1, epsilons=[0.5, 0.8])),
        (GenLinCFACV, GenLinCFA, dict(epsilons=[0.6], weights="area", n_splits=2, gap=6)),
        (NonLinCFACV, NonLinCFA, dict(neighbors=1, epsilons=[1e-3, 1e-2], cv=3)),
    ],
)
def test_the_path_equals_refitting_on_every_fold(regions, cv_cls, cls, params):
    X, y = regions
    model = cv_cls(n_splits=params.pop("n_splits", 3), **params).fit(X, y)
    base = {k: v for k, v in params.items() if k not in ("epsilons", "gap")}
    path = model.cv_path_
    for i, eps in enumerate(path["eps"].values):
        for k, (train, start, stop) in enumerate(splits_of(path)):
            fold = cls(eps=eps, mode="dense", **base).fit(X[:train], y[:train])
            F = fold.transform(X).values
            ols = LinearRegression().fit(F[:train], y[:train])
            expected = r2_score(y[start:stop], ols.predict(F[start:stop]))
            assert path["fold_groups"].values[i, k] == fold.n_features_out_
            assert path["cv_r2"].values[i, k] == pytest.approx(expected, abs=1e-8)
        whole = cls(eps=eps, mode="dense", **base).fit(X, y)
        assert path["n_groups"].values[i] == whole.n_features_out_
    best = int(np.nanargmax(path["mean_cv_r2"].values))
    assert model.eps_ == path["eps"].values[best]
    # the standard error of the mean over the folds, as NumPy gives it
    se = path["cv_r2"].values.std(axis=1, ddof=1) / np.sqrt(path.sizes["fold"])
    np.testing.assert_allclose(path["se_cv_r2"].values, se, rtol=1e-12)
    reference = cls(eps=model.eps_, mode="dense", **base).fit(X, y)
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    assert model.execution_ == "series"


def test_max_groups_takes_the_best_small_map(regions):
    X, y = regions
    free = GenLinCFACV(neighbors=1, epsilons=[0.4, 0.6, 0.8, 0.9], n_splits=2).fit(X, y)
    path = free.cv_path_
    groups, eps, mean = (path[k].values for k in ("n_groups", "eps", "mean_cv_r2"))
    cap = int(groups.min())
    capped = clone(free).set_params(max_groups=cap).fit(X, y)
    assert capped.n_features_out_ <= cap
    allowed = groups <= cap
    assert capped.eps_ == eps[allowed][np.nanargmax(mean[allowed])]


def test_fit_record_holds_the_choice_and_the_path(regions):
    """What the batch job stores in a result, asked of the estimator (no CV-specific code in
    the job): the execution, the chosen tolerance and the path, JSON-able."""
    import json

    X, y = regions
    model = GenLinCFACV(neighbors=1, epsilons=[0.5, 0.8], n_splits=2).fit(X, y)
    record = model.fit_record()
    assert record["execution"] == "series" and record["eps"] == model.eps_
    path = json.loads(json.dumps(record))["eps_path"]
    assert json.loads(path)["n_groups"] == model.cv_path_["n_groups"].values.tolist()
    # the chosen tolerance's row of the path, fold by fold (what `dcfa inspect` reads)
    folds = model.cv_path_["cv_r2"].sel(eps=model.eps_).values
    np.testing.assert_array_equal(model.cv_r2_, folds)
    assert json.loads(record["cv_r2"]) == pytest.approx(folds, abs=1e-6)
    plain = GenLinCFA(neighbors=1, eps=0.5).fit(X, y)
    assert plain.fit_record() == {"execution": plain.execution_}


def test_the_test_months_never_reach_a_fold(regions):
    """Changing the months after a fold's test block changes nothing of that fold."""
    X, y = regions
    params = dict(neighbors=1, epsilons=[0.6, 0.8], n_splits=3)
    a = GenLinCFACV(**params).fit(X, y)
    X2 = X.copy(data=X.data.copy())
    last = int(a.cv_path_["test_stop"][0])  # end of the first fold's test block
    X2[last:] = X2[last:] * 0 + np.random.default_rng(0).normal(size=X2[last:].shape)
    y2 = y.copy()
    y2[last:] = 0.0
    b = GenLinCFACV(**params).fit(X2, y2)
    np.testing.assert_array_equal(
        a.cv_path_["cv_r2"].values[:, 0], b.cv_path_["cv_r2"].values[:, 0]
    )


@pytest.mark.parametrize(
    "cls, params, match",
    [
        (GenLinCFACV, dict(epsilons=[0.5, 1.5]), r"epsilons: expected tolerances in \(0, 1\]"),
        (NonLinCFACV, dict(epsilons=[-1e-3]), "epsilons: expected tolerances >= 0"),
        (GenLinCFACV, dict(epsilons=[]), "epsilons: expected at least one"),
        (GenLinCFACV, dict(mode="dense"), "mode: GenLinCFACV runs the series execution"),
        (NonLinCFACV, dict(n_splits=200), "n_splits"),
        (NonLinCFACV, dict(n_splits=40, cv=15), "cv: 15 folds need"),
    ],
)
def test_bad_paths_are_refused_before_the_pass(regions, cls, params, match):
    X, y = regions
    with count_computes(0), pytest.raises(ValueError, match=match):
        cls(**params).fit(X, y)


def test_a_path_without_skill_says_so_and_is_data():
    """On 1991-2014 every tolerance had a negative CV R^2 (-7.01 .. -0.19) and GenLinCFACV
    took eps_ = 0.9 without a word; ``cv_path_`` is a Dataset a user can plot or tabulate."""
    rng = np.random.default_rng(5)
    ds = make_regions_field(n_time=120, shape=(6, 8), n_regions=4, seed=2)
    y = rng.standard_normal(120)  # nothing in the field predicts it
    with pytest.warns(UserWarning, match=r"GenLinCFACV: no tolerance beats the climatology"):
        model = GenLinCFACV(neighbors=1, epsilons=[0.5, 0.8], n_splits=3).fit(ds.field, y)
    path = model.cv_path_
    assert (path["mean_cv_r2"] <= 0).all()
    assert set(path.data_vars) >= {"n_groups", "mean_cv_r2", "se_cv_r2", "cv_r2"}
    frame = path[["n_groups", "mean_cv_r2", "se_cv_r2"]].to_dataframe()
    assert list(frame.index) == [0.5, 0.8] and frame.index.name == "eps"

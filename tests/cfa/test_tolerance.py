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
    for i, eps in enumerate(path["eps"]):
        for k, (train, start, stop) in enumerate(path["splits"]):
            fold = cls(eps=eps, mode="dense", **base).fit(X[:train], y[:train])
            F = fold.transform(X).values
            ols = LinearRegression().fit(F[:train], y[:train])
            expected = r2_score(y[start:stop], ols.predict(F[start:stop]))
            assert path["fold_groups"][i, k] == fold.n_features_out_
            assert path["cv_r2"][i, k] == pytest.approx(expected, abs=1e-8)
        whole = cls(eps=eps, mode="dense", **base).fit(X, y)
        assert path["n_groups"][i] == whole.n_features_out_
    best = int(np.nanargmax(path["mean_cv_r2"]))
    assert model.eps_ == path["eps"][best]
    reference = cls(eps=model.eps_, mode="dense", **base).fit(X, y)
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    assert model.execution_ == "series"


def test_max_groups_takes_the_best_small_map(regions):
    X, y = regions
    free = GenLinCFACV(neighbors=1, epsilons=[0.4, 0.6, 0.8, 0.9], n_splits=2).fit(X, y)
    path = free.cv_path_
    cap = int(path["n_groups"].min())
    capped = clone(free).set_params(max_groups=cap).fit(X, y)
    assert capped.n_features_out_ <= cap
    allowed = path["n_groups"] <= cap
    assert capped.eps_ == path["eps"][allowed][np.nanargmax(path["mean_cv_r2"][allowed])]


def test_fit_record_holds_the_choice_and_the_path(regions):
    """What the batch job stores in a result, asked of the estimator (no CV-specific code in
    the job): the execution, the chosen tolerance and the path, JSON-able."""
    import json

    X, y = regions
    model = GenLinCFACV(neighbors=1, epsilons=[0.5, 0.8], n_splits=2).fit(X, y)
    record = model.fit_record()
    assert record["execution"] == "series" and record["eps"] == model.eps_
    path = json.loads(json.dumps(record))["eps_path"]
    assert json.loads(path)["n_groups"] == model.cv_path_["n_groups"].tolist()
    plain = GenLinCFA(neighbors=1, eps=0.5).fit(X, y)
    assert plain.fit_record() == {"execution": plain.execution_}


def test_the_test_months_never_reach_a_fold(regions):
    """Changing the months after a fold's test block changes nothing of that fold."""
    X, y = regions
    params = dict(neighbors=1, epsilons=[0.6, 0.8], n_splits=3)
    a = GenLinCFACV(**params).fit(X, y)
    X2 = X.copy(data=X.data.copy())
    last = a.cv_path_["splits"][0][2]  # end of the first fold's test block
    X2[last:] = X2[last:] * 0 + np.random.default_rng(0).normal(size=X2[last:].shape)
    y2 = y.copy()
    y2[last:] = 0.0
    b = GenLinCFACV(**params).fit(X2, y2)
    np.testing.assert_array_equal(a.cv_path_["cv_r2"][:, 0], b.cv_path_["cv_r2"][:, 0])


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

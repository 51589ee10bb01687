"""Cells with some values missing: left out with a warning that names the remedy the estimator
takes, and a refusal that says when every cell misses the same samples."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import dcfa
from dcfa import GappyCellsWarning, NothingToFitError
from dcfa.datasets import make_regions_field


@pytest.fixture(scope="module")
def field():
    ds = make_regions_field(120, (8, 12), 6, n_active=2, land_fraction=0.2, seed=3)
    return ds["field"].compute(), ds["target"].compute()


def _fit(model, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    return [w for w in caught if issubclass(w.category, GappyCellsWarning)]


@pytest.mark.parametrize(
    "model, remedy",
    [
        (dcfa.RegionsCV(n_splits=3), "RegionsCV needs every sample of a feature"),
        (dcfa.LinCFA(random_state=0), "missing='pairwise' keeps them"),
        (dcfa.GenLinCFA(random_state=0), "missing='pairwise' keeps them"),
    ],
)
def test_cells_with_a_gap_are_left_out_with_a_warning(field, model, remedy):
    X, y = field
    # land (all missing) is no gap: no warning
    assert _fit(model, X, y) == []
    gappy = X.copy()
    ocean = np.argwhere(X.notnull().all("time").values)[:7]
    for i, j in ocean:  # five months of "sea ice" in seven ocean cells
        gappy[10:15, i, j] = np.nan
    (w,) = _fit(model, gappy, y)
    text = str(w.message)
    assert text.startswith(f"{type(model).__name__}: 7 features left out of the map")
    assert "e.g. 5 of 120 values missing; excluded_ lists them" in text
    assert remedy in text
    assert sum(why.code == "gappy" for why in model.excluded_.values()) == 7


def test_pairwise_keeps_the_cells_without_a_warning(field):
    X, y = field
    gappy = X.copy()
    ocean = np.argwhere(X.notnull().all("time").values)[:7]
    for i, j in ocean:
        gappy[10:15, i, j] = np.nan
    model = dcfa.LinCFA(missing="pairwise", random_state=0)
    assert _fit(model, gappy, y) == []
    assert not any(why.code == "gappy" for why in model.excluded_.values())


def test_a_month_missing_everywhere_is_named_in_the_refusal(field):
    X, y = field
    holed = X.copy()
    holed[37] = np.nan  # one month lost from the archive
    n = int(X.notnull().all("time").sum())
    with pytest.raises(NothingToFitError) as err:
        dcfa.RegionsCV(n_splits=3).fit(holed, y)
    text = str(err.value)
    # one line per reason, not the first five cells' copies of it
    assert f"every one of the {X[0].size} features was excluded ({n} features: 1 of 120" in text
    assert f"; {X[0].size - n} features: all values missing" in text
    assert "Every feature with data has 1 of 120 values missing" in text
    assert "leave them out first, e.g. X.dropna('time', how='all')" in text
    # the advice works: the month goes, the cells with data keep every other one
    kept = holed.dropna("time", how="all")
    assert kept.sizes["time"] == 119 and int(kept.notnull().all("time").sum()) == n


def test_cells_with_different_gaps_get_no_advice_to_drop_months(field):
    X, y = field
    holed = X.copy()
    holed[37] = np.nan
    ocean = np.argwhere(X.notnull().all("time").values)
    holed[38, ocean[0][0], ocean[0][1]] = np.nan  # one cell misses a second month
    with pytest.raises(NothingToFitError) as err:
        dcfa.RegionsCV(n_splits=3).fit(holed, y)
    n = int(X.notnull().all("time").sum())
    assert f"({n} features: e.g. 2 of 120 values missing" in str(err.value)
    assert "dropna" not in str(err.value)


class _WarnsInFit(LinearRegression):
    def fit(self, X, y):
        warnings.warn("a refit's own warning", UserWarning, stacklevel=2)
        return super().fit(X, y)


class _WarnsThenFails(LinearRegression):
    def fit(self, X, y):
        warnings.warn("why the refit fails", UserWarning, stacklevel=2)
        raise RuntimeError("the refit failed")


@pytest.mark.parametrize("cv", ["forward_cv", "blocked_cv"])
def test_a_cv_warns_of_the_gaps_once_for_all_folds(field, cv):
    """Every fold's refit left the same cells out and warned, each in its own words (its
    own count of values): up to one warning per fold for one fact."""
    X, y = field
    gappy = X.copy()
    ocean = np.argwhere(X.notnull().all("time").values)[:7]
    for i, j in ocean:  # two gaps: every fold trains on one of them, so leaves the cells out
        gappy[5:10, i, j] = gappy[110:115, i, j] = np.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        getattr(dcfa, cv)(dcfa.LinCFA(random_state=0), gappy, y, n_splits=4)
    (w,) = [w for w in caught if issubclass(w.category, GappyCellsWarning)]
    assert w.filename == __file__  # it points at the call of forward_cv or blocked_cv
    assert re.match(r"^4 of 4 folds' refits: LinCFA: 7 features left out", str(w.message))
    # the refits' other warnings still show, each once
    cells = X.values.reshape(X.shape[0], -1)
    cells = cells[:, np.isfinite(cells).all(axis=0)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        getattr(dcfa, cv)(_WarnsInFit(), cells[:, :5], y, n_splits=4)
    assert [str(w.message) for w in caught] == ["a refit's own warning"]
    # a refit that fails: its warnings are shown too, with its error
    with warnings.catch_warnings(record=True) as caught, pytest.raises(RuntimeError):
        warnings.simplefilter("default")
        getattr(dcfa, cv)(_WarnsThenFails(), cells[:, :5], y, n_splits=4)
    assert [str(w.message) for w in caught] == ["why the refit fails"]


def test_a_gap_only_in_a_folds_test_samples_is_refused_with_the_remedy(field):
    """A fold that trains on none of a cell's gaps keeps the cell; the gap in its test months
    reached the regression as NaN, and scikit-learn's "Input X contains NaN. RidgeCV does not
    accept missing values" blamed the regression."""
    X, y = field
    gappy = X.copy()
    i, j = np.argwhere(X.notnull().all("time").values)[0]
    gappy[100, i, j] = np.nan  # one month of one cell, in the last test block only
    with pytest.raises(dcfa.InputError, match=r"^X: 1 feature with values missing in some "):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GappyCellsWarning)
            dcfa.forward_cv(dcfa.LinCFA(random_state=0), gappy, y, n_splits=4)
    remedy = gappy.where(gappy.notnull().all("time"))  # as the message says
    assert np.isfinite(dcfa.forward_cv(dcfa.LinCFA(random_state=0), remedy, y, n_splits=4).r2).all()

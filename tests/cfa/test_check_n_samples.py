"""``check_n_samples``: what a fit on that many samples refuses, said before any data is
read (a batch job asks it with the samples the input and the target have in common)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dcfa import GenLinCFACV, LinCFA, NonLinCFA, NonLinCFACV, RegionsCV

# what a refusal of the record's length starts with: the parameter to change
ABOUT_LENGTH = ("gap:", "n_splits:", "cv:", "X: expected at least")


def _estimators(gap: int, n_splits: int):
    return [
        LinCFA(),
        NonLinCFA(cv=n_splits),
        RegionsCV(gap=gap, n_splits=n_splits, neighbors=None),
        GenLinCFACV(gap=gap, n_splits=n_splits, epsilons=(0.5,)),
        NonLinCFACV(gap=gap, n_splits=n_splits, epsilons=(0.5,), cv=2),
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(4, 40),
    gap=st.integers(0, 6),
    n_splits=st.integers(2, 6),
    which=st.integers(0, 4),
)
@example(n=4, gap=0, n_splits=5, which=2)  # more blocks than samples
@example(n=16, gap=0, n_splits=2, which=4)  # NonLinCFA's folds inside the first forward fold
def test_refuses_exactly_what_fit_refuses(n, gap, n_splits, which):
    model = _estimators(gap, n_splits)[which]
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 5))
    y = X[:, 0] + rng.normal(size=n)
    try:
        model.check_n_samples(n)
    except ValueError as exc:
        with pytest.raises(ValueError) as fitted:
            model.fit(X, y)
        assert str(fitted.value) == str(exc)
        assert str(exc).startswith(ABOUT_LENGTH), exc
        return
    try:
        model.fit(X, y)
    except ValueError as exc:  # too few samples for something else, never for the folds
        assert not str(exc).startswith(ABOUT_LENGTH), exc


def test_names_the_gap_and_what_would_fit():
    with pytest.raises(ValueError, match=r"^gap: 3 samples .* leave 3 of the 11 .*need gap <= 2"):
        RegionsCV(gap=3).check_n_samples(11)
    RegionsCV(gap=2).check_n_samples(11)
    with pytest.raises(ValueError, match=r"^X: expected at least 4 samples"):
        LinCFA().check_n_samples(3)

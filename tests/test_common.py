"""Every estimator through scikit-learn's own estimator checks."""

from __future__ import annotations

from sklearn.linear_model import LinearRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from dcfa import (
    GBMAPKNeighborsClassifier,
    GBMAPKNeighborsRegressor,
    GenLinCFA,
    GenLinCFACV,
    LabelledRegressor,
    LinCFA,
    NonLinCFA,
    NonLinCFACV,
    RegionsCV,
)

_NAN_EVERYWHERE = {
    "check_estimators_pickle": (
        "the check puts NaN in every column; with missing='exclude' (the default) every "
        "gappy column is excluded, so fit raises 'every feature was excluded' by design"
    ),
}
EXPECTED_FAILED = {
    "LinCFA": _NAN_EVERYWHERE,
    "NonLinCFA": _NAN_EVERYWHERE,
    "GenLinCFA": _NAN_EVERYWHERE,
    "GenLinCFACV": _NAN_EVERYWHERE,
    "RegionsCV": _NAN_EVERYWHERE,
    "NonLinCFACV": {
        **_NAN_EVERYWHERE,
        **dict.fromkeys(
            [
                "check_estimators_overwrite_params",
                "check_estimators_fit_returns_self",
                "check_readonly_memmap_input",
                "check_n_features_in_after_fitting",
                "check_fit2d_1feature",
            ],
            "these checks fit on 10-21 samples: a forward fold's training months (3-7) are "
            "too few for NonLinCFA's own CV inside them, and fit refuses naming cv",
        ),
    },
}


@parametrize_with_checks(
    [
        LinCFA(random_state=0),
        NonLinCFA(cv=3),
        GenLinCFA(),
        GenLinCFACV(n_splits=2, epsilons=(0.5, 0.8)),
        NonLinCFACV(n_splits=2, cv=2, epsilons=(1e-3,)),
        RegionsCV(neighbors=None, n_splits=2),
        GBMAPKNeighborsRegressor(3, n_boosts=3, random_state=0),
        GBMAPKNeighborsClassifier(3, n_boosts=3, random_state=0),
        RegionsCV().regressor(),
        LabelledRegressor(LinearRegression()),
    ],
    expected_failed_checks=lambda est: EXPECTED_FAILED.get(type(est).__name__, {}),
)
def test_sklearn_compatible(estimator, check):
    check(estimator)

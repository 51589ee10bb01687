"""A map does not depend on the field's units, and units it would depend on are refused.

The rules multiply two columns' sums of squares (about n^2 x^4), which leave float64's range
for values beyond about 1e+-75: a field at 1e-100 or 1e+75 gave another map than the same
field at 1, without a word. Columns outside ``SCALE_RANGE`` are now excluded by name, and a
field all outside is refused; inside it, the map is the same.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dcfa
from dcfa import NothingToFitError
from dcfa.datasets import make_regions_field
from dcfa.stats.summary import SCALE_RANGE

ESTIMATORS = {
    "LinCFA": lambda: dcfa.LinCFA(neighbors=1, random_state=0),
    "GenLinCFA": lambda: dcfa.GenLinCFA(neighbors=1),
    "NonLinCFA": lambda: dcfa.NonLinCFA(neighbors=1, random_state=0),
    "RegionsCV": lambda: dcfa.RegionsCV(neighbors=1),
    "GenLinCFACV": lambda: dcfa.GenLinCFACV(neighbors=1, epsilons=[0.6, 0.8]),
}


@pytest.fixture(scope="module")
def field():
    ds = make_regions_field(240, (8, 12), 6, seed=11)
    return ds["field"].load().astype("f8"), ds["target"].load()


@pytest.mark.parametrize("name", ESTIMATORS)
def test_the_map_is_the_same_in_any_units_inside_the_range(field, name):
    X, y = field
    reference = ESTIMATORS[name]().fit(X, y).labels_
    # powers of two scale every sum exactly: a different map is the code's, not rounding's
    for factor in (2.0**-166, 2.0**166):  # about 1e-50 and 1e50
        assert SCALE_RANGE[0] < factor * 280 < SCALE_RANGE[1]
        got = ESTIMATORS[name]().fit(X * factor, y).labels_
        np.testing.assert_array_equal(got, reference, err_msg=f"{name} at {factor:.3g}")


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("factor", [1e-160, 1e-70, 1e70, 1e160])
# NumPy may say that the huge fields' products overflowed on the way: what is asserted is the
# refusal that follows, by name
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_field_outside_the_range_is_refused_by_name(field, name, factor):
    X, y = field
    with pytest.raises(
        NothingToFitError,
        match="X: every one of the .* features was excluded \\(.* features: .*values of ",
    ):
        ESTIMATORS[name]().fit(X * factor, y)


def test_columns_outside_the_range_are_excluded_with_their_reason_on_dask(field):
    X, y = field
    values = X.values.reshape(X.shape[0], -1).copy()
    values[:, :5] *= 1e-100  # five cells in another unit
    est = dcfa.GenLinCFA(neighbors=None).fit(da.from_array(values, chunks=(60, 32)), y.values)
    assert list(est.excluded_)[:5] == [0, 1, 2, 3, 4]
    reason = est.excluded_[0]
    assert reason.code == "scale" and "(multiply by 1e+98)" in reason, reason
    assert all(est.labels_[:5] == -1) and (est.labels_[5:] >= 0).all()

"""Bad input fails fast, before any pass over the data, naming the argument."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import count_computes

import dcfa
from dcfa import LinCFA, RegionsCV
from dcfa._errors import InputError
from dcfa.datasets import make_regions_field
from dcfa.gbmap import GBMAPRegressor, embedding_distance, knn_mean
from dcfa.gbmap.datasets import make_synth_cos
from dcfa.geo import group_circular_mean
from dcfa.neighbors import periodic_dims
from dcfa.plot import plot_regions


@pytest.fixture
def data(rng):
    return rng.normal(size=(30, 4)), rng.normal(size=30)


def lazy(X):
    return da.from_array(X, chunks=(10, 2))


@pytest.mark.parametrize(
    "make, err, match",
    [
        (lambda X, y: (X, y[:-1]), ValueError, "y: X has 30 samples but y has 29"),
        (lambda X, y: (X[:, 0], y), ValueError, "X: expected a 2-D array"),
        (lambda X, y: (X.astype(str), y), TypeError, "X: expected a numeric dtype"),
        (lambda X, y: (X.astype(complex), y), ValueError, "X: Complex data not supported"),
        (
            lambda X, y: (X, np.where(np.arange(30) == 3, np.nan, y)),
            ValueError,
            "y: contains 1 NaN",
        ),
        (lambda X, y: (X, np.ones(30)), ValueError, "y: the target is constant"),
        (lambda X, y: (X, y * 1e300), ValueError, r"y: values up to .*e\+300 overflow float64"),
        (lambda X, y: (X, y.astype(str)), TypeError, "y: expected a numeric dtype"),
        (lambda X, y: (X, y.astype(object)), None, None),
        (lambda X, y: (X[:3], y[:3]), ValueError, "X: expected at least 4 samples"),
        (lambda X, y: (X, None), ValueError, "y: a target is required"),
        (lambda X, y: (X, np.column_stack([y, y])), ValueError, "y: expected a single target"),
        (lambda X, y: (X.reshape(30, 2, 2), y), ValueError, "use an xarray.DataArray"),
    ],
)
def test_bad_input_is_rejected_before_the_pass(data, make, err, match):
    X, y = make(*data)
    X = lazy(X) if X.dtype.kind == "f" and X.ndim == 2 else X
    if err is None:  # numbers in an object array are numbers
        LinCFA().fit(X, y)
        return
    with count_computes(0), pytest.raises(err, match=match):
        LinCFA().fit(X, y)


@pytest.mark.parametrize(
    "make",
    [
        lambda: dcfa.LinCFA(random_state=0),
        lambda: dcfa.GenLinCFA(),
        lambda: dcfa.GenLinCFA(family="bernoulli"),
        lambda: dcfa.RegionsCV(neighbors=None),
        lambda: dcfa.GBMAPRegressor(n_boosts=2, random_state=0),
    ],
)
def test_a_column_vector_y_warns_as_scikit_learn_does(data, make):
    """The CFA estimators took y of shape (n, 1) silently; scikit-learn's single-output
    estimators, and dcfa's GBMAP, warn. The fit is the 1-D one."""
    from sklearn.exceptions import DataConversionWarning

    X, y = data
    y = (y > 0).astype(float) if "bernoulli" in repr(make()) else y
    with pytest.warns(DataConversionWarning, match="A column-vector y was passed"):
        column = make().fit(X, y[:, None])
    flat = make().fit(X, y)
    np.testing.assert_array_equal(column.transform(X), flat.transform(X))


def test_xarray_without_the_sample_dim(data):
    X, y = data
    field = xr.DataArray(X, dims=("t", "cell"))
    with pytest.raises(
        InputError, match=r"X: the sample dim 'time' is not among the dims \('t', 'cell'\)"
    ):
        LinCFA().fit(field, y)
    with pytest.raises(InputError, match="X: expected a sample dim and at least one feature dim"):
        LinCFA().fit(xr.DataArray(X[:, 0], dims="time"), y)


def test_xarray_target_on_other_times(data):
    X, y = data
    field = xr.DataArray(X, dims=("time", "cell"), coords={"time": np.arange(30)})
    target = xr.DataArray(y, dims="time", coords={"time": np.arange(1, 31)})
    with pytest.raises(ValueError, match="y: its 'time' coordinate differs from X's"):
        LinCFA().fit(field, target)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(compare="group"), "compare"),
        (dict(scan="twice"), "scan"),
        (dict(strategy="best"), "strategy"),
        (dict(missing="zero"), "missing"),
        (dict(neighbors=0), "neighbors"),
        (dict(shuffle="yes"), "shuffle"),
    ],
)
def test_bad_parameters(data, params, match):
    X, y = data
    with count_computes(0), pytest.raises(ValueError, match=match):
        LinCFA(**params).fit(lazy(X), y)


def test_transform_checks_the_feature_count(data):
    X, y = data
    model = LinCFA().fit(X, y)
    with pytest.raises(
        ValueError, match="X has 3 features, but LinCFA is expecting 4 features as input"
    ):
        model.transform(X[:, :3])


@pytest.mark.parametrize(
    "make",
    [
        lambda: LinCFA(random_state=0),
        lambda: dcfa.GenLinCFA(),
        lambda: dcfa.GBMAPRegressor(n_boosts=1, random_state=0),
    ],
    ids=["LinCFA", "GenLinCFA", "GBMAPRegressor"],
)
def test_a_dated_target_is_checked_against_a_dataframes_dates(make):
    """With a DataFrame X on a DatetimeIndex, a date-indexed y reversed or shifted by 3
    months was paired by position without a word (GBMAP's R^2 -0.54); a DataArray X already
    refused it."""
    import pandas as pd

    idx = pd.date_range("2000-01-01", periods=60, freq="MS")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(60, 4)), index=idx, columns=list("abcd"))
    y = pd.Series(X["a"].to_numpy() + 0.1 * rng.normal(size=60), index=idx)
    refused = r"^y: the dates of its index differ from X's; pair them by date first"
    with count_computes(0):
        for other in (y[::-1], y.shift(3, freq="MS"), y.iloc[:-1]):
            with pytest.raises(ValueError, match=refused):
                make().fit(X, other)
    model = make().fit(X, y)  # the same dates: fitted
    make().fit(X, y.to_numpy())  # no dates: by position, as scikit-learn pairs them
    make().fit(X.reset_index(drop=True), y)  # X without dates: by position
    # a DataArray target beside a DataFrame X: by position, as before the check
    make().fit(X, xr.DataArray(y.to_numpy(), dims="time", coords={"time": idx}))
    if hasattr(model, "score"):
        with pytest.raises(ValueError, match=refused):
            model.score(X, y[::-1])
        assert np.isfinite(model.score(X, y))


@pytest.mark.parametrize(
    "make",
    [
        lambda: dcfa.GenLinCFA(neighbors=1),
        lambda: dcfa.RegionsCV(neighbors=1, n_splits=3),
        lambda: dcfa.GBMAPRegressor(n_boosts=2, random_state=0),
    ],
    ids=["GenLinCFA", "RegionsCV", "GBMAPRegressor"],
)
def test_a_target_read_with_a_named_date_index_is_paired_by_date(make):
    """``pd.read_csv(..., index_col="date")`` names the index "date"; with a gridded X on a
    'time' coordinate the fit raised xarray's "coordinate time has dimensions ('date',)"."""
    import pandas as pd

    idx = pd.date_range("2000-01-01", periods=72, freq="MS")
    rng = np.random.default_rng(1)
    grid = {"time": idx, "lat": [0.0, 1.0, 2.0], "lon": [0.0, 1.0, 2.0, 3.0]}
    X = xr.DataArray(rng.normal(size=(72, 3, 4)), dims=("time", "lat", "lon"), coords=grid)
    flow = X.isel(lat=0, lon=0).values + 0.1 * rng.normal(size=72)
    # a name changes nothing, on dates in UTC too (kept as pandas has them, not as objects)
    for dates in (idx, idx.tz_localize("UTC")):
        named = pd.Series(flow, index=pd.Index(dates, name="date"), name="flow")
        assert named.index.name == "date"
        unnamed = pd.Series(flow, index=dates)
        fitted, reference = make().fit(X, named), make().fit(X, unnamed)
        np.testing.assert_allclose(
            np.asarray(fitted.transform(X)), np.asarray(reference.transform(X))
        )
    # refused in the user's terms: the index, by its name; a shifted index in a time zone
    # differs (it was said to be "on different calendars")
    differs = r"^y: the dates of its index \('date'\) differ from X's 'time' coordinate; align"
    shifted = pd.Series(flow, index=pd.Index(idx, name="date")).shift(3, freq="MS")
    for y in (shifted, shifted.tz_localize("UTC")):
        with pytest.raises(ValueError, match=differs):
            make().fit(X, y)
    # the same instants in another zone are X's dates; the same wall-clock months are not
    sydney = pd.Series(flow, index=idx.tz_localize("UTC").tz_convert("Australia/Sydney"))
    make().fit(X, sydney)
    with pytest.raises(ValueError, match=r"^y: the dates of its index differ from X's 'time'"):
        make().fit(X, pd.Series(flow, index=idx.tz_localize("Australia/Sydney")))


def test_repeated_dates_are_named_as_duplicates_not_as_disorder():
    """A month given twice was refused with "labels are not increasing ... sort them first",
    which sorting does not fix."""
    import pandas as pd

    from dcfa._validation import check_time_order

    dates = pd.date_range("2000-01-01", periods=6, freq="MS").to_numpy()
    repeated = np.insert(dates, 3, dates[2])
    repeat = r"^X: its 'time' labels repeat 2000-03-01 \(samples 2 and 3\); "
    once = r"the folds take each sample once, in time order: "
    drop = r"drop the duplicates first \(X.drop_duplicates\('time'\), and y with it\)"
    with pytest.raises(ValueError, match=repeat + once + drop):
        check_time_order(repeated, "time", why="the folds")
    with pytest.raises(ValueError, match=r"labels are not increasing .* sort them first"):
        check_time_order(dates[::-1], "time", why="the folds")
    check_time_order(dates, "time", why="the folds")


@pytest.mark.parametrize(
    "make",
    [lambda: dcfa.GenLinCFA(neighbors=1), lambda: dcfa.GBMAPRegressor(n_boosts=1, random_state=0)],
    ids=["GenLinCFA", "GBMAPRegressor"],
)
def test_an_unlabelled_array_after_a_labelled_fit_is_warned_as_scikit_learn_does(rng, make):
    """A grid's cells in another order, flattened, were taken without a word."""
    import warnings

    X = xr.DataArray(
        rng.normal(size=(40, 3, 4)),
        dims=("time", "lat", "lon"),
        coords={"lat": [0.0, 1.0, 2.0], "lon": [10.0, 11.0, 12.0, 13.0]},
    )
    y = X.values[:, 0, 0] + 0.1 * rng.normal(size=40)
    model = make().fit(X, y)
    method = model.transform if hasattr(model, "labels_") else model.predict
    flipped = X.isel(lat=slice(None, None, -1))
    with pytest.warns(
        UserWarning, match=r"X \(ndarray\) has no labels, but .*\('lat', 'lon'\) flattened"
    ):
        bare = method(flipped.values.reshape(40, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        by_label = method(flipped)  # matched by label: the fitted result, no warning
        plain = make()
        if hasattr(plain, "neighbors"):
            plain.set_params(neighbors=None)  # a radius needs the grid
        plain.fit(X.values.reshape(40, -1), y)  # fitted on an array: nothing to say
        (plain.transform if hasattr(plain, "labels_") else plain.predict)(X.values.reshape(40, -1))
    np.testing.assert_allclose(np.asarray(by_label), np.asarray(method(X)))
    assert not np.allclose(np.asarray(bare), np.asarray(by_label))


@pytest.mark.parametrize("make", [lambda: LinCFA(random_state=0), lambda: RegionsCV(n_splits=3)])
def test_a_field_in_other_units_than_the_fit_is_refused(make):
    """RegionsCV fitted on degC took a field in K in transform, where Anomalies and a
    loaded result refuse it: its regions' means were 273 K off the ones it was fitted on."""
    ds = make_regions_field(120, (8, 12), 6, seed=3)
    X, y = ds.field.compute(), ds.target.compute()
    X.attrs["units"] = "degC"
    model = make().fit(X, y)
    kelvin = X + 273.15
    kelvin.attrs["units"] = "K"
    with pytest.raises(InputError, match=rf"^X: its units 'K' differ from the training data's "
                       rf"'degC'; {type(model).__name__} was fitted in 'degC' and dcfa converts "
                       r"no units: convert X first"):  # fmt: skip
        model.transform(kelvin)
    spelled = X.assign_attrs(units="degree_Celsius")  # the same unit: the same features
    np.testing.assert_array_equal(model.transform(spelled).values, model.transform(X).values)
    unknown = X.copy()
    del unknown.attrs["units"]  # nothing to compare: taken as it is, and said
    with pytest.warns(UserWarning, match=r"^X: no units attribute, where the training data's"):
        np.testing.assert_array_equal(model.transform(unknown).values, model.transform(X).values)


# A bad argument to each public function outside the estimators' own checks (a function of
# the fitted context below), and the start of the message that names it.
_BAD_CALLS = {
    "feature count": (lambda c: c.gbmap.predict(c.X[:, :2]), "X has 2 features"),
    "NaN features": (lambda c: c.gbmap.predict(np.where(c.X > 2, np.nan, c.X)), "X: contains NaN"),
    "unpaired rows": (lambda c: c.gbmap.path_distance(c.X, c.X[:5]), "X and Y: expected paired"),
    "1-D embedding": (lambda c: embedding_distance(c.X[:, 0], c.X), "A: expected a 2-D"),
    "embedding widths": (lambda c: embedding_distance(c.X, c.X[:, :2]), "A and B: different"),
    "kNN columns": (lambda c: knn_mean(c.X, c.X[:, :2], c.y, 3), "query and train: different"),
    "kNN values": (lambda c: knn_mean(c.X, c.X, c.y[:5], 3), r"values: expected shape \(40,\)"),
    "samples": (lambda c: make_synth_cos(0, 3), "n: expected an int >= 1"),
    "circular mean": (lambda c: group_circular_mean([0, 1], [10.0], 2), "labels, lon, weights"),
    "periodic": (lambda c: periodic_dims(c.flat, periodic=True), "periodic=True: no longitude"),
    "transform": (lambda c: dcfa.Anomalies().set_output(transform="arrow"), "transform:"),
    "map of a table": (lambda c: plot_regions(np.zeros((3, 4))), "region: expected an xarray"),
    "map on no grid": (lambda c: plot_regions(c.flat.isel(y=0)), "region: expected a 2-D"),
}


@pytest.fixture(scope="module")
def fitted():
    from types import SimpleNamespace

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    gbmap = GBMAPRegressor(n_boosts=2, random_state=0).fit(X, y)
    return SimpleNamespace(
        X=X, y=y, gbmap=gbmap, flat=xr.DataArray(np.zeros((3, 4)), dims=("y", "x"))
    )


@pytest.mark.parametrize("case", list(_BAD_CALLS))
def test_bad_arguments_raise_input_error_naming_them(case, fitted):
    """Each is dcfa.InputError (a ValueError, a TypeError for a wrong type), as every input
    check of dcfa is, so that a job exits 2 with the message rather than 1 as for a bug."""
    call, message = _BAD_CALLS[case]
    with pytest.raises(InputError, match=f"^{message}"):
        call(fitted)

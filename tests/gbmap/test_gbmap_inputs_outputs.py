"""GBMAP as a user meets it: the attrs of xarray outputs, checkpoints of other targets or
another f0, and errors that name the argument at fault (before any fit)."""

from __future__ import annotations

import json
import warnings

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from conftest import count_computes
from sklearn.linear_model import LinearRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from dcfa.gbmap import (
    GBMAPClassifier,
    GBMAPKNeighborsClassifier,
    GBMAPKNeighborsRegressor,
    GBMAPRegressor,
    drift_experiment,
    drift_score,
    embedding_distance,
    euclid_drift_score,
    knn_mean,
)
from dcfa.gbmap._checkpoint import CHECKPOINT_FILE
from dcfa.gbmap.datasets import make_synth_cos

FITTED = ("coef_", "bias_", "intercept_", "signs_", "mean_", "scale_", "train_loss_")


def bumpy(rng, n=200, p=4):
    """A nonlinear target (|x0| plus a step in x1) that needs more than one learner."""
    X = rng.normal(size=(n, p))
    y = np.abs(X[:, 0]) + 0.5 * np.maximum(X[:, 1], 0) + 0.1 * rng.normal(size=n)
    return X, y


def assert_same_model(a, b, atol=0.0):
    for name in FITTED:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), atol=atol, err_msg=name)


def sst_field(X, units="K"):
    n = X.shape[0]
    time = pd.date_range("2000-01-01", periods=n, freq="MS")
    return xr.DataArray(
        X.reshape(n, 2, -1),
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": [10.0, 20.0], "lon": np.arange(X.shape[1] // 2) * 1.0},
        attrs={"units": units, "long_name": "sea surface temperature"},
        name="sst",
    )


############################################################################################
# attrs of xarray outputs: never X's


@pytest.mark.parametrize("chunks", [None, 50])
def test_xarray_outputs_carry_the_target_units_not_those_of_x(rng, chunks):
    """The embedding, prediction and drift score are in the target's units (Eq. 5: they sum
    to the prediction); the class probabilities are dimensionless. None keeps X's "K"."""
    X, y = bumpy(rng, p=6)
    field = sst_field(X)
    data = field if chunks is None else field.chunk({"time": chunks})
    target = xr.DataArray(
        y, dims="time", coords={"time": field["time"]}, attrs={"units": "mm day-1"}
    )
    for model in (
        GBMAPRegressor(n_boosts=2, random_state=0),
        GBMAPKNeighborsRegressor(3, n_boosts=2, random_state=0),
    ):
        model.fit(data, target)
        outputs = [model.transform(data), model.predict(data), model.drift_score(data)]
        for out in outputs:
            assert out.attrs.get("units") == "mm day-1", (type(model).__name__, out.name)
            assert "sea surface temperature" not in out.attrs.values()
    # only the attrs changed: the values are those of a fit on plain arrays
    ref = GBMAPRegressor(n_boosts=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(model.transform(data).values, ref.transform(X), atol=1e-12)
    np.testing.assert_allclose(
        model.transform(data).sum("boost") + model.y_mean_, ref.predict(X), atol=1e-12
    )
    # a target without units: no units at all, rather than X's
    plain = GBMAPRegressor(n_boosts=2, random_state=0).fit(data, y)
    for out in (plain.transform(data), plain.predict(data), plain.drift_score(data)):
        assert "units" not in out.attrs, out.name
    labels = target > target.median()
    for model in (
        GBMAPClassifier(n_boosts=2, random_state=0),
        GBMAPKNeighborsClassifier(3, n_boosts=2, random_state=0),
    ):
        model.fit(data, labels)
        P = model.predict_proba(data)
        assert P.attrs.get("units") == "1", type(model).__name__
        np.testing.assert_allclose(P.sum("class").values, 1.0)
        others = [model.transform(data)]
        if isinstance(model, GBMAPClassifier):
            others += [model.predict_log_proba(data), model.decision_function(data)]
        for out in others:  # logits and log-probabilities: not kelvin
            assert out.attrs.get("units") != "K", out.name


############################################################################################
# checkpoints: the fingerprint covers the target's values and a fitted f0


def test_checkpoint_of_other_labels_or_another_f0_is_refused(rng, tmp_path):
    """Same X, same parameters, but other labels (another threshold), a permuted target or
    another fitted f0: resuming would give the learners of another fit."""
    X, y = bumpy(rng)
    GBMAPClassifier(n_boosts=2, random_state=0, checkpoint=tmp_path / "c").fit(X, y > 0.8)
    with pytest.raises(ValueError, match=r"checkpoint.*target: other values"):
        GBMAPClassifier(n_boosts=3, random_state=0, checkpoint=tmp_path / "c").fit(X, y > 1.2)
    GBMAPRegressor(n_boosts=2, random_state=0, checkpoint=tmp_path / "r").fit(X, y)
    with pytest.raises(ValueError, match=r"checkpoint.*target: other values"):
        GBMAPRegressor(n_boosts=3, random_state=0, checkpoint=tmp_path / "r").fit(X, y[::-1])
    ols = LinearRegression().fit(X, y)
    params = dict(random_state=0, checkpoint=tmp_path / "f")
    GBMAPRegressor(n_boosts=2, f0=ols, **params).fit(X, y)
    other = LinearRegression().fit(X[:100], y[:100])
    with pytest.raises(ValueError, match=r"checkpoint.*f0: another fitted model"):
        GBMAPRegressor(n_boosts=3, f0=other, **params).fit(X, y)
    # the same data and model (here refitted: an unfitted f0) still resume
    resumed = GBMAPRegressor(n_boosts=3, f0=LinearRegression(), **params).fit(X, y)
    straight = GBMAPRegressor(n_boosts=3, random_state=0, f0=ols).fit(X, y)
    assert resumed.n_evals_ == straight.step_n_evals_[2:].sum()
    assert_same_model(resumed, straight)


def test_checkpoint_written_before_the_target_digest_still_resumes(rng, tmp_path):
    X, y = bumpy(rng)
    GBMAPRegressor(n_boosts=2, random_state=0, checkpoint=tmp_path).fit(X, y)
    path = tmp_path / CHECKPOINT_FILE
    with np.load(path) as f:
        stored = {k: f[k] for k in f.files}
    meta = json.loads(str(stored["meta"]))
    del meta["fingerprint"]["target_sha256"]  # as an older dcfa wrote it
    stored["meta"] = np.asarray(json.dumps(meta))
    with path.open("wb") as fh:
        np.savez(fh, **stored)
    resumed = GBMAPRegressor(n_boosts=3, random_state=0, checkpoint=tmp_path).fit(X, y)
    straight = GBMAPRegressor(n_boosts=3, random_state=0).fit(X, y)
    assert resumed.n_evals_ == straight.step_n_evals_[2:].sum()
    assert_same_model(resumed, straight)


############################################################################################
# errors name the argument at fault


def test_errors_name_the_argument_at_fault(rng):
    X, y = bumpy(rng, n=60)
    model = GBMAPRegressor(n_boosts=2, random_state=0).fit(X, y)
    bad = X.copy()
    bad[3, 1] = np.nan
    for Y in (X[:, :3], da.from_array(X[:, :3], chunks=20)):
        with pytest.raises(ValueError, match="^Y has 3 features"):
            model.embedding_distance(X, Y)
        with pytest.raises(ValueError, match="^Y has 3 features"):
            model.path_distance(X, Y)
    with pytest.raises(ValueError, match="^Y: contains NaN"):
        model.embedding_distance(X, bad)
    with pytest.raises(ValueError, match="^X has 3 features"):
        model.embedding_distance(X[:, :3], X)
    with pytest.raises(ValueError, match="^n_grid"):
        model.path_distance(X, X, n_grid=2.5)  # was silently 2
    with pytest.raises(TypeError, match="^standardized"):
        model.local_coef(X, standardized="no")  # was truthy: standardised
    E = model.transform(X)
    with pytest.raises(ValueError, match="^train_values: expected shape"):
        drift_score(E, E.sum(axis=1), E, y[:-1])
    with pytest.raises(ValueError, match="^embedding and train_embedding: different"):
        drift_score(E, E.sum(axis=1), E[:, :1], y)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_neighbors=0), "^n_neighbors"),
        (dict(feature=4), "^feature"),
        (dict(feature=1.5), "^feature"),
        (dict(feature=-5), "^feature"),
    ],
)
def test_drift_experiment_checks_its_arguments_before_any_fit(rng, kwargs, message):
    """``n_boosts=0`` would fail the first GBMAP fit: the error is about the argument at
    fault, so it was found before any fit (the old code fitted, or indexed, first)."""
    X, y = bumpy(rng, n=80)
    with pytest.raises(ValueError, match=message):
        drift_experiment(X, y, n_boosts=0, **kwargs)


def test_drift_experiment_counts_the_nan_of_x(rng):
    """Two NaN were reported as "220 NaN ... 2 of the 9 features have no finite value at
    all", with advice about land masks: the count of the standardised X."""
    X, y = bumpy(rng, n=80)
    X[0, 1] = X[5, 3] = np.nan
    with pytest.raises(ValueError, match=r"^X: contains 2 NaN or infinite values; the "):
        drift_experiment(X, y, n_boosts=0)


def test_drift_experiment_warns_once_of_switched_off_learners(rng):
    """Every candidate covariate's fit warned (8 warnings on friedman1), each pointing inside
    dcfa: now only the chosen fit's, at the caller's line."""
    import warnings

    from dcfa.gbmap import InactiveLearnersWarning

    X = rng.normal(size=(200, 4))
    y = X @ [1.0, -1.0, 0.5, 0.0] + 0.1 * rng.normal(size=200)  # linear: later steps idle
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drift_experiment(X, y, n_boosts=4, beta=1.0, max_iter=30, random_state=0)
    inactive = [w for w in caught if issubclass(w.category, InactiveLearnersWarning)]
    assert len(inactive) == 1
    assert inactive[0].filename == __file__


def test_drift_experiment_negative_feature_is_a_numpy_index(rng):
    X, y = bumpy(rng, n=80)
    last = drift_experiment(X, y, n_boosts=2, feature=-1, random_state=0)
    ref = drift_experiment(X, y, n_boosts=2, feature=3, random_state=0)
    assert last.feature == ref.feature == 3
    assert last.auc_gbmap == ref.auc_gbmap


@pytest.mark.parametrize("chunks", [None, 20])
def test_a_masked_grid_is_told_apart_from_missing_samples(rng, chunks):
    """Land cells of a sea-surface field are NaN in every sample: the error says which
    features (dropping "those samples" would drop them all), still after the one first pass."""
    X, y = bumpy(rng, n=60, p=6)
    X[:, 2] = np.nan  # a masked cell
    X[7, 4] = np.nan  # and one missing value
    field = sst_field(X)
    data = field if chunks is None else field.chunk({"time": chunks})
    with count_computes(1), pytest.raises(ValueError, match="X: contains 61 NaN") as err:
        GBMAPRegressor(n_boosts=1).fit(data, y)
    assert "1 of the 6 features have no finite value" in str(err.value)
    # a few missing values only: the advice stays about samples
    X[:, 2] = 0.0
    with pytest.raises(ValueError, match=r"contains 1 NaN.*drop those samples"):
        GBMAPRegressor(n_boosts=1).fit(sst_field(X), y)


############################################################################################
# the public drift functions on transform's output: a Dask-backed DataArray stays lazy


def test_public_functions_keep_a_dask_backed_dataarray_lazy(rng):
    """``transform`` of a chunked field is a DataArray holding a Dask array: the functions
    that take embeddings (documented "lazy if any input is a Dask array") must not compute
    it (``np.asarray`` did: an (n, n) distance matrix in memory)."""
    X, y = bumpy(rng, n=90, p=6)
    field = sst_field(X).chunk({"time": 30})
    model = GBMAPRegressor(n_boosts=2, random_state=0).fit(field, y)
    E, P = model.transform(field), model.predict(field)
    Z = field.stack(cell=("lat", "lon"))
    with count_computes(0):
        lazy = {
            "distance": embedding_distance(E, E[:10]),
            "drift": drift_score(E, P, E, P),
            "knn": knn_mean(E, E, P, 3),
            "euclid": euclid_drift_score(Z, Z),
        }
    assert isinstance(lazy.pop("distance"), da.Array)
    for name, out in lazy.items():  # one value per row of a DataArray: a DataArray
        assert isinstance(out, xr.DataArray) and isinstance(out.data, da.Array), name
        assert out.dims == ("time",), name
        np.testing.assert_array_equal(out["time"].values, field["time"].values)
    En, Pn, Zn = E.values, P.values, Z.values  # the same functions on NumPy
    np.testing.assert_allclose(
        embedding_distance(E, E[:10]).compute(), embedding_distance(En, En[:10])
    )
    np.testing.assert_allclose(lazy["drift"].values, drift_score(En, Pn, En, Pn))
    np.testing.assert_allclose(lazy["knn"].values, knn_mean(En, En, Pn, 3))
    np.testing.assert_allclose(lazy["euclid"].values, euclid_drift_score(Zn, Zn))
    assert isinstance(euclid_drift_score(Zn, Zn), np.ndarray)  # NumPy in, NumPy out


def test_the_embedding_and_path_distance_are_labelled_as_the_paper_writes_them(rng):
    """``boost`` is labelled 1 to m, as the learners f_1 ... f_m: ``E.sel(boost=1)`` is the
    first learner's output, the one fitted first (it alone is the one-step model). The path
    distance of a DataArray is a DataArray over its samples, in the target's units."""
    X, y = bumpy(rng, n=90, p=6)
    field = sst_field(X)
    target = xr.DataArray(y, dims="time", coords={"time": field["time"]}, attrs={"units": "mm"})
    model = GBMAPRegressor(n_boosts=3, random_state=0).fit(field, target)
    E = model.transform(field)
    np.testing.assert_array_equal(E["boost"].values, [1, 2, 3])
    one_step = GBMAPRegressor(n_boosts=1, random_state=0).fit(X, y)
    np.testing.assert_allclose(E.sel(boost=1).values, one_step.transform(X)[:, 0], atol=1e-12)
    later = field.roll(time=1, roll_coords=False)  # each month paired with the one before
    d = model.path_distance(field, later)
    assert isinstance(d, xr.DataArray) and d.dims == ("time",)
    np.testing.assert_array_equal(d["time"].values, field["time"].values)
    assert d.attrs["units"] == "mm"
    flat = later.stack(cell=("lat", "lon")).values
    np.testing.assert_allclose(d.values, model.path_distance(X, flat))
    lazy = model.path_distance(field.chunk({"time": 30}), later)
    assert isinstance(lazy.data, da.Array)
    np.testing.assert_allclose(lazy.values, d.values)


def test_a_missing_string_label_is_reported_as_such(rng):
    X, y = bumpy(rng, n=60)
    labels = np.where(y > 0.8, "wet", "dry").astype(object)
    labels[5] = None
    with pytest.raises(ValueError, match=r"^y: labels of mixed types.*\(None\)"):
        GBMAPClassifier(n_boosts=1).fit(X, labels)


@pytest.mark.parametrize("kwargs", [dict(chunks=0), dict(chunks=-5), dict(chunks=2.5)])
def test_make_synth_cos_checks_chunks(kwargs):
    with pytest.raises(ValueError, match="^chunks: expected an int >= 1"):
        make_synth_cos(10, 3, **kwargs)
    X, y = make_synth_cos(10, 3, chunks=4)  # the valid case, for reference
    assert X.chunks == ((4, 4, 2), (3,)) and y.shape == (10,)


@pytest.mark.parametrize("chunks", [None, 7])
def test_make_synth_cos_returns_the_direction_of_its_target(chunks):
    X, y, u = make_synth_cos(30, 4, alpha=2.0, random_state=3, chunks=chunks, coef=True)
    X, y = np.asarray(X), np.asarray(y)
    raw = 2.0 * np.cos(X) @ u  # the recipe, in NumPy
    np.testing.assert_allclose(y, raw - raw.mean(), rtol=1e-12, atol=1e-12)
    assert u.shape == (4,) and np.isclose(u @ u, 1.0)
    X2, y2 = make_synth_cos(30, 4, alpha=2.0, random_state=3, chunks=chunks)
    np.testing.assert_array_equal(np.asarray(X2), X)  # coef changes nothing else
    Xc, yc, uc = make_synth_cos(30, 4, task="classification", random_state=3, coef=True)
    np.testing.assert_array_equal(uc, u)  # the direction is the data seed's, for either task


def test_a_checkpoint_path_that_cannot_be_a_directory_fails_before_any_pass(rng, tmp_path):
    X, y = bumpy(rng, n=60)
    afile = tmp_path / "not_a_directory"
    afile.write_text("")
    with count_computes(0), pytest.raises(ValueError, match="^checkpoint: .*not_a_directory"):
        GBMAPRegressor(n_boosts=2, checkpoint=afile).fit(da.from_array(X, chunks=20), y)
    # a damaged checkpoint file is named as such (the batch job then discards it)
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / CHECKPOINT_FILE).write_bytes(b"half a zip")
    with pytest.raises(ValueError, match="^checkpoint: .* cannot be read"):
        GBMAPRegressor(n_boosts=2, checkpoint=tmp_path / "damaged").fit(X, y)


def test_a_nan_row_of_a_lazy_x_gets_no_neighbours_mean_and_no_label(rng):
    """In memory a NaN raises; a Dask X is checked only when computed. Its NaN row used to
    get the mean of the first k training rows (NaN distances sort last, ties by index) and
    the label classes_[0]: now NaN, as GBMAPRegressor.predict gives, and labels raise."""
    X, y = bumpy(rng, n=90)
    Q = X[:6].copy()
    Q[1, 2] = np.nan
    Qd = da.from_array(Q, chunks=3)
    ok = np.arange(6) != 1
    knn = GBMAPKNeighborsRegressor(3, n_boosts=2, random_state=0).fit(X, y)
    got = knn.predict(Qd).compute()
    assert np.isnan(got[1])
    np.testing.assert_allclose(got[ok], knn.predict(Q[ok]))
    boosted = GBMAPRegressor(n_boosts=2, random_state=0).fit(X, y).predict(Qd).compute()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(boosted))  # the same rows are NaN
    for model in (
        GBMAPKNeighborsClassifier(3, n_boosts=2, random_state=0).fit(X, y > 0.8),
        GBMAPClassifier(n_boosts=2, random_state=0).fit(X, y > 0.8),
    ):
        P = model.predict_proba(Qd).compute()
        assert np.isnan(P[1]).all() and np.isfinite(P[ok]).all(), type(model).__name__
        with pytest.raises(ValueError, match="X: contains NaN"):
            model.predict(Qd).compute()
        np.testing.assert_array_equal(model.predict(Qd[2:]).compute(), model.predict(Q[2:]))


def test_score_matches_a_dataarray_target_by_its_dates_as_fit_does(rng):
    """fit refuses a target whose dates differ from X's; score compared it row by row (R^2
    -0.5 for a good model given the same target in reverse order)."""
    X, y = bumpy(rng, n=120, p=6)
    field = sst_field(X)
    target = xr.DataArray(y, dims="time", coords={"time": field["time"]})
    reversed_dates = target.isel(time=slice(None, None, -1))
    for model, t in (
        (GBMAPRegressor(n_boosts=3, random_state=0), target),
        (GBMAPKNeighborsClassifier(3, n_boosts=3, random_state=0), target > 0.8),
    ):
        model.fit(field, t)
        with pytest.warns(UserWarning, match=r"X \(ndarray\) has no labels"):
            ref = model.score(X, t.values)  # scikit-learn's score on plain arrays
        assert model.score(field, t) == ref
        dates = field["time"].to_index()
        in_reverse = (t.isel(time=slice(None, None, -1)), pd.Series(t.values, dates).iloc[::-1])
        for bad in in_reverse:
            with pytest.raises(
                ValueError, match="y: (its 'time' coordinate|the dates of its index)"
            ):
                model.score(field, bad)
    with pytest.raises(ValueError, match="y: its 'time' coordinate differs"):
        GBMAPRegressor(n_boosts=1).fit(field, reversed_dates)  # what fit always did


@parametrize_with_checks(
    [
        GBMAPKNeighborsRegressor(3, n_boosts=2, random_state=0),
        GBMAPKNeighborsClassifier(3, n_boosts=2, random_state=0),
    ]
)
def test_knn_estimators_are_sklearn_compatible(estimator, check):
    """The kNN estimators share the code changed here (score, labels, outputs); the suite's
    scikit-learn checks cover the regressor and classifier only."""
    check(estimator)


def test_a_wide_field_with_land_gets_the_land_error_without_the_features_warning(rng):
    """A field of more cells than samples, some of them land: the error about the land, not
    first a warning counting the land cells as features."""
    X, y = bumpy(rng, n=20, p=30)
    X[:, :5] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="5 of the 30 features have no finite value"):
            GBMAPRegressor(n_boosts=1).fit(sst_field(X), y)
    with pytest.warns(UserWarning, match="25 features for 20 samples"):
        GBMAPRegressor(n_boosts=1).fit(X[:, 5:], y)


def test_a_target_table_with_its_dates_or_a_dataset_names_what_to_select(rng):
    """``y.to_dataframe()`` of a lead target keeps its ``target_time`` column of dates;
    a Dataset is not one target either."""
    X, y = bumpy(rng, n=60, p=4)
    target = xr.DataArray(y, dims="time", name="rain").assign_coords(
        target_time=("time", pd.date_range("2000-04-01", periods=60, freq="MS"))
    )
    with pytest.raises(TypeError, match=r"^y: the DataFrame's column\(s\) \['target_time'\] "
                       r"are not numbers; select the target's column \(y\['rain'\]\)"):  # fmt: skip
        GBMAPRegressor(n_boosts=1).fit(X, target.to_dataframe())
    with pytest.raises(TypeError, match=r"^y: got an xarray.Dataset; select one variable"):
        GBMAPRegressor(n_boosts=1).fit(X, target.to_dataset())


def test_outputs_along_the_samples_keep_the_fields_scalar_coordinates():
    """A field of one ensemble member, at one height: GBMAP's transform, predict and drift
    score, and a CFA estimator's transform, dropped its scalar coordinates (its local_coef
    kept them), so the outputs of two members could not be told apart."""
    import dcfa

    rng = np.random.default_rng(0)
    time = pd.date_range("2000-01-01", periods=120, freq="MS")
    X = xr.DataArray(rng.normal(size=(120, 2, 3)), dims=("time", "lat", "lon"),
                     coords={"time": time, "lat": [0.0, 1.0], "lon": [10.0, 20.0, 30.0],
                             "member": "r1i1p1f1", "height": 2.0})  # fmt: skip
    y = xr.DataArray(np.abs(X.isel(lat=0, lon=0).values), dims="time", coords={"time": time})
    gbmap = GBMAPRegressor(n_boosts=2, random_state=0).fit(X, y)
    outputs = [gbmap.transform(X), gbmap.predict(X), gbmap.drift_score(X)]
    outputs.append(dcfa.LinCFA(random_state=0).fit(X, y).transform(X))
    for out in outputs:
        assert out.member.item() == "r1i1p1f1" and out.height.item() == 2.0, out.name
        np.testing.assert_array_equal(out.time.values, time.values)

"""GBMAP: kernels, Lemma 1, any input and chunking, one compute per pass (the runs of a step
in lockstep), checkpoints, drift, and the paper's SYNTH-COS and breast-cancer numbers (slow)."""

from __future__ import annotations

import os
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import count_computes, local_client
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from dcfa._compute import scheduler_workers
from dcfa.gbmap import (
    GBMAPClassifier,
    GBMAPRegressor,
    drift_score,
    embedding_distance,
    knn_mean,
)
from dcfa.gbmap import _rows as rows
from dcfa.gbmap import _solver as solver
from dcfa.gbmap._checkpoint import CHECKPOINT_FILE
from dcfa.gbmap._learners import Learners
from dcfa.gbmap._losses import (
    _BLOCK_ROWS,
    ACTIVATIONS,
    LOSSES,
    chunk_sums,
    chunk_sums_many,
    objective,
)
from dcfa.gbmap.datasets import make_synth_cos

FITTED = ("coef_", "bias_", "intercept_", "signs_", "mean_", "scale_", "train_loss_")


def bumpy(rng, n=240, p=4):
    """A nonlinear target (|x0| plus a step in x1) that needs more than one learner."""
    X = rng.normal(size=(n, p)) * np.arange(1, p + 1) + 10.0 * np.arange(p)
    Z = (X - X.mean(0)) / X.std(0)
    y = np.abs(Z[:, 0]) + 0.5 * np.maximum(Z[:, 1], 0) + 0.1 * rng.normal(size=n)
    return X, y


def assert_same_model(a, b, atol=1e-6):
    for name in FITTED:
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), atol=atol, err_msg=name)


############################################################################################
# kernels


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gradient_matches_finite_differences(rng, loss, activation, sign):
    n, p, beta, lam = 50, 3, 2.5, 0.3
    Z = rng.normal(size=(n, p))
    y = rng.normal(size=n) if loss == "squared" else rng.choice([-1.0, 1.0], n)
    F = rng.normal(size=n)
    theta = rng.normal(size=p + 2)

    def J(t):
        return objective(chunk_sums(Z, y, F, t, sign, beta, loss, activation), t, n, lam)

    value, grad = J(theta)
    eps = 1e-6
    numeric = [(J(theta + eps * e)[0] - J(theta - eps * e)[0]) / (2 * eps) for e in np.eye(p + 2)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    # the value is the mean loss plus lambda * mean(w_full ** 2), written out
    f = F + theta[0] + sign * _g(Z @ theta[1:-1] + theta[-1], beta, activation)
    mean_loss = np.mean((y - f) ** 2) if loss == "squared" else np.mean(np.log1p(np.exp(-y * f)))
    assert value == pytest.approx(mean_loss + lam * np.mean(theta[1:] ** 2), rel=1e-12)


def _g(u, beta, activation):
    return np.log1p(np.exp(beta * u)) / beta if activation == "softplus" else u


def test_chunk_sums_add_over_chunks(rng):
    """The map-reduce is exact: sums over row chunks equal the sum over all rows."""
    Z, y, F = rng.normal(size=(10_000, 4)), rng.normal(size=10_000), rng.normal(size=10_000)
    theta = rng.normal(size=6)
    whole = chunk_sums(Z, y, F, theta, -1.0, 3.0, "squared", "softplus")
    parts = sum(
        chunk_sums(Z[s : s + 777], y[s : s + 777], F[s : s + 777], theta, -1.0, 3.0)
        for s in range(0, 10_000, 777)
    )
    np.testing.assert_allclose(parts, whole, rtol=1e-12)


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_chunk_sums_of_several_learners_are_each_learners_own_bit_for_bit(rng, loss):
    """One pass for k learners gives each the numbers of a pass of its own, whatever the
    others (the lockstep fit relies on it), over several row blocks; a misaligned chunk (as
    deserialised from a Dask worker's message) gives the numbers of an aligned one."""
    n, p, beta = 2 * _BLOCK_ROWS + 123, 7, 10.0
    Z, F = rng.normal(size=(n, p)), rng.normal(size=n)
    y = rng.normal(size=n) if loss == "squared" else rng.choice([-1.0, 1.0], n)
    thetas = [rng.normal(size=p + 2) / 3 for _ in range(3)]
    pairs = [(thetas[0], 1.0), (thetas[1], -1.0), (thetas[0], -1.0), (thetas[2], 1.0)]
    alone = [chunk_sums(Z, y, F, t, b, beta, loss) for t, b in pairs]
    many = chunk_sums_many(Z, y, F, [t for t, _ in pairs], [b for _, b in pairs], beta, loss)
    assert many.shape == (4, p + 3)
    for got, ref in zip(many, alone, strict=True):
        np.testing.assert_array_equal(got, ref)
    assert not np.array_equal(alone[0], alone[2])  # the sign is not lost
    # any subset, in any order
    sub = chunk_sums_many(Z, y, F, [thetas[2], thetas[0]], [1.0, 1.0], beta, loss)
    np.testing.assert_array_equal(sub, np.stack([alone[3], alone[0]]))
    assert chunk_sums_many(Z, y, F, [], [], beta, loss).shape == (0, p + 3)
    raw = np.zeros(Z.nbytes + 8, dtype=np.uint8)
    misaligned = np.ndarray(Z.shape, np.float64, raw[3 : 3 + Z.nbytes].data)
    misaligned[:] = Z
    assert not misaligned.flags.aligned
    np.testing.assert_array_equal(chunk_sums(misaligned, y, F, *pairs[1], beta, loss), alone[1])


def test_softplus_and_logistic_are_stable():
    u = np.array([-1e4, -50.0, 0.0, 50.0, 1e4])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        g, dg = ACTIVATIONS["softplus"].value_and_derivative(u, 20.0)
        loss, dloss = LOSSES["logistic"].loss_and_gradient(np.ones(5), u)
    np.testing.assert_allclose(g, [0, 0, np.log(2) / 20, 50, 1e4], atol=1e-300)
    np.testing.assert_allclose(dg, [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(loss, [1e4, 50, np.log(2), 0, 0], atol=1e-20)
    np.testing.assert_allclose(dloss, [-1, -1, -0.5, 0, 0], atol=1e-20)


############################################################################################
# Lemma 1: without the nonlinearity the first learner is ridge / logistic regression


def _linear_data(rng, n=300, p=4):
    X = rng.normal(size=(n, p)) * [1.0, 2.0, 3.0, 4.0] + [1.0, -2.0, 5.0, 100.0]
    Z = (X - X.mean(0)) / X.std(0)  # GBMAP's standardisation (population std)
    return X, Z


def test_lemma1_identity_learner_is_ridge(rng):
    """With g(u) = u, step 1 minimises

        mean((y_s - a - b (Z w + c))**2) + lambda * (|w|^2 + c^2) / (p + 1)

    on the standardised target y_s = (y - y_mean) / y_scale. ``a`` is free and Z's columns are
    centred, so at the optimum c = 0 (its penalty pushes it to 0, ``a`` takes the mean) and
    b w is the ridge solution of sklearn's ``|y_s - Z v - v0|^2 + alpha |v|^2`` (divided by n)
    with alpha = n * lambda / (p + 1). Ridge is equivariant in y, so ``Ridge(alpha)`` on the
    raw y gives y_scale * b w and the same predictions.
    """
    X, Z = _linear_data(rng)
    n, p = Z.shape
    y = X @ [1.0, -0.5, 0.3, 0.2] + 2.0 * rng.normal(size=n) + 3.0
    lam = 0.5  # strong shrinkage, so a wrong penalty scaling is visible
    model = GBMAPRegressor(n_boosts=1, penalty=lam, tol=1e-10, max_iter=1000, random_state=0)
    model._activation = "identity"
    model.fit(X, y)
    ridge = Ridge(alpha=n * lam / (p + 1)).fit(Z, y)
    np.testing.assert_allclose(model.predict(X), ridge.predict(Z), atol=1e-3)
    np.testing.assert_allclose(
        model.signs_[0] * model.coef_[0] * model.y_scale_, ridge.coef_, rtol=1e-4
    )
    assert abs(model.bias_[0]) < 1e-4
    # the alternatives the scaling must be told apart from
    for alpha in (2 * n * lam / (p + 1), n * lam / p, n * lam):
        wrong = Ridge(alpha=alpha).fit(Z, y)
        assert np.abs(model.predict(X) - wrong.predict(Z)).max() > 0.01


def test_lemma1_identity_learner_is_logistic_regression(rng):
    """With g(u) = u and the logistic loss, step 1 minimises

        mean(log(1 + exp(-y (a + b (Z w + c))))) + lambda * (|w|^2 + c^2) / (p + 1);

    sklearn's LogisticRegression minimises ``C sum(log-loss) + |v|^2 / 2`` (intercept not
    penalised), i.e. ``mean(log-loss) + |v|^2 / (2 n C)``: C = (p + 1) / (2 n lambda).
    As for ridge, c = 0 at the optimum because ``a`` absorbs the constant.
    """
    X, Z = _linear_data(rng, n=400)
    n, p = Z.shape
    logit = Z @ [1.0, -1.0, 0.5, 0.0] + 0.3
    labels = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    lam = 0.05
    model = GBMAPClassifier(n_boosts=1, penalty=lam, tol=1e-10, max_iter=1000, random_state=0)
    model._activation = "identity"
    model.fit(X, labels)
    assert model.classes_.tolist() == ["no", "yes"]
    lr = LogisticRegression(C=(p + 1) / (2 * n * lam), tol=1e-12, max_iter=10_000).fit(Z, labels)
    np.testing.assert_allclose(model.decision_function(X), lr.decision_function(Z), atol=1e-3)
    np.testing.assert_allclose(model.signs_[0] * model.coef_[0], lr.coef_[0], rtol=1e-4)
    assert abs(model.bias_[0]) < 1e-4
    for C in (2 * (p + 1) / (2 * n * lam), p / (2 * n * lam), 1 / (2 * n * lam)):
        wrong = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(Z, labels)
        assert np.abs(model.decision_function(X) - wrong.decision_function(Z)).max() > 0.01


############################################################################################
# the estimators on any input


def test_regressor_learns_a_nonlinear_target_and_embedding_sums_to_predict(rng):
    X, y = bumpy(rng)
    model = GBMAPRegressor(n_boosts=6, beta=5.0, random_state=0).fit(X, y)
    linear = LinearRegression().fit(X, y).score(X, y)
    assert model.score(X, y) > linear + 0.3
    E = model.transform(X)
    assert E.shape == (240, 6)
    np.testing.assert_allclose(model.y_mean_ + E.sum(axis=1), model.predict(X), rtol=1e-12)
    assert model.coef_.shape == (6, 4) and set(np.unique(model.signs_)) <= {-1.0, 1.0}
    # the training loss can only go down along the boosting steps
    assert np.all(np.diff(model.train_loss_) <= 1e-12)


def test_regressor_undoes_the_target_standardisation(rng):
    X, y = bumpy(rng)
    a = GBMAPRegressor(n_boosts=3, beta=5.0, random_state=1).fit(X, y)
    b = GBMAPRegressor(n_boosts=3, beta=5.0, random_state=1).fit(X, 1000.0 * y + 1e6)
    np.testing.assert_allclose(b.predict(X), 1000.0 * a.predict(X) + 1e6, rtol=1e-9)
    assert_same_model(a, b, atol=1e-8)  # the learners see the same standardised problem


def test_classifier_takes_any_two_labels(rng):
    X, y = bumpy(rng)
    labels01 = (y > np.median(y)).astype(int)
    # the paper's penalty: this boundary of 240 rows is learnt to > 0.9 on the training rows
    a = GBMAPClassifier(n_boosts=3, beta=5.0, penalty=1e-3, random_state=0).fit(X, labels01)
    b = GBMAPClassifier(n_boosts=3, beta=5.0, penalty=1e-3, random_state=0).fit(
        X, np.where(labels01 == 1, "up", "down")
    )
    assert b.classes_.tolist() == ["down", "up"]
    assert_same_model(a, b, atol=0)
    assert (b.predict(X) == np.where(a.predict(X) == 1, "up", "down")).all()
    P = b.predict_proba(X)
    np.testing.assert_allclose(P.sum(1), 1.0)
    np.testing.assert_allclose(P[:, 1], 1 / (1 + np.exp(-b.decision_function(X))), rtol=1e-12)
    np.testing.assert_allclose(np.exp(b.predict_log_proba(X)), P, rtol=1e-9, atol=1e-15)
    assert a.score(X, labels01) > 0.9


def test_same_seed_same_model_other_seed_other_model(rng):
    X, y = bumpy(rng)
    a = GBMAPRegressor(n_boosts=2, random_state=3).fit(X, y)
    b = GBMAPRegressor(n_boosts=2, random_state=3).fit(X, y)
    c = GBMAPRegressor(n_boosts=2, random_state=4).fit(X, y)
    assert_same_model(a, b, atol=0)
    assert np.abs(a.coef_ - c.coef_).max() > 1e-3


def test_restarts_keep_the_best_start(rng):
    X, y = bumpy(rng)
    one = GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0).fit(X, y)
    four = GBMAPRegressor(n_boosts=1, beta=5.0, n_restarts=4, random_state=0).fit(X, y)
    assert four.train_loss_[0] <= one.train_loss_[0] + 1e-12
    assert four.n_evals_ > one.n_evals_


@pytest.mark.parametrize("chunks", [-1, 97, (50, 120, 70)])
@pytest.mark.parametrize("persist", [True, False])
def test_numpy_and_dask_give_the_same_model(rng, chunks, persist):
    X, y = bumpy(rng)
    ref = GBMAPRegressor(n_boosts=3, beta=5.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=(chunks, 2))  # column chunks are merged inside
    model = GBMAPRegressor(n_boosts=3, beta=5.0, random_state=0, persist=persist).fit(Xd, y)
    assert model.persisted_ is persist
    assert_same_model(model, ref)
    np.testing.assert_allclose(model.predict(Xd).compute(), ref.predict(X), atol=1e-6)
    clf = GBMAPClassifier(n_boosts=2, beta=5.0, random_state=0)
    labels = y > np.median(y)
    assert_same_model(clf.fit(Xd, labels), GBMAPClassifier(**clf.get_params()).fit(X, labels))


def test_standardisation_keeps_the_digits_of_large_offsets(rng):
    """Spread 1e-3 on an offset of 1.3e8 (exactly representable, so the offset data hold the
    same information): dask's own ``var`` loses 6 digits here, the shifted moments none."""
    X, y = bumpy(rng)
    X = np.round(X * 1e-3 * 2**20) / 2**20
    ref = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y)
    for data in (X + 2.0**27, da.from_array(X + 2.0**27, chunks=70)):
        model = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(data, y)
        np.testing.assert_allclose(model.scale_, X.std(0), rtol=1e-12)
        for name in ("coef_", "bias_", "intercept_", "signs_"):
            np.testing.assert_allclose(getattr(model, name), getattr(ref, name), atol=1e-6)
    constant = np.column_stack([X, np.full(len(X), 273.15)])
    model = GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0).fit(constant, y)
    assert model.scale_[-1] == 1.0 and np.isfinite(model.coef_).all()


def test_persist_auto_persists_small_data(rng):
    X, y = bumpy(rng, n=60)
    model = GBMAPRegressor(n_boosts=1, random_state=0).fit(da.from_array(X, chunks=30), y)
    assert model.persisted_ is True
    assert not rows.should_persist("auto", 10**12, 10**3)  # 8 PB never fits
    assert rows.should_persist(True, 10**12, 10**3) is True


def test_xarray_input_keeps_the_sample_coordinate(rng):
    X, y = bumpy(rng, n=120, p=6)
    time = np.arange("2000-01", "2010-01", dtype="datetime64[M]")
    field = xr.DataArray(
        X.reshape(120, 2, 3),
        dims=("time", "lat", "lon"),
        coords={"time": time, "lat": [10.0, 20.0], "lon": [0.0, 1.0, 2.0]},
    )
    target = xr.DataArray(y, dims="time", coords={"time": time})
    ref = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y)
    for data in (field, field.chunk({"time": 50})):
        model = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(data, target)
        assert_same_model(model, ref)
        with count_computes(0):
            E = model.transform(data)
            pred = model.predict(data)
        assert E.dims == ("time", "boost") and pred.dims == ("time",)
        assert isinstance(E.data, da.Array) == isinstance(data.data, da.Array)
        np.testing.assert_array_equal(E["time"].values, time)
        np.testing.assert_allclose(E.values, ref.transform(X), atol=1e-6)
        np.testing.assert_allclose(pred.values, ref.predict(X), atol=1e-6)


@parametrize_with_checks(
    [GBMAPRegressor(n_boosts=3, random_state=0), GBMAPClassifier(n_boosts=3, random_state=0)]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


############################################################################################
# one compute per pass, the runs of a step in lockstep; nothing computed by transform


def test_each_pass_is_one_compute(rng, monkeypatch):
    """The two signs' runs of a step go in lockstep: a step makes as many passes (computes) as
    its longer run has evaluations; ``n_evals_`` counts the evaluations of both runs."""
    X, y = bumpy(rng, n=200)
    Xd = da.from_array(X, chunks=70)
    nfev = []

    def recording_minimize(*args, **kwargs):
        res = minimize(*args, **kwargs)
        nfev.append(res.nfev)
        return res

    minimize = solver.minimize
    monkeypatch.setattr(solver, "minimize", recording_minimize)
    m = 3
    with count_computes(10_000) as counter:
        model = GBMAPClassifier(n_boosts=m, beta=5.0, random_state=0, persist=True)
        model.fit(Xd, y > 0.8)
    assert len(nfev) == 2 * m  # two signs per step
    assert model.n_evals_ == sum(nfev) == model.step_n_evals_.sum()
    passes = sum(max(nfev[2 * j : 2 * j + 2]) for j in range(m))  # a step's runs end together
    assert passes < sum(nfev)
    # the standardisation pass, one persist of (Z, y, F), one compute per pass, one
    # persist of the updated scores F after every step but the last, and the training
    # embedding with its scores
    assert counter.total == 1 + 1 + passes + (m - 1) + 1


LEARNED = (*FITTED, "step_n_iter_", "step_n_evals_", "n_evals_")


def _passes(caplog) -> int:
    """Passes over the data of a fit, from the solver's log line of each step."""
    return sum(r.args[-1] for r in caplog.records if r.msg.startswith("GBMAP step"))


@pytest.mark.parametrize("n_restarts", [1, 2])
def test_lockstep_fit_is_the_one_at_a_time_fit_bit_for_bit(rng, monkeypatch, caplog, n_restarts):
    """The runs of a step (both signs, every restart) share passes over Dask rows, and each
    gets exactly the values and gradients of a fit on its own: the learners, losses and
    counts equal those of the runs one after the other (NumPy and Dask input, regression
    and classification), with fewer passes and computes on Dask; NumPy rows, where a pass
    is no round trip, run them one after the other. Random delays in the runs' threads
    reorder them without changing a bit."""
    X, y = bumpy(rng, n=300)
    Xd = da.from_array(X, chunks=110)
    objective = solver.objective
    jitter = np.random.default_rng(0)

    def jittered(*args):
        time.sleep(jitter.uniform(0, 2e-3))
        return objective(*args)

    for cls, target in ((GBMAPRegressor, y), (GBMAPClassifier, y > np.median(y))):
        for data in (X, Xd):
            models, passes, computes = {}, {}, {}
            for lockstep in (False, True):
                monkeypatch.setattr(solver, "LOCKSTEP", lockstep)
                monkeypatch.setattr(solver, "objective", jittered if lockstep else objective)
                caplog.clear()
                with caplog.at_level("INFO", logger="dcfa"), count_computes(10_000) as counter:
                    model = cls(n_boosts=3, beta=5.0, n_restarts=n_restarts, random_state=0)
                    models[lockstep] = model.fit(data, target)
                passes[lockstep], computes[lockstep] = _passes(caplog), counter.total
            for name in LEARNED:
                a, b = getattr(models[True], name), getattr(models[False], name)
                np.testing.assert_array_equal(a, b, err_msg=name)
            evals = models[True].n_evals_
            if data is Xd:  # a step's passes: the evaluations of its longest run, a compute each
                assert passes[False] == evals > passes[True] >= evals / (2 * n_restarts)
                assert computes[False] - computes[True] == passes[False] - passes[True]
            else:  # in memory a pass is no round trip: the runs go one after the other
                assert passes[True] == passes[False] == evals
                assert computes == {False: 0, True: 0}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["pass", "run"])
@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_error_during_a_lockstep_step_propagates_and_ends_every_run(
    rng, monkeypatch, where, error
):
    """An error in a pass (a worker's error, Ctrl-C while the driver waits for the cluster)
    or in one run's thread ends the step: the error reaches the caller, no thread is left,
    and the next fit is the usual one. Dask rows (NumPy rows run the runs one at a time)."""
    # the threaded scheduler: ChunkedData's passes, whatever client the session holds
    with dask.config.set(scheduler="threads"):
        X, y = bumpy(rng)
        X = da.from_array(X, chunks=100)
        # the paper's penalty: its L-BFGS runs reach the 30th call the failures count to
        ref = GBMAPRegressor(n_boosts=2, beta=5.0, penalty=1e-3, random_state=0).fit(X, y)
        calls = []
        if where == "pass":
            sums = rows.ChunkedData.sums

            def failing(self, *args):
                calls.append(1)
                if len(calls) == 30:  # in step 1, both runs waiting
                    raise error("boom")
                return sums(self, *args)

            monkeypatch.setattr(rows.ChunkedData, "sums", failing)
        else:
            objective = solver.objective

            def failing(*args):
                if threading.current_thread().name == "dcfa-gbmap-run-1":  # sign -1
                    calls.append(1)
                    if len(calls) == 30:
                        raise error("boom")
                return objective(*args)

            monkeypatch.setattr(solver, "objective", failing)
        model = GBMAPRegressor(n_boosts=2, beta=5.0, penalty=1e-3, random_state=0)
        with pytest.raises(error, match="boom"):
            model.fit(X, y)
        assert len(calls) == 30
        assert not [t for t in threading.enumerate() if t.name.startswith("dcfa-gbmap-run")]
        monkeypatch.undo()
        assert_same_model(model.fit(X, y), ref, atol=0)


def test_progress_display_leaves_the_fit_unchanged(rng):
    """With progress shown, each pass goes through ``dcfa._compute.compute`` (a progress bar
    per compute, ~0.1 s each here: a short fit)."""
    X, y = bumpy(rng)
    Xd = da.from_array(X, chunks=80)
    params = dict(n_boosts=2, beta=5.0, max_iter=4, random_state=0)
    ref = GBMAPClassifier(**params).fit(Xd, y > 0.8)
    with dask.config.set({"dcfa.progress": True}):
        model = GBMAPClassifier(**params).fit(Xd, y > 0.8)
    for name in LEARNED:
        np.testing.assert_array_equal(getattr(model, name), getattr(ref, name), err_msg=name)


def test_outputs_on_dask_input_compute_nothing(rng):
    X, y = bumpy(rng)
    Xd = da.from_array(X, chunks=100)
    reg = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y)
    clf = GBMAPClassifier(n_boosts=2, beta=5.0, random_state=0).fit(X, y > 0.8)
    with count_computes(0):
        outs = {
            "transform": reg.transform(Xd),
            "predict": reg.predict(Xd),
            "drift": reg.drift_score(Xd),
            "c_transform": clf.transform(Xd),
            "c_predict": clf.predict(Xd),
            "c_decision": clf.decision_function(Xd),
            "c_proba": clf.predict_proba(Xd),
            "c_drift": clf.drift_score(Xd),
        }
    assert all(isinstance(v, da.Array) for v in outs.values())
    np.testing.assert_allclose(outs["transform"].compute(), reg.transform(X), rtol=1e-12)
    np.testing.assert_allclose(outs["predict"].compute(), reg.predict(X), rtol=1e-12)
    np.testing.assert_allclose(outs["drift"].compute(), reg.drift_score(X), rtol=1e-12)
    np.testing.assert_array_equal(outs["c_predict"].compute(), clf.predict(X))
    np.testing.assert_allclose(outs["c_proba"].compute(), clf.predict_proba(X), rtol=1e-12)
    np.testing.assert_allclose(outs["c_drift"].compute(), clf.drift_score(X), rtol=1e-12)


############################################################################################
# checkpoints


def test_checkpoint_resume_equals_a_straight_fit(rng, tmp_path):
    X, y = bumpy(rng)
    params = dict(beta=5.0, random_state=0, checkpoint=tmp_path)
    straight = GBMAPRegressor(n_boosts=4, beta=5.0, random_state=0).fit(X, y)
    first = GBMAPRegressor(n_boosts=2, **params).fit(X, y)
    assert (tmp_path / CHECKPOINT_FILE).exists()
    assert sorted(os.listdir(tmp_path)) == [CHECKPOINT_FILE]  # no temporary files left
    resumed = GBMAPRegressor(n_boosts=4, **params).fit(X, y)
    assert_same_model(resumed, straight, atol=0)
    assert resumed.n_evals_ == straight.step_n_evals_[2:].sum() < straight.n_evals_
    assert_same_model(first, GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y))
    # a shorter fit is served from the checkpoint without optimising
    short = GBMAPRegressor(n_boosts=1, **params).fit(X, y)
    assert short.n_evals_ == 0
    np.testing.assert_array_equal(short.coef_, straight.coef_[:1])
    # a checkpoint written from NumPy data serves the same data chunked
    longer = GBMAPRegressor(n_boosts=5, **params).fit(da.from_array(X, chunks=70), y)
    straight5 = GBMAPRegressor(n_boosts=5, beta=5.0, random_state=0).fit(X, y)
    assert_same_model(longer, straight5)
    assert 0 < longer.n_evals_ < straight5.n_evals_
    assert_same_model(GBMAPRegressor(n_boosts=4, **params).fit(X, y), straight, atol=0)


def test_checkpoint_survives_an_interrupted_dask_fit(rng, tmp_path, monkeypatch):
    X, y = bumpy(rng)
    Xd = da.from_array(X, chunks=80)
    labels = y > 0.8
    straight = GBMAPClassifier(n_boosts=4, beta=5.0, random_state=5).fit(X, labels)

    step = solver._step

    def crashing_step(data, j, *args, **kwargs):
        if j == 2:
            raise KeyboardInterrupt("power cut")
        return step(data, j, *args, **kwargs)

    monkeypatch.setattr(solver, "_step", crashing_step)
    model = GBMAPClassifier(n_boosts=4, beta=5.0, random_state=5, checkpoint=str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        model.fit(Xd, labels)
    monkeypatch.setattr(solver, "_step", step)
    model.fit(Xd, labels)  # resumes after step 2, the scores F rebuilt from the checkpoint
    assert model.n_evals_ == straight.step_n_evals_[2:].sum()
    assert_same_model(model, straight)


def test_checkpoint_of_another_fit_is_refused(rng, tmp_path):
    X, y = bumpy(rng)
    GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0, checkpoint=tmp_path).fit(X, y)
    with pytest.raises(ValueError, match="checkpoint.*beta"):
        GBMAPRegressor(n_boosts=2, beta=2.0, random_state=0, checkpoint=tmp_path).fit(X, y)
    with pytest.raises(ValueError, match="checkpoint.*mean"):
        GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, checkpoint=tmp_path).fit(X + 1, y)
    with pytest.raises(ValueError, match="checkpoint.*n_samples"):
        GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, checkpoint=tmp_path).fit(
            X[:-1], y[:-1]
        )


def test_a_checkpoint_of_the_same_moments_and_target_but_other_rows_is_refused(rng, tmp_path):
    """The fingerprint checked the shape, the column moments and every target value: rows of
    X in another order against the same y, or a column mirrored about its mean, resumed the
    old learners silently (a newcomer's training R^2 -0.76 instead of 0.15)."""
    X, y = bumpy(rng)
    GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0, checkpoint=tmp_path).fit(X, y)
    mirrored = X.copy()
    mirrored[:, 0] = 2 * X[:, 0].mean() - X[:, 0]
    shuffled = X[rng.permutation(X.shape[0])]
    for other in (shuffled, mirrored, da.from_array(shuffled, chunks=70)):
        with pytest.raises(ValueError, match=r"X: other rows, or the same rows in another order"):
            GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, checkpoint=tmp_path).fit(other, y)
    # the same rows in chunks of any size: resumed
    resumed = GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0, checkpoint=tmp_path)
    with count_computes(3):  # the moments, the digest and the training embedding
        resumed.fit(da.from_array(X, chunks=(37, 2)), y)
    assert resumed.n_evals_ == 0  # nothing optimised: every step came from the checkpoint


############################################################################################
# bad input: clear errors before any pass over X


def test_bad_parameters_and_targets_fail_before_any_compute(rng):
    X, y = bumpy(rng, n=40)
    Xd = da.from_array(X, chunks=20)
    cases = [
        (GBMAPClassifier(), np.arange(40) % 3, "2 classes"),
        (GBMAPClassifier(), np.zeros(40), "2 classes"),
        (GBMAPClassifier(), np.where(y > 1, 1.0, np.nan), "y: contains"),
        (GBMAPRegressor(), np.where(y > 1, y, np.inf), "y: contains"),
        (GBMAPRegressor(n_boosts=0), y, "'n_boosts' parameter"),
        (GBMAPRegressor(beta=0.0), y, "'beta' parameter"),
        (GBMAPClassifier(beta=-1.0), y > 0, "'beta' parameter"),
        (GBMAPRegressor(penalty=-1.0), y, "'penalty' parameter"),
        (GBMAPRegressor(persist="sometimes"), y, "'persist' parameter"),
        (GBMAPRegressor(), y[:-1], "same length"),
    ]
    for model, target, message in cases:
        with count_computes(0), pytest.raises(ValueError, match=message):
            model.fit(Xd, target)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_X_is_found_by_the_first_pass(rng, bad):
    X, y = bumpy(rng, n=40)
    X[17, 2] = bad
    with pytest.raises(ValueError, match="X: contains 1 NaN or infinite"):
        GBMAPRegressor().fit(X, y)
    # on Dask, the check rides on the standardisation pass: one compute, then the error
    with count_computes(1), pytest.raises(ValueError, match="X: contains 1 NaN or infinite"):
        GBMAPRegressor().fit(da.from_array(X, chunks=20), y)
    fitted = GBMAPRegressor(n_boosts=1).fit(np.nan_to_num(X, posinf=0.0), y)
    with pytest.raises(ValueError, match="X: contains NaN"):
        fitted.predict(X)


############################################################################################
# distances and drift


def brute_knn_mean(Q, T, values, k):
    D = np.abs(Q[:, None, :] - T[None, :, :]).sum(-1)
    order = np.argsort(D, axis=1, kind="stable")[:, :k]  # ties: lowest training index
    return values[order].mean(axis=1)


def test_embedding_distance_matches_brute_force(rng):
    A, B = rng.normal(size=(30, 4)), rng.normal(size=(45, 4))
    expected = np.abs(A[:, None, :] - B[None, :, :]).sum(-1)
    np.testing.assert_allclose(embedding_distance(A, B), expected, rtol=1e-12)
    with count_computes(0):
        lazy = embedding_distance(da.from_array(A, chunks=7), B)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), expected, rtol=1e-12)


def test_embedding_distance_bounds_the_change_of_f(rng):
    """Eq. 8: |f(x) - f(x')| <= d_emb(x, x')."""
    X, y = bumpy(rng)
    model = GBMAPRegressor(n_boosts=5, beta=5.0, random_state=0).fit(X, y)
    D = model.embedding_distance(X[:50], X[50:120])
    pred = model.predict(X)
    change = np.abs(pred[:50, None] - pred[None, 50:120])
    assert np.all(change <= D + 1e-9)
    assert np.mean(np.isclose(change, D)) < 0.9  # the bound is not an identity


@pytest.mark.parametrize("q_chunks,t_chunks", [(None, None), (13, 29), (40, (7, 50, 43))])
def test_knn_mean_is_exact_with_ties_and_any_chunking(rng, q_chunks, t_chunks):
    T = rng.integers(0, 4, size=(100, 2)).astype(float)  # many exact ties in distance
    values = rng.normal(size=100)
    Q = rng.integers(0, 4, size=(40, 2)).astype(float)
    expected = brute_knn_mean(Q, T, values, 5)
    Qa = Q if q_chunks is None else da.from_array(Q, chunks=(q_chunks, 2))
    Ta = T if t_chunks is None else da.from_array(T, chunks=(t_chunks, 2))
    got = knn_mean(Qa, Ta, values, 5)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12)


def test_knn_mean_running_top_k_over_sub_blocks(rng, monkeypatch):
    from dcfa.gbmap import drift

    monkeypatch.setattr(drift, "_MAX_PAIRS", 64)  # forces many sub-blocks per task
    T, values = rng.normal(size=(300, 3)), rng.normal(size=300)
    Q = rng.normal(size=(25, 3))
    np.testing.assert_allclose(
        knn_mean(Q, da.from_array(T, chunks=70), values, 5).compute(),
        brute_knn_mean(Q, T, values, 5),
        rtol=1e-12,
    )


def test_drift_score_follows_the_paper(rng):
    X, y = bumpy(rng)
    reg = GBMAPRegressor(n_boosts=4, beta=5.0, random_state=0).fit(X, y)
    Xnew = X[:20] + rng.normal(size=(20, 4))
    E, Etr = reg.transform(Xnew), reg.transform(X)
    # regression: |f(x*) - mean of the neighbours' y|
    expected = np.abs(reg.predict(Xnew) - brute_knn_mean(E, Etr, y, 5))
    np.testing.assert_allclose(reg.drift_score(Xnew), expected, rtol=1e-10)
    np.testing.assert_allclose(
        drift_score(E, reg.predict(Xnew), Etr, y, n_neighbors=5), expected, rtol=1e-10
    )
    # classification: |f(x*) - mean of the neighbours' training scores|
    labels = y > 0.8
    clf = GBMAPClassifier(n_boosts=4, beta=5.0, random_state=0).fit(X, labels)
    E, Etr = clf.transform(Xnew), clf.transform(X)
    scores = clf.decision_function(X)
    expected = np.abs(clf.decision_function(Xnew) - brute_knn_mean(E, Etr, scores, 5))
    np.testing.assert_allclose(clf.drift_score(Xnew), expected, rtol=1e-10)


def test_drift_score_flags_extrapolation(rng):
    X, y = bumpy(rng, n=400)
    model = GBMAPRegressor(n_boosts=6, beta=5.0, random_state=0).fit(X, y)
    inside = X[:100] + 0.05 * X.std(0) * rng.normal(size=(100, 4))
    outside = X[:100] + 6.0 * X.std(0)  # far outside the training cloud
    assert np.median(model.drift_score(outside)) > 5 * np.median(model.drift_score(inside))


def test_drift_score_after_a_dask_fit_does_not_read_the_training_set_again(rng, tmp_path):
    """The training embedding was a lazy array that re-read X's source: after the store was
    rewritten, drift scores and neighbour predictions changed without a word."""
    X, y = bumpy(rng)
    ref = GBMAPClassifier(n_boosts=3, beta=5.0, random_state=0).fit(X, y > 0.8)
    store = tmp_path / "x.zarr"
    da.from_array(X, chunks=60).to_zarr(store)
    model = GBMAPClassifier(n_boosts=3, beta=5.0, random_state=0)
    model.fit(da.from_zarr(store), y > 0.8)
    # n x m floats in memory (no copy of the n x p X, no reference to its graph)
    assert isinstance(model.train_embedding_, np.ndarray)
    assert model.train_embedding_.shape == (X.shape[0], 3)
    with count_computes(0):
        got = model.drift_score(X[:30])  # in-memory query: nothing computed
    np.testing.assert_allclose(got, ref.drift_score(X[:30]), atol=1e-6)
    da.from_array(rng.normal(size=X.shape), chunks=60).to_zarr(store, overwrite=True)
    np.testing.assert_array_equal(model.drift_score(X[:30]), got)  # the store changed: not it


############################################################################################
# the paper's numbers (slow)


@pytest.mark.slow
def test_synth_cos_regression_beats_ols():
    """Table 4: GBMAP R^2 0.452, OLS 0.00 on SYNTH-COS-R(2e5, 200). Here the paper's small
    variant SYNTH-COS-R(1e4, 20) (its kNN experiments), where GBMAP should do at least as
    well with m = 20, beta = 5, lambda = 1e-3."""
    X, y = make_synth_cos(20_000, 20, random_state=0)
    Xtr, Xte, ytr, yte = X[:10_000], X[10_000:], y[:10_000], y[10_000:]
    ols = LinearRegression().fit(Xtr, ytr).score(Xte, yte)
    model = GBMAPRegressor(n_boosts=20, beta=5.0, penalty=1e-3, max_iter=200, random_state=0).fit(
        Xtr, ytr
    )
    assert abs(ols) < 0.02
    assert model.score(Xte, yte) >= 0.45


@pytest.mark.slow
def test_synth_cos_classification_beats_logistic_regression():
    """Table 4: GBMAP accuracy 0.583, logistic regression 0.50 on SYNTH-COS-C."""
    X, y = make_synth_cos(20_000, 20, task="classification", random_state=0)
    Xtr, Xte, ytr, yte = X[:10_000], X[10_000:], y[:10_000], y[10_000:]
    lr = LogisticRegression().fit(Xtr, ytr).score(Xte, yte)
    model = GBMAPClassifier(n_boosts=20, beta=5.0, penalty=1e-3, max_iter=200, random_state=0).fit(
        Xtr, ytr
    )
    assert abs(lr - 0.5) < 0.02
    assert model.score(Xte, yte) >= 0.583


@pytest.mark.slow
def test_breast_cancer_accuracy():
    """Table 4: GBMAP 0.965 on BREAST-CANCER (test protocol not given in the paper: here
    5-fold stratified cross-validation, m = 10, beta = 1, lambda = 1e-3)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    X, y = load_breast_cancer(return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    model = GBMAPClassifier(n_boosts=10, beta=1.0, penalty=1e-3, max_iter=200, random_state=0)
    assert cross_val_score(model, X, y, cv=cv).mean() >= 0.94


@pytest.mark.slow
def test_fit_on_a_cluster_gives_the_in_memory_model(client, rng):
    X, y = bumpy(rng)
    ref = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=80)
    model = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(Xd, y)
    assert len(scheduler_workers(client)) == 2
    assert model.persisted_  # small data: persisted in the workers' memory
    assert_same_model(model, ref)
    np.testing.assert_allclose(model.predict(Xd).compute(), ref.predict(X), atol=1e-6)
    np.testing.assert_allclose(model.drift_score(X[:10]), ref.drift_score(X[:10]), atol=1e-6)
    assert dask.base.get_scheduler() == client.get


@pytest.mark.slow
def test_rows_held_by_actors_give_the_numbers_of_the_scheduler(client, rng):
    """On a cluster the persisted rows are served by one actor per worker: every pass and
    every added learner gives, bit for bit, what the same chunks give through the
    scheduler's graph."""
    # 5 chunks, each its own root task, so the scheduler spreads them over both workers
    Xd = da.random.default_rng(0).normal(size=(300, 4), chunks=(70, 4)) + 10.0
    y = rng.normal(size=300)
    standardizer, _ = rows.column_stats(Xd)
    learners = Learners.empty(4)
    data = rows.make_data(
        Xd, y, standardizer, persist=True, learners=learners, beta=5.0, activation="softplus"
    )
    assert isinstance(data, rows.HeldData)
    assert len(data._actors) == 2  # one per worker, together holding every chunk once
    assert sorted(i for chunks, _ in data._actors for i in chunks) == [0, 1, 2, 3, 4]
    thetas = [rng.normal(size=6) / 2 for _ in range(3)]
    signs = [1.0, -1.0, -1.0]
    for j in range(2):
        for loss in ("squared", "logistic"):
            got = data.sums(thetas, signs, 5.0, loss, "softplus")
            ref = data.chunked.sums(thetas, signs, 5.0, loss, "softplus")
            assert got.shape == (3, 7)
            np.testing.assert_array_equal(got, ref)
        learners = learners.append(thetas[j], signs[j], 0.0, 1, 1)
        data.add(learners, j, 5.0, "softplus", last=False)
        (data.chunked.F,) = rows._persist(data.chunked.F)
    assert data._fallback is None  # nothing was lost: every pass above went to the actors


@pytest.mark.slow
def test_a_worker_killed_mid_fit_changes_no_learner(rng, caplog):
    """A worker holding rows is killed (SIGKILL) after the second step: the fit goes on
    through the scheduler, which recomputes the lost chunks, and every learner is bit for
    bit the learner of an uninterrupted fit on the same cluster."""
    import logging
    import signal

    X, y = bumpy(rng, n=400)
    params = dict(n_boosts=4, beta=5.0, random_state=0, persist=True)
    with local_client() as c:
        Xd = da.from_array(X, chunks=50)
        ref = GBMAPRegressor(**params).fit(Xd, y)
        victim = next(iter(c.run(os.getpid).values()))

        class KillAtStep(logging.Handler):
            def emit(self, record):
                if record.getMessage().startswith("GBMAP step 2/4"):
                    os.kill(victim, signal.SIGKILL)

        handler = KillAtStep()
        logging.getLogger("dcfa").addHandler(handler)
        try:
            with caplog.at_level(logging.INFO, logger="dcfa"):
                model = GBMAPRegressor(**params).fit(Xd, y)
        finally:
            logging.getLogger("dcfa").removeHandler(handler)
        assert victim not in c.run(os.getpid).values()  # the nanny started a new process
    assert "a worker holding rows was lost" in caplog.text
    for name in FITTED:
        np.testing.assert_array_equal(getattr(model, name), getattr(ref, name), err_msg=name)


@pytest.mark.slow
def test_rows_stay_with_the_scheduler_dask_uses_beside_a_client(client, rng):
    """With a cluster's client in the process but another scheduler chosen for the fit
    (``dask.config``), the rows are persisted by that scheduler and served by it: no actor,
    and the in-memory model."""
    X, y = bumpy(rng)
    ref = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0).fit(X, y)
    Xd = da.from_array(X, chunks=80)
    with dask.config.set(scheduler="threads"):
        standardizer, _ = rows.column_stats(Xd)
        data = rows.make_data(
            Xd,
            y,
            standardizer,
            persist=True,
            learners=Learners.empty(4),
            beta=5.0,
            activation="softplus",
        )
        assert type(data) is rows.ChunkedData
        model = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, persist=True).fit(Xd, y)
    assert_same_model(model, ref)


def _chunk_total(Z, y, F):
    """A stand-in loss kernel: the chunk's rows added in order (order-sensitive floats)."""
    return Z.sum(axis=0) + y.sum() + F.sum()


@pytest.mark.parametrize("n_chunks", [1, 5, 8, 9, 64, 65, 70, 600])
def test_loss_pass_partial_sums_add_in_the_order_of_one_tree(n_chunks):
    """The graph's partial sums (added on the driver) and the actors' in-process sum add the
    chunks in the same order, that of a brute-force fan-in-8 tree stopped at <= 8 parts;
    with values of mixed magnitudes any other order would differ."""
    rng = np.random.default_rng(n_chunks)
    n = 3 * n_chunks
    Z = da.from_array(rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-8, 9, (n, 1)), (3, 2))
    y = da.from_array(rng.normal(size=n), 3)
    F = da.from_array(rng.normal(size=n) * 1e6, 3)
    with dask.config.set(scheduler="sync"):
        graph = rows._add_all(list(dask.compute(*rows._map_reduce(_chunk_total, Z, y, F))))
        parts = [_chunk_total(*(a.blocks[i].compute() for a in (Z, y, F))) for i in range(n_chunks)]
    brute = list(parts)
    while len(brute) > 8:  # the fan-in of every tree, written out
        brute = [sum(brute[s + 1 : s + 8], brute[s]) for s in range(0, len(brute), 8)]
    expected = sum(brute[1:], brute[0])
    np.testing.assert_array_equal(graph, expected)
    np.testing.assert_array_equal(rows._tree_sum(parts), expected)

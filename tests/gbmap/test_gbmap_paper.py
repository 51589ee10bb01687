"""GBMAP as published: kNN in the embedding, the drift experiment, f0, local coefficients and
the path distance (Patron et al. 2024, Sections 4.3, 4.5, 5.1, 5.2, Eq. 6), and Table 4's
KNN / KNN-GBMAP / AUC columns on the datasets that ship in packages (slow).

Every reference here is computed independently of dcfa's kernels: scikit-learn's k-NN on
the embedding, brute-force distances, finite differences of ``predict``, a fine-grid total
variation, a hand-written residual objective, a rank-sum AUC.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import count_computes, local_client
from scipy.optimize import approx_fprime
from scipy.spatial.distance import cdist
from scipy.stats import rankdata
from sklearn.base import clone
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dcfa
from dcfa._compute import scheduler_workers
from dcfa.gbmap import (
    GBMAPClassifier,
    GBMAPKNeighborsClassifier,
    GBMAPKNeighborsRegressor,
    GBMAPRegressor,
    drift_experiment,
    euclid_drift_score,
)
from dcfa.gbmap.datasets import load_gbmap_dataset, make_synth_cos

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


def softplus(u, beta):
    return np.logaddexp(0.0, beta * u) / beta


############################################################################################
# kNN in the embedding (Table 4's KNN-GBMAP)


def test_knn_regressor_is_sklearn_knn_on_the_embedding(rng):
    X, y = bumpy(rng, n=300)
    Xtr, Xte, ytr = X[:200], X[200:], y[:200]
    model = GBMAPKNeighborsRegressor(n_boosts=5, beta=5.0, random_state=0).fit(Xtr, ytr)
    assert model.n_neighbors == 10  # the paper's k
    # the GBMAP inside is the plain GBMAP fit
    assert_same_model(model, GBMAPRegressor(n_boosts=5, beta=5.0, random_state=0).fit(Xtr, ytr))
    ref = KNeighborsRegressor(10, metric="manhattan", algorithm="brute")
    ref.fit(model.transform(Xtr), ytr)
    np.testing.assert_allclose(model.predict(Xte), ref.predict(model.transform(Xte)), rtol=1e-12)
    # the Euclidean embedding distance would give other neighbours
    euc = KNeighborsRegressor(10, algorithm="brute").fit(model.transform(Xtr), ytr)
    assert np.abs(model.predict(Xte) - euc.predict(model.transform(Xte))).max() > 1e-3


def test_knn_classifier_is_sklearn_knn_on_the_embedding_ties_included(rng):
    X, y = bumpy(rng, n=1000)  # 750 queries: tied 5/5 votes occur whatever the fitted model
    labels = np.where(y > np.median(y), "high", "low")
    Xtr, Xte = X[:250], X[250:]
    model = GBMAPKNeighborsClassifier(n_boosts=4, beta=5.0, random_state=0).fit(Xtr, labels[:250])
    ref = KNeighborsClassifier(10, metric="manhattan", algorithm="brute")
    ref.fit(model.transform(Xtr), labels[:250])
    Ete = model.transform(Xte)
    P = model.predict_proba(Xte)
    np.testing.assert_allclose(P, ref.predict_proba(Ete), rtol=1e-12)
    assert (P[:, 1] == 0.5).any()  # tied votes occur, and go the same way as scikit-learn's
    np.testing.assert_array_equal(model.predict(Xte), ref.predict(Ete))
    assert not hasattr(model, "decision_function")  # no score that disagrees with predict


def test_knn_in_the_embedding_ignores_irrelevant_features(rng):
    """Section 4.3: the embedding distance ignores directions irrelevant to the target."""
    n = 600
    X = rng.normal(size=(n, 8))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)  # seven nuisance features
    Xtr, Xte, ytr, yte = X[:400], X[400:], y[:400], y[400:]
    euclid = KNeighborsRegressor(10).fit(Xtr, ytr).score(Xte, yte)
    gb = GBMAPKNeighborsRegressor(n_boosts=10, beta=5.0, random_state=0).fit(Xtr, ytr)
    assert gb.score(Xte, yte) > euclid + 0.3


def test_knn_estimators_on_dask_are_lazy_and_chunk_wise(rng):
    X, y = bumpy(rng, n=300)
    labels = y > np.median(y)
    Xd = da.from_array(X, chunks=70)
    for cls, target in ((GBMAPKNeighborsRegressor, y), (GBMAPKNeighborsClassifier, labels)):
        ref = cls(n_boosts=3, beta=5.0, random_state=0).fit(X[:200], target[:200])
        model = cls(n_boosts=3, beta=5.0, random_state=0).fit(Xd[:200], target[:200])
        assert isinstance(model.train_embedding_, np.ndarray)  # computed by the fit
        with count_computes(0):
            pred = model.predict(Xd[200:])
        assert isinstance(pred, da.Array)
        np.testing.assert_array_equal(pred.compute(), ref.predict(X[200:]))
        with count_computes(0):  # in-memory query after a Dask fit: nothing to compute
            got = model.predict(X[200:])
        np.testing.assert_array_equal(got, ref.predict(X[200:]))
    with count_computes(0):
        proba = model.predict_proba(Xd)
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(X), rtol=1e-12)


def test_knn_estimators_clone_and_exports(rng):
    model = GBMAPKNeighborsRegressor(7, n_boosts=3, beta=2.0, f0=1.5)
    params = clone(model).get_params()
    assert params["n_neighbors"] == 7 and params["beta"] == 2.0 and params["f0"] == 1.5
    assert dcfa.GBMAPKNeighborsRegressor is GBMAPKNeighborsRegressor
    assert dcfa.GBMAPKNeighborsClassifier is GBMAPKNeighborsClassifier
    X, y = bumpy(rng, n=8)
    with pytest.raises(ValueError, match="n_neighbors: 10 neighbours"):
        GBMAPKNeighborsRegressor().fit(X, y)


############################################################################################
# the EUCLID drifter and the drift experiment (Section 4.5)


@pytest.mark.parametrize("chunks", [None, 23])
def test_euclid_drifter_is_the_distance_to_the_kth_neighbour(rng, chunks):
    T, Q = rng.normal(size=(150, 3)), rng.normal(size=(40, 3))
    expected = np.sort(cdist(Q, T), axis=1)[:, 4]
    Ta = T if chunks is None else da.from_array(T, chunks=(chunks, 3))
    got = euclid_drift_score(Q, Ta, n_neighbors=5)
    assert isinstance(got, da.Array) == (chunks is not None)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-12)


def rank_auc(labels, score):
    """ROC AUC as the Mann-Whitney statistic (mid-ranks for ties)."""
    r = rankdata(score)
    pos = labels.sum()
    return (r[labels].sum() - pos * (pos + 1) / 2) / (pos * (~labels).sum())


def _check_experiment(res, X, y, task):
    """Recompute every step of Section 4.5 from the returned split and model."""
    n, p = X.shape
    Xs = (X - X.mean(0)) / X.std(0)
    c = res.feature
    a1, test, in_b = res.train_index, res.test_index, res.in_b
    a2, b = test[~in_b], test[in_b]
    # a = the lower half by covariate c, split at random into a1 and a2; b = the upper half
    assert len(b) == n - n // 2 and len(a1) + len(a2) == n // 2 and abs(len(a1) - len(a2)) <= 1
    assert sorted(np.concatenate([a1, a2, b])) == list(range(n))
    assert X[b, c].min() >= X[np.concatenate([a1, a2]), c].max()
    keep = [j for j in range(p) if j != c]
    assert res.model.n_features_in_ == p - 1  # the split covariate is dropped
    # the chosen covariate maximises mean loss(b) - mean loss(a2)
    assert res.feature_drift[c] == np.nanmax(res.feature_drift)
    if task == "regression":
        f = res.model.predict(Xs[test][:, keep])
        loss = (y[test] - f) ** 2
        drift = loss[in_b].mean() - loss[~in_b].mean()
    else:
        t = np.where(y == np.unique(y)[1], 1.0, -1.0)
        f = res.model.decision_function(Xs[test][:, keep])
        logistic = np.log1p(np.exp(-t[test] * f))
        drift = logistic[in_b].mean() - logistic[~in_b].mean()
        s = LogisticRegression().fit(Xs, t).decision_function(Xs)
        loss = (s[test] - f) ** 2
    np.testing.assert_allclose(res.feature_drift[c], drift, rtol=1e-9)
    np.testing.assert_allclose(res.loss, loss, rtol=1e-9)
    assert res.threshold == pytest.approx(np.quantile(loss[~in_b], 0.95))
    labels = loss > res.threshold
    assert res.drift_rate_a2 == pytest.approx(labels[~in_b].mean()) and res.drift_rate_a2 <= 0.06
    # the GBMAP drifter: |f - mean over the 5 nearest of a1 in d_emb| (targets / scores)
    E, Etr = res.model.transform(Xs[test][:, keep]), res.model.transform(Xs[a1][:, keep])
    values = y[a1] if task == "regression" else Etr.sum(axis=1)
    near = np.argsort(cdist(E, Etr, "cityblock"), axis=1, kind="stable")[:, :5]
    np.testing.assert_allclose(res.gbmap_score, np.abs(f - values[near].mean(1)), rtol=1e-9)
    # the EUCLID drifter: distance to the 5th nearest of a1, standardised covariates
    euclid = np.sort(cdist(Xs[test][:, keep], Xs[a1][:, keep]), axis=1)[:, 4]
    np.testing.assert_allclose(res.euclid_score, euclid, rtol=1e-9)
    assert res.auc_gbmap == pytest.approx(rank_auc(labels, res.gbmap_score))
    assert res.auc_euclid == pytest.approx(rank_auc(labels, res.euclid_score))


def test_drift_experiment_regression_step_by_step(rng):
    """x0 drives y and x1 is a noisy copy of it: split by x0 (or x1) and dropped, the model
    on a1 extrapolates along the proxy on b, where its loss grows."""
    n = 400
    z = rng.normal(size=n)
    X = np.column_stack(
        [z, z + 0.2 * rng.normal(size=n), rng.normal(size=n), 3 * rng.normal(size=n) + 5]
    )
    y = np.abs(z + 0.5) + 0.3 * X[:, 2] + 0.1 * rng.normal(size=n)
    res = drift_experiment(X, y, n_boosts=6, max_iter=100, random_state=0)
    assert res.task == "regression" and res.feature in (0, 1)
    assert res.drift_rate_b > 0.5
    assert res.auc_gbmap > 0.9 and res.auc_gbmap > res.auc_euclid
    _check_experiment(res, X, y, "regression")
    again = drift_experiment(X, y, n_boosts=6, max_iter=100, random_state=0)
    assert again.auc_gbmap == res.auc_gbmap and again.auc_euclid == res.auc_euclid
    # independent covariates: dropping the split one leaves nothing to detect the drift by
    Xind = np.column_stack([z, rng.normal(size=(n, 3))])
    blind = drift_experiment(Xind, y, n_boosts=6, max_iter=100, random_state=0)
    assert blind.feature == 0 and abs(blind.auc_gbmap - 0.5) < 0.15


def test_drift_experiment_classification_step_by_step(rng):
    n = 400
    X = rng.normal(size=(n, 3))
    logit = 3 * X[:, 0] ** 2 - 2 + X[:, 1]
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    res = drift_experiment(X, y, n_boosts=4, max_iter=100, random_state=1)
    assert res.task == "classification"
    _check_experiment(res, X, y, "classification")
    with pytest.raises(ValueError, match="quantile"):
        drift_experiment(X, y, quantile=1.5)


############################################################################################
# f0: boosting from a pre-trained model (Section 5.1)


def test_f0_constant_equal_to_the_default_gives_the_default_model(rng):
    # the paper's penalty: a stronger one leaves f0 + 1 a model within 3e-4 of the default
    X, y = bumpy(rng)
    default = GBMAPRegressor(n_boosts=3, beta=5.0, penalty=1e-3, random_state=0).fit(X, y)
    same = GBMAPRegressor(
        n_boosts=3, beta=5.0, penalty=1e-3, random_state=0, f0=float(y.mean())
    ).fit(X, y)
    assert_same_model(same, default, atol=0)
    np.testing.assert_array_equal(same.predict(X), default.predict(X))
    other = GBMAPRegressor(
        n_boosts=3, beta=5.0, penalty=1e-3, random_state=0, f0=float(y.mean()) + 1.0
    )
    assert np.abs(other.fit(X, y).coef_ - default.coef_).max() > 1e-3
    labels = y > 0.8
    c0 = GBMAPClassifier(n_boosts=3, beta=5.0, penalty=1e-3, random_state=0).fit(X, labels)
    c1 = GBMAPClassifier(n_boosts=3, beta=5.0, penalty=1e-3, random_state=0, f0=0.0).fit(X, labels)
    assert_same_model(c1, c0, atol=0)


def _residual_objective(theta, Z, r, beta, lam):
    """Section 3.2 written out: mean((r - a - b g(Z w + c))^2) + lam mean([w, c]^2), b = +1."""
    f = theta[0] + softplus(Z @ theta[1:-1] + theta[-1], beta)
    return np.mean((r - f) ** 2) + lam * np.mean(theta[1:] ** 2)


def test_f0_linear_regression_boosts_its_residuals(rng):
    """Each learner of GBMAPRegressor(f0=ols) minimises the paper's stagewise objective on
    the OLS residuals (the manual objective below, in the standardised target units): its
    loss is the model's training loss and it is stationary; the default fit's learners are
    not stationary for that objective."""
    X, y = bumpy(rng)
    beta, lam = 5.0, 1e-3
    ols = LinearRegression().fit(X, y)
    model = GBMAPRegressor(
        n_boosts=3, beta=beta, penalty=lam, tol=1e-9, max_iter=2000, random_state=0, f0=ols
    )
    model.fit(X, y)
    assert model.f0_ is ols  # a fitted model is used as is
    np.testing.assert_allclose(
        model.predict(X), ols.predict(X) + model.transform(X).sum(axis=1), rtol=1e-12
    )
    Z = (X - X.mean(0)) / X.std(0)
    r = (y - ols.predict(X)) / y.std()  # residuals in the units the learners fit
    for j in range(3):
        # b_j = -1 is b = +1 with the residual's sign flipped
        theta = np.concatenate(
            [[model.intercept_[j]], model.coef_[j], [model.bias_[j]]]
        ) * np.array([model.signs_[j]] + [1.0] * (X.shape[1] + 1))
        target = model.signs_[j] * r
        loss = _residual_objective(theta, Z, target, beta, 0.0)
        assert loss == pytest.approx(model.train_loss_[j], rel=1e-10)
        grad = approx_fprime(theta, _residual_objective, 1e-7, Z, target, beta, lam)
        assert np.abs(grad).max() < 1e-5, (j, grad)
        r = r - model.transform(X)[:, j] / y.std()
    default = GBMAPRegressor(
        n_boosts=1, beta=beta, penalty=lam, tol=1e-9, max_iter=2000, random_state=0
    )
    default.fit(X, y)
    theta = np.concatenate([[default.intercept_[0]], default.coef_[0], [default.bias_[0]]])
    r0 = default.signs_[0] * (y - ols.predict(X)) / y.std()
    theta[0] *= default.signs_[0]
    grad = approx_fprime(theta, _residual_objective, 1e-7, Z, r0, beta, lam)
    assert np.abs(grad).max() > 1e-2


def test_f0_without_the_nonlinearity_leaves_nothing_to_boost_after_ols(rng):
    """Lemma 1 + Section 5.1: OLS residuals are orthogonal to X, so identity learners boosted
    from f0 = OLS stay ~0 and the model is the OLS model."""
    X, y = bumpy(rng)
    ols = LinearRegression().fit(X, y)
    model = GBMAPRegressor(n_boosts=2, tol=1e-10, max_iter=1000, random_state=0, f0=ols)
    model._activation = "identity"
    model.fit(X, y)
    np.testing.assert_allclose(model.predict(X), ols.predict(X), atol=1e-6)
    assert np.abs(model.coef_).max() < 1e-5


def test_f0_unfitted_estimator_is_fitted_on_the_training_data(rng):
    X, y = bumpy(rng)
    lr = LinearRegression()
    a = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, f0=lr).fit(X, y)
    assert not hasattr(lr, "coef_")  # the user's estimator is left alone
    b = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, f0=LinearRegression().fit(X, y))
    assert_same_model(a, b.fit(X, y), atol=0)
    np.testing.assert_allclose(a.f0_.coef_, b.f0_.coef_)
    cv = cross_val_score(clone(a), X, y, cv=3)  # refitted per fold
    assert np.all(cv > 0.5)
    # a pre-trained model kept fixed through clone: FrozenEstimator
    early = LinearRegression().fit(X[:60], y[:60])
    frozen = clone(GBMAPRegressor(n_boosts=1, random_state=0, f0=FrozenEstimator(early)))
    np.testing.assert_allclose(frozen.fit(X, y).f0_.coef_, early.coef_)


def test_f0_classifier_boosts_from_the_logit(rng):
    X, y = bumpy(rng)
    labels = np.where(y > 0.8, "yes", "no")
    lr = LogisticRegression().fit(X, labels)
    model = GBMAPClassifier(n_boosts=3, beta=5.0, random_state=0, f0=lr).fit(X, labels)
    np.testing.assert_allclose(
        model.decision_function(X),
        lr.decision_function(X) + model.transform(X).sum(axis=1),
        rtol=1e-12,
    )
    assert model.score(X, labels) >= lr.score(X, labels)
    # the first learner's training loss starts from the logistic regression's loss
    t = np.where(labels == "yes", 1.0, -1.0)
    lr_loss = np.mean(np.log1p(np.exp(-t * lr.decision_function(X))))
    assert model.train_loss_[0] < lr_loss
    with pytest.raises(ValueError, match="f0: its classes"):
        GBMAPClassifier(f0=lr).fit(X, np.where(labels == "yes", 1, 0))
    with pytest.raises(ValueError, match="f0: a classifier"):
        GBMAPRegressor(f0=lr).fit(X, y)
    # unfitted, refused before its fit (scikit-learn said "Unknown label type: continuous")
    with pytest.raises(ValueError, match="f0: a classifier"):
        GBMAPRegressor(f0=LogisticRegression()).fit(X, y)


def test_an_unfitted_regressor_f0_of_a_classifier_scores_the_classes_coding(rng):
    """An unfitted regressor as a classifier's f0 was fitted on the labels themselves, and
    its output taken as the logit: classes 1000 / 2000 gave a logit of about 1 500 and an
    accuracy of 0.58 where 0 / 1 gave 0.86, and "cold" / "warm" failed in scikit-learn. It
    is fitted on the +1 / -1 coding the boosting fits, whatever names the classes."""
    X, y = bumpy(rng)
    hot = y > 0.8
    coded = LinearRegression().fit(X, np.where(hot, 1.0, -1.0))
    ref = GBMAPClassifier(n_boosts=3, beta=5.0, random_state=0, f0=coded).fit(X, hot)
    for names in ([0, 1], [1000, 2000], ["cold", "warm"]):
        labels = np.where(hot, names[1], names[0])
        model = GBMAPClassifier(n_boosts=3, beta=5.0, random_state=0, f0=LinearRegression())
        model.fit(X, labels)
        np.testing.assert_allclose(model.f0_.coef_, coded.coef_, rtol=1e-10)
        np.testing.assert_allclose(model.decision_function(X), ref.decision_function(X))


def test_f0_on_dask_gives_the_in_memory_model(rng):
    X, y = bumpy(rng)
    ols = LinearRegression().fit(X, y)
    ref = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, f0=ols).fit(X, y)
    Xd = da.from_array(X, chunks=70)
    model = GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, f0=ols).fit(Xd, y)
    assert_same_model(model, ref)
    with count_computes(0):
        pred = model.predict(Xd)
    np.testing.assert_allclose(pred.compute(), ref.predict(X), atol=1e-6)
    with pytest.raises(ValueError, match="in-memory X"):
        GBMAPRegressor(f0=LinearRegression()).fit(Xd, y)


def test_f0_is_part_of_the_checkpoint_fingerprint(rng, tmp_path):
    X, y = bumpy(rng)
    GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0, checkpoint=tmp_path).fit(X, y)
    with pytest.raises(ValueError, match="checkpoint.*f0"):
        GBMAPRegressor(n_boosts=2, beta=5.0, random_state=0, checkpoint=tmp_path, f0=1.0).fit(X, y)


############################################################################################
# local linear coefficients (Section 5.2) and the path distance (Eq. 6)


def test_local_coef_is_the_gradient_of_predict(rng):
    X, y = bumpy(rng)
    reg = GBMAPRegressor(n_boosts=5, beta=3.0, random_state=0).fit(X, 100.0 * y)
    clf = GBMAPClassifier(n_boosts=5, beta=3.0, random_state=0).fit(X, y > 0.8)
    x = X[:25]
    for model, f in ((reg, reg.predict), (clf, clf.decision_function)):
        G = model.local_coef(x)
        assert G.shape == (25, 4)
        h = 1e-4 * X.std(0)
        fd = np.stack(
            [
                (f(x + h[k] * np.eye(4)[k]) - f(x - h[k] * np.eye(4)[k])) / (2 * h[k])
                for k in range(4)
            ],
            axis=1,
        )
        np.testing.assert_allclose(G, fd, rtol=1e-5, atol=1e-8 * np.abs(fd).max())
        np.testing.assert_allclose(
            model.local_coef(x, standardized=True), G * model.scale_, rtol=1e-12
        )
    # local: the coefficients differ between samples (a global linear model would not)
    assert np.ptp(reg.local_coef(X)[:, 0]) > 0.5 * np.abs(reg.local_coef(X)[:, 0]).max()


def test_local_coef_lazy_on_dask_and_labelled_on_xarray(rng):
    X, y = bumpy(rng, n=120, p=6)
    model = GBMAPRegressor(n_boosts=3, beta=5.0, random_state=0).fit(X, y)
    with count_computes(0):
        G = model.local_coef(da.from_array(X, chunks=50))
    np.testing.assert_allclose(G.compute(), model.local_coef(X), rtol=1e-12)
    field = xr.DataArray(
        X.reshape(120, 2, 3),
        dims=("time", "lat", "lon"),
        coords={"time": np.arange(120), "lat": [1.0, 2.0], "lon": [0.0, 1.0, 2.0]},
    )
    Gx = model.local_coef(field)
    assert Gx.dims == ("time", "lat", "lon")
    np.testing.assert_allclose(Gx.values.reshape(120, 6), model.local_coef(X), rtol=1e-12)


def fine_total_variation(model, x, x2, n=20_001):
    t = np.linspace(0.0, 1.0, n)[:, None]
    return np.abs(np.diff(model.predict(x + t * (x2 - x)))).sum()


def test_path_distance_is_the_total_change_along_the_segment(rng):
    X, y = bumpy(rng)
    model = GBMAPRegressor(n_boosts=6, beta=5.0, random_state=0).fit(X, y)
    A, B = X[:20], X[20:40][::-1]
    d = model.path_distance(A, B)
    ref = np.array([fine_total_variation(model, a, b) for a, b in zip(A, B, strict=True)])
    np.testing.assert_allclose(d, ref, rtol=1e-6)
    # Eq. 8: |f(x') - f(x)| <= d_path <= d_emb, both strict somewhere
    change = np.abs(model.predict(A) - model.predict(B))
    emb = np.abs(model.transform(A) - model.transform(B)).sum(axis=1)
    assert np.all(change <= d + 1e-9) and np.all(d <= emb + 1e-9)
    assert np.any(d > change + 1e-3) and np.any(d < emb - 1e-3)
    # one learner is monotone along any line: the three are equal
    one = GBMAPRegressor(n_boosts=1, beta=5.0, random_state=0).fit(X, y)
    np.testing.assert_allclose(
        one.path_distance(A, B), np.abs(one.predict(A) - one.predict(B)), rtol=1e-9
    )
    with count_computes(0):
        lazy = model.path_distance(da.from_array(A, chunks=7), B)
    np.testing.assert_allclose(lazy.compute(), d, rtol=1e-12)


############################################################################################
# Table 4 on the datasets that ship in packages (slow)


@pytest.fixture(scope="session")
def weka(tmp_path_factory):
    """The example data of Debian's ``weka`` package (DIABETES, GERMAN-CREDIT): installed, or
    its .deb downloaded with apt and unpacked (6.6 MB, without its Java dependencies)."""
    import shutil
    import subprocess

    for where in (os.environ.get("DCFA_WEKA_EXAMPLES", ""), "/usr/share/doc/weka/examples"):
        if where and os.path.exists(os.path.join(where, "diabetes.arff")):
            return where
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        pytest.skip("DIABETES / GERMAN-CREDIT ship in Debian's 'weka' package: no apt here")
    into = tmp_path_factory.mktemp("weka")
    get = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]  # a boot-time apt run may hold the lock
    for attempt in range(2):  # a fresh machine has no package lists yet: update, then retry
        got = subprocess.run([*get, "download", "weka"], cwd=into, capture_output=True, text=True)
        if got.returncode == 0 or attempt:
            break
        subprocess.run([*get, "update"], capture_output=True)
    debs = list(into.glob("weka_*.deb"))
    if not debs:
        pytest.skip(f"DIABETES / GERMAN-CREDIT: 'apt-get download weka' failed: {got.stderr}")
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(into / "root")], check=True)
    where = str(into / "root" / "usr" / "share" / "doc" / "weka" / "examples")
    os.environ["DCFA_WEKA_EXAMPLES"] = where
    return where


WEKA_SETS = ("diabetes", "german-credit")
# the tests that may run apt-get (the weka fixture) never run beside another one: pyproject
APT = pytest.mark.xdist_group("apt")

# (KNN, KNN-GBMAP) of Table 4, and the spread of one run of dcfa's protocol (the standard
# deviation over 25 folds or 5 draws in benchmarks/bench_gbmap_paper.py)
TABLE4_KNN = {
    "breast-cancer": ((0.947, 0.982), (0.013, 0.016)),
    "autompg": ((0.840, 0.855), (0.037, 0.027)),
    "concrete": ((0.634, 0.871), (0.036, 0.020)),
    "diabetes": ((0.727, 0.784), (0.029, 0.031)),
    "german-credit": ((0.703, 0.713), (0.030, 0.027)),
    "synth-cos-r": ((0.411, 0.748), (0.046, 0.074)),
    "synth-cos-c": ((0.593, 0.698), (0.018, 0.016)),
}
# GBMAP settings, fixed (the paper tunes them by a 50-draw random search): the drift
# experiment's m = 20, beta = 5 on real data, the top of the searched m on SYNTH-COS
KNN_GBMAP = dict(n_boosts=20, beta=5.0, max_iter=200)
KNN_GBMAP_SYNTH = dict(n_boosts=50, beta=10.0, max_iter=400)


def _check_column(name, col, runs, table, differences=None):
    """The paper's number is a plausible single run of dcfa's protocol: within two spreads
    of one run (the larger of this sample's and the benchmark's) of dcfa's mean, widened by
    two standard errors of that mean (the benchmark's criterion). A documented difference:
    dcfa's mean stays where docs/evidence/gbmap.md says, within the same tolerance."""
    (paper, spread), runs = (table[name][0][col], table[name][1][col]), np.asarray(runs)
    sd = max(runs.std(ddof=1), spread)
    tol = max(2 * sd * (1 + 1 / np.sqrt(runs.size)), 0.005)
    known = (differences or {}).get((name, col))
    target = paper if known is None else known[0]
    assert abs(runs.mean() - target) <= tol, (name, col, runs.mean(), tol, target, known)


def _knn_scores(name, repeats):
    X, y = load_gbmap_dataset(name)
    X = X.to_numpy()
    clf = name in ("breast-cancer", "diabetes", "german-credit")
    euclid = make_pipeline(
        StandardScaler(), (KNeighborsClassifier if clf else KNeighborsRegressor)(10)
    )
    gbmap = (GBMAPKNeighborsClassifier if clf else GBMAPKNeighborsRegressor)(
        10, random_state=0, **KNN_GBMAP
    )
    folds = StratifiedKFold if clf else KFold
    return [
        np.concatenate(
            [
                cross_val_score(est, X, y, cv=folds(5, shuffle=True, random_state=r))
                for r in range(repeats)
            ]
        )
        for est in (euclid, gbmap)
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "breast-cancer",
        "autompg",
        "concrete",
        pytest.param("diabetes", marks=APT),
        pytest.param("german-credit", marks=APT),
    ],
)
def test_table4_knn_columns_real_data(name, request):
    """Table 4, KNN and KNN-GBMAP (k = 10): accuracy / R^2 over 2 x 5-fold CV on the
    standardised data (the paper leaves the test protocol open)."""
    if name in WEKA_SETS:
        request.getfixturevalue("weka")
    for col, scores in enumerate(_knn_scores(name, repeats=2)):
        _check_column(name, col, scores, TABLE4_KNN)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_table4_knn_columns_synth_cos(task):
    """Table 4 on SYNTH-COS-R/C(1e4, 20): 80/20 split of three draws of the data (the
    random direction u changes the difficulty)."""
    clf = task == "classification"
    name = "synth-cos-c" if clf else "synth-cos-r"
    scores = []
    for seed in range(3):
        X, y = make_synth_cos(10_000, 20, task=task, random_state=seed)
        Xtr, Xte, ytr, yte = X[:8000], X[8000:], y[:8000], y[8000:]
        knn = (KNeighborsClassifier if clf else KNeighborsRegressor)(10).fit(Xtr, ytr)
        cls = GBMAPKNeighborsClassifier if clf else GBMAPKNeighborsRegressor
        gb = cls(10, random_state=0, **KNN_GBMAP_SYNTH).fit(Xtr, ytr)
        scores.append((knn.score(Xte, yte), gb.score(Xte, yte)))
    scores = np.array(scores)
    for col in (0, 1):
        _check_column(name, col, scores[:, col], TABLE4_KNN)
    # the paper's point: the embedding distance beats the Euclidean one on every draw
    assert np.all(scores[:, 1] > scores[:, 0]) and np.mean(scores[:, 1] - scores[:, 0]) > 0.04


# (AUC-GBMAP, AUC-EUCLID) of Table 4, and the spread of one run of drift_experiment (the
# standard deviation over 10 seeds in benchmarks/bench_gbmap_paper.py)
TABLE4_AUC = {
    "autompg": ((0.94, 0.91), (0.008, 0.027)),
    "concrete": ((0.73, 0.81), (0.068, 0.058)),
    "breast-cancer": ((0.51, 0.59), (0.028, 0.045)),
    "diabetes": ((0.63, 0.75), (0.038, 0.118)),
    "german-credit": ((0.65, 0.63), (0.042, 0.104)),
}
# Not reproduced: dcfa's mean over 10 seeds (docs/evidence/gbmap.md), and why. The paper leaves
# open which half is a and the classification ground truth, and its covariate search found no
# drift on BREAST-CANCER; the authors' code has no drift experiment to settle them.
_BETTER = "dcfa's GBMAP drifter ranks the drifting points better than published"
AUC_DIFFERENCES = {
    ("autompg", 0): (0.986, _BETTER),
    ("breast-cancer", 0): (0.965, _BETTER + "; dcfa's split finds drift, the paper's none"),
    ("breast-cancer", 1): (0.899, "dcfa's split finds drift, the paper's none"),
    ("diabetes", 0): (0.878, _BETTER),
    ("german-credit", 0): (0.905, _BETTER),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, seeds",
    [
        ("autompg", 3),
        ("concrete", 3),
        ("breast-cancer", 3),
        pytest.param("diabetes", 3, marks=APT),
        pytest.param("german-credit", 2, marks=APT),
    ],
)
def test_table4_drift_auc(name, seeds, request):
    """Table 4, AUC-GBMAP and AUC-EUCLID: the drift experiment with the paper's settings
    (m = 20, beta = 5, lambda = 1e-3, 200 iterations, k = 5, 95 % quantile) over random
    a1/a2 splits and GBMAP seeds."""
    if name in WEKA_SETS:
        request.getfixturevalue("weka")
    X, y = load_gbmap_dataset(name)
    aucs = np.array(
        [
            [r.auc_gbmap, r.auc_euclid]
            for r in (drift_experiment(X, y, random_state=s) for s in range(seeds))
        ]
    )
    for col in (0, 1):
        _check_column(name, col, aucs[:, col], TABLE4_AUC, AUC_DIFFERENCES)
    if name in ("autompg", "concrete"):  # the paper's reading: an informative drifter
        assert aucs[:, 0].mean() > 0.75


############################################################################################
# Table 4's GBMAP column on SYNTH-COS at the paper's size, on a cluster (slow)

# SYNTH-COS(2e5, 200) split 50/50 (Table 5's protocol; Table 4 does not state its split).
# beta = 10: the paper tunes beta in 1..20 and does not report the value; 10 is the authors'
# code's softplus_scale in its feature experiments. lambda = 1e-3 and tol = 1e-3 as in the
# paper and its code; max_iter = 100 (Table 3's) never binds here (at most ~90 iterations).
SYNTH_FULL = dict(beta=10.0, penalty=1e-3, max_iter=100, tol=1e-3, random_state=0)


def _staged(model, Xte):
    """Score after each step ``k``: ``f_0 + sum_{j <= k} phi_j`` (stagewise boosting: the
    first ``k`` learners of the fit are the fit with ``n_boosts = k``)."""
    E = model.transform(Xte).compute()
    full = (model.predict if isinstance(model, GBMAPRegressor) else model.decision_function)(Xte)
    S = np.cumsum(E, axis=1)
    return np.asarray(full.compute() if isinstance(full, da.Array) else full)[:, None] - (
        S[:, -1:] - S
    )


@pytest.fixture(scope="module")
def own_cluster():
    """A 2-process LocalCluster for the paper-size fits alone: the session's ``client`` has
    2 GiB workers that earlier tests of the same xdist worker have used, and the fits' rows
    (160 MB a worker) are held by actors, out of reach of its spilling."""
    with local_client() as c:
        yield c


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 4-5 minutes beside one other test process, 3-4 alone
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_table4_gbmap_synth_cos_at_the_paper_size_on_a_cluster(own_cluster, task):
    """Table 4, GBMAP on SYNTH-COS-R and SYNTH-COS-C (n = 2e5, p = 200): test R^2 0.452
    (Table 5: 0.16 / 0.23 / 0.34 / 0.46 at m = 8 / 16 / 32 / 64) and accuracy 0.583 (Table 5:
    0.59 / 0.61 at m = 8 / 16), on Dask input generated and persisted on a 2-process
    LocalCluster. One fit per task (m = 64, m = 16); the scores at smaller m are read from
    the embedding.

    Measured on this draw (seed 0; NumPy in memory and Dask differ in the third digit, by
    the order of the sums): R^2 0.10 / 0.19 / 0.31 / 0.434-0.439 at m = 8 / 16 / 32 / 64,
    accuracy 0.57 / 0.59 at m = 8 / 16. The regression threshold holds for this draw only:
    draws 1 and 2 (another X and direction u) give R^2 0.408 and 0.414 at m = 64, so dcfa
    is 0.02-0.05 below Table 5 there; their accuracies at m = 16 are 0.599 and 0.590
    (``benchmarks/bench_gbmap_paper.py --synth-full``). At small m a few learners capture
    only the largest terms of u (R^2 ~ 0.8 max_j u_j^2 at m = 2), so the early scores
    depend on the draw. With the authors' unscaled starting points (before
    dcfa.gbmap._solver.initial_point scaled them to the fan-in): R^2 -0.19 at m = 64 and
    accuracy 0.505 at m = 16.

    Slow: 4 943 + 676 L-BFGS evaluations. The two signs' runs of a step share passes over
    the rows, 3 030 + 384 of them, and a pass is one direct call to the actor holding each
    worker's rows (``dcfa.gbmap._rows.HeldData``): 188 s + 27 s on this 2-core machine
    otherwise idle (295 s + 40 s with a graph through the scheduler per pass, 240-390 s +
    33-64 s with one per evaluation, on a loaded machine); 222 s + 40 s beside another
    pytest process running the job, process, safety, S3 and paper tests (passes of 0.02-0.3 s,
    none longer). It runs on a cluster of its own, started first (tests/conftest.py FIRST).
    """
    import dask
    from distributed import wait

    n, p, h = 200_000, 200, 100_000
    X, y = make_synth_cos(n, p, task=task, random_state=0, chunks=h // 2)
    X, y = dask.persist(X, y)  # generated on the workers, two train chunks
    wait([X, y])
    y = y.compute()
    Xtr, Xte, ytr, yte = X[:h], X[h:], y[:h], y[h:]
    if task == "regression":
        model = GBMAPRegressor(n_boosts=64, **SYNTH_FULL).fit(Xtr, ytr)
        r2 = 1 - ((yte[:, None] - _staged(model, Xte)) ** 2).mean(0) / yte.var()
        print("R^2 at m = 8/16/32/64:", r2[[7, 15, 31, 63]])
        assert r2[63] >= 0.43  # Table 4: 0.452 (Table 5: 0.46 +- 0)
        assert r2[[7, 15, 31]] == pytest.approx([0.10, 0.19, 0.31], abs=0.02)
        assert np.all(np.diff(r2[3:]) > 0)  # every learner adds skill on the test half
    else:
        model = GBMAPClassifier(n_boosts=16, **SYNTH_FULL).fit(Xtr, ytr)
        acc = (np.where(_staged(model, Xte) > 0, 1.0, -1.0) == yte[:, None]).mean(0)
        print("accuracy at m = 8/16:", acc[[7, 15]])
        assert acc[15] == pytest.approx(np.mean(np.asarray(model.predict(Xte)) == yte))
        assert acc[15] >= 0.57  # Table 4: 0.583 (Table 5: 0.61 at m = 16)
        assert acc[7] >= 0.55
    assert model.persisted_ and len(scheduler_workers(own_cluster)) == 2

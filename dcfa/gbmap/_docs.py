"""The numpy-style docstring sections that every GBMAP estimator shares.

The public estimators (:mod:`dcfa.gbmap._estimator`, :mod:`dcfa.gbmap._neighbors`) write
``__doc__ = _doc(template)``; :func:`_doc` fills the template's ``%(parameters)s``,
``%(attributes)s``, ``%(notes)s`` and ``%(references)s`` with the sections below.
"""

from __future__ import annotations

_SHARED_NOTES = """
    The model (Patron et al. 2024, Eqs. 1-5) is ``f(x) = f_0(x) + sum_j f_j(x)`` with
    weak learners

    .. math:: f_j(x) = a_j + b_j\\, g_\\beta(w_j^\\top [z(x), 1]), \\qquad
              g_\\beta(u) = \\log(1 + e^{\\beta u}) / \\beta,

    where ``z(x)`` are the standardised features and ``[z, 1]`` appends the intercept column.
    Step ``j`` minimises ``mean_i l(y_i, F_{j-1}(x_i) + f_j(x_i)) + lambda * mean(w_j**2)``
    (Eqs. 3-4, the mean over all ``p + 1`` weights) by L-BFGS for ``b_j = +1`` and ``b_j = -1``
    from the same random start, and keeps the sign with the lower *unpenalised* training loss
    (as the authors' code does). Each evaluation of the objective and its gradient is one
    map-reduce over the row chunks and one ``dask.compute``; the ensemble score ``F`` is a
    persisted Dask array chunked like ``X``'s rows (:mod:`dcfa.gbmap._rows`).

    Where this implementation differs from, or fills in, the paper:

    * L-BFGS is SciPy's L-BFGS-B, not JAXOPT's (other line search and history); it stops,
      like the authors' code, when the gradient's L2 norm is at most ``tol`` or after
      ``max_iter`` iterations (and when no decrease is possible at machine precision).
    * Starting points ``a ~ N(0, 1)``, ``[w, c] ~ N(0, I_{p+1} / (p + 1))``: the weights are
      scaled to the fan-in, where the authors' code draws ``N(0, I_{p+1})`` (the paper states
      none). Unscaled, the softplus starts far in its flat or steep part for large ``p`` and
      the fits stop early (at ``p = 200`` the regressor overfits and the classifier's units
      switch off; :func:`dcfa.gbmap._solver.initial_point`). They are drawn from
      ``numpy.random.default_rng([seed, step, restart])`` with ``seed`` drawn once from
      ``random_state``, so a resumed fit restarts from the same points.
    * ``n_restarts > 1`` refits every step from that many starts and keeps the best (the
      authors' "width" refit); their default "depth" refit of the whole sequence is not
      provided.
    * Features are standardised with the population standard deviation; a constant column
      gets scale 1 (it standardises to 0).
    * Learners are not "shrunk" (no learning rate), as in the paper.
    * ``f0`` (Section 5.1): the learners boost from the initial model's output, so they
      model its residuals; ``f_0`` is not an embedding coordinate (Eq. 5), and the distances
      (Eqs. 6-7), :meth:`local_coef` and the embedding cover ``sum_j f_j`` only.
    * Non-finite values in a Dask ``X`` are detected by the first pass (the standardisation
      moments, one compute) and raise before any optimisation.
"""

_REFERENCES = """
    References
    ----------
    A. Patron, A. Prasad, H. P. H. Luu, K. Puolamäki. "Gradient Boosting Mapping for
    Dimensionality Reduction and Feature Extraction", arXiv:2405.08486 (2024); Discovery
    Science 2024.
"""

_SHARED_PARAMETERS = """
    n_boosts : int, default=10
        Number of weak learners ``m``, also the embedding dimension.
    beta : float, default=10.0
        Softplus sharpness ``beta > 0`` (ReLU as ``beta -> inf``). It sets how small a
        learner can be and still bend: ``g_beta(u) = g_1(beta u) / beta``, so the softplus
        bends over a range of about ``1 / beta`` of its input ``u = w . [z, 1]``, while a
        learner's output, ``b g(u)`` with a slope of at most 1, spreads about as much as
        ``u``. On the standardised target (or the logit) a learner that explains a share
        of size ``s`` of it (in standard deviations) is nonlinear only if ``beta s`` is at
        least about 1. Boosting asks every learner for a fraction of the residual, so
        ``beta = 1`` leaves only learners as large as the whole target any bend: the
        others fit, as Lemma 1 says, a ridge regression that the first step has already
        made, and L-BFGS stops there (the gradient's norm falls below ``tol`` on that
        plateau). With the default ``beta = 10`` learners bend down to about a tenth of the
        target's spread. The starting point ``u ~ N(0, 1)`` (see Notes) then starts each
        learner in its nonlinear range. The paper tunes ``beta`` in 1-20 and runs its
        drift experiments with 5; the authors' code uses 10. A step that lowers the
        training loss by less than 0.1 % of the loss before the first step is reported
        (:class:`InactiveLearnersWarning`, ``inactive_steps_``).
    penalty : float, default=0.1
        Ridge weight ``lambda`` on ``mean(w**2)`` over the ``p + 1`` weights of a learner
        (the intercept-column weight included, the offset ``a`` not). The paper's runs use
        1e-3 on tables of thousands of rows; on a few hundred samples, as monthly climate
        records are, 1e-3 fits the training rows' noise. 1 suits noisy, nearly linear
        records better (the demo's and the example job's), but smooths clean nonlinear
        targets away (the GBMAP guide's table: accuracy 0.78 at 1, 0.90 at 0.1).
    max_iter : int, default=100
        Maximum L-BFGS iterations per learner and sign.
    tol : float, default=1e-3
        L-BFGS stops when the L2 norm of the objective's gradient is at most ``tol``.
    n_restarts : int, default=1
        Random starting points per step; the learner with the lowest training loss is kept.
    random_state : int, RandomState instance or None, default=None
        Seeds the starting points.
    persist : "auto" or bool, default="auto"
        Dask input only: keep the standardised ``X`` (float64) and ``y`` in (cluster) memory
        during the fit. ``"auto"`` persists when they take less than half of the workers'
        memory limits (or of the machine's available memory without a distributed client);
        otherwise every L-BFGS evaluation re-reads ``X`` from its source. The ensemble score
        (``n`` floats) is always persisted.
    checkpoint : str, path-like or None, default=None
        A directory. After each boosting step the learners so far are written to
        ``<checkpoint>/gbmap_checkpoint.npz`` atomically (temporary file + ``os.replace``).
        A fit that finds a checkpoint of the same estimator, parameters (but ``n_boosts``,
        ``persist``, ``checkpoint``; an estimator ``f0`` is compared as fitted) and data
        (shape, column moments, every target value, and a digest of the rows of ``X`` in
        their order, one more pass) resumes after its last step and
        gives the same model as an uninterrupted fit; a mismatching checkpoint raises
        ``ValueError``.
    sample_dim : str, default="time"
        The sample dim of xarray input; every other dim is stacked into features.
    f0 : None, float or scikit-learn estimator, default=None
        The initial model ``f_0`` of Eq. (1) that the learners boost from (Section 5.1).
        ``None``: the default (``f_0 = 0`` on the standardised target, i.e. the target mean
        for the regressor; 0 for the classifier's logit). A float: a constant ``f_0``, in
        target units (regressor) or logit units (classifier). An estimator: its output on the
        raw ``X``; ``predict`` for a regressor, and for a classifier (whose ``classes_`` must
        be the same) ``decision_function``, else the logit of ``predict_proba``; a regressor
        given to the classifier has its ``predict`` taken as the logit, not a probability. A
        fitted estimator is used as is; an unfitted one is cloned and fitted on the training
        data first (a regressor given to the classifier on the +1 / -1 coding of the two
        classes, ``classes_[1]`` as +1; :func:`sklearn.base.clone`, which unfits it, so
        refits it in every cross-validation fold; wrap a pre-trained model in
        :class:`sklearn.frozen.FrozenEstimator` to keep it fixed).
"""

_SHARED_ATTRIBUTES = """
    coef_ : ndarray of shape (n_boosts, ``n_features_in_``)
        ``w_j``: weights of the **standardised** features ``(x - mean_) / scale_`` inside
        the softplus of each learner.
    bias_ : ndarray of shape (n_boosts,)
        ``c_j``: weight of the intercept column (the bias inside the softplus).
    intercept_ : ndarray of shape (n_boosts,)
        ``a_j``: additive offset of each learner (standardised target units for the
        regressor).
    signs_ : ndarray of shape (n_boosts,)
        ``b_j`` in {-1, +1}.
    mean_, scale_ : ndarray of shape (``n_features_in_``,)
        Standardisation of ``X``.
    train_loss_ : ndarray of shape (n_boosts,)
        Unpenalised mean training loss after each step (standardised units for regression).
    initial_loss_ : float
        The mean training loss of ``f0`` alone, before the first step (1 for the regressor
        with the default ``f0``: the standardised target's variance).
    inactive_steps_ : ndarray of bool of shape (n_boosts,)
        Steps whose learner lowered the training loss by less than 0.1 % of
        ``initial_loss_``: switched off (flat, or linear where an earlier learner already
        is). ``fit`` warns (:class:`InactiveLearnersWarning`) when there is any.
    step_n_iter_, step_n_evals_ : ndarray of shape (n_boosts,)
        L-BFGS iterations and objective evaluations of each step (both signs, all restarts).
    n_iter_ : int
        Total L-BFGS iterations, ``step_n_iter_.sum()``.
    n_evals_ : int
        Objective evaluations made by this call to ``fit``, summed over the L-BFGS runs of
        each step; steps loaded from a checkpoint are not counted. The runs of a step (both
        signs, all restarts) share passes over the data: a step makes as many passes (on
        Dask input, ``dask.compute`` calls) as its longest run has evaluations.
    persisted_ : bool
        Whether the standardised data were persisted during the fit (False when there was
        nothing to fit: NumPy input, or every step loaded from the checkpoint).
    train_embedding_ : ndarray of shape (n_samples, n_boosts)
        Embedding of the training data, kept for :meth:`drift_score` (and the neighbours of
        the k-NN estimators): ``n x m`` floats in memory, computed at the end of the fit (on
        Dask data, one more pass over ``X``), so that later queries neither read ``X``'s
        source again nor change when it does.
    f0_ : None, float or estimator
        The initial model used (``f0``, or the clone of it fitted by ``fit``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Only when ``X`` has string column names (a pandas DataFrame).
"""


def _doc(template: str) -> str:
    return (
        template.replace("%(parameters)s", _SHARED_PARAMETERS.strip("\n"))
        .replace("%(attributes)s", _SHARED_ATTRIBUTES.strip("\n"))
        .replace("%(notes)s", _SHARED_NOTES.strip("\n"))
        .replace("%(references)s", _REFERENCES.strip("\n"))
    )

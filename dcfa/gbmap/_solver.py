"""GBMAP fitting: the boosting loop (the rows it passes over: :mod:`dcfa.gbmap._rows`).

One boosting step fits a weak learner for ``b = +1`` and ``b = -1`` (from each of
``n_restarts`` starting points) by L-BFGS (``scipy.optimize.minimize(method="L-BFGS-B",
jac=True)`` on the driver) and keeps the run with the lower unpenalised training loss.
Objective values are computed by map-reduce over the row chunks (dask-glm's ``lbfgs``), one
*pass* evaluating the pending point of every run of the step:

* **map**: :func:`dcfa.gbmap._losses.chunk_sums_many` on each row chunk of the standardised
  features ``Z``, the target ``y`` and the current ensemble score ``F`` (``p + 3`` numbers
  out per run);
* **reduce**: a tree sum of those arrays, its last level on the driver;
* **one** compute per pass (one call of the scheduler, :func:`dcfa.gbmap._rows._evaluate`);
  the driver adds
  the mean and the ridge term of each run (:func:`dcfa.gbmap._losses.objective`).

The runs of a step go in lockstep (:class:`_Lockstep`): each ``minimize`` runs in its own
thread, and its objective function posts its point and waits; the driver's thread evaluates
the points of all unfinished runs in one pass, so a step costs as many round trips to the
cluster (and reads of ``Z``) as its longest run has evaluations, not the sum over its runs.
Each run sees exactly the values and gradients of a fit on its own (the kernel does each
run's arithmetic unchanged), so the learners do not depend on the batching or on thread
scheduling; :data:`LOCKSTEP` ``= False`` runs them one after the other (the reference in
the tests), as small NumPy rows do: there a pass is no round trip, and handing the points
between threads would cost more than it saves (:data:`dcfa.gbmap._rows.SHARED_PASS_BYTES`).

``F`` is a Dask array chunked like ``X``'s rows and persisted; after each step it is replaced by
``F + f_j(Z)``, persisted again. ``Z`` and ``y`` are persisted too when they fit in memory
(``persist="auto"``), else ``Z`` is recomputed from its source (standardised on the fly) at
every evaluation. On a ``distributed`` cluster, persisted rows are served by one actor per
worker (:class:`dcfa.gbmap._rows.HeldData`): a pass is then one direct call per worker
instead of a graph through the scheduler, with the same numbers. In memory (NumPy input)
the same kernel runs on the whole array.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.optimize import minimize

from dcfa._compute import one_blas_thread
from dcfa.gbmap._learners import Learners
from dcfa.gbmap._losses import (
    objective,
    penalty_value,
)

__all__ = ["boost", "fit_learner", "initial_point"]

logger = logging.getLogger("dcfa")

# L-BFGS-B's relative-decrease test, at machine precision: the fit stops on the gradient norm
# (``tol``) or ``max_iter``, as in the paper's code, not on a slow decrease.
FTOL = float(np.finfo(np.float64).eps)
# Run the L-BFGS fits of a step in lockstep, sharing passes over the data (module docstring);
# False runs them one at a time, with the same results and more passes.
LOCKSTEP = True


############################################################################################
# the boosting loop


@dataclass
class _Counter:
    evals: int = 0  # objective evaluations, summed over the runs
    passes: int = 0  # passes over the data (on Dask data, computes) that made them


def fit_learner(evaluate, x0: np.ndarray, *, n: int, penalty: float, max_iter: int, tol: float):
    """L-BFGS for one learner from ``x0``; ``evaluate(theta)`` gives the data's sums there.

    ``evaluate`` returns the total of :func:`dcfa.gbmap._losses.chunk_sums` over the ``n``
    rows for this learner's sign (one pass over the data, or a share of one: :class:`_Lockstep`).
    Stops when the gradient's L2 norm at an iterate is at most ``tol`` (JAXOPT's criterion,
    used by the authors' code), after ``max_iter`` iterations, or when an iteration cannot
    decrease the objective any more (``ftol`` at machine precision, or a failed line search).
    SciPy's own ``gtol`` tests the largest gradient component, up to ``sqrt(p + 2)`` times
    looser; it is switched off.

    Returns the scipy result and the unpenalised mean training loss at its solution.
    """
    last: dict = {}

    def fun(theta):
        value, grad = objective(evaluate(theta), theta, n, penalty)
        last["theta"], last["grad"] = np.array(theta, copy=True), grad
        return value, grad

    def stop_on_gradient_norm(intermediate_result):
        theta = last.get("theta")
        if theta is not None and np.array_equal(theta, intermediate_result.x):
            if np.linalg.norm(last["grad"]) <= tol:
                raise StopIteration

    res = minimize(
        fun,
        x0,
        jac=True,
        method="L-BFGS-B",
        callback=stop_on_gradient_norm,
        options={"maxiter": max_iter, "gtol": 0.0, "ftol": FTOL},
    )
    unpenalised = float(res.fun) - penalty_value(res.x, penalty)
    return res, unpenalised


class _Aborted(Exception):
    """Ends a run's thread at its next evaluation once another run or the driver failed."""


class _Lockstep:
    """Runs ``k`` L-BFGS fits in threads, their evaluations batched into shared passes.

    Run ``i`` calls ``evaluate(i, theta)`` from its thread: the point is posted and the run
    waits. The driver's thread (:meth:`run`) waits until every unfinished run has posted,
    computes all posted points with one call of ``evaluate_many(indices, thetas)`` (one pass
    over the data) and hands each run its sums. A finished run is no longer waited for, so
    the longest run ends alone. Runs never see each other's numbers: each gets the sums of its
    own points in its own order, so the results depend neither on the batching nor on how the
    threads are scheduled.

    The driver's thread makes every compute (progress display, Ctrl-C and Dask's client all
    live there). Any exception ends the whole batch: an error in a run (or in the driver's
    evaluation, or a KeyboardInterrupt while it waits) stops the other runs at their next
    evaluation, the threads are joined, and the error is raised in the driver's thread.
    """

    def __init__(self, evaluate_many, k: int):
        self._evaluate_many = evaluate_many
        self._cond = threading.Condition()
        self._running = set(range(k))
        self._posted: dict[int, np.ndarray] = {}
        self._sums: dict[int, np.ndarray] = {}
        self._stop = False

    def evaluate(self, i: int, theta: np.ndarray) -> np.ndarray:
        """Run ``i``'s objective sums at ``theta`` (called from its thread)."""
        with self._cond:
            if self._stop:
                raise _Aborted
            self._posted[i] = theta
            self._cond.notify_all()
            while i not in self._sums:
                if self._stop:
                    raise _Aborted
                self._cond.wait()
            return self._sums.pop(i)

    def run(self, fits: list) -> list:
        """``[fits[i](partial(self.evaluate, i)) for i]``, run in lockstep; their results."""
        results: list = [None] * len(fits)
        errors: list = [None] * len(fits)

        def target(i: int) -> None:
            try:
                results[i] = fits[i](partial(self.evaluate, i))
            except _Aborted:
                pass
            except BaseException as exc:  # re-raised in the driver's thread
                errors[i] = exc
                with self._cond:
                    self._stop = True
            finally:
                with self._cond:
                    self._running.discard(i)
                    self._cond.notify_all()

        threads = [
            threading.Thread(target=target, args=(i,), name=f"dcfa-gbmap-run-{i}", daemon=True)
            for i in range(len(fits))
        ]
        for thread in threads:
            thread.start()
        try:
            self._serve()
        finally:
            with self._cond:
                self._stop = True
                self._cond.notify_all()
            for thread in threads:
                thread.join()
        for error in errors:
            if error is not None:
                raise error
        return results

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._stop and len(self._posted) < len(self._running):
                    self._cond.wait()
                if self._stop or not self._running:
                    return
                batch = sorted(self._posted.items())
                self._posted.clear()
            indices = [i for i, _ in batch]
            sums = self._evaluate_many(indices, [theta for _, theta in batch])
            with self._cond:
                self._sums.update(zip(indices, sums, strict=True))
                self._cond.notify_all()


def initial_point(seed: int, step: int, restart: int, p: int) -> np.ndarray:
    """``a ~ N(0, 1)``, ``[w, c] ~ N(0, I_{p+1} / (p + 1))``, a fresh draw per step and restart.

    The weights are scaled to the fan-in (LeCun's initialisation), so the pre-activation
    ``w . z + c`` of a standardised row has variance ~1 whatever ``p``. **A deviation from the
    authors' code**, which draws ``[w, c] ~ N(0, I_{p+1})`` (``init_network_params1`` in
    github.com/edahelsinki/gbmap; the paper does not state the initialisation). With that draw
    the pre-activation has standard deviation ``sqrt(p + 1)`` (14 at ``p = 200``): the
    softplus starts linear on about half the rows and flat on the rest, with outputs of tens
    of target units, and L-BFGS ends in poor points. On SYNTH-COS(2e5, 200) with
    ``beta = 10`` (50/50 split, seed 0) the unscaled draw gives test R^2 -0.19 at m = 64 (the
    regressor overfits) and accuracy 0.505 at m = 16 (the units switched off, the training
    loss stuck at log 2); this draw gives 0.434 and 0.594, two other draws of the data
    0.41 and 0.59-0.60 (Tables 4-5: 0.452-0.46 and 0.583-0.61).

    Drawn from ``numpy.random.default_rng([seed, step, restart])`` so a resumed fit draws the
    same starting points as an uninterrupted one.
    """
    x = np.random.default_rng([seed, step, restart]).normal(size=p + 2)
    x[1:] /= np.sqrt(p + 1.0)
    return x


def boost(
    data,
    *,
    n_boosts: int,
    beta: float,
    penalty: float,
    max_iter: int,
    tol: float,
    n_restarts: int,
    seed: int,
    loss: str,
    activation: str,
    learners: Learners,
    callback=None,
) -> tuple[Learners, int]:
    """Stagewise boosting from the ``learners`` already fitted up to ``n_boosts`` learners.

    ``callback(learners)`` runs after each step (checkpointing). Returns the learners and the
    number of objective evaluations made, summed over the runs (the runs of a step share
    passes over the data, each one compute on Dask data: :class:`_Lockstep`).
    """
    counter = _Counter()
    start = len(learners)
    # One BLAS thread on the driver: L-BFGS-B's tiny products; the in-memory kernel's
    # products are memory-bound and lose nothing
    with one_blas_thread():
        for j in range(start, n_boosts):
            learners = _step(
                data,
                j,
                learners,
                counter,
                n_boosts=n_boosts,
                beta=beta,
                penalty=penalty,
                max_iter=max_iter,
                tol=tol,
                n_restarts=n_restarts,
                seed=seed,
                loss=loss,
                activation=activation,
            )
            if callback is not None:
                callback(learners)
    return learners, counter.evals


def _alone(evaluate_many, i: int, theta: np.ndarray) -> np.ndarray:
    """Run ``i``'s sums at ``theta`` in a pass of its own."""
    return evaluate_many([i], [theta])[0]


def _step(
    data,
    j: int,
    learners: Learners,
    counter: _Counter,
    *,
    n_boosts: int,
    beta: float,
    penalty: float,
    max_iter: int,
    tol: float,
    n_restarts: int,
    seed: int,
    loss: str,
    activation: str,
) -> Learners:
    """Boosting step ``j``: both signs from each start, keep the best, update ``F``.

    The runs (restart ``r``, sign ``b``) go in the order ``(0, +1), (0, -1), (1, +1), ...``;
    the first with the lowest training loss wins. With :data:`LOCKSTEP`, on rows where a pass
    is a round trip to the cluster or a long read (``data.shared_passes``), they share passes
    over the data (:class:`_Lockstep`), else they run one after the other; either way each
    run's evaluations, hence the learner, are the same.
    """
    starts = [initial_point(seed, j, r, data.p) for r in range(n_restarts)]
    runs = [(x0, sign) for x0 in starts for sign in (1.0, -1.0)]
    before = counter.evals, counter.passes

    def evaluate_many(indices: list[int], thetas: list[np.ndarray]) -> np.ndarray:
        signs = [runs[i][1] for i in indices]
        counter.evals += len(indices)
        counter.passes += 1
        return data.sums(thetas, signs, beta, loss, activation)

    fits = [
        partial(fit_learner, x0=x0, n=data.n, penalty=penalty, max_iter=max_iter, tol=tol)
        for x0, _ in runs
    ]
    if LOCKSTEP and data.shared_passes and len(runs) > 1:
        results = _Lockstep(evaluate_many, len(runs)).run(fits)
    else:  # one run after the other, a pass per evaluation
        results = [fit(partial(_alone, evaluate_many, i)) for i, fit in enumerate(fits)]
    best = None
    iters = 0
    for (_, sign), (res, value) in zip(runs, results, strict=True):
        iters += int(res.nit)
        if best is None or value < best[0]:
            best = (value, sign, np.asarray(res.x, dtype=np.float64))
    value, sign, theta = best
    evals, passes = counter.evals - before[0], counter.passes - before[1]
    learners = learners.append(theta, sign, value, iters, evals)
    logger.info(
        "GBMAP step %d/%d: sign %+d, training loss %.6g (%d evaluations in %d passes)",
        j + 1,
        n_boosts,
        int(sign),
        value,
        evals,
        passes,
    )
    data.add(learners, j, beta, activation, last=j == n_boosts - 1)
    return learners

"""GBMAP fitting: the data plumbing (in memory or Dask row chunks) and the boosting loop.

One boosting step fits a weak learner for ``b = +1`` and ``b = -1`` (from each of
``n_restarts`` starting points) by L-BFGS (``scipy.optimize.minimize(method="L-BFGS-B",
jac=True)`` on the driver) and keeps the run with the lower unpenalised training loss.
Objective values are computed by map-reduce over the row chunks (dask-glm's ``lbfgs``), one
*pass* evaluating the pending point of every run of the step:

* **map**: :func:`dcfa.gbmap._losses.chunk_sums_many` on each row chunk of the standardised
  features ``Z``, the target ``y`` and the current ensemble score ``F`` (``p + 3`` numbers
  out per run);
* **reduce**: a tree sum of those arrays, its last level on the driver;
* **one** compute per pass (one call of the scheduler, :func:`_evaluate`); the driver adds
  the mean and the ridge term of each run (:func:`dcfa.gbmap._losses.objective`).

The runs of a step go in lockstep (:class:`_Lockstep`): each ``minimize`` runs in its own
thread, and its objective function posts its point and waits; the driver's thread evaluates
the points of all unfinished runs in one pass, so a step costs as many round trips to the
cluster (and reads of ``Z``) as its longest run has evaluations, not the sum over its runs.
Each run sees exactly the values and gradients of a fit on its own (the kernel does each
run's arithmetic unchanged), so the learners do not depend on the batching or on thread
scheduling; :data:`LOCKSTEP` ``= False`` runs them one after the other (the reference in
the tests).

``F`` is a Dask array chunked like ``X``'s rows and persisted; after each step it is replaced by
``F + f_j(Z)``, persisted again. ``Z`` and ``y`` are persisted too when they fit in memory
(``persist="auto"``), else ``Z`` is recomputed from its source (standardised on the fly) at
every evaluation. On a ``distributed`` cluster, persisted rows are served by one actor per
worker (:class:`HeldData`): a pass is then one direct call per worker instead of a graph
through the scheduler, with the same numbers. In memory (NumPy input) the same kernel runs
on the whole array.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import uuid
from dataclasses import dataclass
from functools import partial

import dask
import dask.array as da
import numpy as np
from dask.base import get_scheduler
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from dcfa._compute import (
    SPLIT_EVERY,
    blas_single_threaded_if_threaded,
    compute,
    progress_enabled,
    scheduler_workers,
    tree_levels,
)
from dcfa.gbmap._losses import (
    RowChunks,
    Standardizer,
    chunk_sums_many,
    learner_output,
    learner_outputs,
    objective,
    penalty_value,
    standardize,
)
from dcfa.stats.graph import column_summary

__all__ = [
    "ChunkedData",
    "HeldData",
    "InMemoryData",
    "Learners",
    "boost",
    "column_stats",
    "make_data",
    "should_persist",
]

logger = logging.getLogger("dcfa")

# ``persist="auto"`` keeps the standardised data in memory when it takes less than this
# fraction of the cluster's memory (sum of the workers' limits) or, without a distributed
# client, of the machine's available memory.
PERSIST_FRACTION = 0.5
# L-BFGS-B's relative-decrease test, at machine precision: the fit stops on the gradient norm
# (``tol``) or ``max_iter``, as in the paper's code, not on a slow decrease.
FTOL = float(np.finfo(np.float64).eps)
# Run the L-BFGS fits of a step in lockstep, sharing passes over the data (module docstring);
# False runs them one at a time, with the same results and more passes.
LOCKSTEP = True


############################################################################################
# fitted learners


@dataclass
class Learners:
    """The weak learners fitted so far (row ``j`` = step ``j + 1``)."""

    intercept: np.ndarray  # (k,)  a_j
    coef: np.ndarray  # (k, p) w_j on the standardised features
    bias: np.ndarray  # (k,)  c_j, weight of the intercept column
    sign: np.ndarray  # (k,)  b_j
    train_loss: np.ndarray  # (k,)  unpenalised mean training loss after step j
    n_iter: np.ndarray  # (k,)  L-BFGS iterations of step j (all signs and restarts)
    n_evals: np.ndarray  # (k,)  objective evaluations of step j, summed over its runs

    @classmethod
    def empty(cls, p: int) -> Learners:
        return cls(
            intercept=np.zeros(0),
            coef=np.zeros((0, p)),
            bias=np.zeros(0),
            sign=np.zeros(0),
            train_loss=np.zeros(0),
            n_iter=np.zeros(0, dtype=np.int64),
            n_evals=np.zeros(0, dtype=np.int64),
        )

    def __len__(self) -> int:
        return int(self.intercept.shape[0])

    def append(self, theta: np.ndarray, sign: float, loss: float, n_iter: int, n_evals: int):
        return Learners(
            intercept=np.append(self.intercept, theta[0]),
            coef=np.vstack([self.coef, theta[1:-1][None, :]]),
            bias=np.append(self.bias, theta[-1]),
            sign=np.append(self.sign, sign),
            train_loss=np.append(self.train_loss, loss),
            n_iter=np.append(self.n_iter, n_iter),
            n_evals=np.append(self.n_evals, n_evals),
        )

    def head(self, k: int) -> Learners:
        return Learners(**{name: value[:k] for name, value in self.as_dict().items()})

    def as_dict(self) -> dict[str, np.ndarray]:
        return {
            "intercept": self.intercept,
            "coef": self.coef,
            "bias": self.bias,
            "sign": self.sign,
            "train_loss": self.train_loss,
            "n_iter": self.n_iter,
            "n_evals": self.n_evals,
        }

    def outputs(self, Z: np.ndarray, beta: float, activation: str) -> np.ndarray:
        """``(n_c, k)`` outputs of all learners on standardised rows."""
        return learner_outputs(Z, self.intercept, self.coef, self.bias, self.sign, beta, activation)

    def last(self, j: int) -> tuple:
        """Parameters of learner ``j`` as length-1 arrays (for ``learner_output``)."""
        s = slice(j, j + 1)
        return self.intercept[s], self.coef[s], self.bias[s], self.sign[s]


############################################################################################
# first pass: standardisation moments and the finiteness check


def column_stats(X) -> tuple[Standardizer, int]:
    """The column standardisation (means, population std) and the count of non-finite entries.

    One pass of the statistics engine (:func:`dcfa.stats.graph.column_summary`): one compute
    for a Dask ``X``, the same kernel on the whole array in memory. Columns are shifted by a
    reference value from the first rows and moments merged with Chan's update, so large
    offsets keep their digits. A constant column (``min == max``) gets scale 1: it
    standardises to 0, as in scikit-learn's StandardScaler.
    """
    if isinstance(X, da.Array):  # one column block: each column summed as in memory
        summary = compute(column_summary(X.rechunk({1: -1})))[0]
    else:
        summary = column_summary(X)
    return Standardizer.from_summary(summary)


############################################################################################
# where the rows live


def _memory_budget() -> float:
    """Bytes that ``persist="auto"`` may use: a fraction of the cluster's or machine's memory."""
    client = _client()
    if client is not None:
        workers = scheduler_workers(client)
        total = sum(float(w.get("memory_limit") or 0) for w in workers.values())
        if total > 0:
            return PERSIST_FRACTION * total
    import psutil

    return PERSIST_FRACTION * float(psutil.virtual_memory().available)


def _client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def should_persist(persist, n: int, p: int) -> bool:
    """Resolve the ``persist`` parameter for ``n x p`` float64 features plus ``y`` and ``F``."""
    if persist != "auto":
        return bool(persist)
    nbytes = 8.0 * n * (p + 2)
    return nbytes < _memory_budget()


def _persist(*arrays):
    with blas_single_threaded_if_threaded():
        return dask.persist(*arrays)


class InMemoryData:
    """NumPy rows: the kernel runs once on the whole array (no Dask, no compute)."""

    def __init__(self, Z: np.ndarray, y: np.ndarray, F: np.ndarray):
        self.Z, self.y, self.F = Z, y, F
        self.n, self.p = Z.shape

    def sums(self, thetas, signs, beta, loss, activation) -> np.ndarray:
        """``(k, p + 3)`` loss and gradient sums of the learners ``(thetas[i], signs[i])``."""
        return chunk_sums_many(self.Z, self.y, self.F, thetas, signs, beta, loss, activation)

    def add(self, learners: Learners, j: int, beta: float, activation: str, last: bool) -> None:
        self.F = self.F + learner_output(self.Z, *learners.last(j), beta, activation)


class ChunkedData:
    """Dask rows: :func:`chunk_sums` on every row chunk plus a tree sum, one compute per call."""

    def __init__(self, Z: da.Array, y: da.Array, F: da.Array, persisted: bool):
        self.Z, self.y, self.F = Z, y, F
        self.persisted = persisted
        self.n, self.p = Z.shape

    def sums(self, thetas, signs, beta, loss, activation) -> np.ndarray:
        """``(k, p + 3)`` loss and gradient sums of the learners ``(thetas[i], signs[i])``:
        one pass over the chunks, one compute."""
        kernel = partial(
            chunk_sums_many,
            thetas=tuple(np.asarray(theta, dtype=np.float64) for theta in thetas),
            signs=tuple(float(sign) for sign in signs),
            beta=float(beta),
            loss=loss,
            activation=activation,
        )
        total = _evaluate(_map_reduce(kernel, self.Z, self.y, self.F), direct=self.persisted)
        return np.asarray(total, dtype=np.float64)

    def add(self, learners: Learners, j: int, beta: float, activation: str, last: bool) -> None:
        if last:  # the final scores are not needed by the fit
            return
        (self.F,) = _persist(self.F + _lazy_output(self.Z, learners, j, beta, activation))


# What an actor's call raises when its worker is gone (``distributed.actor``: "Unable to contact
# Actor's worker", "Worker holding Actor was lost") or was recreated (RowChunks' own check).
_LOST = (OSError, RuntimeError)


class HeldData:
    """Persisted rows on a ``distributed`` cluster, served by one actor per worker.

    Each worker's :class:`~dcfa.gbmap._losses.RowChunks` actor holds the chunks of ``Z``,
    ``y`` and ``F`` that the worker already stores (no copy, no transfer). A pass is one
    direct call per worker and the sum of their per-chunk results on the driver, in the
    order of :func:`_map_reduce`'s tree, so the numbers are those of :class:`ChunkedData`
    bit for bit. What this saves is the graph and the scheduler at every pass: at
    SYNTH-COS(1e5, 200) in two chunks on a 2-process LocalCluster, a pass of one learner
    costs about the kernel (33 ms) instead of 49 ms through the scheduler.

    ``F`` lives in the actors. ``chunked`` keeps the Dask arrays, and ``F``'s graph grows
    lazily with every learner added (nothing is computed), so if a worker is lost the fit
    goes on through the scheduler: the lost chunks are recomputed from their source, as for
    any persisted Dask array, and the same numbers come out.
    """

    def __init__(self, chunked: ChunkedData, client):
        self.chunked = chunked
        self.n, self.p = chunked.n, chunked.p
        self._fallback: ChunkedData | None = None
        self._actors: list = []
        self._added = 0  # learners added to the actors' F
        from distributed import futures_of, wait

        futures = {f.key: f for f in futures_of([chunked.Z, chunked.y, chunked.F])}
        wait(list(futures.values()))  # persisted, but maybe not computed yet
        keys = [
            [key[0] for key in chunked.Z.__dask_keys__()],
            chunked.y.__dask_keys__(),
            chunked.F.__dask_keys__(),
        ]
        where = client.who_has([futures[key] for key in keys[0]])
        by_worker: dict = {}
        for i, key in enumerate(keys[0]):
            by_worker.setdefault(sorted(where[key])[0], []).append(i)
        for address, chunks in by_worker.items():
            args = [[futures[k[i]] for i in chunks] for k in keys]
            actor = client.submit(
                RowChunks,
                *args,
                actor=True,
                workers=[address],
                allow_other_workers=False,
                pure=False,
            )
            self._actors.append((chunks, actor.result()))
        self._n_chunks = len(keys[0])

    def sums(self, thetas, signs, beta, loss, activation) -> np.ndarray:
        """As :meth:`ChunkedData.sums`, one call to each worker's actor."""
        if self._fallback is None:
            thetas = [np.asarray(theta, dtype=np.float64) for theta in thetas]
            signs = [float(sign) for sign in signs]
            try:
                calls = [
                    (chunks, actor.sums(thetas, signs, float(beta), loss, activation, self._added))
                    for chunks, actor in self._actors
                ]
                parts: list = [None] * self._n_chunks
                for chunks, call in calls:
                    for i, part in zip(chunks, call.result(), strict=True):
                        parts[i] = part
                return _tree_sum(parts)
            except _LOST as exc:
                self._lose(exc)
        return self._fallback.sums(thetas, signs, beta, loss, activation)

    def add(self, learners: Learners, j: int, beta: float, activation: str, last: bool) -> None:
        if self._fallback is not None:
            self._fallback.add(learners, j, beta, activation, last)
            return
        if last:  # the final scores are not needed by the fit
            return
        self.chunked.F = self.chunked.F + _lazy_output(
            self.chunked.Z, learners, j, beta, activation
        )
        try:
            calls = [
                actor.add(*learners.last(j), float(beta), activation, self._added)
                for _, actor in self._actors
            ]
            for call in calls:
                call.result()
            self._added += 1
        except _LOST as exc:
            self._lose(exc)  # persists F with this learner

    def _lose(self, exc: BaseException) -> None:
        logger.warning(
            "GBMAP: a worker holding rows was lost (%s); going on through the scheduler, "
            "which recomputes its chunks",
            exc,
        )
        self._actors = []
        (F,) = _persist(self.chunked.F)
        self._fallback = ChunkedData(self.chunked.Z, self.chunked.y, F, persisted=True)


def _add_all(parts: list) -> np.ndarray:
    return functools.reduce(np.add, parts)


def _tree_sum(parts: list) -> np.ndarray:
    """``sum(parts)`` added in the order of :func:`_map_reduce`'s tree and :func:`_evaluate`."""
    return _add_all(tree_levels(parts, _add_all, SPLIT_EVERY, top=SPLIT_EVERY))


def _map_reduce(kernel, Z: da.Array, y: da.Array, F: da.Array) -> list[Delayed]:
    """``sum_c kernel(Z_c, y_c, F_c)`` over the row chunks ``c``, as at most ``SPLIT_EVERY``
    lazy partial sums; :func:`_evaluate` adds them on the driver.

    A hand-built graph (one task per chunk, then the levels of :func:`dcfa._compute.tree`)
    over the keys of the (persisted) chunks: building and optimising the equivalent
    ``blockwise`` + ``sum`` expression costs about 10 ms more, paid at every L-BFGS
    evaluation. The tree stops below its root: on a cluster a root task would first move the
    partial sums to one worker and then to the client, ~10 ms more per evaluation on a
    2-process LocalCluster. The sums are added in the same order either way.
    """
    name = f"gbmap-sums-{uuid.uuid4().hex}"
    dsk: dict = {}
    keys = []
    for i in range(len(Z.chunks[0])):
        key = (name, "chunk", i)
        dsk[key] = (kernel, (Z.name, i, 0), (y.name, i), (F.name, i))
        keys.append(key)
    ids = itertools.count()

    def node(group):
        key = (name, "sum", next(ids))
        dsk[key] = (_add_all, list(group))
        return key

    keys = tree_levels(keys, node, SPLIT_EVERY, top=SPLIT_EVERY)
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[Z, y, F])
    return [Delayed(key, graph, layer=name) for key in keys]


def _evaluate(parts: list[Delayed], *, direct: bool) -> np.ndarray:
    """Compute one pass's partial sums (one call of the active scheduler) and add them.

    Through :func:`dcfa._compute.compute` when ``Z`` is recomputed from its source (its graph
    is then optimised and culled) or progress is shown. With persisted rows the graph holds
    only their chunks and this evaluation's tasks: the scheduler that ``dask.compute`` would
    pick is called on it directly. That skips ``dask.compute``'s collection handling and
    ``compute``'s BLAS pin per call (``boost`` pins BLAS once for the whole fit), ~4 ms per
    pass, which is more than the kernel on small chunks.
    """
    if not direct or progress_enabled():
        return _add_all(list(compute(*parts)))
    get = get_scheduler(collections=parts)
    return _add_all(list(get(parts[0].__dask_graph__(), [part.key for part in parts])))


def _lazy_output(Z: da.Array, learners: Learners, j: int, beta: float, activation: str):
    return Z.map_blocks(
        learner_output,
        *learners.last(j),
        beta,
        activation,
        drop_axis=1,
        dtype=np.float64,
        meta=np.empty((0,), dtype=np.float64),
    )


def make_data(
    X,
    y: np.ndarray,
    standardizer: Standardizer,
    *,
    persist: bool,
    learners: Learners,
    beta: float,
    activation: str,
    F0=None,
) -> InMemoryData | ChunkedData:
    """Standardise ``X``, attach ``y`` and the ensemble score of ``learners``.

    The score starts from ``F0``: the initial model ``f_0`` on the training rows, in the
    units of ``y`` (``None`` is ``f_0 = 0``; an ndarray for NumPy ``X``, a Dask array of the
    rows for Dask ``X``). For Dask ``X`` this is one persist (one compute under a local
    scheduler) of ``Z``, ``y`` and ``F`` (or of ``y`` and ``F`` only when ``persist`` is False).
    """
    if not isinstance(X, da.Array):
        Z = standardizer(X)
        F = np.zeros(Z.shape[0]) if F0 is None else np.asarray(F0, dtype=np.float64).copy()
        for j in range(len(learners)):
            F = F + learner_output(Z, *learners.last(j), beta, activation)
        return InMemoryData(Z, np.asarray(y, dtype=np.float64), F)
    X = X.rechunk({1: -1})
    Z = X.map_blocks(standardize, standardizer, dtype=np.float64)
    rows = X.chunks[0]
    yd = da.from_array(np.asarray(y, dtype=np.float64), chunks=(rows,))
    if F0 is None:
        F = da.zeros(X.shape[0], chunks=(rows,), dtype=np.float64)
    else:
        F = da.asarray(F0).astype(np.float64).rechunk((rows,))
    for j in range(len(learners)):
        F = F + _lazy_output(Z, learners, j, beta, activation)
    if not persist:
        yd, F = _persist(yd, F)
        return ChunkedData(Z, yd, F, persisted=False)
    Z, yd, F = _persist(Z, yd, F)
    chunked = ChunkedData(Z, yd, F, persisted=True)
    client = _client()
    if (
        client is None
        or client.asynchronous
        or progress_enabled()
        # the rows went where dask sends these arrays, maybe not to the default client
        or get_scheduler(collections=[Z]) != client.get
    ):
        return chunked
    return HeldData(chunked, client)


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
    # One BLAS thread on the driver: SciPy's L-BFGS-B makes many tiny BLAS calls, which a
    # multi-threaded OpenBLAS turns into milliseconds of thread wake-ups per evaluation; the
    # in-memory kernel's products are memory-bound and lose nothing. (Dask's threaded
    # scheduler pins BLAS to one thread per task anyway; distributed workers are unaffected.)
    with threadpool_limits(limits=1, user_api="blas"):
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
    the first with the lowest training loss wins. With :data:`LOCKSTEP` they share passes over
    the data (:class:`_Lockstep`), else they run one after the other; either way each run's
    evaluations, hence the learner, are the same.
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
    if LOCKSTEP and len(runs) > 1:
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

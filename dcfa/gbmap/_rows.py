"""Where GBMAP's rows live, and one pass over them: the data side of :mod:`dcfa.gbmap._solver`.

Before boosting, one pass gathers the columns' standardisation and the count of non-finite
entries (:func:`column_stats`, the statistics engine's column pass). The standardised rows
``Z``, the target ``y`` and the ensemble score ``F`` then live in one of three holders, all
with the same two methods (``sums``: the per-run loss sums at some points, one pass; ``add``:
``F += f_j(Z)`` after a step) and ``shared_passes`` (whether a step's runs share passes:
where a pass is a round trip to the cluster, or a long read of large NumPy rows):

* :class:`InMemoryData`: NumPy input, the kernel on the whole array;
* :class:`ChunkedData`: Dask row chunks, persisted or recomputed from their source; a pass
  is :func:`dcfa.gbmap._losses.chunk_sums_many` on every chunk plus the levels of
  :func:`dcfa._compute.tree`, the last sums added on the driver (:func:`_evaluate`);
* :class:`HeldData`: persisted chunks on a ``distributed`` cluster, served by one actor per
  worker: a pass is one direct call per worker instead of a graph through the scheduler,
  with the same numbers.

``persist="auto"`` keeps the standardised data in memory when it takes less than
:data:`PERSIST_FRACTION` of the cluster's (or machine's) memory (:func:`should_persist`).
"""

from __future__ import annotations

import functools
import itertools
import logging
import uuid
from functools import partial

import dask
import dask.array as da
import numpy as np
from dask.base import get_scheduler
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from dcfa._compute import (
    SPLIT_EVERY,
    blas_single_threaded_if_threaded,
    compute,
    progress_enabled,
    scheduler_workers,
    tree_levels,
)
from dcfa.gbmap._learners import Learners
from dcfa.gbmap._losses import (
    RowChunks,
    Standardizer,
    chunk_sums_many,
    learner_output,
    standardize,
)
from dcfa.stats.graph import column_summary

__all__ = [
    "ChunkedData",
    "HeldData",
    "InMemoryData",
    "column_stats",
    "make_data",
    "should_persist",
]

logger = logging.getLogger("dcfa")

# ``persist="auto"`` keeps the standardised data in memory when it takes less than this
# fraction of the cluster's memory (sum of the workers' limits) or, without a distributed
# client, of the machine's available memory.
PERSIST_FRACTION = 0.5


############################################################################################
# first pass: standardisation moments and the finiteness check


def column_stats(X, *, empty_columns: bool = False) -> tuple:
    """The column standardisation (means, population std) and the count of non-finite entries.

    With ``empty_columns``, also the number of columns without a single finite value (masked
    cells of a gridded field, such as land in a sea-surface field), for the error message.

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
    standardizer, bad = Standardizer.from_summary(summary)
    if not empty_columns:
        return standardizer, bad
    return standardizer, bad, int((np.asarray(summary["count"]) == 0).sum())


#: probes of :func:`row_digest`: enough that two different row sets agree on all of them
#: only by design, few enough to store in every checkpoint
DIGEST_PROBES = 8


def row_digest(X, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """A digest of ``X``'s rows in their order: :data:`DIGEST_PROBES` sums, over the rows, of
    each standardised row's projection on a fixed random direction, weighted by fixed
    functions of the row's position. Equal (to rounding) for the same rows in the same order
    in any chunking; rows in another order, or another column with the same moments (a
    column mirrored about its mean), change it. One pass (a matrix-vector product) on Dask.
    """
    p = mean.shape[0]
    direction = np.random.default_rng(0x6B4D).standard_normal(p)  # fixed: every fit's probe
    direction /= np.linalg.norm(direction)
    w = direction / scale
    # centred before the product: raw values far from 0 (SST in K) would leave rounding of
    # the product's size, which differs between chunkings
    if isinstance(X, da.Array):
        z = compute((X - mean) @ w)[0]
    else:
        z = np.concatenate([(X[i : i + 4096] - mean) @ w for i in range(0, X.shape[0], 4096)])
    z = np.asarray(z, dtype=np.float64)
    rows = np.arange(z.size, dtype=np.float64)
    golden = (np.sqrt(5.0) - 1.0) / 2.0  # incommensurate frequencies: no two probes alike
    weights = np.cos(np.outer(np.arange(1, DIGEST_PROBES + 1) * golden, rows))
    return weights @ z


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
    with blas_single_threaded_if_threaded(*arrays):
        return dask.persist(*arrays)


# NumPy rows from this size on share a step's passes, as Dask rows do (InMemoryData)
SHARED_PASS_BYTES = 32 * 2**20


class InMemoryData:
    """NumPy rows: the kernel runs once on the whole array (no Dask, no compute)."""

    def __init__(self, Z: np.ndarray, y: np.ndarray, F: np.ndarray):
        self.Z, self.y, self.F = Z, y, F
        self.n, self.p = Z.shape
        # a pass costs no round trip: small rows run a step's runs one after the other,
        # faster than handing their points between threads (2.7x at 120 x 9); large ones
        # gain from reading the rows once for both (1.2x at 1e5 x 200):
        # benchmarks/bench_gbmap_runs.py
        self.shared_passes = Z.nbytes >= SHARED_PASS_BYTES

    def sums(self, thetas, signs, beta, loss, activation) -> np.ndarray:
        """``(k, p + 3)`` loss and gradient sums of the learners ``(thetas[i], signs[i])``."""
        return chunk_sums_many(self.Z, self.y, self.F, thetas, signs, beta, loss, activation)

    def add(self, learners: Learners, j: int, beta: float, activation: str, last: bool) -> None:
        self.F = self.F + learner_output(self.Z, *learners.last(j), beta, activation)


class ChunkedData:
    """Dask rows: :func:`chunk_sums` on every row chunk plus a tree sum, one compute per call."""

    shared_passes = True  # a pass is a compute: a step's runs share them

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

    shared_passes = True  # a pass is a call to every worker: a step's runs share them

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

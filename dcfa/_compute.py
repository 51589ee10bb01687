"""The one place dcfa asks Dask for numbers.

Every computation the library needs (a moments pass, a GBMAP loss evaluation) goes through
:func:`compute`, which

* runs a single ``dask.compute`` over everything the step needs;
* pins BLAS to one thread per task under the local threaded scheduler, configured or the
  collections' own default (the chunk kernels are BLAS products; distributed workers already
  start with one BLAS thread each);
* shows progress when the Dask config key ``dcfa.progress`` is true: distributed's progress
  bar when a ``distributed.Client`` is active (a widget in Jupyter, lines of text there
  without ipywidgets),
  :class:`dask.diagnostics.ProgressBar` otherwise; when the output is not a terminal (a batch
  job's log file), one line per 10 % instead of a redrawn bar. The CLI sets it; in a notebook::

      dask.config.set({"dcfa.progress": True})

* when it fails, returns only once none of its tasks still runs (:func:`settle`), so that a
  failed write's temporary store, once removed, stays removed;
* on a cluster that has had workers and then has none for ``dcfa.no_workers_timeout`` (a
  duration, default ``"10 minutes"``; None waits for ever), raises :class:`NoWorkersError`
  instead of waiting in silence for workers that will not come back. A cluster that never had
  a worker (a batch queue still starting them) is waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import threading
import time
import weakref

import dask

from dcfa._errors import outside_stacklevel

__all__ = [
    "SPLIT_EVERY",
    "NoWorkersError",
    "compute",
    "feeds_ended",
    "one_blas_thread",
    "progress_enabled",
    "tree",
    "tree_levels",
    "tree_reduce",
]

SPLIT_EVERY = 8  # the fan-in of every tree reduction (moments tiles, grid pass, GBMAP, kNN)


def tree(parts: list, node, split_every: int = SPLIT_EVERY):
    """The root of the tree that merges ``parts`` level by level: ``node(group)`` for each
    run of ``split_every`` of them (a group of one is passed on unchanged).

    The shape of every tree reduction dcfa builds, whether its parts are delayed objects
    (:func:`tree_reduce`) or keys of a hand-built graph (:mod:`dcfa.stats.graph`).
    """
    return tree_levels(parts, node, split_every)[0]


def tree_levels(parts: list, node, split_every: int = SPLIT_EVERY, *, top: int = 1) -> list:
    """The levels of :func:`tree` down to at most ``top`` parts, returned as a list: a tree
    that stops below its root, whose last sum is taken elsewhere (GBMAP's loss passes add
    their partial sums on the driver)."""
    while len(parts) > top:
        groups = [parts[s : s + split_every] for s in range(0, len(parts), split_every)]
        parts = [node(group) if len(group) > 1 else group[0] for group in groups]
    return parts


def tree_reduce(parts: list, combine, *args, split_every: int = SPLIT_EVERY):
    """The root of a :func:`tree` of ``combine(group, *args)`` tasks over the delayed
    ``parts``."""
    merge = dask.delayed(combine, pure=True)
    return tree(parts, lambda group: merge(group, *args), split_every)


def progress_enabled() -> bool:
    return bool(dask.config.get("dcfa.progress", False))


def compute(*args, progress: bool | None = None):
    """``dask.compute(*args)`` with dcfa's threading and progress policy.

    When it fails (a task's error, Ctrl-C, SIGTERM) it returns only once no task of the
    computation still runs: Dask raises at the first error while the other tasks go on, and a
    task still writing a chunk would recreate the temporary store its caller removes.
    """
    show = progress_enabled() if progress is None else progress
    client = active_client()
    if client is not None:
        futures = client.compute(list(args))
        watch = _WorkerWatch(client, futures)
        try:
            with watch:
                if show:
                    from distributed import progress as distributed_progress

                    widgets = _in_notebook() and _has_widgets()
                    if widgets or (sys.stdout.isatty() and not _in_notebook()):
                        distributed_progress(futures, notebook=widgets)
                    else:  # a log file, or a notebook without ipywidgets: lines of text
                        _DistributedLines(futures, scheduler=client.scheduler.address)
                results = tuple(client.gather(futures))
        except BaseException:
            settle(client, futures)
            if watch.error is not None:
                raise watch.error from None
            raise
        release(client, futures)
        return results
    threaded = _threaded(args)  # found once: the traversal walks every argument
    with one_blas_thread(threaded), _local_progress(show), _own_pool(threaded) as kwargs:
        return dask.compute(*args, **kwargs)


def release(client, futures) -> None:
    """Release ``futures`` and return once the scheduler has been told, before any later
    graph. A future releases its key from the client's event loop, later: the next
    computation's graph, which shares keys with this one (an input's tasks) but fuses them
    otherwise, could reach the scheduler first, which then warns "Detected different
    run_spec" and may deadlock (dask/dask#9888)."""
    for future in futures:
        future.release()
    client.sync(asyncio.sleep, 0)  # after the releases queued on the same loop


class NoWorkersError(ConnectionError):
    """Every worker left the cluster during a computation and none came back in time: a fault
    of the cluster (a batch job's finished passes are kept for ``--resume``)."""


NO_WORKERS_TIMEOUT = "10 minutes"
_POLL = 2.0  # seconds between two looks at the scheduler's workers
_HAD_WORKERS: weakref.WeakSet = weakref.WeakSet()  # clients whose cluster has had a worker


class _WorkerWatch:
    """A thread that watches the cluster's workers while a computation runs (the progress bar
    and gather block): once the cluster, which has had workers, has had none for
    ``dcfa.no_workers_timeout``, it cancels the computation, whose wait then ends, and keeps
    the :class:`NoWorkersError` to raise in its place."""

    def __init__(self, client, futures) -> None:
        from dask.utils import parse_timedelta

        bound = dask.config.get("dcfa.no_workers_timeout", NO_WORKERS_TIMEOUT)
        self.bound = None if bound is None else parse_timedelta(bound, default="s")
        self.client, self.futures = client, [f for f in futures if hasattr(f, "key")]
        self.error: NoWorkersError | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dcfa-worker-watch", daemon=True)

    def __enter__(self):
        if self.bound is not None and self.futures:
            if self.client not in _HAD_WORKERS:  # one look, until a worker has been seen
                self._look()
            self._thread.start()
        return self

    def _look(self) -> bool:
        """Whether the cluster has a worker now (remembered for the client)."""
        if self.client.nthreads():
            _HAD_WORKERS.add(self.client)
            return True
        return False

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        empty_since = None
        while not self._done.wait(_POLL):
            try:
                workers = self._look()
            except Exception:  # the scheduler itself is gone: gather says so
                return
            now = time.monotonic()
            if workers:
                empty_since = None
            elif self.client in _HAD_WORKERS:
                empty_since = now if empty_since is None else empty_since
                if now - empty_since >= self.bound:
                    self.error = NoWorkersError(
                        f"every worker left the cluster at {self.client.scheduler.address} "
                        f"and none came back within {self.bound:g} s "
                        "(dcfa.no_workers_timeout; cluster.no_workers_timeout in a job file)"
                    )
                    self.client.cancel(self.futures)
                    return


SETTLE_TIMEOUT = 60.0  # seconds a failed computation's running tasks are waited for


def settle(client, futures, timeout: float = SETTLE_TIMEOUT) -> None:
    """Cancel what is left of a failed computation and wait until no worker still runs any
    of its tasks (a running task cannot be stopped, only waited for).

    Gives up, with a warning, after ``timeout`` seconds, and silently when the scheduler
    cannot be asked (the cluster is gone, and its tasks with it)."""
    import warnings

    submitted = [f for f in futures if hasattr(f, "key")]  # not compute's non-Dask arguments
    if not submitted:
        return
    try:
        running = client.run_on_scheduler(_unfinished, [f.key for f in submitted])
        client.cancel(submitted)
        deadline = time.monotonic() + timeout
        while running and time.monotonic() <= deadline:
            time.sleep(0.05)
            left = client.run(_still_running, running, on_error="return")
            running = list({k for ks in left.values() if isinstance(ks, list) for k in ks})
    except Exception:  # the scheduler or its workers are gone: nothing left to wait for
        return
    if running:
        warnings.warn(
            f"{len(running)} task(s) of the failed computation still run after {timeout:g} s; "
            "what they write may appear after this error",
            RuntimeWarning,
            stacklevel=outside_stacklevel(),
        )


def _unfinished(keys, dask_scheduler=None) -> list:
    """On the scheduler: the tasks of the graph below ``keys`` that have not finished. A
    failed computation's tasks are already 'released' here while their workers still run
    them, so the state that matters is the workers'."""
    tasks, seen, stack, found = dask_scheduler.tasks, set(), list(keys), []
    while stack:
        ts = tasks.get(stack.pop())
        if ts is None or ts.key in seen or ts.state == "memory":  # done, and all below it
            continue
        seen.add(ts.key)
        found.append(ts.key)
        stack.extend(dep.key for dep in ts.dependencies)
    return found


def _still_running(keys, dask_worker=None) -> list:
    """On a worker: which of ``keys`` still occupy one of its threads."""
    keys = set(keys)
    return [ts.key for ts in dask_worker.state.all_running_tasks if ts.key in keys]


def _threaded(collections) -> bool:
    """Whether ``collections`` compute on the local threaded scheduler: the one configured,
    or with none configured their own default (a Dask array's and a Delayed's)."""
    import dask.threaded
    from dask.base import get_scheduler, unpack_collections

    found, _ = unpack_collections(*collections, traverse=True)  # as dask.compute finds them
    try:
        return get_scheduler(collections=list(found) or None) is dask.threaded.get
    except ValueError:  # collections of different default schedulers: Dask refuses them
        return False


_POOLS = itertools.count()  # numbers each computation's own pool, to name its threads


@contextlib.contextmanager
def _own_pool(threaded: bool):
    """Under the local threaded scheduler (``threaded``), a thread pool of this computation's
    own, shut down (waiting for its running tasks) when it ends: Dask's shared pool would
    carry on with the tasks of a computation that already raised."""
    if not threaded or dask.config.get("pool", None) is not None:
        yield {}
        return
    from concurrent.futures import ThreadPoolExecutor

    from dask.system import CPU_COUNT

    prefix = f"dcfa-compute-{next(_POOLS)}"
    pool = ThreadPoolExecutor(
        dask.config.get("num_workers", None) or CPU_COUNT, thread_name_prefix=prefix
    )
    try:
        yield {"pool": pool}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        # A Ctrl-C that lands while the pool starts a thread leaves that thread out of the
        # threads shutdown joins, though it runs a task: join every thread of the pool's name.
        for thread in threading.enumerate():
            if thread.name.startswith(prefix + "_"):
                thread.join()


def active_client():
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        client = default_client()
    except ValueError:
        return None
    from dask.base import get_scheduler

    return client if get_scheduler() == client.get else None


def scheduler_workers(client) -> dict:
    """Every worker the scheduler knows now (address -> its info: ``memory_limit``, ...).

    Asked of the scheduler itself: ``Client.scheduler_info()`` falls back, silently, to the
    client's cached copy when the query fails, and that copy lists no worker at all."""
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1)
    except TypeError:  # pragma: no cover - distributed before n_workers lists every worker
        info = client.sync(client.scheduler.identity)
    return dict(info.get("workers", {}))


@contextlib.contextmanager
def blas_single_threaded_if_threaded(*collections):
    """BLAS on one thread while ``collections`` compute on the local threaded scheduler: its
    threads already use every core, and a BLAS pool per thread would oversubscribe them."""
    with one_blas_thread(_threaded(collections)):
        yield


@contextlib.contextmanager
def one_blas_thread(on: bool = True):
    """BLAS on one thread in this process while the block runs (when ``on``), the caller's
    setting back after it.

    For the driver's many small solves (a ridge ``eigh`` per fold, a least squares per
    candidate map, L-BFGS-B's tiny products): OpenBLAS's threads wait for each other at every
    call, which costs more than they give on matrices of hundreds of rows, and many times more
    when another process keeps the cores busy. Dask's workers are other processes, unaffected.
    """
    if not on:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextlib.contextmanager
def _local_progress(show: bool):
    if not show:
        yield
        return
    from dask.diagnostics import ProgressBar

    bar = ProgressBar(minimum=1.0, dt=0.5) if sys.stdout.isatty() else _LocalLines(minimum=1.0)
    with bar:
        yield


class _Lines:
    """Progress as plain lines, one per 10 %: readable in a log file."""

    _step = 0.1

    def _line(self, frac: float, elapsed: float) -> None:
        reached = int(frac / self._step + 1e-9)
        if reached > getattr(self, "_reached", -1):
            self._reached = reached
            print(f"  {100 * frac:3.0f}% done after {elapsed:6.1f} s", flush=True)


def _local_lines_class():
    from dask.diagnostics import ProgressBar

    class LocalLines(_Lines, ProgressBar):
        def _draw_bar(self, frac, elapsed):
            self._line(frac, elapsed)

        def _finish(self, dsk, state, errored):
            ProgressBar._finish(self, dsk, state, errored)

    return LocalLines


def _LocalLines(**kwargs):
    return _local_lines_class()(**kwargs, out=sys.stdout)


def _DistributedLines(futures, scheduler):
    """Block until ``futures`` finish, printing a line per 10 % of their tasks."""
    from distributed.diagnostics.progressbar import TextProgressBar

    class DistributedLines(_Lines, TextProgressBar):
        def _draw_bar(self, remaining, all, **kwargs):
            frac = (1 - remaining / all) if all else 1.0
            self._line(frac, self.elapsed)

        def _draw_stop(self, **kwargs):
            pass

    global _feeds_end
    DistributedLines(futures, scheduler=scheduler, interval="100ms", complete=True)
    # the scheduler's feed notices the closed comm on its next write, one interval later
    _feeds_end = time.monotonic() + 0.25


_feeds_end = 0.0  # when the scheduler has noticed the end of every feed of text lines


@contextlib.contextmanager
def feeds_ended():
    """On exit, wait until the scheduler has noticed the end of every feed of progress lines.

    Around a client whose cluster is closed next: a scheduler closed while its feed still
    waits to write logs a ``CancelledError`` traceback. Waiting here, not after every feed,
    costs a job one wait instead of one per pass, and nothing on a scheduler it only attaches
    to.
    """
    try:
        yield
    finally:
        time.sleep(max(0.0, _feeds_end - time.monotonic()))


def _has_widgets() -> bool:
    """Whether a notebook can draw distributed's widget progress bar (ipywidgets installed):
    a progress bar must never abort the computation it reports on."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _in_notebook() -> bool:
    if "IPython" not in sys.modules:  # a notebook's kernel has imported it; importing costs 0.4 s
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"

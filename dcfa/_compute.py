"""The one place dcfa asks Dask for numbers.

Every computation the library needs (a moments pass, a GBMAP loss evaluation) goes through
:func:`compute`, which

* runs a single ``dask.compute`` over everything the step needs;
* pins BLAS to one thread per task under the local threaded scheduler (the chunk kernels are
  BLAS products; distributed workers already start with one BLAS thread each);
* shows a progress bar when the Dask config key ``dcfa.progress`` is true: distributed's
  progress bar when a ``distributed.Client`` is active (text in a terminal, a widget in
  Jupyter), :class:`dask.diagnostics.ProgressBar` otherwise. The CLI sets it; in a notebook::

      dask.config.set({"dcfa.progress": True})
"""

from __future__ import annotations

import contextlib

import dask

__all__ = ["compute", "progress_enabled"]


def progress_enabled() -> bool:
    return bool(dask.config.get("dcfa.progress", False))


def compute(*args, progress: bool | None = None):
    """``dask.compute(*args)`` with dcfa's threading and progress policy."""
    show = progress_enabled() if progress is None else progress
    client = _active_client()
    if client is not None:
        if not show:
            return dask.compute(*args)
        from distributed import progress as distributed_progress

        futures = client.compute(list(args))
        distributed_progress(futures, notebook=_in_notebook())
        return tuple(client.gather(futures))
    with _blas_single_threaded_if_threaded(), _local_progress(show):
        return dask.compute(*args)


def _active_client():
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


@contextlib.contextmanager
def _blas_single_threaded_if_threaded():
    import dask.threaded
    from dask.base import get_scheduler

    if get_scheduler() is not dask.threaded.get:
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

    with ProgressBar(minimum=1.0, dt=0.5):
        yield


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"

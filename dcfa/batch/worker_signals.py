"""Loaded in every worker process of a job's ``LocalCluster`` (distributed's ``preload``).

Ctrl-C reaches every process of the terminal's foreground group: the workers, which the
driver stops anyway, would each print a KeyboardInterrupt traceback beside the driver's one
line. They ignore SIGINT; the driver handles it and closes them.
"""

from __future__ import annotations

import signal


def dask_setup(worker) -> None:
    """Ignore SIGINT in this worker process (distributed calls this when the worker starts)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

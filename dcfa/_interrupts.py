"""Ctrl-C held over a step that must not be cut in the middle.

A ``LocalCluster`` interrupted while it starts is left half made (distributed's exit hook
then fails closing it), and a checkpoint interrupted inside ``np.savez`` turns the
KeyboardInterrupt into zipfile's "Can't close the ZIP file" ValueError. Both steps take a
second or less: the interrupt is recorded and the caller acts on it once the step is done.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def held_interrupt() -> Iterator[list[bool]]:
    """Within the block, SIGINT is recorded in the list yielded, not raised (only in the main
    thread, where signal handlers can be set; elsewhere nothing is held). A SIGINT the
    process ignores (a background job of a shell script starts so) stays ignored."""
    got: list[bool] = []
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        yield got
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(True))
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, previous)

"""Commands a test interrupts as a user at a terminal would (Ctrl-C: SIGINT)."""

from __future__ import annotations

import sys

# A shell without job control starts a background command with SIGINT ignored, and every
# child inherits that: Python then never raises KeyboardInterrupt. Run as `bash .ci/run &`,
# the suite's Ctrl-C tests failed on an xdist worker where nothing had installed a handler of
# its own (exit 0: the signal never arrived). exec keeps the default set here.
_SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'dcfa', *sys.argv[1:]])"
)


def dcfa_command(*args: str) -> list[str]:
    """``python -m dcfa ARGS``, started with SIGINT at its default, as a terminal's job is."""
    return [sys.executable, "-c", _SIGINT_DEFAULT, *args]

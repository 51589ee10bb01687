"""The marker of a store being written: who writes it (process, host, since when), and whether
that writer is gone. Shared by local stores (:mod:`dcfa.storage.store`) and object storage
(:mod:`dcfa.storage.objectstore`)."""

from __future__ import annotations

import json
import os
import socket
import time


def marker_payload(destination) -> bytes:
    """What the marker of a temporary store says: who writes it, where, since when."""
    return json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "destination": str(destination),
        }
    ).encode()


def is_marker(who) -> bool:
    """Whether a marker file's JSON is one that :func:`marker_payload` wrote."""
    return isinstance(who, dict) and {"pid", "host", "started", "destination"} <= set(who)


def is_stale(who: dict) -> bool:
    """Whether a marker's writer is a process of this machine that no longer runs."""
    pid = who.get("pid")
    if who.get("host") != socket.gethostname() or not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False

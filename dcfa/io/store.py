"""Where dcfa writes, and what it may replace: :mod:`dcfa.storage.store`, re-exported here.

The rules moved below the statistics engine, which saves its moments through them
(README, "Layout"); every name is still importable from here.
"""

from dcfa.storage.store import (
    FULL_DISK,
    INCOMPLETE,
    OutputError,
    atomic_file,
    atomic_store,
    check_apart,
    check_replaceable,
    check_writable,
    dcfa_kind,
    incomplete_reason,
    remove_leftovers,
    tree_digest,
)

__all__ = [
    "FULL_DISK",
    "INCOMPLETE",
    "OutputError",
    "atomic_file",
    "atomic_store",
    "check_apart",
    "check_replaceable",
    "check_writable",
    "dcfa_kind",
    "incomplete_reason",
    "remove_leftovers",
    "tree_digest",
]

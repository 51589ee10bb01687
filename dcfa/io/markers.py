"""The marker of a store being written: :mod:`dcfa.storage.markers`, re-exported here
(README, "Layout")."""

from dcfa.storage.markers import is_stale, marker_payload

__all__ = ["is_stale", "marker_payload"]

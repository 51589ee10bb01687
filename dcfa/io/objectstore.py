"""Stores on object storage: :mod:`dcfa.storage.objectstore`, re-exported here (README,
"Layout"); every name is still importable from here."""

from dcfa.storage.objectstore import (
    INCOMPLETE,
    ROOT_METADATA,
    check_protocol,
    exists,
    incomplete_reason,
    is_url,
    listing,
    remove_leftovers,
    root_attributes,
    root_attrs,
    staged,
    url_fs,
)

__all__ = [
    "INCOMPLETE",
    "ROOT_METADATA",
    "check_protocol",
    "exists",
    "incomplete_reason",
    "is_url",
    "listing",
    "remove_leftovers",
    "root_attributes",
    "root_attrs",
    "staged",
    "url_fs",
]

"""Stores on object storage (``s3://``, ``gs://``, any fsspec URL), where nothing can be renamed.

**The rule.** A Zarr store on an object store is complete exactly when its root metadata
(``zarr.json``, holding the consolidated metadata of every array) exists, and dcfa writes it
last. A store is written whole under a hidden temporary prefix ``.<name>.tmp-<id>`` next to the
destination (the workers write their chunks there directly), with a marker object
``.<name>.tmp-<id>.incomplete`` beside it. It is then published: every object except the root
metadata is copied (server side) to the destination, then the root metadata, then the temporary
prefix and the marker are deleted. An earlier result that is replaced loses its root metadata
first. Readers (``xr.open_zarr``, ``dcfa inspect``) cannot open a store without root metadata,
so a write killed at any point leaves nothing that looks complete; ``dcfa inspect`` names such a
prefix incomplete.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator

from dcfa._errors import InputError

__all__ = [
    "is_url",
    "check_protocol",
    "url_fs",
    "exists",
    "root_attributes",
    "root_attrs",
    "incomplete_reason",
    "staged",
]

INCOMPLETE = ".incomplete"  # suffix of the marker beside a temporary store (as locally)

ROOT_METADATA = ("zarr.json", ".zgroup", ".zattrs", ".zmetadata")


def is_url(path) -> bool:
    """Whether ``path`` names a location through a protocol (``s3://...``), not a local path."""
    return "://" in os.fspath(path) and not os.fspath(path).startswith("file://")


def check_protocol(url, key: str) -> None:
    """A ValueError naming ``key`` when ``url``'s protocol is not one fsspec knows (``S3://``
    for ``s3://``, a typo), before anything else reports fsspec's bare 'Protocol not known'."""
    import fsspec

    if not is_url(url):
        return
    known = set(fsspec.available_protocols())
    # chained URLs (simplecache::s3://...) name one protocol per link
    unknown = [p for p in os.fspath(url).split("://", 1)[0].split("::") if p not in known]
    if unknown:
        protocol = unknown[0]
        raise InputError(
            f"{key}: {os.fspath(url)!r}: the protocol {protocol!r} is not known (URLs are "
            "written in lower case, e.g. 's3://bucket/store.zarr')"
        )


def url_fs(url: str, storage_options: dict | None = None):
    """The fsspec filesystem of ``url`` and the path in it (no trailing slash)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    return fs, path.rstrip("/")


def exists(url: str, storage_options: dict | None = None) -> bool:
    fs, path = url_fs(url, storage_options)
    return bool(fs.exists(path))


def root_attributes(read) -> dict | None:
    """Root attributes from Zarr format 3 ``zarr.json`` or format 2 ``.zattrs``, read with
    ``read(name) -> bytes``; None when there is no root metadata."""
    for name, key in (("zarr.json", "attributes"), (".zattrs", None)):
        try:
            meta = json.loads(read(name))
        except (OSError, ValueError):
            continue
        attrs = meta.get(key, {}) if key else meta
        return attrs if isinstance(attrs, dict) else {}
    return None


def _meta(fs, path: str) -> dict | None:
    return root_attributes(lambda name: fs.cat(f"{path}/{name}"))


def root_attrs(url: str, storage_options: dict | None = None) -> dict | None:
    """The root attributes of the store at ``url``; None when it has no root metadata."""
    fs, path = url_fs(url, storage_options)
    return _meta(fs, path)


def incomplete_reason(url: str, storage_options: dict | None = None) -> str | None:
    """Why the store at ``url`` is not complete (no root metadata yet, or a temporary prefix of
    a dcfa write), or None."""
    fs, path = url_fs(url, storage_options)
    name = path.rsplit("/", 1)[-1]
    if ".tmp-" in name and name.startswith(".") and fs.exists(path + INCOMPLETE):
        return f"{url!r} is an incomplete store: a dcfa write that did not finish; safe to delete"
    if fs.exists(path) and _meta(fs, path) is None and not fs.isfile(path):
        return (
            f"{url!r} is an incomplete store: it has no root metadata (zarr.json), which is "
            "written last; a write to it did not finish"
        )
    return None


@contextlib.contextmanager
def staged(url: str, storage_options: dict | None = None) -> Iterator[str]:
    """Yield a temporary URL to write a store into; publish it at ``url`` on success (see the
    module docstring). The caller checks beforehand that ``url`` may be replaced."""
    fs, path = url_fs(url, storage_options)
    parent, name = path.rsplit("/", 1) if "/" in path else ("", path)
    tmp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex[:8]}" if parent else f".{name}.tmp"
    marker = tmp + INCOMPLETE
    from dcfa.storage.markers import marker_payload

    fs.pipe(marker, marker_payload(url))
    try:
        yield fs.unstrip_protocol(tmp)
        _publish(fs, tmp, path)
    finally:
        fs.invalidate_cache()  # the workers wrote the objects: this process's listings are stale
        if fs.exists(tmp):
            fs.rm(tmp, recursive=True)
        if fs.exists(marker):
            fs.rm(marker)
        fs.invalidate_cache()


def _publish(fs, tmp: str, path: str) -> None:
    fs.invalidate_cache()
    if fs.exists(path):  # retire the earlier store: first its root metadata, so it is never
        for name in ROOT_METADATA:  # taken for complete while half replaced
            if fs.exists(f"{path}/{name}"):
                fs.rm(f"{path}/{name}")
        fs.rm(path, recursive=True)
    objects = sorted(fs.find(tmp))
    roots = {f"{tmp}/{name}" for name in ROOT_METADATA}
    body = [o for o in objects if o not in roots]
    last = [o for o in objects if o in roots]
    for batch in (body, last):  # the root metadata last: the store is complete from then on
        if batch:
            fs.copy(batch, [path + o[len(tmp) :] for o in batch])
    fs.invalidate_cache()


def remove_leftovers(url: str, storage_options: dict | None = None) -> list[str]:
    """Remove temporary prefixes of killed writes to ``url`` (marker of a process of this
    machine that no longer runs); return what was removed."""
    from dcfa.storage.markers import is_stale

    fs, path = url_fs(url, storage_options)
    parent, name = path.rsplit("/", 1) if "/" in path else ("", path)
    removed = []
    for marker in fs.glob(f"{parent}/.{name}.tmp-*{INCOMPLETE}"):
        try:
            who = json.loads(fs.cat(marker))
        except (OSError, ValueError):
            continue
        if not is_stale(who):
            continue
        tmp = marker[: -len(INCOMPLETE)]
        if fs.exists(tmp):
            fs.rm(tmp, recursive=True)
        fs.rm(marker)
        removed.append(fs.unstrip_protocol(tmp))
    return removed


def listing(url: str, storage_options: dict | None = None) -> list:
    """Every object under ``url``: relative key, size and version tag (ETag or mtime)."""
    fs, path = url_fs(url, storage_options)
    out = []
    for key, info in sorted(fs.find(path, detail=True).items()):
        tag = info.get("ETag") or info.get("LastModified") or info.get("mtime") or ""
        out.append((key[len(path) :], int(info.get("size") or 0), str(tag)))
    return out

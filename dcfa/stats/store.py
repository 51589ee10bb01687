"""Saving and loading the fields of a moments value as a Zarr v3 group (atomically)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

import numpy as np

from dcfa._errors import InputError
from dcfa.stats.symmetric import SymmetricTiles
from dcfa.storage.objectstore import is_url
from dcfa.storage.store import OutputError, atomic_store, dcfa_kind


class StoredFields:
    """Saving and loading for a moments value made of named fields: the ``_ARRAYS`` fields
    as Zarr arrays (absent when None), the ``_ATTRS`` fields as attributes, and its kind
    (the class's name, which :func:`dcfa.stats.kinds.load_moments` dispatches on)."""

    _ARRAYS: tuple[str, ...] = ()
    _ATTRS: tuple[str, ...] = ()

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write to a Zarr store, atomically (see :meth:`dcfa.Moments.save`)."""
        from dcfa._version import __version__

        return write_zarr_atomic(
            path,
            arrays={a: getattr(self, a) for a in self._ARRAYS if getattr(self, a) is not None},
            attrs={
                "dcfa_kind": type(self).__name__,
                "dcfa_version": __version__,
                **{a: _plain(getattr(self, a)) for a in self._ATTRS},
            },
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> Self:
        """Read a value written by :meth:`save`."""
        group = open_stored(path, cls.__name__)
        meta = dict(group.attrs)
        fields = {a: (group[a][...] if a in group else None) for a in cls._ARRAYS}
        # attributes added in later versions are absent from older stores: their defaults apply
        fields.update(
            {
                a: (tuple(meta[a]) if isinstance(meta[a], list) else meta[a])
                for a in cls._ATTRS
                if a in meta
            }
        )
        return cls(**fields)


def open_stored(path, kind: str):
    """The Zarr group of the dcfa store of ``kind`` at ``path``, read-only.

    Raises ``FileNotFoundError`` when nothing is there, ``ValueError`` naming what is there
    otherwise (a file, a Zarr store dcfa did not write, moments of another kind).
    """
    import zarr

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"path: no moments store at {str(path)!r}")
    try:
        group = zarr.open_group(str(p), mode="r")
    except zarr.errors.NodeNotFoundError:  # a file, an empty directory, a Zarr array
        raise InputError(f"path: {str(path)!r} is not a dcfa {kind} store") from None
    found = group.attrs.get("dcfa_kind")
    if found != kind:
        what = (
            "is not a dcfa store"
            if found is None
            else f"holds dcfa {found}, not {kind} (dcfa.stats.kinds.load_moments reads any "
            "kind of moments dcfa saves)"
        )
        raise InputError(f"path: {str(path)!r} {what}")
    return group


def _plain(v):
    if isinstance(v, tuple | list | np.ndarray):
        return [int(x) for x in v]
    return (
        v
        if v is None or isinstance(v, str | bool)
        else float(v)
        if isinstance(v, float | np.floating)
        else int(v)
    )


def write_zarr_atomic(
    path: str | os.PathLike,
    *,
    arrays: dict[str, np.ndarray],
    attrs: dict,
    overwrite: bool = False,
) -> Path:
    """Write arrays and attributes as a Zarr v3 group, atomically
    (:func:`dcfa.storage.store.atomic_store`; ``overwrite`` replaces only a store dcfa wrote)."""
    import zarr

    _check_outside_foreign_store(path)
    with atomic_store(path, overwrite=overwrite) as tmp:
        group = zarr.open_group(str(tmp), mode="a", zarr_format=3)
        for name, value in arrays.items():
            if isinstance(value, SymmetricTiles):  # tile by tile: never the whole matrix
                value.write_into(group.create_array(name, shape=value.shape, dtype=value.dtype))
                continue
            value = np.asarray(value)
            group.create_array(name, shape=value.shape, dtype=value.dtype)[...] = value
        group.attrs.update(attrs)
    return Path(path)


# the files that make a directory a Zarr store or group (format 3, format 2)
_ZARR_METADATA = ("zarr.json", ".zgroup", ".zarray")


def _check_outside_foreign_store(path) -> None:
    """Refuse a local ``path`` inside a Zarr store that dcfa did not write (the input
    archive, say): saving there would add a group to someone else's store. Inside dcfa's own
    stores (a result's ``moments/``, a store being written) is fine."""
    if is_url(path):
        return
    here = Path(os.path.realpath(Path(path).parent))  # links resolved: a link cannot hide it
    for parent in (here, *here.parents):
        if any((parent / name).is_file() for name in _ZARR_METADATA):
            if dcfa_kind(parent) is None:
                raise OutputError(
                    f"path: {str(path)!r} lies inside the Zarr store {str(parent)!r}, which "
                    "dcfa did not write; dcfa does not add to other stores. Choose a path "
                    "outside it"
                )
            return  # inside a dcfa store: its own writer decides

"""Saving and loading the fields of a moments value as a Zarr v3 group (atomically)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dcfa.stats.symmetric import SymmetricTiles


class StoredFields:
    """Saving and loading for a moments value made of named fields: the ``_ARRAYS`` fields
    as Zarr arrays (absent when None), the ``_ATTRS`` fields as attributes, and its kind
    (the class's name, which :func:`dcfa.stats.kinds.load_moments` dispatches on)."""

    _ARRAYS: tuple[str, ...] = ()
    _ATTRS: tuple[str, ...] = ()

    def save(self, path, *, overwrite: bool = False) -> Path:
        """Write to a Zarr store, atomically (see :meth:`dcfa.Moments.save`)."""
        from dcfa import __version__

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
    def load(cls, path):
        """Read a value written by :meth:`save`."""
        import zarr

        kind = cls.__name__
        group = zarr.open_group(str(path), mode="r")
        meta = dict(group.attrs)
        if meta.get("dcfa_kind") != kind:
            raise ValueError(f"path: {str(path)!r} holds {meta.get('dcfa_kind')!r}, not {kind}")
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
    (:func:`dcfa.io.store.atomic_store`; ``overwrite`` replaces only a store dcfa wrote)."""
    import zarr

    from dcfa.io.store import atomic_store

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

"""``dcfa inspect``: what a store or an archive holds, in a few lines.

Text that comes from the store (names, attributes, coordinate values) is printed with control
characters escaped, so a store cannot move the cursor, recolour or rewrite the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from dcfa._errors import InputError
from dcfa._terminal import counted, escape
from dcfa.batch.destination import APPLIED
from dcfa.batch.output import print_groups, result_skill, skill_text
from dcfa.forecast.leads import steps_text
from dcfa.io.result import LOG_OF, LOG_OF_UNITS

__all__ = ["describe"]


def describe(store: str, storage_options: dict | None = None) -> str:
    """A few lines on what ``store`` holds: an archive's variables (in a Zarr store, netCDF
    files, one or a glob, a kerchunk reference or an icechunk repository), a result's groups, the
    result and archive of a ``dcfa apply`` output, a moments store's value (``Moments.save``,
    a result's ``moments/``), or Zarr's own view of a store xarray cannot open (a bare array,
    arrays without dimension names). An unknown URL protocol is a ValueError naming it.

    ``store`` is a local path or a URL (``s3://...``, with fsspec ``storage_options``). A
    temporary store of an interrupted write, or a store on object storage without its root
    metadata (written last), is reported incomplete (a ValueError).
    """
    from dcfa.io.archive import open_store, open_zarr
    from dcfa.io.sources import archive_kind, existing
    from dcfa.storage.objectstore import check_protocol
    from dcfa.storage.store import dcfa_kind, incomplete_reason

    check_protocol(store, "store")
    path = existing(store, "store", storage_options)
    if archive_kind(path) != "zarr":  # netCDF files, a kerchunk reference, an icechunk repo
        ds = open_store(path, "store", storage_options=storage_options)
        return "\n".join(escape(line) for line in _describe_archive(ds, store))
    reason = incomplete_reason(path, storage_options)
    if reason is not None:
        raise InputError(f"store: {escape(reason)}")
    kind = dcfa_kind(path, storage_options)
    if kind in _MOMENTS_KINDS:  # Zarr arrays without dims, which xarray cannot open
        return "\n".join(escape(line) for line in _describe_moments(path, kind, storage_options))
    try:
        ds = open_zarr(path, "store", storage_options=storage_options)
    except ValueError:
        # a Zarr store xarray cannot open (a bare array, arrays without dimension names) is
        # still described from Zarr's own metadata; anything else stays an error
        lines = _describe_plain_zarr(path, storage_options)
        if lines is None:
            raise
        return "\n".join(escape(line) for line in lines)
    if "dcfa_version" in ds.attrs and "region" in ds:
        lines = _describe_result(ds, path)
    elif kind == APPLIED:
        lines = _describe_applied(ds, path)
    else:
        lines = _describe_archive(ds, path)
    return "\n".join(escape(line) for line in lines)


_MOMENTS_KINDS = ("Moments", "GridMoments", "ColumnMoments")  # dcfa.stats.kinds.KINDS


def _describe_moments(path, kind: str, storage_options: dict | None) -> list[str]:
    """A moments store (``Moments.save``, a result's ``moments/``): its value, as its repr."""
    if isinstance(path, Path):
        from dcfa.stats.kinds import load_moments

        return [f"{path}: dcfa {kind} store", f"  {load_moments(path)!r}"]
    from dcfa.storage.objectstore import root_attrs

    attrs = root_attrs(path, storage_options) or {}
    shown = {k: v for k, v in attrs.items() if k != "dcfa_kind" and not isinstance(v, list | dict)}
    return [f"{path}: dcfa {kind} store", f"  {shown}"]


def _describe_applied(ds: xr.Dataset, path) -> list[str]:
    """An output of ``dcfa apply``: which result, which archive, which samples."""
    a = ds.attrs
    lines = [
        f"{path}: dcfa {a.get('dcfa_version')} region series of result {a.get('result')} "
        f"({a.get('created', '?')})",
        f"  archive {a.get('archive')}, {a.get('samples')}, "
        + (counted(int(a["n_groups"]), "group") if "n_groups" in a else "? groups"),
    ]
    if a.get("lead"):
        lead = steps_text(int(a["lead"]), a.get("lead_step", "sample"))
        lines.append(f"  lead {lead}: for the target at t + {lead}")
    return lines + _describe_archive(ds, path)[1:]


def _describe_plain_zarr(path, storage_options: dict | None) -> list[str] | None:
    """Zarr's view of a store xarray cannot open: its arrays' shapes, types and chunks, and
    why dcfa cannot read it as an archive; None when Zarr cannot open it either."""
    import zarr

    try:
        node = zarr.open(str(path), mode="r", storage_options=storage_options or None)
    except Exception:  # zarr raises several types for a non-store
        return None

    def line(name: str, a) -> str:
        return f"  {name}: shape {a.shape}, {a.dtype}, chunks {a.chunks}"

    if isinstance(node, zarr.Array):
        return [
            f"{path}: a single Zarr array, not a group of named variables (dcfa reads "
            "groups, e.g. written by xarray's to_zarr)",
            line("(root)", node),
        ]
    arrays = sorted(node.arrays(), key=lambda kv: kv[0])
    return [
        f"{path}: a Zarr group of {len(arrays)} array(s) without dimension names, which "
        "xarray (and dcfa) cannot read as variables; write it with xarray's to_zarr"
    ] + [line(name, a) for name, a in arrays]


def _describe_archive(ds: xr.Dataset, path: Path) -> list[str]:
    from dcfa.memory.check import gib

    lines = [f"{path}: {len(ds.data_vars)} variable(s), {gib(ds.nbytes)}"]
    for name, da in ds.data_vars.items():
        chunks = {d: c[0] if len(set(c)) == 1 else c for d, c in da.chunksizes.items()}
        lines.append(f"  {name}{da.dims}: {dict(da.sizes)}, {da.dtype}, chunks {chunks}")
    for name, c in ds.coords.items():
        if c.ndim == 1 and c.size:
            lines.append(f"  coord {name}: {c.values[0]} .. {c.values[-1]} ({c.size})")
    return lines


def _target_units(ds: xr.Dataset) -> str | None:
    """The units of the target the result keeps (``target.units`` for a CSV), as said; of
    the quantity, for a target fitted on its logarithm (``target.transform``)."""
    attrs = ds["target"].attrs if "target" in ds else {}
    if LOG_OF in attrs or LOG_OF_UNITS in attrs:
        units = attrs.get(LOG_OF_UNITS)
        return (f"in {units}, " if units else "") + "fitted on its logarithm"
    units = attrs.get("units")
    return f"in {units}" if units else None


def _parenthesised(*parts) -> str:
    """`` (a, b)`` of the parts given, or nothing."""
    said = [str(p) for p in parts if p]
    return f" ({', '.join(said)})" if said else ""


def _describe_result(ds: xr.Dataset, path: Path) -> list[str]:
    a = ds.attrs
    region = ds["region"].values
    used = np.isfinite(region) & (region >= 0) if region.dtype.kind == "f" else region >= 0
    lines = [
        f"{path}: dcfa {a.get('dcfa_version')} result of {a.get('method')} "
        f"({a.get('created', '?')})",
        f"  input {a.get('input_store')}, target {a.get('target')}"
        + _parenthesised(a.get("target_variable"), _target_units(ds))
        + ", "
        f"{a.get('n_samples_used')} samples",
        f"  {counted(ds.sizes.get('group', 0), 'group')} over {counted(int(used.sum()), 'cell')} "
        f"({int((~used).sum())} not used)",
        f"  parameters {json.loads(a.get('parameters', '{}'))}",
    ]
    target = json.loads(a.get("config", "{}")).get("target", {})
    lead = target.get("lead", 0)
    chosen = (
        f"; eps {a['eps']:g} chosen by forward CV"
        if "eps" in a
        else f"; level {a['level']:g}, {a.get('order', 'relevance')} order, chosen by blocked CV"
        if "level" in a
        else ""
    )
    if lead:
        lead = steps_text(lead, a.get("lead_step", "sample"))
    lines.append(f"  lead {lead} (target.lead){chosen}")
    if target.get("months"):
        lines.append(f"  the target's months {target['months']} only (target.months)")
    skill = skill_text(result_skill(a))
    if skill:
        lines.append(f"  {skill}")
    for name, c in json.loads(a.get("missing_chunks", "{}")).items():
        lines.append(
            f"  {c['missing']} of the {c['chunks']} chunks of {name!r} were missing from the "
            f"input store and read as its fill value ({c['fill_value']})"
        )
    if "embedding" in ds:
        lines.append(f"  GBMAP embedding {dict(ds['embedding'].sizes)}")
    if isinstance(path, Path) and (path / "moments").exists():
        from dcfa.stats.kinds import load_moments

        lines.append(f"  moments: {load_moments(path / 'moments')!r}")
    if "group_target_corr" not in ds:
        return lines
    print_groups(ds, lines.append, top=5, indent="  ")
    return lines

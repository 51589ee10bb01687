"""The archive held in the workers' memory between a job's passes.

Reading and decoding an archive is a pass's largest cost. One that fits easily in the workers'
memory is read once and kept there for the features pass; a job of several targets keeps it for
every target's passes, spilling what does not fit to the workers' disks.
"""

from __future__ import annotations

import xarray as xr

from dcfa import io
from dcfa._compute import scheduler_workers
from dcfa.memory.check import gib

_HOLD_FRACTION = 0.2  # of the workers' total memory limit


def held_if_small(field: xr.DataArray, client, echo) -> xr.DataArray:
    """An archive that fits easily in the workers' memory is read once and kept there for
    the second pass (the features): reading and decoding it is a pass's largest cost. A larger
    one is streamed from the store by each pass."""
    total = _workers_memory(client)
    if not total or field.nbytes > _HOLD_FRACTION * total:
        return field
    echo(
        f"      the archive ({gib(field.nbytes)}) is read once and held in the "
        f"workers' memory ({gib(total)}) for both passes"
    )
    return _hold(field, client)


def held_for_targets(field: xr.DataArray, dim: str, client, echo) -> xr.DataArray:
    """The archive read once, in the passes' chunks, and kept on the workers for every
    target's passes (what does not fit their memory is spilled to their disks)."""
    field = io.plan_chunks(field, sample_dim=dim)
    total = _workers_memory(client)
    echo(
        f"      the archive ({gib(field.nbytes)}) is read once and held on the "
        "workers for every target"
        + (
            f" (over their memory, {gib(total)}: the rest on their disks)"
            if total and field.nbytes > total
            else ""
        )
    )
    return _hold(field, client)


def _workers_memory(client) -> int:
    """The workers' memory limits in all (0 when a worker has none: unbounded)."""
    limits = [w.get("memory_limit") or 0 for w in scheduler_workers(client).values()]
    return sum(limits) if limits and all(limits) else 0


def _hold(field: xr.DataArray, client) -> xr.DataArray:
    """``field`` read and kept on the workers, its blocks read as the passes need them."""
    # below the passes' tasks, so that a block's pass task runs as soon as the block is read
    # (reading and the pass overlap); the first block first, as every pass task needs it
    # (its per-cell shift, dcfa.stats.kernels.column_shift): dask.order reads sibling blocks
    # last to first
    # (unoptimised: the same tasks for the same keys in both calls; fifo_timeout=0: each call
    # a later generation of priorities, else calls within a minute share one)
    hold = {"priority": -1, "optimize_graph": False, "fifo_timeout": 0}
    first = client.persist(_first_blocks(field.data), **hold)
    held = client.persist(field, **hold)
    del first  # its blocks are held as the field's
    return held


def _first_blocks(data):
    """The blocks of the first chunk of samples of the dask array ``data``, under their own
    keys (persisting them computes and keeps exactly those keys)."""
    import itertools

    import dask.array as da

    keys = {(data.name, 0, *i) for i in itertools.product(*map(range, data.numblocks[1:]))}
    graph = data.__dask_graph__().cull(keys)  # their tasks only
    return da.Array(graph, data.name, ((data.chunks[0][0],), *data.chunks[1:]), meta=data._meta)

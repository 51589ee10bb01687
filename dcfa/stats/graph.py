"""The Dask side of :mod:`dcfa.stats.moments`: one pass over a chunked array, tile by tile.

``Z = [X, Y]`` is cut into column blocks (the feature chunks of ``X`` plus one block for the
targets). The ``p x p`` result is assembled from the tiles ``(I, J)``, ``I <= J``, of that
block structure. For each tile and each row slab (consecutive row chunks joined,
:func:`slab_rows`) one task computes the moments of that row block of the two column blocks
(:func:`dcfa.stats.kernels.chunk_exclude`); a tree of :func:`dcfa.stats.kernels.combine`
tasks (``split_every`` inputs each) merges the slabs. So no task holds more than a pair of
slabs and one output tile, and the memory of a worker does not depend on the number of rows.
On a local scheduler a small pass skips the tiles (:func:`dcfa.moments`).

Row *segments* (used for cross-validation folds) are contiguous row ranges reduced
separately in the same pass: the row chunks are first split at the segment boundaries.
"""

from __future__ import annotations

from functools import partial
from itertools import count
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from dcfa._compute import SPLIT_EVERY as _DEFAULT_SPLIT_EVERY
from dcfa._compute import tree
from dcfa._errors import InputError
from dcfa.stats import kernels
from dcfa.stats.symmetric import SymmetricTiles, tile_columns

__all__ = [
    "column_moments",
    "column_summary",
    "combine_tree",
    "as_chunked",
    "lazy_anomalies",
    "moments_layout",
    "row_moments",
    "segment_rows",
    "slab_rows",
    "tiled_moments",
]


def _split_at_segments(X: da.Array, segments, missing: str | None = None):
    """``X`` rechunked so that no row chunk crosses a segment boundary, the row bounds
    ``[0, ..., n]`` (``segments``, or one segment of all rows) and each row chunk's segment:
    what every graph builder starts from. ``missing``: a moments pass's chunks instead
    (:func:`moments_layout`)."""
    bounds = [0, X.shape[0]] if segments is None else list(segments)
    if missing is None:
        row_chunks, seg_of_chunk = segment_rows(X.chunks[0], bounds)
        chunks = (row_chunks, X.chunks[1])
    else:
        row_chunks, col_chunks, seg_of_chunk = moments_layout(X.chunks, bounds, missing)
        chunks = (row_chunks, col_chunks)
    if chunks != X.chunks:
        X = X.rechunk(chunks)
    return X, bounds, seg_of_chunk


def segment_rows(chunks: tuple[int, ...], bounds: list[int]) -> tuple[tuple[int, ...], list[int]]:
    """Split row chunks at segment boundaries.

    Returns the refined chunk sizes and, per refined chunk, the index of its segment.
    ``bounds`` are the interior boundaries plus 0 and n, increasing.
    """
    edges = np.cumsum((0, *chunks))
    cuts = np.unique(np.concatenate([edges, bounds]))
    sizes = tuple(int(s) for s in np.diff(cuts) if s > 0)
    starts = np.cumsum((0, *sizes))[:-1]
    seg = np.searchsorted(bounds, starts, side="right") - 1
    return sizes, [int(s) for s in seg]


#: a dense pass joins consecutive row chunks into slabs of up to this many rows: merging a
#: tile into the running one (4 passes over it) costs about as much as a product over 250
#: rows, so a pass over monthly chunks of 240 would spend half its time merging
SLAB_ROWS = 2048


def slab_rows(
    chunks: tuple[int, ...], bounds: list[int], width: int
) -> tuple[tuple[int, ...], list[int]]:
    """:func:`segment_rows`, then consecutive chunks of a segment joined into slabs of at most
    :data:`SLAB_ROWS` rows and at most ``2 * width`` rows (``width``: the widest column block,
    so that a slab of a block holds at most twice the values of the largest tile a task
    makes). A chunk is never split."""
    sizes, seg = segment_rows(chunks, bounds)
    cap = min(SLAB_ROWS, 2 * int(width))
    out: list[int] = []
    out_seg: list[int] = []
    for size, s in zip(sizes, seg, strict=True):
        if out and out_seg[-1] == s and out[-1] + size <= cap:
            out[-1] += size
        else:
            out.append(size)
            out_seg.append(s)
    return tuple(out), out_seg


def moments_layout(
    chunks: tuple[tuple[int, ...], tuple[int, ...]], bounds: list[int], missing: str
) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    """The row and column chunks of :func:`tiled_moments`' pass over an array of ``chunks``,
    and each row chunk's segment: the columns cut to tiles of at most
    :data:`~dcfa.stats.symmetric.TILE_COLUMNS` (a wide chunk would be one task, one product on
    one core), the rows joined into :func:`slab_rows` (``missing="pairwise"`` keeps its row
    chunks: its per-pair matrices are its cost, not the merges)."""
    col_chunks = tile_columns(chunks[1])
    if missing == "exclude":
        row_chunks, seg_of_chunk = slab_rows(chunks[0], bounds, max(col_chunks))
    else:
        row_chunks, seg_of_chunk = segment_rows(chunks[0], bounds)
    return row_chunks, col_chunks, seg_of_chunk


def tiled_moments(
    X: da.Array,
    Y: da.Array | None,
    *,
    missing: str = "exclude",
    segments: list[int] | None = None,
    split_every: int | None = None,
    tiles: bool = False,
) -> list[dict[str, da.Array]]:
    """Lazy moments of ``[X, Y]``, one dict of Dask arrays per row segment.

    The dict keys are the :class:`dcfa.Moments` fields (``count``, ``mean``,
    ``cross`` and, pairwise, ``m2``); ``n`` and ``n_targets`` are known without computing.
    The chunks are those of :func:`moments_layout`. ``tiles=True`` (``missing="exclude"``):
    ``cross`` is a lazy :class:`~dcfa.stats.symmetric.SymmetricTiles` of the upper tiles,
    never assembled.
    """
    split_every = split_every or _DEFAULT_SPLIT_EVERY
    if split_every < 2:
        raise InputError(f"split_every: expected an int >= 2, got {split_every}")
    X, bounds, seg_of_chunk = _split_at_segments(X, segments, missing)
    blocks = [(X.name, b, w) for b, w in enumerate(X.chunks[1])]
    if Y is not None:
        Y = Y.rechunk({0: X.chunks[0], 1: -1})
        blocks.append((Y.name, 0, Y.shape[1]))
    n_blocks = len(blocks)
    n_seg = len(bounds) - 1

    kernel = kernels.chunk_pairwise if missing == "pairwise" else kernels.chunk_exclude
    pairs = [(i, j) for i in range(n_blocks) for j in range(i, n_blocks)]
    deps = [X] if Y is None else [X, Y]
    graph, tile_name = _tile_graph(
        "dcfa-moments-tiles",
        deps,
        blocks,
        pairs,
        kernel,
        seg_of_chunk,
        n_seg,
        split_every,
        tokenize(X, Y, missing, bounds, split_every, tiles),
        fold=tiles,
    )
    widths = tuple(b[2] for b in blocks)

    out = []
    for s in range(n_seg):
        sq = partial(_square, graph, tile_name, s, n_blocks, widths)
        if tiles:
            fields = {"cross": _tiles(graph, tile_name, s, pairs, widths)}
        else:
            fields = {"cross": sq("cross", _symmetric)}
        if missing == "pairwise":
            fields["count"] = sq("count", _symmetric)
            fields["mean"] = sq("mean", _pair_mean)
            fields["mean_lo"] = sq("mean_lo", _pair_mean)
            fields["m2"] = sq("m2", _pair_field)
        else:
            fields["count"] = _diagonal(graph, tile_name, s, n_blocks, widths, "count")
            fields["mean"] = _diagonal(graph, tile_name, s, n_blocks, widths, "mean")
            fields["mean_lo"] = _diagonal(graph, tile_name, s, n_blocks, widths, "mean_lo")
        out.append(fields)
    return out


def _tile_graph(
    prefix, deps, blocks, pairs, kernel, seg_of_chunk, n_seg, split_every, token, fold=False
):
    """Chunk and tree-combine tasks for the tiles ``pairs`` of the column ``blocks``.

    ``fold``: every tile's row chunks merged as they come (:func:`_fold_chunks`), not only
    the large ones (:func:`fold_tile`): a tiled pass has many tiles at once.

    ``blocks`` are ``(array name, column block index, width)``; ``pairs`` lists the tiles
    ``(i, j)`` to compute (``i == j``: a diagonal tile). The root of tile ``(i, j)`` in
    segment ``s`` is the key ``(name, s, i, j)``; the per-column shift of block ``b`` is
    ``(name, "shift", b)``.
    """
    tile_name = f"{prefix}-{token}"
    dsk: dict = {}
    ids = count()
    # one reference value per column, from the first row chunk (see column_shift)
    for b in sorted({b for pair in pairs for b in pair}):
        name, idx, _ = blocks[b]
        dsk[(tile_name, "shift", b)] = (kernels.column_shift, (name, 0, idx))
    for i, j in pairs:
        per_seg: list[list] = [[] for _ in range(n_seg)]
        for r, s in enumerate(seg_of_chunk):
            key = (tile_name, "chunk", next(ids))
            a = (blocks[i][0], r, blocks[i][1])
            shift_a = (tile_name, "shift", i)
            if i == j:
                dsk[key] = (kernel, a, None, shift_a)
            else:
                b = (blocks[j][0], r, blocks[j][1])
                dsk[key] = (kernel, a, b, shift_a, (tile_name, "shift", j))
            per_seg[s].append(key)
        for s, keys in enumerate(per_seg):
            if not keys:
                raise InputError(f"segments: segment {s} holds no rows")
            if fold or fold_tile(blocks[i][2], blocks[j][2]):  # memory over parallelism
                keys = _fold_chunks(dsk, tile_name, ids, keys, split_every)
            # alias of the root of the tree
            dsk[(tile_name, s, i, j)] = combine_tree(
                dsk, tile_name, keys, kernels.combine, split_every=split_every, ids=ids
            )
    return HighLevelGraph.from_collections(tile_name, dsk, dependencies=deps), tile_name


def combine_tree(dsk: dict, name: str, keys: list, combine, *args, split_every=None, ids=None):
    """Add to the graph ``dsk`` the tree of ``combine(group, *args)`` tasks that merges the
    tasks ``keys`` (the row chunks of one statistic, in order); return the key of its root.

    The reduction of every hand-built pass (moments tiles, grid blocks): the shape of
    :func:`dcfa._compute.tree`, new keys ``(name, "combine", i)``.
    """
    ids = count() if ids is None else ids

    def node(group):
        key = (name, "combine", next(ids))
        dsk[key] = (combine, list(group), *args)
        return key

    return tree(keys, node, split_every or _DEFAULT_SPLIT_EVERY)


FOLD_TILE_BYTES = 64 * 2**20


def fold_tile(width_a: int, width_b: int) -> bool:
    """Whether a tile's row chunks are merged as they come (:func:`_fold_chunks`): for tiles
    of at least ``FOLD_TILE_BYTES`` (a dense fit's large tiles, where holding ``split_every``
    of them is the pass's peak); smaller tiles keep the tree, whose chunk tasks run in
    parallel."""
    return 8 * width_a * width_b >= FOLD_TILE_BYTES


def _fold_chunks(dsk: dict, tile_name: str, ids, keys: list, split_every: int) -> list:
    """The first level of the tree as folds: each group of ``split_every`` chunk tasks becomes
    a chain ``fold_chunk(... fold_chunk(chunk_0, chunk_1 args) ..., chunk_k args)``.

    The same left fold ``combine`` does over the group (bit for bit), but each step computes
    its chunk and merges it at once, so a tile holds two matrices at a time, not
    ``split_every`` finished chunks waiting for their merge.
    """
    level = []
    for start in range(0, len(keys), split_every):
        group = keys[start : start + split_every]
        acc = group[0]
        for key in group[1:]:
            task = dsk.pop(key)
            fold = (tile_name, "chunk", next(ids))  # still one row chunk's task
            dsk[fold] = (kernels.fold_chunk, acc, *task)
            acc = fold
        level.append(acc)
    return level


def column_moments(
    X: da.Array, Y: da.Array, *, segments: list[int] | None = None, split_every: int | None = None
):
    """Lazy per-column count, mean and centred sum of squares of ``X``, and the centred
    cross-products of every column with ``Y``: the tiles ``(I, y)`` only, never ``D x D``.

    Returns a dict of Dask arrays: ``count``, ``mean``, ``m2`` (``D``), ``target_cross``
    (``D x k``), ``target_mean``, ``target_m2`` (``k``); with ``segments`` (row bounds
    ``[0, ..., n]``), a list of such dicts, one per row segment, from the same pass.
    """
    split_every = split_every or _DEFAULT_SPLIT_EVERY
    X, bounds, seg_of_chunk = _split_at_segments(X, segments)
    blocks = [(X.name, b, w) for b, w in enumerate(X.chunks[1])]
    nx = len(blocks)
    Y = Y.rechunk({0: X.chunks[0], 1: -1})
    blocks.append((Y.name, 0, Y.shape[1]))
    pairs = [(i, nx) for i in range(nx)] + [(nx, nx)]
    graph, tile = _tile_graph(
        "dcfa-columns",
        [X, Y],
        blocks,
        pairs,
        partial(kernels.chunk_exclude, column_stats=True),
        seg_of_chunk,
        len(bounds) - 1,
        split_every,
        tokenize(X, Y, bounds, split_every),
    )
    widths = tuple(w for _, _, w in blocks[:nx])
    k = Y.shape[1]
    parts = []
    for s in range(len(bounds) - 1):
        out = {f: _blocks1d(graph, tile, pairs[:nx], f, widths, s) for f in ("count", "mean", "m2")}
        name = f"dcfa-columns-ycross-{s}-{tile[-32:]}"
        dsk = {(name, i, 0): (_field, (tile, s, i, nx), "cross") for i in range(nx)}
        out["target_cross"] = _layer(graph, tile, name, dsk, (widths, (k,)))
        for f in ("mean", "m2"):
            name = f"dcfa-columns-y{f}-{s}-{tile[-32:]}"
            task = (_a_side, (tile, s, nx, nx), f, (tile, "shift", nx))
            out[f"target_{f}"] = _layer(graph, tile, name, {(name, 0): task}, ((k,),))
        parts.append(out)
    return parts[0] if segments is None else parts


def column_summary(X, *, split_every: int | None = None):
    """Per-column statistics of ``X`` for a standardisation, in one pass.

    A dict: ``n`` (rows), ``count`` (finite values), ``shift`` (the reference the moments were
    taken around, :func:`dcfa.stats.kernels.column_shift`; zeros if none was needed), ``centre``
    (the mean of ``x - shift``), ``m2`` (the centred sum of squares), ``constant`` (every value
    equal: an exact test, not a zero variance) and ``nonfinite`` (NaN and inf entries in ``X``).
    The kernel is :func:`dcfa.stats.kernels.chunk_columns`, merged by the engine's
    :func:`~dcfa.stats.kernels.combine`. A NumPy ``X`` gives NumPy values, ``finalize(chunk(X))``;
    a Dask ``X`` a :class:`~dask.delayed.Delayed` of them (one tile per column block, its row
    chunks merged as a tree).
    """
    if not isinstance(X, da.Array):
        X = np.asarray(X)
        shift = kernels.column_shift(X)
        return _summary(kernels.chunk_columns(X, None, shift), shift)
    split_every = split_every or _DEFAULT_SPLIT_EVERY
    blocks = [(X.name, b, w) for b, w in enumerate(X.chunks[1])]
    pairs = [(i, i) for i in range(len(blocks))]
    graph, tile = _tile_graph(
        "dcfa-column-summary-tiles",
        [X],
        blocks,
        pairs,
        kernels.chunk_columns,
        [0] * len(X.chunks[0]),
        1,
        split_every,
        tokenize(X, split_every),
    )
    name = f"dcfa-column-summary-fields-{tile[-32:]}"
    parts = [[(tile, 0, i, i), (tile, "shift", i)] for i in range(len(blocks))]
    hlg = HighLevelGraph(
        layers={**graph.layers, name: {name: (_summaries, parts)}},
        dependencies={**graph.dependencies, name: {tile}},
    )
    return Delayed(name, hlg, layer=name)


def _summary(tile: dict, shift) -> dict:
    centre = tile["mean_a"]
    return {
        "n": int(tile["n"]),
        "count": tile["count_a"],
        "shift": np.zeros_like(centre) if shift is None else np.asarray(shift, dtype=np.float64),
        "centre": centre,
        "m2": tile["m2_a"],
        "constant": tile["min_a"] == tile["max_a"],
        "nonfinite": int(tile["bad"]),
    }


def _summaries(parts: list) -> dict:
    """:func:`_summary` of each column block, joined along the columns."""
    out = [_summary(tile, shift) for tile, shift in parts]
    fields = ("count", "shift", "centre", "m2", "constant")
    joined = {f: np.concatenate([o[f] for o in out]) for f in fields}
    return {**joined, "n": out[0]["n"], "nonfinite": sum(o["nonfinite"] for o in out)}


def row_moments(
    X: da.Array,
    columns: np.ndarray,
    *,
    segments: list[int] | None = None,
    split_every: int | None = None,
):
    """Lazy centred cross-products of every column of ``X`` with ``X[:, columns]``:
    a ``D x B`` Dask array, the tiles ``(I, batch)`` only; with ``segments`` (row bounds
    ``[0, ..., n]``), a list of them, one per row segment (each centred on its own rows),
    from the same pass."""
    split_every = split_every or _DEFAULT_SPLIT_EVERY
    X, bounds, seg_of_chunk = _split_at_segments(X, segments)
    B = X[:, np.asarray(columns)].rechunk({0: X.chunks[0], 1: -1})
    blocks = [(X.name, b, w) for b, w in enumerate(X.chunks[1])] + [(B.name, 0, B.shape[1])]
    nx = len(blocks) - 1
    graph, tile = _tile_graph(
        "dcfa-rows",
        [X, B],
        blocks,
        [(i, nx) for i in range(nx)],
        kernels.chunk_exclude,
        seg_of_chunk,
        len(bounds) - 1,
        split_every,
        tokenize(X, list(columns), bounds, split_every),
    )
    parts = []
    for s in range(len(bounds) - 1):
        name = f"dcfa-rows-cross-{s}-{tile[-32:]}"
        dsk = {(name, i, 0): (_field, (tile, s, i, nx), "cross") for i in range(nx)}
        parts.append(_layer(graph, tile, name, dsk, (tuple(X.chunks[1]), (B.shape[1],))))
    return parts[0] if segments is None else parts


def _field(tile: dict, field_: str) -> np.ndarray:
    return tile[field_]


def _blocks1d(graph, tile, pairs, field_, widths, s: int = 0) -> da.Array:
    name = f"dcfa-columns-{field_}-{s}-{tile[-32:]}"
    dsk = {
        (name, i): (_a_side, (tile, s, i, j), field_, (tile, "shift", i))
        for i, (_, j) in enumerate(pairs)
    }
    return _layer(graph, tile, name, dsk, (widths,))


def _a_side(tile: dict, field_: str, shift) -> np.ndarray:
    if field_ == "count":
        return np.asarray(tile["count_a"], dtype=np.float64)
    if field_ == "m2":  # a diagonal tile has them on its diagonal
        return tile["m2_a"] if "m2_a" in tile else np.diagonal(tile["cross"]).copy()
    return tile["mean_a"] if shift is None else shift + tile["mean_a"]


# getters: block (I, J) of a (p, p) field from the tile (min, max) of the pair


def _symmetric(tile: dict, field_: str, shift, upper: bool) -> np.ndarray:
    return tile[field_] if upper else np.ascontiguousarray(tile[field_].T)


def _pair_field(tile: dict, field_: str, shift, upper: bool) -> np.ndarray:
    # m2[i, j] is about column i: the a-side of the tile above the diagonal, b-side below
    return tile[f"{field_}_a"] if upper else np.ascontiguousarray(tile[f"{field_}_b"].T)


def _pair_mean(tile: dict, field_: str, shift, upper: bool) -> np.ndarray:
    """``"mean"``: the pairwise means ``shift + mean`` rounded; ``"mean_lo"``: their
    rounding errors (:func:`~dcfa.stats.kernels.two_sum`, see :class:`dcfa.Moments`)."""
    mean = _pair_field(tile, "mean", shift, upper)
    return _shifted(mean, None if shift is None else shift[:, None], field_)


def _shifted(mean: np.ndarray, shift, field_: str) -> np.ndarray:
    """``shift + mean`` (``field_ == "mean"``) or its rounding error (``"mean_lo"``)."""
    if shift is None:
        return mean if field_ == "mean" else np.zeros_like(mean)
    return kernels.two_sum(shift, mean)[field_ == "mean_lo"]


def _square(graph, tile_name, s, n_blocks, widths, field_, getter) -> da.Array:
    name = f"dcfa-moments-{field_}-{s}-{tile_name[-32:]}"
    dsk = {}
    for i in range(n_blocks):
        for j in range(n_blocks):
            tile = (tile_name, s, min(i, j), max(i, j))
            dsk[(name, i, j)] = (getter, tile, field_, (tile_name, "shift", i), i <= j)
    return _layer(graph, tile_name, name, dsk, (widths, widths))


def _tiles(graph, tile_name, s, pairs, widths) -> SymmetricTiles:
    """The cross-products of segment ``s`` as lazy upper tiles, a one-chunk Dask array each
    (arrays, so that one ``dask.compute`` optimises them with the other fields' arrays)."""
    tiles = {}
    for i, j in pairs:
        name = f"dcfa-moments-cross-{s}-{i}-{j}-{tile_name[-32:]}"
        dsk = {(name, 0, 0): (_field, (tile_name, s, i, j), "cross")}
        tiles[i, j] = _layer(graph, tile_name, name, dsk, ((widths[i],), (widths[j],)))
    return SymmetricTiles(np.cumsum((0, *widths)), tiles)


def _diagonal(graph, tile_name, s, n_blocks, widths, field_) -> da.Array:
    name = f"dcfa-moments-{field_}-{s}-{tile_name[-32:]}"
    dsk = {
        (name, i): (_diagonal_field, (tile_name, s, i, i), field_, (tile_name, "shift", i))
        for i in range(n_blocks)
    }
    return _layer(graph, tile_name, name, dsk, (widths,))


def _diagonal_field(tile: dict, field_: str, shift) -> np.ndarray:
    if field_ in ("mean", "mean_lo"):
        return _shifted(tile["mean_a"], shift, field_)
    return np.asarray(tile["count_a"], dtype=np.float64)


def _layer(graph, tile_name, name, dsk, chunks) -> da.Array:
    hlg = HighLevelGraph(
        layers={**graph.layers, name: dsk},
        dependencies={**graph.dependencies, name: {tile_name}},
    )
    return da.Array(hlg, name, chunks=chunks, dtype=np.float64)


############################################################################################
# anomalies: one blockwise operation over the field's chunks


def as_chunked(values, chunks) -> da.Array:
    """``values`` as a Dask array of ``chunks``: a NumPy array is embedded in the graph, a
    Dask one rechunked."""
    if isinstance(values, da.Array):
        return values.rechunk(chunks)
    return da.from_array(values, chunks=chunks)


def _indices(ndim: int) -> str:
    """Blockwise indices of the data's axes: lowercase letters (new axes are uppercase)."""
    return "".join(chr(ord("i") + k) for k in range(ndim))


def lazy_anomalies(data: da.Array, clim, scale, groups, dtype) -> da.Array:
    """:func:`~dcfa.stats.kernels.anomaly_block` on every block of ``data`` (samples first):
    one blockwise operation, chunks kept (xarray's ``groupby`` would split the samples one per
    chunk). The transform of :class:`dcfa.Anomalies` and :func:`dcfa.io.apply_preprocessing`.

    ``clim`` and ``scale`` are NumPy arrays, embedded in the graph, or Dask arrays (held on a
    cluster's workers, so that each pass's graph does not carry them)."""
    idx = _indices(data.ndim)
    spatial = data.chunks[1:]
    args: list[Any] = [data, idx]
    if clim is not None:
        args += [as_chunked(clim, ((clim.shape[0],), *spatial)), "G" + idx[1:]]
    else:
        args += [None, None]
    if scale is not None:
        args += [as_chunked(scale, spatial), idx[1:]]
    else:
        args += [None, None]
    args += [da.from_array(groups, chunks=(data.chunks[0],)), idx[0]]
    return da.blockwise(
        kernels.anomaly_block,
        idx,
        *args,
        dtype=dtype,
        concatenate=True,
        meta=np.empty((0,) * data.ndim, dtype=dtype),
        out_dtype=dtype,
    )

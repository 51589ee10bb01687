"""The grid pass's kernels (dcfa.stats.stencil) against the plain NumPy formulation they
replace: whole-block sweeps, a boolean mask set twice, ``(a * b).sum(axis=0)`` temporaries and
out-of-place Chan merges. Bit for bit, since a job's resume and a result applied to its own
archive compare stored numbers exactly; and the archive a job holds in memory is read first
block first (every task of the grid pass waits for its shift)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

import dcfa.stats.stencil as stencil
from dcfa.stats.stencil import (
    half_offsets,
    interior,
    padded,
    stencil_chunk,
    stencil_combine,
    stencil_shift,
)


def plain_chunk(block, y, seg, shift, R, offsets, n_seg, pad):
    """The kernel as one sweep per step over the whole haloed block."""
    a = padded(block, R, pad)
    a -= shift
    m = a.shape[0]
    seg = np.zeros(m, dtype=np.int64) if seg is None else np.asarray(seg, np.int64)
    missing = ~np.isfinite(a)
    a[missing] = 0.0
    n = np.bincount(seg, minlength=n_seg)
    flat = a.reshape(m, -1)
    holes = missing.reshape(m, -1)
    if n_seg == 1:
        seen = (m - missing.sum(axis=0))[None]
        mean = a.sum(axis=0)[None] / np.maximum(seen, 1)
        a -= mean[0]
    else:
        onehot = np.zeros((n_seg, m))
        onehot[seg, np.arange(m)] = 1.0
        seen = np.stack([(~holes[seg == s]).sum(axis=0) for s in range(n_seg)])
        mean = (onehot @ flat) / np.maximum(seen, 1)
        for t in range(m):
            flat[t] -= mean[seg[t]]
        seen = seen.reshape(n_seg, *a.shape[1:])
        mean = mean.reshape(n_seg, *a.shape[1:])
    a[missing] = 0.0
    inner = tuple(s - 2 * R for s in a.shape[1:])
    ci = a[(slice(None), *interior(R, inner))]
    out = {
        "n": n,
        "seen": seen,
        "mean": mean,
        "count": m - missing[(slice(None), *interior(R, inner))].sum(axis=0),
        "diag": np.einsum("t...,t...->...", ci, ci),
        "cross": np.array(
            [
                np.einsum("t...,t...->...", ci, a[(slice(None), *interior(R, inner, o))])
                for o in offsets
            ]
        ).reshape(len(offsets), *inner),
    }
    if y is not None:
        ymean = np.bincount(seg, weights=y, minlength=n_seg) / np.maximum(n, 1)
        yc = y - ymean[seg]
        out.update(
            ymean=ymean,
            yy=np.bincount(seg, weights=yc * yc, minlength=n_seg),
            ty=np.einsum("t,t...->...", yc, ci),
        )
    return out


def plain_merge(x, y, R, offsets):
    """Chan's update with every temporary written out (the arrays of x and y untouched)."""
    nx, ny = x["seen"], y["seen"]
    seen = nx + ny
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(seen > 0, ny / seen, 0.0)
        f = np.where(seen > 0, nx * ny / seen, 0.0)
    inner = x["diag"].shape
    core = (slice(None), *interior(R, inner))
    d = y["mean"] - x["mean"]
    mean = x["mean"] + d * w
    d = np.where((nx > 0) & (ny > 0), d, 0.0)
    fd = f[core] * d[core]
    cross = x["cross"] + y["cross"]
    for k, o in enumerate(offsets):
        cross[k] += (fd * d[(slice(None), *interior(R, inner, o))]).sum(axis=0)
    out = {
        "n": x["n"] + y["n"],
        "seen": seen,
        "mean": mean,
        "count": x["count"] + y["count"],
        "diag": x["diag"] + y["diag"] + (fd * d[core]).sum(axis=0),
        "cross": cross,
    }
    if "ty" in x:
        both = (x["n"] > 0) & (y["n"] > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            dy = np.where(both, y["ymean"] - x["ymean"], 0.0)
            n = x["n"] + y["n"]
            wy = np.where(n > 0, y["n"] / n, 0.0)
            fy = np.where(n > 0, x["n"] * y["n"] / n, 0.0)
        out.update(
            ymean=np.where(x["n"] > 0, x["ymean"] + dy * wy, y["ymean"]),
            yy=x["yy"] + y["yy"] + fy * dy * dy,
            ty=x["ty"] + y["ty"] + (fd * dy.reshape(-1, *[1] * len(inner))).sum(axis=0),
        )
    return out


def assert_same_bits(got: dict, expected: dict):
    assert got.keys() == expected.keys()
    for k in expected:
        a, b = np.asarray(got[k]), np.asarray(expected[k])
        assert a.dtype == b.dtype and a.shape == b.shape, k
        np.testing.assert_array_equal(a, b, err_msg=k)


def a_field(draw, m):
    """A field with a kelvin-like offset, land (no value), cells with scattered gaps."""
    shape = (draw(st.integers(3, 9)), draw(st.integers(3, 11)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = 273.15 + rng.normal(size=(m, *shape)).cumsum(axis=0) * 0.1
    x[:, rng.random(shape) < 0.2] = np.nan  # land
    x[rng.random(x.shape) < draw(st.sampled_from([0.0, 0.02, 0.3]))] = np.nan
    return x.astype(draw(st.sampled_from([np.float32, np.float64]))), rng


@st.composite
def blocks(draw):
    m = draw(st.integers(2, 30))
    x, rng = a_field(draw, m)
    R = draw(st.integers(0, 1))
    pad = tuple(draw(st.sampled_from(["nan", "wrap"])) if R else None for _ in range(2))
    n_seg = draw(st.sampled_from([1, 3, 12]))
    seg = None if n_seg == 1 else (np.arange(m) + draw(st.integers(0, 11))) % n_seg
    y = None if draw(st.booleans()) else rng.normal(size=m) + 5.0
    return x, y, seg, R, pad, n_seg


@settings(max_examples=60, deadline=None)
@given(case=blocks(), band_bytes=st.sampled_from([1, 200, 2000, 4 * 2**20]))
def test_the_kernel_is_the_plain_sweep_bit_for_bit(case, band_bytes):
    """Shift subtracted while copying, the mask set once (a cell with no value stays 0
    through the centring; only gappy cells are set again), the products a band of rows at a
    time (from one row per band to the whole block): the numbers of whole-block sweeps."""
    x, y, seg, R, pad, n_seg = case
    offsets = half_offsets(2, R)
    shift = stencil_shift(x, R, pad)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stencil, "_BAND_BYTES", band_bytes)
        got = stencil_chunk(x, y, seg, shift, R, offsets, n_seg, pad)
    assert_same_bits(got, plain_chunk(x, y, seg, shift, R, offsets, n_seg, pad))


@settings(max_examples=40, deadline=None)
@given(case=blocks(), cuts=st.lists(st.integers(1, 29), min_size=1, max_size=5, unique=True))
def test_a_running_merge_in_place_is_the_plain_merge_bit_for_bit(case, cuts):
    """stencil_combine merges the parts in order, the running result in place after the
    first merge: the numbers of merging out of place, and the parts are left as they were."""
    x, y, seg, R, pad, n_seg = case
    m = x.shape[0]
    edges = [0, *sorted(c for c in cuts if c < m), m]
    offsets = half_offsets(2, R)
    shift = stencil_shift(x[: edges[1]], R, pad)
    parts = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        parts.append(
            stencil_chunk(
                x[a:b],
                None if y is None else y[a:b],
                None if seg is None else seg[a:b],
                shift,
                R,
                offsets,
                n_seg,
                pad,
            )
        )
    before = [{k: np.array(v, copy=True) for k, v in p.items()} for p in parts]
    expected = parts[0]
    for p in parts[1:]:
        expected = plain_merge(expected, p, R, offsets)
    got = stencil_combine(parts, R, offsets)
    assert_same_bits(got, expected)
    for p, b in zip(parts, before, strict=True):
        assert_same_bits(p, b)


def test_the_held_archive_reads_its_first_block_first(client, tmp_path):
    """A job holds a small archive in the workers' memory: its first chunk of months is
    read before any other by the worker that reads it (dask.order alone reads sibling blocks
    last to first, persists within a minute of each other share one generation of priorities,
    and every task of the grid pass waits for the first block's shift)."""
    from distributed import get_task_stream, wait

    from dcfa.batch.holding import held_if_small

    rng = np.random.default_rng(0)
    values = rng.normal(size=(80, 300, 400)).astype(np.float32)
    xr.Dataset({"field": (("time", "lat", "lon"), values)}).to_zarr(
        tmp_path / "a.zarr",
        zarr_format=3,
        consolidated=False,
        encoding={"field": {"chunks": (10, 300, 400)}},
    )
    field = xr.open_zarr(tmp_path / "a.zarr", consolidated=False).field
    said = []
    with get_task_stream(client) as ts:
        held = held_if_small(field, client, said.append)
        wait(held)
    assert said and "read once and held" in said[0]
    # in a unit its size reads in (it said "0.04 GiB"): 80 x 300 x 400 float32
    assert said[0].lstrip().startswith(f"the archive ({80 * 300 * 400 * 4 / 2**20:.2f} MiB)")
    reads = [
        t
        for t in ts.data
        if isinstance(t["key"], tuple) and t["key"][0].startswith("open_dataset-field")
    ]
    assert len(reads) == 8

    # the worker that reads block 0 reads no other block before it (others may start a
    # moment earlier on another worker; blocks of 5 MB, so that reading one takes longer
    # than the scheduler's few milliseconds of latency)
    def start(t):
        return min(s["start"] for s in t["startstops"] if s["action"] == "compute")

    (zero,) = [t for t in reads if t["key"][1] == 0]
    same = sorted((t for t in reads if t["worker"] == zero["worker"]), key=start)
    assert same[0] is zero, [(t["key"][1], t["worker"]) for t in sorted(reads, key=start)]
    np.testing.assert_array_equal(held.values, values)

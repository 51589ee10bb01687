"""dcfa.geo.group_patches: connected patches of every group of a label map, checked against a
brute-force flood fill over the grid's 8-neighbourhood (wrapping in longitude when periodic)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dcfa.geo import group_patches
from dcfa.neighbors import grid_adjacency


def touching(i: int, j: int, shape: tuple[int, int], periodic: bool):
    """Cells that touch ``(i, j)``: one step in lat and lon, diagonals too; lon wraps if
    ``periodic``."""
    nlat, nlon = shape
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            a, b = i + di, j + dj
            if periodic:
                b %= nlon
            if (a, b) != (i, j) and 0 <= a < nlat and 0 <= b < nlon:
                yield a, b


def flood_fill_patches(labels: np.ndarray, periodic: bool, n_groups: int) -> np.ndarray:
    """Patches per group by breadth-first flood fill from every unvisited cell."""
    seen = np.zeros(labels.shape, dtype=bool)
    out = np.zeros(n_groups, dtype=np.int64)
    for start in zip(*np.nonzero(labels >= 0), strict=True):
        if seen[start]:
            continue
        g = labels[start]
        out[g] += 1
        seen[start] = True
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            for nb in touching(*cell, labels.shape, periodic):
                if not seen[nb] and labels[nb] == g:
                    seen[nb] = True
                    queue.append(nb)
    return out


@st.composite
def label_maps(draw):
    nlat = draw(st.integers(1, 7))
    nlon = draw(st.integers(1, 8))
    k = draw(st.integers(1, 5))
    return draw(hnp.arrays(np.int64, (nlat, nlon), elements=st.integers(-1, k - 1)))


@settings(max_examples=300, deadline=None)
@given(labels=label_maps(), periodic=st.booleans())
def test_patches_match_flood_fill(labels, periodic):
    n_groups = int(labels.max()) + 1
    got = group_patches(labels, periodic=periodic)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, flood_fill_patches(labels, periodic, n_groups))


@settings(max_examples=50, deadline=None)
@given(shape=st.tuples(st.integers(1, 6), st.integers(1, 7)), periodic=st.booleans())
def test_flood_fill_neighbours_are_grid_adjacency(shape, periodic):
    """The test's notion of touching is the neighbors=1 restriction of the estimators."""
    A = grid_adjacency(shape, 1, periodic=(1,) if periodic else ()).toarray()
    mine = np.zeros_like(A)
    nlon = shape[1]
    for i in range(shape[0]):
        for j in range(nlon):
            for a, b in touching(i, j, shape, periodic):
                mine[i * nlon + j, a * nlon + b] = True
    np.testing.assert_array_equal(mine, A)


def test_examples():
    labels = np.array(
        [
            [0, -1, 2, 0],
            [-1, 1, -1, -1],
            [1, -1, 2, 2],
        ]
    )
    # group 0 at both ends of a row: two patches, one across the seam; group 1 touches
    # diagonally; group 2 is split by a gap of one row
    np.testing.assert_array_equal(group_patches(labels), [2, 1, 2])
    np.testing.assert_array_equal(group_patches(labels, periodic=True), [1, 1, 2])
    # the seam's diagonal: (2, 3) touches (1, 0) only when lon wraps
    seam = np.array([[0, -1, -1], [-1, -1, 0]])
    np.testing.assert_array_equal(group_patches(seam), [2])
    np.testing.assert_array_equal(group_patches(seam, periodic=True), [1])


def test_empty_groups_and_n_groups():
    labels = np.array([[0, 0, 3], [-1, -1, 3]])
    np.testing.assert_array_equal(group_patches(labels), [1, 0, 0, 1])
    np.testing.assert_array_equal(group_patches(labels, n_groups=6), [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(group_patches(np.full((2, 3), -1)), np.zeros(0))
    with pytest.raises(ValueError, match="n_groups"):
        group_patches(labels, n_groups=2)


def test_dataarray_and_float_labels():
    labels = np.array([[0, 1, 0], [1, -1, 1]])
    da = xr.DataArray(labels, dims=("lat", "lon"), coords={"lat": [0, 1], "lon": [0, 120, 240]})
    got = group_patches(da, periodic=True)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, flood_fill_patches(labels, True, 2))
    with_nan = np.where(labels < 0, np.nan, labels.astype(float))
    np.testing.assert_array_equal(group_patches(with_nan, periodic=True), got)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        group_patches(np.zeros((2, 2, 2), dtype=int))
    with pytest.raises(ValueError, match="integer"):
        group_patches(np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError, match="integer"):
        group_patches(np.array([["a", "b"]]))


def test_large_map_is_fast():
    """A 0.25 degree map (about 10^6 cells) in one graph pass."""
    rng = np.random.default_rng(0)
    labels = rng.integers(-1, 50_000, size=(720, 1440))
    patches = group_patches(labels, periodic=True)
    assert patches.shape == (50_000,)
    assert patches.sum() <= (labels >= 0).sum()

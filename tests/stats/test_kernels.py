"""Kernels of the statistics engine against plain NumPy.

* The ``S``-part merge (:func:`merge_parts`, :func:`between_parts`): every merge of many
  parts known at once (a grid's folds, a grid pass's segments, a series fold's training
  rows) goes through it. Checked against the moments of the concatenated rows, on data with
  a large offset where a naive formula loses its digits.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dcfa.stats.kernels import between_parts, merge_parts


def _parts(sizes, p, offset, seed):
    rng = np.random.default_rng(seed)
    return [offset + rng.normal(size=(n, p)) * rng.uniform(0.5, 2, p) for n in sizes]


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    p=st.integers(1, 5),
    offset=st.sampled_from([0.0, 1e3, 1e6]),
    seed=st.integers(0, 2**31),
)
def test_the_parts_merge_to_the_moments_of_their_union(sizes, p, offset, seed):
    parts = _parts(sizes, p, offset, seed)
    ref = parts[0][0]  # a common reference close to the data, as the callers use
    n_s = np.array(sizes, dtype=np.float64)
    means = np.stack([x.mean(axis=0) - ref for x in parts])
    comoments = [(x - x.mean(axis=0)).T @ (x - x.mean(axis=0)) for x in parts]

    n, mean, dev = merge_parts(n_s, means)
    union = np.concatenate(parts)
    assert n == union.shape[0]
    np.testing.assert_allclose(mean + ref, union.mean(axis=0), rtol=1e-13, atol=1e-9)

    centred = union - union.mean(axis=0)
    expected = centred.T @ centred
    # the diagonal (one column against itself) and one column against every other
    np.testing.assert_allclose(
        sum(np.diag(c) for c in comoments) + between_parts(n_s, dev),
        np.diag(expected),
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(
        sum(c[0] for c in comoments) + between_parts(n_s, dev[:, 0], dev),
        expected[0],
        rtol=1e-9,
        atol=1e-9 * np.sqrt(np.outer(np.diag(expected), np.diag(expected)))[0].max(),
    )


def test_one_part_is_itself():
    means = np.array([[1.5, -2.0]])
    n, mean, dev = merge_parts(np.array([7.0]), means)
    assert n == 7.0
    np.testing.assert_array_equal(mean, means[0])
    np.testing.assert_array_equal(between_parts(np.array([7.0]), dev), [0.0, 0.0])

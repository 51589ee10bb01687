"""Kernels of the statistics engine against plain NumPy.

* The ``S``-part merge (:func:`merge_parts`, :func:`between_parts`): every merge of many
  parts known at once (the moments' folds and their rows read one at a time, a grid's folds,
  a grid pass's segments, a series fold's training rows) goes through it. Checked against
  the moments of the concatenated rows, on data with a large offset where a naive formula
  loses its digits, and cut into rows, columns and blocks against the whole, bit for bit.
* :func:`self_product`, which keeps a wide ``c.T @ c`` away from the OpenBLAS product that
  crashes the process, against the plain product; and ``dcfa.moments`` at that width.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcfa.stats import kernels
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


@settings(max_examples=40, deadline=None)
@given(
    S=st.integers(1, 6),
    p=st.integers(1, 9),
    per_element=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_a_row_column_or_block_of_the_merge_is_the_wholes_bit_for_bit(S, p, per_element, seed):
    """The partition reads single rows of a fold's merge (dcfa.stats.merged.MergedMoments)
    where a dense fit merges the whole matrix, tile by tile: the numbers must be the same."""
    rng = np.random.default_rng(seed)
    dev = rng.normal(size=(S, p)) * 10.0 ** rng.integers(-3, 4, size=(S, p))
    n_s = rng.integers(0 if per_element else 1, 50, size=(S, p, p) if per_element else S)
    n_s = n_s.astype(np.float64)
    whole = between_parts(n_s, dev[:, :, None], dev[:, None, :])
    terms = [n_s[s] * np.outer(dev[s], dev[s]) for s in range(S)]  # per element if pairwise
    assert np.all(np.abs(whole - sum(terms)) <= 1e-12 * sum(np.abs(t) for t in terms))
    if per_element:
        return
    cut = int(rng.integers(0, p + 1))
    for c in range(p):
        np.testing.assert_array_equal(between_parts(n_s, dev[:, c], dev), whole[c])
        np.testing.assert_array_equal(between_parts(n_s, dev[:, :cut], dev[:, c]), whole[:cut, c])
    np.testing.assert_array_equal(between_parts(n_s, dev), np.diagonal(whole))
    rows, cols = slice(0, cut), slice(cut // 2, p)
    np.testing.assert_array_equal(
        between_parts(n_s, dev[:, rows], dev[:, None, cols]), whole[rows, cols]
    )


def test_one_part_is_itself():
    means = np.array([[1.5, -2.0]])
    n, mean, dev = merge_parts(np.array([7.0]), means)
    assert n == 7.0
    np.testing.assert_array_equal(mean, means[0])
    np.testing.assert_array_equal(between_parts(np.array([7.0]), dev), [0.0, 0.0])


@pytest.mark.parametrize("p", [1, 7, 8, 9, 23])
def test_a_wide_self_product_is_the_product(p, monkeypatch):
    monkeypatch.setattr(kernels, "SYRK_COLUMNS", 8)
    c = np.random.default_rng(p).normal(size=(11, p))
    out = kernels.self_product(c)
    np.testing.assert_allclose(out, c.T @ c, rtol=1e-13, atol=1e-12)
    if p <= 8:  # syrk, as before: the same bits
        np.testing.assert_array_equal(out, c.T @ c)


def _has_avx512() -> bool:
    try:
        return "avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not _has_avx512(), reason="the OpenBLAS crash needs AVX-512 kernels")
def test_moments_of_twenty_thousand_columns_in_memory_do_not_crash():
    """500 x 20 000 in memory: OpenBLAS's threaded syrk (SkylakeX kernels, 2 threads)
    segfaults on this product; dcfa must never call it at that size."""
    code = (
        "import numpy as np, dcfa\n"
        "X = np.random.default_rng(0).normal(size=(500, 20000))\n"
        "m = dcfa.moments(X, X[:, 0])\n"
        "d = np.diag(m.cross)[:5] / (m.n - 1)\n"
        "assert np.allclose(d, X[:, :5].var(axis=0, ddof=1)), d\n"
        "print('ok', m.n_features)\n"
    )
    env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX", OPENBLAS_NUM_THREADS="2")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == ["ok", "20000"]

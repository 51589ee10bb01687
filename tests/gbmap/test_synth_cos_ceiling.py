"""The ceiling that benchmarks/bench_gbmap_paper.py --defaults reads the goal against: the most
of SYNTH-COS-R's variance that m stage-wise one-neuron learners can explain."""

import sys
from itertools import product
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
from bench_gbmap_paper import ceiling, stagewise_shares  # noqa: E402


@pytest.mark.parametrize("seed", range(5))
def test_the_ceiling_is_the_best_allocation_of_the_learners(seed):
    """Against every allocation of at most m learners over five coordinates."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(5)
    u /= np.linalg.norm(u)
    shares = np.array([0.4, 0.55, 0.03])
    gain = np.concatenate([[0.0], np.cumsum(shares)])
    for m in range(1, 9):
        brute = max(
            sum(gain[k] * w for k, w in zip(ks, u**2, strict=True))
            for ks in product(range(4), repeat=5)
            if sum(ks) <= m
        )
        assert ceiling(u, m, shares) == pytest.approx(brute, rel=1e-12)


def test_the_first_learner_takes_what_the_best_softplus_on_a_grid_takes():
    n = 20_000
    shares = stagewise_shares(k=2, n=n)
    x = np.random.default_rng(0).standard_normal(n)  # the function's own sample
    t = np.cos(x) - np.cos(x).mean()
    best = 0.0
    for w in np.linspace(0.25, 12, 48):  # (-w, -c) adds only a linear term, uncorrelated
        for c in np.linspace(-12, 12, 97):
            h = np.logaddexp(0.0, w * x + c)
            h -= h.mean()
            best = max(best, (h @ t) ** 2 / (h @ h) / (t @ t))
    assert best - 1e-3 <= shares[0] <= best + 3e-3  # the optimum is between grid points
    # a softplus is monotone and cos x rises and falls: the second learner takes the other side
    assert 0.35 < shares[0] < 0.45 and shares[1] > shares[0] and shares.sum() < 1

"""A long partition says so: a warning for the complete graph on many features, and progress
lines while it runs (NonLinCFA on 100 x 60 000 in memory ran for minutes without a word)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import dcfa
from dcfa.cfa import driver


def _data(D: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, D))
    return X, X[:, :10].sum(1) + rng.normal(size=60)


def test_the_complete_graph_on_many_features_warns_naming_neighbors():
    X, y = _data(driver.COMPLETE_GRAPH_LIMIT + 1)
    with pytest.warns(UserWarning, match=r"neighbors: None compares each of the 5,001 features"):
        dcfa.LinCFA().fit(X, y)


def test_the_complete_graph_on_fewer_features_does_not_warn(recwarn):
    X, y = _data(driver.COMPLETE_GRAPH_LIMIT)
    dcfa.LinCFA().fit(X, y)
    assert not [w for w in recwarn if "neighbors" in str(w.message)]


@pytest.mark.parametrize("mode", ["dense", "series"])
def test_a_partition_logs_its_progress(monkeypatch, caplog, mode):
    X, y = _data(400)
    monkeypatch.setattr(driver, "PROGRESS_EVERY", 0.0)  # a line at every group
    with caplog.at_level(logging.INFO, logger="dcfa"):
        est = dcfa.NonLinCFA(mode=mode).fit(X, y)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("partition:")]
    # after every round of members joining a group, and every group, until all are assigned
    assert len(lines) >= est.n_features_out_ - 1
    done = [int(line.split()[1].replace(",", "")) for line in lines]
    assert done == sorted(done) and 0 < done[0] and done[-1] < 400
    assert all(" of 400 features assigned (" in line for line in lines)

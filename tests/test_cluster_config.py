"""A batch-system cluster without its jobqueue settings: one line naming the key and where
the settings go (it was dask-jobqueue's message, a literal newline and no key)."""

from __future__ import annotations

import dask
import pytest

from dcfa.batch.cluster import make_cluster

pytest.importorskip("dask_jobqueue")


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_missing_jobqueue_settings_name_the_key(kind):
    unset = {f"jobqueue.{kind}.cores": None, f"jobqueue.{kind}.memory": None}
    with dask.config.set(unset), pytest.raises(ValueError) as err:
        make_cluster({"kind": kind, "n_workers": 1})
    message = str(err.value)
    assert message.startswith(f"cluster.kind: {kind!r} takes the workers' cores")
    assert f"deploy/{kind}/jobqueue.yaml" in message and "\n" not in message

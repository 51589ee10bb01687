"""The command line, run as a user runs it: a separate process."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

pytestmark = pytest.mark.slow


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "dcfa", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def test_demo_on_real_observations(tmp_path):
    """``dcfa demo``: the ENSO store, the job on a LocalCluster, skill, a PNG map; the result
    store holds what an in-memory GenLinCFA fit of the same task gives."""
    from dcfa import GenLinCFA
    from dcfa.datasets import enso_task

    proc = run("demo", "--workdir", str(tmp_path), "-q")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "[5/5]" in out and "264 samples in common" in out
    for model in ("LinCFA -> OLS", "GenLinCFA -> OLS", "GenLinCFA -> GBMAP", "PCA"):
        assert model in out
    assert "Pacific" in out  # where the regions are
    assert (tmp_path / "regions.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    result = xr.open_zarr(tmp_path / "result.zarr").load()
    sst = xr.open_zarr(tmp_path / "enso.zarr").sst
    land = sst.isnull().all("time").values
    assert land.sum() == 228 and np.isnan(result.region.values[land]).all()
    assert int(result.group_size.sum()) == 513
    assert result.features.shape == (264, result.sizes["group"])
    assert result.embedding.dims == ("time", "boost") and result.embedding.shape == (264, 2)

    X, y = enso_task()  # in memory, no cluster
    ref = GenLinCFA().fit(X, y)
    np.testing.assert_array_equal(
        np.nan_to_num(result.region.values, nan=-1), ref.label_map_.values
    )
    np.testing.assert_allclose(result.features.values, ref.transform(X).values, rtol=1e-5)
    corr = [np.corrcoef(f, y)[0, 1] for f in ref.transform(X).values.T]
    np.testing.assert_allclose(result.group_target_corr.values, corr, rtol=1e-5)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_version_and_usage():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip()
    assert run().returncode == 2

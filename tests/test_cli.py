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


def test_demo_writes_a_complete_result_store(tmp_path):
    proc = run("demo", "--workdir", str(tmp_path), "--n-time", "240", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "[5/5]" in proc.stdout and "share their group's true region" in proc.stdout
    result = xr.open_zarr(tmp_path / "result.zarr")
    truth = xr.open_zarr(tmp_path / "synthetic.zarr")
    assert result.features.dims == ("time", "group")
    assert result.region.dims == ("lat", "lon")
    assert result.embedding.dims == ("time", "boost")
    land = truth.region.values < 0
    assert np.isnan(result.region.values[land]).all()
    assert int(result.group_size.sum()) == int((~land).sum())
    assert np.isfinite(result.features.values).all()
    assert result.attrs["dcfa_version"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_version_and_usage():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip()
    assert run().returncode == 2

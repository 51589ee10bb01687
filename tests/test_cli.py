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
    assert "LinCFA:" in proc.stdout and "purity vs the true regions" in proc.stdout
    result = xr.open_zarr(tmp_path / "result.zarr", consolidated=False)
    truth = xr.open_zarr(tmp_path / "synthetic.zarr", consolidated=False)
    assert result.features.dims == ("time", "group")
    assert result.region_map.dims == ("lat", "lon")
    land = truth.region.values < 0
    assert (result.region_map.values[land] == -1).all()
    assert int(result.group_size.sum()) == int((~land).sum())
    assert np.isfinite(result.features.values).all()
    assert result.attrs["dcfa_version"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_version_and_usage():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip()
    assert run().returncode == 2

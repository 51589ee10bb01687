"""``dcfa demo``: the batch job on an embedded default, in about a minute.

Writes a synthetic climate-like Zarr store (a (time, lat, lon) field made of known regions
plus land cells, and a target built from four of the regions), then runs the same job as
``dcfa fit`` on it with a ``distributed.LocalCluster``: preprocessing, moments, LinCFA restricted
to grid neighbours, GBMAP on the regions found, the result store. Finally it says how the regions
found compare with the true ones.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import xarray as xr

__all__ = ["run_demo"]


def run_demo(
    workdir: str | Path | None = None,
    *,
    n_time: int = 600,
    grid: tuple[int, int] = (36, 72),
    n_workers: int = 2,
    memory_limit: str = "2GiB",
    echo=print,
) -> Path:
    """Run the demo; return the path of the result store."""
    from dcfa._job import run_job
    from dcfa.config import load_config
    from dcfa.datasets import write_regions_store

    workdir = Path(workdir or tempfile.mkdtemp(prefix="dcfa-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "synthetic.zarr"
    if not store.exists():
        write_regions_store(
            store,
            n_time=n_time,
            shape=grid,
            n_regions=16,
            land_fraction=0.25,
            seed=7,
            time_chunk=60,
        )
    truth = xr.open_zarr(store)
    target = workdir / "target.csv"
    truth.target.to_dataframe()[["target"]].to_csv(target)
    echo(
        f"demo: synthetic store {store} ({n_time} months x {grid[0]}x{grid[1]} cells, "
        "16 known regions, 25% land)"
    )
    config = load_config(
        base={
            "input": {"store": str(store), "variables": ["field"]},
            "target": {"path": str(target), "variable": "target"},
            "method": {
                "name": "lincfa",
                "params": {"neighbors": 1, "compare": "mean", "random_state": 0},
            },
            "gbmap": {"n_boosts": 3, "random_state": 0},
            "output": {"store": str(workdir / "result.zarr"), "overwrite": True},
            "cluster": {"n_workers": n_workers, "memory_limit": memory_limit},
        }
    )
    out = run_job(config, echo=echo)
    _report(xr.open_zarr(out), truth, echo)
    return out


def _report(result: xr.Dataset, truth: xr.Dataset, echo) -> None:
    """How the regions found relate to the true ones."""
    found = np.nan_to_num(result.region.values, nan=-1).astype(int)
    true = truth.region.values
    ocean = true >= 0
    purity = (
        sum(
            Counter(true[ocean][found[ocean] == g]).most_common(1)[0][1]
            for g in np.unique(found[ocean])
        )
        / ocean.sum()
    )
    echo(
        f"demo: {purity:.1%} of the ocean cells share their group's true region "
        f"({result.sizes['group']} groups for 16 regions: LinCFA keeps cells apart unless "
        "averaging them loses nothing)"
    )

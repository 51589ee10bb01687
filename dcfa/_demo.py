"""``dcfa demo``: the whole pipeline on an embedded default, in about a minute.

Writes a synthetic climate-like Zarr store (a (time, lat, lon) field made of known regions
plus land cells, and a target built from four of the regions), starts a
``distributed.LocalCluster``, fits LinCFA on the Dask-backed field (one moments pass on the
workers, the partition on the driver), checks the regions found against the true ones, and
writes the reduced features and the map of regions to a result store.
"""

from __future__ import annotations

import tempfile
import time
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
    from distributed import Client, LocalCluster

    import dcfa
    from dcfa.datasets import write_regions_store

    workdir = Path(workdir or tempfile.mkdtemp(prefix="dcfa-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "synthetic.zarr"
    t0 = time.perf_counter()
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
    echo(f"[1/4] input store {store} ({n_time} months x {grid[0]}x{grid[1]} cells)")

    with (
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            memory_limit=memory_limit,
            dashboard_address=None,
            silence_logs=40,
        ) as cluster,
        Client(cluster) as client,
    ):
        echo(f"[2/4] {client}")
        ds = xr.open_zarr(store, consolidated=False)
        t1 = time.perf_counter()
        model = dcfa.LinCFA(neighbors=1, compare="mean", random_state=0)
        model.fit(ds.field, ds.target)
        fit_s = time.perf_counter() - t1
        echo(
            f"[3/4] LinCFA: {model.n_features_in_} cells -> {model.n_features_out_} regions "
            f"({len(model.excluded_)} land/constant cells excluded) in {fit_s:.1f} s"
        )
        _report(model, ds, echo)
        features = model.transform(ds.field)
        out = workdir / "result.zarr"
        result = xr.Dataset(
            {
                "features": features.astype("float32"),
                "region_map": model.label_map_,
                "group_size": ("group", model.group_sizes_),
            },
            attrs={
                "dcfa_version": dcfa.__version__,
                "method": "LinCFA(neighbors=1, compare='mean')",
                "input_store": str(store),
            },
        )
        from dcfa._moments import _replace_dir

        tmp = out.with_name(f".{out.name}.tmp")
        result.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False)
        _replace_dir(tmp, out)
    echo(
        f"[4/4] result store {out} (features, region_map, group_size); total "
        f"{time.perf_counter() - t0:.1f} s"
    )
    return out


def _report(model, ds, echo) -> None:
    """How the regions found relate to the true ones, and which matter for the target."""
    found = model.label_map_.values
    true = ds.region.values
    ocean = true >= 0
    purity = (
        sum(
            Counter(true[ocean][found[ocean] == g]).most_common(1)[0][1]
            for g in np.unique(found[ocean])
        )
        / ocean.sum()
    )
    echo(f"      purity vs the true regions: {purity:.1%} of cells share their group's region")
    sizes = model.group_sizes_
    Xt = model.transform(ds.field).values
    r = np.array([np.corrcoef(Xt[:, g], ds.target.values)[0, 1] for g in range(sizes.size)])
    lat, lon = np.meshgrid(ds.lat.values, ds.lon.values, indexing="ij")
    echo("      largest regions by |corr with target|:")
    for g in np.argsort(-np.abs(r) * (sizes >= 5))[:5]:
        cells = found == g
        echo(
            f"        group {g:3d}: {sizes[g]:4d} cells around lat {lat[cells].mean():6.1f}, "
            f"lon {lon[cells].mean():6.1f}; corr with target {r[g]:+.2f}"
        )

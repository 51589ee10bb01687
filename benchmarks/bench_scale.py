"""LinCFA at climate resolution: the neighbour and seed-row modes at growing D.

    python benchmarks/bench_scale.py            # D = 1e4, 1e5, 1e6 (neighbours), 5e4 (seed rows)
    python benchmarks/bench_scale.py --quick    # D = 1e4 and 4e4, and 1e4 for seed rows
    python benchmarks/bench_scale.py --json benchmarks/results/scale.json   # the docs' table
    python benchmarks/bench_scale.py --auto     # what mode="auto" picks, and at what cost

Data: the synthetic regions field of ``dcfa.datasets.make_regions_field`` (float32, kelvin-like
offsets, 500 monthly samples, 10 % land), generated lazily chunk by chunk like an archive
read from disk: the data never exist in memory as a whole. Each fit is timed on the threaded
scheduler (2 cores); peak memory is the process's resident set size sampled every 50 ms,
above what it held before the fit. For reference, the D x D correlation matrix the full mode
would hold is printed beside it.

``--json PATH`` writes every fit's D, seconds, peak bytes and groups (benchmarks/_results.py),
from which docs/evidence/performance.md renders its table.

``--auto`` times the choice of ``mode="auto"`` (the memory guide's numbers), each fit once,
on the data in memory: ``GenLinCFA(neighbors=1)`` on a 2 degree field of 1 200 months (30 %
land) with the dense matrix, with the series and at ``mode="auto"``, which must give the
same groups; then ``LinCFA(neighbors=1)`` and ``GenLinCFA(neighbors=1)`` at ``mode="auto"``
on 200 x 300 cells of 200 months, whose dense matrix would take 26.8 GiB.
"""

from __future__ import annotations

import argparse
import gc
import resource
import threading
import time
from pathlib import Path

import dask
import numpy as np
import psutil
from _results import write_results  # run as a script: its directory is on sys.path

from dcfa import LinCFA
from dcfa.datasets import make_regions_field


class PeakRSS:
    """Peak resident memory of this process above its level at entry (``bytes``, ``mib``):
    sampled every 5 ms, and the kernel's ``ru_maxrss`` when the peak is reached inside."""

    def __enter__(self):
        gc.collect()
        self.proc = psutil.Process()
        self.base = self.proc.memory_info().rss
        self.maxrss_before = _maxrss()
        self.peak = self.base
        self._stop = False
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop:
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join()
        maxrss = _maxrss()
        if maxrss > self.maxrss_before:  # the lifetime peak was reached during the fit
            self.peak = max(self.peak, maxrss)
        self.bytes = self.peak - self.base
        self.mib = self.bytes / 2**20


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def field_of(n_cells: int, n_time: int = 500):
    nlat = int(np.sqrt(n_cells / 2))
    nlon = n_cells // nlat
    rows = max(1, int(16 * 2**20 / (100 * nlon * 4)))  # ~16 MB chunks of 100 samples
    ds = make_regions_field(
        n_time=n_time,
        shape=(nlat, nlon),
        n_regions=40,
        noise=0.5,
        land_fraction=0.1,
        time_chunk=100,
        space_chunks=(rows, nlon),
        seed=1,
    )
    return ds.field, ds.target.values, nlat * nlon


def run(label, model, field, target, D):
    with dask.config.set(scheduler="threads"), PeakRSS() as mem:
        t = time.perf_counter()
        model.fit(field, target)
        seconds = time.perf_counter() - t
    dense = D * D * 8 / 2**30
    print(
        f"{label:22s} D = {D:9,d}: {seconds:7.1f} s, {seconds / D * 1e6:6.1f} us/cell, peak "
        f"{mem.mib:7.0f} MiB (a D x D matrix: {dense:9.1f} GiB); "
        f"{model.n_features_out_:,d} groups",
        flush=True,
    )
    return {"D": D, "seconds": seconds, "peak_bytes": mem.bytes, "groups": model.n_features_out_}


def auto() -> None:
    from dcfa import GenLinCFA

    ds = make_regions_field(1200, (90, 180), 40, land_fraction=0.3, seed=0)
    field, y = ds.field.compute(), ds.target.values
    D = int(field.notnull().all("time").sum())
    labels = {}
    for mode in ("dense", "series", "auto"):
        model = GenLinCFA(neighbors=1, mode=mode)
        run(f"GenLinCFA {mode:6s} ({model.execution_for(field)})", model, field, y, D)
        labels[mode] = model.labels_
    same = all(np.array_equal(labels[m], labels["series"]) for m in ("dense", "auto"))
    print(f"dense, series and auto give the same groups: {same}")
    ds = make_regions_field(200, (200, 300), 40, land_fraction=0.0, seed=0)
    field, y = ds.field.compute(), ds.target.values
    for cls in (LinCFA, GenLinCFA):
        model = cls(neighbors=1)
        label = f"{cls.__name__} auto ({model.execution_for(field)})"
        run(label, model, field, y, field.shape[1] * field.shape[2])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--auto", action="store_true", help="time mode='auto''s choice")
    args = parser.parse_args(argv)
    if args.auto:
        auto()
        return
    sizes = [10_000, 40_000] if args.quick else [10_000, 100_000, 1_000_000]
    runs = []
    for D in sizes:
        field, y, D = field_of(D)
        model = LinCFA(mode="grid", neighbors=1, neighborhood="seed", random_state=0)
        out = run("neighbour mode, r = 1", model, field, y, D)
        runs.append({"mode": "neighbours", "neighbors": 1, "persisted": False, **out})
    D = 10_000 if args.quick else 50_000
    field, y, D = field_of(D)
    field = field.persist()  # each batch of rows is one pass: keep the data in memory
    out = run("seed-row mode", LinCFA(mode="rows", row_batch=512, random_state=0), field, y, D)
    runs.append({"mode": "rows", "row_batch": 512, "persisted": True, **out})
    if args.json is not None:
        results = {"quick": args.quick, "months": field.shape[0], "runs": runs}
        write_results(args.json, results, argv, script=__file__)


if __name__ == "__main__":
    main()

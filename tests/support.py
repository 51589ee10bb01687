"""What the job, CLI and cluster tests share: archives and job files, a CLI run, the files
of a directory tree, failures injected into a run, and the memory a call traces."""

from __future__ import annotations

import atexit
import functools
import gc
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from dcfa.batch.job import run_job


def make_archive(
    path,
    *,
    n=48,
    shape=(4, 6),
    zarr_format=3,
    time_chunk=12,
    seed=0,
    land=((0, 0), (3, 5)),
    extra_var=False,
):
    rng = np.random.default_rng(seed)
    time = pd.date_range("2000-01-01", periods=n, freq="MS")
    season = 3 * np.sin(2 * np.pi * time.month.values / 12)[:, None, None]
    sst = (280 + season + rng.normal(size=(n, *shape))).astype("float32")
    for i, j in land:
        sst[:, i, j] = np.nan
    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), sst, {"units": "K"})},
        coords={
            "time": time,
            "lat": np.linspace(-10, 10, shape[0]),
            "lon": np.linspace(150, 250, shape[1]),
        },
    )
    if extra_var:
        ds["t2m"] = ds.sst + 5
        ds["index"] = ("time", rng.normal(size=n))
    ds = ds.chunk({"time": time_chunk})
    ds.to_zarr(path, zarr_format=zarr_format, consolidated=False)
    return ds


@functools.cache
def _job_inputs() -> Path:
    """The archive and target of :func:`write_job`, written once per test process (about 0.7 s
    with xarray) and copied into each test's directory."""
    root = Path(tempfile.mkdtemp(prefix="dcfa-test-job-inputs-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    make_archive(root / "sst.zarr", n=120, shape=(5, 8), land=((0, 0), (4, 7), (2, 3)))
    time = pd.date_range("1999-06-01", periods=150, freq="MS") + pd.Timedelta(days=14)
    rng = np.random.default_rng(3)
    ds = xr.open_zarr(root / "sst.zarr", consolidated=False)
    anomalies = ds.sst.groupby("time.month") - ds.sst.groupby("time.month").mean()
    driver = anomalies.isel(lat=slice(1, 3), lon=slice(2, 5)).mean(["lat", "lon"]).values
    soi = np.concatenate(
        [rng.normal(size=7), driver + 0.3 * rng.normal(size=120), rng.normal(size=23)]
    )
    pd.DataFrame({"time": time, "soi": soi}).to_csv(root / "soi.csv", index=False)
    return root


def write_job(tmp_path, **changes):
    """A LinCFA job on a 5 x 8 archive of 120 months whose target follows a box of cells.
    The inputs are copies, not links: tests change and break them."""
    inputs = _job_inputs()
    shutil.copytree(inputs / "sst.zarr", tmp_path / "sst.zarr")
    shutil.copyfile(inputs / "soi.csv", tmp_path / "soi.csv")
    config = {
        "input": {"store": str(tmp_path / "sst.zarr"), "variables": ["sst"], "anomalies": True},
        "target": {"path": str(tmp_path / "soi.csv"), "variable": "soi", "match": "month"},
        "method": {"name": "lincfa", "params": {"random_state": 0, "neighbors": 1}},
        "output": {"store": str(tmp_path / "result.zarr")},
        "cluster": {"n_workers": 2, "memory_limit": "1GiB"},
    }
    for key, value in changes.items():
        section, name = key.split("__")
        config.setdefault(section, {})[name] = value
    import tomli_w

    (tmp_path / "job.toml").write_text(tomli_w.dumps(config))
    return tmp_path / "job.toml"


def cli(*args, cwd, env=None):
    """``python -m dcfa ARGS`` in a separate process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "dcfa", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def cli_after_line(*args, cwd, line: str):
    """:func:`cli`, and the seconds from the first line of its output that holds ``line`` to
    its exit (None if no line holds it): a wait timed without the imports before it, which
    take several times longer on a loaded machine."""
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-m", "dcfa", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    reader.start()
    out, seen = [], None
    for text in proc.stdout:
        out.append(text)
        if seen is None and line in text:
            seen = time.monotonic()
    proc.wait(timeout=600)
    after = None if seen is None else time.monotonic() - seen
    reader.join()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), err[0])
    return done, after


def cli_imports(*args, cwd, modules):
    """``dcfa ARGS`` in a separate process, as :func:`cli`, whose last line of output is the
    exit code and which of ``modules`` the command imported (``2 []``: none)."""
    probe = (
        "import sys\nfrom dcfa.cli import main\ncode = main(sys.argv[1:])\n"
        f"print(code, sorted(set({sorted(modules)!r}) & set(sys.modules)))"
    )
    return subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: relative path -> content hash (or 'dir' / 'link -> target')."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = f"link -> {os.readlink(p)}"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def fails(proc, code: int, *needles: str) -> str:
    """Assert the exit code and a one-line message holding every needle."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("dcfa: error:"), err
    for n in needles:
        assert n in last, (n, last)
    return last


def interrupt(config, at: str, scheduler: str, output=None) -> None:
    """Run the job and stop it (Ctrl-C) when it prints the line starting with ``at``."""

    def echo(line):
        if line.startswith(at):
            raise KeyboardInterrupt  # the job is killed here

    with pytest.raises(KeyboardInterrupt):
        run_job(config, output=output, scheduler=scheduler, echo=echo)


def _full_disk_or_slow(block, log=None, fail=True, block_info=None):
    """A chunk of a write: the first fails as a full disk does (with ``fail``) once another
    has started, the others take a second, logging when they start and end."""
    i = block_info[0]["chunk-location"][0]
    if i == 0 and fail:
        deadline = time.monotonic() + 10
        while not any(Path(log).glob("started-*")) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise OSError(28, "No space left on device")
    (Path(log) / f"started-{i}").touch()
    time.sleep(1.0)
    (Path(log) / f"ended-{i}").touch()
    return block


def slow_write(log: Path, fail: bool = True) -> xr.Dataset:
    """A Dataset of 4 chunks of :func:`_full_disk_or_slow`, logging into ``log``."""

    log.mkdir()
    data = da.zeros((8, 3), chunks=(2, 3)).map_blocks(
        _full_disk_or_slow, log=str(log), fail=fail, dtype=float
    )
    return xr.Dataset({"v": (("time", "x"), data)})


def assert_no_chunk_left_running(log: Path) -> None:
    """Every chunk of :func:`slow_write` that started had ended (and one had started)."""
    started = sorted(p.name[8:] for p in log.glob("started-*"))
    assert started, "no chunk ran beside the failing one: the test tested nothing"
    assert sorted(p.name[6:] for p in log.glob("ended-*")) == started


N = 120


def write_wide_job(tmp_path):
    """:func:`write_job` on a 60 x 75 archive of 48 months, with two windows, two lags and
    the spread: a climatology and spread of 1.9 MB, which a graph should not carry."""
    make_archive(tmp_path / "big.zarr", n=48, shape=(60, 75), land=())
    return write_job(
        tmp_path,
        input__store=str(tmp_path / "big.zarr"),
        input__windows=[1, 3],
        input__lags=[0, 1],
        input__standardize=True,
    )


def write_forecast_job(tmp_path, **input_keys):
    ds = make_archive(tmp_path / "sst.zarr", n=N, shape=(4, 6))
    rng = np.random.default_rng(1)
    x = ds.sst.values.astype(np.float64)
    driver = np.nanmean(x[:, 1:3, 2:5], axis=(1, 2))
    y = np.r_[np.zeros(3), driver[:-3]] + 0.2 * rng.normal(size=N)  # driven 3 months later
    time = pd.date_range("2000-01-01", periods=N, freq="MS") + pd.Timedelta(days=14)
    pd.DataFrame({"time": time, "y": y}).to_csv(tmp_path / "y.csv", index=False)
    inp = {"windows": [1, 3], "lags": [0, 1], **input_keys}
    lines = [
        "[input]",
        f'store = "{tmp_path / "sst.zarr"}"',
        'variables = ["sst"]',
        "anomalies = true",
        *(f"{k} = {v!r}".replace("'", '"') for k, v in inp.items()),
        "[target]",
        f'path = "{tmp_path / "y.csv"}"',
        'variable = "y"',
        'match = "month"',
        "lead = 2",
        "[method]",
        'name = "lincfa"',
        "[method.params]",
        "neighbors = 1",
        "random_state = 0",
        "[output]",
        f'store = "{tmp_path / "out.zarr"}"',
        "[cluster]",
        "n_workers = 2",
        'memory_limit = "1GiB"',
    ]
    (tmp_path / "job.toml").write_text("\n".join(lines) + "\n")
    return tmp_path / "job.toml", x, y


def numpy_predictors(x, windows=(1, 3), lags=(0, 1)):
    """(time, window, lag, lat, lon): trailing means, then earlier samples, trimmed."""
    n = x.shape[0]
    W = np.full((n, len(windows), *x.shape[1:]), np.nan)
    for k, w in enumerate(windows):
        for t in range(w - 1, n):
            W[t, k] = x[t - w + 1 : t + 1].mean(axis=0)
    W = W[max(windows) - 1 :]
    m = W.shape[0]
    L = np.full((m, len(windows), len(lags), *x.shape[1:]), np.nan)
    for k, lag in enumerate(lags):
        L[lag:, :, k] = W[: m - lag]
    return L[max(lags) :], max(windows) - 1 + max(lags)


def _traced_peak(fn) -> int:
    """Peak bytes allocated (NumPy buffers included) while ``fn`` runs, above the start."""
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _job(tmp_path, n_time=600):
    """A job on the demo's synthetic store (regions, land) with the target as CSV."""
    from dcfa.datasets import write_regions_store

    store = write_regions_store(
        tmp_path / "field.zarr",
        n_time=n_time,
        shape=(24, 48),
        n_regions=10,
        land_fraction=0.2,
        seed=4,
        time_chunk=50,
    )
    ds = xr.open_zarr(store, consolidated=False)
    ds.target.to_dataframe()[["target"]].to_csv(tmp_path / "target.csv")
    (tmp_path / "job.toml").write_text(
        f'[input]\nstore = "{store}"\nvariables = ["field"]\nanomalies = true\n'
        f'[target]\npath = "{tmp_path / "target.csv"}"\nvariable = "target"\n'
        '[method]\nname = "lincfa"\n[method.params]\nrandom_state = 0\ncompare = "mean"\n'
        f'[output]\nstore = "{tmp_path / "result.zarr"}"\n'
    )
    return tmp_path / "job.toml"


def splits_of(path) -> list[tuple[int, int, int]]:
    """Every fold's ``(train_stop, test_start, test_stop)``, from the path's coordinates."""
    return list(
        zip(
            path["train_stop"].values.tolist(),
            path["test_start"].values.tolist(),
            path["test_stop"].values.tolist(),
            strict=True,
        )
    )

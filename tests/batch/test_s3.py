"""Zarr archives, targets and results on S3-compatible object storage.

A real S3 server (moto's standalone server, the one s3fs's own tests use) runs in its own
process on 127.0.0.1; dcfa reads and writes it through s3fs exactly as a cloud bucket, from
the command line and from the cluster's worker processes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support import cli, write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job

pytestmark = pytest.mark.slow
s3fs = pytest.importorskip("s3fs")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def endpoint():
    """moto's S3 server in a separate process on 127.0.0.1, stopped at the end."""
    server = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    port = _free_port()
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def bucket(endpoint):
    """A new, empty bucket and the storage options that reach it."""
    options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**options)
    name = f"b{os.urandom(4).hex()}"
    fs.mkdir(name)
    return fs, name, options


def keys(fs, prefix: str) -> dict[str, str]:
    """Every object under ``prefix``: key -> ETag."""
    fs.invalidate_cache()
    return {k: v["ETag"] for k, v in fs.find(prefix, detail=True).items()}


def s3_job(tmp_path, fs, name, options, **changes):
    """The test job, its archive and target uploaded to the bucket; the output on it too."""
    import tomllib

    import tomli_w

    job = write_job(tmp_path)
    fs.put(str(tmp_path / "sst.zarr"), f"{name}/data/sst.zarr", recursive=True)
    fs.put(str(tmp_path / "soi.csv"), f"{name}/data/soi.csv")
    raw = tomllib.loads(job.read_text())
    raw["input"].update(store=f"s3://{name}/data/sst.zarr", storage_options=options)
    raw["target"].update(path=f"s3://{name}/data/soi.csv", storage_options=options)
    raw["output"] = {"store": f"s3://{name}/results/result.zarr", "storage_options": options}
    for key, value in changes.items():
        section, k = key.split("__")
        raw[section][k] = value
    s3 = tmp_path / "s3-job.toml"
    s3.write_text(tomli_w.dumps(raw))
    return job, s3


def test_job_reads_an_archive_from_a_bucket_and_writes_its_result_to_a_bucket(
    tmp_path, bucket, scheduler
):
    fs, name, options = bucket
    local_job, job = s3_job(tmp_path, fs, name, options)
    inputs = keys(fs, f"{name}/data")
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[5/5] s3://" in proc.stdout
    url = f"s3://{name}/results/result.zarr"
    result = xr.open_zarr(url, storage_options=options).load()
    reference = run_job(load_config(local_job), scheduler=scheduler, echo=lambda *a: None)
    ref = xr.open_zarr(reference).load()
    np.testing.assert_array_equal(result.region.values, ref.region.values)
    np.testing.assert_allclose(result.features.values, ref.features.values, rtol=1e-6)
    np.testing.assert_allclose(result.group_target_corr.values, ref.group_target_corr.values)
    assert keys(fs, f"{name}/data") == inputs  # the inputs are untouched
    # nothing but the result on the bucket; the local work directory is gone
    assert {k.split("/")[2] for k in keys(fs, f"{name}/results")} == {"result.zarr"}
    assert not list(tmp_path.glob("*.work"))
    import zarr

    moments = zarr.open_group(f"{url}/moments", mode="r", storage_options=options)
    assert moments.attrs["dcfa_kind"] == "Moments"
    proc = cli("inspect", url, "--storage-options", __import__("json").dumps(options), cwd=tmp_path)
    assert proc.returncode == 0 and "result of LinCFA" in proc.stdout, proc.stderr

    # overwrite = true replaces this result, and never a store dcfa did not write
    proc = cli(
        "fit",
        str(job),
        "--set",
        "output.overwrite=true",
        "--set",
        f"output.store=s3://{name}/data/sst.zarr",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "is input.store" in proc.stderr, proc.stderr
    xr.Dataset({"v": ("x", np.arange(3.0))}).to_zarr(
        f"s3://{name}/results/other.zarr", storage_options=options
    )
    other = keys(fs, f"{name}/results/other.zarr")
    proc = cli(
        "fit",
        str(job),
        "--set",
        "output.overwrite=true",
        "--set",
        f"output.store=s3://{name}/results/other.zarr",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "that dcfa did not write" in proc.stderr, proc.stderr
    assert keys(fs, f"{name}/results/other.zarr") == other
    before = keys(fs, f"{name}/results/result.zarr")
    proc = cli(
        "fit",
        str(job),
        "--set",
        "output.overwrite=true",
        "--set",
        "method.params.neighbors=2",
        "--scheduler",
        scheduler,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert keys(fs, f"{name}/results/result.zarr") != before
    assert keys(fs, f"{name}/data") == inputs


def test_a_killed_write_leaves_nothing_that_looks_complete(tmp_path, bucket):
    """Killed while writing the temporary store, or while publishing it (after every object
    but the root metadata is in place): neither xr.open_zarr nor dcfa inspect takes the
    destination for a store, and the next write removes the leftovers."""
    fs, name, options = bucket
    url = f"s3://{name}/r.zarr"
    script = textwrap.dedent(
        f"""
        import sys, time, numpy as np, xarray as xr
        from dcfa.storage import objectstore as o
        options = {options!r}
        if sys.argv[1] == "write":
            with o.staged({url!r}, options) as tmp:
                xr.Dataset({{"v": ("x", np.arange(4.0))}}).to_zarr(tmp, storage_options=options)
                print("written", flush=True)
                time.sleep(600)
        else:  # publish: every object but the root metadata, then killed
            tmp = "{name}/.r.zarr.tmp-dead"
            ds = xr.Dataset({{"v": ("x", np.arange(4.0))}})
            ds.to_zarr("s3://" + tmp, storage_options=options)
            fs, path = o.url_fs({url!r}, options)
            body = [k for k in fs.find(tmp) if not k.endswith("/zarr.json") or "/v/" in k]
            fs.copy(body, [path + k[len(tmp):] for k in body])
            print("written", flush=True)
            time.sleep(600)
        """
    )
    for step in ("write", "publish"):
        child = subprocess.Popen(
            [sys.executable, "-c", script, step], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout.readline().strip() == "written"
        child.send_signal(signal.SIGKILL)
        child.wait()
        fs.invalidate_cache()
        with pytest.raises(Exception):  # noqa: B017 - zarr raises its own not-found types
            xr.open_zarr(url, storage_options=options, consolidated=False)
        tmp = [k for k in fs.ls(name) if k.split("/")[-1].startswith(".r.zarr.tmp-")]
        assert tmp, fs.ls(name)
        where = (
            url if step == "publish" else "s3://" + next(k for k in tmp if ".incomplete" not in k)
        )
        proc = cli(
            "inspect", where, "--storage-options", __import__("json").dumps(options), cwd=tmp_path
        )
        assert proc.returncode == 2 and "incomplete store" in proc.stderr, (step, proc.stderr)
        if step == "publish":
            fs.rm(f"{name}/r.zarr", recursive=True)
            fs.rm(f"{name}/.r.zarr.tmp-dead", recursive=True)
    # the next write to the same destination removes the killed write's temporary prefix
    from dcfa.storage.store import atomic_store

    with atomic_store(url, storage_options=options) as tmp:
        xr.Dataset({"v": ("x", np.arange(2.0))}).to_zarr(tmp, storage_options=options)
    fs.invalidate_cache()
    assert sorted(k.split("/")[-1] for k in fs.ls(name)) == ["r.zarr"]
    assert xr.open_zarr(url, storage_options=options).v.values.tolist() == [0.0, 1.0]


def test_a_failed_write_leaves_nothing_on_the_bucket(tmp_path, bucket, client):
    """A chunk fails (a full disk, a refused upload) while the workers upload others: the
    error comes once no upload runs, and the bucket is left as it was."""
    from support import assert_no_chunk_left_running, slow_write

    from dcfa.io import write_result

    fs, name, options = bucket
    fs.pipe(f"{name}/theirs.txt", b"not ours")
    before = keys(fs, name)
    ds = slow_write(tmp_path / "log")
    with pytest.raises(OSError, match="No space left"):
        write_result(f"s3://{name}/r.zarr", ds, storage_options=options)
    assert_no_chunk_left_running(tmp_path / "log")
    time.sleep(1.5)  # long enough for a chunk left running to upload
    assert keys(fs, name) == before


def test_resume_with_the_output_on_a_bucket(tmp_path, bucket, scheduler):
    """The work directory stays local (in the working directory); a changed object in the
    archive on the bucket makes --resume refuse."""
    fs, name, options = bucket
    _, job = s3_job(tmp_path, fs, name, options)
    config = load_config(job)

    def die(line):
        if line.startswith("[4/5]"):
            raise KeyboardInterrupt

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_job(config, scheduler=scheduler, echo=die)
    finally:
        os.chdir(cwd)
    work = list(tmp_path.glob("result.zarr-*.work"))
    assert len(work) == 1 and (work[0] / "moments").is_dir()
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "moments reused" in proc.stdout and not work[0].exists()

    os.chdir(tmp_path)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_job(config, scheduler=scheduler, output=f"s3://{name}/results/b.zarr", echo=die)
    finally:
        os.chdir(cwd)
    first, second = [k for k in fs.find(f"{name}/data/sst.zarr/sst") if "/c/" in k][:2]
    fs.pipe(first, fs.cat(second))  # a chunk rewritten with other values: a new ETag
    proc = cli("fit", str(job), "--resume", "--output", f"s3://{name}/results/b.zarr", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "the input store's content" in proc.stderr

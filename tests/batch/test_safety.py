"""Users' data is never deleted, overwritten or silently reused (issue: "Never delete, overwrite
or silently reuse the user's data").

Every case runs the real command line (``python -m dcfa``, a separate process) on real Zarr
stores in a temporary directory, and asserts the exit code, the message, and every file on
disk before and after, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from support import assert_no_chunk_left_running, cli, fails, interrupt, slow_write, tree, write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job

pytestmark = pytest.mark.slow


############################################################################################
# the output path


@pytest.mark.parametrize(
    "output, relation",
    [
        ("sst.zarr", "is input.store"),
        (".", "contains input.store"),
        ("soi.csv", "is target.path"),
        ("sst.zarr/result.zarr", "lies inside input.store"),
        ("sst.zarr/sst", "lies inside input.store"),
        ("job.toml", "is the job file"),
    ],
)
def test_output_never_over_into_or_around_an_input(tmp_path, output, relation):
    job = write_job(tmp_path)
    (tmp_path / "notes.txt").write_text("my notes")
    before = tree(tmp_path)
    proc = cli(
        "fit",
        str(job),
        "--set",
        "output.overwrite=true",
        "--set",
        f"output.store={output}",
        cwd=tmp_path,
    )
    fails(proc, 2, "output.store:", relation)
    assert tree(tmp_path) == before


def test_overwrite_replaces_only_a_dcfa_result(tmp_path, scheduler):
    job = write_job(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "data.txt").write_text("do not delete")
    (tmp_path / "notes.txt").write_text("my notes")
    xr.Dataset({"v": ("x", np.arange(3.0))}).to_zarr(tmp_path / "other.zarr")
    before = tree(tmp_path)
    for target, what in [
        ("mine", "a directory that dcfa did not write"),
        ("notes.txt", "a file that dcfa did not write"),
        ("other.zarr", "a directory that dcfa did not write"),
    ]:
        proc = cli(
            "fit", str(job), "--set", "output.overwrite=true", "--output", target, cwd=tmp_path
        )
        fails(proc, 2, "output.store:", what, "overwrite only replaces dcfa's own results")
        assert tree(tmp_path) == before
    # without overwrite too, what cannot be replaced is said first: overwrite would not help
    proc = cli("fit", str(job), "--output", "mine", cwd=tmp_path)
    fails(proc, 2, "output.store:", "exists and is a directory that dcfa did not write")
    # a dcfa result is replaced with overwrite = true, and only then
    proc = cli("fit", str(job), "--scheduler", scheduler, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    first = tree(tmp_path / "result.zarr")
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, "output.store:", "exists (an earlier dcfa result store); set output.overwrite",
          "(dcfa fit --overwrite)")  # fmt: skip
    assert tree(tmp_path / "result.zarr") == first
    proc = cli("fit", str(job), "--overwrite", "--output", "mine", cwd=tmp_path)  # the flag
    fails(proc, 2, "output.store:", "a directory that dcfa did not write")  # is the key
    assert tree(tmp_path) == {**before, **{k: v for k, v in tree(tmp_path).items()
                                          if k.startswith("result.zarr")}}  # fmt: skip
    os.symlink(tmp_path / "result.zarr", tmp_path / "link.zarr")
    proc = cli(
        "fit", str(job), "--set", "output.overwrite=true", "--output", "link.zarr", cwd=tmp_path
    )
    fails(proc, 2, "output.store:", "is a symbolic link")
    proc = cli(
        "fit",
        str(job),
        "--overwrite",
        "--set",
        "method.params.neighbors=2",
        "--scheduler",
        scheduler,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert tree(tmp_path / "result.zarr") != first
    after = tree(tmp_path)
    for rel, digest in before.items():
        assert after[rel] == digest, rel
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "marker",
    [b"", b"my own notes on the analysis", b'{"pid": 1, "host": "x", "started": "t"}'],
)
def test_a_users_directory_beside_a_file_named_incomplete_is_never_replaced(tmp_path, marker):
    """``analysis/`` holds the user's files and ``analysis.incomplete`` is theirs too (empty,
    text, or JSON that is not dcfa's marker): dcfa never takes it for its own temporary store,
    so overwrite refuses it and every file stays as it was."""
    job = write_job(tmp_path)
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "notes.txt").write_text("my notes")
    (tmp_path / "analysis" / "fig.png").write_bytes(b"\x89PNG not really")
    (tmp_path / "analysis.incomplete").write_bytes(marker)
    before = tree(tmp_path)
    proc = cli(
        "fit", str(job), "--set", "output.overwrite=true", "--output", "analysis", cwd=tmp_path
    )
    fails(proc, 2, "output.store:", "a directory that dcfa did not write")
    assert tree(tmp_path) == before


def test_unwritable_output_directory_exits_2(tmp_path):
    job = write_job(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = False
    if os.geteuid() == 0:  # root writes anywhere a mode allows: a read-only mount it is
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True
            ).returncode
            == 0
        )
        if not mounted:
            pytest.skip("running as root and cannot mount a read-only tmpfs")
    else:
        ro.chmod(0o555)
    try:
        before = tree(tmp_path)
        proc = cli("fit", str(job), "--output", "ro/result.zarr", cwd=tmp_path)
        fails(proc, 2, "output.store:", "cannot write in", str(ro))
        assert tree(tmp_path) == before
        proc = cli("fit", str(job), "--output", "nowhere/result.zarr", cwd=tmp_path)
        fails(proc, 2, "output.store:", "does not exist; create it first")
        assert tree(tmp_path) == before
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)], check=True)
        ro.chmod(0o755)


############################################################################################
# --resume reuses only what the same inputs produced


def test_resume_refuses_a_changed_target_and_a_changed_archive(tmp_path, scheduler):
    job = write_job(tmp_path)
    config = load_config(job)
    interrupt(config, "[4/5]", scheduler)
    work = tmp_path / "result.zarr.work"
    assert (work / "moments").exists() and (work / "identity.json").exists()

    # the user corrects the target's values (same dates)
    frame = pd.read_csv(tmp_path / "soi.csv")
    frame["soi"] = -frame["soi"][::-1].to_numpy()
    frame.to_csv(tmp_path / "soi.csv", index=False)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(
        proc,
        2,
        "--resume: cannot reuse the work",
        "the target's values or dates",
        "Run without --resume",
    )
    assert tree(tmp_path) == before
    # without --resume the stale work is discarded, and the result is the new target's
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "starting over" in proc.stdout and "moments pass" in proc.stdout
    straight = run_job(
        config, output=str(tmp_path / "straight.zarr"), scheduler=scheduler, echo=lambda *a: None
    )
    a, b = xr.open_zarr(tmp_path / "result.zarr"), xr.open_zarr(straight)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.group_target_corr.values, b.group_target_corr.values)

    # a rewritten chunk of the archive
    interrupt(config, "[4/5]", scheduler, output=str(tmp_path / "again.zarr"))
    chunk = next(
        p
        for p in sorted((tmp_path / "sst.zarr" / "sst").rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    )
    time.sleep(0.01)
    chunk.write_bytes(chunk.read_bytes())  # same bytes, a new write: the archive was touched
    proc = cli("fit", str(job), "--resume", "--output", "again.zarr", cwd=tmp_path)
    fails(proc, 2, "--resume: cannot reuse the work", "the input store's content")


def test_resume_never_takes_planted_moments(tmp_path, scheduler):
    """Moments of other data, planted into the work directory of a job with the same
    configuration, are recomputed, not used."""
    job = write_job(tmp_path)
    config = load_config(job)
    interrupt(config, "[4/5]", scheduler)
    work = tmp_path / "result.zarr.work"
    other = tmp_path / "other"
    other.mkdir()
    job_b = write_job(other)
    ds = xr.open_zarr(other / "sst.zarr", consolidated=False).load()
    ds["sst"] = ds.sst[::-1].assign_coords(time=ds.time)  # other data, same shape and config
    shutil.rmtree(other / "sst.zarr")
    ds.drop_encoding().chunk({"time": 12}).to_zarr(other / "sst.zarr")
    interrupt(load_config(job_b), "[4/5]", scheduler)
    shutil.rmtree(work / "moments")
    shutil.copytree(other / "result.zarr.work" / "moments", work / "moments")
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "is not what the interrupted run wrote" in proc.stdout
    assert "moments pass and partition" in proc.stdout
    assert "preprocessing: reused" in proc.stdout
    straight = run_job(
        config, output=str(tmp_path / "straight.zarr"), scheduler=scheduler, echo=lambda *a: None
    )
    a, b = xr.open_zarr(tmp_path / "result.zarr"), xr.open_zarr(straight)
    np.testing.assert_array_equal(a.region.values, b.region.values)
    np.testing.assert_allclose(a.features.values, b.features.values, atol=1e-6)


def test_work_directory_is_never_followed_or_taken(tmp_path):
    job = write_job(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("someone else's")
    os.symlink(elsewhere, tmp_path / "result.zarr.work")
    before = tree(tmp_path)
    for extra in ([], ["--resume"]):
        proc = cli("fit", str(job), *extra, cwd=tmp_path)
        fails(proc, 2, "output.store:", "is a symbolic link; dcfa never follows it")
        assert tree(tmp_path) == before
    os.unlink(tmp_path / "result.zarr.work")
    (tmp_path / "result.zarr.work").mkdir()
    (tmp_path / "result.zarr.work" / "mine.txt").write_text("not dcfa's")
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, "output.store:", "exists but dcfa did not make it")
    assert tree(tmp_path) == before


############################################################################################
# killed writes


def test_leftovers_of_a_killed_write_are_marked_and_removed(tmp_path, scheduler):
    job = write_job(tmp_path)
    # a real process killed in the middle of writing the result store
    script = textwrap.dedent(
        f"""
        import time, xarray as xr, numpy as np
        from dcfa.storage.store import atomic_store
        with atomic_store({str(tmp_path / "result.zarr")!r}) as tmp:
            xr.Dataset({{"v": ("x", np.arange(4.0))}}).to_zarr(tmp, mode="a")
            print("written", flush=True)
            time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "written"
    child.send_signal(signal.SIGKILL)
    child.wait()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".result.zarr.tmp-")]
    assert len(leftovers) == 2  # the store and its marker
    store = next(p for p in leftovers if p.is_dir())
    proc = cli("inspect", str(store), cwd=tmp_path)
    fails(proc, 2, "is an incomplete store", "safe to delete")
    # the next run of the same job removes them
    proc = cli("fit", str(job), "--scheduler", scheduler, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    proc = cli("inspect", "result.zarr", cwd=tmp_path)
    assert proc.returncode == 0 and "result of LinCFA" in proc.stdout


def test_a_running_write_is_left_alone(tmp_path):
    """A temporary store whose writer still runs is not a leftover."""
    from dcfa.storage.store import atomic_store, remove_leftovers

    with atomic_store(tmp_path / "r.zarr") as tmp:
        assert remove_leftovers(tmp_path / "r.zarr") == [] and tmp.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]


@contextlib.contextmanager
def _ctrl_c_when_a_chunk_runs(log: Path):
    """Ctrl-C in this (the main) thread once a chunk has started, as a user's during a write:
    a real signal, which interrupts the thread's wait for the computation."""
    import threading

    def press(signum, frame):
        raise KeyboardInterrupt

    def watch():
        while not done.wait(0.01):
            if any(log.glob("started-*")):
                signal.pthread_kill(main, signal.SIGALRM)
                return

    main, done = threading.get_ident(), threading.Event()
    previous = signal.signal(signal.SIGALRM, press)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    "writer, how",
    [("write_result", "error"), ("write_dataset", "error"), ("write_result", "ctrl-c")],
)
@pytest.mark.parametrize("where", ["cluster", "threads"])
def test_a_failed_write_returns_after_its_last_task_and_leaves_nothing(
    tmp_path, where, writer, how, request
):
    """Dask raises at a task's first error (or at Ctrl-C) while the other tasks go on: a
    chunk still being written recreated the temporary store the failed write had removed
    (CI: a full disk left '.r.zarr.tmp-25279836' next to the output)."""
    import dask

    from dcfa import io

    log, out = tmp_path / "log", tmp_path / "out"
    out.mkdir()
    ds = slow_write(log, fail=how == "error")
    if where == "cluster":
        request.getfixturevalue("client")
        setting = {}
    else:
        setting = {"scheduler": "threads", "num_workers": 2}
    raised = (OSError, "No space left") if how == "error" else (KeyboardInterrupt, None)
    with (
        dask.config.set(setting),
        pytest.raises(raised[0], match=raised[1]),
        _ctrl_c_when_a_chunk_runs(log) if how == "ctrl-c" else contextlib.nullcontext(),
    ):
        if writer == "write_result":
            io.write_result(out / "r.zarr", ds)
        else:
            io.write_dataset(ds, out / "r.zarr")
    assert_no_chunk_left_running(log)
    time.sleep(1.5)  # long enough for a chunk left running to write
    assert list(out.iterdir()) == []


def _second_thread_slower(i: int, log: str) -> int:
    """A task that logs when it starts and ends; the pool's second thread's take longer."""
    import threading

    (Path(log) / f"started-{i}").touch()
    time.sleep(2.0 if threading.current_thread().name.endswith("_1") else 0.2)
    (Path(log) / f"ended-{i}").touch()
    return i


def test_a_ctrl_c_while_the_pool_starts_a_thread_still_waits_for_its_task(tmp_path, monkeypatch):
    """Ctrl-C can land in ``Thread.start`` while the threaded scheduler's pool starts its
    second thread, which then runs a task the pool never registered (CI: a chunk of the test
    above still ran after the write had returned). Here the interrupt lands there on purpose,
    once that thread has taken its task."""
    import concurrent.futures.thread
    import threading

    import dask

    from dcfa._compute import compute

    log = tmp_path / "log"
    log.mkdir()
    start = threading.Thread.start

    def start_then_ctrl_c(thread):
        start(thread)
        if thread._target is concurrent.futures.thread._worker and thread.name.endswith("_1"):
            while len(list(log.glob("started-*"))) < 2:
                time.sleep(0.01)
            raise KeyboardInterrupt

    tasks = [dask.delayed(_second_thread_slower, pure=False)(i, str(log)) for i in range(4)]
    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    with dask.config.set(scheduler="threads", num_workers=2):
        with pytest.raises(KeyboardInterrupt):
            compute(*tasks)
    monkeypatch.undo()
    assert_no_chunk_left_running(log)


def _fail_or_sleep(i: int, seconds: float, log: str) -> int:
    """Task 1 sleeps; task 0 fails once task 1 has started."""
    started = Path(log) / "started"
    if i == 0:
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise OSError(28, "No space left on device")
    started.touch()
    time.sleep(seconds)
    return i


def test_a_task_that_outlives_the_wait_is_named_not_waited_for_forever(client, tmp_path):
    """A hung task (a stalled bucket read) must not hold a failed run's error for ever."""
    from dcfa._compute import scheduler_workers, settle

    workers = sorted(scheduler_workers(client))  # one task each: the sleeper runs beside
    futures = [
        client.submit(_fail_or_sleep, i, 3.0, str(tmp_path), workers=[w], pure=False)
        for i, w in enumerate(workers[:2])
    ]
    with pytest.raises(OSError, match="No space left"):
        client.gather(futures)
    t = time.perf_counter()
    with pytest.warns(RuntimeWarning, match=r"1 task\(s\) of the failed computation still run "):
        settle(client, futures, timeout=0.5)
    assert 0.5 <= time.perf_counter() - t < 2.0
    time.sleep(3.0)  # the session's worker free again for the next test


############################################################################################
# archives: Zarr formats and codecs


@pytest.mark.parametrize(
    "zarr_format, codec",
    [(2, "blosc"), (2, "zlib"), (2, "zstd"), (3, "default"), (3, "blosc")],
)
def test_zarr_formats_and_codecs_run_end_to_end(tmp_path, scheduler, zarr_format, codec):
    import numcodecs
    import zarr.codecs

    job = write_job(tmp_path)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    shutil.rmtree(tmp_path / "sst.zarr")
    compressor = {
        (2, "blosc"): numcodecs.Blosc(cname="zstd", clevel=3),
        (2, "zlib"): numcodecs.Zlib(level=4),
        (2, "zstd"): numcodecs.Zstd(level=2),
        (3, "blosc"): zarr.codecs.BloscCodec(cname="lz4"),
    }.get((zarr_format, codec))
    encoding = {"sst": {"compressors": [compressor]}} if compressor else {}
    ds.chunk({"time": 12}).to_zarr(
        tmp_path / "sst.zarr", zarr_format=zarr_format, encoding=encoding, consolidated=False
    )
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # inputs untouched
    result = xr.open_zarr(tmp_path / "result.zarr")
    assert result.attrs["dcfa_kind"] == "result"
    reference = run_job(
        load_config(job),
        output=str(tmp_path / "ref.zarr"),
        scheduler=scheduler,
        echo=lambda *a: None,
    )
    np.testing.assert_array_equal(result.region.values, xr.open_zarr(reference).region.values)


############################################################################################
# bad input: exit 2, one line naming the key or path, nothing left behind


def test_all_missing_and_non_numeric_variables_exit_2_before_any_pass(tmp_path):
    job = write_job(tmp_path)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    ds["empty"] = ds.sst * np.nan
    ds["label"] = ds.sst.astype(str)
    ds.chunk({"time": 12}).to_zarr(tmp_path / "more.zarr")
    before = tree(tmp_path)
    for variable, needle in [("empty", "hold no data"), ("label", "expected numbers")]:
        proc = cli(
            "fit",
            str(job),
            "--set",
            "input.store=more.zarr",
            "--set",
            f"input.variables=['{variable}']",
            cwd=tmp_path,
        )
        last = fails(proc, 2, "input.variables:", needle)
        assert "cluster:" not in proc.stdout, "a cluster was started: " + last
        assert tree(tmp_path) == before


def test_all_missing_found_by_the_pass_leaves_nothing(tmp_path, scheduler):
    """Chunks written full of NaN (write_empty_chunks): the first pass finds it; exit 2 and
    no work directory left."""
    job = write_job(tmp_path)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    ds["sst"] = ds.sst * np.nan
    shutil.rmtree(tmp_path / "sst.zarr")
    ds.chunk({"time": 12}).to_zarr(
        tmp_path / "sst.zarr", encoding={"sst": {"write_empty_chunks": True}}
    )
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "input.variables:", "hold no data")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("attached", [True, False], ids=["scheduler", "local-cluster"])
def test_truncated_chunk_names_the_store(tmp_path, scheduler, attached):
    """On the job's own LocalCluster the workers logged the failed task's traceback above the
    one-line error."""
    job = write_job(tmp_path)
    chunks = [
        p
        for p in sorted((tmp_path / "sst.zarr" / "sst").rglob("*"))
        if p.is_file() and p.name != "zarr.json"
    ]
    chunks[3].write_bytes(chunks[3].read_bytes()[:20])
    before = tree(tmp_path)
    proc = cli("fit", str(job), *(["--scheduler", scheduler] if attached else []), cwd=tmp_path)
    fails(proc, 2, "input.store:", str(tmp_path / "sst.zarr"), "cannot be decoded")
    assert "distributed.worker" not in proc.stderr, proc.stderr
    assert tree(tmp_path) == before


def test_bad_memory_limit_names_the_key(tmp_path):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", "cluster.memory_limit=lots", cwd=tmp_path)
    fails(proc, 2, "cluster.memory_limit must be a size", "'lots'")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("wait", ["lots", "0s", "10min"])
def test_bad_connect_timeout_names_the_key(tmp_path, wait):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--set", f"cluster.connect_timeout={wait}", cwd=tmp_path)
    fails(proc, 2, "cluster.connect_timeout must be a duration such as '30s'", repr(wait))
    assert tree(tmp_path) == before


def test_relative_paths_in_a_job_file_are_relative_to_the_file(tmp_path, scheduler):
    project = tmp_path / "project"
    project.mkdir()
    job = write_job(project)
    import tomllib

    import tomli_w

    raw = tomllib.loads(job.read_text())
    raw["input"]["store"] = "sst.zarr"
    raw["target"]["path"] = "soi.csv"
    raw["output"]["store"] = "result.zarr"
    job.write_text(tomli_w.dumps(raw))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = cli("fit", str(job), "--scheduler", scheduler, "-q", cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert (project / "result.zarr").is_dir() and not list(elsewhere.iterdir())
    # --output is relative to the working directory
    proc = cli(
        "fit", str(job), "--output", "here.zarr", "--scheduler", scheduler, "-q", cwd=elsewhere
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in elsewhere.iterdir()] == ["here.zarr"]


############################################################################################
# what is shown: the dashboard, text from stores


def test_local_cluster_dashboard_listens_on_loopback_only():
    import psutil

    from dcfa.batch.cluster import make_cluster

    config = load_config(
        base={
            "input": {"store": "a", "variables": ["v"]},
            "target": {"path": "t"},
            "output": {"store": "o"},
            "cluster": {"n_workers": 1},
        }
    )
    with make_cluster(config.cluster) as cluster:
        listening = [
            c.laddr for c in psutil.Process().net_connections("tcp") if c.status == "LISTEN"
        ]
        assert "127.0.0.1" in cluster.dashboard_link
        assert listening and all(addr.ip == "127.0.0.1" for addr in listening), listening


def test_inspect_escapes_control_characters(tmp_path):
    evil = "sst\x1b[2J\x1b]0;owned\x07\rfake line\nsecond"
    ds = xr.Dataset(
        {"v": (("time", "x"), np.zeros((3, 2)), {"note": evil})},
        coords={"time": pd.date_range("2000-01-01", periods=3, freq="MS"), "x": ["a\x1b[31m", "b"]},
    )
    ds = ds.rename({"v": evil})
    ds.to_zarr(tmp_path / "evil.zarr")
    proc = cli("inspect", "evil.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for c in ("\x1b", "\x07", "\r"):
        assert c not in proc.stdout
    assert "\\x1b[2J" in proc.stdout and "\\r" in proc.stdout
    assert "\nsecond" not in proc.stdout  # a newline in a name does not start a line


def test_dense_job_over_the_memory_budget_exits_2_before_any_pass(tmp_path, scheduler):
    job = write_job(tmp_path)
    before = tree(tmp_path)
    proc = cli(
        "fit",
        str(job),
        "--scheduler",
        scheduler,
        cwd=tmp_path,
        env={"DASK_DCFA__MEMORY_BUDGET": "20KiB"},
    )
    last = fails(
        proc,
        2,
        "LinCFA",
        "the dense pass would hold about",
        "memory budget",
        "mode='grid'",
        "DASK_DCFA__MEMORY_BUDGET",
    )
    assert "[2/5]" not in proc.stdout, last  # refused before the first pass
    assert tree(tmp_path) == before


def test_a_dcfa_store_of_another_kind_is_named_as_such(tmp_path):
    """A dcfa apply output (or a dataset dcfa wrote) given as a fit's output with overwrite:
    refused, and called what it is, not "a directory that dcfa did not write"."""
    from dcfa.storage.store import OutputError, check_replaceable

    store = tmp_path / "series.zarr"
    xr.Dataset({"v": ("x", np.arange(3.0))}, attrs={"dcfa_kind": "region series"}).to_zarr(
        store, consolidated=False
    )
    before = tree(tmp_path)
    with pytest.raises(OutputError) as err:
        check_replaceable(store, overwrite=True, key="output.store", kinds=("result",))
    assert "is a dcfa region series store, not a result store" in str(err.value)
    assert "overwrite only replaces dcfa's own results" in str(err.value)
    assert tree(tmp_path) == before


# the real command line, with a second writer that rewrites the first year of the archive
# (zarr, in place) once the job has read it and fitted: as another process updating the
# store while the job runs would
REWRITE = """\
import sys
import zarr
import dcfa.cli

line = dcfa.cli._line

def echo(text):
    line(text)
    if text.startswith("[3/5]"):
        sst = zarr.open_array(sys.argv[-1] + "/sst", mode="r+")
        sst[:12] = sst[:12] + 1.0

dcfa.cli._line = echo
sys.exit(dcfa.cli.main(sys.argv[1:-1]))
"""


@pytest.mark.parametrize("gbmap", [False, True], ids=["features-pass", "gbmap"])
def test_an_archive_rewritten_during_the_job_publishes_no_result(tmp_path, scheduler, gbmap):
    job = write_job(tmp_path, **({"gbmap__n_boosts": 2} if gbmap else {}))
    before = tree(tmp_path)
    archive = str(tmp_path / "sst.zarr")
    proc = subprocess.run(
        [sys.executable, "-c", REWRITE, "fit", str(job), "--scheduler", scheduler, archive],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    # it wrote a result that matched neither the archive before nor after, and exited 0
    fails(proc, 1, "input.store:", "changed while the job read it (sst: ", "none was written")
    after = tree(tmp_path)
    changed = {k for k in before.keys() & after.keys() if before[k] != after[k]}
    assert after.keys() == before.keys()  # no result, no work directory, no temporary store
    assert changed and all(k.startswith("sst.zarr/sst/c/0/") for k in changed), changed


def test_an_archive_constant_in_every_cell_names_the_input_and_leaves_nothing(tmp_path, scheduler):
    """It said 'X: every feature was excluded' and left result.zarr.work behind."""
    job = write_job(tmp_path)
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    ds["sst"] = (ds.sst * 0 + 280.0).where(ds.sst.notnull())  # the land stays missing
    shutil.rmtree(tmp_path / "sst.zarr")
    ds.chunk({"time": 12}).to_zarr(tmp_path / "sst.zarr", consolidated=False)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    fails(
        proc,
        2,
        "input.variables: every one of the 37 cells of ['sst'] in ",
        "was excluded (37 cells: constant (value 0))",  # anomalies of a constant
    )
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "value, needle",
    [
        (np.inf, "holds 1 infinite value(s), the first inf at 2001-02-15"),
        (-np.inf, "holds 1 infinite value(s), the first -inf at 2001-02-15"),
        (1e300, "holds values up to 1e+300, which overflow float64"),
    ],
)
def test_a_target_with_infinite_or_huge_values_names_the_target_before_any_pass(
    tmp_path, value, needle
):
    """+inf said 'y: contains 1 NaN or infinite values' after the passes, and left the work
    directory; 1e300 named 'y'."""
    job = write_job(tmp_path)
    frame = pd.read_csv(tmp_path / "soi.csv")
    frame.loc[20, "soi"] = value
    frame.to_csv(tmp_path / "soi.csv", index=False)
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(proc, 2, "target.variable: 'soi' in ", needle)
    assert "[2/5]" not in proc.stdout  # refused before the cluster and any pass
    assert tree(tmp_path) == before


def _rescaled(tmp_path, factor: float) -> None:
    """The job's archive as float64, times ``factor`` (the same field in other units)."""
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    ds["sst"] = ds.sst.astype("f8") * factor
    shutil.rmtree(tmp_path / "sst.zarr")
    ds.chunk({"time": 12}).to_zarr(tmp_path / "sst.zarr", consolidated=False)


def test_a_field_in_extreme_units_is_refused_and_inside_the_range_gives_the_same_map(
    tmp_path, scheduler
):
    """At 1e-160 the spread underflowed and the job fitted another map, with only NumPy's
    overflow warning."""
    job = write_job(tmp_path, input__standardize=True)
    _rescaled(tmp_path, 1.0)
    proc = cli("fit", str(job), "--output", "one.zarr", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _rescaled(tmp_path, 2.0**-166)  # about 1e-50: exact powers of two, the same digits
    proc = cli("fit", str(job), "--output", "small.zarr", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    one, small = (
        xr.open_zarr(tmp_path / s, consolidated=False) for s in ("one.zarr", "small.zarr")
    )
    xr.testing.assert_identical(one.region, small.region)

    _rescaled(tmp_path, 1e-160 / 2.0**-166)  # the field at 1e-160
    before = tree(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    fails(
        proc,
        2,
        "input.variables: ['sst'] in ",
        "37 of the 37 cells with data hold values of magnitude about 2.8",
        "rescale the data (multiply by 1e+158)",
    )
    assert "RuntimeWarning" not in proc.stderr
    assert tree(tmp_path) == before


def test_chunks_missing_from_the_archive_are_said_and_recorded(tmp_path, scheduler):
    """Zarr reads a chunk that is not stored as the fill value: a deleted chunk gave exit 0,
    cells dropped, and nothing said."""
    import json

    job = write_job(tmp_path, method__params={"neighbors": 1, "missing": "pairwise"})
    (tmp_path / "sst.zarr" / "sst" / "c" / "3" / "0" / "0").unlink()  # months 37-48
    before = tree(tmp_path)
    warning = (
        "warning: 1 of the 10 chunks of 'sst' are missing from the store and read as its fill "
        "value (nan)"
    )
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert warning in proc.stdout
    result = xr.open_zarr(tmp_path / "result.zarr", consolidated=False)
    recorded = {"sst": {"missing": 1, "chunks": 10, "fill_value": "nan"}}
    assert json.loads(result.attrs["missing_chunks"]) == recorded
    proc = cli("inspect", "result.zarr", cwd=tmp_path)
    assert "1 of the 10 chunks of 'sst' were missing from the input store" in proc.stdout
    proc = cli("apply", "result.zarr", "sst.zarr", "--output", "applied.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert warning in proc.stdout
    applied = xr.open_zarr(tmp_path / "applied.zarr", consolidated=False)
    assert json.loads(applied.attrs["missing_chunks"]) == recorded
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if k in before} == before  # the inputs untouched

    shutil.rmtree(tmp_path / "sst.zarr")
    job = write_job(tmp_path)  # a complete archive: no warning, no attribute
    proc = cli("fit", str(job), "--output", "whole.zarr", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0 and "missing from the store" not in proc.stdout, proc.stdout
    whole = xr.open_zarr(tmp_path / "whole.zarr", consolidated=False)
    assert "missing_chunks" not in whole.attrs


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_cluster_that_loses_every_worker_stops_the_job_after_the_bound(tmp_path):
    """A job attached to a scheduler whose only worker was killed during the write waited in
    silence for ever (until SIGTERM)."""
    job = write_job(tmp_path, cluster__no_workers_timeout="3s")
    bindir = Path(sys.executable).parent
    address = f"tcp://127.0.0.1:{_free_port()}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [bindir / "dask", "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":")[-1],
         "--dashboard-address", ":0"], **quiet,
    )  # fmt: skip

    def worker():
        return subprocess.Popen(
            [bindir / "dask", "worker", address, "--no-nanny", "--nthreads", "1",
             "--memory-limit", "1GiB"], **quiet,
        )  # fmt: skip

    workers = [worker()]
    try:
        fit = subprocess.Popen(
            [sys.executable, "-m", "dcfa", "fit", str(job), "--scheduler", address],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in fit.stdout:
            if line.startswith("[4/5]"):  # the write's pass: its only worker is killed
                workers[0].kill()
                killed = time.monotonic()
                break
        out, err = fit.communicate(timeout=120)
        assert fit.returncode == 1, err
        assert time.monotonic() - killed < 60
        last = err.strip().splitlines()
        assert last[-2].startswith("dcfa: error: NoWorkersError: every worker left the cluster")
        assert "within 3 s (dcfa.no_workers_timeout; cluster.no_workers_timeout" in last[-2]
        assert "rerun with --resume" in last[-1]
        assert sorted(os.listdir(tmp_path)) == [
            "job.toml", "result.zarr.work", "soi.csv", "sst.zarr"
        ]  # fmt: skip

        workers.append(worker())  # a worker back: the job resumes from its passes
        proc = cli("fit", str(job), "--scheduler", address, "--resume", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "preprocessing: reused" in proc.stdout
        assert sorted(os.listdir(tmp_path)) == ["job.toml", "result.zarr", "soi.csv", "sst.zarr"]
    finally:
        for p in (*workers, scheduler):
            p.kill()
            p.wait(timeout=30)

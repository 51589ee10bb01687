"""``dcfa fit --resume`` as a demanding user meets it: an interrupted job, then a change, then a
resume. A finished pass is reused only when what it read is unchanged, and the refusal names
what changed; a work directory half deleted resumes; a full disk names where.

Every CLI case runs the real command line (``python -m dcfa``) on real Zarr stores against a
real LocalCluster and asserts the exit code, the message and the files on disk before and
after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from support import cli, fails, interrupt, tree, write_job

from dcfa.batch.config import load_config
from dcfa.batch.job import run_job

pytestmark = pytest.mark.slow


def _first_chunk(variable_dir: Path) -> Path:
    return next(p for p in sorted(variable_dir.rglob("*")) if p.is_file() and p.name != "zarr.json")


def _rewrite_uncompressed(tmp_path: Path) -> None:
    """The archive of :func:`write_job`, stored without compression: every chunk of a
    variable has the same size, whatever its values."""
    ds = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).load().drop_encoding()
    shutil.rmtree(tmp_path / "sst.zarr")
    ds.chunk({"time": 12}).to_zarr(tmp_path / "sst.zarr", encoding={"sst": {"compressors": None}})


def _shift_values(chunk: Path, dtype) -> None:
    """Other values in ``chunk``, same size; its timestamps put back as ``cp -p``, ``rsync
    -a`` or ``tar x`` leave them."""
    st = chunk.stat()
    values = np.frombuffer(chunk.read_bytes(), dtype=np.dtype(dtype).newbyteorder("<")).copy()
    values[np.isfinite(values)] += 5.0
    chunk.write_bytes(values.tobytes())
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert chunk.stat().st_size == st.st_size and chunk.stat().st_mtime_ns == st.st_mtime_ns


def test_a_chunk_rewritten_with_its_size_and_timestamps_kept_is_not_reused(tmp_path, scheduler):
    """Size and mtime alone took the rewritten chunk for the old one: the passes of the old
    values were reused (exit 0, a result of data no longer there)."""
    job = write_job(tmp_path)
    _rewrite_uncompressed(tmp_path)
    config = load_config(job)
    interrupt(config, "[4/5]", scheduler)
    dtype = xr.open_zarr(tmp_path / "sst.zarr", consolidated=False).sst.dtype
    _shift_values(_first_chunk(tmp_path / "sst.zarr" / "sst"), dtype)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(
        proc,
        2,
        "--resume: cannot reuse the work",
        "the input store's content changed (input.store: sst: files added, removed or rewritten)",
        "Run without --resume",
    )
    assert tree(tmp_path) == before


def test_a_variable_linked_into_the_archive_is_watched_through_the_link(tmp_path, scheduler):
    """An archive assembled with a symbolic link (``sst.zarr/sst -> /data/v1/sst``): the
    files behind the link were not part of the identity, so a rewritten chunk there, or the
    link pointed at another version, was reused."""
    job = write_job(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    shutil.move(tmp_path / "sst.zarr" / "sst", data / "v1")
    shutil.copytree(data / "v1", data / "v2")
    (tmp_path / "sst.zarr" / "sst").symlink_to(data / "v1")
    config = load_config(job)
    interrupt(config, "[4/5]", scheduler)
    # the user points the link at another version of the variable
    (tmp_path / "sst.zarr" / "sst").unlink()
    (tmp_path / "sst.zarr" / "sst").symlink_to(data / "v2")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    fails(proc, 2, "--resume: cannot reuse the work", "input.store: sst:")
    assert tree(tmp_path) == before
    # a chunk rewritten behind the link
    (tmp_path / "sst.zarr" / "sst").unlink()
    (tmp_path / "sst.zarr" / "sst").symlink_to(data / "v1")
    interrupt(config, "[4/5]", scheduler, output=str(tmp_path / "again.zarr"))
    chunk = _first_chunk(data / "v1")
    chunk.write_bytes(_first_chunk(data / "v2").read_bytes()[:-1] + b"\0")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--output", "again.zarr", cwd=tmp_path)
    fails(proc, 2, "--resume: cannot reuse the work", "input.store: sst:")
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "setting, named",
    [
        (
            "method.params.neighbors=2",
            "the configuration changed (method.params.neighbors: 1 -> 2)",
        ),
        ("input.anomalies=false", "the configuration changed (input.anomalies: true -> false)"),
        ("input.windows=[1, 3]", "(input.windows: [1] -> [1, 3])"),
        ("target.lead=1", "the configuration changed (target.lead: 0 -> 1) since"),
    ],
)
def test_a_refused_resume_names_the_changed_key(tmp_path, scheduler, setting, named):
    """It said 'the configuration ([input], [target] or [method])', and for target.lead that
    the target's values had changed, which they had not."""
    job = write_job(tmp_path)
    interrupt(load_config(job), "[4/5]", scheduler)
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", "--set", setting, cwd=tmp_path)
    last = fails(proc, 2, "--resume: cannot reuse the work", named, "Run without --resume")
    assert "target's values" not in last
    assert tree(tmp_path) == before


def test_an_unreadable_identity_is_named_not_blamed_on_the_inputs(tmp_path, scheduler):
    """A damaged identity.json was reported as the configuration, the archive and the target
    all changed."""
    job = write_job(tmp_path)
    interrupt(load_config(job), "[4/5]", scheduler)
    (tmp_path / "result.zarr.work" / "identity.json").write_text("{")
    before = tree(tmp_path)
    proc = cli("fit", str(job), "--resume", cwd=tmp_path)
    last = fails(proc, 2, "identity.json is missing or unreadable", "Run without --resume")
    assert "configuration" not in last and "input store" not in last
    assert tree(tmp_path) == before


def test_a_half_deleted_work_directory_resumes(tmp_path, scheduler):
    """The preprocessing store deleted, the moments kept: the resume stopped with 'path:
    .../moments exists; pass overwrite=True' (exit 2, for good: every resume did)."""
    job = write_job(tmp_path)
    config = load_config(job)
    interrupt(config, "[4/5]", scheduler)
    shutil.rmtree(tmp_path / "result.zarr.work" / "preprocessing.zarr")
    proc = cli("fit", str(job), "--resume", "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[2/5] one pass" in proc.stdout and "moments pass" in proc.stdout
    assert not (tmp_path / "result.zarr.work").exists()
    straight = run_job(
        config, output=str(tmp_path / "straight.zarr"), scheduler=scheduler, echo=lambda *a: None
    )
    a, b = xr.open_zarr(tmp_path / "result.zarr"), xr.open_zarr(straight)
    np.testing.assert_array_equal(a.region.values, b.region.values)


def test_a_dangling_link_in_the_archive_does_not_stop_the_job(tmp_path, scheduler):
    """A broken link Zarr never reads (an old 'latest' link) stopped every run: exit 2, 'No
    such file or directory', before any pass."""
    job = write_job(tmp_path)
    (tmp_path / "sst.zarr" / "latest").symlink_to(tmp_path / "gone")
    proc = cli("fit", str(job), "--scheduler", scheduler, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "result.zarr").is_dir()


@pytest.fixture
def tiny_disk():
    """A 1 MiB tmpfs (root only), nearly full, outside the test's directory."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mnt = Path(tempfile.mkdtemp(prefix="dcfa-disk-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)]).returncode:
        mnt.rmdir()
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "filler").write_bytes(b"\0" * 900 * 1024)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
        mnt.rmdir()


def test_a_full_disk_names_the_output_and_keeps_the_passes(tmp_path, scheduler, tiny_disk):
    """It said 'OSError: [Errno 28] No space left on device', naming no path."""
    job = write_job(tmp_path)
    before = tree(tmp_path)
    out = tiny_disk / "r.zarr"
    proc = cli("fit", str(job), "--output", str(out), "--scheduler", scheduler, cwd=tmp_path)
    last = fails(proc, 1, "output.store: No space left on device while writing", str(out))
    assert "make room, then rerun with --resume" in last
    assert tree(tmp_path) == before
    assert sorted(os.listdir(tiny_disk)) == ["filler", "r.zarr.work"]  # no temporary store
    (tiny_disk / "filler").unlink()
    proc = cli(
        "fit", str(job), "--output", str(out), "--resume", "--scheduler", scheduler, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "preprocessing: reused" in proc.stdout
    assert sorted(os.listdir(tiny_disk)) == ["r.zarr"]


def test_passes_of_another_dcfa_version_are_not_reused(tmp_path, monkeypatch):
    """The code is an input: the identity of the same job under another dcfa version differs
    in its configuration, and the refusal names the version (an upgrade reused the passes of
    the old code)."""
    from dcfa import _version
    from dcfa.batch.identity import job_identity, what_changed
    from dcfa.io.target import open_target

    config = load_config(write_job(tmp_path))
    target = open_target(config.target["path"], config.target["variable"])
    old = job_identity(config, target)
    monkeypatch.setattr(_version, "__version__", "99.0")
    new = job_identity(config, target)
    assert old["input"] == new["input"] and old["target"] == new["target"]
    assert old["configuration"] != new["configuration"]
    (said,) = what_changed(old, new, ["configuration"])
    assert said.endswith("(dcfa.version: " + repr(old["details"]["settings"]["dcfa.version"])
                         + " -> '99.0')")  # fmt: skip


def test_a_disk_full_before_the_marker_is_written_is_a_fault_and_leaves_nothing(
    tmp_path, scheduler, tiny_disk
):
    """With no byte left for the write's marker, fit exited 2 ('cannot write in ...', as if the
    path were wrong), never said --resume, and left an empty marker for ever; apply too."""
    job = write_job(tmp_path, output__work_dir=str(tmp_path / "work"))
    proc = cli("fit", str(job), "--output", str(tmp_path / "good.zarr"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with contextlib.suppress(OSError), open(tiny_disk / "more", "wb") as f:
        while True:  # to the last byte: the marker's file is created, its bytes find no room
            f.write(b"\0" * 4096)
            f.flush()
    before = tree(tmp_path)
    out = tiny_disk / "r.zarr"
    proc = cli("fit", str(job), "--output", str(out), "--scheduler", scheduler, cwd=tmp_path)
    last = fails(proc, 1, "output.store: No space left on device while writing", str(out))
    assert "make room, then rerun with --resume" in last
    assert sorted(os.listdir(tiny_disk)) == ["filler", "more"]  # no marker, no store
    assert {k for k in tree(tmp_path).keys() - before.keys()} >= {"work/moments"}

    proc = cli("apply", "good.zarr", "sst.zarr", "--output", str(tiny_disk / "a.zarr"),
               cwd=tmp_path)  # fmt: skip
    fails(proc, 1, "--output: No space left on device while writing", "nothing was written")
    assert sorted(os.listdir(tiny_disk)) == ["filler", "more"]

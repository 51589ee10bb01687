"""Exit codes (issue 37, item 8): 2 only for dcfa's own bad-input errors (the configuration,
the input data, the memory budget: a :class:`dcfa.InputError`), 1 for anything else: a bug in
dcfa or a library (a ``KeyError``, a ``TypeError``, a plain ``ValueError``) must not read as a
configuration mistake."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys

import pytest
from sklearn.utils._param_validation import InvalidParameterError
from support import cli, write_job

from dcfa import InputError
from dcfa._errors import InputNotFoundError, InputTypeError
from dcfa.batch.cluster import SchedulerUnreachable
from dcfa.batch.config import ConfigError
from dcfa.batch.inputs import InputDataError
from dcfa.cli import main
from dcfa.memory import MemoryBudgetError
from dcfa.storage.store import OutputError


def entries(root) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def one_line(err: str) -> str:
    """The whole of stderr, asserted to be one ``dcfa: error:`` line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dcfa: error: "), err
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, needle",
    [  # a ConfigError, and an InputError of the archive's check naming the key
        (dict(output__ovewrite=True), "unknown key(s) ['output.ovewrite']"),
        (dict(input__variables=["slp"]), "input.variables: ['slp'] not in"),
    ],
)
def test_a_genuine_bad_input_exits_2_on_one_line_naming_the_key(tmp_path, change, needle):
    job = write_job(tmp_path, **change)
    before = entries(tmp_path)
    proc = cli("fit", str(job), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert needle in one_line(proc.stderr)
    assert entries(tmp_path) == before  # nothing written


# a bug in dcfa, raised in the middle of a real job: after the output, archive and target
# checks, before the cluster; the script runs the real command line in its own process
BUG = """\
import sys
import dcfa.batch.job

def build_estimator(method):
    raise KeyError("x")

dcfa.batch.job.build_estimator = build_estimator
from dcfa.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_with_bug(job, *extra, bug=BUG):
    return subprocess.run(
        [sys.executable, "-c", bug, "fit", str(job), *extra],
        capture_output=True,
        text=True,
        cwd=job.parent,
        timeout=600,
    )


@pytest.mark.slow
def test_a_bug_exits_1_on_one_line_and_traceback_prints_it(tmp_path):
    job = write_job(tmp_path)
    before = entries(tmp_path)
    proc = run_with_bug(job)
    assert proc.returncode == 1, proc.stderr
    line = one_line(proc.stderr)
    assert line == "dcfa: error: KeyError: 'x' (rerun with --traceback for details)", line
    assert "Traceback" not in proc.stderr
    assert entries(tmp_path) == before

    proc = run_with_bug(job, "--traceback")
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err[0] == "Traceback (most recent call last):", proc.stderr
    assert any("in run_job" in e for e in err) and any("in build_estimator" in e for e in err)
    assert err[-1] == "dcfa: error: KeyError: 'x'", proc.stderr
    assert entries(tmp_path) == before


@pytest.mark.parametrize(
    "exc, code",
    [
        (KeyError("x"), 1),
        (TypeError("unsupported operand type(s) for +: 'int' and 'str'"), 1),
        (AttributeError("'NoneType' object has no attribute 'sizes'"), 1),
        (IndexError("index 3 is out of bounds for axis 0 with size 3"), 1),
        (FileExistsError(errno.EEXIST, "File exists", "result.zarr.work/x"), 1),
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "gone"), 1),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), 1),
        # a plain ValueError is a bug (in dcfa or a library), not an input check of dcfa's
        (ValueError("operands could not be broadcast together with shapes (3,) (4,)"), 1),
        (FileNotFoundError("gone"), 1),  # dcfa's own checks raise InputNotFoundError
        (ConnectionError("lost"), 1),
        (MemoryBudgetError("the dense pass needs 9 GiB; dcfa.memory_budget allows 1 GiB"), 2),
        (InputError("input.windows: expected ints, got 'x' in ['x']"), 2),
        (ConfigError("cluster.memory_limit must be a size per worker such as '2GiB'"), 2),
        (InputDataError("input.variables: ['sst'] in 'sst.zarr' hold no data"), 2),
        (InputTypeError("X: got an xarray.Dataset; select one variable"), 2),
        (InputNotFoundError("input.store: no Zarr store at 'sst.zarr'"), 2),
        (OutputError("output.path: 'out.zarr' exists; set output.overwrite"), 2),
        (SchedulerUnreachable("--scheduler: cannot reach 'tcp://127.0.0.1:1': timed out"), 2),
        (InvalidParameterError("The 'alpha' parameter of LinCFA must be a float, got 'x'."), 2),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_only_dcfas_own_input_errors_exit_2(tmp_path, monkeypatch, capsys, exc, code):
    """The same point of a real job (``dcfa fit``'s own entry point, in this process) raising
    each kind of error: dcfa's input errors exit 2 with their message, anything else (a bug,
    an error of the operating system) exits 1 with its type."""
    import dcfa.batch.job

    def build_estimator(method):
        raise exc

    job = write_job(tmp_path)
    before = entries(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dcfa.batch.job, "build_estimator", build_estimator)
    assert main(["fit", str(job), "-q"]) == code
    line = one_line(capsys.readouterr().err)
    if code == 2:
        assert line == f"dcfa: error: {exc}"
    else:
        assert line.startswith(f"dcfa: error: {type(exc).__name__}: ")
        assert line.endswith("(rerun with --traceback for details)")
    assert entries(tmp_path) == before


@pytest.mark.slow
def test_a_plain_value_error_of_a_bug_exits_1_on_one_line(tmp_path):
    """A ValueError that no input check of dcfa raised (a bug, or a library's) is a fault:
    exit 1, its type on the one line, never read as a configuration mistake."""
    job = write_job(tmp_path)
    before = entries(tmp_path)
    bug = BUG.replace('raise KeyError("x")', 'raise ValueError("shapes (3,) and (4,) not aligned")')
    proc = run_with_bug(job, bug=bug)
    assert proc.returncode == 1, proc.stderr
    line = one_line(proc.stderr)
    assert line == (
        "dcfa: error: ValueError: shapes (3,) and (4,) not aligned "
        "(rerun with --traceback for details)"
    ), line
    assert entries(tmp_path) == before


# `python -m dcfa` whose command is cut by Ctrl-C while a string `exec` runs: an import making a
# dataclass or a namedtuple, the window in which the CI's Ctrl-C test once exited -2
INTERRUPTED_IN_EXEC = """\
import sys

import dcfa.cli


def interrupted(args):
    exec("raise KeyboardInterrupt", {})


dcfa.cli._apply = interrupted
sys.exit(dcfa.cli.main(sys.argv[1:]))
"""


def test_ctrl_c_inside_a_string_exec_still_exits_1(tmp_path):
    """A handled Ctrl-C exited by SIGINT (-2), not 1, under ``python -m`` when it had ended a
    string ``exec``: CPython kept it as unhandled."""
    (tmp_path / "interrupted_cli.py").write_text(INTERRUPTED_IN_EXEC)
    args = ["apply", "result.zarr", "sst.zarr", "--output", "out.zarr"]
    proc = subprocess.run(
        [sys.executable, "-m", "interrupted_cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert (proc.returncode, proc.stderr) == (1, "dcfa: interrupted; stopped\n")
    assert not (tmp_path / "out.zarr").exists()


def test_a_held_interrupt_keeps_an_ignored_sigint_ignored():
    """A background job of a shell script starts with SIGINT ignored; holding Ctrl-C while
    the cluster started put a recorder in its place, so a SIGINT then stopped the job (exit
    1, "interrupted") where the same signal at any other moment did nothing."""
    import os

    from dcfa._interrupts import held_interrupt

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with held_interrupt() as got:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
        assert got == [] and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with held_interrupt() as got:  # a terminal's job: recorded, not raised
            os.kill(os.getpid(), signal.SIGINT)
        assert got == [True] and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)

"""The ``dcfa`` command line. Argument parsing only; the work is in the library.

``dcfa fit CONFIG.toml``   run a batch job (see :mod:`dcfa.batch.config` for the file)
``dcfa demo``              the whole pipeline on real observations shipped in PyPI packages
``dcfa inspect STORE``     what a Zarr store (an input archive or a result) holds
``dcfa apply RESULT ARCHIVE --output OUT``  a fitted result's region series, forecast (and
                           GBMAP prediction) for the months of another archive

Exit status: 0 on success; 2 for dcfa's own bad-input errors only (a :class:`dcfa.InputError`
or a bad estimator parameter, see :func:`_bad_input`: a configuration error, bad input data, the
memory budget, an output path dcfa refuses, an input path that is not there, a scheduler it cannot
reach; the message names the key or path, and nothing is written); 1 for any other exception (a
fault, or a bug in dcfa or a library: a plain ``ValueError``, a ``TypeError`` or a ``KeyError`` is
never reported as bad input), on one line with its type; 141 (128 + SIGPIPE, as a shell tool killed
by SIGPIPE) when stdout was closed early, e.g. ``dcfa inspect STORE | head``: quietly, as Python's
documented recipe does (https://docs.python.org/3/library/signal.html#note-on-sigpipe); a fit
stopped so keeps its finished passes for ``--resume``. ``--traceback`` prints the traceback before
the line (exit 1 or 2 alike).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from dcfa._errors import InputError, in_dcfa

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_STDOUT_CLOSED = 128 + 13  # as a process killed by SIGPIPE: `dcfa inspect x | head`

_EXIT_STATUS = """\
exit status:
  0    success
  1    any error that is not 2: a fault (a lost worker, Ctrl-C, a full disk) or a bug
       in dcfa or a library (a plain ValueError included); one line with its type
       (--traceback for the traceback); a fit keeps its finished passes for --resume
  2    dcfa's own input checks only (dcfa.InputError): a bad configuration or
       parameter, bad input data, an input or output path, the memory budget; one line
       naming the key or path; nothing is written
  141  stdout was closed early (e.g. piped into head); quietly, as SIGPIPE would
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dcfa",
        description="Supervised, interpretable dimensionality reduction on Dask.",
        epilog=_EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars and no estimators' log lines; the steps ([1/5] ...) and the "
        "results are still printed",
    )
    common.add_argument(
        "--traceback", action="store_true", help="on an error, print its traceback too"
    )
    sub = p.add_subparsers(dest="command")

    fit = sub.add_parser("fit", parents=[common], help="run a batch job from a TOML config")
    fit.add_argument(
        "config", help="the job's TOML file (`dcfa example-job > job.toml` writes an example)"
    )
    fit.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key (repeatable); KEY= with no value unsets it (its default)",
    )
    fit.add_argument("--scheduler", help="address of a running Dask scheduler to attach to")
    fit.add_argument("--output", help="the result store (overrides output.store)")
    fit.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier result of dcfa fit (output.overwrite = true)",
    )
    fit.add_argument(
        "--resume",
        action="store_true",
        help="reuse the finished passes of an interrupted run of this job",
    )

    demo = sub.add_parser(
        "demo",
        parents=[common],
        help="real observations (tropical SST and wind -> the SOI 3 months ahead): the batch "
        "job with RegionsCV and GBMAP on a LocalCluster, forward-CV skill "
        "against EOF/PLS/ridge and the Nino-3.4 box, a map",
    )
    demo.add_argument("--workdir", help="where to write the stores (default: a new temp dir)")
    demo.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    demo.add_argument("--memory-limit", default="2GiB", help="per worker (default 2GiB)")
    demo.add_argument(
        "--splits", type=int, default=5, help="time blocks of the cross-validation (default 5)"
    )

    apply = sub.add_parser(
        "apply",
        parents=[common],
        help="apply a fitted result to the months of an archive: its region series, the "
        "forecast of the target from them (and GBMAP embedding and prediction), with the stored "
        "preprocessing",
    )
    apply.add_argument("result", metavar="RESULT", help="a result store written by dcfa fit")
    apply.add_argument(
        "archive",
        metavar="ARCHIVE",
        help="an archive with the result's variables on its grid (other months, or the "
        "training archive with months appended): a Zarr store, netCDF files (one or a glob), a "
        "kerchunk reference or an icechunk repository, as input.store takes",
    )
    apply.add_argument("--output", required=True, help="the store to write (path or URL)")
    apply.add_argument(
        "--overwrite", action="store_true", help="replace an earlier output of dcfa apply"
    )
    apply.add_argument(
        "--time",
        nargs=2,
        metavar=("START", "END"),
        help="only the samples from START to END (inclusive), e.g. 2020-01 2024-12",
    )
    apply.add_argument("--scheduler", help="address of a running Dask scheduler to attach to")
    apply.add_argument(
        "--connect-timeout",
        default="30s",
        metavar="DURATION",
        help="how long to wait for that scheduler to be up (default 30s; e.g. 10m)",
    )
    apply.add_argument(
        "--storage-options",
        metavar="JSON",
        help="for URLs: fsspec options as JSON (the result, the archive and the output)",
    )

    sub.add_parser(
        "example-job",
        parents=[common],
        help="print an example job file, every section commented: dcfa example-job > job.toml",
    )

    inspect = sub.add_parser(
        "inspect", parents=[common], help="describe an archive or a store dcfa wrote"
    )
    inspect.add_argument(
        "store",
        help="an archive (a Zarr store, netCDF files, one or a glob, a kerchunk reference, an "
        "icechunk repository), a dcfa result, a moments store or an output of dcfa apply "
        "(path or URL)",
    )
    inspect.add_argument(
        "--storage-options",
        metavar="JSON",
        help='for a URL: fsspec options as JSON, e.g. \'{"endpoint_url": "http://..."}\'',
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.version:
        from dcfa._version import __version__

        print(__version__)
        return EXIT_OK
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    log = logging.getLogger("dcfa")
    if not any(getattr(h, "_dcfa_cli", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("dcfa: %(message)s"))
        handler._dcfa_cli = True
        log.addHandler(handler)
    log.setLevel(logging.WARNING if args.quiet else logging.INFO)
    import dask

    with dask.config.set({"dcfa.progress": not args.quiet}), warnings.catch_warnings():
        warnings.showwarning = _WarningLines()
        return _run(args)


class _WarningLines:
    """``warnings.showwarning`` for a command: dcfa's own warnings as a line of its output
    (``dcfa: warning: ...``), each once, not Python's file and line of source; other
    libraries' keep Python's form. dcfa's warnings point at the first line outside dcfa
    (:func:`dcfa._errors.outside_stacklevel`), which in a command is where it started
    (runpy, or the ``dcfa`` script): a command has no user's line."""

    def __init__(self) -> None:
        self.said: set[str] = set()  # a check run for every fit would say it again

    def __call__(self, message, category, filename, lineno, file=None, line=None) -> None:
        if not (
            category.__module__.split(".")[0] == "dcfa"
            or in_dcfa(filename)
            or filename.startswith("<")
            or Path(filename).resolve() == Path(sys.argv[0]).resolve()
        ):
            sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
        elif str(message) not in self.said:
            self.said.add(str(message))
            logging.getLogger("dcfa").warning("warning: %s", message)


def _run(args) -> int:
    try:
        if args.command == "fit":
            from dcfa.batch.config import load_config

            overrides = args.overrides + (["output.overwrite=true"] if args.overwrite else [])
            config = load_config(args.config, overrides, output=args.output)
            from dcfa.batch.destination import destinations

            # before the job's imports (xarray, the estimators): a bad file or output path
            # is refused at once; run_job checks the outputs again, for callers in Python
            destinations(config, output=args.output, resume=args.resume)
            from dcfa.batch.job import run_job

            run_job(
                config,
                scheduler=args.scheduler,
                output=args.output,
                resume=args.resume,
                echo=_line,
            )
        elif args.command == "demo":
            from dcfa.batch.demo import run_demo

            run_demo(
                args.workdir,
                n_splits=args.splits,
                n_workers=args.workers,
                memory_limit=args.memory_limit,
            )
        elif args.command == "apply":
            _apply(args)
        elif args.command == "example-job":
            from importlib.resources import files

            sys.stdout.write(files("dcfa").joinpath("data/example-job.toml").read_text())
        elif args.command == "inspect":
            from dcfa.batch.inspect import describe

            print(describe(args.store, _storage_options(args)))
        sys.stdout.flush()  # a closed stdout is found here, not in the interpreter's exit
    except BrokenPipeError as exc:
        if not _stdout_closed():  # a pipe of something else: a fault, not bad input
            _fault(exc, args.traceback)
            return EXIT_FAILED
        # Python's recipe: stdout to devnull, so the exit's flush raises nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        if args.command == "fit":
            print(
                "dcfa: stdout was closed; stopped (finished passes are kept: rerun with "
                "--resume to continue)",
                file=sys.stderr,
            )
        return EXIT_STDOUT_CLOSED
    except KeyboardInterrupt as exc:
        _forget_unhandled_interrupt()
        # the client's tasks cut short are logged when collected: not the user's business
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        # a run stopped inside its passes says what it kept (dcfa.batch.job); before them,
        # nothing was written
        default = "before any pass: nothing was kept" if args.command == "fit" else "stopped"
        print(f"dcfa: interrupted; {str(exc) or default}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        if isinstance(exc, ImportError):  # an optional dependency (the demo's data, matplotlib)
            code = EXIT_FAILED
        elif _bad_input(exc):
            code = EXIT_BAD_INPUT
        else:  # a fault (a worker lost, a disk full) or a bug in dcfa: its type too
            _fault(exc, args.traceback)
            return EXIT_FAILED
        if args.traceback:
            _traceback(exc)
        _error(exc)
        return code
    return EXIT_OK


def _forget_unhandled_interrupt() -> None:
    """Keep ``python -m dcfa``'s exit code once a Ctrl-C has been handled.

    CPython records a KeyboardInterrupt that ends a string ``exec``/``eval`` (a dataclass or
    namedtuple being made by an import, a type hint evaluated) as unhandled even when a caller
    catches it, and under ``-m`` then exits by SIGINT whatever code ``main`` returns. Every
    string ``exec`` clears that record first: this one does only that.
    """
    exec("pass", {})


def _bad_input(exc: BaseException) -> bool:
    """Whether ``exc`` is one of dcfa's own bad-input errors (exit 2), not a fault or a bug.

    - :class:`dcfa.InputError`, what dcfa's input checks raise, naming the key, argument or
      path (``input.variables: ...``, ``ARCHIVE: ...``, ``--connect-timeout must ...``):
      :class:`~dcfa.batch.config.ConfigError`, :class:`~dcfa.batch.inputs.InputDataError`,
      :class:`dcfa.MemoryBudgetError`, :class:`~dcfa.storage.store.OutputError` (an output path
      dcfa refuses), an input path that is not there (``input.store: no Zarr store at ...``)
      and a scheduler it cannot reach (``--scheduler: cannot reach ...``) among them;
    - scikit-learn's ``InvalidParameterError``: a bad estimator parameter (a job wraps the
      parameters of its file in a ConfigError; this is for one found later, by ``fit``).

    Anything else is a fault or a bug in dcfa, never reported as a configuration mistake: a
    plain ``ValueError`` (of a bug, or of a library), ``TypeError``, ``KeyError``, a
    ``FileNotFoundError`` or ``ConnectionError`` of the operating system, ...
    """
    if isinstance(exc, InputError):
        return True
    # loaded with every estimator; an InvalidParameterError cannot be raised without it
    checks = sys.modules.get("dcfa._validation")
    return checks is not None and isinstance(exc, checks.InvalidParameterError)


def _line(text: str) -> None:
    """A line of a fit's log, written at once (a log file shows the job's progress as it
    goes, and a closed stdout stops the job at its next line)."""
    print(text, flush=True)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader is gone (poll reports POLLERR on its write end)."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll, or no stdout descriptor at all
        return True


def _storage_options(args) -> dict | None:
    if not args.storage_options:
        return None
    import json

    try:
        options = json.loads(args.storage_options)
    except ValueError as exc:
        raise InputError(f"--storage-options: not valid JSON ({exc})") from None
    if not isinstance(options, dict):
        raise InputError("--storage-options: expected a JSON object")
    return options


def _apply(args) -> None:
    import contextlib
    import os

    from dcfa.batch.config import check_duration
    from dcfa.batch.destination import CLI_NAMES, check_applied_output

    options = _storage_options(args)
    check_duration(args.connect_timeout, "--connect-timeout")
    # before apply's imports (xarray, scikit-learn): a bad path is refused at once;
    # apply_result checks them again, for callers in Python
    check_applied_output(
        args.result,
        args.archive,
        args.output,
        overwrite=args.overwrite,
        names=CLI_NAMES,
        storage_options=options,
    )
    from dcfa.batch.apply import apply_result

    address = args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        from dcfa.batch.cluster import open_client

        wait = {"connect_timeout": args.connect_timeout}
        attached = open_client(wait, address, _line, wait_key="--connect-timeout")
    else:  # Dask's local threads
        attached = contextlib.nullcontext()
    with attached:
        apply_result(
            args.result,
            args.archive,
            args.output,
            overwrite=args.overwrite,
            time=args.time,
            storage_options=options,
            _names=CLI_NAMES,
        )


def _error(exc, message: str | None = None) -> None:
    """``message`` (default: ``exc``) on one line, or a job file's several ``problems`` one
    per line; then each note added to ``exc`` (what a failed job kept) on a line of its own."""
    from dcfa._terminal import escape

    problems = getattr(exc, "problems", ()) if message is None else ()
    if problems:
        message = exc.header
    print(f"dcfa: error: {escape(str(exc) if message is None else message)}", file=sys.stderr)
    for problem in problems:
        print(f"dcfa:   - {escape(problem)}", file=sys.stderr)
    for note in getattr(exc, "__notes__", ()):
        print(f"dcfa: {escape(str(note))}", file=sys.stderr)


def _traceback(exc: BaseException) -> None:
    import traceback

    traceback.print_exception(exc, file=sys.stderr)


def _fault(exc: BaseException, traceback: bool = False) -> None:
    """A fault or a bug, not bad input: its type and message on one line, after the
    traceback with ``--traceback``, else with where the details are."""
    if traceback:
        _traceback(exc)
        _error(exc, f"{type(exc).__name__}: {exc}")
    else:
        _error(exc, f"{type(exc).__name__}: {exc} (rerun with --traceback for details)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

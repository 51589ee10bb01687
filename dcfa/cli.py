"""The ``dcfa`` command line. Argument parsing only; the work is in the library."""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dcfa",
        description="Supervised, interpretable dimensionality reduction on Dask.",
    )
    p.add_argument("--version", action="store_true", help="print the version and exit")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bars or logs")
    sub = p.add_subparsers(dest="command")
    demo = sub.add_parser(
        "demo", parents=[common], help="run the whole pipeline on an embedded example"
    )
    demo.add_argument("--workdir", help="where to write the stores (default: a new temp dir)")
    demo.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    demo.add_argument("--memory-limit", default="2GiB", help="per worker (default 2GiB)")
    demo.add_argument("--n-time", type=int, default=600, help="time steps (default 600)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.version:
        from dcfa import __version__

        print(__version__)
        return EXIT_OK
    if args.command is None:
        _parser().print_help()
        return EXIT_BAD_INPUT
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dcfa: %(message)s"))
    log = logging.getLogger("dcfa")
    log.addHandler(handler)
    log.setLevel(logging.WARNING if args.quiet else logging.INFO)
    import dask

    dask.config.set({"dcfa.progress": not args.quiet})
    try:
        if args.command == "demo":
            from dcfa._demo import run_demo

            run_demo(
                args.workdir,
                n_time=args.n_time,
                n_workers=args.workers,
                memory_limit=args.memory_limit,
            )
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as exc:
        print(f"dcfa: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

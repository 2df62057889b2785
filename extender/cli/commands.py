"""`python -m extender …`: serve the extender, print the policy schema or CRD, check a policy."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..logs import setup_logging
from . import dev, in_cluster, inspection, native, planning, rotation, schemas, serve, workloads
from .common import env
from .errors import explained
from .exit_codes import ExitCode


def parser() -> argparse.ArgumentParser:
    """The CLI: the top-level options, then each command group from its own module (serve.py,
    in_cluster.py, ... planning.py), in the order `--help` lists them."""
    top = argparse.ArgumentParser(prog="python -m extender", description=__doc__)
    top.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        help="default: $EXTENDER_LOG_LEVEL or info for serve, dev and ab; warning for the operator commands "
        "(their -v: info, -vv: debug), which the variable, meant for the server, does not change",
    )
    top.add_argument(
        "--log-json", action="store_true", default=env("EXTENDER_LOG_JSON") == "1", help="structured JSON logs"
    )
    sub = top.add_subparsers(dest="command", required=True)
    # The operator commands print their answer and nothing else: warnings and errors still reach
    # stderr, the cache's progress lines (listed N nodes, ...) only with -v.
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)")

    # Each group registers its commands and their handlers; this order is the order `--help` lists.
    serve.register(sub)
    in_cluster.register(sub)
    schemas.register(sub)
    dev.register(sub)
    native.register(sub, quiet)
    inspection.register(sub, quiet)
    workloads.register(sub, quiet)
    rotation.register(sub, quiet)
    planning.register(sub, quiet)
    return top


def log_level(args: argparse.Namespace) -> str:
    """--log-level when given; else info for the long-running commands and warning for the
    operator commands, whose -v / -vv raise it to info / debug."""
    if args.log_level:
        return args.log_level
    verbose = getattr(args, "verbose", None)
    if verbose is None:
        return env("EXTENDER_LOG_LEVEL", "info") or "info"
    return ("warning", "info")[verbose] if verbose < 2 else "debug"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every expected failure is one line on stderr and its exit code
    (exit_codes.py), never a traceback."""
    args = parser().parse_args(argv)
    setup_logging(log_level(args), args.log_json)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        # `... | head`: the reader went away. Point stdout at /dev/null so the interpreter's own
        # flush at exit cannot raise again, and stop quietly, as a shell reports SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.CLOSED_PIPE
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as err:  # noqa: BLE001 - the expected ones are answered, the rest re-raised
        known = explained(err)
        if known is None:
            raise
        code, message = known
        print(f"{args.command}: {message}", file=sys.stderr)
        return code

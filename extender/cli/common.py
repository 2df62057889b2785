"""What several command groups share: environment defaults, the subcommand table's type, the
checked number types and the live cluster's cache (read by explain, audit and plan)."""

from __future__ import annotations

import argparse
import os


def env(name: str, default: str | None = None) -> str | None:
    """A flag's default from the environment, read when the parser is built (the deployment's way)."""
    return os.environ.get(name, default)


def positive_seconds(text: str) -> float:
    """A number of seconds an extender may spend: above 0, and no more than a minute."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(
            f"{text} s is outside (0, 60]; kube-scheduler gives an extender 5 s by default"
        )
    return value


def live_store(args: argparse.Namespace):  # noqa: ANN201 - state.store.ClusterStore
    """The cluster as the operator commands read it, from --kubeconfig and --context."""
    from ..ops.load import live_store as load

    return load(args.kubeconfig, args.context)


# The subcommand table argparse hands back from add_subparsers (its type is private to argparse).
Subcommands = argparse._SubParsersAction

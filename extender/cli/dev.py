"""dev up: the demo's local control plane with the extender."""

from __future__ import annotations

import argparse

from .common import Subcommands


def register(sub: Subcommands) -> None:
    """dev: the local control plane of the demo."""
    dev = sub.add_parser("dev", help="a local control plane with the extender (the demo)")
    dev_sub = dev.add_subparsers(dest="dev_command", required=True)
    up = dev_sub.add_parser("up", help="start it, apply a sample StatefulSet, print placements, wait for Ctrl-C")
    up.add_argument("--zones", type=int, default=3)
    up.add_argument("--nodes-per-zone", type=int, default=2)
    up.add_argument("--replicas", type=int, default=6)
    up.add_argument("--no-wait", action="store_true", help="tear down right after printing (smoke test)")
    up.set_defaults(func=_dev_up)


def _dev_up(args: argparse.Namespace) -> int:
    from ..devcluster.demo import run

    return run(zones=args.zones, nodes_per_zone=args.nodes_per_zone, replicas=args.replicas, wait=not args.no_wait)

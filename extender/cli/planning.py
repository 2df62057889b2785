"""plan and check: before changing anything, what growing a set or draining nodes takes, and
whether a policy file is valid."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from ..api.policy import KIND, PolicyError, parse_annotation, parse_spec
from .common import Subcommands, env, live_store
from .errors import UsageError
from .exit_codes import ExitCode


def register(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """Before changing anything: plan growth or drains, and check a policy file."""
    pl = sub.add_parser(
        "plan",
        parents=[quiet],
        help="what growing a StatefulSet or draining nodes takes under its policy; exit 1 when not feasible",
    )
    pl.add_argument(
        "target",
        nargs="+",
        help="statefulset/NAME --replicas N, placementpolicy/NAME --size N, or: drain node/NAME ... | drain --all",
    )
    pl.add_argument("--replicas", type=int, help="statefulset/NAME: the replicas to plan for")
    pl.add_argument("--size", type=int, help="placementpolicy/NAME: the group size to plan for")
    pl.add_argument("--all", action="store_true", help="drain: every node alone, safe ones first")
    pl.add_argument("-n", "--namespace", default="default")
    pl.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    pl.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=_plan)

    check = sub.add_parser(
        "check", parents=[quiet], help="validate a policy file (PlacementPolicy, bare spec, or '-' for stdin)"
    )
    check.add_argument("file")
    check.set_defaults(func=_check)


def _plan(args: argparse.Namespace) -> int:
    from ..ops.plan import as_json, drain_each, plan_drain, plan_group, plan_grow, render_drain, render_grow

    usage = "plan takes statefulset/NAME --replicas N, placementpolicy/NAME --size N, or drain node/NAME ... | --all"
    kind, _, name = args.target[0].partition("/")
    if args.target[0] == "drain":
        nodes = [t.removeprefix("node/").removeprefix("nodes/") for t in args.target[1:]]
        if bool(nodes) == bool(args.all):
            raise UsageError("plan drain takes node/NAME ... or --all (not both)")
        store = live_store(args)
        plans = drain_each(store) if args.all else [plan_drain(store, nodes)]
        print(json.dumps(as_json(plans), indent=2) if args.json else render_drain(plans))
        # The same meaning with --all: 1 when some drain planned is not safe.
        return ExitCode.OK if all(p.safe for p in plans) else ExitCode.FINDING
    if kind.lower() in ("placementpolicy", "placementpolicies", "pp") and name and args.size is not None:
        plan = plan_group(live_store(args), args.namespace, name, args.size)
    elif kind.lower() in ("statefulset", "statefulsets", "sts") and name and args.replicas is not None:
        plan = plan_grow(live_store(args), args.namespace, name, args.replicas)
    else:
        raise UsageError(usage)
    print(json.dumps(as_json(plan), indent=2) if args.json else render_grow(plan))
    return ExitCode.OK if plan.feasible else ExitCode.FINDING


def _check(args: argparse.Namespace) -> int:
    """Validate a PlacementPolicy object, a bare spec, or an annotation value from a file."""
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as err:
        print(f"check: cannot read {args.file}: {err}", file=sys.stderr)
        return ExitCode.COULD_NOT_RUN
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        print(f"{args.file}: not YAML or JSON: {err}", file=sys.stderr)
        return ExitCode.FINDING
    if not docs:
        docs = [{}]
    status = 0
    for doc in docs:
        try:
            if isinstance(doc, dict) and doc.get("kind") == KIND:
                name = (doc.get("metadata") or {}).get("name", "?")
                parse_spec(doc.get("spec") or {}, f"{KIND} {name}")
                print(f"{KIND} {name}: valid")
            elif isinstance(doc, str):
                parse_annotation(doc, args.file)
                print(f"{args.file}: valid")
            else:
                parse_spec(doc, args.file)
                print(f"{args.file}: valid")
        except PolicyError as err:
            print(str(err), file=sys.stderr)
            status = 1
    return status

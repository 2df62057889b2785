"""explain and audit: reading a live cluster, one pod's verdicts or every policy group's placement."""

from __future__ import annotations

import argparse
import json

from ..api.policy import SCHEDULER_NAME
from .common import Subcommands, env, live_store
from .errors import UsageError
from .exit_codes import ExitCode


def register(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """Reading a live cluster: explain one pod's verdicts, audit every policy group."""
    ex = sub.add_parser(
        "explain", parents=[quiet], help="for one pod, each node's verdict with the rule and its numbers (live cluster)"
    )
    ex.add_argument("pod", help="POD (with -n NAMESPACE), or NAMESPACE/POD")
    ex.add_argument("-n", "--namespace", help="the pod's namespace (default: default)")
    ex.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    ex.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    ex.add_argument("--json", action="store_true")
    ex.set_defaults(func=_explain)

    au = sub.add_parser(
        "audit",
        parents=[quiet],
        help="every policy group: placement table, broken hard rules, scale-down risks, nodes over allocatable, "
        "pending pods; exit 1 on a violation",
    )
    au.add_argument("-n", "--namespace", help="only this namespace")
    au.add_argument(
        "--scheduler-name",
        default=SCHEDULER_NAME,
        help="the schedulerName whose pods are held to their policies (default placement-scheduler, as adopt's); "
        "a workload whose pods another scheduler placed, e.g. after retire, is not audited",
    )
    au.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    au.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    au.add_argument("--json", action="store_true")
    au.set_defaults(func=_audit)


def _explain(args: argparse.Namespace) -> int:
    from ..ops.explain import explain, render

    pod = args.pod.removeprefix("pod/").removeprefix("pods/")
    if pod.count("/") > 1 or (pod.count("/") == 1 and args.namespace):
        raise UsageError(f"explain takes POD -n NAMESPACE, or NAMESPACE/POD; got {args.pod!r}")
    namespace, _, name = pod.rpartition("/")
    result = explain(live_store(args), namespace or args.namespace or "default", name)
    print(json.dumps(result.as_dict(), indent=2) if args.json else render(result))
    return ExitCode.OK


def _audit(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from ..ops.audit import (
        as_json,
        audit,
        gate_bound,
        overcommitted,
        records_without_statefulset,
        render,
        render_gate_bound,
        render_overcommit,
    )
    from ..ops.load import live_gate_admission

    store = live_store(args)
    reports = audit(store, args.namespace, args.scheduler_name)
    nodes = overcommitted(store)
    bound = gate_bound(store, args.namespace, live_gate_admission(args.kubeconfig, args.context))
    kept = records_without_statefulset(store, args.namespace)
    if args.json:
        extra = {
            "overcommitted_nodes": [asdict(n) for n in nodes],
            "in_scheduler_bound": asdict(bound),
            "records_without_statefulset": kept,
        }
        print(json.dumps({**as_json(reports), **extra}, indent=2))
    else:
        gap = render_gate_bound(bound)
        notes = "".join(f"\nnote: {k}" for k in kept)
        print(
            render(reports)
            + (("\n" + render_overcommit(nodes)) if nodes else "")
            + (("\n" + gap) if gap else "")
            + notes
        )
    return ExitCode.FINDING if nodes or any(r.violations or r.error for r in reports) else ExitCode.OK

"""rotation export: a StatefulSet's ZoneRotation record to commit beside its manifests (GitOps)."""

from __future__ import annotations

import argparse
import sys

from ..api.policy import INLINE_POLICY_ANNOTATION, POLICY_REF_ANNOTATION, PlacementPolicySpec, parse_annotation
from .common import Subcommands, env
from .errors import UsageError
from .exit_codes import ExitCode
from .workloads import live_rotation, named_policy, policy_file, record_document, workload_path


def register(sub: Subcommands, quiet: argparse.ArgumentParser) -> None:
    """rotation export: a StatefulSet's ZoneRotation record, for the GitOps path."""
    ro = sub.add_parser("rotation", help="a StatefulSet's ZoneRotation record")
    ro_sub = ro.add_subparsers(dest="rotation_command", required=True)
    ex = ro_sub.add_parser(
        "export",
        parents=[quiet],
        help="print a StatefulSet's ZoneRotation as YAML to commit (read-only): the live record without its "
        "server fields and ownerReference, else the record adopting the running pods would write",
    )
    ex.add_argument("workload", help="statefulset/NAME")
    ex.add_argument("-n", "--namespace", default="default")
    ex.add_argument("--kubeconfig", default=env("KUBECONFIG"))
    ex.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    policy = ex.add_mutually_exclusive_group()
    policy.add_argument("--policy-name", help="the set's PlacementPolicy, when its template names none yet")
    policy.add_argument("--policy-file", help="the set's policy file, when its template has none yet")
    ex.set_defaults(func=_rotation_export)


def _rotation_export(args: argparse.Namespace) -> int:
    """rotation export: the set's ZoneRotation to commit; read-only. The live record (stripped of
    the server's fields and of the ownerReference earlier versions wrote), else the record
    adopting its running pods would write (ops/rollout.py)."""
    from ..kube.client import KubeApiError, connect
    from ..ops.manifests import dump, to_commit
    from ..ops.rollout import check_adoption
    from ..state.watcher import list_once

    kind, path = workload_path(args.workload, args.namespace)
    if kind != "StatefulSet":
        raise UsageError(f"{args.workload!r}: a ZoneRotation places a StatefulSet's ordinals: name statefulset/NAME")
    name = path.rsplit("/", 1)[1]
    api = connect(args.kubeconfig, args.context)
    live = live_rotation(api, args.namespace, name)
    if live is not None:
        if (live.get("metadata") or {}).get("ownerReferences"):
            print(
                f"rotation export: ZoneRotation {args.namespace}/{live['metadata']['name']} was written with an "
                "ownerReference (by an earlier version): the garbage collector deletes it with the StatefulSet. "
                "Remove it once:\n"
                f"  kubectl patch zonerotation {live['metadata']['name']} -n {args.namespace} --type=json "
                """-p '[{"op":"remove","path":"/metadata/ownerReferences"}]'""",
                file=sys.stderr,
            )
        sys.stdout.write(dump([to_commit(live)]))
        return ExitCode.OK
    try:
        workload = {"kind": kind, **api.call("GET", path)}
    except KubeApiError as err:
        if err.status == 404:
            raise UsageError(
                f"StatefulSet {args.namespace}/{name} is not in the cluster and has no ZoneRotation"
            ) from None
        raise
    spec = _template_policy(api, args, workload)
    if spec.ordinalZones is None:
        raise UsageError(f"the policy of StatefulSet {args.namespace}/{name} sets no ordinalZones: it has no rotation")
    rollout = check_adoption(list_once(api), args.namespace, name, spec)
    record = record_document(rollout)
    if record is None:
        raise UsageError(
            f"StatefulSet {args.namespace}/{name} runs no pod and has no ZoneRotation: its first pods decide "
            "the rotation; export it once they run"
        )
    for problem in rollout.problems:
        print(f"rotation export: note: {problem}", file=sys.stderr)
    sys.stdout.write(dump([to_commit(record)]))
    return ExitCode.OK


def _template_policy(api, args: argparse.Namespace, workload: dict) -> PlacementPolicySpec:  # noqa: ANN001
    """The policy given on the command line, else the one the workload's template names."""
    if getattr(args, "policy_file", None):
        return policy_file(args.policy_file)
    if getattr(args, "policy_name", None):
        return named_policy(api, args.namespace, args.policy_name)
    annotations = ((workload["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    if INLINE_POLICY_ANNOTATION in annotations:
        return parse_annotation(annotations[INLINE_POLICY_ANNOTATION], f"{workload['kind']} {args.namespace}")
    if POLICY_REF_ANNOTATION in annotations:
        return named_policy(api, args.namespace, annotations[POLICY_REF_ANNOTATION])
    raise UsageError("the workload's template names no policy: give --policy-name or --policy-file")

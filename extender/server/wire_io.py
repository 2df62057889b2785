"""Reading kube-scheduler's requests and writing the answers, for the verbs: a request the
extender cannot read is a BadRequest (a 400 naming the problem), and a filter is answered in the
form it was asked in (node names for names, whole Nodes for Nodes)."""

from __future__ import annotations

from collections.abc import Sequence

from ..api.wire import ExtenderArgs, ExtenderFilterResult, ExtenderPreemptionArgs
from ..engine import NodeInfo
from ..state.objects import ObjectError, PodIdentity, parse_node, pod_identity


class BadRequest(ValueError):
    """The request is malformed: answered with a 400 naming the problem."""


def named_pod(obj: object) -> PodIdentity:
    """The pod a request names (a 400 when it names none)."""
    try:
        return pod_identity(obj)
    except ObjectError as err:
        raise BadRequest(f"Pod: {err}") from None


def candidates_of(args: ExtenderArgs) -> Sequence[str] | Sequence[NodeInfo]:
    if args.NodeNames is not None:
        return args.NodeNames
    assert args.Nodes is not None
    try:
        return [parse_node(n) for n in args.Nodes.items]
    except ObjectError as err:
        raise BadRequest(f"Nodes.items: {err}") from None


def victims_of(args: ExtenderPreemptionArgs) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Node -> victim uids, and node -> PDB violations, from either form kube-scheduler sends."""
    victims: dict[str, list[str]] = {}
    pdb: dict[str, int] = {}
    if args.NodeNameToMetaVictims is not None:
        for node, meta in args.NodeNameToMetaVictims.items():
            victims[node] = [p.UID for p in meta.Pods or ()]
            pdb[node] = meta.NumPDBViolations
    elif args.NodeNameToVictims is not None:
        for node, full in args.NodeNameToVictims.items():
            victims[node] = [named_pod(p).uid for p in full.Pods or ()]
            pdb[node] = full.NumPDBViolations
    return victims, pdb


def filter_result(
    args: ExtenderArgs, passed: list[str], failed: dict[str, str], unresolvable: dict[str, str]
) -> ExtenderFilterResult:
    """Answer in the mode kube-scheduler asked in: names for names, full Nodes for Nodes."""
    if args.NodeNames is not None:  # built from validated parts: no need to validate 5,000 entries again
        return ExtenderFilterResult.model_construct(
            NodeNames=passed, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable, Nodes=None, Error=""
        )
    assert args.Nodes is not None
    keep = set(passed)
    items = [n for n in args.Nodes.items if (n.get("metadata") or {}).get("name") in keep]
    return ExtenderFilterResult(
        Nodes={"metadata": {}, "items": items}, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable
    )

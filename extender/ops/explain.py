"""`python -m extender explain NAMESPACE/POD`: why this pod can or cannot go to each node.

Built from the live cluster (one list of every kind, the same inputs the extender's cache
holds) and the same engine call as filter, so its verdicts are filter's verdicts; on top, a
failed node lists every hard rule it breaks, not just the first, and a group that breaks a hard
rule now (a pod placed by hand, a node lost) is said so, with audit's words for the breach.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..api.policy import PolicyError
from ..engine import broken_rules, evaluate, remedies, zone_of
from ..limits import DEFAULT_DECISION_DEADLINE
from ..state.store import ClusterStore
from .audit import group_report


@dataclass
class NodeExplanation:
    node: str
    zone: str | None
    result: str  # pass, fail, unresolvable
    rule: str
    reason: str
    score: int
    also: list[str] = field(default_factory=list)  # further hard rules it breaks


@dataclass
class Explanation:
    pod: str
    bound_to: str | None
    policy: str  # where it came from, or the validation error
    notes: list[str]
    nodes: list[NodeExplanation]
    group: str | None = None  # the group the pod counts in, as audit names it
    breaches: list[str] = field(default_factory=list)  # hard rules the group's placement breaks now
    remedies: list[str] = field(default_factory=list)  # what would free it, when no node takes it

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def explain(store: ClusterStore, namespace: str, name: str) -> Explanation:
    pod = store.pod_by_name(namespace, name)
    if pod is None:
        raise LookupError(f"pod {namespace}/{name} not found")
    source = (
        f"PlacementPolicy {namespace}/{pod.policy_ref}"
        if pod.policy_ref
        else "inline annotation"
        if pod.policy_annotation
        else "none"
    )
    try:
        spec = store.resolve_policy(pod)
    except PolicyError as err:
        return Explanation(pod.key, pod.node, f"invalid: {err}", [], [])
    names = sorted(store.topology.nodes)
    if spec is None:
        return Explanation(
            pod.key,
            pod.node,
            "none: the extender passes every node with a neutral score",
            [],
            [NodeExplanation(n, None, "pass", "", "", 0) for n in names],
        )
    request, snap = store.decision_inputs(pod, spec)
    decision = evaluate(spec, request, snap, names)
    out = []
    for n in names:
        v = decision.verdicts[n]
        node = store.topology.nodes[n]
        others = [f"{f.rule}: {f.reason}" for f in broken_rules(decision, node) if f.reason != v.reason]
        out.append(
            NodeExplanation(
                n, zone_of(decision, node), v.outcome.value, v.rule, v.reason, v.score, others if not v.passed else []
            )
        )
    notes = list(decision.notes)
    if pod.node:
        notes.insert(0, f"the pod is bound to {pod.node}; verdicts show where it could go if scheduled now")
    if pod.unschedulable:
        notes.append(f"kube-scheduler says: {pod.unschedulable}")
    fixes = []
    if not decision.passed():
        regroup = lambda other: store.decision_inputs(pod, other)[1]  # noqa: E731
        deadline = time.monotonic() + DEFAULT_DECISION_DEADLINE
        fixes = [r.text for r in remedies(spec, request, pod.labels, snap, names, regroup, deadline)]
    group = group_report(store, pod)
    if group is None:
        return Explanation(pod.key, pod.node, source, notes, out, remedies=fixes)
    return Explanation(pod.key, pod.node, source, notes + group.notes, out, group.group, list(group.violations), fixes)


def render(e: Explanation) -> str:
    lines = [f"pod {e.pod}   policy: {e.policy}"]
    if e.breaches:
        lines.append(f"  the pod's group, {e.group}, breaks a hard rule now ({len(e.breaches)}):")
        lines += [f"    {b}" for b in e.breaches]
    lines += [f"  {n}" for n in e.notes]
    lines += [f"  would be placed with: {r}" for r in e.remedies]
    if not e.nodes:
        return "\n".join(lines)
    width = max(len(n.node) for n in e.nodes)
    zone_width = max(len(n.zone or "-") for n in e.nodes)
    passed = sum(1 for n in e.nodes if n.result == "pass")
    lines.append(f"{passed}/{len(e.nodes)} nodes pass")
    lines.append(f"{'NODE':<{width}}  {'ZONE':<{zone_width}}  {'RESULT':<12}  {'SCORE':>5}  RULE: REASON")
    for n in sorted(e.nodes, key=lambda n: (n.result != "pass", -n.score, n.node)):
        detail = f"{n.rule}: {n.reason}" if n.rule else ""
        lines.append(
            f"{n.node:<{width}}  {(n.zone or '-'):<{zone_width}}  {n.result:<12}  "
            f"{n.score if n.result == 'pass' else '':>5}  {detail}"
        )
        lines += [f"{'':<{width + zone_width + 28}}also {a}" for a in n.also]
    return "\n".join(lines)

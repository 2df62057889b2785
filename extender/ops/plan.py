"""`python -m extender plan`: what it takes to grow a StatefulSet, or to drain nodes, under its policy.

    plan statefulset/crdb --replicas 12 -n db   can it grow to 12 on today's nodes? if not, the
                                                 fewest nodes to add, per zone (copies of a node
                                                 of that zone), and each new pod's zone when the
                                                 policy pins it (ordinal zones)
    plan drain node/a1 node/a2                  can every group with pods there be placed again
                                                 on the other nodes?
    plan drain --all                            each node alone: "safe to remove" first

The answers come from the engine's dead-end analysis (engine/plan.py) over the extender's own view
of the cluster (ops/load.py), with its certainty: exact, or a relaxation (a "no" is proven, a
"yes" is not). Exit 0 when the plan is feasible as it stands, 1 when it is not.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..api.policy import PlacementPolicySpec, PolicyError
from ..engine import (
    Certainty,
    Fit,
    NodeInfo,
    Placement,
    PodRequest,
    Snapshot,
    evaluate,
    group_fits,
    nodes_to_add,
    ordinal_pod_zones,
    ordinal_pods_to_try,
    without_nodes,
)
from ..state.groups import group_key
from ..state.objects import STS_POD_NAME_LABEL, PodRecord
from ..state.store import ClusterStore


@dataclass
class GrowPlan:
    namespace: str
    statefulset: str
    replicas_now: int
    replicas: int
    feasible: bool
    certainty: str
    why: str = ""
    add: dict[str, int] = field(default_factory=dict)  # zone (or domain) -> nodes to add
    shapes: dict[str, str] = field(default_factory=dict)  # zone -> the node each new one copies
    pinned: dict[int, str] = field(default_factory=dict)  # new ordinal -> its zone (ordinal zones)


@dataclass
class DrainGroup:
    group: str
    displaced: list[str]
    feasible: bool
    certainty: str
    why: str = ""


@dataclass
class DrainPlan:
    nodes: list[str]
    groups: list[DrainGroup] = field(default_factory=list)

    @property
    def safe(self) -> bool:
        return all(g.feasible for g in self.groups)  # _fill: feasible only when proven or relaxed-yes


def _usable(
    store: ClusterStore, pod: PodRecord, spec: PlacementPolicySpec, drained: set[str] = frozenset()
) -> list[str]:  # type: ignore[assignment]
    constraints = pod.constraints
    return [
        n.name
        for n in store.topology.nodes.values()
        if n.schedulable
        and n.name not in drained
        and constraints.matches_affinity(n)
        and constraints.tolerates_taints(n)
    ]


def _representative(store: ClusterStore, namespace: str, name: str) -> PodRecord:
    """A pod of the StatefulSet (its policy and node constraints), or one made from its template."""
    sts = store.statefulsets.get((namespace, name))
    if sts is None:
        raise LookupError(f"StatefulSet {namespace}/{name} not found")
    for uid in store._by_shard.get((namespace, name), ()):  # noqa: SLF001 - the store's own index
        return store.pods[uid]
    return PodRecord(
        uid=f"plan/{namespace}/{name}",
        namespace=namespace,
        name=f"{name}-0",
        labels={**sts.template_labels, STS_POD_NAME_LABEL: f"{name}-0"},
        node=None,
        shard=name,
        ordinal=0,
        terminating=False,
        finished=False,
        scheduler_name="",
        claims=(),
        policy_annotation=sts.policy_annotation,
        policy_ref=sts.policy_ref,
    )


def _zone_shapes(store: ClusterStore, spec: PlacementPolicySpec, usable: list[str]) -> list[NodeInfo]:
    """One node per zone among the usable ones (the first by name): the shape a new node copies."""
    by_zone: dict[str, NodeInfo] = {}
    for name in sorted(usable):
        node = store.topology.nodes[name]
        zone = node.labels.get(spec.topology.zone)
        if zone is not None:
            by_zone.setdefault(zone, node)
    return [by_zone[z] for z in sorted(by_zone)]


def plan_grow(store: ClusterStore, namespace: str, name: str, replicas: int) -> GrowPlan:
    pod = _representative(store, namespace, name)
    spec = store.resolve_policy(pod)
    if spec is None:
        raise LookupError(f"StatefulSet {namespace}/{name} has no placement policy")
    sts = store.statefulsets[(namespace, name)]
    request, snap = store.decision_inputs(pod, spec, tentative=False, counted=False)
    present = {p.ordinal for p in snap.placements if p.shard == name}
    if pod.node is not None:
        present.add(pod.ordinal)
    missing = [o for o in range(replicas) if o not in present]
    plan = GrowPlan(namespace, name, sts.replicas, replicas, True, "exact")
    if not missing:
        return plan
    placements = tuple(
        p for p in snap.placements if not (p.shard == name and p.ordinal is not None and p.ordinal >= replicas)
    )
    if pod.node is not None and pod.ordinal is not None and pod.ordinal < replicas:  # the representative is placed
        placements += (_placement_of(store, pod),)
    size = spec.group.size or ((snap.group_size or 0) + replicas - sts.replicas)
    snap = replace(snap, placements=placements, group_size=size, shard_replicas={**snap.shard_replicas, name: replicas})
    request = replace(request, key=f"{namespace}/{name}-{missing[0]}", ordinal=missing[0], volume_zones=frozenset())
    firsts = _firsts(spec, request, missing)
    usable = _usable(store, pod, spec)
    fit = group_fits(spec, firsts, snap, usable)
    _fill(plan, fit)
    _explain_refusal(plan, spec, firsts, snap, usable, len(missing))
    if spec.ordinalZones is not None:
        for ordinal in missing:
            zones, _ = ordinal_pod_zones(spec, replace(request, ordinal=ordinal), snap)
            if zones:
                plan.pinned[ordinal] = ",".join(sorted(zones))
    if not fit.feasible:
        shapes = _zone_shapes(store, spec, usable)
        found = nodes_to_add(spec, firsts, snap, usable, shapes, most=max(1, len(missing)))
        if found is not None:
            added, with_them = found
            _note_relaxed(plan, with_them)
            for node in added:
                zone = node.labels.get(spec.topology.zone, "?")
                plan.add[zone] = plan.add.get(zone, 0) + 1
                plan.shapes[zone] = node.name.removeprefix("new-").rsplit("-", 1)[0]
    return plan


def _firsts(spec: PlacementPolicySpec, request: PodRequest, missing: list[int]) -> list[PodRequest]:
    """The new pods that may come first, one per kind the rules tell apart: every missing ordinal
    under ordinal zones (the first few), else the lowest one."""
    return ordinal_pods_to_try(request, missing) if spec.ordinalZones is not None else [request]


def plan_group(store: ClusterStore, namespace: str, policy: str, size: int) -> GrowPlan:
    """A PlacementPolicy's group grown to `size` pods (new pods beyond its StatefulSets' replicas
    fill the short ones first, as the dead-end analysis assumes; the rest belong to none)."""
    members = [
        p
        for p in sorted(store.pods.values(), key=lambda p: p.key)
        if p.namespace == namespace and p.policy_ref == policy
    ]
    if not members:
        raise LookupError(f"no pod in {namespace} names PlacementPolicy {policy}")
    pod = members[0]
    spec = store.resolve_policy(pod)
    assert spec is not None
    request, snap = store.decision_inputs(pod, spec, tentative=False, counted=False)
    placements = snap.placements + ((_placement_of(store, pod),) if pod.node is not None else ())
    snap = replace(snap, placements=placements, group_size=size)
    now = len(placements)
    plan = GrowPlan(namespace, f"PlacementPolicy {policy}", now, size, True, "exact")
    if size <= now:
        return plan
    firsts = [replace(request, key=f"{namespace}/new-pod", shard=None, ordinal=None, volume_zones=frozenset())]
    usable = _usable(store, pod, spec)
    fit = group_fits(spec, firsts, snap, usable)
    _fill(plan, fit)
    _explain_refusal(plan, spec, firsts, snap, usable, size - now)
    if not fit.feasible:
        found = nodes_to_add(spec, firsts, snap, usable, _zone_shapes(store, spec, usable), most=size - now)
        if found is not None:
            _note_relaxed(plan, found[1])
            for node in found[0]:
                zone = node.labels.get(spec.topology.zone, "?")
                plan.add[zone] = plan.add.get(zone, 0) + 1
                plan.shapes[zone] = node.name.removeprefix("new-").rsplit("-", 1)[0]
    return plan


def _explain_refusal(
    plan: GrowPlan, spec: PlacementPolicySpec, firsts: list[PodRequest], snap: Snapshot, usable: list[str], count: int
) -> None:
    """A plan that is not feasible always says why: the analysis's own reason when it gave one,
    else what refuses the first new pod on today's nodes (the filter's one-line summary), else
    that each new pod fits alone but not all `count` together."""
    if plan.feasible or plan.why:
        return
    decision = evaluate(spec, firsts[0], snap, usable, dead_end_avoidance=False)
    if not decision.passed():
        plan.why = decision.rejection_summary().replace("this pod", f"the first new pod ({firsts[0].key})")
    else:
        plan.why = (
            f"the first new pod fits, but the rules leave no place for all {count} new pods together "
            "(caps, spread or zones fill up before the last one)"
        )


def _placement_of(store: ClusterStore, pod: PodRecord) -> Placement:
    return Placement(pod.key, pod.node, pod.shard, pod.ordinal)


def _note_relaxed(plan: GrowPlan, fit: Fit) -> None:
    if fit.certainty is not Certainty.EXACT:
        plan.why = (plan.why + "; " if plan.why else "") + "the nodes to add are a relaxed answer, not proven"


def _fill(plan: GrowPlan | DrainGroup, fit: Fit) -> None:
    """The fit into the plan. When the analysis cannot tell (rules it does not model, or its
    deadline), the plan is not called feasible: an operator should not drain on a guess."""
    decided = fit.certainty in (Certainty.EXACT, Certainty.RELAXED)
    plan.feasible = fit.feasible and decided
    plan.certainty = str(fit.certainty)
    plan.why = fit.why if decided or fit.why else "the analysis cannot tell"
    if isinstance(plan, DrainGroup) and not plan.feasible and not plan.why:
        plan.why = "the rules leave some displaced pod no node on the rest of the cluster"


def plan_drain(store: ClusterStore, nodes: list[str]) -> DrainPlan:
    """For every group with pods on `nodes`: can they all be placed again on the rest?"""
    drained = set(nodes)
    unknown = drained - set(store.topology.nodes)
    if unknown:
        raise LookupError(f"no such node: {', '.join(sorted(unknown))}")
    plan = DrainPlan(sorted(drained))
    groups: dict[Any, list[PodRecord]] = defaultdict(list)
    specs: dict[Any, PlacementPolicySpec] = {}
    for pod in sorted(store.pods.values(), key=lambda p: p.key):
        if pod.node not in drained or pod.finished:
            continue
        try:
            spec = store.resolve_policy(pod)
        except PolicyError:
            continue
        if spec is None:
            continue
        key = group_key(pod, spec) or (pod.namespace, "pod", pod.name, ())
        groups[key].append(pod)
        specs[key] = spec
    for key, displaced in groups.items():
        spec = specs[key]
        first = displaced[0]
        request, snap = store.decision_inputs(first, spec, tentative=False, counted=False)
        if snap.group_size is None:  # a selector group of no StatefulSet: the displaced pods are to come
            snap = replace(snap, group_size=len(snap.placements) + 1)
        snap = without_nodes(snap, drained)
        firsts = [request]
        for other in displaced[1:12]:
            other_request, _ = store.decision_inputs(other, spec, tentative=False, counted=False)
            firsts.append(other_request)
        fit = group_fits(spec, firsts, snap, _usable(store, first, spec, drained))
        name = (
            f"{first.namespace}/{first.shard}"
            if first.shard and spec.group.selector is None
            else f"{first.namespace} {key[2]}"
        )
        group = DrainGroup(name, [p.key for p in displaced], True, "exact")
        _fill(group, fit)
        plan.groups.append(group)
    return plan


def drain_each(store: ClusterStore) -> list[DrainPlan]:
    """Each node alone, safe ones first (crl's practice: remove only nodes whose pods can return)."""
    plans = [plan_drain(store, [name]) for name in sorted(store.topology.nodes)]
    return sorted(plans, key=lambda p: (not p.safe, p.nodes))


# -- output ------------------------------------------------------------------------------------------
def render_grow(plan: GrowPlan) -> str:
    what = plan.statefulset if plan.statefulset.startswith("PlacementPolicy") else f"StatefulSet {plan.statefulset}"
    head = f"{what} in {plan.namespace}: {plan.replicas_now} -> {plan.replicas} pods"
    lines = [head]
    if plan.certainty in ("unknown", "deadline"):
        lines.append(f"  cannot tell ({plan.certainty}): {plan.why}")
    elif plan.feasible:
        lines.append(f"  feasible on today's nodes ({plan.certainty})")
    else:
        lines.append(f"  NOT feasible on today's nodes ({plan.certainty}){': ' + plan.why if plan.why else ''}")
        if plan.add:
            adds = ", ".join(f"{n} in {zone} (like {plan.shapes[zone]})" for zone, n in sorted(plan.add.items()))
            lines.append(f"  add {sum(plan.add.values())} node(s): {adds}; then scale")
        else:
            lines.append("  no number of nodes like today's makes it feasible: the policy itself refuses it")
    for ordinal, zone in sorted(plan.pinned.items()):
        lines.append(f"  {plan.statefulset}-{ordinal} -> zone {zone}")
    return "\n".join(lines)


def render_drain(plans: list[DrainPlan]) -> str:
    lines = []
    for plan in plans:
        verdict = "safe to remove" if plan.safe else "UNSAFE"
        lines.append(f"{', '.join(plan.nodes)}: {verdict}")
        for g in plan.groups:
            state = "placeable again" if g.feasible else "NOT placeable again"
            lines.append(
                f"  {g.group}: {len(g.displaced)} pod(s) {state} ({g.certainty}){': ' + g.why if g.why else ''}"
            )
    return "\n".join(lines)


def as_json(value: Any) -> Any:
    if isinstance(value, list):
        return [as_json(v) for v in value]
    out = asdict(value)
    if isinstance(value, DrainPlan):
        out["safe"] = value.safe
    return out


__all__ = ["DrainPlan", "GrowPlan", "Snapshot", "PodRequest", "drain_each", "plan_drain", "plan_grow"]

"""Adopting a running StatefulSet: will the rolling update `adopt` starts complete?

`adopt` changes the pod template, so the StatefulSet controller recreates every pod, highest
ordinal first, one at a time: the old pod goes, the new one is placed (by the extender) before
the next goes. Under ordinal zones a set the default scheduler placed usually follows no
rotation, and with as many nodes as replicas under a per-node cap each recreated pod has exactly
one free node, the one it left. Before this, the filter accepted only the ordinal's rotation
zone, so such a rollout stopped at its second pod for good (2 of 4 adoptions).

What "nothing running moves" means, then: the zone order is decided at adoption from every
running pod (not at the first recreated pod's filter, when that pod is already gone), and the
ordinals running outside it are recorded as `adopted` in the set's ZoneRotation. An adopted
ordinal may return to its adopted zone whenever it is recreated (the rule, the gate, explain and
audit all read the record alike), so the rollout puts each pod back in the zone it ran in.

`check_adoption` decides that record and then plays the rollout on the engine, step by step, on
the cluster as listed: every step must find a node for its pod (its old node when the rules
still pass it, else the best the rules score). If a step finds none, adopt refuses before
writing anything and says what refuses the pod and what would free it (plan's vocabulary).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..api.policy import PlacementPolicySpec
from ..engine import (
    Decision,
    Placement,
    PodRequest,
    RecordedRotation,
    Snapshot,
    Topology,
    evaluate,
    remedies,
    zone_order,
)
from ..state.objects import PodRecord, RotationRecord
from ..state.store import ClusterStore


@dataclass
class RolloutCheck:
    """What adopting the set takes: the record to write (None: none needed or possible), each
    pod's step in the rollout, and why it would stall (empty: it completes)."""

    record: RotationRecord | None = None
    record_exists: bool = False
    adopted: dict[int, str] = field(default_factory=dict)  # ordinals outside the rotation, kept where they run
    steps: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def completes(self) -> bool:
        return not self.problems


def check_adoption(store: ClusterStore, namespace: str, name: str, spec: PlacementPolicySpec) -> RolloutCheck:
    """The adoption of StatefulSet namespace/name under `spec`, checked on the listed cluster."""
    sts = store.statefulsets.get((namespace, name))
    if sts is None:
        return RolloutCheck(problems=[f"StatefulSet {namespace}/{name} is not in the cluster"])
    running = sorted(
        (p for p in store.pods.values() if p.namespace == namespace and p.shard == name and p.ordinal is not None),
        key=lambda p: p.ordinal or 0,
    )
    running = [p for p in running if p.node is not None and not p.terminating and not p.finished]
    if not running:
        return RolloutCheck(steps=["no pod running: nothing to recreate"])
    request, snap = store.decision_inputs(running[-1], spec, counted=False)
    everyone = (*snap.placements, _placement(running[-1]))
    check = RolloutCheck()
    rotations = dict(snap.zone_rotations)
    if spec.ordinalZones is not None:
        whole = replace(snap, placements=everyone)
        if not store.rotations_enabled:
            order = zone_order(evaluate(spec, PodRequest(f"{name}/(zone order)", name, 0), whole, []))
            outliers = {**_outliers(spec, whole, name), **(order.adopted if order is not None else {})}
            if outliers:
                check.problems.append(
                    f"{len(outliers)} running pod(s) follow no rotation and the ZoneRotation CRD is not installed, so "
                    "the zones they run in cannot be recorded and their rollout would stall: install "
                    "deploy/base/crd-zonerotation.yaml (or give ordinalZones.order that they follow)"
                )
                return check
        else:
            check.record, rotations[name] = _record(store, spec, sts.name, namespace, whole)
            check.record_exists = (namespace, name) in store.rotations
            check.adopted = {**rotations[name].adopted}
    _play(store, spec, running, replace(snap, placements=everyone, zone_rotations=rotations), check)
    return check


def _placement(pod: PodRecord) -> Placement:
    return Placement(pod.key, pod.node, pod.shard, pod.ordinal)


def _outliers(spec: PlacementPolicySpec, snap: Snapshot, name: str) -> dict[int, str]:
    """Ordinals running outside the order the engine reads for the set now (not excused by a
    volume or an earlier adoption)."""
    order = zone_order(evaluate(spec, PodRequest(f"{name}/(zone order)", name, 0), snap, []))
    if order is None or not order.order:
        return {}
    nodes = snap.topology.nodes
    volumes = snap.volume_zones.get(name, {})
    out = {}
    for p in snap.placements:
        if p.shard != name or p.ordinal is None or p.node not in nodes:
            continue
        zone = Topology.domain(nodes[p.node], spec.topology.zone, spec.topology.zone, spec.topology.node)
        if zone is not None and zone not in (order.zone_for(p.ordinal), volumes.get(p.ordinal)):
            if order.adopted.get(p.ordinal) != zone:
                out[p.ordinal] = zone
    return out


def _record(
    store: ClusterStore, spec: PlacementPolicySpec, sts: str, namespace: str, snap: Snapshot
) -> tuple[RotationRecord | None, RecordedRotation]:
    """The set's ZoneRotation as adopt leaves it: the existing one with today's outliers added to
    `adopted`, or a new one decided now from every running pod (as the extender's first decision
    would, had it seen them all)."""
    order = zone_order(evaluate(spec, PodRequest(f"{sts}/(zone order)", sts, 0), snap, []))
    existing = store.rotation(namespace, sts)
    outliers = _outliers(spec, snap, sts)
    if existing is not None:
        adopted = {**outliers, **existing.adopted}
        if adopted == existing.adopted:
            return None, RecordedRotation(f"{namespace}/{existing.name}", existing.order, existing.adopted)
        merged = RotationRecord(namespace, existing.name, sts, existing.order, adopted)
        return merged, RecordedRotation(f"{namespace}/{sts}", merged.order, adopted)
    if order is None or not order.order:
        return None, RecordedRotation(f"{namespace}/{sts}", (), {})
    adopted = {**order.adopted, **outliers}
    record = RotationRecord(namespace, sts, sts, tuple(order.order), adopted)
    return record, RecordedRotation(f"{namespace}/{sts}", record.order, adopted)


def _play(store: ClusterStore, spec: PlacementPolicySpec, running: list[PodRecord], snap: Snapshot, check) -> None:  # noqa: ANN001
    """The StatefulSet controller's rolling update, highest ordinal first, on the engine."""
    placements = list(snap.placements)
    candidates = sorted(n for n, node in snap.topology.nodes.items() if node.schedulable)
    for pod in reversed(running):
        others = [p for p in placements if p.pod != pod.key]
        step = replace(snap, placements=tuple(others))
        request = _request(store, pod, spec)
        decision = evaluate(spec, request, step, candidates, dead_end_avoidance=False)
        target = _target(decision, pod.node)
        if target is None:
            why = _why(decision)
            found = remedies(spec, request, pod.labels, step, candidates)
            fix = "; or ".join(r.text for r in found) if found else "no single change frees it"
            check.problems.append(
                f"{pod.name} (recreated by the rollout) would wait: {why}. It would be placed with {fix}"
            )
            return
        where = "its own node" if target == pod.node else f"{target} (its node {pod.node} no longer passes)"
        check.steps.append(f"{pod.name} -> {where}")
        placements = [*others, Placement(pod.key, target, pod.shard, pod.ordinal)]


def _request(store: ClusterStore, pod: PodRecord, spec: PlacementPolicySpec) -> PodRequest:
    request, _ = store.decision_inputs(pod, spec, counted=False)
    return request


def _target(decision: Decision, old: str | None) -> str | None:
    passed = set(decision.passed())
    if old in passed:
        return old
    scored = sorted((-score, name) for names, score in decision.scores() for name in names if name in passed)
    return scored[0][1] if scored else None


def _why(decision: Decision) -> str:
    reasons = {c.reason for c in decision.classes if not c.passed and c.names}
    return "; ".join(sorted(reasons)[:3]) or "no schedulable node"

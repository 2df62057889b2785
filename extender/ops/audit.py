"""`python -m extender audit`: is every group still within its policy?

For every group of pods with a placement policy: where its pods are (zones x nodes), the hard
rules the current placement breaks (drift after a scale-down, a node loss, a pod placed by
hand), the zones the next scale-down of each StatefulSet would empty, and the pods Pending
with kube-scheduler's reason. Exit code 1 when any hard rule is broken, so it can run as a
CronJob alarm (deploy/optional/audit/).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from ..api.policy import (
    OPT_IN_RESOURCE,
    PLACEABLE_GATE,
    SCHEDULER_NAME,
    PlacementPolicySpec,
    PolicyError,
    parse_annotation,
)
from ..engine import Topology
from ..engine.checker import Member, violations, zones_of
from ..engine.implied import pod_disagreements
from ..state.objects import PodRecord, StatefulSetRecord
from ..state.store import ClusterStore, check_can_act
from .table import zone_table


@dataclass
class GroupReport:
    namespace: str
    group: str  # how the group is named: the policy and its selector or StatefulSet
    policy: str
    size: int | None
    placed: dict[str, str]  # pod -> node
    zones: dict[str, str]  # node -> zone, for the nodes holding the group
    violations: list[str] = field(default_factory=list)
    next_scale_down_empties: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # pod -> why
    error: str | None = None
    notes: list[str] = field(default_factory=list)  # how pods without an owner were counted
    # what the next scale-down of a ReplicaSet would break (the pod it would remove, or every pod
    # whose removal breaks a rule when no pod-deletion-cost says which goes first)
    next_scale_down_breaks: list[str] = field(default_factory=list)
    # pod -> its hard native constraints its policy does not imply (autoscalers act on those)
    native_disagreements: dict[str, list[str]] = field(default_factory=dict)


def _group_key(pod: PodRecord, spec: PlacementPolicySpec) -> tuple[str, str, str]:
    """How the group `pod` counts in is named. With group.matchLabelKeys the group is split by
    the pod's values for those keys (one revision's pods, as the engine counts them: see
    ClusterStore._group_uids), so each revision is its own group, named with its values."""
    policy = f"PlacementPolicy {pod.policy_ref}" if pod.policy_ref else "inline policy"
    if spec.group.selector is not None:
        selector = ",".join(f"{k}={v}" for k, v in sorted(spec.group.selector.matchLabels.items())) or "selector"
        name = f"pods matching {selector}"
    else:
        name = f"StatefulSet {pod.shard}" if pod.shard else f"pod {pod.name}"
    split = spec.group.split_labels(pod.labels)
    if split and (spec.group.selector is not None or pod.shard):
        name += " (" + ", ".join(f"{k}={v}" for k, v in split.items()) + ")"
    return pod.namespace, name, policy


GroupKey = tuple[str, str, str]  # namespace, how the group is named, where its policy comes from


# The kube-scheduler whose pods are held to their policies: the one `adopt` names by default.
# Pods of another scheduler (the default one after `retire`, or before an adoption's rollout
# reached them) keep their place in a group's counts but are not judged by its per-pod rules, and
# a group none of whose pods is this scheduler's is not audited: `retire` leaves nothing behind.
def is_ours(pod: PodRecord, scheduler_name: str) -> bool:
    """Placed through the extender: by its own kube-scheduler, or (in-scheduler mode) by the
    cluster's one, which sends the extender only the pods requesting the opt-in resource."""
    return pod.placed_by((scheduler_name,))


def audit(store: ClusterStore, namespace: str | None = None, scheduler_name: str = SCHEDULER_NAME) -> list[GroupReport]:
    return [
        entry if isinstance(entry, GroupReport) else _report(store, *entry, scheduler_name=scheduler_name)
        for entry in _groups(store, namespace, scheduler_name).values()
    ]


def group_report(store: ClusterStore, pod: PodRecord) -> GroupReport | None:
    """The audit of the group `pod` counts in (None without a valid policy): what `explain`
    states about the group. Walks the pod's namespace, to find pods placed without an owner."""
    try:
        spec, counted = _policy_for(store, pod)
    except PolicyError:
        return None
    if spec is None:
        return None
    entry = _groups(store, pod.namespace, pod.scheduler_name).get(_group_key(counted, spec))
    return (
        None
        if entry is None or isinstance(entry, GroupReport)
        else _report(store, *entry, scheduler_name=pod.scheduler_name)
    )


def _groups(
    store: ClusterStore, namespace: str | None, scheduler_name: str = SCHEDULER_NAME
) -> dict[GroupKey, GroupReport | tuple[PodRecord, PlacementPolicySpec, GroupKey, list[PodRecord]]]:
    """Every group with a policy and at least one pod of `scheduler_name`, in pod order: (a pod
    of it, its policy, its key, the pods counted in it that no StatefulSet owns), or the report of
    a pod of that scheduler whose policy is invalid. A group whose pods another scheduler placed
    (all of them: a retired workload, whose annotation stays) is not audited."""
    groups: dict[GroupKey, Any] = {}
    ours: set[GroupKey] = set()
    for pod in sorted(store.pods.values(), key=lambda p: p.key):
        if namespace is not None and pod.namespace != namespace:
            continue
        if pod.policy_ref is None and pod.policy_annotation is None:
            continue
        mine = is_ours(pod, scheduler_name)
        try:
            spec, counted = _policy_for(store, pod)
        except PolicyError as err:
            if not mine:
                continue  # its scheduler never reads the policy
            key = (pod.namespace, _invalid_source(pod), "invalid policy")  # once per policy, not per pod
            groups.setdefault(key, GroupReport(pod.namespace, key[1], key[2], None, {}, {}, error=str(err)))
            ours.add(key)
            if not pod.node:
                groups[key].pending[pod.key] = str(err)
            continue
        if spec is None:
            continue
        key = _group_key(counted, spec)
        entry = groups.setdefault(key, (counted, spec, key, []))
        if mine:
            ours.add(key)
        if counted is not pod:
            entry[3].append(counted)
    return {key: entry for key, entry in groups.items() if key in ours}


def _invalid_source(pod: PodRecord) -> str:
    """Where an invalid policy comes from, so audit lists it once: the PlacementPolicy it names,
    else the workload whose template carries it inline, else the pod."""
    if pod.policy_ref is not None:
        return f"PlacementPolicy {pod.policy_ref}"
    if pod.shard is not None:
        return f"StatefulSet {pod.shard}"
    if pod.replicaset is not None:
        return f"ReplicaSet {pod.replicaset}"
    return f"pod {pod.name}"


def _policy_for(store: ClusterStore, pod: PodRecord) -> tuple[PlacementPolicySpec | None, PodRecord]:
    """The pod's policy and the pod as its group counts it; PolicyError when the policy is
    invalid, or cannot act on the pod even counted so (ClusterStore.resolve_policy)."""
    spec = store.policy_as_written(pod)
    if spec is None:
        return None, pod
    counted = counted_as(store, pod, spec)
    check_can_act(counted, spec)
    return spec, counted


def counted_as(store: ClusterStore, pod: PodRecord, spec: PlacementPolicySpec) -> PodRecord:
    """The pod as its group counts it. A default group (no group.selector) is the pods of one
    StatefulSet, known by the pod's owner reference; a pod created by hand, e.g. placed with
    spec.nodeName next to its StatefulSet's pods, has none (the StatefulSet controller even
    releases a pod whose name is not one of its ordinals). It still belongs to the StatefulSet
    whose pod template it copies: the template's labels (non-empty, all of them) and the same
    policy. Counted there, without an ordinal; with several such StatefulSets, the one whose
    template has the most labels (then by name). Otherwise the pod is its own group, as before.
    """
    if spec.group.selector is not None or pod.shard is not None:
        return pod
    owners = [s for s in store.statefulsets.values() if s.namespace == pod.namespace and _copies(pod, s, spec)]
    if not owners:
        return pod
    owner = min(owners, key=lambda s: (-len(s.template_labels), s.name))
    return replace(pod, shard=owner.name, ordinal=None)


def _copies(pod: PodRecord, sts: StatefulSetRecord, spec: PlacementPolicySpec) -> bool:
    labels = sts.template_labels
    if not labels or any(pod.labels.get(k) != v for k, v in labels.items()):
        return False
    if pod.policy_ref is not None:
        return sts.policy_ref == pod.policy_ref
    if sts.policy_ref is not None or sts.policy_annotation is None:
        return False
    if sts.policy_annotation == pod.policy_annotation:
        return True
    try:
        return parse_annotation(sts.policy_annotation, "template") == spec
    except PolicyError:
        return False


def _report(
    store: ClusterStore,
    pod: PodRecord,
    spec: PlacementPolicySpec,
    key: GroupKey,
    unowned: list[PodRecord],
    *,
    scheduler_name: str = SCHEDULER_NAME,
) -> GroupReport:
    _, snap = store.decision_inputs(pod, spec, tentative=False)
    counted = {p.uid: p for p in unowned}  # pods without an owner, as their group counts them
    uids = set(store._group_uids(pod, spec)) | {pod.uid} | counted.keys()
    records = [counted.get(u) or store.pods[u] for u in sorted(uids) if u in store.pods]
    records = [r for r in records if not r.finished]
    nodes = store.topology.nodes
    members = [
        Member(
            r.key,
            r.node,
            r.shard,
            r.ordinal,
            _volume_zone(store, r),
            r.constraints,
            r.terminating,
            ours=is_ours(r, scheduler_name),
        )
        for r in records
        if r.node
    ]
    report = GroupReport(
        namespace=pod.namespace,
        group=key[1],
        policy=key[2],
        size=snap.group_size,
        placed={m.pod: m.node for m in members},
        zones={
            m.node: Topology.domain(nodes[m.node], spec.topology.zone, spec.topology.zone) or "(no zone)"
            for m in members
            if m.node in nodes
        },
    )
    found = violations(spec, members, nodes, snap.group_size, snap.volume_zones, snap.zone_rotations)
    report.violations = [f"{v.rule}: {v.message}" for v in found]
    report.notes = [
        f"{p.key} has no StatefulSet owner; counted in StatefulSet {p.shard}, whose pod template's labels "
        "and policy it carries"
        for p in sorted(counted.values(), key=lambda p: p.key)
    ]
    report.pending = {r.key: r.unschedulable or "not scheduled yet" for r in records if not r.node}
    report.next_scale_down_breaks = _replicaset_scale_down(spec, records, members, nodes, snap, found)
    for r in records:
        if not is_ours(r, scheduler_name):
            continue  # constraints another scheduler's pod carries are its own (e.g. what retire wrote)
        sts = store.statefulsets.get((r.namespace, r.shard)) if r.shard else None
        found = pod_disagreements(r, spec, sts.selector_labels if sts else None)
        if found:
            report.native_disagreements[r.key] = found
    if spec.uses_zones:
        held = zones_of(spec, members, nodes)
        for sts in store.group_statefulsets(pod, spec):
            last = next((m for m in members if m.shard == sts.name and m.ordinal == sts.replicas - 1), None)
            if last is None:
                continue
            after = zones_of(spec, [m for m in members if m is not last], nodes)
            for zone in sorted(held - after):
                report.next_scale_down_empties.append(
                    f"scaling StatefulSet {sts.name} to {sts.replicas - 1} removes {last.pod}, "
                    f"the group's last pod in zone {zone}"
                )
    return report


def _replicaset_scale_down(spec, records, members, nodes, snap, now) -> list[str]:  # noqa: ANN001
    """For pods a ReplicaSet owns: would its next scale-down step break a hard rule? With every
    pod carrying a pod-deletion-cost, the lowest goes first; without, the ReplicaSet controller
    may take any running pod, so each one whose removal breaks a rule is listed."""
    owned = [r for r in records if r.node and r.replicaset and not r.terminating]
    if not owned:
        return []
    before = {f"{v.rule}: {v.message}" for v in now}

    def cost(r: PodRecord) -> int:
        try:
            return int(r.deletion_cost or "")
        except ValueError:
            return 0

    costed = all(r.deletion_cost is not None for r in owned)
    candidates = [min(owned, key=cost)] if costed else owned
    out = []
    for r in candidates:
        after = [m for m in members if m.pod != r.key]
        broken = [
            f"{v.rule}: {v.message}"
            for v in violations(spec, after, nodes, snap.group_size, snap.volume_zones, snap.zone_rotations)
        ]
        new = [b for b in broken if b not in before]
        if new:
            why = "lowest pod-deletion-cost" if costed else "no pod-deletion-cost decides the order"
            out.append(f"scaling ReplicaSet {r.replicaset} down may remove {r.key} ({why}), which breaks {new[0]}")
    if out and not costed:
        out.append(
            "the opt-in scale-down controller (docs/how-to/scale-down.md) makes the ReplicaSet remove the right pods"
        )
    return out


def _volume_zone(store: ClusterStore, pod: PodRecord) -> str | None:
    for claim in pod.claims:
        zone = store._volume_zone(pod.namespace, claim)
        if zone is not None:
            return zone
    return None


@dataclass
class Overcommit:
    """A node whose bound pods request more than it has (two schedulers each gave the same room
    away: the kubelet rejects the excess with OutOf<resource>)."""

    node: str
    short: list[str]  # per resource: requested vs allocatable
    pods: list[str]  # every pod on the node, with its scheduler


def overcommitted(store: ClusterStore) -> list[Overcommit]:
    """Nodes whose pods (every scheduler's, terminating ones included) request more than the
    node's allocatable, and the pods involved (engine/resources.py counts as kube-scheduler)."""
    out = []
    for node, used in sorted(store.node_requests.items()):
        capacity = store.allocatable.get(node)
        if capacity is None:
            continue
        short = [
            f"{name}: {amount} requested of {capacity.get(name, 0)}"
            for name, amount in sorted(used.items())
            if name != OPT_IN_RESOURCE and amount > capacity.get(name, 0)
        ]
        if short:
            pods = sorted(
                f"{p.key} ({p.scheduler_name})" for p in store.pods.values() if p.node == node and not p.finished
            )
            out.append(Overcommit(node, short, pods))
    return out


def render_overcommit(nodes: list[Overcommit]) -> str:
    lines = []
    for n in nodes:
        lines.append(f"== node {n.node}: OVERCOMMITTED ({'; '.join(n.short)})")
        lines.append(f"   pods: {', '.join(n.pods)}")
    return "\n".join(lines)


def render(reports: list[GroupReport]) -> str:
    if not reports:
        return "no pods with a placement policy"
    out = []
    for r in reports:
        status = "VIOLATED" if r.violations or r.error else "ok"
        out.append(
            f"== {r.namespace}: {r.group} ({r.policy}, size {r.size if r.size is not None else 'unknown'}): {status}"
        )
        if r.error:
            out.append(f"   policy error: {r.error}")
        out.extend(f"   note: {n}" for n in r.notes)
        if r.placed:
            out.extend("   " + line for line in zone_table(dict(r.placed), r.zones).splitlines())
        out.extend(f"   violation: {v}" for v in r.violations)
        out.extend(f"   warning: {w}" for w in r.next_scale_down_empties)
        out.extend(f"   warning: {w}" for w in r.next_scale_down_breaks)
        out.extend(f"   pending: {p}: {why}" for p, why in sorted(r.pending.items()))
        out.extend(
            f"   native constraints: {p}: {w}" for p, found in sorted(r.native_disagreements.items()) for w in found
        )
    broken = sum(1 for r in reports if r.violations or r.error)
    out.append(f"{len(reports)} group(s), {broken} breaking a hard rule")
    return "\n".join(out)


def as_json(reports: list[GroupReport]) -> dict[str, Any]:
    return {"groups": [asdict(r) for r in reports], "violated": sum(1 for r in reports if r.violations or r.error)}


class GateAdmission(StrEnum):
    """Whether the API server creates every opted-in pod held by the placeable gate
    (deploy/components/placeable-gate: a MutatingAdmissionPolicy and its binding)."""

    INSTALLED = "installed"
    ABSENT = "absent"  # not installed, or not served (Kubernetes before 1.36)
    UNKNOWN = "unknown"  # the caller may not read it


GATE_ADMISSION_NAME = "placement-placeable-gate"


@dataclass
class GateBound:
    """In-scheduler mode's bound, as the cluster keeps it: opted-in pods waiting for a node that no
    placeable gate holds are in kube-scheduler's queue, and while the extender hangs each costs
    every other pod of the cluster the stanza's httpTimeout per attempt."""

    admission: GateAdmission
    outside: list[str] = field(default_factory=list)  # namespace/pod: opted in, pending, not held


def gate_bound(store: ClusterStore, namespace: str | None, admission: GateAdmission) -> GateBound:
    """The opted-in pods pending outside the placeable gate (a pod the extender lifted moments ago
    looks the same, and binds within seconds; a pod created without the gate stays)."""
    outside = sorted(
        p.key
        for p in store.pods.values()
        if (namespace is None or p.namespace == namespace) and p.outside_placeable_gate
    )
    return GateBound(admission, outside)


def render_gate_bound(bound: GateBound) -> str:
    if not bound.outside:
        return ""
    lines = [
        f"== in-scheduler bound: {len(bound.outside)} opted-in pod(s) pending without the {PLACEABLE_GATE} gate",
        "   while the extender hangs, kube-scheduler waits its httpTimeout on each, and every other pod waits",
    ]
    lines.extend(f"   outside: {key}" for key in bound.outside[:50])
    if len(bound.outside) > 50:
        lines.append(f"   ... and {len(bound.outside) - 50} more")
    fix = {
        GateAdmission.INSTALLED: f"the MutatingAdmissionPolicy {GATE_ADMISSION_NAME} is installed: these were "
        "created before it, or lifted by the extender moments ago",
        GateAdmission.ABSENT: f"no MutatingAdmissionPolicy {GATE_ADMISSION_NAME}: install deploy/overlays/in-scheduler "
        "(Kubernetes 1.36+), or put the gate in the templates (adopt --mode in-scheduler does)",
        GateAdmission.UNKNOWN: f"could not read the MutatingAdmissionPolicy {GATE_ADMISSION_NAME} (RBAC): whether "
        "new pods get the gate is unknown",
    }[bound.admission]
    lines.append(f"   fix: {fix}")
    return "\n".join(lines)


def records_without_statefulset(store: ClusterStore, namespace: str | None = None) -> list[str]:
    """ZoneRotations whose StatefulSet does not exist, as notes: a record outlives its set on
    purpose (api/rotation.py: the set recreated from git comes back in its zones), so this is no
    finding; it only says what to delete when the set is gone for good."""
    return [
        f"ZoneRotation {ns}/{record.name}: StatefulSet {record.statefulset} does not exist; the record keeps its "
        f"zones for the set recreated under that name (`kubectl delete zonerotation {record.name} -n {ns}` "
        "if it is gone for good)"
        for (ns, _), record in sorted(store.rotations.items())
        if (namespace is None or ns == namespace) and (ns, record.statefulset) not in store.statefulsets
    ]

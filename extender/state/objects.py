"""Slim records of the Kubernetes objects the extender needs, parsed from raw JSON.

The cache holds these instead of full client models: a 150,000-pod cluster stays small, and the
same parser reads a pod from the watch and from a filter request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..api.policy import (
    INLINE_POLICY_ANNOTATION,
    LEGACY_ZONE_KEY,
    NARROWED_ZONES_ANNOTATION,
    OPT_IN_RESOURCE,
    ORDINAL_ZONE_GATE,
    PLACEABLE_GATE,
    POLICY_GENERATION_ANNOTATION,
    POLICY_REF_ANNOTATION,
    ZONE_KEY,
    ZONE_ROTATION_ANNOTATION,
    ZONE_ROTATION_DECLARED,
)
from ..api.rotation import parse_rotation_spec
from ..engine import (
    NO_CONSTRAINTS,
    NodeConstraints,
    NodeInfo,
    Requirement,
    Taint,
    Toleration,
    node_allocatable,
    pod_requests,
)

STS_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"

# A StatefulSet ordinal as the controller writes it (fmt "%s-%d"): decimal ASCII digits without
# a leading zero, below 2**31 (replicas and ordinals.start are int32). Anything else after the
# last '-' ("-007", a 5,000-digit number, Unicode digits) is no ordinal the controller made: such
# a pod counts as not ordinal-placed rather than colliding with a real ordinal or costing a
# huge int conversion.
_ORDINAL_SUFFIX = re.compile(r"\A(.*)-(0|[1-9][0-9]{0,9})\Z", re.ASCII | re.DOTALL)
MAX_ORDINAL = 2**31 - 1


def split_ordinal(name: str) -> tuple[str, int] | None:
    """(prefix, ordinal) for a name ending in a StatefulSet ordinal ("db-data-web-3" gives
    ("db-data-web", 3)), else None. Used for pod names and for claim names alike."""
    match = _ORDINAL_SUFFIX.match(name)
    if match is None:
        return None
    ordinal = int(match.group(2))  # at most 10 digits: cheap, and never over int()'s digit limit
    return (match.group(1), ordinal) if ordinal <= MAX_ORDINAL else None


class ObjectError(ValueError):
    """A Kubernetes object without the fields the extender relies on."""


def _meta(obj: Any, kind: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ObjectError(f"{kind} must be a JSON object")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ObjectError(f"{kind} needs metadata.name")
    return meta


def _items(value: Any) -> list[Any]:
    """A list field, or nothing when the object holds something else there."""
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    node: str | None
    shard: str | None  # owning StatefulSet
    ordinal: int | None
    terminating: bool
    finished: bool  # Succeeded or Failed: no longer occupies a place
    scheduler_name: str
    claims: tuple[str, ...]
    policy_annotation: str | None = None
    policy_ref: str | None = None
    nominated_node: str | None = None
    unschedulable: str | None = None  # the PodScheduled=False message, while Pending
    # PodScheduled=False with reason Unschedulable: kube-scheduler tried the pod and no node fit
    # (not SchedulingGated, not SchedulerError such as an extender it could not reach)
    tried_unschedulable: bool = False
    # nodeSelector, required node affinity, tolerations: the nodes it could use at all (engine/eligibility.py)
    constraints: NodeConstraints = NO_CONSTRAINTS
    gated: bool = False  # held by the ordinal-zone scheduling gate (extender/server/gate_patch.py)
    replicaset: str | None = None  # owning ReplicaSet (a Deployment's pods): scale-down order applies
    deletion_cost: str | None = None  # its controller.kubernetes.io/pod-deletion-cost annotation
    # Its DoNotSchedule spreads and required pod anti-affinity, as written (None: it has none):
    # compared with what its policy implies (extender/engine/implied.py disagreements).
    hard_native: dict[str, Any] | None = None
    # What it takes from a node, as kube-scheduler counts it (engine/resources.py): (resource, amount)
    requests: tuple[tuple[str, int], ...] = ()
    held: bool = False  # held by the in-scheduler placeable gate (extender/server/place_gate.py)
    # The PlacementPolicy generation it was last nudged for (server/nudge.py): not written twice
    nudged_generation: str | None = None
    # Its template declares the set's ZoneRotation (api/policy.py ZONE_ROTATION_ANNOTATION)
    rotation_declared: bool = False

    @property
    def opted_in(self) -> bool:
        """Requests the opt-in resource: in in-scheduler mode, the cluster's kube-scheduler sends it here."""
        return any(name == OPT_IN_RESOURCE for name, _ in self.requests)

    @property
    def outside_placeable_gate(self) -> bool:
        """Opted in, waiting for a node, and held by no placeable gate: in kube-scheduler's queue
        without the extender having found it a place. Seen as the pod arrives, it was created
        without the gate (no MutatingAdmissionPolicy placement-placeable-gate: Kubernetes before
        1.36, or not installed), so a hung extender costs kube-scheduler httpTimeout per attempt
        at it (extender/server/place_gate.py)."""
        return self.opted_in and self.node is None and not self.held and not self.terminating and not self.finished

    @property
    def owner(self) -> str:
        """namespace/<its StatefulSet, ReplicaSet or own name>: how a workload is named in logs."""
        return f"{self.namespace}/{self.shard or self.replicaset or self.name}"

    def placed_by(self, scheduler_names: Iterable[str]) -> bool:
        """The extender's own pod, as the API server shows it: a pod of a scheduler it serves
        (second-scheduler mode) or one that opted in (in-scheduler mode). Nothing else is ever
        narrowed, lifted or bound by it."""
        return self.scheduler_name in scheduler_names or self.opted_in

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PodIdentity:
    """Who a verb's request names, and all a verb reads of kube-scheduler's copy of the pod: the
    rules are applied to the watch's copy (ClusterStore.pods), never to what a request claims,
    so the rest of the request's pod is not parsed (it was 7% of a filter + prioritize pair)."""

    uid: str
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_identity(obj: Any) -> PodIdentity:
    """The identity parse_pod would give the same object (the same checks of its metadata)."""
    meta = _meta(obj, "Pod")
    namespace = str(meta.get("namespace") or "default")
    return PodIdentity(str(meta.get("uid") or f"{namespace}/{meta['name']}"), namespace, meta["name"])


def parse_pod(obj: Any) -> PodRecord:
    meta = _meta(obj, "Pod")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(spec, dict) or not isinstance(status, dict):
        raise ObjectError("Pod spec and status must be JSON objects")
    for field_name in ("nodeName", "schedulerName"):
        if spec.get(field_name) is not None and not isinstance(spec.get(field_name), str):
            raise ObjectError(f"Pod spec.{field_name} must be a string")
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    scheduled = next(
        (
            c
            for c in _items(status.get("conditions"))
            if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False"
        ),
        None,
    )
    shard = None
    replicaset = None
    for ref in _items(meta.get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "StatefulSet":
            shard = str(ref.get("name"))
        elif isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == "ReplicaSet":
            replicaset = str(ref.get("name"))
    ordinal = None
    if shard is not None and STS_POD_NAME_LABEL in labels:
        # crl-scheduler: the integer after the last '-' of the pod name.
        split = split_ordinal(meta["name"])
        ordinal = split[1] if split is not None else None
    claims = tuple(
        str(v["persistentVolumeClaim"]["claimName"])
        for v in _items(spec.get("volumes"))
        if isinstance(v, dict)
        and isinstance(v.get("persistentVolumeClaim"), dict)
        and v["persistentVolumeClaim"].get("claimName")
    )
    return PodRecord(
        uid=str(meta.get("uid") or f"{meta.get('namespace') or 'default'}/{meta['name']}"),
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        labels=labels,
        node=spec.get("nodeName") or None,
        shard=shard,
        ordinal=ordinal,
        terminating=meta.get("deletionTimestamp") is not None,
        finished=status.get("phase") in ("Succeeded", "Failed"),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        claims=claims,
        policy_annotation=annotations.get(INLINE_POLICY_ANNOTATION),
        policy_ref=annotations.get(POLICY_REF_ANNOTATION),
        nudged_generation=annotations.get(POLICY_GENERATION_ANNOTATION),
        rotation_declared=annotations.get(ZONE_ROTATION_ANNOTATION) == ZONE_ROTATION_DECLARED,
        constraints=parse_node_constraints(spec, _narrowed(annotations.get(NARROWED_ZONES_ANNOTATION))),
        replicaset=replicaset,
        deletion_cost=annotations.get(DELETION_COST_ANNOTATION),
        gated=ORDINAL_ZONE_GATE in (gates := _gate_names(spec)),
        held=PLACEABLE_GATE in gates,
        hard_native=_hard_native(spec),
        requests=_requests_of(spec),
        nominated_node=status.get("nominatedNodeName") if isinstance(status.get("nominatedNodeName"), str) else None,
        unschedulable=str(scheduled.get("message") or scheduled.get("reason") or "") if scheduled else None,
        tried_unschedulable=bool(scheduled) and scheduled.get("reason") == "Unschedulable",
    )


# Pods of one template request alike: one shared tuple each, bounded as the constraints below.
_REQUESTS: dict[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]] = {}


def _requests_of(spec: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    found = tuple(sorted(pod_requests(spec).items()))
    shared = _REQUESTS.get(found)
    if shared is None:
        if len(_REQUESTS) >= _MAX_INTERNED:
            _REQUESTS.clear()
        shared = _REQUESTS[found] = found
    return shared


_DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
# Pods of one template carry equal constraints: one shared object each, not one per pod (a
# 150,000-pod cache). Bounded: past this many distinct ones the table starts over.
_INTERNED: dict[NodeConstraints, NodeConstraints] = {}
_MAX_INTERNED = 4096


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in _items(value))


def _requirements(value: Any, field: bool) -> tuple[Requirement, ...]:
    out = []
    for expr in _items(value):
        if isinstance(expr, dict) and isinstance(expr.get("key"), str):
            out.append(Requirement(expr["key"], str(expr.get("operator") or ""), _strings(expr.get("values")), field))
    return tuple(out)


def _narrowed(text: str | None) -> Requirement | None:
    """The zone requirement the extender added when it lifted the pod's gate (NARROWED_ZONES_ANNOTATION)."""
    if not text:
        return None
    try:
        value = json.loads(text)
        return Requirement(str(value["key"]), "In", tuple(str(v) for v in value["values"]))
    except (ValueError, KeyError, TypeError):
        return None


def _gate_names(spec: dict[str, Any]) -> frozenset[str]:
    return frozenset(
        str(g.get("name")) for g in _items(spec.get("schedulingGates")) if isinstance(g, dict) and g.get("name")
    )


def _hard_native(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's DoNotSchedule spreads and required pod anti-affinity terms, if any."""
    spreads = [
        c
        for c in _items(spec.get("topologySpreadConstraints"))
        if isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]
    anti = _items(
        _dict(_dict(spec.get("affinity")).get("podAntiAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    if not spreads and not anti:
        return None
    out: dict[str, Any] = {}
    if spreads:
        out["topologySpreadConstraints"] = spreads
    if anti:
        out["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}}
    return out


def parse_node_constraints(spec: dict[str, Any], narrowed: Requirement | None = None) -> NodeConstraints:
    """The pod's nodeSelector, required node affinity terms and tolerations (a malformed part
    reads as absent: kube-scheduler's own validation refused such pods long before). `narrowed`,
    the extender's own zone requirement (added when it lifted the ordinal-zone gate), is left
    out: the rules judge the workload's constraints, not the answer they gave."""
    selector = tuple(sorted(_str_map(spec.get("nodeSelector")).items()))
    required = _dict(
        _dict(_dict(spec.get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms = None
    if "nodeSelectorTerms" in required:
        terms = tuple(
            _requirements(t.get("matchExpressions"), False) + _requirements(t.get("matchFields"), True)
            for t in _items(required.get("nodeSelectorTerms"))
            if isinstance(t, dict)
        )
        if narrowed is not None:
            terms = tuple(tuple(r for r in term if r != narrowed) for term in terms)
            if all(not term for term in terms):
                terms = None  # the extender's requirement was the whole affinity
    tolerations = tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in _items(spec.get("tolerations"))
        if isinstance(t, dict)
    )
    if not selector and terms is None and not tolerations:
        return NO_CONSTRAINTS
    constraints = NodeConstraints(selector, terms, tolerations)
    shared = _INTERNED.get(constraints)
    if shared is None:
        if len(_INTERNED) >= _MAX_INTERNED:
            _INTERNED.clear()
        shared = _INTERNED[constraints] = constraints
    return shared


def parse_node(obj: Any) -> NodeInfo:
    meta = _meta(obj, "Node")
    spec = _dict(obj.get("spec"))
    status = _dict(obj.get("status"))
    ready = any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in _items(status.get("conditions"))
    )
    labels = _str_map(meta.get("labels"))
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), t["effect"])
        for t in _items(spec.get("taints"))
        if isinstance(t, dict) and t.get("effect") in _DO_NOT_SCHEDULE_EFFECTS
    )
    return NodeInfo(
        name=meta["name"], labels=labels, schedulable=ready and not spec.get("unschedulable", False), taints=taints
    )


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node as the watch cache keeps it: what the rules read, and its allocatable resources
    (what the bind's resource check reads, engine/resources.py)."""

    info: NodeInfo
    allocatable: dict[str, int] | None  # None: the node reports none yet (the room check then skips it)


def parse_node_record(obj: Any) -> NodeRecord:
    status = _dict(_dict(obj).get("status"))
    reported = isinstance(status.get("allocatable"), dict) and bool(status.get("allocatable"))
    return NodeRecord(parse_node(obj), node_allocatable(status) if reported else None)


@dataclass(frozen=True, slots=True)
class StatefulSetRecord:
    namespace: str
    name: str
    replicas: int
    template_labels: dict[str, str]
    claim_templates: tuple[str, ...]
    policy_annotation: str | None = None
    policy_ref: str | None = None
    uid: str | None = None
    selector_labels: dict[str, str] = field(default_factory=dict)  # spec.selector.matchLabels


def parse_statefulset(obj: Any) -> StatefulSetRecord:
    meta = _meta(obj, "StatefulSet")
    spec = _dict(obj.get("spec"))
    template = _dict(_dict(spec.get("template")).get("metadata"))
    annotations = _str_map(template.get("annotations"))
    replicas = spec.get("replicas")
    return StatefulSetRecord(
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        replicas=int(replicas) if isinstance(replicas, int) else 1,
        template_labels=_str_map(template.get("labels")),
        claim_templates=tuple(
            str(_dict(t.get("metadata")).get("name"))
            for t in _items(spec.get("volumeClaimTemplates"))
            if isinstance(t, dict)
        ),
        policy_annotation=annotations.get(INLINE_POLICY_ANNOTATION),
        policy_ref=annotations.get(POLICY_REF_ANNOTATION),
        uid=str(meta["uid"]) if meta.get("uid") else None,
        selector_labels=_str_map(_dict(spec.get("selector")).get("matchLabels")),
    )


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    namespace: str
    name: str
    volume: str | None


def parse_claim(obj: Any) -> ClaimRecord:
    meta = _meta(obj, "PersistentVolumeClaim")
    volume = _dict(obj.get("spec")).get("volumeName")
    volume = volume if isinstance(volume, str) and volume else None
    return ClaimRecord(str(meta.get("namespace") or "default"), meta["name"], volume)


@dataclass(frozen=True, slots=True)
class VolumeRecord:
    name: str
    zone: str | None


def parse_volume(obj: Any) -> VolumeRecord:
    """A PV's zone: its zone label, else a single zone in its required node affinity."""
    meta = _meta(obj, "PersistentVolume")
    labels = _str_map(meta.get("labels"))
    zone = labels.get(ZONE_KEY) or labels.get(LEGACY_ZONE_KEY)
    if zone is None:
        affinity = _dict(_dict(obj.get("spec")).get("nodeAffinity"))
        terms = _items(_dict(affinity.get("required")).get("nodeSelectorTerms"))
        zones: set[str] = set()
        for term in terms:
            for expr in _items(_dict(term).get("matchExpressions")):
                if (
                    isinstance(expr, dict)
                    and expr.get("key") in (ZONE_KEY, LEGACY_ZONE_KEY)
                    and expr.get("operator") == "In"
                ):
                    zones.update(str(v) for v in _items(expr.get("values")))
        if len(zones) == 1:
            zone = zones.pop()
    return VolumeRecord(meta["name"], zone)


@dataclass(frozen=True, slots=True)
class PolicyRecord:
    namespace: str
    name: str
    spec: dict[str, Any] = field(default_factory=dict)
    generation: str = ""  # metadata.generation: moves on every spec change


def parse_policy(obj: Any) -> PolicyRecord:
    meta = _meta(obj, "PlacementPolicy")
    spec = obj.get("spec")
    return PolicyRecord(
        str(meta.get("namespace") or "default"),
        meta["name"],
        spec if isinstance(spec, dict) else {},
        str(meta.get("generation") or ""),
    )


@dataclass(frozen=True, slots=True)
class RotationRecord:
    """A ZoneRotation object (extender/api/rotation.py): a StatefulSet's recorded zone rotation."""

    namespace: str
    name: str
    statefulset: str
    order: tuple[str, ...]
    adopted: dict[int, str]


def parse_rotation(obj: Any) -> RotationRecord:
    meta = _meta(obj, "ZoneRotation")
    namespace = str(meta.get("namespace") or "default")
    try:
        spec = parse_rotation_spec(obj.get("spec"), f"ZoneRotation {namespace}/{meta['name']}")
    except ValueError as err:
        raise ObjectError(str(err)) from None
    return RotationRecord(namespace, meta["name"], spec.statefulSet, tuple(spec.order), spec.adopted_ordinals())

"""What would free a pod no node can take: each remedy is computed by deciding again with it.

A Pending pod's reason names the rule that refuses it ("this node already holds 1 of the group's
pods; the cap allows 1"), not the way out. For a pod refused everywhere, this module tries the
changes an operator can make and keeps those under which some node would take the pod:

* one more schedulable node in a zone (a copy of a node of that zone, or of any node relabelled,
  for a zone that has none now, such as an ordinal's zone after an outage);
* a cap one higher (an absolute `max`; a fraction's limit moves with the group);
* `group.matchLabelKeys: [<revision label>]`, when the pod carries a Deployment's
  `pod-template-hash` or a StatefulSet's `controller-revision-hash` and the group does not split
  on it: a rolling update's old pods then stop counting against the new ones.

Each try is one evaluation with the dead-end analysis on (the decision filter would make), under
a short deadline, so the whole costs a few decisions and only for a pod no node passes. The tries
are bounded whatever the policy lists: at most MAX_REMEDY_ZONES zones get a "one more node" try
(the pod's ordinal zone, then the zones with nodes, then the other permitted zones, in name
order), and the search stops at `deadline` with what it found (a valid policy allowing 5,000
zones without nodes once made it decide 4,997 times, 26.7 s under the cache lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..api.policy import PlacementPolicySpec
from ..limits import MAX_REMEDY_ZONES
from .evaluate import evaluate
from .model import NodeInfo, PodRequest, Snapshot
from .plan import copy_of, with_nodes

REVISION_LABELS = ("pod-template-hash", "controller-revision-hash")
TRY_DEADLINE = 0.1  # seconds of dead-end analysis per try


@dataclass(frozen=True)
class Remedy:
    kind: str  # "node", "cap", "matchLabelKeys"
    text: str


def _passes(spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot, candidates: Sequence[str]) -> set[str]:
    decision = evaluate(spec, pod, snap, list(candidates), deadline=time.monotonic() + TRY_DEADLINE)
    return set(decision.passed())


def remedies(
    spec: PlacementPolicySpec,
    pod: PodRequest,
    labels: dict[str, str],
    snap: Snapshot,
    candidates: Sequence[str],
    regroup: Callable[[PlacementPolicySpec], Snapshot] | None = None,
    deadline: float | None = None,
) -> list[Remedy]:
    """The changes under which some node would take the pod, for a pod none takes now.
    `candidates` are the nodes kube-scheduler's own filters passed; `labels`, the pod's;
    `regroup(spec)` the snapshot of the pod's group under another policy (the cache decides who
    is in a group: needed for the matchLabelKeys remedy, skipped without it); past `deadline`
    (time.monotonic) no further change is tried."""

    def out_of_time() -> bool:
        return deadline is not None and time.monotonic() > deadline

    out: list[Remedy] = []
    nodes = snap.topology.nodes
    zone_key = spec.topology.zone
    shapes: dict[str, NodeInfo] = {}
    for name in sorted(candidates):
        node = nodes.get(name)
        zone = node.labels.get(zone_key) if node is not None else None
        if node is not None and zone is not None:
            shapes.setdefault(zone, node)
    own, permitted = _zones_wanted(spec, pod, snap)
    tries = [*sorted(own), *sorted(shapes.keys() - own), *sorted(permitted - own - shapes.keys())]
    tries = tries[:MAX_REMEDY_ZONES]
    if shapes:
        any_node = next(iter(shapes.values()))
        for zone in tries:
            if zone not in shapes:  # a zone with no usable node now
                shapes[zone] = NodeInfo(any_node.name, {**any_node.labels, zone_key: zone}, True, any_node.taints)
    freeing = []
    for zone in sorted(z for z in tries if z in shapes):
        if out_of_time():
            break
        new = copy_of(shapes[zone], f"remedy-{zone}")
        if new.name in _passes(spec, pod, with_nodes(snap, [new]), [*candidates, new.name]):
            freeing.append(zone)
    if freeing:
        where = " or ".join(freeing)
        out.append(Remedy("node", f"one more schedulable node in zone {where}"))
    for i, cap in enumerate(spec.caps):
        if cap.max is None or out_of_time():
            continue
        caps = list(spec.caps)
        caps[i] = cap.model_copy(update={"max": cap.max + 1})
        if _passes(spec.model_copy(update={"caps": caps}), pod, snap, candidates):
            out.append(Remedy("cap", f"a cap of {cap.max + 1} per {cap.topologyKey} (now {cap.max})"))
    if not spec.group.matchLabelKeys and regroup is not None and not out_of_time():
        for key in REVISION_LABELS:
            if key in labels:
                split = spec.model_copy(update={"group": spec.group.model_copy(update={"matchLabelKeys": [key]})})
                if _passes(split, pod, regroup(split), candidates):
                    out.append(
                        Remedy(
                            "matchLabelKeys",
                            f"group.matchLabelKeys: [{key}], so a rolling update's old pods stop counting against "
                            "the new ones",
                        )
                    )
                break
    return out


def _zones_wanted(spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot) -> tuple[set[str], set[str]]:
    """Zones a new node could be worth trying in beyond today's usable ones: the pod's ordinal
    zones (under ordinal zones), and the permitted zones."""
    from .evaluate import ordinal_pod_zones

    own: set[str] = set()
    if spec.ordinalZones is not None:
        zones, _ = ordinal_pod_zones(spec, pod, snap)
        own |= set(zones or ())
    permitted = spec.zones.permitted() if spec.zones else None
    return own, set(permitted or ())


def render(found: list[Remedy]) -> str:
    return "; ".join(r.text for r in found)

"""Which of a group's pods a scale-down should remove first, so each step keeps the policy best.

A ReplicaSet's controller picks the pods it deletes without looking at topology (kubernetes#96748):
after 9 -> 4 a zone spread can stand 3/1/0. It does honour `controller.kubernetes.io/pod-deletion-cost`
(lowest first, GA in 1.22). This module orders the pods; the cost a pod gets is its position.

The order, greedy: repeatedly take the pod whose domains are the most crowded, comparing first
each hard spread's key (in policy order), then each cap's key, then the zone, then the node; ties
go towards what the policy prefers (a pod in a lower-weighted zone, or a later fallback group,
first), then by name, so the order is stable.

Invariant, for the first hard spread's key (the zone when there is none): after deleting the
first k pods of the order, its domains' counts have the smallest maximum and the largest minimum
any deletion of k pods could leave, so the skew is the least possible: if any k deletions keep
`maxSkew`, these do. The keys after it only break ties (for nested keys, a node within its zone,
that is the natural order; for crossing keys, a second spread, it is a heuristic). Deleting never
breaks a cap (caps bound counts from above) or a zone rule. The last pod of a domain goes last,
because its domain is the least crowded.

Counts only go down as pods are taken, so a pod's key only goes down: a max-heap with lazy
re-evaluation gives the order in O(n log n) for n pods.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..api.policy import PlacementPolicySpec, WhenUnsatisfiable
from .model import NodeInfo
from .topology import Topology


def _keys(spec: PlacementPolicySpec) -> list[str]:
    keys: list[str] = []
    for s in spec.spread:
        if s.whenUnsatisfiable == WhenUnsatisfiable.DO_NOT_SCHEDULE:
            keys.append(spec.canonical_key(s.topologyKey))
    keys += [spec.canonical_key(c.topologyKey) for c in spec.caps]
    keys += [spec.topology.zone, spec.topology.node]
    out: list[str] = []
    for key in keys:
        if key not in out:
            out.append(key)
    return out


def _preference(spec: PlacementPolicySpec, zone: str | None) -> float:
    """How much the policy wants to keep a pod in `zone` (higher: delete later)."""
    zones = spec.zones
    if zones is None or zone is None:
        return 0.0
    if zones.weights:
        return float(zones.weights.get(zone, 0))
    if zones.fallbackGroups:
        for i, group in enumerate(zones.fallbackGroups):
            if zone in group:
                return float(len(zones.fallbackGroups) - i)
        return 0.0
    return 0.0


def deletion_order(spec: PlacementPolicySpec, pods: Mapping[str, str], nodes: Mapping[str, NodeInfo]) -> list[str]:
    """`pods` (pod -> node) in the order a scale-down should remove them, first first. Pods on
    nodes the topology does not know come first (they are going anyway)."""
    keys = _keys(spec)
    domain: dict[str, tuple[str | None, ...]] = {}
    counts: list[dict[str | None, int]] = [defaultdict(int) for _ in keys]
    gone = []
    for pod, node_name in pods.items():
        node = nodes.get(node_name)
        if node is None:
            gone.append(pod)
            continue
        values = tuple(Topology.domain(node, key, spec.topology.zone, spec.topology.node) for key in keys)
        domain[pod] = values
        for i, value in enumerate(values):
            counts[i][value] += 1
    zone_at = keys.index(spec.topology.zone)

    def key_of(pod: str) -> tuple:
        values = domain[pod]
        crowd = tuple(-counts[i][v] for i, v in enumerate(values))  # heapq is a min-heap
        return (*crowd, _preference(spec, values[zone_at]), pod)

    heap = [(key_of(p), p) for p in domain]
    heapq.heapify(heap)
    order = sorted(gone)
    while heap:
        key, pod = heapq.heappop(heap)
        fresh = key_of(pod)
        if fresh != key:
            heapq.heappush(heap, (fresh, pod))
            continue
        order.append(pod)
        for i, value in enumerate(domain[pod]):
            counts[i][value] -= 1
    return order


def deletion_costs(order: Sequence[str]) -> dict[str, int]:
    """Costs for controller.kubernetes.io/pod-deletion-cost: the first to go lowest. Spaced by
    one; the values are int32 and only their order matters."""
    return {pod: i for i, pod in enumerate(order)}

"""Does a group's current placement keep its policy's hard rules? An independent check.

Used by `ab` (to count violations on both sides of an A/B run) and by `audit` (to catch drift
after a scale-down, a node loss, or a pod placed by hand). It recomputes every hard rule from
the placements alone, without the engine's incremental state, so it also checks the engine.

Deliberately not built from the engine's rule modules (extender/engine/rules/): a simpler,
independent oracle of what a finished placement must satisfy, so a mistake in a rule's module
shows up as a disagreement instead of being repeated here. tests/unit/test_checker.py holds its
own table of cases; test_properties.py holds the engine to it.

One thing is deliberately the engine's: which zone order a StatefulSet follows. That order is
read from a record (the set's placed pods and bound volumes, engine/zone_order.py), and a second
reading of the same record would disagree with the engine exactly where it matters: after a zone
is added, the engine keeps the rotation its running pods show, and a checker reading volumes
only called pods that never moved misplaced (issue 13). So the order comes from the engine's own
derivation, through evaluate(); the checker still checks on its own that each pod sits in its
ordinal's zone (or its volume's).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .engine import NodeInfo, Placement, PodRequest, Snapshot, Topology, ZoneOrder, evaluate
from .policy import AntiAffinityMode, PlacementPolicySpec, WhenUnsatisfiable


@dataclass(frozen=True)
class Member:
    pod: str  # namespace/name
    node: str
    shard: str | None = None
    ordinal: int | None = None
    volume_zone: str | None = None


@dataclass(frozen=True)
class Violation:
    rule: str
    message: str


def _domain(node: NodeInfo | None, key: str, spec: PlacementPolicySpec) -> str | None:
    if node is None:
        return None
    return Topology.domain(node, spec.canonical_key(key), spec.topology.zone, spec.topology.node)


VolumeZones = Mapping[str, Mapping[int, str]]  # StatefulSet -> ordinal -> zone of its bound volume


def violations(
    spec: PlacementPolicySpec,
    members: Sequence[Member],
    nodes: Mapping[str, NodeInfo],
    group_size: int | None,
    volume_zones: VolumeZones | None = None,
) -> list[Violation]:
    """Every hard rule the placement breaks, each with the numbers.

    `volume_zones`: the bound volumes of the group's StatefulSets, also of ordinals with no pod
    now (claims outlive a scale-down), as the engine's snapshot holds them; the members' own
    volume zones are added to it."""
    out: list[Violation] = []
    zone_key = spec.topology.zone
    permitted = spec.zones.permitted() if spec.zones else None
    if permitted is not None:
        for m in members:
            zone = _domain(nodes.get(m.node), zone_key, spec)
            if zone not in permitted:
                out.append(Violation("zones", f"{m.pod} is on {m.node} in zone {zone}, outside {sorted(permitted)}"))
    for cap in spec.caps:
        limit = cap.limit(group_size)
        if limit is None:
            continue
        pods: dict[str | None, list[str]] = defaultdict(list)
        for m in members:
            pods[_domain(nodes.get(m.node), cap.topologyKey, spec)].append(m.pod)
        for domain, here in sorted(pods.items(), key=lambda kv: str(kv[0])):
            if domain is not None and len(here) > limit:
                out.append(
                    Violation(
                        "caps",
                        f"{cap.topologyKey}={domain} holds {len(here)} pods ({_some(here)}); "
                        f"{cap.describe(group_size)} allows {limit}",
                    )
                )
    for s in spec.spread:
        if s.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        counts = domain_counts(spec, s.topologyKey, members, nodes)
        if counts:
            fullest = max(counts, key=lambda d: (counts[d], d))
            emptiest = min(counts, key=lambda d: (counts[d], d))
            skew = counts[fullest] - counts[emptiest]
            if skew > s.maxSkew:
                out.append(
                    Violation(
                        "spread",
                        f"{s.topologyKey} skew {skew} > maxSkew {s.maxSkew}: {s.topologyKey}={fullest} holds "
                        f"{counts[fullest]} pods, {s.topologyKey}={emptiest} {counts[emptiest]}",
                    )
                )
    for rule in spec.shardAntiAffinity:
        if rule.mode is not AntiAffinityMode.REQUIRED:
            continue
        seen: dict[tuple[str, str], list[str]] = defaultdict(list)
        for m in members:
            domain = _domain(nodes.get(m.node), rule.topologyKey, spec)
            if m.shard is not None and domain is not None:
                seen[(m.shard, domain)].append(m.pod)
        for (shard, domain), pods in sorted(seen.items()):
            if len(pods) > 1:
                out.append(
                    Violation(
                        "shardAntiAffinity", f"{', '.join(sorted(pods))} of {shard} share {rule.topologyKey}={domain}"
                    )
                )
    if spec.ordinalZones is not None:
        out.extend(_ordinal_violations(spec, members, nodes, volume_zones or {}))
    return out


def _ordinal_violations(
    spec: PlacementPolicySpec, members: Sequence[Member], nodes: Mapping[str, NodeInfo], volume_zones: VolumeZones
) -> list[Violation]:
    zone_key = spec.topology.zone
    out = []
    by_shard: dict[str, list[Member]] = defaultdict(list)
    for m in members:
        if m.shard is not None and m.ordinal is not None:
            by_shard[m.shard].append(m)
    if not by_shard:
        return out
    record = snapshot(members, nodes, volume_zones)
    for shard, shard_members in sorted(by_shard.items()):
        order = zone_order(spec, record, shard)
        for m in sorted(shard_members, key=lambda m: m.ordinal or 0):
            zone = _domain(nodes.get(m.node), zone_key, spec)
            ideal = order.zone_for(m.ordinal)  # type: ignore[arg-type]
            if zone != ideal and zone != m.volume_zone:
                out.append(
                    Violation(
                        "ordinalZones",
                        f"{m.pod} (ordinal {m.ordinal}) is on {m.node} in zone {zone}; its zone is {ideal} "
                        f"(order [{', '.join(order.order)}]: {order.how})",
                    )
                )
    return out


def snapshot(members: Sequence[Member], nodes: Mapping[str, NodeInfo], volume_zones: VolumeZones) -> Snapshot:
    """The record as the engine reads it: every member on its node, and the bound volumes."""
    volumes: dict[str, dict[int, str]] = {shard: dict(zones) for shard, zones in volume_zones.items()}
    for m in members:
        if m.shard is not None and m.ordinal is not None and m.volume_zone is not None:
            volumes.setdefault(m.shard, {}).setdefault(m.ordinal, m.volume_zone)
    placements = tuple(Placement(m.pod, m.node, m.shard, m.ordinal) for m in members)
    return Snapshot(topology=Topology(nodes.values()), placements=placements, volume_zones=volumes)


def zone_order(spec: PlacementPolicySpec, record: Snapshot, shard: str) -> ZoneOrder:
    """The zone order the engine follows for `shard` given the whole record: what filter would
    use for the set's next pod. Made by evaluate() itself (engine.context's shard_zone_order),
    with no candidates to judge, so the checker and the engine cannot read the record apart."""
    decision = evaluate(spec, PodRequest(f"{shard}/(zone order)", shard, 0), record, [])
    order = getattr(decision.context, "zone_order", None)
    return order if order is not None else ZoneOrder((), "no zone order (ordinal zones off)")


def _some(pods: list[str], shown: int = 5) -> str:
    """Pod names for a message: the first few, sorted, and how many more."""
    names = sorted(pods)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def max_skew(spec: PlacementPolicySpec, key: str, members: Sequence[Member], nodes: Mapping[str, NodeInfo]) -> int:
    """Pods in the fullest minus the emptiest eligible domain (schedulable nodes, permitted zones)."""
    values = domain_counts(spec, key, members, nodes).values()
    return (max(values) - min(values)) if values else 0


def domain_counts(
    spec: PlacementPolicySpec, key: str, members: Sequence[Member], nodes: Mapping[str, NodeInfo]
) -> dict[str, int]:
    """The group's pods in each eligible domain of `key` (schedulable nodes, permitted zones)."""
    permitted = spec.zones.permitted() if spec.zones else None
    domains = set()
    for node in nodes.values():
        if not node.schedulable:
            continue
        if permitted is not None and _domain(node, spec.topology.zone, spec) not in permitted:
            continue
        value = _domain(node, key, spec)
        if value is not None:
            domains.add(value)
    counts = Counter(_domain(nodes.get(m.node), key, spec) for m in members)
    return {d: counts.get(d, 0) for d in domains}


def zones_of(spec: PlacementPolicySpec, members: Sequence[Member], nodes: Mapping[str, NodeInfo]) -> set[str]:
    return {z for z in (_domain(nodes.get(m.node), spec.topology.zone, spec) for m in members) if z is not None}

"""Does a group's current placement keep its policy's hard rules? An independent check.

Used by `ab` (to count violations on both sides of an A/B run) and by `audit` (to catch drift
after a scale-down, a node loss, or a pod placed by hand). It recomputes every hard rule from
the placements alone, without the engine's incremental state, so it also checks the engine.

Deliberately not built from the engine's rule modules (extender/engine/rules/): a simpler,
independent oracle of what a finished placement must satisfy, so a mistake in a rule's module
shows up as a disagreement instead of being repeated here. tests/unit/test_checker.py holds its
own table of cases; test_properties.py holds the engine to it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .engine import NodeInfo, Topology, stable_zone_order
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


def violations(
    spec: PlacementPolicySpec, members: Sequence[Member], nodes: Mapping[str, NodeInfo], group_size: int | None
) -> list[Violation]:
    """Every hard rule the placement breaks, each with the numbers."""
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
        counts = Counter(_domain(nodes.get(m.node), cap.topologyKey, spec) for m in members)
        for domain, count in sorted(counts.items(), key=lambda kv: str(kv[0])):
            if domain is not None and count > limit:
                out.append(
                    Violation(
                        "caps",
                        f"{cap.topologyKey}={domain} holds {count} pods; {cap.describe(group_size)} allows {limit}",
                    )
                )
    for s in spec.spread:
        if s.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        skew = max_skew(spec, s.topologyKey, members, nodes)
        if skew > s.maxSkew:
            out.append(Violation("spread", f"{s.topologyKey} skew {skew} > maxSkew {s.maxSkew}"))
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
        out.extend(_ordinal_violations(spec, members, nodes))
    return out


def _ordinal_violations(
    spec: PlacementPolicySpec, members: Sequence[Member], nodes: Mapping[str, NodeInfo]
) -> list[Violation]:
    zone_key = spec.topology.zone
    permitted = spec.zones.permitted() if spec.zones else None
    zone_nodes: Counter = Counter()
    for node in nodes.values():
        zone = _domain(node, zone_key, spec)
        if node.schedulable and zone is not None and (permitted is None or zone in permitted):
            zone_nodes[zone] += 1
    out = []
    by_shard: dict[str, list[Member]] = defaultdict(list)
    for m in members:
        if m.shard is not None and m.ordinal is not None:
            by_shard[m.shard].append(m)
    for _shard, shard_members in sorted(by_shard.items()):
        # The order a fresh placement would use: node counts, pinned by volumes only (not by the
        # pods under test, which would make any placement look consistent).
        evidence = {m.ordinal: m.volume_zone for m in shard_members if m.volume_zone is not None}
        explicit = spec.ordinalZones.order if spec.ordinalZones else None
        order = stable_zone_order(zone_nodes, evidence, explicit)  # type: ignore[arg-type]
        for m in sorted(shard_members, key=lambda m: m.ordinal or 0):
            zone = _domain(nodes.get(m.node), zone_key, spec)
            ideal = order.zone_for(m.ordinal)  # type: ignore[arg-type]
            if zone != ideal and zone != m.volume_zone:
                out.append(
                    Violation("ordinalZones", f"{m.pod} (ordinal {m.ordinal}) is in zone {zone}; its zone is {ideal}")
                )
    return out


def max_skew(spec: PlacementPolicySpec, key: str, members: Sequence[Member], nodes: Mapping[str, NodeInfo]) -> int:
    """Pods in the fullest minus the emptiest eligible domain (schedulable nodes, permitted zones)."""
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
    values = [counts.get(d, 0) for d in domains]
    return (max(values) - min(values)) if values else 0


def zones_of(spec: PlacementPolicySpec, members: Sequence[Member], nodes: Mapping[str, NodeInfo]) -> set[str]:
    return {z for z in (_domain(nodes.get(m.node), spec.topology.zone, spec) for m in members) if z is not None}

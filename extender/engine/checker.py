"""Does a group's current placement keep its policy's hard rules? An independent check.

Used by `ab` (to count violations on both sides of an A/B run) and by `audit` (to catch drift
after a scale-down, a node loss, or a pod placed by hand). It recomputes every hard rule from
the placements alone, without the engine's incremental state, so it also checks the engine.

Deliberately not built from the engine's rule modules (extender/engine/rules/): a simpler,
independent oracle of what a finished placement must satisfy, so a mistake in a rule's module
shows up as a disagreement instead of being repeated here. tests/unit/test_checker.py holds its
own table of cases; test_properties.py holds the engine to it.

One thing is deliberately the engine's: which zone order a StatefulSet follows. That order is
its ZoneRotation record (or, before the record exists, the first rotation the engine would record,
engine/zone_order.py), and a second derivation would disagree with the engine exactly where it
matters: after a zone is added or lost, or for pods placed before adoption (issues 13, 22). So
the order, and the ordinals it left where they were at adoption, come from the engine through
evaluate(); the checker still checks on its own that each other pod sits in its ordinal's zone
(or its volume's).

The same holds for a spread's eligible domains: which nodes count (the pod's nodeSelector and
required node affinity under nodeAffinityPolicy, its tolerations under nodeTaintsPolicy) is the
engine's reading (engine.spread_eligibility), or the checker would count a zone the pods can
never use as an empty domain and report a skew that is not there. The skew itself, with
minDomains's empty domains, is computed here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..api.policy import AntiAffinityMode, PlacementPolicySpec, Spread, WhenUnsatisfiable
from . import (
    NodeConstraints,
    NodeInfo,
    Placement,
    PodRequest,
    RecordedRotation,
    Snapshot,
    Topology,
    ZoneOrder,
    evaluate,
    spread_eligibility,
)
from . import zone_order as decision_zone_order


@dataclass(frozen=True)
class Member:
    pod: str  # namespace/name
    node: str
    shard: str | None = None
    ordinal: int | None = None
    volume_zone: str | None = None
    constraints: NodeConstraints | None = None  # the pod's nodeSelector, required affinity, tolerations
    terminating: bool = False  # deleted, still on its node: caps and anti-affinity count it, nothing else
    # placed by the extender's scheduler: only such a pod's own zone is judged (zones, ordinal
    # zones); another scheduler's pod still holds its place in the group's counts
    ours: bool = True


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
    rotations: Mapping[str, RecordedRotation] | None = None,
) -> list[Violation]:
    """Every hard rule the placement breaks, each with the numbers.

    Terminating members are held to the invariant the engine keeps (docs/concepts/which-pods-count.md):
    caps and anti-affinity count them (a cap must hold at every moment), while spreads, zones
    and ordinal zones judge the placement they leave behind.

    `volume_zones`: the bound volumes of the group's StatefulSets, also of ordinals with no pod
    now (claims outlive a scale-down), as the engine's snapshot holds them; the members' own
    volume zones are added to it."""
    out: list[Violation] = []
    zone_key = spec.topology.zone
    permitted = spec.zones.permitted() if spec.zones else None
    staying = [m for m in members if not m.terminating]
    if permitted is not None:
        for m in (m for m in staying if m.ours):
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
    topology: Topology | None = None
    for s in spec.spread:
        if s.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        topology = topology or Topology(nodes.values())
        worst = max(spread_skews(spec, s, staying, nodes, topology), key=lambda k: k.skew, default=None)
        if worst is not None and worst.skew > s.maxSkew:
            out.append(Violation("spread", worst.describe(s)))
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
        out.extend(_ordinal_violations(spec, staying, nodes, volume_zones or {}, rotations or {}))
    return out


def _ordinal_violations(
    spec: PlacementPolicySpec,
    members: Sequence[Member],
    nodes: Mapping[str, NodeInfo],
    volume_zones: VolumeZones,
    rotations: Mapping[str, RecordedRotation],
) -> list[Violation]:
    zone_key = spec.topology.zone
    out = []
    by_shard: dict[str, list[Member]] = defaultdict(list)
    for m in members:
        if m.shard is not None and m.ordinal is not None:
            by_shard[m.shard].append(m)
    if not by_shard:
        return out
    record = snapshot(members, nodes, volume_zones, rotations)
    for shard, shard_members in sorted(by_shard.items()):
        order = zone_order(spec, record, shard)
        for m in sorted(shard_members, key=lambda m: m.ordinal or 0):
            if not m.ours:
                continue
            zone = _domain(nodes.get(m.node), zone_key, spec)
            ideal = order.zone_for(m.ordinal)  # type: ignore[arg-type]
            if zone != ideal and zone != m.volume_zone and order.adopted.get(m.ordinal) != zone:  # type: ignore[arg-type]
                out.append(
                    Violation(
                        "ordinalZones",
                        f"{m.pod} (ordinal {m.ordinal}) is on {m.node} in zone {zone}; its zone is {ideal} "
                        f"(order [{', '.join(order.order)}]: {order.how})",
                    )
                )
    return out


def snapshot(
    members: Sequence[Member],
    nodes: Mapping[str, NodeInfo],
    volume_zones: VolumeZones,
    rotations: Mapping[str, RecordedRotation] | None = None,
) -> Snapshot:
    """What the engine reads for a zone order: every member on its node, the bound volumes,
    and the recorded rotations."""
    volumes: dict[str, dict[int, str]] = {shard: dict(zones) for shard, zones in volume_zones.items()}
    for m in members:
        if m.shard is not None and m.ordinal is not None and m.volume_zone is not None:
            volumes.setdefault(m.shard, {}).setdefault(m.ordinal, m.volume_zone)
    placements = tuple(Placement(m.pod, m.node, m.shard, m.ordinal) for m in members)
    return Snapshot(
        topology=Topology(nodes.values()), placements=placements, volume_zones=volumes, zone_rotations=rotations or {}
    )


def zone_order(spec: PlacementPolicySpec, record: Snapshot, shard: str) -> ZoneOrder:
    """The zone order the engine follows for `shard` given the whole record: what filter would
    use for the set's next pod. Made by evaluate() itself (engine.context's shard_zone_order),
    with no candidates to judge, so the checker and the engine cannot read the record apart."""
    decision = evaluate(spec, PodRequest(f"{shard}/(zone order)", shard, 0), record, [])
    order = decision_zone_order(decision)
    return order if order is not None else ZoneOrder((), "no zone order (ordinal zones off)")


def _some(pods: list[str], shown: int = 5) -> str:
    """Pod names for a message: the first few, sorted, and how many more."""
    names = sorted(pods)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class Skew:
    """One spread's skew as pods with one set of node constraints see it (see spread_skews)."""

    key: str  # the spread's topologyKey as written
    skew: int
    fullest: str
    emptiest: str
    counts: Mapping[str, int]  # eligible domain -> the group's pods counted there
    below_min_domains: int | None  # minDomains, when fewer eligible domains exist (the emptiest holds 0)

    def describe(self, s: Spread) -> str:
        head = f"{self.key} skew {self.skew} > maxSkew {s.maxSkew}: {self.key}={self.fullest} holds "
        if self.below_min_domains is not None:
            return (
                head + f"{self.counts[self.fullest]} pods; only {len(self.counts)} eligible {self.key} domain(s) "
                f"exist, fewer than minDomains {self.below_min_domains}, so the emptiest counts as 0"
            )
        return head + f"{self.counts[self.fullest]} pods, {self.key}={self.emptiest} {self.counts[self.emptiest]}"


def spread_skews(
    spec: PlacementPolicySpec,
    s: Spread,
    members: Sequence[Member],
    nodes: Mapping[str, NodeInfo],
    topology: Topology | None = None,
) -> list[Skew]:
    """The spread's skew for each distinct set of node constraints among the members (pods of
    one template share one): under the spread's nodeAffinityPolicy / nodeTaintsPolicy, a pod
    sees only the eligible domains and the pods on the nodes its constraints admit
    (engine.spread_eligibility), as native PodTopologySpread judges it. The skew is the fullest
    domain holding one of those pods minus the emptiest eligible domain, which counts as 0
    while fewer eligible domains than minDomains exist. Pods on no eligible domain have none."""
    topology = topology or Topology(nodes.values())
    key = s.topologyKey  # as the policy names it, for the message
    alike: dict[NodeConstraints | None, list[Member]] = {}
    for m in members:
        alike.setdefault(m.constraints, []).append(m)
    out = []
    for constraints, own in alike.items():
        eligible, admitted = spread_eligibility(spec, s, constraints, topology)
        if not eligible:
            continue
        counted = Counter(
            _domain(nodes.get(m.node), s.topologyKey, spec) for m in members if admitted is None or m.node in admitted
        )
        counts = {d: counted.get(d, 0) for d in eligible}
        held = {_domain(nodes.get(m.node), s.topologyKey, spec) for m in own if admitted is None or m.node in admitted}
        held &= counts.keys()
        if not held:
            continue
        fullest = max(held, key=lambda d: (counts[d], d))
        emptiest = min(counts, key=lambda d: (counts[d], d))
        below = s.minDomains if s.minDomains is not None and len(counts) < s.minDomains else None
        low = 0 if below is not None else counts[emptiest]
        out.append(Skew(key, counts[fullest] - low, fullest, emptiest, counts, below))
    return out


def max_skew(spec: PlacementPolicySpec, key: str, members: Sequence[Member], nodes: Mapping[str, NodeInfo]) -> int:
    """Pods in the fullest minus the emptiest eligible domain of `key` (schedulable nodes,
    permitted zones; for a key a spread uses, the nodes its node inclusion policies admit for the
    pods and minDomains's empty domains, as the spread check sees it)."""
    canonical = spec.canonical_key(key)
    spreads = [s for s in spec.spread if spec.canonical_key(s.topologyKey) == canonical]
    if not spreads:
        values = domain_counts(spec, key, members, nodes).values()
        return (max(values) - min(values)) if values else 0
    topology = Topology(nodes.values())
    return max((k.skew for s in spreads for k in spread_skews(spec, s, members, nodes, topology)), default=0)


def domain_counts(
    spec: PlacementPolicySpec, key: str, members: Sequence[Member], nodes: Mapping[str, NodeInfo]
) -> dict[str, int]:
    """The group's pods in each eligible domain of `key` (schedulable nodes, permitted zones; every node counts)."""
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

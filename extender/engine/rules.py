"""Hard rules: each says, for one node, why the pod may not go there (or nothing).

Reasons are written for the person reading `kubectl describe pod`: the rule, the numbers, and
what would have to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..policy import AntiAffinityMode, WhenUnsatisfiable
from .context import Context
from .model import NodeInfo, Outcome


@dataclass(frozen=True, slots=True)
class Failure:
    outcome: Outcome
    rule: str
    reason: str


HardRule = Callable[[Context, NodeInfo], Failure | None]


def zones_rule(ctx: Context, node: NodeInfo) -> Failure | None:
    """Required zones (zones.allowed, and the zones of zones.fallbackGroups).

    Invariant: zone(node) is in the permitted zones; a node without a zone label is refused
    while the policy restricts zones. Unresolvable: no preemption changes a node's zone.
    """
    if ctx.permitted is None:
        return None
    zone = ctx.domain(node, ctx.zone_key)
    if zone is None:
        return Failure(
            Outcome.UNRESOLVABLE, "zones", f"node has no zone label ({ctx.zone_key}) and the policy restricts zones"
        )
    if zone not in ctx.permitted:
        return Failure(
            Outcome.UNRESOLVABLE,
            "zones",
            f"zone {zone} is not among the allowed zones ({', '.join(sorted(ctx.permitted))})",
        )
    return None


def ordinal_zone_rule(ctx: Context, node: NodeInfo) -> Failure | None:
    """StatefulSet pods pinned to zones by ordinal (crl-scheduler, made stable: zone_order.py).

    Invariant: zone(node) = order[ordinal mod len(order)], or zone(node) holds a volume the pod's
    claims are bound to (a pod is never stranded away from its volume).
    """
    if ctx.zone_order is None:
        return None
    zone = ctx.domain(node, ctx.zone_key)
    if zone is None:
        return Failure(Outcome.UNRESOLVABLE, "ordinalZones", f"node has no zone label ({ctx.zone_key})")
    if zone == ctx.ideal_zone or zone in ctx.pod.volume_zones:
        return None
    if ctx.ideal_zone is None:
        return Failure(
            Outcome.UNRESOLVABLE, "ordinalZones", "no schedulable node with a zone label in the permitted zones"
        )
    # Short, and the same for every node of a zone: kube-scheduler counts identical reasons
    # ("4 ordinal 1 belongs in zone b ...") and the answer stays small; explain says why.
    return Failure(
        Outcome.UNRESOLVABLE,
        "ordinalZones",
        f"ordinal {ctx.pod.ordinal} belongs in zone {ctx.ideal_zone} (zone order "
        f"[{', '.join(ctx.zone_order.order)}]); node is in zone {zone}",
    )


def _missing_label(rule: str, key: str) -> Failure:
    return Failure(Outcome.UNRESOLVABLE, rule, f"node has no {key} label")


def caps_rule(ctx: Context, node: NodeInfo) -> Failure | None:
    """At most so many of the group's pods per domain (a node, a zone, a rack).

    Invariant, per cap on key K with limit L (max, or from fraction p/q of group size N:
    LessThan: L = ceil(p/q x N) - 1; AtMost: L = floor(p/q x N)):
        pods of the group in K(node) + 1 <= L
    A fractional cap without a known group size refuses every node, saying why.
    """
    for cap, key, limit in ctx.caps:
        if limit is None:
            return Failure(
                Outcome.UNRESOLVABLE,
                "caps",
                f"cap '{cap.describe(None)}' needs the group size, which is unknown: set group.size "
                "or make the group's StatefulSets visible to the extender",
            )
        value = ctx.domain(node, key)
        if value is None:
            return _missing_label("caps", key)
        have = ctx.counts[key].get(value, 0)
        if have + 1 > limit:
            return Failure(
                Outcome.FAIL,
                "caps",
                f"{ctx.where(key, value)} already holds {have} of the group's pods; the cap "
                f"({cap.describe(ctx.group_size)}) allows {limit}",
            )
    return None


def min_count(ctx: Context, key: str) -> int:
    """The emptiest eligible domain's group pod count (native PodTopologySpread's global minimum).

    Computed once per decision and key, from the group's (few) occupied domains, never by
    walking every node.
    """
    cached = ctx.min_counts.get(key)
    if cached is not None:
        return cached
    domains = ctx.eligible_domains(key)
    counts = ctx.counts[key]
    occupied = [c for d, c in counts.items() if c > 0 and d in domains]
    low = min(occupied) if domains and len(occupied) == len(domains) else 0
    ctx.min_counts[key] = low
    return low


def spread_rule(ctx: Context, node: NodeInfo) -> Failure | None:
    """Even spread over a key, with the native PodTopologySpread filter's meaning.

    Invariant, per DoNotSchedule spread on key K:
        skew = pods of the group in K(node) + 1 - min over eligible domains d of pods in d <= maxSkew
    Eligible domains are those of schedulable nodes in the permitted zones (min_count); an
    eligible domain with no pod makes the minimum 0.
    """
    for spread in ctx.spec.spread:
        if spread.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        key = ctx.spec.canonical_key(spread.topologyKey)
        value = ctx.domain(node, key)
        if value is None:
            return _missing_label("spread", key)
        have = ctx.counts[key].get(value, 0)
        low = min_count(ctx, key)
        skew = have + 1 - low
        if skew > spread.maxSkew:
            return Failure(
                Outcome.FAIL,
                "spread",
                f"{ctx.where(key, value)} would hold {have + 1} of the group's pods while the emptiest domain "
                f"holds {low}: "
                f"skew {skew} > maxSkew {spread.maxSkew}",
            )
    return None


def anti_affinity_rule(ctx: Context, node: NodeInfo) -> Failure | None:
    """Shard members kept apart: pods of one StatefulSet never share a domain.

    Invariant, per Required rule on key K: pods of the pod's StatefulSet in K(node) = 0.
    """
    if ctx.pod.shard is None:
        return None
    for rule in ctx.spec.shardAntiAffinity:
        if rule.mode is not AntiAffinityMode.REQUIRED:
            continue
        key = ctx.spec.canonical_key(rule.topologyKey)
        value = ctx.domain(node, key)
        if value is None:
            return _missing_label("shardAntiAffinity", key)
        if ctx.shard_counts[key].get(value, 0) > 0:
            return Failure(
                Outcome.FAIL,
                "shardAntiAffinity",
                f"{ctx.where(key, value)} already holds a pod of StatefulSet {ctx.pod.shard} (required anti-affinity)",
            )
    return None


HARD_RULES: tuple[HardRule, ...] = (zones_rule, ordinal_zone_rule, caps_rule, spread_rule, anti_affinity_rule)


def first_failure(ctx: Context, node: NodeInfo) -> Failure | None:
    for rule in HARD_RULES:
        failure = rule(ctx, node)
        if failure is not None:
            return failure
    return None


def all_failures(ctx: Context, node: NodeInfo) -> list[Failure]:
    """Every hard rule a node breaks (for explain)."""
    return [f for f in (rule(ctx, node) for rule in HARD_RULES) if f is not None]

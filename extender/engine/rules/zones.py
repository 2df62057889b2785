"""Zones: required zones, ordered fallback zone groups (Karmada's), and zone weights (Open Cluster Management's)."""

from __future__ import annotations

from collections.abc import Sequence

from ...api.policy import PlacementPolicySpec
from ..context import Context
from ..model import CandidateClass, NodeInfo, Outcome
from .base import DeadEndTerms, Exactness, Failure, ImpliedFragment, NativeFragment, Rule

NAME = "zones"
FALLBACK = "fallbackGroups"


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant: zone(node) is in the permitted zones (zones.allowed, and the zones of
    zones.fallbackGroups); a node without a zone label is refused while the policy restricts
    zones. Unresolvable: no preemption changes a node's zone.
    """
    if ctx.permitted is None:
        return None
    zone = ctx.domain(node, ctx.zone_key)
    if zone is None:
        return Failure(
            Outcome.UNRESOLVABLE, NAME, f"node has no zone label ({ctx.zone_key}) and the policy restricts zones"
        )
    if zone not in ctx.permitted:
        return Failure(
            Outcome.UNRESOLVABLE,
            NAME,
            f"zone {zone} is not among the allowed zones ({', '.join(sorted(ctx.permitted))})",
        )
    return None


def narrow(ctx: Context, passing: list[CandidateClass]) -> list[CandidateClass]:
    """Fallback groups, in order: keep only the first group that has a feasible candidate. Runs
    after dead-end avoidance, so a group whose every node is a dead end hands over to the next."""
    groups = ctx.spec.zones.fallbackGroups if ctx.spec.zones else None
    if not groups or not passing:
        return passing
    zone = {id(k): ctx.domain(k.node, ctx.zone_key) for k in passing}  # a class is within one zone
    for index, group in enumerate(groups, start=1):
        members = set(group)
        chosen = [k for k in passing if zone[id(k)] in members]
        if chosen:
            for k in passing:
                if zone[id(k)] not in members:
                    k.refuse(
                        Outcome.FAIL,
                        FALLBACK,
                        f"zone group {index} ({', '.join(group)}) still has feasible nodes; "
                        "later groups are used only when it has none",
                    )
            return chosen
    return passing


def score(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float] | None:
    """Zone weights (0-100, unlisted zones 0), scaled to 0..1 by the largest."""
    weights = ctx.spec.zones.weights if ctx.spec.zones else None
    if not weights:
        return None
    top = max(weights.values()) or 1
    values = [weights.get(ctx.domain(n, ctx.zone_key) or "", 0) / top for n in nodes]
    return values if max(values) > min(values) else None


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """Required zones: only nodes of the permitted zones form the node classes."""
    if ctx.permitted is not None:
        terms.zone_needed = True


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """Required node affinity on the zone, the very constraint imply gives adopt; fallback groups
    and weights only as preferences."""
    zone = spec.topology.zone
    permitted = spec.zones.permitted() if spec.zones else None
    # No minDomains on the zone spread: the rule's eligible domains are the permitted zones that
    # have schedulable nodes, which is what native counts under this required affinity (Honor).
    if permitted is not None:
        out.required_nodes.append({"matchExpressions": [{"key": zone, "operator": "In", "values": sorted(permitted)}]})
    groups = spec.zones.fallbackGroups if spec.zones else None
    if groups:
        step = max(1, 100 // len(groups))
        for i, group in enumerate(groups):
            out.preferred_nodes.append(
                {
                    "weight": max(1, 100 - i * step),
                    "preference": {"matchExpressions": [{"key": zone, "operator": "In", "values": list(group)}]},
                }
            )
        out.gap(
            "zones.fallbackGroups",
            "native node affinity can only prefer earlier groups by score",
            "a pod may land in a later group while the first still has room, whenever other scores outweigh "
            "the preference (Karmada's ordered groups are strict)",
        )
    for zone_name, weight in sorted((spec.zones.weights or {}).items() if spec.zones else ()):
        if weight > 0:
            out.preferred_nodes.append(
                {
                    "weight": weight,
                    "preference": {"matchExpressions": [{"key": zone, "operator": "In", "values": [zone_name]}]},
                }
            )


def imply(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """Permitted zones: required node affinity `zone In permitted`, which refuses exactly what the
    check refuses (a node outside them, or without the zone label; the engine's fallback to the
    legacy zone label aside, which no kubelet since 1.17 needs). Fallback groups are a relaxation:
    the union is mirrored, their order is not (native affinity cannot say "the next group only
    when the first is full"). Weights are preferences: not mirrored."""
    permitted = spec.zones.permitted() if spec.zones else None
    if permitted is None:
        return
    zone = spec.topology.zone
    out.node_requirements.append({"key": zone, "operator": "In", "values": sorted(permitted)})
    if spec.zones is not None and spec.zones.fallbackGroups:
        out.mirror(
            FALLBACK,
            Exactness.RELAXED,
            f"required node affinity {zone} In [{', '.join(sorted(permitted))}]: the groups' union, not their order",
        )
    else:
        out.mirror(NAME, Exactness.EXACT, f"required node affinity {zone} In [{', '.join(sorted(permitted))}]")


RULE = Rule(NAME, check, dead_end, translate, imply, score=score, narrow=narrow)

"""Preemption's own rule: evicting victims must not take a group's last pod out of a zone."""

from __future__ import annotations

from collections.abc import Set

from ..api.policy import PlacementPolicySpec
from .context import Context
from .model import PodRequest, Snapshot


def zone_left_empty(
    spec: PlacementPolicySpec, victim: PodRequest, snap: Snapshot, node: str, evicted: Set[str]
) -> str | None:
    """The zone of `node` if the victim's group would have no pod left there once `evicted` (pod
    keys) are gone, else None. `snap` is the victim's group, listed (not counted)."""
    ctx = Context.build(spec, victim, snap)
    info = snap.topology.nodes.get(node)
    zone = ctx.domain(info, ctx.zone_key) if info is not None else None
    if zone is None:
        return None
    survivors = (p for p in snap.placements if p.pod not in evicted and ctx.placement_domain(p, ctx.zone_key) == zone)
    return None if any(True for _ in survivors) else zone

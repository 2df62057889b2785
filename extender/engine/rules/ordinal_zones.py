"""Ordinal zones: StatefulSet pod i in zone order[i mod Z] (crl-scheduler), made durable.

The zone order itself is engine/zone_order.py (decided once, then read from the set's
ZoneRotation record); the dead-end analysis gives each pod still to come its ordinal's zone
(lookahead.pods_to_come).
"""

from __future__ import annotations

from collections.abc import Sequence

from ...api.policy import NodeInclusionPolicy, PlacementPolicySpec, WhenUnsatisfiable
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import DeadEndTerms, Exactness, Failure, ImpliedFragment, NativeFragment, Rule

NAME = "ordinalZones"


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant: zone(node) = order[ordinal mod len(order)], or zone(node) holds a volume the
    pod's claims are bound to (a pod is never stranded away from its volume), or the ordinal was
    running in zone(node) when the set was adopted (the record's `adopted`: nothing running moves,
    and a pod a rolling update recreates may return where it ran, so adopting a set whose pods
    follow no rotation cannot stall its rollout).

    A pod the rule cannot place (no StatefulSet owns it, or its name carries no ordinal) is
    refused on every node, naming the field: a hard rule that cannot be evaluated must not let
    the pod land anywhere.
    """
    if ctx.spec.ordinalZones is None:
        return None
    if ctx.pod.shard is None:
        return Failure(
            Outcome.UNRESOLVABLE,
            NAME,
            "the policy sets ordinalZones, which places StatefulSet pods by ordinal, but no StatefulSet owns "
            "this pod: remove ordinalZones from the policy of pods without a StatefulSet",
        )
    if ctx.pod.ordinal is None:
        return Failure(
            Outcome.UNRESOLVABLE,
            NAME,
            "the policy sets ordinalZones, but this pod's name carries no StatefulSet ordinal (pod-name label "
            "missing or no -<ordinal> suffix): it cannot be given a zone",
        )
    if ctx.zone_order is not None and ctx.zone_order.waiting:
        # Every node alike, its volume's zone too: the committed record decides, not this cluster.
        return Failure(Outcome.UNRESOLVABLE, NAME, ctx.zone_order.how)
    zone = ctx.domain(node, ctx.zone_key)
    if zone is None:
        return Failure(Outcome.UNRESOLVABLE, NAME, f"node has no zone label ({ctx.zone_key})")
    if zone == ctx.ideal_zone or zone in ctx.pod.volume_zones or zone == _adopted_zone(ctx):
        return None
    if ctx.ideal_zone is None:
        return Failure(Outcome.UNRESOLVABLE, NAME, "no schedulable node with a zone label in the permitted zones")
    # Short, and the same for every node of a zone: kube-scheduler counts identical reasons
    # ("4 ordinal 1 belongs in zone b ...") and the answer stays small; explain says why.
    order = ", ".join(ctx.zone_order.order)
    if ctx.usable_domains(ctx.zone_key).get(ctx.ideal_zone, 0) <= 0:
        return Failure(
            Outcome.UNRESOLVABLE,
            NAME,
            f"ordinal {ctx.pod.ordinal} belongs in zone {ctx.ideal_zone} (zone order [{order}]), which has no "
            "schedulable node now: it waits for that zone",
        )
    adopted = _adopted_zone(ctx)
    also = f" or {adopted}, where it ran when the set was adopted" if adopted else ""
    return Failure(
        Outcome.UNRESOLVABLE,
        NAME,
        f"ordinal {ctx.pod.ordinal} belongs in zone {ctx.ideal_zone}{also} (zone order [{order}]); node is in zone "
        f"{zone}",
    )


def _adopted_zone(ctx: Context) -> str | None:
    if ctx.zone_order is None or ctx.pod.ordinal is None:
        return None
    return ctx.zone_order.adopted.get(ctx.pod.ordinal)


def zones_for(ctx: Context) -> frozenset[str] | None:
    """The zones the check accepts for the context's pod (its ordinal's zone, its volumes', the
    zone it was adopted in), or
    None when it accepts none yet (no zone order: no schedulable zone was ever seen) or the pod is
    not one the rule places (no StatefulSet or ordinal: the check refuses it everywhere)."""
    if ctx.spec.ordinalZones is None or ctx.pod.shard is None or ctx.pod.ordinal is None:
        return None
    if ctx.ideal_zone is None:
        return None
    adopted = _adopted_zone(ctx)
    return frozenset({ctx.ideal_zone, *ctx.pod.volume_zones, *((adopted,) if adopted else ())})


def score(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float] | None:
    """An adopted ordinal back in the zone it ran in: 1 there, 0 in its rotation zone. The check
    accepts both, so that a rollout cannot stall; this preference is what makes "nothing running
    moves" hold when both have room (without it, the tie-break sent a recreated pod to its
    rotation zone about half the time). The strongest preference (rules.SCORED): the zone a pod
    ran in is the one promise made to it before any other preference was asked for."""
    adopted = _adopted_zone(ctx)
    if adopted is None or ctx.spec.ordinalZones is None:
        return None
    values = [1.0 if ctx.domain(n, ctx.zone_key) == adopted else 0.0 for n in nodes]
    return values if max(values) > min(values) else None


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """Each pod still to come may use only its ordinal's zone (and its volume's)."""
    if ctx.spec.ordinalZones is not None:
        terms.zone_needed = True


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """No native rule ties an ordinal to a zone: approximated by a hard zone spread of 1."""
    if spec.ordinalZones is None:
        return
    out.constraint(spec.topology.zone, 1, "DoNotSchedule")
    out.gap(
        NAME,
        "no native rule ties a StatefulSet ordinal to a zone (crl-scheduler)",
        "approximated by zone maxSkew 1: creation is balanced, but a scale-down removes the highest "
        "ordinals wherever they are and can empty a zone; a rescheduled pod is not steered back",
    )


def imply(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """Per pod, not per template: `zone In [its ordinal's zone, its volumes' zones]`, which is the
    check itself. A template cannot carry it, so the template carries a scheduling gate and the
    extender narrows each gated pod's node affinity before lifting it (extender/server/gate_patch.py)."""
    if spec.ordinalZones is None:
        return
    honoring = [
        s.topologyKey
        for s in spec.spread
        if s.whenUnsatisfiable == WhenUnsatisfiable.DO_NOT_SCHEDULE
        and s.nodeAffinityPolicy is NodeInclusionPolicy.HONOR
    ]
    if honoring:
        # A spread that honors the pod's node affinity would count only the narrowed zone's
        # nodes natively, while the rule counts the template's: stricter on some nodes.
        out.mirror(
            NAME,
            Exactness.NONE,
            f"not mirrored: narrowing each pod to its zone would change what the DoNotSchedule spread on "
            f"{', '.join(honoring)} counts natively (nodeAffinityPolicy Honor); set it to Ignore to get the mirror",
        )
        return
    out.per_pod_zone = True
    out.mirror(
        NAME,
        Exactness.EXACT,
        f"per pod: required node affinity {spec.topology.zone} In [its ordinal's zone, its volumes' zones], "
        "set by the extender while the pod is held by the scheduling gate (once the set has a zone order: "
        "before any zone has a node, the gate is lifted without it)",
    )


RULE = Rule(NAME, check, dead_end, translate, imply, score=score)

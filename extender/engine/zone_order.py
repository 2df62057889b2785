"""Ordinal -> zone mapping for StatefulSets (crl-scheduler's rule, made stable).

crl-scheduler orders the zones that have nodes by node count (descending, ties by name), then
pins each zone that holds volumes of the set to index `lowest ordinal there mod Z`. Its weakness:
Z and the node counts change when a zone is added or removed, and every ordinal's ideal zone
silently shifts with them.

Here the StatefulSet's own pods and bound volumes are the record of the mapping. The period (the
number of zones in the rotation) is the current zone count only while that is consistent with the
record; when a zone comes or goes and the running pods no longer fit the new period, the period
the record shows is kept. Running ordinals therefore never change zone; a zone added later is
used once the record allows it (or once the policy lists an explicit order); a zone that lost
its nodes leaves its ordinals Pending with a reason instead of moving them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def crl_zone_order(
    zone_node_counts: Mapping[str, int], evidence: Mapping[int, str], period: int | None = None
) -> list[str]:
    """crl-scheduler's order: node count descending, then name; evidence zones pinned by swapping.

    `evidence` maps ordinal -> zone (volumes, and here also placed pods). `period` defaults to
    the number of zones; a larger or smaller one is used by the stable variant below.
    """
    order = sorted(zone_node_counts, key=lambda z: (-zone_node_counts[z], z))
    size = period if period is not None else len(order)
    if size == 0:
        return []
    lowest: dict[str, int] = {}
    for ordinal, zone in evidence.items():
        if zone in zone_node_counts and (zone not in lowest or ordinal < lowest[zone]):
            lowest[zone] = ordinal
    for zone in sorted(zone_node_counts, key=lambda z: (-zone_node_counts[z], z)):
        if zone not in lowest:
            continue
        target = lowest[zone] % size
        here = order.index(zone)
        order[target], order[here] = order[here], order[target]
    return order[:size]


def consistent(evidence: Mapping[int, str], period: int) -> bool:
    """True when one order of length `period` explains every (ordinal, zone) in the record."""
    if period <= 0:
        return False
    zone_at: dict[int, str] = {}
    residue_of: dict[str, int] = {}
    for ordinal, zone in evidence.items():
        r = ordinal % period
        if zone_at.setdefault(r, zone) != zone or residue_of.setdefault(zone, r) != r:
            return False
    return True


@dataclass(frozen=True)
class ZoneOrder:
    order: tuple[str, ...]
    how: str  # one line for explain and events: where the order came from

    def zone_for(self, ordinal: int) -> str | None:
        return self.order[ordinal % len(self.order)] if self.order else None


def stable_zone_order(
    zone_node_counts: Mapping[str, int],
    evidence: Mapping[int, str],
    explicit: Sequence[str] | None = None,
) -> ZoneOrder:
    """The order for one StatefulSet. zone_node_counts: schedulable nodes per permitted zone."""
    if explicit:
        return ZoneOrder(tuple(explicit), "explicit order from the policy")
    live = {z: c for z, c in zone_node_counts.items() if c > 0}
    now = len(live)
    if not evidence:
        return ZoneOrder(tuple(crl_zone_order(live, {})), f"{now} zones by node count (no pods or volumes yet)")
    if consistent(evidence, now):
        return ZoneOrder(
            tuple(crl_zone_order(live, evidence)), f"{now} zones by node count, pinned by placed pods and volumes"
        )
    recorded = len(set(evidence.values()))
    if recorded != now and consistent(evidence, recorded):
        # A zone came or went since the set was placed: keep the period its pods show.
        known = dict(live)
        for zone in evidence.values():
            known.setdefault(zone, 0)
        order = crl_zone_order(known, evidence, period=recorded)
        gone = sorted(z for z in order if z not in live)
        unused = sorted(set(live) - set(order))
        how = f"kept the {recorded}-zone rotation its placed pods and volumes show"
        if gone:
            how += f"; zone(s) {', '.join(gone)} have no schedulable node now"
        if unused:
            how += (
                f"; zone(s) {', '.join(unused)} are not in this StatefulSet's rotation "
                "(list ordinalZones.order to use them)"
            )
        return ZoneOrder(tuple(order), how)
    return ZoneOrder(
        tuple(crl_zone_order(live, evidence)),
        f"{now} zones by node count; existing pods do not follow one rotation (placed before adoption?), "
        "so they stay where they are and new ordinals follow this order",
    )

"""Ordinal -> zone mapping for StatefulSets (crl-scheduler's rule, made durable).

crl-scheduler orders the zones that have nodes by node count (descending, ties by name), then
pins each zone that holds volumes of the set to index `lowest ordinal there mod Z`. Its weakness:
Z and the node counts change when a zone is added or removed, and every ordinal's ideal zone
silently shifts with them. Deriving the order again from the set's running pods instead (as an
earlier release did) fails at the moments that matter: a zone that lost its nodes drops out
of the derived period, and a set adopted with two ordinals in one zone derives a 1-zone rotation.

So the order is decided once and recorded (a ZoneRotation object, written by the extender; see
extender/api/rotation.py): `first_rotation` decides it from the state at the set's first decision,
and from then on the record is the order. A zone that loses its nodes keeps its ordinals waiting;
a zone added later joins only when the record is edited or deleted (an explicit act).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .model import RecordedRotation


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
    # True when decided here from the current state, with no record yet: the caller records it.
    derived: bool = False
    # Ordinals that were running outside the rotation when it was decided (placed before
    # adoption): left where they are, and not reported by audit while they stay there.
    adopted: Mapping[int, str] = field(default_factory=dict)
    # True when the set's record is declared beside it and not there yet: no order, and the pod
    # waits for the record rather than for a zone (`how` names the record).
    waiting: bool = False

    def zone_for(self, ordinal: int) -> str | None:
        return self.order[ordinal % len(self.order)] if self.order else None


def first_rotation(
    zone_node_counts: Mapping[str, int], volumes: Mapping[int, str], placed: Mapping[int, str]
) -> ZoneOrder:
    """The rotation a StatefulSet gets at its first decision: crl-scheduler's order over the
    zones that have schedulable nodes now, pinned by the set's bound volumes as crl pins them.

    Running pods pin it too when they and the volumes fit one rotation over every zone (a set the
    extender already placed, e.g. before records existed). When they do not (a set placed by
    another scheduler, two ordinals in one zone), they are left where they are, listed as
    adopted, and the order is crl's from the volumes alone: new ordinals spread over every zone
    instead of following the running pods into one."""
    live = {z: c for z, c in zone_node_counts.items() if c > 0}
    zones = len(live)
    if zones == 0:
        return ZoneOrder((), "no schedulable node with a zone label in the permitted zones", derived=False)
    evidence = {**placed, **volumes}  # a volume's zone wins over where its pod runs
    if placed and consistent(evidence, zones):
        order = tuple(crl_zone_order(live, evidence))
        how = f"crl order over {zones} zones, pinned by the placed pods and volumes"
    else:
        order = tuple(crl_zone_order(live, volumes))
        how = f"crl order over {zones} zones by node count" + (", pinned by volumes" if volumes else "")
    adopted = {o: z for o, z in placed.items() if z != order[o % zones] and volumes.get(o) != z}
    if adopted:
        how += f"; {len(adopted)} running pod(s) follow no rotation (placed before adoption) and stay where they are"
    return ZoneOrder(order, how, derived=True, adopted=adopted)


def zone_order_for(
    zone_node_counts: Mapping[str, int],
    volumes: Mapping[int, str],
    placed: Mapping[int, str],
    explicit: Sequence[str] | None = None,
    recorded: RecordedRotation | None = None,
    declared: str | None = None,
) -> ZoneOrder:
    """The order for one StatefulSet: the policy's explicit order, else its record, else the
    first rotation (to be recorded). zone_node_counts: schedulable nodes per permitted zone.
    `declared` names the set's record (namespace/name) when it is declared beside the set: then
    no first rotation is decided, the order waits for the record (whichever object a GitOps
    controller applies first, the set lands where the committed record says)."""
    if explicit:
        # A record beside an explicit order still says which ordinals were adopted where (adopt
        # writes one for a set whose running pods follow no rotation); its own order is unused.
        adopted = dict(recorded.adopted) if recorded is not None else {}
        how = "explicit order from the policy"
        if adopted:
            how += f"; {len(adopted)} ordinal(s) adopted outside it (ZoneRotation {recorded.name})"  # type: ignore[union-attr]
        return ZoneOrder(tuple(explicit), how, adopted=adopted)
    if recorded is None and declared is not None:
        return ZoneOrder(
            (),
            f"waiting for ZoneRotation {declared}, declared beside its StatefulSet and not applied yet",
            waiting=True,
        )
    if recorded is None:
        return first_rotation(zone_node_counts, volumes, placed)
    how = f"recorded in ZoneRotation {recorded.name}"
    gone = sorted(z for z in set(recorded.order) if zone_node_counts.get(z, 0) <= 0)
    unused = sorted(z for z, c in zone_node_counts.items() if c > 0 and z not in recorded.order)
    if gone:
        how += f"; zone(s) {', '.join(gone)} have no schedulable node now: their ordinals wait"
    if unused:
        how += f"; zone(s) {', '.join(unused)} are not in the rotation (edit or delete the record to use them)"
    return ZoneOrder(tuple(recorded.order), how, adopted=dict(recorded.adopted))

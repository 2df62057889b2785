"""Which of kube-scheduler's victim sets the extender keeps: those after which the preemptor
passes its policy's hard rules and no victim's policy group loses its last pod in a zone."""

from __future__ import annotations

import logging
from dataclasses import replace

from ..api.policy import PlacementPolicySpec, PolicyError
from ..engine import evaluate, zone_left_empty
from ..state.objects import PodRecord
from ..state.store import ClusterStore

log = logging.getLogger(__name__)


def victims_allowed(
    store: ClusterStore, pod: PodRecord, spec: PlacementPolicySpec | None, node: str, uids: set[str]
) -> bool:
    """Called under the store lock."""
    evicted = {store.pods[u].key for u in uids if u in store.pods}
    if spec is not None:
        try:
            request, snap = store.decision_inputs(pod, spec, counted=False)
        except PolicyError:
            return False
        snap = replace(snap, placements=tuple(p for p in snap.placements if p.pod not in evicted))
        if not evaluate(spec, request, snap, [node], dead_end_avoidance=False).verdicts[node].passed:
            return False
    for uid in uids:
        victim = store.pods.get(uid)
        zone = _last_in_zone(store, victim, evicted) if victim is not None else None
        if zone is not None:
            log.info("preemption on %s refused: it would empty zone %s of %s's group", node, zone, victim.key)  # type: ignore[union-attr]
            return False
    return True


def _last_in_zone(store: ClusterStore, victim: PodRecord, evicted: set[str]) -> str | None:
    """The zone the victim's policy group would lose entirely, if any."""
    try:
        spec = store.resolve_policy(victim)
        if spec is None or not spec.uses_zones or victim.node is None:
            return None
        request, snap = store.decision_inputs(victim, spec, counted=False)
    except PolicyError:
        return None
    return zone_left_empty(spec, request, snap, victim.node, evicted)

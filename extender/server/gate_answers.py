"""What to do with a pod held by the ordinal-zone gate (server/gate_patch.py says why the gate
exists): AND its ordinal's zone (and its volumes') into its node affinity and lift the gate, or
lift it as it is when there is nothing to narrow; None: not now (cache unsynced, or pod gone).

The zones come from the same zone order the filter uses, recorded when this is the set's first
decision, so the narrowing and every later filter agree. Lifting never lets a pod past a rule:
the filter still judges every node.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.policy import ORDINAL_ZONE_GATE, PlacementPolicySpec, PolicyError
from ..engine import ordinal_pod_zones
from ..engine.implied import implied
from ..state.objects import PodRecord
from ..state.store import ClusterStore
from .rotation_records import RotationRecorder


@dataclass(frozen=True)
class GateAnswer:
    """For a pod held by one of the extender's gates: the node requirement to AND into its
    affinity before lifting `gate` (None: lift it as it is), and why, for the log."""

    pod: PodRecord
    requirement: dict[str, object] | None
    why: str
    gate: str = ORDINAL_ZONE_GATE


def gate_answer(store: ClusterStore, rotations: RotationRecorder, uid: str) -> GateAnswer | None:
    """The answer for the gated pod `uid`, decided under the store lock."""
    with store.lock.held("gate"):
        if store.not_synced() is not None:
            return None
        pod = store.pods.get(uid)
        if pod is None or not pod.gated or not store.owns(pod):
            return None  # gone, lifted, or not the extender's pod: it lifts only its own pods' gates
        try:
            spec = store.resolve_policy(pod)
        except PolicyError as err:
            if pod.rotation_declared and pod.policy_ref is not None and store.policies_enabled:
                if (pod.namespace, pod.policy_ref) not in store.policies:
                    return None  # committed beside the set with its record, not applied yet: wait
            return GateAnswer(pod, None, f"its policy is invalid, which the filter reports: {err}")
        if spec is None or spec.ordinalZones is None:
            return GateAnswer(pod, None, "its policy does not place pods by ordinal zone")
        if not _mirrored(store, pod, spec):
            return GateAnswer(
                pod, None, "its policy's ordinal zones have no exact native mirror (docs/how-to/autoscalers.md)"
            )
        return _narrowing(store, rotations, pod, spec)


def _mirrored(store: ClusterStore, pod: PodRecord, spec: PlacementPolicySpec) -> bool:
    sts = store.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
    try:
        return implied(spec, group_labels=(sts.selector_labels if sts else None) or pod.labels).gate
    except ValueError:
        return False


def _narrowing(
    store: ClusterStore, rotations: RotationRecorder, pod: PodRecord, spec: PlacementPolicySpec
) -> GateAnswer | None:
    assert spec.ordinalZones is not None
    try:
        request, snap = store.decision_inputs(pod, spec)
    except PolicyError as err:
        return GateAnswer(pod, None, f"its policy is invalid, which the filter reports: {err}")
    zones, order = ordinal_pod_zones(spec, request, snap)
    if order is not None and order.waiting:
        return None  # its committed ZoneRotation is not applied yet: the gate stays until it is
    if zones is None or order is None:
        return GateAnswer(pod, None, "no zone order yet (no zone has a schedulable node): the filter judges")
    if spec.ordinalZones.order is None and pod.shard is not None:
        # Narrow only from an order the cluster holds (a ZoneRotation the watch has shown):
        # two replicas, or this one after a restart, then narrow alike and the filter agrees.
        if (pod.namespace, pod.shard) not in store.rotations:
            if not store.rotations_enabled:
                return GateAnswer(pod, None, "no ZoneRotation CRD, so no recorded order to narrow by")
            if order.derived:
                rotations.record(pod, order)
            return None  # the next pass, once the watch shows the record
    requirement = {"key": spec.topology.zone, "operator": "In", "values": sorted(zones)}
    return GateAnswer(pod, requirement, f"ordinal {pod.ordinal} belongs in {', '.join(sorted(zones))}")

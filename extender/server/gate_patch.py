"""The ordinal-zone scheduling gate: the one write that shows autoscalers a pod's zone.

A pod template cannot say "ordinal i goes to zone z", so `adopt` puts the gate ORDINAL_ZONE_GATE
in the template of a StatefulSet whose policy places pods by ordinal zone. While a pod is gated,
kube-scheduler leaves it alone and its node affinity may be narrowed (KEP-3838, GA in 1.30). The
extender (server/gates.py) takes the zone from an order the cluster holds (the policy's own, or the
set's ZoneRotation once the watch shows it: every replica narrows alike), ANDs
`zone In [its ordinal's zone, its volumes' zones]` into every
required nodeSelectorTerm and removes the gate, in one JSON patch that first tests the pod's
resourceVersion: the narrowing and the lift land together or not at all. From then on an
autoscaler that finds the pod Pending simulates a node in the right zone.

Why it cannot be a way around the policy: the narrowing only adds a requirement the rule itself
makes (never stricter, tests/unit/test_implied.py), and lifting the gate only hands the pod to
kube-scheduler, whose every node the extender still filters. A pod whose gate someone else
removes is placed exactly as before; it only loses the autoscaler's view of its zone.
"""

from __future__ import annotations

import json
from typing import Any

from ..api.policy import NARROWED_ZONES_ANNOTATION, ORDINAL_ZONE_GATE
from ..engine.implied import Implied, add_to_spec


def _pointer(key: str) -> str:
    """A JSON pointer segment (RFC 6901): '~' and '/' escaped."""
    return key.replace("~", "~0").replace("/", "~1")


def lift_patch(
    pod: dict[str, Any], requirement: dict[str, Any] | None, gate: str = ORDINAL_ZONE_GATE
) -> list[dict[str, Any]]:
    """The JSON patch that narrows a gated pod's node affinity by `requirement` (None: no
    narrowing) and removes `gate` (the ordinal-zone gate, or the placeable gate of
    server/place_gate.py, which never narrows), guarded by the pod's resourceVersion."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}]
    if requirement is not None:
        narrowed, _, _ = add_to_spec(
            {"affinity": spec["affinity"]} if spec.get("affinity") else {}, Implied(node_requirements=[requirement])
        )
        ops.append({"op": "add", "path": "/spec/affinity", "value": narrowed["affinity"]})
        note = json.dumps({"key": requirement["key"], "values": requirement["values"]}, separators=(",", ":"))
        if meta.get("annotations"):
            ops.append(
                {"op": "add", "path": f"/metadata/annotations/{_pointer(NARROWED_ZONES_ANNOTATION)}", "value": note}
            )
        else:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {NARROWED_ZONES_ANNOTATION: note}})
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != gate]
    if gates:
        ops.append({"op": "replace", "path": "/spec/schedulingGates", "value": gates})
    else:
        ops.append({"op": "remove", "path": "/spec/schedulingGates"})
    return ops


def carries_gate(pod: dict[str, Any], gate: str = ORDINAL_ZONE_GATE) -> bool:
    return any(g.get("name") == gate for g in (pod.get("spec") or {}).get("schedulingGates") or [])

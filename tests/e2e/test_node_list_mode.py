"""The extender protocol's other node mode: kube-scheduler with `nodeCacheCapable: false`.

Then kube-scheduler sends (and reads back) whole Node objects instead of names, and the
extender judges nodes by the labels sent (README "Performance": the shipped configuration names
nodes; this mode is what an older or hand-written scheduler configuration may use). Its Go
encoding of Node objects is what changes between minors, so it runs on every one.

1. A burst: 4 StatefulSets x 9 (at most 1 pod per node, zones within one of each other) over 3
   zones x 4 nodes: every pod placed, 0 violations.
2. Reasons when no node passes: a StatefulSet of 3 allowed one zone of 2 nodes under a per-node
   cap of 1: the third pod stays Pending and its PodScheduled message carries the extender's
   reasons (the cap's for the zone's nodes, the zone rule's for every other).
"""

from __future__ import annotations

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import HOSTNAME, NodeSpec, zoned_nodes

from .workloads import (
    ZONE,
    _scheduled_message,
    create_statefulset,
    node_zones,
    per_statefulset_violations,
    pods,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"extender_config": {"nodeCacheCapable": False}}
ZONES = ["nl-a", "nl-b", "nl-c"]
POLICY = {
    "zones": {"allowed": ZONES},
    "caps": [{"topologyKey": HOSTNAME, "max": 1}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}


def test_a_burst_is_placed_within_its_rules_with_whole_nodes_on_the_wire(cluster, scenario) -> None:
    config = (cluster.workdir / "placement-scheduler.yaml").read_text()
    assert "nodeCacheCapable: false" in config
    cluster.add_nodes(zoned_nodes({z: 4 for z in ZONES}, prefix="nl"))
    api, ns = cluster.admin, cluster.namespace("node-list")
    zone_of = node_zones(api)
    for i in range(4):
        create_statefulset(api, ns, statefulset(f"nl-{i}", 9, labels={"mode": "list"}, policy=POLICY))
    placed = wait_settled(api, ns, "mode=list", 36, timeout=180)
    assert per_statefulset_violations(placed, zone_of, ZONES, cap=1) == []
    scenario.repetitions, scenario.pods_placed = 1, 36
    scenario.note = "nodeCacheCapable false: 4 x 9 over 3 zones x 4 nodes, cap 1 + zone spread"


def test_a_pod_no_node_takes_gets_the_extenders_reason(cluster, scenario) -> None:
    cluster.add_nodes([NodeSpec("nl-solo-1", "nl-solo"), NodeSpec("nl-solo-2", "nl-solo")])
    api, ns = cluster.admin, cluster.namespace("node-list-reasons")
    policy = {"zones": {"allowed": ["nl-solo"]}, "caps": [{"topologyKey": HOSTNAME, "max": 1}]}
    create_statefulset(api, ns, statefulset("solo", 3, labels={"mode": "solo"}, policy=policy))

    def third_pending_with_reason():
        items = pods(api, ns, "mode=solo")
        waiting = [p for p in items if not p["spec"].get("nodeName")]
        if len(items) == 3 and len(waiting) == 1 and "already holds 1" in _scheduled_message(waiting[0]):
            return waiting[0]
        return None

    waiting = wait_for("the third pod Pending with the cap's reason", third_pending_with_reason, 60)
    message = _scheduled_message(waiting)
    assert "not among the allowed zones" in message, message  # every other node's reason too
    scenario.repetitions, scenario.pods_placed, scenario.pending = 1, 2, 1
    scenario.note = "no node passes: the reasons are sent and shown in PodScheduled"

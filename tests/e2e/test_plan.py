"""`plan` on the local control plane, read back from the API server.

1. Grow: 3 zones x 1 node, a StatefulSet of 3 under ordinal zones + a per-node cap of 1. `plan
   --replicas 5` says it needs 2 nodes, one in zone a and one in zone b (exit 1). With only the
   zone-a node added and the set scaled to 5, ordinal 4 stays Pending; with the zone-b node too,
   every pod is placed with 0 violations, and `plan` now exits 0.
2. Drain: with 2 nodes in zone a and 1 in each of b and c, `plan drain` calls a zone-a node safe and
   the zone-b node unsafe. Draining the zone-b node (cordon, delete its pod) leaves its ordinal
   Pending; draining the safe one places its pod again on the other zone-a node.
"""

from __future__ import annotations

import re

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec

from .workloads import cli, create_statefulset, ordinal, pods, scale, statefulset, wait_settled

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"


def setup(cluster, label: str, layout: dict[str, int], replicas: int) -> tuple[str, list[str]]:  # noqa: ANN001
    zones = [f"{label}-{z}" for z in layout]
    cluster.add_nodes(NodeSpec(f"{label}-{z}{i}", f"{label}-{z}") for z, n in layout.items() for i in range(1, n + 1))
    ns = cluster.namespace(label)
    policy = {"ordinalZones": {"order": zones}, "zones": {"allowed": zones}, "caps": [{"topologyKey": HOST, "max": 1}]}
    create_statefulset(cluster.admin, ns, statefulset(label, replicas, policy=policy))
    wait_settled(cluster.admin, ns, f"app={label}", replicas)
    return ns, zones


def test_plan_names_the_nodes_a_growth_needs_and_one_fewer_is_not_enough(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    ns, zones = setup(cluster, "pg", {"a": 1, "b": 1, "c": 1}, 3)
    out = cli(cluster, "plan", "statefulset/pg", "--replicas", "5", "-n", ns)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "add 2 node(s): 1 in pg-a (like pg-a1), 1 in pg-b (like pg-b1)" in out.stdout, out.stdout
    assert out.stderr == "", f"an operator command prints its answer and nothing else: {out.stderr}"
    verbose = cli(cluster, "plan", "statefulset/pg", "--replicas", "5", "-n", ns, "-v")
    assert verbose.stdout == out.stdout
    listed = re.findall(r"listed \d+ (\w+)", verbose.stderr)
    assert listed and len(listed) == len(set(listed)), f"-v shows progress, and the cluster is read once: {listed}"
    cluster.add_nodes([NodeSpec("pg-a2", "pg-a")])  # one fewer than the plan
    scale(api, ns, "pg", 5)

    def four_placed_one_pending():
        items = pods(api, ns, "app=pg")
        placed = [p for p in items if p["spec"].get("nodeName")]
        waiting = [ordinal(p) for p in items if not p["spec"].get("nodeName")]
        return items if len(placed) == 4 and waiting == [4] else None

    wait_for("ordinals 0-3 placed, 4 Pending", four_placed_one_pending, 60)
    cluster.add_nodes([NodeSpec("pg-b2", "pg-b")])
    placed = wait_settled(api, ns, "app=pg", 5, timeout=60)
    zone_of = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in api.list("/api/v1/nodes")
    }
    wrong = [p["metadata"]["name"] for p in placed if zone_of[p["spec"]["nodeName"]] != zones[ordinal(p) % 3]]
    per_node = [p["spec"]["nodeName"] for p in placed]
    violations = len(wrong) + len(per_node) - len(set(per_node))
    assert violations == 0, (wrong, per_node)
    assert cli(cluster, "plan", "statefulset/pg", "--replicas", "5", "-n", ns).returncode == 0
    scenario.repetitions, scenario.pods_placed, scenario.violations = 1, len(placed), violations
    scenario.note = "plan: 2 nodes (pg-a, pg-b); with 1 added ordinal 4 waited; with 2 all placed"


def test_plan_drain_tells_a_safe_node_from_an_unsafe_one(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    ns, _ = setup(cluster, "pd", {"a": 2, "b": 1, "c": 1}, 3)
    where = {ordinal(p): p["spec"]["nodeName"] for p in pods(api, ns, "app=pd")}
    safe_node, unsafe_node = where[0], where[1]  # ordinal 0 in zone a (2 nodes), 1 in zone b (1 node)
    out = cli(cluster, "plan", "drain", f"node/{unsafe_node}")
    assert out.returncode == 1 and "UNSAFE" in out.stdout and "NOT placeable again" in out.stdout, out.stdout
    out = cli(cluster, "plan", "drain", f"node/{safe_node}")
    assert out.returncode == 0 and "safe to remove" in out.stdout, out.stdout

    def drain(node_name: str) -> None:
        api.merge_patch(f"/api/v1/nodes/{node_name}", {"spec": {"unschedulable": True}})
        for p in pods(api, ns, "app=pd"):
            if p["spec"].get("nodeName") == node_name:
                api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}", gracePeriodSeconds="0")

    drain(safe_node)
    placed = wait_settled(api, ns, "app=pd", 3, timeout=60)
    assert {ordinal(p): p["spec"]["nodeName"] for p in placed}[0] not in (safe_node,)
    drain(unsafe_node)

    def ordinal_1_pending():
        items = pods(api, ns, "app=pd")
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        waiting = [ordinal(p) for p in live if not p["spec"].get("nodeName")]
        return waiting == [1] and len(live) == 3

    wait_for("ordinal 1 Pending after the unsafe drain", ordinal_1_pending, 60)
    scenario.repetitions, scenario.pods_placed = 1, 3
    scenario.note = f"{safe_node} safe (drained, pod placed again), {unsafe_node} unsafe (drained, ordinal 1 waits)"

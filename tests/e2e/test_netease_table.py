"""Scenario (the NetEase Redis design, sections 1 and 3): the Redis cluster rules per zone layout.

A Redis cluster is one StatefulSet per shard (a primary and a replica), all labelled with the
cluster's name and pointing at one named PlacementPolicy that groups them. NetEase's rules:

- one zone:    no two pods of a shard on one node; fewer than 1/3 of the cluster on any node;
- two zones:   no two pods of a shard in one zone; the zones differ by at most one pod;
               fewer than 1/3 of the cluster on any node;
- three zones: no two pods of a shard in one zone; fewer than 1/2 of the cluster in any zone;
               fewer than 1/3 of the cluster on any node.

Each layout (6 nodes: 6 / 3+3 / 2+2+2) gets its own control plane (`cluster` is parametrized
indirectly, one instance per layout) and walks NetEase's verification table (section 3):

  cluster A: 3 shards created -> scaled to 5 shards -> every pod deleted and rebuilt;
  cluster B (beside A on the same nodes): 6 shards created -> 10 shards -> back to 5.

After every step every pod is bound and the layout's rules hold for each Redis cluster
separately, checked here from the pods and nodes the API server reports (never from the
extender's own state).
"""

from __future__ import annotations

from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import HOSTNAME, zoned_nodes

from .workloads import ZONE, create_statefulset, node_zones, pods, shard_of, statefulset, wait_settled

pytestmark = pytest.mark.e2e

POLICIES = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies"

LAYOUTS = {
    "one-zone": {"zone-a": 6},
    "two-zones": {"zone-a": 3, "zone-b": 3},
    "three-zones": {"zone-a": 2, "zone-b": 2, "zone-c": 2},
}


def netease_policy(name: str, zone_count: int) -> dict:
    """The PlacementPolicy NetEase's rules ask for, for a cluster labelled cluster=<name>.

    Hard rules are the seed's requirements. The ScheduleAnyway spreads are the soft
    preferences of NetEase's design (section 2: "spread over nodes as evenly as possible, and
    over zones too when there are several"); they only score.
    """
    spec: dict = {
        "group": {"selector": {"matchLabels": {"cluster": name}}},
        "caps": [{"topologyKey": HOSTNAME, "fraction": "1/3", "comparison": "LessThan"}],
        "spread": [{"topologyKey": HOSTNAME, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}],
    }
    if zone_count == 1:
        spec["shardAntiAffinity"] = [{"topologyKey": HOSTNAME, "mode": "Required"}]
    else:
        spec["shardAntiAffinity"] = [{"topologyKey": ZONE, "mode": "Required"}]
    if zone_count == 2:
        spec["spread"].append({"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"})
    if zone_count >= 3:
        spec["caps"].append({"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"})
        spec["spread"].append({"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"})
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def netease_violations(placed: list[dict], zone_of: dict[str, str | None], zones: list[str]) -> list[str]:
    """NetEase's rules for one Redis cluster, checked on its bound pods. N is the cluster's size now."""
    n = len(placed)
    out: list[str] = []
    unbound = [p["metadata"]["name"] for p in placed if not p["spec"].get("nodeName")]
    if unbound:
        out.append(f"unbound pods: {unbound}")
    bound = [p for p in placed if p["spec"].get("nodeName")]
    per_node = Counter(p["spec"]["nodeName"] for p in bound)
    for node, count in sorted(per_node.items()):
        if 3 * count >= n:  # fewer than 1/3 of the cluster per node
            out.append(f"node {node} holds {count} of {n} pods (must be fewer than 1/3)")
    per_zone = Counter(zone_of[p["spec"]["nodeName"]] for p in bound)
    if len(zones) == 1:
        per_shard_node = Counter((shard_of(p), p["spec"]["nodeName"]) for p in bound)
        out += [f"shard {s} has {c} pods on node {node}" for (s, node), c in sorted(per_shard_node.items()) if c > 1]
    else:
        per_shard_zone = Counter((shard_of(p), zone_of[p["spec"]["nodeName"]]) for p in bound)
        out += [f"shard {s} has {c} pods in zone {z}" for (s, z), c in sorted(per_shard_zone.items()) if c > 1]
    if len(zones) == 2:
        counts = [per_zone.get(z, 0) for z in zones]
        if max(counts) - min(counts) > 1:
            out.append(f"zones differ by more than one pod: {dict(zip(zones, counts, strict=True))}")
    if len(zones) >= 3:
        for zone in zones:
            if 2 * per_zone.get(zone, 0) >= n:  # fewer than 1/2 of the cluster per zone
                out.append(f"zone {zone} holds {per_zone.get(zone, 0)} of {n} pods (must be fewer than 1/2)")
    stray = sorted({z for z in per_zone if z not in zones}, key=str)
    if stray:
        out.append(f"pods in unexpected zones {stray}")
    return out


def shard_names(cluster_name: str, shards: range) -> list[str]:
    return [f"{cluster_name}-{i}" for i in shards]


@pytest.mark.parametrize("cluster", list(LAYOUTS), indirect=True, scope="module")
def test_netease_verification_table(cluster, scenario, request) -> None:
    layout_name = request.node.callspec.params["cluster"]
    layout = LAYOUTS[layout_name]
    zones = sorted(layout)
    api = cluster.admin
    cluster.add_nodes(zoned_nodes(layout))
    ns = cluster.namespace(f"netease-{layout_name}")
    zone_of = node_zones(api)
    assert len(zone_of) == 6 and sorted({zone_of[n] for n in zone_of}) == zones, zone_of

    seen_uids: set[str] = set()
    sizes = {"redis-a": 0, "redis-b": 0}

    def check_step(step: str) -> None:
        """Every pod of every cluster bound; NetEase's rules per cluster; counters updated."""
        problems: dict[str, list[str]] = {}
        placed_now = 0
        for name, size in sizes.items():
            if size == 0:
                continue
            placed = wait_settled(api, ns, f"cluster={name}", size, timeout=180)
            placed_now += sum(1 for p in placed if p["metadata"]["uid"] not in seen_uids)
            seen_uids.update(p["metadata"]["uid"] for p in placed)
            found = netease_violations(placed, zone_of, zones)
            if found:
                where = sorted(
                    (p["metadata"]["name"], p["spec"]["nodeName"], zone_of[p["spec"]["nodeName"]]) for p in placed
                )
                problems[name] = found + [f"placement: {where}"]
        scenario.repetitions += 1
        scenario.pods_placed += placed_now
        scenario.violations += sum(len(v) - 1 for v in problems.values())
        assert not problems, f"[{layout_name}] after '{step}': {problems}"

    def add_shards(name: str, shards: range) -> None:
        for sts in shard_names(name, shards):
            create_statefulset(api, ns, statefulset(sts, 2, labels={"cluster": name}, policy_name=name))
        sizes[name] += 2 * len(shards)

    # ---- cluster A: 3 shards, scaled to 5, every pod rebuilt
    api.create(POLICIES.format(ns=ns), netease_policy("redis-a", len(zones)))
    add_shards("redis-a", range(3))
    check_step("redis-a: 3 shards created")

    add_shards("redis-a", range(3, 5))
    check_step("redis-a: scaled to 5 shards")

    old = {p["metadata"]["uid"] for p in pods(api, ns, "cluster=redis-a")}
    for p in pods(api, ns, "cluster=redis-a"):
        api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}")
    wait_for(
        "every redis-a pod replaced",
        lambda: not old & {p["metadata"]["uid"] for p in pods(api, ns, "cluster=redis-a")},
        120,
    )
    check_step("redis-a: every pod deleted and rebuilt")

    # ---- cluster B beside A: 6 shards, scaled to 10, back to 5
    api.create(POLICIES.format(ns=ns), netease_policy("redis-b", len(zones)))
    add_shards("redis-b", range(6))
    check_step("redis-b: 6 shards created")

    add_shards("redis-b", range(6, 10))
    check_step("redis-b: scaled to 10 shards")

    for sts in shard_names("redis-b", range(5, 10)):
        api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{sts}", propagationPolicy="Background")
    sizes["redis-b"] -= 2 * 5
    check_step("redis-b: scaled back to 5 shards")

    scenario.note = (
        f"{layout_name}: {len(seen_uids)} distinct pods placed over 6 steps, both clusters checked after each"
    )

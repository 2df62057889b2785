"""In-scheduler mode: the extender attached to the cluster's one kube-scheduler, every
workload on `schedulerName: default-scheduler`, opting in by requesting the opt-in resource
(config/in-scheduler/scheduler-config.yaml, the file this control plane's kube-scheduler runs with).

1. Pods that do not opt in are never sent to the extender: its request counters do not move while
   a Deployment of 10 is placed.
2. The core rules hold, read from the API server: a per-node cap of 1, ordinal zones with a cap of
   1, a zone spread, and an extender restart while pods wait; kube-scheduler binds every pod itself,
   to the one node the extender's filter chose (the stanza has no bindVerb).
3. The shared-nodes burst (a Deployment of 40 x 1 CPU without opt-in beside an opted-in
   StatefulSet of 40 x 1 CPU, at once, onto 10 nodes of 4 CPU), 5 repetitions: 0 nodes over
   allocatable every time, and every pod that fits placed (40 bound). One cache, no race.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from extender.api.policy import OPT_IN_RESOURCE
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes

from .shared_nodes import burst_nodes, clean, extender_statefulset, native_deployment, run_burst
from .workloads import (
    create_statefulset,
    deployment,
    extender_requests,
    gate_lifts,
    ordinal,
    pods,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "in-scheduler"}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def opted_in(manifest: dict) -> dict:
    """The workload as `adopt --mode in-scheduler` leaves it: the cluster's scheduler, the opt-in resource."""
    spec = manifest["spec"]["template"]["spec"]
    spec["schedulerName"] = "default-scheduler"
    resources = spec["containers"][0].setdefault("resources", {})
    resources.setdefault("requests", {})[OPT_IN_RESOURCE] = "1"
    resources.setdefault("limits", {})[OPT_IN_RESOURCE] = "1"
    return manifest


def _zones(api) -> dict[str, str | None]:  # noqa: ANN001
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}


def test_pods_without_the_opt_in_are_never_sent_to_the_extender(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({"plain-a": 2}, prefix="plain"))
    ns = cluster.namespace("plain")
    port = cluster.ports["extender"]
    before = {verb: extender_requests(port, verb) for verb in ("filter", "prioritize", "bind")}
    manifest = deployment("plain", 10, policy={"zones": {"allowed": ["plain-a"]}})
    manifest["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", manifest)
    placed = wait_settled(api, ns, "app=plain", 10, timeout=60)
    after = {verb: extender_requests(port, verb) for verb in ("filter", "prioritize", "bind")}
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.note = f"10 pods without the opt-in placed; extender requests before {before}, after {after}"
    assert after == before, (before, after)


def test_core_rules_hold_in_the_cluster_scheduler(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    zones = ["core-a", "core-b", "core-c"]
    cluster.add_nodes(zoned_nodes({z: 2 for z in zones}, prefix="core"))
    ns = cluster.namespace("core")
    binds_before = extender_requests(cluster.ports["extender"], "bind")
    lifts_before = gate_lifts(cluster.ports["extender"])
    cap = {"zones": {"allowed": zones}, "caps": [{"topologyKey": HOST, "max": 1}]}
    ordinal_policy = {
        "zones": {"allowed": zones},
        "ordinalZones": {"order": zones},
        "caps": [{"topologyKey": HOST, "max": 1}],
    }
    create_statefulset(api, ns, opted_in(statefulset("capped", 6, policy=cap)))
    placed = wait_settled(api, ns, "app=capped", 6, timeout=90)
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    assert max(per_node.values()) == 1, per_node
    api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/capped")
    wait_for("capped gone", lambda: not pods(api, ns, "app=capped"), 60)

    create_statefulset(api, ns, opted_in(statefulset("ordered", 6, policy=ordinal_policy)))
    placed = wait_settled(api, ns, "app=ordered", 6, timeout=90)
    zone_of = _zones(api)
    wrong = [p["metadata"]["name"] for p in placed if zone_of[p["spec"]["nodeName"]] != zones[ordinal(p) % 3]]
    assert not wrong and len({p["spec"]["nodeName"] for p in placed}) == 6, wrong
    api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/ordered")
    wait_for("ordered gone", lambda: not pods(api, ns, "app=ordered"), 60)

    spread = {
        "group": {"selector": {"matchLabels": {"app": "spread"}}},
        "zones": {"allowed": zones},
        "spread": [{"topologyKey": ZONE, "maxSkew": 1}],
    }
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", opted_in(deployment("spread", 9, policy=spread)))
    placed = wait_settled(api, ns, "app=spread", 9, timeout=90)
    counts = Counter(zone_of[p["spec"]["nodeName"]] for p in placed)
    assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == 3, counts
    # The shipped stanza names no bindVerb: kube-scheduler bound all 21 to the node filter chose.
    assert extender_requests(cluster.ports["extender"], "bind") == binds_before
    # Each pod was lifted with a place, and its lift timed at every stage (docs/operations/troubleshooting.md).
    lifts = gate_lifts(cluster.ports["extender"])
    delta = {
        s: (n - lifts_before.get(s, (0, 0.0))[0], t - lifts_before.get(s, (0, 0.0))[1]) for s, (n, t) in lifts.items()
    }
    assert {s: n for s, (n, _) in delta.items()} == {"written": 21, "asked": 21, "bound": 21}, delta
    assert delta["bound"][1] >= delta["asked"][1] > 0, "a pod is asked about before it is bound"
    scenario.repetitions += 3
    scenario.pods_placed += 21
    scenario.note = f"cap 1: 6 on 6 nodes; ordinal zones: 6 in order; zone spread 9: {dict(counts)}"


def test_an_extender_restart_holds_the_rules(cluster, scenario) -> None:  # noqa: ANN001
    """The extender killed while an opted-in set is created: its pods wait (not ignorable), the
    default scheduler keeps placing every other pod, and once it is back the set is placed."""
    api = cluster.admin
    zones = ["rs-a", "rs-b"]
    cluster.add_nodes(zoned_nodes({z: 2 for z in zones}, prefix="rs"))
    ns = cluster.namespace("restart")
    cluster.kill("extender")
    policy = {"zones": {"allowed": zones}, "caps": [{"topologyKey": HOST, "max": 1}]}
    create_statefulset(api, ns, opted_in(statefulset("rs", 4, policy=policy)))
    other = deployment("other", 3, policy={"zones": {"allowed": zones}})
    other["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", other)
    wait_settled(api, ns, "app=other", 3, timeout=60)
    time.sleep(2)
    assert not [p for p in pods(api, ns, "app=rs") if p["spec"].get("nodeName")], "none placed without the extender"
    cluster.start_extender()
    placed = wait_settled(api, ns, "app=rs", 4, timeout=120)
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed) + 3
    scenario.note = "extender down: 3 pods without the opt-in placed, the opted-in 4 waited; back: placed 1 a node"
    assert max(per_node.values()) == 1, per_node


def test_a_burst_shared_with_unopted_pods_never_overfills_a_node(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    results = []
    for k in range(5):
        rep = f"in{k}"
        nodes = burst_nodes(cluster, rep)
        ns = cluster.namespace(rep)
        placed = opted_in(extender_statefulset(rep, scheduler="default-scheduler"))
        result = run_burst(api, ns, nodes, native_deployment(rep), placed)
        results.append(result)
        clean(api, ns)
    over = [r["over_cpu"] for r in results]
    bound = [sum(r["bound"].values()) for r in results]
    scenario.repetitions += len(results)
    scenario.pods_placed += sum(bound)
    scenario.violations += sum(r["nodes_over"] for r in results)
    scenario.note = (
        f"in-scheduler mode, 40 + 40 pods of 1 CPU on 40 CPU, 5 runs: CPU over allocatable {over}, "
        f"pods bound {bound} ({[r['bound'] for r in results]})"
    )
    print(f"\n{scenario.note}")
    assert over == [0] * 5, results
    assert bound == [40] * 5, "every pod that fits is placed"

"""Issue 7 on the real control plane: metrics after a scenario, audit catching a pod placed by
hand, explain agreeing with filter for the same pod and state."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import REPO, zoned_nodes

from workloads import create_statefulset, statefulset, wait_settled

pytestmark = pytest.mark.e2e

POLICY = {
    "group": {"selector": {"matchLabels": {"cluster": "c1"}}},
    "zones": {"allowed": ["zone-a", "zone-b", "zone-c"]},
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1}],
}


@pytest.fixture(scope="module")
def ops(cluster):
    cluster.add_nodes(zoned_nodes({"zone-a": 2, "zone-b": 2, "zone-c": 2}))
    ns = cluster.namespace("ops")
    cluster.admin.create(
        f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies",
        {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "c1"},
            "spec": POLICY,
        },
    )
    create_statefulset(cluster.admin, ns, statefulset("web", 3, labels={"cluster": "c1"}, policy_name="c1"))
    wait_settled(cluster.admin, ns, "app=web", 3)
    return cluster, ns


def cli(cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "extender", *args, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def test_metrics_show_the_scenarios_decisions(ops) -> None:
    cluster, ns = ops
    text = requests.get(f"http://127.0.0.1:{cluster.ports['extender']}/metrics", timeout=5).text
    values = {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line and not line.startswith("#")
    }
    assert values['extender_filter_decisions_total{result="feasible"}'] >= 3
    assert values['extender_binds_total{result="bound"}'] >= 3
    assert values['extender_request_duration_seconds_count{verb="filter"}'] >= 3
    assert values['extender_cache_objects{kind="nodes"}'] == 6
    assert values['extender_cache_synced{kind="policies"}'] == 1
    assert 'extender_filter_node_verdicts_total{outcome="fail",rule="caps"}' in values


def test_audit_passes_a_compliant_cluster_and_catches_a_pod_placed_by_hand(ops) -> None:
    cluster, ns = ops
    ok = cli(cluster, "audit", "-n", ns)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "pods matching cluster=c1" in ok.stdout and ": ok" in ok.stdout

    # Bypass the scheduler: spec.nodeName onto a node that already holds a pod of the group.
    taken = cluster.admin.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="app=web")[0]["spec"]["nodeName"]
    cluster.admin.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "rogue",
                "labels": {"cluster": "c1", "app": "rogue"},
                "annotations": {"placement.extender.dev/policy-name": "c1"},
            },
            "spec": {"nodeName": taken, "containers": [{"name": "main", "image": "registry.invalid/db:1"}]},
        },
    )
    bad = cli(cluster, "audit", "-n", ns, "--json")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    report = json.loads(bad.stdout)
    assert report["violated"] == 1
    violations = report["groups"][0]["violations"]
    assert any(v.startswith(f"caps: kubernetes.io/hostname={taken} holds 2 pods") for v in violations), violations
    cluster.admin.delete(f"/api/v1/namespaces/{ns}/pods/rogue", gracePeriodSeconds="0")


def test_explain_agrees_with_filter(ops) -> None:
    cluster, ns = ops
    # A pod of the group held back by a scheduling gate: Pending, so both views judge the same state.
    manifest = statefulset("held", 1, labels={"cluster": "c1"}, policy_name="c1")
    manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "e2e.placement.extender.dev/hold"}]
    create_statefulset(cluster.admin, ns, manifest)
    pod = wait_for("the held pod", lambda: cluster.admin.get(f"/api/v1/namespaces/{ns}/pods/held-0"), 30)
    wait_for(
        "the extender to see every pod of the group",
        lambda: (
            requests.get(f"http://127.0.0.1:{cluster.ports['extender']}/readyz", timeout=5).json()["cache"]["pods"] >= 4
        ),
        30,
    )

    explained = cli(cluster, "explain", f"{ns}/held-0", "--json")
    assert explained.returncode == 0, explained.stderr
    by_node = {n["node"]: n for n in json.loads(explained.stdout)["nodes"]}
    nodes = sorted(by_node)
    result = requests.post(
        f"http://127.0.0.1:{cluster.ports['extender']}/filter",
        json={"Pod": pod, "Nodes": None, "NodeNames": nodes},
        timeout=10,
    ).json()
    failed = {**result["FailedNodes"], **result["FailedAndUnresolvableNodes"]}
    assert sorted(result["NodeNames"]) == sorted(n for n, e in by_node.items() if e["result"] == "pass")
    assert failed == {n: e["reason"] for n, e in by_node.items() if e["result"] != "pass"}
    assert len(result["NodeNames"]) == 3  # the three nodes without a web pod
    human = cli(cluster, "explain", f"{ns}/held-0")
    assert "3/6 nodes pass" in human.stdout and "caps:" in human.stdout

"""Operations on the real control plane: metrics after a scenario, audit catching a pod placed by
hand, explain agreeing with filter for the same pod and state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import REPO, zoned_nodes

from .workloads import cli, create_statefulset, node_zones, ordinal, pods, statefulset, wait_settled

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
    assert sorted(result["NodeNames"]) == sorted(n for n, e in by_node.items() if e["result"] == "pass")
    assert len(result["NodeNames"]) == 3  # the three nodes without a web pod
    # Some node passes: no reasons (kube-scheduler reads them only when none does). Over the
    # refused nodes alone (the caps refuse them, whatever else is offered), filter's reasons are
    # explain's.
    assert result["FailedNodes"] == result["FailedAndUnresolvableNodes"] == {}
    refused = sorted(n for n, e in by_node.items() if e["result"] != "pass")
    alone = requests.post(
        f"http://127.0.0.1:{cluster.ports['extender']}/filter",
        json={"Pod": pod, "Nodes": None, "NodeNames": refused},
        timeout=10,
    ).json()
    failed = {**alone["FailedNodes"], **alone["FailedAndUnresolvableNodes"]}
    assert alone["NodeNames"] == [] and failed == {n: by_node[n]["reason"] for n in refused}
    human = cli(cluster, "explain", f"{ns}/held-0")
    assert "3/6 nodes pass" in human.stdout and "caps:" in human.stdout


def kubectl(cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl, with the package's console scripts (kubectl-placement) first on PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        [str(cluster.bin_dir / "kubectl"), *args, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        env={**os.environ, "PATH": path},
    )


def test_kubectl_placement_is_the_same_commands_with_kubectls_flags(ops) -> None:
    """`kubectl placement audit|explain` found by kubectl itself, answering as the CLI does."""
    cluster, ns = ops
    listed = kubectl(cluster, "plugin", "list")
    assert "kubectl-placement" in listed.stdout, listed.stdout + listed.stderr
    via_kubectl = kubectl(cluster, "placement", "audit", "-n", ns, "-o", "json")
    direct = cli(cluster, "audit", "-n", ns, "--json")
    assert (via_kubectl.returncode, json.loads(via_kubectl.stdout)) == (direct.returncode, json.loads(direct.stdout))
    pod = pods(cluster.admin, ns, "app=web")[0]["metadata"]["name"]
    direct_explain = cli(cluster, "explain", f"{ns}/{pod}").stdout
    for form in ([pod, "-n", ns], [f"{ns}/{pod}"]):  # kubectl's -n, or the CLI's NS/POD
        explained = kubectl(cluster, "placement", "explain", *form)
        assert explained.returncode == 0, explained.stderr
        assert explained.stdout == direct_explain


# -- an audit that never cries wolf, and misses no pod placed by hand --------------------------------
# These come last: they add zone-d, which the tests above do not expect.


def test_audit_stays_quiet_when_a_zone_is_added_under_ordinal_zones(ops) -> None:
    """No volumes: the placed pods are the rotation's only record. The engine keeps the 3-zone
    rotation they show; audit used to read volumes only and call crdb-3 misplaced in zone-d."""
    cluster, _ = ops
    ns = cluster.namespace("ordinal")
    create_statefulset(cluster.admin, ns, statefulset("crdb", 6, policy={"ordinalZones": {}}))
    placed = wait_settled(cluster.admin, ns, "app=crdb", 6)
    zones = node_zones(cluster.admin)
    by_ordinal = {ordinal(p): zones[p["spec"]["nodeName"]] for p in placed}
    assert all(by_ordinal[i] == by_ordinal[i % 3] for i in range(6)) and len(set(by_ordinal.values())) == 3

    before = cli(cluster, "audit", "-n", ns)
    assert before.returncode == 0, before.stdout + before.stderr
    cluster.add_nodes(zoned_nodes({"zone-d": 2}))
    after = cli(cluster, "audit", "-n", ns, "--json")
    assert after.returncode == 0, after.stdout + after.stderr
    (group,) = json.loads(after.stdout)["groups"]
    assert group["group"] == "StatefulSet crdb" and group["violations"] == []
    # Nothing moved: the pods are where they were, read back from the API server.
    now = {ordinal(p): zones[p["spec"]["nodeName"]] for p in pods(cluster.admin, ns, "app=crdb")}
    assert now == by_ordinal


def test_audit_counts_a_pod_placed_by_hand_in_its_default_group(ops) -> None:
    """No group.selector: the group is the StatefulSet's pods. A copy of its pod placed with
    spec.nodeName on an occupied node has no owner, and still breaks the group's cap."""
    cluster, _ = ops
    ns = cluster.namespace("handmade")
    manifest = statefulset("kv", 3, policy={"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]})
    create_statefulset(cluster.admin, ns, manifest)
    placed = wait_settled(cluster.admin, ns, "app=kv", 3)
    ok = cli(cluster, "audit", "-n", ns)
    assert ok.returncode == 0 and "StatefulSet kv" in ok.stdout, ok.stdout + ok.stderr

    taken = placed[0]["spec"]["nodeName"]
    template = manifest["spec"]["template"]
    cluster.admin.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kv-by-hand", **template["metadata"]},
            "spec": {"nodeName": taken, "containers": template["spec"]["containers"]},
        },
    )
    bad = cli(cluster, "audit", "-n", ns, "--json")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    (group,) = json.loads(bad.stdout)["groups"]
    assert group["group"] == "StatefulSet kv" and f"{ns}/kv-by-hand" in group["placed"]
    (violation,) = group["violations"]
    assert violation.startswith(f"caps: kubernetes.io/hostname={taken} holds 2 pods"), violation
    assert f"{ns}/kv-by-hand" in violation and "at most 1 per kubernetes.io/hostname allows 1" in violation
    human = cli(cluster, "audit", "-n", ns)
    assert human.returncode == 1 and "StatefulSet kv" in human.stdout and "VIOLATED" in human.stdout

    # explain on a pod of the group states the breach: rule, domain, count against the limit.
    explained = json.loads(cli(cluster, "explain", f"{ns}/kv-1", "--json").stdout)
    assert explained["group"] == "StatefulSet kv" and explained["breaches"] == [violation]
    cluster.admin.delete(f"/api/v1/namespaces/{ns}/pods/kv-by-hand", gracePeriodSeconds="0")

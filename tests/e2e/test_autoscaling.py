"""Autoscaling: Karpenter, which never calls an extender, adds the nodes the extender
needs once a workload is adopted with `python -m extender adopt`, and none for a pod no node can
help. Karpenter's kwok provider runs beside the control plane (tests/e2e/karpenter.py); each
scenario has a NodePool of its own and pods that select its nodes, so no scenario's nodes serve
another's pods. Everything is read from the API server: pods, nodes, NodeClaims, the
ZoneRotation. Newest minor only (hack/matrix.py), where the autoscaler's build is cached.

1. Per-node cap 1: 3 zones x 1 node, a StatefulSet adopted with `caps: [{hostname, max: 1}]`
   and scaled to 6: Karpenter creates 3 nodes and every pod is placed, one per node.
2. Ordinal zones + cap 1: the same, with ordinalZones. The adopted template carries the gate; the
   extender narrows each pod to its ordinal's zone; each new node appears in the zone of the
   ordinal that needed it, and every pod is in its ordinal's zone.
3. A policy no node can fix (a named PlacementPolicy that does not exist): the filter answers an
   Error, the pods are SchedulerError, and Karpenter creates nothing in 20 s although a pod's
   native anti-affinity leaves it no node. Creating the policy then makes one pod Unschedulable
   and Karpenter adds exactly the one node it needs: the harness would have seen a wrong node.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec

from . import karpenter
from .workloads import POLICY_NAME_ANNOTATION, cli, create_statefulset, ordinal, pods, scale, statefulset, wait_settled

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ROTATIONS = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations"
POLICIES = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies"
QUIET = 20.0  # seconds with no NodeClaim: Karpenter batches for at most 5 s here, then provisions


@pytest.fixture(scope="module")
def autoscaler(cluster):  # noqa: ANN001
    karpenter.start(cluster, karpenter.build())
    return cluster


def scenario_workload(cluster, label: str, replicas: int = 0, *, native: dict | None = None, **kw) -> tuple[str, str]:  # noqa: ANN001
    """A NodePool and one node per zone for the scenario, and its StatefulSet (its pods select them)."""
    karpenter.nodepool(cluster, label)
    cluster.add_nodes(
        NodeSpec(f"{label}-{z[-1]}1", z, labels={karpenter.SCENARIO_LABEL: label}, cpu="4", memory="16Gi")
        for z in karpenter.ZONES
    )
    ns = cluster.namespace(label)
    manifest = statefulset(label, replicas, **kw)
    pod_spec = manifest["spec"]["template"]["spec"]
    pod_spec["nodeSelector"] = {karpenter.SCENARIO_LABEL: label}
    pod_spec["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    pod_spec.update(native or {})
    create_statefulset(cluster.admin, ns, manifest)
    return ns, label


def adopt(cluster, ns: str, name: str, policy: dict, tmp_path) -> str:  # noqa: ANN001
    path = tmp_path / f"{name}-policy.json"
    path.write_text(json.dumps(policy))
    out = cli(cluster, "adopt", f"statefulset/{name}", "-n", ns, "--policy-file", str(path))
    assert out.returncode == 0, out.stderr
    return out.stdout


def node_zone(cluster) -> dict[str, str]:  # noqa: ANN001
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in cluster.admin.list("/api/v1/nodes")}


def test_a_per_node_cap_scaled_past_the_nodes_gets_new_nodes(autoscaler, scenario, tmp_path) -> None:
    cluster = autoscaler
    ns, name = scenario_workload(cluster, "cap", scheduler="default-scheduler")
    report = adopt(cluster, ns, name, {"caps": [{"topologyKey": HOST, "max": 1}]}, tmp_path)
    assert re.search(r"^  caps +exact ", report, re.M), report
    started = time.monotonic()
    scale(cluster.admin, ns, name, 6)
    placed = wait_settled(cluster.admin, ns, f"app={name}", 6, timeout=180)
    took = time.monotonic() - started
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    violations = sum(n - 1 for n in per_node.values() if n > 1)
    created = karpenter.created_nodes(cluster, name)
    scenario.repetitions, scenario.pods_placed, scenario.violations = 1, len(placed), violations
    scenario.wall_time = took
    scenario.note = f"Karpenter created {len(created)} nodes; 6 pods placed in {took:.1f} s"
    assert violations == 0, per_node
    assert len(created) == 3, [n["metadata"]["name"] for n in created]


def test_ordinal_zones_get_each_new_node_in_the_zone_of_the_ordinal_that_needed_it(
    autoscaler, scenario, tmp_path
) -> None:
    cluster = autoscaler
    ns, name = scenario_workload(cluster, "ord", scheduler="default-scheduler")
    report = adopt(cluster, ns, name, {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}, tmp_path)
    assert re.search(r"^  ordinalZones +exact ", report, re.M), report
    template = cluster.admin.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}")["spec"]["template"]["spec"]
    assert template["schedulingGates"] == [{"name": "placement.extender.dev/ordinal-zone"}]
    started = time.monotonic()
    scale(cluster.admin, ns, name, 6)
    placed = wait_settled(cluster.admin, ns, f"app={name}", 6, timeout=180)
    took = time.monotonic() - started
    (rotation,) = cluster.admin.list(ROTATIONS.format(ns=ns))
    order = rotation["spec"]["order"]
    zones = node_zone(cluster)
    wrong = [
        (p["metadata"]["name"], zones[p["spec"]["nodeName"]])
        for p in placed
        if zones[p["spec"]["nodeName"]] != order[ordinal(p) % len(order)]
    ]
    created = {n["metadata"]["name"]: zones[n["metadata"]["name"]] for n in karpenter.created_nodes(cluster, name)}
    needed_by = {p["spec"]["nodeName"]: ordinal(p) for p in placed if p["spec"]["nodeName"] in created}
    scenario.repetitions, scenario.pods_placed, scenario.violations = 1, len(placed), len(wrong)
    scenario.wall_time = took
    scenario.note = f"Karpenter created {len(created)} nodes ({', '.join(sorted(created.values()))}); {took:.1f} s"
    assert not wrong, f"pods outside their ordinal's zone (order {order}): {wrong}"
    assert len(created) == 3 and set(needed_by) == set(created), (created, needed_by)
    assert all(created[n] == order[i % len(order)] for n, i in needed_by.items()), (created, needed_by, order)
    for p in placed:  # the narrowing the extender wrote, on the pod, where autoscalers read it
        assert "placement.extender.dev/narrowed-zones" in p["metadata"]["annotations"]
        assert not p["spec"].get("schedulingGates")


def test_a_pod_no_node_can_help_creates_no_node(autoscaler, scenario) -> None:
    cluster = autoscaler
    api = cluster.admin
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "bad"}}, "topologyKey": HOST}
                ]
            }
        }
    }
    ns, name = scenario_workload(cluster, "bad", 4, native=anti, policy_name="later")

    def scheduler_errors():
        items = pods(api, ns, f"app={name}")
        reasons = [
            c.get("reason")
            for p in items
            for c in (p.get("status") or {}).get("conditions") or ()
            if c["type"] == "PodScheduled"
        ]
        return items if len(items) == 4 and reasons == ["SchedulerError"] * 4 else None

    items = wait_for("4 pods SchedulerError (the named policy is missing)", scheduler_errors, 60)
    assert all("PlacementPolicy bad/later not found" in json.dumps(p["status"]) for p in items)
    time.sleep(QUIET)
    assert karpenter.nodeclaims(cluster, name) == [], "Karpenter bought a node for pods no node can help"
    # The control: with the policy there, one pod per node (3 nodes), the fourth is Unschedulable
    # for its anti-affinity, and Karpenter adds exactly one node.
    started = time.monotonic()
    api.create(
        POLICIES.format(ns=ns),
        {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "later"},
            "spec": {"caps": [{"topologyKey": HOST, "max": 1}]},
        },
    )
    placed = wait_settled(api, ns, f"app={name}", 4, timeout=180)
    created = karpenter.created_nodes(cluster, name)
    scenario.repetitions, scenario.pods_placed = 1, len(placed)
    scenario.note = (
        f"no node in {QUIET:.0f} s while the policy was missing; with it, {len(created)} node in "
        f"{time.monotonic() - started:.1f} s"
    )
    assert len(created) == 1
    assert POLICY_NAME_ANNOTATION  # the pods name their policy by this annotation (workloads.statefulset)


def test_retire_takes_out_what_adopt_wrote_through_the_api_server(cluster, tmp_path) -> None:  # noqa: ANN001
    """adopt then retire, as an operator runs them (no pods: only the templates are read)."""
    api = cluster.admin
    ns = cluster.namespace("roundtrip")
    manifest = statefulset("rt", 0, scheduler="default-scheduler")
    manifest["spec"]["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    create_statefulset(api, ns, manifest)
    path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/rt"
    before = api.get(path)["spec"]["template"]["spec"]
    adopt(cluster, ns, "rt", {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}, tmp_path)
    adopted = api.get(path)["spec"]["template"]
    assert adopted["spec"]["schedulerName"] == "placement-scheduler"
    assert adopted["spec"]["schedulingGates"] and adopted["spec"]["affinity"]["podAntiAffinity"]
    out = cli(cluster, "retire", "statefulset/rt", "-n", ns, "--no-translate")
    assert out.returncode == 0, out.stderr
    retired = api.get(path)["spec"]["template"]
    assert retired["spec"]["schedulerName"] == "default-scheduler"
    assert {k: v for k, v in retired["spec"].items() if k != "schedulerName"} == {
        k: v for k, v in before.items() if k != "schedulerName"
    }
    assert "placement.extender.dev/implied" not in retired["metadata"]["annotations"]
    out = cli(cluster, "retire", "statefulset/rt", "-n", ns)  # translate's constraints in their place
    assert out.returncode == 0, out.stderr
    assert api.get(path)["spec"]["template"]["spec"]["topologySpreadConstraints"]


def test_a_set_retired_under_a_cap_of_one_keeps_it_and_gets_new_nodes(autoscaler, scenario, tmp_path) -> None:  # noqa: ANN001
    """Retired from the extender, a StatefulSet under a per-node cap of 1 keeps the cap's exact
    native form (required pod anti-affinity, what adopt wrote), so scaled past its node count under
    the default scheduler it gets new nodes from Karpenter and never two pods on one node. Before
    retire was fixed, it wrote a hostname spread of maxSkew 1: two pods on one node in 6 of 6 runs."""
    cluster = autoscaler
    api = cluster.admin
    ns, name = scenario_workload(cluster, "retired", 3, scheduler="default-scheduler")
    adopt(cluster, ns, name, {"caps": [{"topologyKey": HOST, "max": 1}]}, tmp_path)
    out = cli(cluster, "retire", f"statefulset/{name}", "-n", ns)
    assert out.returncode == 0, out.stdout + out.stderr
    template = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}")["spec"]["template"]["spec"]
    assert template["schedulerName"] == "default-scheduler"
    (term,) = template["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == HOST

    def most_on_a_node() -> int:
        on = Counter(p["spec"]["nodeName"] for p in pods(api, ns, f"app={name}") if p["spec"].get("nodeName"))
        return max(on.values(), default=0)

    from .workloads import Sampler

    with Sampler(most_on_a_node) as sampler:
        started = time.monotonic()
        scale(api, ns, name, 6)
        placed = wait_settled(api, ns, f"app={name}", 6, timeout=180)
        took = time.monotonic() - started
    samples = [v for _, v in sampler.samples if isinstance(v, int)]
    doubled = sum(1 for v in samples if v > 1)
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    created = karpenter.created_nodes(cluster, name)
    scenario.repetitions, scenario.pods_placed, scenario.violations = 1, len(placed), doubled
    scenario.wall_time = took
    scenario.note = (
        f"retired under cap 1 and scaled 3 -> 6 under the default scheduler: Karpenter created {len(created)} nodes; "
        f"{len(samples)} samples, {doubled} with a node doubled; placed in {took:.1f} s"
    )
    assert doubled == 0 and max(per_node.values()) == 1, per_node
    assert len(created) >= 3, [n["metadata"]["name"] for n in created]

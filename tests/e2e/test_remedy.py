"""A Pending pod's PlacementRejected event says what would free it, and applying that fix places it:
one case per kind of fix, each in zones of its own, read from the API server.

1. A node: a StatefulSet of 3 under a per-node cap of 1 on 2 nodes; the event names "one more
   schedulable node in zone ..."; a node added there places the third pod.
2. A cap: the same with a named PlacementPolicy; the event names "a cap of 2"; editing the policy
   to max 2 places the pod.
3. matchLabelKeys: a Deployment of 2 under a per-node cap of 1 on 2 nodes rolls a new revision
   (maxSurge 1, maxUnavailable 0): the surge pod waits, its event names
   `group.matchLabelKeys: [pod-template-hash]`; with that in the policy, the rollout completes.
"""

from __future__ import annotations

import json

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec

from .workloads import POLICY_ANNOTATION, create_statefulset, deployment, events_for, pods, statefulset, wait_settled

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
POLICIES = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies"


def remedy_of(api, ns: str, selector: str) -> str:  # noqa: ANN001
    """The fix in the PlacementRejected event of the one Pending pod of `selector`."""

    def found():
        waiting = [p for p in pods(api, ns, selector) if not p["spec"].get("nodeName")]
        for p in waiting:
            for e in events_for(api, ns, p["metadata"]["name"]):
                if e.get("reason") == "PlacementRejected" and "it would be placed with" in e.get("message", ""):
                    return e["message"]
        return None

    return wait_for(f"a PlacementRejected event with a fix for a Pending pod of {selector}", found, 60)


def test_a_node_where_the_event_says_places_the_pod(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes([NodeSpec("rn-a1", "rn-a"), NodeSpec("rn-b1", "rn-b")])
    ns = cluster.namespace("rn")
    policy = {"zones": {"allowed": ["rn-a", "rn-b"]}, "caps": [{"topologyKey": HOST, "max": 1}]}
    create_statefulset(api, ns, statefulset("rn", 3, policy=policy))
    message = remedy_of(api, ns, "app=rn")
    assert "one more schedulable node in zone rn-a or rn-b" in message, message
    cluster.add_nodes([NodeSpec("rn-b2", "rn-b")])
    # Well inside kube-scheduler's one-minute flush of parked pods: when its informer shows the
    # node before the extender's watch does, filter answers an Error (retried from the backoff
    # queue, at most 10 s apart) instead of refusing the node it does not know yet (README "Limits").
    placed = wait_settled(api, ns, "app=rn", 3, timeout=40)
    assert len({p["spec"]["nodeName"] for p in placed}) == 3
    scenario.repetitions, scenario.pods_placed = 1, 3
    scenario.note = "event: one more node in rn-a or rn-b; added in rn-b: placed"


def test_the_cap_the_event_names_places_the_pod(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes([NodeSpec("rc-a1", "rc-a"), NodeSpec("rc-b1", "rc-b")])
    ns = cluster.namespace("rc")
    spec = {"zones": {"allowed": ["rc-a", "rc-b"]}, "caps": [{"topologyKey": HOST, "max": 1}]}
    api.create(
        POLICIES.format(ns=ns),
        {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "rc"},
            "spec": spec,
        },
    )
    create_statefulset(api, ns, statefulset("rc", 3, policy_name="rc"))
    message = remedy_of(api, ns, "app=rc")
    assert "a cap of 2 per kubernetes.io/hostname (now 1)" in message, message
    api.merge_patch(f"{POLICIES.format(ns=ns)}/rc", {"spec": {"caps": [{"topologyKey": HOST, "max": 2}]}})
    wait_settled(api, ns, "app=rc", 3, timeout=60)
    scenario.repetitions, scenario.pods_placed = 1, 3
    scenario.note = "event: a cap of 2; policy edited: placed"


def test_splitting_by_revision_as_the_event_says_completes_a_rolling_update(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes([NodeSpec("rr-a1", "rr-a"), NodeSpec("rr-a2", "rr-a")])
    ns = cluster.namespace("rr")
    policy = {
        "group": {"selector": {"matchLabels": {"app": "rr"}}},
        "zones": {"allowed": ["rr-a"]},
        "caps": [{"topologyKey": HOST, "max": 1}],
    }
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("rr", 2, policy=policy))
    wait_settled(api, ns, "app=rr", 2, timeout=60)
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/rr"
    api.merge_patch(path, {"spec": {"template": {"metadata": {"labels": {"rev": "2"}}}}})

    def surge_pod():
        waiting = [p for p in pods(api, ns, "app=rr,rev=2") if not p["spec"].get("nodeName")]
        return waiting[0]["metadata"]["name"] if waiting else None

    wait_for("the new revision's surge pod Pending", surge_pod, 60)
    message = remedy_of(api, ns, "app=rr,rev=2")
    assert "group.matchLabelKeys: [pod-template-hash]" in message, message
    fixed = {**policy, "group": {**policy["group"], "matchLabelKeys": ["pod-template-hash"]}}
    api.merge_patch(path, {"spec": {"template": {"metadata": {"annotations": {POLICY_ANNOTATION: json.dumps(fixed)}}}}})

    def rolled_out():
        items = [p for p in pods(api, ns, "app=rr") if not p["metadata"].get("deletionTimestamp")]
        fixed_pods = [p for p in items if "matchLabelKeys" in p["metadata"]["annotations"].get(POLICY_ANNOTATION, "")]
        return len(items) == 2 and len(fixed_pods) == 2 and all(p["spec"].get("nodeName") for p in items)

    wait_for("the rollout with the revision split completes", rolled_out, 120)
    scenario.repetitions, scenario.pods_placed = 1, 2
    scenario.note = "event: matchLabelKeys [pod-template-hash]; applied: rollout completed"

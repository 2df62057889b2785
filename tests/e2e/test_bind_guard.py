"""Bind acts only on the extender's own pods, and only where their own constraints allow (issue 44).

Direct requests to the extender's bind verb, as a caller that reaches its port could send them,
on a control plane running both modes (our second scheduler and the cluster's own with the
in-scheduler stanza, one extender). Each pod below is Pending; each bind is refused with its
reason, and the API server shows the pod still unbound:

- a pod of another scheduler (schedulerName nobody-scheduler);
- a default-scheduler pod that did not opt in (its nodeSelector matches no node, so it waits);
- an opted-in pod onto a node its own nodeSelector excludes (it matches no node either).

The control: the same request for a pod of our scheduler onto a node its rules allow is bound.
"""

from __future__ import annotations

import time

import pytest
import requests

from extender.api.policy import OPT_IN_RESOURCE
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "both"}


def _pod(api, ns: str, name: str, scheduler: str, *, opted_in: bool = False, selector=None) -> dict:  # noqa: ANN001
    container: dict = {"name": "main", "image": "registry.invalid/db:1"}
    if opted_in:
        container["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}}
    spec: dict = {"schedulerName": scheduler, "containers": [container], "terminationGracePeriodSeconds": 0}
    if selector:
        spec["nodeSelector"] = selector
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    return api.create(f"/api/v1/namespaces/{ns}/pods", body)


def _bind(cluster, pod: dict, node: str) -> str:  # noqa: ANN001
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    response = requests.post(f"http://127.0.0.1:{cluster.ports['extender']}/bind", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json().get("Error") or ""


def test_bind_refuses_pods_that_are_not_its_own_and_nodes_their_constraints_exclude(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    nodes = [n.name for n in zoned_nodes({"bg-a": 2}, prefix="bg")]
    cluster.add_nodes(zoned_nodes({"bg-a": 2}, prefix="bg"))
    ns = cluster.namespace("bind-guard")
    nowhere = {"disk": "none-has-this"}
    cases = {
        "another scheduler's pod": (_pod(api, ns, "other", "nobody-scheduler"), "is not this extender's"),
        "a default-scheduler pod without the opt-in": (
            _pod(api, ns, "plain", "default-scheduler", selector=nowhere),
            "is not this extender's",
        ),
        "an opted-in pod, onto a node its nodeSelector excludes": (
            _pod(api, ns, "opted", "default-scheduler", opted_in=True, selector=nowhere),
            "nodeSelector or required node affinity excludes",
        ),
    }
    time.sleep(2)  # the watch shows them (bind waits for it too), and nothing places them
    answers = {what: _bind(cluster, pod, nodes[0]) for what, (pod, _) in cases.items()}
    for what, (pod, needle) in cases.items():
        assert needle in answers[what], (what, answers[what])
        live = api.get(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
        assert not live["spec"].get("nodeName"), f"{what}: bound to {live['spec']['nodeName']}"
    # The control, with our kube-scheduler stopped so that only this request can bind its pod:
    # the same direct bind of our scheduler's pod onto a node its rules allow is bound.
    cluster.process("placement-scheduler").stop()
    control = _pod(api, ns, "mine", SCHEDULER_NAME)
    time.sleep(1)
    assert _bind(cluster, control, nodes[1]) == ""
    bound = api.get(f"/api/v1/namespaces/{ns}/pods/mine")["spec"].get("nodeName")
    assert bound == nodes[1], bound
    scenario.repetitions += len(cases) + 1
    scenario.pods_placed += 1
    scenario.pending += len(cases)
    scenario.note = f"direct binds: {len(cases)} refused, each pod still unbound; the control bound ({answers})"

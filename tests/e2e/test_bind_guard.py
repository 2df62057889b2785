"""Bind acts only on the extender's own pods, and only where their own constraints allow.

Direct requests to the extender's bind verb, as a caller that reaches its port could send them,
on a control plane running both modes (our second scheduler and the cluster's own with the
in-scheduler stanza, one extender). Each pod below is Pending; each bind is refused with its
reason, and the API server shows the pod still unbound:

- a pod of another scheduler (schedulerName nobody-scheduler);
- a default-scheduler pod that did not opt in (its nodeSelector matches no node, so it waits);
- an opted-in pod onto a node its own nodeSelector excludes (it matches no node either).

The control: the same request for a pod of our scheduler onto a node its rules allow is bound.

And the requests before bind (filter, prioritize) judge the pod the watch holds, never the body:
a forged filter / prioritize / bind sequence (labels stripped, an empty inline policy, another
namespace) never binds a pod of a cap-1 group onto an occupied node, and a filter for a pod that
does not exist reserves nothing, so the real pod takes the node at once.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import requests

from extender.api.policy import INLINE_POLICY_ANNOTATION, OPT_IN_RESOURCE
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

from .workloads import ZONE, cli

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


HOST = "kubernetes.io/hostname"


def _capped(name: str, app: str, zone: str) -> dict:
    """A bare pod of our scheduler in group `app` (a cap of 1 per node), held to `zone`."""
    policy = {"group": {"selector": {"matchLabels": {"app": app}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": app},
            "annotations": {INLINE_POLICY_ANNOTATION: json.dumps(policy)},
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "nodeSelector": {ZONE: zone},
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
        },
    }


def _verb(cluster, verb: str, body: dict) -> dict:  # noqa: ANN001
    response = requests.post(f"http://127.0.0.1:{cluster.ports['extender']}/{verb}", json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_forged_filter_prioritize_bind_sequence_never_binds_against_the_policy(cluster, scenario) -> None:  # noqa: ANN001
    """Two nodes, a cap of 1 per node, three pods: the third waits. Request bodies that strip its
    labels and policy (or claim another namespace) are judged as the watch shows the pod: no
    node passes, and a bind onto an occupied node is refused; the API server shows it unbound
    and audit finds no broken rule."""
    api = cluster.admin
    nodes = cluster.add_nodes(zoned_nodes({"fz-a": 2}, prefix="fz"))
    ns = cluster.namespace("forged")
    for i in range(2):
        api.create(f"/api/v1/namespaces/{ns}/pods", _capped(f"fz-{i}", "fz", "fz-a"))
    placed = wait_for(
        "fz-0 and fz-1 on their own nodes",
        lambda: (
            names
            if len(
                names := {api.get(f"/api/v1/namespaces/{ns}/pods/fz-{i}")["spec"].get("nodeName") for i in range(2)}
                - {None}
            )
            == 2
            else None
        ),
        60,
    )
    waiting = api.create(f"/api/v1/namespaces/{ns}/pods", _capped("fz-2", "fz", "fz-a"))
    time.sleep(1)  # the watch shows it
    stripped = json.loads(json.dumps(waiting))
    stripped["metadata"]["labels"] = {}
    stripped["metadata"]["annotations"] = {INLINE_POLICY_ANNOTATION: "{}"}
    elsewhere = json.loads(json.dumps(stripped))
    elsewhere["metadata"]["namespace"] = "kube-system"
    answers = {}
    for what, body in {"labels and policy stripped": stripped, "another namespace": elsewhere}.items():
        filtered = _verb(cluster, "filter", {"Pod": body, "NodeNames": nodes})
        _verb(cluster, "prioritize", {"Pod": body, "NodeNames": nodes})
        meta = body["metadata"]
        bound = _verb(
            cluster,
            "bind",
            {"PodName": "fz-2", "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": sorted(placed)[0]},
        )
        answers[what] = (filtered.get("NodeNames"), filtered.get("Error", ""), bound.get("Error", ""))
        assert not filtered.get("NodeNames"), (what, filtered)
        assert bound.get("Error"), (what, bound)
    live = api.get(f"/api/v1/namespaces/{ns}/pods/fz-2")
    assert not live["spec"].get("nodeName"), f"bound to {live['spec']['nodeName']} against its cap"
    out = cli(cluster, "audit", "-n", ns)
    assert out.returncode == 0, out.stdout + out.stderr
    scenario.repetitions += len(answers)
    scenario.pods_placed += 2
    scenario.pending += 1
    scenario.note = f"forged sequences: {answers}"


def test_a_filter_for_a_pod_that_does_not_exist_leaves_the_node_free(cluster, scenario) -> None:  # noqa: ANN001
    """A filter naming a made-up pod of a cap-1 group, with the one node of its zone as the
    candidate, is refused as unknown and holds nothing: the group's real pod, created right
    after, is placed there (before, the ghost's reservation kept it out for 60 s)."""
    api = cluster.admin
    [only] = cluster.add_nodes(zoned_nodes({"gh-a": 1}, prefix="gh"))
    ns = cluster.namespace("ghost")
    ghost = _capped("gh-ghost", "gh", "gh-a")
    ghost["metadata"].update(namespace=ns, uid=str(uuid.uuid4()))
    answer = _verb(cluster, "filter", {"Pod": ghost, "NodeNames": [only]})
    assert "not in the extender's cache" in answer.get("Error", ""), answer
    _verb(cluster, "prioritize", {"Pod": ghost, "NodeNames": [only]})
    began = time.monotonic()
    api.create(f"/api/v1/namespaces/{ns}/pods", _capped("gh-0", "gh", "gh-a"))
    node = wait_for(
        "the real pod placed on the node the ghost named",
        lambda: api.get(f"/api/v1/namespaces/{ns}/pods/gh-0")["spec"].get("nodeName"),
        30,
    )
    assert node == only
    scenario.repetitions += 1
    scenario.pods_placed += 1
    scenario.note = f"ghost filter refused as unknown; the real pod placed on {only} in {time.monotonic() - began:.1f}s"


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

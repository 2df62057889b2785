"""Scenario 5 (opt in and out by schedulerName alone) and scenario 6 (an invalid policy keeps
the pod Pending with the validation message where `kubectl describe pod` shows it)."""

from __future__ import annotations

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

from .workloads import cli, create_statefulset, deployment, events_for, pods, scheduled_by, statefulset, wait_settled

HOST = "kubernetes.io/hostname"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def ns(cluster):
    cluster.add_nodes(zoned_nodes({"zone-a": 2, "zone-b": 2, "zone-c": 2}))
    return cluster.namespace("optin")


def extender_log(cluster) -> str:
    return cluster.extender_process().log_path.read_text(errors="replace")


def set_scheduler(api, namespace: str, name: str, scheduler: str) -> None:
    api.merge_patch(
        f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}",
        {"spec": {"template": {"spec": {"schedulerName": scheduler}}}},
    )


def rolled_to(api, namespace: str, selector: str, scheduler: str, count: int):
    def done():
        items = [p for p in pods(api, namespace, selector) if not p["metadata"].get("deletionTimestamp")]
        ok = len(items) == count and all(
            p["spec"]["schedulerName"] == scheduler and p["spec"].get("nodeName") for p in items
        )
        return items if ok else None

    return wait_for(f"{count} pods rolled to {scheduler}", done, 180)


def test_opt_in_and_out_by_scheduler_name_alone(cluster, ns, scenario) -> None:
    api = cluster.admin
    policy = {"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]}
    create_statefulset(api, ns, statefulset("web", 3, policy=policy, scheduler="default-scheduler", parallel=False))
    native = wait_settled(api, ns, "app=web", 3)
    for p in native:
        assert scheduled_by(api, ns, p["metadata"]["name"]) <= {"default-scheduler"}
    log = extender_log(cluster)
    assert not any(f"{ns}/{p['metadata']['name']}" in log for p in native), (
        "a default-scheduler pod reached the extender"
    )

    # Adopt: change schedulerName only. The rolling update recreates each pod through the extender.
    set_scheduler(api, ns, "web", SCHEDULER_NAME)
    adopted = rolled_to(api, ns, "app=web", SCHEDULER_NAME, 3)
    wait_for(
        "Scheduled events from placement-scheduler",
        lambda: all(SCHEDULER_NAME in scheduled_by(api, ns, p["metadata"]["name"]) for p in adopted),
        30,
    )
    log = extender_log(cluster)
    assert all(f"filter {ns}/{p['metadata']['name']}" in log for p in adopted)
    assert len({p["spec"]["nodeName"] for p in adopted}) == 3  # the policy held: one per node

    # Retire: schedulerName back, nothing else. New pods never reach the extender.
    lines_before = log.count("\n")
    set_scheduler(api, ns, "web", "default-scheduler")
    retired = rolled_to(api, ns, "app=web", "default-scheduler", 3)
    new_lines = "\n".join(extender_log(cluster).splitlines()[lines_before:])
    assert not any(f"filter {ns}/{p['metadata']['name']}" in new_lines for p in retired)
    scenario.repetitions += 3
    scenario.pods_placed += len(native) + len(adopted) + len(retired)


@pytest.mark.parametrize(
    "name,annotation,needle",
    [
        (
            "badcap",
            {"caps": [{"topologyKey": "kubernetes.io/hostname", "fraction": "1/3"}]},
            "a fractional cap must spell out its comparison",
        ),
        ("typo", {"cpas": []}, "cpas: Extra inputs are not permitted"),
    ],
    ids=["fraction-without-comparison", "unknown-field"],
)
def test_invalid_policy_keeps_the_pod_pending_with_the_message(cluster, ns, scenario, name, annotation, needle) -> None:
    api = cluster.admin
    create_statefulset(api, ns, statefulset(name, 1, policy=annotation))
    pod_name = f"{name}-0"

    def pending_with_message():
        pod = api.get(f"/api/v1/namespaces/{ns}/pods/{pod_name}")
        conditions = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or ()}
        message = conditions.get("PodScheduled", {}).get("message", "")
        return pod if needle in message and not pod["spec"].get("nodeName") else None

    pod = wait_for("PodScheduled condition with the validation message", pending_with_message, 60)
    assert not pod["spec"].get("nodeName")
    # SchedulerError, not Unschedulable: autoscalers consider only Unschedulable pods, so a broken
    # policy never makes them add a node (README "Autoscaling clusters").
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert conditions["PodScheduled"]["reason"] == "SchedulerError", conditions["PodScheduled"]
    warning = wait_for(
        "the extender's InvalidPlacementPolicy event",
        lambda: [e for e in events_for(api, ns, pod_name) if e.get("reason") == "InvalidPlacementPolicy"],
        30,
    )
    assert needle in warning[0]["message"]
    scenario.repetitions += 1
    scenario.pending += 1


def test_missing_named_policy_keeps_the_pod_pending(cluster, ns, scenario) -> None:
    api = cluster.admin
    create_statefulset(api, ns, statefulset("orphan", 1, policy_name="does-not-exist"))
    needle = f"PlacementPolicy {ns}/does-not-exist not found"

    def pending():
        pod = api.get(f"/api/v1/namespaces/{ns}/pods/orphan-0")
        messages = [c.get("message", "") for c in (pod.get("status") or {}).get("conditions") or ()]
        return any(needle in m for m in messages) and not pod["spec"].get("nodeName")

    wait_for("the missing-policy message", pending, 60)
    # Creating the policy lets it through. kube-scheduler does not watch PlacementPolicies, so it
    # would retry the Pending pod within its 5-minute unschedulable flush; deleting the pod (the
    # StatefulSet recreates it) retries at once, as the README tells operators.
    api.create(
        f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies",
        {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "does-not-exist"},
            "spec": {"zones": {"allowed": ["zone-b"]}},
        },
    )
    api.delete(f"/api/v1/namespaces/{ns}/pods/orphan-0")
    placed = wait_settled(api, ns, "app=orphan", 1, timeout=120)
    assert placed[0]["spec"]["nodeName"].startswith("node-b")
    scenario.repetitions += 1
    scenario.pods_placed += 1


def test_a_selector_that_misses_its_pods_keeps_them_pending_and_audit_lists_it_once(cluster, scenario) -> None:
    """A typo in group.selector once switched every rule off (10 pods under a cap of 1
    put 4 on one node; audit said ok). Now each pod is Pending with the message naming
    group.selector, none is placed, and audit lists the policy once and exits 1."""
    api = cluster.admin
    ns = cluster.namespace("selector-typo")
    typo = {"group": {"selector": {"matchLabels": {"app": "sleectd"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("selected", 10, policy=typo))

    def all_pending_with_the_fix():
        items = pods(api, ns, "app=selected")
        messages = [
            c.get("message", "")
            for p in items
            for c in (p.get("status") or {}).get("conditions") or ()
            if c["type"] == "PodScheduled"
        ]
        named = [m for m in messages if "group.selector" in m and "does not select the pod itself" in m]
        return items if len(items) == 10 and len(named) == 10 else None

    items = wait_for("10 pods Pending, each told to fix group.selector", all_pending_with_the_fix, 90)
    assert not [p for p in items if p["spec"].get("nodeName")], "none placed against its policy"
    out = cli(cluster, "audit", "-n", ns)
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.count("policy error:") == 1, out.stdout
    scenario.repetitions += 1
    scenario.pending += 10
    scenario.note = (
        "10 pods whose policy's group.selector misses them: 10 Pending naming group.selector; audit once, exit 1"
    )

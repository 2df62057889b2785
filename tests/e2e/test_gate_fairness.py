"""One tenant's stuck pods never hold another's at the placeable gate.

In-scheduler mode; every pod below is opted in by hand and gated at creation (the install's
MutatingAdmissionPolicy). Each pass of the gate evaluates at most 32 held pods; before it
rotated, every pass began at the first held pod in (namespace, workload, ordinal) order, so 40
pods of one namespace naming a PlacementPolicy that does not exist kept another namespace's 2
placeable pods gated for as long as the 40 waited (150 s when measured), and of 1,000
held pods only the first 32 ever got an Event.

- 40 pods of namespace `aaa-stuck` name a missing PlacementPolicy; then 2 placeable pods of
  namespace `zzz-other` (sorted after it) are created: both bound within 10 s.
- 1,004 pods under a per-node cap of 1 on the 4 nodes: 4 bound, and each of the 1,000 with no
  place gets its `WaitingForPlace` Event. They are created by the test, 16 at a time (as a
  ReplicaSet would, but not at kube-controller-manager's 20 writes a second: 50 s of CI time).
"""

from __future__ import annotations

import copy
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from extender.api.policy import POLICY_REF_ANNOTATION
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from parallel import machine_alone

from .test_in_scheduler import opted_in
from .workloads import deployment, pods

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "in-scheduler"}
HOST = "kubernetes.io/hostname"
MANY = 1000


def capped(app: str) -> dict:
    return {"group": {"selector": {"matchLabels": {"app": app}}}, "caps": [{"topologyKey": HOST, "max": 1}]}


def _bound(api, ns: str, app: str) -> int:  # noqa: ANN001
    return sum(1 for p in pods(api, ns, f"app={app}") if p["spec"].get("nodeName"))


def test_pods_that_cannot_be_placed_never_hold_another_tenants_pods(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({"fr-a": 4}, prefix="fr"))
    stuck_ns, other_ns = cluster.namespace("aaa-stuck"), cluster.namespace("zzz-other")
    stuck = opted_in(deployment("stuck", 40, policy={}))
    template = stuck["spec"]["template"]["metadata"]
    template["annotations"] = {POLICY_REF_ANNOTATION: "does-not-exist"}
    api.create(f"/apis/apps/v1/namespaces/{stuck_ns}/deployments", stuck)
    wait_for(
        "40 held pods naming a missing policy",
        lambda: sum(1 for p in pods(api, stuck_ns, "app=stuck") if p["spec"].get("schedulingGates")) == 40,
        120,
    )
    other = opted_in(deployment("other", 2, policy=capped("other")))
    with machine_alone():  # a timed wait (tests/parallel.py)
        started = time.monotonic()
        api.create(f"/apis/apps/v1/namespaces/{other_ns}/deployments", other)
        wait_for("the other tenant's 2 pods bound", lambda: _bound(api, other_ns, "other") == 2, 120, interval=0.2)
        took = time.monotonic() - started
    assert _bound(api, stuck_ns, "stuck") == 0
    scenario.pods_placed = 2
    scenario.note = (
        f"40 held pods naming a missing policy in one namespace: another's 2 placeable pods bound in {took:.1f} s"
    )
    print(f"\n{scenario.note}")
    assert took <= 10, scenario.note


def test_every_held_pod_gets_its_event(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    ns = cluster.namespace("many-held")
    template = opted_in(deployment("many", MANY + 4, policy=capped("many")))["spec"]["template"]  # cap 1, 4 nodes

    def create(i: int) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
        pod["metadata"]["name"] = f"many-{i}"
        api.create(f"/api/v1/namespaces/{ns}/pods", pod)

    with ThreadPoolExecutor(16) as creators:
        list(creators.map(create, range(MANY + 4)))
    wait_for(f"{MANY + 4} pods created", lambda: len(pods(api, ns, "app=many")) == MANY + 4, 300, interval=1)
    wait_for("4 of them bound, 1 a node", lambda: _bound(api, ns, "many") == 4, 120)

    def told() -> int:
        events = api.list(f"/api/v1/namespaces/{ns}/events", fieldSelector="reason=WaitingForPlace")
        return len({e["involvedObject"]["name"] for e in events})

    wait_for(f"a WaitingForPlace event for each of the {MANY} held pods", lambda: told() == MANY, 300, interval=2)
    held = sum(1 for p in pods(api, ns, "app=many") if p["spec"].get("schedulingGates"))
    scenario.pods_placed, scenario.pending = 4, held
    scenario.note = f"{MANY} pods with no place: {held} held by the gate, each told why in its own Event"
    print(f"\n{scenario.note}")
    assert held == MANY

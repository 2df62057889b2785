"""deploy/ as users install it (the second scheduler, the extender as its sidecar on loopback), on
a real node: the image we build, run by a real kubelet.

`kubectl kustomize deploy/overlays/kube-1.37/` after the documented image edit (deploy/components/
image names the local registry, where the image we build was pushed under a name that is not the
default: the kubelet pulls it; kube-scheduler's image is imported, conftest.pin_images). Then:
placement-scheduler Ready (both containers, both replicas, one holding the lease); a StatefulSet
under ordinal zones and a cap placed by it; the extender container killed, and frozen, each time
timed until the kubelet has restarted it and the pod is Ready again. Figures go to test-logs/realnode/figures.json.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster

from .installs import (
    DOCUMENTED_OVERLAYS,
    Images,
    apply,
    assert_liveness_failed,
    await_ready,
    await_restart,
    extender_container,
    figure,
    freeze,
    pin_images,
    place_statefulset,
    render,
    uninstall,
)

pytestmark = pytest.mark.e2e

OVERLAY = DOCUMENTED_OVERLAYS["kube-<minor>"]  # of the user's deploy/ (Images.deploy)
APP = "app.kubernetes.io/name=placement-scheduler"


@pytest.fixture(scope="module")
def deployed(node_cluster: LocalCluster, images: Images, kwok_beside: list[str]) -> Iterator[LocalCluster]:
    """deploy/ applied, placement-scheduler Ready; taken away after the module."""
    docs = render(node_cluster, images.deploy / OVERLAY)
    pin_images(docs, images)
    started = time.monotonic()
    apply(node_cluster, docs)
    api = node_cluster.admin
    assert api is not None
    pods = await_ready(api, APP, 2)
    figure("deploy/ applied -> both pods Ready (s)", time.monotonic() - started)
    node = node_cluster.real_node
    assert node is not None
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    for pod in pods:
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": images.scheduler,
            "extender": images.extender,
        }
    wait_for("a placement-scheduler replica to hold the lease", lambda: _lease_holder(api), 120)
    yield node_cluster
    uninstall(node_cluster, docs)


def test_deploy_runs_on_the_real_node(deployed: LocalCluster) -> None:
    api = deployed.admin
    assert api is not None
    pods = api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=APP)
    for pod in pods:
        statuses = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        assert set(statuses) == {"kube-scheduler", "extender"}
        assert all(c["ready"] and "running" in c["state"] for c in statuses.values()), statuses
    holder = _lease_holder(api)
    assert holder and any(holder.startswith(p["metadata"]["name"]) for p in pods), holder


def test_statefulset_placed_by_placement_scheduler(deployed: LocalCluster) -> None:
    seconds = place_statefulset(deployed, "db", SCHEDULER_NAME)
    figure("deploy/: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_extender_restarted_after_kill(deployed: LocalCluster) -> None:
    api = deployed.admin
    node = deployed.real_node
    assert api is not None and node is not None
    name, container_id, restarts = extender_container(api, APP)
    pid = node.container_pid(container_id)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)  # a process our kubelet started, found through containerd
    seconds = await_restart(api, name, restarts, 180)
    figure("extender SIGKILLed -> restarted and pod Ready (s)", seconds)
    assert time.monotonic() - started >= seconds


def test_extender_restarted_after_freeze(deployed: LocalCluster) -> None:
    """SIGSTOP of every process in the container: it still accepts connections (the kernel does)
    and answers none, so only the liveness probe can tell, and the kubelet restarts it."""
    api = deployed.admin
    node = deployed.real_node
    assert api is not None and node is not None
    name, container_id, restarts = extender_container(api, APP)
    freeze(node, container_id)
    seconds = await_restart(api, name, restarts, 300)
    figure("extender frozen (SIGSTOP) -> restarted by its liveness probe and pod Ready (s)", seconds)
    assert_liveness_failed(api, name)


# ------------------------------------------------------------------ helpers


def _lease_holder(api: Api) -> str | None:
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
    return (lease.get("spec") or {}).get("holderIdentity")

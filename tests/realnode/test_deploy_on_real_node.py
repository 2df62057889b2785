"""deploy/ as users install it (the second scheduler, the extender as its sidecar on loopback), on
a real node: the image we build, run by a real kubelet.

`kubectl kustomize deploy/overlays/kube-1.37/` after the documented image edit (deploy/components/
image names the local registry, where the image we build was pushed under a name that is not the
default: the kubelet pulls it; kube-scheduler's image is imported, conftest.pin_images). Then:
placement-scheduler Ready (both containers, both replicas, one holding the lease); a StatefulSet
under ordinal zones and a cap placed by it; the extender container killed, and frozen, each time
timed until the kubelet has restarted it and the pod is Ready again. Then the documented upgrade
(docs/install/release.md: the new tag set in deploy/components/image, `kubectl apply -k` of the same
overlay; the image pushed again under that tag): both pods roll to it and place again; and the
documented uninstall (`kubectl delete -k` of the overlay) leaves no object of the install, the
namespace and the CRDs included. Figures go to test-logs/realnode/figures.json.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

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
from .prometheus import scrape_install
from .registry import crane

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


def test_prometheus_scrapes_the_install(deployed: LocalCluster, tmp_path: Path) -> None:
    """A real Prometheus scrapes both pods' extender metrics port and kube-scheduler's secure port
    with a reader's token; the shipped rules' metrics are all there (tests/realnode/prometheus.py)."""
    scrape_install(deployed, tmp_path, "sidecar", extender=APP, scheduler=APP)


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


def test_upgrade_to_a_new_image_tag(deployed: LocalCluster, images: Images, tmp_path: Path) -> None:
    """docs/install/release.md's step 3 for kustomize: the new tag in deploy/components/image (of a
    copy: the later modules install the first tag), then `kubectl apply -k` of the same overlay."""
    api = deployed.admin
    assert api is not None
    repository, _, tag = images.extender.rpartition(":")
    upgraded = f"{repository}:{tag}-kustomize-upgrade"
    out = subprocess.run(
        [str(crane()), "tag", images.extender, upgraded.rpartition(":")[2], "--insecure"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    user = tmp_path / "user"
    shutil.copytree(images.deploy.parent, user)
    component = user / "deploy" / "components" / "image" / "kustomization.yaml"
    doc = yaml.safe_load(component.read_text())
    doc["images"] = [{"name": "placement-extender", "newName": repository, "newTag": upgraded.rpartition(":")[2]}]
    component.write_text(yaml.safe_dump(doc))
    docs = render(deployed, user / "deploy" / OVERLAY)
    pin_images(docs, dataclasses.replace(images, extender=upgraded))
    started = time.monotonic()
    apply(deployed, docs)

    def rolled() -> list | None:
        pods = api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=APP)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        now = {c["image"] for p in live for c in p["spec"]["containers"] if c["name"] == "extender"}
        return live if len(live) == 2 and now == {upgraded} else None

    wait_for("both pods on the new tag", rolled, 300, 1)
    await_ready(api, APP, 2)
    wait_for("a replica of the new tag holding the lease", lambda: _lease_holder(api), 120)
    figure("kustomize upgrade to a new image tag -> both pods Ready (s)", time.monotonic() - started)
    seconds = place_statefulset(deployed, "db-upgraded", SCHEDULER_NAME)
    figure("deploy/ after upgrade: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_uninstall_leaves_nothing_of_the_install(deployed: LocalCluster, images: Images) -> None:
    """docs/install/index.md's uninstall: the workloads retired (here: the test's own StatefulSets
    deleted), then `kubectl delete -k` of the overlay. Every object the overlay renders is gone,
    the namespace and the CRDs with it; the next modules install into a cluster without them."""
    api = deployed.admin
    assert api is not None
    for sts in api.list("/apis/apps/v1/statefulsets"):
        if sts["spec"]["template"]["spec"].get("schedulerName") == SCHEDULER_NAME:
            deployed.kubectl("delete", "namespace", sts["metadata"]["namespace"], "--wait=false", check=False)
    overlay = images.deploy / OVERLAY
    rendered = yaml.safe_dump_all(render(deployed, overlay))
    deployed.kubectl("delete", "-k", str(overlay))  # the documented command, on the user's copy

    def left() -> list[str]:
        out = deployed.kubectl("get", "--ignore-not-found", "-o", "name", "-f", "-", input=rendered, check=False)
        return out.stdout.split()

    wait_for("every object of the install gone", lambda: not left(), 180, 1)


# ------------------------------------------------------------------ helpers


def _lease_holder(api: Api) -> str | None:
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
    return (lease.get("spec") or {}).get("holderIdentity")

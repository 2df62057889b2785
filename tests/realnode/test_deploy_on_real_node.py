"""deploy/ as a platform team installs it from its own repository (the second scheduler, the
extender as its sidecar on loopback), on a real node: the released image, run by a real kubelet.

docs/install/index.md's kustomize install, run as written: the release tag's deploy/ and config/
vendored into the team's repository, the extender image's digest read from the team's registry,
and the page's kustomization (our overlay as its base, an `images:` entry for each image: the
extender by digest, kube-scheduler's mirror) applied with `kubectl apply -k`. Both images are
pulled from the team's registry, where the documented release block pushed them (conftest's
`released`). Then: placement-scheduler Ready (both containers, both replicas, one holding the
lease); a StatefulSet under ordinal zones and a cap placed by it; a real Prometheus scrapes it; the
extender container killed, and frozen, each time timed until the kubelet has restarted it and the
pod is Ready again. Then an upgrade (a new tag of the image in the team's kustomization, `kubectl
apply -k` again): both pods roll to it and place again; and the documented uninstall (`kubectl
delete -k` of the team's folder) leaves no object of the install, the namespace and the CRDs
included. Figures go to test-logs/realnode/figures.json.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster

from .gitops import team_repository
from .installs import (
    assert_liveness_failed,
    await_ready,
    await_restart,
    extender_container,
    figure,
    freeze,
    place_statefulset,
    render,
    uninstall,
)
from .prometheus import scrape_install
from .releases import Released

pytestmark = pytest.mark.e2e

APP = "app.kubernetes.io/name=placement-scheduler"


@pytest.fixture(scope="module")
def team_folder(released: Released, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's repository, made by the install page's commands (gitops.py): its kustomization's folder."""
    env = dict(os.environ, **released.client_env)
    return team_repository(tmp_path_factory.mktemp("team"), released.clone, released.version, released.registry, env)


@pytest.fixture(scope="module")
def deployed(
    node_cluster: LocalCluster, released: Released, team_folder: Path, kwok_beside: list[str]
) -> Iterator[LocalCluster]:
    """`kubectl apply -k` of the team's folder, placement-scheduler Ready; taken away after the module."""
    docs = render(node_cluster, team_folder)
    started = time.monotonic()
    node_cluster.kubectl("apply", "-k", str(team_folder))
    api = node_cluster.admin
    assert api is not None
    pods = await_ready(api, APP, 2)
    figure("team's kustomization applied -> both pods Ready (s)", time.monotonic() - started)
    node = node_cluster.real_node
    assert node is not None
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    digest = yaml.safe_load((team_folder / "kustomization.yaml").read_text())["images"][0]["digest"]
    for pod in pods:  # both pulled from the team's registry: nothing here was imported or pinned
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": released.scheduler_image,
            "extender": f"{released.registry}/placement-extender@{digest}",
        }
        assert all(c.get("imagePullPolicy") != "Never" for c in pod["spec"]["containers"])
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


def test_upgrade_to_a_new_image_tag(deployed: LocalCluster, released: Released, team_folder: Path) -> None:
    """An upgrade as the team makes it: the new image in its registry, its kustomization's
    extender entry changed to it (a reviewed commit), `kubectl apply -k` of the same folder."""
    api = deployed.admin
    assert api is not None
    upgraded = f"{released.extender_image}-kustomize-upgrade"
    out = subprocess.run(
        ["skopeo", "copy", f"docker://{released.extender_image}", f"docker://{upgraded}"],
        env=dict(os.environ, **released.client_env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    kustomization = team_folder / "kustomization.yaml"
    before = kustomization.read_text()
    doc = yaml.safe_load(before)
    repository, _, tag = upgraded.rpartition(":")
    doc["images"][0] = {"name": "placement-extender", "newName": repository, "newTag": tag}
    kustomization.write_text(yaml.safe_dump(doc))
    started = time.monotonic()
    try:
        deployed.kubectl("apply", "-k", str(team_folder))
    finally:
        kustomization.write_text(before)  # the uninstall below deletes what the page's file names

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


def test_uninstall_leaves_nothing_of_the_install(deployed: LocalCluster, team_folder: Path) -> None:
    """docs/install/index.md's uninstall: the workloads retired (here: the test's own StatefulSets
    deleted), then `kubectl delete -k` of the team's folder. Every object it renders is gone,
    the namespace and the CRDs with it; the next modules install into a cluster without them."""
    api = deployed.admin
    assert api is not None
    for sts in api.list("/apis/apps/v1/statefulsets"):
        if sts["spec"]["template"]["spec"].get("schedulerName") == SCHEDULER_NAME:
            deployed.kubectl("delete", "namespace", sts["metadata"]["namespace"], "--wait=false", check=False)
    rendered = yaml.safe_dump_all(render(deployed, team_folder))
    deployed.kubectl("delete", "-k", str(team_folder))  # the documented command, on the team's folder

    def left() -> list[str]:
        out = deployed.kubectl("get", "--ignore-not-found", "-o", "name", "-f", "-", input=rendered, check=False)
        return out.stdout.split()

    wait_for("every object of the install gone", lambda: not left(), 180, 1)


# ------------------------------------------------------------------ helpers


def _lease_holder(api: Api) -> str | None:
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
    return (lease.get("spec") or {}).get("holderIdentity")

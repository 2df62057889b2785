"""deploy/ as users install it, on a real node: the image we build, run by a real kubelet.

The local control plane with a real kubelet and kube-proxy (extender/devcluster/realnode/); the
extender image built from the Dockerfile (hack/image/build.py --base debian) and a kube-scheduler
image of the pinned binary, imported into the node's containerd; `kubectl apply -k
deploy/overlays/kube-1.37/` (images pinned to those, never pulled). Then: placement-scheduler
Ready (both containers, both replicas); a StatefulSet with a policy placed by it (and only where
the policy allows: kwok nodes of another zone stand beside the real one); the extender container
killed, and frozen, each time timed until the kubelet has restarted it and the pod is Ready again.
The host is checked to be as it was found once the node is gone.

Figures are printed and written to test-logs/realnode/figures.json.
"""

from __future__ import annotations

import json
import os
import signal
import time
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.workloads import scheduled_by, statefulset
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import REPO, SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster, NodeSpec
from extender.devcluster.realnode import PAUSE_IMAGE, STATE_FILE, RealNode, compare, restore_by_hand, snapshot

pytestmark = pytest.mark.e2e

ZONE = "zone-real"
OVERLAY = REPO / "deploy" / "overlays" / "kube-1.37"
APP = "app.kubernetes.io/name=placement-scheduler"
FIGURES: dict[str, Any] = {}


def figure(name: str, value: Any) -> None:
    FIGURES[name] = round(value, 1) if isinstance(value, float) else value
    print(f"\n[realnode] {name}: {FIGURES[name]}", flush=True)
    out = REPO / "test-logs" / "realnode" / "figures.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(FIGURES, indent=1))


@pytest.fixture(scope="module")
def node_cluster() -> Iterator[LocalCluster]:
    if STATE_FILE.exists():
        restore_by_hand()  # a crashed run's leftovers: the snapshot below must be of the host itself
    before = snapshot()
    started = time.monotonic()
    cluster = LocalCluster(real_node=RealNode(zone=ZONE))
    with cluster:
        figure("control plane and node up (s)", time.monotonic() - started)
        assert cluster.real_node is not None
        for name, seconds in cluster.real_node.timings.items():
            figure(f"{name} (s)", seconds)
        yield cluster
        (REPO / "test-logs" / "realnode").mkdir(parents=True, exist_ok=True)
        cluster.keep_logs(REPO / "test-logs" / "realnode" / "logs")
    differences = compare(before, snapshot())
    figure("host state differences after stop", differences)
    assert not differences, f"the host is not as it was found: {differences}"


@pytest.fixture(scope="module")
def deployed(node_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
    """The images built and loaded, deploy/ applied, placement-scheduler Ready."""
    node = node_cluster.real_node
    assert node is not None
    rendered = list(yaml.safe_load_all(node_cluster.kubectl("kustomize", str(OVERLAY)).stdout))
    images = {
        c["name"]: c["image"]
        for d in rendered
        if d["kind"] == "Deployment"
        for c in d["spec"]["template"]["spec"]["containers"]
    }
    started = time.monotonic()
    extender_archive = node.build_image("--base", "debian")
    figure("extender image build (s, cached when unchanged)", time.monotonic() - started)
    started = time.monotonic()
    node.load_image(extender_archive)
    figure("extender image load (s)", time.monotonic() - started)
    figure("extender image archive (MB)", extender_archive.stat().st_size / 1e6)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    extender_ref = f"placement-extender:{version}"  # what hack/image/build.py names it
    assert node_cluster.bin_dir is not None
    started = time.monotonic()
    scheduler_archive = node.build_image(
        "--static-binary",
        str(node_cluster.bin_dir / "kube-scheduler"),
        "--name",
        images["kube-scheduler"],  # the tag deploy/ names, so the kubelet finds it and never pulls
        "--entrypoint",
        "/usr/local/bin/kube-scheduler",  # deploy/'s `command: [kube-scheduler, ...]` finds it on PATH
    )
    node.load_image(scheduler_archive)
    figure("kube-scheduler image build + load (s)", time.monotonic() - started)

    mine = tmp_path_factory.mktemp("deploy")
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(OVERLAY, mine)],
                "images": [{"name": "placement-extender", "newName": "placement-extender", "newTag": version}],
                "patches": [
                    {
                        "target": {"kind": "Deployment", "name": "placement-scheduler"},
                        "patch": yaml.safe_dump(
                            [
                                {
                                    "op": "add",
                                    "path": f"/spec/template/spec/containers/{i}/imagePullPolicy",
                                    "value": "Never",
                                }
                                for i in range(2)
                            ]
                        ),
                    }
                ],
            }
        )
    )
    started = time.monotonic()
    applied = node_cluster.kubectl("apply", "-k", str(mine), check=False)
    assert applied.returncode == 0, applied.stderr
    api = node_cluster.admin
    assert api is not None

    def ready() -> list[dict[str, Any]] | None:
        pods = api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=APP)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == 2 and all(_ready(p) for p in live) else None

    try:
        pods = wait_for("placement-scheduler 2/2 pods Ready", ready, 300, 1)
    except TimeoutError:
        _dump(api)
        raise
    figure("deploy/ applied -> both pods Ready (s)", time.monotonic() - started)
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    for pod in pods:
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": images["kube-scheduler"],
            "extender": extender_ref,
        }
    wait_for("a placement-scheduler replica to hold the lease", lambda: _lease_holder(api), 120)
    return node_cluster


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
    """Only the real node is in the policy's zone; two kwok nodes of another zone are emptier and
    would win on kube-scheduler's own scores, so pods there would mean the extender was not asked."""
    api = deployed.admin
    node = deployed.real_node
    assert api is not None and node is not None
    deployed.add_nodes([NodeSpec("kwok-b1", "zone-b"), NodeSpec("kwok-b2", "zone-b")])
    namespace = deployed.namespace("realnode")
    policy = {
        "zones": {"allowed": [ZONE]},
        "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}],
    }
    manifest = statefulset("db", 2, policy=policy, scheduler=SCHEDULER_NAME)
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container.update(image=PAUSE_IMAGE, imagePullPolicy="Never")  # a real container: an image the node has
    started = time.monotonic()
    api.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", manifest)

    def running() -> list[dict[str, Any]] | None:
        pods = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=db")
        return pods if len(pods) == 2 and all(_ready(p) for p in pods) else None

    try:
        pods = wait_for("the StatefulSet's 2 pods Running and Ready", running, 180, 1)
    except TimeoutError:
        _dump(api, namespace)
        raise
    figure("StatefulSet created -> 2 pods Ready (s)", time.monotonic() - started)
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    for pod in pods:
        assert pod["spec"]["schedulerName"] == SCHEDULER_NAME
        assert scheduled_by(api, namespace, pod["metadata"]["name"]) == {SCHEDULER_NAME}


def test_extender_restarted_after_kill(deployed: LocalCluster) -> None:
    api = deployed.admin
    node = deployed.real_node
    assert api is not None and node is not None
    name, container_id, restarts = _extender(api)
    pid = node.container_pid(container_id)
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)  # a process our kubelet started, found through containerd
    seconds = _await_restart(api, name, restarts, 180)
    figure("extender SIGKILLed -> restarted and pod Ready (s)", seconds)
    assert time.monotonic() - started >= seconds


def test_extender_restarted_after_freeze(deployed: LocalCluster) -> None:
    """SIGSTOP of every process in the container: it still accepts connections (the kernel does)
    and answers none, so only the liveness probe can tell, and the kubelet restarts it."""
    api = deployed.admin
    node = deployed.real_node
    assert api is not None and node is not None
    name, container_id, restarts = _extender(api)
    pids = [int(line.split()[0]) for line in node.ctr("tasks", "ps", container_id).stdout.splitlines()[1:] if line]
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    seconds = _await_restart(api, name, restarts, 300)
    figure("extender frozen (SIGSTOP) -> restarted by its liveness probe and pod Ready (s)", seconds)
    events = [
        e
        for e in api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/events")
        if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == "Unhealthy"
    ]
    assert any("Liveness" in e.get("message", "") for e in events), [e.get("message") for e in events]


# ------------------------------------------------------------------ helpers


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def _lease_holder(api: Api) -> str | None:
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
    return (lease.get("spec") or {}).get("holderIdentity")


def _extender(api: Api) -> tuple[str, str, int]:
    """The first placement-scheduler pod: its name, its extender container's id, its restart count."""
    pod = sorted(
        api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=APP), key=lambda p: p["metadata"]["name"]
    )[0]
    status = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "extender")
    assert status["ready"], status
    return pod["metadata"]["name"], status["containerID"].split("://", 1)[1], status["restartCount"]


def _await_restart(api: Api, name: str, restarts: int, timeout: float) -> float:
    """Seconds until the pod's extender has restarted once more and the pod is Ready again."""
    started = time.monotonic()

    def restarted() -> bool:
        pod = api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{name}")
        status = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "extender")
        return status["restartCount"] == restarts + 1 and status["ready"] and _ready(pod)

    try:
        wait_for(f"{name}'s extender restarted and Ready", restarted, timeout, 0.5)
    except TimeoutError:
        _dump(api)
        raise
    return time.monotonic() - started


def _dump(api: Api, namespace: str = SYSTEM_NAMESPACE) -> None:
    for pod in api.list(f"/api/v1/namespaces/{namespace}/pods"):
        print(pod["metadata"]["name"], pod["spec"].get("nodeName"), json.dumps(pod.get("status"), indent=1)[:3000])
    for event in api.list(f"/api/v1/namespaces/{namespace}/events")[-40:]:
        print(event.get("reason"), (event.get("involvedObject") or {}).get("name"), event.get("message"))

"""What the real-node scenarios share: the installs' steps (render, pin the images we built, the
Secrets a TLS install needs, apply, take away), the waits on pods, the StatefulSet placed through
an install, the extender container's freeze and restart, and the figures file. The fixtures that
hold the session's one node are in conftest.py."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.workloads import scheduled_by, statefulset
from extender.api.policy import OPT_IN_RESOURCE
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, LocalCluster
from extender.devcluster.pki import PKI, ClientCert

from .harness import PAUSE_IMAGE, RealNode

ZONE = "zone-real"
# On the kwok nodes beside the real one: a pod there never runs, so only the test's workloads,
# which tolerate it, may be placed there (and are kept off by their policy, through the extender).
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
FIGURES: dict[str, Any] = {}
FIGURES_FILE = REPO / "test-logs" / "realnode" / "figures.json"


def figure(name: str, value: Any) -> None:
    """A measured figure: printed, and kept in test-logs/realnode/figures.json (the README's source)."""
    FIGURES[name] = round(value, 1) if isinstance(value, float) else value
    print(f"\n[realnode] {name}: {FIGURES[name]}", flush=True)
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    FIGURES_FILE.write_text(json.dumps(FIGURES, indent=1))


# The install commands docs/install/index.md gives, run here as written but for the two things
# every reader puts in: their registry (the page's DOCS_REGISTRY) and the release's version (the
# page's DOCS_VERSION): documented() puts in the test's. tests/unit/test_install_docs.py fails when
# the page and these part.
DOCS_REGISTRY = "registry.example.com/platform"
DOCS_VERSION = "<version>"
HELM_INSTALL = (
    f"helm install placement oci://{DOCS_REGISTRY}/charts/placement-scheduler --version {DOCS_VERSION}"
    " -n placement-system --create-namespace"
    f" --set image.repository={DOCS_REGISTRY}/placement-extender"
    f" --set scheduler.image.repository={DOCS_REGISTRY}/kube-scheduler"
)


def documented(text: str, registry: str, version: str) -> str:
    """A command or manifest of the install page with the reader's registry and version in it."""
    return text.replace(DOCS_REGISTRY, registry).replace(DOCS_VERSION, version)


DOCUMENTED_OVERLAYS = {
    "kube-<minor>": "overlays/kube-1.37",
    "tls": "overlays/tls",
    "in-scheduler": "overlays/in-scheduler",
}


@dataclass(frozen=True)
class Images:
    extender: str  # <local registry>/platform/placement-extender:<version>, built from the Dockerfile, pulled
    scheduler: str  # <local registry>/platform/kube-scheduler:<deploy/'s tag>, the pinned binary, pulled
    deploy: Path  # a copy of deploy/ after the documented image edit (deploy/components/image)


def render(cluster: LocalCluster, overlay: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize OVERLAY`: the objects a user's `kubectl apply -k` creates."""
    return [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(overlay)).stdout) if d]


def pin_images(docs: list[dict[str, Any]], images: Images) -> None:
    """The one change every install gets here: kube-scheduler's image is the team's mirror of it
    (the pinned binary: this machine reaches no public registry), as a kustomization's `images:`
    entry sets it. The extender's image is left as the documented edit made it, and must name the
    local registry: the kubelet pulls both from there."""
    extenders = 0
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "DaemonSet"):
            continue
        for c in doc["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "kube-scheduler":
                c["image"] = images.scheduler
            elif "placement-extender" in c["image"]:
                assert c["image"] == images.extender, f"{doc['metadata']['name']} runs {c['image']}"
                extenders += 1
    assert extenders, "no extender container rendered"


def service_tls(cluster: LocalCluster, workdir: Path, hosts: list[str]) -> list[dict[str, Any]]:
    """The two Secrets the TLS overlay asks users to bring (as cert-manager would make them): the
    extender's serving certificate for `hosts`, and the scheduler's client certificate, both of a
    CA of the extender's own; each Secret's ca.crt is that CA."""
    ca = PKI(workdir / "extender-ca")
    ca.create()
    server = ca.server("extender", hosts)
    client = ca.client("scheduler-client", "placement-scheduler-client")

    def secret(name: str, pair: ClientCert) -> dict[str, Any]:
        files = {"tls.crt": pair.cert, "tls.key": pair.key, "ca.crt": ca.ca_cert}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": SYSTEM_NAMESPACE},
            "data": {k: base64.b64encode(f.read_bytes()).decode() for k, f in files.items()},
        }

    return [secret("placement-extender-tls", server), secret("placement-scheduler-client-tls", client)]


def apply(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    """`kubectl apply` of the docs, the Namespace first (as `kubectl apply -k` orders it): the
    Secrets a test brings for an install come before the overlay's objects, and the install may
    be the first into a cluster without its namespace (an earlier module's uninstall took it)."""
    docs = sorted(docs, key=lambda d: d["kind"] != "Namespace")
    out = cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs), check=False)
    assert out.returncode == 0, out.stderr


def uninstall(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    """Take an install's workloads away (the cluster-wide objects stay for the next install) and
    wait until none of its pods is left."""
    kinds = ("Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "Secret")
    gone = [d for d in docs if d["kind"] in kinds]
    cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=yaml.safe_dump_all(gone))
    api = cluster.admin
    assert api is not None
    wait_for(
        f"no pods left in {SYSTEM_NAMESPACE}",
        lambda: not api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods"),
        120,
        0.5,
    )


def is_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def await_ready(api: Api, selector: str, count: int, timeout: float = 300) -> list[dict[str, Any]]:
    """The `count` live pods of `selector` in the system namespace, once all are Ready."""

    def ready() -> list[dict[str, Any]] | None:
        pods = api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=selector)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == count and all(is_ready(p) for p in live) else None

    try:
        return wait_for(f"{count} pods of {selector} Ready", ready, timeout, 1)
    except TimeoutError:
        dump(api)
        raise


def dump(api: Api, namespace: str = SYSTEM_NAMESPACE) -> None:
    for pod in api.list(f"/api/v1/namespaces/{namespace}/pods"):
        print(pod["metadata"]["name"], pod["spec"].get("nodeName"), json.dumps(pod.get("status"), indent=1)[:3000])
    for event in api.list(f"/api/v1/namespaces/{namespace}/events")[-40:]:
        print(event.get("reason"), (event.get("involvedObject") or {}).get("name"), event.get("message"))


def place_statefulset(cluster: LocalCluster, name: str, scheduler: str, *, opt_in: bool = False) -> float:
    """A StatefulSet of 2 under ordinal zones and a per-node cap, of real containers, placed by
    `scheduler` through the extender on the real node (the one node of the policy's zone): the
    seconds from create to both pods Ready. opt_in: the in-scheduler mode's opt-in resource."""
    api = cluster.admin
    node = cluster.real_node
    assert api is not None and node is not None
    namespace = cluster.namespace(name)
    policy = {
        "ordinalZones": {},
        "zones": {"allowed": [ZONE]},
        "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}],
    }
    manifest = statefulset(name, 2, policy=policy, scheduler=scheduler)
    manifest["spec"]["template"]["spec"]["tolerations"] = [{**KWOK_TAINT, "operator": "Equal"}]
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    container.update(image=PAUSE_IMAGE, imagePullPolicy="Never")  # a real container: an image the node has
    if opt_in:
        container["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}}
    started = time.monotonic()
    api.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", manifest)

    def running() -> list[dict[str, Any]] | None:
        pods = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"app={name}")
        return pods if len(pods) == 2 and all(is_ready(p) for p in pods) else None

    try:
        pods = wait_for(f"{name}'s 2 pods Running and Ready", running, 180, 0.5)
    except TimeoutError:
        dump(api, namespace)
        dump(api)
        raise
    seconds = time.monotonic() - started
    assert {p["spec"]["nodeName"] for p in pods} == {node.name}
    for pod in pods:
        assert pod["spec"]["schedulerName"] == scheduler
        assert scheduled_by(api, namespace, pod["metadata"]["name"]) == {scheduler}
    return seconds


def extender_container(api: Api, selector: str) -> tuple[str, str, int]:
    """The first pod of `selector` in the system namespace: its name, its extender container's id,
    its restart count (the container Ready)."""
    pod = sorted(
        api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=selector),
        key=lambda p: p["metadata"]["name"],
    )[0]
    status = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "extender")
    assert status["ready"], status
    return pod["metadata"]["name"], status["containerID"].split("://", 1)[1], status["restartCount"]


def freeze(node: RealNode, container_id: str) -> None:
    """SIGSTOP every process of the container: it still accepts connections (the kernel does) and
    answers none, as a stuck process, a paused VM or a dropped network looks to its callers."""
    listed = node.ctr("tasks", "ps", container_id).stdout.splitlines()[1:]
    pids = [int(line.split()[0]) for line in listed if line]
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def await_restart(api: Api, name: str, restarts: int, timeout: float) -> float:
    """Seconds until the pod's extender has restarted once more and the pod is Ready again."""
    started = time.monotonic()

    def restarted() -> bool:
        pod = api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{name}")
        status = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "extender")
        return status["restartCount"] == restarts + 1 and status["ready"] and is_ready(pod)

    try:
        wait_for(f"{name}'s extender restarted and Ready", restarted, timeout, 0.5)
    except TimeoutError:
        dump(api)
        raise
    return time.monotonic() - started


def assert_liveness_failed(api: Api, name: str) -> None:
    """The restart was the liveness probe's: the kubelet reported it Unhealthy."""
    events = [
        e
        for e in api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/events")
        if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == "Unhealthy"
    ]
    assert any("Liveness" in e.get("message", "") for e in events), [e.get("message") for e in events]

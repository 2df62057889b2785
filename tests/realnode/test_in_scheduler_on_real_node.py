"""deploy/overlays/in-scheduler on the real node, called by a kube-scheduler run as kubeadm runs
its own: a static pod of the kubelet, on the host network, with the shipped `extenders` stanza
(config/in-scheduler/scheduler-config.yaml) and its client certificate at the shipped paths.

A host-network pod resolves no cluster Service name (it uses the host's resolver), so a kubeadm
kube-scheduler reaches the extender at its Service's ClusterIP, through kube-proxy's rules on the
host, with that IP in the extender's serving certificate. The test does what the README tells an
operator to: install, read the Service's ClusterIP, make the certificate for it, point the stanza's
`urlPrefix` at it. Then a StatefulSet that requests the opt-in resource is placed through it (no
node advertises the resource; only a kube-scheduler with the stanza's `ignoredByScheduler` can place
it, and the policy's zone holds only the real node)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.devcluster.api import ApiError, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, LocalCluster
from extender.devcluster.processes import free_port

from .failover import PAUSE_BOUND, PODS, both_replicas_back, burst, evict, kill_container
from .installs import (
    DOCUMENTED_OVERLAYS,
    Images,
    apply,
    await_ready,
    dump,
    figure,
    pin_images,
    place_statefulset,
    render,
    service_tls,
    uninstall,
)
from .prometheus import scrape_install

pytestmark = pytest.mark.e2e

OVERLAY = DOCUMENTED_OVERLAYS["in-scheduler"]  # of the user's deploy/ (Images.deploy)
STANZA = REPO / "config" / "in-scheduler" / "scheduler-config.yaml"
SERVICE_NAME = "placement-extender.placement-system.svc"


@pytest.fixture(scope="module")
def in_scheduler(
    node_cluster: LocalCluster, images: Images, kwok_beside: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    api = node_cluster.admin
    node = node_cluster.real_node
    assert api is not None and node is not None
    docs = render(node_cluster, images.deploy / OVERLAY)
    pin_images(docs, images)
    started = time.monotonic()
    service = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "placement-extender"]
    apply(node_cluster, service)
    cluster_ip = api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/services/placement-extender")["spec"]["clusterIP"]
    workdir = tmp_path_factory.mktemp("in-scheduler")
    secrets = service_tls(node_cluster, workdir, [SERVICE_NAME, cluster_ip])
    apply(node_cluster, secrets + docs)
    await_ready(api, "app.kubernetes.io/name=placement-extender", 2)

    etc = workdir / "etc-kubernetes"  # the static pod's /etc/kubernetes
    (etc / "placement-extender").mkdir(parents=True)
    ca_dir = workdir / "extender-ca"
    for source, target in (
        ("ca.crt", "ca.crt"),
        ("scheduler-client.crt", "client.crt"),
        ("scheduler-client.key", "client.key"),
    ):
        (etc / "placement-extender" / target).write_bytes((ca_dir / source).read_bytes())
    _embedded_kubeconfig(node_cluster, etc / "scheduler.conf")
    config = yaml.safe_load(STANZA.read_text())
    config["clientConnection"] = {"kubeconfig": "/etc/kubernetes/scheduler.conf"}
    config["extenders"][0]["urlPrefix"] = f"https://{cluster_ip}:8443"  # the README's step: the ClusterIP
    (etc / "scheduler-config.yaml").write_text(yaml.safe_dump(config))
    manifest = node.paths.static_pods / "kube-scheduler.yaml"
    manifest.write_text(yaml.safe_dump(_static_pod(images.scheduler, etc, free_port())))
    mirror = f"/api/v1/namespaces/kube-system/pods/kube-scheduler-{node.name}"

    def running() -> bool:
        try:
            pod = api.get(mirror)
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        return bool(statuses) and all("running" in s["state"] for s in statuses)

    try:
        wait_for("the static kube-scheduler pod running", running, 120, 0.5)
    except TimeoutError:
        dump(api, "kube-system")
        raise
    figure("in-scheduler overlay + static kube-scheduler pod -> running (s)", time.monotonic() - started)
    yield node_cluster
    manifest.unlink()
    wait_for("the static kube-scheduler pod gone", lambda: not running(), 120, 0.5)
    uninstall(node_cluster, secrets + docs)


def test_statefulset_placed_by_a_host_network_kube_scheduler_through_the_extender(in_scheduler) -> None:
    seconds = place_statefulset(in_scheduler, "db-in", "default-scheduler", opt_in=True)
    figure("in-scheduler: opted-in StatefulSet created -> 2 pods Ready (s)", seconds)


def test_prometheus_scrapes_the_in_scheduler_install(in_scheduler, tmp_path) -> None:  # noqa: ANN001
    """A real Prometheus scrapes the extender's metrics port (the install's CA checked); the
    cluster's own kube-scheduler is the platform's to scrape (tests/realnode/prometheus.py)."""
    extender = "app.kubernetes.io/name=placement-extender"
    scrape_install(in_scheduler, tmp_path, "in-scheduler", extender=extender, tls=True)


def test_the_active_extender_ended_mid_burst_costs_ordinary_pods_nothing(in_scheduler, burst_zone) -> None:  # noqa: ANN001
    """The cluster's own kube-scheduler calls the extender's Service; its two replicas as the
    in-scheduler install runs them. A healthy burst first (the baseline), then the active replica
    SIGKILLed, then evicted, each after 15 of 50 opted-in binds, with 20 ordinary pods (no opt-in)
    created at that moment: the longest any of them waits to be bound must be at most twice the
    longest wait beside the healthy burst."""
    healthy = burst(
        in_scheduler, "fo-in-healthy", scheduler="default-scheduler", opt_in=True, disrupt=None, ordinary=20
    )
    assert healthy.placed == PODS and healthy.over_cap == 0 and healthy.ordinary is not None
    figure("in-scheduler: longest wait of 20 ordinary pods beside a healthy opted-in burst (s)", healthy.ordinary)
    for how, disrupt in (("killed", kill_container), ("evicted", evict)):
        outcome = burst(
            in_scheduler, f"fo-in-{how}", scheduler="default-scheduler", opt_in=True, disrupt=disrupt, ordinary=20
        )
        figure(
            f"in-scheduler: active extender {how} mid-burst -> the other replica holds the Lease (s)", outcome.takeover
        )
        figure(f"in-scheduler: active extender {how} mid-burst -> longest stretch without a bind (s)", outcome.pause)
        figure(f"in-scheduler: active extender {how}: longest wait of 20 ordinary pods (s)", outcome.ordinary)
        assert outcome.placed == PODS, (how, outcome)
        assert outcome.placed_after >= PODS // 2, (how, outcome)  # mid-burst
        assert outcome.over_cap == 0, (how, outcome)
        assert outcome.takeover is not None and outcome.after != outcome.before, (how, outcome)
        assert outcome.pause < PAUSE_BOUND, (how, outcome)
        assert outcome.ordinary is not None and outcome.ordinary <= 2 * healthy.ordinary, (how, outcome, healthy)
        both_replicas_back(in_scheduler)


def _embedded_kubeconfig(cluster: LocalCluster, path: Path) -> None:
    """kubeadm's scheduler.conf: the credentials inside, since the pod sees none of our files."""
    client = cluster.pki.client("kubeadm-scheduler", "system:kube-scheduler")

    def data(file: Path) -> str:
        return base64.b64encode(file.read_bytes()).decode()

    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": cluster.server, "certificate-authority-data": data(cluster.pki.ca_cert)},
                    }
                ],
                "users": [
                    {
                        "name": "scheduler",
                        "user": {"client-certificate-data": data(client.cert), "client-key-data": data(client.key)},
                    }
                ],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "scheduler"}}],
                "current-context": "local",
            }
        )
    )


def _static_pod(image: str, etc: Path, port: int) -> dict:
    """kubeadm's kube-scheduler manifest, as /etc/kubernetes/manifests/kube-scheduler.yaml has it:
    host network, loopback-only serving port, /etc/kubernetes from the host."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-scheduler",
            "namespace": "kube-system",
            "labels": {"component": "kube-scheduler", "tier": "control-plane"},
        },
        "spec": {
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "containers": [
                {
                    "name": "kube-scheduler",
                    "image": image,  # the team's mirror, pulled by the kubelet
                    "command": [
                        "kube-scheduler",
                        "--config=/etc/kubernetes/scheduler-config.yaml",
                        "--bind-address=127.0.0.1",
                        f"--secure-port={port}",
                    ],
                    "volumeMounts": [{"name": "etc", "mountPath": "/etc/kubernetes", "readOnly": True}],
                }
            ],
            "volumes": [{"name": "etc", "hostPath": {"path": str(etc), "type": "Directory"}}],
        },
    }

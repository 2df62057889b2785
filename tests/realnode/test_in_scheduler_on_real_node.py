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

from extender.devcluster.api import Api, ApiError, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, LocalCluster
from extender.devcluster.processes import free_port

from .failover import PAUSE_BOUND, PODS, Outcome, both_replicas_back, burst, evict, kill_container, standby_of
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
WAVE = 50  # ordinary pods created at the moment of the failover
LOGS = REPO / "test-logs" / "realnode" / "logs"
ROUNDS = 2  # of each disruption, to the standby and then to the active replica


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
    _keep_pod_logs(api, "kube-system", f"kube-scheduler-{node.name}")  # what it saw of the extender
    for pod in api.list(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector="app.kubernetes.io/name=placement-extender"
    ):
        _keep_pod_logs(api, SYSTEM_NAMESPACE, pod["metadata"]["name"])
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
    in-scheduler install runs them. The active replica SIGKILLed, and evicted as a drain evicts it,
    each after 15 of 50 opted-in binds, with a wave of 50 ordinary pods (no opt-in) created at that
    moment and timed from its first create to its last pod bound (kube-scheduler's Scheduled
    events). The healthy time of each: the same burst and wave with the same disruption done to
    the standby instead, so the extender keeps serving throughout. A killed container's restart and
    a drain's eviction and replacement cost a one-machine cluster CPU whichever replica they hit
    (a drain's wave took 1.8 times an undisturbed one here either way); what the failover may add
    to that is at most as much again. Each measured twice, interleaved, the best of each compared."""

    def run(name: str, disrupt, ends_active: bool = True) -> Outcome:  # noqa: ANN001
        outcome = burst(
            in_scheduler,
            name,
            scheduler="default-scheduler",
            opt_in=True,
            disrupt=disrupt,
            ordinary=WAVE,
            ends_active=ends_active,
        )
        assert outcome.placed == PODS and outcome.over_cap == 0 and outcome.ordinary is not None, (name, outcome)
        assert outcome.placed_after >= PODS // 2, (name, outcome)  # mid-burst
        both_replicas_back(in_scheduler)
        return outcome

    for how, disrupt in (("killed", kill_container), ("evicted", evict)):

        def on_standby(cluster: LocalCluster, active: str, disrupt=disrupt) -> None:  # noqa: ANN001
            disrupt(cluster, standby_of(cluster, active))

        healthy: list[float] = []
        failover: list[float] = []
        takeovers: list[float | None] = []
        pauses: list[float] = []
        for round_ in range(ROUNDS):
            standby = run(f"fo-in-{how}-standby-{round_}", on_standby, ends_active=False)
            assert standby.after == standby.before, "the active replica kept the Lease while the standby was ended"
            outcome = run(f"fo-in-{how}-{round_}", disrupt)
            takeovers.append(outcome.takeover)
            pauses.append(outcome.pause)
            assert outcome.takeover is not None and outcome.after != outcome.before, (how, outcome)
            assert outcome.pause < PAUSE_BOUND, (how, outcome)
            assert outcome.ordinary is not None and standby.ordinary is not None
            failover.append(outcome.ordinary)
            healthy.append(standby.ordinary)
        figure(f"in-scheduler: active extender {how} mid-burst -> the other replica holds the Lease (s)", takeovers)
        figure(f"in-scheduler: active extender {how} mid-burst -> longest stretch without a bind (s)", pauses)
        figure(
            f"in-scheduler: {how}, a wave of {WAVE} ordinary pods bound in (s): the active replica, the standby",
            [failover, healthy],
        )
        # The best of each: one wave lasts about a second, and on a machine shared with other jobs
        # a single one was slowed 2x (a CI run: 2.6 s against 1.3 s, its takeover 2.85 s against
        # 0.6-1.0 s here). Run here under two busy cores, kube-scheduler's log showed every call to
        # the extender in the failover refused at once, none waiting out its timeout, and the
        # single waves still 0.7-1.5x.
        assert min(failover) <= 2 * min(healthy), (how, failover, healthy)


def _keep_pod_logs(api: Api, namespace: str, pod: str) -> None:
    """A pod's log beside the components' (test-logs/realnode/logs), for reading a failure after CI."""
    response = api.session.get(f"{api.server}/api/v1/namespaces/{namespace}/pods/{pod}/log", timeout=30)
    if response.ok:
        LOGS.mkdir(parents=True, exist_ok=True)
        (LOGS / f"{pod}.log").write_text(response.text)


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

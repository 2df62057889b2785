"""deploy/overlays/tls as users install it, on the real node: the extender in its own pods behind
a Service, kube-scheduler calling it over mutual TLS across the pod network and kube-proxy.

The Secrets are what the overlay asks users to bring (a serving certificate for the Service and
a client certificate of the extender's CA). One substitution, for what this cluster lacks: it
runs no cluster DNS, so the Service gets a fixed ClusterIP and the scheduler pods a hostAliases
entry naming it `placement-extender.placement-system.svc`, the name the shipped configuration
calls (a cluster's DNS answers the same)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, LocalCluster
from extender.devcluster.pki import PKI

from .failover import PAUSE_BOUND, PODS, both_replicas_back, burst, evict, kill_container
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
    service_tls,
    uninstall,
)
from .prometheus import scrape_install

pytestmark = pytest.mark.e2e

OVERLAY = DOCUMENTED_OVERLAYS["tls"]  # of the user's deploy/ (Images.deploy)
SERVICE_NAME = "placement-extender.placement-system.svc"
SERVICE_IP = "10.214.0.80"
SCHEDULERS = "app.kubernetes.io/name=placement-scheduler"
EXTENDER = "app.kubernetes.io/name=placement-extender"  # in the real node's service range (realnode.SERVICE_RANGE)


@pytest.fixture(scope="module")
def tls_installed(
    node_cluster: LocalCluster, images: Images, kwok_beside: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalCluster, dict]]:
    docs = render(node_cluster, images.deploy / OVERLAY)
    pin_images(docs, images)
    for doc in docs:
        if doc["kind"] == "Service" and doc["metadata"]["name"] == "placement-extender":
            doc["spec"]["clusterIP"] = SERVICE_IP
        if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "placement-scheduler":
            doc["spec"]["template"]["spec"]["hostAliases"] = [{"ip": SERVICE_IP, "hostnames": [SERVICE_NAME]}]
    workdir = tmp_path_factory.mktemp("tls")
    secrets = service_tls(node_cluster, workdir, [SERVICE_NAME, SERVICE_IP])
    started = time.monotonic()
    apply(node_cluster, secrets + docs)
    api = node_cluster.admin
    assert api is not None
    await_ready(api, EXTENDER, 2)
    await_ready(api, "app.kubernetes.io/name=placement-scheduler", 2)
    figure("TLS overlay applied -> both extender and both scheduler pods Ready (s)", time.monotonic() - started)
    yield node_cluster, {"ca": workdir / "extender-ca" / "ca.crt", "client": workdir / "extender-ca"}
    uninstall(node_cluster, secrets + docs)


def test_the_extender_answers_only_callers_with_a_client_certificate(tls_installed) -> None:
    """Through the Service's address from the host (kube-proxy's rules): the scheduler's client
    certificate gets /readyz; no certificate, or plain HTTP, gets no answer; a certificate of
    the same CA with another name gets 403 (the installed extender's default --tls-client-name)."""
    _, files = tls_installed
    session = requests.Session()
    session.trust_env = False
    url = f"https://{SERVICE_IP}:8443/readyz"
    cert = (str(files["client"] / "scheduler-client.crt"), str(files["client"] / "scheduler-client.key"))
    # Until kube-proxy has programmed the Service, the address leads to the bridge and no answer.
    wait_for(
        "the Service to answer",
        lambda: session.get(url, verify=str(files["ca"]), cert=cert, timeout=2).status_code == 200,
        60,
        0.5,
    )
    with pytest.raises(requests.exceptions.RequestException):
        session.get(url, verify=str(files["ca"]), timeout=5)
    with pytest.raises(requests.exceptions.RequestException):
        session.get(f"http://{SERVICE_IP}:8443/readyz", timeout=5)
    tenant = PKI(files["client"]).client("tenant-client", "tenant-x")  # the same CA, another name
    answer = session.get(url, verify=str(files["ca"]), cert=(str(tenant.cert), str(tenant.key)), timeout=5)
    assert answer.status_code == 403, answer.text


def test_statefulset_placed_through_the_tls_extender(tls_installed) -> None:
    cluster, _ = tls_installed
    seconds = place_statefulset(cluster, "db-tls", SCHEDULER_NAME)
    figure("TLS overlay: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_prometheus_scrapes_the_tls_install(tls_installed, tmp_path) -> None:  # noqa: ANN001
    """A real Prometheus scrapes the extender's metrics port with the install's serving certificate
    checked against its CA, and the scheduler pods' kube-scheduler (tests/realnode/prometheus.py)."""
    cluster, _ = tls_installed
    scrape_install(cluster, tmp_path, "TLS", extender=EXTENDER, scheduler=SCHEDULERS, tls=True)


def test_a_frozen_tls_extender_is_seen_by_its_probes_and_restarted(tls_installed) -> None:
    """The installed probes must see a hang: a frozen process still accepts TCP, so a `tcpSocket`
    probe passed it for good (measured before the health listener). The exec probes ask the
    loopback health listener, the kubelet restarts the container, and the Service answers again."""
    cluster, files = tls_installed
    api = cluster.admin
    node = cluster.real_node
    assert api is not None and node is not None
    name, container_id, restarts = extender_container(api, EXTENDER)
    freeze(node, container_id)
    seconds = await_restart(api, name, restarts, 300)
    figure("TLS overlay: extender frozen (SIGSTOP) -> restarted by its liveness probe and pod Ready (s)", seconds)
    assert_liveness_failed(api, name)
    session = requests.Session()
    session.trust_env = False
    cert = (str(files["client"] / "scheduler-client.crt"), str(files["client"] / "scheduler-client.key"))
    url = f"https://{SERVICE_IP}:8443/readyz"
    # The pod is Ready; kube-proxy then puts it back behind the Service (EndpointSlice, rules):
    # until it has, the address refuses. With 5 s probes the restart now beats that by a moment.
    wait_for(
        "the Service to answer again",
        lambda: _answers(session, url, str(files["ca"]), cert),
        30,
        0.5,
    )


def _answers(session: requests.Session, url: str, ca: str, cert: tuple[str, str]) -> bool:
    try:
        return session.get(url, verify=ca, cert=cert, timeout=5).status_code == 200
    except requests.exceptions.ConnectionError:
        return False


@pytest.mark.parametrize("how", ["killed", "evicted"])
def test_the_active_extender_ended_mid_burst_hands_over_to_the_standby(tls_installed, burst_zone, how) -> None:  # noqa: ANN001
    """Two extender replicas as the TLS install runs them; the active one SIGKILLed, or evicted as
    a drain or a rolling update ends it, after 15 of 50 opted-in binds (failover.py)."""
    cluster, _ = tls_installed
    disrupt = kill_container if how == "killed" else evict
    outcome = burst(cluster, f"fo-tls-{how}", scheduler=SCHEDULER_NAME, opt_in=False, disrupt=disrupt)
    figure(f"TLS: active extender {how} mid-burst -> the other replica holds the Lease (s)", outcome.takeover)
    figure(f"TLS: active extender {how} mid-burst -> longest stretch without a bind (s)", outcome.pause)
    assert outcome.placed == PODS
    assert outcome.placed_after >= PODS // 2, outcome  # mid-burst
    assert outcome.over_cap == 0
    assert outcome.takeover is not None and outcome.after != outcome.before, outcome
    assert outcome.pause < PAUSE_BOUND, outcome
    both_replicas_back(cluster)

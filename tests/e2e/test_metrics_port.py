"""The metrics port (serve --metrics-listen) against a real API server's TokenReview and
SubjectAccessReview, and a flood of it beside the verbs.

The extender runs as deploy/ runs it: the placement-scheduler ServiceAccount's token, with
deploy/base/rbac.yaml applied (its ClusterRole's `create` on the two reviews, and the ClusterRole
placement-metrics-reader). Two ServiceAccounts get tokens by TokenRequest; one is bound to the
reader role. Then:
- the bound one's token reads /metrics (200, the extender's series), the other's is 403, a made-up
  token and none are 401;
- a flood of the metrics port (many clients, each a new TLS connection and a random token, and
  silent connections that hold what they can) delays no filter and no bind: filters of a held pod
  answered during the flood as fast as before it (within a bound), a StatefulSet placed through
  kube-scheduler meanwhile; and the API server is asked at most the port's review rate, not once a
  request.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from extender.devcluster.processes import free_port
from extender.server.metrics_port import REVIEW_BURST, REVIEW_RATE
from parallel import machine_alone

from .workloads import create_statefulset, pods, service_account_token, statefulset

# the self-signed certificate is not verified, on purpose (as insecureSkipVerify in deploy/optional/monitoring/)
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]

METRICS_PORT = free_port()
CLUSTER_OPTIONS = {"extender_args": [f"--metrics-listen=127.0.0.1:{METRICS_PORT}"]}
URL = f"https://127.0.0.1:{METRICS_PORT}/metrics"
HOST = "kubernetes.io/hostname"
FLOOD_SECONDS = 20.0
FLOOD_CLIENTS = 48
SILENT_CLIENTS = 16
FILTERS = 150
RBAC = "rbac.authorization.k8s.io"


def _scrape(token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with requests.Session() as session:
        session.trust_env = False
        # verify=False: the sidecar install's certificate is self-signed, as Prometheus'
        # insecureSkipVerify in deploy/optional/monitoring/ accepts it
        return session.get(URL, headers=headers, timeout=15, verify=False)


def _scrape_status(token: str) -> int | str:
    try:
        return _scrape(token).status_code
    except requests.RequestException as err:
        return type(err).__name__


def _bind_reader(api, namespace: str, name: str) -> None:  # noqa: ANN001
    api.ensure(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"placement-metrics-reader:{namespace}:{name}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "placement-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )


@pytest.fixture(scope="module")
def tokens(cluster) -> dict[str, str]:  # noqa: ANN001
    api = cluster.admin
    namespace = cluster.namespace("metrics-scrapers")
    reader = service_account_token(api, namespace, "prometheus")
    stranger = service_account_token(api, namespace, "stranger")
    _bind_reader(api, namespace, "prometheus")
    return {"reader": reader, "stranger": stranger}


def test_only_a_token_allowed_to_get_metrics_reads_them(cluster, tokens, scenario) -> None:  # noqa: ANN001
    assert _scrape(None).status_code == 401
    assert _scrape("not-a-token").status_code == 401
    assert _scrape(tokens["stranger"]).status_code == 403
    # RBAC reaches the API server's authorizer within moments; a 403 before that is kept 10 s
    answer = wait_for(
        "the reader's scrape 200", lambda: (r := _scrape(tokens["reader"])).status_code == 200 and r, 40, 1
    )
    names = {family.name for family in text_string_to_metric_families(answer.text)}
    assert {"extender_requests", "extender_cache_synced", "extender_cache_objects", "process_cpu_seconds"} <= names
    assert _scrape(tokens["stranger"]).status_code == 403
    answers = {
        sample.labels["code"]: sample.value
        for family in text_string_to_metric_families(_scrape(tokens["reader"]).text)
        if family.name == "extender_metrics_port_answers"
        for sample in family.samples
    }
    assert answers.get("401", 0) >= 2 and answers.get("403", 0) >= 2 and answers.get("200", 0) >= 1, answers
    # the port serves /metrics only
    with requests.Session() as session:
        session.trust_env = False
        headers = {"Authorization": f"Bearer {tokens['reader']}"}
        base = f"https://127.0.0.1:{METRICS_PORT}"
        assert session.post(f"{base}/filter", headers=headers, timeout=5, verify=False).status_code == 404
        assert session.get(f"{base}/readyz", headers=headers, timeout=5, verify=False).status_code == 404
    scenario.note = "metrics port: reader 200, stranger 403, made-up token and none 401"


FLOOD = textwrap.dedent(
    """
    import os, socket, ssl, sys, threading, time
    port, seconds, clients, silent = (int(float(a)) for a in sys.argv[1:5])
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    ends = time.monotonic() + seconds
    counts = {"answered": 0, "failed": 0}

    def noisy():
        while time.monotonic() < ends:
            try:
                with socket.create_connection(("127.0.0.1", port), 5) as raw:
                    with context.wrap_socket(raw) as sock:
                        token = os.urandom(24).hex()
                        sock.sendall(f"GET /metrics HTTP/1.1\\r\\nAuthorization: Bearer {token}\\r\\n\\r\\n".encode())
                        while sock.recv(65536):
                            pass
                counts["answered"] += 1
            except OSError:
                counts["failed"] += 1

    def quiet():  # connects and says nothing: holds a slot until the port's deadline closes it
        while time.monotonic() < ends:
            try:
                with socket.create_connection(("127.0.0.1", port), 5) as sock:
                    sock.settimeout(30)
                    while sock.recv(1024):
                        pass
            except OSError:
                time.sleep(0.1)

    threads = [threading.Thread(target=noisy, daemon=True) for _ in range(clients)]
    threads += [threading.Thread(target=quiet, daemon=True) for _ in range(silent)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 40)
    print(counts["answered"], counts["failed"])
    """
)


def _held_pod(api, namespace: str) -> dict:  # noqa: ANN001
    """A pod of a policy group, held by a scheduling gate no one lifts: filters of it are real
    decisions, and kube-scheduler never takes it."""
    manifest = statefulset("held", 1, policy={"caps": [{"topologyKey": HOST, "max": 1}]})
    manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "e2e.test/hold"}]
    create_statefulset(api, namespace, manifest)
    return wait_for("the held pod", lambda: (p := pods(api, namespace, "app=held")) and p[0], 60)


def _filter_seconds(port: int, pod: dict, nodes: list[str], count: int) -> list[float]:
    seconds = []
    body = {"Pod": pod, "NodeNames": nodes}
    with requests.Session() as session:
        session.trust_env = False
        for _ in range(count):
            started = time.perf_counter()
            answer = session.post(f"http://127.0.0.1:{port}/filter", json=body, timeout=10)
            seconds.append(time.perf_counter() - started)
            assert answer.status_code == 200 and not answer.json().get("Error"), answer.text
    return seconds


def _token_reviews(api) -> float:  # noqa: ANN001
    """TokenReviews the API server has been asked for, from its own /metrics."""
    text = api.session.get(api.server + "/metrics", timeout=30).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "apiserver_request":
            for sample in family.samples:
                if sample.name == "apiserver_request_total" and sample.labels.get("resource") == "tokenreviews":
                    total += sample.value
    return total


def test_a_flooded_metrics_port_delays_no_filter_and_no_bind(cluster, tokens, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    nodes = cluster.add_nodes(zoned_nodes({"mf-a": 6}, prefix="mf"))
    namespace = cluster.namespace("metrics-flood")
    pod = _held_pod(api, namespace)
    verb_port = cluster.ports["extender"]
    wait_for("the reader's scrape 200", lambda: _scrape(tokens["reader"]).status_code == 200, 40, 1)
    with machine_alone():
        _filter_seconds(verb_port, pod, nodes, 20)  # warm
        before = _filter_seconds(verb_port, pod, nodes, FILTERS)
        reviews_before = _token_reviews(api)
        flood = subprocess.Popen(
            [
                sys.executable,
                "-c",
                FLOOD,
                str(METRICS_PORT),
                str(FLOOD_SECONDS),
                str(FLOOD_CLIENTS),
                str(SILENT_CLIENTS),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(2.0)  # the flood under way
            started = time.monotonic()
            create_statefulset(
                api, namespace, statefulset("real", 6, policy={"caps": [{"topologyKey": HOST, "max": 1}]})
            )
            during = _filter_seconds(verb_port, pod, nodes, FILTERS)
            placed = wait_for(
                "the 6-pod set placed during the flood",
                lambda: (
                    (p := [x for x in pods(api, namespace, "app=real") if x["spec"].get("nodeName")])
                    and len(p) == 6
                    and p
                ),
                60,
            )
            placed_in = time.monotonic() - started
            flooding = flood.poll() is None
            scrape_during = _scrape_status(tokens["reader"])  # the cached token: no review needed
        finally:
            out, _ = flood.communicate(timeout=FLOOD_SECONDS + 60)
        reviews = _token_reviews(api) - reviews_before
    answered, failed = (int(x) for x in out.split())
    p50 = (statistics.median(before), statistics.median(during))
    p99 = (statistics.quantiles(before, n=100)[98], statistics.quantiles(during, n=100)[98])
    scenario.pods_placed = len(placed)
    scenario.violations = len(placed) - len({p["spec"]["nodeName"] for p in placed})
    scenario.note = (
        f"metrics flood ({FLOOD_CLIENTS} TLS clients with random tokens, {SILENT_CLIENTS} silent, "
        f"{FLOOD_SECONDS:.0f} s): {answered} answered, {failed} failed; filter p50 {p50[0] * 1000:.1f} -> "
        f"{p50[1] * 1000:.1f} ms, p99 {p99[0] * 1000:.1f} -> {p99[1] * 1000:.1f} ms; 6 pods placed in "
        f"{placed_in:.1f} s; {reviews:.0f} TokenReviews; the reader's scrape meanwhile {scrape_during}"
    )
    print(f"\n{scenario.note}")
    assert flooding, "the flood ended before the filters and the placement were measured"
    assert answered > 0, "the flood reached the port"
    assert scenario.violations == 0
    # The verbs' own time, not the flood's: a filter as fast as before, within what a busy
    # 2-core machine adds (the flood's client process runs beside it).
    assert p50[1] <= 2 * p50[0] + 0.005, scenario.note
    assert p99[1] <= 3 * p99[0] + 0.05, scenario.note
    # The API server asked at most the port's review rate, however many tokens came.
    assert reviews <= REVIEW_RATE * (FLOOD_SECONDS + 5) + REVIEW_BURST, scenario.note
    assert scrape_during == 200, scenario.note

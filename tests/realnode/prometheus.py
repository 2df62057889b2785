"""A real Prometheus scraping an install on the real node, as a platform team's would.

Debian's `prometheus` (hack/realnode/install.sh installs it) runs on the host with a config and a
data directory of its own in a temporary directory, on loopback, and is stopped after. It scrapes
the extender's metrics port (serve --metrics-listen, 8080) on each extender pod's IP (the host is
the node: it reaches pod IPs) with the token of a ServiceAccount bound to the ClusterRole
placement-metrics-reader, as deploy/optional/monitoring/'s ServiceMonitors do: the self-signed
certificate skipped in the sidecar install, the install's CA checked under the Service name in the
TLS ones. In the sidecar install it scrapes kube-scheduler's secure port (10259) too, with the
same token. It loads deploy/optional/prometheus-rule.yaml's groups as its rules. Then:
- every target is up (up == 1), and the extender's series are there;
- a ServiceAccount's token without the binding gets 403 on the same port, none 401;
- every metric the shipped rules read returns series from that scrape, but those
  tests/unit/test_monitoring.py lists as another exporter's (kube-scheduler's only where it is
  scraped: the sidecar install; kube-state-metrics' nowhere here);
- every rule evaluates without error.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml

from e2e.workloads import service_account_token
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, LocalCluster
from extender.devcluster.processes import free_port
from unit.test_monitoring import EXTERNAL_METRICS, metric_names

from .installs import figure

RULES = REPO / "deploy" / "optional" / "prometheus-rule.yaml"
METRICS_PORT = 8080  # deploy/'s --metrics-listen
SCHEDULER_PORT = 10259  # kube-scheduler's secure port
SERVICE_NAME = "placement-extender.placement-system.svc"  # the TLS installs' serving certificate's name
SCRAPERS = "metrics-scrapers"
RBAC = "rbac.authorization.k8s.io"
# Where the rules' metrics come from in an install, beside the extender's own.
SCHEDULER_METRICS = {"scheduler_pending_pods"}


def scrape_install(
    cluster: LocalCluster,
    workdir: Path,
    install: str,
    *,
    extender: str,
    scheduler: str | None = None,
    tls: bool = False,
) -> dict[str, Any]:
    """Scrape `install` (its name in the figures), whose extender pods `extender` selects (and
    kube-scheduler's pods `scheduler` selects, when given); assert the module docstring's points.
    `tls`: the install's serving certificate, verified against its CA. Returns what was seen."""
    api = cluster.admin
    assert api is not None
    reader, stranger = _tokens(cluster)
    extenders = _pod_ips(api, extender)
    schedulers = _pod_ips(api, scheduler) if scheduler else []
    for ip in extenders:
        url = f"https://{ip}:{METRICS_PORT}/metrics"
        assert _get(url, None) == 401, url
        assert _get(url, "not-a-token") == 401, url
        assert _get(url, stranger) == 403, url
        # RBAC reaches the API server's authorizer within moments; a 403 before it is kept 10 s
        wait_for(f"{url} 200 to the reader's token", lambda url=url: _get(url, reader) == 200, 60, 1)
    for ip in schedulers:
        url = f"https://{ip}:{SCHEDULER_PORT}/metrics"
        assert _get(url, stranger) == 403, url
        wait_for(f"{url} 200 to the reader's token", lambda url=url: _get(url, reader) == 200, 60, 1)

    ca = _install_ca(api) if tls else None
    config = _config(workdir, reader, stranger, extenders, schedulers, ca)
    port = free_port()
    data = workdir / "prometheus-data"
    log = (workdir / "prometheus.log").open("w")
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (hack/realnode/install.sh installs Debian's)"
    started = time.monotonic()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for("Prometheus ready", lambda: _ready(base), 60, 0.5)
        expected = {"placement-extender": len(extenders), "stranger": 0}  # the stranger's scrape is refused
        if schedulers:
            expected["placement-scheduler"] = len(schedulers)
        wait_for("every target up", lambda: _up(base) == expected, 90, 1)
        figure(f"metrics ({install} install): Prometheus started -> every target up (s)", time.monotonic() - started)
        # the token without the binding: Prometheus' own scrape of it fails with the 403
        stranger_errors = {t["lastError"] for t in _targets(base) if t["labels"]["job"] == "stranger"}
        assert all("403" in e for e in stranger_errors), stranger_errors

        wanted = set()
        for group in yaml.safe_load(RULES.read_text())["spec"]["groups"]:
            for rule in group["rules"]:
                wanted |= metric_names(rule["expr"])
        wanted -= set(EXTERNAL_METRICS) - (SCHEDULER_METRICS if schedulers else set())
        wanted.add("extender_cache_objects")
        found = wait_for(
            f"series of {sorted(wanted)}",
            lambda: (have := _present(base, wanted)) == wanted and have,
            60,
            2,
        )
        missing = wanted - _present(base, wanted)
        assert not missing, f"the shipped rules read {sorted(missing)}, which this scrape has no series of"
        wait_for("every shipped rule evaluated without error", lambda: _rules_healthy(base), 60, 2)
        return {"up": _up(base), "series": sorted(found)}
    except BaseException:
        log.flush()
        print((workdir / "prometheus.log").read_text()[-4000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _tokens(cluster: LocalCluster) -> tuple[str, str]:
    """Tokens of two ServiceAccounts (TokenRequest): `prometheus`, bound to the reader role as
    docs/operations/metrics.md says, and `stranger`, bound to nothing."""
    api = cluster.admin
    assert api is not None
    namespace = cluster.namespace(SCRAPERS)
    tokens = [service_account_token(api, namespace, name) for name in ("prometheus", "stranger")]
    api.ensure(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus:placement-metrics-reader"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "placement-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}],
        },
    )
    return tokens[0], tokens[1]


def _pod_ips(api: Api, selector: str) -> list[str]:
    pods = api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=selector)
    ips = [
        p["status"]["podIP"] for p in pods if not p["metadata"].get("deletionTimestamp") and p["status"].get("podIP")
    ]
    assert ips, f"no pod IP for {selector}"
    return ips


def _install_ca(api: Api) -> bytes:
    """The CA of the TLS install's serving certificate, as a ServiceMonitor reads it."""
    secret = api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/placement-extender-tls")
    return base64.b64decode(secret["data"]["ca.crt"])


def _get(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with requests.Session() as session, warnings.catch_warnings():
            # verify=False: a direct check of who is admitted, the self-signed port included;
            # Prometheus' own scrape below verifies the TLS installs' certificate
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            session.trust_env = False
            return session.get(url, headers=headers, timeout=10, verify=False).status_code
    except requests.RequestException:
        return 0


def _config(
    workdir: Path, reader: str, stranger: str, extenders: list[str], schedulers: list[str], ca: bytes | None
) -> Path:
    """A plain Prometheus configuration, as docs/operations/metrics.md gives one (static targets
    here: this cluster's pod IPs), with the shipped rules."""
    (workdir / "reader.token").write_text(reader)
    (workdir / "stranger.token").write_text(stranger)
    if ca is not None:
        (workdir / "ca.crt").write_bytes(ca)
        extender_tls: dict[str, Any] = {"ca_file": str(workdir / "ca.crt"), "server_name": SERVICE_NAME}
    else:
        extender_tls = {"insecure_skip_verify": True}  # the sidecar install's self-signed certificate
    rules = workdir / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": yaml.safe_load(RULES.read_text())["spec"]["groups"]}))

    def job(name: str, targets: list[str], port: int, token: str, tls: dict[str, Any]) -> dict[str, Any]:
        return {
            "job_name": name,
            "scheme": "https",
            "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", "credentials_file": str(workdir / token)},
            "tls_config": tls,
            "static_configs": [{"targets": [f"{ip}:{port}" for ip in targets]}],
        }

    jobs = [
        job("placement-extender", extenders, METRICS_PORT, "reader.token", extender_tls),
        job("stranger", extenders[:1], METRICS_PORT, "stranger.token", extender_tls),
    ]
    if schedulers:  # kube-scheduler's own self-signed certificate
        skip = {"insecure_skip_verify": True}
        jobs.append(job("placement-scheduler", schedulers, SCHEDULER_PORT, "reader.token", skip))
    config = workdir / "prometheus.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "2s"},
                "rule_files": [str(rules)],
                "scrape_configs": jobs,
            }
        )
    )
    return config


def _ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/-/ready", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _query(base: str, query: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{base}/api/v1/query", params={"query": query}, timeout=10).json()
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def _targets(base: str) -> list[dict[str, Any]]:
    return requests.get(f"{base}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]


def _up(base: str) -> dict[str, int]:
    """Targets up, by job (a job with none up counts 0)."""
    up: dict[str, int] = {}
    for series in _query(base, "up"):
        job = series["metric"]["job"]
        up[job] = up.get(job, 0) + (1 if series["value"][1] == "1" else 0)
    return up


def _present(base: str, names: set[str]) -> set[str]:
    return {name for name in names if _query(base, f'count({{__name__="{name}"}})')}


def _rules_healthy(base: str) -> bool:
    groups = requests.get(f"{base}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    return bool(rules) and all(r.get("health") == "ok" for r in rules)

"""deploy/optional's Grafana dashboard and PrometheusRule read only metrics that exist: the
extender's own (from a live /metrics) or the few named below with where they come from."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from extender.metrics import store_gauges
from extender.server.verbs import Verbs
from extender.state.store import KINDS, ClusterStore

from fakes import RecordedEvents

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ROOT / "deploy" / "optional"

# Not the extender's: each with the exporter that provides it.
EXTERNAL_METRICS = {
    "up": "Prometheus itself, per scrape target",
    "scheduler_pending_pods": "kube-scheduler (the placement scheduler's /metrics)",
    "kube_job_status_failed": "kube-state-metrics (the audit CronJob's Jobs)",
}
PROMQL_WORDS = {
    "sum", "max", "min", "rate", "increase", "histogram_quantile", "absent", "by", "on", "and", "or",
    "le", "verb", "code", "result", "rule", "reason", "holder", "kind", "queue", "job", "instance",
    "outcome", "generation", "namespace", "job_name",
}  # fmt: skip


def exported() -> set[str]:
    """Every sample name the extender's /metrics can carry: each family's, by its type (a labelled
    counter shows no sample until it is first counted)."""
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    verbs = Verbs(store, binder=None, events=RecordedEvents())  # type: ignore[arg-type]
    store_gauges(verbs.metrics, store, time.time)
    names = set()
    by_type = {"counter": ("", "_total"), "histogram": ("", "_bucket", "_count", "_sum"), "gauge": ("",)}
    for family in text_string_to_metric_families(verbs.metrics.render()):
        names.update(family.name + suffix for suffix in by_type.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def metric_names(expr: str) -> set[str]:
    without_labels = re.sub(r"\{[^}]*\}", "", expr)
    without_ranges = re.sub(r"\[[^\]]*\]", "", without_labels)
    words = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", without_ranges))
    return {w for w in words - PROMQL_WORDS if not re.fullmatch(r"\d.*", w)}


def expressions() -> list[tuple[str, str]]:
    out = []
    rule = yaml.safe_load((OPTIONAL / "prometheus-rule.yaml").read_text())
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            out.append((f"alert {r['alert']}", r["expr"]))
    dashboard = json.loads((OPTIONAL / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            out.append((f"panel {panel['title']}", target["expr"]))
    return out


@pytest.mark.parametrize("where,expr", expressions(), ids=[w for w, _ in expressions()])
def test_every_metric_read_is_exported(where: str, expr: str) -> None:
    ours = exported()
    for name in metric_names(expr):
        assert name in ours or name in EXTERNAL_METRICS, f"{where} reads {name}, which nothing exports"


def test_the_alerts_the_issue_asks_for_are_there() -> None:
    rule = yaml.safe_load((OPTIONAL / "prometheus-rule.yaml").read_text())
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    for name in (
        "PlacementExtenderNotReady",
        "PlacementExtenderDownPodsWaiting",
        "PlacementExtenderFilterSlow",
        "PlacementExtenderFilterErrors",
        "PlacementExtenderBindsRefused",
        "PlacementExtenderCacheStale",
        "PlacementAuditFailing",
    ):
        assert name in alerts and alerts[name]["annotations"]["summary"], name


def test_the_parser_of_this_test_finds_metric_names() -> None:
    expr = 'histogram_quantile(0.99, sum by (le) (rate(extender_request_duration_seconds_bucket{verb="f"}[5m]))) > 0.5'
    assert metric_names(expr) == {"extender_request_duration_seconds_bucket"}
    assert metric_names("absent(up{job='x'} == 1) and on() sum(scheduler_pending_pods) > 0") == {
        "up",
        "scheduler_pending_pods",
    }


def _rules_file(tmp_path: Path) -> Path:
    """The PrometheusRule's spec.groups as a plain Prometheus rules file."""
    rule = yaml.safe_load((OPTIONAL / "prometheus-rule.yaml").read_text())
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def test_promtool_passes_the_shipped_rules(tmp_path: Path) -> None:
    """promtool (Debian's prometheus package; hack/realnode/install.sh installs it) parses every
    expression and checks every rule. Skipped only where it is missing on a developer's machine:
    under CI=true or REALNODE=1 its absence is a failure, not a skip."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI") == "true" or os.environ.get("REALNODE") == "1":
            pytest.fail("promtool is not installed (hack/realnode/install.sh installs Debian's prometheus)")
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    run = subprocess.run([promtool, "check", "rules", str(_rules_file(tmp_path))], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout + run.stderr


MONITORING = OPTIONAL / "monitoring" / "service-monitors.yaml"


def _metrics_services() -> list[dict]:
    """The installs' Services Prometheus scrapes (by the component label)."""
    services = []
    for path in (ROOT / "deploy" / "base" / "metrics.yaml", ROOT / "deploy" / "overlays" / "tls" / "extender.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            labels = (doc or {}).get("metadata", {}).get("labels") or {}
            if doc and doc["kind"] == "Service" and labels.get("app.kubernetes.io/component") == "metrics":
                services.append(doc)
    return services


def test_the_service_monitors_find_every_installs_metrics_ports() -> None:
    """Each ServiceMonitor selects one of the installs' metrics Services, each endpoint names a port
    of it, sends the Prometheus' token over HTTPS, and sets the job the PrometheusRule reads."""
    monitors = [d for d in yaml.safe_load_all(MONITORING.read_text()) if d]
    services = _metrics_services()
    assert {s["metadata"]["name"] for s in services} == {"placement-scheduler-metrics", "placement-extender-metrics"}
    rule_text = (OPTIONAL / "prometheus-rule.yaml").read_text()
    jobs = set()
    selected = set()
    for monitor in monitors:
        assert monitor["kind"] == "ServiceMonitor"
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matching = [s for s in services if wanted.items() <= s["metadata"]["labels"].items()]
        assert len(matching) == 1, f"{monitor['metadata']['name']} selects {matching}"
        service = matching[0]
        selected.add(service["metadata"]["name"])
        assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
        ports = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in ports, f"{monitor['metadata']['name']}: {endpoint['port']} not in {ports}"
            assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
            assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
            (job,) = [r["replacement"] for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
            jobs.add(job)
    assert selected == {s["metadata"]["name"] for s in services}
    assert jobs == {"placement-extender", "placement-scheduler"}
    for job in jobs:
        assert f'job="{job}"' in rule_text, f"the PrometheusRule reads no job {job}"


def test_no_series_names_a_tenant() -> None:
    """docs/security.md: the metrics port exposes no tenant's name. Every label the extender's
    metrics have, counted or not yet, is one of these: none is a namespace, policy, pod or group."""
    from extender.metrics import _Series

    store = ClusterStore()
    verbs = Verbs(store, binder=None, events=RecordedEvents())  # type: ignore[arg-type]
    store_gauges(verbs.metrics, store, time.time)
    labels: set[str] = set()
    for value in vars(verbs.metrics).values():
        if isinstance(value, _Series):
            labels |= set(value._metric._labelnames)
    for family in text_string_to_metric_families(verbs.metrics.render()):
        for sample in family.samples:
            labels |= set(sample.labels) - {"le"}
    ours = {"verb", "code", "outcome", "rule", "result", "reason", "holder", "kind", "stage"}
    python = {"generation", "implementation", "major", "minor", "patchlevel", "version"}  # python_info, python_gc_*
    assert labels <= ours | python, labels - ours - python
    assert labels & {"verb", "rule", "result"}, "the labelled series were read"


def test_no_install_binds_the_metrics_reader_role() -> None:
    """docs/security.md: placement-metrics-reader is bound by the team to its Prometheus, never by
    an install; and it grants `get` on /metrics alone."""
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        if "helm" in path.parts:  # generated from these files
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in ("ClusterRoleBinding", "RoleBinding"):
                assert doc["roleRef"]["name"] != "placement-metrics-reader", path
    (role,) = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "base" / "rbac.yaml").read_text())
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "placement-metrics-reader"
    ]
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]

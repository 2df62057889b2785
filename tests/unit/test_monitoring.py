"""deploy/optional's Grafana dashboard and PrometheusRule read only metrics that exist: the
extender's own (from a live /metrics) or the few named below with where they come from."""

from __future__ import annotations

import json
import re
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

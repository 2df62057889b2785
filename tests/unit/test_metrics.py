"""/metrics and the aggregated rejection event."""

from __future__ import annotations

import time

from extender.limits import MAX_CACHE_STALENESS
from extender.metrics import store_gauges
from extender.server.app import create_app
from extender.state.store import KINDS, ClusterStore

from builders import HOST, filter_args, node, pod
from fakes import RecordedEvents, ShownVerbs


def make():
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for i in range(4):
        store.apply("nodes", "ADDED", node(f"n{i}", "a" if i < 2 else "b"))
    events = RecordedEvents()
    verbs = ShownVerbs(store, binder=None, events=events)  # type: ignore[arg-type]
    store_gauges(verbs.metrics, store, time.time)
    return store, events, verbs, create_app(verbs).test_client()


def test_metrics_show_the_decisions_made() -> None:
    store, events, verbs, client = make()
    names = ["n0", "n1", "n2", "n3"]
    policy = {"zones": {"allowed": ["a"]}}
    client.post("/filter", json=filter_args(pod("r-0", sts="r", policy=policy), names))
    client.post("/filter", json=filter_args(pod("plain"), names))
    client.post("/filter", json=filter_args(pod("bad", policy={"capz": 1}), names))
    client.post("/filter", data="{oops")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'extender_filter_decisions_total{result="feasible"} 1' in text
    assert 'extender_filter_decisions_total{result="no_policy"} 1' in text
    assert 'extender_filter_decisions_total{result="invalid_policy"} 1' in text
    assert 'extender_filter_node_verdicts_total{outcome="unresolvable",rule="zones"} 2' in text
    assert 'extender_filter_node_verdicts_total{outcome="pass",rule="-"} 6' in text
    assert 'extender_requests_total{code="400",verb="filter"} 1' in text
    assert 'extender_request_duration_seconds_count{verb="filter"} 4' in text
    assert 'extender_cache_objects{kind="nodes"} 4' in text
    assert 'extender_cache_synced{kind="pods"} 1' in text
    assert 'extender_reservations{kind="tentative"} 1' in text
    assert "# TYPE extender_request_duration_seconds histogram" in text


def test_a_pod_no_node_can_take_gets_one_aggregated_event() -> None:
    store, events, verbs, client = make()
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n0"))
    store.apply("pods", "ADDED", pod("r-1", sts="r", node_name="n1"))
    policy = {"caps": [{"topologyKey": HOST, "max": 1}], "zones": {"allowed": ["a"]}}
    client.post("/filter", json=filter_args(pod("r-2", sts="r", policy=policy), ["n0", "n1", "n2", "n3"]))
    assert len(events.events) == 1
    key, reason, message = events.events[0]
    assert key == "db/r-2" and reason == "PlacementRejected"
    assert message.startswith("0/4 nodes can take this pod under its placement policy: 2 by caps (e.g. ")
    assert "2 by zones (e.g. zone b is not among the allowed zones (a))" in message


# Every metric the documentation names, with its labels (docs/reference/metrics.md, generated from this
# registry by hack/docs/generate.py; docs/operations/metrics.md and the alerts read them).
DOCUMENTED = {
    "extender_requests": ("counter", {"verb", "code"}),
    "extender_request_duration_seconds": ("histogram", {"verb"}),
    "extender_filter_decisions": ("counter", {"result"}),
    "extender_filter_node_verdicts": ("counter", {"outcome", "rule"}),
    "extender_binds": ("counter", {"result"}),
    "extender_preempt_nodes": ("counter", set()),
    "extender_decision_fallbacks": ("counter", set()),
    "extender_store_lock_hold_seconds": ("histogram", {"holder"}),
    "extender_cache_objects": ("gauge", {"kind"}),
    "extender_cache_synced": ("gauge", {"kind"}),
    "extender_cache_last_event_age_seconds": ("gauge", {"kind"}),
    "extender_cache_stale_seconds": ("gauge", {"kind"}),
    "extender_reservations": ("gauge", {"kind"}),
    "extender_ungated_opt_in_pods": ("gauge", set()),
}
STANDARD = ["process_resident_memory_bytes", "process_cpu_seconds", "process_open_fds", "python_gc_collections"]


def test_metrics_parse_with_the_clients_own_parser_and_keep_the_documented_names() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    store, events, verbs, client = make()
    client.post("/filter", json=filter_args(pod("r-0", sts="r", policy={"zones": {"allowed": ["a"]}}), ["n0", "n2"]))
    response = client.get("/metrics")
    assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(response.get_data(as_text=True))}
    for name, (kind, labels) in DOCUMENTED.items():
        assert name in families, name
        assert families[name].type == kind, name
        for sample in families[name].samples:
            assert labels <= set(sample.labels) | ({"le"} if kind == "histogram" else set()), (name, sample)
    for name in STANDARD:
        assert name in families, f"{name}: the standard collectors are registered"
    assert not any(name.endswith("_created") for f in families.values() for name, *_ in f.samples)


def test_each_metrics_object_has_its_own_registry() -> None:
    from extender.metrics import Metrics

    a, b = Metrics(), Metrics()
    a.binds.inc(result="bound")
    assert (a.binds.value(result="bound"), b.binds.value(result="bound")) == (1.0, 0.0)


def test_readyz_and_the_stale_gauge_report_a_kind_disconnected_past_the_bound() -> None:
    now = [1000.0]
    store = ClusterStore(clock=lambda: now[0])
    for kind in KINDS:
        store.replace(kind, [])
    verbs = ShownVerbs(store, binder=None, events=RecordedEvents())  # type: ignore[arg-type]
    store_gauges(verbs.metrics, store, lambda: now[0])
    client = create_app(verbs).test_client()
    assert client.get("/readyz").status_code == 200

    store.connection_lost("pods")
    now[0] += MAX_CACHE_STALENESS - 1  # a normal reconnect's worth: still ready
    store.connection_lost("pods")  # a second failure of the same outage does not restart the clock
    assert client.get("/readyz").status_code == 200
    now[0] += 2
    answer = client.get("/readyz")
    assert answer.status_code == 503
    body = answer.get_json()
    assert body["status"] == "stale" and body["disconnected_seconds"] == {"pods": MAX_CACHE_STALENESS + 1}
    assert body["bound_seconds"] == MAX_CACHE_STALENESS
    text = client.get("/metrics").get_data(as_text=True)
    assert f'extender_cache_stale_seconds{{kind="pods"}} {MAX_CACHE_STALENESS + 1:g}' in text
    assert 'extender_cache_stale_seconds{kind="nodes"} 0' in text

    store.connected("pods")
    assert client.get("/readyz").status_code == 200
    assert 'extender_cache_stale_seconds{kind="pods"} 0' in client.get("/metrics").get_data(as_text=True)


def test_readyz_and_metrics_answer_while_a_decision_holds_the_cache() -> None:
    """A decision may hold the store's lock up to its deadline (and a hostile policy once held it
    26 s): /readyz and /metrics read counts without it, so they answer while it is held. The
    holder below releases only after both answered; were either to wait, the join times out."""
    import threading

    store, _, _, client = make()
    held, release, answered = threading.Event(), threading.Event(), {}

    def long_decision() -> None:
        with store.lock.held("filter"):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=long_decision)
    holder.start()
    held.wait(5)

    def ask() -> None:
        answered["readyz"] = client.get("/readyz").status_code
        answered["metrics"] = client.get("/metrics").status_code

    asker = threading.Thread(target=ask)
    asker.start()
    asker.join(10)
    still_held = holder.is_alive()
    release.set()
    holder.join(10)
    assert still_held and answered == {"readyz": 200, "metrics": 200}, answered


def test_every_bind_result_is_exported_at_zero_before_any_bind() -> None:
    """In-scheduler mode never calls bind (kube-scheduler binds), yet the shipped alert and dashboard
    read extender_binds_total: every result the bind verb can count exists from the start, at 0,
    and the verbs count no result outside that list."""
    import re
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families

    from extender.metrics import BIND_RESULTS, Metrics

    samples = {
        s.labels["result"]: s.value
        for f in text_string_to_metric_families(Metrics().render())
        if f.name == "extender_binds"
        for s in f.samples
    }
    assert samples == dict.fromkeys(BIND_RESULTS, 0.0)
    source = (Path(__file__).resolve().parents[2] / "extender" / "server" / "verbs.py").read_text()
    counted = set(re.findall(r'binds\.inc\(result="([a-z_]+)"\)', source))
    counted |= set(re.findall(r'reason, result = .*, "([a-z_]+)"', source))  # the bind re-check's refusals
    assert {"bound", "refused", "refused_node", "refused_resources"} <= counted, counted
    assert counted <= set(BIND_RESULTS), counted - set(BIND_RESULTS)

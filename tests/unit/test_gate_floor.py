"""The gate floor's harness (benchmarks/gate_floor.py) without a cluster: the API server's metrics
deltas per round and per pod from plain /metrics texts, the scrape's place around a round's CPU
readings, the lifter's one PATCH a gated pod, and the kind's gate-floor figures and targets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import gate_floor
from benchmarks.kinds import e2e
from extender.api.policy import PLACEABLE_GATE

BEFORE = """# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",group="",resource="pods",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="200",group="",resource="pods",subresource="",verb="PATCH",version="v1"} 4
apiserver_request_total{code="409",group="",resource="pods",subresource="",verb="PATCH",version="v1"} 1
apiserver_request_total{code="200",group="",resource="nodes",subresource="",verb="GET",version="v1"} 7
apiserver_request_totals_other{resource="pods"} 1000
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_count{group="",resource="pods",subresource="",verb="POST",version="v1"} 10
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="PATCH",version="v1"} 0.25
apiserver_request_duration_seconds_count{group="",resource="pods",subresource="",verb="PATCH",version="v1"} 5
apiserver_watch_events_total{group="",resource="pods",version="v1"} 100
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 50000
"""

AFTER = """apiserver_request_total{code="201",group="",resource="pods",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="200",group="",resource="pods",subresource="",verb="PATCH",version="v1"} 22
apiserver_request_total{code="409",group="",resource="pods",subresource="",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",group="",resource="nodes",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="201",group="",resource="pods",subresource="binding",verb="POST",version="v1"} 20
apiserver_request_totals_other{resource="pods"} 9000
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="POST",version="v1"} 1.5
apiserver_request_duration_seconds_count{group="",resource="pods",subresource="",verb="POST",version="v1"} 30
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="PATCH",version="v1"} 0.45
apiserver_request_duration_seconds_count{group="",resource="pods",subresource="",verb="PATCH",version="v1"} 25
apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="binding",verb="POST",version="v1"} 0.2
apiserver_admission_controller_admission_duration_seconds_sum{name="MutatingAdmissionPolicy",operation="CREATE",rejected="false",type="admit"} 0.04
apiserver_admission_controller_admission_duration_seconds_count{name="MutatingAdmissionPolicy",operation="CREATE",rejected="false",type="admit"} 20
apiserver_validating_admission_policy_check_total{enforcement_action="deny",error_type="no_error",policy="placement-extender-pod-writes",policy_binding="b"} 20
apiserver_validating_admission_policy_check_duration_seconds_sum{enforcement_action="deny",error_type="no_error",policy="placement-extender-pod-writes",policy_binding="b"} 0.1
apiserver_validating_admission_policy_check_duration_seconds_count{enforcement_action="deny",error_type="no_error",policy="placement-extender-pod-writes",policy_binding="b"} 20
apiserver_watch_events_total{group="",resource="pods",version="v1"} 300
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 150000
"""  # noqa: E501


def rows(delta: dict[str, list[dict[str, Any]]], table: str) -> dict[tuple, tuple]:
    labels = gate_floor.FAMILIES[next(c for name, c, _ in gate_floor.TABLES if name == table)]
    return {tuple(r[k] for k in labels): (r["calls"], r.get("seconds")) for r in delta[table]}


def test_a_rounds_delta_sums_the_codes_keeps_what_grew_and_costs_it_in_the_servers_seconds() -> None:
    delta = gate_floor.api_delta(BEFORE, AFTER)
    assert rows(delta, "requests") == {
        ("PATCH", "pods", ""): (20, pytest.approx(0.2)),  # 18 accepted + 2 conflicts; 0.45 - 0.25 s
        ("POST", "pods", ""): (20, pytest.approx(1.0)),
        ("POST", "pods", "binding"): (20, pytest.approx(0.2)),  # new series: all of it is the round's
    }  # the nodes GET did not grow: no row; apiserver_request_totals_other is another metric
    assert rows(delta, "admission_controllers") == {
        ("MutatingAdmissionPolicy", "CREATE", "admit"): (20, pytest.approx(0.04))
    }
    assert rows(delta, "validating_policies") == {("placement-extender-pod-writes",): (20, pytest.approx(0.1))}
    assert rows(delta, "watch_events") == {("pods",): (200, pytest.approx(100000))}  # events, bytes
    assert delta["mutating_policies"] == [] and delta["match_conditions"] == []


def test_the_page_is_cut_to_the_families_before_parsing() -> None:
    kept = gate_floor.filter_page(BEFORE).splitlines()
    assert all(line.split("{")[0] in gate_floor.FAMILIES for line in kept)
    assert len(kept) == 10  # every sample but the other metric's; no comment line


def test_per_pod_adds_a_sides_complete_rounds_and_divides_by_the_pods_they_placed() -> None:
    delta = gate_floor.api_delta(BEFORE, AFTER)
    rounds = [
        {"complete": True, "bound": 20, "api": delta},
        {"complete": True, "bound": 20, "api": delta},
        {"complete": False, "bound": 3, "api": delta},  # cut short: left out
    ]
    per_pod = gate_floor.api_per_pod(rounds)
    patch = next(r for r in per_pod["requests"] if r["verb"] == "PATCH")
    assert patch == {"verb": "PATCH", "resource": "pods", "subresource": "", "per_pod": 1.0, "ms_per_pod": 10.0}
    assert per_pod["watch_events"] == [{"resource": "pods", "per_pod": 10.0, "bytes_per_pod": 5000.0}]
    assert gate_floor.api_per_pod([{"complete": False, "bound": 3, "api": delta}]) == {}
    text = gate_floor.api_table({"in-scheduler": per_pod, "gate-floor": {}}, "requests")
    assert "PATCH" in text and "1 / 10" in text and "in-scheduler: per pod / ms" in text


SERIES = st.dictionaries(
    st.tuples(
        st.sampled_from(["GET", "PATCH", "POST"]), st.sampled_from(["pods", "events"]), st.sampled_from(["200", "409"])
    ),
    st.integers(0, 10**6),
    max_size=12,
)


def page(series: dict[tuple[str, str, str], int]) -> str:
    return "".join(
        f'apiserver_request_total{{code="{code}",resource="{resource}",subresource="",verb="{verb}"}} {value}\n'
        for (verb, resource, code), value in series.items()
    )


@settings(max_examples=60, deadline=None)
@given(SERIES, SERIES)
def test_the_rows_calls_add_up_to_what_every_series_grew(before, growth) -> None:  # noqa: ANN001
    """Whatever the series and codes, a delta loses no call and invents none: the rows' calls are the
    counters' growth, each code folded into its verb/resource."""
    after = {k: before.get(k, 0) + growth.get(k, 0) for k in before.keys() | growth.keys()}
    delta = gate_floor.api_delta(page(before), page(after))
    assert sum(r["calls"] for r in delta["requests"]) == sum(growth.values())
    for r in delta["requests"]:
        grew = sum(v for (verb, resource, _), v in growth.items() if (verb, resource) == (r["verb"], r["resource"]))
        assert r["calls"] == grew > 0


class Base:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    def cpu_seconds(self) -> dict[str, float]:
        self.order.append("cpu")
        return {"kube-apiserver": float(len(self.order))}


class Scraped(gate_floor.ScrapedCluster, Base):
    def metrics_page(self) -> str:
        self.order.append("scrape")
        return BEFORE if self.order.count("scrape") == 1 else AFTER

    def settle(self) -> float | None:
        self.order.append("settle")
        return 1.5


def test_the_pages_are_read_outside_the_rounds_cpu_readings_and_the_last_once_it_settled() -> None:
    cluster = Scraped([])
    cluster.cpu_seconds()  # run_round's reading before the round
    cluster.cpu_seconds()  # and after
    assert cluster.order == ["scrape", "cpu", "settle", "cpu", "scrape"]
    api = cluster.round_api()
    assert api is not None and rows(api, "requests")[("POST", "pods", "binding")][0] == 20
    assert api["settled_after_s"] == 1.5
    assert cluster.round_api() is None  # forgotten once read


class Response:
    def __init__(self, status: int) -> None:
        self.status_code = status


class Session:
    """Records the lifter's PATCHes; answers each with the next status given."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.patches: list[tuple[str, list]] = []

    def patch(self, url: str, data: str, headers: dict, timeout: float) -> Response:
        assert headers["Content-Type"] == "application/json-patch+json"
        self.patches.append((url, json.loads(data)))
        return Response(self.statuses.pop(0))


def gated(name: str, version: str, gates=(PLACEABLE_GATE,)) -> dict:  # noqa: ANN001
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": version},
        "spec": {"schedulingGates": [{"name": g} for g in gates]},
    }


def test_the_lifter_patches_each_gated_pod_once_and_again_after_a_failed_patch() -> None:
    session = Session([409, 200, 200])
    lifter = gate_floor.Lifter("https://127.0.0.1:1", session)  # type: ignore[arg-type]
    assert lifter.offer(gated("db-0", "5"))
    lifter.pool.shutdown(wait=True)
    lifter.pool = type(lifter.pool)(max_workers=1)
    assert lifter.failed == 1  # the pod changed in between: its next event offers it again
    assert lifter.offer(gated("db-0", "6")) and not lifter.offer(gated("db-0", "7"))
    assert not lifter.offer(gated("db-1", "8", gates=()))  # not gated: nothing to lift
    assert lifter.offer(gated("db-2", "9", gates=("other", PLACEABLE_GATE)))
    lifter.pool.shutdown(wait=True)
    assert lifter.lifted == 2 and lifter.failed == 1
    url, ops = session.patches[1]
    assert url.endswith("/api/v1/namespaces/ns/pods/db-0")
    assert ops == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "6"},
        {"op": "remove", "path": "/spec/schedulingGates"},
    ]
    assert session.patches[2][1][-1] == {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "other"}]}


def round_of(side: str, index: int, pps: float, cpu: dict[str, float]) -> dict[str, Any]:
    return {
        "side": side,
        "round": index,
        "complete": True,
        "pods": 300,
        "bound": 300,
        "pods_per_second": pps,
        "seconds_to_all_bound": 300 / pps,
        "steady_pods_per_second_10_90": None,
        "seconds_all_created": 1.0,
        "failed_scheduling_events": 0,
        "rule_violations": 0,
        "cpu_seconds": cpu,
        "bind_ms": {},
    }


def test_the_modes_figures_hold_the_gate_floor_and_in_scheduler_modes_ratios_over_it() -> None:
    rounds = []
    for i in range(2):
        rounds += [
            round_of("native", i, 130.0, {"kube-apiserver": 3.0}),
            round_of("extender", i, 100.0, {"kube-apiserver": 3.0, "extender": 1.5}),
            round_of("in-scheduler", i, 30.0 + i, {"kube-apiserver": 9.0, "extender": 3.0}),
            round_of(
                gate_floor.SIDE, i, 60.0 + 2 * i, {"kube-apiserver": 6.0, "extender": 1.2, gate_floor.LIFTER: 0.3}
            ),
        ]
    results = {"modes": {"variant": "modes", "scheduler_qps": 500.0, "scheduler_burst": 1000, "rounds": rounds}}
    results["modes"]["summary"] = e2e.summarise(rounds)
    figures = e2e.figures(results, None)
    assert figures["modes.gate_floor.pods_per_second"] == 61.0
    assert figures["modes.gate_floor.cpu_ms_per_pod.all"] == 25.0  # (6 + 1.2 + 0.3) s / 300 pods
    assert figures["modes.gate_floor.cpu_ms_per_pod.gate-floor-lifter"] == 1.0
    assert figures["modes.in-scheduler.cpu_ms_per_pod.all"] == 40.0
    assert figures["modes.gate_floor.ratio_in_scheduler_cpu_over_gate_floor"] == 1.6
    assert figures["modes.gate_floor.ratio_in_scheduler_rate_over_gate_floor"] == round(30.5 / 61.0, 2)
    assert not any(k.startswith("modes.gate-floor.") for k in figures)
    summary = results["modes"]["summary"]
    assert summary["gate_floor"]["verdict"] == "MISSED"
    text = e2e.variant_report(rounds, summary)
    assert "gate floor: median 61.0 pods/s" in text


def test_the_audit_log_counts_a_rounds_completed_requests_by_client(tmp_path) -> None:  # noqa: ANN001
    flags = gate_floor.audit_args(tmp_path / "audit")
    assert (tmp_path / "audit" / "audit-policy.yaml").read_text() == gate_floor.AUDIT_POLICY
    assert any(f.startswith("--audit-log-path=") for f in flags)

    def event(user: str, verb: str, resource: str, namespace: str = "ns", stage: str = "ResponseComplete", **ref):  # noqa: ANN003
        return json.dumps(
            {
                "stage": stage,
                "verb": verb,
                "user": {"username": user},
                "objectRef": {"resource": resource, "namespace": namespace, **ref},
            }
        )

    lines = [
        event("extender", "patch", "pods"),
        event("extender", "patch", "pods"),
        event("extender", "patch", "pods", stage="ResponseStarted"),  # a watch's start: not a completion
        event("scheduler", "create", "pods", subresource="binding"),
        event("scheduler", "create", "events", namespace="other"),  # another round's
        "not json",
    ]
    assert gate_floor.attribute(lines, "ns") == {
        ("extender", "patch", "pods", ""): 2,
        ("scheduler", "create", "pods", "binding"): 1,
    }

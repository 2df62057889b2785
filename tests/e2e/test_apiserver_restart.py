"""Scenario: kube-apiserver restarted mid-burst.

200 pods of capped groups (8 StatefulSets x 25: at most 1 pod per node, zones within one pod of
each other) on 36 nodes; after about 50 binds kube-apiserver is stopped for 10 s and started
again on the same etcd. Every watch of the extender breaks; /readyz (polled) must answer 503
while its cache has been disconnected past the bound (limits.MAX_CACHE_STALENESS) and 200 again
after. Reported: the time from the API server being ready again to every pod placed and /readyz
200. Read back from the API server, 0 violations asserted.

Our kube-scheduler's lease timing is widened here (leaseDuration 40s, renewDeadline 30s,
retryPeriod 2s): with kube-scheduler's default renewDeadline of 10 s, a 10 s outage makes it
exit on the lost lease (in a cluster the kubelet restarts it); the scenario is about the
extender's cache, not that restart.
"""

from __future__ import annotations

import time

import pytest

from extender.devcluster.cluster import zoned_nodes

from .workloads import (
    Sampler,
    capped_violations,
    count_pods,
    create_statefulset,
    extender_requests,
    node_zones,
    pods,
    readyz_status,
    statefulset,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.e2e

LEASE = {"leaseDuration": "40s", "renewDeadline": "30s", "retryPeriod": "2s"}
CLUSTER_OPTIONS = {"leader_election": LEASE}
ZONES = ["zone-a", "zone-b", "zone-c"]
NODES_PER_ZONE = 12
OUTAGE = 10.0
POLICY = {
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}


@pytest.fixture(scope="module")
def plane(cluster):
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    return cluster


def _burst(api, ns: str, label: str, sets: int, replicas: int) -> None:  # noqa: ANN001
    for i in range(sets):
        create_statefulset(api, ns, statefulset(f"{label}-{i}", replicas, labels={"fault": label}, policy=POLICY))


def _wait_bound(sampler: Sampler, at_least: int, started: float) -> None:
    while not isinstance(sampler.last(), int) or sampler.last() < at_least:
        assert time.monotonic() - started < 300, f"no {at_least} binds in 300 s"
        time.sleep(0.05)


def _first_rise(sampler: Sampler, since: float) -> float | None:
    """When the sampled count first rose above its first value at or after `since`."""
    at = next((v for t, v in list(sampler.samples) if t >= since and isinstance(v, int)), None)
    return sampler.first(since, lambda v: isinstance(v, int) and at is not None and v > at)


def _after(when: float | None, since: float) -> str:
    return f"{when - since:.1f}s" if when is not None else "never"


def _settle(cluster, api, ns, selector, expected, scenario):  # noqa: ANN001, ANN202
    try:
        return wait_settled(api, ns, selector, expected, timeout=600)
    except AssertionError:
        scenario.pending = sum(1 for p in pods(api, ns, selector) if not p["spec"].get("nodeName"))
        raise


def test_apiserver_restart_mid_burst(plane, scenario) -> None:
    cluster = plane
    api = cluster.admin
    ns = cluster.namespace("restart")
    zone_of = node_zones(api)
    port = cluster.ports["extender"]
    sets, replicas = 8, 25
    started = time.monotonic()
    with (
        Sampler(lambda: count_pods(api, ns, "fault=restart", bound=True)) as bound,
        Sampler(lambda: readyz_status(port), interval=0.25) as ready,
        Sampler(lambda: extender_requests(port, "filter"), interval=0.25) as filters,
        Sampler(lambda: count_pods(api, ns, "fault=restart"), interval=0.5) as created,
    ):
        _burst(api, ns, "restart", sets, replicas)
        _wait_bound(bound, 50, started)
        at_stop = bound.last()
        stopping = time.monotonic()
        cluster.stop_apiserver()
        stopped = time.monotonic()
        time.sleep(OUTAGE)
        cluster.start_apiserver()
        back = time.monotonic()
        placed = _settle(cluster, api, ns, "fault=restart", sets * replicas, scenario)
        placed_at = time.monotonic()
        ready_again = wait_for("extender /readyz 200", lambda: ready.first(back, lambda v: v == 200), 120)

    first_503 = ready.first(stopping, lambda v: v == 503)
    # After the restart: when the next pod was bound, when our kube-scheduler next asked the
    # extender (it asks nothing while its own informers are reconnecting), and how many pods the
    # StatefulSet controller had created by then (a pod not yet created cannot be scheduled).
    next_bind = _first_rise(bound, back)
    next_filter = _first_rise(filters, back)
    created_at_back = next((v for t, v in list(created.samples) if t >= back and isinstance(v, int)), None)
    found = capped_violations(placed, zone_of, ZONES)
    log = cluster.process("extender").log_path.read_text(errors="replace")
    tracebacks = log.count("Traceback")
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    scenario.wall_time = placed_at - started
    went_503 = f"{first_503 - stopping:.1f}s after the stop" if first_503 is not None else "never"
    scenario.note = (
        f"kube-apiserver stopped at {at_stop} of {sets * replicas} bound (its stop took {stopped - stopping:.1f}s), "
        f"down {back - stopping:.1f}s in all (start to ready {back - stopped - OUTAGE:.1f}s); extender /readyz 503 "
        f"{went_503}, 200 again {ready_again - back:.1f}s after the API server was ready; {created_at_back} of "
        f"{sets * replicas} pods existed then; the next filter call {_after(next_filter, back)}, the next bind "
        f"{_after(next_bind, back)} and every pod placed {placed_at - back:.1f}s after it was ready; {tracebacks} "
        "tracebacks"
    )
    print(f"\n{scenario.note}")
    assert not found, f"{len(found)} violations: {found[:20]}"
    assert first_503 is not None, "/readyz never answered 503 while the API server was down"
    assert ready.last() == 200

"""Scenario: a burst of 300 pods of capped groups, created at once.

36 nodes (3 zones x 12). Ten StatefulSets of 30 replicas (podManagementPolicy Parallel), each
its own group (the policy's default group: the pods of one StatefulSet) with an inline policy:
at most 1 pod per node, and zones within one pod of each other (spread maxSkew 1,
DoNotSchedule). 30 pods over 36 nodes is feasible for each; together they are 300 pods
arriving at kube-scheduler as fast as the StatefulSet controller creates them, so binds race
each other and the extender's reservations and bind re-check are what keep the caps.

All 10 are created back to back; the test waits until all 300 are bound, then checks from
the API server: no two pods of one StatefulSet on a node, and each StatefulSet's zones within
one pod of each other. The wall time to place everything and the number of binds the extender
refused (its log, read before teardown) go into the scenario note.
"""

from __future__ import annotations

import re
import time

import pytest

from extender.devcluster.cluster import HOSTNAME, zoned_nodes

from .workloads import (
    ZONE,
    create_statefulset,
    node_zones,
    per_statefulset_violations,
    pods,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

ZONES = ["zone-a", "zone-b", "zone-c"]
NODES_PER_ZONE = 12
SETS = 10
REPLICAS = 30
SELECTOR = "burst=capped"
POLICY = {
    "caps": [{"topologyKey": HOSTNAME, "max": 1}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}


@pytest.fixture(scope="module")
def burst(cluster):
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    return cluster, cluster.namespace("burst")


def test_300_capped_pods_created_at_once(burst, scenario) -> None:
    cluster, ns = burst
    api = cluster.admin
    zone_of = node_zones(api)
    assert len(zone_of) == len(ZONES) * NODES_PER_ZONE

    started = time.monotonic()
    for i in range(SETS):
        create_statefulset(api, ns, statefulset(f"burst-{i}", REPLICAS, labels={"burst": "capped"}, policy=POLICY))
    created = time.monotonic()
    try:
        placed = wait_settled(api, ns, SELECTOR, SETS * REPLICAS, timeout=600)
    except AssertionError:
        scenario.pending = sum(1 for p in pods(api, ns, SELECTOR) if not p["spec"].get("nodeName"))
        raise
    elapsed = time.monotonic() - started

    log = (cluster.log_dir / "extender.log").read_text(errors="replace")
    refused = len(re.findall(r"refused to bind", log))
    blind = len(re.findall(r"refusing to bind blind", log))
    tracebacks = log.count("Traceback")
    failed_events = sum(1 for e in api.list(f"/api/v1/namespaces/{ns}/events") if e.get("reason") == "FailedScheduling")

    found = per_statefulset_violations(placed, zone_of, ZONES, cap=1)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    scenario.note = (
        f"{len(placed)} pods of {SETS} capped groups on {len(zone_of)} nodes placed in {elapsed:.1f}s "
        f"(creates took {created - started:.1f}s); extender log: {refused} 'refused to bind', "
        f"{blind} 'refusing to bind blind', {tracebacks} tracebacks; {failed_events} FailedScheduling events"
    )
    print(f"\n{scenario.note}")
    assert not found, f"{len(found)} violations: {found[:20]}"
    assert tracebacks == 0, "the extender logged tracebacks during the burst"

"""Scenario: leader failover mid-burst.

Two kube-scheduler + extender pairs on one leader lease, as deploy/ runs two replicas; the
standby's extender has synced its cache (warm) but holds no reservations. 200 pods of capped
groups (8 StatefulSets x 25: at most 1 pod per node, zones within one pod of each other) on 36
nodes. After about 50 binds the leading kube-scheduler and its extender are SIGKILLed together
(a crash or a lost node: the lease is not released); the standby takes the lease when it
expires and places the rest. The old leader's last binds may still land while the new leader's
extender, with empty reservations, decides: its watch and its bind re-check must keep the caps.

The schedulers here use short lease timing (leaseDuration 4s, renewDeadline 3s, retryPeriod 1s;
kube-scheduler's defaults and deploy/'s are 15s/10s/2s), so the takeover is seconds; with the
defaults add about 11 s (a lease expiry and a retry). Reported: the time from the kill to the
standby taking the lease, to the next bind after that, and to the last pod placed. All read
from the API server; 0 violations asserted.
"""

from __future__ import annotations

import time

import pytest

from extender.devcluster.cluster import SCHEDULER_NAME, SYSTEM_NAMESPACE, zoned_nodes

from .workloads import (
    Sampler,
    capped_violations,
    count_pods,
    create_statefulset,
    node_zones,
    pods,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

LEASE = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
CLUSTER_OPTIONS = {"leader_election": LEASE}
ZONES = ["zone-a", "zone-b", "zone-c"]
NODES_PER_ZONE = 12
SETS = 8
REPLICAS = 25
KILL_AFTER = 50
SELECTOR = "failover=capped"
POLICY = {
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}


@pytest.fixture(scope="module")
def pair(cluster):
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    cluster.start_standby()
    return cluster, cluster.namespace("failover")


def _holder(api) -> str:  # noqa: ANN001
    lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/{SCHEDULER_NAME}")
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def test_failover_mid_burst(pair, scenario) -> None:
    cluster, ns = pair
    api = cluster.admin
    zone_of = node_zones(api)
    leader = cluster.leader()
    assert leader == "placement-scheduler", leader
    holder_before = _holder(api)

    started = time.monotonic()
    with Sampler(lambda: count_pods(api, ns, SELECTOR, bound=True)) as bound, Sampler(lambda: _holder(api)) as lease:
        for i in range(SETS):
            create_statefulset(api, ns, statefulset(f"fo-{i}", REPLICAS, labels={"failover": "capped"}, policy=POLICY))
        while not isinstance(bound.last(), int) or bound.last() < KILL_AFTER:
            assert time.monotonic() - started < 300, "no 50 binds in 300 s"
            time.sleep(0.05)
        # the scheduler first, so it sends nothing more to its extender
        cluster.kill(leader)
        cluster.kill(cluster.PAIRS[leader])
        killed = time.monotonic()
        at_kill = bound.last()
        try:
            placed = wait_settled(api, ns, SELECTOR, SETS * REPLICAS, timeout=600)
        except AssertionError:
            scenario.pending = sum(1 for p in pods(api, ns, SELECTOR) if not p["spec"].get("nodeName"))
            raise
        done = time.monotonic()

    taken = lease.first(killed, lambda v: isinstance(v, str) and v and v != holder_before)
    assert taken is not None, "the standby never took the lease"
    settled_at_takeover = max(v for t, v in bound.samples if t <= taken and isinstance(v, int))
    next_bind = bound.first(taken, lambda v: isinstance(v, int) and v > settled_at_takeover)
    assert cluster.leader() == "placement-scheduler-2"

    found = capped_violations(placed, zone_of, ZONES)
    log = cluster.process("extender-2").log_path.read_text(errors="replace")
    refused = log.count("refused to bind")
    tracebacks = log.count("Traceback")
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    scenario.wall_time = done - started
    scenario.note = (
        f"killed the leading scheduler+extender at {at_kill} of {SETS * REPLICAS} bound "
        f"(lease {LEASE['leaseDuration']}/{LEASE['renewDeadline']}/{LEASE['retryPeriod']}): standby took the "
        f"lease {taken - killed:.1f}s after the kill, next bind {next_bind - killed:.1f}s, last pod placed "
        f"{done - killed:.1f}s; {settled_at_takeover - at_kill} binds landed between kill and takeover; "
        f"standby extender: {refused} 'refused to bind', {tracebacks} tracebacks"
        if next_bind is not None
        else "no bind after the takeover"
    )
    print(f"\n{scenario.note}")
    assert not found, f"{len(found)} violations: {found[:20]}"
    assert tracebacks == 0

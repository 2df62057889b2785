"""Isolation, timed: a healthy tenant is placed as fast beside a valid policy at every bound as it is
alone. Scenarios 2 (its alone half) and 3 of test_bounded_decisions.py, whose helpers and
600-node cluster shape this module shares; a module of its own because its two tests compare wall
times, so they run alone under `make test`'s workers (tests/parallel.py), while the 1,000-replica
and over-limit scenarios, which assert no time, run beside others.

"good" (30 replicas, 1 per node, zone spread) is placed alone first; then "extreme" (3 replicas,
every list of its inline policy at its bound at once, tests/extreme_policies.py: 64 allowed zones,
none with a node) is created, its pods refused by the rules and their remedies searched, and "good"
is placed again beside it: in under twice its time alone (the issue's yardstick: before the bounds,
a 5,000-zone policy left 8 of 20 pods of another tenant bound after 240 s), /readyz answering 200 at
every sample, and kube-scheduler logging no failed or timed-out extender call.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from extender.limits import MAX_POLICY_ANNOTATION_BYTES

from .test_bounded_decisions import (
    BAD_REPLICAS,
    GOOD_ALONE,
    GOOD_REPLICAS,
    NODES_PER_ZONE,
    ZONES,
    LogMark,
    extender_call_failures,
    place_good,
    rule_violations,
    verb_latencies,
)
from .workloads import Sampler, create_statefulset, node_zones, pods, readyz_status, scheduled_message, statefulset

pytestmark = [pytest.mark.e2e, pytest.mark.alone("good placed alone vs beside extreme policies: times compared")]


@pytest.fixture(scope="module")
def nodes(cluster):  # noqa: ANN001, ANN201
    """The 600 nodes of test_bounded_decisions.py, on this module's control plane."""
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    return cluster, 0.0


def test_healthy_set_alone(nodes, scenario) -> None:
    cluster, _ = nodes
    api = cluster.admin
    ns = cluster.namespace("alone")
    extender_log = LogMark(cluster.log_dir / "extender.log")
    good = place_good(api, ns)
    elapsed, placed = good.seconds, good.pods
    found = rule_violations(placed, node_zones(api), 1)
    GOOD_ALONE["figures"] = good.figures()
    GOOD_ALONE["seconds"] = f"{good.seconds}"
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    scenario.wall_time = elapsed
    latencies = verb_latencies(extender_log.since())
    scenario.note = f"{GOOD_REPLICAS} pods of 'good' alone placed in {good.figures()}; extender: {latencies}"
    print(f"\n{scenario.note}")
    assert not found, found


def test_a_valid_policy_at_every_bound_does_not_slow_another_tenant(nodes, scenario) -> None:
    from extreme_policies import SECTIONS, at_bounds, zone_names

    cluster, _ = nodes
    api = cluster.admin
    ns = cluster.namespace("extreme")
    policy = at_bounds(set(SECTIONS) - {"fallback"}, zone_names(ZONES, 0))
    assert len(json.dumps(policy).encode()) < MAX_POLICY_ANNOTATION_BYTES
    scheduler_log = LogMark(cluster.log_dir / "placement-scheduler.log")
    extreme = statefulset("extreme", BAD_REPLICAS, policy=policy)
    try:
        with Sampler(lambda: readyz_status(cluster.ports["extender"])) as readiness:
            # The tenant at the bounds first, its pods refused (and retried by kube-scheduler, their
            # remedies searched), then "good": created on its own, as alone, so the comparison is the
            # scheduling (created together, kube-controller-manager's 20 QPS paced "good" alone).
            create_statefulset(api, ns, extreme)
            wait_for(
                "the extreme pods refused by their rules",
                lambda: len([p for p in pods(api, ns, "app=extreme") if scheduled_message(p)]) == BAD_REPLICAS,
                60,
            )
            time.sleep(3)  # kube-controller-manager's client (20 QPS, burst 30) back to a full burst, as alone
            good = place_good(api, ns)
            time.sleep(2)  # the extreme pods' retries and remedies go on: /readyz is sampled meanwhile
        found = rule_violations(good.pods, node_zones(api), 1)
        refused = [p for p in pods(api, ns, "app=extreme") if not p["spec"].get("nodeName")]
        statuses = Counter(v for _, v in readiness.samples)
        failures = extender_call_failures(scheduler_log.since())
        alone = float(GOOD_ALONE.get("seconds", "nan"))
        scenario.repetitions += 1
        scenario.pods_placed += len(good.pods)
        scenario.violations += len(found)
        scenario.wall_time = good.seconds
        scenario.note = (
            f"{GOOD_REPLICAS} pods of 'good' placed in {good.figures()} beside a valid policy at every bound "
            f"(alone: {GOOD_ALONE.get('figures', 'not measured')}); /readyz {dict(statuses)}; "
            f"kube-scheduler: {len(failures)} failed extender calls; {len(refused)} extreme pods Pending"
        )
        print(f"\n{scenario.note}")
        assert not found, found
        assert len(refused) == BAD_REPLICAS, "the extreme pods are refused by their rules (no allowed zone has a node)"
        assert set(statuses) == {200}, statuses
        assert not failures, f"kube-scheduler logged {len(failures)} failed extender calls: {failures[:5]}"
        assert good.seconds < 2 * alone, f"'good' took {good.seconds:.1f}s beside it, {alone:.1f}s alone"
    finally:
        api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/extreme")

"""Scenario: the soak's short form (benchmarks/kinds/soak.py, 1 minute here; the benchmark's default
is 30). Four capped groups churned through creates, scale-ups, scale-downs and deletes; every
third cycle the placement is audited (extender/ops/audit.py) and the extender sampled (worker RSS,
reservations, metric series). Asserted: 0 violations, and sane bounds only: no reservation left
once the churn settles, and the metric series bounded (their label sets do not grow with pods).
The slopes per hour go into the summary line; speed is not asserted."""

from __future__ import annotations

import time

import pytest

from benchmarks.kinds.soak import NODES_PER_ZONE, ZONES, churn
from extender.devcluster.cluster import zoned_nodes

pytestmark = pytest.mark.e2e

MINUTES = 1.0  # was 2.5: the bounds asserted here hold from the first audits; the hour is the benchmark's


def test_soak_short(cluster, scenario) -> None:
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    ns = cluster.namespace("soak")
    started = time.monotonic()
    result = churn(cluster, ns, minutes=MINUTES, groups=4, audit_every=3)
    scenario.repetitions += 1
    scenario.pods_placed += result.placed
    scenario.violations += len(result.violations)
    scenario.wall_time = time.monotonic() - started
    scenario.note = "soak: " + result.summary()
    print(f"\n{scenario.note}")
    assert not result.violations, result.violations[:20]
    assert result.reservations_after == 0, f"{result.reservations_after} reservations left after the churn settled"
    assert result.samples[-1].series < 2 * result.samples[1].series + 50, "metric series keep growing"

"""Scenario: the extender alone restarts mid-burst while its kube-scheduler keeps running.

Its container is OOM-killed, fails a liveness probe or is upgraded; kube-scheduler goes on and
calls the new process as soon as it listens, before its cache has listed the cluster. 2,000
unrelated pods sit in the cluster (as in any real one) so the pod list takes longer than the
node list: the window in which the release before this one bound pods past their cap (6-20
pairs per run). Per repetition: 200 pods of 4 StatefulSets (Parallel) under a per-node cap of 1
and a zone spread of maxSkew 1 on 3 zones x 20 nodes; the extender SIGKILLed at ~50 bound and
started again 5 s later. Read from the API server: every pod placed, 0 violations, and `audit`
exits 0. Reported from the new process's log: when it listened, when its cache synced, how many
filters and binds it refused before that, and when its first decision came.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

import pytest

from extender.devcluster.cluster import zoned_nodes

from .workloads import (
    Sampler,
    capped_violations,
    cli,
    count_pods,
    create_statefulset,
    node_zones,
    pods,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

ZONES = ["zone-a", "zone-b", "zone-c"]
NODES_PER_ZONE = 20
SETS, REPLICAS = 4, 50
KILL_AFTER = 50
DOWN = 5.0
REPETITIONS = 2  # 3 before the suite was cut for time: the race it guards lost 6-20 pairs in a single repetition
UNRELATED_PODS = 2000
POLICY = {
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


@pytest.fixture(scope="module")
def plane(cluster):
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    api = cluster.admin
    ns = cluster.namespace("bystanders")
    for i in range(UNRELATED_PODS):  # Pending for good (no scheduler serves them): listed, never placed
        api.create(
            f"/api/v1/namespaces/{ns}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"bystander-{i}", "labels": {"app": "bystander", "tier": "web"}},
                "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.invalid/web:1"}]},
            },
        )
    return cluster


def _line_time(line: str) -> float | None:
    """Epoch seconds of a log line (the extender logs local time, to the millisecond)."""
    m = _STAMP.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def _timed(lines: list[str], needle: str) -> list[float]:
    return [t for line in lines if needle in line and (t := _line_time(line)) is not None]


def _restart_once(cluster, rep: int, scenario) -> str:  # noqa: ANN001
    api = cluster.admin
    ns = cluster.namespace(f"restart-{rep}")
    selector = f"restart={rep}"
    zone_of = node_zones(api)
    log_path = cluster.process("extender").log_path
    started = time.monotonic()
    with Sampler(lambda: count_pods(api, ns, selector, bound=True)) as bound:
        for i in range(SETS):
            create_statefulset(
                api, ns, statefulset(f"r{rep}-{i}", REPLICAS, labels={"restart": str(rep)}, policy=POLICY)
            )
        while not isinstance(bound.last(), int) or bound.last() < KILL_AFTER:
            assert time.monotonic() - started < 300, f"no {KILL_AFTER} binds in 300 s"
            time.sleep(0.05)
        cluster.kill("extender")
        at_kill = bound.last()
        time.sleep(DOWN)
        offset = log_path.stat().st_size
        spawned = time.time()
        cluster.start_extender(wait_ready=False)
        try:
            placed = wait_settled(api, ns, selector, SETS * REPLICAS, timeout=600)
        except AssertionError:
            scenario.pending += sum(1 for p in pods(api, ns, selector) if not p["spec"].get("nodeName"))
            raise
        done = time.monotonic()

    with open(log_path, errors="replace") as f:
        f.seek(offset)
        lines = f.read().splitlines()
    synced = _timed(lines, "cache synced")
    refused_filters = len(
        [ln for ln in lines if re.search(r"\] filter \S+ refused: the placement extender's cache", ln)]
    )
    refused_binds = len([ln for ln in lines if re.search(r"\] bind \S+ refused: the placement extender's cache", ln)])
    decisions = [
        t for ln in lines if re.search(r"\] filter \S+ over \d+ nodes", ln) and (t := _line_time(ln)) is not None
    ]
    first_decision = next((t for t in decisions if synced and t >= synced[0]), None)
    found = capped_violations(placed, zone_of, ZONES)
    audit = cli(cluster, "audit", "-n", ns)
    tracebacks = sum(1 for ln in lines if "Traceback" in ln)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    sync_s = f"{synced[0] - spawned:.2f}s" if synced else "never"
    first_s = f"{first_decision - synced[0]:+.2f}s" if first_decision is not None and synced else "none"
    note = (
        f"run {rep}: killed at {at_kill} of {SETS * REPLICAS} bound, restarted {DOWN:.0f}s later; cache synced "
        f"{sync_s} after the new process started; {refused_filters} filters and {refused_binds} binds "
        f"refused before that; first decision {first_s} from the sync; all placed {done - started:.1f}s after "
        f"the burst began; {len(found)} violations; audit exit {audit.returncode}; {tracebacks} tracebacks"
    )
    print(f"\n{note}")
    assert synced, "the restarted extender never logged its cache synced"
    assert not found, f"{len(found)} violations: {found[:20]}"
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
    assert tracebacks == 0
    return note


def test_extender_alone_restarts_mid_burst_twice(plane, scenario) -> None:
    scenario.pending = 0
    started = time.monotonic()
    notes = [_restart_once(plane, rep, scenario) for rep in range(REPETITIONS)]
    scenario.wall_time = time.monotonic() - started
    scenario.note = "; ".join(notes)

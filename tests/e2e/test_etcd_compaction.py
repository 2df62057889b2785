"""Scenario: etcd compaction under load: watches resume into a compacted history (410 Gone).

A burst of 100 capped pods (4 StatefulSets x 25: at most 1 pod per node, zones within one pod of
each other) on 36 nodes. After about 30 binds etcd's history is compacted to its current revision
(etcd's maintenance API through its HTTP gateway, as `etcdctl compact` does), twice a few
seconds apart, while the burst goes on.

Making the extender meet the compaction: its watches end every 3 s (`--watch-timeout=3`) and
resume from the last resourceVersion they saw, and kube-apiserver serves watches from etcd
directly (`--watch-cache=false`; its watch cache would otherwise serve a resume from memory,
compaction or not). A resume from a compacted revision gets 410 Gone, and the extender must
relist that kind and carry on. Checked: its log shows the 410s and relists, every pod is placed,
0 violations (read from the API server).
"""

from __future__ import annotations

import re
import time

import pytest

from extender.devcluster.cluster import zoned_nodes

from .workloads import (
    Sampler,
    capped_violations,
    count_pods,
    create_statefulset,
    node_zones,
    pods,
    statefulset,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"apiserver_args": ["--watch-cache=false"], "extender_args": ["--watch-timeout=3"]}
ZONES = ["zone-a", "zone-b", "zone-c"]
NODES_PER_ZONE = 12
SETS, REPLICAS = 4, 25
SELECTOR = "fault=compaction"
POLICY = {
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}
GONE = re.compile(r"watch of (\w+) expired \(410 Gone\)|list/watch of (\w+) failed: 410")


def _gone(text: str) -> list[str]:
    return [a or b for a, b in GONE.findall(text)]


def test_etcd_compaction_forces_a_relist_under_load(cluster, scenario) -> None:
    cluster.add_nodes(zoned_nodes({z: NODES_PER_ZONE for z in ZONES}))
    api = cluster.admin
    ns = cluster.namespace("compaction")
    zone_of = node_zones(api)
    extender_log = cluster.process("extender").log_path
    before = len(_gone(extender_log.read_text(errors="replace")))
    started = time.monotonic()
    with Sampler(lambda: count_pods(api, ns, SELECTOR, bound=True)) as bound:
        for i in range(SETS):
            create_statefulset(
                api, ns, statefulset(f"cmp-{i}", REPLICAS, labels={"fault": "compaction"}, policy=POLICY)
            )
        while not isinstance(bound.last(), int) or bound.last() < 30:
            assert time.monotonic() - started < 300, "no 30 binds in 300 s"
            time.sleep(0.05)
        at_compaction = bound.last()
        compacted = time.monotonic()
        revisions = [cluster.etcd_compact()]
        time.sleep(2)
        revisions.append(cluster.etcd_compact())
        wait_for(
            "the extender to meet a 410 Gone",
            lambda: len(_gone(extender_log.read_text(errors="replace"))) > before,
            30,
        )
        try:
            placed = wait_settled(api, ns, SELECTOR, SETS * REPLICAS, timeout=600)
        except AssertionError:
            scenario.pending = sum(1 for p in pods(api, ns, SELECTOR) if not p["spec"].get("nodeName"))
            raise
        placed_at = time.monotonic()
    text = extender_log.read_text(errors="replace")
    gone = _gone(text)[before:]
    tracebacks = text.count("Traceback")
    found = capped_violations(placed, zone_of, ZONES)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(found)
    scenario.wall_time = placed_at - started
    scenario.note = (
        f"etcd compacted at revisions {revisions} with {at_compaction} of {SETS * REPLICAS} bound: {len(gone)} "
        f"watch resumes got 410 Gone and relisted ({', '.join(sorted(set(gone)))}); every pod placed "
        f"{placed_at - compacted:.1f}s after the first compaction; {tracebacks} tracebacks"
    )
    print(f"\n{scenario.note}")
    assert not found, f"{len(found)} violations: {found[:20]}"
    assert gone, "no watch met the compaction"
    assert tracebacks == 0

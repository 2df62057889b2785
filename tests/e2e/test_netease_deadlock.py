"""Scenario (the NetEase Redis design, appendix 2): the 3-shard Redis deadlock, in 20 arrival orders.

3 shards x 2 pods over 3 zones x 2 nodes. Rules: fewer than 1/3 of the cluster's 6 pods per
node (so 1 per node), fewer than 1/2 per zone (at most 2), a shard's two pods never in one zone.
Placed greedily, the appendix's order walks into a dead end: 0-0, 1-0, 2-0 land in three zones,
0-1 goes to 1-0's zone, 1-1 to 0-0's zone, and the only free node left for 2-1 is in its own
primary's zone. A valid placement always exists (shard i spans zones i and i+1).

Each repetition creates the three StatefulSets as the Redis operator does, 2 replicas each, so
the whole cluster is declared up front, but with a scheduling gate on the pod template: every
pod exists and waits. The test then lifts the gates one pod at a time (within a shard ordinal 0
before 1, as a StatefulSet does) in an interleaving drawn from random.Random(repetition): that
is the order in which the scheduler sees the pods. Even repetitions release each pod only after
the previous one is bound (repetition 0 in the appendix's exact order: the greedy sequence
exactly), and an independent brute-force solver checks every decision (did the pod take a legal
node after which the rest could not be placed?). Odd repetitions release with 0-300 ms of jitter
and no waiting, so decisions overlap (repetition 1 in the appendix's order). After each: all 6
bound, the rules hold (checked here from the API server), then the StatefulSets are deleted and
their pods awaited gone.

Why gates rather than raising replicas 0 -> 1 -> 2 per shard: gates give exact control of the
order in which the scheduler sees declared pods. (Pods not declared yet, when replicas are
raised one at a time, are modelled by lookahead.future_pods as filling the short shards; that
case is covered by tests/unit/test_lookahead.py.) The group size is NetEase's cluster-size,
given explicitly (group.size: 6).
"""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import HOSTNAME, zoned_nodes

from .workloads import ZONE, create_statefulset, node_zones, pods, shard_of, statefulset, wait_settled

pytestmark = pytest.mark.e2e

ZONES = ["zone-a", "zone-b", "zone-c"]
CLUSTER = "redis-d"
SHARDS = [f"{CLUSTER}-{i}" for i in range(3)]
SELECTOR = f"cluster={CLUSTER}"
REPETITIONS = 20
GATE = "e2e.placement.extender.dev/arrival-order"
APPENDIX_ORDER = [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]

POLICY = {
    "apiVersion": "placement.extender.dev/v1alpha1",
    "kind": "PlacementPolicy",
    "metadata": {"name": CLUSTER},
    "spec": {
        "group": {"selector": {"matchLabels": {"cluster": CLUSTER}}, "size": 6},
        "caps": [
            {"topologyKey": HOSTNAME, "fraction": "1/3", "comparison": "LessThan"},
            {"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"},
        ],
        "shardAntiAffinity": [{"topologyKey": ZONE, "mode": "Required"}],
    },
}


@pytest.fixture(scope="module")
def deadlock(cluster):
    cluster.add_nodes(zoned_nodes({z: 2 for z in ZONES}))
    namespace = cluster.namespace("netease-deadlock")
    cluster.admin.create(f"/apis/placement.extender.dev/v1alpha1/namespaces/{namespace}/placementpolicies", POLICY)
    return cluster, namespace


def arrival_order(repetition: int) -> list[tuple[int, int]]:
    """(shard, ordinal) in creation order; ordinal 0 before 1 within each shard."""
    if repetition in (0, 1):
        return list(APPENDIX_ORDER)
    tokens = [0, 0, 1, 1, 2, 2]
    random.Random(repetition).shuffle(tokens)
    next_ordinal = Counter()
    order = []
    for shard in tokens:
        order.append((shard, next_ordinal[shard]))
        next_ordinal[shard] += 1
    return order


def violations(placed: list[dict], zone_of: dict[str, str | None]) -> list[str]:
    n = len(placed)
    out = []
    per_node = Counter(p["spec"]["nodeName"] for p in placed)
    out += [
        f"node {node} holds {c} of {n} (must be fewer than 1/3)" for node, c in sorted(per_node.items()) if 3 * c >= n
    ]
    per_zone = Counter(zone_of[p["spec"]["nodeName"]] for p in placed)
    out += [f"zone {z} holds {c} of {n} (must be fewer than 1/2)" for z, c in sorted(per_zone.items()) if 2 * c >= n]
    per_shard_zone = Counter((shard_of(p), zone_of[p["spec"]["nodeName"]]) for p in placed)
    out += [f"shard {s} has {c} pods in zone {z}" for (s, z), c in sorted(per_shard_zone.items()) if c > 1]
    return out


def release(api, ns: str, name: str) -> None:
    """Lift the pod's scheduling gate: from now on the scheduler sees it."""
    api.merge_patch(f"/api/v1/namespaces/{ns}/pods/{name}", {"spec": {"schedulingGates": None}})


def _bound_node(api, ns: str, name: str) -> str | None:
    for p in pods(api, ns, SELECTOR):
        if p["metadata"]["name"] == name and not p["metadata"].get("deletionTimestamp"):
            return p["spec"].get("nodeName")
    return None


def _legal(
    placed: dict[tuple[int, int], str], shard: int, node: str, zone_of: dict[str, str | None], n: int = 6
) -> bool:
    """NetEase's rules for one more pod of `shard` on `node`, recomputed independently."""
    on_node = sum(1 for v in placed.values() if v == node)
    in_zone = sum(1 for v in placed.values() if zone_of[v] == zone_of[node])
    shard_in_zone = any(s == shard and zone_of[v] == zone_of[node] for (s, _), v in placed.items())
    return 3 * (on_node + 1) < n and 2 * (in_zone + 1) < n and not shard_in_zone


def _completable(
    placed: dict[tuple[int, int], str], rest: list[tuple[int, int]], zone_of: dict[str, str | None]
) -> bool:
    if not rest:
        return True
    pod, tail = rest[0], rest[1:]
    return any(
        _completable({**placed, pod: node}, tail, zone_of)
        for node in sorted(zone_of)
        if _legal(placed, pod[0], node, zone_of)
    )


def test_three_shards_never_deadlock_in_any_arrival_order(deadlock, scenario) -> None:
    cluster, ns = deadlock
    api = cluster.admin
    zone_of = node_zones(api)
    assert sorted(z for z in zone_of.values()) == sorted(ZONES * 2), zone_of
    orders_seen = set()
    traps = 0  # decisions (in the one-at-a-time repetitions) where a legal node led to a dead end
    started = time.monotonic()
    for rep in range(REPETITIONS):
        order = arrival_order(rep)
        orders_seen.add(tuple(order))
        rng = random.Random(rep)
        one_at_a_time = rep % 2 == 0  # rep 0: the appendix exactly; reps 2, 4, ...: random orders, no overlap
        for sts in SHARDS:
            manifest = statefulset(sts, 2, labels={"cluster": CLUSTER}, policy_name=CLUSTER)
            manifest["spec"]["template"]["spec"]["schedulingGates"] = [{"name": GATE}]
            create_statefulset(api, ns, manifest)
        wait_for(
            "6 gated pods",
            lambda: len([p for p in pods(api, ns, SELECTOR) if p["spec"].get("schedulingGates")]) == 6,
            60,
        )
        placed_so_far: dict[tuple[int, int], str] = {}
        for step, (shard, ordinal) in enumerate(order):
            name = f"{SHARDS[shard]}-{ordinal}"
            release(api, ns, name)
            if not one_at_a_time:
                time.sleep(rng.uniform(0, 0.3))
                continue
            try:
                node = wait_for(f"{name} bound", lambda name=name: _bound_node(api, ns, name), 60)
            except TimeoutError:
                scenario.pending = sum(1 for p in pods(api, ns, SELECTOR) if not p["spec"].get("nodeName"))
                raise AssertionError(
                    f"repetition {rep}, order {order}: {name} never bound; placed so far {placed_so_far}"
                ) from None
            rest = order[step + 1 :]
            legal = [n for n in sorted(zone_of) if _legal(placed_so_far, shard, n, zone_of)]
            dead = [n for n in legal if not _completable({**placed_so_far, (shard, ordinal): n}, rest, zone_of)]
            if dead and len(dead) < len(legal):
                traps += 1
            assert node not in dead, (
                f"repetition {rep}, order {order}: {name} went to {node}, after which the rest "
                f"{rest} cannot be placed (placed so far {placed_so_far})"
            )
            placed_so_far[(shard, ordinal)] = node
        try:
            placed = wait_settled(api, ns, SELECTOR, 6, timeout=60)
        except AssertionError as err:
            scenario.pending = sum(1 for p in pods(api, ns, SELECTOR) if not p["spec"].get("nodeName"))
            raise AssertionError(f"repetition {rep}, order {order}: {err}") from None
        found = violations(placed, zone_of)
        scenario.repetitions += 1
        scenario.pods_placed += len(placed)
        scenario.violations += len(found)
        where = sorted((p["metadata"]["name"], p["spec"]["nodeName"], zone_of[p["spec"]["nodeName"]]) for p in placed)
        assert not found, f"repetition {rep}, order {order}: {found}; placement {where}"

        for sts in SHARDS:
            api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{sts}", propagationPolicy="Background")
        wait_for(f"repetition {rep}'s pods gone", lambda: not pods(api, ns, SELECTOR), 60)
        wait_for(
            f"repetition {rep}'s StatefulSets gone",
            lambda: (
                not [
                    s
                    for s in api.list(f"/apis/apps/v1/namespaces/{ns}/statefulsets")
                    if s["metadata"]["name"] in SHARDS
                ]
            ),
            60,
        )
    assert tuple(APPENDIX_ORDER) in orders_seen
    scenario.note = (
        f"{len(orders_seen)} distinct arrival orders incl. the appendix's; in the 10 one-at-a-time repetitions "
        f"{traps} decisions offered a legal dead-end node and none took it; "
        f"{time.monotonic() - started:.0f}s for {REPETITIONS} repetitions"
    )

"""The NetEase Redis Cluster design: the 3-shard deadlock of appendix 2, and the verification table.

A Redis cluster is one StatefulSet per shard (sts0, sts1, ...) of 2 pods (master, replica). The
simulated scheduler is adversarial: among the nodes evaluate() passes it takes the first or the
last by name, never the one a sensible scorer would choose, so only the filter keeps it safe.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from extender.api.policy import HOSTNAME_KEY, ZONE_KEY, PlacementPolicySpec, parse_spec
from extender.engine import NodeInfo, Outcome, Placement, PodRequest, Snapshot, Topology, evaluate

# -- helpers --------------------------------------------------------------------------------------

Pod = tuple[str, int]  # (StatefulSet, ordinal)
Picker = Callable[[list[str]], str]
FIRST: Picker = lambda names: names[0]  # noqa: E731
LAST: Picker = lambda names: names[-1]  # noqa: E731


def layout(zones: int, nodes: int = 6) -> list[NodeInfo]:
    """`nodes` nodes named node1.. spread evenly over zones zoneA, zoneB, ... (NetEase numbering)."""
    per_zone = nodes // zones
    return [
        NodeInfo(f"node{i + 1}", {HOSTNAME_KEY: f"node{i + 1}", ZONE_KEY: f"zone{'ABC'[i // per_zone]}"})
        for i in range(nodes)
    ]


def cluster_pods(shards: int) -> list[Pod]:
    return [(f"sts{s}", o) for s in range(shards) for o in range(2)]


def key(pod: Pod) -> str:
    return f"db/{pod[0]}-{pod[1]}"


def snapshot(nodes: Sequence[NodeInfo], placed: dict[Pod, str], shards: int) -> Snapshot:
    return Snapshot(
        topology=Topology(nodes),
        placements=tuple(Placement(key(p), n, p[0], p[1]) for p, n in placed.items()),
        group_size=2 * shards,
        shard_replicas={f"sts{s}": 2 for s in range(shards)},
    )


def passing(
    spec: PlacementPolicySpec, nodes: Sequence[NodeInfo], placed: dict[Pod, str], pod: Pod, shards: int
) -> list[str]:
    decision = evaluate(
        spec, PodRequest(key(pod), pod[0], pod[1]), snapshot(nodes, placed, shards), [n.name for n in nodes]
    )
    return sorted(decision.passed())


def place_strict(spec, nodes, order: Sequence[Pod], pick: Picker, shards: int) -> tuple[dict[Pod, str], Pod | None]:
    """Each pod in arrival order must find a node right away; returns (placed, the pod that got stuck)."""
    placed: dict[Pod, str] = {}
    for pod in order:
        names = passing(spec, nodes, placed, pod, shards)
        if not names:
            return placed, pod
        placed[pod] = pick(names)
    return placed, None


def place_with_retries(spec, nodes, order: Sequence[Pod], pick: Picker, shards: int) -> dict[Pod, str]:
    """kube-scheduler's queue: a pod nothing passes waits and is retried after the next placement.

    Every decision is checked against the seed's rules recomputed from scratch: the engine passes
    only legal nodes, and makes a pod wait only when no node is legal for it right now.
    """
    placed: dict[Pod, str] = {}
    pending = list(order)
    progress = True
    while pending and progress:
        progress = False
        for pod in list(pending):
            names = passing(spec, nodes, placed, pod, shards)
            legal = legal_nodes(nodes, placed, pod, 2 * shards)
            assert set(names) <= set(legal), (placed, pod, names, legal)
            assert bool(names) == bool(legal), (placed, pod, legal)
            if names:
                placed[pod] = pick(names)
                pending.remove(pod)
                progress = True
                break  # the queue starts over after every binding
    return placed


def zone_of(nodes: Sequence[NodeInfo]) -> dict[str, str]:
    return {n.name: n.labels[ZONE_KEY] for n in nodes}


def seed_violations(nodes: Sequence[NodeInfo], placed: dict[Pod, str], total: int) -> list[str]:
    """The NetEase Redis design's rules for the layout's zone count, recomputed from scratch."""
    zone = zone_of(nodes)
    zones = len(set(zone.values()))
    per_node = Counter(placed.values())
    per_zone = Counter(zone[n] for n in placed.values())
    shard_nodes = Counter((p[0], n) for p, n in placed.items())
    shard_zones = Counter((p[0], zone[n]) for p, n in placed.items())
    bad = []
    if zones == 1:
        bad += [f"{s} twice on {n}" for (s, n), c in shard_nodes.items() if c > 1]
        bad += [f"{n} holds {c} of {total} (not fewer than 1/3)" for n, c in per_node.items() if 3 * c >= total]
    else:
        bad += [f"{s} twice in {z}" for (s, z), c in shard_zones.items() if c > 1]
    if zones == 2:
        counts = [per_zone.get(z, 0) for z in sorted(set(zone.values()))]
        if max(counts) - min(counts) > 1:
            bad.append(f"zones not even: {counts}")
    if zones >= 3:
        bad += [f"{z} holds {c} of {total} (not fewer than 1/2)" for z, c in per_zone.items() if 2 * c >= total]
        bad += [f"{n} holds {c} of {total} (not fewer than 1/3)" for n, c in per_node.items() if 3 * c >= total]
    return bad


def legal_nodes(nodes: Sequence[NodeInfo], placed: dict[Pod, str], pod: Pod, total: int) -> list[str]:
    """Nodes where `pod` may land now under the seed's hard rules for the layout (zone spread: the
    native filter, skew of the target zone after placement against the emptiest zone before)."""
    zone = zone_of(nodes)
    zone_names = sorted(set(zone.values()))
    per_node = Counter(placed.values())
    per_zone = Counter(zone[n] for n in placed.values())
    sibling_nodes = {n for p, n in placed.items() if p[0] == pod[0]}
    sibling_zones = {zone[n] for n in sibling_nodes}
    out = []
    for n in zone_of(nodes):
        z = zone[n]
        if len(zone_names) == 1:
            ok = n not in sibling_nodes and 3 * (per_node[n] + 1) < total
        elif len(zone_names) == 2:
            low = min(per_zone.get(x, 0) for x in zone_names)
            ok = z not in sibling_zones and per_zone[z] + 1 - low <= 1
        else:
            ok = z not in sibling_zones and 2 * (per_zone[z] + 1) < total and 3 * (per_node[n] + 1) < total
        if ok:
            out.append(n)
    return out


def host_cap_third() -> dict:
    return {"topologyKey": HOSTNAME_KEY, "fraction": "1/3", "comparison": "LessThan"}


def seed_policy(zones: int, **extra) -> PlacementPolicySpec:
    """The policy the NetEase Redis design asks for in a 1-, 2- or 3-zone environment."""
    if zones == 1:
        data = {"shardAntiAffinity": [{"topologyKey": HOSTNAME_KEY}], "caps": [host_cap_third()]}
    elif zones == 2:
        data = {
            "shardAntiAffinity": [{"topologyKey": ZONE_KEY}],
            "spread": [
                {"topologyKey": ZONE_KEY, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"},
                # "within an AZ, spread over the nodes as much as possible": a preference only
                {"topologyKey": HOSTNAME_KEY, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        }
    else:
        data = {
            "shardAntiAffinity": [{"topologyKey": ZONE_KEY}],
            "caps": [host_cap_third(), {"topologyKey": ZONE_KEY, "fraction": "1/2", "comparison": "LessThan"}],
        }
    return parse_spec({**data, **extra}, "netease-redis")


# -- appendix 2: 3 shards, 3 zones x 2 nodes --------------------------------------------------------

NODES_3Z = layout(3)
PODS_3 = cluster_pods(3)
APPENDIX_2 = seed_policy(3)
APPENDIX_2_GREEDY = seed_policy(3, deadEndAvoidance=False)
ALL_ORDERS = list(itertools.permutations(PODS_3))


def test_appendix_2_policy_numbers():
    # group of 6: per node fewer than 2 (so 1), per zone fewer than 3 (so 2): a perfect fit, no slack
    assert [c.limit(6) for c in APPENDIX_2.caps] == [1, 2]
    assert len(ALL_ORDERS) == 720


@pytest.mark.parametrize("pick", [FIRST, LAST], ids=["first-passing", "last-passing"])
def test_appendix_2_every_arrival_order_completes(pick):
    failures = []
    for order in ALL_ORDERS:
        placed, stuck = place_strict(APPENDIX_2, NODES_3Z, order, pick, 3)
        bad = seed_violations(NODES_3Z, placed, 6)
        if stuck is not None or bad:
            failures.append((order, stuck, placed, bad))
    assert not failures, f"{len(failures)} of 720 orders failed, e.g. {failures[0]}"


def test_appendix_2_greedy_deadlocks():
    """Without dead-end avoidance the same rules strand a pod in some order: the test above can fail."""
    stuck = [
        (order, pick_name)
        for order in ALL_ORDERS
        for pick_name, pick in (("first", FIRST), ("last", LAST))
        if place_strict(APPENDIX_2_GREEDY, NODES_3Z, order, pick, 3)[1] is not None
    ]
    assert stuck


# The seed's own walk-through: Pod0-0 on Node1, Pod1-0 on Node4, Pod2-0 on Node6, Pod0-1 on Node3.
SEED_WALK = {("sts0", 0): "node1", ("sts1", 0): "node4", ("sts2", 0): "node6", ("sts0", 1): "node3"}


@pytest.mark.parametrize(
    ("spec", "pod11_options"),
    [
        pytest.param(APPENDIX_2_GREEDY, ["node2", "node5"], id="greedy"),
        pytest.param(APPENDIX_2, ["node5"], id="dead-end-avoidance"),
    ],
)
def test_appendix_2_walkthrough(spec, pod11_options):
    placed: dict[Pod, str] = {}
    for pod, node in SEED_WALK.items():
        assert node in passing(spec, NODES_3Z, placed, pod, 3)
        placed[pod] = node
    assert passing(spec, NODES_3Z, placed, ("sts1", 1), 3) == pod11_options


def test_appendix_2_the_trap():
    """Pod1-1 on Node2 leaves Pod2-1 nowhere (seed: 'Pod2-1 cannot be scheduled'); the engine says why."""
    placed = {**SEED_WALK, ("sts1", 1): "node2"}
    assert passing(APPENDIX_2, NODES_3Z, placed, ("sts2", 1), 3) == []
    before = dict(SEED_WALK)
    decision = evaluate(
        APPENDIX_2, PodRequest(key(("sts1", 1)), "sts1", 1), snapshot(NODES_3Z, before, 3), [n.name for n in NODES_3Z]
    )
    verdict = decision.verdicts["node2"]
    assert verdict.outcome is Outcome.FAIL and verdict.rule == "deadEndAvoidance"
    assert "1 remaining pod" in verdict.reason


def test_dead_end_claim_is_true_under_zone_spread():
    """A node is filtered as a dead end only when the rest of the group really cannot follow.

    The NetEase Redis design's 2-zone policy, 4 shards (8 pods). sts2-0 is in zoneA, sts1-0 in zoneB, sts3-0 arrives:
    zoneA is as good as zoneB, as the completion below shows step by step. Zone spread depends on
    the order pods land in, and a search that places the remaining pods in one fixed order
    (sts0, sts0, sts1, sts2, sts3) finds none after zoneA and wrongly filters zoneA's nodes.
    """
    nodes, spec = layout(2), seed_policy(2)
    placed = {("sts1", 0): "node4", ("sts2", 0): "node1"}
    completion = [
        (("sts3", 0), "node2"),
        (("sts2", 1), "node5"),
        (("sts1", 1), "node3"),
        (("sts3", 1), "node6"),
        (("sts0", 0), "node1"),
        (("sts0", 1), "node4"),
    ]
    state = dict(placed)
    for pod, node in completion:
        assert node in legal_nodes(nodes, state, pod, 8), (pod, node, state)
        state[pod] = node
    assert len(state) == 8 and seed_violations(nodes, state, 8) == []

    decision = evaluate(
        spec, PodRequest(key(("sts3", 0)), "sts3", 0), snapshot(nodes, placed, 4), [n.name for n in nodes]
    )
    assert decision.verdicts["node2"].passed, decision.verdicts["node2"]
    assert sorted(decision.passed()) == sorted(legal_nodes(nodes, placed, ("sts3", 0), 8))


# -- the verification table: 3 and 5 shards in 1, 2 and 3 zones of 6 nodes -------------------------

SHUFFLES = 4


def shuffled_orders(shards: int) -> list[list[Pod]]:
    rng = random.Random(2002 + shards)
    pods = cluster_pods(shards)
    orders = [pods, sorted(pods, key=lambda p: (p[1], p[0]))]  # StatefulSet by StatefulSet; all ordinals 0 first
    for _ in range(SHUFFLES):
        order = list(pods)
        rng.shuffle(order)
        orders.append(order)
    return orders


# Every case is feasible under the seed's rules, so every pod must be placed:
#   1 zone, 3 shards: 6 pods, fewer than 2 per node -> one per node on exactly 6 nodes.
#   1 zone, 5 shards: 10 pods, fewer than 10/3 per node -> at most 3 per node; 18 slots >= 10.
#   2 zones, 3/5 shards: anti-affinity by zone puts one pod of each shard in each zone, 3+3 / 5+5.
#   3 zones, 3 shards: 1 per node, 2 per zone: appendix 2's perfect fit.
#   3 zones, 5 shards: fewer than 5 per zone (4), fewer than 10/3 per node (3): 12 zone slots >= 10.
# The zone spread (maxSkew 1) depends on arrival order, so a pod may have to wait for another pod
# to land first; the simulation retries waiting pods like kube-scheduler's queue does.
@pytest.mark.parametrize("pick", [FIRST, LAST], ids=["first-passing", "last-passing"])
@pytest.mark.parametrize("zones", [1, 2, 3], ids=["1-zone", "2-zones", "3-zones"])
@pytest.mark.parametrize("shards", [3, 5], ids=["3-shards", "5-shards"])
def test_verification_table(shards, zones, pick):
    nodes = layout(zones)
    spec = seed_policy(zones)
    for order in shuffled_orders(shards):
        placed = place_with_retries(spec, nodes, order, pick, shards)
        assert len(placed) == 2 * shards, (order, placed)
        assert seed_violations(nodes, placed, 2 * shards) == [], (order, placed)


@pytest.mark.parametrize("zones", [1, 3], ids=["1-zone", "3-zones"])
def test_verification_table_strict_order(zones):
    """With caps and anti-affinity only (no order-dependent spread), no pod ever has to wait."""
    nodes = layout(zones)
    spec = seed_policy(zones)
    for shards in (3, 5):
        for order in shuffled_orders(shards):
            for pick in (FIRST, LAST):
                placed, stuck = place_strict(spec, nodes, order, pick, shards)
                assert stuck is None, (order, placed)


def test_too_few_nodes_leaves_pods_pending():
    """NetEase's rules need at least 6 nodes for 3 shards. With 5, exactly the impossible pod waits."""
    nodes = layout(1, nodes=5)
    spec = seed_policy(1)
    placed = place_with_retries(spec, nodes, PODS_3, FIRST, 3)
    assert len(placed) == 5 and sorted(Counter(placed.values()).values()) == [1] * 5
    assert seed_violations(nodes, placed, 6) == []

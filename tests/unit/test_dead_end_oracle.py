"""The dead-end analysis against an exhaustive oracle, on small random clusters and policies.

The oracle knows nothing of flows or counting: it tries every order of the pods still to come and
every node the filter (the hard rules, without dead-end avoidance) passes at each step. A
candidate is a dead end when no such sequence places everyone after the pod lands there.

The engine must agree exactly where it says its answer is exact, and must never call a node a
dead end that the oracle can complete (a relaxation may miss dead ends, never invent one).
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, ZONE_KEY, PlacementPolicySpec
from extender.engine import (
    NodeConstraints,
    NodeInfo,
    Placement,
    PodRequest,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
    Topology,
    evaluate,
)
from extender.engine.context import Context
from extender.engine.evaluate import classify
from extender.engine.lookahead import Certainty, dead_ends

Pod = tuple[str, int]


RULES = ["caps", "spread", "spreadNodeInclusion", "shardAntiAffinity", "ordinalZones", "zones"]
TAINT = Taint("dedicated", "other", "NoSchedule")


@st.composite
def scenarios(draw, rule: str | None = None):  # noqa: ANN001, ANN201
    """Clusters about as full as the group: where dead ends live (NetEase's case is one of them).
    With `rule`, that rule is always in the policy (the others come and go)."""
    zones = ["za", "zb", "zc"][: draw(st.integers(2, 3))]
    per_zone = draw(st.integers(1, 2))
    # The group's pods share one template: one set of node constraints (nodeSelector/affinity,
    # tolerations) for all, and nodes tainted or not.
    inclusion = rule == "spreadNodeInclusion"
    tainted = draw(st.sets(st.sampled_from([f"{z}-{i}" for z in zones for i in range(per_zone)]), max_size=2))
    tainted = tainted if inclusion or draw(st.integers(0, 3)) == 0 else set()
    nodes = [
        NodeInfo(f"{z}-{i}", {HOSTNAME_KEY: f"{z}-{i}", ZONE_KEY: z}, True, (TAINT,) if f"{z}-{i}" in tainted else ())
        for z in zones
        for i in range(per_zone)
    ]
    terms = None
    if (inclusion and draw(st.booleans())) or draw(st.integers(0, 5)) == 0:
        terms = ((Requirement(ZONE_KEY, "NotIn", (draw(st.sampled_from(zones)),)),),)
    tolerations = (Toleration("dedicated", "Exists", "", ""),) if draw(st.integers(0, 3)) == 0 else ()
    constraints = NodeConstraints((), terms, tolerations)
    spec: dict = {"caps": [], "spread": [], "shardAntiAffinity": []}
    node_cap = draw(st.sampled_from([1, 2] if rule == "caps" else [None, 1, 1, 2]))
    if node_cap:
        spec["caps"].append({"topologyKey": HOSTNAME_KEY, "max": node_cap})
    zone_cap = draw(st.sampled_from([None, 2, 3]))
    if zone_cap:
        spec["caps"].append({"topologyKey": ZONE_KEY, "max": zone_cap})

    def native(spread: dict) -> dict:  # the native refinements, some of the time
        if inclusion or draw(st.integers(0, 3)) == 0:
            spread["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
            spread["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
            minimum = draw(st.sampled_from([None, 2, 3, 4]))
            if minimum is not None:
                spread["minDomains"] = minimum
        return spread

    if rule in ("spread", "spreadNodeInclusion") or draw(st.booleans()):
        spec["spread"].append(native({"topologyKey": ZONE_KEY, "maxSkew": draw(st.integers(1, 2))}))
    if draw(st.integers(0, 4)) == 0:
        spec["spread"].append(native({"topologyKey": HOSTNAME_KEY, "maxSkew": 1}))
    choices = (
        [ZONE_KEY, HOSTNAME_KEY, "both"]
        if rule == "shardAntiAffinity"
        else [None, ZONE_KEY, ZONE_KEY, HOSTNAME_KEY, "both"]
    )
    anti = draw(st.sampled_from(choices))
    for key in [HOSTNAME_KEY, ZONE_KEY] if anti == "both" else [anti] if anti else []:
        spec["shardAntiAffinity"].append({"topologyKey": key})
    if rule == "ordinalZones" or (rule != "zones" and draw(st.integers(0, 3)) == 0):
        spec["ordinalZones"] = {"order": draw(st.permutations(zones))}
    elif rule == "zones" or draw(st.integers(0, 4)) == 0:
        spec["zones"] = {"allowed": draw(st.lists(st.sampled_from(zones), min_size=1, unique=True))}
    policy = PlacementPolicySpec.model_validate(spec)
    capacity = len(nodes) * (node_cap or 2)
    if zone_cap:
        capacity = min(capacity, len(zones) * zone_cap)
    size = draw(st.sampled_from([capacity, capacity, capacity - 1, capacity + 1]))
    shards = draw(st.integers(2, 3))
    replicas = {f"s{i}": size // shards + (1 if i < size % shards else 0) for i in range(shards)}
    replicas = {s: n for s, n in replicas.items() if n > 0}
    pods = [(s, o) for s, n in sorted(replicas.items()) for o in range(n)]
    order = draw(st.permutations(pods))
    placed_count = draw(st.integers(max(0, len(pods) - 5), max(0, len(pods) - 2)))
    picks = draw(st.lists(st.integers(0, 10), min_size=len(pods), max_size=len(pods)))
    return policy, nodes, replicas, order, placed_count, picks, constraints


def _snapshot(nodes, replicas, placed: dict[Pod, str]) -> Snapshot:  # noqa: ANN001
    return Snapshot(
        Topology(nodes),
        tuple(Placement(f"db/{s}-{o}", n, s, o) for (s, o), n in placed.items()),
        group_size=sum(replicas.values()),
        shard_replicas=dict(replicas),
    )


def _legal(policy, nodes, replicas, placed: dict[Pod, str], pod: Pod, constraints) -> list[str]:  # noqa: ANN001
    """The nodes kube-scheduler (node affinity, taints) and then the filter pass for `pod`."""
    usable = [n.name for n in nodes if constraints.matches_affinity(n) and constraints.tolerates_taints(n)]
    decision = evaluate(
        policy,
        PodRequest(f"db/{pod[0]}-{pod[1]}", pod[0], pod[1], constraints=constraints),
        _snapshot(nodes, replicas, placed),
        usable,
        dead_end_avoidance=False,
    )
    return sorted(decision.passed())


def _oracle_dead_ends(
    policy, nodes, replicas, placed: dict[Pod, str], me: Pod, rest: list[Pod], constraints
) -> set[str] | None:  # noqa: ANN001, E501
    """Candidates that strand someone, or None when every candidate does (nothing to prefer)."""

    @cache
    def completes(state: frozenset, left: frozenset) -> bool:
        if not left:
            return True
        current = dict(state)
        for pod in sorted(left):
            for node in _legal(policy, nodes, replicas, current, pod, constraints):
                if completes(state | {(pod, node)}, left - {pod}):
                    return True
        return False

    candidates = _legal(policy, nodes, replicas, placed, me, constraints)
    good = {n for n in candidates if completes(frozenset({**placed, me: n}.items()), frozenset(rest))}
    if not good:
        return None
    return set(candidates) - good


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios())
def test_dead_ends_agree_with_exhaustive_placement(case) -> None:  # noqa: ANN001
    _agree(case)


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_each_rule_is_held_equal_by_the_dead_end_analysis(rule, data) -> None:  # noqa: ANN001
    """Per rule: with the rule always on, the analysis's dead ends are the filter's (exact) or
    a subset of them (relaxed); the rule's dead-end terms model what its check enforces."""
    _agree(data.draw(scenarios(rule)))


def _agree(case) -> None:  # noqa: ANN001
    policy, nodes, replicas, order, placed_count, picks, constraints = case
    placed: dict[Pod, str] = {}
    # A reachable state: each pod placed legally in turn.
    for pod, pick in zip(order[:placed_count], picks, strict=False):
        legal = _legal(policy, nodes, replicas, placed, pod, constraints)
        if legal:
            placed[pod] = legal[pick % len(legal)]
    unplaced = [p for p in order if p not in placed]
    me, rest = unplaced[0], unplaced[1:]
    candidates = _legal(policy, nodes, replicas, placed, me, constraints)
    request = PodRequest(f"db/{me[0]}-{me[1]}", me[0], me[1], constraints=constraints)
    ctx = Context.build(policy, request, _snapshot(nodes, replicas, placed))
    names = [n.name for n in nodes if n.name in candidates]
    classes = classify(ctx, names, list(names))  # as evaluate sees them: nodes alike in one class
    analysis = dead_ends(ctx, classes)
    oracle = _oracle_dead_ends(policy, nodes, replicas, placed, me, rest, constraints)
    found = {name for i in analysis.dead for name in classes[i].names}
    if analysis.certainty is Certainty.EXACT:
        assert found == (oracle or set()), (analysis, oracle, placed, me)
    else:
        assert found <= (oracle or set()), (analysis, oracle, placed, me)

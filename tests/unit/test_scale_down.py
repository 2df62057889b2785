"""The scale-down order (engine/scale_down.py): a table of domains, counts and rules -> order, and
the property that deleting in that order never breaks the first spread when some other deletion
of as many pods would keep it."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, ZONE_KEY, parse_spec
from extender.engine import NodeInfo
from extender.engine.scale_down import deletion_costs, deletion_order

SPREAD = {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]}


def nodes(layout: dict[str, int]) -> dict[str, NodeInfo]:
    out = {}
    for zone, n in layout.items():
        for i in range(1, n + 1):
            name = f"{zone}{i}"
            out[name] = NodeInfo(name, {HOSTNAME_KEY: name, ZONE_KEY: zone})
    return out


CASES = [
    # (id, policy, pod -> node, the first pods to go)
    ("the most crowded zone first", SPREAD, {"p1": "a1", "p2": "a2", "p3": "a1", "p4": "b1", "p5": "c1"}, ["p1", "p2"]),
    ("then the most crowded node in it", SPREAD, {"p1": "a1", "p2": "a2", "p3": "a1", "p4": "b1"}, ["p1"]),
    ("a zone's last pod last", SPREAD, {"p1": "a1", "p2": "b1", "p3": "b1", "p4": "b2", "p5": "c1"}, ["p2", "p3"]),
    (
        "ties towards the zone the policy weighs less",
        {**SPREAD, "zones": {"weights": {"a": 100, "b": 10}}},
        {"p1": "a1", "p2": "b1"},
        ["p2"],
    ),
    (
        "a later fallback group first",
        {**SPREAD, "zones": {"fallbackGroups": [["b"], ["a"]]}},
        {"p1": "a1", "p2": "b1"},
        ["p1"],
    ),
]


@pytest.mark.parametrize(("policy", "pods", "first"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_order(policy, pods, first) -> None:
    order = deletion_order(parse_spec(policy, "test"), pods, nodes({"a": 2, "b": 2, "c": 1}))
    assert order[: len(first)] == first, order
    costs = deletion_costs(order)
    assert sorted(costs, key=costs.get) == order


def test_pods_on_unknown_nodes_go_first() -> None:
    order = deletion_order(parse_spec(SPREAD, "test"), {"p1": "a1", "p2": "gone"}, nodes({"a": 1}))
    assert order == ["p2", "p1"]


def skew(pods: dict[str, str], zone_of: dict[str, str], zones: list[str]) -> int:
    counts = dict.fromkeys(zones, 0)
    for node in pods.values():
        counts[zone_of[node]] += 1
    return max(counts.values()) - min(counts.values())


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_deleting_in_order_keeps_the_least_skew_any_deletion_could(data) -> None:
    layout = {z: data.draw(st.integers(1, 2)) for z in ["a", "b", "c"][: data.draw(st.integers(2, 3))]}
    known = nodes(layout)
    zone_of = {n: i.labels[ZONE_KEY] for n, i in known.items()}
    count = data.draw(st.integers(2, 8))
    pods = {f"p{i}": data.draw(st.sampled_from(sorted(known))) for i in range(count)}
    policy = {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]}
    if data.draw(st.booleans()):
        policy["caps"] = [{"topologyKey": HOSTNAME_KEY, "max": 4}]
    order = deletion_order(parse_spec(policy, "test"), pods, known)
    assert sorted(order) == sorted(pods)
    for k in range(1, count):
        ours = skew({p: pods[p] for p in order[k:]}, zone_of, list(layout))
        best = min(
            skew({p: n for p, n in pods.items() if p not in gone}, zone_of, list(layout))
            for gone in itertools.combinations(pods, k)
        )
        assert ours == best, (k, order, pods)

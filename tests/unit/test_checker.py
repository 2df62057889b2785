"""The independent checker (extender/checker.py) by its own table of cases.

`audit` and `ab` count violations with it, and it is simpler than the engine on purpose: it
recomputes each hard rule from a finished placement, with no counts kept, no reservations and no
dead-end analysis, so a bug in the engine does not hide itself. These cases pin down what it
reports, independently of the engine's tests.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.checker import Member, violations
from extender.engine import NodeInfo, Placement, PodRequest, Snapshot, Topology, evaluate
from extender.policy import HOSTNAME_KEY, ZONE_KEY, PlacementPolicySpec

NODES = {
    n: NodeInfo(n, {HOSTNAME_KEY: n, ZONE_KEY: z}) for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))
}


def member(name: str, node: str, shard: str | None = "s", ordinal: int | None = None) -> Member:
    return Member(f"db/{name}", node, shard, ordinal)


CASES = [
    pytest.param(
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        [member("s-0", "a1"), member("s-1", "a2")],
        2,
        [],
        id="cap-kept",
    ),
    pytest.param(
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        [member("s-0", "a1"), member("s-1", "a1")],
        2,
        ["caps"],
        id="cap-broken-on-a-node",
    ),
    pytest.param(
        {"caps": [{"topologyKey": ZONE_KEY, "fraction": "1/2", "comparison": "LessThan"}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "b1"), member("s-3", "c1")],
        4,
        ["caps"],
        id="fraction-cap-broken-in-a-zone",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "b1"), member("s-3", "c1")],
        4,
        [],
        id="spread-within-skew",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "a1")],
        3,
        ["spread"],
        id="spread-beyond-skew",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "a1")],
        3,
        [],
        id="soft-spread-never-broken",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]},
        [member("s-0", "a1"), member("s-1", "a2", shard="s")],
        2,
        ["shardAntiAffinity"],
        id="anti-affinity-broken",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]},
        [member("s-0", "a1"), member("t-0", "a2", shard="t")],
        2,
        [],
        id="other-shards-may-share",
    ),
    pytest.param({"zones": {"allowed": ["a", "b"]}}, [member("s-0", "c1")], 1, ["zones"], id="outside-allowed-zones"),
]


@pytest.mark.parametrize(("policy", "members", "size", "rules"), CASES)
def test_checker_reports_each_broken_rule(policy, members, size, rules) -> None:
    spec = PlacementPolicySpec.model_validate(policy)
    found = violations(spec, members, NODES, size)
    assert sorted({v.rule for v in found}) == rules, found
    assert all(v.message for v in found)


# -- ordinal zones: the zone order is the engine's reading of the same record ----------------------


def zoned(layout: dict[str, int], schedulable: bool = True) -> dict[str, NodeInfo]:
    """Nodes named <zone><i> (a1, a2, b1...), `layout` zone -> node count."""
    return {
        f"{z}{i}": NodeInfo(f"{z}{i}", {HOSTNAME_KEY: f"{z}{i}", ZONE_KEY: z}, schedulable)
        for z, n in layout.items()
        for i in range(1, n + 1)
    }


def rotation(zones: str, count: int, shard: str = "s") -> list[Member]:
    """Ordinals 0..count-1 of `shard`, ordinal i on the first node of zone zones[i mod len]."""
    return [Member(f"db/{shard}-{i}", f"{zones[i % len(zones)]}1", shard, i) for i in range(count)]


def volumes(members: list[Member]) -> list[Member]:
    return [Member(m.pod, m.node, m.shard, m.ordinal, m.node[0]) for m in members]


ORDINAL_CASES = [
    pytest.param({}, {"a": 2, "b": 2, "c": 2}, rotation("abc", 6), None, [], id="rotation-kept"),
    # Issue 13: no volumes, a zone added under the set. The engine keeps the 3-zone rotation its
    # pods show; the volume-only reading called crdb-3 misplaced ("its zone is zone-d").
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 2}, rotation("abc", 6), None, [], id="zone-added-no-volumes"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("abc", 6), None, [], id="bigger-zone-added"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("abc", 3), None, [], id="zone-added-one-round"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("ab", 2), None, [], id="zone-added-two-pods"),
    pytest.param(
        {}, {"a": 2, "b": 2, "c": 2, "d": 2}, volumes(rotation("abc", 6)), None, [], id="zone-added-with-volumes"
    ),
    # Scaled down to 2: the claims of ordinals 2..5 still pin the rotation (the engine's record).
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2, "d": 2},
        rotation("abc", 2),
        {"s": {2: "c", 3: "a", 4: "b", 5: "c"}},
        [],
        id="scaled-down-claims-kept",
    ),
    pytest.param(
        {}, {"a": 2, "b": 2, "c": 2}, [*rotation("abc", 3), member("s-3", "b1", ordinal=3)], None, ["s-3"], id="moved"
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3), Member("db/s-3", "b1", "s", 3, "b")],
        None,
        [],
        id="moved-with-its-volume",
    ),
    pytest.param(
        {"order": ["c", "b", "a"]}, {"a": 2, "b": 2, "c": 2}, rotation("abc", 3), None, ["s-0", "s-2"], id="explicit"
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3, "s"), *rotation("bca", 3, "t")],
        None,
        [],
        id="each-set-its-own-rotation",
    ),
]


@pytest.mark.parametrize(("ordinal_zones", "layout", "members", "volume_zones", "misplaced"), ORDINAL_CASES)
def test_ordinal_zones_follow_the_engines_rotation(ordinal_zones, layout, members, volume_zones, misplaced) -> None:
    spec = PlacementPolicySpec.model_validate({"ordinalZones": ordinal_zones})
    found = violations(spec, members, zoned(layout), None, volume_zones)
    assert sorted(v.message.split(" ")[0].removeprefix("db/") for v in found) == misplaced, found
    assert all(v.rule == "ordinalZones" and "its zone is" in v.message for v in found)


ACTIONS = st.lists(st.one_of(st.just("place"), st.integers(1, 4)), min_size=1, max_size=14)


@settings(max_examples=150, deadline=None)
@given(start=st.lists(st.integers(1, 3), min_size=1, max_size=4), actions=ACTIONS, data=st.data())
def test_a_placement_the_engine_made_never_shows_an_ordinal_violation(start, actions, data) -> None:
    """Pods placed one by one where filter lets them go, zones added on the way (an integer
    action: a zone of that many nodes): audit's checker finds nothing to report, at any step."""
    spec = PlacementPolicySpec.model_validate({"ordinalZones": {}})
    layout = {chr(ord("a") + i): n for i, n in enumerate(start)}
    members: list[Member] = []
    for action in actions:
        if action != "place":
            layout[chr(ord("a") + len(layout))] = action
        else:
            nodes = zoned(layout)
            ordinal = len(members)
            snap = Snapshot(
                Topology(nodes.values()), tuple(Placement(m.pod, m.node, m.shard, m.ordinal) for m in members)
            )
            decision = evaluate(spec, PodRequest(f"db/s-{ordinal}", "s", ordinal), snap, sorted(nodes))
            passing = decision.passed()
            assert passing, decision.notes
            members.append(Member(f"db/s-{ordinal}", data.draw(st.sampled_from(sorted(passing))), "s", ordinal))
        assert violations(spec, members, zoned(layout), None) == []

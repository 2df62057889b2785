"""The independent checker (extender/engine/checker.py) by its own table of cases.

`audit` and `ab` count violations with it, and it is simpler than the engine on purpose: it
recomputes each hard rule from a finished placement, with no counts kept, no reservations and no
dead-end analysis, so a bug in the engine does not hide itself. These cases pin down what it
reports, independently of the engine's tests.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, ZONE_KEY, PlacementPolicySpec
from extender.engine import (
    NodeConstraints,
    NodeInfo,
    Placement,
    PodRequest,
    RecordedRotation,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
    Topology,
    evaluate,
)
from extender.engine.checker import Member, max_skew, violations

NODES = {
    n: NodeInfo(n, {HOSTNAME_KEY: n, ZONE_KEY: z}) for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))
}


def member(name: str, node: str, shard: str | None = "s", ordinal: int | None = None) -> Member:
    return Member(f"db/{name}", node, shard, ordinal)


def leaving(name: str, node: str, shard: str | None = "s", ordinal: int | None = None) -> Member:
    return Member(f"db/{name}", node, shard, ordinal, terminating=True)


CASES = [
    pytest.param(
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        [leaving("s-0", "a1"), member("s-1", "a1")],
        2,
        ["caps"],
        id="terminating-cap-a-pod-still-on-its-node-counts",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [leaving("s-0", "b1"), member("s-1", "a1"), member("s-2", "b1"), member("s-3", "c1")],
        4,
        [],
        id="terminating-spread-judged-on-what-stays",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [leaving("s-0", "b1"), leaving("s-1", "c1"), member("s-2", "a1"), member("s-3", "a2")],
        4,
        ["spread"],
        id="terminating-spread-broken-once-they-are-gone",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]},
        [leaving("s-0", "a1"), member("s-1", "a2")],
        2,
        ["shardAntiAffinity"],
        id="terminating-anti-affinity-counts",
    ),
    pytest.param(
        {"zones": {"allowed": ["b", "c"]}},
        [leaving("s-0", "a1"), member("s-1", "b1")],
        2,
        [],
        id="terminating-outside-allowed-zones-is-leaving",
    ),
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


ABC = {"s": RecordedRotation("db/s", ("a", "b", "c"))}

# (policy's ordinalZones, nodes per zone, placed members, claims' volume zones, recorded rotations, misplaced)
ORDINAL_CASES = [
    pytest.param({}, {"a": 2, "b": 2, "c": 2}, rotation("abc", 6), None, None, [], id="rotation-kept"),
    # No volumes, a zone added under the set. The engine keeps the 3-zone rotation its
    # pods show; the volume-only reading called crdb-3 misplaced ("its zone is zone-d").
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 2}, rotation("abc", 6), None, None, [], id="zone-added-no-volumes"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("abc", 6), None, None, [], id="bigger-zone-added"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("abc", 3), None, None, [], id="zone-added-one-round"),
    pytest.param({}, {"a": 2, "b": 2, "c": 2, "d": 5}, rotation("ab", 2), None, None, [], id="zone-added-two-pods"),
    pytest.param(
        {}, {"a": 2, "b": 2, "c": 2, "d": 2}, volumes(rotation("abc", 6)), None, None, [], id="zone-added-with-volumes"
    ),
    # Scaled down to 2: the claims of ordinals 2..5 still pin the rotation (the engine's record).
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2, "d": 2},
        rotation("abc", 2),
        {"s": {2: "c", 3: "a", 4: "b", 5: "c"}},
        None,
        [],
        id="scaled-down-claims-kept",
    ),
    # With its record, a pod that moved off its ordinal's zone is caught; before the record exists
    # (no decision made for the set yet) it cannot be told from a pod placed before adoption.
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3), member("s-3", "b1", ordinal=3)],
        None,
        ABC,
        ["s-3"],
        id="moved",
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3), member("s-3", "b1", ordinal=3)],
        None,
        None,
        [],
        id="moved-before-any-record-reads-as-adopted",
    ),
    # Zone c lost its nodes; the pods that never moved are not violations, and the
    # record's adopted ordinals (running elsewhere at adoption) are not either.
    pytest.param({}, {"a": 2, "b": 2}, rotation("ab", 2), None, ABC, [], id="zone-outage-pods-never-moved"),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [member("s-0", "b1", ordinal=0), member("s-1", "b2", ordinal=1)],
        None,
        {"s": RecordedRotation("db/s", ("a", "b", "c"), {0: "b"})},
        [],
        id="adopted-ordinal-left-where-it-was",
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [member("s-0", "c1", ordinal=0), member("s-1", "b2", ordinal=1)],
        None,
        {"s": RecordedRotation("db/s", ("a", "b", "c"), {0: "b"})},
        ["s-0"],
        id="adopted-ordinal-moved-elsewhere",
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3), Member("db/s-3", "b1", "s", 3, "b")],
        None,
        ABC,
        [],
        id="moved-with-its-volume",
    ),
    pytest.param(
        {"order": ["c", "b", "a"]},
        {"a": 2, "b": 2, "c": 2},
        rotation("abc", 3),
        None,
        None,
        ["s-0", "s-2"],
        id="explicit",
    ),
    pytest.param(
        {},
        {"a": 2, "b": 2, "c": 2},
        [*rotation("abc", 3, "s"), *rotation("bca", 3, "t")],
        None,
        None,
        [],
        id="each-set-its-own-rotation",
    ),
]


@pytest.mark.parametrize(
    ("ordinal_zones", "layout", "members", "volume_zones", "rotations", "misplaced"), ORDINAL_CASES
)
def test_ordinal_zones_follow_the_engines_rotation(
    ordinal_zones, layout, members, volume_zones, rotations, misplaced
) -> None:
    spec = PlacementPolicySpec.model_validate({"ordinalZones": ordinal_zones})
    found = violations(spec, members, zoned(layout), None, volume_zones, rotations)
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


# -- spread: the engine's eligible domains (node inclusion policies), minDomains -------------------

DB = NodeConstraints(selector=(("pool", "db"),))  # nodeSelector pool=db
DB_AFFINITY = NodeConstraints(terms=((Requirement("pool", "In", ("db",)),),))  # required node affinity
TOLERATES = NodeConstraints(tolerations=(Toleration("dedicated", "Equal", "db", "NoSchedule"),))
DEDICATED = (Taint("dedicated", "db", "NoSchedule"),)


def pooled(layout: dict[str, tuple[int, str]], tainted: str = "") -> dict[str, NodeInfo]:
    """Nodes <zone><i>, `layout` zone -> (node count, pool label); the nodes of `tainted` carry DEDICATED."""
    return {
        f"{z}{i}": NodeInfo(
            f"{z}{i}", {HOSTNAME_KEY: f"{z}{i}", ZONE_KEY: z, "pool": pool}, True, DEDICATED if z == tainted else ()
        )
        for z, (n, pool) in layout.items()
        for i in range(1, n + 1)
    }


TWO_OF_THREE = pooled({"a": (2, "db"), "b": (2, "db"), "c": (2, "web")})  # the pods select a and b
TWO_ZONES = pooled({"a": (2, "db"), "b": (2, "db")})
TAINTED_C = pooled({"a": (2, "db"), "b": (2, "db"), "c": (2, "db")}, tainted="c")


def spread_of(where: str, constraints: NodeConstraints | None = DB) -> list[Member]:
    """One pod per letter of `where`, on the first node of that zone, all with `constraints`."""
    return [Member(f"db/s-{i}", f"{z}1", "s", i, None, constraints) for i, z in enumerate(where)]


# (spread fields, nodes, members, rules broken, max_skew of the zone key, a fragment of the message)
SPREAD_CASES = [
    # The pods select 2 of 3 zones; zone c is no domain of theirs, not an empty one.
    pytest.param({}, TWO_OF_THREE, spread_of("ababab"), [], 0, None, id="selector-two-of-three"),
    pytest.param({}, TWO_OF_THREE, spread_of("ababab", DB_AFFINITY), [], 0, None, id="affinity-two-of-three"),
    pytest.param({}, TWO_OF_THREE, spread_of("aaab"), ["spread"], 2, "zone=a holds 3 pods", id="selector-real-skew"),
    pytest.param(
        {"nodeAffinityPolicy": "Ignore"},
        TWO_OF_THREE,
        spread_of("abab"),
        ["spread"],
        2,
        "zone=c 0",
        id="affinity-ignored-counts-c",
    ),
    # Pods that carry no constraints see every zone, as before.
    pytest.param({}, TWO_OF_THREE, spread_of("abab", None), ["spread"], 2, "zone=c 0", id="no-constraints"),
    # A pod on a node its own constraints exclude (labels changed under it) counts nowhere.
    pytest.param({}, TWO_OF_THREE, spread_of("abcc"), [], 0, None, id="pods-on-excluded-nodes-not-counted"),
    # Taints: Ignore by default (the tainted zone is an empty domain); Honor drops it unless tolerated.
    pytest.param({}, TAINTED_C, spread_of("abab", None), ["spread"], 2, "zone=c 0", id="taints-ignored"),
    pytest.param({"nodeTaintsPolicy": "Honor"}, TAINTED_C, spread_of("abab", None), [], 0, None, id="taints-honored"),
    pytest.param(
        {"nodeTaintsPolicy": "Honor"},
        TAINTED_C,
        spread_of("abab", TOLERATES),
        ["spread"],
        2,
        "zone=c 0",
        id="taints-honored-tolerated",
    ),
    # minDomains: fewer eligible domains than asked, the emptiest counts as 0.
    pytest.param({"minDomains": 3}, TWO_ZONES, spread_of("ab"), [], 1, None, id="min-domains-one-each"),
    pytest.param(
        {"minDomains": 3},
        TWO_ZONES,
        spread_of("aab"),
        ["spread"],
        2,
        "only 2 eligible topology.kubernetes.io/zone domain(s) exist, fewer than minDomains 3",
        id="min-domains-beyond",
    ),
    pytest.param({"minDomains": 2}, TWO_ZONES, spread_of("aab"), [], 1, None, id="min-domains-met"),
    pytest.param({"minDomains": 3}, TAINTED_C, spread_of("aabc", None), [], 1, None, id="min-domains-met-three"),
    pytest.param(
        {"minDomains": 3}, TWO_OF_THREE, spread_of("aab"), ["spread"], 2, "minDomains 3", id="min-domains-selector"
    ),
    pytest.param(
        {"whenUnsatisfiable": "ScheduleAnyway"}, TWO_OF_THREE, spread_of("aaab"), [], 2, None, id="soft-never-broken"
    ),
]


@pytest.mark.parametrize(("fields", "nodes", "members", "rules", "skew", "fragment"), SPREAD_CASES)
def test_spread_is_judged_over_the_engines_eligible_domains(fields, nodes, members, rules, skew, fragment) -> None:
    spec = PlacementPolicySpec.model_validate({"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, **fields}]})
    found = violations(spec, members, nodes, len(members))
    assert [v.rule for v in found] == rules, found
    if fragment is not None:
        assert fragment in found[0].message, found[0].message
    assert max_skew(spec, ZONE_KEY, members, nodes) == skew


@settings(max_examples=100, deadline=None)
@given(
    layout=st.lists(st.tuples(st.integers(1, 2), st.sampled_from(["db", "web"])), min_size=1, max_size=4),
    fields=st.fixed_dictionaries(
        {},
        optional={
            "maxSkew": st.integers(1, 2),
            "minDomains": st.integers(1, 4),
            "nodeAffinityPolicy": st.sampled_from(["Honor", "Ignore"]),
            "nodeTaintsPolicy": st.sampled_from(["Honor", "Ignore"]),
        },
    ),
    constraints=st.sampled_from([None, DB, DB_AFFINITY, TOLERATES]),
    tainted=st.sampled_from(["", "a", "b"]),
    pods=st.integers(1, 10),
    data=st.data(),
)
def test_a_spread_placement_the_engine_made_never_shows_a_violation(
    layout, fields, constraints, tainted, pods, data
) -> None:
    """Pods placed one by one on nodes filter passes (only those the pod's constraints admit, as
    kube-scheduler's own filters would leave): the checker finds no spread violation at any step."""
    spec = PlacementPolicySpec.model_validate({"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, **fields}]})
    nodes = pooled({chr(ord("a") + i): zone for i, zone in enumerate(layout)}, tainted)
    usable = sorted(
        n
        for n, node in nodes.items()
        if (constraints or NodeConstraints()).matches_affinity(node)
        and (constraints or NodeConstraints()).tolerates_taints(node)
    )
    members: list[Member] = []
    for i in range(pods):
        snap = Snapshot(Topology(nodes.values()), tuple(Placement(m.pod, m.node, m.shard, m.ordinal) for m in members))
        decision = evaluate(spec, PodRequest(f"db/s-{i}", "s", i, constraints=constraints), snap, usable)
        passing = sorted(decision.passed())
        if not passing:
            break
        members.append(Member(f"db/s-{i}", data.draw(st.sampled_from(passing)), "s", i, None, constraints))
        assert violations(spec, members, nodes, None) == []

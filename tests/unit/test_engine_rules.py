"""One table per hard rule (and the soft parts of the score), over plain engine data."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, LEGACY_ZONE_KEY, ZONE_KEY, parse_spec
from extender.engine import (
    Decision,
    NodeConstraints,
    NodeInfo,
    Outcome,
    Placement,
    PlacementKind,
    PodRequest,
    RecordedRotation,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
    Topology,
    evaluate,
)

# -- helpers --------------------------------------------------------------------------------------


def node(
    name: str, zone: str | None = None, *, schedulable: bool = True, legacy: bool = False, **labels: str
) -> NodeInfo:
    all_labels = {HOSTNAME_KEY: name, **labels}
    if zone is not None:
        all_labels[LEGACY_ZONE_KEY if legacy else ZONE_KEY] = zone
    return NodeInfo(name, all_labels, schedulable)


# Three zones of two nodes: a1 a2 | b1 b2 | c1 c2.
ABC = [node(f"{z}{i}", z) for z in "abc" for i in (1, 2)]
ABC_NAMES = [n.name for n in ABC]


_POD_IDS = itertools.count(1)


def at(
    node_name: str | None,
    shard: str | None = "s",
    ordinal: int | None = None,
    *,
    kind: PlacementKind = PlacementKind.BOUND,
    domains: Mapping[str, str] | None = None,
    pod: str | None = None,
) -> Placement:
    return Placement(pod or f"db/p{next(_POD_IDS)}", node_name, shard, ordinal, kind, domains)


def many(node_name: str, count: int) -> list[Placement]:
    return [at(node_name) for _ in range(count)]


POD = PodRequest("db/s-1", shard="s", ordinal=1)


def run(
    policy: dict | None,
    *,
    nodes: Iterable[NodeInfo] = ABC,
    placements: Iterable[Placement] = (),
    pod: PodRequest = POD,
    group_size: int | None = None,
    shard_replicas: Mapping[str, int] | None = None,
    volume_zones: Mapping[str, Mapping[int, str]] | None = None,
    candidates: list | None = None,
    lookahead: bool = False,
    rotations: Mapping[str, RecordedRotation] | None = None,
) -> Decision:
    """Evaluate; dead-end avoidance is off unless asked for, so each table sees its rule alone."""
    nodes = list(nodes)
    spec = None
    if policy is not None:
        spec = parse_spec({"deadEndAvoidance": lookahead, **policy}, "test")
    snap = Snapshot(
        topology=Topology(nodes),
        placements=tuple(placements),
        group_size=group_size,
        shard_replicas=dict(shard_replicas or {}),
        volume_zones=dict(volume_zones or {}),
        zone_rotations=dict(rotations or {}),
    )
    if candidates is None:
        candidates = [n.name for n in nodes if n.schedulable]
    return evaluate(spec, pod, snap, candidates)


def outcomes(decision: Decision) -> dict[str, str]:
    """node -> 'P', 'F:rule' or 'U:rule'."""
    code = {Outcome.PASS: "P", Outcome.FAIL: "F", Outcome.UNRESOLVABLE: "U"}
    return {n: code[v.outcome] + (f":{v.rule}" if v.rule else "") for n, v in decision.verdicts.items()}


def expect(passing: str, failing: Mapping[str, str] | None = None, names: Iterable[str] = ABC_NAMES) -> dict[str, str]:
    """expect('b1 b2', {'a1': 'F:caps'}) for the given node names; unlisted nodes default to 'P' if in `passing`."""
    out = {}
    passing_set = set(passing.split())
    failing = dict(failing or {})
    for name in names:
        if name in failing:
            out[name] = failing[name]
        else:
            assert name in passing_set, f"expectation for {name} missing"
            out[name] = "P"
    return out


def group(outcome: str, names: str) -> dict[str, str]:
    return {n: outcome for n in names.split()}


def scores(decision: Decision) -> dict[str, int]:
    return {n: v.score for n, v in decision.verdicts.items()}


# -- zones ------------------------------------------------------------------------------------

X = node("x1")  # no zone label
LEG_A = node("la", "a", legacy=True)
LEG_C = node("lc", "c", legacy=True)
ZONE_NODES = ABC + [X, LEG_A, LEG_C]
ZONE_NAMES = [n.name for n in ZONE_NODES]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        pytest.param({}, expect(" ".join(ZONE_NAMES), names=ZONE_NAMES), id="no-zone-rule"),
        pytest.param(
            {"zones": {"allowed": ["a", "b"]}},
            expect("a1 a2 b1 b2 la", group("U:zones", "c1 c2 x1 lc"), ZONE_NAMES),
            id="allowed",
        ),
        pytest.param(
            {"zones": {"fallbackGroups": [["c"]]}},
            expect("c1 c2 lc", group("U:zones", "a1 a2 b1 b2 x1 la"), ZONE_NAMES),
            id="fallback-groups-restrict",
        ),
        pytest.param(
            {"zones": {"weights": {"a": 10}}},
            expect(" ".join(ZONE_NAMES), names=ZONE_NAMES),
            id="weights-do-not-restrict",
        ),
    ],
)
def test_zones_rule(policy, expected):
    assert outcomes(run(policy, nodes=ZONE_NODES, pod=PodRequest("db/x"))) == expected


def test_zones_reasons():
    d = run({"zones": {"allowed": ["a", "b"]}}, nodes=ZONE_NODES, pod=PodRequest("db/x"))
    assert "no zone label" in d.verdicts["x1"].reason and ZONE_KEY in d.verdicts["x1"].reason
    assert "zone c is not among the allowed zones (a, b)" == d.verdicts["c1"].reason


def test_custom_zone_key():
    nodes = [node("n1", **{"example.com/zone": "a"}), node("n2", **{"example.com/zone": "b"}), node("n3", "a")]
    d = run(
        {"topology": {"zone": "example.com/zone"}, "zones": {"allowed": ["a"]}}, nodes=nodes, pod=PodRequest("db/x")
    )
    assert outcomes(d) == {"n1": "P", "n2": "U:zones", "n3": "U:zones"}


# -- ordinal zones ------------------------------------------------------------------------------

OZ_NODES = ABC + [X]
OZ_NAMES = ABC_NAMES + ["x1"]
U_OZ = "U:ordinalZones"


@pytest.mark.parametrize(
    ("pod", "kw", "expected"),
    [
        pytest.param(POD, {}, expect("b1 b2", group(U_OZ, "a1 a2 c1 c2 x1"), OZ_NAMES), id="ordinal-1-ideal-b"),
        pytest.param(
            PodRequest("db/s-3", "s", 3),
            {},
            expect("a1 a2", group(U_OZ, "b1 b2 c1 c2 x1"), OZ_NAMES),
            id="ordinal-3-wraps",
        ),
        pytest.param(
            PodRequest("db/s-1", "s", 1, frozenset({"c"})),
            {},
            expect("b1 b2 c1 c2", group(U_OZ, "a1 a2 x1"), OZ_NAMES),
            id="volume-zone-passes",
        ),
        pytest.param(
            PodRequest("db/s-3", "s", 3),
            {"placements": [at("b1", "s", 0)]},
            expect("b1 b2", group(U_OZ, "a1 a2 c1 c2 x1"), OZ_NAMES),
            id="pinned-by-placed-pod",
        ),
        pytest.param(
            PodRequest("db/s-3", "s", 3),
            {"volume_zones": {"s": {0: "c"}}},
            expect("c1 c2", group(U_OZ, "a1 a2 b1 b2 x1"), OZ_NAMES),
            id="pinned-by-volume",
        ),
        pytest.param(
            PodRequest("db/s-3", "s", 3),
            {"placements": [at("b1", "other", 0)]},
            expect("a1 a2", group(U_OZ, "b1 b2 c1 c2 x1"), OZ_NAMES),
            id="other-shard-no-evidence",
        ),
        pytest.param(
            PodRequest("db/s"),
            {},
            expect("", group(U_OZ, " ".join(OZ_NAMES)), OZ_NAMES),
            id="pod-without-statefulset-refused",
        ),
        pytest.param(
            PodRequest("db/s-1", None, 1),
            {},
            expect("", group(U_OZ, " ".join(OZ_NAMES)), OZ_NAMES),
            id="pod-without-shard-refused",
        ),
        pytest.param(
            PodRequest("db/s", "s", None),
            {},
            expect("", group(U_OZ, " ".join(OZ_NAMES)), OZ_NAMES),
            id="statefulset-pod-without-ordinal-refused",
        ),
    ],
)
def test_ordinal_zones(pod, kw, expected):
    assert outcomes(run({"ordinalZones": {}}, nodes=OZ_NODES, pod=pod, **kw)) == expected


@pytest.mark.parametrize(
    ("policy", "ordinal", "passing"),
    [
        pytest.param({"ordinalZones": {"order": ["c", "a"]}}, 1, {"a1", "a2"}, id="explicit-order"),
        pytest.param({"ordinalZones": {"order": ["c", "a"]}}, 2, {"c1", "c2"}, id="explicit-order-wraps"),
        pytest.param(
            {"ordinalZones": {}, "zones": {"allowed": ["b", "c"]}}, 1, {"c1", "c2"}, id="order-over-allowed-zones"
        ),
    ],
)
def test_ordinal_zones_order(policy, ordinal, passing):
    d = run(policy, pod=PodRequest(f"db/s-{ordinal}", "s", ordinal))
    assert set(d.passed()) == passing


@pytest.mark.parametrize(
    ("adopted", "policy", "best"),
    [
        pytest.param({1: "a"}, {}, {"a1", "a2"}, id="adopted-ordinal-prefers-where-it-ran"),
        pytest.param({2: "a"}, {}, {"b1", "b2"}, id="another-ordinal-adopted-no-preference"),
        pytest.param(
            {1: "a"},
            {"shardAntiAffinity": [{"topologyKey": ZONE_KEY, "mode": "Preferred"}]},
            {"a1", "a2"},
            id="outranks-a-free-split",
        ),
    ],
)
def test_an_adopted_ordinal_scores_the_zone_it_ran_in_highest(adopted, policy, best):
    """Invariant: among the zones the rule accepts, an adopted ordinal's own zone scores highest,
    so a rollout puts it back where it ran (nothing running moves)."""
    placements = [at("a1", "s", 0)] if "shardAntiAffinity" in policy else []
    d = run(
        {"ordinalZones": {"order": ["c", "b", "a"]}, **policy},
        placements=placements,
        rotations={"s": RecordedRotation("db/s", ("c", "b", "a"), adopted)},
    )
    passed = d.passed()
    top = max(d.verdicts[n].score for n in passed)
    assert {n for n in passed if d.verdicts[n].score == top} == best, scores(d)


@given(
    free=st.lists(st.sampled_from(ABC_NAMES), unique=True, min_size=1),
    ordinal=st.integers(0, 5),
    adopted=st.sampled_from("abc"),
)
def test_an_adopted_ordinal_returns_whenever_its_zone_has_room(free, ordinal, adopted):
    """Property: over random free nodes, the top-scored passing node is in the adopted zone
    whenever a node there passes."""
    order = ("a", "b", "c")
    taken = [at(n, "t", None) for n in ABC_NAMES if n not in free]
    d = run(
        {"ordinalZones": {"order": list(order)}, "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        placements=taken,
        pod=PodRequest(f"db/s-{ordinal}", "s", ordinal),
        rotations={"s": RecordedRotation("db/s", order, {ordinal: adopted})},
    )
    passed = d.passed()
    assert all(n[0] in (adopted, order[ordinal % 3]) for n in passed)
    if any(n[0] == adopted for n in passed):
        top = max(d.verdicts[n].score for n in passed)
        assert all(n[0] == adopted for n in passed if d.verdicts[n].score == top), scores(d)


def test_ordinal_zone_reason_and_note():
    d = run({"ordinalZones": {}}, nodes=OZ_NODES)
    assert "ordinal 1 belongs in zone b" in d.verdicts["a1"].reason and "node is in zone a" in d.verdicts["a1"].reason
    assert d.verdicts["x1"].reason == f"node has no zone label ({ZONE_KEY})"
    assert any("ordinal 1 -> zone b" in note for note in d.notes)


def test_ordinal_zones_refusal_names_the_field():
    d = run({"ordinalZones": {}, "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}, pod=PodRequest("db/web-abc"))
    assert d.passed() == []
    reasons = {v.reason for v in d.verdicts.values()}
    assert len(reasons) == 1 and "ordinalZones" in reasons.pop()
    assert "no StatefulSet owns this pod" in d.verdicts["a1"].reason
    assert run({"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}, pod=PodRequest("db/web-abc")).passed()


def test_ordinal_zones_without_zoned_nodes():
    d = run({"ordinalZones": {}}, nodes=[X])
    assert outcomes(d) == {"x1": U_OZ}


# -- caps ---------------------------------------------------------------------------------------

RACKS = [node("r1a", rack="r1"), node("r1b", rack="r1"), node("r2a", rack="r2"), node("norack")]
RACK_NAMES = [n.name for n in RACKS]
HOST_MAX1 = {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}


def frac(key: str, fraction: str, comparison: str) -> dict:
    return {"caps": [{"topologyKey": key, "fraction": fraction, "comparison": comparison}]}


@pytest.mark.parametrize(
    ("policy", "kw", "expected"),
    [
        pytest.param(HOST_MAX1, {"placements": [at("a1")]}, expect("a2 b1 b2 c1 c2", {"a1": "F:caps"}), id="host-max"),
        pytest.param(
            {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 2}]},
            {"placements": [at("a1"), at("a2"), at("a2")]},
            expect("a1 b1 b2 c1 c2", {"a2": "F:caps"}),
            id="host-max-2",
        ),
        pytest.param(
            frac(HOSTNAME_KEY, "1/3", "LessThan"),
            {"placements": [at("a1")], "group_size": 6},
            expect("a2 b1 b2 c1 c2", {"a1": "F:caps"}),
            id="host-lessthan-third-of-6",
        ),
        pytest.param(
            frac(HOSTNAME_KEY, "1/3", "AtMost"),
            {"placements": [at("a1")], "group_size": 6},
            expect(" ".join(ABC_NAMES)),
            id="host-atmost-third-of-6-one-there",
        ),
        pytest.param(
            frac(HOSTNAME_KEY, "1/3", "AtMost"),
            {"placements": [at("a1"), at("a1")], "group_size": 6},
            expect("a2 b1 b2 c1 c2", {"a1": "F:caps"}),
            id="host-atmost-third-of-6-two-there",
        ),
        pytest.param(
            frac(ZONE_KEY, "1/2", "LessThan"),
            {"placements": [at("a1"), at("a2")], "group_size": 6},
            expect("b1 b2 c1 c2", group("F:caps", "a1 a2")),
            id="zone-lessthan-half-of-6",
        ),
        pytest.param(
            frac(ZONE_KEY, "1/2", "AtMost"),
            {"placements": [at("a1"), at("a2")], "group_size": 6},
            expect(" ".join(ABC_NAMES)),
            id="zone-atmost-half-of-6",
        ),
        pytest.param(
            frac(ZONE_KEY, "1/2", "LessThan"),
            {"placements": many("a1", 7) + [at("b1")], "group_size": 18},
            expect(" ".join(ABC_NAMES)),
            id="zone-lessthan-half-of-18-seven-there",
        ),
        pytest.param(
            frac(ZONE_KEY, "1/2", "LessThan"),
            {"placements": many("a1", 8), "group_size": 18},
            expect("b1 b2 c1 c2", group("F:caps", "a1 a2")),
            id="zone-lessthan-half-of-18-eight-there",
        ),
        pytest.param(
            {"caps": [{"topologyKey": LEGACY_ZONE_KEY, "max": 1}]},
            {"placements": [at("b2")]},
            expect("a1 a2 c1 c2", group("F:caps", "b1 b2")),
            id="legacy-zone-key-counts-zone",
        ),
        pytest.param(
            {"caps": [{"topologyKey": ZONE_KEY, "max": 1}]},
            {"placements": [at(None, domains={ZONE_KEY: "a"}, kind=PlacementKind.TENTATIVE)]},
            expect("b1 b2 c1 c2", group("F:caps", "a1 a2")),
            id="tentative-with-zone-domain",
        ),
        pytest.param(
            {"caps": [{"topologyKey": ZONE_KEY, "max": 1}]},
            {"placements": [at(None, kind=PlacementKind.TENTATIVE)]},
            expect(" ".join(ABC_NAMES)),
            id="tentative-without-domains-counts-nowhere",
        ),
        pytest.param(
            HOST_MAX1,
            {"placements": [at(None, domains={ZONE_KEY: "a"}, kind=PlacementKind.TENTATIVE)]},
            expect(" ".join(ABC_NAMES)),
            id="tentative-zone-domain-not-a-node",
        ),
        pytest.param(
            HOST_MAX1,
            {"placements": [at("a1", kind=PlacementKind.TERMINATING), at("b1", kind=PlacementKind.COMMITTED)]},
            expect("a2 b2 c1 c2", group("F:caps", "a1 b1")),
            id="terminating-and-committed-count",
        ),
        pytest.param(
            {"caps": [{"topologyKey": ZONE_KEY, "max": 1}]},
            {"placements": [at("gone")]},
            expect(" ".join(ABC_NAMES)),
            id="pod-on-removed-node-not-counted",
        ),
        pytest.param(
            frac(HOSTNAME_KEY, "1/3", "LessThan"),
            {},
            expect("", group("U:caps", " ".join(ABC_NAMES))),
            id="unknown-group-size",
        ),
        pytest.param(HOST_MAX1, {}, expect(" ".join(ABC_NAMES)), id="max-needs-no-group-size"),
    ],
)
def test_caps(policy, kw, expected):
    assert outcomes(run(policy, pod=PodRequest("db/x", "s"), **kw)) == expected


@pytest.mark.parametrize(
    ("policy", "placements", "expected"),
    [
        pytest.param(
            {"caps": [{"topologyKey": "rack", "max": 1}]},
            [at("r1a")],
            {"r1a": "F:caps", "r1b": "F:caps", "r2a": "P", "norack": "U:caps"},
            id="rack-max",
        ),
        pytest.param(
            {"caps": [{"topologyKey": "rack", "max": 2}]},
            [at("r1a")],
            {"r1a": "P", "r1b": "P", "r2a": "P", "norack": "U:caps"},
            id="rack-room-left",
        ),
        pytest.param(
            {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}, {"topologyKey": "rack", "max": 3}]},
            [at("r1a"), at("r1b")],
            {"r1a": "F:caps", "r1b": "F:caps", "r2a": "P", "norack": "U:caps"},
            id="host-and-rack",
        ),
    ],
)
def test_caps_custom_key(policy, placements, expected):
    assert outcomes(run(policy, nodes=RACKS, placements=placements, pod=PodRequest("db/x"))) == expected


def test_cap_reasons():
    d = run(frac(HOSTNAME_KEY, "1/3", "LessThan"), pod=PodRequest("db/x"))
    assert d.verdicts["a1"].outcome is Outcome.UNRESOLVABLE and "group.size" in d.verdicts["a1"].reason
    d = run(frac(ZONE_KEY, "1/2", "LessThan"), placements=[at("a1"), at("a2")], group_size=6, pod=PodRequest("db/x"))
    reason = d.verdicts["a1"].reason
    assert f"{ZONE_KEY}=a already holds 2" in reason and "fewer than 1/2 of 6" in reason and "allows 2" in reason
    d = run({"caps": [{"topologyKey": "rack", "max": 1}]}, nodes=RACKS, pod=PodRequest("db/x"))
    assert d.verdicts["norack"].reason == "node has no rack label"


# -- spread (DoNotSchedule) -------------------------------------------------------------------


def spread(key: str, skew: int = 1, when: str = "DoNotSchedule") -> dict:
    return {"topologyKey": key, "maxSkew": skew, "whenUnsatisfiable": when}


ZONE_SPREAD = {"spread": [spread(ZONE_KEY)]}
C_CORDONED = [n for n in ABC if not n.name.startswith("c")] + [
    node("c1", "c", schedulable=False),
    node("c2", "c", schedulable=False),
]
AB_NAMES = ["a1", "a2", "b1", "b2"]


@pytest.mark.parametrize(
    ("policy", "kw", "expected"),
    [
        pytest.param(ZONE_SPREAD, {}, expect(" ".join(ABC_NAMES)), id="empty"),
        pytest.param(
            ZONE_SPREAD,
            {"placements": [at("a1"), at("b1")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="empty-zone-is-the-minimum",
        ),
        pytest.param(
            ZONE_SPREAD,
            {"placements": [at("a1"), at("b1"), at("c2")]},
            expect(" ".join(ABC_NAMES)),
            id="balanced",
        ),
        pytest.param(
            {"spread": [spread(ZONE_KEY, 2)]},
            {"placements": [at("a1"), at("b1")]},
            expect(" ".join(ABC_NAMES)),
            id="maxskew-2",
        ),
        pytest.param(
            {"spread": [spread(ZONE_KEY, 2)]},
            {"placements": [at("a1"), at("a2"), at("b1")]},
            expect("b1 b2 c1 c2", group("F:spread", "a1 a2")),
            id="maxskew-2-exceeded",
        ),
        pytest.param(
            ZONE_SPREAD,
            {"nodes": C_CORDONED, "placements": [at("a1"), at("b1")], "candidates": AB_NAMES},
            expect(" ".join(AB_NAMES), names=AB_NAMES),
            id="cordoned-zone-not-counted",
        ),
        pytest.param(
            {"spread": [spread(ZONE_KEY)], "zones": {"allowed": ["a", "b"]}},
            {"placements": [at("a1"), at("b1")]},
            expect("a1 a2 b1 b2", group("U:zones", "c1 c2")),
            id="zone-outside-allowed-not-counted",
        ),
        pytest.param(
            ZONE_SPREAD,
            {"placements": [at("c1", kind=PlacementKind.TERMINATING), at("a1"), at("b1")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="terminating-not-counted-the-spread-holds-once-it-is-gone",
        ),
        pytest.param(
            {"spread": [spread(HOSTNAME_KEY)]},
            {"placements": [at("a1")]},
            expect("a2 b1 b2 c1 c2", {"a1": "F:spread"}),
            id="hostname-empty-nodes-are-minimum",
        ),
        pytest.param(
            {"spread": [spread(HOSTNAME_KEY)]},
            {"placements": [at(n) for n in ABC_NAMES] + [at("a1")]},
            expect("a2 b1 b2 c1 c2", {"a1": "F:spread"}),
            id="hostname-one-ahead",
        ),
    ],
)
def test_spread_hard(policy, kw, expected):
    assert outcomes(run(policy, pod=PodRequest("db/x"), **kw)) == expected


def test_spread_missing_label_and_reason():
    nodes = RACKS
    d = run({"spread": [spread("rack")]}, nodes=nodes, placements=[at("r1a")], pod=PodRequest("db/x"))
    assert outcomes(d) == {"r1a": "F:spread", "r1b": "F:spread", "r2a": "P", "norack": "U:spread"}
    assert "skew 2 > maxSkew 1" in d.verdicts["r1a"].reason


# -- spread: nodeAffinityPolicy / nodeTaintsPolicy (native node inclusion policies) -------------

IN_AB = NodeConstraints(terms=((Requirement(ZONE_KEY, "In", ("a", "b")),),))  # required affinity: zones a, b
SEL_SSD = NodeConstraints(selector=(("disk", "ssd"),))
NO_SCHED = Taint("dedicated", "db", "NoSchedule")
TOLERATE = NodeConstraints(tolerations=(Toleration("dedicated", "Equal", "db", "NoSchedule"),))
C_TAINTED = [n for n in ABC if not n.name.startswith("c")] + [
    NodeInfo(n.name, n.labels, True, (NO_SCHED,)) for n in ABC if n.name.startswith("c")
]
# a1 and b1 have SSDs; a2, b2, c1, c2 do not.
SSD = [NodeInfo(n.name, {**n.labels, **({"disk": "ssd"} if n.name in ("a1", "b1") else {})}) for n in ABC]


def honoring(affinity: str = "Honor", taints: str = "Ignore", key: str = ZONE_KEY, **extra) -> dict:
    return {"spread": [{**spread(key), "nodeAffinityPolicy": affinity, "nodeTaintsPolicy": taints, **extra}]}


@pytest.mark.parametrize(
    ("policy", "constraints", "kw", "expected"),
    [
        pytest.param(
            honoring(),
            IN_AB,
            {"placements": [at("a1"), at("b1")]},
            expect(" ".join(ABC_NAMES)),
            id="affinity-honor-zone-c-not-eligible",
        ),
        pytest.param(
            honoring("Ignore"),
            IN_AB,
            {"placements": [at("a1"), at("b1")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="affinity-ignore-zone-c-is-the-minimum",
        ),
        pytest.param(
            honoring(),
            IN_AB,
            {"placements": [at("a1"), at("a2"), at("b1")]},
            expect("b1 b2 c1 c2", group("F:spread", "a1 a2")),
            id="affinity-honor-skew-between-a-and-b",
        ),
        pytest.param(
            honoring(),
            IN_AB,
            {"placements": [at("a1"), at("b1"), at("c1"), at("c2"), at("c1")]},
            expect(" ".join(ABC_NAMES)),
            id="affinity-honor-pods-on-excluded-nodes-not-counted",
        ),
        pytest.param(
            honoring(),
            SEL_SSD,
            {"nodes": SSD, "placements": [at("a1"), at("a2"), at("a2")]},
            expect("b1 b2 c1 c2", group("F:spread", "a1 a2")),
            id="node-selector-counts-only-matching-nodes-pods",
        ),
        pytest.param(
            honoring("Ignore"),
            SEL_SSD,
            {"nodes": SSD, "placements": [at("a1"), at("b2")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="node-selector-ignore-counts-every-node",
        ),
        pytest.param(
            honoring(),
            SEL_SSD,
            {"nodes": SSD, "placements": [at("a1"), at("b2")]},
            expect("b1 b2 c1 c2", group("F:spread", "a1 a2")),
            id="node-selector-honor-zone-c-has-no-ssd",
        ),
        pytest.param(
            honoring(taints="Ignore"),
            None,
            {"nodes": C_TAINTED, "placements": [at("a1"), at("b1")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="taints-ignore-tainted-zone-counts",
        ),
        pytest.param(
            honoring(taints="Honor"),
            None,
            {"nodes": C_TAINTED, "placements": [at("a1"), at("b1")]},
            expect(" ".join(ABC_NAMES)),
            id="taints-honor-untolerated-zone-not-eligible",
        ),
        pytest.param(
            honoring(taints="Honor"),
            TOLERATE,
            {"nodes": C_TAINTED, "placements": [at("a1"), at("b1")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="taints-honor-tolerated-zone-counts",
        ),
        pytest.param(
            honoring(key=HOSTNAME_KEY),
            IN_AB,
            {"placements": [at("a1"), at("a2"), at("b1")]},
            expect("b2 c1 c2", group("F:spread", "a1 a2 b1")),
            id="hostname-honor-excluded-nodes-not-the-minimum",
        ),
        pytest.param(
            honoring("Ignore", key=HOSTNAME_KEY),
            IN_AB,
            {"placements": [at("a1"), at("a2"), at("b1"), at("b2")]},
            expect("c1 c2", group("F:spread", "a1 a2 b1 b2")),
            id="hostname-ignore-empty-node-in-c-is-the-minimum",
        ),
    ],
)
def test_spread_node_inclusion(policy, constraints, kw, expected):
    pod = PodRequest("db/x", constraints=constraints)
    assert outcomes(run(policy, pod=pod, **kw)) == expected


# -- spread: minDomains -------------------------------------------------------------------------

AB_ONLY = [n for n in ABC if not n.name.startswith("c")]


@pytest.mark.parametrize(
    ("policy", "kw", "expected"),
    [
        pytest.param(
            honoring(minDomains=3),
            {"nodes": AB_ONLY, "placements": [at("a1"), at("b1")], "candidates": AB_NAMES},
            expect("", group("F:spread", "a1 a2 b1 b2"), AB_NAMES),
            id="two-zones-below-3-min-is-0",
        ),
        pytest.param(
            honoring(minDomains=3),
            {"nodes": AB_ONLY, "placements": [at("a1")], "candidates": AB_NAMES},
            expect("b1 b2", group("F:spread", "a1 a2"), AB_NAMES),
            id="two-zones-below-3-one-placed",
        ),
        pytest.param(
            honoring(minDomains=2),
            {"nodes": AB_ONLY, "placements": [at("a1"), at("b1")], "candidates": AB_NAMES},
            expect(" ".join(AB_NAMES), names=AB_NAMES),
            id="enough-domains-min-as-usual",
        ),
        pytest.param(
            honoring(minDomains=3),
            {"placements": [at("a1"), at("b1"), at("c1")]},
            expect(" ".join(ABC_NAMES)),
            id="three-zones-reach-min-domains",
        ),
        pytest.param(
            {"spread": [{**spread(ZONE_KEY, 2), "minDomains": 3}]},
            {"nodes": AB_ONLY, "placements": [at("a1"), at("b1")], "candidates": AB_NAMES},
            expect(" ".join(AB_NAMES), names=AB_NAMES),
            id="maxskew-2-allows-two-per-zone",
        ),
        pytest.param(
            honoring(minDomains=3),
            {"nodes": C_CORDONED, "placements": [at("a1"), at("b1")], "candidates": AB_NAMES},
            expect("", group("F:spread", "a1 a2 b1 b2"), AB_NAMES),
            id="cordoned-zone-is-not-eligible",
        ),
    ],
)
def test_spread_min_domains(policy, kw, expected):
    assert outcomes(run(policy, pod=PodRequest("db/x"), **kw)) == expected


def test_min_domains_reason_names_min_domains():
    d = run(honoring(minDomains=3), nodes=AB_ONLY, placements=[at("a1"), at("b1")], pod=PodRequest("db/x"))
    reason = d.verdicts["a1"].reason
    assert "minDomains 3" in reason and "only 2 eligible" in reason and "skew 2 > maxSkew 1" in reason
    plain = run(ZONE_SPREAD, placements=[at("a1"), at("b1")], pod=PodRequest("db/x")).verdicts["a1"].reason
    assert "minDomains" not in plain


# -- ordinal zones: the pod's node constraints narrow the rotation ------------------------------


@pytest.mark.parametrize(
    ("constraints", "nodes", "ordinal", "passing"),
    [
        pytest.param(None, ABC, 2, {"c1", "c2"}, id="unconstrained-three-zones"),
        pytest.param(IN_AB, ABC, 2, {"a1", "a2"}, id="affinity-two-zones-wraps"),
        pytest.param(None, C_TAINTED, 2, {"a1", "a2"}, id="untolerated-tainted-zone-left-out"),
        pytest.param(TOLERATE, C_TAINTED, 2, {"c1", "c2"}, id="tolerated-tainted-zone-kept"),
    ],
)
def test_ordinal_zones_usable_zones(constraints, nodes, ordinal, passing):
    pod = PodRequest(f"db/s-{ordinal}", "s", ordinal, constraints=constraints)
    d = run({"ordinalZones": {}}, nodes=nodes, pod=pod, candidates=ABC_NAMES)
    assert set(d.passed()) == passing


# -- spread (ScheduleAnyway) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("placements", "low", "high"),
    [
        pytest.param([at("a1"), at("a2"), at("a1")], {"a1", "a2"}, {"b1", "b2", "c1", "c2"}, id="zone-a-loaded"),
        pytest.param(many("a1", 5) + many("b1", 5), {"a1", "a2", "b1", "b2"}, {"c1", "c2"}, id="far-over-skew"),
    ],
)
def test_spread_soft_never_filters_and_scores(placements, low, high):
    d = run({"spread": [spread(ZONE_KEY, 1, "ScheduleAnyway")]}, placements=placements, pod=PodRequest("db/x"))
    assert set(d.passed()) == set(ABC_NAMES)
    s = scores(d)
    assert max(s[n] for n in low) < min(s[n] for n in high)
    assert all(0 <= v <= 10 for v in s.values())


# -- shard anti-affinity ----------------------------------------------------------------------


def anti(key: str, mode: str = "Required") -> dict:
    return {"shardAntiAffinity": [{"topologyKey": key, "mode": mode}]}


@pytest.mark.parametrize(
    ("policy", "pod", "placements", "expected"),
    [
        pytest.param(
            anti(HOSTNAME_KEY),
            POD,
            [at("a1", "s", 0), at("b1", "t", 0)],
            expect("a2 b1 b2 c1 c2", {"a1": "F:shardAntiAffinity"}),
            id="required-node",
        ),
        pytest.param(
            anti(ZONE_KEY),
            POD,
            [at("a1", "s", 0), at("b1", "t", 0)],
            expect("b1 b2 c1 c2", group("F:shardAntiAffinity", "a1 a2")),
            id="required-zone",
        ),
        pytest.param(
            anti(LEGACY_ZONE_KEY),
            POD,
            [at("a1", "s", 0)],
            expect("b1 b2 c1 c2", group("F:shardAntiAffinity", "a1 a2")),
            id="required-legacy-zone-key",
        ),
        pytest.param(
            anti(ZONE_KEY),
            POD,
            [at("a1", "s", 0, kind=PlacementKind.TERMINATING)],
            expect("b1 b2 c1 c2", group("F:shardAntiAffinity", "a1 a2")),
            id="terminating-sibling-counts",
        ),
        pytest.param(
            anti(ZONE_KEY),
            POD,
            [at(None, "s", 0, kind=PlacementKind.TENTATIVE, domains={ZONE_KEY: "c"})],
            expect("a1 a2 b1 b2", group("F:shardAntiAffinity", "c1 c2")),
            id="tentative-sibling-zone",
        ),
        pytest.param(
            anti(ZONE_KEY),
            PodRequest("db/y"),
            [at("a1", "s", 0)],
            expect(" ".join(ABC_NAMES)),
            id="pod-without-shard",
        ),
        pytest.param(anti(ZONE_KEY), POD, [at("a1", "t", 0)], expect(" ".join(ABC_NAMES)), id="other-shard-only"),
        pytest.param(
            anti(ZONE_KEY, "Preferred"), POD, [at("a1", "s", 0)], expect(" ".join(ABC_NAMES)), id="preferred-zone"
        ),
        pytest.param(
            anti(HOSTNAME_KEY, "Preferred"), POD, [at("a1", "s", 0)], expect(" ".join(ABC_NAMES)), id="preferred-node"
        ),
    ],
)
def test_shard_anti_affinity(policy, pod, placements, expected):
    assert outcomes(run(policy, pod=pod, placements=placements)) == expected


@pytest.mark.parametrize(
    ("key", "sibling", "other", "worse", "better"),
    [
        # a1 holds the sibling, a2 another shard's pod: equal load, only the preference tells them apart
        pytest.param(HOSTNAME_KEY, "a1", "a2", {"a1"}, {"a2"}, id="by-node"),
        # zone a holds the sibling, zone b another shard's pod: equal zone load
        pytest.param(ZONE_KEY, "a1", "b1", {"a1", "a2"}, {"b1", "b2"}, id="by-zone"),
    ],
)
def test_preferred_anti_affinity_scores(key, sibling, other, worse, better):
    d = run(anti(key, "Preferred"), placements=[at(sibling, "s", 0), at(other, "t", 0)])
    s = scores(d)
    assert set(d.passed()) == set(ABC_NAMES)
    assert max(s[n] for n in worse) < min(s[n] for n in better)


def test_anti_affinity_missing_label():
    d = run(anti("rack"), nodes=RACKS, placements=[at("r1a", "s", 0)])
    assert outcomes(d) == {
        "r1a": "F:shardAntiAffinity",
        "r1b": "F:shardAntiAffinity",
        "r2a": "P",
        "norack": "U:shardAntiAffinity",
    }


# -- fallback groups ----------------------------------------------------------------------------

ABCD = ABC + [node("d1", "d")]
ABCD_NAMES = [n.name for n in ABCD]
GROUPS = {"zones": {"fallbackGroups": [["a"], ["b", "c"]]}}
F_FB = "F:fallbackGroups"


@pytest.mark.parametrize(
    ("policy", "placements", "expected"),
    [
        pytest.param(
            GROUPS, [], expect("a1 a2", {**group(F_FB, "b1 b2 c1 c2"), "d1": "U:zones"}, ABCD_NAMES), id="first-group"
        ),
        pytest.param(
            {**GROUPS, **HOST_MAX1},
            [at("a1")],
            expect("a2", {"a1": "F:caps", **group(F_FB, "b1 b2 c1 c2"), "d1": "U:zones"}, ABCD_NAMES),
            id="first-group-one-left",
        ),
        pytest.param(
            {**GROUPS, **HOST_MAX1},
            [at("a1"), at("a2")],
            expect("b1 b2 c1 c2", {**group("F:caps", "a1 a2"), "d1": "U:zones"}, ABCD_NAMES),
            id="first-group-full",
        ),
        pytest.param(
            {"zones": {"fallbackGroups": [["a"], ["b"], ["c"]]}, **HOST_MAX1},
            [at("a1"), at("a2"), at("b1")],
            expect("b2", {**group("F:caps", "a1 a2 b1"), **group(F_FB, "c1 c2"), "d1": "U:zones"}, ABCD_NAMES),
            id="second-group-before-third",
        ),
        pytest.param(
            {"zones": {"fallbackGroups": [["a"], ["b"]]}, **HOST_MAX1},
            [at(n) for n in ABC_NAMES[:4]],
            expect("", {**group("F:caps", "a1 a2 b1 b2"), **group("U:zones", "c1 c2 d1")}, ABCD_NAMES),
            id="all-groups-full",
        ),
    ],
)
def test_fallback_groups(policy, placements, expected):
    d = run(policy, nodes=ABCD, placements=placements, pod=PodRequest("db/x"))
    assert outcomes(d) == expected


def test_fallback_group_reason_names_the_group():
    d = run(GROUPS, nodes=ABCD, pod=PodRequest("db/x"))
    assert "zone group 1 (a) still has feasible nodes" in d.verdicts["b1"].reason


def test_fallback_considers_only_candidates():
    """A first-group node kube-scheduler already filtered out does not hold the pod back."""
    d = run(GROUPS, nodes=ABCD, pod=PodRequest("db/x"), candidates=["b1", "c1"])
    assert outcomes(d) == {"b1": "P", "c1": "P"}


# -- zone weights -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        pytest.param({"a": 100, "b": 50}, {"a": 10, "b": 5, "c": 0}, id="graded"),
        pytest.param({"c": 7}, {"a": 0, "b": 0, "c": 10}, id="one-zone"),
        pytest.param({"a": 5, "b": 5, "c": 5}, {"a": 0, "b": 0, "c": 0}, id="all-equal-neutral"),
        pytest.param({"a": 0}, {"a": 0, "b": 0, "c": 0}, id="all-zero-neutral"),
    ],
)
def test_zone_weights(weights, expected):
    d = run({"zones": {"weights": weights}}, pod=PodRequest("db/x"))
    assert set(d.passed()) == set(ABC_NAMES)
    assert scores(d) == {n: expected[n[0]] for n in ABC_NAMES}


def test_failing_nodes_get_no_score():
    d = run({"zones": {"weights": {"a": 100}}, **HOST_MAX1}, placements=[at("a1")], pod=PodRequest("db/x"))
    assert d.verdicts["a1"].outcome is Outcome.FAIL and d.verdicts["a1"].score == 0
    assert d.verdicts["a2"].score == 10


# -- no policy, unknown candidates, candidates as NodeInfo -----------------------------------------


@pytest.mark.parametrize(
    "candidates",
    [
        pytest.param(ABC_NAMES, id="names"),
        pytest.param(ABC_NAMES + ["ghost"], id="unknown-name"),
        pytest.param(list(ABC), id="node-infos"),
        pytest.param([], id="none"),
    ],
)
def test_no_policy_passes_everything(candidates):
    d = run(None, placements=many("a1", 9), candidates=candidates)
    names = [c if isinstance(c, str) else c.name for c in candidates]
    assert d.passed() == names
    assert all(v.score == 0 and v.outcome is Outcome.PASS for v in d.verdicts.values())


def test_candidate_missing_from_cache():
    d = run(HOST_MAX1, candidates=["a1", "ghost"])
    assert outcomes(d) == {"a1": "P", "ghost": "F:cache"}
    assert "cache" in d.verdicts["ghost"].reason


def test_node_info_candidate_not_in_topology():
    """Candidates sent as full nodes (nodeCacheCapable: false) are judged on their own labels."""
    d = run(anti(ZONE_KEY), placements=[at("a1", "s", 0)], candidates=[node("new-a", "a"), node("new-c", "c")])
    assert outcomes(d) == {"new-a": "F:shardAntiAffinity", "new-c": "P"}


def test_group_size_note():
    d = run(HOST_MAX1, placements=[at("a1")], group_size=6)
    assert "group size 6, 1 placed or in flight" in d.notes


# -- several rules: the first failing one is reported ---------------------------------------------


def test_rule_order():
    policy = {
        "zones": {"allowed": ["a", "b"]},
        "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}],
        "shardAntiAffinity": [{"topologyKey": ZONE_KEY}],
    }
    d = run(policy, placements=[at("a1", "s", 0), at("b1", "t", 0)])
    assert outcomes(d) == {
        "a1": "F:caps",
        "a2": "F:shardAntiAffinity",
        "b1": "F:caps",
        "b2": "P",
        "c1": "U:zones",
        "c2": "U:zones",
    }


# -- custom node key ------------------------------------------------------------------------------

NODE_KEY = "example.com/node"
# docs/concepts/rules.md (topology.node): "node label naming the node; falls back to the node's name"
CUSTOM_NODE_KEY_NODES = [node("n1", **{NODE_KEY: "n1"}), node("n2"), node("n3")]


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param(
            {"caps": [{"topologyKey": NODE_KEY, "max": 1}]}, {"n1": "F:caps", "n2": "F:caps", "n3": "P"}, id="cap"
        ),
        pytest.param(
            {"shardAntiAffinity": [{"topologyKey": NODE_KEY}]},
            {"n1": "F:shardAntiAffinity", "n2": "F:shardAntiAffinity", "n3": "P"},
            id="anti-affinity",
        ),
    ],
)
def test_custom_node_key_falls_back_to_node_name(rules, expected):
    d = run(
        {"topology": {"node": NODE_KEY}, **rules},
        nodes=CUSTOM_NODE_KEY_NODES,
        placements=[at("n1", "s", 0), at("n2", "s", 2)],
    )
    assert outcomes(d) == expected


# -- how preferences are weighed ---------------------------------------------------------------------

AB = [node(f"{z}{i}", z) for z in "ab" for i in (1, 2, 3)]
AB_NAMES = [n.name for n in AB]


@pytest.mark.parametrize(
    ("policy", "placements", "better", "worse"),
    [
        # Redis, 2 zones: the shard's sibling in zone a, the group's other pods in zone b. Balance
        # prefers a (fewer of the group's pods); the free split prefers b and must win.
        pytest.param(
            {**anti(ZONE_KEY, "Preferred"), "caps": [{"topologyKey": HOSTNAME_KEY, "max": 2}]},
            [at("a1", "s", 0), at("b1", "t", 0), at("b2", "t", 1), at("b3", "u", 0)],
            {"b1", "b2", "b3"},
            {"a1", "a2", "a3"},
            id="free-split-beats-balance",
        ),
        pytest.param(
            {**anti(ZONE_KEY, "Preferred"), "zones": {"weights": {"a": 100, "b": 0}}},
            [at("a1", "s", 0)],
            {"b1", "b2", "b3"},
            {"a1", "a2", "a3"},
            id="free-split-beats-zone-weights",
        ),
        pytest.param(
            {"spread": [spread(ZONE_KEY, 1, "ScheduleAnyway")], "zones": {"weights": {"a": 100, "b": 0}}},
            [at("a1", "t", 0), at("a2", "t", 1)],
            {"b1", "b2", "b3"},
            {"a1", "a2", "a3"},
            id="soft-spread-beats-zone-weights",
        ),
        pytest.param(
            {"zones": {"weights": {"a": 100, "b": 0}}, "caps": [{"topologyKey": HOSTNAME_KEY, "max": 3}]},
            [at("a1", "t", 0), at("a2", "t", 1), at("a3", "t", 2)],
            {"a1", "a2", "a3"},
            {"b1", "b2", "b3"},
            id="zone-weights-beat-balance",
        ),
    ],
)
def test_preferences_are_weighed_in_order(policy, placements, better, worse):
    d = run(policy, nodes=AB, placements=placements)
    s = scores(d)
    assert set(d.passed()) == set(AB_NAMES)
    assert min(s[n] for n in better) > max(s[n] for n in worse), s


@given(
    st.lists(st.sampled_from(AB_NAMES), max_size=8),
    st.lists(st.sampled_from(AB_NAMES), max_size=3),
    st.dictionaries(st.sampled_from("ab"), st.integers(0, 100), max_size=2),
)
def test_a_free_split_is_never_outscored_by_a_lesser_preference(others, siblings, weights):
    """Invariant: with preferred anti-affinity on the zone, a node in a zone holding fewer of the
    shard's pods never scores below a node in a zone holding more, whatever the balance, the
    soft spread and the zone weights say."""
    policy = {
        **anti(ZONE_KEY, "Preferred"),
        "spread": [spread(ZONE_KEY, 1, "ScheduleAnyway")],
        "zones": {"weights": weights} if weights else None,
    }
    placements = [at(n, "t", i) for i, n in enumerate(others)] + [at(n, "s", 10 + i) for i, n in enumerate(siblings)]
    d = run({k: v for k, v in policy.items() if v is not None}, nodes=AB, placements=placements)
    s = scores(d)
    siblings_in = {z: sum(1 for n in siblings if n[0] == z) for z in "ab"}
    for x in AB_NAMES:
        for y in AB_NAMES:
            if (siblings_in[x[0]] > 0) < (siblings_in[y[0]] > 0):  # x's zone free of siblings, y's not
                assert s[x] >= s[y], (x, y, s)


# -- native parity in spreads (tests/unit/test_native_spread_conformance.py has upstream's cases)


def test_two_hard_spreads_leave_out_nodes_lacking_either_key():
    """Native: with hard spreads on zone and rack, a node without a rack label counts neither as a
    zone's domain nor for its pods. Here zone b's only racked node is empty, so zone b counts 0
    pods (its unracked node's 2 pods do not count), and zone a's node would make skew 2."""
    nodes = [node("a1", "a", rack="r1"), node("b1", "b", rack="r2"), node("b2", "b")]
    policy = {"spread": [spread(ZONE_KEY, 1), spread("rack", 2)]}
    d = run(policy, nodes=nodes, placements=[at("a1", "t", 0), at("b2", "t", 1), at("b2", "t", 2)])
    assert outcomes(d) == {"a1": "F:spread", "b1": "P", "b2": "U:spread"}
    one_key = run({"spread": [spread(ZONE_KEY, 1)]}, nodes=nodes, placements=[at("a1"), at("b2"), at("b2")])
    assert outcomes(one_key)["a1"] == "P"  # with one key every zoned node counts (b holds 2)


def test_soft_spread_scores_only_pods_on_nodes_the_pod_could_use():
    """Native, nodeAffinityPolicy Honor (the default): pods on nodes the pod's nodeSelector
    excludes do not count. b2 (hdd, excluded) holds 3 pods, a1 holds 1: zone b counts 0, so b1 is
    the better node (counting every node, zone b would hold 3 and a would look better)."""
    nodes = [node("a1", "a", disk="ssd"), node("a2", "a", disk="ssd"), node("b1", "b", disk="ssd"), node("b2", "b")]
    pod = PodRequest("db/x", constraints=NodeConstraints(selector=(("disk", "ssd"),)))
    placements = [at("a1"), *many("b2", 3)]
    honor = run({"spread": [spread(ZONE_KEY, 1, "ScheduleAnyway")]}, nodes=nodes, placements=placements, pod=pod)
    s = scores(honor)
    assert s["b1"] > max(s["a1"], s["a2"]), s
    ignore = {"spread": [{**spread(ZONE_KEY, 1, "ScheduleAnyway"), "nodeAffinityPolicy": "Ignore"}]}
    s = scores(run(ignore, nodes=nodes, placements=placements, pod=pod))
    assert s["b1"] < min(s["a1"], s["a2"]), s

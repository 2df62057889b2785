"""Terminating pods, per rule: the invariant and its table of cases.

The invariant (docs/concepts/which-pods-count.md): **no hard rule is broken once the pods now
terminating are gone, and no cap is exceeded at any moment** (a terminating pod still holds its
node). Per rule that means:

* caps: counted. A cap must hold at every moment; their going only lowers a count.
* shardAntiAffinity (Required): counted. It is a cap of one pod of the shard per domain.
* spread (DoNotSchedule, and ScheduleAnyway's score): not counted. The skew is judged on the
  state once they are gone, as native PodTopologySpread does; counting them steered a drain's
  replacement away from its zone (skew 2 once the old pod went, 5 of 6 drains).
* zones, ordinal zones: not read. A pod's own zone is judged, not other pods'.

The drain property below draws clusters, policies and a pod being drained (terminating, its
node cordoned), and holds: every node the engine passes keeps the invariant, every node it
refuses for a rule breaks it, and when some node keeps it the replacement is placed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import parse_spec
from extender.engine import NodeInfo, Placement, PlacementKind, PodRequest, Snapshot, Topology, evaluate
from extender.engine.checker import Member, violations

from .test_engine_rules import ABC_NAMES, HOSTNAME_KEY, ZONE_KEY, at, expect, group, outcomes, run
from .test_properties import violations as pod_violations

TERMINATING = PlacementKind.TERMINATING
ZONE_SPREAD = {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}
HOST_CAP1 = {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}
ZONE_CAP2 = {"caps": [{"topologyKey": ZONE_KEY, "max": 2}]}
ZONE_ANTI = {"shardAntiAffinity": [{"topologyKey": ZONE_KEY, "mode": "Required"}]}


@pytest.mark.parametrize(
    ("policy", "placements", "pod", "expected"),
    [
        pytest.param(
            ZONE_SPREAD,
            [at("a1", kind=TERMINATING), at("a2"), at("b1"), at("b2"), at("c1"), at("c2")],
            PodRequest("db/new"),
            expect("a1 a2", group("F:spread", "b1 b2 c1 c2")),
            id="spread-drain-replacement-goes-back-to-the-zone-being-emptied",
        ),
        pytest.param(
            ZONE_SPREAD,
            [at("a1", kind=TERMINATING), at("a2", kind=TERMINATING), at("b1"), at("c1")],
            PodRequest("db/new"),
            expect("a1 a2", group("F:spread", "b1 b2 c1 c2")),
            id="spread-a-zone-of-terminating-pods-only-is-empty",
        ),
        pytest.param(
            {"spread": [{"topologyKey": HOSTNAME_KEY, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]},
            [at(n) for n in ABC_NAMES if n != "b2"] + [at("b2", kind=TERMINATING)],
            PodRequest("db/new"),
            expect("b2", group("F:spread", "a1 a2 b1 c1 c2")),
            id="spread-node-key-counts-the-node-without-its-terminating-pod",
        ),
        pytest.param(
            HOST_CAP1,
            [at("a1", kind=TERMINATING), at("b1")],
            PodRequest("db/new"),
            expect("a2 b2 c1 c2", group("F:caps", "a1 b1")),
            id="cap-a-terminating-pod-still-holds-its-node",
        ),
        pytest.param(
            ZONE_CAP2,
            [at("a1", kind=TERMINATING), at("a2"), at("b1")],
            PodRequest("db/new"),
            expect("b1 b2 c1 c2", group("F:caps", "a1 a2")),
            id="cap-zone-full-until-the-terminating-pod-is-gone",
        ),
        pytest.param(
            ZONE_ANTI,
            [at("a1", "s", 0, kind=TERMINATING)],
            PodRequest("db/s-1", shard="s", ordinal=1),
            expect("b1 b2 c1 c2", group("F:shardAntiAffinity", "a1 a2")),
            id="anti-affinity-a-terminating-sibling-still-holds-its-zone",
        ),
        pytest.param(
            {**ZONE_SPREAD, **HOST_CAP1},
            [at("a1", kind=TERMINATING), at("b1"), at("c1")],
            PodRequest("db/new"),
            expect("a2", group("F:caps", "a1 b1 c1") | group("F:spread", "b2 c2")),
            id="spread-and-cap-together-the-zone-being-emptied-on-another-node",
        ),
        pytest.param(
            {"zones": {"allowed": ["b", "c"]}},
            [at("a1", kind=TERMINATING)],
            PodRequest("db/new"),
            expect("b1 b2 c1 c2", group("U:zones", "a1 a2")),
            id="zones-another-pod-terminating-outside-changes-nothing",
        ),
    ],
)
def test_terminating_pods_per_rule(policy, placements, pod, expected) -> None:
    assert outcomes(run(policy, pod=pod, placements=placements)) == expected


# -- the drain property --------------------------------------------------------------------------


@st.composite
def drains(draw):
    zones = draw(st.integers(2, 4))
    per_zone = draw(st.integers(1, 3))
    names = [f"z{z}n{i}" for z in range(zones) for i in range(per_zone)]
    nodes = [NodeInfo(name, {ZONE_KEY: name[:2], HOSTNAME_KEY: name}) for name in names]
    policy = draw(
        st.sampled_from(
            [
                ZONE_SPREAD,
                {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 2, "whenUnsatisfiable": "DoNotSchedule"}]},
                HOST_CAP1,
                ZONE_CAP2,
                {**ZONE_SPREAD, **HOST_CAP1},
                {**ZONE_SPREAD, **ZONE_CAP2},
            ]
        )
    )
    # A state that keeps the policy, built pod by pod as a scheduler would, then one pod drained.
    placements: list[Placement] = []
    for i in range(draw(st.integers(1, 2 * len(names)))):
        fits = [n for n in names if not _state_violations(policy, nodes, [*placements, Placement(f"db/p{i}", n)])]
        if not fits:
            break
        placements.append(Placement(f"db/p{i}", draw(st.sampled_from(fits))))
    drained = draw(st.integers(0, len(placements) - 1))
    also = set(draw(st.lists(st.integers(0, len(placements) - 1), max_size=2)))  # others terminating meanwhile
    placements = [
        Placement(p.pod, p.node, kind=TERMINATING) if i == drained or i in also else p for i, p in enumerate(placements)
    ]
    if draw(st.booleans()):  # kubectl drain cordons the node first
        nodes = [NodeInfo(n.name, n.labels, n.name != placements[drained].node) for n in nodes]
    return policy, nodes, placements


def _state_violations(policy: dict, nodes: list[NodeInfo], placements: list[Placement]) -> list[str]:
    """The checker on a state: caps and anti-affinity over every pod, spreads over the pods that
    stay (the invariant's two halves)."""
    spec = parse_spec(policy, "drain")
    by_name = {n.name: n for n in nodes}
    everyone = [Member(p.pod, p.node) for p in placements]
    staying = [Member(p.pod, p.node) for p in placements if p.kind is not TERMINATING]
    caps_only = parse_spec({"caps": policy.get("caps", [])}, "drain")
    spread_only = parse_spec({"spread": policy.get("spread", [])}, "drain")
    size = len(staying)
    found = violations(caps_only, everyone, by_name, size) + violations(spread_only, staying, by_name, size)
    assert spec is not None
    return [v.message for v in found]


@settings(max_examples=400, deadline=None)
@given(drains())
def test_a_drains_replacement_keeps_the_invariant_and_is_placed(case) -> None:
    policy, nodes, placements = case
    spec = parse_spec({**policy, "deadEndAvoidance": False}, "drain")
    snapshot = Snapshot(Topology(nodes), tuple(placements))
    decision = evaluate(spec, PodRequest("db/new"), snapshot, [n.name for n in nodes if n.schedulable])
    before = _state_violations(policy, nodes, placements)
    keeps = []
    for node in (n for n in nodes if n.schedulable):
        if before:  # several pods leaving at once broke a spread already: the new pod's own rule, as native
            by_name = {n.name: n for n in nodes}
            after = pod_violations(policy, by_name, placements, None, PodRequest("db/new"), node.name)
        else:  # the state once the new pod is placed, whole
            after = _state_violations(policy, nodes, [*placements, Placement("db/new", node.name)])
        verdict = decision.verdicts[node.name]
        assert verdict.passed == (not after), (node.name, verdict, after)
        keeps.append(not after)
    if not before and any(keeps):
        assert decision.passed(), "the replacement is placed whenever some node keeps the invariant"

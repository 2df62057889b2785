"""Dead-end lookahead when the group is larger than its StatefulSets declare yet."""

from __future__ import annotations

from extender.api.policy import PlacementPolicySpec
from extender.engine import NodeConstraints, NodeInfo, Placement, PodRequest, Requirement, Snapshot, Topology, evaluate
from extender.engine.context import Context
from extender.engine.lookahead import _spread_levels, build_model, pods_to_come

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
NETEASE = PlacementPolicySpec.model_validate(
    {
        "group": {"size": 6},
        "caps": [
            {"topologyKey": HOST, "fraction": "1/3", "comparison": "LessThan"},
            {"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"},
        ],
        "shardAntiAffinity": [{"topologyKey": ZONE}],
    }
)
NODES = Topology([NodeInfo(f"node-{z}{i}", {HOST: f"node-{z}{i}", ZONE: f"zone-{z}"}) for z in "abc" for i in (1, 2)])


def test_undeclared_pods_are_assumed_to_fill_the_short_shards() -> None:
    """e2e repetition 17: replicas raised one at a time; shard 2 declares 1 of its 2 pods."""
    placed = (
        Placement("r/s0-0", "node-c1", "s0", 0),
        Placement("r/s2-0", "node-b2", "s2", 0),
        Placement("r/s0-1", "node-a2", "s0", 1),
        Placement("r/s1-0", "node-a1", "s1", 0),
    )
    snap = Snapshot(NODES, placed, group_size=6, shard_replicas={"s0": 2, "s1": 2, "s2": 1})
    pod = PodRequest("r/s1-1", "s1", 1)
    assert pods_to_come(Context.build(NETEASE, pod, snap)) == ({"s2": {None: 1}}, 0)
    decision = evaluate(NETEASE, pod, snap, [n for n in NODES.nodes])
    # node-c2 would leave s2-1 only node-b1, in zone-b beside s2-0: a dead end.
    assert decision.passed() == ["node-b1"]
    assert decision.verdicts["node-c2"].rule == "deadEndAvoidance"


def test_extra_pods_beyond_even_shards_stay_shardless() -> None:
    snap = Snapshot(NODES, (), group_size=7, shard_replicas={"s0": 2, "s1": 1})
    futures, shardless = pods_to_come(Context.build(NETEASE, PodRequest("r/s0-0", "s0", 0), snap))
    assert (futures, shardless) == ({"s0": {None: 1}, "s1": {None: 2}}, 3)


def test_a_fallback_group_of_dead_ends_hands_over_to_the_next_group() -> None:
    """Karmada's ordered groups: move to the next group only when no node of the first is feasible; a node that
    would strand the rest of the group is not feasible. t-0 sits in zone-b, so t-1 can only use
    zone-a's single node: s-0 taking it would leave t-1 nowhere."""
    spec = PlacementPolicySpec.model_validate(
        {
            "zones": {"fallbackGroups": [["zone-a"], ["zone-b"]]},
            "caps": [{"topologyKey": HOST, "max": 1}],
            "shardAntiAffinity": [{"topologyKey": ZONE}],
        }
    )
    nodes = Topology(
        [
            NodeInfo(n, {HOST: n, ZONE: z})
            for n, z in (("a1", "zone-a"), ("b1", "zone-b"), ("b2", "zone-b"), ("b3", "zone-b"))
        ]
    )
    snap = Snapshot(nodes, (Placement("r/t-0", "b1", "t", 0),), group_size=3, shard_replicas={"s": 1, "t": 2})
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0), snap, ["a1", "b1", "b2", "b3"])
    assert decision.verdicts["a1"].rule == "deadEndAvoidance"
    assert decision.passed() == ["b2", "b3"]


def test_a_zone_spread_strands_pinned_pods_behind_a_free_one() -> None:
    """Only the spread's upper bound shows this dead end: s's ordinals are pinned za, zb, za
    (ordinal zones), the pod under test may use either zone (u-0 belongs in za, its volume is in
    zb). On za it leaves za needing two more against zb's one: za would end 2 above zb, beyond
    maxSkew 1, in whatever order they come. On zb all fits. (A pod of no StatefulSet is refused
    outright under ordinalZones.)"""
    spec = PlacementPolicySpec.model_validate(
        {
            "group": {"selector": {"matchLabels": {"app": "db"}}},
            "ordinalZones": {"order": ["za", "zb"]},
            "spread": [{"topologyKey": ZONE, "maxSkew": 1}],
        }
    )
    nodes = Topology([NodeInfo(z, {HOST: z, ZONE: z}) for z in ("za", "zb")])
    snap = Snapshot(nodes, (), group_size=4, shard_replicas={"s": 3, "u": 1})
    decision = evaluate(spec, PodRequest("db/u-0", "u", 0, frozenset({"zb"})), snap, ["za", "zb"])
    assert decision.passed() == ["zb"]
    assert decision.verdicts["za"].rule == "deadEndAvoidance"
    assert decision.analysis.certainty == "exact"


def test_caps_too_tight_for_the_group_filter_nothing() -> None:
    """When every candidate strands someone, none is preferred: the pod is placed, the rest wait."""
    spec = PlacementPolicySpec.model_validate({"caps": [{"topologyKey": HOST, "max": 1}]})
    snap = Snapshot(NODES, (), group_size=10, shard_replicas={"s": 10})
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0), snap, list(NODES.nodes))
    assert len(decision.passed()) == 6 and decision.analysis.stranded == 0


def test_a_million_pods_to_come_cost_no_more_than_ten() -> None:
    """Pods to come are counted, never listed: a million-replica StatefulSet is one kind."""
    spec = PlacementPolicySpec.model_validate(
        {"caps": [{"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"}], "ordinalZones": {}}
    )
    snap = Snapshot(NODES, (), group_size=1_000_000, shard_replicas={"s": 1_000_000})
    ctx = Context.build(spec, PodRequest("r/s-0", "s", 0), snap)
    futures, shardless = pods_to_come(ctx)
    assert shardless == 0 and sum(futures["s"].values()) == 999_999 and len(futures["s"]) == 3
    # Its volume in another zone lets the pod use two zones: two classes for the analysis to weigh.
    other = next(z for z in ("zone-a", "zone-b", "zone-c") if z != ctx.ideal_zone)
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0, frozenset({other})), snap, list(NODES.nodes))
    assert decision.analysis.certainty == "exact"


def test_one_class_of_usable_candidates_is_moot() -> None:
    """A dead end is refused only when another candidate keeps the group feasible, so with one
    class the group can use the answer cannot change and the pods to come are not counted. The
    same pod with a second usable class is analysed (and there the group is feasible)."""
    spec = PlacementPolicySpec.model_validate({"caps": [{"topologyKey": HOST, "max": 1}], "ordinalZones": {}})
    snap = Snapshot(NODES, (), group_size=4, shard_replicas={"s": 4})
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0), snap, list(NODES.nodes))
    assert decision.analysis.certainty == "moot" and decision.analysis.to_come == 0
    assert len(decision.passed()) == 2  # the two nodes of the ordinal's zone
    assert any("nothing to choose between" in note for note in decision.notes)
    ctx = Context.build(spec, PodRequest("r/s-0", "s", 0), snap)
    other = next(z for z in ("zone-a", "zone-b", "zone-c") if z != ctx.ideal_zone)
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0, frozenset({other})), snap, list(NODES.nodes))
    assert decision.analysis.certainty == "exact" and decision.analysis.to_come == 3


def test_anti_affinity_on_node_and_zone_judges_loaded_nodes_too() -> None:
    """With anti-affinity on both keys the zone's decides, and a node holding group pods must still
    be found in its class (a mismatch once left such candidates unjudged)."""
    spec = PlacementPolicySpec.model_validate(
        {
            "caps": [{"topologyKey": ZONE, "max": 2}],
            "shardAntiAffinity": [{"topologyKey": HOST}, {"topologyKey": ZONE}],
        }
    )
    placed = (Placement("r/t-0", "node-a1", "t", 0),)
    snap = Snapshot(NODES, placed, group_size=6, shard_replicas={"s": 3, "t": 3})
    decision = evaluate(spec, PodRequest("r/s-0", "s", 0), snap, list(NODES.nodes))
    # t still needs zones b and c for its two other pods, and s needs all three: every zone takes
    # exactly two, so s-0 may go anywhere with room; node-a1 (holding t-0) is judged like node-a2.
    assert decision.verdicts["node-a1"].passed == decision.verdicts["node-a2"].passed
    assert decision.analysis.certainty == "exact"


# -- the native refinements of spread, as the dead-end analysis sees them ----------------------
SPREAD_ZONE = {"topologyKey": ZONE, "maxSkew": 1}


def _model(spec: dict, nodes: list[NodeInfo], placed: tuple[Placement, ...] = (), pod: PodRequest | None = None):  # noqa: ANN202
    policy = PlacementPolicySpec.model_validate(spec)
    snap = Snapshot(Topology(nodes), placed, group_size=spec.get("group", {}).get("size", 6))
    return build_model(Context.build(policy, pod or PodRequest("r/x"), snap))


TWO_ZONES = [NodeInfo(f"node-{z}{i}", {HOST: f"node-{z}{i}", ZONE: f"zone-{z}"}) for z in "ab" for i in (1, 2)]


def test_min_domains_short_pins_the_final_minimum_at_zero() -> None:
    """2 zones, minDomains 3: the global minimum is 0 for good, so each zone ends at most maxSkew."""
    with_min = _model({"group": {"size": 2}, "spread": [{**SPREAD_ZONE, "minDomains": 3}]}, TWO_ZONES)
    assert with_min.spreads[0].missing == 1
    assert _spread_levels(with_min) == [(0,)]
    without = _model({"group": {"size": 4}, "spread": [SPREAD_ZONE]}, TWO_ZONES)
    assert _spread_levels(without) == [(1,), (2,)]  # the window of final minimums the counts allow
    enough = _model({"group": {"size": 4}, "spread": [{**SPREAD_ZONE, "minDomains": 2}]}, TWO_ZONES)
    assert enough.spreads[0].missing == 0


def test_min_domains_strands_what_native_would_strand() -> None:
    """Two zones of two nodes, maxSkew 1, minDomains 3: only 2 pods ever fit (one per zone);
    with pods still to come beyond that, every candidate is a dead end, so nothing is refused
    on dead-end grounds (the filter's own reason names minDomains)."""
    spec = PlacementPolicySpec.model_validate({"group": {"size": 3}, "spread": [{**SPREAD_ZONE, "minDomains": 3}]})
    snap = Snapshot(Topology(TWO_ZONES), (), group_size=3)
    decision = evaluate(spec, PodRequest("r/x"), snap, [n.name for n in TWO_ZONES])
    assert sorted(decision.passed()) == sorted(n.name for n in TWO_ZONES)
    assert decision.analysis is not None and decision.analysis.to_come == 2


def test_usable_view_narrows_the_node_classes_and_spread_counts() -> None:
    """A pod pinned to zone-a and zone-b by required node affinity: zone-c's nodes are no class
    of the model; with nodeAffinityPolicy Honor zone-c is no spread domain either, with Ignore it
    is a dead one (its count never grows)."""
    pinned = NodeConstraints(terms=((Requirement(ZONE, "In", ("zone-a", "zone-b")),),))
    pod = PodRequest("r/x", constraints=pinned)
    nodes = list(NODES.nodes.values())
    placed = (Placement("r/p0", "node-c1", None, None), Placement("r/p1", "node-a1", None, None))
    honor = _model({"spread": [SPREAD_ZONE]}, nodes, placed, pod)
    assert {k.values[0] for k in honor.classes} == {"zone-a", "zone-b"}
    assert honor.dead == [] and dict(honor.spreads[0].counts) == {"zone-a": 1}
    ignore = _model({"spread": [{**SPREAD_ZONE, "nodeAffinityPolicy": "Ignore"}]}, nodes, placed, pod)
    assert {k.values[0] for k in ignore.classes} == {"zone-a", "zone-b"}
    assert ignore.dead == [(0, 1)]  # zone-c: counted by the spread, never filled again


def test_taints_honor_and_ignore_agree_without_taints() -> None:
    nodes = list(NODES.nodes.values())
    a = _model({"spread": [{**SPREAD_ZONE, "nodeTaintsPolicy": "Honor"}]}, nodes)
    b = _model({"spread": [SPREAD_ZONE]}, nodes)
    assert (a.classes, a.dead, _spread_levels(a)) == (b.classes, b.dead, _spread_levels(b))


def test_anti_affinity_on_the_node_key_counts_the_pods_own_node() -> None:
    """Found by the oracle property (test_dead_end_oracle.py): s0 and s1 need all three nodes
    each (one pod per node), and zone zb (two nodes) may hold 3: whatever s0-1 does, zb would need
    4. The per-class view let s0's other pods use za-1 as if s0-1 were not there, found za-1
    feasible and refused zb: a refusal resting on a placement that does not exist. With the
    pod's own node taken from its StatefulSet in its class, every candidate is a dead end alike,
    and none is refused."""
    spec = PlacementPolicySpec.model_validate(
        {"caps": [{"topologyKey": ZONE, "max": 3}], "shardAntiAffinity": [{"topologyKey": HOST}]}
    )
    nodes = Topology([NodeInfo(n, {HOST: n, ZONE: f"z{n[1]}"}) for n in ("za-1", "zb-0", "zb-1")])
    snap = Snapshot(nodes, (Placement("r/s1-0", "za-1", "s1", 0),), group_size=6, shard_replicas={"s0": 3, "s1": 3})
    decision = evaluate(spec, PodRequest("r/s0-1", "s0", 1), snap, ["za-1", "zb-0", "zb-1"])
    assert decision.analysis.certainty == "relaxed"
    assert sorted(decision.passed()) == ["za-1", "zb-0", "zb-1"]
    assert not [v for v in decision.verdicts.values() if v.rule == "deadEndAvoidance"]

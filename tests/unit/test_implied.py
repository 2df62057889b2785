"""The native constraints a policy implies (extender/engine/implied.py, each rule's `imply`), proven
against the rules: on every node the in-tree filters (modelled independently in native_filter.py)
refuse no node the extender accepts, and refuse exactly what it refuses where the mirror says
"exact". A table of the cases docs/how-to/autoscalers.md names, then the same claims over random clusters."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, ZONE_KEY, PolicyError, parse_spec
from extender.engine import (
    Exactness,
    Mirror,
    NodeConstraints,
    NodeInfo,
    Placement,
    PodRequest,
    Requirement,
    Snapshot,
    Topology,
    evaluate,
    ordinal_pod_zones,
)
from extender.engine.implied import GATE, add_to_spec, disagreements, hard_pod_constraints, implied, remove_from_spec

from .native_filter import NativePod, node_affinity_passes, passes

RACK = "example.com/rack"
EXAMPLES = int(os.environ.get("IMPLIED_EXAMPLES", "300"))  # more for a longer search
GROUP = {"app": "db"}


@dataclass
class Cluster:
    nodes: list[NodeInfo]
    placements: list[Placement]  # the group's pods
    group_size: int | None = None

    def labels(self) -> dict[str, dict[str, str]]:
        return {n.name: dict(n.labels) for n in self.nodes}


def node(name: str, zone: str, rack: str = "r0") -> NodeInfo:
    return NodeInfo(name, {HOSTNAME_KEY: name, ZONE_KEY: zone, RACK: rack}, True, ())


def pod_labels(shard: str | None) -> dict[str, str]:
    return {**GROUP, "sts": shard} if shard else dict(GROUP)


def compare(policy: dict, cluster: Cluster, shard: str | None, ordinal: int | None, user_spec: dict | None = None):
    """(engine's passing nodes, native's passing nodes, mirrors) over the nodes the pod's own
    constraints admit (the in-tree filters refuse the rest before the extender sees them)."""
    spec = parse_spec({"group": {"selector": {"matchLabels": GROUP}}, "deadEndAvoidance": False, **policy}, "test")
    imp = implied(spec, shard_labels={"sts": shard} if shard else None)
    template, _, conflicts = add_to_spec(user_spec or {}, imp)
    assert not conflicts
    terms = (
        ((template.get("affinity") or {}).get("nodeAffinity") or {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms")
    )
    constraints = None
    selector = tuple(sorted(template.get("nodeSelector", {}).items()))
    if terms or selector:
        constraints = NodeConstraints(
            selector,
            tuple(
                tuple(Requirement(r["key"], r["operator"], tuple(r.get("values", ()))) for r in t["matchExpressions"])
                for t in terms
            )
            if terms
            else None,
            (),
        )
    request = PodRequest("db/new", shard, ordinal, constraints=constraints)
    snap = Snapshot(Topology(cluster.nodes), tuple(cluster.placements), cluster.group_size or spec.group.size, {})
    names = [n.name for n in cluster.nodes]
    decision = evaluate(spec, request, snap, names)
    pod_spec = template
    zones = ordinal_pod_zones(spec, request, snap)[0] if imp.gate else None
    if zones is not None:  # what the extender writes on the gated pod before lifting the gate
        pod_spec = add_to_spec(
            template, type(imp)(node_requirements=[{"key": ZONE_KEY, "operator": "In", "values": sorted(zones)}])
        )[0]
    incoming = NativePod("new", pod_labels(shard), None, pod_spec)

    def own_template(other: str | None) -> dict:  # each StatefulSet's pods carry their own set's terms
        return add_to_spec(user_spec or {}, implied(spec, shard_labels={"sts": other} if other else None))[0]

    existing = [NativePod(p.pod, pod_labels(p.shard), p.node, own_template(p.shard)) for p in cluster.placements]
    nodes = cluster.labels()
    user = NativePod("user", {}, None, user_spec or {})
    seen = [n for n in names if node_affinity_passes(user, nodes[n])]
    engine = {n for n in seen if decision.verdicts[n].passed}
    native = {n for n in seen if passes(incoming, n, nodes, existing)}
    mirrors = list(imp.mirrors)
    if imp.gate and zones is None:  # no zone order yet: the gate is lifted without narrowing
        mirrors.append(Mirror("ordinalZones", Exactness.NONE, "no zone order yet"))
    return engine, native, mirrors


THREE_ZONES = [node(f"{z}{i}", z) for z in "abc" for i in range(2)]


def placed(*where: tuple[str, str | None]) -> list[Placement]:
    ordinals: dict[str | None, int] = {}
    out = []
    for i, (host, shard) in enumerate(where):
        ordinal = ordinals.get(shard, 0)
        ordinals[shard] = ordinal + 1
        out.append(Placement(f"db/p{i}", host, shard, ordinal if shard else None))
    return out


CASES = [
    # (id, policy, placements, pod shard, pod ordinal, exact)
    ("cap 1 per node", {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}, placed(("a0", "s"), ("b0", "s")), "s", 2),
    (
        "cap 2 per node",
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 2}]},
        placed(("a0", "s"), ("a0", "s"), ("b0", "s")),
        "s",
        3,
    ),
    (
        "cap 2 per zone",
        {"caps": [{"topologyKey": ZONE_KEY, "max": 2}]},
        placed(("a0", "s"), ("a1", "s"), ("b0", "s")),
        "s",
        3,
    ),
    (
        "fraction with a fixed group size",
        {
            "group": {"selector": {"matchLabels": GROUP}, "size": 6},
            "caps": [{"topologyKey": ZONE_KEY, "fraction": "1/2", "comparison": "AtMost"}],
        },
        placed(("a0", "s"), ("a1", "s"), ("b0", "s")),
        "s",
        3,
    ),
    ("required zones", {"zones": {"allowed": ["a", "c"]}}, placed(("a0", "s")), "s", 1),
    ("fallback groups (relaxed)", {"zones": {"fallbackGroups": [["a"], ["b"]]}}, placed(("a0", "s")), "s", 1),
    ("zone spread 1", {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]}, placed(("a0", "s"), ("b0", "s")), "s", 2),
    (
        "shard anti-affinity per zone",
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY, "mode": "Required"}]},
        placed(("a0", "s"), ("b0", "t")),
        "s",
        1,
    ),
    (
        "ordinal zones + cap 1",
        {"ordinalZones": {}, "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        placed(("a0", "s"), ("b0", "s"), ("c0", "s")),
        "s",
        3,
    ),
    (
        "cap 2 and a spread on one key: the spread takes the key",
        {"caps": [{"topologyKey": ZONE_KEY, "max": 2}], "spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        placed(("a0", "s"), ("b0", "s")),
        "s",
        2,
    ),
]


@pytest.mark.parametrize(
    ("policy", "placements", "shard", "ordinal"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_an_implied_constraint_never_refuses_a_node_the_policy_accepts(policy, placements, shard, ordinal) -> None:
    engine, native, mirrors = compare(policy, Cluster(THREE_ZONES, placements), shard, ordinal)
    assert engine <= native, f"native refuses {sorted(engine - native)}, which the policy accepts"
    if all(m.exactness is Exactness.EXACT for m in mirrors):
        assert engine == native, f"claimed exact, but native accepts {sorted(native - engine)}"


def test_the_table_covers_each_exactness() -> None:
    seen = set()
    for _, policy, placements, shard, ordinal in CASES:
        seen |= {m.exactness for m in compare(policy, Cluster(THREE_ZONES, placements), shard, ordinal)[2]}
    assert seen == set(Exactness)


def test_cap_1_is_anti_affinity_and_cap_k_a_spread_with_unreachable_min_domains() -> None:
    spec = parse_spec({"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}, {"topologyKey": ZONE_KEY, "max": 3}]}, "test")
    imp = implied(spec, group_labels={"app": "db"})
    assert imp.pod_anti == [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOSTNAME_KEY}]
    (spread,) = imp.spreads
    assert spread["topologyKey"] == ZONE_KEY and spread["maxSkew"] == 3 and spread["minDomains"] == 2**31 - 1
    assert spread["nodeAffinityPolicy"] == "Ignore" and spread["whenUnsatisfiable"] == "DoNotSchedule"


def test_a_fraction_of_a_changing_size_is_not_mirrored() -> None:
    """A stale limit would be stricter than the rule once the group grows: nothing is emitted."""
    spec = parse_spec({"caps": [{"topologyKey": ZONE_KEY, "fraction": "1/2", "comparison": "AtMost"}]}, "test")
    imp = implied(spec, group_labels={"app": "db"})
    assert imp.empty
    (cap,) = [m for m in imp.mirrors if m.rule == "caps"]
    assert cap.exactness is Exactness.NONE and "group size" in cap.native


def test_ordinal_zones_put_the_gate_in_the_template() -> None:
    spec = parse_spec({"ordinalZones": {}}, "test")
    imp = implied(spec, group_labels={"app": "db"})
    template, added, _ = add_to_spec({"containers": []}, imp)
    assert template["schedulingGates"] == [{"name": GATE}]
    assert remove_from_spec(template, added) == {"containers": []}


def test_adding_and_removing_leaves_the_templates_own_constraints() -> None:
    own = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                        {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]},
                    ]
                }
            }
        },
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": RACK, "whenUnsatisfiable": "ScheduleAnyway"}],
    }
    spec = parse_spec({"zones": {"allowed": ["a"]}, "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}, "test")
    imp = implied(spec, group_labels={"app": "db"})
    template, added, conflicts = add_to_spec(own, imp)
    assert not conflicts
    terms = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2, "a new term would widen the ORed terms"
    assert all({"key": ZONE_KEY, "operator": "In", "values": ["a"]} in t["matchExpressions"] for t in terms)
    assert remove_from_spec(template, added) == own


def test_a_templates_own_spread_on_the_same_key_is_a_conflict_not_a_second_constraint() -> None:
    own = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule"}]}
    spec = parse_spec({"caps": [{"topologyKey": ZONE_KEY, "max": 2}]}, "test")
    template, added, conflicts = add_to_spec(own, implied(spec, group_labels={"app": "db"}))
    assert template == own and added["topologySpreadConstraints"] == []
    assert len(conflicts) == 1 and "remove the template's" in conflicts[0]


# -- disagreement ------------------------------------------------------------------------------------
def test_constraints_the_policy_implies_raise_no_warning_and_others_do() -> None:
    spec = parse_spec({"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]}, "test")
    imp = implied(spec, group_labels={"app": "db"})
    template, _, _ = add_to_spec({}, imp)
    assert disagreements(hard_pod_constraints(template), {"app": "db"}, imp) == []
    stricter = {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE_KEY, "labelSelector": {"matchLabels": {"app": "db"}}}
        ]
    }
    (warning,) = disagreements(hard_pod_constraints(stricter), {"app": "db"}, imp)
    assert "topologySpreadConstraints[0]" in warning and "not implied" in warning
    other = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOSTNAME_KEY}
                ]
            }
        }
    }
    (warning,) = disagreements(hard_pod_constraints(other), {"app": "db"}, imp)
    assert "another group" in warning


# -- the same claims over random clusters -------------------------------------------------------------
@st.composite
def random_cases(draw):
    zones = ["a", "b", "c"][: draw(st.integers(1, 3))]
    nodes = [
        node(f"{z}{i}", z, draw(st.sampled_from(["r0", "r1"]))) for z in zones for i in range(draw(st.integers(1, 3)))
    ]
    hosts = [n.name for n in nodes]
    where = draw(st.lists(st.tuples(st.sampled_from(hosts), st.sampled_from(["s", "t"])), max_size=9))
    policy: dict = {}
    size = draw(st.sampled_from([None, 6, 9]))
    if size:
        policy["group"] = {"selector": {"matchLabels": GROUP}, "size": size}
    keys = st.lists(st.sampled_from([HOSTNAME_KEY, ZONE_KEY, RACK]), unique=True, max_size=2)
    policy["caps"] = [
        draw(
            st.sampled_from(
                [{"topologyKey": k, "max": m} for m in (1, 2, 3)]
                + [
                    {"topologyKey": k, "fraction": f, "comparison": c}
                    for f in ("1/2", "2/3")
                    for c in ("LessThan", "AtMost")
                ]
            )
        )
        for k in draw(keys)
    ]
    policy["spread"] = [
        {
            "topologyKey": k,
            "maxSkew": draw(st.integers(1, 2)),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
        }
        for k in draw(keys)
    ]
    policy["shardAntiAffinity"] = [
        {"topologyKey": k, "mode": draw(st.sampled_from(["Required", "Preferred"]))} for k in draw(keys)
    ]
    if draw(st.booleans()):
        policy["zones"] = {"allowed": draw(st.lists(st.sampled_from(zones), min_size=1, unique=True))}
    if draw(st.booleans()):
        policy["ordinalZones"] = {}
    user_spec = None
    if draw(st.booleans()):
        user_spec = {"nodeSelector": {RACK: draw(st.sampled_from(["r0", "r1"]))}}
    placements = placed(*where)
    ordinal = sum(1 for _, s in where if s == "s")
    return policy, Cluster(nodes, placements, size), ordinal, user_spec


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_cases())
def test_over_random_clusters_implied_is_never_stricter_and_exact_where_claimed(case) -> None:
    policy, cluster, ordinal, user_spec = case
    try:
        engine, native, mirrors = compare(policy, cluster, "s", ordinal, user_spec)
    except PolicyError:
        assume(False)
        return
    assert engine <= native, f"native refuses {sorted(engine - native)}, which the policy accepts"
    if all(m.exactness is Exactness.EXACT for m in mirrors):
        assert engine == native, f"claimed exact, but native accepts {sorted(native - engine)}"


def test_a_selector_is_written_as_the_api_server_stores_it_and_compared_by_meaning() -> None:
    """No `matchLabels: {}` or `values: []` (the API server drops them, and retire would then miss
    what adopt wrote); the requirements the API server merges from matchLabelKeys are no disagreement."""
    spec = parse_spec(
        {
            "group": {
                "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "matchLabelKeys": ["rev"],
            },
            "caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}],
        },
        "test",
    )
    imp = implied(spec)
    (term,) = imp.pod_anti
    assert term["labelSelector"] == {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    merged = {
        **term,
        "labelSelector": {
            "matchExpressions": [
                *term["labelSelector"]["matchExpressions"],
                {"key": "rev", "operator": "In", "values": ["7"]},
            ]
        },
    }
    as_stored = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [merged]}}}
    assert disagreements(hard_pod_constraints(as_stored), {"app": "x", "rev": "7"}, imp) == []

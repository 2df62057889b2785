"""Planning (engine/plan.py, ops/plan.py): whether a group's pods still to come all fit, checked
against the exhaustive oracle of the dead-end tests; then plans over a cache built from objects:
grow feasible / infeasible with the nodes it needs, and drains safe and unsafe."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.engine import PodRequest
from extender.engine.lookahead import Certainty
from extender.engine.plan import group_fits
from extender.ops.plan import drain_each, plan_drain, plan_grow, render_drain, render_grow
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from .test_dead_end_oracle import _legal, _snapshot, scenarios
from builders import HOST, node, pod, statefulset


# -- the engine's answer against exhaustive placement ----------------------------------------------
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(scenarios())
def test_group_fits_agrees_with_exhaustive_placement(case) -> None:  # noqa: ANN001
    policy, nodes, replicas, order, placed_count, picks, constraints = case
    placed: dict = {}
    for p, pick in zip(order[:placed_count], picks, strict=False):
        legal = _legal(policy, nodes, replicas, placed, p, constraints)
        if legal:
            placed[p] = legal[pick % len(legal)]
    unplaced = [p for p in order if p not in placed]

    @cache
    def completes(state: frozenset, left: frozenset) -> bool:
        if not left:
            return True
        current = dict(state)
        p = min(left)
        return any(
            completes(state | {(p, n)}, left - {p}) for n in _legal(policy, nodes, replicas, current, p, constraints)
        ) or any(
            completes(state | {(q, n)}, left - {q})
            for q in sorted(left - {p})
            for n in _legal(policy, nodes, replicas, current, q, constraints)
        )

    oracle = completes(frozenset(placed.items()), frozenset(unplaced))
    usable = [n.name for n in nodes if constraints.matches_affinity(n) and constraints.tolerates_taints(n)]
    firsts = [PodRequest(f"db/{s}-{o}", s, o, constraints=constraints) for s, o in unplaced]
    fit = group_fits(policy, firsts, _snapshot(nodes, replicas, placed), usable)
    if fit.certainty is Certainty.EXACT:
        assert fit.feasible == oracle, (fit, placed, unplaced)
    elif fit.certainty is Certainty.RELAXED and not fit.feasible:  # a relaxed "no" is proven; a "yes" is not
        assert not oracle, (fit, placed, unplaced)


# -- plans over a cache ------------------------------------------------------------------------------
def store_with(layout: dict[str, int], policy: dict, placed: list[str], replicas: int) -> ClusterStore:
    """A cache: nodes per zone (a1, a2, b1...), StatefulSet db with `replicas`, its pods db-i on `placed[i]`."""
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for zone, n in layout.items():
        for i in range(1, n + 1):
            store.apply("nodes", "ADDED", node(f"{zone}{i}", zone))
    sts = statefulset("db", replicas, labels={"app": "db"}, policy=policy)
    sts["metadata"]["uid"] = "uid-sts-db"
    store.apply("statefulsets", "ADDED", sts)
    for i, where in enumerate(placed):
        store.apply("pods", "ADDED", pod(f"db-{i}", sts="db", labels={"app": "db"}, policy=policy, node_name=where))
    return store


CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}
ORDINAL_CAP1 = {"ordinalZones": {"order": ["a", "b", "c"]}, "caps": [{"topologyKey": HOST, "max": 1}]}

GROW = [
    # (id, layout, policy, placed, target, feasible, nodes to add per zone)
    ("room for 2 more", {"a": 2, "b": 2, "c": 1}, CAP1, ["a1", "b1", "c1"], 5, True, {}),
    ("cap 1: 2 more need 2 nodes", {"a": 1, "b": 1, "c": 1}, CAP1, ["a1", "b1", "c1"], 5, False, {"a": 2}),
    (
        "ordinal zones: each new ordinal's zone",
        {"a": 1, "b": 1, "c": 1},
        ORDINAL_CAP1,
        ["a1", "b1", "c1"],
        5,
        False,
        {"a": 1, "b": 1},
    ),
    (
        "ordinal zones: room in the zones it needs",
        {"a": 2, "b": 2, "c": 1},
        ORDINAL_CAP1,
        ["a1", "b1", "c1"],
        5,
        True,
        {},
    ),
]


@pytest.mark.parametrize(
    ("layout", "policy", "placed", "target", "feasible", "add"), [g[1:] for g in GROW], ids=[g[0] for g in GROW]
)
def test_grow(layout, policy, placed, target, feasible, add) -> None:
    plan = plan_grow(store_with(layout, policy, placed, len(placed)), "db", "db", target)
    assert plan.feasible is feasible, render_grow(plan)
    if policy is CAP1 and not feasible:
        assert sum(plan.add.values()) == sum(add.values()), render_grow(plan)  # any zone will do: only the count
    else:
        assert plan.add == add, render_grow(plan)
    assert plan.certainty == "exact"


def test_growth_with_ordinal_zones_names_each_new_pods_zone() -> None:
    plan = plan_grow(store_with({"a": 1, "b": 1, "c": 1}, ORDINAL_CAP1, ["a1", "b1", "c1"], 3), "db", "db", 5)
    assert plan.pinned == {3: "a", 4: "b"}
    assert "db-3 -> zone a" in render_grow(plan) and "add 2 node(s)" in render_grow(plan)


def test_a_node_whose_pods_fit_elsewhere_is_safe_to_drain_and_one_whose_do_not_is_not() -> None:
    store = store_with({"a": 2, "b": 1, "c": 1}, ORDINAL_CAP1, ["a1", "b1", "c1"], 3)
    assert plan_drain(store, ["a1"]).safe, "db-0 can move to a2, in its zone"
    unsafe = plan_drain(store, ["b1"])
    assert not unsafe.safe and unsafe.groups[0].displaced == ["db/db-1"]
    assert "UNSAFE" in render_drain([unsafe])
    order = [p.nodes[0] for p in drain_each(store)]
    assert order[:2] == ["a1", "a2"], "safe ones first"


def test_draining_an_empty_node_touches_no_group() -> None:
    store = store_with({"a": 2}, CAP1, ["a1"], 1)
    plan = plan_drain(store, ["a2"])
    assert plan.safe and plan.groups == []


def test_an_unknown_node_says_so() -> None:
    with pytest.raises(LookupError, match="no such node"):
        plan_drain(store_with({"a": 1}, CAP1, [], 0), ["zz"])


def test_a_policys_group_grown_to_a_size() -> None:
    from extender.ops.plan import plan_group

    policy = {"group": {"selector": {"matchLabels": {"app": "db"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for name, zone in (("a1", "a"), ("b1", "b"), ("b2", "b")):
        store.apply("nodes", "ADDED", node(name, zone))
    store.apply("policies", "ADDED", {"metadata": {"name": "p", "namespace": "db"}, "spec": policy})
    for i, where in enumerate(["a1", "b1"]):
        store.apply("pods", "ADDED", pod(f"w-{i}", labels={"app": "db"}, policy_name="p", node_name=where))
    assert plan_group(store, "db", "p", 3).feasible
    grown = plan_group(store, "db", "p", 5)
    assert not grown.feasible and sum(grown.add.values()) == 2, render_grow(grown)
    assert "PlacementPolicy p in db: 2 -> 5 pods" in render_grow(grown)


def test_draining_a_selector_groups_pods_counts_every_displaced_pod() -> None:
    """A group of no StatefulSet has no group size: the displaced pods are what must fit again."""
    policy = {"group": {"selector": {"matchLabels": {"app": "web"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for name in ("n1", "n2", "n3"):
        store.apply("nodes", "ADDED", node(name, "a"))
    for i, where in enumerate(["n1", "n2"]):
        store.apply("pods", "ADDED", pod(f"w-{i}", labels={"app": "web"}, policy=policy, node_name=where))
    assert plan_drain(store, ["n1"]).safe, "one pod, one free node"
    assert not plan_drain(store, ["n1", "n2"]).safe, "two pods, one free node"


ZONE_SPREAD_CAP1 = {
    "spread": [{"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1}],
    "caps": [{"topologyKey": HOST, "max": 1}],
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.fixed_dictionaries({z: st.integers(1, 3) for z in "abc"}),
    policy=st.sampled_from([CAP1, ORDINAL_CAP1, ZONE_SPREAD_CAP1]),
    extra=st.integers(1, 6),
)
def test_a_plan_that_is_not_feasible_always_says_why(layout, policy, extra) -> None:  # noqa: ANN001
    """`plan statefulset/db --replicas 7` once printed "NOT feasible" with no reason. Over
    random layouts and targets, every plan and drain not feasible carries a reason, and prints it."""
    placed = [f"{z}1" for z in "abc"]
    store = store_with(layout, policy, placed, len(placed))
    plan = plan_grow(store, "db", "db", len(placed) + extra)
    if not plan.feasible:
        assert plan.why and plan.why in render_grow(plan), render_grow(plan)
    for drain in drain_each(store):
        for group in drain.groups:
            if not group.feasible:
                assert group.why and group.why in render_drain([drain]), render_drain([drain])

"""The in-scheduler placeable gate (extender/server/place_gate.py): which held pods a pass lifts,
a table of cases, and the invariant as a property over random clusters and event orders: the
pods lifted and still unbound never exceed the window plus the visible budget, so a hung
extender's cost to other pods is bounded whatever waits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import OPT_IN_RESOURCE, ORDINAL_ZONE_GATE, PLACEABLE_GATE, parse_spec
from extender.engine.implied import add_to_spec, implied
from extender.server.place_gate import PlaceGate
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, node, pod
from fakes import RecordedEvents

CAP1 = "cap 1"  # a per-node cap of 1 over the pods of its app


def cap1(app: str) -> dict:
    return {"group": {"selector": {"matchLabels": {"app": app}}}, "caps": [{"topologyKey": HOST, "max": 1}]}


def held(
    name: str,
    *,
    policy=CAP1,
    app: str = "db",
    opted_in: bool = True,
    gates=(PLACEABLE_GATE,),
    native: bool = False,
    **kw,
) -> dict:
    """An opted-in pod held by the placeable gate; `native`: carrying its policy's native form, as adopt writes it."""
    policy = cap1(app) if policy == CAP1 else policy
    obj = pod(name, labels={"app": app}, policy=policy, scheduler="default-scheduler", **kw)
    if native:
        obj["spec"], _, _ = add_to_spec(obj["spec"], implied(parse_spec(policy, "test")))
    if opted_in:
        obj["spec"]["containers"][0]["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}}
    obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return obj


def bound(name: str, on: str, *, app: str = "db", policy=CAP1) -> dict:
    policy = cap1(app) if policy == CAP1 else policy
    return pod(name, labels={"app": app}, policy=policy, node_name=on, phase="Running", scheduler="default-scheduler")


def cluster(nodes: int, pods: list[dict]) -> ClusterStore:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for i in range(nodes):
        store.apply("nodes", "ADDED", node(f"n{i}", "a"))
    for p in pods:
        store.apply("pods", "ADDED", p)
    return store


def lifted_names(gate: PlaceGate, now: float = 0.0) -> list[str]:
    """One pass, its lifts then shown by the watch (the pods without the gate)."""
    answers = gate.answers(now)
    for a in answers:
        gate.store.apply("pods", "MODIFIED", held(a.pod.name, app=a.pod.labels["app"], gates=()))
    return sorted(a.pod.name for a in answers)


@pytest.mark.parametrize(
    ("nodes", "pods", "window", "visible", "want", "event"),
    [
        (3, [held("db-0")], 4, 0, ["db-0"], None),
        (1, [bound("db-0", "n0"), held("db-1")], 4, 0, [], "WaitingForPlace"),
        (1, [bound("db-0", "n0"), held("db-1", native=True)], 4, 1, ["db-1"], None),
        (1, [bound("db-0", "n0"), held("db-1")], 4, 1, [], "WaitingForPlace"),
        (2, [held(f"db-{i}") for i in range(5)], 4, 0, ["db-0", "db-1"], None),
        (9, [held(f"x{i}", app=f"a{i}") for i in range(6)], 4, 0, ["x0", "x1", "x2", "x3"], None),
        (3, [held("db-0", policy={"caps": [{"topologyKey": HOST, "max": -1}]})], 4, 1, [], "InvalidPlacementPolicy"),
        (3, [held("db-0", opted_in=False)], 4, 1, [], None),
        (3, [held("db-0", gates=(ORDINAL_ZONE_GATE, PLACEABLE_GATE))], 4, 1, [], None),
        (3, [held("db-0", policy=None)], 4, 0, ["db-0"], None),
        (0, [held("db-0")], 4, 0, [], "WaitingForPlace"),
    ],
    ids=[
        "a place: lifted",
        "no place: kept, told why",
        "no place, its exact native form, the visible budget: lifted for autoscalers",
        "no place, no native form: kept (no autoscaler would act; the extender would be asked)",
        "a group gets as many lifts as it has places",
        "the window caps lifts across groups",
        "an invalid policy: kept, told why",
        "not the extender's pod: never lifted",
        "the ordinal-zone gate goes first",
        "no policy: any node is a place",
        "no node at all: kept",
    ],
)
def test_a_pass_lifts_exactly_the_pods_with_a_place_within_the_window(nodes, pods, window, visible, want, event):
    events = RecordedEvents()
    gate = PlaceGate(cluster(nodes, pods), events, window=window, visible=visible)
    assert lifted_names(gate) == want
    reasons = {reason for _, reason, _ in events.events}
    assert reasons == ({event} if event else set()), events.events
    if event:
        assert all(PLACEABLE_GATE in message for _, _, message in events.events)
        gate.answers(1.0)
        assert len(events.events) == 1, "told once while the reason holds"


def test_nothing_is_lifted_while_the_cache_is_unsynced() -> None:
    store = cluster(3, [held("db-0")])
    store.connection_lost("nodes", "watch closed")
    assert PlaceGate(store, RecordedEvents()).answers(0.0) == []


def test_a_lift_holds_the_window_until_bound_and_at_most_its_ttl() -> None:
    store = cluster(20, [held(f"x{i}", app=f"a{i}") for i in range(6)])
    gate = PlaceGate(store, RecordedEvents(), window=2, visible=0, lifted_ttl=60)
    assert lifted_names(gate, 0) == ["x0", "x1"]
    assert lifted_names(gate, 1) == [], "the window is full"
    store.apply("pods", "MODIFIED", bound("x0", "n0", app="a0"))
    assert lifted_names(gate, 2) == ["x2"], "a bound pod frees its slot"
    assert lifted_names(gate, 61.5) == ["x3"], "x1 lost its place or waits for another reason: not for good"
    assert lifted_names(gate, 62.5) == ["x4"], "and x2 after its own TTL"


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.integers(0, 6),
    groups=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    window=st.integers(0, 4),
    visible=st.integers(0, 2),
    steps=st.lists(st.tuples(st.sampled_from(["pass", "bind", "delete", "tick"]), st.integers(0, 40)), max_size=25),
)
def test_lifted_and_unbound_pods_never_exceed_the_window_and_the_visible_budget(
    nodes, groups, window, visible, steps
) -> None:
    """The invariant behind docs/operations/failure-modes.md: whatever waits and however events interleave,
    the pods this gate released into kube-scheduler's queue and that are still unbound (counted
    within the TTL) are at most window + visible."""
    pods = [held(f"g{g}-{i}", app=f"g{g}") for g, size in enumerate(groups) for i in range(size)]
    store = cluster(nodes, pods)
    gate = PlaceGate(store, RecordedEvents(), window=window, visible=visible, lifted_ttl=30)
    now = 0.0
    released: dict[str, float] = {}
    for action, arg in steps:
        if action == "pass":
            for answer in gate.answers(now):
                assert answer.gate == PLACEABLE_GATE and store.owns(answer.pod)
                released[answer.pod.uid] = now
                record = store.pods[answer.pod.uid]
                obj = held(record.name, app=record.labels["app"], gates=())
                store.apply("pods", "MODIFIED", obj)  # the lift, as the watch shows it
        elif action == "bind" and released:
            uid = sorted(released)[arg % len(released)]
            record = store.pods.get(uid)
            if record is not None and record.node is None and nodes:
                store.apply("pods", "MODIFIED", bound(record.name, f"n{arg % nodes}", app=record.labels["app"]))
        elif action == "delete" and released:
            uid = sorted(released)[arg % len(released)]
            if uid in store.pods:
                store.apply("pods", "DELETED", store_obj(store, uid))
        else:
            now += arg
        unbound = [u for u, at in released.items() if u in store.pods and store.pods[u].node is None and now - at <= 30]
        assert len(unbound) <= window + visible, (unbound, window, visible)


def store_obj(store: ClusterStore, uid: str) -> dict:
    record = store.pods[uid]
    return held(record.name, app=record.labels["app"], gates=())

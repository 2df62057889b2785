"""The in-scheduler placeable gate (extender/server/place_gate.py): which held pods a pass lifts,
a table of cases, and the invariant as a property over random clusters and event orders: the
pods lifted and still unbound never exceed the window plus the visible budget, so a hung
extender's cost to other pods is bounded whatever waits."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import OPT_IN_RESOURCE, ORDINAL_ZONE_GATE, PLACEABLE_GATE, parse_spec
from extender.engine.implied import add_to_spec, implied
from extender.server.gate_lifter import GateLifter
from extender.server.place_gate import LiftStage, PlaceGate
from extender.server.verbs import Verbs
from extender.state.store import ClusterStore

from builders import HOST, node, pod
from fakes import RecordedEvents, synced_store

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


def bound(name: str, on: str, *, app: str = "db", policy=CAP1, **kw) -> dict:
    policy = cap1(app) if policy == CAP1 else policy
    return pod(
        name, labels={"app": app}, policy=policy, node_name=on, phase="Running", scheduler="default-scheduler", **kw
    )


def cluster(nodes: int, pods: list[dict]) -> ClusterStore:
    return synced_store([node(f"n{i}", "a") for i in range(nodes)], pods)


def lifted_names(gate: PlaceGate, now: float = 0.0) -> list[str]:
    """One pass, its lifts then shown by the watch (the pods without the gate)."""
    answers = gate.answers(now)
    for a in answers:
        lifted = held(a.pod.name, app=a.pod.labels["app"], gates=(), namespace=a.pod.namespace)
        gate.store.apply("pods", "MODIFIED", lifted)
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
        (
            1,
            [bound("a-0", "n0", app="a", namespace="a"), held("a-1", app="a", namespace="a", native=True)]
            + [held("a-2", app="a", namespace="a", native=True)],
            4,
            1,
            ["a-1"],
            "WaitingForPlace",
        ),
        (
            1,
            [bound("a-0", "n0", app="a", namespace="a"), held("a-1", app="a", namespace="a", native=True)]
            + [bound("b-0", "n0", app="b", namespace="b"), held("b-1", app="b", namespace="b", native=True)],
            4,
            1,
            ["a-1", "b-1"],
            None,
        ),
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
        "the visible budget spent in a namespace: its next pod with no place kept",
        "the visible budget is per namespace: another tenant's pod is shown too",
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


def test_a_lift_holds_the_window_until_bound_and_at_most_its_ttl_after_kube_scheduler_tried_it() -> None:
    store = cluster(20, [held(f"x{i}", app=f"a{i}") for i in range(6)])
    gate = PlaceGate(store, RecordedEvents(), window=2, visible=0, lifted_ttl=60)
    assert lifted_names(gate, 0) == ["x0", "x1"]
    assert lifted_names(gate, 1) == [], "the window is full"
    store.apply("pods", "MODIFIED", bound("x0", "n0", app="a0"))
    assert lifted_names(gate, 2) == ["x2"], "a bound pod frees its slot"
    assert lifted_names(gate, 600) == [], "never tried by kube-scheduler (a partition): x1 and x2 keep counting"
    store.asks[store.pods["uid-db-x1"].uid] = 1  # a filter request named x1: kube-scheduler reached the extender
    assert lifted_names(gate, 601) == [], "its TTL starts now"
    tried = held("x2", app="a2", gates=())
    tried["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    store.apply("pods", "MODIFIED", tried)  # kube-scheduler tried x2 itself and no node fit
    assert lifted_names(gate, 630) == []
    assert lifted_names(gate, 661.5) == ["x3"], "x1 lost its place or waits for another reason: not for good"
    assert lifted_names(gate, 690.5) == ["x4"], "and x2, 60 s after the gate saw kube-scheduler had tried it"


def test_a_binding_the_api_server_accepted_frees_the_slot_before_the_watch_shows_it() -> None:
    """Lifts follow the extender's own binds: the slot frees when its Binding is accepted
    (Reservations.confirm), not one watch round trip later; a bind merely begun, or refused, frees nothing."""
    store = cluster(20, [held(f"x{i}", app=f"a{i}") for i in range(4)])
    gate = PlaceGate(store, RecordedEvents(), window=1, visible=0)
    assert lifted_names(gate, 0) == ["x0"]
    x0 = store.pods["uid-db-x0"]
    store.reservations.commit(x0, "n0")  # the bind verb's re-check passed; its Binding is in flight
    assert lifted_names(gate, 1) == [], "a bind in flight still counts: it may time out and send the pod back"
    store.reservations.confirm(x0.uid)
    assert lifted_names(gate, 2) == ["x1"], "the API server accepted x0's Binding"
    x1 = store.pods["uid-db-x1"]
    store.reservations.commit(x1, "n1")
    store.reservations.release(x1.uid)  # the Binding failed
    store.reservations.confirm(x1.uid)  # (nothing to confirm any more)
    assert lifted_names(gate, 3) == [], "a failed bind frees nothing"


def test_a_lift_answered_by_filter_still_counts_until_its_pod_is_bound() -> None:
    """In-scheduler mode, filter answers one node and kube-scheduler binds. The slot frees when the
    watch shows the pod bound, not at the answer: an answer kube-scheduler gave up on (its 100 ms),
    or one a partition swallowed mid-call, put the pod back in its queue uncounted, and the clean
    clone's worst-moment test found 7 lifted pods in the queue where the window is 6."""
    store = cluster(20, [held(f"x{i}", app=f"a{i}") for i in range(4)])
    gate = PlaceGate(store, RecordedEvents(), window=1, visible=0, lifted_ttl=60)
    assert lifted_names(gate, 0) == ["x0"]
    store.asks["uid-db-x0"] = 1  # filter answered x0 its node
    assert lifted_names(gate, 1) == [], "answered, not bound: it still counts"
    store.apply("pods", "MODIFIED", bound("x0", "n0", app="a0"))
    assert lifted_names(gate, 2) == ["x1"], "x0 bound"


def test_each_stage_of_a_lift_is_timed_once_from_the_pass_that_decided_it() -> None:
    """extender_placeable_gate_lift_seconds: asked from kube-scheduler's first request naming the
    pod, bound when the gate sees it bound; a pod asked again, or a shown pod (no place), adds nothing."""
    store = cluster(20, [held(f"x{i}", app=f"a{i}") for i in range(3)])
    stages: list[tuple[LiftStage, float]] = []
    gate = PlaceGate(store, RecordedEvents(), window=1, visible=0, on_stage=lambda s, t: stages.append((s, t)))
    assert lifted_names(gate, 10.0) == ["x0"]
    store.asks["uid-db-x0"], store.first_asked_at["uid-db-x0"] = 1, 10.025
    assert lifted_names(gate, 10.03) == []
    store.asks["uid-db-x0"] = 2  # asked again (its bind failed): its first ask was timed already
    assert lifted_names(gate, 10.04) == []
    store.apply("pods", "MODIFIED", bound("x0", "n0", app="a0"))
    assert lifted_names(gate, 10.09) == ["x1"]
    assert [s for s, _ in stages] == [LiftStage.ASKED, LiftStage.BOUND]
    assert [round(t, 3) for _, t in stages] == [0.025, 0.09]
    store.apply("pods", "DELETED", held("x1", app="a1", gates=()))
    assert lifted_names(gate, 11.0) == ["x2"] and len(stages) == 2, "a pod deleted unbound was never bound"


def test_a_written_lift_is_timed_from_its_pass() -> None:
    writer = SlowWriter()
    lifter, gate = _lifter(3, 1, writer)
    stages: list[LiftStage] = []
    gate.on_stage = lambda stage, _seconds: stages.append(stage)
    writer.release.set()
    assert lifter.pass_once() == 1 and lifter.drain(timeout=10) == 1
    assert stages == [LiftStage.WRITTEN]


@settings(max_examples=100, deadline=None)
@given(
    nodes=st.integers(1, 6),
    groups=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    window=st.integers(0, 4),
    ticks=st.lists(st.floats(0, 600), max_size=20),
)
def test_while_kube_scheduler_never_asks_no_more_than_the_window_is_ever_lifted(nodes, groups, window, ticks) -> None:
    """Property (the partition): kube-scheduler cannot reach the extender, so nothing lifted is
    bound or asked about. However long that lasts, the gate lifts at most `window` pods with a
    place in all (it lifted 36 over 8.5 minutes when a lift stopped counting 60 s after it was made)."""
    store = cluster(nodes, [held(f"g{g}-{i}", app=f"g{g}") for g, size in enumerate(groups) for i in range(size)])
    gate = PlaceGate(store, RecordedEvents(), window=window, visible=0, lifted_ttl=60)
    now, lifted = 0.0, []
    for tick in [0.0, *ticks]:
        now += tick
        lifted += lifted_names(gate, now)
    assert len(lifted) <= window, lifted


@settings(max_examples=150, deadline=None)
@given(
    nodes=st.integers(0, 6),
    groups=st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abc"), st.booleans()), min_size=1, max_size=5),
    window=st.integers(0, 4),
    visible=st.integers(0, 2),
    steps=st.lists(st.tuples(st.sampled_from(["pass", "bind", "delete", "tick"]), st.integers(0, 40)), max_size=25),
)
def test_lifted_and_unbound_pods_never_exceed_the_window_and_the_visible_budget(
    nodes, groups, window, visible, steps
) -> None:
    """The invariant behind docs/operations/failure-modes.md: whatever waits and however events interleave,
    the pods this gate released into kube-scheduler's queue with a place and still unbound (counted
    within the TTL) are at most window, and those shown to autoscalers at most `visible` per namespace
    (groups in random namespaces, some carrying their native form)."""
    pods = [
        held(f"g{g}-{i}", app=f"g{g}", namespace=ns, native=native)
        for g, (size, ns, native) in enumerate(groups)
        for i in range(size)
    ]
    store = cluster(nodes, pods)
    gate = PlaceGate(store, RecordedEvents(), window=window, visible=visible, lifted_ttl=30)
    now = 0.0
    released: dict[str, tuple[float, bool]] = {}
    for action, arg in steps:
        if action == "pass":
            for answer in gate.answers(now):
                assert answer.gate == PLACEABLE_GATE and store.owns(answer.pod)
                released[answer.pod.uid] = (now, answer.why.startswith("no place"))
                store.apply("pods", "MODIFIED", store_obj(store, answer.pod.uid))  # the lift, as the watch shows it
        elif action == "bind" and released:
            uid = sorted(released)[arg % len(released)]
            record = store.pods.get(uid)
            if record is not None and record.node is None and nodes:
                obj = bound(record.name, f"n{arg % nodes}", app=record.labels["app"], namespace=record.namespace)
                store.apply("pods", "MODIFIED", obj)
        elif action == "delete" and released:
            uid = sorted(released)[arg % len(released)]
            if uid in store.pods:
                store.apply("pods", "DELETED", store_obj(store, uid))
        else:
            now += arg
        unbound = [
            (store.pods[u].namespace, shown)
            for u, (at, shown) in released.items()
            if u in store.pods and store.pods[u].node is None and (shown or now - at <= 30)
        ]
        assert sum(1 for _, shown in unbound if not shown) <= window, (unbound, window)
        per_namespace = Counter(ns for ns, shown in unbound if shown)
        assert all(count <= visible for count in per_namespace.values()), (per_namespace, visible)


def store_obj(store: ClusterStore, uid: str) -> dict:
    """The pod as the watch shows it once lifted (no gate)."""
    record = store.pods[uid]
    native = record.hard_native is not None
    return held(record.name, app=record.labels["app"], gates=(), namespace=record.namespace, native=native)


MISSING = {"caps": [{"topologyKey": HOST, "max": -1}]}  # an invalid policy: never placeable


def test_a_tenant_whose_pods_cannot_be_placed_does_not_hold_another_tenants_pods() -> None:
    """40 held pods of one namespace with an invalid policy, 2 placeable ones of another: the
    first pass spends its evaluations on the 40, the second goes on where it stopped and lifts
    the 2 (before the rotation every pass began at the first held pod: the 2 waited for good)."""
    stuck = [held(f"a-{i}", namespace="a", app="stuck", policy=MISSING) for i in range(40)]
    placeable = [held(f"b-{i}", namespace="b", app=f"b{i}") for i in range(2)]
    events = RecordedEvents()
    gate = PlaceGate(cluster(4, stuck + placeable), events, window=4, visible=0, max_evaluations=32)
    assert lifted_names(gate, 0.0) == []
    assert lifted_names(gate, 0.2) == ["b-0", "b-1"]
    told = {key for key, reason, _ in events.events if reason == "InvalidPlacementPolicy"}
    assert len(told) == 40, "each of the 40 was told why it waits"


@settings(max_examples=100, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["invalid", "no-place", "place"]), min_size=1, max_size=60),
    max_evaluations=st.integers(1, 16),
    namespaces=st.integers(1, 4),
)
def test_every_held_pod_is_reached_within_ceil_held_over_the_evaluations(kinds, max_evaluations, namespaces) -> None:
    """Property: whatever the held pods are, within ceil(held / max_evaluations) passes each is
    lifted (it has a place) or told why it waits (its event): a pass never starves a pod."""
    pods = []
    for i, kind in enumerate(kinds):
        ns = f"ns{i % namespaces}"
        if kind == "invalid":
            pods.append(held(f"p{i}", namespace=ns, app=f"x{i}", policy=MISSING))
        elif kind == "no-place":  # its group already holds the one node under a cap of 1
            pods.append(held(f"p{i}", namespace=ns, app="full"))
        else:
            pods.append(held(f"p{i}", namespace=ns, app=f"x{i}", policy=None))
    full = []  # in each namespace, the group "full" already holds the one node under its cap of 1
    for n in range(namespaces):
        obj = bound(f"full-{n}", "n0", app="full")
        obj["metadata"]["namespace"], obj["metadata"]["uid"] = f"ns{n}", f"uid-full-{n}"
        full.append(obj)
    store = cluster(1, full + pods)
    events = RecordedEvents()
    gate = PlaceGate(store, events, window=len(kinds), visible=0, max_evaluations=max_evaluations)
    reached: set[str] = set()
    passes = -(-len(kinds) // max_evaluations)
    for step in range(passes):
        reached |= {a.pod.name for a in gate.answers(float(step))}
    reached |= {key.rsplit("/", 1)[-1] for key, _, _ in events.events}
    assert reached == {f"p{i}" for i in range(len(kinds))}, (sorted(reached), kinds)


@pytest.mark.parametrize("policy", [CAP1, None], ids=["with-a-policy", "without"])
def test_a_node_the_pods_own_selector_refuses_is_no_place(policy) -> None:  # noqa: ANN001
    """kube-scheduler refuses such a node itself: a pod lifted for it would hold the window for
    its TTL and never be bound."""
    nowhere = held("db-0", policy=policy)
    nowhere["spec"]["nodeSelector"] = {"example.com/nowhere": "true"}
    somewhere = held("db-1", policy=policy)
    somewhere["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "a"}
    events = RecordedEvents()
    gate = PlaceGate(cluster(2, [nowhere, somewhere]), events, window=4, visible=0)
    assert lifted_names(gate) == ["db-1"]
    assert [(key, reason) for key, reason, _ in events.events] == [("db/db-0", "WaitingForPlace")]


# -- the lifts' writes (GateLifter._lift_placeable): a pass hands them to writer threads and returns, so
# the slots filter's answers free during a slow PATCH are taken by the next pass, not after it


class SlowWriter:
    """A lift that takes until `release` is set (a busy API server); `fail` names pods it refuses."""

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.release = threading.Event()
        self.fail = fail
        self.started: list[str] = []
        self.lifted: list[str] = []
        self._lock = threading.Lock()

    def lift(self, answer) -> None:  # noqa: ANN001
        with self._lock:
            self.started.append(answer.pod.name)
        assert self.release.wait(10)
        if answer.pod.name in self.fail:
            raise RuntimeError("500 Internal Server Error")
        with self._lock:
            self.lifted.append(answer.pod.name)


def _lifter(pods: int, window: int, writer: SlowWriter) -> tuple[GateLifter, PlaceGate]:
    store = cluster(pods, [held(f"db-{i}") for i in range(pods)])  # one group, at most 1 a node
    gate = PlaceGate(store, RecordedEvents(), window=window, visible=0)
    return GateLifter(Verbs(store, None, RecordedEvents()), writer, place=gate), gate  # type: ignore[arg-type]


def test_a_pass_does_not_wait_for_its_writes_and_the_next_one_takes_a_freed_slot() -> None:
    writer = SlowWriter()
    lifter, gate = _lifter(6, 2, writer)
    assert lifter.pass_once(now=0.0) == 2, "handed over while both writes still hang"
    store = gate.store
    first = store.pods[next(iter(gate.lifted))]
    store.apply("pods", "MODIFIED", bound(first.name, "n0", app=first.labels["app"], namespace=first.namespace))
    assert lifter.pass_once(now=0.1) == 1, "the slot its bind freed is taken by the next pass"
    assert lifter.pass_once(now=0.2) == 0, "the window holds: two lifts still count"
    writer.release.set()
    assert lifter.drain(timeout=10) == 3 and len(writer.lifted) == 3


def test_a_failed_write_frees_its_slot_and_is_retried_only_after_retry_after() -> None:
    writer = SlowWriter(fail=frozenset({"db-0"}))
    lifter, gate = _lifter(3, 1, writer)
    writer.release.set()
    assert lifter.pass_once(now=0.0) == 1 and lifter.drain(timeout=10) == 0
    assert gate.lifted == {} and lifter._retry_at, "not lifted: it holds no slot and waits"
    assert lifter.pass_once(now=1.0) == 1 and lifter.drain(timeout=10) == 1
    assert writer.lifted == ["db-1"], "another pod took the slot; db-0 waits retry_after (5 s)"

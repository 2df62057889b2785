"""What would free a Pending pod (engine/remedy.py), as its PlacementRejected event and `explain`
say it: each kind of fix, computed by deciding again with it, over a cache built from objects."""

from __future__ import annotations

from extender.api.wire import ExtenderArgs
from extender.ops.explain import explain
from extender.server.verbs import Verbs
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, filter_args, node, pod, statefulset
from fakes import RecordedEvents

CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}


def cache(zones: dict[str, int]) -> tuple[ClusterStore, Verbs, RecordedEvents]:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for zone, n in zones.items():
        for i in range(1, n + 1):
            store.apply("nodes", "ADDED", node(f"{zone}{i}", zone))
    events = RecordedEvents()
    return store, Verbs(store, None, events), events  # type: ignore[arg-type]


def rejected(verbs: Verbs, events: RecordedEvents, p: dict) -> str:
    names = sorted(verbs.store.topology.nodes)
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, names)))
    assert not result.NodeNames
    (message,) = [m for _, reason, m in events.events if reason == "PlacementRejected"]
    return message


def test_a_full_cap_is_freed_by_a_node_in_any_zone_or_a_higher_cap() -> None:
    store, verbs, events = cache({"a": 1, "b": 1})
    store.apply("statefulsets", "ADDED", statefulset("db", 3, labels={"app": "db"}, policy=CAP1))
    for i, where in enumerate(["a1", "b1"]):
        store.apply("pods", "ADDED", pod(f"db-{i}", sts="db", labels={"app": "db"}, policy=CAP1, node_name=where))
    waiting = pod("db-2", sts="db", labels={"app": "db"}, policy=CAP1)
    store.apply("pods", "ADDED", waiting)
    message = rejected(verbs, events, waiting)
    assert "it would be placed with one more schedulable node in zone a or b" in message
    assert "a cap of 2 per kubernetes.io/hostname (now 1)" in message
    assert "would be placed with: a cap of 2" in "\n".join(
        f"would be placed with: {r}" for r in explain(store, "db", "db-2").remedies
    )


def test_a_rolling_update_under_a_cap_is_freed_by_splitting_the_group_by_revision() -> None:
    policy = {"group": {"selector": {"matchLabels": {"app": "web"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    store, verbs, events = cache({"a": 2})
    for i, where in enumerate(["a1", "a2"]):
        old = pod(f"web-old-{i}", labels={"app": "web", "pod-template-hash": "old"}, policy=policy, node_name=where)
        store.apply("pods", "ADDED", old)
    new = pod("web-new-0", labels={"app": "web", "pod-template-hash": "new"}, policy=policy)
    store.apply("pods", "ADDED", new)
    message = rejected(verbs, events, new)
    assert "group.matchLabelKeys: [pod-template-hash]" in message


def test_an_ordinal_whose_zone_has_no_node_is_freed_by_a_node_in_that_zone_only() -> None:
    policy = {"ordinalZones": {"order": ["a", "b", "c"]}}
    store, verbs, events = cache({"a": 1, "b": 1})
    store.apply("statefulsets", "ADDED", statefulset("db", 3, labels={"app": "db"}, policy=policy))
    waiting = pod("db-2", sts="db", labels={"app": "db"}, policy=policy)
    store.apply("pods", "ADDED", waiting)
    message = rejected(verbs, events, waiting)
    assert "one more schedulable node in zone c" in message and "zone a" not in message.split("placed with")[1]


def test_a_pod_no_change_frees_says_nothing_more() -> None:
    """Zones allowed that have no node and no shape to copy: no remedy is invented."""
    policy = {"zones": {"allowed": ["z"]}}
    store, verbs, events = cache({})
    p = pod("x-0", sts="x", labels={"app": "x"}, policy=policy)
    store.apply("statefulsets", "ADDED", statefulset("x", 1, labels={"app": "x"}, policy=policy))
    store.apply("pods", "ADDED", p)
    names: list[str] = []
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, names)))
    assert not result.NodeNames
    assert all("placed with" not in m for _, _, m in events.events)


def test_a_pod_that_finds_the_second_taken_is_owed_its_remedy_and_gets_it() -> None:
    """Two pods rejected within a second: the second's fix is computed by pay_remedies and sent
    as its event (kube-scheduler may not call filter for it again for minutes)."""
    store, verbs, events = cache({"a": 1})
    for sts in ("x", "y"):
        store.apply("statefulsets", "ADDED", statefulset(sts, 2, labels={"app": sts}, policy=CAP1))
        store.apply("pods", "ADDED", pod(f"{sts}-0", sts=sts, labels={"app": sts}, policy=CAP1, node_name="a1"))
    waiting = [pod(f"{sts}-1", sts=sts, labels={"app": sts}, policy=CAP1) for sts in ("x", "y")]
    for p in waiting:
        store.apply("pods", "ADDED", p)
        verbs.filter(ExtenderArgs.model_validate(filter_args(p, ["a1"])))
    fixed = [k for k, reason, m in events.events if reason == "PlacementRejected" and "placed with" in m]
    assert fixed == ["db/x-1"], "the second pod found the second taken"
    assert verbs.pay_remedies() == 0, "not within the same second"
    import time

    assert verbs.pay_remedies(now=time.monotonic() + 1.0) == 1
    fixed = [k for k, reason, m in events.events if reason == "PlacementRejected" and "placed with" in m]
    assert fixed == ["db/x-1", "db/y-1"]

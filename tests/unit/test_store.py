"""The watch cache's bookkeeping: events, relists, indexes, volume zones, policy resolution."""

from __future__ import annotations

import time

import pytest

from extender.api.policy import PolicyError
from extender.engine.model import PlacementKind
from extender.state.objects import parse_node, parse_pod, parse_volume
from extender.state.store import KINDS, ClusterStore
from extender.state.watcher import _lines

from builders import HOST, ZONE, claim, node, pod, policy_object, statefulset, volume

pytestmark = pytest.mark.alone("bounds a wait in wall-clock seconds")


@pytest.fixture
def store() -> ClusterStore:
    s = ClusterStore()
    for kind in KINDS:
        s.replace(kind, [])
    for i, z in enumerate("aabb"):
        s.apply("nodes", "ADDED", node(f"n{i}", z))
    return s


SPEC = {"caps": [{"topologyKey": HOST, "max": 1}]}


def group_nodes(store: ClusterStore, p: dict) -> list[str | None]:
    record = parse_pod(p)
    request, snap = store.decision_inputs(record, store.resolve_policy(record))
    # The placed pods arrive counted, the ones in flight listed: together, every placement.
    return sorted([*snap.node_pods().elements(), *("-" for pl in snap.placements if pl.node is None)])


def test_pod_events_move_pods_between_nodes_and_out(store) -> None:
    me = pod("r-9", sts="r", policy=SPEC)
    p = pod("r-0", sts="r", node_name="n0")
    store.apply("pods", "ADDED", p)
    assert group_nodes(store, me) == ["n0"]
    p["spec"]["nodeName"] = "n1"
    store.apply("pods", "MODIFIED", p)
    assert group_nodes(store, me) == ["n1"]
    store.apply("pods", "DELETED", p)
    assert group_nodes(store, me) == []


def test_relist_replaces_everything_of_a_kind(store) -> None:
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n0"))
    store.replace("pods", [pod("r-1", sts="r", node_name="n2")])
    assert group_nodes(store, pod("r-9", sts="r", policy=SPEC)) == ["n2"]
    store.replace("nodes", [node("x", "c")])
    assert sorted(store.topology.nodes) == ["x"]


def test_label_selector_group_uses_the_label_index(store) -> None:
    spec = {
        "group": {
            "selector": {
                "matchLabels": {"cluster": "c1"},
                "matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["arbiter"]}],
            }
        },
        **SPEC,
    }
    store.apply("pods", "ADDED", pod("a-0", sts="a", node_name="n0", labels={"cluster": "c1"}))
    store.apply("pods", "ADDED", pod("b-0", sts="b", node_name="n1", labels={"cluster": "c1"}))
    store.apply("pods", "ADDED", pod("c-0", sts="c", node_name="n2", labels={"cluster": "c2"}))
    store.apply("pods", "ADDED", pod("arb", node_name="n3", labels={"cluster": "c1", "role": "arbiter"}))
    store.apply("pods", "ADDED", pod("a-0", namespace="other", sts="a", node_name="n3", labels={"cluster": "c1"}))
    assert group_nodes(store, pod("a-1", sts="a", labels={"cluster": "c1"}, policy=spec)) == ["n0", "n1"]


def test_group_size_from_selected_statefulsets(store) -> None:
    spec = {"group": {"selector": {"matchLabels": {"cluster": "c1"}}}}
    store.apply("statefulsets", "ADDED", statefulset("a", 2, labels={"cluster": "c1"}))
    store.apply("statefulsets", "ADDED", statefulset("b", 3, labels={"cluster": "c1"}))
    store.apply("statefulsets", "ADDED", statefulset("c", 5, labels={"cluster": "c2"}))
    record = parse_pod(pod("a-0", sts="a", labels={"cluster": "c1"}, policy=spec))
    _, snap = store.decision_inputs(record, store.resolve_policy(record))
    assert snap.group_size == 5 and dict(snap.shard_replicas) == {"a": 2, "b": 3}
    record = parse_pod(
        pod("a-0", sts="a", labels={"cluster": "c1"}, policy={**spec, "group": {**spec["group"], "size": 9}})
    )
    _, snap = store.decision_inputs(record, store.resolve_policy(record))
    assert snap.group_size == 9


def test_volume_zones_come_from_claims_of_the_statefulset(store) -> None:
    store.apply("statefulsets", "ADDED", statefulset("crdb", 3, claim_templates=("data",)))
    store.apply("volumes", "ADDED", volume("pv0", "a"))
    store.apply("volumes", "ADDED", volume("pv1", "b", as_affinity=False))
    store.apply("claims", "ADDED", claim("data-crdb-0", "pv0"))
    store.apply("claims", "ADDED", claim("data-crdb-1", "pv1"))
    store.apply("claims", "ADDED", claim("data-crdb-2", None))  # not bound yet
    store.apply("claims", "ADDED", claim("data-other-0", "pv0"))
    record = parse_pod(pod("crdb-1", sts="crdb", policy={"ordinalZones": {}}, claims=("data-crdb-1",)))
    request, snap = store.decision_inputs(record, store.resolve_policy(record))
    assert dict(snap.volume_zones["crdb"]) == {0: "a", 1: "b"}
    assert request.volume_zones == frozenset({"b"})


def test_named_policy_is_parsed_once_and_follows_updates(store) -> None:
    record = parse_pod(pod("r-0", sts="r", policy_name="p"))
    with pytest.raises(PolicyError, match="not found"):
        store.resolve_policy(record)
    store.apply("policies", "ADDED", policy_object("p", SPEC))
    assert store.resolve_policy(record).caps[0].max == 1
    store.apply("policies", "MODIFIED", policy_object("p", {"caps": [{"topologyKey": HOST, "max": 0}]}))
    with pytest.raises(PolicyError, match="caps.0.max"):
        store.resolve_policy(record)


def test_reservation_of_a_pod_not_yet_in_the_cache_counts(store) -> None:
    me = pod("r-9", sts="r", policy=SPEC)
    store.reservations.commit(parse_pod(pod("r-0", sts="r")), "n3")
    assert group_nodes(store, me) == ["n3"]
    record = parse_pod(me)
    _, snap = store.decision_inputs(record, store.resolve_policy(record), tentative=False)
    assert [p.kind for p in snap.placements] == [PlacementKind.COMMITTED]


def test_a_reservation_counts_by_the_watchs_copy_of_its_pod(store) -> None:
    """Whose reservations a decision counts is read from the watch's record of each pod, not the
    copy the reservation kept: relabelled out of the group, it stops counting; another group's
    never counts; one the watch no longer shows (a relist dropped it) counts by its own copy."""
    spec = {"group": {"selector": {"matchLabels": {"cluster": "c1"}}}, **SPEC}
    me = pod("a-9", labels={"cluster": "c1"}, policy=spec)
    mover = pod("a-0", labels={"cluster": "c1"})
    store.apply("pods", "ADDED", mover)
    store.reservations.commit(parse_pod(mover), "n0")
    other = pod("b-0", labels={"cluster": "c2"})
    store.apply("pods", "ADDED", other)
    store.reservations.commit(parse_pod(other), "n1")
    assert group_nodes(store, me) == ["n0"]
    store.apply("pods", "MODIFIED", pod("a-0", labels={"cluster": "c2"}))
    assert group_nodes(store, me) == []
    gone = pod("a-1", labels={"cluster": "c1"})
    store.apply("pods", "ADDED", gone)
    store.reservations.commit(parse_pod(gone), "n2")
    store.replace("pods", [pod("a-0", labels={"cluster": "c2"}), other])
    assert group_nodes(store, me) == ["n2"]


def test_nominated_node_counts_as_tentative(store) -> None:
    p = pod("r-0", sts="r")
    p["status"]["nominatedNodeName"] = "n2"
    store.apply("pods", "ADDED", p)
    assert group_nodes(store, pod("r-9", sts="r", policy=SPEC)) == ["n2"]


@pytest.mark.parametrize(
    "obj,schedulable",
    [(node("a"), True), (node("a", ready=False), False), (node("a", unschedulable=True), False)],
)
def test_node_schedulability(obj, schedulable) -> None:
    assert parse_node(obj).schedulable is schedulable


def test_pv_zone_needs_a_single_zone() -> None:
    two = volume("pv", "a")
    two["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] = ["a", "b"]
    assert parse_volume(two).zone is None
    assert parse_volume(volume("pv", "a")).zone == "a"


def test_watch_stream_lines_split_across_chunks() -> None:
    class Response:
        def iter_content(self, chunk_size=None):
            yield b'{"type":"ADDED","object":{"a":1}}\n{"type":"MOD'
            yield b'IFIED","object":{}}\n'

    assert [e["type"] for e in _lines(Response())] == ["ADDED", "MODIFIED"]


def test_legacy_zone_label_is_the_zone(store) -> None:
    store.apply("nodes", "ADDED", node("old", "c", legacy_zone=True))
    domains = store.topology.eligible_domains(ZONE, ZONE, None)
    assert domains == {"a": 2, "b": 2, "c": 1}


def test_an_invalid_inline_policy_names_each_pod_that_carries_it(store) -> None:
    """The parse is cached by the annotation's text, which a StatefulSet's pods share; each
    pod's message must still name that pod (found by the e2e isolation scenario)."""
    from extender.api.policy import PolicyError
    from extender.state.objects import parse_pod

    messages = []
    for name in ("bad-0", "bad-1"):
        try:
            store.resolve_policy(parse_pod(pod(name, sts="bad", policy={"caps": [{"topologyKey": "x"}]})))
        except PolicyError as err:
            messages.append(str(err))
    assert [m.split(":")[0] for m in messages] == [
        "invalid placement policy in annotation on pod db/bad-0",
        "invalid placement policy in annotation on pod db/bad-1",
    ]


def test_waits_for_pods_the_watch_does_not_show_are_capped() -> None:
    """A caller naming pods that do not exist cannot hold the server's threads: past
    MAX_POD_WAITERS waiting at once, a wait answers at once, and a pod the watch shows wakes its own."""
    import threading

    from extender.limits import MAX_POD_WAITERS

    store = ClusterStore()
    started = threading.Barrier(MAX_POD_WAITERS + 1)
    results: list[bool] = []

    def wait(i: int) -> None:
        started.wait()
        results.append(store.wait_for_pod(f"ghost-{i}", 2.0))

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(MAX_POD_WAITERS)]
    for t in threads:
        t.start()
    started.wait()
    deadline = time.monotonic() + 2
    while len(store._pod_waiters) < MAX_POD_WAITERS and time.monotonic() < deadline:
        time.sleep(0.005)
    began = time.monotonic()
    assert store.wait_for_pod("one-more", 5.0) is False
    assert time.monotonic() - began < 1.0, "no wait past the cap"
    store.apply("pods", "ADDED", pod("ghost-0", uid="ghost-0"))
    for t in threads:
        t.join()
    assert results.count(True) == 1 and len(results) == MAX_POD_WAITERS

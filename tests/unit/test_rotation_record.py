"""The ZoneRotation record through the verbs: decided once at a StatefulSet's first
decision, written once, and from then on the order whatever happens to zones and pods.

Each case drives filter and bind over a real store; the record writer is a recording fake (the
HTTP write is server/effects.py, checked on the real API server by tests/e2e/test_ordinal_outage.py).
"""

from __future__ import annotations

import pytest

from extender.api.policy import ZONE_ROTATION_ANNOTATION, ZONE_ROTATION_DECLARED
from extender.api.rotation import ZoneRotationSpec, parse_rotation_spec, rotation_object
from extender.api.wire import ExtenderArgs, ExtenderBindingArgs
from extender.server.verbs import Verbs
from extender.state.objects import ObjectError, RotationRecord, parse_rotation
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, claim, filter_args, node, pod, statefulset, volume
from fakes import RecordedEvents

ORDINAL = {"ordinalZones": {}}


class RecordingWriter:
    def __init__(self) -> None:
        self.records: list[RotationRecord] = []

    def zone_rotation(self, record: RotationRecord) -> None:
        self.records.append(record)


class Binder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append((f"{namespace}/{name}", node))


def zones(**per_zone: int) -> list[dict]:
    return [node(f"{z}{i}", z) for z, n in per_zone.items() for i in range(1, n + 1)]


def make(nodes: list[dict], replicas: int, running: dict[int, str] | None = None):
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
    sts = statefulset("r", replicas) | {"metadata": {"name": "r", "namespace": "db", "uid": "uid-sts-r"}}
    objects = {
        "nodes": nodes,
        "statefulsets": [sts],
        "pods": [pod(f"r-{o}", sts="r", node_name=n, policy=ORDINAL) for o, n in (running or {}).items()],
    }
    for kind in KINDS:
        store.replace(kind, objects.get(kind, []))
    writer = RecordingWriter()
    binder = Binder()
    return store, writer, binder, Verbs(store, binder, RecordedEvents(), records=writer)


def passed(verbs: Verbs, store: ClusterStore, ordinal: int) -> list[str]:
    p = pod(f"r-{ordinal}", sts="r", policy=ORDINAL)
    store.apply("pods", "ADDED", p)
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, sorted(store.topology.nodes))))
    assert result.Error == "", result.Error
    return sorted(result.NodeNames or [])


def reasons(verbs: Verbs, store: ClusterStore, ordinal: int, cordoned: tuple[str, ...] = ()) -> set[str]:
    """The filter's reasons over the nodes kube-scheduler would send (its NodeUnschedulable
    plugin removes cordoned ones before the extender is called)."""
    p = pod(f"r-{ordinal}", sts="r", policy=ORDINAL)
    store.apply("pods", "ADDED", p)
    candidates = sorted(set(store.topology.nodes) - set(cordoned))
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, candidates)))
    return set((result.FailedAndUnresolvableNodes or {}).values()) | set((result.FailedNodes or {}).values())


def place(store: ClusterStore, ordinal: int, node_name: str) -> None:
    store.apply("pods", "MODIFIED", pod(f"r-{ordinal}", sts="r", node_name=node_name, policy=ORDINAL))


def recorded(store: ClusterStore, order: str, adopted: dict[int, str] | None = None) -> None:
    """The record as the watch brings it back (the object the writer created)."""
    obj = rotation_object("db", "r", tuple(order), adopted or {})
    store.apply("rotations", "ADDED", obj)


def test_the_first_decision_records_the_rotation_once() -> None:
    store, writer, _, verbs = make(zones(a=1, b=1, c=1), 6)
    assert passed(verbs, store, 0) == ["a1"]
    assert passed(verbs, store, 1) == ["b1"]
    assert passed(verbs, store, 2) == ["c1"]
    (record,) = writer.records
    assert record.order == ("a", "b", "c") and record.statefulset == "r"
    assert store.rotation("db", "r") is not None


@pytest.mark.parametrize("gone", ["deleted", "cordoned"])
def test_a_zone_that_lost_its_nodes_keeps_its_ordinals_waiting_and_named(gone) -> None:
    """3 zones x 1 node, 3 replicas placed a/b/c and recorded; zone c's node goes and r-2 is
    recreated: it waits, with every reason naming zone c, and lands there when c returns. The
    release before the record derived a 2-zone rotation here and mapped ordinal 2 to zone a."""
    store, _, binder, verbs = make(zones(a=1, b=1, c=1), 3, {0: "a1", 1: "b1"})
    recorded(store, "abc")
    if gone == "deleted":
        store.apply("nodes", "DELETED", node("c1", "c"))
    else:
        store.apply("nodes", "MODIFIED", node("c1", "c", unschedulable=True))
    why = reasons(verbs, store, 2, cordoned=("c1",) if gone == "cordoned" else ())
    assert why and all("belongs in zone c" in r and "no schedulable node" in r for r in why), why
    bind = verbs.bind(ExtenderBindingArgs(PodName="r-2", PodNamespace="db", PodUID="uid-db-r-2", Node="a1"))
    assert "zone c" in bind.Error and binder.calls == []
    store.apply("nodes", "ADDED", node("c2", "c"))
    assert {n[0] for n in passed(verbs, store, 2)} == {"c"}  # (a cordoned c1 kube-scheduler leaves out itself)


def test_a_zone_outage_with_two_pods_per_zone_still_maps_nothing_elsewhere() -> None:
    """The issue's case: 3 zones x 3 nodes, 9 replicas, cap-free; zone c's nodes deleted, its
    three ordinals recreated: none of them may go to a or b, whatever the free room there."""
    nodes = zones(a=3, b=3, c=3)
    running = {o: f"{'abc'[o % 3]}{o // 3 + 1}" for o in range(9) if o % 3 != 2}
    store, _, _, verbs = make(nodes, 9, running)
    recorded(store, "abc")
    for n in ("c1", "c2", "c3"):
        store.apply("nodes", "DELETED", node(n, "c"))
    for ordinal in (2, 5, 8):
        assert all("zone c" in r for r in reasons(verbs, store, ordinal))


def test_an_adopted_set_with_two_ordinals_in_one_zone_spreads_its_new_ordinals() -> None:
    """Placed by the default scheduler: r-0 and r-1 both in zone a. The release before the record
    kept a 1-zone rotation and pinned every new ordinal to a; crl's order spreads them."""
    store, writer, _, verbs = make(zones(a=2, b=2, c=2), 6, {0: "a1", 1: "a2"})
    got = {o: {n[0] for n in passed(verbs, store, o)} for o in (2, 3, 4, 5)}
    (record,) = writer.records
    assert record.order == ("a", "b", "c") and record.adopted == {1: "a"}
    assert got == {2: {"c"}, 3: {"a"}, 4: {"b"}, 5: {"c"}}


def test_volumes_pin_the_first_rotation_as_crl_pins_them() -> None:
    """crl: a zone holding a volume is pinned to index (lowest ordinal there) mod Z."""
    store, writer, _, verbs = make(zones(a=1, b=1, c=1), 3)
    sts = statefulset("r", 3, claim_templates=("data",)) | {"metadata": {"name": "r", "namespace": "db", "uid": "u"}}
    store.apply("statefulsets", "MODIFIED", sts)
    store.apply("claims", "ADDED", claim("data-r-1", "pv-1"))
    store.apply("volumes", "ADDED", volume("pv-1", "c"))
    assert passed(verbs, store, 0) == ["a1"]
    assert writer.records[0].order == ("a", "c", "b")


def test_a_zone_added_later_joins_only_when_the_record_says_so() -> None:
    store, _, _, verbs = make(zones(a=1, b=1, c=1, d=4), 6, {0: "a1", 1: "b1", 2: "c1"})
    recorded(store, "abc")
    assert passed(verbs, store, 3) == ["a1"]  # d is bigger, but not in the record
    store.apply("rotations", "MODIFIED", rotation_object("db", "r", ("a", "b", "c", "d"), {}))
    assert {n[0] for n in passed(verbs, store, 3)} == {"d"}


def test_deleting_the_record_has_it_decided_again() -> None:
    store, writer, _, verbs = make(zones(a=1, b=1), 4, {0: "a1"})
    recorded(store, "ab")
    store.apply("rotations", "DELETED", rotation_object("db", "r", ("a", "b"), {}))
    passed(verbs, store, 1)
    assert [r.order for r in writer.records] == [("a", "b")]


def test_a_decision_never_recorded_goes_with_its_statefulset() -> None:
    """No record written (the API refused it): the process keeps its decision for the set, but
    not for a new StatefulSet created under the same name after a delete."""
    store, writer, _, verbs = make(zones(a=1, b=1), 2)
    passed(verbs, store, 0)
    assert store.rotation("db", "r") is not None and store.rotations == {}  # decided, not recorded
    store.apply("statefulsets", "DELETED", statefulset("r", 2))
    assert store.rotation("db", "r") is None


def test_the_record_in_the_cluster_wins_over_this_process_decision() -> None:
    store, writer, _, verbs = make(zones(a=1, b=1, c=1), 3)
    passed(verbs, store, 0)
    recorded(store, "cab")  # another replica, or an operator, wrote it first
    assert passed(verbs, store, 1) == ["a1"]  # ordinal 1 -> order[1] = a


def test_an_explicit_order_is_never_recorded() -> None:
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, {"nodes": zones(a=1, b=1), "statefulsets": [statefulset("r", 2)]}.get(kind, []))
    writer = RecordingWriter()
    verbs = Verbs(store, Binder(), RecordedEvents(), records=writer)
    p = pod("r-0", sts="r", policy={"ordinalZones": {"order": ["b", "a"]}})
    store.apply("pods", "ADDED", p)
    assert verbs.filter(ExtenderArgs.model_validate(filter_args(p, ["a1", "b1"]))).NodeNames == ["b1"]
    assert writer.records == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"statefulSet": "r", "order": ["a", "a"]}, "order lists a zone twice"),
        ({"statefulSet": "r", "order": []}, "spec.order"),
        ({"statefulSet": "r", "order": ["a"], "adopted": {"01": "a"}}, "adopted keys must be StatefulSet ordinals"),
        ({"order": ["a"]}, "spec.statefulSet"),
        ({"statefulSet": "r", "order": ["a"], "extra": 1}, "spec.extra"),
    ],
)
def test_an_unreadable_record_is_refused_with_the_field_named(spec, error) -> None:
    with pytest.raises(ValueError, match=error):
        parse_rotation_spec(spec, "ZoneRotation db/r")
    with pytest.raises(ObjectError):
        parse_rotation({"metadata": {"name": "r", "namespace": "db"}, "spec": spec})


def test_the_object_written_round_trips_through_the_parser_and_has_no_owner() -> None:
    """No ownerReference: the record outlives its StatefulSet, as its claims do, so the set
    recreated from git comes back in the same zones (api/rotation.py)."""
    obj = rotation_object("db", "r", ("b", "a"), {3: "c"})
    assert "ownerReferences" not in obj["metadata"]
    assert set(obj["metadata"]) == {"name", "namespace", "labels"}
    record = parse_rotation(obj)
    assert (record.statefulset, record.order, record.adopted) == ("r", ("b", "a"), {3: "c"})
    assert ZoneRotationSpec.model_validate(obj["spec"]).adopted == {"3": "c"}


def test_prioritize_does_not_reuse_a_filter_decision_made_before_a_record_arrived() -> None:
    """filter decided ordinal 1 -> zone b from the derived order; the record in the cluster
    (another replica's) says zone a before prioritize comes: prioritize decides again and holds
    nothing on b1."""
    store, _, _, verbs = make(zones(a=1, b=1, c=1), 3)
    assert passed(verbs, store, 1) == ["b1"]
    assert store.reservations.get("uid-db-r-1") is not None
    recorded(store, "cab")
    p = pod("r-1", sts="r", policy=ORDINAL)
    verbs.prioritize(ExtenderArgs.model_validate(filter_args(p, ["b1"])))
    assert store.reservations.get("uid-db-r-1") is None


def test_without_the_crd_each_decision_derives_the_order_and_nothing_is_written() -> None:
    """docs/concepts/ordinal-zones.md: without the ZoneRotation CRD the extender decides each rotation anew,
    as crl does."""
    store, writer, _, verbs = make(zones(a=1, b=1, c=1), 3)
    store.rotations_enabled = False
    assert passed(verbs, store, 1) == ["b1"]
    store.apply("nodes", "ADDED", node("c2", "c"))  # c now has the most nodes: crl's order changes
    assert passed(verbs, store, 1) == ["a1"]  # order [c, a, b]: ordinal 1 -> a
    assert writer.records == [] and store.rotation("db", "r") is None


def declared_pod(ordinal: int, **kw) -> dict:
    p = pod(f"r-{ordinal}", sts="r", policy=ORDINAL, **kw)
    p["metadata"]["annotations"][ZONE_ROTATION_ANNOTATION] = ZONE_ROTATION_DECLARED
    return p


@pytest.mark.parametrize(
    ("running", "volume_zone", "record", "accepted"),
    [
        # nothing running, no volume: the record decides, not crl's order (which starts at a)
        ({}, None, ("c", "b", "a"), ["c1"]),
        # a bound volume in b: still refused everywhere until the record, then its zone or b
        ({}, "b", ("c", "a", "b"), ["b1", "c1"]),
        # pods running elsewhere: they do not pin an order the record is to give
        ({1: "a1", 2: "a1"}, None, ("b", "c", "a"), ["b1"]),
    ],
)
def test_a_declared_rotation_is_never_decided_here(running, volume_zone, record, accepted) -> None:
    """A set whose template declares its ZoneRotation (adopt -f: committed beside it): until the
    record is applied, filter refuses every node saying what is missing, and nothing is recorded
    (an extender's own record would win over the committed one, which then fails to create)."""
    store, writer, _, verbs = make(zones(a=1, b=1, c=1), 3, running)
    if volume_zone is not None:
        sts = statefulset("r", 3, claim_templates=("data",)) | {"metadata": {"name": "r", "namespace": "db"}}
        store.apply("statefulsets", "MODIFIED", sts)
        store.apply("claims", "ADDED", claim("data-r-0", "pv-0"))
        store.apply("volumes", "ADDED", volume("pv-0", volume_zone))
    p = declared_pod(0, claims=("data-r-0",) if volume_zone else ())
    store.apply("pods", "ADDED", p)
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, sorted(store.topology.nodes))))
    assert not result.NodeNames
    why = set((result.FailedAndUnresolvableNodes or {}).values()) | set((result.FailedNodes or {}).values())
    assert why == {"waiting for ZoneRotation db/r, declared beside its StatefulSet and not applied yet"}, why
    assert writer.records == [] and store.rotation("db", "r") is None
    store.apply("rotations", "ADDED", rotation_object("db", "r", record, {}))
    result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, sorted(store.topology.nodes))))
    assert sorted(result.NodeNames or []) == accepted
    assert writer.records == []


def test_a_set_recreated_from_its_committed_record_may_take_its_adopted_zones() -> None:
    """3 zones x 3 nodes, 1 pod a node, 9 replicas and no pod yet (a fresh cluster, or the set
    deleted and recreated from git), the record swapping ordinals 0 and 1 (adopted in b and a).
    The adopted layout fills each zone exactly, so the dead-end analysis must count the ordinals
    still to come in their adopted zones too: counted in their rotation zones alone, zone b looked
    needed by ordinals 1, 4 and 7 and ordinal 0 was refused the zone the record gives it."""
    policy = {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
    sts = statefulset("r", 9) | {"metadata": {"name": "r", "namespace": "db", "uid": "uid-sts-r"}}
    for kind in KINDS:
        store.replace(kind, {"nodes": zones(a=3, b=3, c=3), "statefulsets": [sts]}.get(kind, []))
    store.apply("rotations", "ADDED", rotation_object("db", "r", ("a", "b", "c"), {0: "b", 1: "a"}))
    verbs = Verbs(store, Binder(), RecordedEvents(), records=RecordingWriter())
    # ordinal 0 may go to either zone (and is held in b, its adopted one); then zone b's last two
    # nodes are ordinal 4's and 7's, so ordinal 1 may only go to a, where the record puts it
    for ordinal, allowed in ((0, {"a", "b"}), (1, {"a"}), (2, {"c"})):
        p = pod(f"r-{ordinal}", sts="r", policy=policy)
        store.apply("pods", "ADDED", p)
        result = verbs.filter(ExtenderArgs.model_validate(filter_args(p, sorted(store.topology.nodes))))
        assert result.Error == "", result.Error
        assert {n[0] for n in result.NodeNames or []} == allowed, (ordinal, result.NodeNames)
        scores = verbs.prioritize(ExtenderArgs.model_validate(filter_args(p, sorted(result.NodeNames or [])))).scores
        if ordinal == 0:  # its adopted zone preferred above every other score
            adopted = "ba"[ordinal]
            assert min(s for n, s in scores.items() if n[0] == adopted) > max(
                s for n, s in scores.items() if n[0] != adopted
            ), scores

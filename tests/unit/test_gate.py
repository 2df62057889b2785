"""The ordinal-zone scheduling gate: the patch that narrows and lifts it (extender/server/gate_patch.py), what
the verbs answer for a gated pod (Verbs.gate_answer), the lifter loop (server/gates.py) and how
the cache reads a narrowed pod (its own requirement left out of the rules' view)."""

from __future__ import annotations

import json

import pytest

from extender.api.policy import (
    NARROWED_ZONES_ANNOTATION,
    ORDINAL_ZONE_GATE,
    ZONE_ROTATION_ANNOTATION,
    ZONE_ROTATION_DECLARED,
)
from extender.api.rotation import rotation_object
from extender.server.gate_lifter import GateLifter
from extender.server.gate_patch import lift_patch
from extender.server.verbs import Verbs
from extender.state.objects import parse_pod
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, ZONE, node, pod, statefulset
from fakes import RecordedEvents

ORDINAL = {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}
REQ = {"key": ZONE, "operator": "In", "values": ["b"]}


def gated(name: str, policy=ORDINAL, **kw) -> dict:
    obj = pod(name, sts="db", labels={"app": "db"}, policy=policy, **kw)
    obj["spec"]["schedulingGates"] = [{"name": ORDINAL_ZONE_GATE}]
    obj["metadata"]["resourceVersion"] = "7"
    return obj


def apply_patch(obj: dict, ops: list[dict]) -> dict:
    """A small RFC 6902 applier for the ops lift_patch writes (test/add/replace/remove)."""
    out = json.loads(json.dumps(obj))
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = out
        for p in parts[:-1]:
            parent = parent[p]
        last = parts[-1]
        if op["op"] == "test":
            assert parent[last] == op["value"]
        elif op["op"] in ("add", "replace"):
            parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[last]
    return out


# -- the patch ---------------------------------------------------------------------------------------
AFFINITY_TWO_TERMS = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["nvme"]}]},
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("affinity", "other_gates", "want_terms"),
    [
        (None, [], [[REQ]]),
        (
            AFFINITY_TWO_TERMS,
            [],
            [
                [{"key": "disk", "operator": "In", "values": ["ssd"]}, REQ],
                [{"key": "disk", "operator": "In", "values": ["nvme"]}, REQ],
            ],
        ),
        (None, [{"name": "example.com/other"}], [[REQ]]),
    ],
    ids=["no affinity: one term", "ANDed into every term, none added", "another gate stays"],
)
def test_the_patch_narrows_every_term_and_lifts_only_our_gate(affinity, other_gates, want_terms) -> None:
    obj = gated("db-1")
    if affinity:
        obj["spec"]["affinity"] = json.loads(json.dumps(affinity))
    obj["spec"]["schedulingGates"] += other_gates
    patched = apply_patch(obj, lift_patch(obj, REQ))
    terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchExpressions"] for t in terms] == want_terms
    assert patched["spec"].get("schedulingGates", []) == other_gates
    assert json.loads(patched["metadata"]["annotations"][NARROWED_ZONES_ANNOTATION]) == {"key": ZONE, "values": ["b"]}


def test_the_patch_is_guarded_by_the_resource_version_first() -> None:
    ops = lift_patch(gated("db-1"), REQ)
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}


def test_without_a_requirement_only_the_gate_goes() -> None:
    obj = gated("db-1")
    patched = apply_patch(obj, lift_patch(obj, None))
    assert "schedulingGates" not in patched["spec"] and "affinity" not in patched["spec"]


def test_the_cache_reads_a_narrowed_pod_without_the_extenders_own_requirement() -> None:
    """The rules judge the workload's constraints: the zone the extender wrote is its answer."""
    before = gated("db-1")
    before["spec"]["affinity"] = json.loads(json.dumps(AFFINITY_TWO_TERMS))
    after = apply_patch(before, lift_patch(before, REQ))
    assert parse_pod(after).constraints == parse_pod(before).constraints
    assert parse_pod(before).gated and not parse_pod(after).gated
    alone = gated("db-2")
    assert parse_pod(apply_patch(alone, lift_patch(alone, REQ))).constraints == parse_pod(alone).constraints


# -- the verbs' answer -------------------------------------------------------------------------------
def make_store(zones=("a", "b", "c"), recorded: bool = True) -> tuple[ClusterStore, Verbs]:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for z in zones:
        store.apply("nodes", "ADDED", node(f"{z}0", z))
    sts = statefulset("db", 6, labels={"app": "db"}, policy=ORDINAL)
    sts["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    store.apply("statefulsets", "ADDED", sts)
    if recorded and zones:  # the set's ZoneRotation, as the watch shows it
        store.apply("rotations", "ADDED", rotation_object("db", "db", tuple(zones), {}))
    return store, Verbs(store, None, RecordedEvents())  # type: ignore[arg-type]


def test_a_gated_pod_is_narrowed_only_once_its_sets_order_is_recorded() -> None:
    """The first answer records the order and waits; once the watch shows the ZoneRotation, the
    pod is narrowed by it: every replica, and the filter, read that same record."""
    store, verbs = make_store(recorded=False)
    store.apply("pods", "ADDED", gated("db-4"))
    (uid,) = store.gated
    assert verbs.gate_answer(uid) is None
    decided = store.rotation("db", "db")
    assert decided is not None, "decided and queued for recording"
    store.apply("rotations", "ADDED", rotation_object("db", "db", decided.order, {}))
    answer = verbs.gate_answer(uid)
    assert answer is not None and answer.requirement == {"key": ZONE, "operator": "In", "values": [decided.order[1]]}


def test_without_the_rotation_crd_the_gate_is_lifted_without_narrowing() -> None:
    store, verbs = make_store(recorded=False)
    store.rotations_enabled = False
    store.apply("pods", "ADDED", gated("db-4"))
    answer = verbs.gate_answer(next(iter(store.gated)))
    assert answer is not None and answer.requirement is None and "ZoneRotation" in answer.why


@pytest.mark.parametrize(
    ("policy", "why"),
    [
        ({"caps": [{"topologyKey": HOST, "max": 1}]}, "does not place pods by ordinal zone"),
        ({"ordinalZones": {}, "caps": [{"topologyKey": "nope", "max": -1}]}, "invalid"),
        ({"ordinalZones": {}, "spread": [{"topologyKey": HOST, "maxSkew": 1}]}, "no exact native mirror"),
    ],
    ids=["no ordinal zones", "invalid policy", "a spread that honors node affinity"],
)
def test_pods_with_nothing_to_narrow_are_lifted_as_they_are(policy, why) -> None:
    store, verbs = make_store()
    store.apply("pods", "ADDED", gated("db-1", policy=policy))
    answer = verbs.gate_answer(next(iter(store.gated)))
    assert answer is not None and answer.requirement is None and why in answer.why


def test_nothing_is_lifted_while_the_cache_is_unsynced() -> None:
    store, verbs = make_store()
    store.apply("pods", "ADDED", gated("db-1"))
    store.connection_lost("nodes", "watch closed")
    assert verbs.gate_answer(next(iter(store.gated))) is None


def test_before_any_zone_has_a_node_the_gate_is_lifted_without_narrowing() -> None:
    """Scale from zero: an autoscaler must see the pod Pending to add the first nodes."""
    store, verbs = make_store(zones=())
    store.apply("pods", "ADDED", gated("db-0"))
    answer = verbs.gate_answer(next(iter(store.gated)))
    assert answer is not None and answer.requirement is None and "no zone order yet" in answer.why


OPT_IN = {"requests": {"placement.extender.dev/opt-in": "1"}}


@pytest.mark.parametrize(
    ("scheduler", "opted_in", "ours"),
    [
        ("placement-scheduler", False, True),
        ("default-scheduler", True, True),
        ("default-scheduler", False, False),
        ("nobody", False, False),
        ("nobody", True, True),
    ],
    ids=["its scheduler's", "opted in", "the default scheduler's", "another scheduler's", "another's, opted in"],
)
def test_only_the_extenders_own_pods_are_lifted(scheduler, opted_in, ours) -> None:
    """The gate is the extender's, but the pod may not be: a pod of a scheduler it does not serve
    and without the opt-in request is left as it is, whoever put the gate there."""
    store, verbs = make_store()
    obj = gated("db-1", scheduler=scheduler)
    if opted_in:
        obj["spec"]["containers"][0]["resources"] = OPT_IN
    store.apply("pods", "ADDED", obj)
    answer = verbs.gate_answer(next(iter(store.gated)))
    assert (answer is not None) is ours


# -- the loop ----------------------------------------------------------------------------------------
class Writer:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.lifted: list[str] = []

    def lift(self, answer) -> None:
        if self.fail:
            raise RuntimeError("403 Forbidden: pods is forbidden")
        self.lifted.append(answer.pod.name)


def test_the_lifter_lifts_each_gated_pod_and_backs_off_a_failed_one() -> None:
    store, verbs = make_store()
    store.apply("pods", "ADDED", gated("db-1"))
    failing = GateLifter(verbs, Writer(fail=True), retry_after=5)
    assert failing.pass_once(now=0) == 0
    assert failing.pass_once(now=1) == 0 and failing._retry_at, "waits retry_after before trying again"
    writer = Writer()
    assert GateLifter(verbs, writer).pass_once(now=0) == 1 and writer.lifted == ["db-1"]
    store.apply("pods", "MODIFIED", apply_patch(gated("db-1"), lift_patch(gated("db-1"), REQ)))
    assert not store.gated, "a lifted pod leaves the index"


def declared(obj: dict) -> dict:
    obj["metadata"].setdefault("annotations", {})[ZONE_ROTATION_ANNOTATION] = ZONE_ROTATION_DECLARED
    return obj


def test_a_declared_rotation_keeps_the_gate_until_the_committed_record_arrives() -> None:
    """A template whose ZoneRotation is committed beside it (adopt -f) never gets a decided one:
    its gated pod waits, nothing is recorded, and the committed record (applied after the set, as
    Argo CD applies custom resources) narrows it."""
    store, verbs = make_store(recorded=False)
    store.apply("pods", "ADDED", declared(gated("db-4")))
    (uid,) = store.gated
    assert store.pods[uid].rotation_declared
    for _ in range(3):  # the lifter asks again every pass
        assert verbs.gate_answer(uid) is None
    assert store.rotation("db", "db") is None, "decided a rotation the committed record is to give"
    store.apply("rotations", "ADDED", rotation_object("db", "db", ("c", "a", "b"), {4: "b"}))
    answer = verbs.gate_answer(uid)
    assert answer is not None and answer.requirement == {"key": ZONE, "operator": "In", "values": ["a", "b"]}


def test_without_the_declaration_the_first_decision_still_decides() -> None:
    """The annotation is what changes the behaviour: the same pod without it gets a rotation."""
    store, verbs = make_store(recorded=False)
    store.apply("pods", "ADDED", gated("db-4"))
    (uid,) = store.gated
    assert verbs.gate_answer(uid) is None
    assert store.rotation("db", "db") is not None


@pytest.mark.parametrize("is_declared", [True, False])
def test_a_declared_set_keeps_its_gate_while_its_named_policy_is_not_applied_yet(is_declared) -> None:
    """Argo CD applies custom resources after the StatefulSet: the policy committed with it comes
    later. A declared pod keeps its gate (lifted unnarrowed, it would reach the scheduler before
    its zone is known); an undeclared one is lifted so the filter reports the missing policy."""
    store, verbs = make_store(recorded=False)
    obj = gated("db-4", policy=None, policy_name="crdb")
    store.apply("pods", "ADDED", declared(obj) if is_declared else obj)
    (uid,) = store.gated
    answer = verbs.gate_answer(uid)
    if is_declared:
        assert answer is None
    else:
        assert answer is not None and answer.requirement is None and "not found" in answer.why

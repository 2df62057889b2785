"""Adopting a running StatefulSet: the record adopt writes and the rollout it checks (ops/rollout.py).

The issue-34 case, on 3 zones x 2 nodes with 6 pods placed by the default scheduler and two
ordinals sharing a zone: under ordinal zones and a per-node cap of 1, each recreated pod has one
free node, the one it left. The rollout completes when every ordinal may return to its zone;
the record says which ordinals were adopted where, and the filter accepts that zone.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import parse_spec
from extender.ops.rollout import check_adoption
from extender.state.objects import RotationRecord
from extender.state.store import KINDS, ClusterStore

from builders import HOST, ZONE, node, pod, statefulset

ORDINAL_CAP1 = {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}
LABELS = {"app": "db"}


def placed_by_default(layout: list[str], zones: str = "aabbcc", rotations: bool = True) -> ClusterStore:
    """StatefulSet db/db with pod db-i on node layout[i], nodes n0..n5 in `zones`; no policy yet."""
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.rotations_enabled = rotations
    for i, zone in enumerate(zones):
        store.apply("nodes", "ADDED", node(f"n{i}", zone))
    store.apply("statefulsets", "ADDED", statefulset("db", len(layout), labels=LABELS))
    for i, where in enumerate(layout):
        p = pod(f"db-{i}", sts="db", node_name=where, labels=LABELS, scheduler="default-scheduler", phase="Running")
        store.apply("pods", "ADDED", p)
    return store


def record(store: ClusterStore, order: list[str], adopted: dict[int, str] | None = None) -> None:
    """The set's ZoneRotation, as the watch shows it."""
    spec: dict = {"statefulSet": "db", "order": order}
    if adopted:
        spec["adopted"] = {str(k): v for k, v in adopted.items()}
    obj = {"apiVersion": "placement.extender.dev/v1alpha1", "kind": "ZoneRotation"}
    store.apply("rotations", "ADDED", {**obj, "metadata": {"name": "db", "namespace": "db"}, "spec": spec})


def zone(store: ClusterStore, name: str) -> str:
    return store.topology.nodes[name].labels[ZONE]


def test_two_ordinals_in_one_zone_the_rollout_puts_each_back() -> None:
    # db-0, db-1 in zone a; db-2, db-3 in b; db-4, db-5 in c: no rotation explains it
    store = placed_by_default(["n0", "n1", "n2", "n3", "n4", "n5"])
    check = check_adoption(store, "db", "db", parse_spec(ORDINAL_CAP1, "t"))
    assert check.completes, check.problems
    assert check.record is not None and not check.record_exists
    assert check.steps == [f"db-{i} -> its own node" for i in range(5, -1, -1)]
    order = check.record.order
    for i in range(6):
        where = zone(store, f"n{i}")
        assert where == order[i % 3] or check.record.adopted[i] == where, (i, order, check.record.adopted)


def test_without_the_crd_running_outliers_cannot_be_recorded_so_adopt_refuses() -> None:
    store = placed_by_default(["n0", "n1", "n2", "n3", "n4", "n5"], rotations=False)
    check = check_adoption(store, "db", "db", parse_spec(ORDINAL_CAP1, "t"))
    assert not check.completes and "ZoneRotation CRD is not installed" in check.problems[0]


def test_a_rollout_that_cannot_complete_is_refused_naming_what_frees_it() -> None:
    """A cap the running pods already break (two on n0): the recreated db-1 finds no free node
    in any zone, and the check says what refuses it."""
    store = placed_by_default(["n0", "n0", "n1", "n2", "n3", "n4"], zones="aabbcc")
    store.apply("nodes", "DELETED", node("n5", "c"))
    check = check_adoption(store, "db", "db", parse_spec({"caps": [{"topologyKey": HOST, "max": 1}]}, "t"))
    assert not check.completes
    assert "would wait" in check.problems[0] and "It would be placed with" in check.problems[0], check.problems


def test_an_existing_record_gains_the_outliers_and_keeps_its_order() -> None:
    store = placed_by_default(["n0", "n2", "n4", "n1", "n3", "n5"])  # follows a, b, c
    record(store, ["b", "c", "a"])
    check = check_adoption(store, "db", "db", parse_spec(ORDINAL_CAP1, "t"))
    assert check.completes, check.problems
    assert check.record_exists and check.record == RotationRecord(
        "db", "db", "db", ("b", "c", "a"), {i: "abcabc"[i] for i in range(6)}
    )


@settings(max_examples=60, deadline=None)
@given(st.permutations([f"n{i}" for i in range(6)]))
def test_any_placement_one_pod_a_node_adopts_with_a_rollout_that_completes(layout: list[str]) -> None:
    """Whatever the default scheduler did (one pod a node, as a cap of 1 on 6 nodes forces):
    adoption completes, every pod back on its own node, and the filter accepts each one there."""
    from extender.engine import evaluate

    store = placed_by_default(list(layout))
    spec = parse_spec(ORDINAL_CAP1, "t")
    check = check_adoption(store, "db", "db", spec)
    assert check.completes and check.steps == [f"db-{i} -> its own node" for i in range(5, -1, -1)]
    decided = check.record
    assert decided is not None
    record(store, list(decided.order), dict(decided.adopted))
    for i, where in enumerate(layout):
        recreated = store.pod_by_name("db", f"db-{i}")
        assert recreated is not None
        request, snap = store.decision_inputs(recreated, spec)
        assert evaluate(spec, request, snap, [where]).verdicts[where].passed, (i, where, decided)


@pytest.mark.parametrize("layout", list(itertools.islice(itertools.permutations(["n0", "n2", "n4"]), 3)))
def test_a_set_that_follows_a_rotation_adopts_nothing(layout) -> None:  # noqa: ANN001
    store = placed_by_default(list(layout))
    check = check_adoption(store, "db", "db", parse_spec(ORDINAL_CAP1, "t"))
    assert check.completes and check.adopted == {}

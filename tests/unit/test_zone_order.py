"""Ordinal -> zone order: crl-scheduler's rule (seeds README) and the stable variant."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.engine import RecordedRotation
from extender.engine.zone_order import ZoneOrder, consistent, crl_zone_order, first_rotation, zone_order_for


def volumes(**zones: tuple[int, ...]) -> dict[int, str]:
    """volumes(A=(0, 1), B=(2,)) -> {0: 'A', 1: 'A', 2: 'B'}: ordinal -> zone of its volume."""
    return {ordinal: zone for zone, ordinals in zones.items() for ordinal in ordinals}


def round_robin(zones: str, pods: int) -> dict[int, str]:
    return {i: zones[i % len(zones)] for i in range(pods)}


# -- crl-scheduler's examples (cockroachlabs/crl-scheduler plugin tests, quoted in the seeds README)


@pytest.mark.parametrize(
    ("counts", "evidence", "order"),
    [
        pytest.param({"A": 1, "B": 1, "C": 1}, volumes(A=(0,), B=(1,), C=(2,)), ["A", "B", "C"], id="one-volume-each"),
        pytest.param({"A": 1, "B": 1, "C": 1}, volumes(A=(0,), C=(1,)), ["A", "C", "B"], id="two-volumes-swap"),
        pytest.param(
            {"A": 2, "B": 2, "C": 2}, volumes(A=(0, 1), B=(2, 4), C=(3, 5)), ["C", "A", "B"], id="lowest-ordinal-pins"
        ),
        pytest.param({"A": 3, "B": 1, "C": 1}, volumes(A=(0, 1, 2)), ["A", "B", "C"], id="big-zone-all-volumes"),
        pytest.param({"A": 1, "B": 2, "C": 1}, {}, ["B", "A", "C"], id="no-volumes-by-node-count"),
    ],
)
def test_crl_examples(counts, evidence, order):
    assert crl_zone_order(counts, evidence) == order


@pytest.mark.parametrize(
    ("counts", "evidence", "period", "order"),
    [
        pytest.param({}, {}, None, [], id="no-zones"),
        pytest.param({"a": 1, "b": 1}, {0: "gone"}, None, ["a", "b"], id="evidence-zone-without-nodes-ignored"),
        pytest.param({"a": 1, "b": 1, "c": 1, "d": 1}, round_robin("abc", 6), 3, ["a", "b", "c"], id="period-shorter"),
        pytest.param({"b": 2, "a": 2}, {}, None, ["a", "b"], id="ties-by-name"),
    ],
)
def test_crl_order_edges(counts, evidence, period, order):
    assert crl_zone_order(counts, evidence, period) == order


# -- consistent() ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("evidence", "period", "expected"),
    [
        pytest.param({}, 3, True, id="empty"),
        pytest.param({}, 0, False, id="zero-period"),
        pytest.param(round_robin("abc", 6), 3, True, id="round-robin-3"),
        pytest.param(round_robin("abc", 6), 4, False, id="round-robin-3-as-4"),
        pytest.param(round_robin("abc", 6), 2, False, id="round-robin-3-as-2"),
        pytest.param({0: "a", 1: "a"}, 1, True, id="one-zone-period-1"),
        pytest.param({0: "a", 1: "a"}, 3, False, id="zone-at-two-residues"),
        pytest.param({0: "a", 3: "b"}, 3, False, id="residue-two-zones"),
        pytest.param({0: "a", 4: "b"}, 4, False, id="residue-0-twice"),
        pytest.param({1: "b", 5: "b", 2: "c"}, 4, True, id="sparse-ordinals"),
        pytest.param({0: "a"}, 5, True, id="single-pod"),
    ],
)
def test_consistent(evidence, period, expected):
    assert consistent(evidence, period) is expected


# -- the record: first_rotation decides once, zone_order_for reads the record ------------------

R = RecordedRotation  # RecordedRotation(name, order, adopted)


@pytest.mark.parametrize(
    ("counts", "volumes", "placed", "recorded", "order", "adopted", "derived", "how_has"),
    [
        pytest.param(
            {"a": 2, "b": 2, "c": 2}, {}, {}, None, "abc", {}, True, ["crl order over 3 zones"], id="fresh-set"
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2},
            {},
            round_robin("abc", 6),
            None,
            "abc",
            {},
            True,
            ["pinned by the placed pods"],
            id="placed-by-the-extender-before-records",
        ),
        pytest.param(
            {"a": 3, "b": 3, "c": 3},
            {},
            {0: "b", 1: "b", 2: "a"},
            None,
            "abc",
            {0: "b", 2: "a"},
            True,
            ["2 running pod(s) follow no rotation"],
            id="adopted-two-ordinals-in-one-zone-spreads-by-crl",
        ),
        pytest.param(
            {"a": 3, "b": 3, "c": 3},
            {0: "b", 1: "c"},
            {0: "b", 1: "b"},
            None,
            "bca",
            {1: "b"},
            True,
            ["pinned by the placed pods and volumes"],
            id="volumes-pin-as-crl-pins-them-a-pod-away-from-its-rotation-zone-is-adopted",
        ),
        pytest.param(
            {"a": 2, "b": 2},
            {},
            round_robin("abc", 6),
            R("db/r", ("a", "b", "c")),
            "abc",
            {},
            False,
            ["recorded in ZoneRotation db/r", "zone(s) c have no schedulable node now"],
            id="zone-outage-keeps-the-record",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 0},
            {},
            {0: "a", 1: "b"},
            R("db/r", ("a", "b", "c")),
            "abc",
            {},
            False,
            ["zone(s) c have no schedulable node now"],
            id="zone-cordoned-keeps-the-record",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2, "d": 3},
            {},
            round_robin("abc", 6),
            R("db/r", ("a", "b", "c")),
            "abc",
            {},
            False,
            ["zone(s) d are not in the rotation", "edit or delete the record"],
            id="zone-added-joins-only-by-an-explicit-act",
        ),
        pytest.param(
            {"a": 1, "b": 1, "c": 1},
            {},
            {},
            R("db/r", ("c", "a", "b"), {1: "c"}),
            "cab",
            {1: "c"},
            False,
            ["recorded"],
            id="record-wins-over-node-counts-and-keeps-its-adopted",
        ),
        pytest.param({}, {}, {0: "a"}, None, "", {}, False, ["no schedulable node"], id="no-zones"),
    ],
)
def test_zone_order_from_the_record(counts, volumes, placed, recorded, order, adopted, derived, how_has):
    result = zone_order_for(counts, volumes, placed, None, recorded)
    assert "".join(result.order) == order
    assert dict(result.adopted) == adopted
    assert result.derived is derived
    for needle in how_has:
        assert needle in result.how, result.how


def test_explicit_order_wins_over_a_record_and_is_never_recorded():
    result = zone_order_for({"a": 1, "b": 1}, {}, {}, ["b", "a"], R("db/r", ("a", "b")))
    assert result.order == ("b", "a") and not result.derived and "explicit" in result.how


def test_first_rotation_without_running_pods_is_crls_order_exactly():
    """crl-scheduler's own cases (seeds README), through the function the engine uses."""
    for counts, vols, order in [
        ({"A": 1, "B": 1, "C": 1}, volumes(A=(0,), C=(1,)), ["A", "C", "B"]),
        ({"A": 2, "B": 2, "C": 2}, volumes(A=(0, 1), B=(2, 4), C=(3, 5)), ["C", "A", "B"]),
        ({"A": 1, "B": 2, "C": 1}, {}, ["B", "A", "C"]),
    ]:
        assert list(first_rotation(counts, vols, {}).order) == order


@given(
    st.dictionaries(st.sampled_from("abcde"), st.integers(1, 4), min_size=1),
    st.dictionaries(st.integers(0, 20), st.sampled_from("abcde"), max_size=12),
)
def test_a_first_rotation_keeps_every_running_pod_where_it_is(counts, placed):
    """Invariant: deciding the rotation moves no running pod. Each placed ordinal is either in
    its rotation zone or listed as adopted (left where it is), never both, never neither."""
    result = first_rotation(counts, {}, placed)
    for ordinal, zone in placed.items():
        in_rotation = result.order and result.zone_for(ordinal) == zone
        assert bool(in_rotation) != (ordinal in result.adopted) or not result.order, (ordinal, zone, result)


@pytest.mark.parametrize(
    ("order", "ordinal", "zone"),
    [
        pytest.param(("a", "b", "c"), 0, "a", id="first"),
        pytest.param(("a", "b", "c"), 4, "b", id="wraps"),
        pytest.param((), 3, None, id="empty"),
    ],
)
def test_zone_for(order, ordinal, zone):
    assert ZoneOrder(order, "").zone_for(ordinal) == zone


@pytest.mark.parametrize(
    ("explicit", "recorded", "waiting", "order"),
    [
        (None, None, True, ()),  # declared, not applied yet: no order, nothing to record
        (None, RecordedRotation("db/r", ("c", "a", "b")), False, ("c", "a", "b")),  # the committed record
        (["b", "a", "c"], None, False, ("b", "a", "c")),  # an explicit order needs no record
    ],
)
def test_a_declared_rotation_is_read_never_decided(explicit, recorded, waiting, order) -> None:  # noqa: ANN001
    """A set whose template declares its ZoneRotation gets no first rotation, whatever runs and
    whatever volumes are bound: the committed record decides."""
    got = zone_order_for({"a": 3, "b": 1, "c": 2}, {0: "b"}, {1: "a", 2: "a"}, explicit, recorded, declared="db/r")
    assert (got.waiting, got.order, got.derived) == (waiting, order, False)
    if waiting:
        assert got.how == "waiting for ZoneRotation db/r, declared beside its StatefulSet and not applied yet"

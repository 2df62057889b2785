"""Ordinal -> zone order: crl-scheduler's rule (seeds README) and the stable variant."""

from __future__ import annotations

import pytest

from extender.engine.zone_order import ZoneOrder, consistent, crl_zone_order, stable_zone_order


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


# -- stable_zone_order ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "evidence", "explicit", "order", "how_has"),
    [
        pytest.param({"a": 2, "b": 2, "c": 2}, {}, None, ["a", "b", "c"], ["no pods or volumes yet"], id="fresh"),
        pytest.param(
            {"a": 2, "b": 2, "c": 2},
            round_robin("abc", 6),
            None,
            ["a", "b", "c"],
            ["pinned by placed pods"],
            id="steady",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2, "d": 3},
            round_robin("abc", 6),
            None,
            ["a", "b", "c"],
            ["kept the 3-zone rotation", "zone(s) d are not in this StatefulSet's rotation", "ordinalZones.order"],
            id="zone-added-after-6-pods",
        ),
        pytest.param(
            {"a": 2, "b": 2},
            round_robin("abc", 6),
            None,
            ["a", "b", "c"],
            ["kept the 3-zone rotation", "zone(s) c have no schedulable node now"],
            id="zone-removed",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 0},
            round_robin("abc", 6),
            None,
            ["a", "b", "c"],
            ["kept the 3-zone rotation", "zone(s) c have no schedulable node now"],
            id="zone-emptied",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2, "d": 2},
            {0: "a"},
            None,
            ["a", "b", "c", "d"],
            ["4 zones", "pinned"],
            id="only-ordinal-0-new-zone-adopted",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2, "d": 2},
            {0: "c"},
            None,
            ["c", "b", "a", "d"],
            ["4 zones"],
            id="only-ordinal-0-elsewhere-new-zone-adopted",
        ),
        pytest.param(
            {"a": 2, "b": 2, "c": 2}, round_robin("abc", 6), ["c", "a"], ["c", "a"], ["explicit"], id="explicit-wins"
        ),
        pytest.param({}, {0: "a"}, ["x"], ["x"], ["explicit"], id="explicit-without-nodes"),
        pytest.param(
            {"a": 1, "b": 1, "c": 1},
            {0: "a", 1: "b", 2: "a", 3: "c"},
            None,
            ["c", "b", "a"],
            ["do not follow one rotation"],
            id="inconsistent-falls-back-to-crl",
        ),
        pytest.param({}, {}, None, [], ["0 zones"], id="no-zones"),
    ],
)
def test_stable_zone_order(counts, evidence, explicit, order, how_has):
    result = stable_zone_order(counts, evidence, explicit)
    assert list(result.order) == order
    for needle in how_has:
        assert needle in result.how, result.how


def test_inconsistent_matches_crl_exactly():
    counts = {"a": 3, "b": 1, "c": 2}
    evidence = {0: "b", 1: "b", 2: "a", 4: "c"}  # b at residues 0 and 1: no 3-rotation; 2 zones used, no 2-rotation
    assert not consistent(evidence, 3) and not consistent(evidence, 2)
    assert list(stable_zone_order(counts, evidence).order) == crl_zone_order(counts, evidence)


def test_zone_added_keeps_running_ordinals():
    """Every ordinal already placed keeps its zone when a zone is added or removed."""
    evidence = round_robin("abc", 6)
    for counts in ({"a": 2, "b": 2, "c": 2, "d": 5}, {"a": 2, "b": 2}, {"a": 9, "b": 1, "c": 1, "e": 1}):
        order = stable_zone_order(counts, evidence)
        assert all(order.zone_for(i) == zone for i, zone in evidence.items()), (counts, order)


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

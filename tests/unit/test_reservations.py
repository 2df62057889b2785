"""Reservations (extender/state/reservations.py): what stands in for pods decided but not yet
shown by the watch. The invariant, as a property over random operations and clock steps: after
any call, the reservations held are exactly those not yet past their time (expire() skips its
scan while none can be due, and must never keep one that is, nor drop one that is not)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.engine import PlacementKind
from extender.state.objects import parse_pod
from extender.state.reservations import Reservations

from builders import pod

PODS = [parse_pod(pod(f"p-{i}", sts="p")) for i in range(4)]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


OPS = st.lists(
    st.tuples(
        st.sampled_from(["tentative", "commit", "release", "confirm", "advance", "get"]),
        st.integers(0, len(PODS) - 1),
        st.floats(0, 40),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=OPS, tentative_ttl=st.floats(1, 30), committed_ttl=st.floats(1, 60))
def test_exactly_the_reservations_not_yet_past_their_time_are_held(ops, tentative_ttl, committed_ttl) -> None:
    clock = Clock()
    table = Reservations(tentative_ttl=tentative_ttl, committed_ttl=committed_ttl, clock=clock)
    model: dict[str, tuple[PlacementKind, float, bool]] = {}  # uid -> (kind, expires, written)
    for op, i, step in ops:
        p = PODS[i]
        if op == "tentative":
            if model.get(p.uid, (None,))[0] is not PlacementKind.COMMITTED:  # a bind is never undone
                model[p.uid] = (PlacementKind.TENTATIVE, clock.now + tentative_ttl, False)
            table.tentative(p, "n1", None)
        elif op == "commit":
            model[p.uid] = (PlacementKind.COMMITTED, clock.now + committed_ttl, False)
            table.commit(p, "n1")
        elif op == "release":
            model.pop(p.uid, None)
            table.release(p.uid)
        elif op == "confirm":
            entry = model.get(p.uid)
            if entry is not None and entry[0] is PlacementKind.COMMITTED:
                model[p.uid] = (entry[0], entry[1], True)
            table.confirm(p.uid)
        elif op == "advance":
            clock.now += step
        else:
            table.expire()
            model = {u: e for u, e in model.items() if e[1] > clock.now}
            held = {r.pod.uid: (r.kind, r.expires, r.written) for r in table.peek_all()}
            assert held == model
    table.expire()
    assert {r.pod.uid for r in table} == {u for u, e in model.items() if e[1] > clock.now}

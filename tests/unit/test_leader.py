"""Leader election among extender replicas (extender/server/leader.py): the claim rule as a table,
and the invariant as a property: whatever the interleaving of rounds, pauses, kills and graceful
ends, never two replicas active at one moment, and a live standby takes over within the bound."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from extender.server.leader import REANNOUNCE, LeaderElector, LeaseConflict, Timing, _Seen, claim, released

TIMING = Timing(lease_duration=10, renew_deadline=7, retry_period=2)
WALL = datetime(2026, 11, 29, 9, 0, 0, tzinfo=UTC)


class FakeLeases:
    """The API server's Lease: a spec and a resourceVersion, a conflict on a stale write."""

    def __init__(self) -> None:
        self.spec: dict[str, Any] | None = None
        self.version = 0
        self.down = False  # the API server unreachable

    def get(self) -> tuple[dict[str, Any], str] | None:
        if self.down:
            raise OSError("connection refused")
        return None if self.spec is None else (dict(self.spec), str(self.version))

    def create(self, spec: dict[str, Any]) -> None:
        if self.down:
            raise OSError("connection refused")
        if self.spec is not None:
            raise LeaseConflict("exists")
        self.spec, self.version = dict(spec), self.version + 1

    def update(self, spec: dict[str, Any], resource_version: str) -> None:
        if self.down:
            raise OSError("connection refused")
        if resource_version != str(self.version):
            raise LeaseConflict("changed")
        self.spec, self.version = dict(spec), self.version + 1


def lease(holder: str, renew: str = "t0", transitions: int = 3) -> dict[str, Any]:
    return {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": 10, "leaseTransitions": transitions}


# (case, current lease, what this replica saw and when, now) -> takes it?, transitions after
CLAIMS = [
    ("no lease yet: create it", None, None, 0.0, True, 0),
    ("another holder, just seen", lease("b"), None, 100.0, False, None),
    ("another holder, unchanged for less than its duration", lease("b"), (lease("b"), 95.0), 104.9, False, None),
    ("another holder, unchanged for its duration: expired", lease("b"), (lease("b"), 90.0), 100.0, True, 4),
    ("another holder renewed since: live again", lease("b", "t1"), (lease("b", "t0"), 80.0), 100.0, False, None),
    ("released (no holder): taken at once", lease(""), None, 100.0, True, 4),
    ("our own: renewed, no transition", lease("me"), None, 100.0, True, 3),
]


@pytest.mark.parametrize(("case", "current", "seen", "now", "takes", "transitions"), CLAIMS, ids=[c[0] for c in CLAIMS])
def test_claim(case: str, current, seen, now: float, takes: bool, transitions) -> None:  # noqa: ANN001
    before = None
    if seen is not None:
        spec, at = seen
        before = _Seen(
            (spec["holderIdentity"], spec["renewTime"], spec["leaseDurationSeconds"], spec["leaseTransitions"]), at
        )
    spec, _ = claim(current, "me", before, now, WALL, TIMING)
    assert (spec is not None) is takes, case
    if spec is not None:
        assert spec["holderIdentity"] == "me"
        assert spec["leaseTransitions"] == transitions
        assert spec["renewTime"] == "2026-11-29T09:00:00.000000Z"


def test_released_lease_has_no_holder() -> None:
    spec = released(lease("me"), WALL)
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1


def test_timing_must_let_the_holder_stop_before_another_may_start() -> None:
    with pytest.raises(ValueError, match="renew deadline < lease duration"):
        Timing(lease_duration=5, renew_deadline=7, retry_period=2)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def electors(count: int, leases: FakeLeases, clock: Clock) -> list[LeaderElector]:
    # The wall clock moves with the monotonic one: each renewal writes a new renewTime, which is
    # how a candidate sees the holder is alive.
    def wall() -> datetime:
        return WALL + timedelta(seconds=clock.now)

    return [LeaderElector(leases, f"r{i}", timing=TIMING, clock=clock, wall=wall) for i in range(count)]


def test_a_standby_refuses_and_names_the_holder() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = electors(2, leases, clock)
    assert a.try_once() and not b.try_once()
    assert a.refusal() is None
    refusal = b.refusal()
    assert refusal is not None and "standby" in refusal and a.identity in refusal


def test_a_replica_with_a_partial_cache_never_takes_the_lease() -> None:
    leases, clock = FakeLeases(), Clock()
    a = LeaderElector(leases, "a", timing=TIMING, clock=clock, ready=lambda: False)
    assert not a.try_once() and leases.spec is None


def test_a_holder_that_stops_renewing_stops_deciding_before_the_standby_starts() -> None:
    """Frozen or cut off from the API server, the holder cannot know it lost the Lease: it must
    stop at its renew deadline, before the standby may take the Lease at its duration."""
    leases, clock = FakeLeases(), Clock()
    a, b = electors(2, leases, clock)
    a.try_once()
    while clock.now < 30:
        clock.now += 0.5
        b.try_once()
        assert not (a.active() and b.active()), clock.now
    assert b.active() and not a.active()


def test_graceful_end_hands_over_at_the_next_try() -> None:
    leases, clock = FakeLeases(), Clock()
    a, b = electors(2, leases, clock)
    a.try_once()
    b.try_once()
    a.step_down()
    assert not a.active()  # stops deciding before the Lease is given up
    a.release()
    clock.now += TIMING.retry_period
    assert b.try_once() and b.active()


def test_a_graceful_end_stops_being_the_endpoint_before_giving_up_the_lease() -> None:
    leases, clock = FakeLeases(), Clock()
    steps: list[str] = []
    a = LeaderElector(leases, "a", timing=TIMING, clock=clock, on_stepping_down=lambda: steps.append("vacate"))
    b = LeaderElector(leases, "b", timing=TIMING, clock=clock, on_stepping_down=lambda: steps.append("b"))
    a.try_once()
    b.try_once()
    b.step_down()  # a standby is no endpoint: nothing to vacate
    a.step_down()
    assert steps == ["vacate"] and not a.active()
    assert leases.spec is not None and leases.spec["holderIdentity"] == a.identity  # not released yet
    a.release()
    assert leases.spec["holderIdentity"] == ""
    a.step_down()
    assert steps == ["vacate"]  # once


def test_the_new_holder_becomes_the_endpoint_and_retries_until_it_has() -> None:
    leases, clock = FakeLeases(), Clock()
    calls: list[str] = []

    def claim_endpoint() -> None:
        calls.append("claim")
        if len(calls) == 1:
            raise OSError("the API server refused")

    a = LeaderElector(leases, "a", timing=TIMING, clock=clock, on_elected=claim_endpoint)
    assert a.try_once()
    clock.now += TIMING.retry_period
    assert a.try_once()
    clock.now += TIMING.retry_period
    assert a.try_once()
    assert calls == ["claim", "claim"]  # once more after the failure, then not again
    clock.now += REANNOUNCE
    assert a.try_once()
    assert calls == ["claim"] * 3  # and again now and then: a slice deleted by hand comes back


# A schedule: each step advances the clock and lets one replica act. A pause freezes the
# replica (SIGSTOP, a partition with the process alive) for a while: it does nothing and keeps
# believing what it last knew.
STEP = st.tuples(
    st.floats(min_value=0.0, max_value=4.0),  # seconds that pass
    st.integers(min_value=0, max_value=1),  # which replica
    st.sampled_from(["round", "round", "round", "pause", "kill", "end", "api-down", "api-up"]),
    st.floats(min_value=1.0, max_value=20.0),  # how long a pause lasts
)


@settings(max_examples=400, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=60))
# the holder frozen right after a renewal while the standby keeps trying: the narrowest moment
@example([(0.0, 0, "round", 1.0), (0.5, 1, "round", 1.0), (0.0, 0, "pause", 15.0)] + [(3.5, 1, "round", 1.0)] * 3)
def test_never_two_active_replicas(steps: list[tuple[float, int, str, float]]) -> None:
    """The invariant on the one clock all replicas share: the holder stops before another may start."""
    leases, clock = FakeLeases(), Clock()
    replicas = electors(2, leases, clock)
    dead: set[int] = set()
    frozen_until = [0.0, 0.0]
    for elapsed, which, action, pause in steps:
        clock.now += elapsed
        replica = replicas[which]
        if action == "api-down":
            leases.down = True
        elif action == "api-up":
            leases.down = False
        elif which in dead or clock.now < frozen_until[which]:
            pass
        elif action == "pause":
            frozen_until[which] = clock.now + pause
        elif action == "kill":
            dead.add(which)
        elif action == "end":
            replica.step_down()
            replica.release()
            dead.add(which)
        else:
            try:
                replica.try_once()
            except OSError:
                replica._lost(clock.now)
        active = [i for i, r in enumerate(replicas) if i not in dead and r.active()]
        assert len(active) <= 1, (active, steps)


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0, max_value=TIMING.retry_period), st.booleans())
def test_a_live_standby_takes_over_within_the_bound(offset: float, graceful: bool) -> None:
    """Killed: within lease_duration + retry_period of the holder's last renewal; ended gracefully:
    at the standby's next round."""
    leases, clock = FakeLeases(), Clock()
    a, b = electors(2, leases, clock)
    a.try_once()
    clock.now += offset
    b.try_once()
    ended = clock.now
    if graceful:
        a.release()
    waited = 0.0
    while not b.active():
        clock.now += TIMING.retry_period
        waited += TIMING.retry_period
        b.try_once()
        assert waited <= TIMING.lease_duration + TIMING.retry_period
    bound = TIMING.retry_period if graceful else TIMING.lease_duration + TIMING.retry_period
    assert clock.now - ended <= bound

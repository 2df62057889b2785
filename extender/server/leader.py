"""One active replica among several: a Lease decides which one places pods.

Two extender replicas would keep two caches and two sets of reservations, and two pods of one
group could each take the last place under a cap, one through each replica. So every replica
lists and watches (a standby's cache is warm, and it is Ready, so a PodDisruptionBudget counts it
and a rolling update proceeds), but only the holder of the Lease decides: a standby answers every
verb with an Error (kube-scheduler retries from its backoff queue) and lifts no gate, records no
rotation, writes nothing. The holder also makes itself the Service's one endpoint (an
EndpointSlice of a Service without a selector, server/effects.py), so kube-scheduler's calls reach
it rather than the standby.

The Lease follows client-go's leader election, so the timings mean what they mean there:
- a candidate takes the Lease when its holder has not renewed it for `lease_duration`, measured
  on the candidate's own clock from when it last saw the record change (no two clocks compared);
- the holder renews every `retry_period` and stops deciding as soon as its last successful renewal
  is `renew_deadline` old (< lease_duration), so it has stopped before anyone else may start;
- a replica ended gracefully (a drain, a rolling update: SIGTERM) stops deciding, finishes the
  calls in flight and then releases the Lease, and the standby takes it at its next try.

Failover bound: a holder killed outright is replaced within lease_duration + retry_period
(12 s by default); one ended gracefully within retry_period (2 s); then kube-proxy moves the
Service and kube-scheduler's backoff (at most 10 s) retries the pods refused meanwhile
(docs/operations/high-availability.md).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Protocol

log = logging.getLogger(__name__)

DEFAULT_LEASE_DURATION = 10.0
DEFAULT_RENEW_DEADLINE = 7.0
DEFAULT_RETRY_PERIOD = 2.0
# The holder makes itself the Service's endpoint again this often: a slice deleted or rewritten by
# hand while it leads is put back within half a minute (a read, and a write only if it differs).
REANNOUNCE = 30.0


class LeaseConflict(Exception):
    """Someone else wrote the Lease between our read and our write."""


class LeaseStore(Protocol):
    """The Lease as the API server keeps it (server/effects.py KubeLeases)."""

    def get(self) -> tuple[dict[str, Any], str] | None:
        """The Lease's spec and resourceVersion, or None when there is none."""

    def create(self, spec: dict[str, Any]) -> None:
        """Create it; LeaseConflict if it exists."""

    def update(self, spec: dict[str, Any], resource_version: str) -> None:
        """Replace its spec; LeaseConflict if it changed since `resource_version`."""


class Role(Enum):
    ACTIVE = "active"
    STANDBY = "standby"


@dataclass(frozen=True)
class Timing:
    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry period < renew deadline < lease duration "
                f"(got {self.retry_period:g} s, {self.renew_deadline:g} s, {self.lease_duration:g} s): the holder "
                "must stop deciding before another replica may take the Lease"
            )


def micro_time(now: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Seen:
    """The Lease record as this replica last saw it, and when (its own monotonic clock)."""

    record: tuple[Any, ...]
    at: float


def claim(
    current: dict[str, Any] | None,
    me: str,
    seen: _Seen | None,
    now: float,
    wall: datetime,
    timing: Timing,
) -> tuple[dict[str, Any] | None, _Seen | None]:
    """The spec to write to hold the Lease (None: it is someone else's, still live), and the
    record as seen now. Pure: the election's whole rule, tested with plain data."""
    if current is None:
        spec = {
            "holderIdentity": me,
            "leaseDurationSeconds": int(timing.lease_duration),
            "acquireTime": micro_time(wall),
            "renewTime": micro_time(wall),
            "leaseTransitions": 0,
        }
        return spec, None
    holder = current.get("holderIdentity") or ""
    record = (holder, current.get("renewTime"), current.get("leaseDurationSeconds"), current.get("leaseTransitions"))
    if seen is None or seen.record != record:
        seen = _Seen(record, now)
    duration = float(current.get("leaseDurationSeconds") or timing.lease_duration)
    if holder and holder != me and now - seen.at < duration:
        return None, seen
    spec = dict(current)
    spec["holderIdentity"] = me
    spec["leaseDurationSeconds"] = int(timing.lease_duration)
    spec["renewTime"] = micro_time(wall)
    if holder != me:
        spec["acquireTime"] = micro_time(wall)
        spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
    return spec, seen


def released(current: dict[str, Any], wall: datetime) -> dict[str, Any]:
    """The spec a holder leaves when it ends gracefully: no holder, so a standby takes it at once
    (client-go's ReleaseOnCancel writes the same)."""
    spec = dict(current)
    spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(wall))
    return spec


class LeaderElector:
    """Holds, renews and releases the Lease; `refusal()` says why this replica may not decide."""

    def __init__(
        self,
        leases: LeaseStore,
        name: str,
        *,
        timing: Timing = Timing(),
        ready: Callable[[], bool] = lambda: True,
        on_elected: Callable[[], None] = lambda: None,
        on_stepping_down: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.leases = leases
        self.identity = f"{name}_{uuid.uuid4().hex[:10]}"  # a restarted container is a new candidate
        self.timing = timing
        self.ready = ready  # a replica with a partial cache never leads
        self.on_elected = on_elected  # becomes the Service's endpoint (retried until it succeeds)
        self.on_stepping_down = on_stepping_down  # stops being it, at a graceful end
        self.clock = clock
        self.wall = wall
        self.lock = threading.Lock()
        self._renewed: float | None = None  # when the last successful write began (our clock)
        self._seen: _Seen | None = None
        self._stopping = False
        self._announced: float | None = None  # when on_elected last succeeded (our clock)
        self._stop = threading.Event()
        self.transitions = 0  # times this replica became active
        self.holder: str | None = None  # the holder as last seen

    # ------------------------------------------------------------------ state
    def active(self) -> bool:
        with self.lock:
            return (
                not self._stopping
                and self._renewed is not None
                and self.clock() - self._renewed < self.timing.renew_deadline
            )

    def role(self) -> Role:
        return Role.ACTIVE if self.active() else Role.STANDBY

    def refusal(self) -> str | None:
        """None on the active replica; on a standby, why it does not decide (the verbs' Error)."""
        if self.active():
            return None
        holder = self.holder or "none yet"
        return (
            f"this placement extender replica ({self.identity}) is on standby: the active replica, holder of "
            f"the Lease ({holder}), decides"
        )

    # ------------------------------------------------------------------ one round
    def try_once(self) -> bool:
        """Acquire or renew the Lease once; True if this replica holds it after the round."""
        if self._stopping:
            return False
        started = self.clock()
        got = self.leases.get()
        current, version = got if got is not None else (None, "")
        spec, self._seen = claim(current, self.identity, self._seen, started, self.wall(), self.timing)
        self.holder = (current or {}).get("holderIdentity") or None
        if spec is None or (current is None and not self.ready()) or (current is not None and not self._may_lead()):
            self._lost(started)
            return False
        try:
            if current is None:
                self.leases.create(spec)
            else:
                self.leases.update(spec, version)
        except LeaseConflict:
            self._lost(started)
            return False
        with self.lock:
            if self._stopping:
                return False
            first = self._renewed is None
            self._renewed = started
        self.holder = self.identity
        if first:
            self.transitions += 1
            self._announced = None
            log.info("leader election: this replica (%s) is now the active one", self.identity)
        if self._announced is None or started - self._announced >= REANNOUNCE:
            try:
                self.on_elected()
                self._announced = started
            except Exception as err:  # noqa: BLE001 - retried every round until it succeeds
                log.warning("leader election: could not make this replica the Service's endpoint: %s", err)
        return True

    def _may_lead(self) -> bool:
        return self._renewed is not None or self.ready()

    def _lost(self, now: float) -> None:
        """No write this round: still active only while the last renewal is fresh."""
        with self.lock:
            if self._renewed is not None and now - self._renewed >= self.timing.renew_deadline:
                log.warning("leader election: the Lease was not renewed in time; this replica is on standby now")
                self._renewed = None

    # ------------------------------------------------------------------ thread
    def start(self) -> None:
        threading.Thread(target=self._run, name="leader-election", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.try_once()
            except Exception as err:  # noqa: BLE001 - the API server may be away; try again
                log.info("leader election: %s", err)
                self._lost(self.clock())
            self._stop.wait(self.timing.retry_period)

    def step_down(self) -> None:
        """Stop deciding now (a graceful end begins) and stop being the Service's endpoint; the
        Lease is released by `release`. Why the endpoint first: once this pod is gone its address
        answers nothing, so until the next holder rewrote the endpoint (up to a retry period)
        kube-scheduler's calls waited out their timeout there, and in in-scheduler mode every
        other pod of the cluster waited behind them (20 ordinary pods took 2.3 s against 0.5 s on
        the real node). A Service with no endpoint is refused at once by kube-proxy."""
        with self.lock:
            was_active = self._renewed is not None and not self._stopping
            self._stopping = True
        self._stop.set()
        if was_active:
            try:
                self.on_stepping_down()
            except Exception as err:  # noqa: BLE001 - the next holder rewrites it anyway
                log.warning("leader election: could not stop being the Service's endpoint: %s", err)

    def release(self) -> None:
        """After the calls in flight have finished: give the Lease up, so a standby takes it at
        its next try instead of after lease_duration."""
        self.step_down()
        with self.lock:
            held, self._renewed = self._renewed is not None, None
        if not held:
            return
        try:
            got = self.leases.get()
            if got is not None and got[0].get("holderIdentity") == self.identity:
                self.leases.update(released(got[0], self.wall()), got[1])
                log.info("leader election: released the Lease")
        except Exception as err:  # noqa: BLE001 - it expires on its own
            log.warning("leader election: could not release the Lease (it expires on its own): %s", err)

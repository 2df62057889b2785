"""The loop that lifts the extender's scheduling gates: the ordinal-zone gate (extender/server/gate_patch.py
says why it exists) and the in-scheduler placeable gate (extender/server/place_gate.py).

A background thread of the serving process: every `interval` it asks the verbs what to do with
each pod the cache shows held by the ordinal-zone gate (Verbs.gate_answer: the same zone order the
filter uses) and has the writer narrow and lift it; then it asks the place gate which held pods
have a place now, and has the writer lift those. A pod whose write failed waits `retry_after` before
the next try. Nothing is done while the cache is unsynced (a restart, a lost watch): a gated pod
then simply waits, as it would for a scheduler that is down.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Protocol

from ..api.policy import PLACEABLE_GATE
from .gate_answers import GateAnswer
from .periodic import PeriodicPass
from .place_gate import LiftStage, PlaceGate
from .verbs import Verbs

log = logging.getLogger(__name__)

UNGATED_LOG_EVERY = 300.0  # seconds between two warnings about one workload's ungated opted-in pods


class GateWriter(Protocol):
    def lift(self, answer: GateAnswer) -> None:
        """Narrow the pod's node affinity by answer.requirement and remove the gate, in one write."""


class GateLifter(PeriodicPass):
    name = "gate-lifter"
    # A lift follows a freed slot within this (a filter's answer wakes the loop): at 20 ms the wait
    # was a tenth of a lift's round trip. A pass over a full window sorts no held pod (place_gate.py).
    min_gap = 0.005

    def __init__(
        self,
        verbs: Verbs,
        writer: GateWriter,
        interval: float = 0.2,
        retry_after: float = 5.0,
        place: PlaceGate | None = None,
    ) -> None:
        self.verbs = verbs
        self.writer = writer
        self.place = place
        self.interval = interval
        self.wake = getattr(verbs.store, "gate_work", None)  # lifts follow binds (ClusterStore.gate_work)
        self.retry_after = retry_after
        self._retry_at: dict[str, float] = {}
        self._ungated_logged: dict[str, float] = {}  # workload -> when its ungated pods were last logged
        self._ungated_counts: dict[str, int] = {}  # workload -> ungated pods not logged yet
        # The placeable gate's lifts are written by these threads while the loop goes on: at most
        # the window's worth are in flight (a lift counts from its answer), so 8 keep up with it.
        self._writers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="gate-write")
        self._pending: set[Future[int]] = set()

    def pass_once(self, now: float | None = None) -> int:
        """One pass over the gated pods; returns how many were lifted (the placeable gate's:
        handed to the writer threads, drain() waits for them)."""
        now = time.monotonic() if now is None else now
        store = self.verbs.store
        with store.lock.held("gates"):
            uids = list(store.gated)
            for uid in list(self._retry_at):
                if uid not in store.gated and uid not in store.held:
                    del self._retry_at[uid]
        lifted = 0
        for uid in uids:
            if self._retry_at.get(uid, 0.0) > now:
                continue
            answer = None
            try:
                answer = self.verbs.gate_answer(uid)
                if answer is None:
                    continue
                self.writer.lift(answer)
                lifted += 1
            except Exception as err:  # noqa: BLE001 - one pod's failure never stops the others
                self._retry_at[uid] = now + self.retry_after
                log.warning(
                    "could not lift the ordinal-zone gate of %s: %s (the extender needs get and patch on pods)",
                    answer.pod.key if answer is not None else uid,
                    err,
                )
        self._report_ungated(now)
        return lifted + self._lift_placeable(now)

    def _report_ungated(self, now: float) -> None:
        """Log the opted-in pods that arrived outside the placeable gate: once per workload per
        UNGATED_LOG_EVERY, with how many, so the gap is loud without flooding the log."""
        store = self.verbs.store
        with store.lock.held("gates"):
            arrivals = list(store.ungated_recent)
            store.ungated_recent.clear()
        by_owner: dict[str, list[str]] = {}
        for pod in arrivals:
            by_owner.setdefault(pod.owner, []).append(pod.name)
        for owner, names in by_owner.items():
            self._ungated_counts[owner] = self._ungated_counts.get(owner, 0) + len(names)
            if now - self._ungated_logged.get(owner, float("-inf")) < UNGATED_LOG_EVERY:
                continue
            self._ungated_logged[owner] = now
            count = self._ungated_counts.pop(owner)
            log.warning(
                "%d opted-in pod(s) of %s (latest %s) were created without the %s gate: they are outside "
                "in-scheduler mode's bound (while this extender hangs, kube-scheduler waits its httpTimeout "
                "on each, and every other pod waits with it). Install the MutatingAdmissionPolicy of "
                "deploy/overlays/in-scheduler (Kubernetes 1.36+), or put the gate in the template "
                "(adopt --mode in-scheduler does)",
                count,
                owner,
                names[-1],
                PLACEABLE_GATE,
            )

    def _lift_placeable(self, now: float) -> int:
        """The pass's lifts, handed to the writer threads and not waited for: a lift's PATCH took
        40-80 ms on a busy API server, and while a pass waited for its writes the slots that
        filter's answers freed meanwhile waited too (lifts came in bursts 40-90 ms apart, opted-in
        pods placed at 0.70 of the gate floor's rate). Each lift already counts against the window,
        so at most a window of writes is in flight. Returns how many were handed over."""
        if self.place is None:
            return 0
        answers = []
        for answer in self.place.answers(now):
            if self._retry_at.get(answer.pod.uid, 0.0) > now:
                with self.verbs.store.lock.held("gates"):
                    self.place.lifted.pop(answer.pod.uid, None)
            else:
                answers.append(answer)
        self._pending = {f for f in self._pending if not f.done()}
        for answer in answers:
            self._pending.add(self._writers.submit(self._write, answer, now))
        return len(answers)

    def drain(self, timeout: float | None = None) -> int:
        """Wait for the lifts handed over so far; how many were written."""
        done, _ = wait(list(self._pending), timeout)
        return sum(f.result() for f in done)

    def _write(self, answer: GateAnswer, now: float) -> int:
        try:
            self.writer.lift(answer)
            entry = self.place.lifted.get(answer.pod.uid) if self.place is not None else None
            if entry is not None and not entry.visible:
                self.place.on_stage(LiftStage.WRITTEN, max(0.0, time.monotonic() - now))
            return 1
        except Exception as err:  # noqa: BLE001 - one pod's failure never stops the others
            with self.verbs.store.lock.held("gates"):  # the loop reads both under the lock
                if self.place is not None:
                    self.place.lifted.pop(answer.pod.uid, None)  # not lifted: it must not hold the window
                self._retry_at[answer.pod.uid] = now + self.retry_after
            log.warning(
                "could not lift the placeable gate of %s: %s (the extender needs get and patch on pods)",
                answer.pod.key,
                err,
            )
            return 0

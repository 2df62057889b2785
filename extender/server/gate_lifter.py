"""The loop that lifts the ordinal-zone scheduling gate (extender/server/gate_patch.py says why it exists).

A background thread of the serving process: every `interval` it asks the verbs what to do with
each pod the cache shows held by the gate (Verbs.gate_answer: the same zone order the filter
uses) and has the writer narrow and lift it. A pod whose write failed waits `retry_after` before
the next try. Nothing is done while the cache is unsynced (a restart, a lost watch): a gated pod
then simply waits, as it would for a scheduler that is down.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from .gate_answers import GateAnswer
from .periodic import PeriodicPass
from .verbs import Verbs

log = logging.getLogger(__name__)


class GateWriter(Protocol):
    def lift(self, answer: GateAnswer) -> None:
        """Narrow the pod's node affinity by answer.requirement and remove the gate, in one write."""


class GateLifter(PeriodicPass):
    name = "gate-lifter"

    def __init__(self, verbs: Verbs, writer: GateWriter, interval: float = 0.5, retry_after: float = 5.0) -> None:
        self.verbs = verbs
        self.writer = writer
        self.interval = interval
        self.retry_after = retry_after
        self._retry_at: dict[str, float] = {}

    def pass_once(self, now: float | None = None) -> int:
        """One pass over the gated pods; returns how many were lifted."""
        now = time.monotonic() if now is None else now
        store = self.verbs.store
        with store.lock.held("gates"):
            uids = list(store.gated)
            for uid in list(self._retry_at):
                if uid not in store.gated:
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
        return lifted

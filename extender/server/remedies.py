"""A pod no node takes gets one PlacementRejected event: how many nodes each rule removed, and
what would free it (engine/remedy.py), computed within a bound on the lock time.

The remedy is computed at most once a minute per pod (a few decisions' worth), the last answer
reused between, and at most once a second across all pods. A pod that finds the second taken is
owed one: `RemedyWorker` (a background loop) computes it shortly and sends the event with it,
since kube-scheduler may not call filter for that pod again for minutes (kubernetes#122019).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence

from ..engine import remedies
from ..state.objects import PodRecord
from ..state.store import ClusterStore
from .periodic import PeriodicPass
from .ports import EventSink
from .reuse import DecisionInputs

REMEDY_INTERVAL = 60.0  # seconds between computing what would free one Pending pod
REMEDY_SPACING = 1.0  # seconds between two such computations, whatever the pods: a bound on how often
REMEDY_BUDGET = 0.5  # seconds one computation may hold the cache (the Verbs pass their decision deadline)
ANSWERS_REMEMBERED = 10_000
OWED_REMEMBERED = 1000


class RemedyDesk:
    """The remedies computed, the one owed, and when the last was computed."""

    def __init__(self, store: ClusterStore, events: EventSink, budget: float = REMEDY_BUDGET) -> None:
        self.store = store
        self.events = events
        self.budget = budget  # seconds one computation may take, under the cache lock
        self.answers: OrderedDict[str, tuple[float, str]] = OrderedDict()  # uid -> (when, text)
        self.owed: OrderedDict[str, tuple] = OrderedDict()  # uid -> what computing it needs
        self.last_computed = -1e9

    def remedy(self, pod: PodRecord, inputs: DecisionInputs | None, names: Sequence[str], summary: str) -> str:
        """The remedy text for the pod's event now: computed, the last one, or "" (then owed)."""
        if inputs is None:
            return ""
        now = time.monotonic()
        last = self.answers.get(pod.uid)
        if last is not None and now - last[0] < REMEDY_INTERVAL:
            return last[1]
        if now - self.last_computed < REMEDY_SPACING:
            self.owed[pod.uid] = (pod, inputs, list(names), summary)
            if len(self.owed) > OWED_REMEMBERED:
                self.owed.popitem(last=False)
            return last[1] if last is not None else ""
        return self._compute(pod, inputs, names, now)

    def _compute(self, pod: PodRecord, inputs: DecisionInputs, names: Sequence[str], now: float) -> str:
        self.last_computed = now
        with self.store.lock.held("remedy"):
            found = remedies(
                inputs.spec,
                inputs.request,
                pod.labels,
                inputs.snap,
                names,
                lambda other: self.store.decision_inputs(pod, other)[1],
                deadline=time.monotonic() + self.budget,
            )
        text = (" — it would be placed with " + "; or ".join(r.text for r in found)) if found else ""
        self.answers[pod.uid] = (now, text)
        if len(self.answers) > ANSWERS_REMEMBERED:
            self.answers.popitem(last=False)
        return text

    def pay(self, now: float | None = None) -> int:
        """Compute one owed remedy if the second allows, and send its event; returns how many."""
        now = time.monotonic() if now is None else now
        if not self.owed or now - self.last_computed < REMEDY_SPACING:
            return 0
        uid, (pod, inputs, names, summary) = self.owed.popitem(last=False)
        with self.store.lock.held("remedy"):
            still_waiting = uid in self.store.pods and self.store.pods[uid].node is None
        if not still_waiting:
            return 0
        text = self._compute(pod, inputs, names, now)
        if text:
            self.events.pod_event(pod, "PlacementRejected", summary + text)
        return 1


class RemedyWorker(PeriodicPass):
    """The loop that pays the remedies the filter deferred, off the request path."""

    name = "remedies"

    def __init__(self, desk: RemedyDesk, interval: float = 0.25) -> None:
        self.desk = desk
        self.interval = interval

    def pass_once(self) -> None:
        self.desk.pay()

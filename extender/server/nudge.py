"""After a PlacementPolicy is created or edited, the pods waiting for it are tried again at once.

kube-scheduler parks a pod the extender refused until some cluster event moves it (it records the
refusal under a pseudo-plugin that any event wakes, kubernetes#122019); a PlacementPolicy is not
an object it watches, so in a quiet cluster a fixed policy would wait up to its 5-minute flush.
An update of the waiting pod itself is such an event: the loop here writes the policy's
generation into each waiting pod's POLICY_GENERATION_ANNOTATION (a merge patch, the gate's
`patch` verb).

Invariant (once 20 edits with 401 pods waiting made 1,203 pod PATCHes): a burst of edits costs at
most one write per waiting pod of the extender's own. Edits are coalesced: the waiting pods are
collected once the policy has been quiet for
`quiet` seconds (or `max_delay` after the burst's first edit, so a policy edited without pause is
still served), each pod is pending once whatever the number of edits, it is written with the
generation current when its turn comes, and a pod that already carries that generation, is no
longer waiting, or is not the extender's (ClusterStore.owns) is not written. Nothing is written
once a burst has been served; at most `per_pass` writes a pass, `concurrency` at a time (pods with nothing to write
are skipped, not counted), and at most `max_pending` pods
pending (more are dropped and counted: kube-scheduler's own flush still comes).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ..state.objects import PodRecord
from ..state.store import ClusterStore, waiting_for
from .periodic import PeriodicPass

log = logging.getLogger(__name__)


class PodNudger(Protocol):
    def nudge(self, pod: PodRecord, generation: str) -> None:
        """Record the policy generation on the pod (an update kube-scheduler reacts to)."""


class PolicyNudger(PeriodicPass):
    name = "policy-nudger"

    def __init__(
        self,
        store: ClusterStore,
        writer: PodNudger,
        interval: float = 0.25,
        per_pass: int = 50,
        quiet: float = 2.0,
        max_delay: float = 10.0,
        max_pending: int = 20_000,
        concurrency: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.writer = writer
        self.interval = interval
        self.per_pass = per_pass
        self.quiet = quiet
        self.max_delay = max_delay
        self.max_pending = max_pending
        self.clock = clock
        self.concurrency = concurrency
        self._edited: dict[tuple[str, str], float] = {}  # policy -> when its burst began
        self._last_edit = 0.0
        self._pending: OrderedDict[str, tuple[str, str]] = OrderedDict()  # pod uid -> its policy
        self.written = 0
        self.dropped = 0

    def pass_once(self) -> int:
        if self.store.standby() is not None:
            return 0  # the active replica nudges; the edits wait here for a takeover
        now = self.clock()
        with self.store.lock.held("nudge"):
            edits, self.store.policy_edits = self.store.policy_edits, {}
            for key in edits:
                self._edited.setdefault(key, now)
                self._last_edit = now
            if self._edited and self._burst_over(now):
                self._collect()
            work = []
            while self._pending and len(work) < self.per_pass:
                due = self._due(*self._pending.popitem(last=False))
                if due is not None:
                    work.append(due)
        if self.concurrency > 1 and len(work) > 1:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="nudge") as writers:
                done = sum(writers.map(self._write, work))
        else:
            done = sum(map(self._write, work))
        self.written += done
        return done

    def _write(self, due: tuple[PodRecord, str]) -> bool:
        pod, generation = due
        try:
            self.writer.nudge(pod, generation)
            return True
        except Exception as err:  # noqa: BLE001 - kube-scheduler's own flush still comes
            log.info("could not nudge %s after its policy changed: %s", pod.key, err)
            return False

    def _burst_over(self, now: float) -> bool:
        """The edits have stopped for `quiet`, or the burst has lasted `max_delay`."""
        return now - self._last_edit >= self.quiet or now - min(self._edited.values()) >= self.max_delay

    def _collect(self) -> None:
        """Every waiting pod of the extender's own that names an edited policy, pending once."""
        for namespace, name in self._edited:
            for pod in waiting_for(self.store, namespace, name):
                if not self.store.owns(pod) or pod.uid in self._pending:
                    continue
                if len(self._pending) >= self.max_pending:
                    self.dropped += 1
                    continue
                self._pending[pod.uid] = (namespace, name)
        self._edited.clear()

    def _due(self, uid: str, key: tuple[str, str]) -> tuple[PodRecord, str] | None:
        """The pod and the generation to write, if it still waits and does not carry it."""
        pod, policy = self.store.pods.get(uid), self.store.policies.get(key)
        if pod is None or policy is None or pod.node is not None or pod.gated or pod.finished:
            return None
        generation = str(policy.generation or "0")
        return None if pod.nudged_generation == generation else (pod, generation)

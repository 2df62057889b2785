"""After a PlacementPolicy is created or edited, the pods waiting for it are tried again at once.

kube-scheduler parks a pod the extender refused until some cluster event moves it (it records the
refusal under a pseudo-plugin that any event wakes, kubernetes#122019); a PlacementPolicy is not
an object it watches, so in a quiet cluster a fixed policy would wait up to its 5-minute flush.
An update of the waiting pod itself is such an event: the loop here writes the policy's
generation into each waiting pod's POLICY_GENERATION_ANNOTATION (a merge patch, the gate's
`patch` verb), at most `per_pass` pods a pass, so an edit over a large group never floods the API
server. Only pods that name the policy and have no node are touched.
"""

from __future__ import annotations

import logging
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

    def __init__(self, store: ClusterStore, writer: PodNudger, interval: float = 1.0, per_pass: int = 200) -> None:
        self.store = store
        self.writer = writer
        self.interval = interval
        self.per_pass = per_pass
        self._queue: list[tuple[PodRecord, str]] = []

    def pass_once(self) -> int:
        with self.store.lock.held("nudge"):
            edits, self.store.policy_edits = self.store.policy_edits, {}
            for (namespace, name), generation in edits.items():
                self._queue += [(pod, generation) for pod in waiting_for(self.store, namespace, name)]
        batch, self._queue = self._queue[: self.per_pass], self._queue[self.per_pass :]
        done = 0
        for pod, generation in batch:
            try:
                self.writer.nudge(pod, generation)
                done += 1
            except Exception as err:  # noqa: BLE001 - kube-scheduler's own flush still comes
                log.info("could not nudge %s after its policy changed: %s", pod.key, err)
        return done

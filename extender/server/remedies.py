"""The loop that pays the remedies the filter deferred (Verbs.pay_remedies): at most one
computation a second across all pods, off the request path, each sent as the pod's
PlacementRejected event with what would free it."""

from __future__ import annotations

from .periodic import PeriodicPass
from .verbs import Verbs


class RemedyWorker(PeriodicPass):
    name = "remedies"

    def __init__(self, verbs: Verbs, interval: float = 0.25) -> None:
        self.verbs = verbs
        self.interval = interval

    def pass_once(self) -> None:
        self.verbs.pay_remedies()

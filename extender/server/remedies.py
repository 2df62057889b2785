"""The loop that pays the remedies the filter deferred (Verbs.pay_remedies): at most one
computation a second across all pods, off the request path, each sent as the pod's
PlacementRejected event with what would free it."""

from __future__ import annotations

import logging
import threading
import time

from ..verbs import Verbs

log = logging.getLogger(__name__)


class RemedyWorker:
    def __init__(self, verbs: Verbs, interval: float = 0.25) -> None:
        self.verbs = verbs
        self.interval = interval
        self._thread = threading.Thread(target=self._run, name="remedies", daemon=True)

    def start(self) -> RemedyWorker:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            try:
                self.verbs.pay_remedies()
            except Exception:  # noqa: BLE001 - advice only: never let it stop the loop
                log.exception("remedy computation failed")
            time.sleep(self.interval)

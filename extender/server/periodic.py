"""The shape every background loop of the serving process shares: one daemon thread that runs a
pass, sleeps `interval`, and runs the next, whatever the last one raised.

Why one base: a loop that dies on one pod's bad data stops lifting gates, nudging pods or writing
costs for every pod after it, silently. Here a failed pass is logged with its traceback and the
next one runs on time; each loop says only what one pass does (`pass_once`, testable alone).
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from typing import ClassVar, Self

log = logging.getLogger(__name__)


class PeriodicPass(ABC):
    """Subclasses set `name` (the thread's name and the log's) and `interval`, and define `pass_once`."""

    name: ClassVar[str]
    interval: float
    # Set by whoever has work for the loop sooner than `interval` (None: a plain timer); a pass
    # then starts at once, but never sooner than `min_gap` after the last one began.
    wake: threading.Event | None = None
    min_gap: float = 0.02

    def start(self) -> Self:
        threading.Thread(target=self._run, name=self.name, daemon=True).start()
        return self

    @abstractmethod
    def pass_once(self) -> object:
        """One pass of the loop's work."""

    def guarded_pass(self) -> None:
        """One pass; an exception is logged, never raised: the loop must outlive any one object."""
        try:
            self.pass_once()
        except Exception:  # noqa: BLE001
            log.exception("%s pass failed (the next pass runs in %.1f s)", self.name, self.interval)

    def _run(self) -> None:
        while True:
            began = time.monotonic()
            self.guarded_pass()
            if self.wake is None:
                time.sleep(self.interval)
                continue
            self.wake.wait(max(0.0, self.interval - (time.monotonic() - began)))
            self.wake.clear()
            time.sleep(max(0.0, self.min_gap - (time.monotonic() - began)))

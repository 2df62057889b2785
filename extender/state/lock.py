"""The cache's one lock, timed: how long each holder kept every other decision waiting.

Decisions, binds and watch events share one re-entrant lock (see server/serve.py for why one
process and one lock). A bounded decision is only half the promise; the other half is that no
holder keeps the lock long, and this is where that is measured: each outermost hold is reported
with its holder's name (filter, prioritize, bind, preempt, watch...).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Observer = Callable[[float, str], None]  # (seconds held, holder)


class TimedLock:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._local = threading.local()
        self.observe: Observer | None = None

    @contextmanager
    def held(self, holder: str) -> Iterator[None]:
        """Hold the lock as `holder`; the outermost hold of a thread is timed and reported."""
        with self._lock:
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            started = time.perf_counter() if depth == 0 else 0.0
            try:
                yield
            finally:
                self._local.depth = depth
                if depth == 0 and self.observe is not None:
                    self.observe(time.perf_counter() - started, holder)

    # `with store.lock:` keeps working for code that does not name itself.
    def __enter__(self) -> None:
        stack = getattr(self._local, "plain", None)
        if stack is None:
            stack = self._local.plain = []
        manager = self.held("other")
        stack.append(manager)
        manager.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._local.plain.pop().__exit__(*exc)

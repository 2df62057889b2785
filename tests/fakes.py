"""Test doubles for the verbs' effects (extender/server/verbs.py: Binder, EventSink)."""

from __future__ import annotations

from extender.state.objects import PodRecord


class RecordedEvents:
    """Keeps the events the verbs record, in order, for assertions."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        self.events.append((pod.key, reason, message))

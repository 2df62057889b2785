"""What the verbs ask of the cluster, as interfaces: a Binding, a pod's Event, a ZoneRotation
record. server/effects.py implements them against the API server; the unit tests use plain
fakes, so every verb is tested without one."""

from __future__ import annotations

from typing import Protocol

from ..state.objects import PodRecord, RotationRecord


class BindError(Exception):
    pass


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding; raise BindError with a readable message on failure."""


class EventSink(Protocol):
    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        """Record a Warning event on the pod (deduplicated and rate limited by the sink)."""


class RecordWriter(Protocol):
    def zone_rotation(self, record: RotationRecord) -> None:
        """Create the StatefulSet's ZoneRotation object (asynchronously; an existing one wins)."""

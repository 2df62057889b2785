"""What the verbs ask of the cluster, as interfaces: a Binding, a pod's Event, a ZoneRotation
record. server/effects.py implements them against the API server; the unit tests use plain
fakes, so every verb is tested without one."""

from __future__ import annotations

from typing import Protocol

from ..state.objects import PodRecord, RotationRecord


class BindError(Exception):
    pass


class BindOutcomeUnknown(BindError):
    """No answer came (a network fault, the deadline): the Binding may have landed or not."""


class AlreadyBound(BindError):
    """The API server refused the Binding because the pod is bound already, to `node`: one of
    our own Bindings that landed after kube-scheduler stopped waiting for it, found by its retry."""

    def __init__(self, message: str, node: str) -> None:
        super().__init__(message)
        self.node = node


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding; raise BindError with a readable message on failure."""


class EventSink(Protocol):
    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        """Record a Warning event on the pod (deduplicated and rate limited by the sink)."""


class RecordWriter(Protocol):
    def zone_rotation(self, record: RotationRecord) -> None:
        """Create the StatefulSet's ZoneRotation object (asynchronously; an existing one wins)."""

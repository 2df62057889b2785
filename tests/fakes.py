"""Test doubles for the verbs' effects (extender/server/verbs.py: Binder, EventSink)."""

from __future__ import annotations

from typing import Any

from extender.server.verbs import Verbs
from extender.state.objects import ObjectError, PodRecord, parse_pod
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore


class RecordedEvents:
    """Keeps the events the verbs record, in order, for assertions."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        self.events.append((pod.key, reason, message))


class ShownVerbs(Verbs):
    """Verbs whose store is first shown the pod a filter, prioritize or preempt names, as the
    watch shows a pod before kube-scheduler asks about it. The verbs judge the watch's copy,
    never the request's (verbs.py); tests of the engine's answers send the pod they mean, and
    tests of a pod the watch does not show set `show = False`."""

    show = True

    def _show(self, pod: Any) -> None:
        if self.show and isinstance(pod, dict):
            try:
                if parse_pod(pod) != self.store.pods.get(parse_pod(pod).uid):  # an unchanged pod is no event
                    self.store.apply("pods", "ADDED", pod)
            except ObjectError:
                pass  # a malformed pod: the verb answers it as the request's parse does

    def filter(self, args):  # noqa: ANN001, ANN201
        self._show(args.Pod)
        return super().filter(args)

    def prioritize(self, args):  # noqa: ANN001, ANN201
        self._show(args.Pod)
        return super().prioritize(args)

    def preempt(self, args):  # noqa: ANN001, ANN201
        self._show(args.Pod)
        return super().preempt(args)


def synced_store(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterStore:
    """A store as the watch leaves it after its first sync: every kind listed, these nodes and pods."""
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for n in nodes:
        store.apply("nodes", "ADDED", n)
    for p in pods:
        store.apply("pods", "ADDED", p)
    return store

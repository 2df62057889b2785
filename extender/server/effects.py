"""What the verbs do to the cluster: Bindings, and Warning events on pods.

The verbs see these through the `Binder` and `EventSink` protocols (extender/verbs.py), so the
verbs are tested with plain fakes and served with these; they sit with the server, above the
verbs, and use the API client below the cache (extender/kubeapi.py).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from datetime import UTC, datetime

from ..kubeapi import KubeApiError, KubeHttp
from ..state.objects import PodRecord
from ..verbs import BindError

log = logging.getLogger(__name__)

COMPONENT = "placement-extender"


class KubeBinder:
    def __init__(self, api: KubeHttp, timeout: float = 15.0) -> None:
        self.api = api
        self.timeout = timeout

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self.api.create(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body, timeout=self.timeout)
        except KubeApiError as err:
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None
        except Exception as err:  # network faults: the scheduler retries the pod
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None


class KubeEventSink:
    """Warning events on pods, sent from a background thread.

    The same (pod, reason, message) is sent at most once per `interval`, and the queue is bounded,
    so a burst of rejections over a large cluster never floods the API server or blocks a request.
    Invariant: the table that remembers what was sent holds at most `remembered` keys and only
    ones younger than `interval`, and keeping it so costs O(1) per event (oldest first, in an
    OrderedDict), however many pods churn through the cluster.
    """

    def __init__(self, api: KubeHttp, interval: float = 600.0, capacity: int = 1000, remembered: int = 10_000) -> None:
        self.api = api
        self.interval = interval
        self.remembered = remembered
        self._queue: queue.Queue[tuple[PodRecord, str, str]] = queue.Queue(capacity)
        self._sent: OrderedDict[tuple[str, str, str], float] = OrderedDict()  # key -> when, oldest first
        self._lock = threading.Lock()
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self._thread.start()

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        if not self._first_in_interval((pod.uid, reason, message)):
            return
        try:
            self._queue.put_nowait((pod, reason, message))
        except queue.Full:
            self.dropped += 1

    def _first_in_interval(self, key: tuple[str, str, str], now: float | None = None) -> bool:
        """Whether `key` was not sent within the interval; if so it is remembered as sent now.
        The clock is read under the lock, so the table is in order of time."""
        with self._lock:
            now = time.monotonic() if now is None else now
            while self._sent and now - next(iter(self._sent.values())) >= self.interval:
                self._sent.popitem(last=False)  # expired, oldest first
            sent = self._sent.get(key)
            if sent is not None and now - sent < self.interval:
                return False
            self._sent.pop(key, None)
            self._sent[key] = now
            if len(self._sent) > self.remembered:
                self._sent.popitem(last=False)
            return True

    def remembered_keys(self) -> int:
        return len(self._sent)

    def _run(self) -> None:
        while True:
            pod, reason, message = self._queue.get()
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
                "involvedObject": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "namespace": pod.namespace,
                    "name": pod.name,
                    "uid": pod.uid,
                },
                "reason": reason,
                "message": message[:1024],
                "type": "Warning",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "count": 1,
            }
            try:
                self.api.create(f"/api/v1/namespaces/{pod.namespace}/events", body, timeout=10)
            except Exception as err:  # an event is best effort; never let it kill the thread
                log.warning("could not record event %s on %s: %s", reason, pod.key, err)


class DiscardEvents:
    """`--no-events`: the verbs' events go nowhere (metrics and logs still say what happened)."""

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        return None

"""The Kubernetes API, for the few things the extender writes: Bindings and Events.

Raw JSON through the official client's ApiClient (auth, TLS, kubeconfig handling), without its
model classes: they are slow for large lists and its Binding model fails to decode the API's
answer. Nothing here runs on the filter/prioritize path.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from datetime import datetime, timezone
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from .state.objects import PodRecord
from .verbs import BindError

log = logging.getLogger(__name__)

COMPONENT = "placement-extender"


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (flag, $KUBECONFIG, ~/.kube/config)."""
    if kubeconfig is None:
        try:
            config.load_incluster_config()
            return client.ApiClient()
        except config.ConfigException:
            pass
    cfg = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return client.ApiClient(cfg)


def request_json(api: client.ApiClient, method: str, path: str, *, body: Any = None, query: list[tuple[str, str]] | None = None,
                 timeout: float | tuple[float, float] = 30, stream: bool = False) -> Any:
    """One API call with raw JSON in and out; `stream=True` returns the open urllib3 response."""
    response = api.call_api(
        path,
        method,
        query_params=query or [],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=timeout,
    )
    raw = response[0] if isinstance(response, tuple) else response
    if stream:
        return raw
    data = raw.data
    return json.loads(data) if data else None


def api_error_message(err: ApiException) -> str:
    try:
        body = json.loads(err.body or "")
        return f"{err.status} {body.get('reason', err.reason)}: {body.get('message', '')}".strip()
    except (ValueError, AttributeError):
        return f"{err.status} {err.reason}"


class KubeBinder:
    def __init__(self, api: client.ApiClient, timeout: float = 15.0) -> None:
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
            request_json(self.api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body, timeout=self.timeout)
        except ApiException as err:
            raise BindError(f"binding {namespace}/{name} to {node} failed: {api_error_message(err)}") from None
        except Exception as err:  # network faults: the scheduler retries the pod
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None


class KubeEventSink:
    """Warning events on pods, sent from a background thread.

    The same (pod, reason, message) is sent at most once per `interval`, and the queue is bounded,
    so a burst of rejections over a large cluster never floods the API server or blocks a request.
    """

    def __init__(self, api: client.ApiClient, interval: float = 600.0, capacity: int = 1000) -> None:
        self.api = api
        self.interval = interval
        self._queue: queue.Queue[tuple[PodRecord, str, str]] = queue.Queue(capacity)
        self._sent: dict[tuple[str, str, str], float] = {}
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="event-sink", daemon=True)
        self._thread.start()

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        key = (pod.uid, reason, message)
        now = time.monotonic()
        if now - self._sent.get(key, -self.interval - 1) < self.interval:
            return
        self._sent[key] = now
        if len(self._sent) > 10_000:
            self._sent = {k: t for k, t in self._sent.items() if now - t < self.interval}
        try:
            self._queue.put_nowait((pod, reason, message))
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            pod, reason, message = self._queue.get()
            stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{pod.name}.", "namespace": pod.namespace},
                "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid},
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
                request_json(self.api, "POST", f"/api/v1/namespaces/{pod.namespace}/events", body=body, timeout=10)
            except Exception as err:  # an event is best effort; never let it kill the thread
                log.warning("could not record event %s on %s: %s", reason, pod.key, err)


class NullEventSink:
    """Keeps events in memory (tests, `--no-events`)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        self.events.append((pod.key, reason, message))

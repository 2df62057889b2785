"""The Kubernetes API as raw JSON over requests, with the official client's configuration.

The kubernetes package loads credentials (kubeconfig, in-cluster service account, exec
plugins, token refresh); requests carries the calls. Its generated model classes are not used:
they are slow for large lists, its Binding model fails to decode the API's answer, and its
low-level call signature changed between releases. Nothing here runs on the filter/prioritize
path except the bind verb's one POST.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from datetime import datetime, timezone
from typing import Any

import requests
from kubernetes import client, config

from .state.objects import PodRecord
from .verbs import BindError

log = logging.getLogger(__name__)

COMPONENT = "placement-extender"


class KubeApiError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason


class KubeHttp:
    """Authenticated JSON calls to the API server."""

    def __init__(self, cfg: client.Configuration) -> None:
        self.cfg = cfg
        self.session = requests.Session()
        self.session.trust_env = False  # the kubeconfig decides TLS and proxies, not the environment
        self.session.verify = (cfg.ssl_ca_cert or True) if cfg.verify_ssl else False
        if cfg.cert_file and cfg.key_file:
            self.session.cert = (cfg.cert_file, cfg.key_file)
        if cfg.proxy:
            self.session.proxies = {"https": cfg.proxy, "http": cfg.proxy}

    def _headers(self) -> dict[str, str]:
        if self.cfg.refresh_api_key_hook is not None:
            self.cfg.refresh_api_key_hook(self.cfg)  # rotating service-account tokens, exec plugins
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        token = (self.cfg.api_key or {}).get("authorization") or (self.cfg.api_key or {}).get("BearerToken")
        if token:
            prefix = (self.cfg.api_key_prefix or {}).get("authorization", "")
            headers["Authorization"] = f"{prefix} {token}".strip() if prefix else token
        return headers

    def call(self, method: str, path: str, *, body: Any = None, query: list[tuple[str, str]] | None = None,
             timeout: float | tuple[float, float] = 30, stream: bool = False) -> Any:
        """One call; `stream=True` returns the open requests.Response (for watches)."""
        response = self.session.request(method, self.cfg.host.rstrip("/") + path, params=query, json=body,
                                        headers=self._headers(), timeout=timeout, stream=stream)
        if response.status_code >= 400:
            try:
                status = response.json()
                reason, message = status.get("reason", response.reason), status.get("message", "")
            except ValueError:
                reason, message = response.reason, response.text[:200]
            response.close()
            raise KubeApiError(response.status_code, reason, message)
        if stream:
            return response
        return response.json() if response.content else None


def connect(kubeconfig: str | None = None) -> KubeHttp:
    """In-cluster credentials when running in a pod, else the kubeconfig (flag, $KUBECONFIG, ~/.kube/config)."""
    cfg = client.Configuration()
    if kubeconfig is None:
        try:
            config.load_incluster_config(client_configuration=cfg)
            return KubeHttp(cfg)
        except config.ConfigException:
            pass
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return KubeHttp(cfg)


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
            self.api.call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=body, timeout=self.timeout)
        except KubeApiError as err:
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None
        except Exception as err:  # network faults: the scheduler retries the pod
            raise BindError(f"binding {namespace}/{name} to {node} failed: {err}") from None


class KubeEventSink:
    """Warning events on pods, sent from a background thread.

    The same (pod, reason, message) is sent at most once per `interval`, and the queue is bounded,
    so a burst of rejections over a large cluster never floods the API server or blocks a request.
    """

    def __init__(self, api: KubeHttp, interval: float = 600.0, capacity: int = 1000) -> None:
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
                self.api.call("POST", f"/api/v1/namespaces/{pod.namespace}/events", body=body, timeout=10)
            except Exception as err:  # an event is best effort; never let it kill the thread
                log.warning("could not record event %s on %s: %s", reason, pod.key, err)


class NullEventSink:
    """Keeps events in memory (tests, `--no-events`)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        self.events.append((pod.key, reason, message))

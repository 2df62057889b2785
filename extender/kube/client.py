"""The Kubernetes API as raw JSON over requests, with the official client's configuration.

The kubernetes package loads credentials (kubeconfig, in-cluster service account, exec
plugins, token refresh); requests carries the calls. Its generated model classes are not used:
they are slow for large lists, its Binding model fails to decode the API's answer, and its
low-level call signature changed between releases. It sits below the watch cache (state/watcher.py) and
the server's effects (server/effects.py); it imports nothing of the extender.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import httptools
import orjson
import requests
import urllib3
from kubernetes import client, config

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_RETRY_AFTER = 2.0  # seconds; the API server asks for 1 s from a full priority-level queue
# How long the credentials read by the client's refresh hook are reused. The hook (kubeconfig
# tokens, exec plugins, the in-cluster service-account token, which the client rereads once a
# minute) copies the whole configuration again on every call: 0.18 CPU-ms of every Binding in the
# e2e profile. Tokens live for minutes to hours, so asking once a second loses nothing.
CREDENTIALS_REUSE = 1.0  # seconds


def decode_json(data: bytes) -> Any:
    """JSON from the API server, decoded by orjson: half the CPU of the standard library on a
    watch event, a fifth less on a list page (benchmarks/kinds/watch_cost.py).

    A document orjson refuses but the standard library reads (a lone surrogate escape, NaN, a
    number beyond a double) goes to the standard library, so it decodes as before. The one
    silent difference, an integer literal outside the 64-bit range (orjson makes it a float),
    does not come from an API server: it decodes every object, custom resources included,
    into Go's int64 or float64 and encodes it back, so such a number is already a float there.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


class KubeApiError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason


CONFLICT_ATTEMPTS = 5


def retry_on_conflict(attempt: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """client-go's retry.RetryOnConflict: run a whole read-decide-write `attempt` again when its
    write meets a 409 (the object changed since it was read: a controller's status update is
    enough). Each attempt reads afresh, so no concurrent change is overwritten; after `attempts`
    conflicts the last one is raised. A create's AlreadyExists is a 409 too: the next attempt's read
    finds the object and updates it instead."""
    for left in range(attempts - 1, -1, -1):
        try:
            return attempt()
        except KubeApiError as err:
            if err.status != 409 or not left:
                raise
            log.info("conflict, reading again (%d attempts left): %s", left, err)
            time.sleep(0.05 * (attempts - left))
    raise AssertionError("unreachable")  # pragma: no cover


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
        self._pool = _pool(cfg)
        self._base = cfg.host.rstrip("/")
        self._connections = None if cfg.proxy else _Connections(cfg)
        self._cached_headers: tuple[float, dict[str, str]] | None = None  # (when read, headers)

    def _headers(self) -> dict[str, str]:
        """The headers of one call (a fresh dict the caller may change); the credentials are
        refreshed through the client's hook at most once per CREDENTIALS_REUSE seconds."""
        cached = self._cached_headers
        now = time.monotonic()
        if cached is None or now - cached[0] >= CREDENTIALS_REUSE:
            if self.cfg.refresh_api_key_hook is not None:
                self.cfg.refresh_api_key_hook(self.cfg)  # rotating service-account tokens, exec plugins
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            token = (self.cfg.api_key or {}).get("authorization") or (self.cfg.api_key or {}).get("BearerToken")
            if token:
                prefix = (self.cfg.api_key_prefix or {}).get("authorization", "")
                headers["Authorization"] = f"{prefix} {token}".strip() if prefix else token
            cached = self._cached_headers = (now, headers)
        return dict(cached[1])

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        timeout: float | tuple[float, float] = 30,
        stream: bool = False,
        content_type: str | None = None,
    ) -> Any:
        """One call; `stream=True` returns the open requests.Response (for watches);
        `content_type` for PATCH (application/json-patch+json, ...)."""
        headers = self._headers()
        if content_type is not None:
            headers["Content-Type"] = content_type
        response = self.session.request(
            method,
            self.cfg.host.rstrip("/") + path,
            params=query,
            json=body,
            headers=headers,
            timeout=timeout,
            stream=stream,
        )
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
        content = response.content
        return decode_json(content) if content else None

    def create(self, path: str, body: Any, *, timeout: float = 30) -> None:
        """POST `body` where the answer is not needed (Bindings, Events) on a kept connection of
        our own (urllib3 through a proxy).

        A Binding is the one call per pod: through requests it cost 0.75 CPU-ms of the extender's
        6.4 per pod in the e2e profile, on urllib3 about half, and on http.client about 0.17 CPU-ms
        in a local microbenchmark, two thirds of it parsing the answer's headers (the email
        package). The request is now written whole and the answer parsed by httptools (_Kept).
        The answer's errors are the same KubeApiError as call()'s; network faults are OSError.
        """
        data = orjson.dumps(body)
        deadline = time.monotonic() + timeout
        while True:
            status, reason, answer, retry_after = self._post(path, data, max(deadline - time.monotonic(), 0.001))
            wait = _retry_wait(status, retry_after)
            if wait is None or time.monotonic() + wait > deadline:
                break
            # 429: the API server's priority and fairness turned the request away before doing
            # anything; like client-go, wait as told and send it again (the Binding is not made).
            time.sleep(wait)
        if status >= 400:
            try:
                decoded = decode_json(answer)
                reason, message = decoded.get("reason", reason), decoded.get("message", "")
            except (ValueError, AttributeError):
                message = answer[:200].decode("utf-8", "replace")
            raise KubeApiError(status, reason or "", message)

    def _post(self, path: str, data: bytes, timeout: float) -> tuple[int, str, bytes, str | None]:
        """One POST: (status, reason, body, Retry-After)."""
        if self._connections is None:
            response = self._pool.request(
                "POST",
                self._base + path,
                body=data,
                headers=self._headers(),
                timeout=urllib3.Timeout(total=timeout),
                retries=False,
            )
            return response.status, response.reason or "", response.data, response.headers.get("Retry-After")
        return self._connections.post(path, data, self._headers(), timeout)


def _retry_wait(status: int, retry_after: str | None) -> float | None:
    """Seconds to wait before sending again, for a 429 (client-go's rule); None otherwise."""
    if status != 429:
        return None
    try:
        return min(max(float(retry_after or "1"), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return 1.0


class _Connections:
    """Kept HTTP/1.1 connections to the API server, for create(): a few Binding threads at once,
    each taking an idle connection or opening one, with the kubeconfig's TLS settings (those of
    the requests session and the urllib3 pool: the CA, the client certificate, verification and
    the host name checked unless verify_ssl is off). A connection the server has closed while it
    was idle is dropped before it is used (it reads as readable), as urllib3 does, so a POST is
    never sent on it and never sent twice."""

    KEEP = 32  # idle connections kept, as the urllib3 pool's maxsize

    def __init__(self, cfg: client.Configuration) -> None:
        url = urllib.parse.urlsplit(cfg.host)
        self._https = url.scheme == "https"
        self._host = url.hostname or "localhost"
        self._port = url.port or (443 if self._https else 80)
        default_port = 443 if self._https else 80
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if self._port == default_port else f"{host}:{self._port}"
        self._prefix = url.path.rstrip("/")
        self._context = _ssl_context(cfg) if self._https else None
        self._idle: list[_Kept] = []
        self._lock = threading.Lock()

    def post(
        self, path: str, data: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, str, bytes, str | None]:
        head = [f"POST {self._prefix}{path} HTTP/1.1", f"Host: {self._host_header}", f"Content-Length: {len(data)}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"invalid header {name!r}: a line break")  # as http.client refuses one
            head.append(f"{name}: {value}")
        if "\r" in path or "\n" in path or " " in path:
            raise ValueError(f"invalid request path {path!r}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
        conn = self._take(timeout)
        try:
            answer = conn.exchange(request)
        except BaseException:
            conn.close()
            raise
        if answer.keep_alive:
            self._give_back(conn)
        else:
            conn.close()
        return answer.status, answer.reason, answer.body, answer.retry_after

    def _take(self, timeout: float) -> _Kept:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if not _dropped(conn.sock):
                    conn.sock.settimeout(timeout)
                    return conn
                conn.close()
        sock = socket.create_connection((self._host, self._port), timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._context is not None:
                sock = self._context.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise
        return _Kept(sock)

    def _give_back(self, conn: _Kept) -> None:
        with self._lock:
            if len(self._idle) < self.KEEP:
                self._idle.append(conn)
                return
        conn.close()


class _Answer:
    """One HTTP response as httptools parses it (its callbacks)."""

    __slots__ = ("status", "reason", "body", "retry_after", "keep_alive", "complete", "parser")

    def __init__(self) -> None:
        self.parser: Any = None  # its httptools parser, asked about keep-alive before it resets
        self.status = 0
        self.reason = ""
        self.body = b""
        self.retry_after: str | None = None
        self.keep_alive = False
        self.complete = False

    def on_status(self, reason: bytes) -> None:
        self.reason += reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"retry-after":
            self.retry_after = value.decode("latin-1").strip()

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()  # False once the parser has reset after this


class _Kept:
    """One connection to the API server: a request written whole, its answer parsed in C by
    httptools (the llhttp parser the worker serves with). http.client's answer, its headers parsed
    by the email package, was two thirds of a Binding's CPU in the e2e profile."""

    __slots__ = ("sock",)

    RECEIVE = 65536

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def exchange(self, request: bytes) -> _Answer:
        """Send `request`, read its answer whole (the socket's timeout bounds each read)."""
        self.sock.sendall(request)
        answer = _Answer()
        parser = answer.parser = httptools.HttpResponseParser(answer)
        while not answer.complete:
            data = self.sock.recv(self.RECEIVE)
            if not data:
                raise ConnectionError("the API server closed the connection before its answer was complete")
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as err:
                raise ConnectionError(f"unreadable answer from the API server: {err}") from None
        answer.status = parser.get_status_code()
        if answer.status < 200:  # interim answers come only to an Expect header, which is never sent
            raise ConnectionError(f"unexpected interim answer {answer.status} from the API server")
        return answer

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _dropped(sock: Any) -> bool:
    """An idle kept connection with something to read has been closed by the server (or sent
    something unasked): either way it is not used again."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def _ssl_context(cfg: client.Configuration) -> ssl.SSLContext:
    if cfg.verify_ssl:
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if cfg.cert_file and cfg.key_file:
        context.load_cert_chain(cfg.cert_file, cfg.key_file)
    return context


def _pool(cfg: client.Configuration) -> urllib3.PoolManager:
    """A connection pool with the kubeconfig's TLS settings (those the requests session uses)."""
    options: dict[str, Any] = {"maxsize": 32, "block": False, "retries": False}
    if cfg.host.startswith("https"):
        options["cert_reqs"] = "CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE"
        if cfg.verify_ssl and cfg.ssl_ca_cert:
            options["ca_certs"] = cfg.ssl_ca_cert
        if cfg.cert_file and cfg.key_file:
            options.update(cert_file=cfg.cert_file, key_file=cfg.key_file)
    if cfg.proxy:
        return urllib3.ProxyManager(cfg.proxy, **options)
    return urllib3.PoolManager(**options)


def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeHttp:
    """In-cluster credentials when running in a pod, else the kubeconfig (flag, $KUBECONFIG,
    ~/.kube/config) and its current context, or `context` (kubectl's --context)."""
    cfg = client.Configuration()
    if kubeconfig is None and context is None:
        try:
            config.load_incluster_config(client_configuration=cfg)
            return KubeHttp(cfg)
        except config.ConfigException:
            pass
    config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
    return KubeHttp(cfg)

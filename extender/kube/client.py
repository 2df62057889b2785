"""The Kubernetes API as raw JSON over one urllib3 connection pool, with the official client's configuration.

The kubernetes package loads credentials (kubeconfig, in-cluster service account, exec
plugins, token refresh); one transport (_Transport) carries every call, watch and write: one
urllib3 pool of kept connections, built from that configuration as client-go builds its own
(tls-server-name, proxy-url, HTTPS_PROXY and NO_PROXY, CA and client certificate files re-read
when they change, a token file re-read when it changes, one deadline per call). requests sits on
that pool for call() (its Response is what watches read); create(), the one call per pod (the
Binding), writes its request on a connection of the pool and reads the answer with http.client,
skipping the layers above the pool. Its generated model classes are not used:
they are slow for large lists, its Binding model fails to decode the API's answer, and its
low-level call signature changed between releases. It sits below the watch cache (state/watcher.py) and
the server's effects (server/effects.py); it imports nothing of the extender.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import os
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import requests
import requests.adapters
import urllib3
import urllib3.connection
import urllib3.connectionpool
from kubernetes import client, config
from kubernetes.client.rest import should_bypass_proxies
from kubernetes.config import incluster_config, kube_config

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
    watch event, a fifth less on a list page (measured by the benchmark kind watch_cost, retired after 94a233e).

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
    """Authenticated JSON calls to the API server, every one through one _Transport."""

    def __init__(self, cfg: client.Configuration, *, token_file: str | None = None) -> None:
        """`token_file`: a bearer token file re-read when it changes (a kubeconfig's tokenFile,
        the in-cluster service-account token); connect() finds it."""
        self.cfg = cfg
        self.transport = _Transport(cfg)
        self.session = requests.Session()
        self.session.trust_env = False  # the transport decides TLS and proxies, as client-go would
        adapter = _Adapter(self.transport)
        self.session.mount("https://", adapter)
        self.session.mount("http://", adapter)
        self._base = cfg.host.rstrip("/")
        self._token_file = _TokenFile(token_file) if token_file else None
        self._cached_headers: tuple[float, dict[str, str]] | None = None  # (when read, headers)

    def _headers(self) -> dict[str, str]:
        """The headers of one call (a fresh dict the caller may change); the credentials are
        refreshed through the client's hook at most once per CREDENTIALS_REUSE seconds, and at
        once when the token file changed on disk."""
        cached = self._cached_headers
        now = time.monotonic()
        if self._token_file is not None and self._token_file.changed():
            cached = None
        if cached is None or now - cached[0] >= CREDENTIALS_REUSE:
            if self.cfg.refresh_api_key_hook is not None:
                self.cfg.refresh_api_key_hook(self.cfg)  # rotating service-account tokens, exec plugins
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            token = (self.cfg.api_key or {}).get("authorization") or (self.cfg.api_key or {}).get("BearerToken")
            if token:
                prefix = (self.cfg.api_key_prefix or {}).get("authorization", "")
                headers["Authorization"] = f"{prefix} {token}".strip() if prefix else token
            if self._token_file is not None and self._token_file.token:
                headers["Authorization"] = f"Bearer {self._token_file.token}"
            for name, value in headers.items():
                if "\r" in value or "\n" in value:
                    raise ValueError(f"invalid header {name!r}: a line break")  # never sent, as http.client refuses
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
        """One call; `stream=True` returns the open requests.Response (for watches: its body is
        then read with the read timeout per read, the call's deadline covering only up to its
        headers); `content_type` for PATCH (application/json-patch+json, ...). `timeout` bounds
        the whole call (a tuple: its sum), however slowly the answer comes."""
        headers = self._headers()
        if content_type is not None:
            headers["Content-Type"] = content_type
        total = sum(timeout) if isinstance(timeout, tuple) else timeout
        with _deadline(total):
            response = self.session.request(
                method,
                self._base + path,
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
        """POST `body` where the answer is not needed (Bindings, Events), straight on the
        transport's pool: a Binding is the one call per pod, and requests' layer above the pool
        cost it about twice the CPU. `timeout` bounds the whole call, a 429's waits included.
        The answer's errors are the same KubeApiError as call()'s; network faults are OSError
        (a deadline passed: TimeoutError), http.client's HTTPException (an answer cut short or
        unreadable) or urllib3's errors (a connection not made)."""
        data = orjson.dumps(body)
        deadline = time.monotonic() + timeout
        while True:
            status, reason, answer, retry_after = self._post(path, data, deadline)
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

    def _post(self, path: str, data: bytes, deadline: float) -> tuple[int, str, bytes, str | None]:
        """One POST: (status, reason, body, Retry-After), on a connection of the transport's pool.

        urllib3's own request path (urlopen, its HTTPResponse, http.client's request methods) cost
        a Binding about 0.4 CPU-ms more than the httptools client it replaced; this one, the
        request written in one send and its answer read by http.client's parser, 0.17
        (BENCHMARKS.md). urllib3 still makes each connection (TLS, SNI, the proxy's tunnel),
        keeps it, and drops one the server closed while it was idle before it is used, so a POST
        is never sent twice. The pool's _get_conn, _put_conn and _prepare_proxy are the steps of
        its urlopen, private: constraints.txt pins the urllib3 the tests
        (tests/unit/test_kubeapi.py, tests/e2e/test_kube_transport.py) hold them on."""
        head = self.transport.head("POST", path, self._headers(), len(data))
        pool = self.transport.pool()
        left = max(deadline - time.monotonic(), 0.001)
        with _deadline(left):
            conn = pool._get_conn(timeout=left)
            try:
                if conn.is_closed:  # new, or closed after an answer: (re)connect as urlopen does
                    conn.timeout = left
                    if pool.proxy is not None and self.transport.https:
                        pool._prepare_proxy(conn)  # the CONNECT tunnel, then TLS to the API server
                    else:
                        conn.connect()
                conn.sock.sendall(head + data)
                answer = http.client.HTTPResponse(conn.sock, method="POST")
                answer.begin()
                body = answer.read()
                if answer.will_close:
                    conn.close()
            except BaseException:
                conn.close()
                raise
            finally:
                pool._put_conn(conn)
        return answer.status, answer.reason or "", body, answer.getheader("Retry-After")


def _retry_wait(status: int, retry_after: str | None) -> float | None:
    """Seconds to wait before sending again, for a 429 (client-go's rule); None otherwise."""
    if status != 429:
        return None
    try:
        return min(max(float(retry_after or "1"), 0.0), MAX_RETRY_AFTER)
    except ValueError:
        return 1.0


# ---------------------------------------------------------------------------------- the transport

DEADLINE_SLACK = 0.05  # seconds a call may outlast its deadline by
_CALL = threading.local()  # .deadline: the time.monotonic() by which this thread's call must end


class _deadline:  # noqa: N801 - used as a function: `with _deadline(seconds):`
    """Bound every socket read and write this thread makes in the block by one deadline: each
    one waits at most what is left of it, so an answer that drips a byte at a time cannot
    outlast the call's timeout (a socket timeout alone bounds each read, not their sum)."""

    __slots__ = ("seconds", "outer")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        self.outer = getattr(_CALL, "deadline", None)
        _CALL.deadline = time.monotonic() + self.seconds

    def __exit__(self, *exc: object) -> None:
        _CALL.deadline = self.outer


def _left(sock: socket.socket) -> None:
    """Before a read or write: the socket waits at most what is left of the call's deadline
    (give or take DEADLINE_SLACK: a timeout already that close is not set again, a system call
    saved on every read and write of a call well within its time)."""
    deadline = getattr(_CALL, "deadline", None)
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline passed")
        timeout = sock.gettimeout()
        if timeout is None or timeout > left + DEADLINE_SLACK:
            sock.settimeout(left)


class _DeadlineSocket(socket.socket):
    """A plain TCP socket (http://, and the CONNECT to a proxy) whose reads and writes keep the
    call's deadline."""

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        _left(self)
        return super().recv_into(buffer, nbytes, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        _left(self)
        return super().recv(bufsize, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        _left(self)  # since Python 3.5 the timeout bounds the whole sendall
        super().sendall(data, flags)


class _DeadlineSSLSocket(ssl.SSLSocket):
    """A TLS socket whose reads and writes keep the call's deadline (the context's
    sslsocket_class). The handshake is bounded by the connect timeout, itself what is left."""

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        _left(self)
        return super().recv_into(buffer, nbytes, flags)  # type: ignore[arg-type]

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        _left(self)
        return super().recv(buflen, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        _left(self)  # SSLSocket.sendall sends piece by piece through send()
        return super().send(data, flags)


def _keeping_deadline(sock: socket.socket) -> socket.socket:
    timeout = sock.gettimeout()
    kept = _DeadlineSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    kept.settimeout(timeout)
    return kept


class _HTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _keeping_deadline(super()._new_conn())


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _keeping_deadline(super()._new_conn())


class _HTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection  # type: ignore[assignment]


KEEP = 32  # idle connections kept to the API server


def proxy_for(cfg: client.Configuration) -> str | None:
    """The proxy to reach the API server through, chosen as client-go chooses it: a kubeconfig's
    proxy-url always; else the environment's (HTTPS_PROXY or HTTP_PROXY by the server's scheme,
    which the client's Configuration reads) unless NO_PROXY names the server or it is localhost
    or a loopback address (Go's http.ProxyFromEnvironment never proxies those)."""
    if not cfg.proxy:
        return None
    if not getattr(cfg, "_proxy_from_env", False):
        return cfg.proxy  # set by the kubeconfig (proxy-url) or by hand: client-go's http.ProxyURL
    return None if bypasses_proxy(cfg.host, cfg.no_proxy or "") else cfg.proxy


def bypasses_proxy(url: str, no_proxy: str) -> bool:
    """Whether a proxy from the environment is skipped for `url`: the client's NO_PROXY rules
    (names and their subdomains, host:port, CIDRs, *), and localhost and loopback addresses."""
    host = urllib.parse.urlsplit(url).hostname
    if not host or host == "localhost":
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    return should_bypass_proxies(url, no_proxy)


def _stamp(paths: tuple[str, ...]) -> tuple[Any, ...]:
    """What changes when a file is written or replaced (in place, by rename, or by the kubelet's
    ..data symlink swap, which stat follows)."""
    stamps: list[Any] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            stamps.append((path, None))
            continue
        stamps.append((path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(stamps)


class _Transport:
    """The one way to the API server: a urllib3 pool of kept connections with the
    configuration's TLS (the CA, the client certificate, verification, tls-server-name for SNI
    and the name checked) and proxy. Before each request the CA and client-certificate files are
    stat'ed (a few microseconds); when one changed, a new pool is built from the files as they
    are now and the old one's idle connections closed, so the next request after a rotation
    uses the new ones (client-go closes its connections on a rotation too). Files read
    half-written (a certificate not matching its key yet) keep the previous pool until they
    read whole."""

    def __init__(self, cfg: client.Configuration) -> None:
        self.cfg = cfg
        self.base = cfg.host.rstrip("/")
        self.https = self.base.startswith("https")
        self.proxy = proxy_for(cfg)
        self.forwarding = bool(self.proxy) and not self.https  # http:// through a proxy: whole URLs
        url = urllib.parse.urlsplit(self.base)
        self.prefix = self.base if self.forwarding else url.path
        self.host_header = url.netloc.rpartition("@")[2]
        self._lock = threading.Lock()
        self._current: tuple[tuple[Any, ...], urllib3.PoolManager, urllib3.connectionpool.HTTPConnectionPool] | None
        self._current = None
        self._refused: tuple[Any, ...] | None = None  # the stamp of files that did not load
        self.pool()  # a configuration that cannot load fails here, at start

    def _files(self) -> tuple[str, ...]:
        if not self.https:
            return ()
        cfg = self.cfg
        return tuple(p for p in (cfg.ssl_ca_cert if cfg.verify_ssl else None, cfg.cert_file, cfg.key_file) if p)

    def pool(self) -> urllib3.connectionpool.HTTPConnectionPool:
        """The pool to the API server, rebuilt when a TLS file changed on disk."""
        current = self._current
        stamp = _stamp(self._files())
        if current is not None and (stamp == current[0] or stamp == self._refused):
            return current[2]
        with self._lock:
            current = self._current
            if current is not None and stamp == current[0]:
                return current[2]
            try:
                manager = self._manager()
            except (OSError, ssl.SSLError, ValueError) as err:
                if current is None:
                    raise
                self._refused = stamp
                log.warning("the API server's TLS files changed but do not load (%s): the previous ones are kept", err)
                return current[2]
            pool = manager.connection_from_url(self.base)
            self._current, self._refused = (stamp, manager, pool), None
        if current is not None:
            log.info("the API server's TLS files changed on disk: new connections use them")
            current[1].clear()  # idle connections close now; those in use close when given back
        return pool

    def _manager(self) -> urllib3.PoolManager:
        cfg = self.cfg
        options: dict[str, Any] = {"maxsize": KEEP, "block": False, "retries": False}
        if self.https:
            options["ssl_context"] = self._context()
            options["cert_reqs"] = "CERT_REQUIRED" if cfg.verify_ssl else "CERT_NONE"
            if cfg.tls_server_name:
                options["server_hostname"] = cfg.tls_server_name  # SNI and the name verified
        manager: urllib3.PoolManager
        if self.proxy:
            manager = urllib3.ProxyManager(self.proxy, **options)
        else:
            manager = urllib3.PoolManager(**options)
        manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        return manager

    def _context(self) -> ssl.SSLContext:
        cfg = self.cfg
        if cfg.verify_ssl:
            # With no CA file the system's roots, as client-go; never $REQUESTS_CA_BUNDLE's.
            context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.cert_file and cfg.key_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file)
        context.sslsocket_class = _DeadlineSSLSocket
        return context

    def target(self, url: str) -> str:
        """What the request line names: the path, or the whole URL to a forwarding proxy
        (http:// through a proxy; https:// tunnels through CONNECT)."""
        if self.forwarding:
            return url
        parts = urllib.parse.urlsplit(url)
        return parts.path + ("?" + parts.query if parts.query else "")

    def head(self, method: str, path: str, headers: dict[str, str], length: int) -> bytes:
        """A request's line and headers, for a body of `length` bytes."""
        if "\r" in path or "\n" in path or " " in path:
            raise ValueError(f"invalid request path {path!r}")
        lines = [f"{method} {self.prefix}{path} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {length}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]  # values checked by _headers()
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class _Adapter(requests.adapters.HTTPAdapter):
    """requests on the transport's pool: its TLS, proxy and rotation, not requests' own."""

    def __init__(self, transport: _Transport) -> None:
        super().__init__(pool_connections=1, pool_maxsize=1, max_retries=0)
        self.transport = transport

    def get_connection_with_tls_context(
        self, request: requests.PreparedRequest, verify: Any, proxies: Any = None, cert: Any = None
    ) -> urllib3.connectionpool.HTTPConnectionPool:
        return self.transport.pool()

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        """Nothing: the transport's context holds the CA and client certificate (requests would
        add its own CA bundle to it)."""

    def request_url(self, request: requests.PreparedRequest, proxies: Any) -> str:
        return self.transport.target(request.url or "")


class _TokenFile:
    """A bearer token file, read again when it changes on disk (a kubeconfig's tokenFile, the
    in-cluster projected service-account token the kubelet rotates): the next call after a
    rotation sends the new token. client-go rereads such a file once a minute; a stat per call
    costs a few microseconds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.token = ""
        self._stamp: tuple[Any, ...] | None = None
        self.changed()

    def changed(self) -> bool:
        stamp = _stamp((self.path,))
        if stamp == self._stamp:
            return False
        try:
            with open(self.path, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as err:
            log.warning("token file %s unreadable, the previous token is kept: %s", self.path, err)
            return False
        if not token:
            return False  # caught between truncate and write: read it again next call
        self._stamp = stamp
        changed = token != self.token
        self.token = token
        return changed


def connect(kubeconfig: str | None = None, context: str | None = None) -> KubeHttp:
    """In-cluster credentials when running in a pod, else the kubeconfig (flag, $KUBECONFIG,
    ~/.kube/config) and its current context, or `context` (kubectl's --context)."""
    cfg = client.Configuration()
    if kubeconfig is None and context is None:
        try:
            config.load_incluster_config(client_configuration=cfg)
            return KubeHttp(cfg, token_file=incluster_config.SERVICE_TOKEN_FILENAME)
        except config.ConfigException:
            pass
    # load_kube_config's own steps, keeping the loader: which file holds the token, and the exec
    # plugin to run again when the client certificate it gave expires.
    loader = kube_config._get_kube_config_loader(
        filename=kubeconfig or kube_config.KUBE_CONFIG_DEFAULT_LOCATION,
        active_context=context,
        persist_config=True,
    )
    loader.load_and_set(cfg)
    _renew_exec_certificates(loader, cfg)
    return KubeHttp(cfg, token_file=_token_file(loader))


def _token_file(loader: Any) -> str | None:
    """The kubeconfig user's tokenFile when that is what authenticates it (the client reads it
    once; an auth-provider or an inline token come first, as in the client)."""
    user = loader._user
    if not user or "auth-provider" in user or "token" in user or "tokenFile" not in user:
        return None
    return os.path.normpath(os.path.join(loader._get_base_path(user.path), user["tokenFile"]))


def _renew_exec_certificates(loader: Any, cfg: client.Configuration) -> None:
    """An exec plugin that answers with a client certificate: the client installs no refresh hook
    (it has no token), so run the plugin again once its expirationTimestamp passes; the new
    certificate lands in new files, which the transport picks up."""
    user = loader._user
    if cfg.refresh_api_key_hook is not None or not user or "exec" not in user:
        return

    def refresh(configuration: client.Configuration) -> None:
        expiry = loader.__dict__.get("expiry")
        if expiry is not None and kube_config._is_expired(expiry):
            loader._load_authentication()
            loader._set_config(configuration)

    cfg.refresh_api_key_hook = refresh

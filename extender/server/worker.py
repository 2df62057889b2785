"""A gunicorn worker that gives each client connection its own thread.

Why not gunicorn's gthread: kube-scheduler keeps a few persistent connections and sends one request
at a time on each. gthread parks every kept-alive connection in its main thread's poller and hands
each request to a pool thread: two thread wake-ups per request and a third to re-arm keep-alive,
plus gunicorn's pure-Python HTTP parser. In the e2e profile (benchmarks/results/profile_e2e.md)
that serving cost 2.1 CPU-ms per pod, a third of the extender and more than filter's decision.
Here the thread that reads a request answers it, and the request is parsed in C (httptools, the
llhttp parser). The worker keeps what gunicorn's master expects of a worker: the heartbeat, the
signals, a graceful stop, TLS from the same settings. A thread whose connection closed waits a
while to serve the next one (SPARE_THREADS): kube-scheduler closes most of the connections its
parallel binds open.

Bounds, so that no client can hold the worker:
- at most `threads` connections at once; when all are taken, the connection idle the longest is
  closed to make room (never one with a request under way, and never one accepted less than
  FRESH_GRACE ago that has not sent its first request: a probe connects and asks at once, and was
  evicted before its request was read under a flood, failing 12 of 87 probes), and if none may be
  closed, new connections wait in the listen backlog;
- a request's head and body must arrive within REQUEST_READ_TIMEOUT of its first byte, and a
  TLS handshake within the same time (408 or close otherwise); an answer must be taken by the
  client within it too;
- a body above the app's MAX_CONTENT_LENGTH is refused (413) before it is read, and the
  connection closed;
- a health listener (serve --health-listen, loopback) is accepted outside those bounds, never
  TLS, and answers only the paths routes.py gives Listener.HEALTH: the pod's exec probes reach
  it while every connection of the main listener is busy and without the client certificate the
  main listener requires, and a frozen or deadlocked worker fails them (a `tcpSocket` probe
  passes: the kernel accepts for it);
- an idle connection is closed after IDLE_TIMEOUT, longer than Go's client-side idle timeout
  (90 s), so kube-scheduler closes idle connections first and a request never meets a closing one.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote_to_bytes

import httptools
from gunicorn.sock import ssl_context
from gunicorn.workers.base import Worker

from ..limits import DEFAULT_MAX_BODY
from .cert_usage import allows_client_auth
from .routes import Listener, paths

IDLE_TIMEOUT = 120.0  # seconds an idle kept-alive connection stays open (Go's client: 90 s)
FRESH_GRACE = 2.0  # seconds a just-accepted connection is not closed to make room before its first request
REQUEST_READ_TIMEOUT = 30.0  # seconds from a request's first byte to its last; also per answer sent
MAX_HEAD_BYTES = 64 * 1024  # request line plus headers
# Threads kept after their connection closed, each waiting up to SPARE_WAIT seconds to serve the
# next one. kube-scheduler keeps only 2 idle connections to an extender (Go's default
# MaxIdleConnsPerHost; its extender transport sets no other), so the binds it runs in parallel open
# a connection each and close it after: 709 connections for 1,000 pods in the e2e burst. A new
# thread a connection cost 0.11 CPU-ms to start and end, half of what a new connection costs here.
SPARE_THREADS = 16
SPARE_WAIT = 30.0
RECEIVE_SIZE = 256 * 1024

HEALTH_LISTEN_ENV = "EXTENDER_HEALTH_LISTEN_ADDRESS"  # set by serve.py for this worker
# The client certificate names admitted on the TLS port (comma-separated; set by serve.py from
# --tls-client-name): the CA may sign other certificates, its name list says who the scheduler is.
TLS_CLIENT_NAMES_ENV = "EXTENDER_TLS_CLIENT_NAMES"
HEALTH_PATHS = paths(Listener.HEALTH)  # passed on to the app; any other path is a 404 from here
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class _Request:
    __slots__ = ("url", "headers", "body", "size", "head_size", "method", "keep_alive", "too_large", "complete")

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.head_size = 0
        self.method = b""
        self.keep_alive = False
        self.too_large = False  # the body is over the limit: answered 413 without reading it
        self.complete = False


class _Spare:
    """A connection thread between two connections: the accept loop hands it the next one."""

    __slots__ = ("ready", "connection")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.connection: _Connection | None = None


class _Connection:
    """One client connection: its parser's callbacks and the loop that reads and answers."""

    def __init__(self, worker: ConnectionWorker, sock: socket.socket, address: Any, *, health: bool = False) -> None:
        self.worker = worker
        self.sock = sock
        self.address = address
        self.health = health  # from the health listener: plain HTTP, HEALTH_PATHS only
        self.refusal: str | None = None  # set: every request on it is answered 403 with this
        self.parser = httptools.HttpRequestParser(self)
        self.current: _Request | None = None
        self.ready: deque[_Request] = deque()
        self.idle = True  # no request under way: may be closed to make room (under worker.lock)
        self.idle_since = time.monotonic()
        self.answered = False  # a request answered: idle now means kept alive between requests
        self.evicted = False

    # ------------------------------------------------------------ parser callbacks
    def on_message_begin(self) -> None:
        self.current = _Request()

    def on_url(self, url: bytes) -> None:
        request = self.current
        assert request is not None
        request.url += url
        request.head_size += len(url)
        if request.head_size > MAX_HEAD_BYTES:
            raise _TooLarge("request line and headers")

    def on_header(self, name: bytes, value: bytes) -> None:
        request = self.current
        assert request is not None
        request.headers.append((name, value))
        request.head_size += len(name) + len(value) + 4
        if request.head_size > MAX_HEAD_BYTES:
            raise _TooLarge("request line and headers")

    def on_headers_complete(self) -> None:
        request = self.current
        assert request is not None
        request.method = self.parser.get_method()
        request.keep_alive = self.parser.should_keep_alive()
        for name, value in request.headers:
            if name.lower() == b"content-length" and value.strip().isdigit():
                if int(value) > self.worker.max_body:
                    request.too_large = True
                    request.size = int(value)
                    self.ready.append(request)  # answered at once; the body is never read

    def on_body(self, body: bytes) -> None:
        request = self.current
        assert request is not None
        if request.too_large:
            return
        request.size += len(body)
        if request.size > self.worker.max_body:  # a chunked body that grew past the limit
            request.too_large = True
            request.body.clear()
            self.ready.append(request)
        else:
            request.body.append(body)

    def on_message_complete(self) -> None:
        request = self.current
        assert request is not None
        request.complete = True
        if not request.too_large:
            self.ready.append(request)
        self.current = None

    # ------------------------------------------------------------ the loop
    def serve(self) -> None:
        try:
            if self.worker.tls is not None and not self.health:
                self.sock.settimeout(REQUEST_READ_TIMEOUT)
                self.sock = self.worker.tls().wrap_socket(self.sock, server_side=True)
                names = self.worker.client_names
                der = self.sock.getpeercert(binary_form=True)  # None: no client certificate asked for
                if der is not None and not allows_client_auth(der):
                    self.refusal = (
                        "this client certificate has no extendedKeyUsage clientAuth; the extender admits "
                        "only certificates issued for client authentication (docs/security.md)"
                    )
                elif names and not names & peer_names(self.sock.getpeercert()):
                    # Answered once the request is read (_answer): a 403 sent before the client
                    # finished sending its body would reach it as a reset connection.
                    self.refusal = (
                        "this client certificate's name is not one the extender admits (serve --tls-client-name)"
                    )
            self._loop()
        except OSError:  # ssl.SSLError and TimeoutError included
            pass  # the client went away, timed out or was evicted; nothing to answer
        except Exception:  # a fault of ours: log it, drop this connection, keep the worker
            self.worker.log.exception("connection from %s failed", self.address)
        finally:
            self.worker.forget(self)
            try:
                self.sock.close()
            except OSError:
                pass

    def _loop(self) -> None:
        sock = self.sock
        deadline = 0.0
        while True:
            started = self.current is not None
            if started:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._send_error(HTTPStatus.REQUEST_TIMEOUT, "the request did not arrive in time")
                    return
                sock.settimeout(remaining)
            else:
                sock.settimeout(IDLE_TIMEOUT)
            try:
                data = sock.recv(RECEIVE_SIZE)
            except TimeoutError:
                if started:
                    self._send_error(HTTPStatus.REQUEST_TIMEOUT, "the request did not arrive in time")
                return
            if not data:
                return
            if not started:
                if not self.worker.claim(self):
                    return  # evicted while idle: the bytes belong to a connection being closed
                deadline = time.monotonic() + REQUEST_READ_TIMEOUT
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._send_error(HTTPStatus.BAD_REQUEST, "protocol upgrades are not supported")
                return
            except httptools.HttpParserError as err:
                cause = err.__context__ if isinstance(err.__context__, _TooLarge) else None
                if cause is not None:
                    self._send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"{cause} over {MAX_HEAD_BYTES} bytes")
                else:
                    self._send_error(HTTPStatus.BAD_REQUEST, f"malformed HTTP request: {_text(err)}")
                return
            while self.ready:
                if not self._answer(self.ready.popleft()):
                    return
                deadline = time.monotonic() + REQUEST_READ_TIMEOUT  # for a pipelined request's rest
            if self.current is None and not self.worker.release(self):
                return  # the worker is stopping: close between requests

    def _answer(self, request: _Request) -> bool:
        """Run the app for one request and send its answer; whether to keep the connection."""
        if self.refusal is not None:
            self._send_error(HTTPStatus.FORBIDDEN, self.refusal)
            return False
        started = time.perf_counter()
        environ = self._environ(request)
        if self.health and environ["PATH_INFO"] not in HEALTH_PATHS:
            self._send_error(HTTPStatus.NOT_FOUND, f"the health listener answers {' and '.join(HEALTH_PATHS)} only")
            return False
        status, headers, body = self.worker.call_app(environ)
        keep_alive = request.keep_alive and request.complete and not request.too_large and self.worker.alive
        # the app may end the connection after its answer (a standby replica: app.RouteTable)
        keep_alive = keep_alive and not any(n.lower() == "connection" and v.lower() == "close" for n, v in headers)
        head = [f"HTTP/1.1 {status}\r\n".encode("latin-1")]
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                head.append(f"{name}: {value}\r\n".encode("latin-1"))
        head.append(b"Date: %s\r\n" % _http_date().encode())
        head.append(b"Content-Length: %d\r\n" % len(body))
        head.append(b"Connection: keep-alive\r\n\r\n" if keep_alive else b"Connection: close\r\n\r\n")
        if request.method == b"HEAD":
            body = b""
        self.sock.settimeout(REQUEST_READ_TIMEOUT)
        self.sock.sendall(b"".join(head) + body)
        self.worker.access(environ, status, len(body), time.perf_counter() - started)
        return keep_alive

    def _environ(self, request: _Request) -> dict[str, Any]:
        path, _, query = request.url.partition(b"?")
        body = b"".join(request.body)
        server_name, server_port = self.worker.server_address
        environ: dict[str, Any] = {
            "REQUEST_METHOD": request.method.decode("latin-1"),
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote_to_bytes(path).decode("latin-1"),
            "QUERY_STRING": query.decode("latin-1"),
            "RAW_URI": request.url.decode("latin-1"),
            "SERVER_NAME": server_name,
            "SERVER_PORT": server_port,
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": self.address[0] if isinstance(self.address, tuple) else str(self.address),
            "CONTENT_LENGTH": str(request.size if request.too_large else len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "https" if self.worker.tls is not None and not self.health else "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in request.headers:
            key = name.decode("latin-1").upper().replace("-", "_")
            if key == "CONTENT_LENGTH" or key == "TRANSFER_ENCODING":
                continue  # the body is handed over whole, de-chunked; its length is set above
            if key != "CONTENT_TYPE":
                key = "HTTP_" + key
            text = value.decode("latin-1")
            environ[key] = f"{environ[key]},{text}" if key in environ else text
        return environ

    def _send_error(self, status: HTTPStatus, message: str) -> None:
        """An error the transport answers itself (the app never saw the request); then close."""
        body = b'{"error":%s}\n' % _json_string(message)
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: application/json\r\n"
            f"Date: {_http_date()}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        try:
            self.sock.settimeout(REQUEST_READ_TIMEOUT)
            self.sock.sendall(head.encode("latin-1") + body)
        except OSError:
            pass


class _TooLarge(Exception):
    pass


def _exit_with_parent() -> None:
    """Ask Linux for SIGTERM when the parent process exits; elsewhere, nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl: the parent check alone
        pass


class ConnectionWorker(Worker):
    """gunicorn worker: a thread per connection, at most `threads` connections (see module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()
        self.connections: set[_Connection] = set()
        self.max_connections = max(1, self.cfg.threads)
        self.backlogged = False  # the accept loop waits for room: connections wait in the listen backlog
        self._spares: list[_Spare] = []  # threads waiting for a connection to serve (SPARE_THREADS)
        self.max_body = DEFAULT_MAX_BODY
        self.server_address = ("localhost", "0")
        self.tls: Callable[[], ssl.SSLContext] | None = None
        self._tls_context: tuple[tuple[float, ...], ssl.SSLContext] | None = None
        names = os.environ.get(TLS_CLIENT_NAMES_ENV, "")
        self.client_names = frozenset(n.strip() for n in names.split(",") if n.strip())

    def init_process(self) -> None:
        if self.cfg.is_ssl:
            self.tls = self._current_tls_context
        super().init_process()

    def init_signals(self) -> None:
        """gunicorn's handlers, then a SIGTERM from the kernel the moment the master dies
        (PR_SET_PDEATHSIG): a graceful stop begins at once, woken through gunicorn's signal pipe,
        instead of at the loop's next parent check (up to a second later, then 2-3 s measured
        under kube-scheduler's traffic). The parent check stays for other systems, and for a
        master that died before this ran."""
        super().init_signals()
        _exit_with_parent()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        config = getattr(self.wsgi, "config", None)
        if config is not None and config.get("MAX_CONTENT_LENGTH"):
            self.max_body = int(config["MAX_CONTENT_LENGTH"])

    # ------------------------------------------------------------ main thread
    def run(self) -> None:
        health = [s for s in self.sockets if _address(s) == _health_address()]
        listeners = [s for s in self.sockets if s not in health]
        if listeners:
            name = listeners[0].getsockname()
            if isinstance(name, tuple):
                self.server_address = (str(name[0]), str(name[1]))
        selector = selectors.DefaultSelector()
        selector.register(self.PIPE[0], selectors.EVENT_READ)
        for listener in listeners + health:
            listener.setblocking(False)
        for listener in health:  # always accepted: see the module docstring
            selector.register(listener, selectors.EVENT_READ, "health")
        accepting = False
        try:
            while self.alive:
                self.notify()
                if self.ppid != os.getppid():
                    self.log.info("Parent changed, shutting down: %s", self)
                    break
                if not accepting and self._has_room():
                    for listener in listeners:
                        selector.register(listener, selectors.EVENT_READ)
                    accepting = True
                    self.backlogged = False
                for key, _ in selector.select(1.0):
                    if key.fileobj == self.PIPE[0]:
                        _drain(self.PIPE[0])
                    elif key.data == "health":
                        self._accept(key.fileobj, health=True)  # type: ignore[arg-type]
                    elif accepting and not self._accept(key.fileobj):  # type: ignore[arg-type]
                        # every connection is busy: the others wait in the listen backlog until
                        # one ends or goes idle (its thread wakes this loop through the pipe)
                        for listener in listeners:
                            selector.unregister(listener)
                        accepting = False  # _make_room set self.backlogged, under the lock
        finally:
            selector.close()
            # One of several replicas (serve --leader-elect): stop deciding at once, finish the
            # calls in flight, then give the Lease up so the standby takes it within its retry
            # period rather than after the Lease expires (server/leader.py).
            leader = getattr(self.wsgi, "extensions", {}).get("leader")
            if leader is not None:
                leader.step_down()
            self._stop()
            if leader is not None:
                leader.release()

    def _accept(self, listener: socket.socket, *, health: bool = False) -> bool:
        """Accept the connection waiting on `listener` if there is room; False if there is none.
        A health listener's is always accepted (a probe's connection is short and local)."""
        if not health and not self._make_room():
            return False
        try:
            client, address = listener.accept()
        except (BlockingIOError, InterruptedError):
            return True
        except OSError as err:
            self.log.warning("accept failed: %s", err)
            return True
        client.setblocking(True)
        if client.family in (socket.AF_INET, socket.AF_INET6):
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(self, client, address, health=health)
        with self.lock:
            self.connections.add(connection)
            spare = self._spares.pop() if self._spares else None
        if spare is None:
            threading.Thread(target=self._serve, args=(connection,), name="conn", daemon=True).start()
        else:
            spare.connection = connection
            spare.ready.set()
        return True

    def _serve(self, connection: _Connection) -> None:
        """Serve `connection`, then wait as a spare for the next one (SPARE_THREADS)."""
        spare = _Spare()
        while True:
            connection.serve()
            with self.lock:
                if not self.alive or len(self._spares) >= SPARE_THREADS:
                    return
                spare.ready.clear()
                self._spares.append(spare)
            if not spare.ready.wait(SPARE_WAIT):
                with self.lock:
                    if spare in self._spares:  # no connection handed over: end the thread
                        self._spares.remove(spare)
                        return
                spare.ready.wait()  # popped as the wait ended: its connection is being handed over
            assert spare.connection is not None
            connection, spare.connection = spare.connection, None

    def _has_room(self) -> bool:
        """Whether accepting may make progress: a free slot or a connection that may be closed (one
        still in its grace may be closed soon: the accept loop looks again at least once a second)."""
        with self.lock:
            return len(self.connections) < self.max_connections or bool(self._closable())

    def _make_room(self) -> bool:
        """Whether one more connection fits, closing the longest idle one if it must."""
        with self.lock:
            if len(self.connections) < self.max_connections:
                return True
            idle = self._closable()
            if not idle:
                # Under the lock: a connection that ends or goes idle from now on sees it and
                # wakes the accept loop (forget, release); one that ended before left room here.
                self.backlogged = True
                return False
            oldest = min(idle, key=lambda c: c.idle_since)
            oldest.evicted = True
            _shutdown(oldest.sock)
            self.connections.discard(oldest)
            return True

    def _closable(self) -> list[_Connection]:
        """Idle connections that may be closed to make room (under the lock): kept alive after an
        answer, or accepted FRESH_GRACE ago without sending a request."""
        now = time.monotonic()
        return [
            c
            for c in self.connections
            if c.idle and not c.evicted and (c.answered or now - c.idle_since >= FRESH_GRACE)
        ]

    def _stop(self) -> None:
        """Graceful stop: no new connections; idle ones closed now, busy ones after their answer."""
        for listener in self.sockets:
            try:
                listener.close()
            except OSError:
                pass
        deadline = time.monotonic() + self.cfg.graceful_timeout
        while time.monotonic() < deadline:
            with self.lock:
                for connection in self.connections:
                    if connection.idle and not connection.evicted:
                        connection.evicted = True
                        _shutdown(connection.sock)
                if not self.connections:
                    return
            self.notify()
            time.sleep(0.05)

    # ------------------------------------------------------------ called by connection threads
    def claim(self, connection: _Connection) -> bool:
        """A request begins on `connection`: no longer idle, unless it was just closed to make room."""
        with self.lock:
            if connection.evicted:
                return False
            connection.idle = False
            return True

    def release(self, connection: _Connection) -> bool:
        """`connection` answered and waits for the next request; False if the worker is stopping."""
        with self.lock:
            connection.idle = True
            connection.answered = True
            connection.idle_since = time.monotonic()
            wake = self.backlogged
        if wake:  # connections wait in the backlog: this one may now make room for the next
            self._wake()
        return self.alive

    def forget(self, connection: _Connection) -> None:
        with self.lock:
            self.connections.discard(connection)
            wake = self.backlogged
        if wake:  # a slot is free for a connection waiting in the backlog (the loop is accepting otherwise)
            self._wake()

    def _wake(self) -> None:
        """Wake the accept loop (its select watches the pipe)."""
        try:
            os.write(self.PIPE[1], b".")
        except OSError:
            pass

    def call_app(self, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
        """The WSGI app's answer as (status, headers, body); a 500 if the app itself fails."""
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
            answer[:] = [status, headers]
            return _no_write

        try:
            result: Iterable[bytes] = self.wsgi(environ, start_response)
            try:
                body = b"".join(result)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:
            self.log.exception("the app failed on %s %s", environ["REQUEST_METHOD"], environ["PATH_INFO"][:200])
            return "500 Internal Server Error", [("Content-Type", "application/json")], b'{"error":"internal error"}\n'
        return answer[0], answer[1], body

    def access(self, environ: dict[str, Any], status: str, size: int, seconds: float) -> None:
        if self.cfg.accesslog:
            self.log.access_log.info(
                '%s "%s %s" %s %d %.1fms',
                environ["REMOTE_ADDR"],
                environ["REQUEST_METHOD"],
                environ["RAW_URI"][:200],
                status.split(" ", 1)[0],
                size,
                seconds * 1000,
            )

    def _current_tls_context(self) -> ssl.SSLContext:
        """The TLS context, built again when a certificate file changes (rotation takes effect
        for new connections without a restart, as it did with gthread)."""
        stamp = tuple(_mtime(path) for path in (self.cfg.certfile, self.cfg.keyfile, self.cfg.ca_certs))
        cached = self._tls_context
        if cached is None or cached[0] != stamp:
            cached = (stamp, ssl_context(self.cfg))
            self._tls_context = cached
        return cached[1]


def peer_names(cert: dict[str, Any] | None) -> frozenset[str]:
    """A verified client certificate's names: its subject's common names and its DNS, URI and
    email subject alternative names (ssl.SSLSocket.getpeercert's shape). The client-auth usage
    is checked apart (cert_usage.py): OpenSSL's handshake refuses a certificate whose usages
    exclude it, but accepts one with none."""
    if not cert:
        return frozenset()
    common = [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
    alternative = [value for key, value in cert.get("subjectAltName", ()) if key in ("DNS", "URI", "email")]
    return frozenset(common + alternative)


def _address(sock: socket.socket) -> tuple[str, int] | None:
    name = sock.getsockname()
    return (str(name[0]), int(name[1])) if isinstance(name, tuple) else None


def _health_address() -> tuple[str, int] | None:
    """The health listener's address, from serve --health-listen (HOST:PORT), or None."""
    text = os.environ.get(HEALTH_LISTEN_ENV)
    if not text:
        return None
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    return ("127.0.0.1" if host == "localhost" else host, int(port))


def _mtime(path: str | None) -> float:
    if not path:
        return 0.0
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def _no_write(data: bytes) -> None:
    raise RuntimeError("the write() callable of start_response is not supported; return the body")


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, formatdate(now, usegmt=True))
    return _date_cache[1]


def _json_string(text: str) -> bytes:
    return json.dumps(text).encode()


def _text(err: Exception) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:200] + "..."

"""The metrics port (serve --metrics-listen): GET /metrics over HTTPS for Prometheus, apart from the verbs.

Why a port of its own: the verb listener is loopback-only beside kube-scheduler (the sidecar
install) or requires the scheduler's client certificate (the TLS installs), so Prometheus cannot
scrape it. This port is the ecosystem's answer, the one kube-rbac-proxy and controller-runtime's
WithAuthenticationAndAuthorization give: HTTPS, the scraper's bearer token checked by a
TokenReview, then a SubjectAccessReview for verb `get` on the non-resource URL /metrics. A
Prometheus whose ServiceAccount is bound to the ClusterRole placement-metrics-reader reads it;
no token is 401, a token the API server does not know is 401, a token without the permission 403.

The extender is a guest here: a flooded or hostile scraper must not slow filter, prioritize or
bind. So the port shares nothing of the verb listener: its own socket, its own accept thread, at
most MAX_CONNECTIONS connections served at once and ACCEPT_RATE accepted a second (the rest wait
in the kernel's listen backlog, costing this process nothing), each bounded in time
(HEAD_DEADLINE for the handshake and the request, CONNECTION_DEADLINE for all its I/O, and each
review call REVIEW_TIMEOUT), one request per
connection. The reviews' results are kept (ReviewCache): an allowed token for ALLOWED_TTL, so a
scraper every 15 s costs one TokenReview and one SubjectAccessReview every two minutes; a refused
one for DENIED_TTL. Both caches are bounded in
entries, and the refused tokens have a cache of their own, so a flood of random tokens can neither
grow memory nor push a working scraper's token out. Reviews are bounded too: at most
MAX_REVIEWS_IN_FLIGHT at once and REVIEW_RATE a second (a burst of REVIEW_BURST); past that the
answer is 429 without asking the API server, so a flood costs it at most REVIEW_RATE reviews a second
(and a token allowed before is renewed outside that rate, so the flood cannot lock its scraper out).

The certificate: the install's serving certificate where it has one (serve --tls-cert-file, the
TLS installs; reread when the files change, as the verb port does), else a self-signed one made
at start (the sidecar install has none), as controller-runtime's metrics server does. Prometheus
then skips verification (insecureSkipVerify) and the bearer token is what protects the port; the
token is only ever sent to a server Prometheus chose by its service discovery.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging
import os
import selectors
import socket
import ssl
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, Protocol

import httptools

from .routes import Handler, Listener, path_of, routes, served

log = logging.getLogger(__name__)

METRICS_PATH = path_of(Handler.METRICS).encode()  # the path a SubjectAccessReview asks about
# path -> methods of the port's routes; every one of them is answered with the metrics (render).
_ROUTES = {path.encode(): {m.encode() for m in methods} for path, methods in routes(Listener.METRICS).items()}
if any(r.handler is not Handler.METRICS for m in routes(Listener.METRICS).values() for r in m.values()):
    raise ImportError("the metrics port answers only Handler.METRICS routes (routes.ROUTES)")
MAX_CONNECTIONS = 4  # connections served at once; Prometheus scrapes a target with one at a time
# New connections accepted a second, at most (in bursts of MAX_CONNECTIONS). Each costs this
# process a TLS handshake and a parse under the GIL the verbs' threads share; Prometheus opens one
# per scrape (every 15-60 s per replica). Past it, connections wait in the kernel's backlog: a
# flood then costs the process about ACCEPT_RATE handshakes a second, whatever its size.
ACCEPT_RATE = 20.0
CONNECTION_DEADLINE = 10.0  # seconds for one connection's TLS handshake, request and answer (I/O)
# Seconds for the TLS handshake and the request's head, within CONNECTION_DEADLINE. Prometheus
# sends its request at once; a client that connects and says nothing holds one of the few slots
# only this long, so a handful of silent connections cannot keep a scraper out for long.
HEAD_DEADLINE = 3.0
MAX_HEAD_BYTES = 16 * 1024  # request line and headers: a GET with a bearer token fits in a few KB
MAX_TOKEN_BYTES = 8 * 1024  # a ServiceAccount token is about 1 KB; an OIDC one a few
LISTEN_BACKLOG = 64
REVIEW_TIMEOUT = 3.0  # seconds for one TokenReview or SubjectAccessReview call
ALLOWED_TTL = 120.0  # seconds an allowed token is admitted without asking again
DENIED_TTL = 10.0  # seconds a refused token (401 or 403) is refused without asking again
MAX_ALLOWED_CACHED = 64  # tokens: a few Prometheus replicas, rotating their tokens hourly
MAX_DENIED_CACHED = 1024  # tokens: about 100 bytes each
MAX_REVIEWS_IN_FLIGHT = 2
REVIEW_RATE = 5.0  # reviews a second, on average, past which a new token gets 429
REVIEW_BURST = 10.0
REVIEW_WAIT = 1.0  # seconds a request waits for a review slot before its 429
SELF_SIGNED_DAYS = 365  # the self-signed certificate's life; a new one at every start


# ---------------------------------------------------------------------------------------- tokens
def bearer_token(header: str | bytes | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (RFC 6750: the scheme is
    case-insensitive, one or more spaces, then a token68), or None for anything else: no header,
    another scheme, an empty, over-long or malformed token. None is answered 401."""
    if header is None:
        return None
    if isinstance(header, bytes):
        try:
            header = header.decode("ascii")
        except UnicodeDecodeError:
            return None
    scheme, _, rest = header.strip(" \t").partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = rest.lstrip(" ")
    if not token or len(token) > MAX_TOKEN_BYTES or not _is_token68(token):
        return None
    return token


_TOKEN68 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/")


def _is_token68(token: str) -> bool:
    """RFC 7235's token68: its characters, then any '=' padding at the end only."""
    body = token.rstrip("=")
    return bool(body) and all(c in _TOKEN68 for c in body)


# --------------------------------------------------------------------------------------- reviews
@dataclass(frozen=True)
class User:
    """Who a TokenReview says the token belongs to, as a SubjectAccessReview asks about them."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewError(Exception):
    """The API server could not be asked (a timeout, an error status): answered 503, never cached."""


class Reviewer(Protocol):
    def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not authenticate it (a TokenReview)."""

    def authorize(self, user: User) -> bool:
        """Whether `user` may `get` the non-resource URL /metrics (a SubjectAccessReview)."""


class KubeReviewer:
    """The reviews, asked of the API server through the extender's own client (kube/client.py).
    Its identity needs `create` on tokenreviews and subjectaccessreviews (deploy/base/rbac.yaml)."""

    def __init__(self, api: Any, timeout: float = REVIEW_TIMEOUT) -> None:  # api: kube.client.KubeHttp
        self.api = api
        self.timeout = timeout

    def authenticate(self, token: str) -> User | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = self._post("/apis/authentication.k8s.io/v1/tokenreviews", body)
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in values or ())) for k, values in extra.items())),
        )

    def authorize(self, user: User) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": METRICS_PATH.decode(), "verb": "get"},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return bool(self._post("/apis/authorization.k8s.io/v1/subjectaccessreviews", body).get("allowed"))

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = self.api.call("POST", path, body=body, timeout=self.timeout)
        except Exception as err:  # the API server's error, a timeout, a refused connection: all a 503
            raise ReviewError(f"{path.rsplit('/', 1)[-1]}: {str(err)[:200]}") from None
        return (answer or {}).get("status") or {}


class _Bounded:
    """Token digests -> (expiry, answer), the oldest used first out past `size` entries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[bytes, tuple[float, int]] = OrderedDict()

    def get(self, key: bytes, now: float) -> int | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            del self.entries[key]
            return None
        self.entries.move_to_end(key)
        return entry[1]

    def put(self, key: bytes, expires: float, answer: int) -> None:
        self.entries[key] = (expires, answer)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


@dataclass
class ReviewCache:
    """The gate: a request's token -> its HTTP status (200, 401, 403, 429, 503), the reviews' answers
    kept briefly and every bound of the module docstring held. Tokens are kept only as SHA-256
    digests: the process's memory holds no scraper's credential."""

    reviewer: Reviewer
    clock: Callable[[], float] = time.monotonic
    allowed_ttl: float = ALLOWED_TTL
    denied_ttl: float = DENIED_TTL
    max_allowed: int = MAX_ALLOWED_CACHED
    max_denied: int = MAX_DENIED_CACHED
    in_flight: int = MAX_REVIEWS_IN_FLIGHT
    rate: float = REVIEW_RATE
    burst: float = REVIEW_BURST
    wait: float = REVIEW_WAIT
    reviews: int = 0  # reviews asked of the API server (a TokenReview and its SubjectAccessReview count once)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _allowed: _Bounded = field(init=False, repr=False)
    _denied: _Bounded = field(init=False, repr=False)
    _slots: threading.BoundedSemaphore = field(init=False, repr=False)
    _tokens: float = field(init=False, repr=False)
    _filled: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._allowed = _Bounded(self.max_allowed)
        self._denied = _Bounded(self.max_denied)
        self._slots = threading.BoundedSemaphore(self.in_flight)
        self._tokens = self.burst
        self._filled = self.clock()

    def status(self, token: str | None) -> int:
        if token is None:
            return 401
        key = hashlib.sha256(token.encode()).digest()
        with self._lock:
            now = self.clock()
            allowed = self._allowed.entries.get(key)
            if allowed is not None and allowed[0] > now:
                self._allowed.entries.move_to_end(key)
                return 200
            # A token allowed before (its answer expired, still among the allowed) is reviewed
            # again outside the review rate: a flood of new tokens, which takes all of that rate,
            # cannot lock a working scraper out once its answer expires. At most MAX_ALLOWED_CACHED
            # such renewals every ALLOWED_TTL.
            if allowed is None:
                refused = self._denied.get(key, now)
                if refused is not None:
                    return refused
                if not self._take_rate(now):
                    return 429
        if not self._slots.acquire(timeout=self.wait):
            return 429
        try:
            answer = self._review(token)
        finally:
            self._slots.release()
        if answer == 503:
            return answer
        with self._lock:
            now = self.clock()
            if answer == 200:
                self._allowed.put(key, now + self.allowed_ttl, answer)
            else:
                self._allowed.entries.pop(key, None)  # no longer allowed: renewed at the rate like any
                self._denied.put(key, now + self.denied_ttl, answer)
        return answer

    def sizes(self) -> tuple[int, int]:
        """(allowed, refused) tokens held now."""
        with self._lock:
            return len(self._allowed.entries), len(self._denied.entries)

    def _take_rate(self, now: float) -> bool:
        """One review from the token bucket (under the lock)."""
        self._tokens = min(self.burst, self._tokens + (now - self._filled) * self.rate)
        self._filled = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def _review(self, token: str) -> int:
        with self._lock:
            self.reviews += 1
        try:
            user = self.reviewer.authenticate(token)
            if user is None:
                return 401
            return 200 if self.reviewer.authorize(user) else 403
        except ReviewError as err:
            log.warning("metrics port: could not review a scraper's token: %s", err)
            return 503


# ------------------------------------------------------------------------------------------- TLS
def file_context(cert_file: str, key_file: str) -> Callable[[], ssl.SSLContext]:
    """A server context from the install's certificate files, built again when a file changes
    (a rotated certificate is served to the next connection without a restart)."""
    cached: list[Any] = [None, None]

    def current() -> ssl.SSLContext:
        stamp = tuple(_mtime(p) for p in (cert_file, key_file))
        if cached[0] != stamp:
            context = _server_context()
            context.load_cert_chain(cert_file, key_file)
            cached[:] = [stamp, context]
        return cached[1]

    return current


def self_signed_context(hosts: tuple[str, ...] = ()) -> Callable[[], ssl.SSLContext]:
    """A server context with a certificate signed by its own key (ECDSA P-256), made now, named for
    `hosts`, the pod's host name and localhost. The ssl module loads certificates from files only:
    they are written to a private temporary directory (in the pod, /tmp is memory) and removed
    once loaded."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names = [socket.gethostname(), "localhost", *hosts]
    dns: list[x509.GeneralName] = []
    for name in dict.fromkeys(n for n in names if n):
        try:
            dns.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            dns.append(x509.DNSName(name))
    dns.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"placement-extender-metrics@{int(time.time())}")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))  # a node's clock a little behind
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(dns), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    context = _server_context()
    with tempfile.TemporaryDirectory(prefix="metrics-tls-") as directory:
        cert_path, key_path = os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key")
        with open(os.open(cert_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
            out.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as out:
            out.write(
                key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
            )
        context.load_cert_chain(cert_path, key_path)
    return lambda: context


def _server_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


# ---------------------------------------------------------------------------------------- server
def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT, [IPv6]:PORT or :PORT (every IPv4 interface) as (host, port); ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: give HOST:PORT, e.g. 0.0.0.0:8080")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


class _Head:
    """httptools' callbacks for one request's line and headers."""

    __slots__ = ("url", "authorization", "size", "done")

    def __init__(self) -> None:
        self.url = b""
        self.authorization: bytes | None = None
        self.size = 0
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url
        self.size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.size += len(name) + len(value)
        if name.lower() == b"authorization":
            self.authorization = value if self.authorization is None else b""  # two: neither counts

    def on_headers_complete(self) -> None:
        self.done = True


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    503: "Service Unavailable",
}
_MESSAGES = {
    401: b"a bearer token is required: the ServiceAccount token of a scraper bound to placement-metrics-reader\n",
    403: b"the token's user may not get /metrics: bind it to the ClusterRole placement-metrics-reader\n",
    404: f"this port serves only {served(Listener.METRICS)}\n".encode(),
    405: f"this port serves only {served(Listener.METRICS)}\n".encode(),
    429: b"too many token reviews at once; try again\n",
    503: b"the API server could not review the token; try again\n",
}


class MetricsServer:
    """The listener: an accept thread, at most `max_connections` connection threads."""

    def __init__(
        self,
        address: tuple[str, int],
        render: Callable[[], bytes],
        gate: ReviewCache,
        tls: Callable[[], ssl.SSLContext] | None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        deadline: float = CONNECTION_DEADLINE,
        accept_rate: float = ACCEPT_RATE,
        head_deadline: float = HEAD_DEADLINE,
        count: Callable[[int], None] | None = None,
    ) -> None:
        self.address = address
        self.render = render
        self.gate = gate
        self.tls = tls  # None: plain HTTP, for tests of the HTTP layer alone
        self.deadline = deadline
        self.head_deadline = min(head_deadline, deadline)
        self.count = count  # each answer's status (extender_metrics_port_answers_total)
        self.accept_gap = 1.0 / accept_rate
        self.burst = float(max_connections)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    def start(self) -> MetricsServer:
        host, port = self.address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept_loop, name="metrics-accept", daemon=True)
        self._thread.start()
        log.info("metrics port: HTTPS GET /metrics on %s:%d (token review)", host, self.port)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._sock is not None:
            self._sock.close()

    def _accept_loop(self) -> None:
        """Accept only while a slot is free: past MAX_CONNECTIONS, new connections wait in the
        kernel's backlog (and past it are refused by the kernel), costing this process nothing."""
        assert self._sock is not None
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ)
        budget, filled = self.burst, time.monotonic()  # accepts in hand: a token bucket of ACCEPT_RATE
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                budget, filled = min(self.burst, budget + (now - filled) / self.accept_gap), now
                if budget < 1.0:
                    self._stop.wait((1.0 - budget) * self.accept_gap)
                    continue
                if not self._slots.acquire(timeout=0.5):
                    continue
                handed = False
                try:
                    if not selector.select(0.5):
                        continue
                    try:
                        client, _ = self._sock.accept()
                    except OSError:
                        continue
                    budget -= 1.0
                    threading.Thread(target=self._serve, args=(client,), name="metrics-conn", daemon=True).start()
                    handed = True
                finally:
                    if not handed:
                        self._slots.release()
        finally:
            selector.close()

    def _serve(self, client: socket.socket) -> None:
        started = time.monotonic()
        ends = started + self.deadline
        sock: Any = client
        try:
            client.settimeout(self.head_deadline)
            if self.tls is not None:
                sock = self.tls().wrap_socket(client, server_side=True)  # handshake within the timeout
            status, body = self._answer(sock, started + self.head_deadline)
            if status:
                if self.count is not None:
                    self.count(status)
                self._send(sock, status, body, ends)
        except (OSError, ValueError, ssl.SSLError):  # a client gone, too slow, or speaking no TLS
            pass
        except Exception:  # never the accept loop's or the process's fault: log, close
            log.exception("metrics port: a connection failed")
        finally:
            try:
                sock.close()
            except OSError:
                pass
            self._slots.release()

    def _answer(self, sock: Any, ends: float) -> tuple[int, bytes]:
        head = _Head()
        parser = httptools.HttpRequestParser(head)
        while not head.done:
            left = ends - time.monotonic()
            if left <= 0:
                return 0, b""
            sock.settimeout(left)
            data = sock.recv(4096)
            if not data:
                return 0, b""
            try:
                parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                return 400, b"no upgrades here\n"
            except httptools.HttpParserError:
                return 400, b"malformed request\n"
            if head.size > MAX_HEAD_BYTES:
                return 400, b"request headers too large\n"
        try:
            path = httptools.parse_url(head.url).path
        except httptools.HttpParserInvalidURLError:
            return 400, b"malformed request target\n"
        methods = _ROUTES.get(path)
        if methods is None:
            return 404, _MESSAGES[404]
        if parser.get_method() not in methods:
            return 405, _MESSAGES[405]
        status = self.gate.status(bearer_token(head.authorization))
        if status != 200:
            return status, _MESSAGES.get(status, b"")
        return 200, self.render()

    def _send(self, sock: Any, status: int, body: bytes, ends: float) -> None:
        kind = "text/plain; version=0.0.4; charset=utf-8"
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            f"Content-Type: {kind}",
            f"Content-Length: {len(body)}",
            f"Date: {formatdate(usegmt=True)}",
            "Connection: close",
        ]
        if status == 401:
            head.append('WWW-Authenticate: Bearer realm="placement-extender metrics"')
        if status == 429:
            head.append("Retry-After: 1")
        sock.settimeout(max(ends - time.monotonic(), 0.5))  # a review may have used the I/O's time
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)


def start_metrics_port(
    listen: str,
    render: Callable[[], bytes],
    reviewer: Reviewer,
    *,
    cert_file: str | None = None,
    key_file: str | None = None,
    count: Callable[[int], None] | None = None,
) -> MetricsServer:
    """Serve the metrics port on `listen` (serve --metrics-listen) with the install's certificate
    files, or a self-signed certificate when it has none; `count` is told each answer's status."""
    tls = file_context(cert_file, key_file) if cert_file and key_file else self_signed_context()
    return MetricsServer(parse_address(listen), render, ReviewCache(reviewer), tls, count=count).start()

"""The route table (extender/server/routes.py), held against what every listener answers.

One table of expectations, written out here rather than read from routes.ROUTES: every path x
method x listener -> status. The verb and health listeners are the connection worker's
(worker.py) serving the real app over a socket pair, so the worker's own health filter is
included; the metrics port is its real listener on loopback, plain HTTP, with a token it allows.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from types import SimpleNamespace
from typing import Any

import pytest

from extender.server import routes
from extender.server.app import create_app
from extender.server.metrics_port import MetricsServer, ReviewCache, User
from extender.server.routes import Listener
from extender.server.verbs import Verbs
from extender.server.worker import ConnectionWorker, _Connection
from extender.state.store import KINDS, ClusterStore

from builders import filter_args, node, pod
from fakes import RecordedEvents

METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")
UNKNOWN = ("/", "/schedule", "/healthz/", "/FILTER", "/metrics/x", "/static/x")
# What each listener answers, and by which methods; every other (listener, path) is a 404 and
# every other method on a listed path a 405.
SERVED: dict[tuple[Listener, str], set[str]] = {
    (Listener.VERBS, "/filter"): {"POST"},
    (Listener.VERBS, "/prioritize"): {"POST"},
    (Listener.VERBS, "/bind"): {"POST"},
    (Listener.VERBS, "/preempt"): {"POST"},
    (Listener.VERBS, "/healthz"): {"GET", "HEAD"},
    (Listener.VERBS, "/readyz"): {"GET", "HEAD"},
    (Listener.VERBS, "/metrics"): {"GET", "HEAD"},
    (Listener.HEALTH, "/healthz"): {"GET", "HEAD"},
    (Listener.HEALTH, "/readyz"): {"GET", "HEAD"},
    (Listener.METRICS, "/metrics"): {"GET"},
}
KNOWN = sorted({path for _, path in SERVED})
BODIES = {
    "/filter": filter_args(pod("web-0", sts="web"), ["n1", "n2"]),
    "/prioritize": filter_args(pod("web-0", sts="web"), ["n1", "n2"]),
    "/bind": {"PodName": "web-0", "PodNamespace": "db", "PodUID": "u", "Node": "n1"},
    "/preempt": {"Pod": pod("web-0", sts="web"), "NodeNameToMetaVictims": {}},
}


def expected(listener: Listener, method: str, path: str) -> int:
    methods = SERVED.get((listener, path))
    if methods is None:
        return 404
    return 200 if method in methods else 405


GRID = [(listener, method, path) for listener in Listener for path in KNOWN + list(UNKNOWN) for method in METHODS]


class OkBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pass


def make_app(standby: bool = False) -> Any:
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.apply("nodes", "ADDED", node("n1", "a"))
    store.apply("nodes", "ADDED", node("n2", "b"))
    store.apply("pods", "ADDED", pod("web-0", sts="web"))
    if standby:
        store.standby = lambda: "this replica is on standby"  # type: ignore[method-assign]
    return create_app(Verbs(store, OkBinder(), RecordedEvents()), max_body=64 * 1024)  # type: ignore[arg-type]


def over_worker(app: Any, raw: bytes, *, health: bool) -> bytes:
    """One request through the connection worker's own reading and answering (worker._Connection),
    over a socket pair; the connection is closed after the answer."""
    ours, theirs = socket.socketpair()
    worker = SimpleNamespace(
        tls=None,
        client_names=frozenset(),
        max_body=64 * 1024,
        server_address=("localhost", "0"),
        alive=True,
        wsgi=app,
        log=logging.getLogger("test"),
        cfg=SimpleNamespace(accesslog=None),
        claim=lambda connection: True,
        release=lambda connection: False,  # a stopping worker: close once answered
        forget=lambda connection: None,
    )
    worker.call_app = lambda environ: ConnectionWorker.call_app(worker, environ)  # type: ignore[arg-type]
    worker.access = lambda *args: ConnectionWorker.access(worker, *args)  # type: ignore[arg-type]
    with ours:
        ours.sendall(raw)
        _Connection(worker, theirs, ("127.0.0.1", 1), health=health).serve()  # type: ignore[arg-type]
        return _read_all(ours)


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def request_bytes(method: str, path: str, headers: str = "") -> bytes:
    body = json.dumps(BODIES.get(path, {})).encode() if method in ("POST", "PUT", "PATCH") else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-Request-Id: rid\r\n{headers}"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def status_of(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match.group(1))


@pytest.fixture(scope="module")
def app() -> Any:
    return make_app()


@pytest.fixture(scope="module")
def metrics_port():
    class Allow:
        def authenticate(self, token: str) -> User | None:
            return User("prometheus") if token == "good" else None

        def authorize(self, user: User) -> bool:
            return True

    server = MetricsServer(("127.0.0.1", 0), lambda: b"m 1\n", ReviewCache(Allow()), None, accept_rate=10_000.0)
    yield server.start()
    server.stop()


def answer(listener: Listener, method: str, path: str, app: Any, metrics_port: MetricsServer) -> bytes:
    if listener is Listener.METRICS:
        raw = request_bytes(method, path, "Authorization: Bearer good\r\n")
        with socket.create_connection(("127.0.0.1", metrics_port.port), timeout=5) as sock:
            sock.sendall(raw)
            return _read_all(sock)
    return over_worker(app, request_bytes(method, path), health=listener is Listener.HEALTH)


@pytest.mark.parametrize("listener,method,path", GRID, ids=[f"{lis.value} {m} {p}" for lis, m, p in GRID])
def test_every_listener_answers_every_path_and_method_as_the_table_says(
    app: Any, metrics_port: MetricsServer, listener: Listener, method: str, path: str
) -> None:
    status = expected(listener, method, path)
    assert routes.status(listener, method, path) == status, "the declaration"
    answer_bytes = answer(listener, method, path, app, metrics_port)
    assert status_of(answer_bytes) == status, answer_bytes[:300]
    head, _, body = answer_bytes.partition(b"\r\n\r\n")
    if method == "HEAD" and (listener is Listener.VERBS or status != 404 and listener is Listener.HEALTH):
        # The app's answers to HEAD carry no body. The worker's own 404 on the health listener and
        # the metrics port write theirs whatever the method, as they always have.
        assert body == b""
    elif status == 200 and path == "/metrics":
        assert body == b"m 1\n" if listener is Listener.METRICS else b"extender_requests_total" in body
    elif status == 200:
        assert json.loads(body), body  # a verb's answer, or the health and readiness JSON


def test_a_path_is_declared_once_and_flask_holds_none_of_them(app: Any) -> None:
    declared = [route.path for route in routes.ROUTES]
    assert len(declared) == len(set(declared))
    assert sorted(declared) == KNOWN
    assert not list(app.url_map.iter_rules()), "Flask holds no route: what is not in the table is a 404"


def test_the_404s_name_what_each_listener_serves(app: Any, metrics_port: MetricsServer) -> None:
    verbs = over_worker(app, request_bytes("GET", "/schedule"), health=False)
    assert verbs.endswith(
        b'{"error":"no such endpoint /schedule; the extender serves POST /filter, /prioritize, /bind, /preempt '
        b'and GET /healthz, /readyz, /metrics"}\n'
    )
    health = over_worker(app, request_bytes("GET", "/filter"), health=True)
    assert health.endswith(b'{"error":"the health listener answers /healthz and /readyz only"}\n')
    assert answer(Listener.METRICS, "GET", "/filter", app, metrics_port).endswith(
        b"this port serves only GET /metrics\n"
    )


@pytest.mark.parametrize("path", KNOWN + ["/schedule"])
def test_the_request_id_is_echoed_and_only_a_standbys_decisions_close_the_connection(path: str) -> None:
    standby = make_app(standby=True)
    for method in ("GET", "POST"):
        answer_bytes = over_worker(standby, request_bytes(method, path, "Connection: keep-alive\r\n"), health=False)
        head = answer_bytes.partition(b"\r\n\r\n")[0]
        assert b"\r\nX-Request-Id: rid\r\n" in head
        decision = method == "POST" and path in BODIES
        assert (b"\r\nConnection: close" in head) == decision, head


def test_a_fault_outside_the_verbs_is_a_json_500_naming_the_request() -> None:
    app = make_app()
    app.wsgi_app.verbs.store.stats = lambda: 1 / 0  # readiness cannot be read
    answer_bytes = over_worker(app, request_bytes("GET", "/readyz"), health=True)
    assert answer_bytes.startswith(b"HTTP/1.1 500 INTERNAL SERVER ERROR\r\n")
    assert answer_bytes.endswith(b'{"error":"internal error (request id rid); see the extender\'s log"}\n')

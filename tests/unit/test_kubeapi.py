"""KubeHttp.create, the path the Bindings and Events take, and call(), against a local HTTP server:
the bytes sent, the credentials, the API server's errors as KubeApiError, kept connections, and
one deadline per call however the answer comes."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import urllib3
from kubernetes import client

from extender.kube.client import KubeApiError, KubeHttp

BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "db"}}


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    answer: tuple[int, bytes] = (201, b"{}")
    first: list[tuple[int, bytes, dict[str, str]]] = []  # answers given before `answer`, in order

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        length = int(self.headers["Content-Length"])
        type(self).seen.append({"path": self.path, "headers": dict(self.headers), "body": self.rfile.read(length)})
        status, body, headers = type(self).first.pop(0) if type(self).first else (*type(self).answer, {})
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen = []
    _Recorder.first = []
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    cfg.api_key = {"authorization": "Bearer t0ken"}
    yield KubeHttp(cfg)
    server.shutdown()
    server.server_close()


def test_create_posts_the_json_body_with_the_credentials(api) -> None:
    _Recorder.answer = (201, b'{"kind":"Status","status":"Success"}')
    api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)  # the pooled connection again
    assert len(_Recorder.seen) == 2
    sent = _Recorder.seen[0]
    assert sent["path"] == "/api/v1/namespaces/db/pods/p/binding"
    assert json.loads(sent["body"]) == BINDING
    assert sent["headers"]["Authorization"] == "Bearer t0ken"
    assert sent["headers"]["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    "status,body,reason,message",
    [
        (409, b'{"kind":"Status","reason":"Conflict","message":"pod p is already assigned"}', "Conflict", "already"),
        (500, b"not json at all", "Internal Server Error", "not json"),
        (404, b'["a list"]', "Not Found", "a list"),
    ],
)
def test_create_turns_an_error_answer_into_kube_api_error(api, status, body, reason, message) -> None:
    _Recorder.answer = (status, body)
    with pytest.raises(KubeApiError) as err:
        api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    assert err.value.status == status and err.value.reason == reason
    assert message in str(err.value)


TOO_MANY = (429, b'{"kind":"Status","reason":"TooManyRequests","message":"please try again later"}')


def test_create_sends_again_after_a_429_as_told(api) -> None:
    """Priority and fairness turned the Binding away: wait Retry-After and send it again."""
    _Recorder.first = [(*TOO_MANY, {"Retry-After": "0"}), (*TOO_MANY, {"Retry-After": "0"})]
    _Recorder.answer = (201, b"{}")
    api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    assert len(_Recorder.seen) == 3


def test_create_gives_up_on_a_429_whose_wait_outlasts_the_timeout(api) -> None:
    _Recorder.first = [(*TOO_MANY, {"Retry-After": "1"})]
    with pytest.raises(KubeApiError) as err:
        api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=0.5)
    assert err.value.status == 429 and len(_Recorder.seen) == 1


def test_the_credentials_hook_runs_at_most_once_per_reuse_interval(api, monkeypatch) -> None:
    """The client's refresh hook (rotating tokens, exec plugins) copies the whole configuration:
    it runs once per CREDENTIALS_REUSE seconds, and a token it renews is sent from then on."""
    import extender.kube.client as kubeapi

    clock = [1000.0]
    monkeypatch.setattr(kubeapi.time, "monotonic", lambda: clock[0])
    calls: list[float] = []

    def hook(cfg: client.Configuration) -> None:
        calls.append(clock[0])
        cfg.api_key = {"authorization": f"Bearer token-{len(calls)}"}

    api.cfg.refresh_api_key_hook = hook
    api._cached_headers = None
    _Recorder.answer = (201, b"{}")
    for _ in range(3):
        api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    clock[0] += kubeapi.CREDENTIALS_REUSE
    api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    assert calls == [1000.0, 1000.0 + kubeapi.CREDENTIALS_REUSE]
    assert [s["headers"]["Authorization"] for s in _Recorder.seen] == ["Bearer token-1"] * 3 + ["Bearer token-2"]
    headers = api._headers()
    headers["Content-Type"] = "application/merge-patch+json"  # a caller's change stays its own
    assert api._headers()["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("failures", "status", "calls", "raised"),
    [
        (0, 409, 1, False),  # no conflict: one attempt
        (2, 409, 3, False),  # two conflicts: read, decide, write again
        (4, 409, 5, False),  # the last attempt wins
        (5, 409, 5, True),  # out of attempts: the conflict is the error
        (1, 403, 1, True),  # any other error is not retried
    ],
)
def test_retry_on_conflict_runs_the_whole_attempt_again_only_for_a_409(failures, status, calls, raised) -> None:
    from extender.kube.client import retry_on_conflict

    made: list[int] = []

    def attempt() -> str:
        made.append(1)
        if len(made) <= failures:
            raise KubeApiError(status, "Conflict", "the object has been modified")
        return "written"

    if raised:
        with pytest.raises(KubeApiError):
            retry_on_conflict(attempt)
    else:
        assert retry_on_conflict(attempt) == "written"
    assert len(made) == calls


class _KeepAlive(_Recorder):
    """HTTP/1.1: the connection stays open after an answer unless `close_after` says otherwise,
    and then the server closes it without saying so (as an API server's idle timeout does)."""

    protocol_version = "HTTP/1.1"
    close_after = False
    peers: list[int] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        type(self).peers.append(self.client_address[1])
        super().do_POST()
        self.close_connection = type(self).close_after


@pytest.mark.parametrize("closed_by_server", [False, True], ids=["kept", "closed by the server while idle"])
def test_create_keeps_its_connection_and_never_sends_on_one_the_server_closed(closed_by_server) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _KeepAlive.seen, _KeepAlive.first, _KeepAlive.peers = [], [], []
    _KeepAlive.answer, _KeepAlive.close_after = (201, b"{}"), closed_by_server
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = KubeHttp(cfg)
    try:
        for _ in range(3):
            api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
            time.sleep(0.05)  # the server's close reaches the idle connection
    finally:
        server.shutdown()
        server.server_close()
    assert len(_KeepAlive.seen) == 3, "each POST sent exactly once"
    assert len(set(_KeepAlive.peers)) == (3 if closed_by_server else 1)


class _Scripted:
    """A raw HTTP server on loopback answering each request with scripted bytes, sent in pieces
    `gap` seconds apart (an answer that drips), then closing the connection."""

    def __init__(self, answer: bytes, pieces: int = 1, gap: float = 0.0) -> None:
        self.answer, self.pieces, self.gap = answer, pieces, gap
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)  # the request (small, one read)
                size = max(1, -(-len(self.answer) // self.pieces))
                for at in range(0, len(self.answer), size):
                    if self.stopped.wait(self.gap):
                        return
                    try:
                        conn.sendall(self.answer[at : at + size])
                    except OSError:
                        break

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()


def _answer(body: bytes, status: str = "201 Created", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode() + body


def _api(host: str) -> KubeHttp:
    cfg = client.Configuration()
    cfg.host = host
    return KubeHttp(cfg)


@pytest.mark.parametrize("via", ["create", "call"])
def test_an_answer_that_drips_ends_at_the_calls_deadline(via) -> None:
    """Forty pieces a quarter of a second apart: each read comes well within a 1 s socket
    timeout, so only a deadline for the whole call stops it (the answer would take 10 s)."""
    server = _Scripted(_answer(b"{}" + b" " * 38, status="200 OK"), pieces=40, gap=0.25)
    api = _api(server.host)
    try:
        with pytest.raises((urllib3.exceptions.HTTPError, requests.RequestException, OSError)):
            if via == "create":
                api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=1)
            else:
                api.call("GET", "/api/v1/pods", timeout=1)
    finally:
        server.close()


def test_an_answer_in_pieces_within_the_deadline_is_read_whole() -> None:
    server = _Scripted(_answer(b'{"kind":"Status","status":"Success"}', status="200 OK"), pieces=7)
    try:
        assert _api(server.host).call("GET", "/api/v1/pods", timeout=5) == {"kind": "Status", "status": "Success"}
    finally:
        server.close()


@pytest.mark.parametrize(
    "answer",
    [b"", _answer(b"{}", length=10), b"garbage\r\n\r\n"],
    ids=["closed before an answer", "closed mid-body", "not HTTP"],
)
def test_an_answer_cut_short_or_unreadable_is_an_error(answer) -> None:
    """Never read as a Binding made: the bind fails and kube-scheduler retries the pod."""
    server = _Scripted(answer)
    try:
        with pytest.raises((urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)):
            _api(server.host).create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    finally:
        server.close()


def test_a_header_with_a_line_break_is_never_sent(api) -> None:
    api.cfg.api_key = {"authorization": "Bearer t0ken\r\nX-Injected: 1"}
    api._cached_headers = None
    with pytest.raises(ValueError):
        api.create("/api/v1/namespaces/db/pods/p/binding", BINDING, timeout=5)
    assert _Recorder.seen == []

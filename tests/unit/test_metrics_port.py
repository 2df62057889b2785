"""The metrics port (extender/server/metrics_port.py): the bearer token's parser, the review cache
and its bounds, and the HTTPS listener, against a fake reviewer of plain data (no API server)."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.server.metrics_port import (
    MAX_TOKEN_BYTES,
    MetricsServer,
    ReviewCache,
    ReviewError,
    User,
    bearer_token,
    file_context,
    parse_address,
    self_signed_context,
)

pytestmark = pytest.mark.alone("bounds how long connections wait for the port's slots and accept rate, in seconds")
TOKEN68 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/"


@dataclass
class FakeReviewer:
    """Tokens -> users, and the users allowed to get /metrics: plain data, every call counted."""

    users: dict[str, User] = field(default_factory=dict)
    allowed: set[str] = field(default_factory=set)
    failing: bool = False
    delay: float = 0.0
    calls: int = 0
    concurrent: int = 0
    most_concurrent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticate(self, token: str) -> User | None:
        with self.lock:
            self.calls += 1
            self.concurrent += 1
            self.most_concurrent = max(self.most_concurrent, self.concurrent)
        try:
            time.sleep(self.delay)
            if self.failing:
                raise ReviewError("tokenreviews: 500 InternalError")
            return self.users.get(token)
        finally:
            with self.lock:
                self.concurrent -= 1

    def authorize(self, user: User) -> bool:
        return user.name in self.allowed


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


PROMETHEUS = User("system:serviceaccount:monitoring:prometheus", uid="u1", groups=("system:serviceaccounts",))
OTHER = User("system:serviceaccount:default:other")


def reviewer() -> FakeReviewer:
    return FakeReviewer(users={"good": PROMETHEUS, "other": OTHER}, allowed={PROMETHEUS.name})


# ------------------------------------------------------------------------------------ the parser
@pytest.mark.parametrize(
    "header,token",
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER   abc.def-ghi_~+/==", "abc.def-ghi_~+/=="),
        (b"Bearer abc", "abc"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer a b", None),
        ("Bearer ab=c", None),
        ("Bearer ===", None),
        ("Bearerabc", None),
        (b"Bearer \xff", None),
        ("Bearer " + "a" * (MAX_TOKEN_BYTES + 1), None),
    ],
)
def test_bearer_token_examples(header: str | bytes | None, token: str | None) -> None:
    assert bearer_token(header) == token


@given(st.one_of(st.none(), st.text(max_size=200), st.binary(max_size=200)))
def test_bearer_token_never_raises_and_gives_only_a_token68(header: str | bytes | None) -> None:
    token = bearer_token(header)
    if token is not None:
        assert 0 < len(token) <= MAX_TOKEN_BYTES
        assert all(c in TOKEN68 + "=" for c in token) and token.rstrip("=")
        assert "=" not in token.rstrip("=")


@given(
    st.sampled_from(["Bearer", "bearer", "BEARER", "bEaReR"]),
    st.integers(1, 4),
    st.text(alphabet=TOKEN68, min_size=1, max_size=300),
    st.integers(0, 2),
)
def test_bearer_token_reads_back_every_well_formed_header(scheme: str, spaces: int, body: str, pad: int) -> None:
    token = body + "=" * pad
    assert bearer_token(f"{scheme}{' ' * spaces}{token}") == token
    assert bearer_token(f"{scheme}{' ' * spaces}{token}".encode()) == token


def test_parse_address() -> None:
    assert parse_address("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_address(":8080") == ("0.0.0.0", 8080)
    assert parse_address("[::]:8080") == ("::", 8080)
    for bad in ("8080", "host:", "host:http", "host:0", "host:70000"):
        with pytest.raises(ValueError):
            parse_address(bad)


# ------------------------------------------------------------------------------------- the cache
def test_missing_invalid_denied_and_allowed_tokens() -> None:
    fake = reviewer()
    gate = ReviewCache(fake)
    assert gate.status(None) == 401
    assert fake.calls == 0, "no token: no review"
    assert gate.status("unknown") == 401
    assert gate.status("other") == 403
    assert gate.status("good") == 200


def test_answers_are_cached_allowed_longer_than_refused() -> None:
    fake, clock = reviewer(), Clock()
    gate = ReviewCache(fake, clock=clock, allowed_ttl=120, denied_ttl=10)
    for token in ("good", "other", "unknown"):
        gate.status(token)
    assert fake.calls == 3
    for _ in range(8):  # a scraper every 15 s for two minutes: no review until the answer is 120 s old
        clock.now += 14
        assert gate.status("good") == 200
    assert fake.calls == 3, "112 s of scrapes, one review"
    assert gate.status("other") == 403 and gate.status("unknown") == 401
    assert fake.calls == 5, "refused answers are kept 10 s only"
    clock.now += 10
    assert gate.status("good") == 200
    assert fake.calls == 6, "past 120 s the allowed token is reviewed again"


def test_a_flood_of_random_tokens_is_bounded_in_memory_and_keeps_the_scrapers_token() -> None:
    fake, clock = reviewer(), Clock()
    gate = ReviewCache(fake, clock=clock, max_allowed=4, max_denied=50, rate=1e9, burst=1e9)
    assert gate.status("good") == 200
    for i in range(2000):
        assert gate.status(f"random{i}") == 401
    assert gate.sizes() == (1, 50)
    calls = fake.calls
    assert gate.status("good") == 200 and fake.calls == calls, "a flood of refused tokens evicts no allowed one"


def test_allowed_tokens_are_bounded_too() -> None:
    fake = FakeReviewer(users={f"t{i}": User(f"u{i}") for i in range(20)}, allowed={f"u{i}" for i in range(20)})
    gate = ReviewCache(fake, max_allowed=4, rate=1e9, burst=1e9)
    for i in range(20):
        assert gate.status(f"t{i}") == 200
    assert gate.sizes() == (4, 0)


def test_reviews_past_the_rate_are_429_without_asking() -> None:
    fake, clock = reviewer(), Clock()
    gate = ReviewCache(fake, clock=clock, rate=5, burst=10)
    answers = [gate.status(f"random{i}") for i in range(30)]
    assert answers.count(401) == 10 and answers.count(429) == 20
    assert fake.calls == 10
    clock.now += 1.0
    assert [gate.status(f"later{i}") for i in range(6)].count(401) == 5, "5 a second refill"
    assert gate.status("other") == 429
    clock.now += 0.2
    assert gate.status("good") == 200, "the bucket refills"


def test_a_cached_token_needs_no_rate() -> None:
    fake, clock = reviewer(), Clock()
    gate = ReviewCache(fake, clock=clock, rate=1, burst=1)
    assert gate.status("good") == 200
    assert all(gate.status("good") == 200 for _ in range(100))
    assert fake.calls == 1


def test_a_failed_review_is_503_and_not_cached() -> None:
    fake = reviewer()
    fake.failing = True
    gate = ReviewCache(fake)
    assert gate.status("good") == 503
    fake.failing = False
    assert gate.status("good") == 200
    assert fake.calls == 2


def test_reviews_in_flight_are_bounded() -> None:
    fake = FakeReviewer(users={}, delay=0.2)
    gate = ReviewCache(fake, in_flight=2, rate=1e9, burst=1e9, wait=0.05)
    answers: list[int] = []
    threads = [threading.Thread(target=lambda i=i: answers.append(gate.status(f"x{i}"))) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.most_concurrent == 2
    assert answers.count(401) == 2 and answers.count(429) == 6


# ---------------------------------------------------------------------------------- the listener
@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = MetricsServer(
        ("127.0.0.1", 0),
        lambda: b"# TYPE extender_up gauge\nextender_up 1\n",
        ReviewCache(reviewer()),
        self_signed_context(),
        max_connections=2,
        deadline=1.0,
    ).start()
    yield running
    running.stop()


def _client() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the self-signed certificate, as Prometheus' insecureSkipVerify
    return context


def request(port: int, head: str, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout) as raw, _client().wrap_socket(raw) as sock:
        sock.sendall(head.encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    header, _, body = data.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def get(port: int, token: str | None = None, path: str = "/metrics", method: str = "GET") -> tuple[int, dict, bytes]:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return request(port, f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n")


def test_the_listener_answers_by_the_token(server: MetricsServer) -> None:
    status, headers, body = get(server.port, "good")
    assert status == 200 and body == b"# TYPE extender_up gauge\nextender_up 1\n"
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    status, headers, _ = get(server.port)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert get(server.port, "unknown")[0] == 401
    assert get(server.port, "other")[0] == 403
    assert get(server.port, "good", path="/metrics?x=1")[0] == 200


def test_the_listener_serves_nothing_else(server: MetricsServer) -> None:
    assert get(server.port, "good", path="/filter")[0] == 404
    assert get(server.port, "good", path="/healthz")[0] == 404
    assert get(server.port, "good", method="POST")[0] == 405
    assert request(server.port, "NOT HTTP\r\n\r\n")[0] == 400
    assert request(server.port, "GET /metrics HTTP/1.1\r\nX: " + "a" * 20000 + "\r\n\r\n")[0] == 400
    two = "GET /metrics HTTP/1.1\r\nAuthorization: Bearer good\r\nAuthorization: Bearer good\r\n\r\n"
    assert request(server.port, two)[0] == 401, "two Authorization headers: neither is taken"


def test_the_listener_speaks_only_tls(server: MetricsServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), 5) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer good\r\n\r\n")
        try:
            answer = sock.recv(65536)
        except ConnectionResetError:
            answer = b""
        assert b"extender_up" not in answer


def test_connections_are_bounded_in_number_and_time(server: MetricsServer) -> None:
    """Two slots taken by silent clients: a third waits in the backlog until their deadline (1 s)
    closes them, then is served; the silent ones are closed, not kept."""
    silent = [socket.create_connection(("127.0.0.1", server.port), 5) for _ in range(2)]
    try:
        time.sleep(0.2)
        started = time.monotonic()
        assert get(server.port, "good")[0] == 200
        waited = time.monotonic() - started
        assert 0.5 < waited < 4, waited
        for sock in silent:
            sock.settimeout(2)
            assert sock.recv(100) == b"", "closed at its deadline"
    finally:
        for sock in silent:
            sock.close()


def test_the_install_certificate_is_served_and_reread(tmp_path) -> None:  # noqa: ANN001
    from cryptography import x509

    from extender.devcluster.pki import PKI

    pki = PKI(tmp_path / "ca")
    pki.create()
    first = pki.server("one", ["one.example"])
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first.cert.read_bytes())
    key.write_bytes(first.key.read_bytes())
    current = file_context(str(cert), str(key))
    running = MetricsServer(("127.0.0.1", 0), lambda: b"", ReviewCache(reviewer()), current).start()
    try:

        def served() -> str:
            with socket.create_connection(("127.0.0.1", running.port), 5) as raw:
                with _client().wrap_socket(raw) as sock:
                    der = sock.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der).subject.rfc4514_string()

        assert "one" in served()
        second = pki.server("two", ["two.example"])
        time.sleep(0.01)
        cert.write_bytes(second.cert.read_bytes())
        key.write_bytes(second.key.read_bytes())
        import os

        os.utime(cert, (time.time() + 5, time.time() + 5))
        assert "two" in served()
    finally:
        running.stop()


def test_new_connections_are_accepted_at_a_bounded_rate() -> None:
    """At 10 a second, 15 connections one after another take about a second past the burst: the
    rest waited in the kernel's backlog, not in this process."""
    running = MetricsServer(
        ("127.0.0.1", 0), lambda: b"", ReviewCache(reviewer()), self_signed_context(), accept_rate=10
    ).start()
    try:
        started = time.monotonic()
        for _ in range(15):
            assert get(running.port, "good")[0] == 200
        took = time.monotonic() - started
        assert 0.8 < took < 3.0, took
    finally:
        running.stop()


def test_every_answer_is_counted_by_its_status() -> None:
    counted: list[int] = []
    running = MetricsServer(
        ("127.0.0.1", 0), lambda: b"", ReviewCache(reviewer()), self_signed_context(), count=counted.append
    ).start()
    try:
        assert [get(running.port, t)[0] for t in ("good", "other", None)] == [200, 403, 401]
        assert get(running.port, "good", path="/x")[0] == 404
        assert counted == [200, 403, 401, 404]
    finally:
        running.stop()


def test_a_flood_cannot_lock_out_a_scraper_whose_answer_expired() -> None:
    """New tokens take all of the review rate; a token allowed before is reviewed again anyway
    once its answer expires, and one that lost its permission is then refused like any other."""
    fake, clock = reviewer(), Clock()
    gate = ReviewCache(fake, clock=clock, rate=1, burst=1, allowed_ttl=120)
    assert gate.status("good") == 200
    clock.now += 121
    assert gate.status("random0") == 401
    assert gate.status("random1") == 429, "the rate is spent"
    assert gate.status("good") == 200, "renewed outside the rate"
    assert fake.calls == 2 + 1
    clock.now += 121
    fake.allowed.clear()  # its binding removed
    assert gate.status("good") == 403
    assert gate.sizes() == (0, 2)
    clock.now += 11  # the refusal expired: it is a token like any other now, reviewed at the rate
    assert gate.status("good") == 403
    assert gate.status("random2") == 429

"""The connection worker (extender/server/worker.py) under a real gunicorn master, over sockets.

Each case sends raw bytes and reads what comes back: the answer's status, and whether the worker
kept the connection. The fuzz test holds the promise that whatever arrives, the worker answers or
closes, and keeps serving.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.server.worker import HEALTH_LISTEN_ENV, MAX_HEAD_BYTES

pytestmark = pytest.mark.alone("bounds the worker's exits and timeouts in wall-clock seconds")

TESTS = Path(__file__).parent.parent
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start(
    threads: int,
    idle_timeout: float = 30.0,
    health_port: int | None = None,
    spare_wait: float = 30.0,
    standby: bool = False,
) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(TESTS), TEST_IDLE_TIMEOUT=str(idle_timeout), TEST_SPARE_WAIT=str(spare_wait))
    if standby:
        env["TEST_STANDBY"] = "1"
    command = [sys.executable, "-m", "gunicorn", "-k", "extender.server.worker.ConnectionWorker"]
    command += ["--threads", str(threads), "-b", f"127.0.0.1:{port}", "--graceful-timeout", "3"]
    if health_port is not None:  # as serve --health-listen sets it up
        command += ["-b", f"127.0.0.1:{health_port}"]
        env[HEALTH_LISTEN_ENV] = f"127.0.0.1:{health_port}"
    command += ["--no-control-socket", "worker_app:app"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with _connect(port) as sock:
                sock.sendall(HEALTHZ)
                if _read(sock).startswith(b"HTTP/1.1 200"):
                    return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"gunicorn did not start: {process.stderr.read().decode() if process.stderr else ''}")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def server():
    process, port = _start(threads=4)
    yield port
    _stop(process)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(5)
    return sock


def _read(sock: socket.socket) -> bytes:
    """One answer (head and Content-Length bytes of body), b"" if the worker closed first."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            length = re.search(rb"\r\nContent-Length: (\d+)", head)
            if length and len(body) >= int(length.group(1)):
                return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _status(answer: bytes) -> int:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    assert match, answer[:200]
    return int(match.group(1))


CASES = [
    # name, bytes sent, status, connection kept
    ("keep-alive by default", HEALTHZ, 200, True),
    ("client asks to close", b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, False),
    ("HTTP/1.0 closes", b"GET /healthz HTTP/1.0\r\n\r\n", 200, False),
    ("verb with a bad body", b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 400, True),
    (
        "chunked body is read whole",
        b"POST /bind HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        400,
        True,
    ),
    ("wrong method on a verb", b"GET /filter HTTP/1.1\r\nHost: x\r\n\r\n", 405, True),
    ("unknown path", b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, True),
    ("not HTTP", b"HELLO THERE\r\n\r\n", 400, False),
    ("upgrade refused", b"GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n", 400, False),
    (
        "body over --max-body, never read",
        b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n",
        413,
        False,
    ),
    (
        "chunked body growing over --max-body",
        b"POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1400\r\n" + b" " * 5120 + b"\r\n",
        413,
        False,
    ),
    ("head too large", b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n", 431, False),
]


@pytest.mark.parametrize("sent,status,kept", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_request_gets_its_answer_and_the_connection_its_fate(server, sent, status, kept) -> None:
    with _connect(server) as sock:
        sock.sendall(sent)
        answer = _read(sock)
        assert _status(answer) == status, answer[:300]
        assert answer.split(b"\r\n\r\n", 1)[0].count(b"Content-Type: application/json") == 1
        if kept:
            sock.sendall(HEALTHZ)
            assert _status(_read(sock)) == 200
        else:
            assert _closed(sock)


def test_pipelined_requests_are_answered_in_order(server) -> None:
    with _connect(server) as sock:
        sock.sendall(HEALTHZ + b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + HEALTHZ)
        data = b""
        while data.count(b"HTTP/1.1 ") < 3 or not data.endswith(b"}\n"):
            data += sock.recv(65536)
        assert [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)] == [200, 404, 200]


def test_a_request_that_stops_arriving_gets_408_after_the_read_timeout(server) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        started = time.monotonic()
        assert _status(_read(sock)) == 408
        assert time.monotonic() - started < 4  # the test app's read timeout is 1 s
        assert _closed(sock)


def test_head_answers_carry_no_body(server) -> None:
    with _connect(server) as sock:
        sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + HEALTHZ)
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}\n"):
            data += sock.recv(65536)
        first, second = data.split(b"HTTP/1.1 200")[1:]
        assert first.endswith(b"\r\n\r\n") and b'"ok"' in second


def test_when_every_slot_is_taken_the_longest_idle_connection_makes_room() -> None:
    process, port = _start(threads=2)
    try:
        # Each connected and answered in turn (so the worker releases them in this order), then idle.
        oldest = _connect(port)
        oldest.sendall(HEALTHZ)
        assert _status(_read(oldest)) == 200
        time.sleep(0.1)
        newer = _connect(port)
        newer.sendall(HEALTHZ)
        assert _status(_read(newer)) == 200
        time.sleep(0.1)
        with _connect(port) as third:
            third.sendall(HEALTHZ)
            assert _status(_read(third)) == 200
        assert _closed(oldest)
        newer.sendall(HEALTHZ)
        assert _status(_read(newer)) == 200
    finally:
        _stop(process)


def test_a_connection_is_never_closed_to_make_room_before_its_first_request() -> None:
    """Two connections accepted and silent (as a probe is between connecting and asking), every slot
    taken: a third waits in the backlog instead of evicting one of them; each is answered, and the
    third then makes room by closing the one idle the longest (under a flood a just-accepted probe was
    evicted before its request was read)."""
    process, port = _start(threads=2)
    try:
        first, second = _connect(port), _connect(port)
        time.sleep(0.2)  # both accepted: every slot taken
        third = _connect(port)
        third.sendall(HEALTHZ)
        time.sleep(0.3)
        for sock in (first, second):
            sock.sendall(HEALTHZ)
            assert _status(_read(sock)) == 200
            # The answer is sent before its thread marks the connection idle: without a pause the
            # second could be marked first, be the one idle the longest and be closed instead.
            time.sleep(0.2)
        assert _status(_read(third)) == 200
        assert _closed(first)
        third.close()
        second.close()
    finally:
        _stop(process)


@pytest.mark.parametrize("keep_alive", [False, True], ids=["a-connection-a-request", "kept-alive"])
def test_probes_on_fresh_connections_are_answered_through_a_flood(keep_alive: bool) -> None:
    """16 clients against 4 slots, each sending request after request on a new connection each
    time or on one kept alive; a probe connecting anew every 50 ms: every probe gets its 200
    within its 5 s timeout (kept alive, the flood's connections take turns with the backlog: one
    going idle makes room for the next waiting)."""
    import threading

    process, port = _start(threads=4)
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            try:
                with _connect(port) as sock:
                    while not stop.is_set():
                        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                        if not _read(sock) or not keep_alive:
                            break
            except OSError:
                pass

    flooders = [threading.Thread(target=flood, daemon=True) for _ in range(16)]
    try:
        for thread in flooders:
            thread.start()
        answers = []
        for _ in range(40):
            try:
                with _connect(port) as probe:
                    probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                    answer = _read(probe)
                    answers.append(_status(answer) if answer else "closed")
            except OSError as err:
                answers.append(type(err).__name__)
            time.sleep(0.05)
        assert answers == [200] * 40, answers
    finally:
        stop.set()
        for thread in flooders:
            thread.join(10)
        _stop(process)


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        (b"GET /healthz", 200),
        (b"GET /readyz", 200),
        (b"HEAD /healthz", 200),
        (b"POST /filter", 404),  # the verbs are never on the health listener
        (b"POST /bind", 404),
        (b"GET /metrics", 404),
        (b"GET /healthz/../bind", 404),
    ],
)
def test_the_health_listener_answers_health_only_even_when_every_slot_is_taken(request_line, status) -> None:
    health = _free_port()
    process, port = _start(threads=1, health_port=health)
    try:
        with _connect(port) as busy:
            busy.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")  # under way
            time.sleep(0.2)
            with _connect(health) as probe:
                probe.sendall(request_line + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                assert _status(_read(probe)) == status
    finally:
        _stop(process)


def test_idle_connections_are_closed_after_the_idle_timeout() -> None:
    process, port = _start(threads=2, idle_timeout=0.5)
    try:
        with _connect(port) as sock:
            sock.sendall(HEALTHZ)
            assert _status(_read(sock)) == 200
            assert _closed(sock)  # within the socket's 5 s timeout
    finally:
        _stop(process)


def _worker_threads(master: subprocess.Popen) -> int:
    """The threads of the master's one worker process."""
    (pid,) = subprocess.run(["pgrep", "-P", str(master.pid)], capture_output=True, text=True).stdout.split()
    return len(os.listdir(f"/proc/{pid}/task"))


def _settled(read, want: int, within: float = 5.0) -> int:  # noqa: ANN001
    deadline = time.monotonic() + within
    while (now := read()) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def test_a_closed_connections_thread_serves_the_next_and_an_unused_one_ends() -> None:
    """kube-scheduler opens and closes a connection per parallel bind: the threads that served
    closed connections serve the next ones (no thread started per connection), and a spare that
    no connection needs ends after SPARE_WAIT."""
    process, port = _start(threads=8, spare_wait=1.0)
    try:
        time.sleep(1.5)  # the thread that served _start's probe has waited out its SPARE_WAIT
        base = _worker_threads(process)
        for _ in range(3):  # three rounds of three parallel connections, each closed after its answer
            socks = [_connect(port) for _ in range(3)]
            for sock in socks:
                sock.sendall(HEALTHZ)
            assert all(_status(_read(sock)) == 200 for sock in socks)
            assert _worker_threads(process) == base + 3
            for sock in socks:
                sock.close()
            assert _settled(lambda: _worker_threads(process), base + 3, within=0.5) == base + 3  # kept as spares
        assert _settled(lambda: _worker_threads(process), base) == base  # unused for SPARE_WAIT: ended
    finally:
        _stop(process)


def test_sigterm_stops_the_worker_promptly_with_idle_connections_open() -> None:
    process, port = _start(threads=4)
    idle = _connect(port)
    idle.sendall(HEALTHZ)
    assert _status(_read(idle)) == 200
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.wait(15)
    assert time.monotonic() - started < 3  # the graceful timeout (3 s) never needed
    assert _closed(idle)
    idle.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=300),
        st.builds(
            lambda line, rest: line + rest,
            st.sampled_from([b"POST /filter HTTP/1.1\r\n", b"GET /healthz HTTP/1.1\r\n", b"POST /bind HTTP/1.0\r\n"]),
            st.binary(max_size=300),
        ),
    )
)
def test_any_bytes_are_answered_or_closed_and_the_worker_keeps_serving(server, sent: bytes) -> None:
    with _connect(server) as sock:
        sock.sendall(sent)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
        for answer in re.findall(rb"HTTP/1\.1 (\d{3}) ", data):
            assert int(answer) < 500, data[:300]
    with _connect(server) as sock:
        sock.sendall(HEALTHZ)
        assert _status(_read(sock)) == 200


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _gone(pid: int) -> bool:
    """The process has exited (a zombie awaiting its reaper counts as gone: it serves nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_the_worker_exits_when_its_master_is_killed() -> None:
    """SIGKILL of the gunicorn master (no chance to stop its worker): the worker notices its
    parent died (the kernel signals it) and exits within a second, so the container's main process is gone and
    the kubelet restarts it, instead of an orphan serving on with no master's heartbeat."""
    process, port = _start(threads=4)
    try:
        workers = _children(process.pid)
        assert len(workers) == 1, workers
        worker_pid = workers[0]
        idle = _connect(port)  # an open connection must not keep the orphan alive
        idle.sendall(HEALTHZ)
        assert _status(_read(idle)) == 200
        killed = time.monotonic()
        process.send_signal(signal.SIGKILL)
        process.wait(5)
        while not _gone(worker_pid) and time.monotonic() - killed < 10:
            time.sleep(0.05)
        took = time.monotonic() - killed
        print(f"orphaned worker exited {took * 1000:.0f} ms after its master was killed")
        assert _gone(worker_pid), "the orphaned worker still runs 10 s after its master was killed"
        assert took < 1, f"the orphaned worker took {took:.1f}s to exit (docs: failure modes, within a second)"
        idle.close()
    finally:
        for pid in _children(process.pid):
            os.kill(pid, signal.SIGKILL)
        _stop(process)


@pytest.mark.parametrize("verb", ["/filter", "/bind"])
def test_a_standby_refuses_and_closes_so_the_next_connection_reaches_the_active_one(verb: str) -> None:
    """kube-scheduler keeps connections alive, and a Service that moves to the new active replica
    moves only new connections: a standby that kept the connection would see every retry."""
    process, port = _start(threads=4, standby=True)
    try:
        body = (
            b'{"PodName":"a","PodNamespace":"b","PodUID":"u","Node":"n"}'
            if verb == "/bind"
            else b'{"Pod":{"metadata":{"name":"a","namespace":"b","uid":"u"}},"NodeNames":["n"]}'
        )
        request = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (verb.encode(), len(body), body)
        with _connect(port) as sock:
            sock.sendall(request)
            answer = _read(sock)
            assert _status(answer) == 200, answer
            assert b"on standby" in answer and b"Connection: close" in answer, answer
            assert _closed(sock)
        with _connect(port) as sock:  # the health listener's and other paths keep theirs
            sock.sendall(HEALTHZ)
            assert _status(_read(sock)) == 200
            sock.sendall(HEALTHZ)
            assert _status(_read(sock)) == 200
    finally:
        _stop(process)

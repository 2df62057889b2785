"""What the watcher asks of the API server (parameters of every list and watch, also after a 410),
and how it decodes the answers: watch lines across any chunking, orjson with the standard
library's results. Requests are recorded by a fake KubeHttp; the real API server's answers are
exercised by the e2e tests (and were by the benchmark kind watch_cost, retired after 94a233e)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from extender.kube.client import KubeHttp, decode_json
from extender.state.store import ClusterStore
from extender.state.watcher import Resource, Watcher, _lines

from builders import node

NODES = "/api/v1/nodes"


class Chunks:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    def iter_content(self, chunk_size=None):
        assert chunk_size is None  # whatever the server flushed, as it arrives
        return iter(self.chunks)

    def close(self) -> None:
        self.closed = True


def stream(events: list[dict[str, Any]]) -> Chunks:
    return Chunks([json.dumps(e).encode() + b"\n" for e in events])


class RecordingApi:
    """A KubeHttp stand-in answering from a script, recording (path, query, stream) of each call."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, list[tuple[str, str]], bool]] = []
        self.done = threading.Event()

    def call(self, method, path, *, query=None, timeout=None, stream=False, body=None):
        assert method == "GET" and body is None
        self.calls.append((path, list(query or []), stream))
        if not self.answers:
            self.done.set()
            raise ConnectionError("script over")
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def page(items, rv="10", cont=""):
    return {"metadata": {"resourceVersion": rv, "continue": cont}, "items": items}


def with_rv(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    return obj | {"metadata": {**obj["metadata"], "resourceVersion": rv}}


def run_until_script_ends(api: RecordingApi) -> tuple[Watcher, ClusterStore]:
    store = ClusterStore()
    watcher = Watcher(api, store)  # type: ignore[arg-type]
    thread = threading.Thread(target=watcher._run, args=(Resource("nodes", NODES),), daemon=True)
    thread.start()
    assert api.done.wait(10)
    watcher.stop()
    thread.join(5)
    return watcher, store


# ------------------------------------------------------------------------------ the requests
def test_list_is_consistent_and_paged_watch_resumes_with_bookmarks_and_410_relists_consistently() -> None:
    api = RecordingApi(
        [
            page([node("a", "z1")], rv="10", cont="tok"),
            page([node("b", "z1")], rv="11"),
            stream([{"type": "ADDED", "object": with_rv(node("c", "z1"), "12")}]),  # ends: resume
            stream(
                [
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
                    {"type": "ERROR", "object": {"code": 410, "message": "too old"}},
                ]
            ),
            page([node("x", "z2")], rv="30"),  # the relist after 410
        ]
    )
    watcher, store = run_until_script_ends(api)
    calls = api.calls
    first, second, watch1, watch2, relist, watch3 = calls[:6]

    assert first == (NODES, [("limit", "500")], False)  # no resourceVersion: a consistent read
    assert second == (NODES, [("limit", "500"), ("continue", "tok")], False)
    for call, version in ((watch1, "11"), (watch2, "12"), (watch3, "30")):
        path, query, streamed = call
        assert path == NODES and streamed
        assert dict(query) == {
            "watch": "1",
            "resourceVersion": version,  # the list's, then the last event's, then the relist's
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "300",
        }
    # After 410 Gone: again a consistent list, never resourceVersion "0" (which may be older
    # than what the expired watch had shown) and no resourceVersionMatch.
    assert relist == (NODES, [("limit", "500")], False)
    for _, query, _ in calls:
        keys = dict(query)
        assert keys.get("resourceVersion") != "0"
        assert "resourceVersionMatch" not in keys and "sendInitialEvents" not in keys
        assert "fieldSelector" not in keys and "labelSelector" not in keys
    assert sorted(store.topology.nodes) == ["x"] and watcher.relists["nodes"] >= 1


def test_page_size_is_the_limit_asked_for() -> None:
    api = RecordingApi([page([node("a", "z1")])])
    store = ClusterStore()
    Watcher(api, store, page_size=123)._list(Resource("nodes", NODES))  # type: ignore[arg-type]
    assert api.calls == [(NODES, [("limit", "123")], False)]


# ------------------------------------------------------------------------------ watch lines
EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": f"n{i}", "resourceVersion": str(i)}, "x": "é" * i}}
    for i in range(12)
]
BODY = b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in EVENTS)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, len(BODY)])
def test_lines_are_the_same_events_whatever_the_chunking(size: int) -> None:
    chunks = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    assert list(_lines(Chunks(chunks))) == EVENTS


def test_lines_skip_blank_lines_and_read_a_last_line_without_newline() -> None:
    chunks = [b"\n", b'{"a": 1}\n\n  \n{"b"', b": 2}\r\n", b'{"c": [1,', b" 2]}"]
    assert list(_lines(Chunks(chunks))) == [{"a": 1}, {"b": 2}, {"c": [1, 2]}]
    assert list(_lines(Chunks([]))) == [] and list(_lines(Chunks([b"", b"  "]))) == []


def test_a_backlog_in_one_chunk_is_every_event_in_order() -> None:
    many = [{"type": "MODIFIED", "object": {"metadata": {"name": f"p{i}"}}} for i in range(20_000)]
    body = b"".join(json.dumps(e).encode() + b"\n" for e in many)
    assert list(_lines(Chunks([body[:-1], body[-1:]]))) == many


@given(st.binary(max_size=60), st.lists(st.integers(1, 40), max_size=8))
def test_lines_split_like_the_shipped_reader(noise: bytes, cuts: list[int]) -> None:
    """Any bytes, any chunking: the same lines as splitting the whole body at b"\\n" (decoding
    aside: lines here are compared before JSON)."""
    body = noise.replace(b"\n", b"") + b'\n{"k": 1}\n' + noise
    chunks, at = [], 0
    for cut in cuts:
        chunks.append(body[at : at + cut])
        at += cut
    chunks.append(body[at:])
    seen: list[bytes] = []
    import extender.state.watcher as w

    original = w.decode_json
    w.decode_json = lambda line: seen.append(bytes(line)) or {}  # type: ignore[assignment]
    try:
        list(_lines(Chunks(chunks)))
    finally:
        w.decode_json = original
    assert seen == [line for line in body.split(b"\n") if line.strip()]


# ------------------------------------------------------------------------------ decoding
@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": [true, null, 1.5e3, "x\\u00e9"], "c": {}}',
        '{"huge": 1e400}',  # beyond a double: orjson refuses it
        '{"lone": "\\ud800"}',  # a lone surrogate escape: orjson refuses it
        '{"nan": NaN, "inf": -Infinity}',
        '"\\u2028"',
    ],
)
def test_decode_json_reads_what_the_standard_library_reads(text: str) -> None:
    got, want = decode_json(text.encode()), json.loads(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_an_integer_beyond_64_bits_is_the_one_difference_and_the_api_server_sends_it_as_a_float() -> None:
    """The API server decodes into Go's int64/float64 and encodes back: 10**30 reaches us as
    1e+30 (a float for both decoders). Only a literal no API server writes differs."""
    assert decode_json(b"1e+30") == json.loads(b"1e+30") == 1e30
    assert decode_json(b"9223372036854775807") == 2**63 - 1 and decode_json(b"-9223372036854775808") == -(2**63)
    assert decode_json(b"123456789012345678901234567890") == pytest.approx(1.2345678901234568e29)


def test_decode_json_still_refuses_what_the_standard_library_refuses() -> None:
    with pytest.raises(ValueError):
        decode_json(b'{"a": ')


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)  # what Go's int64 can write
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_decode_json_equals_the_standard_library(value: Any) -> None:
    data = json.dumps(value).encode()
    assert decode_json(data) == json.loads(data)


class FakeResponse:
    def __init__(self, status: int, content: bytes) -> None:
        self.status_code = status
        self.content = content
        self.reason = "OK"

    def close(self) -> None:
        pass


class FakeSession:
    def __init__(self, response: FakeResponse) -> None:
        self.response = response
        self.requests: list[dict[str, Any]] = []

    def request(self, method, url, **kwargs):
        self.requests.append({"method": method, "url": url, **kwargs})
        return self.response


def test_kubehttp_decodes_with_decode_json_and_asks_for_json() -> None:
    cfg = client.Configuration()
    cfg.host = "https://api.example:6443"
    api = KubeHttp(cfg)
    api.session = FakeSession(FakeResponse(200, b'{"items": [], "s": "\\ud800"}'))  # type: ignore[assignment]
    assert api.call("GET", "/api/v1/pods", query=[("limit", "500")]) == {"items": [], "s": "\ud800"}
    sent = api.session.requests[0]  # type: ignore[attr-defined]
    assert sent["url"] == "https://api.example:6443/api/v1/pods" and sent["params"] == [("limit", "500")]
    assert sent["headers"]["Accept"] == "application/json"
    api.session = FakeSession(FakeResponse(200, b""))  # type: ignore[assignment]
    assert api.call("DELETE", "/x") is None

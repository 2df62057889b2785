"""The event sink's dedup table stays bounded and cheap under churn; events reach the API; a
Binding's errors say what the API server knows."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.kube.client import KubeApiError
from extender.server.effects import KubeBinder, KubeEventSink
from extender.server.ports import AlreadyBound, BindError, BindOutcomeUnknown
from extender.state.objects import PodRecord, parse_pod

from builders import pod


class RecordingApi:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict]] = []
        self.done = threading.Event()

    def create(self, path: str, body: dict, timeout: float = 0) -> dict:
        self.created.append((path, body))
        self.done.set()
        return body


def record(name: str, uid: str) -> PodRecord:
    return parse_pod(pod(name, uid=uid))


def test_the_same_event_is_sent_once_per_interval_and_reaches_the_api() -> None:
    api = RecordingApi()
    sink = KubeEventSink(api, interval=600)  # type: ignore[arg-type]
    p = record("r-0", "u0")
    assert sink._first_in_interval((p.uid, "R", "m"), now=0.0)
    assert not sink._first_in_interval((p.uid, "R", "m"), now=599.0)
    assert sink._first_in_interval((p.uid, "R", "other"), now=599.0)
    assert sink._first_in_interval((p.uid, "R", "m"), now=600.0)
    sink.pod_event(p, "PlacementRejected", "no node")
    assert api.done.wait(5)
    path, body = api.created[0]
    assert path == "/api/v1/namespaces/db/events"
    assert body["involvedObject"]["uid"] == "u0" and body["reason"] == "PlacementRejected"


def test_churn_keeps_the_table_within_its_bound_and_drops_expired_keys() -> None:
    sink = KubeEventSink(RecordingApi(), interval=10, remembered=100)  # type: ignore[arg-type]
    for i in range(5_000):  # 5,000 pods, one event each, one a second
        assert sink._first_in_interval((f"u{i}", "R", "m"), now=float(i) / 100)
        assert sink.remembered_keys() <= 100
    # an hour later one event: every older key has expired
    assert sink._first_in_interval(("late", "R", "m"), now=3600.0)
    assert sink.remembered_keys() == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.floats(0, 5)), max_size=200))
def test_the_table_answers_as_a_plain_log_of_sends(steps) -> None:
    """Against a reference that keeps every send: the same answers, while the bound is not hit."""
    interval = 3.0
    sink = KubeEventSink(RecordingApi(), interval=interval, remembered=10_000)  # type: ignore[arg-type]
    last_sent: dict[str, float] = {}
    now = 0.0
    for key, step in steps:
        now += step
        expected = str(key) not in last_sent or now - last_sent[str(key)] >= interval
        assert sink._first_in_interval((str(key), "R", "m"), now) == expected
        if expected:
            last_sent[str(key)] = now
        assert all(now - t < interval for t in sink._sent.values())


class PatchingApi:
    """Answers each PATCH with the next scripted outcome (an exception to raise, or a body)."""

    def __init__(self, *outcomes: object) -> None:
        self.calls: list[tuple[str, str, object, str]] = []
        self.outcomes = list(outcomes)

    def call(self, method: str, path: str, body: object = None, timeout: float = 0, content_type: str = "") -> object:
        self.calls.append((method, path, body, content_type))
        outcome = self.outcomes.pop(0) if self.outcomes else {}
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_a_placeable_lift_is_one_patch_deleting_the_gate_with_the_uid_as_precondition() -> None:
    from extender.api.policy import PLACEABLE_GATE
    from extender.kube.client import KubeApiError
    from extender.server.effects import KubeGateWriter
    from extender.server.gate_answers import GateAnswer

    answer = GateAnswer(record("r-0", "u0"), None, "a place", PLACEABLE_GATE)
    api = PatchingApi({})
    writer = KubeGateWriter(api)  # type: ignore[arg-type]
    writer.lift(answer)
    assert api.calls == [
        (
            "PATCH",
            "/api/v1/namespaces/db/pods/r-0",
            {"metadata": {"uid": "u0"}, "spec": {"schedulingGates": [{"$patch": "delete", "name": PLACEABLE_GATE}]}},
            "application/strategic-merge-patch+json",
        )
    ]
    assert writer.lifted == 1
    # another pod under the name (the API server refuses the uid), or gone: left to the next pass
    for status, message in (
        (422, 'Pod "r-0" is invalid: metadata.uid: Invalid value: "u0": field is immutable'),
        (404, ""),
    ):
        writer = KubeGateWriter(PatchingApi(KubeApiError(status, "Invalid", message)))  # type: ignore[arg-type]
        writer.lift(answer)
        assert writer.lifted == 0


class AnsweringApi:
    """Answers every create with one error, as the API server would."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def create(self, path: str, body: dict, timeout: float = 0) -> dict:
        raise self.error


ASSIGNED = 'Operation cannot be fulfilled on pods/binding "r-0": pod r-0 is already assigned to node "n-7"'


@pytest.mark.parametrize(
    ("error", "kind", "node"),
    [
        (KubeApiError(409, "Conflict", ASSIGNED), AlreadyBound, "n-7"),
        (KubeApiError(409, "Conflict", "the object has been modified"), BindError, None),
        (KubeApiError(404, "NotFound", 'pods "r-0" not found'), BindError, None),
        (TimeoutError("read timed out"), BindOutcomeUnknown, None),
        (ConnectionResetError("reset by peer"), BindOutcomeUnknown, None),
    ],
    ids=["already assigned: the node it has", "another conflict", "gone", "no answer", "cut off"],
)
def test_a_binding_error_says_what_the_api_server_knows(error: Exception, kind: type, node: str | None) -> None:
    """A 409 naming the node the pod has is where the pod is (the extender keeps counting it
    there); no answer at all may have landed; anything else did not."""
    with pytest.raises(BindError) as raised:
        KubeBinder(AnsweringApi(error)).bind("db", "r-0", "u0", "n-1")  # type: ignore[arg-type]
    assert type(raised.value) is kind
    assert getattr(raised.value, "node", None) == node

"""The HTTP layer: every bad input is a 4xx JSON answer naming the problem, never a 500 or a
traceback, and the server keeps serving afterwards."""

from __future__ import annotations

import json

import pytest

from extender.server.app import create_app
from extender.server.verbs import Verbs
from extender.state.store import KINDS, ClusterStore

from builders import HOST, filter_args, node, pod, statefulset
from fakes import RecordedEvents, ShownVerbs

NAMES = ["n1", "n2"]


@pytest.fixture
def store() -> ClusterStore:
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.apply("nodes", "ADDED", node("n1", "a"))
    store.apply("nodes", "ADDED", node("n2", "b"))
    return store


@pytest.fixture
def events() -> RecordedEvents:
    return RecordedEvents()


@pytest.fixture
def client(store: ClusterStore, events: RecordedEvents):
    app = create_app(ShownVerbs(store, binder=None, events=events), max_body=64 * 1024)  # type: ignore[arg-type]
    return app.test_client()


GOOD_POD = pod("web-0", sts="web")

BAD_REQUESTS = [
    ("malformed json", "post", "/filter", b"{not json", 400, "malformed JSON"),
    ("empty body", "post", "/filter", b"", 400, "empty request body"),
    ("json array", "post", "/filter", b"[]", 400, "invalid ExtenderArgs"),
    ("pod not an object", "post", "/filter", json.dumps({"Pod": 3, "NodeNames": NAMES}).encode(), 400, "Pod"),
    ("missing pod", "post", "/filter", json.dumps({"NodeNames": NAMES}).encode(), 400, "Pod: Field required"),
    ("no nodes at all", "post", "/filter", json.dumps({"Pod": GOOD_POD}).encode(), 400, "one of Nodes"),
    (
        "node names wrong type",
        "post",
        "/filter",
        json.dumps({"Pod": GOOD_POD, "NodeNames": "n1"}).encode(),
        400,
        "NodeNames",
    ),
    (
        "pod without name",
        "post",
        "/filter",
        json.dumps({"Pod": {"metadata": {}}, "NodeNames": NAMES}).encode(),
        400,
        "metadata.name",
    ),
    (
        "node without name",
        "post",
        "/filter",
        json.dumps({"Pod": GOOD_POD, "Nodes": {"items": [{"metadata": {}}]}}).encode(),
        400,
        "metadata.name",
    ),
    ("prioritize malformed", "post", "/prioritize", b"\xff\xfe", 400, "malformed JSON"),
    (
        "bind missing node",
        "post",
        "/bind",
        json.dumps({"PodName": "a", "PodNamespace": "b", "PodUID": "c"}).encode(),
        400,
        "Node",
    ),
    (
        "bind empty strings",
        "post",
        "/bind",
        json.dumps({"PodName": "", "PodNamespace": "b", "PodUID": "c", "Node": "n"}).encode(),
        400,
        "PodName",
    ),
    (
        "preempt wrong victims",
        "post",
        "/preempt",
        json.dumps({"Pod": GOOD_POD, "NodeNameToMetaVictims": []}).encode(),
        400,
        "NodeNameToMetaVictims",
    ),
    ("unknown path", "post", "/schedule", b"{}", 404, "no such endpoint"),
    ("wrong method", "get", "/filter", None, 405, "not allowed"),
    ("oversized body", "post", "/filter", b"{" + b" " * (70 * 1024) + b"}", 413, "larger than the limit"),
]


@pytest.mark.parametrize("case,method,path,body,status,message", BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS])
def test_bad_input_is_a_clear_4xx(client, case, method, path, body, status, message) -> None:
    response = getattr(client, method)(path, data=body, content_type="application/json")
    assert response.status_code == status
    payload = response.get_json()
    assert message in payload["error"]
    assert "Traceback" not in response.get_data(as_text=True)
    # ... and the server still serves.
    ok = client.post("/filter", json=filter_args(GOOD_POD, NAMES))
    assert ok.status_code == 200


def test_unexpected_fault_is_a_json_500_without_traceback(store, events) -> None:
    class Broken(Verbs):
        def filter(self, args):
            raise RuntimeError("secret internals")

    client = create_app(Broken(store, binder=None, events=events)).test_client()  # type: ignore[arg-type]
    response = client.post("/filter", json=filter_args(GOOD_POD, NAMES))
    assert response.status_code == 500
    text = response.get_data(as_text=True)
    assert "internal error" in text and "secret internals" not in text and "Traceback" not in text


def test_pod_without_policy_passes_everywhere_with_neutral_scores(client) -> None:
    result = client.post("/filter", json=filter_args(GOOD_POD, NAMES)).get_json()
    assert result == {
        "Nodes": None,
        "NodeNames": NAMES,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    scores = client.post("/prioritize", json=filter_args(GOOD_POD, NAMES)).get_json()
    assert scores == [{"Host": "n1", "Score": 0}, {"Host": "n2", "Score": 0}]


@pytest.mark.parametrize(
    "annotation,fragment",
    [
        ('{"caps": [{"topologyKey": "kubernetes.io/hostname"}]}', "caps.0: a cap takes exactly one of max or fraction"),
        ('{"spread": [{"topologyKey": "zone", "maxSkew": 0}]}', "spread.0.maxSkew"),
        ('{"capz": []}', "capz: Extra inputs are not permitted"),
        ("caps: [unclosed", "not JSON or YAML"),
        ("[1, 2]", "expected a mapping"),
    ],
)
def test_invalid_policy_is_an_error_no_node_can_fix_and_records_an_event(client, events, annotation, fragment) -> None:
    """An Error, not "every node unresolvable": the pod is then SchedulerError, which autoscalers ignore."""
    bad = pod("web-0", sts="web", policy=annotation)
    result = client.post("/filter", json=filter_args(bad, NAMES)).get_json()
    assert (
        not result.get("NodeNames") and not result.get("FailedNodes") and not result.get("FailedAndUnresolvableNodes")
    )
    assert fragment in result["Error"]
    assert events.events and events.events[-1][1] == "InvalidPlacementPolicy" and fragment in events.events[-1][2]


def test_named_policy_missing_is_unresolvable(client) -> None:
    result = client.post("/filter", json=filter_args(pod("web-0", sts="web", policy_name="nope"), NAMES)).get_json()
    assert "PlacementPolicy db/nope not found" in result["Error"]


def test_readyz_waits_for_the_first_sync() -> None:
    store = ClusterStore()
    client = create_app(ShownVerbs(store, binder=None, events=RecordedEvents())).test_client()  # type: ignore[arg-type]
    response = client.get("/readyz")
    assert response.status_code == 503 and "nodes" in response.get_json()["waiting_for"]
    for kind in KINDS:
        store.replace(kind, [])
    assert client.get("/readyz").status_code == 200
    assert client.get("/healthz").status_code == 200


def test_node_list_mode_uses_the_labels_sent(client, store) -> None:
    policy = {"zones": {"allowed": ["a"]}}
    args = {
        "Pod": pod("web-0", sts="web", policy=policy),
        "Nodes": {"metadata": {}, "items": [node("x1", "a"), node("x2", "b")]},
    }
    result = client.post("/filter", json=args).get_json()
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["x1"]
    assert result["FailedAndUnresolvableNodes"] == {}  # a node passed: kube-scheduler reads no reason
    args["Nodes"]["items"] = [node("x2", "b")]
    result = client.post("/filter", json=args).get_json()
    assert result["Nodes"]["items"] == []
    assert "zone b is not among the allowed zones" in result["FailedAndUnresolvableNodes"]["x2"]


def test_statefulset_group_size_comes_from_replicas(client, store) -> None:
    store.apply("statefulsets", "ADDED", statefulset("web", 6))
    policy = {"caps": [{"topologyKey": HOST, "fraction": "1/3", "comparison": "LessThan"}]}
    store.apply("pods", "ADDED", pod("web-1", sts="web", node_name="n1", policy=policy))
    result = client.post("/filter", json=filter_args(pod("web-0", sts="web", policy=policy), NAMES)).get_json()
    assert result["NodeNames"] == ["n2"]
    result = client.post("/filter", json=filter_args(pod("web-0", sts="web", policy=policy), ["n1"])).get_json()
    assert "cap (fewer than 1/3 of 6 per kubernetes.io/hostname) allows 1" in result["FailedNodes"]["n1"]

"""No decision from a partial cache: before every kind's first list has completed, and
after a lost watch until its relist has, filter, prioritize, bind and preempt place nothing.

The table drives the verbs over a real store in each cache state; the last test is the window
itself, deterministic: a real Watcher and the Flask app against a fake API server (plain HTTP on
loopback) that answers every list at once but holds the pod list back, with a filter and a bind
sent inside the window. The e2e scenario (tests/e2e/test_extender_restart.py) is the same moment
under the real kube-scheduler, where luck can hide it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from extender.api.wire import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs
from extender.kube.client import KubeHttp
from extender.server.app import create_app
from extender.server.verbs import Verbs
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore
from extender.state.watcher import RESOURCES, Watcher

from builders import HOST, filter_args, node, pod, statefulset
from fakes import RecordedEvents

CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}


class RecordingBinder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append((f"{namespace}/{name}", node))


def synced_store(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> ClusterStore:
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
    for kind in KINDS:
        store.replace(kind, {"nodes": nodes, "pods": pods, "statefulsets": [statefulset("r", 3)]}.get(kind, []))
    return store


NODES = [node("n1", "a"), node("n2", "a")]
RUNNING = pod("r-0", sts="r", node_name="n1", policy=CAP1, uid="u-r0")
NEXT = pod("r-1", sts="r", policy=CAP1, uid="u-r1")


def never_listed_pods(store: ClusterStore) -> None:
    fresh = ClusterStore(store.reservations)
    for kind in KINDS:
        if kind != "pods":
            fresh.replace_records(kind, [])
    store.__dict__.update(fresh.__dict__)
    store.replace("nodes", NODES)


def pod_watch_lost(store: ClusterStore) -> None:
    store.connection_lost("pods", "connection reset by peer")


def claim_watch_gone(store: ClusterStore) -> None:
    store.connection_lost("claims", "410 Gone")


def relisted_after_loss(store: ClusterStore) -> None:
    store.connection_lost("pods", "connection reset by peer")
    store.replace("pods", [RUNNING, NEXT])


def standby_replica(store: ClusterStore) -> None:
    """Synced, but another replica holds the Lease (extender/server/leader.py)."""
    store.standby = lambda: "this placement extender replica (r1_x) is on standby: the active replica decides"


# (state, how to reach it from a synced store, the words the refusal must carry; None: decides)
STATES: list[tuple[str, Callable[[ClusterStore], None], tuple[str, ...] | None]] = [
    ("synced", lambda s: None, None),
    ("first pod list not completed", never_listed_pods, ("first list of pods", "not synced")),
    ("pod watch lost, relist pending", pod_watch_lost, ("watch of pods was lost", "connection reset by peer")),
    ("claim watch 410, relist pending", claim_watch_gone, ("watch of claims was lost", "410 Gone")),
    ("relisted after a lost watch", relisted_after_loss, None),
    ("a synced standby of two replicas", standby_replica, ("on standby", "the active replica decides")),
]


@pytest.mark.parametrize(("state", "reach", "words"), STATES, ids=[s[0] for s in STATES])
def test_each_verb_decides_only_from_a_synced_cache(state, reach, words) -> None:
    store = synced_store(NODES, [RUNNING, NEXT])
    reach(store)
    binder = RecordingBinder()
    verbs = Verbs(store, binder, RecordedEvents())
    filtered = verbs.filter(ExtenderArgs.model_validate(filter_args(NEXT, ["n1", "n2"])))
    scores = verbs.prioritize(ExtenderArgs.model_validate(filter_args(NEXT, ["n1", "n2"]))).scores
    # n1 already holds r-0: a bind there breaks the cap, and only a complete cache knows it
    bound = verbs.bind(ExtenderBindingArgs(PodName="r-1", PodNamespace="db", PodUID="u-r1", Node="n1"))
    preempted = verbs.preempt(
        ExtenderPreemptionArgs.model_validate(
            {"Pod": NEXT, "NodeNameToMetaVictims": {"n2": {"Pods": [], "NumPDBViolations": 0}}}
        )
    )
    if words is None:
        assert filtered.Error == "" and filtered.NodeNames == ["n2"]
        assert scores["n2"] >= 0
        assert "refused to bind to n1" in bound.Error
        assert list(preempted.NodeNameToMetaVictims) == ["n2"]
        return
    for word in words:
        assert word in filtered.Error, filtered.Error
        assert word in bound.Error, bound.Error
    assert "kube-scheduler will retry" in filtered.Error
    assert filtered.NodeNames is None and filtered.Nodes is None  # an Error, not a verdict
    assert set(scores.values()) == {0}
    assert binder.calls == []
    assert preempted.NodeNameToMetaVictims == {}
    assert len(store.reservations) == 0  # nothing held for a decision never made
    assert verbs.metrics.pod_decisions.value(result="not_synced") == 1
    assert verbs.metrics.binds.value(result="not_synced") == 1


def test_a_reservation_from_before_the_restart_cannot_exist_and_bind_waits_for_the_list() -> None:
    """The old failure: a restarted extender's bind re-check counted an empty cache. Now the
    bind waits for the pod list, then refuses the node the list shows taken."""
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
    for kind in KINDS:
        if kind != "pods":
            store.replace(kind, {"nodes": NODES, "statefulsets": [statefulset("r", 3)]}.get(kind, []))
    binder = RecordingBinder()
    verbs = Verbs(store, binder, RecordedEvents())
    args = ExtenderBindingArgs(PodName="r-1", PodNamespace="db", PodUID="u-r1", Node="n1")
    assert "first list of pods" in verbs.bind(args).Error
    store.replace("pods", [RUNNING, NEXT])
    assert "refused to bind to n1" in verbs.bind(args).Error
    assert binder.calls == []


# ------------------------------------------------------------------ the window, deterministic


class FakeApiServer:
    """Plain HTTP on loopback: lists answer at once from `objects`, except the paths in `held`,
    which wait until released; watches stream nothing and end at their timeout (or at stop)."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]], held: set[str]) -> None:
        self.objects = objects
        self.released = {path: threading.Event() for path in held}
        self.stopping = threading.Event()
        self.lists: list[tuple[float, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                if "watch" in query:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    fake.stopping.wait(float(query.get("timeoutSeconds", ["5"])[0]))
                    self.wfile.write(b"0\r\n\r\n")
                    return
                if url.path in fake.released:
                    fake.released[url.path].wait(30)
                fake.lists.append((time.monotonic(), url.path))
                body = json.dumps(
                    {"kind": "List", "metadata": {"resourceVersion": "7"}, "items": fake.objects.get(url.path, [])}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        for event in self.released.values():
            event.set()
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def wait_until(what: str, check: Callable[[], bool], timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_filter_and_a_bind_inside_the_first_pod_list_place_nothing() -> None:
    """The restart window (a restarted extender placed 6-20 pairs against their cap), made to happen
    every time: the pod list is held back while
    nodes, StatefulSets, claims, volumes and policies list at once; kube-scheduler's filter and
    bind for a pod arrive meanwhile (as they do from a kube-scheduler that kept running). n1
    already holds a pod of the group under a per-node cap of 1, so a decision from the partial
    cache would have bound the pod there."""
    paths = {r.kind: r.path for r in RESOURCES}
    objects = {
        paths["nodes"]: NODES,
        paths["pods"]: [RUNNING, NEXT],
        paths["statefulsets"]: [statefulset("r", 3)],
    }
    with FakeApiServer(objects, held={paths["pods"]}) as api_server:
        api = KubeHttp(client.Configuration(host=api_server.url))
        store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
        binder = RecordingBinder()
        verbs = Verbs(store, binder, RecordedEvents())
        app = create_app(verbs).test_client()
        watcher = Watcher(api, store, watch_timeout=1)
        watcher.start()
        try:
            wait_until("every list but pods", lambda: all(store.listed[k] for k in KINDS if k != "pods"))
            assert not store.listed["pods"] and store.topology.nodes  # inside the window

            filtered = app.post("/filter", data=json.dumps(filter_args(NEXT, ["n1", "n2"]))).get_json()
            bound = app.post(
                "/bind", data=json.dumps({"PodName": "r-1", "PodNamespace": "db", "PodUID": "u-r1", "Node": "n1"})
            ).get_json()
            ready = app.get("/readyz")
            assert "first list of pods has not completed" in filtered["Error"]
            assert not filtered.get("NodeNames")
            assert "first list of pods has not completed" in bound["Error"]
            assert binder.calls == [] and len(store.reservations) == 0
            assert ready.status_code == 503 and ready.get_json()["waiting_for"] == ["pods"]

            api_server.released[paths["pods"]].set()
            wait_until("the pod list", lambda: store.not_synced() is None)
            filtered = app.post("/filter", data=json.dumps(filter_args(NEXT, ["n1", "n2"]))).get_json()
            bound = app.post(
                "/bind", data=json.dumps({"PodName": "r-1", "PodNamespace": "db", "PodUID": "u-r1", "Node": "n1"})
            ).get_json()
            assert filtered["Error"] == "" and filtered["NodeNames"] == ["n2"]
            assert "refused to bind to n1" in bound["Error"] and "allows 1" in bound["Error"]
            assert binder.calls == []
            bound = app.post(
                "/bind", data=json.dumps({"PodName": "r-1", "PodNamespace": "db", "PodUID": "u-r1", "Node": "n2"})
            ).get_json()
            assert bound["Error"] == "" and binder.calls == [("db/r-1", "n2")]
        finally:
            watcher.stop()

"""The watcher's list/watch loop against a scripted API: pagination, events, bookmarks, 410 Gone."""

from __future__ import annotations

import json
import threading

from extender.kube.client import KubeApiError
from extender.state.store import ClusterStore
from extender.state.watcher import RESOURCES, Resource, Watcher, list_once

from builders import node


class Stream:
    def __init__(self, events: list[dict]) -> None:
        self.body = "".join(json.dumps(e) + "\n" for e in events).encode()

    def iter_content(self, chunk_size=None):
        for i in range(0, len(self.body), 7):  # split events across chunks
            yield self.body[i : i + 7]

    def close(self) -> None:
        pass


class ScriptedApi:
    """Answers GETs from a script per path: list pages, then watch streams."""

    def __init__(self, script: dict[str, list]) -> None:
        self.script = {k: list(v) for k, v in script.items()}
        self.calls: list[tuple[str, dict]] = []

    def call(self, method, path, *, query=None, timeout=None, stream=False, body=None):
        self.calls.append((path, dict(query or [])))
        queue = self.script.get(path)
        if not queue:
            raise KubeApiError(404, "NotFound", path)
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Stream(answer) if stream else answer


def page(items, rv="10", cont=""):
    return {"metadata": {"resourceVersion": rv, "continue": cont}, "items": items}


def test_pages_events_bookmarks_and_relist_after_410() -> None:
    nodes = "/api/v1/nodes"
    api = ScriptedApi(
        {
            nodes: [
                page([node("a", "z1")], cont="next"),
                page([node("b", "z1")], rv="11"),  # first list, two pages
                [
                    {
                        "type": "ADDED",
                        "object": node("c", "z2")
                        | {"metadata": {**node("c", "z2")["metadata"], "resourceVersion": "12"}},
                    },
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}},
                    {"type": "DELETED", "object": node("a", "z1")},
                    {"type": "ERROR", "object": {"code": 410, "message": "too old"}},
                ],  # watch, then 410
                page([node("x", "z3")], rv="20"),  # relist
            ]
        }
    )
    store = ClusterStore()
    watcher = Watcher(api, store)  # type: ignore[arg-type]
    resource = Resource("nodes", nodes)
    thread = threading.Thread(target=watcher._run, args=(resource,), daemon=True)
    thread.start()
    for _ in range(200):
        if watcher.relists["nodes"] >= 1 and sorted(store.topology.nodes) == ["x"]:
            break
        threading.Event().wait(0.02)
    watcher.stop()
    assert sorted(store.topology.nodes) == ["x"] and store.listed["nodes"]
    queries = [q for p, q in api.calls if p == nodes]
    assert queries[1]["continue"] == "next"
    assert queries[2]["watch"] == "1" and queries[2]["resourceVersion"] == "11"


def test_missing_crd_leaves_named_policies_unavailable_but_the_store_ready() -> None:
    lists = {r.path: [page([])] for r in RESOURCES if r.kind != "policies"}
    store = list_once(ScriptedApi(lists))  # type: ignore[arg-type]
    assert store.ready and not store.policies_enabled and store.rotations_enabled


def test_missing_rotation_crd_leaves_rotations_unrecorded_but_the_store_synced() -> None:
    lists = {r.path: [page([])] for r in RESOURCES if r.kind != "rotations"}
    store = list_once(ScriptedApi(lists))  # type: ignore[arg-type]
    assert store.not_synced() is None and not store.rotations_enabled and store.policies_enabled


class WatchedApi(ScriptedApi):
    """A scripted API that also records, at each call, which kinds the store holds disconnected."""

    def __init__(self, script: dict[str, list], store: ClusterStore) -> None:
        super().__init__(script)
        self.store = store
        self.seen: list[dict[str, float]] = []

    def call(self, method, path, **kwargs):
        self.seen.append(dict(self.store.disconnected))
        return super().call(method, path, **kwargs)


def test_a_failed_list_or_broken_watch_marks_the_kind_disconnected_until_one_connects() -> None:
    nodes = "/api/v1/nodes"
    store = ClusterStore()
    api = WatchedApi(
        {
            nodes: [
                page([node("a", "z1")]),  # 1: the first list
                ConnectionError("stream broken"),  # 2: the watch fails
                ConnectionError("connection refused"),  # 3: the relist fails too
                page([node("a", "z1")], rv="20"),  # 4: the API server is back
                [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "21"}}}],  # 5: watch
            ]
        },
        store,
    )
    watcher = Watcher(api, store)  # type: ignore[arg-type]
    thread = threading.Thread(target=watcher._run, args=(Resource("nodes", nodes),), daemon=True)
    thread.start()
    for _ in range(300):
        if len(api.seen) >= 6:  # the 6th call finds the script empty (a 404): lost again
            break
        threading.Event().wait(0.02)
    watcher.stop()
    seen = api.seen
    assert seen[0] == {} and seen[1] == {}  # the list connected, so did the watch
    assert set(seen[2]) == {"nodes"}  # the broken watch marked it
    assert seen[3] == seen[2]  # the failed relist kept the first loss's time
    assert seen[4] == {}  # the relist reached the API server: cleared before the next watch
    assert seen[5] == {}  # the watch stream ended normally: not a loss


def test_watch_timeout_flag_reaches_the_watcher(monkeypatch) -> None:
    """--watch-timeout (the e2e compaction scenario lowers it) is what each watch asks for."""
    from extender.cli.commands import main as cli_main
    from extender.server import serve as serve_module

    seen = {}
    monkeypatch.setattr(serve_module, "serve", lambda options: seen.setdefault("options", options))
    assert cli_main(["serve", "--watch-timeout=3"]) in (0, None)
    assert seen["options"].watch_timeout == 3
    api = ScriptedApi({"/api/v1/nodes": [page([]), []]})
    watcher = Watcher(api, ClusterStore(), watch_timeout=seen["options"].watch_timeout)  # type: ignore[arg-type]
    version = watcher._list(Resource("nodes", "/api/v1/nodes"))
    watcher._watch(Resource("nodes", "/api/v1/nodes"), version)
    assert api.calls[-1][1]["timeoutSeconds"] == "3"

"""List+watch threads that keep the ClusterStore current (the only reads of the API).

One thread per kind: a paginated list replaces the kind's content, then a watch from the list's
resourceVersion applies events. A broken watch resumes from the last resourceVersion seen; a
410 Gone (or any failure to resume) relists. The store reports ready once every kind has listed.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..kubeapi import KubeApiError, KubeHttp
from ..policy import API_GROUP, API_VERSION, PLURAL
from .objects import ObjectError
from .store import PARSERS, ClusterStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Resource:
    kind: str  # the store's name for it
    path: str


RESOURCES = (
    Resource("nodes", "/api/v1/nodes"),
    Resource("pods", "/api/v1/pods"),
    Resource("statefulsets", "/apis/apps/v1/statefulsets"),
    Resource("claims", "/api/v1/persistentvolumeclaims"),
    Resource("volumes", "/api/v1/persistentvolumes"),
    Resource("policies", f"/apis/{API_GROUP}/{API_VERSION}/{PLURAL}"),
)


class _Gone(Exception):
    pass


class Watcher:
    def __init__(self, api: KubeHttp, store: ClusterStore, *, page_size: int = 500, watch_timeout: int = 300) -> None:
        self.api = api
        self.store = store
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.relists: dict[str, int] = {r.kind: 0 for r in RESOURCES}

    def start(self) -> None:
        for resource in RESOURCES:
            thread = threading.Thread(target=self._run, args=(resource,), name=f"watch-{resource.kind}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self._stop.set()

    def _run(self, resource: Resource) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                version = self._list(resource)
                backoff = 0.5
                while not self._stop.is_set():
                    version = self._watch(resource, version)
            except _Gone:
                log.info("watch of %s expired (410 Gone); relisting", resource.kind)
            except KubeApiError as err:
                if err.status == 404 and resource.kind == "policies":
                    self._no_policy_crd()
                    self._stop.wait(30)
                    continue
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", resource.kind, err, backoff)
            except Exception as err:  # connection resets, timeouts, bad JSON: relist after a pause
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", resource.kind, err, backoff)
            self.relists[resource.kind] += 1
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 30)

    def _no_policy_crd(self) -> None:
        with self.store.lock.held("watch"):
            if not self.store.synced["policies"]:
                log.warning(
                    "PlacementPolicy CRD not installed: named policies are unavailable, inline annotations still work"
                )
            self.store.policies_enabled = False
        self.store.replace("policies", [])

    def _list(self, resource: Resource) -> str:
        """Page by page, each page parsed into slim records at once: the decoded JSON of a
        150,000-pod list never sits in memory whole. The collector is paused meanwhile (the
        records are all long-lived) and the heap frozen after."""
        parse = PARSERS[resource.kind]
        records: list[Any] = []
        token = ""
        skipped = 0
        paused = gc.isenabled()
        gc.disable()
        try:
            while True:
                query = [("limit", str(self.page_size))]
                if token:
                    query.append(("continue", token))
                page = self.api.call("GET", resource.path, query=query, timeout=60)
                for item in page.get("items") or ():
                    try:
                        records.append(parse(item))
                    except ObjectError as err:
                        skipped += 1
                        log.warning("ignored a listed %s object: %s", resource.kind, err)
                meta = page.get("metadata") or {}
                token = meta.get("continue") or ""
                version = meta.get("resourceVersion") or ""
                del page
                if not token:
                    break
            if resource.kind == "policies":
                self.store.policies_enabled = True
            self.store.replace_records(resource.kind, records)
        finally:
            if paused:
                gc.enable()
        log.info("listed %d %s%s", len(records), resource.kind, f" ({skipped} unreadable, ignored)" if skipped else "")
        del records
        freeze_heap()
        return version

    def _watch(self, resource: Resource, version: str) -> str:
        query = [
            ("watch", "1"),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.watch_timeout)),
        ]
        response = self.api.call("GET", resource.path, query=query, timeout=(10, self.watch_timeout + 30), stream=True)
        try:
            for event in _lines(response):
                if self._stop.is_set():
                    break
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise RuntimeError(f"watch error: {obj.get('message')}")
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if kind == "BOOKMARK":
                    continue
                try:
                    self.store.apply(resource.kind, kind, obj)
                except ValueError as err:  # one odd object must not stop the watch
                    log.warning("ignored a %s event for %s: %s", kind, resource.kind, err)
        finally:
            response.close()
        return version


def freeze_heap() -> None:
    """Move the cache's (long-lived) objects out of the cyclic collector's reach.

    A full collection walks every tracked object: with 150,000 cached pods that is a pause of
    hundreds of milliseconds landing on some unlucky request. Objects alive after a list are the
    cache itself; freezing them leaves the collector only the short-lived garbage of requests.
    """
    gc.collect()
    gc.freeze()


def list_once(api: KubeHttp, store: ClusterStore | None = None, page_size: int = 500) -> ClusterStore:
    """A store filled by one list of every kind, no watch: for explain and audit."""
    store = store if store is not None else ClusterStore()
    watcher = Watcher(api, store, page_size=page_size)
    for resource in RESOURCES:
        try:
            watcher._list(resource)
        except KubeApiError as err:
            if err.status == 404 and resource.kind == "policies":
                watcher._no_policy_crd()
            else:
                raise
    return store


def _lines(response: Any) -> Iterator[dict[str, Any]]:
    buffer = b""
    for chunk in response.iter_content(chunk_size=None):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)

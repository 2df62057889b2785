"""List+watch threads that keep the ClusterStore current (the only reads of the API).

One thread per kind: a paginated list replaces the kind's content, then a watch from the list's
resourceVersion applies events. A watch that ends normally (its timeout) resumes from the last
resourceVersion seen; a 410 Gone, a broken stream or any other failure relists (client-go's
reflector would try to resume a broken watch first; a relist is never older than what was seen,
see below, so it is the simple safe choice, at the cost of a full list per outage). The store
reports ready once every kind has listed. Each failure (a failed list or watch, a broken stream,
a 410) marks the kind disconnected in the store, and the next list page or watch that reaches the
API server clears the mark: /readyz answers 503 while a kind has been disconnected longer than
limits.MAX_CACHE_STALENESS.

What the requests ask of the API server, and why (measured by the benchmark kind watch_cost, at 94a233e, against
Kubernetes v1.36.3; figures in benchmarks/results/watch_cost.md):

- Lists are consistent reads: no resourceVersion, `limit` 500 a page. Since v1.31 the API
  server serves them from its watch cache once it has confirmed the cache is current (one
  cheap revision request to etcd), so asking for resourceVersion "0" saved nothing measurable,
  while it (a) may answer with data older than a watch of ours already showed (resourceVersion
  "0" with NotOlderThan means "any age", notably from a lagging API server in HA): relisted
  after a 410, the cache could step back in time and count a bound pod as unbound; and (b)
  ignores `limit`, so a whole 150,000-pod list would sit in memory at once on both sides. A
  consistent list is at least as new as anything observed before, so a relist never goes back.
- Watches ask for bookmarks, so a resumed watch starts from a recent resourceVersion and 410s
  stay rare. No streaming list (sendInitialEvents=true): it cost the API server about 1.5 times
  the CPU of the paginated list (an event written and flushed per object), for less client CPU.
- No field selector: Succeeded and Failed pods stay in the cache (the store decides what they
  count for), and every kind needs its spec or status, so a metadata-only
  (PartialObjectMetadata) list would not do. JSON only: protobuf has no Python decoder here.
- Responses are decoded by orjson (kubeapi.decode_json): half the client CPU of the standard
  library on watch events, a fifth less on list pages.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..api.policy import API_GROUP, API_VERSION, PLURAL
from ..api.rotation import PLURAL as ROTATION_PLURAL
from ..kube.client import KubeApiError, KubeHttp, decode_json
from ..limits import WATCH_RETRY_MAX
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
    Resource("rotations", f"/apis/{API_GROUP}/{API_VERSION}/{ROTATION_PLURAL}"),
)
# Kinds whose CRD may be missing: a 404 makes them empty (and says what that costs), not unsynced.
_OPTIONAL = {"policies", "rotations"}
_MISSING_CRD = {
    "policies": "PlacementPolicy CRD not installed: named policies are unavailable, inline annotations still work",
    "rotations": "ZoneRotation CRD not installed: ordinal zones cannot be recorded, so each decision derives them "
    "anew and a zone outage or a restart can move ordinals; apply deploy/base/crd-zonerotation.yaml",
}


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
                self.store.connection_lost(resource.kind, "410 Gone")
            except KubeApiError as err:
                if err.status == 404 and resource.kind in _OPTIONAL:
                    self.store.connected(resource.kind)  # the API server answered: nothing to miss
                    self._no_crd(resource.kind)
                    self._stop.wait(30)
                    continue
                self.store.connection_lost(resource.kind, str(err))
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", resource.kind, err, backoff)
            except Exception as err:  # connection resets, timeouts, bad JSON: relist after a pause
                self.store.connection_lost(resource.kind, str(err) or type(err).__name__)
                log.warning("list/watch of %s failed: %s; retrying in %.1fs", resource.kind, err, backoff)
            self.relists[resource.kind] += 1
            self._stop.wait(backoff)
            backoff = min(backoff * 2, WATCH_RETRY_MAX)

    def _no_crd(self, kind: str) -> None:
        """The kind's CRD is not installed: the kind is empty (synced), and the log says what
        that costs, once."""
        with self.store.lock.held("watch"):
            if not self.store.listed[kind]:
                log.warning("%s", _MISSING_CRD[kind])
            setattr(self.store, f"{kind}_enabled", False)
        self.store.replace(kind, [])

    def _list(self, resource: Resource) -> str:
        """Page by page, each page parsed into slim records at once: the decoded JSON of a
        150,000-pod list never sits in memory whole. The collector is paused meanwhile (the
        records are all long-lived) and the heap frozen after.

        A consistent list (no resourceVersion; the continue token pins later pages to the first
        page's snapshot): after a 410 Gone the relist is at least as new as every event the
        expired watch applied, so replacing the kind's content never moves the cache back in
        time. See the module docstring for why not resourceVersion "0"."""
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
                self.store.connected(resource.kind)
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
            if resource.kind in _OPTIONAL:
                setattr(self.store, f"{resource.kind}_enabled", True)
            was_synced = self.store.not_synced() is None
            self.store.replace_records(resource.kind, records)
            if not was_synced and self.store.not_synced() is None:
                log.info(
                    "cache synced: every kind listed, deciding from now (%.2fs after start)",
                    self.store.clock() - self.store.started,
                )
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
        self.store.connected(resource.kind)
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
            if err.status == 404 and resource.kind in _OPTIONAL:
                watcher._no_crd(resource.kind)
            else:
                raise
    return store


def _lines(response: Any) -> Iterator[Any]:
    """The watch stream's events, one JSON document a line, whatever the chunking.

    Each chunk is split once: a chunk holding a backlog of many events (the API server flushes
    only when its queue is empty) costs one pass, not one copy of the rest per line; an event
    spread over several chunks is joined once, when its newline arrives."""
    pending: list[bytes] = []  # the start of a line whose newline has not come yet
    for chunk in response.iter_content(chunk_size=None):
        if b"\n" not in chunk:
            if chunk:
                pending.append(chunk)
            continue
        lines = chunk.split(b"\n")
        if pending:
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending.clear()
        tail = lines.pop()
        if tail:
            pending.append(tail)
        for line in lines:
            if line.strip():
                yield decode_json(line)
    rest = b"".join(pending)
    if rest.strip():
        yield decode_json(rest)

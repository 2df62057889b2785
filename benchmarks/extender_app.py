"""The extender served by gunicorn exactly as deployed, over a synthetic, preloaded cache.

`BenchApplication` is `extender.server.serve.ExtenderApplication` (same gunicorn settings: one
connection worker, same threads, timeouts and limits) whose `load()` builds a ClusterStore from
synthetic raw objects (`store.replace`, as the watcher's first sync does) instead of watching an
API server. Bindings and Events go to null sinks.

Beside the extender's own routes it serves two floors, answered the way the verbs are (in front
of Flask, straight from the WSGI environ, with the same request id and metrics bookkeeping), so
the floor is not handicapped against the verbs:

- `POST /noop`: reads the body and parses it exactly like the verbs do (`app.parse`: orjson, then
  `ExtenderArgs.model_validate`), then returns a fixed small ExtenderFilterResult: the cost of
  HTTP + JSON + wire validation, no decision, no encoding of a large answer.
- `POST /noop-raw`: reads the body and returns the same fixed answer: the HTTP floor alone.
- `GET /bench/gc`: the worker's garbage collections per generation and the seconds spent in them.
- `GET /bench/info`: what a custom store builder said about the store it built (`--store-builder`),
  and the store's current stats.

Run by the runner's extender arm (benchmarks/arms/server.py) as a subprocess:

    python -m benchmarks.extender_app --nodes 1000 --pods 10000 --listen 127.0.0.1:18888

A kind with its own cluster (benchmarks/kinds/group_scaling.py) passes `--store-builder
module:function --store-args JSON`: `function(options, **args)` returns the ClusterStore, or
(store, info) with a JSON-able info dict served at GET /bench/info.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/extender_app.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flask import Flask, Response  # noqa: E402

from benchmarks import synthetic  # noqa: E402
from extender.api.wire import ExtenderArgs  # noqa: E402
from extender.logs import setup_logging  # noqa: E402
from extender.metrics import store_gauges  # noqa: E402
from extender.server.app import _REQUEST_ID, create_app, parse  # noqa: E402
from extender.server.effects import DiscardEvents  # noqa: E402
from extender.server.serve import (  # noqa: E402
    ExtenderApplication,
    ServeOptions,
    tune_collector,  # noqa: E402
)
from extender.server.verbs import Verbs  # noqa: E402
from extender.state.reservations import Reservations
from extender.state.store import ClusterStore  # noqa: E402
from extender.state.watcher import freeze_heap  # noqa: E402

log = logging.getLogger("benchmarks.extender_app")

NOOP_ANSWER = '{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":{},"Error":""}\n'


class NullBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        return None


def add_floor_routes(app: Flask, verbs: Verbs) -> None:
    """The floors, answered in front of Flask like the verbs (extender/server/app.py RouteTable)."""
    answer = NOOP_ANSWER.encode()
    raw_only = {"/noop-raw": False, "/noop": True}
    behind = app.wsgi_app

    def floors(environ: dict, start_response: Callable) -> Any:
        parse_it = raw_only.get(environ.get("PATH_INFO", ""))
        if parse_it is None or environ.get("REQUEST_METHOD") != "POST":
            return behind(environ, start_response)
        started = time.perf_counter()
        given = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        if parse_it:
            parse(ExtenderArgs, raw)
        verbs.metrics.requests.inc(verb="other", code="200")
        verbs.metrics.latency.observe(time.perf_counter() - started, verb="noop")
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))]
        start_response("200 OK", headers + [("X-Request-Id", request_id)])
        return [answer]

    app.wsgi_app = floors  # type: ignore[method-assign]


class GcStats:
    """Collections per generation and seconds spent in them (gc.callbacks), for GET /bench/gc."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        elif self._start:
            generation = info.get("generation", 2)
            self.count[generation] += 1
            self.seconds[generation] += time.perf_counter() - self._start
            self._start = 0.0

    def snapshot(self) -> dict:
        return {
            "collections": list(self.count),
            "seconds": [round(s, 4) for s in self.seconds],
            "tracked_objects": len(gc.get_objects()),
            "frozen": gc.get_freeze_count(),
        }


def add_bench_routes(app: Flask, stats: GcStats, store: ClusterStore | None = None, info: dict | None = None) -> None:
    @app.get("/bench/gc")
    def gc_stats() -> Response:
        return Response(json.dumps(stats.snapshot()), status=200, mimetype="application/json")

    @app.get("/bench/info")
    def bench_info() -> Response:
        body = dict(info or {})
        if store is not None:
            body["live_stats"] = store.stats()
        return Response(json.dumps(body, default=str), status=200, mimetype="application/json")


def load_builder(spec: str, args: dict) -> Callable[[ServeOptions], Any]:
    """`module:function` -> options -> function(options, **args)."""
    module, _, name = spec.partition(":")
    function = getattr(importlib.import_module(module), name)
    return lambda options: function(options, **args)


def build_store(nodes: int, pods: int, options: ServeOptions, policy: str = "full") -> ClusterStore:
    store = ClusterStore(Reservations(options.tentative_ttl, options.committed_ttl))
    started = time.perf_counter()
    spec, shape = synthetic.POLICIES[policy]
    # rich=False: the slim records the store keeps are identical; only setup is faster.
    cluster = synthetic.cluster(nodes, pods, rich=False, policy=spec, group=synthetic.Group(**shape))
    cluster.load(store)
    log.info("synthetic cache loaded in %.1fs: %s", time.perf_counter() - started, store.stats())
    return store


class BenchApplication(ExtenderApplication):
    """ExtenderApplication's gunicorn configuration, with a synthetic store instead of a watcher."""

    def __init__(
        self,
        options: ServeOptions,
        nodes: int,
        pods: int,
        *,
        gc_freeze: bool = False,
        store_builder: Callable[[ServeOptions], Any] | None = None,
    ) -> None:
        self.nodes = nodes
        self.pods = pods
        self.gc_freeze = gc_freeze
        self.store_builder = store_builder
        super().__init__(options)

    def load(self):  # runs inside the gunicorn worker, like the real build()
        tune_collector()  # what the real build() does first
        info: dict | None = None
        if self.store_builder is not None:
            built = self.store_builder(self.options)
            store, info = built if isinstance(built, tuple) else (built, None)
        else:
            store = build_store(self.nodes, self.pods, self.options)
        if self.gc_freeze:  # what the extender's watcher does after every list (freeze_heap)
            freeze_heap()
        stats = GcStats()
        verbs = Verbs(store, NullBinder(), DiscardEvents(), decision_deadline=self.options.decision_deadline)
        store_gauges(verbs.metrics, store, time.time)  # as serve.build() does: /metrics shows the store
        app = create_app(verbs, max_body=self.options.max_body)
        add_floor_routes(app, verbs)
        add_bench_routes(app, stats, store, info)
        return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--listen", default="127.0.0.1:18888")
    parser.add_argument("--threads", type=int, default=ServeOptions.threads)
    parser.add_argument("--decision-deadline", type=float, default=ServeOptions.decision_deadline)
    parser.add_argument(
        "--timeout", type=int, default=ServeOptions.timeout, help="gunicorn worker timeout (default: as deployed)"
    )
    parser.add_argument("--log-level", default="info")
    parser.add_argument(
        "--no-gc-freeze",
        dest="gc_freeze",
        action="store_false",
        help="skip freeze_heap() after loading (the extender's watcher freezes after every list)",
    )
    parser.add_argument(
        "--store-builder",
        metavar="MODULE:FUNCTION",
        help="build the store with FUNCTION(options, **STORE_ARGS) instead of the synthetic cluster",
    )
    parser.add_argument("--store-args", default="{}", help="JSON object of keyword arguments for --store-builder")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)  # what `python -m extender serve` does
    options = ServeOptions(
        listen=args.listen,
        threads=args.threads,
        decision_deadline=args.decision_deadline,
        events=False,
        timeout=args.timeout,
    )
    builder = load_builder(args.store_builder, json.loads(args.store_args)) if args.store_builder else None
    BenchApplication(options, args.nodes, args.pods, gc_freeze=args.gc_freeze, store_builder=builder).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The extender's WSGI app: HTTP in, wire models, verbs, wire models out.

Every path it serves is one of routes.ROUTES, answered by RouteTable straight from the WSGI
environ. Flask stays behind it for what the table does not hold: the 404 of an unknown path, and
routes a harness adds to the app (the benchmarks' /bench/*), with its test client for the tests.

Nothing here decides anything. Every failure is a JSON answer: malformed input gets a 4xx that
names the problem, an unexpected fault a 500 with a generic message (the traceback goes to the
log, never to the client), and the server keeps serving.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar

from flask import Flask, Response, g, request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from ..api.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderPreemptionArgs,
    Priorities,
    WireError,
    decode_json,
    encode_bytes,
    go_bytes,
    go_json,
)
from ..limits import DEFAULT_MAX_BODY, MAX_CACHE_STALENESS, MAX_CANDIDATE_NODES
from .routes import Handler, Listener, Route, routes, served
from .verbs import Verbs
from .wire_io import BadRequest

log = logging.getLogger(__name__)

# A client's X-Request-Id is echoed and logged: only a short run of visible ASCII is taken.
_REQUEST_ID = re.compile(r"[!-~]{1,64}")
_Model = TypeVar("_Model", bound=BaseModel)
_JSON = "application/json"
_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus's text format 0.0.4


def create_app(verbs: Verbs, *, ready: Callable[[], bool] | None = None, max_body: int = DEFAULT_MAX_BODY) -> Flask:
    app = Flask("extender", static_folder=None)  # no /static/<file>: every path of ours is in routes.ROUTES
    app.config["MAX_CONTENT_LENGTH"] = max_body
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False  # OPTIONS gets a JSON 405 like any other wrong method

    @app.before_request
    def _start() -> None:
        given = request.headers.get("X-Request-Id", "")
        g.request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        g.started = time.perf_counter()

    @app.after_request
    def _log(response: Response) -> Response:
        elapsed = time.perf_counter() - g.get("started", time.perf_counter())
        verbs.metrics.requests.inc(verb="other", code=str(response.status_code))  # no path of the table
        log.debug("%s %s %.1fms", request.path, response.status_code, elapsed * 1000)
        response.headers["X-Request-Id"] = g.get("request_id", "")
        return response

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException) -> Response:
        path = request.path if len(request.path) <= 200 else request.path[:200] + "..."
        message = {
            404: f"no such endpoint {path}; the extender serves {served(Listener.VERBS)}",
            405: f"{request.method} is not allowed on {path}",
            413: _too_large(max_body),
        }.get(err.code or 0, err.description or err.name)
        return _json(err.code or 500, {"error": message})

    @app.errorhandler(Exception)
    def _unexpected(err: Exception) -> Response:
        log.exception("request %s to %s failed", g.get("request_id"), request.path)
        return _json(500, {"error": _internal(g.get("request_id"))})

    app.wsgi_app = RouteTable(app.wsgi_app, verbs, max_body, ready or (lambda: verbs.store.ready))  # type: ignore[method-assign]
    return app


class RouteTable:
    """Every route of routes.ROUTES on the verb listener, answered straight from the WSGI environ:
    its answer, its 405 for another method, its metrics, X-Request-Id and errors; any other path
    is passed on to `fallback` (Flask).

    Why not Flask's routing: filter and prioritize sit on kube-scheduler's scheduling cycle, one
    pod at a time. Flask's request and response objects, routing and hooks cost 0.46 CPU-ms per
    pod in the e2e profile (benchmarks/results/profile_e2e.md), a quarter of the serving cost.

    The status lines are what they were before the table: the verbs' own answers carry Python's
    reason phrases, the answers Flask used to give (health, readiness, metrics, every 405) its
    upper-case ones, so no byte on the wire changed.
    """

    def __init__(self, fallback: Callable[..., Any], verbs: Verbs, max_body: int, ready: Callable[[], bool]) -> None:
        self.fallback = fallback
        self.verbs = verbs
        self.max_body = max_body
        self.ready = ready
        self.table = routes(Listener.VERBS)
        # A path's handler names it in extender_requests_total, whatever the method.
        self.labels = {path: next(iter(methods.values())).handler for path, methods in self.table.items()}
        self.decisions: dict[Handler, tuple[type[BaseModel], Callable[[Any], BaseModel | Priorities]]] = {
            Handler.FILTER: (ExtenderArgs, verbs.filter),
            Handler.PRIORITIZE: (ExtenderArgs, verbs.prioritize),
            Handler.BIND: (ExtenderBindingArgs, verbs.bind),
            Handler.PREEMPT: (ExtenderPreemptionArgs, verbs.preempt),
        }
        self.others: dict[Handler, Callable[[], tuple[int, str, bytes]]] = {
            Handler.HEALTHZ: lambda: (200, _JSON, _json_bytes({"status": "ok"})),
            Handler.READYZ: self._readyz,
            Handler.METRICS: lambda: (200, _METRICS_TYPE, verbs.metrics.render().encode()),
        }
        missing = {r.handler for m in self.table.values() for r in m.values()} - set(self.decisions) - set(self.others)
        assert not missing, f"routes without a handler: {missing}"

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        methods = self.table.get(path)
        if methods is None:
            return self.fallback(environ, start_response)
        started = time.perf_counter()
        given = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        method = environ.get("REQUEST_METHOD", "")
        route: Route | None = methods.get(method)
        kind = _JSON
        lines = _FLASK_LINES
        close = False
        if route is None:
            status, body = 405, _error_bytes(f"{method} is not allowed on {path}")
        elif route.handler.is_verb:
            status, body = self._decide(route.handler, environ, request_id)
            lines = _STATUS_LINES
            # A standby of several replicas (server/leader.py) closes the connection after its
            # refusal: kube-scheduler keeps connections alive, and a Service's new endpoint moves
            # only new connections, so a kept one would bring every retry back here for good.
            close = self.verbs.store.standby() is not None
        else:
            try:
                status, kind, body = self.others[route.handler]()
            except Exception:
                log.exception("request %s to %s failed", request_id, path)
                status, kind, body = 500, _JSON, _error_bytes(_internal(request_id))
        label = self.labels[path]
        metrics = self.verbs.metrics
        metrics.requests.inc(verb=label.value, code=str(status))
        elapsed = time.perf_counter() - started
        if label.is_verb:
            metrics.latency.observe(elapsed, verb=label.value)
        log.debug("%s %s %.1fms", path, status, elapsed * 1000)
        headers = [("Content-Type", kind), ("Content-Length", str(len(body))), ("X-Request-Id", request_id)]
        if close:
            headers.append(("Connection", "close"))
        start_response(lines[status], headers)
        return [b""] if method == "HEAD" else [body]

    def _decide(self, handler: Handler, environ: dict[str, Any], request_id: str) -> tuple[int, bytes]:
        model, run = self.decisions[handler]
        try:
            return 200, encode_bytes(run(parse(model, self._body(environ)))) + b"\n"
        except _ClientError as err:
            return err.status, _error_bytes(err.message)
        except BadRequest as err:
            return 400, _error_bytes(str(err))
        except Exception:
            log.exception("request %s to %s failed", request_id, environ["PATH_INFO"])
            return 500, _error_bytes(_internal(request_id))

    def _readyz(self) -> tuple[int, str, bytes]:
        store = self.verbs.store
        stats = store.stats()
        if self.ready():
            stale = store.stale()
            if not stale:
                # Ready either way (a PodDisruptionBudget counts a warm standby); the role says
                # which replica decides (server/leader.py).
                role = "standby" if store.standby() is not None else "active"
                return 200, _JSON, _json_bytes({"status": "ready", "role": role, "cache": stats})
            return (
                503,
                _JSON,
                _json_bytes(
                    {
                        "status": "stale",
                        "disconnected_seconds": {k: round(v, 1) for k, v in sorted(stale.items())},
                        "bound_seconds": MAX_CACHE_STALENESS,
                        "cache": stats,
                    }
                ),
            )
        waiting = sorted(k for k, done in stats["listed"].items() if not done)
        return 503, _JSON, _json_bytes({"status": "syncing", "waiting_for": waiting, "cache": stats})

    def _body(self, environ: dict[str, Any]) -> bytes:
        """The request body, or a 413 before reading one over --max-body."""
        declared = environ.get("CONTENT_LENGTH") or ""
        stream = environ["wsgi.input"]
        if declared.isdigit():
            if int(declared) > self.max_body:
                raise _ClientError(413, _too_large(self.max_body))
            return stream.read(int(declared))
        raw = stream.read(self.max_body + 1)  # no length given (a de-chunked body): read at most the limit
        if len(raw) > self.max_body:
            raise _ClientError(413, _too_large(self.max_body))
        return raw


_STATUS_LINES = {code: f"{code} {HTTPStatus(code).phrase}" for code in (200, 400, 413, 500)}
_FLASK_LINES = {code: f"{code} {HTTP_STATUS_CODES[code].upper()}" for code in (200, 405, 500, 503)}


def parse(model: type[_Model], raw: bytes) -> _Model:
    """The body as `model`; a _ClientError (4xx) for anything else, before any work is done."""
    if not raw:
        raise _ClientError(400, "empty request body; expected a JSON object")
    try:
        data = decode_json(raw)
    except WireError as err:
        raise _ClientError(400, str(err)) from None
    try:
        args = model.model_validate(data)
    except ValidationError as err:
        raise _ClientError(400, f"invalid {model.__name__}: {_describe(err)}") from None
    count = args.candidate_count() if isinstance(args, (ExtenderArgs, ExtenderPreemptionArgs)) else 0
    if count > MAX_CANDIDATE_NODES:
        # 413: the content is larger than the extender will process, like a body over --max-body;
        # sending it again cannot help (a 400 would read as a malformed request).
        raise _ClientError(
            413,
            f"the request names {count:,} candidate nodes; the limit is {MAX_CANDIDATE_NODES:,} "
            "(MAX_CANDIDATE_NODES, above the largest cluster any provider supports)",
        )
    return args


def _too_large(max_body: int) -> str:
    return f"request body larger than the limit of {max_body} bytes (--max-body)"


def _error_bytes(message: str) -> bytes:
    return _json_bytes({"error": message})


def _json_bytes(body: dict[str, Any]) -> bytes:
    return go_bytes(body) + b"\n"


def _internal(request_id: str | None) -> str:
    return f"internal error (request id {request_id}); see the extender's log"


class _ClientError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _describe(err: ValidationError) -> str:
    """The first few errors, each naming where; bounded however large the body or its keys."""
    errors = err.errors(include_url=False, include_context=False, include_input=False)
    parts = []
    for e in errors[:5]:
        loc = ".".join(_short(str(p)) for p in e["loc"]) or "body"
        parts.append(f"{loc}: {e['msg']}")
    more = len(errors) - 5
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(go_json(body) + "\n", status=status, mimetype="application/json")

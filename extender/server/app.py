"""Flask application factory: HTTP in, wire models, verbs, wire models out.

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
from .verbs import Verbs
from .wire_io import BadRequest

log = logging.getLogger(__name__)

VERB_PATHS = {"/filter", "/prioritize", "/bind", "/preempt", "/healthz", "/readyz", "/metrics"}
# A client's X-Request-Id is echoed and logged: only a short run of visible ASCII is taken.
_REQUEST_ID = re.compile(r"[!-~]{1,64}")
_Model = TypeVar("_Model", bound=BaseModel)


def create_app(verbs: Verbs, *, ready: Callable[[], bool] | None = None, max_body: int = DEFAULT_MAX_BODY) -> Flask:
    app = Flask("extender")
    app.config["MAX_CONTENT_LENGTH"] = max_body
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False  # OPTIONS gets a JSON 405 like any other wrong method
    is_ready = ready or (lambda: verbs.store.ready)

    def answer(model: BaseModel) -> Response:
        return Response(encode_bytes(model) + b"\n", status=200, mimetype="application/json")

    @app.before_request
    def _start() -> None:
        given = request.headers.get("X-Request-Id", "")
        g.request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        g.started = time.perf_counter()

    @app.after_request
    def _log(response: Response) -> Response:
        elapsed = time.perf_counter() - g.get("started", time.perf_counter())
        verb = request.path.strip("/") if request.path in VERB_PATHS else "other"
        verbs.metrics.requests.inc(verb=verb, code=str(response.status_code))
        if verb in ("filter", "prioritize", "bind", "preempt"):
            verbs.metrics.latency.observe(elapsed, verb=verb)
        log.debug("%s %s %.1fms", request.path, response.status_code, elapsed * 1000)
        response.headers["X-Request-Id"] = g.get("request_id", "")
        return response

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(verbs.metrics.render(), mimetype="text/plain; version=0.0.4")

    # The verbs are answered by VerbRoutes in front of Flask (installed below); these routes give
    # Flask the same answers when it is served alone, and its 405 for a wrong method.
    for path, (_, model, run) in _verb_table(verbs).items():
        app.add_url_rule(
            path,
            endpoint=path.strip("/"),
            methods=["POST"],
            view_func=lambda model=model, run=run: answer(run(parse(model, request.get_data(cache=False)))),
        )

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        stats = verbs.store.stats()
        if is_ready():
            stale = verbs.store.stale()
            if not stale:
                # Ready either way (a PodDisruptionBudget counts a warm standby); the role says
                # which replica decides (server/leader.py).
                role = "standby" if verbs.store.standby() is not None else "active"
                return _json(200, {"status": "ready", "role": role, "cache": stats})
            return _json(
                503,
                {
                    "status": "stale",
                    "disconnected_seconds": {k: round(v, 1) for k, v in sorted(stale.items())},
                    "bound_seconds": MAX_CACHE_STALENESS,
                    "cache": stats,
                },
            )
        waiting = sorted(k for k, done in stats["listed"].items() if not done)
        return _json(503, {"status": "syncing", "waiting_for": waiting, "cache": stats})

    @app.errorhandler(_ClientError)
    def _client_error(err: _ClientError) -> Response:
        return _json(err.status, {"error": err.message})

    @app.errorhandler(BadRequest)
    def _bad_request(err: BadRequest) -> Response:
        return _json(400, {"error": str(err)})

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException) -> Response:
        path = request.path if len(request.path) <= 200 else request.path[:200] + "..."
        message = {
            404: f"no such endpoint {path}; the extender serves POST /filter, /prioritize, /bind, /preempt "
            "and GET /healthz, /readyz, /metrics",
            405: f"{request.method} is not allowed on {path}",
            413: _too_large(max_body),
        }.get(err.code or 0, err.description or err.name)
        return _json(err.code or 500, {"error": message})

    @app.errorhandler(Exception)
    def _unexpected(err: Exception) -> Response:
        log.exception("request %s to %s failed", g.get("request_id"), request.path)
        request_id = g.get("request_id")
        return _json(500, {"error": f"internal error (request id {request_id}); see the extender's log"})

    app.wsgi_app = VerbRoutes(app.wsgi_app, verbs, max_body)  # type: ignore[method-assign]
    return app


def _verb_table(verbs: Verbs) -> dict[str, tuple[str, type[BaseModel], Callable[[Any], BaseModel | Priorities]]]:
    return {
        "/filter": ("filter", ExtenderArgs, verbs.filter),
        "/prioritize": ("prioritize", ExtenderArgs, verbs.prioritize),
        "/bind": ("bind", ExtenderBindingArgs, verbs.bind),
        "/preempt": ("preempt", ExtenderPreemptionArgs, verbs.preempt),
    }


class VerbRoutes:
    """The verbs (POST /filter, /prioritize, /bind, /preempt) answered straight from the WSGI
    environ, every other request passed on to the Flask app.

    Why: filter and prioritize sit on kube-scheduler's scheduling cycle, one pod at a time. Flask's
    request and response objects, routing and hooks cost 0.46 CPU-ms per pod in the e2e profile
    (benchmarks/results/profile_e2e.md), a quarter of the serving cost. The answers, metrics,
    X-Request-Id and errors are the ones the Flask app gives (tests/unit/test_server.py holds both
    to the same table).
    """

    def __init__(self, fallback: Callable[..., Any], verbs: Verbs, max_body: int) -> None:
        self.fallback = fallback
        self.verbs = verbs
        self.max_body = max_body
        self.routes = _verb_table(verbs)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        route = self.routes.get(environ.get("PATH_INFO", ""))
        if route is None or environ.get("REQUEST_METHOD") != "POST":
            return self.fallback(environ, start_response)
        started = time.perf_counter()
        given = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex[:12]
        verb, model, run = route
        try:
            status, body = 200, encode_bytes(run(parse(model, self._body(environ)))) + b"\n"
        except _ClientError as err:
            status, body = err.status, _error_bytes(err.message)
        except BadRequest as err:
            status, body = 400, _error_bytes(str(err))
        except Exception:
            log.exception("request %s to %s failed", request_id, environ["PATH_INFO"])
            status, body = 500, _error_bytes(f"internal error (request id {request_id}); see the extender's log")
        metrics = self.verbs.metrics
        metrics.requests.inc(verb=verb, code=str(status))
        elapsed = time.perf_counter() - started
        metrics.latency.observe(elapsed, verb=verb)
        log.debug("%s %s %.1fms", environ["PATH_INFO"], status, elapsed * 1000)
        headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Request-Id", request_id),
        ]
        if self.verbs.store.standby() is not None:
            # A standby of several replicas (server/leader.py) closes the connection after its
            # refusal: kube-scheduler keeps connections alive, and a Service's new endpoint moves
            # only new connections, so a kept one would bring every retry back here for good.
            headers.append(("Connection", "close"))
        start_response(_STATUS_LINES[status], headers)
        return [body]

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
    return go_bytes({"error": message}) + b"\n"


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

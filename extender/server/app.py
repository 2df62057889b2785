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
from typing import Any, TypeVar

from flask import Flask, Response, g, request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException

from ..limits import DEFAULT_MAX_BODY, MAX_CANDIDATE_NODES
from ..verbs import BadRequest, Verbs
from ..wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderPreemptionArgs,
    WireError,
    decode_json,
    encode_bytes,
    go_json,
)

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

    def parse(model: type[_Model]) -> _Model:
        """The body as `model`; a _ClientError (4xx) for anything else, before any work is done."""
        raw = request.get_data(cache=False)
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

    @app.post("/filter")
    def filter_() -> Response:
        return answer(verbs.filter(parse(ExtenderArgs)))

    @app.post("/prioritize")
    def prioritize() -> Response:
        return answer(verbs.prioritize(parse(ExtenderArgs)))

    @app.post("/bind")
    def bind() -> Response:
        return answer(verbs.bind(parse(ExtenderBindingArgs)))

    @app.post("/preempt")
    def preempt() -> Response:
        return answer(verbs.preempt(parse(ExtenderPreemptionArgs)))

    @app.get("/healthz")
    def healthz() -> Response:
        return _json(200, {"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        stats = verbs.store.stats()
        if is_ready():
            return _json(200, {"status": "ready", "cache": stats})
        waiting = sorted(k for k, done in stats["synced"].items() if not done)
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
            413: f"request body larger than the limit of {max_body} bytes (--max-body)",
        }.get(err.code or 0, err.description or err.name)
        return _json(err.code or 500, {"error": message})

    @app.errorhandler(Exception)
    def _unexpected(err: Exception) -> Response:
        log.exception("request %s to %s failed", g.get("request_id"), request.path)
        request_id = g.get("request_id")
        return _json(500, {"error": f"internal error (request id {request_id}); see the extender's log"})

    return app


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

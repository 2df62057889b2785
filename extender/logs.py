"""Logging setup: plain text by default, one JSON object per line with --log-json."""

from __future__ import annotations

import json
import logging
import time


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class RequestIdFilter(logging.Filter):
    """Stamp records made while serving a request with its id (X-Request-Id or a fresh one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            from flask import g, has_request_context

            if has_request_context():
                record.request_id = g.get("request_id", "")
        except ImportError:  # pragma: no cover - flask is a dependency
            pass
        if not hasattr(record, "request_id"):
            record.request_id = ""
        return True


def setup_logging(level: str = "info", as_json: bool = False) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(RequestIdFilter())
    text = logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
    handler.setFormatter(JsonFormatter() if as_json else text)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)

"""The Python floor: POST /noop on the extender's own server (the verbs' parse path, orjson then
ExtenderArgs.model_validate, and a fixed small answer), and POST /noop-raw (the HTTP floor alone)."""

from __future__ import annotations

from benchmarks.arms import Endpoint, Session

DESCRIPTION = "the Python floor: /noop on the extender's server (same parse path, fixed answer), and /noop-raw"


def start(session: Session) -> Endpoint:
    _, client = session.extender()  # the same server and connection as the extender arm
    return Endpoint("noop", client, "/noop", "/noop", extra=(("raw", "/noop-raw"),))

"""The extender served by gunicorn exactly as deployed (benchmarks/extender_app.py: one connection
worker, the deployed settings, a synthetic store preloaded in the worker)."""

from __future__ import annotations

from benchmarks.arms import Endpoint, Session

DESCRIPTION = "the extender served by gunicorn as deployed: POST /filter, POST /prioritize"


def start(session: Session) -> Endpoint:
    _, client = session.extender()
    return Endpoint("extender", client, "/filter", "/prioritize", info={"tree": str(session.tree)})

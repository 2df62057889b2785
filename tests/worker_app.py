"""The app the worker tests serve: the real Flask app and verbs over an empty, synced store.

Loaded by gunicorn inside the worker process (tests/unit/test_worker.py); the worker's timeouts
come from the environment so that the tests need not wait for the production ones.
"""

from __future__ import annotations

import os

from extender.server import worker
from extender.server.app import create_app
from extender.server.verbs import Verbs
from extender.state.reservations import Reservations
from extender.state.store import ClusterStore

from fakes import RecordedEvents

worker.REQUEST_READ_TIMEOUT = float(os.environ.get("TEST_REQUEST_READ_TIMEOUT", "1"))
worker.IDLE_TIMEOUT = float(os.environ.get("TEST_IDLE_TIMEOUT", "30"))
worker.SPARE_WAIT = float(os.environ.get("TEST_SPARE_WAIT", "30"))
MAX_BODY = 4096


class OkBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pass


store = ClusterStore(Reservations(30, 60))
if os.environ.get("TEST_STANDBY"):  # a standby of several replicas (extender/server/leader.py)
    store.standby = lambda: "this placement extender replica is on standby: the active replica decides"
app = create_app(
    Verbs(store, OkBinder(), RecordedEvents()),  # type: ignore[arg-type]
    ready=lambda: True,
    max_body=MAX_BODY,
)

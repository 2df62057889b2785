"""Serving under gunicorn: one worker process, a thread per connection (server/worker.py).

All state (the watch cache, reservations) lives in one process on purpose: kube-scheduler calls
filter and prioritize one pod at a time, while binds arrive concurrently from its binding
goroutines. Several workers would each hold a separate cache and separate reservations, and two
pods of one group could then both take the last place under a cap. Threads share one store
behind one lock; the watch runs in the same worker.
"""

from __future__ import annotations

import gc
import logging
import os
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gunicorn.app.base import BaseApplication

from ..api.policy import SCHEDULER_NAME
from ..api.wire import FailedNodeReasons
from ..limits import (
    DEFAULT_COMMITTED_TTL,
    DEFAULT_DECISION_DEADLINE,
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY,
    DEFAULT_PLACE_LIFTED_TTL,
    DEFAULT_PLACE_VISIBLE,
    DEFAULT_PLACE_WINDOW,
    DEFAULT_TENTATIVE_TTL,
    DEFAULT_THREADS,
    DEFAULT_TLS_CLIENT_NAME,
    DEFAULT_WATCH_TIMEOUT,
)
from ..metrics import store_gauges
from ..state.reservations import Reservations
from ..state.store import ClusterStore
from .app import create_app
from .leader import LeaderElector, Timing
from .verbs import Verbs
from .worker import HEALTH_LISTEN_ENV, TLS_CLIENT_NAMES_ENV

if TYPE_CHECKING:
    from .place_gate import PlaceGate
    from .ports import EventSink

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Election:
    """Several replicas, one deciding (server/leader.py)."""

    namespace: str
    lease: str
    timing: Timing
    identity: str  # the pod's name: the Lease's holderIdentity starts with it
    service: str | None = None  # the selector-less Service whose one endpoint the active replica becomes
    pod_ip: str = ""


@dataclass
class ServeOptions:
    listen: str = DEFAULT_LISTEN
    kubeconfig: str | None = None
    threads: int = DEFAULT_THREADS
    max_body: int = DEFAULT_MAX_BODY
    decision_deadline: float = DEFAULT_DECISION_DEADLINE
    failed_node_reasons: FailedNodeReasons = FailedNodeReasons.WHEN_NONE_PASS
    tentative_ttl: float = DEFAULT_TENTATIVE_TTL
    committed_ttl: float = DEFAULT_COMMITTED_TTL
    watch_timeout: int = DEFAULT_WATCH_TIMEOUT
    events: bool = True
    access_log: bool = False
    timeout: int = 60
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_client_ca_file: str | None = None  # set: callers must present a certificate signed by it
    tls_client_names: tuple[str, ...] = (DEFAULT_TLS_CLIENT_NAME,)  # ... and named so (worker.py)
    health_listen: str | None = None  # loopback, plain HTTP, /healthz and /readyz only (worker.py)
    metrics_listen: str | None = None  # HTTPS GET /metrics for Prometheus, token-reviewed (metrics_port.py)
    scheduler_names: tuple[str, ...] = (SCHEDULER_NAME,)  # whose pods are its own (ClusterStore.owns)
    place_window: int = DEFAULT_PLACE_WINDOW  # placeable-gate lifts in flight at once (place_gate.py)
    place_visible: int = DEFAULT_PLACE_VISIBLE  # pods with no place lifted for autoscalers (place_gate.py)
    place_lifted_ttl: float = DEFAULT_PLACE_LIFTED_TTL  # a lift's slot, once kube-scheduler tried it (place_gate.py)
    place_gate: bool = True  # False: the gate loop never lifts the placeable gate (serve --no-place-gate)
    election: Election | None = None  # None: this replica alone decides


# The cyclic collector's first threshold: tracked allocations (net) between young collections.
# A filter over 5,000 nodes holds some 10,000-20,000 tracked temporaries at its peak; at CPython's
# default (700) each request set off a few young collections and every tenth of their elders a
# full one (the frozen cache leaves the "25% long-lived" brake nothing to hold on to): 25-30 full
# collections per 200 requests at 5,000 nodes. The request path's garbage is almost all freed by
# reference counting, so a higher threshold costs little memory.
GC_YOUNG_THRESHOLD = 50_000


def tune_collector() -> None:
    """Set the collector's thresholds for a process whose long-lived heap is frozen (see
    state/watcher.freeze_heap): young collections rarely, full ones more rarely still."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def build(options: ServeOptions):
    """The app with a live cache and the real API client (called inside the gunicorn worker)."""
    from ..kube.client import connect
    from ..kube.versions import log_api_server_version
    from ..state.watcher import Watcher
    from .effects import DiscardEvents, KubeBinder, KubeEventSink, KubeGateWriter, KubePodNudger, KubeRecordWriter
    from .gate_lifter import GateLifter
    from .nudge import PolicyNudger
    from .remedies import RemedyWorker

    tune_collector()
    api = connect(options.kubeconfig)
    log_api_server_version(api)  # logs the version; warns outside the tested minors
    store = ClusterStore(
        Reservations(options.tentative_ttl, options.committed_ttl), scheduler_names=options.scheduler_names
    )
    events = KubeEventSink(api) if options.events else DiscardEvents()
    verbs = Verbs(
        store,
        KubeBinder(api),
        events,
        records=KubeRecordWriter(api),
        decision_deadline=options.decision_deadline,
        failed_node_reasons=options.failed_node_reasons,
    )
    store_gauges(verbs.metrics, store, time.time)
    watcher = Watcher(api, store, watch_timeout=options.watch_timeout)
    watcher.start()
    elector = _elector(api, store, options.election, _port(options.listen)) if options.election else None
    if elector is not None:
        store.standby = elector.refusal
        verbs.metrics.add_gauge(
            "extender_leader",
            "1 on the replica that holds the Lease and decides, 0 on a standby (serve --leader-elect).",
            lambda: {(): 1.0 if elector.active() else 0.0},
        )
        elector.start()
    place = placeable_gate(store, events, options)
    if place is not None:
        place.on_stage = lambda stage, seconds: verbs.metrics.gate_lifts.observe(seconds, stage=stage.value)
    GateLifter(verbs, KubeGateWriter(api), place=place).start()
    PolicyNudger(store, KubePodNudger(api)).start()
    RemedyWorker(verbs.remedies).start()
    app = create_app(verbs, max_body=options.max_body)
    app.extensions["watcher"] = watcher
    app.extensions["leader"] = elector  # the worker steps it down and releases it on a graceful stop
    if options.metrics_listen:
        # Started here, in the worker process that holds the metrics, on its own socket and
        # threads: the verb listener's connection slots are never its (metrics_port.py).
        from .metrics_port import KubeReviewer, start_metrics_port

        app.extensions["metrics_port"] = start_metrics_port(
            options.metrics_listen,
            lambda: verbs.metrics.render().encode(),
            KubeReviewer(api),
            cert_file=options.tls_cert_file,
            key_file=options.tls_key_file,
            count=lambda status: verbs.metrics.metrics_port.inc(code=str(status)),
        )
    return app


def placeable_gate(store: ClusterStore, events: EventSink, options: ServeOptions) -> PlaceGate | None:
    """The gate loop's placeable-gate pass, or None with --no-place-gate: then opted-in pods stay
    held until something else lifts them (the benchmarks' gate floor lifts them all at once, to
    measure what a scheduling gate costs the control plane without the extender's decisions)."""
    from .place_gate import PlaceGate

    if not options.place_gate:
        return None
    return PlaceGate(
        store,
        events,
        window=options.place_window,
        visible=options.place_visible,
        lifted_ttl=options.place_lifted_ttl,
        decision_deadline=options.decision_deadline,
    )


def _port(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


def _elector(api, store: ClusterStore, election: Election, port: int) -> LeaderElector:  # noqa: ANN001 - KubeHttp
    """The replica's candidate for the Lease; once elected, the Service's one endpoint."""
    from .effects import KubeActiveEndpoint, KubeLeases, active_endpoint_slice

    on_elected = on_stepping_down = lambda: None  # noqa: E731
    if election.service:
        endpoint = KubeActiveEndpoint(
            api,
            active_endpoint_slice(
                election.service, election.namespace, election.identity, election.pod_ip, port, "https"
            ),
        )
        on_elected, on_stepping_down = endpoint.claim, endpoint.vacate
    return LeaderElector(
        KubeLeases(api, election.namespace, election.lease),
        election.identity,
        timing=election.timing,
        ready=lambda: store.ready and not store.stale(),
        on_elected=on_elected,
        on_stepping_down=on_stepping_down,
    )


class ExtenderApplication(BaseApplication):
    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        binds = [self.options.listen]
        if self.options.health_listen:
            binds.append(self.options.health_listen)
            os.environ[HEALTH_LISTEN_ENV] = self.options.health_listen  # the worker tells its listeners apart
        settings = {
            "bind": binds,
            "workers": 1,  # one cache, one set of reservations: see the module docstring
            "worker_class": "extender.server.worker.ConnectionWorker",  # a thread per connection
            "threads": self.options.threads,
            "timeout": self.options.timeout,
            "graceful_timeout": 10,
            "accesslog": "-" if self.options.access_log else None,
            "errorlog": "-",
            "limit_request_line": 8190,
            "control_socket_disable": True,  # no admin socket; the root filesystem may be read-only
            "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        }
        if self.options.tls_cert_file:
            settings.update(certfile=self.options.tls_cert_file, keyfile=self.options.tls_key_file)
            if self.options.tls_client_ca_file:
                settings.update(ca_certs=self.options.tls_client_ca_file, cert_reqs=ssl.CERT_REQUIRED)
                os.environ[TLS_CLIENT_NAMES_ENV] = ",".join(self.options.tls_client_names)
        for key, value in settings.items():
            if value is not None:
                self.cfg.set(key, value)

    def load(self):
        return build(self.options)


def serve(options: ServeOptions) -> None:
    ExtenderApplication(options).run()

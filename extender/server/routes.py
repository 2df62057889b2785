"""The route table: every path the extender serves, on which listener, by which method.

One declaration, read by every listener: the verb listener's WSGI app (app.py) answers the
routes of Listener.VERBS, the worker's health listener (worker.py) passes on only the paths of
Listener.HEALTH, and the metrics port (metrics_port.py) answers only those of Listener.METRICS.
A path is added, moved or dropped here and nowhere else; tests/unit/test_server_routes.py holds
every path x method x listener to its status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Listener(enum.Enum):
    VERBS = "verbs"  # serve --listen: kube-scheduler's calls, and the probes where no health listener runs
    HEALTH = "health"  # serve --health-listen: loopback, plain HTTP, the pod's exec probes
    METRICS = "metrics"  # serve --metrics-listen: HTTPS, Prometheus's token reviewed

    @property
    def answers_head(self) -> bool:
        """Whether HEAD is answered as GET on this listener. The WSGI app's listeners always have
        (Flask's rule; HTTP says so); the metrics port answers a scraper's GET and nothing else."""
        return self is not Listener.METRICS


class Handler(enum.Enum):
    """What answers a route. The first four are kube-scheduler's verbs: a JSON body parsed into
    a wire model, a decision, its latency observed (extender_request_duration_seconds)."""

    FILTER = "filter"
    PRIORITIZE = "prioritize"
    BIND = "bind"
    PREEMPT = "preempt"
    HEALTHZ = "healthz"
    READYZ = "readyz"
    METRICS = "metrics"

    @property
    def is_verb(self) -> bool:
        return self in _VERBS


_VERBS = frozenset({Handler.FILTER, Handler.PRIORITIZE, Handler.BIND, Handler.PREEMPT})


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    handler: Handler
    listeners: frozenset[Listener]


_EVERYWHERE_BUT_METRICS = frozenset({Listener.VERBS, Listener.HEALTH})

ROUTES: tuple[Route, ...] = (
    Route("POST", "/filter", Handler.FILTER, frozenset({Listener.VERBS})),
    Route("POST", "/prioritize", Handler.PRIORITIZE, frozenset({Listener.VERBS})),
    Route("POST", "/bind", Handler.BIND, frozenset({Listener.VERBS})),
    Route("POST", "/preempt", Handler.PREEMPT, frozenset({Listener.VERBS})),
    Route("GET", "/healthz", Handler.HEALTHZ, _EVERYWHERE_BUT_METRICS),
    Route("GET", "/readyz", Handler.READYZ, _EVERYWHERE_BUT_METRICS),
    # The verb listener's /metrics is for a scraper beside the extender (the sidecar install's own
    # loopback); Prometheus reads the metrics port's, token-reviewed (metrics_port.py).
    Route("GET", "/metrics", Handler.METRICS, frozenset({Listener.VERBS, Listener.METRICS})),
)


def routes(listener: Listener) -> dict[str, dict[str, Route]]:
    """path -> method -> route on `listener`, HEAD included where it answers as GET."""
    table: dict[str, dict[str, Route]] = {}
    for route in ROUTES:
        if listener in route.listeners:
            methods = table.setdefault(route.path, {})
            methods[route.method] = route
            if route.method == "GET" and listener.answers_head:
                methods["HEAD"] = route
    return table


def paths(listener: Listener) -> tuple[str, ...]:
    """The paths `listener` serves, in the table's order."""
    return tuple(routes(listener))


def path_of(handler: Handler) -> str:
    return next(route.path for route in ROUTES if route.handler is handler)


def served(listener: Listener) -> str:
    """The routes of `listener` in words, for its 404: "POST /filter, /bind and GET /healthz"."""
    by_method: dict[str, list[str]] = {}
    for route in ROUTES:
        if listener in route.listeners:
            by_method.setdefault(route.method, []).append(route.path)
    return " and ".join(f"{method} {', '.join(found)}" for method, found in by_method.items())


def status(listener: Listener, method: str, path: str) -> int:
    """200 when `listener` has a route for (method, path), 405 for its path with another method,
    404 for a path it does not serve."""
    methods = routes(listener).get(path)
    if methods is None:
        return 404
    return 200 if method in methods else 405

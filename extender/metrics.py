"""Prometheus metrics through prometheus-client, the library made for them.

The names and labels are what docs/reference/metrics.md lists (generated from this registry by
hack/docs/generate.py) and what `deploy/optional/` dashboards and alerts read (a test holds them
to each other). Beside them, the client's standard process and
platform collectors: resident memory, CPU seconds, open file descriptors, start time, Python's
garbage collections. Each `Metrics` has its own registry, so tests build as many as they like.
The wrappers keep the extender's call sites short: `metrics.binds.inc(result="bound")`.
Thread-safe: request threads and the watch threads update them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

Labels = tuple[tuple[str, str], ...]

# No `<name>_created` series beside each counter and histogram: twice the series for a timestamp
# nobody graphs (Prometheus reads resets from the counter itself).
prometheus_client.disable_created_metrics()


class _Series:
    """A metric and its labelled children, kept: prometheus-client's labels() validates and locks
    on every call (about 5 us; a filter increments a dozen series)."""

    def __init__(self, registry: CollectorRegistry, name: str, metric: Any) -> None:
        self.name = name
        self._registry = registry
        self._metric = metric
        self._children: dict[tuple[tuple[str, str], ...], Any] = {}  # label values -> child

    def _series(self, labels: dict[str, str]) -> Any:
        if not labels:
            return self._metric
        key = tuple(labels.items())
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._metric.labels(**labels)
        return child


class Counter(_Series):
    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        labels: tuple[str, ...] = (),
        initial: tuple[dict[str, str], ...] = (),
    ) -> None:
        """`initial`: label values exported at 0 from the start, for a counter some installs never
        move (a rule reading a series that does not exist sees nothing, not a zero)."""
        super().__init__(registry, name, prometheus_client.Counter(name, help_text, labels, registry=registry))
        for values in initial:
            self._series(values)

    def inc(self, amount: float = 1, **labels: str) -> None:
        self._series(labels).inc(amount)

    def value(self, **labels: str) -> float:
        return self._registry.get_sample_value(self.name, labels) or 0.0


class Histogram(_Series):
    def __init__(
        self,
        registry: CollectorRegistry,
        name: str,
        help_text: str,
        labels: tuple[str, ...] = (),
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> None:
        metric = prometheus_client.Histogram(name, help_text, labels, registry=registry, buckets=buckets)
        super().__init__(registry, name, metric)

    def observe(self, value: float, **labels: str) -> None:
        self._series(labels).observe(value)

    def count(self, **labels: str) -> int:
        return int(self._registry.get_sample_value(f"{self.name}_count", labels) or 0)


class _Gauges(Collector):
    """Gauges read at scrape time from callbacks returning {labels-as-pairs: value}."""

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str, Callable[[], dict[Labels, float]]]] = []

    def collect(self) -> Iterable[Metric]:
        for name, help_text, read in self.gauges:
            values = sorted(read().items())
            names = [k for k, _ in values[0][0]] if values else []
            family = GaugeMetricFamily(name, help_text, labels=names)
            for labels, value in values:
                family.add_metric([v for _, v in labels], value)
            yield family


# Every result of the bind verb, exported at 0 before the first bind: the shipped alert and dashboard
# (deploy/optional) read them, and an in-scheduler install, where kube-scheduler binds, never moves them.
BIND_RESULTS = (
    "bound",
    "refused",
    "refused_resources",
    "refused_node",
    "not_ours",
    "failed",
    "unknown_pod",
    "not_synced",
    "not_seen",
)


def _gate_lifts(registry: CollectorRegistry) -> Histogram:
    """The placeable gate's lifts by stage (place_gate.LiftStage): where a burst's time goes."""
    return Histogram(
        registry,
        "extender_placeable_gate_lift_seconds",
        "In-scheduler mode: a placeable-gate lift with a place, from the pass that decided it to each stage:"
        " written (its PATCH accepted), asked (kube-scheduler's first filter request naming the pod), bound"
        " (the extender saw it bound, and its slot of --place-window freed). The window over the bound time"
        " is the rate opted-in pods can be placed at.",
        ("stage",),
    )


class Metrics:
    """Everything the extender exports; one instance per process."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self.requests = Counter(
            registry, "extender_requests_total", "HTTP requests by verb and status code.", ("verb", "code")
        )
        self.latency = Histogram(
            registry, "extender_request_duration_seconds", "Time to answer a request, by verb.", ("verb",)
        )
        self.node_verdicts = Counter(
            registry,
            "extender_filter_node_verdicts_total",
            "Nodes judged by filter, by outcome (pass, fail, unresolvable) and the rule that removed them.",
            ("outcome", "rule"),
        )
        self.pod_decisions = Counter(
            registry,
            "extender_filter_decisions_total",
            "Filter calls by result: feasible, no_feasible_node, invalid_policy, no_policy, not_synced,"
            " node_not_cached, unknown_pod (the watch had not shown the pod within the wait: an Error, retried),"
            " not_ours (not a pod it places: every node passes, nothing is held).",
            ("result",),
        )
        self.binds = Counter(
            registry,
            "extender_binds_total",
            "Bind calls by result: bound, refused (a hard rule), refused_resources (the node's room, counting every"
            " scheduler's pods), refused_node (the pod's own node selector, affinity or taints exclude the node),"
            " not_ours (not a pod of a scheduler it serves, nor opted in), failed (API error), unknown_pod, not_synced,"
            " not_seen (the watch had not shown the pod within the bind's wait). In-scheduler mode binds in"
            " kube-scheduler (its stanza names no bind verb), so there every result stays at 0.",
            ("result",),
            initial=tuple({"result": r} for r in BIND_RESULTS),
        )
        self.bind_watch_waits = Counter(
            registry,
            "extender_bind_watch_waits_total",
            "Binds that arrived before the watch showed their pod and waited for it, by outcome: seen, timeout"
            " (then refused as not_seen, and retried by kube-scheduler).",
            ("outcome",),
        )
        self.preemptions = Counter(
            registry,
            "extender_preempt_nodes_total",
            "Preemption candidates by result: kept (with its victims, as sent), placeholder (sent with no victims,"
            " as from Kubernetes 1.38, and kept with none: the pod passes the hard rules there as it is), refused.",
            ("result",),
        )
        self.fallbacks = Counter(
            registry,
            "extender_decision_fallbacks_total",
            "Decisions whose dead-end analysis passed the deadline, so the hard rules alone decided, by reason.",
            ("reason",),
        )
        self.lock_hold = Histogram(
            registry,
            "extender_store_lock_hold_seconds",
            "How long one holder kept the cache's lock (every other decision waits meanwhile), by holder.",
            ("holder",),
        )
        self.metrics_port = Counter(
            registry,
            "extender_metrics_port_answers_total",
            "Answers of the metrics port (serve --metrics-listen) by status code: 200, 401 (no token, or one the"
            " API server does not know), 403 (its user may not get /metrics), 429 (token reviews past their rate),"
            " 503 (the API server could not review it), 400/404/405 (not a GET /metrics).",
            ("code",),
        )
        self.gate_lifts = _gate_lifts(registry)
        self.events_dropped = Counter(
            registry, "extender_events_dropped_total", "Pod events not recorded because the queue was full."
        )
        self._gauges = _Gauges()
        registry.register(self._gauges)

    def add_gauge(self, name: str, help_text: str, read: Callable[[], dict[Labels, float]]) -> None:
        self._gauges.gauges.append((name, help_text, read))

    def render(self) -> str:
        return generate_latest(self.registry).decode("utf-8")


def store_gauges(metrics: Metrics, store, clock: Callable[[], float]) -> None:  # noqa: ANN001 - ClusterStore
    """Cache object counts, sync state, age of the last watch event, reservations in flight."""

    def objects() -> dict[Labels, float]:
        stats = store.stats()
        return {
            (("kind", k),): float(stats[k])
            for k in ("nodes", "pods", "statefulsets", "claims", "volumes", "policies", "rotations")
        }

    def synced() -> dict[Labels, float]:
        return {(("kind", k),): 1.0 if done else 0.0 for k, done in store.synced.items()}

    def age() -> dict[Labels, float]:
        now = clock()
        return {(("kind", k),): max(0.0, now - t) for k, t in dict(store.last_event).items()}

    def stale() -> dict[Labels, float]:
        away = store.staleness()
        return {(("kind", k),): away.get(k, 0.0) for k in store.synced}

    def reservations() -> dict[Labels, float]:
        counts = store.reservations.counts()  # without the lock: /metrics never waits on a decision
        return {(("kind", k),): float(v) for k, v in counts.items()}

    metrics.add_gauge("extender_cache_objects", "Objects in the watch cache, by kind.", objects)
    metrics.add_gauge("extender_cache_synced", "1 once the kind's first list completed.", synced)
    metrics.add_gauge(
        "extender_cache_last_event_age_seconds", "Seconds since the last list or watch event, by kind.", age
    )
    metrics.add_gauge(
        "extender_cache_stale_seconds",
        "Seconds since the kind's list/watch lost the API server (0 while connected); /readyz is 503 past "
        "limits.MAX_CACHE_STALENESS.",
        stale,
    )
    metrics.add_gauge(
        "extender_ungated_opt_in_pods",
        "Opted-in pods the watch showed created without the placeable gate and not on a node, since start: "
        "outside in-scheduler mode's bound (no MutatingAdmissionPolicy placement-placeable-gate).",
        lambda: {(): float(store.ungated_arrivals)},
    )
    metrics.add_gauge(
        "extender_reservations", "Placements chosen but not yet visible in the watch, by kind.", reservations
    )

"""Prometheus metrics, in the text exposition format, without a client library.

A handful of counters and histograms is all the extender needs; writing the format (a few
lines) keeps the dependency list to what the design fixes. Thread-safe: request threads and the
watch threads update them.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

Labels = tuple[tuple[str, str], ...]


def _labels(labels: dict[str, str]) -> Labels:
    return tuple(sorted(labels.items()))


def _fmt(name: str, labels: Labels, value: float, extra: Labels = ()) -> str:
    pairs = labels + extra
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    number = repr(float(value)) if not float(value).is_integer() else str(int(value))
    return f"{name}{{{body}}} {number}" if body else f"{name} {number}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = defaultdict(float)
        self._lock = threading.Lock()

    def inc(self, amount: float = 1, **labels: str) -> None:
        with self._lock:
            self._values[_labels(labels)] += amount

    def value(self, **labels: str) -> float:
        return self._values.get(_labels(labels), 0.0)

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            for labels, value in sorted(self._values.items()):
                yield _fmt(self.name, labels, value)


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self._counts: dict[Labels, list[int]] = {}
        self._sums: dict[Labels, float] = defaultdict(float)
        self._lock = threading.Lock()

    def observe(self, value: float, **labels: str) -> None:
        key = _labels(labels)
        with self._lock:
            counts = self._counts.setdefault(key, [0] * (len(self.buckets) + 1))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            self._sums[key] += value

    def count(self, **labels: str) -> int:
        return sum(self._counts.get(_labels(labels), ()))

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            for key, counts in sorted(self._counts.items()):
                running = 0
                for bound, count in zip(self.buckets, counts, strict=False):  # counts has one more: +Inf
                    running += count
                    yield _fmt(f"{self.name}_bucket", key, running, (("le", repr(bound)),))
                running += counts[-1]
                yield _fmt(f"{self.name}_bucket", key, running, (("le", "+Inf"),))
                yield _fmt(f"{self.name}_sum", key, self._sums[key])
                yield _fmt(f"{self.name}_count", key, running)


class Gauge:
    """Read at scrape time from a callback returning {labels-dict-as-tuple: value}."""

    def __init__(self, name: str, help_text: str, read: Callable[[], dict[Labels, float]]) -> None:
        self.name, self.help, self.read = name, help_text, read

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} gauge"
        for labels, value in sorted(self.read().items()):
            yield _fmt(self.name, labels, value)


class Metrics:
    """Everything the extender exports; one instance per process."""

    def __init__(self) -> None:
        self.requests = Counter("extender_requests_total", "HTTP requests by verb and status code.")
        self.latency = Histogram("extender_request_duration_seconds", "Time to answer a request, by verb.")
        self.node_verdicts = Counter(
            "extender_filter_node_verdicts_total",
            "Nodes judged by filter, by outcome (pass, fail, unresolvable) and the rule that removed them.",
        )
        self.pod_decisions = Counter(
            "extender_filter_decisions_total",
            "Filter calls by result: feasible, no_feasible_node, invalid_policy, no_policy.",
        )
        self.binds = Counter(
            "extender_binds_total",
            "Bind calls by result: bound, refused (a hard rule), failed (API error), unknown_pod.",
        )
        self.preemptions = Counter("extender_preempt_nodes_total", "Preemption candidates by result: kept, refused.")
        self.fallbacks = Counter(
            "extender_decision_fallbacks_total",
            "Decisions whose dead-end analysis passed the deadline, so the hard rules alone decided, by reason.",
        )
        self.lock_hold = Histogram(
            "extender_store_lock_hold_seconds",
            "How long one holder kept the cache's lock (every other decision waits meanwhile), by holder.",
        )
        self.events_dropped = Counter(
            "extender_events_dropped_total", "Pod events not recorded because the queue was full."
        )
        self.gauges: list[Gauge] = []

    def add_gauge(self, name: str, help_text: str, read: Callable[[], dict[Labels, float]]) -> None:
        self.gauges.append(Gauge(name, help_text, read))

    def render(self) -> str:
        families = [
            self.requests,
            self.latency,
            self.node_verdicts,
            self.pod_decisions,
            self.fallbacks,
            self.binds,
            self.preemptions,
            self.lock_hold,
            self.events_dropped,
            *self.gauges,
        ]
        return "\n".join(line for family in families for line in family.render()) + "\n"


def store_gauges(metrics: Metrics, store, clock: Callable[[], float]) -> None:  # noqa: ANN001 - ClusterStore
    """Cache object counts, sync state, age of the last watch event, reservations in flight."""

    def objects() -> dict[Labels, float]:
        stats = store.stats()
        return {
            (("kind", k),): float(stats[k]) for k in ("nodes", "pods", "statefulsets", "claims", "volumes", "policies")
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
        with store.lock.held("metrics"):
            counts = store.reservations.counts()
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
        "extender_reservations", "Placements chosen but not yet visible in the watch, by kind.", reservations
    )

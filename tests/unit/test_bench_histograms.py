"""The benchmarks' Prometheus histogram reader (benchmarks/common.py), which the e2e benchmark uses
to time every bind: the extender's handler and kube-scheduler's Bind extension point."""

from __future__ import annotations

import bisect
import math
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as PromHistogram

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.cluster import BIND_POINT, _sum_series, bind_delta  # noqa: E402
from benchmarks.common import Histogram, read_histograms  # noqa: E402

# What kube-scheduler 1.36.3's /metrics served for its Bind extension point after a 1,000-pod
# burst (the benchmark's own control plane), verbatim.
KUBE_SCHEDULER_TEXT = (REPO / "tests" / "fixtures" / "metrics" / "kube-scheduler-1.36-bind.txt").read_text()


def test_kube_scheduler_bind_series_read_as_served() -> None:
    ((labels, hist),) = read_histograms(KUBE_SCHEDULER_TEXT, BIND_POINT).items()
    assert dict(labels) == {"extension_point": "Bind", "profile": "default-scheduler", "status": "Success"}
    assert hist.count == 1000 and math.isclose(hist.total, 256.4204176420001)
    assert hist.buckets[-3:] == ((0.1024, 126), (0.2048, 535), (math.inf, 1000))
    # the median's rank 500 falls in (0.1024, 0.2048], 374 of its 409: Prometheus's linear estimate
    assert math.isclose(hist.quantile(0.5), 0.1024 + 0.1024 * 374 / 409)
    assert hist.quantile(0.9) == math.inf  # past the last finite bound: nothing more is known
    summary = hist.summary_ms()
    assert summary["p90"] == summary["p99"] == ">204.8" and summary["mean"] == 256.42


def test_series_summed_over_status() -> None:
    ok = Histogram(((0.01, 10), (0.1, 90), (math.inf, 100)), 4.5, 100)
    failed = Histogram(((0.01, 0), (0.1, 2), (math.inf, 2)), 0.1, 2)
    total = _sum_series([ok, failed])
    assert total.count == 102 and math.isclose(total.total, 4.6)
    assert total.buckets == ((0.01, 10), (0.1, 92), (math.inf, 102))


def test_bind_delta_is_the_round_alone() -> None:
    earlier = Histogram(((0.01, 5), (0.1, 5), (math.inf, 5)), 0.02, 5)
    later = Histogram(((0.01, 5), (0.1, 15), (math.inf, 15)), 0.52, 15)
    assert bind_delta({"extender": earlier}, {"extender": later, "idle": earlier.minus(earlier)}) == {
        "extender": {
            "calls": 10,
            "mean": 50.0,
            "p50": 55.0,
            "p90": 91.0,
            "p99": 99.1,
            "buckets": [[0.01, 0], [0.1, 10], ["inf", 10]],
        }
    }


def test_unparseable_text_raises_value_error() -> None:
    """The Go floor answers /metrics with a 404 page; the caller treats ValueError as no series."""
    try:
        read_histograms("404 page not found", BIND_POINT)
    except ValueError:
        return
    raise AssertionError("a 404 page parsed as metrics")


BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=2.0, allow_nan=False), min_size=1, max_size=200))
def test_read_back_what_prometheus_client_exports(samples: list[float]) -> None:
    """Any observations, exported by prometheus_client, read back with their count, sum and
    cumulative buckets; each quantile estimate lies in the bucket holding that rank's sample."""
    registry = CollectorRegistry()
    metric = PromHistogram("x_seconds", "x", ("verb",), registry=registry, buckets=BUCKETS)
    for value in samples:
        metric.labels(verb="bind").observe(value)
    (hist,) = read_histograms(generate_latest(registry).decode(), "x_seconds").values()
    assert hist.count == len(samples) and math.isclose(hist.total, sum(samples), abs_tol=1e-6)
    bounds = [*BUCKETS, math.inf]
    for le, n in hist.buckets:
        assert n == sum(1 for s in samples if s <= le)
    ordered = sorted(samples)
    for q in (0.5, 0.9, 0.99):
        estimate = hist.quantile(q)
        rank = max(1, math.ceil(q * len(samples)))
        bucket = bisect.bisect_left(bounds, ordered[rank - 1])
        low = bounds[bucket - 1] if bucket else 0.0
        assert low - 1e-12 <= estimate <= bounds[bucket] + 1e-12, (q, estimate, low, bounds[bucket])
        assert (estimate == math.inf) == (ordered[rank - 1] > BUCKETS[-1])


def test_bind_summary_ratios_within_one_control_plane() -> None:
    from benchmarks.kinds.e2e import bind_summary

    def rounds(side: str, binders: dict[str, tuple[list[float], list[float | str]]]) -> list[dict]:
        count = len(next(iter(binders.values()))[0])
        return [
            {
                "side": side,
                "complete": True,
                "bind_ms": {
                    b: {"calls": 1000, "mean": m[i], "p50": m[i], "p90": m[i], "p99": q[i]}
                    for b, (m, q) in binders.items()
                },
            }
            for i in range(count)
        ]

    results = {
        "equal-qps": {
            "rounds": rounds("native", {"kube-scheduler": ([100, 120], [190, ">204.8"])})
            + rounds("extender", {"extender": ([150, 170], [300, 320]), "kube-apiserver": ([70, 90], [99, 99])})
        },
        "go-floor": {
            "rounds": rounds("native", {"kube-scheduler": ([50, 50], [90, 90])})
            + rounds("extender", {"placement-scheduler": ([60, 80], [99, 99])})
        },
    }
    rows = {(r[0], r[1], r[2]): r[3:] for r in bind_summary(results)}
    # a quantile past the last bucket in any round stays text; the rest are medians over rounds
    assert rows[("equal-qps", "native", "kube-scheduler")] == [1000, 110, 110, 110, ">204.8", 1.0, "-"]
    # over the same control plane's native Go binder, and over the API server's own time for its POSTs
    assert rows[("equal-qps", "extender", "extender")] == [1000, 160, 160, 160, 310, round(160 / 110, 2), 2.0]
    assert rows[("equal-qps", "extender", "kube-apiserver")][-2:] == [round(80 / 110, 2), "-"]
    assert rows[("go-floor", "extender", "placement-scheduler")][-2:] == [1.4, "-"]

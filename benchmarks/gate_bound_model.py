"""What in-scheduler mode's bound allows, as a model of kube-scheduler's one scheduling cycle:
the longest an ordinary wave takes while `window` lifted opted-in pods keep failing against a hung
extender, over every moment the wave could start.

The model: one scheduling cycle; an ordinary pod takes `cycle` seconds of it; each try at a lifted
pod takes `timeout` (the stanza's httpTimeout) and then waits out kube-scheduler's backoff (1 s
doubling to 10 s); the queue is FIFO by the time a pod was created or last failed, as
pkg/scheduler/backend/queue orders it. The hang starts just as the lifted pods enter the queue
(the worst moment: their backoff is shortest then). It is a model, not a measurement: the e2e
scenario tests/e2e/test_in_scheduler_worst_moment.py measures the shipped setting; this table ranks
settings (window 2, httpTimeout 300 ms now; 2 x 1 s and 4 x 3 s before). It runs below what the e2e
measures: its wave's pods are all queued at once, while a ReplicaSet creates them over seconds, between
the lifted pods' retries (a 50-pod wave started at a cut took 3.5x at 2 x 1 s, the model says 1.8x).

    python -m benchmarks.gate_bound_model
"""

from __future__ import annotations

import heapq
import itertools


def wave_seconds(
    window: int, timeout: float, start: float, *, cycle: float = 0.04, pods: int = 100, max_backoff: float = 10.0
) -> float:
    """Seconds from a wave of `pods` ordinary pods created at `start` until the last is scheduled."""
    now = 0.0
    order = itertools.count()
    active = [(-1.0, next(order), "opted-in", 0) for _ in range(window)]  # (queued at, tie, kind, tries)
    heapq.heapify(active)
    backoff: list[tuple[float, float, int]] = []  # (ready at, failed at, tries)
    added, done = False, 0
    while True:
        if not added and now >= start:
            for _ in range(pods):
                heapq.heappush(active, (start, next(order), "ordinary", 0))
            added = True
        while backoff and backoff[0][0] <= now:
            _, failed_at, tries = heapq.heappop(backoff)
            heapq.heappush(active, (failed_at, next(order), "opted-in", tries))
        if not active:
            now = min(([backoff[0][0]] if backoff else []) + ([start] if not added else []))
            continue
        _, _, kind, tries = heapq.heappop(active)
        if kind == "ordinary":
            now += cycle
            done += 1
            if done == pods:
                return now - start
        else:
            now += timeout
            tries += 1
            heapq.heappush(backoff, (now + min(2 ** (tries - 1), max_backoff), now, tries))


def worst_ratio(window: int, timeout: float, *, cycle: float = 0.04, pods: int = 100) -> float:
    healthy = cycle * pods
    return max(wave_seconds(window, timeout, s / 4, cycle=cycle, pods=pods) for s in range(240)) / healthy


def main() -> int:
    print("worst 100-pod ordinary wave / healthy (4 s), the hang starting as the lifted pods enter the queue")
    print("window  " + "  ".join(f"{t:>5g} s" for t in (0.3, 0.5, 1.0, 2.0, 3.0)) + "   (httpTimeout)")
    for window in (1, 2, 3, 4):
        print(f"{window:>6}  " + "  ".join(f"{worst_ratio(window, t):>6.2f}x" for t in (0.3, 0.5, 1.0, 2.0, 3.0)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

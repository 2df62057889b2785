"""In-scheduler mode's bound at its worst moment: what ordinary pods pay while opted-in
pods are mid-burst and the extender fails, measured against a healthy wave in the same run.

kube-scheduler reaches the extender through a TCP proxy that can go silent (tests/e2e/blackhole.py:
a partition, a broken Service path, with both processes alive). Each scenario starts its own
opted-in burst (100 pods opted in by hand, gated at creation, a per-node cap of 10 on 12 nodes),
and takes the worst moment deterministically: the path is cut mid-burst, which leaves exactly
`window` lifted pods in kube-scheduler's queue (the gate lifts nothing more while kube-scheduler
has not tried its lifts); then

1. frozen: the extender SIGSTOPped, the path restored: kube-scheduler retries those pods against
   a process that accepts and never answers, each try costing the stanza's httpTimeout (100 ms);
2. killed: the extender SIGKILLed, the path restored: each try is refused at once; the extender is
   then started again;
3. cut off: a 50-pod ordinary wave starts the moment the path is cut, when the lifted pods'
   retries come densest (kube-scheduler's backoff: 1 s, 2 s, 4 s); at a window of 2 and a 1 s
   httpTimeout such a wave took 3.5x its healthy time (9.07 s against 2.62 s), which set the
   stanza's timeout at 100 ms and the window at 6 (as many tries a round, for a third the time). Then
   the path stays silent for 5 lifts' TTLs (shortened to 5 s by --place-lifted-ttl: the
   TTL, not the wait), the extender alive and watching, a wave after each TTL. Before, a lift
   stopped counting 60 s after it was made, asked about or not, and 4 more were lifted: 36 in the
   queue and over 50x by minute 8. Now the lifted and unbound pods stay at
   most twice the window (a lift kube-scheduler asked about just before the cut runs out its TTL
   and its slot is taken again) and do not grow.

Each ordinary wave must bind within 2x the healthy one of its size (the mean of a healthy wave
before the scenarios and one after them; the bound the docs promise). After each scenario every
opted-in pod is placed, and no sample (every 0.5 s, throughout) shows a node over its cap.
"""

from __future__ import annotations

import copy
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from extender.api.policy import PLACEABLE_GATE
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from extender.limits import DEFAULT_PLACE_WINDOW
from parallel import machine_alone

from .blackhole import BlackholeProxy
from .test_in_scheduler import opted_in
from .test_in_scheduler_freeze import bound_count, ordinary_wave
from .workloads import Sampler, deployment, pods

pytestmark = pytest.mark.e2e

PROXY = BlackholeProxy()  # its target, the extender's port, is set once the cluster has started
TTL = 5.0
CLUSTER_OPTIONS = {
    "mode": "in-scheduler",
    "extender_args": ["--place-lifted-ttl", str(TTL)],
    "extender_config": {"urlPrefix": f"http://127.0.0.1:{PROXY.port}"},
}
HOST = "kubernetes.io/hostname"
BURST, CAP, NODES = 100, 10, 12
WINDOW = DEFAULT_PLACE_WINDOW  # the shipped window
FIRST_WAVE = 50  # the wave started the moment kube-scheduler is cut off
WORST_RATIO = 2.0  # the promise in docs/operations/failure-modes.md


def _burst(name: str) -> dict:
    policy = {"group": {"selector": {"matchLabels": {"app": name}}}, "caps": [{"topologyKey": HOST, "max": CAP}]}
    return opted_in(deployment(name, BURST, policy=policy))


def _lifted_unbound(api, ns: str, app: str) -> int:  # noqa: ANN001
    """Pods of `app` out of the gate and not bound: in kube-scheduler's queue."""
    return sum(
        1
        for p in pods(api, ns, f"app={app}")
        if not p["spec"].get("nodeName") and PLACEABLE_GATE not in str(p["spec"].get("schedulingGates"))
    )


def _worst_over_cap(api, ns: str) -> int:  # noqa: ANN001
    per_node = Counter(
        (p["metadata"]["labels"]["app"], p["spec"]["nodeName"])
        for p in pods(api, ns)
        if p["spec"].get("nodeName") and p["metadata"]["labels"].get("app", "").startswith("burst-")
    )
    return max((c - CAP for c in per_node.values()), default=0)


def _extender_signal(cluster, sig: int) -> None:  # noqa: ANN001
    process = cluster.extender_process()
    assert process is not None and process.popen is not None
    os.killpg(process.popen.pid, sig)


def _create_burst(api, ns: str, app: str) -> None:  # noqa: ANN001
    """The burst's pods, created by the test 16 at a time (as its ReplicaSet would make them).
    Not through a Deployment: kube-controller-manager writes 20 pods a second for every
    controller together, so a burst still being created held the next ordinary wave's pods back
    by seconds, extender or no extender (that, not the extender, was most of the 1.6-2.14x)."""
    template = _burst(app)["spec"]["template"]

    def create(i: int) -> None:
        pod = {"apiVersion": "v1", "kind": "Pod", **copy.deepcopy(template)}
        pod["metadata"]["name"] = f"{app}-{i}"
        api.create(f"/api/v1/namespaces/{ns}/pods", pod)

    with ThreadPoolExecutor(16) as creators:
        list(creators.map(create, range(BURST)))


def _cut_mid_burst(api, ns: str, app: str, at_cut: Callable[[], float] | None = None) -> float | None:  # noqa: ANN001
    """Start the burst, cut the path once part of it is bound, and wait until the window's lifts
    are in the queue: the gate lifts nothing more while kube-scheduler cannot try them.
    `at_cut` (an ordinary wave) starts the moment the path is cut, when the lifted pods' retries
    are densest (kube-scheduler's backoff starts at 1 s); its seconds are returned."""
    _create_burst(api, ns, app)
    wait_for(f"{app}: 20 bound", lambda: bound_count(api, ns, app) >= 20, 120, interval=0.1)
    with ThreadPoolExecutor(1) as beside:
        PROXY.cut()
        wave = beside.submit(at_cut) if at_cut else None
        wait_for(f"{app}: the window's lifts in the queue", lambda: _lifted_unbound(api, ns, app) == WINDOW, 30)
        time.sleep(1.0)  # kube-scheduler cannot reach the extender about them: nothing more is lifted
        in_queue = _lifted_unbound(api, ns, app)
        assert in_queue == WINDOW, f"{in_queue} lifted and unbound while kube-scheduler could not ask"
        return wave.result() if wave else None


def _alone(wave: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        with machine_alone():
            return wave()

    return run


def test_ordinary_pods_pay_at_most_twice_at_the_worst_moment(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    PROXY.target_port = cluster.ports["extender"]
    cluster.add_nodes(zoned_nodes({"wm-a": NODES}, prefix="wm"))
    ns = cluster.namespace("worst-moment")
    waves: dict[str, float] = {}
    small: dict[str, float] = {}  # FIRST_WAVE-pod waves: healthy before and after, and at the cut
    # Each wave runs alone (tests/parallel.py), from the failure it measures to its last pod bound;
    # the bursts' setup and placement, the extender's restart and the waits between TTLs do not
    # need the machine to themselves, and other tests run beside them.
    with Sampler(lambda: _worst_over_cap(api, ns), interval=0.5) as sampler:
        with machine_alone():
            waves["healthy"] = ordinary_wave(api, ns, "healthy")
            small["healthy"] = ordinary_wave(api, ns, "healthy-small", FIRST_WAVE)

        _cut_mid_burst(api, ns, "burst-frozen")
        with machine_alone():
            _extender_signal(cluster, signal.SIGSTOP)
            PROXY.restore()
            try:
                waves["frozen"] = ordinary_wave(api, ns, "frozen")
            finally:
                _extender_signal(cluster, signal.SIGCONT)
        wait_for("burst-frozen placed", lambda: bound_count(api, ns, "burst-frozen") == BURST, 180)

        _cut_mid_burst(api, ns, "burst-killed")
        with machine_alone():
            _extender_signal(cluster, signal.SIGKILL)
            PROXY.restore()
            waves["killed"] = ordinary_wave(api, ns, "killed")
        cluster.start_extender()
        wait_for("burst-killed placed", lambda: bound_count(api, ns, "burst-killed") == BURST, 180)

        first = _cut_mid_burst(
            api, ns, "burst-cut", at_cut=_alone(lambda: ordinary_wave(api, ns, "cut-first", FIRST_WAVE))
        )
        assert first is not None
        small["cut-first"] = first
        cut_at, queued = time.monotonic(), []
        for i in range(5):
            time.sleep(max(0.0, cut_at + (i + 1) * TTL - time.monotonic()))
            with machine_alone():
                waves[f"cut-{i + 1}"] = ordinary_wave(api, ns, f"cut-{i + 1}")
            queued.append(_lifted_unbound(api, ns, "burst-cut"))
        cut_for = time.monotonic() - cut_at
        PROXY.restore()
        wait_for("burst-cut placed", lambda: bound_count(api, ns, "burst-cut") == BURST, 180)
        with machine_alone():
            waves["healthy-after"] = ordinary_wave(api, ns, "healthy-after")
            small["healthy-after"] = ordinary_wave(api, ns, "healthy-small-after", FIRST_WAVE)
    over = [v for _, v in sampler.samples if isinstance(v, int) and v > 0]
    # The baseline: the healthy waves before and after, averaged (one wave alone varies by a third
    # from run to run on this machine, whatever the extender does).
    healthy = (waves["healthy"] + waves["healthy-after"]) / 2
    ratios = {k: round(v / healthy, 2) for k, v in waves.items() if not k.startswith("healthy")}
    healthy_small = (small["healthy"] + small["healthy-after"]) / 2
    ratios["cut-first"] = round(small["cut-first"] / healthy_small, 2)
    scenario.repetitions, scenario.pods_placed = 3, 3 * BURST + 100 * len(waves) + FIRST_WAVE * len(small)
    scenario.violations = len(over)
    scenario.note = (
        f"healthy 100-pod wave {healthy:.1f} s ({waves['healthy']:.1f} before, {waves['healthy-after']:.1f} after); "
        f"healthy {FIRST_WAVE}-pod wave {healthy_small:.1f} s, started at the cut {small['cut-first']:.1f} s "
        f"({ratios['cut-first']}x); with {WINDOW} lifted pods in the queue: frozen "
        f"{ratios['frozen']}x, killed {ratios['killed']}x; cut off {cut_for:.0f} s ({cut_for / TTL:.1f} lift TTLs), "
        f"waves {[ratios[f'cut-{i}'] for i in range(1, 6)]}x, lifted-unbound after each {queued}; "
        f"{len(sampler.samples)} samples, {len(over)} over a cap; every burst placed"
    )
    print(f"\n{scenario.note}")
    assert not over, over
    # In the queue while cut off: the window's lifts kube-scheduler never asked about (they keep
    # counting), plus at most a window of lifts it asked about just before the cut, whose TTL then
    # runs out (their slots are taken again by lifts it cannot ask about). So at most twice the
    # window, and no growth once the first TTL has passed (before: 36 and rising by minute 8).
    assert max(queued) <= 2 * WINDOW and queued[-1] <= queued[0], queued
    # The promised 2x. Measured, the burst created by the test, at a 1 s httpTimeout: frozen
    # 1.02-1.03x, killed 1.01-1.03x, cut off at most 1.48x (2 runs); the wave at the cut 1.48x (50
    # pods) and 1.1x (100), and 3.5x as an outside tester measured it. At 2 x 300 ms, under a load
    # of 10-15 from other jobs: at the cut 0.9x, cut off at most 1.07x, frozen 1.07x, killed 1.04x;
    # at 6 x 100 ms (shipped): at the cut 1.03x, cut off at most 1.02x, frozen 1.15x, killed 0.97x.
    # With the burst made by a Deployment it was 1.6-2.14x: the wave's ReplicaSet waited behind the
    # burst's for kube-controller-manager's 20 writes a second.
    assert all(r <= WORST_RATIO for r in ratios.values()), scenario.note

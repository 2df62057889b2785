"""In-scheduler mode with the extender frozen: the cluster's one kube-scheduler is never
held hostage by it.

50 opted-in pods wait for room (a per-node cap of 1, 60 pods, 10 nodes), opted in by hand as a team
that keeps its manifests in git writes them (the request, no gate: the install's
MutatingAdmissionPolicy adds it at creation; before it, 35x when measured). The extender's
processes are then frozen (SIGSTOP: a stuck process, a paused VM; it still accepts connections) for
75 s, longer than a lift's TTL (60 s), so whatever the gate had lifted runs out inside the freeze
(it was 3 minutes once: the last 2 only waited, and measured nothing). An ordinary
Deployment of 100 pods created meanwhile must be bound within 2x its time with the extender healthy,
measured in the same run; the same with 10 more opted-in pods created during the freeze, their
template carrying the gate as `adopt --mode in-scheduler` writes it. Before the gate, kube-scheduler
waited its httpTimeout once per waiting opted-in pod: 251 s against 4.4 s
(../shared/research/in-scheduler.md). Once the freeze ends and room is added, every opted-in pod
is placed under its cap.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest

from extender.api.policy import PLACEABLE_GATE
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes
from parallel import machine_alone, machine_idle

from .test_in_scheduler import opted_in
from .workloads import deployment, pods

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "in-scheduler"}
HOST = "kubernetes.io/hostname"
FREEZE = 75.0  # > the default --place-lifted-ttl (60 s)
WAVE = 100


def gated(manifest: dict) -> dict:
    """The template as adopt --mode in-scheduler leaves it: opted in, with the placeable gate."""
    opted_in(manifest)["spec"]["template"]["spec"]["schedulingGates"] = [{"name": PLACEABLE_GATE}]
    return manifest


def capped(name: str, replicas: int, *, by_hand: bool = False) -> dict:
    """`by_hand`: opted in with no gate in the template (the admission policy adds it)."""
    policy = {"group": {"selector": {"matchLabels": {"app": name}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    manifest = deployment(name, replicas, policy=policy)
    return opted_in(manifest) if by_hand else gated(manifest)


def bound_count(api, ns: str, app: str) -> int:  # noqa: ANN001
    return sum(1 for p in pods(api, ns, f"app={app}") if p["spec"].get("nodeName"))


def ordinary_wave(api, ns: str, name: str, size: int = WAVE) -> float:  # noqa: ANN001
    """Seconds from creating a Deployment of `size` pods that never opted in to all of them bound."""
    manifest = deployment(name, size, policy={})
    spec = manifest["spec"]["template"]["spec"]
    spec["schedulerName"] = "default-scheduler"
    manifest["spec"]["template"]["metadata"].pop("annotations")
    started = time.monotonic()
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", manifest)
    wait_for(f"{size} pods of {name} bound", lambda: bound_count(api, ns, name) == size, 600, interval=0.2)
    seconds = time.monotonic() - started
    api.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
    wait_for(f"{name} gone", lambda: not pods(api, ns, f"app={name}"), 120)
    return seconds


def signal_extender(cluster, sig: int) -> None:  # noqa: ANN001
    """SIGSTOP/SIGCONT to every process of the extender (its own session: gunicorn and its worker)."""
    process = cluster.extender_process()
    assert process is not None and process.popen is not None
    os.killpg(process.popen.pid, sig)


def test_a_frozen_extender_costs_ordinary_pods_a_bounded_time(cluster, scenario) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({"fz-a": 10}, prefix="fz"))
    ns = cluster.namespace("freeze")
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", capped("waiting", 60, by_hand=True))
    wait_for("10 of the 60 capped pods placed", lambda: bound_count(api, ns, "waiting") == 10, 120)
    time.sleep(3)
    assert bound_count(api, ns, "waiting") == 10, "a cap of 1 on 10 nodes"
    held = [p for p in pods(api, ns, "app=waiting") if PLACEABLE_GATE in str(p["spec"].get("schedulingGates"))]
    assert len(held) == 50, "opted in by hand, held by the gate the admission policy added"
    with machine_alone():  # the three timed waves, with no other test beside them (tests/parallel.py)
        healthy = ordinary_wave(api, ns, "healthy")
        signal_extender(cluster, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            frozen = ordinary_wave(api, ns, "frozen")
            api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", capped("late", 10))
            wait_for("10 late opted-in pods created", lambda: len(pods(api, ns, "app=late")) == 10, 60)
            frozen_late = ordinary_wave(api, ns, "frozen-late")
            placed_late = bound_count(api, ns, "late")
        except BaseException:
            signal_extender(cluster, signal.SIGCONT)
            raise
    try:
        with machine_idle():  # the rest of the freeze only waits: a test that runs alone need not wait for it
            time.sleep(max(0.0, FREEZE - (time.monotonic() - frozen_at)))
    finally:
        signal_extender(cluster, signal.SIGCONT)
    frozen_for = time.monotonic() - frozen_at

    cluster.add_nodes(zoned_nodes({"fz-b": 50}, prefix="fz"))
    wait_for(
        "every opted-in pod placed after the freeze",
        lambda: bound_count(api, ns, "waiting") == 60 and bound_count(api, ns, "late") == 10,
        300,
    )
    over = {
        app: {n: c for n, c in Counter(p["spec"]["nodeName"] for p in pods(api, ns, f"app={app}")).items() if c > 1}
        for app in ("waiting", "late")
    }
    scenario.repetitions, scenario.pods_placed = 1, 3 * WAVE + 70
    scenario.violations = sum(len(v) for v in over.values())
    scenario.note = (
        f"50 opted-in pods waiting (opted in by hand, gated at creation), extender frozen {frozen_for:.0f} s: "
        f"a {WAVE}-pod ordinary Deployment "
        f"bound in {healthy:.1f} s healthy, {frozen:.1f} s frozen ({frozen / healthy:.2f}x), {frozen_late:.1f} s "
        f"frozen with 10 more opted-in pods created ({frozen_late / healthy:.2f}x); {placed_late} of those placed "
        "while frozen; after the freeze all 70 placed, 1 a node"
    )
    print(f"\n{scenario.note}")
    assert placed_late == 0, "nothing of an opted-in pod is placed while its extender is frozen"
    assert over == {"waiting": {}, "late": {}}, over
    assert frozen <= 2 * healthy and frozen_late <= 2 * healthy, scenario.note

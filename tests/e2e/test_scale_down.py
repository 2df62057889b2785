"""Scale-down that keeps the policy: a Deployment of 9 under zone spread maxSkew 1 on
3 zones x 3 nodes, scaled 9 -> 4 -> 2, with the scale-down controller (`python -m extender
deletion-costs`) running beside the control plane, 5 runs: the zone skew after every step, read
from the API server. Then one run with the controller stopped, for what the ReplicaSet controller
does on its own (figures in the summary, not asserted: it is topology-blind, kubernetes#96748)."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec

from .workloads import deployment, pods, wait_settled

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
ZONES = ["sd-a", "sd-b", "sd-c"]
RUNS = 5


@pytest.fixture(scope="module")
def controller(cluster):  # noqa: ANN001
    cluster.add_nodes(NodeSpec(f"sd-{z[-1]}{i}", z) for z in ZONES for i in range(1, 4))
    process = cluster._spawn(  # noqa: SLF001 - the harness's process table keeps its log on failure
        "deletion-costs",
        [sys.executable, "-m", "extender", "deletion-costs", f"--kubeconfig={cluster.kubeconfig}", "--interval=0.5"],
        env={"EXTENDER_LOG_LEVEL": "info"},
    )
    return process


def skew(api, ns: str, name: str) -> tuple[int, dict[str, int]]:  # noqa: ANN001
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}
    live = [p for p in pods(api, ns, f"app={name}") if not p["metadata"].get("deletionTimestamp")]
    counts = Counter({z: 0 for z in ZONES})
    counts.update(zone_of[p["spec"]["nodeName"]] for p in live)
    return max(counts.values()) - min(counts.values()), dict(sorted(counts.items()))


def ready_and_costed(api, ns: str, name: str) -> list[dict] | None:  # noqa: ANN001
    """The pods, once every one is Ready (the ReplicaSet controller removes not-ready pods before it
    reads any cost) and has a cost; else None."""
    live = pods(api, ns, f"app={name}")
    conditions = [(p.get("status") or {}).get("conditions") or () for p in live]
    ready = all(any(c.get("type") == "Ready" and c.get("status") == "True" for c in cs) for cs in conditions)
    return live if ready and all(COST in (p["metadata"].get("annotations") or {}) for p in live) else None


def caught_up(live: list[dict]) -> bool:
    """The controller's costs are the group's order as it stands: one per pod, 0..n-1 (positions)."""
    costs = sorted(((p.get("metadata") or {}).get("annotations") or {}).get(COST, "-") for p in live)
    return costs == sorted(str(i) for i in range(len(live)))


COST = "controller.kubernetes.io/pod-deletion-cost"
SPREAD = [{"topologyKey": ZONE, "maxSkew": 1}]
CAP = [{"topologyKey": ZONE, "max": 3}]


def run_once(cluster, ns: str, name: str, *, costs: bool, cap: bool = False) -> list[tuple[int, dict[str, int]]]:  # noqa: ANN001
    api = cluster.admin
    policy = {"group": {"selector": {"matchLabels": {"app": name}}}, "zones": {"allowed": ZONES}}
    policy.update({"caps": CAP} if cap else {"spread": SPREAD})
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(name, 9, policy=policy))
    wait_settled(api, ns, f"app={name}", 9, timeout=90)
    steps = [skew(api, ns, name)]
    for replicas in (4, 2):
        if costs:
            live = wait_for("every pod Ready with a deletion cost", lambda: ready_and_costed(api, ns, name), 30)
            if replicas == 4:
                # The README's promise: once the last new pod has a cost, every other pod's is the
                # whole group's order (not a pass that saw fewer pods bound).
                assert caught_up(live), [(p["spec"]["nodeName"], p["metadata"]["annotations"][COST]) for p in live]
            else:  # the survivors keep their old positions (consistent) until the next pass renumbers them
                wait_for("the costs renumbered", lambda: caught_up(ready_and_costed(api, ns, name) or [{}]), 30)
        api.merge_patch(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", {"spec": {"replicas": replicas}})
        wait_settled(api, ns, f"app={name}", replicas, timeout=60)
        steps.append(skew(api, ns, name))
    return steps


def test_scale_down_keeps_the_zone_spread_with_the_controller(cluster, controller, scenario) -> None:  # noqa: ANN001
    results = []
    for run in range(RUNS):
        ns = cluster.namespace(f"sd-on-{run}")
        results.append(run_once(cluster, ns, "web", costs=True))
    broken = [(run, steps) for run, steps in enumerate(results) if any(s > 1 for s, _ in steps)]
    scenario.repetitions = RUNS
    scenario.pods_placed = 9 * RUNS
    scenario.violations = len(broken)
    scenario.note = "with the controller, zones after 9/4/2: " + "; ".join(
        "/".join(",".join(str(c) for c in counts.values()) for _, counts in steps) for steps in results
    )
    assert not broken, broken


def test_scale_down_under_a_per_zone_cap_removes_from_the_fullest_zone(cluster, controller, scenario) -> None:  # noqa: ANN001
    """A cap cannot be broken by deleting; what the controller adds is the order: the fullest zone
    first, so after 9 -> 4 -> 2 no zone holds more than one pod above another (the cap's zones stay
    as even as the counts allow), 5 runs."""
    results = []
    for run in range(RUNS):
        results.append(run_once(cluster, cluster.namespace(f"sd-cap-{run}"), "capped", costs=True, cap=True))
    over_cap = [(run, steps) for run, steps in enumerate(results) if any(max(c.values()) > 3 for _, c in steps)]
    uneven = [(run, steps) for run, steps in enumerate(results) if any(s > 1 for s, _ in steps)]
    scenario.repetitions, scenario.pods_placed, scenario.violations = RUNS, 9 * RUNS, len(over_cap)
    scenario.note = "per-zone cap 3, zones after 9/4/2: " + "; ".join(
        "/".join(",".join(str(c) for c in counts.values()) for _, counts in steps) for steps in results
    )
    assert not over_cap and not uneven, (over_cap, uneven)


def test_without_the_controller_the_replicaset_picks_blindly(cluster, controller, scenario) -> None:  # noqa: ANN001
    controller.stop()
    steps = run_once(cluster, cluster.namespace("sd-off"), "web", costs=False)
    scenario.repetitions, scenario.pods_placed = 1, 9
    scenario.violations = sum(1 for s, _ in steps if s > 1)
    scenario.note = "without it, zones after 9/4/2: " + "/".join(",".join(str(c) for c in c.values()) for _, c in steps)

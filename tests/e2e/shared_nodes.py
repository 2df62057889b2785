"""The shared-nodes burst, for both modes' scenarios: a Deployment under the default
scheduler and a StatefulSet (Parallel) through the extender, 40 pods of 1 CPU each, created at the
same moment onto 2 zones x 5 nodes of 4 CPU (40 CPU in all), everything read from the API server."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import NodeSpec

from .workloads import create_statefulset, pods, statefulset

REPLICAS = 40
NODE_CPU = 4
ZONE = "topology.kubernetes.io/zone"


def burst_nodes(cluster, rep: str) -> list[str]:  # noqa: ANN001
    """10 nodes of 4 CPU in zones <rep>-a and <rep>-b, labelled burst=<rep>."""
    specs = [
        NodeSpec(f"{rep}-{z}{i}", f"{rep}-{z}", labels={"burst": rep}, cpu=str(NODE_CPU))
        for z in "ab"
        for i in range(5)
    ]
    return cluster.add_nodes(specs)


def _one_cpu(pod_spec: dict[str, Any], rep: str) -> None:
    pod_spec["nodeSelector"] = {"burst": rep}
    pod_spec["containers"][0]["resources"] = {"requests": {"cpu": "1"}}


def native_deployment(rep: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/web:1"}],
    }
    _one_cpu(spec, rep)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "native"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "native"}},
            "template": {"metadata": {"labels": {"app": "native"}}, "spec": spec},
        },
    }


def extender_statefulset(rep: str, *, scheduler: str, opt_in: str | None = None) -> dict[str, Any]:
    """The extender's workload, with a permissive policy (its own zones allowed)."""
    policy = {"zones": {"allowed": [f"{rep}-a", f"{rep}-b"]}}
    manifest = statefulset("placed", REPLICAS, policy=policy, scheduler=scheduler, parallel=True)
    pod_spec = manifest["spec"]["template"]["spec"]
    _one_cpu(pod_spec, rep)
    if opt_in is not None:
        pod_spec["containers"][0]["resources"]["requests"][opt_in] = "1"
        pod_spec["containers"][0]["resources"]["limits"] = {opt_in: "1"}
    return manifest


def over_allocatable(api: Api, nodes: list[str]) -> dict[str, int]:
    """Node -> CPU requested beyond its allocatable, by the pods bound there (any scheduler)."""
    wanted = set(nodes)
    used: Counter[str] = Counter()
    for p in api.list("/api/v1/pods"):
        node = p["spec"].get("nodeName")
        if node in wanted and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in p["spec"]["containers"]:
                cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
                used[node] += int(cpu) if cpu and cpu.isdigit() else 0
    return {n: used[n] - NODE_CPU for n in sorted(wanted) if used[n] > NODE_CPU}


def run_burst(api: Api, ns: str, nodes: list[str], native: dict, placed: dict, settle: float = 4.0) -> dict[str, Any]:
    """Create both workloads at once; wait until every pod exists and the bound count has not moved
    for `settle` seconds; the CPU over allocatable and the pods bound, per workload."""
    started = time.monotonic()
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", native)
    create_statefulset(api, ns, placed)
    last: tuple[int, float] = (-1, time.monotonic())

    def settled() -> bool:
        nonlocal last
        items = pods(api, ns)
        bound = sum(1 for p in items if p["spec"].get("nodeName"))
        now = time.monotonic()
        if bound != last[0]:
            last = (bound, now)
        return len(items) >= 2 * REPLICAS and now - last[1] >= settle

    wait_for("the burst to settle", settled, 180, interval=0.5)
    items = pods(api, ns)
    bound = Counter(p["metadata"]["labels"].get("app") for p in items if p["spec"].get("nodeName"))
    over = over_allocatable(api, nodes)
    return {
        "over_cpu": sum(over.values()),
        "nodes_over": len(over),
        "bound": dict(bound),
        "seconds": round(time.monotonic() - started, 1),
    }


def clean(api: Api, ns: str) -> None:
    api.delete(f"/apis/apps/v1/namespaces/{ns}/deployments/native")
    api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/placed")
    wait_for("the burst's pods gone", lambda: not pods(api, ns), 120)

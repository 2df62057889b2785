"""Drains keep every hard rule, read from the API server.

A Deployment of 6 (`group.selector` on its app label) on 3 zones x 3 nodes, drained 6 times one
pod at a time as `kubectl drain` does it: cordon the pod's node, evict the pod through the
Eviction API. A finalizer holds each evicted pod Terminating for 4 s (a graceful shutdown), so
its replacement is decided while the old pod still sits on its node. Then the finalizer goes,
the old pod with it, and the node is uncordoned for the next drain.

1. Zone spread maxSkew 1: after each drain, once the old pod is gone, the skew is at most 1 and
   `audit` exits 0 (also while the old pod is still terminating: audit judges a spread by the pods
   that stay). While a spread still counted the terminating pod, 5 of 6 such drains ended with
   skew 2.
2. Per-node cap of 1: a sampler reads the pods every 0.2 s throughout, and no node ever holds two
   of the group's pods, the terminating one included.

Both: every replacement is placed (no pod left Pending).

3. A Deployment's spread without `group.selector` is refused with a message naming the fix.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec

from .workloads import POLICY_ANNOTATION as POLICY
from .workloads import Sampler, cli, deployment, pods, wait_settled

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ["dr-a", "dr-b", "dr-c"]
HOLD = "e2e.placement.example.com/hold"  # the finalizer that keeps an evicted pod Terminating
HOLD_SECONDS = 4  # well past the replacement's placement (about 1 s), which is what must happen meanwhile
DRAINS = 6  # two per zone; when a spread counted the terminating pod, 5 of 6 drains ended at skew 2


@pytest.fixture(scope="module")
def drain_nodes(cluster):  # noqa: ANN001
    return cluster.add_nodes(NodeSpec(f"{z}{i}", z) for z in ZONES for i in range(1, 4))


def _policy(name: str, rule: dict) -> dict:
    return {"group": {"selector": {"matchLabels": {"app": name}}}, "zones": {"allowed": ZONES}, **rule}


def _zone_of(api) -> dict[str, str | None]:  # noqa: ANN001
    return {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}


def _live(api, ns: str, name: str) -> list[dict]:  # noqa: ANN001
    return [p for p in pods(api, ns, f"app={name}") if not p["metadata"].get("deletionTimestamp")]


def _skew(api, ns: str, name: str) -> tuple[int, dict[str, int]]:  # noqa: ANN001
    zone_of = _zone_of(api)
    counts = Counter(dict.fromkeys(ZONES, 0))
    counts.update(zone_of[p["spec"]["nodeName"]] for p in _live(api, ns, name) if p["spec"].get("nodeName"))
    return max(counts.values()) - min(counts.values()), dict(sorted(counts.items()))


def _drain_one(api, ns: str, name: str, victim: dict, checks) -> None:  # noqa: ANN001
    """Cordon the victim's node, evict it held by the finalizer, let `checks` look while it is
    Terminating and its replacement placed, then release it and uncordon."""
    pod_path = f"/api/v1/namespaces/{ns}/pods/{victim['metadata']['name']}"
    node = victim["spec"]["nodeName"]
    api.merge_patch(pod_path, {"metadata": {"finalizers": [HOLD]}})
    api.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": victim["metadata"]["name"], "namespace": ns},
    }
    api.create(f"{pod_path}/eviction", eviction)
    started = time.monotonic()
    wait_for(
        "the replacement placed", lambda: len([p for p in _live(api, ns, name) if p["spec"].get("nodeName")]) == 6, 60
    )
    checks()
    time.sleep(max(0.0, HOLD_SECONDS - (time.monotonic() - started)))
    assert api.get(pod_path)["metadata"].get("deletionTimestamp"), "the evicted pod was held Terminating"
    api.merge_patch(pod_path, {"metadata": {"finalizers": None}})
    wait_for(
        "the evicted pod gone",
        lambda: victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in pods(api, ns, f"app={name}")},
        60,
    )
    api.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": False}})


def _count(scenario, skews: list[int], api, ns: str, name: str, drain: int) -> None:  # noqa: ANN001
    """One drain's outcome, read from the API server: the zone skew of the pods that stay."""
    skew, counts = _skew(api, ns, name)
    skews.append(skew)
    scenario.repetitions += 1
    scenario.pods_placed += 1
    scenario.violations += int(skew > 1)
    assert skew <= 1, (drain, counts)


def _victims(api, ns: str, name: str, count: int) -> list[dict]:  # noqa: ANN001
    """The next pod to drain: round the zones, so every zone is drained in turn."""
    zone_of = _zone_of(api)
    live = sorted(_live(api, ns, name), key=lambda p: p["metadata"]["name"])
    zone = ZONES[count % len(ZONES)]
    here = [p for p in live if zone_of.get(p["spec"].get("nodeName")) == zone]
    return here or live


def test_graceful_drains_keep_a_zone_spread(cluster, scenario, drain_nodes) -> None:  # noqa: ANN001
    api, name = cluster.admin, "drained-spread"
    ns = cluster.namespace(name)
    spread = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(name, 6, policy=_policy(name, spread)))
    wait_settled(api, ns, f"app={name}", 6, timeout=90)
    skews = []

    def while_terminating() -> None:
        skew, counts = _skew(api, ns, name)
        assert skew <= 1, f"the spread once the terminating pod is gone: {counts}"
        audit = cli(cluster, "audit", "-n", ns)
        assert audit.returncode == 0, audit.stdout + audit.stderr

    for drain in range(DRAINS):
        _drain_one(api, ns, name, _victims(api, ns, name, drain)[0], while_terminating)
        _count(scenario, skews, api, ns, name, drain)
        audit = cli(cluster, "audit", "-n", ns)
        assert audit.returncode == 0, audit.stdout + audit.stderr
    scenario.note = f"zone skew after each of {DRAINS} drains (held {HOLD_SECONDS} s): {skews}"


def test_graceful_drains_never_double_a_node_under_a_cap_of_one(cluster, scenario, drain_nodes) -> None:  # noqa: ANN001
    api, name = cluster.admin, "drained-cap"
    ns = cluster.namespace(name)
    cap = {"caps": [{"topologyKey": HOST, "max": 1}]}
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(name, 6, policy=_policy(name, cap)))
    wait_settled(api, ns, f"app={name}", 6, timeout=90)

    def most_on_one_node() -> int:
        on = Counter(p["spec"]["nodeName"] for p in pods(api, ns, f"app={name}") if p["spec"].get("nodeName"))
        return max(on.values(), default=0)

    with Sampler(most_on_one_node) as sampler:
        for drain in range(DRAINS):
            _drain_one(api, ns, name, _victims(api, ns, name, drain)[0], lambda: None)
            scenario.repetitions += 1
            scenario.pods_placed += 1
    samples = [v for _, v in sampler.samples if isinstance(v, int)]
    doubled = sum(1 for v in samples if v > 1)
    scenario.violations += doubled
    scenario.note = (
        f"{len(samples)} samples of the pods, every 0.2 s through {DRAINS} drains: {doubled} with a node doubled"
    )
    assert samples and doubled == 0, f"{doubled} of {len(samples)} samples saw two of the group on one node"
    assert len(_live(api, ns, name)) == 6 and all(p["spec"].get("nodeName") for p in _live(api, ns, name))


def test_a_deployment_spread_without_a_selector_is_refused_with_the_fix(cluster, scenario, drain_nodes) -> None:  # noqa: ANN001
    """A Deployment's pods are no StatefulSet's: without group.selector each would be a group of
    one and the spread would do nothing (it once placed 4/2/0 with audit saying ok). Each pod is
    refused with a message naming group.selector, and audit lists the workload; with the
    selector written into the template, the rollout places the spread."""
    api, name = cluster.admin, "no-selector"
    ns = cluster.namespace(name)
    rule = {"zones": {"allowed": ZONES}, "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    api.create(path, deployment(name, 6, policy=rule))

    def told() -> list[str]:
        waiting = [p for p in pods(api, ns, f"app={name}") if not p["spec"].get("nodeName")]
        said = [
            c.get("message", "")
            for p in waiting
            for c in (p.get("status") or {}).get("conditions") or ()
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ]
        return said if len(said) == 6 and all("group.selector" in m for m in said) else []

    said = wait_for("6 pods told to set group.selector", told, 60)
    assert all(p["spec"].get("nodeName") is None for p in pods(api, ns, f"app={name}")), "none placed"
    audit = cli(cluster, "audit", "-n", ns)
    assert audit.returncode == 1 and "group.selector" in audit.stdout, audit.stdout + audit.stderr
    fixed = {**rule, "group": {"selector": {"matchLabels": {"app": name}}}}
    annotation = {POLICY: json.dumps(fixed)}
    api.merge_patch(f"{path}/{name}", {"spec": {"template": {"metadata": {"annotations": annotation}}}})
    wait_for("6 new pods placed", lambda: len([p for p in _live(api, ns, name) if p["spec"].get("nodeName")]) == 6, 120)
    wait_for("the old pods gone", lambda: len(pods(api, ns, f"app={name}")) == 6, 60)
    skew, counts = _skew(api, ns, name)
    scenario.repetitions += 1
    scenario.pods_placed += 6
    scenario.violations += int(skew > 1)
    scenario.note = f"refused: {said[0][:80]}...; with the selector: {counts}"
    assert skew <= 1, counts
    assert cli(cluster, "audit", "-n", ns).returncode == 0


def _counter(port: int, name: str) -> dict[str, float]:
    """A counter's series from the extender's /metrics, by their label text."""
    import requests

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        line.split("{", 1)[1].rsplit("}", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{")
    }


def test_drains_with_no_grace_period_keep_the_spread(cluster, scenario, drain_nodes) -> None:  # noqa: ANN001
    """The old pod gone at once, its replacement created at once: the replacement's filter may
    run before the extender's watch shows the deletion (1 drain in 10 broke the spread so before
    the bind waited). The bind waits for the watch to show the replacement, so its re-check counts the
    deletion; the summary gives how many binds waited, and for how many it mattered."""
    api, name = cluster.admin, "drained-fast"
    ns = cluster.namespace(name)
    spread = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}
    api.create(f"/apis/apps/v1/namespaces/{ns}/deployments", deployment(name, 6, policy=_policy(name, spread)))
    wait_settled(api, ns, f"app={name}", 6, timeout=90)
    port = cluster.ports["extender"]
    waits_before, binds_before = (
        _counter(port, "extender_bind_watch_waits_total"),
        _counter(port, "extender_binds_total"),
    )
    skews = []
    for drain in range(DRAINS):
        victim = _victims(api, ns, name, drain)[0]
        api.delete(f"/api/v1/namespaces/{ns}/pods/{victim['metadata']['name']}", gracePeriodSeconds="0")
        wait_for(
            "the replacement placed",
            lambda: len([p for p in _live(api, ns, name) if p["spec"].get("nodeName")]) == 6,
            60,
        )
        _count(scenario, skews, api, ns, name, drain)
    waits = {k: v - waits_before.get(k, 0) for k, v in _counter(port, "extender_bind_watch_waits_total").items()}
    binds = {k: v - binds_before.get(k, 0) for k, v in _counter(port, "extender_binds_total").items()}
    scenario.note = f"zone skew after each of {DRAINS} drains (0 s grace): {skews}; bind waits {waits}, binds {binds}"
    print(f"\n{scenario.note}")

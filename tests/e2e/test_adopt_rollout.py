"""Adopting a running StatefulSet completes its rollout, and retiring it leaves nothing.

3 zones x 2 nodes, a StatefulSet of 6 without volumes placed by the default scheduler one pod a
node (required anti-affinity on the hostname), zone by zone: the zones are opened one at a time
(the others cordoned), so ordinals 0 and 1 land in the first zone opened, 2 and 3 in the second,
4 and 5 in the third, which no rotation explains. `adopt` with ordinal zones and a per-node cap
of 1 then starts a rolling update in which every recreated pod has one free node, the one it
left. Before, the filter accepted only the ordinal's rotation zone and such a rollout
stopped at its second pod for good (2 of 4 runs).

5 runs, each with its zones opened in another order (so other ordinals sit outside the
rotation), run side by side: `adopt` prints the rollout it checked and exits 0, the rollout
completes (every pod recreated, placed by the extender, on a node), `audit` exits 0. Then
`retire`: its rollout completes under the default scheduler, and `audit` exits 0 (the pods are no
longer the extender's; their inert annotation is not held against them).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, NodeSpec

from .workloads import cli, create_statefulset, pods, scheduled_by, statefulset

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ORDERS = ["abc", "bca", "cab", "acb", "bac"]


def _set_cordon(api, nodes: list[str], cordoned: bool) -> None:  # noqa: ANN001
    for node in nodes:
        api.merge_patch(f"/api/v1/nodes/{node}", {"spec": {"unschedulable": cordoned}})


def _rolled(api, ns: str, name: str, scheduler: str) -> list[dict] | None:  # noqa: ANN001
    """The set's 6 pods, once its rollout is done and each is bound and of `scheduler`."""
    sts = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}")
    status = sts.get("status") or {}
    if status.get("observedGeneration") != sts["metadata"]["generation"]:
        return None
    if status.get("updateRevision") != status.get("currentRevision") or status.get("updatedReplicas") != 6:
        return None
    live = [p for p in pods(api, ns, f"app={name}") if not p["metadata"].get("deletionTimestamp")]
    done = len(live) == 6 and all(p["spec"].get("nodeName") and p["spec"]["schedulerName"] == scheduler for p in live)
    return live if done else None


@dataclass
class RunningSet:
    """A StatefulSet of 6 placed by the default scheduler zone by zone, outside any rotation."""

    ns: str
    zones: dict[str, str]
    manifest: dict
    zone_of: dict[str, str]  # node -> zone
    before: dict[str, str]  # pod -> zone


def running_outside_rotation(cluster, name: str, opened: str) -> RunningSet:  # noqa: ANN001
    """3 zones x 2 nodes named after `name`; the set's pods placed one a node by the default
    scheduler, its zones opened in the order `opened` (the others cordoned meanwhile)."""
    api = cluster.admin
    zones = {z: f"{name}-{z}" for z in "abc"}
    nodes = {z: [f"{name}-{z}{i}" for i in (1, 2)] for z in "abc"}
    cluster.add_nodes(NodeSpec(n, zones[z]) for z in "abc" for n in nodes[z])
    ns = cluster.namespace(name)
    _set_cordon(api, [n for z in opened[1:] for n in nodes[z]], True)
    manifest = statefulset(name, 6, scheduler="default-scheduler", parallel=False)
    manifest["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": HOST}
            ]
        },
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones.values())}]}
                ]
            }
        },
    }
    create_statefulset(api, ns, manifest)
    for count, zone in zip((2, 4, 6), opened, strict=True):
        if count > 2:
            _set_cordon(api, nodes[zone], False)
        wait_for(
            f"{count} pods placed",
            lambda count=count: len([p for p in pods(api, ns, f"app={name}") if p["spec"].get("nodeName")]) == count,
            120,
        )
    zone_of = {n: zones[z] for z in "abc" for n in nodes[z]}
    before = {p["metadata"]["name"]: zone_of[p["spec"]["nodeName"]] for p in pods(api, ns, f"app={name}")}
    return RunningSet(ns, zones, manifest, zone_of, before)


def _one_run(cluster, run: int, tmp_path, results: dict) -> None:  # noqa: ANN001
    api = cluster.admin
    name = f"adopt{run}"
    opened = ORDERS[run % len(ORDERS)]
    running = running_outside_rotation(cluster, name, opened)
    ns, zones, zone_of, before = running.ns, running.zones, running.zone_of, running.before
    policy = {
        "ordinalZones": {},
        "zones": {"allowed": sorted(zones.values())},
        "caps": [{"topologyKey": HOST, "max": 1}],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(policy))
    sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"
    template = api.get(sts_path)["spec"]["template"]
    dry = cli(cluster, "adopt", f"statefulset/{name}", "-n", ns, "--policy-file", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert api.get(sts_path)["spec"]["template"] == template, "--dry-run wrote nothing"
    assert not api.list(f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations")
    adopted = cli(cluster, "adopt", f"statefulset/{name}", "-n", ns, "--policy-file", str(path))
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    checked = [line for line in adopted.stdout.splitlines() if "rollout:" in line]
    assert checked == [line for line in dry.stdout.splitlines() if "rollout:" in line], "the dry run shows the same"
    assert adopted.stdout.count(" -> its own node") == 6, adopted.stdout  # the rollout it checked
    after = wait_for("the adoption's rollout to complete", lambda: _rolled(api, ns, name, SCHEDULER_NAME), 240)
    assert all(SCHEDULER_NAME in scheduled_by(api, ns, p["metadata"]["name"]) for p in after)
    audit = cli(cluster, "audit", "-n", ns)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    placed = {p["metadata"]["name"]: zone_of[p["spec"]["nodeName"]] for p in after}
    retired = cli(cluster, "retire", f"statefulset/{name}", "-n", ns)
    assert retired.returncode == 0, retired.stdout + retired.stderr
    wait_for("the retirement's rollout to complete", lambda: _rolled(api, ns, name, "default-scheduler"), 240)
    audit_after = cli(cluster, "audit", "-n", ns)
    assert audit_after.returncode == 0, audit_after.stdout + audit_after.stderr
    results[run] = (opened, before, placed, adopted.stdout)


def test_adoption_rollouts_complete_and_retire_leaves_nothing(cluster, scenario, tmp_path) -> None:  # noqa: ANN001
    results: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            _one_run(cluster, k, tmp_path, results)
        except BaseException as err:  # reported below, with the run it came from
            errors.append(err)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(ORDERS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[0]
    assert len(results) == len(ORDERS)
    scenario.repetitions = len(results)
    scenario.pods_placed = 6 * len(results)
    moved = sum(before[p] != placed[p] for _, before, placed, _ in results.values() for p in before)
    outside = [line for *_, out in results.values() for line in out.splitlines() if "rotation:" in line]
    scenario.note = (
        f"{len(results)} adoptions (zones opened {', '.join(ORDERS)}), every rollout complete, audit 0 after adopt "
        f"and after retire; pods that changed zone: {moved}; {len(outside)} runs had ordinals kept outside the rotation"
    )
    assert moved == 0, "nothing running moves: each recreated pod returns to its zone"

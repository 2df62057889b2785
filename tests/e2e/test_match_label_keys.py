"""A Deployment rolls under a per-node cap of 1 with group.matchLabelKeys.

3 replicas on exactly 3 nodes, at most 1 of the group's pods per node, rolling update with
maxSurge 1 and maxUnavailable 0. Counted together, the new revision's first pod finds every node
holding an old pod and the rollout stalls; with matchLabelKeys [pod-template-hash] each revision
is counted apart and the rollout completes, every new pod on its own node.
"""

from __future__ import annotations

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import zoned_nodes

from .workloads import deployment, pods

pytestmark = pytest.mark.e2e

POLICY = {
    "group": {"selector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]},
    "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}],
}


def test_rolling_update_completes_with_one_pod_per_node(cluster, scenario) -> None:
    cluster.add_nodes(zoned_nodes({"zone-a": 3}))
    ns = cluster.namespace("rolling")
    api = cluster.admin
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    api.create(path, deployment("web", 3, policy=POLICY))

    def rolled(generation_hash: str | None = None):
        d = api.get(f"{path}/web")
        status = d.get("status") or {}
        if d["metadata"].get("generation") != status.get("observedGeneration"):
            return None
        done = all(status.get(k) == 3 for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"))
        live = [p for p in pods(api, ns, "app=web") if not p["metadata"].get("deletionTimestamp")]
        hashes = {p["metadata"]["labels"].get("pod-template-hash") for p in live}
        if done and len(live) == 3 and len(hashes) == 1 and hashes != {generation_hash}:
            return live
        return None

    first = wait_for("3 ready pods", rolled, 120)
    old_hash = first[0]["metadata"]["labels"]["pod-template-hash"]
    api.merge_patch(f"{path}/web", {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}})
    final = wait_for("the rollout to complete", lambda: rolled(old_hash), 240)
    nodes = [p["spec"]["nodeName"] for p in final]
    scenario.repetitions += 1
    scenario.pods_placed += len(final)
    scenario.violations += len(nodes) - len(set(nodes))
    assert len(set(nodes)) == 3, nodes

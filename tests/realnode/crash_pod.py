"""One pod of the pause image on a cluster's real node, bound by name (no scheduler needed), and
awaited Running and Ready: the containers, shim, veth and mounts a crash would leave."""

from __future__ import annotations

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import LocalCluster

from .harness import PAUSE_IMAGE


def run_pod(cluster: LocalCluster, name: str) -> None:
    api = cluster.admin
    node = cluster.real_node
    assert api is not None and node is not None
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node.name,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}],
        },
    }
    # The controller manager makes the namespace's ServiceAccount a moment after it starts.
    wait_for("the default ServiceAccount", lambda: api.get("/api/v1/namespaces/default/serviceaccounts/default"), 60)
    api.create("/api/v1/namespaces/default/pods", pod)

    def ready() -> bool:
        status = api.get(f"/api/v1/namespaces/default/pods/{name}").get("status") or {}
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())

    wait_for(f"pod {name} Running and Ready on the real node", ready, 120, 0.5)

"""Karpenter's kwok provider on the local control plane: the autoscaler of the autoscaling scenario.

Built from the Go module proxy by hack/karpenter/build.sh (cached outside the repo beside the
Kubernetes binaries). The harness applies its CRDs, one KWOKNodeClass (marked Ready: nothing in
the kwok provider sets its status) and a NodePool per scenario, then runs the binary against the
admin kubeconfig with leader election off. The nodes it creates are Node objects annotated for
kwok, which the control plane's kwok controller (--manage-all-nodes) makes Ready.
"""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]
NODECLASS = "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
ZONES = ("test-zone-a", "test-zone-b", "test-zone-c")  # zones the kwok provider's instance types offer
SCENARIO_LABEL = "e2e.placement.extender.dev/scenario"
NODEPOOL_LABEL = "karpenter.sh/nodepool"


def build() -> Path:
    """The cached build (hack/karpenter/build.sh prints its directory last)."""
    out = subprocess.run(
        [str(REPO / "hack" / "karpenter" / "build.sh")], capture_output=True, text=True, check=False, timeout=3600
    )
    if out.returncode != 0:
        raise RuntimeError(f"hack/karpenter/build.sh failed:\n{out.stderr[-3000:]}")
    return Path(out.stdout.strip().splitlines()[-1])


def start(cluster: LocalCluster, directory: Path) -> None:
    """CRDs, the node class, and the controller."""
    api = cluster.admin
    assert api is not None
    cluster.kubectl("apply", "--server-side", "-f", str(directory / "crds"))
    for crd in ("nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "kwoknodeclasses.karpenter.kwok.sh"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd}")
    api.ensure(
        NODECLASS,
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}},
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": now,
                "observedGeneration": 1,
            }
        ]
    }
    api.merge_patch(f"{NODECLASS}/default/status", {"status": status})
    ports = _free_ports(2)
    cluster._spawn(  # noqa: SLF001 - the harness's own process table, so its log is kept on failure
        "karpenter",
        [str(directory / "karpenter-kwok")],
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "DISABLE_LEADER_ELECTION": "true",
            "SYSTEM_NAMESPACE": "kube-system",
            "METRICS_PORT": str(ports[0]),
            "HEALTH_PROBE_PORT": str(ports[1]),
            "LOG_LEVEL": "debug",
            "BATCH_IDLE_DURATION": "1s",
            "BATCH_MAX_DURATION": "5s",
        },
    )


def nodepool(cluster: LocalCluster, scenario: str) -> None:
    """A NodePool over the three zones whose nodes carry the scenario's label (pods select it),
    on-demand linux only, never consolidated or expired during the run."""
    api = cluster.admin
    assert api is not None
    api.ensure(
        NODEPOOLS,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": scenario},
            "spec": {
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
                "limits": {"cpu": "1000"},
                "template": {
                    "metadata": {"labels": {SCENARIO_LABEL: scenario}},
                    "spec": {
                        "expireAfter": "Never",
                        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                        "requirements": [
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES)},
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    },
                },
            },
        },
    )

    def ready() -> bool:
        pool = api.get(f"{NODEPOOLS}/{scenario}")
        conditions = {c["type"]: c["status"] for c in (pool.get("status") or {}).get("conditions") or ()}
        return conditions.get("Ready") == "True"

    wait_for(f"NodePool {scenario} Ready", ready, 90)


def created_nodes(cluster: LocalCluster, scenario: str) -> list[dict[str, Any]]:
    api = cluster.admin
    assert api is not None
    return api.list("/api/v1/nodes", labelSelector=f"{NODEPOOL_LABEL}={scenario}")


def nodeclaims(cluster: LocalCluster, scenario: str) -> list[dict[str, Any]]:
    api = cluster.admin
    assert api is not None
    return api.list(NODECLAIMS, labelSelector=f"{NODEPOOL_LABEL}={scenario}")


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def settle(seconds: float) -> None:
    time.sleep(seconds)

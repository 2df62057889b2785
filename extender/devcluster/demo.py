"""The main job: the extender serving a local control plane with a sample workload.

`make demo` / `python -m extender dev up` builds (or reuses) the pinned binaries, starts the
control plane, creates fake nodes over zones with zonal volumes, applies a CockroachDB-style
StatefulSet that opts in (ordinal zones, one pod per node), prints where its pods landed, and
keeps everything running, with the kubeconfig path, until you stop it.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

from .api import wait_for
from .cluster import SCHEDULER_NAME, STORAGE_CLASS, LocalCluster, zoned_nodes
from .report import node_zones, placements, zone_table

SAMPLE_POLICY = """\
ordinalZones: {}
caps:
  - topologyKey: kubernetes.io/hostname
    max: 1
"""


def sample_statefulset(name: str = "crdb", replicas: int = 6) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"placement.extender.dev/policy": SAMPLE_POLICY}},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "containers": [{"name": "db", "image": "cockroachdb/cockroach:v23.1.0"}],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "datadir"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": STORAGE_CLASS,
                        "resources": {"requests": {"storage": "10Gi"}},
                    },
                }
            ],
        },
    }


# What the demo tells you to try, after the two export lines (tests/e2e/test_demo_handover.py runs
# each of them, as printed, against the demo cluster).
TRY = (
    "kubectl -n demo get pods -o wide",
    "kubectl placement audit -n demo",
    "kubectl placement explain crdb-0 -n demo",
    "kubectl placement plan statefulset/crdb --replicas 9 -n demo",
    "kubectl -n demo scale statefulset crdb --replicas=3",
)


def handover(kubeconfig: Path | str, bin_dir: Path) -> list[str]:
    """The lines that hand the running demo over to the user's shell: the kubeconfig and PATH
    exports (kubectl from the pinned binaries, the `kubectl placement` plugin from this Python's
    environment), then the commands to try, each working as printed once the exports are pasted."""
    plugin_dir = Path(sys.executable).parent
    return [
        "In another shell, paste these two lines, then try the commands below them:",
        f"  export KUBECONFIG={kubeconfig}",
        f"  export PATH={bin_dir}:{plugin_dir}:$PATH",
        *(f"  {command}" for command in TRY),
    ]


def run(
    zones: int = 3, nodes_per_zone: int = 2, replicas: int = 6, workdir: Path | None = None, wait: bool = True
) -> int:
    names = [f"zone-{chr(ord('a') + i)}" for i in range(zones)]
    print(f"Starting a local control plane ({zones} zones x {nodes_per_zone} nodes)...", flush=True)
    with LocalCluster(workdir) as cluster:
        api = cluster.admin
        assert api is not None
        cluster.add_nodes(zoned_nodes({z: nodes_per_zone for z in names}))
        for zone in names:
            cluster.add_zonal_volumes(zone, replicas)
        namespace = cluster.namespace("demo")
        api.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", sample_statefulset("crdb", replicas))

        def all_running() -> bool:
            pods = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector="app=crdb")
            return len(pods) == replicas and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

        wait_for(f"{replicas} crdb pods Running", all_running, 120)
        print()
        print(f"StatefulSet demo/crdb ({replicas} replicas, ordinal zones, at most 1 per node) landed:")
        print(zone_table(placements(api, namespace, "app=crdb"), node_zones(api)))
        print()
        print("\n".join(handover(cluster.kubeconfig, Path(str(cluster.bin_dir)))))
        print(f"extender: http://127.0.0.1:{cluster.ports['extender']}/readyz   logs: {cluster.log_dir}")
        if not wait:
            return 0
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # before saying so: a stop right after is clean too
            signal.signal(sig, lambda *_: stop.set())
        print("Running until you press Ctrl-C (or send SIGTERM).", flush=True)
        while not stop.wait(1.0):
            dead = [p.name for p in cluster.processes if not p.alive]
            if dead:
                print(f"component(s) exited: {', '.join(dead)}; see {cluster.log_dir}", file=sys.stderr)
                return 1
        print("Stopping the control plane...")
    return 0

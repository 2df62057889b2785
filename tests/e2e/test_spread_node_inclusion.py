"""A zone spread honours the pod's nodeSelector, as native nodeAffinityPolicy Honor.

A StatefulSet of 6 whose pods select 2 of 3 zones by nodeSelector (pool=db), zone spread maxSkew 1
DoNotSchedule: zone-c, which the pods can never use, is no eligible domain, so all 6 place, 3 per
selected zone (before, 2 placed and the rest stayed Pending behind zone-c's 0). The same scenario
runs under the native scheduler with translate's output (config/ab/nodeselector-two-zones.yaml),
and the two agree. `audit` judges the spread over the same eligible domains: it exits 0 (it used
to count zone-c as an empty domain and report a zone skew of 3).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from extender.cli.commands import main
from extender.devcluster.cluster import REPO, NodeSpec

from .workloads import create_statefulset, node_zones, statefulset, wait_settled

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
POOLS = {"zone-a": "db", "zone-b": "db", "zone-c": "web"}
SPREAD = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}


def test_statefulset_pinned_to_two_zones_places_all_six(cluster, scenario) -> None:
    cluster.add_nodes(NodeSpec(f"node-{z[-1]}{i}", z, {"pool": pool}) for z, pool in POOLS.items() for i in (1, 2))
    ns = cluster.namespace("pinned")
    manifest = statefulset("crdb", 6, policy=SPREAD)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "db"}
    create_statefulset(cluster.admin, ns, manifest)
    placed = wait_settled(cluster.admin, ns, "app=crdb", 6, timeout=180)
    zones = node_zones(cluster.admin)
    per_zone = Counter(zones[p["spec"]["nodeName"]] for p in placed)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += 0 if per_zone == {"zone-a": 3, "zone-b": 3} else 1
    assert per_zone == {"zone-a": 3, "zone-b": 3}

    audit = subprocess.run(
        [sys.executable, "-m", "extender", "audit", "-n", ns, "--json", f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    (group,) = json.loads(audit.stdout)["groups"]
    assert group["group"] == "StatefulSet crdb" and group["violations"] == [] and len(group["placed"]) == 6


def test_ab_native_and_extender_agree(tmp_path: Path, scenario) -> None:
    path = REPO / "config" / "ab" / "nodeselector-two-zones.yaml"
    assert main(["ab", str(path), "-k", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "ab-nodeselector-two-zones.json").read_text())
    finals = {}
    for side, data in result["sides"].items():
        (run,) = data["runs"]
        assert data["summary"]["pending"] == 0, side
        assert data["summary"]["violations"] == 0, side  # the checker sees zone-c as no domain, as both sides do
        finals[side] = Counter(node.split("-")[1][0] for node in run["final"].values() if node)
        scenario.pods_placed += sum(finals[side].values())
    scenario.repetitions += 2
    # node-a1 -> "a": both sides put 3 pods in each selected zone and none in zone-c
    assert finals["native"] == finals["extender"] == {"a": 3, "b": 3}
    scenario.note = f"native {dict(finals['native'])}, extender {dict(finals['extender'])}"

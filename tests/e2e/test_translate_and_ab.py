"""`translate` and `ab` on the real control plane: translate's output is accepted by the API server as part
of a workload (and the default scheduler places it), and `ab` measures both sides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from extender.api.policy import PlacementPolicySpec
from extender.cli.commands import main
from extender.devcluster.cluster import REPO, zoned_nodes
from extender.ops.translate import translate

from .workloads import create_statefulset, statefulset, wait_settled

pytestmark = pytest.mark.e2e


def test_translated_fragment_is_accepted_and_scheduled_natively(cluster) -> None:
    cluster.add_nodes(zoned_nodes({"zone-a": 2, "zone-b": 2, "zone-c": 2}))
    ns = cluster.namespace("translated")
    spec = yaml.safe_load((REPO / "config" / "examples" / "redis-cluster-3az.yaml").read_text())["spec"]
    spec["zones"]["allowed"] = ["zone-a", "zone-b", "zone-c"]
    fragment = translate(PlacementPolicySpec.model_validate(spec), group_size=6).fragment
    for shard in range(3):
        manifest = statefulset(f"redis-{shard}", 2, labels={"cluster": "redis-a"}, scheduler="default-scheduler")
        manifest["spec"]["template"]["spec"].update(fragment)
        dry = cluster.kubectl(
            "apply", "-n", ns, "--dry-run=server", "-f", "-", input=yaml.safe_dump(manifest), check=False
        )
        assert dry.returncode == 0, dry.stderr
        create_statefulset(cluster.admin, ns, manifest)
    placed = wait_settled(cluster.admin, ns, "cluster=redis-a", 6)
    stored = cluster.admin.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/redis-0")["spec"]["template"]["spec"]
    assert [c["maxSkew"] for c in stored["topologySpreadConstraints"]][:2] == [
        1,
        2,
    ]  # the NetEase Redis design's fragment, kept as sent
    assert len(placed) == 6


def test_ab_runs_both_sides_and_reports_every_field(tmp_path: Path, scenario) -> None:
    assert main(["ab", str(REPO / "config" / "ab" / "netease-deadlock.yaml"), "-k", "3", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "ab-netease-deadlock.json").read_text())
    assert set(result["sides"]) == {"native", "extender"}
    for side in result["sides"].values():
        assert set(side["summary"]) == {
            "runs",
            "runsWithViolations",
            "violations",
            "runsWithPending",
            "pending",
            "emptiedZones",
            "maxSkew",
            "medianSecondsToPlace",
        }
        assert side["summary"]["runs"] == 3 and len(side["runs"]) == 3
        for run in side["runs"]:
            assert {
                "violations",
                "pending",
                "emptiedZones",
                "maxSkew",
                "secondsToPlace",
                "steps",
                "arrival",
                "final",
            } <= set(run)
            assert len(run["arrival"]) == 6 and set(run["maxSkew"]) == {
                "kubernetes.io/hostname",
                "topology.kubernetes.io/zone",
            }
    extender = result["sides"]["extender"]["summary"]
    assert extender["violations"] == 0 and extender["pending"] == 0
    png = tmp_path / "ab-netease-deadlock.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scenario.repetitions = 6
    scenario.pods_placed = sum(
        len([n for n in r["final"].values() if n]) for s in result["sides"].values() for r in s["runs"]
    )
    scenario.violations = extender["violations"]
    native = result["sides"]["native"]["summary"]
    scenario.note = f"native: {native['violations']} violations, {native['pending']} pending; extender: 0 and 0"


def test_translate_reads_a_live_statefulset(cluster) -> None:
    import subprocess
    import sys

    ns = cluster.namespace("translate-live")
    create_statefulset(
        cluster.admin,
        ns,
        statefulset(
            "crdb", 3, policy={"ordinalZones": {}, "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]}
        ),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "extender",
            "translate",
            "statefulset/crdb",
            "-n",
            ns,
            f"--kubeconfig={cluster.kubeconfig}",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["groupSize"] == 3 and out["source"] == "StatefulSet crdb"
    gaps = {g["rule"] for g in out["gaps"]}
    assert "ordinalZones" in gaps and "caps" not in gaps, gaps  # a cap of 1 has an exact native form
    (anti,) = out["fragment"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    selectors = {json.dumps(c["labelSelector"], sort_keys=True) for c in out["fragment"]["topologySpreadConstraints"]}
    assert selectors == {json.dumps({"matchLabels": {"app": "crdb"}}, sort_keys=True)}

"""GitOps: a workload adopted from its manifest, applied with `kubectl apply -f`, places exactly as
a live `adopt` does.

A running StatefulSet of 6 placed by the default scheduler one pod a node, zone by zone (zones
opened b, c, a, so ordinals run outside the rotation, as in test_adopt_rollout.py). The team's
manifest (the one the test created the set from) goes through `adopt -f`: no live edit, every
object printed as YAML. The printed objects must equal what the live `adopt --dry-run -o yaml`
prints for the same set (its ZoneRotation, which keeps the running pods in their zones, and the
template's additions); applied with `kubectl apply -f`, the rollout completes with every pod
back in its zone, placed by the extender's scheduler, and `audit` exits 0.
"""

from __future__ import annotations

import json

import pytest
import yaml

from extender.api.policy import IMPLIED_ANNOTATION, INLINE_POLICY_ANNOTATION
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME

from .test_adopt_rollout import HOST, _rolled, running_outside_rotation
from .workloads import cli

pytestmark = pytest.mark.e2e

EXTENDER_FIELDS = ("schedulerName", "affinity", "topologySpreadConstraints", "schedulingGates", "tolerations")


def _documents(stdout: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(stdout) if d}


def _additions(workload: dict) -> dict:
    """What adopt writes into the template: its annotations and the scheduling fields."""
    template = workload["spec"]["template"]
    annotations = template["metadata"].get("annotations") or {}
    return {
        "annotations": {k: annotations.get(k) for k in (IMPLIED_ANNOTATION, INLINE_POLICY_ANNOTATION)},
        **{k: template["spec"].get(k) for k in EXTENDER_FIELDS},
    }


def test_a_workload_adopted_from_its_manifest_places_as_a_live_adopt(cluster, scenario, tmp_path) -> None:  # noqa: ANN001
    api = cluster.admin
    name = "gitops"
    running = running_outside_rotation(cluster, name, "bca")
    ns, zones, manifest, zone_of, before = running.ns, running.zones, running.manifest, running.zone_of, running.before
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "ordinalZones": {},
                "zones": {"allowed": sorted(zones.values())},
                "caps": [{"topologyKey": HOST, "max": 1}],
            }
        )
    )
    committed = tmp_path / "statefulset.yaml"  # the team's manifest, as in git
    committed.write_text(yaml.safe_dump({**manifest, "metadata": {**manifest["metadata"], "namespace": ns}}))
    sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/{name}"
    template = api.get(sts_path)["spec"]["template"]

    live = cli(
        cluster, "adopt", f"statefulset/{name}", "-n", ns, "--policy-file", str(policy), "--dry-run", "-o", "yaml"
    )
    assert live.returncode == 0, live.stdout + live.stderr
    from_file = cli(cluster, "adopt", "-f", str(committed), "--policy-file", str(policy))
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    assert api.get(sts_path)["spec"]["template"] == template, "adopt -f wrote nothing"
    assert not api.list(f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations")
    live_docs, file_docs = _documents(live.stdout), _documents(from_file.stdout)
    assert set(file_docs) == {"ZoneRotation", "StatefulSet"}, from_file.stdout
    assert file_docs["ZoneRotation"]["spec"] == live_docs["ZoneRotation"]["spec"], (live.stdout, from_file.stdout)
    assert file_docs["ZoneRotation"]["spec"]["adopted"], "ordinals run outside the rotation: kept by the record"
    assert _additions(file_docs["StatefulSet"]) == _additions(live_docs["StatefulSet"])
    assert "status" not in file_docs["StatefulSet"] and "uid" not in file_docs["StatefulSet"]["metadata"]

    applied = cluster.kubectl("apply", "-f", "-", input=from_file.stdout)
    assert applied.returncode == 0, applied.stderr
    after = wait_for("the rollout applying it starts", lambda: _rolled(api, ns, name, SCHEDULER_NAME), 240)
    placed = {p["metadata"]["name"]: zone_of[p["spec"]["nodeName"]] for p in after}
    moved = {p: (before[p], placed[p]) for p in before if before[p] != placed[p]}
    audit = cli(cluster, "audit", "-n", ns)
    record = api.list(f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations")
    scenario.pods_placed = 6
    scenario.note = (
        f"adopt -f on the committed manifest: its ZoneRotation "
        f"(adopted {file_docs['ZoneRotation']['spec']['adopted']}) "
        f"and template additions equal to the live adopt's; applied with kubectl apply -f: rollout complete, "
        f"{len(moved)} pods changed zone, audit exit {audit.returncode}"
    )
    print(f"\n{scenario.note}")
    assert not moved, moved
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert [r["spec"] for r in record] == [file_docs["ZoneRotation"]["spec"]]

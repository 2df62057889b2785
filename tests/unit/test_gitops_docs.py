"""docs/how-to/gitops.md's offline commands, run as written (bash, in a team's repository made
here, no cluster): adopt offline into a component whose folder holds the committed policy and
record, kubectl's kustomize builds it, retire rewrites it and kustomize builds the native form."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extender.api.policy import ORDINAL_ZONE_GATE, ZONE_ROTATION_ANNOTATION, ZONE_ROTATION_DECLARED

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "gitops.md"
HOST = "kubernetes.io/hostname"

STATEFULSET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "crdb", "namespace": "db"},
    "spec": {
        "replicas": 9,
        "serviceName": "crdb",
        "selector": {"matchLabels": {"app": "crdb"}},
        "template": {
            "metadata": {"labels": {"app": "crdb"}},
            "spec": {
                "containers": [{"name": "crdb", "image": "registry.invalid/crdb:1"}],
                "tolerations": [{"key": "team.example/db", "operator": "Exists"}],
            },
        },
    },
}
POLICY = {
    "apiVersion": "placement.extender.dev/v1alpha1",
    "kind": "PlacementPolicy",
    "metadata": {"name": "crdb", "namespace": "db"},
    "spec": {"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]},
}
RECORD = {  # as `rotation export` printed it
    "apiVersion": "placement.extender.dev/v1alpha1",
    "kind": "ZoneRotation",
    "metadata": {"name": "crdb", "namespace": "db", "annotations": {"argocd.argoproj.io/sync-wave": "-1"}},
    "spec": {"statefulSet": "crdb", "order": ["zone-b", "zone-c", "zone-a"], "adopted": {"0": "zone-a"}},
}


def block(marker: str) -> str:
    found = re.search(rf"<!-- {re.escape(marker)}:[^>]*-->\n```sh\n(.*?)```", PAGE.read_text(), re.S)
    assert found, f"{PAGE} has no `<!-- {marker}: ... -->` sh block"
    return found.group(1)


@pytest.fixture(scope="module")
def path_with_tools() -> str:
    """PATH with this interpreter as `python` and the pinned kubectl first."""
    from extender.devcluster.cluster import kube_binaries

    return os.pathsep.join([str(Path(sys.executable).parent), str(kube_binaries()), os.environ.get("PATH", "")])


def run(commands: str, cwd: Path, path: str) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        cwd=cwd,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"$ {commands}\n{done.stdout}{done.stderr}"


def built(cwd: Path, path: str) -> dict[str, dict]:
    out = subprocess.run(
        ["kubectl", "kustomize", "apps/db"], cwd=cwd, env={**os.environ, "PATH": path}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}


def test_the_pages_offline_adopt_and_retire_run_as_written(tmp_path: Path, path_with_tools: str) -> None:
    app = tmp_path / "apps" / "db"
    (app / "placement").mkdir(parents=True)
    (app / "statefulset.yaml").write_text(yaml.safe_dump(STATEFULSET))
    (app / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["statefulset.yaml"], "components": ["placement"]})
    )
    (app / "placement" / "placementpolicy.yaml").write_text(yaml.safe_dump(POLICY))
    (app / "placement" / "zonerotation.yaml").write_text(yaml.safe_dump(RECORD))

    run(block("gitops-offline"), tmp_path, path_with_tools)
    objects = built(tmp_path, path_with_tools)
    assert sorted(objects) == ["PlacementPolicy", "StatefulSet", "ZoneRotation"]
    assert objects["ZoneRotation"]["spec"] == RECORD["spec"], "the committed record, unchanged"
    template = objects["StatefulSet"]["spec"]["template"]
    assert template["metadata"]["annotations"][ZONE_ROTATION_ANNOTATION] == ZONE_ROTATION_DECLARED
    assert {"name": ORDINAL_ZONE_GATE} in template["spec"]["schedulingGates"]
    assert yaml.safe_load((app / "statefulset.yaml").read_text()) == STATEFULSET, "the team's file untouched"

    run(block("gitops-retire"), tmp_path, path_with_tools)
    objects = built(tmp_path, path_with_tools)
    template = objects["StatefulSet"]["spec"]["template"]
    assert template["spec"]["schedulerName"] == "default-scheduler" and "schedulingGates" not in template["spec"]
    assert ZONE_ROTATION_ANNOTATION not in template["metadata"]["annotations"]
    assert template["spec"]["tolerations"] == STATEFULSET["spec"]["template"]["spec"]["tolerations"]
    assert objects["ZoneRotation"]["spec"] == RECORD["spec"]

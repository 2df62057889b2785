"""Issue 16: the Helm chart (deploy/helm/placement-scheduler) installs what `kubectl apply -k
deploy/` does. Its templates are generated from deploy/ (hack/helm/generate.py); here the pinned
helm binary (hack/helm/build.sh, cached outside the repo) lints it, renders it with default values
and each switch, and the API server accepts the rendering in a server-side dry-run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extender.devcluster.cluster import REPO, serves_gate_admission

pytestmark = pytest.mark.e2e

CHART = REPO / "deploy" / "helm" / "placement-scheduler"
GATE_ADMISSION_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"


def served(cluster) -> tuple[str, ...]:  # noqa: ANN001
    """The API versions the chart asks about that this minor's API server serves."""
    return (GATE_ADMISSION_API,) if serves_gate_admission(cluster.admin) else ()


@pytest.fixture(scope="module")
def helm() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def objects(text: str) -> dict[tuple[str, str, str], dict]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for doc in docs:  # the chart's one addition (hack/helm/generate.py KEEP): uninstall keeps the namespace
        annotations = doc["metadata"].get("annotations") or {}
        kept = doc["kind"] == "Namespace" and annotations.pop("helm.sh/resource-policy", None) == "keep"
        if kept and not annotations:
            del doc["metadata"]["annotations"]
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def template(helm: Path, *values: str, api_versions: tuple[str, ...] = ()) -> str:
    """`helm template` with `values`, and the API versions the cluster serves beyond helm's
    defaults (what `helm install` reads from the cluster itself)."""
    args = [str(helm), "template", "placement", str(CHART), "--namespace", "placement-system"]
    for version in api_versions:
        args += ["--api-versions", version]
    for value in values:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_templates_are_generated_from_deploy(cluster) -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "hack/helm/generate.py"), "--kubectl", str(cluster.bin_dir / "kubectl"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_helm_lint_passes(helm) -> None:
    out = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    "values,kustomization,extra",
    [
        ((), "deploy", None),
        (("tls.enabled=true",), "deploy/overlays/tls", None),
        (("audit.enabled=true",), "deploy", "deploy/optional/audit"),
        (("scaleDown.enabled=true",), "deploy", "deploy/optional/scale-down"),
        (("inScheduler.enabled=true",), "deploy/overlays/in-scheduler", None),
    ],
    ids=["defaults", "tls", "audit", "scale-down", "in-scheduler"],
)
def test_the_chart_renders_the_same_objects_as_kustomize(cluster, helm, values, kustomization, extra) -> None:
    """In-scheduler: the overlay for the minor (its MutatingAdmissionPolicy from 1.36, which the
    chart renders where the cluster serves it)."""
    if kustomization.endswith("in-scheduler") and not served(cluster):
        kustomization += "-before-1.36"
    wanted = objects(cluster.kubectl("kustomize", str(REPO / kustomization)).stdout)
    if extra:  # an optional install on top: `kubectl apply -k deploy/optional/<name>/`
        wanted.update(objects(cluster.kubectl("kustomize", str(REPO / extra)).stdout))
    # kustomize carries the Namespace; the chart does with createNamespace=true (by default the
    # first `helm install --create-namespace` makes it: Helm keeps its release record there)
    assert objects(template(helm, *values, "createNamespace=true", api_versions=served(cluster))) == wanted


def test_values_reach_the_objects(helm) -> None:
    rendered = objects(
        template(
            helm,
            "image.repository=reg.example/placement-extender",
            "image.tag=1.2.3",
            "scheduler.image.tag=v1.34.4",
            "replicas=3",
            "resources.extender.limits.memory=2Gi",
        )
    )
    deployment = rendered[("Deployment", "placement-system", "placement-scheduler")]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert deployment["spec"]["replicas"] == 3
    assert containers["kube-scheduler"]["image"] == "registry.k8s.io/kube-scheduler:v1.34.4"
    assert containers["extender"]["image"] == "reg.example/placement-extender:1.2.3"
    assert containers["extender"]["resources"]["limits"]["memory"] == "2Gi"
    assert not any(kind == "Namespace" for kind, _, _ in rendered)


@pytest.mark.parametrize(
    "values",
    [(), ("tls.enabled=true",), ("audit.enabled=true",), ("scaleDown.enabled=true",), ("inScheduler.enabled=true",)],
    ids=["defaults", "tls", "audit", "scale-down", "in-scheduler"],
)
def test_the_rendered_chart_passes_a_server_side_dry_run(cluster, helm, values) -> None:
    rendered = template(helm, *values, api_versions=served(cluster))
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr

"""The Helm chart (deploy/helm/placement-scheduler) installs what `kubectl apply -k deploy/` does,
in the release's namespace, configured as a platform team expects. Its templates are generated from
deploy/ (hack/helm/generate.py); here the pinned helm binary (hack/helm/build.sh, cached outside the
repo) lints it, renders it with default values and each switch (equal to kustomize's objects), the
API server accepts the rendering in a server-side dry-run, the schema refuses a typo, the pod values
reach every pod template, in-scheduler mode's admission policy renders offline and fails loudly on a
cluster without it; then the chart is installed into another namespace (every object there, the
admission policies holding that namespace's identities), uninstalled and installed again with every
PlacementPolicy and ZoneRotation kept; last, an install made with `kubectl apply -k` is taken over
(docs/install/index.md). The chart's own README.md says what each of these promises."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.devcluster.api import ApiError, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, LocalCluster, serves_gate_admission

pytestmark = pytest.mark.e2e

CHART = REPO / "deploy" / "helm" / "placement-scheduler"
GATE_ADMISSION_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"
# What Helm reads from a cluster that serves admissionregistration.k8s.io/v1 but not its
# MutatingAdmissionPolicy (1.34, 1.35): kinds beside the group/version, which offline defaults lack.
WITHOUT_GATE_ADMISSION = ("admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",)
GATE_VALUE = "inScheduler.placeableGate.admissionPolicy"
OTHER = "platform-scheduling"  # the namespace a platform team picked, not deploy/'s
HOOK_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job")
# The installs on this control plane: no hook Job (the `installed` fixture says why).
INSTALL = ("install", "placement", str(CHART), "--set", "labelNamespace=false")


def gate_values(cluster: LocalCluster) -> tuple[str, ...]:
    """The value an in-scheduler install on this minor sets: the admission policy off where the
    API server does not serve it (as deploy/overlays/in-scheduler-before-1.36)."""
    return () if serves_gate_admission(cluster.admin) else (f"{GATE_VALUE}=false",)


@pytest.fixture(scope="module")
def helm() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def is_hook(doc: dict[str, Any]) -> bool:
    return "helm.sh/hook" in (doc["metadata"].get("annotations") or {})


def objects(text: str) -> dict[tuple[str, str, str], dict]:
    """The rendered objects by (kind, namespace, name), without what the chart adds to deploy/'s
    (hack/helm/generate.py): uninstall keeps the Namespace and the CRDs; the namespace-label hook."""
    docs = [d for d in yaml.safe_load_all(text) if d and not is_hook(d)]
    for doc in docs:
        annotations = doc["metadata"].get("annotations") or {}
        kept = doc["kind"] in ("Namespace", "CustomResourceDefinition")
        if kept and annotations.pop("helm.sh/resource-policy", None) == "keep" and not annotations:
            del doc["metadata"]["annotations"]
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}


def render(
    helm: Path,
    *values: str,
    api_versions: tuple[str, ...] = (),
    files: tuple[Path, ...] = (),
    namespace: str = SYSTEM_NAMESPACE,
) -> subprocess.CompletedProcess[str]:
    """`helm template` with `values` (--set) and value `files`, and the API versions a cluster would
    report beyond helm's offline defaults (what `helm install` reads from the cluster itself)."""
    args = [str(helm), "template", "placement", str(CHART), "--namespace", namespace]
    for version in api_versions:
        args += ["--api-versions", version]
    for file in files:
        args += ["-f", str(file)]
    for value in values:
        args += ["--set", value]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def template(helm: Path, *values: str, **options: Any) -> str:
    out = render(helm, *values, **options)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_templates_are_generated_from_deploy(cluster) -> None:  # noqa: ANN001
    out = subprocess.run(
        [sys.executable, str(REPO / "hack/helm/generate.py"), "--kubectl", str(cluster.bin_dir / "kubectl"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_helm_lint_passes(helm) -> None:  # noqa: ANN001
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
        (("monitoring.serviceMonitors=true",), "deploy", "deploy/optional/monitoring"),
    ],
    ids=["defaults", "tls", "audit", "scale-down", "in-scheduler", "monitoring"],
)
def test_the_chart_renders_the_same_objects_as_kustomize(cluster, helm, values, kustomization, extra) -> None:  # noqa: ANN001
    """In-scheduler: the overlay for the minor (without its MutatingAdmissionPolicy before 1.36,
    where the chart's value leaves it out too)."""
    gate = gate_values(cluster) if kustomization.endswith("in-scheduler") else ()
    if gate:
        kustomization += "-before-1.36"
    wanted = objects(cluster.kubectl("kustomize", str(REPO / kustomization)).stdout)
    if extra:  # an optional install on top: `kubectl apply -k deploy/optional/<name>/`
        wanted.update(objects(cluster.kubectl("kustomize", str(REPO / extra)).stdout))
    # kustomize carries the Namespace; the chart does with createNamespace=true (by default the
    # first `helm install --create-namespace` makes it: Helm keeps its release record there)
    assert objects(template(helm, *values, *gate, "createNamespace=true")) == wanted


def test_values_reach_the_objects(helm) -> None:  # noqa: ANN001
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


def test_the_extender_image_tag_defaults_to_the_charts_app_version(helm) -> None:  # noqa: ANN001
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    rendered = objects(template(helm))
    deployment = rendered[("Deployment", "placement-system", "placement-scheduler")]
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images["extender"] == f"placement-extender:{app_version}"


# ------------------------------------------------------------------ the schema refuses a typo

TYPOS = [
    ("replica=3",),
    ("image.tga=1.2.3",),
    ("tls.enable=true",),
    ("inScheduler.placeableGate.admisionPolicy=false",),
]


@pytest.mark.parametrize("values", TYPOS, ids=lambda v: v[0].split("=")[0])
def test_a_typo_is_refused_by_helm_template(helm, values) -> None:  # noqa: ANN001
    out = render(helm, *values)
    assert out.returncode != 0, out.stdout[:500]
    wrong = values[0].split("=")[0].rsplit(".", 1)[-1]
    assert "additional properties" in out.stderr.lower() and wrong in out.stderr, out.stderr


@pytest.mark.parametrize("values", TYPOS[:2], ids=lambda v: v[0].split("=")[0])
def test_a_typo_is_refused_by_helm_lint(helm, values) -> None:  # noqa: ANN001
    args = [str(helm), "lint", "--strict", str(CHART)]
    for value in values:
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "additional properties" in (out.stdout + out.stderr).lower(), out.stdout


def test_the_schema_is_draft_07_and_accepts_the_defaults() -> None:
    import jsonschema

    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(yaml.safe_load((CHART / "values.yaml").read_text()), schema)

    def closed(node: dict, where: str) -> None:  # every object the schema defines refuses other keys
        if "properties" in node:
            assert node.get("additionalProperties") is False, where
            for name, child in node["properties"].items():
                closed(child, f"{where}.{name}")
        if isinstance(node.get("items"), dict):
            closed(node["items"], f"{where}[]")

    closed(schema, "values")


# ------------------------------------------------------------------ the pod values, on every pod template

POD_VALUES: dict[str, Any] = {
    "image": {"repository": "reg.example/platform/placement-extender", "digest": "sha256:" + "a" * 64},
    "scheduler": {"image": {"repository": "reg.example/platform/kube-scheduler", "digest": "sha256:" + "b" * 64}},
    "imagePullSecrets": [{"name": "platform-pull"}],
    "nodeSelector": {"pool": "system"},
    "tolerations": [{"key": "pool", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]}]
            }
        }
    },
    "priorityClassName": "platform-critical",
    "podAnnotations": {"team.example/owner": "platform"},
    "podLabels": {"team.example/cost-center": "infra"},
}


def pod_templates(text: str) -> dict[str, dict]:
    """Every pod template rendered, by its object's kind/name."""
    found = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        if doc["kind"] in ("Deployment", "Job"):
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc["spec"]["template"]
        elif doc["kind"] == "CronJob":
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc["spec"]["jobTemplate"]["spec"]["template"]
    return found


INSTALLS = {
    "sidecar": ("audit.enabled=true", "scaleDown.enabled=true"),
    "tls": ("tls.enabled=true",),
    "in-scheduler": ("inScheduler.enabled=true",),
}
EXPECTED_PODS = {
    "sidecar": {
        "Deployment/placement-scheduler",
        "CronJob/placement-audit",
        "Deployment/placement-scale-down",
        "Job/placement-namespace-labels",
    },
    "tls": {"Deployment/placement-scheduler", "Deployment/placement-extender", "Job/placement-namespace-labels"},
    "in-scheduler": {"Deployment/placement-extender", "Job/placement-namespace-labels"},
}


@pytest.mark.parametrize("install", INSTALLS, ids=list(INSTALLS))
def test_the_pod_values_reach_every_pod_template(helm, tmp_path, install) -> None:  # noqa: ANN001
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(POD_VALUES))
    pods = pod_templates(template(helm, *INSTALLS[install], files=(values,)))
    assert set(pods) == EXPECTED_PODS[install]
    for name, pod in pods.items():
        spec = pod["spec"]
        assert spec["imagePullSecrets"] == POD_VALUES["imagePullSecrets"], name
        assert spec["nodeSelector"] == POD_VALUES["nodeSelector"], name
        assert spec["tolerations"] == POD_VALUES["tolerations"], name
        assert spec["affinity"]["nodeAffinity"] == POD_VALUES["affinity"]["nodeAffinity"], name
        assert spec["priorityClassName"] == "platform-critical", name
        assert pod["metadata"]["annotations"] == POD_VALUES["podAnnotations"], name
        assert pod["metadata"]["labels"]["team.example/cost-center"] == "infra", name
        assert "app.kubernetes.io/name" in pod["metadata"]["labels"] or name.startswith("CronJob"), name
        for container in spec["containers"]:
            wanted = (
                f"reg.example/platform/kube-scheduler@sha256:{'b' * 64}"
                if container["name"] == "kube-scheduler"
                else f"reg.example/platform/placement-extender@sha256:{'a' * 64}"
            )
            assert container["image"] == wanted, name
    if "Deployment/placement-scheduler" in pods:  # merged over its own spread, not replacing it
        spec = pods["Deployment/placement-scheduler"]["spec"]
        assert spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]


def test_by_default_only_the_scheduler_pods_are_system_cluster_critical(helm) -> None:  # noqa: ANN001
    for install, values in INSTALLS.items():
        pods = pod_templates(template(helm, *values))
        classes = {name: pod["spec"].get("priorityClassName") for name, pod in pods.items()}
        for name, priority in classes.items():
            wanted = "system-cluster-critical" if name == "Deployment/placement-scheduler" else None
            assert priority == wanted, (install, name)
    pods = pod_templates(template(helm, "priorityClassName="))
    assert "priorityClassName" not in pods["Deployment/placement-scheduler"]["spec"]


def test_the_namespace_label_hook_or_the_namespace_object_carries_the_pod_security_label(helm) -> None:  # noqa: ANN001
    """By default a hook labels the namespace `--create-namespace` made; with createNamespace=true
    the Namespace object carries the label and there is no hook; labelNamespace=false: neither."""
    docs = [d for d in yaml.safe_load_all(template(helm, namespace=OTHER)) if d]
    hooks = [d for d in docs if is_hook(d)]
    assert sorted(d["kind"] for d in hooks) == sorted(HOOK_KINDS)
    job = next(d for d in hooks if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "label-namespace",
        OTHER,
        "pod-security.kubernetes.io/enforce=restricted",
    ]
    [role] = [d for d in hooks if d["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": [OTHER], "verbs": ["patch"]}
    ]
    docs = [d for d in yaml.safe_load_all(template(helm, "createNamespace=true", namespace=OTHER)) if d]
    assert not [d for d in docs if is_hook(d)]
    [namespace] = [d for d in docs if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == OTHER
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    docs = [d for d in yaml.safe_load_all(template(helm, "labelNamespace=false", namespace=OTHER)) if d]
    assert not [d for d in docs if is_hook(d) or d["kind"] == "Namespace"]


@pytest.mark.parametrize(
    ("values", "mode"),
    [((), "sidecar"), (("tls.enabled=true",), "TLS"), (("inScheduler.enabled=true",), "in-scheduler")],
)
def test_the_notes_say_the_mode_the_namespace_the_images_and_what_next(helm, values, mode) -> None:  # noqa: ANN001
    args = [str(helm), "install", "placement", str(CHART), "-n", OTHER, "--dry-run=client"]
    for value in (*values, "image.repository=reg.example/placement-extender"):
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert f"Mode: {mode}." in notes and f"namespace {OTHER}" in notes
    assert f"reg.example/placement-extender:{app_version}" in notes
    assert f"kubectl -n {OTHER} get pods" in notes and "placement adopt" in notes
    if mode == "in-scheduler":
        assert "placement-in-scheduler-config" in notes and "--mode in-scheduler" in notes
    else:
        assert "registry.k8s.io/kube-scheduler:" in notes


# ------------------------------------------------------------------ in-scheduler mode's admission policy


def kinds(text: str) -> set[str]:
    return {d["kind"] for d in yaml.safe_load_all(text) if d}


def test_the_placeable_gate_policy_renders_offline(helm) -> None:  # noqa: ANN001
    """`helm template` without --api-versions (Helm's offline capabilities, group/versions only)."""
    rendered = kinds(template(helm, "inScheduler.enabled=true"))
    assert {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} <= rendered


def test_the_value_leaves_the_placeable_gate_policy_out(helm) -> None:  # noqa: ANN001
    rendered = kinds(
        template(helm, "inScheduler.enabled=true", f"{GATE_VALUE}=false", api_versions=WITHOUT_GATE_ADMISSION)
    )
    assert not {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} & rendered
    assert "Deployment" in rendered


def test_a_cluster_without_the_api_fails_the_render_naming_the_value(helm) -> None:  # noqa: ANN001
    out = render(helm, "inScheduler.enabled=true", api_versions=WITHOUT_GATE_ADMISSION)
    assert out.returncode != 0
    assert f"set {GATE_VALUE}=false" in out.stderr, out.stderr
    served = template(helm, "inScheduler.enabled=true", api_versions=(*WITHOUT_GATE_ADMISSION, GATE_ADMISSION_API))
    assert "MutatingAdmissionPolicy" in kinds(served)


# ------------------------------------------------------------------ against the API server


@pytest.mark.parametrize(
    "values",
    [(), ("tls.enabled=true",), ("audit.enabled=true",), ("scaleDown.enabled=true",), ("inScheduler.enabled=true",)],
    ids=["defaults", "tls", "audit", "scale-down", "in-scheduler"],
)
def test_the_rendered_chart_passes_a_server_side_dry_run(cluster, helm, values) -> None:  # noqa: ANN001
    gate = gate_values(cluster) if "inScheduler.enabled=true" in values else ()
    rendered = template(helm, *values, *gate)
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr


def run_helm(helm: Path, cluster: LocalCluster, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), f"--kubeconfig={cluster.kubeconfig}", *args], capture_output=True, text=True, timeout=timeout
    )


def test_the_hooks_command_labels_only_its_namespace(cluster, helm) -> None:  # noqa: ANN001
    """What the namespace-label hook's Job runs, run here as the hook's ServiceAccount (this control
    plane's kwok nodes complete a Job's pod without running it; tests/realnode/
    test_chart_on_real_node.py runs the real Job): the namespace gets deploy/'s Pod Security
    label, and the ServiceAccount may label no other namespace."""
    namespace, elsewhere = "hook-target", "hook-elsewhere"
    for name in (namespace, elsewhere):
        cluster.namespace(name)
    docs = [d for d in yaml.safe_load_all(template(helm, namespace=namespace)) if d and is_hook(d)]
    assert sorted(d["kind"] for d in docs) == sorted(HOOK_KINDS)
    job = next(d for d in docs if d["kind"] == "Job")
    rbac = [d for d in docs if d["kind"] != "Job"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(rbac))
    kubeconfig = cluster.service_account_kubeconfig(job["spec"]["template"]["spec"]["serviceAccountName"], namespace)
    [container] = job["spec"]["template"]["spec"]["containers"]
    command = [sys.executable, "-m", "extender", *container["args"], f"--kubeconfig={kubeconfig}"]

    def labelled(name: str) -> dict[str, str]:
        return cluster.admin.get(f"/api/v1/namespaces/{name}")["metadata"].get("labels") or {}

    def ran() -> subprocess.CompletedProcess[str] | None:  # RBAC takes a moment to reach the authorizer
        out = subprocess.run(command, capture_output=True, text=True)
        return out if out.returncode == 0 else None

    wait_for("the hook's command to succeed", ran, 30, 1)
    assert labelled(namespace)["pod-security.kubernetes.io/enforce"] == "restricted"
    other = [a.replace(namespace, elsewhere) if a == namespace else a for a in command]
    denied = subprocess.run(other, capture_output=True, text=True)
    assert denied.returncode != 0 and "forbidden" in denied.stderr.lower(), denied.stderr
    assert "pod-security.kubernetes.io/enforce" not in labelled(elsewhere)
    cluster.kubectl("delete", "-f", "-", input=yaml.safe_dump_all(rbac))


# ------------------------------------------------------------------ install, uninstall, install again
# Last in the module: they take away the harness's own copies of deploy/'s cluster-wide objects
# (CRDs, RBAC, admission policies), which a release cannot adopt.


def policy(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]},
    }


def rotation(namespace: str, name: str) -> dict[str, Any]:
    from extender.api.rotation import rotation_object

    return rotation_object(namespace, name, ("zone-a", "zone-b", "zone-c"), {})


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster, helm: Path) -> Iterator[str]:
    """`helm install -n OTHER --create-namespace` (the docs' command, another namespace) into a
    control plane without the harness's copies of the chart's objects. Without the namespace-label
    hook: this control plane runs no Job controller, so its Job would never finish (the hook's
    command is run above as its ServiceAccount; tests/realnode/test_chart_on_real_node.py installs
    with the hook, on a control plane running every controller)."""
    base = REPO / "deploy" / "base"
    files = [
        f
        for name in ("crd.yaml", "crd-zonerotation.yaml", "rbac.yaml", "admission.yaml", "flowschema.yaml")
        for f in ("-f", str(base / name))
    ]
    cluster.kubectl("delete", "--ignore-not-found", "--wait=true", *files)
    out = run_helm(helm, cluster, *INSTALL, "-n", OTHER, "--create-namespace")
    assert out.returncode == 0, out.stdout + out.stderr
    yield OTHER


def release_objects(helm: Path, cluster: LocalCluster) -> list[dict[str, Any]]:
    out = run_helm(helm, cluster, "get", "manifest", "placement", "-n", OTHER)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def test_every_namespaced_object_is_in_the_release_namespace(cluster, helm, installed) -> None:  # noqa: ANN001
    docs = release_objects(helm, cluster)
    elsewhere = {
        f"{d['kind']}/{d['metadata']['name']}": d["metadata"]["namespace"]
        for d in docs
        if d["metadata"].get("namespace") not in (None, installed)
    }
    # the one object deploy/ puts in kube-system: kube-scheduler reads the API server's authentication ConfigMap
    assert elsewhere == {"RoleBinding/placement-scheduler:extension-apiserver-authentication-reader": "kube-system"}
    text = yaml.safe_dump_all(docs)
    assert SYSTEM_NAMESPACE not in text, [line for line in text.splitlines() if SYSTEM_NAMESPACE in line][:5]
    for doc in docs:  # and each exists there
        if doc["metadata"].get("namespace") == installed:
            cluster.kubectl("get", "-n", installed, f"{doc['kind']}/{doc['metadata']['name']}")


def test_the_admission_policies_hold_the_release_namespaces_identities(cluster, helm, installed) -> None:  # noqa: ANN001
    for name in ("placement-extender-pod-writes", "placement-extender-bindings"):
        vap = cluster.admin.get(f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}")
        [condition] = vap["spec"]["matchConditions"]
        assert f"system:serviceaccount:{installed}:placement-scheduler" in condition["expression"]
        assert f"system:serviceaccount:{installed}:placement-extender" in condition["expression"]
    # and they are in force: the release's scheduler identity may not relabel a pod
    workload = cluster.namespace("vap-probe")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": workload},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    cluster.admin.ensure(f"/api/v1/namespaces/{workload}/pods", pod)
    kubeconfig = cluster.service_account_kubeconfig("placement-scheduler", installed, component="vap-probe")
    kubectl = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "-n", workload]

    answers: list[str] = []

    def denied() -> str | None:
        # a new value each time: a try the policy was not yet in force for changed the pod
        attempt = f"stolen=try-{len(answers)}"
        out = subprocess.run(
            [*kubectl, "label", "--overwrite", "pod", "probe", attempt], capture_output=True, text=True
        )
        answers.append(out.stdout + out.stderr)
        return out.stderr if out.returncode != 0 and "may not change a pod's labels" in out.stderr else None

    try:
        wait_for("the pod-writes policy denying the release's identity", denied, 60, 1)
    except TimeoutError:
        raise AssertionError(answers[-3:]) from None


def test_helm_reads_the_clusters_kinds_for_the_placeable_gate(cluster, helm, installed) -> None:  # noqa: ANN001
    """Where MutatingAdmissionPolicy v1 is served, the in-scheduler install renders it; elsewhere
    the same command fails naming the value (Helm read the cluster's kinds: an upgrade's
    server-side dry-run of the installed release, which writes nothing)."""
    out = run_helm(
        helm,
        cluster,
        "upgrade",
        "placement",
        str(CHART),
        "-n",
        installed,
        "--dry-run=server",
        "--set",
        "inScheduler.enabled=true",
    )
    if serves_gate_admission(cluster.admin):
        assert out.returncode == 0, out.stderr
        assert "kind: MutatingAdmissionPolicy" in out.stdout
    else:
        assert out.returncode != 0 and f"set {GATE_VALUE}=false" in out.stderr, out.stderr


def test_helm_install_refuses_a_typo_and_installs_nothing(cluster, helm, installed) -> None:  # noqa: ANN001
    out = run_helm(helm, cluster, "install", "typo", str(CHART), "-n", installed, "--set", "replica=3")
    assert out.returncode != 0 and "replica" in out.stderr, out.stderr
    listed = run_helm(helm, cluster, "list", "-n", installed, "-q")
    assert listed.stdout.split() == ["placement"], listed.stdout


def test_uninstall_then_install_keeps_every_policy_and_rotation(cluster, helm, installed) -> None:  # noqa: ANN001
    api = cluster.admin
    workload = cluster.namespace("kept-records")
    group = "/apis/placement.extender.dev/v1alpha1"
    for i in (1, 2):
        api.create(f"{group}/namespaces/{workload}/placementpolicies", policy(workload, f"db-{i}"))
        api.create(f"{group}/namespaces/{workload}/zonerotations", rotation(workload, f"db-{i}"))

    def names(plural: str) -> set[str]:
        return {o["metadata"]["name"] for o in api.list(f"{group}/namespaces/{workload}/{plural}")}

    out = run_helm(helm, cluster, "uninstall", "placement", "-n", installed, "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "placement-extender" not in {
        r["metadata"]["name"] for r in api.list("/apis/rbac.authorization.k8s.io/v1/clusterroles")
    }
    for crd in ("placementpolicies.placement.extender.dev", "zonerotations.placement.extender.dev"):
        kept = api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        assert kept["metadata"]["annotations"]["meta.helm.sh/release-namespace"] == installed
    assert names("placementpolicies") == {"db-1", "db-2"} and names("zonerotations") == {"db-1", "db-2"}

    out = run_helm(helm, cluster, *INSTALL, "-n", installed)
    assert out.returncode == 0, out.stdout + out.stderr
    assert names("placementpolicies") == {"db-1", "db-2"} and names("zonerotations") == {"db-1", "db-2"}
    manifest = {(d["kind"], d["metadata"]["name"]) for d in release_objects(helm, cluster)}
    assert ("CustomResourceDefinition", "placementpolicies.placement.extender.dev") in manifest
    try:
        api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts/placement-scheduler")
        raise AssertionError("the chart wrote into placement-system")
    except ApiError as err:
        assert err.status == 404


def test_an_install_made_with_kubectl_apply_is_taken_over(cluster, helm, installed) -> None:  # noqa: ANN001
    """`kubectl apply -k deploy/`, then the documented move to the chart: `helm install ...
    --take-ownership --force-conflicts` takes over every object and the fields kubectl set."""
    out = run_helm(helm, cluster, "uninstall", "placement", "-n", installed, "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    cluster.kubectl("apply", "-k", str(REPO / "deploy"))
    out = run_helm(helm, cluster, *INSTALL, "-n", SYSTEM_NAMESPACE, "--take-ownership", "--force-conflicts")
    assert out.returncode == 0, out.stdout + out.stderr
    out = run_helm(helm, cluster, "get", "manifest", "placement", "-n", SYSTEM_NAMESPACE)
    assert out.returncode == 0, out.stderr
    for doc in (d for d in yaml.safe_load_all(out.stdout) if d):
        namespace = doc["metadata"].get("namespace")
        found = cluster.kubectl(
            "get", *(("-n", namespace) if namespace else ()), f"{doc['kind']}/{doc['metadata']['name']}", "-o", "json"
        )
        annotations = json.loads(found.stdout)["metadata"].get("annotations") or {}
        assert annotations.get("meta.helm.sh/release-namespace") == SYSTEM_NAMESPACE, doc["metadata"]["name"]

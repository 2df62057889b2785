"""Every shipped manifest proven against the real API server.

- deploy/ and the TLS overlay pass a server-side dry-run apply;
- the CRD (installed from deploy/ by the harness) makes the API server reject a bad policy with
  a message naming the field;
- SubjectAccessReviews: the scheduler pod's one ServiceAccount may do what both its containers
  need and nothing dangerous beyond kube-scheduler's own preemption; the TLS overlay's separate
  extender identity may do what the extender needs and nothing dangerous at all;
- the e2e extender and placement scheduler run under that ServiceAccount's tokens, one each.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from extender.api.policy import PolicyError, parse_spec
from extender.devcluster.api import Api, ApiError, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE, serves_gate_admission
from extender.kube.versions import SUPPORTED_MINORS
from extender.limits import IN_SCHEDULER_DECISION_DEADLINE
from extender.state.watcher import RESOURCES

pytestmark = pytest.mark.e2e

# deploy/base: one identity for the scheduler's pod (kube-scheduler and the extender sidecar)
SCHEDULER = f"system:serviceaccount:{SYSTEM_NAMESPACE}:placement-scheduler"
# deploy/overlays/tls: the extender in its own pods, under its own identity
EXTENDER = f"system:serviceaccount:{SYSTEM_NAMESPACE}:placement-extender"
AUDITOR = f"system:serviceaccount:{SYSTEM_NAMESPACE}:placement-auditor"
SCALE_DOWN = f"system:serviceaccount:{SYSTEM_NAMESPACE}:placement-scale-down"
POLICIES = f"/apis/placement.extender.dev/v1alpha1/namespaces/{SYSTEM_NAMESPACE}/placementpolicies"


INSTALLS = ["deploy", "deploy/overlays/tls", "deploy/overlays/in-scheduler", "deploy/overlays/in-scheduler-before-1.36"]


@pytest.mark.parametrize("path", INSTALLS)
def test_manifests_pass_server_side_dry_run(cluster, path: str) -> None:
    """Each install on this minor; the in-scheduler overlay's MutatingAdmissionPolicy only where the
    API server serves it (1.36+): before, the API server refuses it, and the -before-1.36 overlay is
    the one the docs give (and it passes)."""
    if path.endswith("in-scheduler") and not serves_gate_admission(cluster.admin):
        result = cluster.kubectl("apply", "--dry-run=server", "-k", str(REPO / path), check=False)
        # kubectl names the kind ("no matches for kind MutatingAdmissionPolicy"), or, when its
        # discovery lists the group version but the API server serves no such resource there,
        # says only NotFound (seen once on 1.35.4); the -before-1.36 overlay, below, passes
        refused = ("MutatingAdmissionPolicy", "the server could not find the requested resource")
        assert result.returncode != 0 and any(r in result.stderr for r in refused), result.stderr
        without_gate = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / path)).stdout) if d]
        without_gate = [d for d in without_gate if not d["kind"].startswith("MutatingAdmissionPolicy")]
        retried = cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(without_gate), check=False
        )
        assert retried.returncode == 0, f"refused for more than the MutatingAdmissionPolicy: {retried.stderr}"
        return
    rendered = cluster.kubectl("kustomize", str(REPO / path)).stdout
    docs = list(yaml.safe_load_all(rendered))
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ClusterRole", "ConfigMap", "CustomResourceDefinition"} <= kinds
    if "in-scheduler" in path:  # no second kube-scheduler, nor its identity
        names = {(d["kind"], d["metadata"]["name"]) for d in docs}
        assert ("Deployment", "placement-extender") in names and ("Service", "placement-extender") in names
        assert not [n for n in names if "placement-scheduler" in n[1]], names
    else:
        assert "PodDisruptionBudget" in kinds
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", ["deploy", "deploy/overlays/tls", "deploy/overlays/in-scheduler"])
def test_each_identity_is_bound_only_to_the_roles_its_install_runs(cluster, path: str) -> None:
    """The extender's role (reads, bindings, pod patches, events, records) goes to the identity
    that runs the extender: the scheduler pod's in the default install (its sidecar), the
    extender's own in the TLS and in-scheduler installs, where the scheduler's identity keeps
    kube-scheduler's roles alone (it once kept the extender's role it no longer used)."""
    docs = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / path)).stdout) if d]
    holders = {
        s["name"]
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == "placement-extender"
        for s in d["subjects"]
    }
    assert holders == ({"placement-scheduler"} if path == "deploy" else {"placement-extender"}), holders


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
def test_version_overlays_render_the_matching_scheduler(cluster, tmp_path, minor: str) -> None:
    """deploy/overlays/kube-<minor>/ (and its component over the TLS overlay, as the README shows)
    run the kube-scheduler hack/kube pins for that minor, and pass a server-side dry-run."""
    gomod = (REPO / "hack" / "kube" / f"v{minor}" / "go.mod").read_text()
    pin = next(line.split()[1] for line in gomod.splitlines() if line.strip().startswith("k8s.io/kubernetes v"))
    mine = tmp_path / "my-deploy"
    mine.mkdir()
    deploy = REPO / "deploy"
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {  # kustomize wants paths relative to the kustomization
                "resources": [os.path.relpath(deploy / "overlays" / "tls", mine)],
                "components": [os.path.relpath(deploy / "components" / f"kube-{minor}", mine)],
            }
        )
    )
    for path in (REPO / "deploy" / "overlays" / f"kube-{minor}", mine):
        rendered = cluster.kubectl("kustomize", str(path)).stdout
        images = {
            c["image"]
            for d in yaml.safe_load_all(rendered)
            if d["kind"] == "Deployment"
            for c in d["spec"]["template"]["spec"]["containers"]
        }
        assert f"registry.k8s.io/kube-scheduler:{pin}" in images, (path, images)
        assert not {i for i in images if i.startswith("registry.k8s.io/kube-scheduler:") and not i.endswith(pin)}
        result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
        assert result.returncode == 0, result.stderr


# The optional installs, each `kubectl apply -k`'d after one of INSTALLS (docs/install/index.md).
OPTIONAL_INSTALLS = ["deploy/optional/audit", "deploy/optional/scale-down"]


def _seconds(duration: str) -> float:
    """A Go duration as the stanza writes it ("100ms", "1s", "5s")."""
    return float(duration[:-2]) / 1000 if duration.endswith("ms") else float(duration.rstrip("s"))


@pytest.mark.parametrize("path", ["deploy/overlays/in-scheduler", "deploy/overlays/in-scheduler-before-1.36"])
def test_in_scheduler_decisions_end_well_within_the_stanzas_timeout(cluster, path: str) -> None:
    """kube-scheduler waits the stanza's httpTimeout for the extender inside the scheduling cycle
    every pod of the cluster shares, 100 ms so that a partition's first retries cost ordinary pods
    little; a decision running out that time would fail the pod's every try. So the installed
    extender stops decisions at a third of it at most, and the e2e harness runs it that way."""
    rendered = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(REPO / path)).stdout) if d]
    stanza = next(
        yaml.safe_load(d["data"]["scheduler-config.yaml"])["extenders"][0]
        for d in rendered
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("placement-in-scheduler-config")
    )
    (extender,) = [d for d in rendered if d["kind"] == "Deployment" and d["metadata"]["name"] == "placement-extender"]
    args = extender["spec"]["template"]["spec"]["containers"][0]["args"]
    deadlines = [float(a.split("=", 1)[1]) for a in args if a.startswith("--decision-deadline=")]
    assert deadlines == [IN_SCHEDULER_DECISION_DEADLINE], args
    assert round(_seconds(stanza["httpTimeout"]) / IN_SCHEDULER_DECISION_DEADLINE, 6) >= 3, stanza["httpTimeout"]


def _pod_specs(doc: object) -> list[dict]:
    """Every pod spec in an object: a Deployment's template, a CronJob's job template's ..."""
    if isinstance(doc, dict):
        found = [doc] if isinstance(doc.get("containers"), list) else []
        return found + [s for value in doc.values() for s in _pod_specs(value)]
    if isinstance(doc, list):
        return [s for value in doc for s in _pod_specs(value)]
    return []


def test_one_image_edit_reaches_every_install(cluster, tmp_path) -> None:
    """The documented edit (deploy/components/image: newName and newTag, what `kustomize edit set
    image` writes there) and every install renders the extender under that name and no other:
    deploy/, each overlay, the TLS and in-scheduler ones included (an edit of deploy/base once
    left them running `placement-extender:0.1.0`, which no registry serves), and the optional
    audit CronJob and scale-down controller (which hard-coded that image until they became
    kustomizations including the component). Every kustomization under deploy/ is rendered, so an
    install added later is held to it too; the ones that run no pod (the ServiceMonitors of
    deploy/optional/monitoring) are named here."""
    import shutil

    for part in ("deploy", "config"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("helm"))
    component = tmp_path / "deploy" / "components" / "image" / "kustomization.yaml"
    doc = yaml.safe_load(component.read_text())
    mine = "registry.invalid/platform/placement-extender"
    doc["images"] = [{"name": "placement-extender", "newName": mine, "newTag": "9.9.9"}]
    component.write_text(yaml.safe_dump(doc))
    installs = sorted(
        k.parent
        for k in (tmp_path / "deploy").rglob("kustomization.yaml")
        if "components" not in k.relative_to(tmp_path).parts
    )
    missing = {*INSTALLS, *OPTIONAL_INSTALLS} - {str(path.relative_to(tmp_path)) for path in installs}
    assert not missing, f"no kustomization in {sorted(missing)}"
    found, podless = {}, set()
    for path in installs:
        rendered = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(path)).stdout) if d]
        if not any(_pod_specs(d) for d in rendered):
            podless.add(str(path.relative_to(tmp_path)))
            continue
        found[str(path.relative_to(tmp_path))] = {
            c["image"]
            for d in rendered
            for spec in _pod_specs(d)
            for c in [*spec["containers"], *(spec.get("initContainers") or ())]
            if "kube-scheduler" not in c["image"]
        }
    assert podless == {"deploy/optional/monitoring"}, podless
    assert all(images == {f"{mine}:9.9.9"} for images in found.values()), found


@pytest.mark.parametrize("path", OPTIONAL_INSTALLS)
def test_optional_installs_pass_server_side_dry_run(cluster, path: str) -> None:
    """As the docs apply them: `kubectl apply -k deploy/optional/<name>/`."""
    rendered = cluster.kubectl("kustomize", str(REPO / path)).stdout
    assert {d["kind"] for d in yaml.safe_load_all(rendered) if d} & {"CronJob", "Deployment"}, rendered
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered, check=False)
    assert result.returncode == 0, result.stderr


def policy(name: str, spec: dict) -> dict:
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def fraction_cap(fraction: str) -> dict:
    return {"caps": [{"topologyKey": "kubernetes.io/hostname", "fraction": fraction, "comparison": "AtMost"}]}


@pytest.mark.parametrize(
    "spec,field,words",
    [
        ({"caps": [{"topologyKey": "kubernetes.io/hostname"}]}, "spec.caps[0]", "exactly one of max or fraction"),
        ({"caps": [{"topologyKey": "kubernetes.io/hostname", "fraction": "1/3"}]}, "spec.caps[0]", "comparison"),
        ({"spread": [{"topologyKey": "zone", "maxSkew": 0}]}, "spec.spread[0].maxSkew", "greater than or equal to 1"),
        (
            {"shardAntiAffinity": [{"topologyKey": "zone", "mode": "Sometimes"}]},
            "spec.shardAntiAffinity[0].mode",
            "Unsupported value",
        ),
        ({"ordinalZones": {}, "zones": {"fallbackGroups": [["a"]]}}, "spec", "cannot be combined"),
        ({"group": {"size": 100_000_000}}, "spec.group.size", "less than or equal to 1000000"),
        (fraction_cap("4/3"), "spec.caps[0].fraction", "fraction 4/3 must be in (0, 1]"),
        (fraction_cap("0/3"), "spec.caps[0].fraction", "must be in (0, 1]"),
        (fraction_cap("1/99999999999999999999"), "spec.caps[0].fraction", "20"),
        ({"zones": {"allowed": []}}, "spec.zones.allowed", "at least 1"),
        ({"caps": [{"topologyKey": f"example.com/level-{i}", "max": 1} for i in range(17)]}, "spec.caps", "16"),
    ],
    ids=[
        "cap-without-limit",
        "fraction-without-comparison",
        "maxskew-zero",
        "bad-mode",
        "ordinal-and-fallback",
        "group-size-over-limit",
        "fraction-above-one",
        "fraction-zero",
        "fraction-too-long",
        "allowed-empty",
        "caps-over-limit",
    ],
)
def test_api_server_rejects_an_invalid_policy_naming_the_field(cluster, spec, field, words) -> None:
    with pytest.raises(ApiError) as err:
        cluster.admin.create(POLICIES, policy("bad", spec))
    assert err.value.status == 422
    assert field in str(err.value) and words in str(err.value)


@pytest.mark.parametrize(
    "fraction", ["1/3", "1/1", "3/3", "007/8", "1/999999999999999999", "2/1", "999999999999999999/1", "10/9", "0/1"]
)
def test_api_server_and_model_agree_on_a_fraction(cluster, fraction) -> None:
    """The CRD's CEL rule and the model's validator, on the same strings (dry run: nothing stored)."""
    spec = fraction_cap(fraction)
    try:
        parse_spec(spec, "test")
        model_accepts = True
    except PolicyError:
        model_accepts = False
    try:
        cluster.admin.create(POLICIES, policy("fraction", spec), dryRun="All")
        server_accepts = True
    except ApiError as err:
        assert err.status == 422 and "spec.caps[0].fraction" in str(err), err
        server_accepts = False
    assert server_accepts == model_accepts


def test_api_server_rejects_unknown_fields_under_strict_validation(cluster) -> None:
    bad = yaml.safe_dump(policy("typo", {"capz": []}) | {"metadata": {"name": "typo", "namespace": SYSTEM_NAMESPACE}})
    result = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=bad, check=False)
    assert result.returncode != 0 and 'unknown field "spec.capz"' in result.stderr


def test_a_valid_policy_is_accepted(cluster) -> None:
    spec = yaml.safe_load((REPO / "config" / "examples" / "redis-cluster-3az.yaml").read_text())["spec"]
    created = cluster.admin.create(POLICIES, policy("redis-a", spec), dryRun="All")
    assert created["spec"]["caps"][0]["comparison"] == "LessThan"


def access(
    cluster,
    user: str,
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str | None = None,
    subresource: str = "",
    name: str = "",
) -> bool:
    attributes = {"verb": verb, "resource": resource, "group": group, "subresource": subresource, "name": name}
    if namespace:
        attributes["namespace"] = namespace
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM_NAMESPACE}", "system:authenticated"]
    review = cluster.admin.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
        },
    )
    return bool(review["status"].get("allowed"))


EXTENDER_NEEDS = [
    *[
        (v, r, "")
        for r in ("nodes", "pods", "persistentvolumeclaims", "persistentvolumes")
        for v in ("get", "list", "watch")
    ],
    *[(v, "statefulsets", "apps") for v in ("get", "list", "watch")],
    *[(v, "placementpolicies", "placement.extender.dev") for v in ("get", "list", "watch")],
    *[(v, "zonerotations", "placement.extender.dev") for v in ("get", "list", "watch")],
]
DANGEROUS = [
    ("get", "secrets", "", ""),
    ("list", "secrets", "", ""),
    ("delete", "pods", "", ""),
    ("update", "pods", "", ""),
    ("create", "pods", "", ""),
    ("update", "nodes", "", ""),
    ("patch", "nodes", "", ""),
    ("delete", "nodes", "", ""),
    ("escalate", "clusterroles", "rbac.authorization.k8s.io", ""),
    ("bind", "clusterroles", "rbac.authorization.k8s.io", ""),
    ("create", "clusterrolebindings", "rbac.authorization.k8s.io", ""),
    ("create", "rolebindings", "rbac.authorization.k8s.io", ""),
    ("*", "*", "*", ""),
    ("create", "pods", "", "exec"),
    ("create", "serviceaccounts", "", "token"),
    ("update", "placementpolicies", "placement.extender.dev", ""),
    # a ZoneRotation is created once and then the operator's: the extender never changes or deletes one
    ("update", "zonerotations", "placement.extender.dev", ""),
    ("patch", "zonerotations", "placement.extender.dev", ""),
    ("delete", "zonerotations", "placement.extender.dev", ""),
    ("patch", "statefulsets", "apps", ""),
    ("delete", "statefulsets", "apps", ""),
    ("create", "customresourcedefinitions", "apiextensions.k8s.io", ""),
]


# Held by kube-scheduler's built-in role, so by the pod's one identity: preemption deletes victims.
PREEMPTION = ("delete", "pods", "", "")
IMPERSONATION = [("impersonate", "users", "", ""), ("impersonate", "serviceaccounts", "", "")]


# Where each kind the fixtures below create from a shipped file is posted.
CREATE_PATHS = {
    "ServiceAccount": f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
    "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/roles",
    "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/rolebindings",
}
# How long the RBAC authorizer may take to see a role and binding just written: it answers from
# an informer cache, so a SubjectAccessReview right after the write can be denied (measured: 2 of
# 150 first checks on 1.37.2 and 9 of 150 on 1.36.3 under load, each allowed within 26 ms).
AUTHORIZER_CATCH_UP_SECONDS = 20


def install_identity(cluster, file: str, kinds: set[str], user: str, granted: tuple[str, str, str]) -> str:
    """Create `kinds` from a shipped file (or a kustomization's directory, rendered as `kubectl apply
    -k` installs it), then wait (bounded) until the authorizer allows `user` one permission the
    file grants, so no test reads the authorizer's lag as a denial."""
    path = REPO / file
    text = cluster.kubectl("kustomize", str(path)).stdout if path.is_dir() else path.read_text()
    for doc in yaml.safe_load_all(text):
        if doc and doc["kind"] in kinds:
            cluster.admin.create(CREATE_PATHS[doc["kind"]], doc)
    verb, resource, group = granted
    wait_for(
        f"the authorizer to allow {user} {verb} {resource} after creating {file}'s RBAC",
        lambda: access(cluster, user, verb, resource, group=group),
        AUTHORIZER_CATCH_UP_SECONDS,
    )
    return user


@pytest.fixture(scope="module")
def tls_overlay_identity(cluster):
    """The TLS overlay's extender ServiceAccount and its binding, created from the overlay's file."""
    return install_identity(
        cluster,
        "deploy/overlays/tls/extender.yaml",
        {"ServiceAccount", "ClusterRoleBinding", "Role", "RoleBinding"},
        EXTENDER,
        ("list", "pods", ""),
    )


@pytest.mark.parametrize("user", [SCHEDULER, EXTENDER], ids=["pod-identity", "tls-overlay-extender"])
@pytest.mark.parametrize("verb,resource,group", EXTENDER_NEEDS, ids=lambda v: str(v))
def test_extender_may_read_what_it_caches(cluster, tls_overlay_identity, user, verb, resource, group) -> None:
    assert access(cluster, user, verb, resource, group=group)


@pytest.mark.parametrize("user", [SCHEDULER, EXTENDER], ids=["pod-identity", "tls-overlay-extender"])
@pytest.mark.parametrize(
    "verb,resource,group,subresource",
    [
        ("create", "pods", "", "binding"),
        ("create", "events", "", ""),
        ("create", "zonerotations", "placement.extender.dev", ""),
        # the ordinal-zone gate: narrow a gated pod's node affinity and lift the gate (extender/server/gate_patch.py)
        ("patch", "pods", "", ""),
    ],
)
def test_extender_may_bind_and_record_events_and_rotations(
    cluster, tls_overlay_identity, user, verb, resource, group, subresource
) -> None:
    assert access(cluster, user, verb, resource, group=group, subresource=subresource, namespace="any-namespace")


@pytest.mark.parametrize("user", [SCHEDULER, EXTENDER], ids=["pod-identity", "tls-overlay-extender"])
@pytest.mark.parametrize(
    "resource,group",
    [("tokenreviews", "authentication.k8s.io"), ("subjectaccessreviews", "authorization.k8s.io")],
)
def test_extender_may_review_its_metrics_scrapers(cluster, tls_overlay_identity, user, resource, group) -> None:
    """The metrics port (serve --metrics-listen) asks who a scraper's token is and whether it may get
    /metrics; both identities that run the extender may ask (deploy/base/rbac.yaml)."""
    assert access(cluster, user, "create", resource, group=group)


# (verb, resource, group, name, namespace, allowed): the replicas' Lease and the Service's one
# endpoint (docs/operations/high-availability.md), by name, in the extender's namespace only.
LEADER_ELECTION = [
    ("create", "leases", "coordination.k8s.io", "", SYSTEM_NAMESPACE, True),
    ("get", "leases", "coordination.k8s.io", "placement-extender", SYSTEM_NAMESPACE, True),
    ("update", "leases", "coordination.k8s.io", "placement-extender", SYSTEM_NAMESPACE, True),
    ("update", "leases", "coordination.k8s.io", "placement-scheduler", SYSTEM_NAMESPACE, False),
    ("delete", "leases", "coordination.k8s.io", "placement-extender", SYSTEM_NAMESPACE, False),
    ("update", "leases", "coordination.k8s.io", "placement-extender", "kube-system", False),
    ("create", "endpointslices", "discovery.k8s.io", "", SYSTEM_NAMESPACE, True),
    ("update", "endpointslices", "discovery.k8s.io", "placement-extender-active", SYSTEM_NAMESPACE, True),
    ("update", "endpointslices", "discovery.k8s.io", "placement-extender-metrics-x", SYSTEM_NAMESPACE, False),
    ("create", "endpointslices", "discovery.k8s.io", "", "default", False),
    ("list", "endpointslices", "discovery.k8s.io", "", SYSTEM_NAMESPACE, False),
]


@pytest.mark.parametrize("verb,resource,group,name,namespace,allowed", LEADER_ELECTION, ids=lambda v: str(v))
def test_tls_overlay_extender_may_write_only_its_lease_and_its_services_endpoint(
    cluster, tls_overlay_identity, verb, resource, group, name, namespace, allowed
) -> None:
    assert access(cluster, EXTENDER, verb, resource, group=group, name=name, namespace=namespace) is allowed


@pytest.fixture(scope="module")
def auditor_identity(cluster):
    """The audit CronJob's ServiceAccount and read-only role, created from its kustomization (not the
    CronJob itself: nothing should run on a schedule in the test cluster)."""
    return install_identity(
        cluster,
        "deploy/optional/audit",
        {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"},
        AUDITOR,
        ("list", "nodes", ""),
    )


def _group_resource(path: str) -> tuple[str, str]:
    """/api/v1/nodes -> ("", "nodes"); /apis/apps/v1/statefulsets -> ("apps", "statefulsets")."""
    parts = path.strip("/").split("/")
    return ("", parts[2]) if parts[0] == "api" else (parts[1], parts[3])


@pytest.mark.parametrize("path", [r.path for r in RESOURCES], ids=[r.kind for r in RESOURCES])
def test_auditor_may_list_every_kind_audit_reads(cluster, auditor_identity, path) -> None:
    """audit lists exactly what the extender caches (state/watcher.RESOURCES): a kind added there
    without its rule in the auditor's role would make every scheduled audit fail with a 403."""
    group, resource = _group_resource(path)
    assert access(cluster, auditor_identity, "list", resource, group=group)
    assert not access(cluster, auditor_identity, "create", resource, group=group, namespace="any-namespace")


@pytest.fixture(scope="module")
def scale_down_identity(cluster):
    """The scale-down controller's ServiceAccount, role and admission policy, from its
    kustomization (not its Deployment)."""
    return install_identity(cluster, "deploy/optional/scale-down", set(CREATE_PATHS), SCALE_DOWN, ("watch", "pods", ""))


@pytest.mark.parametrize("path", [r.path for r in RESOURCES], ids=[r.kind for r in RESOURCES])
def test_scale_down_controller_may_watch_what_the_extender_caches(cluster, scale_down_identity, path) -> None:
    group, resource = _group_resource(path)
    assert access(cluster, scale_down_identity, "watch", resource, group=group)


def test_scale_down_controllers_one_write_is_pod_patch(cluster, scale_down_identity) -> None:
    """Its one write, and why: the pod-deletion-cost annotation (README "Scale-down")."""
    assert access(cluster, scale_down_identity, "patch", "pods", namespace="any-namespace")
    assert not access(cluster, scale_down_identity, "create", "pods", subresource="binding", namespace="x")
    assert not access(cluster, scale_down_identity, "create", "zonerotations", group="placement.extender.dev")


@pytest.mark.parametrize(
    "verb,resource,group,subresource", [d for d in DANGEROUS if d[:2] != ("patch", "pods")] + IMPERSONATION
)
def test_scale_down_controller_is_denied_dangerous_verbs(
    cluster, scale_down_identity, verb, resource, group, subresource
) -> None:
    assert not access(
        cluster, scale_down_identity, verb, resource, group=group, subresource=subresource, namespace="any-namespace"
    )


@pytest.mark.parametrize("verb,resource,group,subresource", DANGEROUS + IMPERSONATION, ids=lambda v: str(v))
def test_tls_overlay_extender_is_denied_dangerous_verbs(
    cluster, tls_overlay_identity, verb, resource, group, subresource
) -> None:
    assert not access(
        cluster, EXTENDER, verb, resource, group=group, subresource=subresource, namespace="any-namespace"
    )


@pytest.mark.parametrize(
    "verb,resource,group,subresource", [d for d in DANGEROUS if d != PREEMPTION] + IMPERSONATION, ids=lambda v: str(v)
)
def test_pod_identity_is_denied_dangerous_verbs(cluster, verb, resource, group, subresource) -> None:
    assert not access(
        cluster, SCHEDULER, verb, resource, group=group, subresource=subresource, namespace="any-namespace"
    )


def test_pod_identity_may_delete_pods_only_as_kube_schedulers_preemption_does(cluster) -> None:
    """The one destructive verb, and why: kube-scheduler's built-in role (preemption evicts the
    victims). Had the extender kept an identity of its own, it would have needed a token Secret."""
    assert access(cluster, SCHEDULER, "delete", "pods", namespace="any-namespace")
    assert not access(cluster, SCHEDULER, "deletecollection", "pods", namespace="any-namespace")


SCHEDULER_NEEDS = [
    dict(
        verb="get",
        resource="leases",
        group="coordination.k8s.io",
        namespace=SYSTEM_NAMESPACE,
        name="placement-scheduler",
    ),
    dict(
        verb="update",
        resource="leases",
        group="coordination.k8s.io",
        namespace=SYSTEM_NAMESPACE,
        name="placement-scheduler",
    ),
    dict(verb="create", resource="leases", group="coordination.k8s.io", namespace=SYSTEM_NAMESPACE),
    dict(verb="get", resource="configmaps", namespace="kube-system", name="extension-apiserver-authentication"),
    dict(verb="list", resource="nodes"),
    dict(verb="watch", resource="pods"),
    dict(verb="create", resource="pods", subresource="binding", namespace="any"),
    dict(verb="update", resource="persistentvolumeclaims", namespace="any"),  # volume binding (system:volume-scheduler)
    dict(verb="create", resource="events", group="events.k8s.io", namespace="any"),
]
SCHEDULER_DENIED = [
    dict(verb="get", resource="secrets", namespace="any"),
    dict(verb="update", resource="nodes"),
    dict(
        verb="update", resource="leases", group="coordination.k8s.io", namespace=SYSTEM_NAMESPACE, name="someone-else"
    ),
    dict(verb="get", resource="configmaps", namespace="kube-system", name="kubeadm-config"),
    dict(verb="escalate", resource="clusterroles", group="rbac.authorization.k8s.io"),
    dict(verb="bind", resource="clusterroles", group="rbac.authorization.k8s.io"),
    dict(verb="*", resource="*", group="*"),
    dict(verb="create", resource="pods", subresource="exec", namespace="any"),
]


@pytest.mark.parametrize("attrs", SCHEDULER_NEEDS, ids=lambda a: f"{a['verb']}-{a['resource']}")
def test_scheduler_may_do_what_it_needs(cluster, attrs) -> None:
    assert access(cluster, SCHEDULER, **attrs)


@pytest.mark.parametrize("attrs", SCHEDULER_DENIED, ids=lambda a: f"{a['verb']}-{a['resource']}-{a.get('name', '')}")
def test_scheduler_is_denied_the_rest(cluster, attrs) -> None:
    assert not access(cluster, SCHEDULER, **attrs)


@pytest.mark.parametrize("component", ["placement-extender", "placement-scheduler"])
def test_components_run_under_the_pods_service_account_each_with_its_own_token(cluster, component) -> None:
    config = yaml.safe_load((cluster.workdir / f"{component}.kubeconfig").read_text())
    credentials = config["users"][0]["user"]
    assert set(credentials) == {"token"}, "no client certificate, no admin credentials"
    as_component = Api(cluster.server, str(cluster.pki.ca_cert), token=credentials["token"])
    review = as_component.create(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review["status"]["userInfo"]["username"] == SCHEDULER
    processes = {p.name: p for p in cluster.processes}
    if component == "placement-extender":
        used = [a.split("=", 1)[1] for a in processes["extender"].argv if a.startswith("--kubeconfig=")]
    else:
        used = [
            yaml.safe_load((cluster.workdir / "placement-scheduler.yaml").read_text())["clientConnection"]["kubeconfig"]
        ]
    assert used == [str(cluster.workdir / f"{component}.kubeconfig")]


def test_extender_outside_the_pod_requires_a_client_certificate(cluster) -> None:
    """The TLS overlay's mode: HTTPS, and callers without a certificate from the CA are refused;
    so is a certificate of the same CA with another name (403: a `CN=tenant-x` once bound
    a pod), one whose usages exclude client auth (at the handshake) and one with no
    extendedKeyUsage at all (403 naming clientAuth). The scheduler's is served."""
    import sys

    import requests

    from extender.devcluster.api import wait_for
    from extender.devcluster.processes import Process, free_port

    pki = cluster.pki
    port = free_port()
    client = pki.client("scheduler-client", "placement-scheduler-client")
    proc = Process(
        "extender-tls",
        [
            sys.executable,
            "-m",
            "extender",
            "serve",
            f"--listen=127.0.0.1:{port}",
            f"--kubeconfig={cluster.workdir / 'placement-extender.kubeconfig'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-key-file={pki.serving_key}",
            f"--tls-client-ca-file={pki.ca_cert}",
        ],
        cluster.log_dir,
        env={"PYTHONPATH": str(REPO)},
    )
    proc.start()
    try:
        session = requests.Session()
        session.trust_env = False
        url = f"https://127.0.0.1:{port}/readyz"
        ok = wait_for(
            "the TLS extender",
            lambda: (
                proc.check(),
                session.get(
                    url, verify=str(pki.ca_cert), cert=(str(client.cert), str(client.key)), timeout=2
                ).status_code
                == 200,
            )[1],
            60,
        )
        assert ok
        with pytest.raises(requests.exceptions.RequestException):
            session.get(url, verify=str(pki.ca_cert), timeout=2)  # no client certificate
        tenant = pki.client("tenant-client", "tenant-x")
        answer = session.get(url, verify=str(pki.ca_cert), cert=(str(tenant.cert), str(tenant.key)), timeout=2)
        assert answer.status_code == 403 and "--tls-client-name" in answer.text, answer.text
        bind = session.post(
            url.replace("/readyz", "/bind"),
            json={"PodName": "x", "PodNamespace": "y", "PodUID": "z", "Node": "n"},
            verify=str(pki.ca_cert),
            cert=(str(tenant.cert), str(tenant.key)),
            timeout=2,
        )
        assert bind.status_code == 403, bind.text
        # The scheduler's name, no extendedKeyUsage at all: OpenSSL's handshake takes it, the extender
        # refuses it (it was once served 200 on /filter and /bind)
        no_usage = pki.client("no-usage-client", "placement-scheduler-client", usage=False)
        for path in ("/readyz", "/bind"):
            answer = session.post(
                url.replace("/readyz", path),
                json={"PodName": "x", "PodNamespace": "y", "PodUID": "z", "Node": "n"},
                verify=str(pki.ca_cert),
                cert=(str(no_usage.cert), str(no_usage.key)),
                timeout=2,
            )
            assert answer.status_code == 403 and "clientAuth" in answer.text, (path, answer.text)
        serving_only = pki.server("not-a-client", ["placement-scheduler-client"])  # serverAuth usage only
        with pytest.raises(requests.exceptions.RequestException):
            session.get(url, verify=str(pki.ca_cert), cert=(str(serving_only.cert), str(serving_only.key)), timeout=2)
        with pytest.raises(requests.exceptions.RequestException):
            session.get(f"http://127.0.0.1:{port}/readyz", timeout=2)  # plain HTTP
    finally:
        proc.stop()


# -- admission: what the identities' `patch` on pods may change (deploy/base/admission.yaml) --------

GATE = "placement.extender.dev/ordinal-zone"
# A JSON patch: the API server's own validation lets a pod's image change (a merge patch of the
# containers list would also drop their other fields, which it refuses before admission).
# Under the extender's identity, a bogus owner got a pod of another namespace deleted by the
# garbage collector within 1 s; a finalizer could hold any pod's deletion.
BOGUS_OWNER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "00000000-0000-0000-0000-000000000001"}
IMAGE_PATCH = [{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.invalid/evil:1"}]


def _as(cluster, user: str) -> Api:
    """The admin's client, impersonating `user` (a ServiceAccount: the API server adds its groups)."""
    admin = cluster.admin
    api = Api(admin.server, admin.session.verify, *admin.session.cert)
    api.session.headers["Impersonate-User"] = user
    return api


def _patch(api: Api, path: str, body, kind: str = "application/merge-patch+json"):  # noqa: ANN001
    """A PATCH as `api`'s identity; None when allowed, else the API server's message."""
    response = api.session.request(
        "PATCH", api.server + path, data=json.dumps(body), headers={"Content-Type": kind}, timeout=30
    )
    if response.status_code < 400:
        return None
    return response.json().get("message", response.text)


def _pod(cluster, ns: str, name: str, gates: list[str]) -> str:  # noqa: ANN001
    """A pod no scheduler serves (schedulerName nobody), with `gates`; its path."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "held"}, "annotations": {"team": "db"}},
        "spec": {
            "schedulerName": "nobody",
            "schedulingGates": [{"name": g} for g in gates],
            "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
        },
    }
    if not gates:
        del body["spec"]["schedulingGates"]
    cluster.admin.create(f"/api/v1/namespaces/{ns}/pods", body)
    return f"/api/v1/namespaces/{ns}/pods/{name}"


def test_the_extenders_pod_writes_are_held_to_the_gate_and_its_annotations(cluster, tls_overlay_identity) -> None:
    """As the extender's identity (the pod's, and the TLS overlay's): lifting its own gate with
    the narrowing is allowed, and so is its retry annotation on any pod; a label, another
    annotation, an image, a toleration, another's gate, or affinity on a pod without its gate
    are denied with the policy's message. SubjectAccessReviews above still show `patch` granted:
    RBAC cannot say this, admission does."""
    from extender.server.gate_patch import lift_patch

    ns = cluster.namespace("admission")
    for user in (SCHEDULER, EXTENDER):
        api = _as(cluster, user)
        tag = user.rsplit(":", 1)[1]
        gated = _pod(cluster, ns, f"gated-{tag}", [GATE])
        pod = cluster.admin.get(gated)
        requirement = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}
        assert _patch(api, gated, lift_patch(pod, requirement), "application/json-patch+json") is None
        lifted = cluster.admin.get(gated)
        assert not lifted["spec"].get("schedulingGates") and lifted["spec"]["affinity"]["nodeAffinity"]

        plain = _pod(cluster, ns, f"plain-{tag}", [])
        retry = {"metadata": {"annotations": {"placement.extender.dev/policy-generation": "7"}}}
        assert _patch(api, plain, retry) is None, "the retry annotation, on a pod without the gate"
        other = _pod(cluster, ns, f"other-{tag}", ["example.com/someone-elses"])
        held = _pod(cluster, ns, f"held-{tag}", [GATE])
        mixed = _pod(cluster, ns, f"mixed-{tag}", [GATE, "example.com/someone-elses"])
        denied = {
            "a label": (plain, {"metadata": {"labels": {"app": "stolen"}}}, "labels"),
            "another annotation": (plain, {"metadata": {"annotations": {"team": "other"}}}, "own annotations"),
            "an image": (plain, IMAGE_PATCH, "the spec of a pod that carries none of its scheduling gates"),
            "a toleration": (
                plain,
                [{"op": "add", "path": "/spec/tolerations/-", "value": {"operator": "Exists"}}],
                "the spec of a pod",
            ),
            "another's gate": (other, {"spec": {"schedulingGates": None}}, "the spec of a pod"),
            "a toleration on a gated pod": (
                held,
                [{"op": "add", "path": "/spec/tolerations/-", "value": {"operator": "Exists"}}],
                "tolerations",
            ),
            "another's gate beside its own": (mixed, {"spec": {"schedulingGates": [{"name": GATE}]}}, "its own"),
            "an owner reference": (plain, {"metadata": {"ownerReferences": [BOGUS_OWNER]}}, "ownerReferences"),
            "a finalizer": (plain, {"metadata": {"finalizers": ["example.com/hold"]}}, "finalizers"),
            "a generateName": (plain, {"metadata": {"generateName": "other-"}}, "generateName"),
            "an image on a gated pod": (held, IMAGE_PATCH, "containers"),
        }
        for what, (path, body, words) in denied.items():
            kind = "application/json-patch+json" if isinstance(body, list) else "application/merge-patch+json"
            message = _patch(api, path, body, kind)
            assert message is not None and "placement-extender-pod-writes" in message and words in message, (
                user,
                what,
                message,
            )


def _status_path(cluster, ns: str, name: str, bound: bool) -> str:  # noqa: ANN001
    """A pod of namespace `ns` (another tenant's), gated or bound to a node; its status path."""
    path = _pod(cluster, ns, name, [] if bound else [GATE])
    if bound:  # to a name: the API server binds to a node it does not know
        target = {"apiVersion": "v1", "kind": "Node", "name": "admission-node"}
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": target}
        cluster.admin.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
    return f"{path}/status"


def test_status_writes_may_change_only_what_kube_scheduler_writes_there(cluster, tls_overlay_identity) -> None:
    """Through pods/status (system:kube-scheduler grants its patch): as each identity, a pod of
    another namespace, gated or bound, keeps its labels, annotations, finalizers, generateName and
    every status field but kube-scheduler's own; PodScheduled, DisruptionTarget and
    nominatedNodeName, what kube-scheduler writes there, still pass. The TLS overlay's
    identity has no pods/status at all (RBAC refuses first); the pod identity is refused by the
    policy, naming it."""
    ns = cluster.namespace("admission-status")
    scheduled = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available",
    }
    evicted = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    for user in (SCHEDULER, EXTENDER):
        api, tag = _as(cluster, user), user.rsplit(":", 1)[1]
        for bound in (False, True):
            path = _status_path(cluster, ns, f"{tag}-{'bound' if bound else 'gated'}", bound)
            denied = {
                "a label": {"metadata": {"labels": {"app": "stolen-by-status"}}},
                "another annotation": {"metadata": {"annotations": {"team": "other"}}},
                "a finalizer": {"metadata": {"finalizers": ["example.com/hold"]}},
                "a generateName": {"metadata": {"generateName": "other-"}},
                "the phase": {"status": {"phase": "Failed"}},
                "a Ready condition": {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                "the pod IP": {"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}]}},
            }
            for what, body in denied.items():
                message = _patch(api, path, body)
                assert message is not None, (user, bound, what, "allowed")
                by_policy = "placement-extender-pod-writes" in message
                assert by_policy if user == SCHEDULER else (by_policy or "forbidden" in message), (user, what, message)
            if user == SCHEDULER and not bound:  # the API server sets no nominatedNodeName on a bound pod
                for allowed in (
                    {"status": {"conditions": [scheduled]}},
                    {"status": {"nominatedNodeName": "somewhere"}},
                    {"status": {"conditions": [scheduled, evicted], "nominatedNodeName": None}},
                ):
                    assert _patch(api, path, allowed, "application/strategic-merge-patch+json") is None, allowed
            after = cluster.admin.get(path.removesuffix("/status"))
            assert after["metadata"]["labels"] == {"app": "held"}, after["metadata"]
            assert after["metadata"]["annotations"] == {"team": "db"} and not after["metadata"].get("finalizers")
            assert after["status"]["phase"] == "Pending"


def test_a_binding_may_not_carry_metadata_onto_the_pod(cluster, tls_overlay_identity) -> None:
    """A Binding's annotations and labels are copied onto the pod it binds: as either identity a
    Binding carrying them is denied by the bindings policy; a plain Binding still binds."""
    ns = cluster.namespace("admission-binding")
    node = "admission-node"  # the API server binds to a node it does not know
    for user in (SCHEDULER, EXTENDER):
        api, tag = _as(cluster, user), user.rsplit(":", 1)[1]
        for what, metadata in {
            "an annotation": {"annotations": {"team": "stolen"}},
            "a label": {"labels": {"app": "stolen"}},
        }.items():
            name = f"{tag}-{what.split()[-1]}"
            _pod(cluster, ns, name, [])
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, **metadata},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            with pytest.raises(ApiError) as err:
                api.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
            assert "placement-extender-bindings" in str(err.value), (user, what, err.value)
            del body["metadata"][next(iter(metadata))]
            api.create(f"/api/v1/namespaces/{ns}/pods/{name}/binding", body)
            pod = cluster.admin.get(f"/api/v1/namespaces/{ns}/pods/{name}")
            assert pod["spec"]["nodeName"] == node and pod["metadata"]["labels"] == {"app": "held"}
            assert pod["metadata"]["annotations"] == {"team": "db"}


def test_the_scale_down_identity_may_write_the_deletion_cost_only(cluster, scale_down_identity) -> None:
    ns = cluster.namespace("admission-scale-down")
    api = _as(cluster, scale_down_identity)
    path = _pod(cluster, ns, "costed", [])
    tries = iter(range(10_000))
    # A policy just created takes a moment to be enforced (the fixture created it): a label changed
    # each try (the same value again would be no change, which the policy rightly lets through)
    wait_for(
        "the scale-down policy enforced",
        lambda: _patch(api, path, {"metadata": {"labels": {"app": f"try-{next(tries)}"}}}) is not None,
        30,
    )
    stolen = {"metadata": {"labels": {"app": "stolen"}}}
    cost = {"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "3"}}}
    assert _patch(api, path, cost) is None
    owner = {"metadata": {"ownerReferences": [BOGUS_OWNER]}}
    for body in (stolen, {"metadata": {"annotations": {"team": "other"}}}, IMAGE_PATCH, owner):
        kind = "application/json-patch+json" if isinstance(body, list) else "application/merge-patch+json"
        message = _patch(api, path, body, kind)
        assert message is not None and "placement-scale-down-pod-writes" in message, (body, message)


def test_other_identities_are_not_held_by_the_policy(cluster) -> None:
    """The match condition: the admin's own writes to a gated pod are not evaluated."""
    ns = cluster.namespace("admission-others")
    path = _pod(cluster, ns, "mine", [GATE])
    cluster.admin.merge_patch(path, {"metadata": {"labels": {"app": "relabelled"}, "annotations": {"x": "y"}}})
    assert cluster.admin.get(path)["metadata"]["labels"]["app"] == "relabelled"


# -- admission as a property: generated patches, each tried as the admin and as each identity ----

PLACEABLE = "placement.extender.dev/placeable"
OTHERS_GATE = "example.com/someone-elses"
NARROWED = "placement.extender.dev/narrowed-zones"
GENERATION = "placement.extender.dev/policy-generation"
NARROWING = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}
            ]
        }
    }
}


def _gated(pod: dict) -> bool:
    return GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or ()]


def _with_image(containers: list[dict]) -> list[dict]:
    return [dict(containers[0], image="registry.invalid/evil:1"), *containers[1:]]


# name -> (the merge-patch fragment it makes from the pod, or a gate it removes; granted for the pod?)
MUTATIONS = {
    "set its narrowed-zones annotation": (
        lambda p: {"metadata": {"annotations": {NARROWED: "zone-a"}}},
        lambda p: True,
    ),
    "change its policy-generation": (lambda p: {"metadata": {"annotations": {GENERATION: "2"}}}, lambda p: True),
    "remove its policy-generation": (lambda p: {"metadata": {"annotations": {GENERATION: None}}}, lambda p: True),
    "remove the ordinal-zone gate": (GATE, lambda p: True),
    "remove the placeable gate": (PLACEABLE, lambda p: True),
    "narrow the node affinity": (lambda p: {"spec": {"affinity": NARROWING}}, _gated),
    "remove another's gate": (OTHERS_GATE, lambda p: False),
    "add a label": (lambda p: {"metadata": {"labels": {"stolen": "yes"}}}, lambda p: False),
    "change a label": (lambda p: {"metadata": {"labels": {"app": "stolen"}}}, lambda p: False),
    "add another annotation": (lambda p: {"metadata": {"annotations": {"x": "y"}}}, lambda p: False),
    "change another annotation": (lambda p: {"metadata": {"annotations": {"team": "other"}}}, lambda p: False),
    "remove another annotation": (lambda p: {"metadata": {"annotations": {"team": None}}}, lambda p: False),
    "add an owner reference": (lambda p: {"metadata": {"ownerReferences": [BOGUS_OWNER]}}, lambda p: False),
    "add a finalizer": (lambda p: {"metadata": {"finalizers": ["example.com/hold"]}}, lambda p: False),
    "set generateName": (lambda p: {"metadata": {"generateName": "other-"}}, lambda p: False),
    "change an image": (lambda p: {"spec": {"containers": _with_image(p["spec"]["containers"])}}, lambda p: False),
    "change an init image": (
        lambda p: {"spec": {"initContainers": _with_image(p["spec"]["initContainers"])}},
        lambda p: False,
    ),
    "add a toleration": (
        lambda p: {"spec": {"tolerations": [*(p["spec"].get("tolerations") or []), {"operator": "Exists"}]}},
        lambda p: False,
    ),
    "set activeDeadlineSeconds": (lambda p: {"spec": {"activeDeadlineSeconds": 600}}, lambda p: False),
    "add a nodeSelector": (lambda p: {"spec": {"nodeSelector": {"disk": "ssd"}}}, lambda p: False),
    # kube-scheduler's own status writes, and others (through `pods` a status change is dropped)
    "set nominatedNodeName": (lambda p: {"status": {"nominatedNodeName": "node-b"}}, lambda p: True),
    "mark it unschedulable": (
        lambda p: {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}},
        lambda p: True,
    ),
    "set the phase": (lambda p: {"status": {"phase": "Failed"}}, lambda p: False),
    "set a Ready condition": (
        lambda p: {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        lambda p: False,
    ),
    "set a pod IP": (lambda p: {"status": {"podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.9"}]}}, lambda p: False),
}


def _takes_effect(name: str, subresource: str) -> bool:
    """Whether the change reaches storage through `subresource`: `pods` drops a status change and
    `pods/status` a spec change and ownerReferences (each strategy resets them), so such a change
    is none."""
    change, _ = MUTATIONS[name]
    touches = (
        "spec"
        if isinstance(change, str)
        else next(iter(change({"spec": {"containers": [{}], "initContainers": [{}]}})))
    )
    if subresource == "/status" and name == "add an owner reference":
        return False  # the status strategy resets ownerReferences too
    return not ((subresource == "" and touches == "status") or (subresource == "/status" and touches == "spec"))


def _merge(into: dict, fragment: dict) -> None:
    for key, value in fragment.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif key == "conditions" and isinstance(into.get(key), list):
            into[key] = [*into[key], *value]  # two condition changes, both made
        else:
            into[key] = value


def _patch_of(pod: dict, chosen: list[str]) -> dict:
    """One merge patch making every chosen change to `pod` (gate removals as one new list)."""
    patch: dict = {}
    removed = set()
    for name in chosen:
        change, _ = MUTATIONS[name]
        if isinstance(change, str):
            removed.add(change)
        else:
            _merge(patch, change(pod))
    if removed:
        gates = [g for g in pod["spec"]["schedulingGates"] if g["name"] not in removed]
        _merge(patch, {"spec": {"schedulingGates": gates}})
    return patch


def _dry_run(api: Api, path: str, patch: dict) -> tuple[int, str]:
    response = api.session.request(
        "PATCH",
        api.server + path,
        params={"dryRun": "All"},
        data=json.dumps(patch),
        headers={"Content-Type": "application/merge-patch+json"},
        timeout=30,
    )
    return response.status_code, response.json().get("message", "") if response.status_code >= 400 else ""


@pytest.fixture(scope="module")
def admission_pods(cluster):
    """Two pods to patch (dry runs only: they never change): one carrying both of the extender's
    gates and another's, one with none; each with an init container, labels and annotations."""
    ns = cluster.namespace("admission-property")
    paths = {}
    for name, gates in {"gated": [GATE, PLACEABLE, OTHERS_GATE], "plain": []}.items():
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "held"}, "annotations": {"team": "db", GENERATION: "1"}},
            "spec": {
                "schedulerName": "nobody",
                "schedulingGates": [{"name": g} for g in gates] or None,
                "initContainers": [{"name": "init", "image": "registry.invalid/init:1"}],
                "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
            },
        }
        cluster.admin.create(f"/api/v1/namespaces/{ns}/pods", body)
        paths[name] = f"/api/v1/namespaces/{ns}/pods/{name}"
    return paths


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    variant=st.sampled_from(["gated", "plain"]),
    chosen=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3, unique=True),
    user=st.sampled_from([SCHEDULER, EXTENDER]),
    subresource=st.sampled_from(["", "/status"]),
)
def test_admission_allows_a_patch_exactly_when_every_change_is_granted(
    cluster, tls_overlay_identity, admission_pods, variant, chosen, user, subresource
) -> None:  # noqa: ANN001
    """Any combination of granted and other changes, to a gated or a plain pod, as the pod's
    identity or the TLS overlay's, through `pods` or `pods/status`: a patch the API server
    accepts from the admin (a dry run) is allowed to the extender's identity exactly when every
    change in it that takes effect there is granted, and otherwise denied with the policy's
    message (through pods/status the TLS overlay's identity has no RBAC at all: denied)."""
    path = admission_pods[variant]
    pod = cluster.admin.get(path)
    if variant == "plain" and any(isinstance(MUTATIONS[n][0], str) for n in chosen):
        reject()  # no gate to remove
    patch = _patch_of(pod, chosen)
    status, message = _dry_run(cluster.admin, path + subresource, patch)
    if status >= 400:
        reject()  # the API server itself refuses it (an affinity or nodeSelector change of a pod without gates)
    granted = all(MUTATIONS[n][1](pod) or not _takes_effect(n, subresource) for n in chosen)
    status, message = _dry_run(_as(cluster, user), path + subresource, patch)
    if subresource and user == EXTENDER:
        assert status == 403, (chosen, status, message)  # RBAC: no pods/status
    elif granted:
        assert status < 400, (subresource, chosen, message)
    else:
        assert status >= 400 and "placement-extender-pod-writes" in message, (subresource, chosen, status, message)


# Every field of a PodSpec on the supported minors (1.37's list, a superset of the older ones): a
# new minor adding one fails the test below until ValidatePodUpdate has been read for it.
KNOWN_POD_SPEC_FIELDS = set(
    "volumes initContainers containers ephemeralContainers restartPolicy terminationGracePeriodSeconds "
    "activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount automountServiceAccountToken "
    "nodeName hostNetwork hostPID hostIPC shareProcessNamespace securityContext imagePullSecrets hostname subdomain "
    "affinity schedulerName tolerations hostAliases priorityClassName priority dnsConfig readinessGates "
    "runtimeClassName enableServiceLinks preemptionPolicy overhead topologySpreadConstraints setHostnameAsFQDN os "
    "hostUsers schedulingGates resourceClaims resources hostnameOverride workloadRef schedulingGroup "
    "evictionResponders".split()
)


def _probe_value(schema: dict, current):  # noqa: ANN001, ANN202
    """A plausible different value for a field of `schema`'s type (None: no probe)."""
    kind = schema.get("type")
    if kind == "string":
        return "probe-x" if current != "probe-x" else "probe-y"
    if kind == "integer":
        return 7 if current != 7 else 8
    if kind == "boolean":
        return not current
    if kind == "array":
        return [] if current else None
    if kind == "object" and "additionalProperties" in schema:
        return {"probe": "x"}
    return None


def test_every_field_an_update_can_change_is_compared_by_the_admission_policy(cluster, admission_pods) -> None:
    """Against this minor's API server: each PodSpec and ObjectMeta field is changed on the gated
    pod as the admin (a dry run). Every field the API server lets change must be compared by
    deploy/base/admission.yaml (for a gated pod the spec is compared field by field), and the
    PodSpec's fields are all known (a new one is read in ValidatePodUpdate before it is listed)."""
    text = (REPO / "deploy/base/admission.yaml").read_text()
    import re

    compared = {f"{part}.{field}" for part, field in re.findall(r"\bobject\.(spec|metadata)\.(\w+)", text)}
    schemas = cluster.admin.get("/openapi/v3/api/v1")["components"]["schemas"]
    spec_fields = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]
    meta_fields = schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    assert set(spec_fields) <= KNOWN_POD_SPEC_FIELDS, set(spec_fields) - KNOWN_POD_SPEC_FIELDS
    pod = cluster.admin.get(admission_pods["gated"])
    mutable = set()
    for part, fields in (("spec", spec_fields), ("metadata", meta_fields)):
        for field, schema in fields.items():
            if "allOf" in schema:
                schema = {"type": "object"}
            value = _probe_value(schema, pod[part].get(field))
            if value is None:
                continue
            status, _ = _dry_run(cluster.admin, admission_pods["gated"], {part: {field: value}})
            if status < 400:
                after = _dry_run_object(cluster, admission_pods["gated"], {part: {field: value}})
                if after[part].get(field) != pod[part].get(field):
                    mutable.add(f"{part}.{field}")
    # The API server's own (field managers, versions), and selfLink, which it no longer serves and
    # no controller reads (removed in 1.20; a write is kept but meaningless).
    server_owned = {"metadata.managedFields", "metadata.resourceVersion", "metadata.generation", "metadata.selfLink"}
    assert {"metadata.labels", "metadata.annotations", "spec.activeDeadlineSeconds"} <= mutable, mutable
    assert mutable - server_owned <= compared | {"metadata.annotations"}, (mutable - server_owned) - compared


# PodStatus fields deploy/base/admission.yaml does not compare, each with why: the ones
# kube-scheduler writes, and ones a minor may lack (a field absent from a minor's schema cannot be
# named in the policy's CEL there) that no consumer acts on to place, run or stop a pod.
STATUS_UNCOMPARED = {
    "conditions": "compared but for kube-scheduler's own (PodScheduled, DisruptionTarget)",
    "nominatedNodeName": "kube-scheduler's preemption writes it",
    "observedGeneration": "the kubelet's record of the spec it saw; informational",
    "resize": "deprecated (in-place resize reports in conditions); informational",
    "extendedResourceClaimStatus": "DRA's extended-resource claim record, 1.34+; the claim itself decides",
    "allocatedResources": "the kubelet's report of what it allocated; informational",
    "resources": "the kubelet's report of resources in use; informational",
    "volumeHealth": "the kubelet's report of its volumes' health (1.37); informational",
    "nodeAllocatableResourceClaimStatuses": "DRA's node-allocatable claims (1.37); the claim itself decides",
}


def test_every_status_field_is_compared_or_named(cluster) -> None:
    """Against this minor's API server: each PodStatus field is compared by the policy's status
    validation or named above with its reason (a new field fails here until it is read)."""
    import re

    text = (REPO / "deploy/base/admission.yaml").read_text()
    compared = set(re.findall(r"\bobject\.status\.(\w+)", text))
    schemas = cluster.admin.get("/openapi/v3/api/v1")["components"]["schemas"]
    fields = set(schemas["io.k8s.api.core.v1.PodStatus"]["properties"])
    assert fields <= compared | set(STATUS_UNCOMPARED), fields - compared - set(STATUS_UNCOMPARED)


def _dry_run_object(cluster, path: str, patch: dict) -> dict:  # noqa: ANN001
    response = cluster.admin.session.request(
        "PATCH",
        cluster.admin.server + path,
        params={"dryRun": "All"},
        data=json.dumps(patch),
        headers={"Content-Type": "application/merge-patch+json"},
        timeout=30,
    )
    return response.json()

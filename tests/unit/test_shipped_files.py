"""What we ship in config/ and deploy/ stays consistent with the policy model."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from extender.api.policy import (
    FRACTION_PATTERN,
    INLINE_POLICY_ANNOTATION,
    KIND,
    MAX_FRACTION_LENGTH,
    parse_annotation,
    parse_spec,
)
from extender.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted((ROOT / "config" / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_example_policies_validate(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == KIND:
            parse_spec(doc["spec"], path.name)
        else:
            template = doc["spec"]["template"]
            assert template["spec"]["schedulerName"] == "placement-scheduler"
            parse_annotation(template["metadata"]["annotations"][INLINE_POLICY_ANNOTATION], path.name)


def test_crd_in_deploy_is_generated_from_the_model() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["crd"]) == 0
    assert (ROOT / "deploy" / "base" / "crd.yaml").read_text() == out.getvalue(), (
        "run `make crd` and commit deploy/base/crd.yaml"
    )


def test_crd_schema_is_structural() -> None:
    crd = yaml.safe_load((ROOT / "deploy" / "base" / "crd.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def walk(node, path="spec"):
        assert "$ref" not in node and "anyOf" not in node, path
        assert "type" in node, f"{path} has no type"
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}{{}}")

    walk(schema)


def _spec_schema() -> dict:
    crd = yaml.safe_load((ROOT / "deploy" / "base" / "crd.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def test_crd_bounds_a_fraction_as_the_model_does() -> None:
    fraction = _spec_schema()["properties"]["caps"]["items"]["properties"]["fraction"]
    assert fraction["pattern"] == FRACTION_PATTERN and fraction["maxLength"] == MAX_FRACTION_LENGTH
    (rule,) = fraction["x-kubernetes-validations"]  # on the field: the API server names spec.caps[i].fraction
    assert "int(self.split('/')[0]) <= int(self.split('/')[1])" in rule["rule"]
    assert "(0, 1]" in rule["messageExpression"]


def test_crd_wants_at_least_one_allowed_zone() -> None:
    assert _spec_schema()["properties"]["zones"]["properties"]["allowed"]["minItems"] == 1


def test_schema_command_prints_json_schema() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["schema"]) == 0
    assert '"PlacementPolicySpec"' in out.getvalue() or '"caps"' in out.getvalue()


def test_scheduler_config_names_the_extender_verbs() -> None:
    config = yaml.safe_load((ROOT / "config" / "scheduler-config.yaml").read_text())
    extender = config["extenders"][0]
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is False
    assert {extender[k] for k in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb")} == {
        "filter",
        "prioritize",
        "bind",
        "preempt",
    }
    assert [p["schedulerName"] for p in config["profiles"]] == ["placement-scheduler"]


def test_tls_overlay_config_differs_only_in_the_extender_connection() -> None:
    base = yaml.safe_load((ROOT / "config" / "scheduler-config.yaml").read_text())
    tls = yaml.safe_load((ROOT / "deploy" / "overlays" / "tls" / "scheduler-config.yaml").read_text())
    assert tls["extenders"][0]["enableHTTPS"] is True and tls["extenders"][0]["urlPrefix"].startswith("https://")
    assert set(tls["extenders"][0]["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
    for config in (base, tls):
        for key in ("urlPrefix", "enableHTTPS", "tlsConfig"):
            config["extenders"][0].pop(key, None)
    assert base == tls


def test_dockerfile_installs_like_the_install_page() -> None:
    """The image installs the package as docs/install/index.md tells a user to (pinned by constraints.txt)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    page = " ".join((ROOT / "docs" / "install" / "index.md").read_text().split())  # as rendered: one line
    assert "pip install -c constraints.txt ." in dockerfile and "pip install -c constraints.txt ." in page
    assert "USER 65532" in dockerfile


def _deploy_documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted((ROOT / "deploy").rglob("*.yaml")):
        if "helm" in path.relative_to(ROOT).parts:  # Go templates (generated from these files)
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict):
                docs.append((str(path.relative_to(ROOT)), doc))
    return docs


def test_no_long_lived_service_account_token_is_shipped() -> None:
    """Tokens that never expire leak through backups and Secret readers (issue: no long-lived
    credentials): every identity in deploy/ gets the kubelet's projected, expiring token."""
    secrets = [
        path
        for path, doc in _deploy_documents()
        if doc.get("kind") == "Secret" and doc.get("type") == "kubernetes.io/service-account-token"
    ]
    assert secrets == []


def test_each_container_of_the_scheduler_pod_mounts_an_expiring_projected_token() -> None:
    deployment = next(
        doc
        for path, doc in _deploy_documents()
        if path == "deploy/base/deployment.yaml" and doc.get("kind") == "Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "placement-scheduler" and pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    for container in pod["containers"]:
        mount = next(m for m in container["volumeMounts"] if m["mountPath"].endswith("kubernetes.io/serviceaccount"))
        sources = volumes[mount["name"]]["projected"]["sources"]
        token = next(s["serviceAccountToken"] for s in sources if "serviceAccountToken" in s)
        assert 600 <= token["expirationSeconds"] <= 86400, container["name"]

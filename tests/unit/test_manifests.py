"""adopt and retire on manifests, for GitOps (extender/ops/manifests.py, `adopt -f`): the output is
valid YAML a team commits, holding the input with only adopt's changes and none of the API
server's own fields; the command run offline on a file, as a user runs it."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import IMPLIED_ANNOTATION, POLICY_REF_ANNOTATION, SCHEDULER_NAME
from extender.cli.commands import main
from extender.ops.manifests import (
    SERVER_METADATA,
    SYNC_WAVE,
    ManifestError,
    committable,
    pick_workload,
    read_documents,
)

HOST = "kubernetes.io/hostname"


def statefulset(name: str = "db", **meta) -> dict:  # noqa: ANN003
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "data", **meta},
        "spec": {
            "replicas": 3,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "db", "image": "registry.invalid/db:1"}]},
            },
        },
    }


POLICY = {
    "apiVersion": "placement.extender.dev/v1alpha1",
    "kind": "PlacementPolicy",
    "metadata": {"name": "db-policy", "namespace": "data"},
    "spec": {"caps": [{"topologyKey": HOST, "max": 1}]},
}


def run(capsys, tmp_path, docs: list[dict], *args: str) -> tuple[int, list[dict], str]:  # noqa: ANN001
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["adopt", "-f", str(path), "--offline", *args])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d is not None] if code == 0 else [], err


def test_adopt_from_a_file_prints_the_adopted_workload_as_yaml_and_writes_nothing(capsys, tmp_path) -> None:  # noqa: ANN001
    code, docs, err = run(capsys, tmp_path, [POLICY, statefulset()], "--policy-name", "db-policy")
    assert code == 0, err
    [policy, workload] = docs
    assert policy["spec"] == POLICY["spec"] and policy["metadata"]["annotations"] == {SYNC_WAVE: "-1"}
    template = workload["spec"]["template"]
    assert template["spec"]["schedulerName"] == SCHEDULER_NAME
    assert template["metadata"]["annotations"][POLICY_REF_ANNOTATION] == "db-policy"
    assert IMPLIED_ANNOTATION in template["metadata"]["annotations"]
    assert template["spec"]["affinity"]["podAntiAffinity"], "the cap's native mirror"
    assert workload["metadata"] == statefulset()["metadata"] and workload["apiVersion"] == "apps/v1"
    assert "from" in err and "nothing written" in err, "the notes go to stderr, the YAML alone to stdout"


def test_a_named_policy_missing_from_the_file_offline_says_what_to_give(capsys, tmp_path) -> None:  # noqa: ANN001
    code, _, err = run(capsys, tmp_path, [statefulset()], "--policy-name", "db-policy")
    assert code == 2 and "add the policy to the manifests, or drop --offline" in err, err


def test_several_workloads_need_a_name_and_the_name_picks_one(capsys, tmp_path) -> None:  # noqa: ANN001
    code, _, err = run(capsys, tmp_path, [POLICY, statefulset("a"), statefulset("b")], "--policy-name", "db-policy")
    assert code == 2 and "statefulset/a" not in err and "StatefulSet/a, StatefulSet/b" in err, err
    code, docs, err = run(
        capsys, tmp_path, [POLICY, statefulset("a"), statefulset("b")], "statefulset/b", "--policy-name", "db-policy"
    )
    assert code == 0 and [d["metadata"]["name"] for d in docs] == ["db-policy", "a", "b"], err
    assert [d["spec"]["template"]["spec"].get("schedulerName") for d in docs[1:]] == [None, SCHEDULER_NAME]


def test_retire_from_a_file_undoes_adopt_from_a_file(capsys, tmp_path) -> None:  # noqa: ANN001
    code, [policy, adopted], err = run(capsys, tmp_path, [POLICY, statefulset()], "--policy-name", "db-policy")
    assert code == 0, err
    path = tmp_path / "adopted.yaml"
    path.write_text(yaml.safe_dump_all([policy, adopted]))
    assert main(["retire", "-f", str(path), "--offline", "--no-translate"]) == 0
    out, _ = capsys.readouterr()
    [kept, retired] = [d for d in yaml.safe_load_all(out) if d]
    assert kept == policy, "retire's output replaces the file: the policy it holds stays"
    assert retired["spec"]["template"]["spec"] == {
        **statefulset()["spec"]["template"]["spec"],
        "schedulerName": "default-scheduler",
    }


def test_yaml_output_of_a_live_command_needs_a_dry_run(capsys) -> None:  # noqa: ANN001
    assert main(["adopt", "statefulset/db", "--policy-name", "p", "-o", "yaml"]) == 2
    assert "--dry-run" in capsys.readouterr().err


def test_a_file_without_a_workload_or_not_yaml_says_so() -> None:
    with pytest.raises(ManifestError, match="expected one StatefulSet or Deployment"):
        pick_workload([POLICY], None, "f.yaml")
    with pytest.raises(ManifestError, match="not YAML"):
        read_documents("a: [", "f.yaml")
    with pytest.raises(ManifestError, match="must be an object"):
        read_documents("- 1\n", "f.yaml")


SERVER = st.fixed_dictionaries(
    {},
    optional={
        "uid": st.uuids().map(str),
        "resourceVersion": st.integers(1, 10**6).map(str),
        "generation": st.integers(1, 9),
        "creationTimestamp": st.just("2026-11-28T00:00:00Z"),
        "managedFields": st.just([{"manager": "kubectl"}]),
    },
)
USER = st.dictionaries(
    st.sampled_from(["labels", "annotations"]), st.dictionaries(st.text("abc", min_size=1), st.text())
)


@settings(max_examples=200)
@given(server=SERVER, user=USER, status=st.booleans())
def test_committable_drops_exactly_the_api_servers_fields(server, user, status) -> None:  # noqa: ANN001
    obj = statefulset(**user, **server)
    if status:
        obj["status"] = {"replicas": 3}
    out = committable(obj)
    assert "status" not in out and not set(SERVER_METADATA) & set(out["metadata"])
    assert out["spec"] == obj["spec"] and {k: v for k, v in out["metadata"].items()} == {
        k: v for k, v in obj["metadata"].items() if k not in SERVER_METADATA and not (k == "annotations" and not v)
    }
    assert yaml.safe_load(yaml.safe_dump(out)) == out


@settings(max_examples=200)
@given(text=st.text(max_size=300))
def test_any_text_is_read_or_refused_with_a_manifest_error(text) -> None:  # noqa: ANN001
    try:
        docs = read_documents(text, "f")
    except ManifestError:
        return
    assert all(isinstance(d, dict) for d in docs)
    json.dumps(docs, default=str)

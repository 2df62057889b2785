"""What `adopt -f` gives a team that keeps everything in git (docs/how-to/gitops.md): every object
to commit (the PlacementPolicy, the ZoneRotation, the workload) in the order to apply them, each
marked for Argo CD's earlier wave; a template marked `zone-rotation: declared` exactly when its
record is committed with it (the extender then waits for that record instead of deciding one);
the committed record taken as it is offline; retire taking the mark out. Run as a user runs it,
offline on files."""

from __future__ import annotations

import pytest
import yaml

from extender.api.policy import ZONE_ROTATION_ANNOTATION, ZONE_ROTATION_DECLARED
from extender.cli.commands import main
from extender.ops.manifests import SYNC_WAVE, to_commit

HOST = "kubernetes.io/hostname"


def workload(kind: str = "StatefulSet", name: str = "crdb") -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "db"},
        "spec": {
            "replicas": 9,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "db", "image": "registry.invalid/db:1"}]},
            },
        },
    }


def policy(ordinal: bool) -> dict:
    spec: dict = {"caps": [{"topologyKey": HOST, "max": 1}]}
    if ordinal:
        spec["ordinalZones"] = {}
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "crdb", "namespace": "db"},
        "spec": spec,
    }


RECORD = {
    "apiVersion": "placement.extender.dev/v1alpha1",
    "kind": "ZoneRotation",
    "metadata": {
        "name": "crdb",
        "namespace": "db",
        "uid": "0a1b",
        "resourceVersion": "812",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "crdb", "uid": "dead"}],
    },
    "spec": {"statefulSet": "crdb", "order": ["zone-b", "zone-c", "zone-a"], "adopted": {"1": "zone-b", "4": "zone-a"}},
}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "crdb-conf"}, "data": {"a": "b"}}


def adopt(capsys, tmp_path, docs: list[dict]) -> tuple[list[dict], str]:  # noqa: ANN001
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    code = main(["adopt", "-f", str(path), "--offline", "--policy-name", "crdb"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [d for d in yaml.safe_load_all(out) if d], err


def declared(doc: dict) -> bool:
    annotations = doc["spec"]["template"]["metadata"].get("annotations") or {}
    return annotations.get(ZONE_ROTATION_ANNOTATION) == ZONE_ROTATION_DECLARED


@pytest.mark.parametrize(
    ("inputs", "kinds", "marked", "note"),
    [
        # the committed record: printed (server fields and owner out), the template declared
        ([policy(True), RECORD, workload()], ["PlacementPolicy", "ZoneRotation", "StatefulSet"], True, "committed"),
        # the input's order does not matter, nor other objects (kept, so the output can replace the file)
        (
            [workload(), CONFIGMAP, RECORD, policy(True)],
            ["PlacementPolicy", "ZoneRotation", "ConfigMap", "StatefulSet"],
            True,
            "committed",
        ),
        # ordinal zones, no record, offline: nothing declared, and the note says how to get the record
        ([policy(True), workload()], ["PlacementPolicy", "StatefulSet"], False, "rotation export statefulset/crdb"),
        # no ordinal zones: no record to commit, nothing declared, no note about one
        ([policy(False), workload()], ["PlacementPolicy", "StatefulSet"], False, None),
        ([policy(False), workload("Deployment")], ["PlacementPolicy", "Deployment"], False, None),
    ],
)
def test_adopt_prints_every_object_to_commit_in_apply_order(capsys, tmp_path, inputs, kinds, marked, note) -> None:  # noqa: ANN001, PLR0913
    docs, err = adopt(capsys, tmp_path, inputs)
    assert [d["kind"] for d in docs] == kinds
    assert declared(docs[-1]) is marked
    for doc in docs:
        if doc["kind"] in ("PlacementPolicy", "ZoneRotation"):
            assert doc["metadata"]["annotations"][SYNC_WAVE] == "-1", "applied before the workload by Argo CD"
            assert not {"uid", "resourceVersion", "ownerReferences"} & set(doc["metadata"])
        else:
            assert SYNC_WAVE not in (doc["metadata"].get("annotations") or {})
    if "ZoneRotation" in kinds:
        (record,) = [d for d in docs if d["kind"] == "ZoneRotation"]
        assert record["spec"] == RECORD["spec"], "the committed record is printed as it is"
    if "ConfigMap" in kinds:
        assert CONFIGMAP in docs
    if note is None:
        assert "ZoneRotation" not in err and "rotation export" not in err
    else:
        assert note in err, err


def test_a_wave_the_team_set_is_kept() -> None:
    record = {**RECORD, "metadata": {**RECORD["metadata"], "annotations": {SYNC_WAVE: "-5"}}}
    assert to_commit(record)["metadata"]["annotations"][SYNC_WAVE] == "-5"


def test_retire_takes_the_declaration_out_and_keeps_policy_and_record(capsys, tmp_path) -> None:  # noqa: ANN001
    docs, _ = adopt(capsys, tmp_path, [policy(True), RECORD, workload()])
    path = tmp_path / "adopted.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["retire", "-f", str(path), "--offline"]) == 0
    out = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in out] == ["PlacementPolicy", "ZoneRotation", "StatefulSet"]
    assert out[:2] == docs[:2]
    assert not declared(out[-1]) and out[-1]["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"


def test_kustomize_and_offline_need_a_file(capsys) -> None:  # noqa: ANN001
    assert main(["adopt", "statefulset/crdb", "--policy-name", "crdb", "--kustomize", "x"]) == 2
    assert "-f FILE" in capsys.readouterr().err


def test_adopt_help_shows_the_file_form_first(capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(["adopt", "--help"])
    out = capsys.readouterr().out
    usage = out.split("\n\n")[0]
    assert usage.index("-f FILE") < usage.index("statefulset/NAME")
    assert out.index("adopt -f") < out.index("adopt statefulset/")


class FakeApi:
    """What `rotation export` reads: the namespace's ZoneRotations (and nothing else here)."""

    def __init__(self, items: list[dict]) -> None:
        self.items = items
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, **_: object) -> dict:
        self.calls.append((method, path))
        if path.endswith("/zonerotations"):
            return {"items": self.items}
        raise AssertionError(f"unexpected read {path}")


@pytest.mark.parametrize("owned", [True, False])
def test_rotation_export_prints_the_live_record_to_commit(capsys, monkeypatch, owned) -> None:  # noqa: ANN001
    """Read-only; no server field and no ownerReference in the output; for a record an earlier
    version wrote with an ownerReference, the one-time patch that removes it, on stderr."""
    live = {k: v for k, v in RECORD.items() if k not in ("apiVersion", "kind")}
    if not owned:
        live = {**live, "metadata": {k: v for k, v in live["metadata"].items() if k != "ownerReferences"}}
    api = FakeApi([{**live, "status": {}}])
    monkeypatch.setattr("extender.kube.client.connect", lambda *a, **k: api)
    assert main(["rotation", "export", "statefulset/crdb", "-n", "db"]) == 0
    out, err = capsys.readouterr()
    (doc,) = [d for d in yaml.safe_load_all(out) if d]
    assert doc["kind"] == "ZoneRotation" and doc["spec"] == RECORD["spec"]
    assert not {"uid", "resourceVersion", "ownerReferences"} & set(doc["metadata"]) and "status" not in doc
    assert doc["metadata"]["annotations"] == {SYNC_WAVE: "-1"}
    patch = (
        "kubectl patch zonerotation crdb -n db --type=json "
        """-p '[{"op":"remove","path":"/metadata/ownerReferences"}]'"""
    )
    assert (patch in err) is owned, err
    assert all(method == "GET" for method, _ in api.calls)


def test_rotation_export_names_a_statefulset() -> None:
    assert main(["rotation", "export", "deployment/crdb"]) == 2

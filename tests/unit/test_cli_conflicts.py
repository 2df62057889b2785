"""adopt and retire read, decide and write again when their update meets a 409 (client-go's
RetryOnConflict): a controller's write between our read and our update, the StatefulSet
controller's status alone, must neither fail the command nor be overwritten.

The API here is plain data: one Deployment, whose resourceVersion moves on every write, and a
second writer that changes the object once between adopt's read and its first update."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from extender.api.policy import INLINE_POLICY_ANNOTATION
from extender.cli.commands import main
from extender.kube.client import KubeApiError

PATH = "/apis/apps/v1/namespaces/data/deployments/web"


class OneObjectApi:
    """GET and PUT of one object with optimistic concurrency, and `interleave` writes by another
    actor, each landing right after one of our reads."""

    def __init__(self, obj: dict[str, Any], interleave: list[dict[str, str]]) -> None:
        self.obj = obj
        self.interleave = list(interleave)
        self.puts: list[dict[str, Any]] = []
        self.conflicts = 0

    def _write(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)
        self.obj = obj

    def call(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        assert path == PATH, path
        if method == "GET":
            read = copy.deepcopy(self.obj)
            if self.interleave:  # the other writer lands after this read
                other = copy.deepcopy(self.obj)
                other["metadata"].setdefault("labels", {}).update(self.interleave.pop(0))
                self._write(other)
            return read
        assert method == "PUT"
        self.puts.append(body)
        if body["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise KubeApiError(409, "Conflict", "the object has been modified")
        self._write(copy.deepcopy(body))
        return self.obj


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "data", "resourceVersion": "7"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "w", "image": "w"}]}},
        },
    }


@pytest.fixture
def policy_file(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]}))
    return str(path)


@pytest.mark.parametrize("other_writes", [0, 1, 3])
def test_adopt_writes_once_on_top_of_every_concurrent_write(monkeypatch, policy_file, other_writes) -> None:
    interleave = [{f"other-{k}": "kept"} for k in range(other_writes)]
    api = OneObjectApi(deployment(), interleave)
    monkeypatch.setattr("extender.kube.client.connect", lambda *a: api)
    code = main(["adopt", "deployment/web", "-n", "data", "--policy-file", policy_file, "--kubeconfig", "x"])
    assert code == 0
    assert api.conflicts == other_writes, "each concurrent write cost one conflict and one more read"
    labels = api.obj["metadata"].get("labels") or {}
    assert all(labels.get(k) == "kept" for w in interleave for k in w), "no concurrent write was lost"
    template = api.obj["spec"]["template"]
    assert template["spec"]["schedulerName"] == "placement-scheduler"
    assert INLINE_POLICY_ANNOTATION in template["metadata"]["annotations"]


def test_retire_after_adopt_gives_up_with_the_conflict_after_five_attempts(monkeypatch, policy_file, capsys) -> None:
    api = OneObjectApi(deployment(), [])
    monkeypatch.setattr("extender.kube.client.connect", lambda *a: api)
    assert main(["adopt", "deployment/web", "-n", "data", "--policy-file", policy_file, "--kubeconfig", "x"]) == 0
    api.interleave = [{f"other-{k}": "kept"} for k in range(5)]  # a writer faster than every attempt
    assert main(["retire", "deployment/web", "-n", "data", "--kubeconfig", "x"]) == 3  # could not run
    assert api.conflicts == 5
    assert "409 Conflict" in capsys.readouterr().err
    api.interleave = [{"late": "kept"}]
    assert main(["retire", "deployment/web", "-n", "data", "--kubeconfig", "x"]) == 0
    assert api.obj["spec"]["template"]["spec"].get("schedulerName") == "default-scheduler"
    assert api.obj["metadata"]["labels"]["late"] == "kept"

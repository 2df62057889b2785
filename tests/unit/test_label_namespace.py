"""`python -m extender label-namespace`: the Helm chart's install hook (hack/helm/generate.py) puts
the Pod Security labels on the release's namespace with it, as one merge patch of that namespace."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cli import commands


class FakeApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, str | None]] = []

    def call(self, method: str, path: str, *, body: Any = None, content_type: str | None = None, **_: Any) -> None:
        self.calls.append((method, path, body, content_type))


@pytest.fixture()
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi()
    monkeypatch.setattr("extender.kube.client.connect", lambda kubeconfig=None, context=None: fake)
    return fake


def test_the_labels_are_one_merge_patch_of_that_namespace(api: FakeApi, capsys: pytest.CaptureFixture) -> None:
    code = commands.main(["label-namespace", "other", "pod-security.kubernetes.io/enforce=restricted", "team=db"])
    assert code == 0
    assert api.calls == [
        (
            "PATCH",
            "/api/v1/namespaces/other",
            {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted", "team": "db"}}},
            "application/merge-patch+json",
        )
    ]
    assert "other" in capsys.readouterr().out


@pytest.mark.parametrize("pair", ["no-equals-sign", "=value"])
def test_a_label_without_a_key_is_refused_before_any_write(api: FakeApi, pair: str) -> None:
    assert commands.main(["label-namespace", "other", pair]) == 2
    assert api.calls == []

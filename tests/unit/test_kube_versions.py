"""Issue 14: SUPPORTED_MINORS (extender/kube/versions.py) is the one list of tested Kubernetes
minors. hack/kube builds exactly those, deploy/ has a kube-scheduler of the pinned patch for
each, and serve warns at start when the API server's minor is not among them."""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from extender.kube.versions import SUPPORTED_MINORS, log_api_server_version, minor_of, support_note

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "hack" / "kube"
IMAGE = "registry.k8s.io/kube-scheduler"


def pinned(minor: str) -> str:
    gomod = (KUBE / f"v{minor}" / "go.mod").read_text()
    return re.search(r"^\s*k8s\.io/kubernetes (v\S+)", gomod, re.M).group(1)  # type: ignore[union-attr]


def _key(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))


def test_supported_minors_newest_first_and_three_or_more() -> None:
    assert len(SUPPORTED_MINORS) >= 3
    assert list(SUPPORTED_MINORS) == sorted(SUPPORTED_MINORS, key=_key, reverse=True)
    # The oldest kept is one that still exercises the skew `make mismatch` measures (it serves no
    # resource.k8s.io/v1 DeviceTaintRules, which the 1.37 kube-scheduler watches): hack/kube/README.md.
    assert _key(SUPPORTED_MINORS[-1]) <= (1, 34), "the oldest supported minor is no newer than 1.34"


def test_hack_kube_pins_exactly_the_supported_minors() -> None:
    dirs = sorted(p.name for p in KUBE.glob("v*") if (p / "go.mod").exists())
    assert dirs == sorted(f"v{m}" for m in SUPPORTED_MINORS)
    for minor in SUPPORTED_MINORS:
        assert minor_of(pinned(minor)) == minor
        # The staging modules are replaced with the tag of the same patch, never another one.
        gomod = (KUBE / f"v{minor}" / "go.mod").read_text()
        staging = re.findall(r"=> k8s\.io/\S+ (v\S+)", gomod)
        assert staging and set(staging) == {"v0." + pinned(minor).removeprefix("v1.")}


def test_build_script_lists_the_same_minors() -> None:
    listed = subprocess.run(
        ["bash", str(KUBE / "build.sh"), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == list(SUPPORTED_MINORS)


def test_build_script_refuses_an_unsupported_minor() -> None:
    result = subprocess.run(
        ["bash", str(KUBE / "build.sh")], env={"KUBE_VERSION": "1.20", "PATH": "/usr/bin:/bin"}, capture_output=True
    )
    assert result.returncode != 0
    assert b"not a supported minor" in result.stderr


def _images(kustomization: Path) -> list[dict]:
    return yaml.safe_load(kustomization.read_text()).get("images", [])


@pytest.mark.parametrize("minor", SUPPORTED_MINORS)
def test_deploy_has_a_component_and_an_overlay_per_minor(minor: str) -> None:
    component = ROOT / "deploy" / "components" / f"kube-{minor}" / "kustomization.yaml"
    assert yaml.safe_load(component.read_text())["kind"] == "Component"
    assert _images(component) == [{"name": IMAGE, "newTag": pinned(minor)}]
    overlay = yaml.safe_load((ROOT / "deploy" / "overlays" / f"kube-{minor}" / "kustomization.yaml").read_text())
    assert overlay["resources"] == ["../../base"]
    assert overlay["components"] == [f"../../components/kube-{minor}"]


def test_no_deploy_overlay_for_an_untested_minor() -> None:
    for parent in ("components", "overlays"):
        found = {p.name.removeprefix("kube-") for p in (ROOT / "deploy" / parent).glob("kube-*")}
        assert found == set(SUPPORTED_MINORS), parent


def test_base_runs_the_newest_minor() -> None:
    deployment = yaml.safe_load((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert f"{IMAGE}:{pinned(SUPPORTED_MINORS[0])}" in images


@pytest.mark.parametrize(
    "version,minor",
    [("v1.34.4", "1.34"), ("v1.33.13-eks-1a2b3c4", "1.33"), ("v1.35.0+k3s1", "1.35"), ("1.36.3", "1.36"), ("", None)],
)
def test_minor_of(version: str, minor: str | None) -> None:
    assert minor_of(version) == minor


def test_support_note_only_outside_the_tested_minors() -> None:
    for minor in SUPPORTED_MINORS:
        assert support_note(f"v{minor}.1") is None
    note = support_note("v1.29.4")
    assert note is not None and "v1.29.4" in note and "never newer than the API server" in note
    assert support_note("") is not None


class FakeApi:
    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str]] = []

    def call(self, method: str, path: str, **_: object) -> object:
        self.calls.append((method, path))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_start_logs_the_api_server_version(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi({"major": "1", "minor": "34", "gitVersion": "v1.34.4"})
    with caplog.at_level(logging.INFO, logger="extender"):
        assert log_api_server_version(api) == "v1.34.4"
    assert api.calls == [("GET", "/version")]
    assert any("Kubernetes v1.34.4" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_start_warns_outside_the_tested_range(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="extender"):
        log_api_server_version(FakeApi({"gitVersion": "v1.30.2"}))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "v1.30.2" in warnings[0] and "outside the tested minors" in warnings[0]


def test_start_survives_an_unreadable_version(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="extender"):
        assert log_api_server_version(FakeApi(ConnectionError("refused"))) is None
    assert any("could not read the API server's version" in r.getMessage() for r in caplog.records)


# -- hack/kube/add_minor.py: the next minor in one command -----------------------------------------

UPSTREAM_MOD = """module k8s.io/kubernetes

go 1.27.0

godebug default=go1.27

require (
\tgo.etcd.io/etcd/client/v3 v3.8.1
\tk8s.io/api v0.0.0
)

require (
\tgo.etcd.io/etcd/server/v3 v3.8.1 // indirect
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
)
"""


def _add_minor():
    import importlib.util

    spec = importlib.util.spec_from_file_location("add_minor", KUBE / "add_minor.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_add_minor_writes_the_module_from_the_release_go_mod() -> None:
    gomod = _add_minor().module_go_mod(UPSTREAM_MOD, "v1.38.1")
    assert "\ngo 1.27.0\n" in gomod
    assert "\tk8s.io/kubernetes v1.38.1\n" in gomod and "\tgo.etcd.io/etcd/server/v3 v3.8.1\n" in gomod
    assert re.findall(r"=> (k8s\.io/\S+ v\S+)", gomod) == [
        "k8s.io/api v0.38.1",
        "k8s.io/cri-streaming v0.38.1",
        "k8s.io/kube-scheduler v0.38.1",
    ]
    with pytest.raises(ValueError):
        _add_minor().module_go_mod(UPSTREAM_MOD, "1.38")


@pytest.mark.parametrize(
    "current,add,drop,line",
    [
        (("1.37", "1.36"), "1.38", set(), 'SUPPORTED_MINORS = ("1.38", "1.37", "1.36")'),
        (("1.37", "1.36", "1.35"), "1.38", {"1.35"}, 'SUPPORTED_MINORS = ("1.38", "1.37", "1.36")'),
        (("1.37", "1.36"), "1.37", set(), 'SUPPORTED_MINORS = ("1.37", "1.36")'),
        (("1.9", "1.10"), "1.11", set(), 'SUPPORTED_MINORS = ("1.11", "1.10", "1.9")'),
    ],
)
def test_add_minor_keeps_the_list_newest_first(current, add, drop, line) -> None:  # noqa: ANN001
    assert _add_minor().supported_minors_line(current, add, drop) == line

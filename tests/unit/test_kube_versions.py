"""SUPPORTED_MINORS (extender/kube/versions.py) is the one list of tested Kubernetes
minors. hack/kube builds exactly those, deploy/ has a kube-scheduler of the pinned patch for
each, and serve warns at start when the API server's minor is not among them."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    import sys

    if "add_minor" not in sys.modules:  # registered first: its dataclass looks its module up there
        spec = importlib.util.spec_from_file_location("add_minor", KUBE / "add_minor.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["add_minor"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["add_minor"]


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


# -- a minor on its release day: a pre-release tag, staging modules the proxy lacks, a newer Go --------

# k8s.io/kubernetes v1.38.0-rc.1's go.mod as the fake proxy serves it: Go 1.27, and two staging modules new
# in 1.38 (apiextensions-api, ktesting) that a proxy may not serve yet. sample-controller is replaced but
# required by nothing, as upstream (the real proxy serves no version of it, and `go` never asks).
RC_MOD = """module k8s.io/kubernetes

go 1.27.0

godebug default=go1.27

require (
\tgo.etcd.io/etcd/server/v3 v3.7.3
\tk8s.io/api v0.0.0
\tk8s.io/apiextensions-api v0.0.0
\tk8s.io/kube-scheduler v0.0.0
)

require k8s.io/ktesting v0.0.0 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiextensions-api => ./staging/src/k8s.io/apiextensions-api
\tk8s.io/ktesting => ./staging/src/k8s.io/ktesting
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
)
"""
RC = "v1.38.0-rc.1"
TOOLCHAINS = ["v0.0.1-go1.26.9.linux-amd64", "v0.0.1-go1.27.1.linux-amd64", "v0.0.1-go1.27.3.darwin-arm64"]
TOOLCHAINS += ["v0.0.1-go1.27.3.linux-amd64", "v0.0.1-go1.28rc1.linux-amd64", "v0.0.1-go1.28.0.linux-amd64"]


def _served(staging: tuple[str, ...], kubernetes_mod: str = RC_MOD, toolchains: bool = True) -> dict[str, bytes]:
    """The files a module proxy serves, by URL path: k8s.io/kubernetes at RC and `staging` at its tag."""
    files = {
        f"/k8s.io/kubernetes/@v/{RC}.mod": kubernetes_mod.encode(),
        f"/k8s.io/kubernetes/@v/{RC}.info": json.dumps({"Version": RC}).encode(),
    }
    for module in staging:
        files[f"/{module}/@v/v0.38.0-rc.1.info"] = json.dumps({"Version": "v0.38.0-rc.1"}).encode()
        files[f"/{module}/@v/list"] = b"v0.38.0-beta.0\nv0.38.0-rc.1\nv0.37.2\n"
    files["/k8s.io/apiextensions-api/@v/list"] = b"v0.38.0-beta.0\n"  # an older tag only
    if toolchains:
        files["/golang.org/toolchain/@v/list"] = "\n".join(TOOLCHAINS).encode()
    return files


@pytest.fixture
def module_proxy():
    """A module proxy on 127.0.0.1 serving what `proxy.files` holds (GET <path>), 404 for any other
    .info and 403 for any other list (as the real one answered for a module it serves no version of)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = self.server.files.get(self.path)  # type: ignore[attr-defined]
            if body is None:
                self.send_error(403 if self.path.endswith("/@v/list") else 404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.files = {}  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def no_http_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    "version,parsed",
    [
        ("v1.38.0-rc.1", ("1.38", "v0.38.0-rc.1")),
        ("v1.38.0-beta.0", ("1.38", "v0.38.0-beta.0")),
        ("v1.38.0-alpha.3", ("1.38", "v0.38.0-alpha.3")),
        ("v1.38.0", ("1.38", "v0.38.0")),
        ("v1.37.12", ("1.37", "v0.37.12")),
        ("v1.38", None),
        ("1.38.0", None),
        ("v1.38.0-rc1", None),
        ("v1.38.0+k3s1", None),
        ("v1.38.0-eks.1", None),
    ],
)
def test_add_minor_takes_a_release_or_a_pre_release_tag(version: str, parsed: tuple[str, str] | None) -> None:
    add_minor = _add_minor()
    if parsed is None:
        with pytest.raises(ValueError, match="pre-release like v1.38.0-rc.1"):
            add_minor.parse_version(version)
    else:
        assert add_minor.parse_version(version) == parsed


@pytest.mark.parametrize(
    "goproxy,proxies",
    [
        ("https://a.example/,direct", ["https://a.example"]),
        ("https://a.example|https://b.example/mirror,direct", ["https://a.example", "https://b.example/mirror"]),
        ("file:///srv/mods , off", ["file:///srv/mods"]),
        ("direct", []),
        ("off", []),
    ],
)
def test_add_minor_reads_the_proxies_goproxy_names(goproxy: str, proxies: list[str]) -> None:
    assert _add_minor().proxy_urls(goproxy) == proxies


def test_add_minor_names_each_staging_module_the_proxy_does_not_serve(module_proxy, no_http_proxy) -> None:
    add_minor = _add_minor()
    module_proxy.files = _served(("k8s.io/api", "k8s.io/kube-scheduler"))
    with pytest.raises(add_minor.NotServed) as failed:
        add_minor.resolve(RC, [module_proxy.url], "go1.26.8")
    message = str(failed.value)
    assert f"k8s.io/kubernetes {RC} cannot be built from the module proxy ({module_proxy.url})" in message
    # each one the proxy lacks, the version wanted, and what of that minor it does serve
    assert "  k8s.io/apiextensions-api v0.38.0-rc.1 (it serves v0.38.0-beta.0)\n" in message
    assert "  k8s.io/ktesting v0.38.0-rc.1 (no v0.38 version is served)\n" in message
    assert "2 staging module(s)" in message and "Nothing was written" in message
    # the served ones are not named, nor one only replaced (nothing requires it, so `go` never fetches it)
    assert "k8s.io/api " not in message and "kube-scheduler" not in message and "sample-controller" not in message
    # a release the proxy does not serve at all is named as such
    with pytest.raises(add_minor.NotServed, match=r"serves no k8s\.io/kubernetes v1\.38\.0-rc\.2"):
        add_minor.resolve("v1.38.0-rc.2", [module_proxy.url], "go1.26.8")


@pytest.mark.parametrize(
    "local_go,own_toolchain,toolchains,pinned",
    [
        ("go1.26.8", None, True, "go1.27.3"),  # the newest 1.27 patch the proxy serves as a toolchain
        ("go1.26.8", None, False, "go1.27.0"),  # no toolchain list: exactly the go line
        ("go1.26.8", "go1.27.2", True, "go1.27.2"),  # the release's own toolchain line wins
        ("go1.27.0", None, True, None),  # the local go builds it: no toolchain line, as for 1.34-1.37
        ("go1.28.1", None, True, None),
        ("devel go1.28-abcdef", None, True, None),
    ],
)
def test_add_minor_carries_the_go_toolchain_the_release_needs(
    module_proxy, no_http_proxy, local_go: str, own_toolchain: str | None, toolchains: bool, pinned: str | None
) -> None:
    add_minor = _add_minor()
    kubernetes_mod = RC_MOD.replace("godebug", f"toolchain {own_toolchain}\n\ngodebug") if own_toolchain else RC_MOD
    staging = ("k8s.io/api", "k8s.io/apiextensions-api", "k8s.io/ktesting", "k8s.io/kube-scheduler")
    module_proxy.files = _served(staging, kubernetes_mod, toolchains)
    # GOPROXY order: a proxy that serves nothing first, then ours, then direct (not a proxy)
    proxies = add_minor.proxy_urls(f"{module_proxy.url}/elsewhere,{module_proxy.url}|direct")
    resolved = add_minor.resolve(RC, proxies, local_go)
    assert (resolved.version, resolved.minor, resolved.toolchain) == (RC, "1.38", pinned)
    gomod = resolved.go_mod
    assert "\ngo 1.27.0\n" in gomod and f"\tk8s.io/kubernetes {RC}\n" in gomod
    assert ("\ntoolchain " in gomod) == (pinned is not None)
    if pinned:
        assert f"\ngo 1.27.0\n\ntoolchain {pinned}\n\nrequire (\n" in gomod
    assert re.findall(r"=> (k8s\.io/\S+ v\S+)", gomod) == [
        "k8s.io/api v0.38.0-rc.1",
        "k8s.io/apiextensions-api v0.38.0-rc.1",
        "k8s.io/ktesting v0.38.0-rc.1",
        "k8s.io/kube-scheduler v0.38.0-rc.1",
        "k8s.io/sample-controller v0.38.0-rc.1",
    ]


# -- hack/kube/build.sh: the Go toolchain per minor, and pre-release pins -------------------------------

FAKE_GO = """#!/bin/sh
# A stand-in for go: logs where and with which GOTOOLCHAIN it ran, builds nothing.
echo "$(pwd) GOTOOLCHAIN=${GOTOOLCHAIN:-} $*" >> "$FAKE_GO_LOG"
case "$1 $2" in
  "env GOVERSION") echo "$FAKE_GO_VERSION" ;;
  "version "*) echo "go version $FAKE_GO_VERSION linux/amd64" ;;
esac
"""


def _fake_go(tmp_path: Path, version: str) -> dict[str, str]:
    """The environment of a build.sh run whose `go` is FAKE_GO reporting `version`."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_GO_LOG": str(tmp_path / "go.log"),
        "FAKE_GO_VERSION": version,
        "HOME": str(tmp_path),
    }


@pytest.mark.parametrize(
    "gomod,local_go,selected",
    [
        ("go 1.27.0\n\ntoolchain go1.27.3\n", "go1.26.8", "go1.27.3"),  # the toolchain line, as add_minor writes it
        ("go 1.27.0\n\ntoolchain go1.27.3\n", "go1.28.0", "go1.27.3"),  # a pin is a pin
        ("go 1.27.0\n", "go1.26.8", "go1.27.0"),  # a go line newer than the local go
        ("go 1.27\n", "go1.26.8", "go1.27.0"),
        ("go 1.26.0\n", "go1.26.8", "local"),  # 1.34-1.37 today: the go on PATH, as ever
        ("go 1.26.8\n", "go1.26.8", "local"),
        ("go 1.26.10\n", "go1.26.9", "go1.26.10"),
    ],
)
def test_build_script_selects_the_toolchain_a_module_asks_for(
    tmp_path: Path, gomod: str, local_go: str, selected: str
) -> None:
    (tmp_path / "go.mod").write_text(f"module placementextender/kubebuild\n\n{gomod}")
    out = subprocess.run(
        ["bash", str(KUBE / "build.sh"), "--print-toolchain", str(tmp_path / "go.mod")],
        env=_fake_go(tmp_path, local_go),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == selected


def test_supported_minors_build_with_the_go_on_path(tmp_path: Path) -> None:
    """No supported minor asks for another Go than this machine's (go1.26.8): their cache keys stay as they are."""
    for minor in SUPPORTED_MINORS:
        out = subprocess.run(
            ["bash", str(KUBE / "build.sh"), "--print-toolchain"],
            env={**_fake_go(tmp_path, "go1.26.8"), "KUBE_VERSION": minor},
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout.strip() == "local", minor


def test_build_script_keys_and_builds_a_pre_release_pin_with_its_toolchain(tmp_path: Path) -> None:
    """A copy of hack/kube with a v1.38 module pinning v1.38.0-rc.1 and `toolchain go1.27.3`, built by
    a go that builds nothing: the pre-release pin is accepted and keyed, the module's go commands run
    with GOTOOLCHAIN=go1.27.3 and kwok's without, and 1.37's key is the one it always had (recipe and
    go.sum files only), so the binaries already cached stay valid."""
    kube = tmp_path / "hack" / "kube"
    (tmp_path / "extender" / "kube").mkdir(parents=True)
    (tmp_path / "extender" / "kube" / "versions.py").write_text('SUPPORTED_MINORS = ("1.38", "1.37")\n')
    for path in ("build.sh", "kwok/go.sum", "v1.37/go.mod", "v1.37/go.sum", "v1.37/tools.go"):
        (kube / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(KUBE / path, kube / path)
    (kube / "v1.38").mkdir()
    (kube / "v1.38" / "go.mod").write_text(
        "module placementextender/kubebuild\n\ngo 1.27.0\n\ntoolchain go1.27.3\n\n"
        "require (\n\tgo.etcd.io/etcd/server/v3 v3.7.3\n\tk8s.io/kubernetes v1.38.0-rc.1\n)\n"
    )
    (kube / "v1.38" / "go.sum").write_text("k8s.io/kubernetes v1.38.0-rc.1 h1:fake=\n")
    shutil.copy(KUBE / "v1.37" / "tools.go", kube / "v1.38" / "tools.go")
    recipe = re.search(r"^BUILD_RECIPE=(\d+)$", (KUBE / "build.sh").read_text(), re.M).group(1)  # type: ignore[union-attr]
    sums = (kube / "kwok" / "go.sum").read_bytes()
    env = {**_fake_go(tmp_path, "go1.26.8"), "KUBE_BIN_CACHE": str(tmp_path / "cache"), "KUBE_BUILD_NICE": "0"}
    for minor, pin, extra in (("1.38", "v1.38.0-rc.1", b"toolchain=go1.27.3\n"), ("1.37", pinned("1.37"), b"")):
        (tmp_path / "go.log").unlink(missing_ok=True)
        run = subprocess.run(
            ["bash", str(kube / "build.sh")], env={**env, "KUBE_VERSION": minor}, capture_output=True, text=True
        )
        assert run.returncode != 0 and "build produced no: etcd kube-apiserver" in run.stderr, run.stderr
        key = hashlib.sha256(
            f"recipe={recipe}\n".encode() + extra + (kube / f"v{minor}" / "go.sum").read_bytes() + sums
        ).hexdigest()[:12]
        assert (tmp_path / "cache" / f"kube-{pin}-{key}").is_dir(), sorted(
            p.name for p in (tmp_path / "cache").iterdir()
        )
        toolchain = "go1.27.3" if minor == "1.38" else ""
        builds = [line for line in (tmp_path / "go.log").read_text().splitlines() if " build " in line]
        assert [line.split(" build ")[0] for line in builds] == [
            f"{kube / f'v{minor}'} GOTOOLCHAIN={toolchain}",
            f"{kube / 'kwok'} GOTOOLCHAIN=",
        ]
        assert f"gitVersion={pin} " in builds[0]

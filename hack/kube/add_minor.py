"""Add a Kubernetes minor (or move one to a new patch) in one command: the build module, the
support list, and deploy/'s kube-scheduler component and overlay.

    python hack/kube/add_minor.py v1.38.0            # a new minor: the newest, so the default
    python hack/kube/add_minor.py v1.38.0-rc.1       # a pre-release, to try a minor before its release day
    python hack/kube/add_minor.py v1.37.3            # a newer patch of a supported minor
    python hack/kube/add_minor.py v1.38.0 --drop 1.34  # and retire the oldest in the same change

What it does, from k8s.io/kubernetes's own go.mod at that version (read from the module proxy,
`go env GOPROXY`):
  0. checks that the proxy serves every staging module that go.mod requires and replaces
     (./staging/src/k8s.io/X) at the tag of the same patch, and stops before writing anything,
     naming each one it does not serve and the version wanted (a new minor's first tags can name
     staging modules the proxy does not serve yet);
  1. hack/kube/v<minor>/go.mod: require k8s.io/kubernetes and the go.etcd.io/etcd/server/v3 that
     release requires, its `go` line, and every staging module of its `replace` block replaced with
     the tag of the same patch (./staging/src/k8s.io/X -> k8s.io/X v0.<minor>.<patch>); when that
     `go` line is newer than the local go, also a `toolchain` line (the release's own, else the
     newest patch of that Go minor the proxy serves), which build.sh reads to select that Go for
     this minor's build; then `go mod tidy` with that toolchain (tools.go and cmd/etcd copied from
     the newest existing module).
  2. SUPPORTED_MINORS in extender/kube/versions.py (kept newest first).
  3. deploy/components/kube-<minor>/ and deploy/overlays/kube-<minor>/ with the kube-scheduler tag;
     for a new newest minor also deploy/base/deployment.yaml's tag and the chart's values.yaml.
Then build and test it: `KUBE_VERSION=<minor> make test` (tests/unit/test_kube_versions.py checks
that every piece agrees). kwok, Karpenter and the support table (docs/install/versions.md) are left to you: see
hack/kube/README.md, "Adding the next minor".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VERSIONS_PY = REPO / "extender" / "kube" / "versions.py"
# A release (v1.38.0) or one of its pre-releases (v1.38.0-alpha.1, -beta.0, -rc.1), as Kubernetes tags them.
VERSION = re.compile(r"^v1\.(\d+)\.(\d+)(-(?:alpha|beta|rc)\.\d+)?$")
HEADER = (
    "// Pinned upstream Kubernetes components for the local e2e control plane.\n"
    "// Built by ./build.sh into a cache dir outside the repo; see README.md.\n"
    "module placementextender/kubebuild\n"
)
TIMEOUT = 30.0  # seconds for one request to the module proxy


class NotServed(Exception):
    """The module proxy does not serve what the release needs: the message names each piece."""


def parse_version(version: str) -> tuple[str, str]:
    """'v1.38.0-rc.1' -> ('1.38', 'v0.38.0-rc.1'): the minor, and the staging modules' tag of the same patch."""
    m = VERSION.match(version)
    if not m:
        raise ValueError(f"{version!r} is not a Kubernetes release like v1.38.0 or a pre-release like v1.38.0-rc.1")
    return f"1.{m.group(1)}", f"v0.{m.group(1)}.{m.group(2)}{m.group(3) or ''}"


def module_go_mod(kubernetes_mod: str, version: str, toolchain: str | None = None) -> str:
    """Our build module's go.mod for k8s.io/kubernetes `version`, from that release's go.mod text;
    with `toolchain goX.Y.Z` after its `go` line when given (build.sh selects that Go from it)."""
    _, staging_tag = parse_version(version)
    go_line = re.search(r"^go (\S+)$", kubernetes_mod, re.M)
    etcd = re.search(r"^\s*go\.etcd\.io/etcd/server/v3 (v\S+)", kubernetes_mod, re.M)
    if not (go_line and etcd and _replace_block(kubernetes_mod)):
        raise ValueError("the k8s.io/kubernetes go.mod has no go line, etcd server requirement or replace block")
    replaces = [f"\t{module} => {module} {staging_tag}" for module in staging_modules(kubernetes_mod)]
    if not replaces:
        raise ValueError("no staging module in the replace block")
    toolchain_line = f"\ntoolchain {toolchain}\n" if toolchain else ""
    return (
        f"{HEADER}\ngo {go_line.group(1)}\n{toolchain_line}\nrequire (\n\tgo.etcd.io/etcd/server/v3 {etcd.group(1)}\n"
        f"\tk8s.io/kubernetes {version}\n)\n\nreplace (\n" + "\n".join(replaces) + "\n)\n"
    )


def _replace_block(gomod: str) -> str | None:
    block = re.search(r"^replace \($(.*?)^\)$", gomod, re.M | re.S)
    return block.group(1) if block else None


def staging_modules(kubernetes_mod: str) -> list[str]:
    """The k8s.io/* modules the release's `replace` block points into ./staging, in its order."""
    return re.findall(
        r"^\s*(k8s\.io/[\w.-]+) => \./staging/src/k8s\.io/[\w.-]+\s*$", _replace_block(kubernetes_mod) or "", re.M
    )


def required_modules(gomod: str) -> set[str]:
    """Every module a go.mod's `require` lines name (block or single line, direct or indirect)."""
    names: set[str] = set()
    for block in re.findall(r"^require \($(.*?)^\)$", gomod, re.M | re.S):
        names.update(re.findall(r"^\s*(\S+) v\S+", block, re.M))
    names.update(re.findall(r"^require (\S+) v\S+", gomod, re.M))
    return names


# -- the module proxy (GOPROXY), as `go` asks it: GET <proxy>/<escaped module path>/@v/... -----------------


def proxy_urls(goproxy: str) -> list[str]:
    """The proxies a GOPROXY value names, in order ('direct' and 'off' are not proxies; ',' and '|' alike)."""
    return [
        p.strip().rstrip("/") for p in re.split(r"[,|]", goproxy) if p.strip() and p.strip() not in ("direct", "off")
    ]


def escape_path(module: str) -> str:
    """The module proxy protocol's case-encoding: each capital letter as '!' and the lower-case letter."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def fetch(proxies: Sequence[str], module: str, name: str) -> bytes | None:
    """<proxy>/<module>/@v/<name> from the first proxy that serves it; None if none does (4xx, as `go`
    takes a 404 or 410 to mean "not here", and some proxies answer 403 for a module they cannot serve)."""
    for proxy in proxies:
        url = f"{proxy}/{escape_path(module)}/@v/{name}"
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
                return response.read()
        except urllib.error.HTTPError as err:
            if 400 <= err.code < 500:
                continue
            raise NotServed(f"the module proxy {proxy} answered {err.code} for {module}/@v/{name}") from None
        except urllib.error.URLError as err:
            if isinstance(err.reason, FileNotFoundError):  # a file:// proxy without that file
                continue
            raise NotServed(f"could not reach the module proxy {proxy} ({err.reason})") from None
    return None


def served_versions(proxies: Sequence[str], module: str) -> list[str]:
    listed = fetch(proxies, module, "list")
    return listed.decode().split() if listed else []


def unserved_staging(kubernetes_mod: str, staging_tag: str, proxies: Sequence[str]) -> list[str]:
    """Each staging module the release requires that no proxy serves at `staging_tag`, described for a
    person: the module, the version wanted, and which of that minor's versions the proxy does serve.
    (Staging modules only replaced, never required, such as k8s.io/sample-controller, are never
    fetched by `go`; the proxy serves no version of some of them, so they are not checked.)"""
    required = required_modules(kubernetes_mod)
    minor_prefix = staging_tag.split("-")[0].rsplit(".", 1)[0] + "."  # v0.38.
    missing = []
    for module in staging_modules(kubernetes_mod):
        if module not in required or fetch(proxies, module, f"{staging_tag}.info") is not None:
            continue
        same_minor = [v for v in served_versions(proxies, module) if v.startswith(minor_prefix)]
        served = f"it serves {', '.join(same_minor)}" if same_minor else f"no {minor_prefix[:-1]} version is served"
        missing.append(f"{module} {staging_tag} ({served})")
    return missing


# -- the Go toolchain a release needs ------------------------------------------------------------------


def go_version_key(version: str) -> tuple[int, int, int, int, int]:
    """Go's version order: '1.27' (the language version) < '1.27rc1' < '1.27.0' < '1.27.3'."""
    m = re.match(r"^(?:go)?(\d+)\.(\d+)(?:\.(\d+)|(beta|rc)(\d+))?$", version.strip())
    if not m:
        raise ValueError(f"{version!r} is not a Go version")
    major, minor, patch, stage, n = m.groups()
    if patch is not None:
        return int(major), int(minor), int(patch), 2, 0
    if stage is not None:
        return int(major), int(minor), 0, {"beta": 0, "rc": 1}[stage], int(n)
    return int(major), int(minor), 0, -1, 0


def newest_toolchain(proxies: Sequence[str], go: str) -> str | None:
    """The newest released goX.Y.Z of `go`'s minor, at least `go`, that the proxy serves as a toolchain
    (golang.org/toolchain, the module `GOTOOLCHAIN=goX.Y.Z` downloads), or None if it lists none."""
    major_minor = go_version_key(go)[:2]
    found = set()
    for v in served_versions(proxies, "golang.org/toolchain"):
        m = re.search(r"-go(\d+\.\d+\.\d+)\.", v)  # v0.0.1-go1.27.3.linux-amd64
        if m and go_version_key(m.group(1))[:2] == major_minor and go_version_key(m.group(1)) >= go_version_key(go):
            found.add(m.group(1))
    return f"go{max(found, key=go_version_key)}" if found else None


def toolchain_needed(kubernetes_mod: str, local_go: str, proxies: Sequence[str]) -> str | None:
    """None when the local go (e.g. 'go1.26.8') builds the release; else the toolchain to pin: the
    release's own `toolchain` line, else the newest patch of its `go` line's minor the proxy serves,
    else exactly its `go` line."""
    go_line = re.search(r"^go (\S+)$", kubernetes_mod, re.M)
    try:
        local = go_version_key(local_go)
    except ValueError:  # a development build of go ('devel go1.28-...'): taken to be new enough
        return None
    if not go_line or go_version_key(go_line.group(1)) <= local:
        return None
    own = re.search(r"^toolchain (go\S+)$", kubernetes_mod, re.M)
    if own and go_version_key(own.group(1)) >= go_version_key(go_line.group(1)):
        return own.group(1)
    go = go_line.group(1) if re.fullmatch(r"\d+\.\d+\.\d+", go_line.group(1)) else f"{go_line.group(1)}.0"
    return newest_toolchain(proxies, go) or f"go{go}"


@dataclass(frozen=True)
class Resolved:
    version: str
    minor: str
    go_mod: str  # hack/kube/v<minor>/go.mod before `go mod tidy`
    toolchain: str | None  # the pinned Go toolchain when the local go is too old, else None


def resolve(version: str, proxies: Sequence[str], local_go: str) -> Resolved:
    """Everything add_minor writes into the build module, read from the module proxies (their URLs,
    as GOPROXY names them) alone: no `go` and nothing written. Raises NotServed naming whatever the
    proxy lacks, ValueError for a version that is no Kubernetes tag."""
    minor, staging_tag = parse_version(version)
    upstream = fetch(proxies, "k8s.io/kubernetes", f"{version}.mod")
    if upstream is None:
        raise NotServed(
            f"the module proxy ({', '.join(proxies)}) serves no k8s.io/kubernetes {version}"
            f" (`go list -m -versions k8s.io/kubernetes` lists what it serves)"
        )
    kubernetes_mod = upstream.decode()
    missing = unserved_staging(kubernetes_mod, staging_tag, proxies)
    if missing:
        raise NotServed(
            f"k8s.io/kubernetes {version} cannot be built from the module proxy ({', '.join(proxies)}) yet: its"
            f" go.mod requires and replaces {len(missing)} staging module(s) the proxy does not serve at the"
            " version wanted:\n" + "".join(f"  {line}\n" for line in missing) + "Nothing was written. Try again"
            " when `go list -m -versions <module>` lists them (or try another tag of the release)."
        )
    toolchain = toolchain_needed(kubernetes_mod, local_go, proxies)
    return Resolved(version, minor, module_go_mod(kubernetes_mod, version, toolchain), toolchain)


def supported_minors_line(current: tuple[str, ...], add: str, drop: set[str]) -> str:
    """The SUPPORTED_MINORS line with `add` in and `drop` out, newest first."""
    minors = sorted({*current, add} - drop, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True)
    return "SUPPORTED_MINORS = (" + ", ".join(f'"{m}"' for m in minors) + ")"


def _current_minors() -> tuple[str, ...]:
    line = re.search(r"^SUPPORTED_MINORS = \((.*)\)$", VERSIONS_PY.read_text(), re.M)
    assert line, f"no SUPPORTED_MINORS line in {VERSIONS_PY}"
    return tuple(re.findall(r'"([\d.]+)"', line.group(1)))


def _go(*args: str) -> str:
    """`go <args>` with the local toolchain, outside any module; its output, stripped."""
    out = subprocess.run(
        ["go", *args], cwd="/", env=dict(os.environ, GOTOOLCHAIN="local"), capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.exit(f"go {' '.join(args)} failed: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


def _kubernetes_mod_without_proxy(version: str) -> str:
    """The release's go.mod through `go mod download`, for a GOPROXY that names no proxy (direct)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        cwd=HERE / f"v{_current_minors()[0]}",
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"go mod download k8s.io/kubernetes@{version} failed: {out.stderr.strip() or out.stdout.strip()}")
    return Path(json.loads(out.stdout)["GoMod"]).read_text()


def _deploy_files(minor: str, version: str) -> None:
    component = REPO / "deploy" / "components" / f"kube-{minor}"
    overlay = REPO / "deploy" / "overlays" / f"kube-{minor}"
    component.mkdir(parents=True, exist_ok=True)
    overlay.mkdir(parents=True, exist_ok=True)
    (component / "kustomization.yaml").write_text(
        f"# The kube-scheduler that matches a Kubernetes {minor} cluster"
        f" (the version the e2e matrix runs on {minor}).\n"
        "# Use it on its own kustomization (components: [<this dir>]) over deploy/ or deploy/overlays/tls/.\n"
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nimages:\n"
        f"  - name: registry.k8s.io/kube-scheduler\n    newTag: {version}\n"
    )
    (overlay / "kustomization.yaml").write_text(
        f"# kubectl apply -k deploy/overlays/kube-{minor}/\n"
        f"# deploy/ with the kube-scheduler of a Kubernetes {minor} cluster ({version}): never run a kube-scheduler\n"
        "# newer than the cluster's API server (docs/install/index.md#pick-your-clusters-minor).\n"
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\n"
        f"components:\n  - ../../components/kube-{minor}\n"
    )


def _retag_newest(version: str) -> None:
    deployment = REPO / "deploy" / "base" / "deployment.yaml"
    deployment.write_text(
        re.sub(
            r"registry\.k8s\.io/kube-scheduler:v[\w.+-]+",
            f"registry.k8s.io/kube-scheduler:{version}",
            deployment.read_text(),
        )
    )
    values = REPO / "deploy" / "helm" / "placement-scheduler" / "values.yaml"
    values.write_text(
        re.sub(r"(?m)^(\s+tag: )v1\.\d+\.\d+(?:-[\w.]+)?", rf"\g<1>{version}", values.read_text(), count=1)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "version", help="a k8s.io/kubernetes release, e.g. v1.38.0, or a pre-release, e.g. v1.38.0-rc.1"
    )
    parser.add_argument("--drop", action="append", default=[], help="a minor to retire in the same change")
    args = parser.parse_args(argv)
    try:
        minor, _ = parse_version(args.version)
    except ValueError as err:
        parser.error(str(err))
    goproxy = _go("env", "GOPROXY")
    local_go = _go("env", "GOVERSION")
    proxies = proxy_urls(goproxy)
    try:
        if proxies:
            resolved = resolve(args.version, proxies, local_go)
        else:
            print(f"GOPROXY={goproxy} names no module proxy: the staging modules are not checked", file=sys.stderr)
            kubernetes_mod = _kubernetes_mod_without_proxy(args.version)
            toolchain = toolchain_needed(kubernetes_mod, local_go, [])
            resolved = Resolved(args.version, minor, module_go_mod(kubernetes_mod, args.version, toolchain), toolchain)
    except NotServed as err:
        sys.exit(f"add_minor: {err}")
    current = _current_minors()
    module = HERE / f"v{minor}"
    if not module.exists():
        shutil.copytree(HERE / f"v{current[0]}", module, ignore=shutil.ignore_patterns("go.mod", "go.sum"))
    (module / "go.mod").write_text(resolved.go_mod)
    (module / "go.sum").unlink(missing_ok=True)
    env = dict(os.environ, GOTOOLCHAIN=resolved.toolchain) if resolved.toolchain else None
    subprocess.run(["go", "mod", "tidy"], cwd=module, env=env, check=True)
    text = VERSIONS_PY.read_text()
    VERSIONS_PY.write_text(
        re.sub(r"(?m)^SUPPORTED_MINORS = \(.*\)$", supported_minors_line(current, minor, set(args.drop)), text)
    )
    _deploy_files(minor, args.version)
    if _current_minors()[0] == minor:
        _retag_newest(args.version)
    for old in args.drop:
        for path in (
            HERE / f"v{old}",
            REPO / "deploy/components" / f"kube-{old}",
            REPO / "deploy/overlays" / f"kube-{old}",
        ):
            shutil.rmtree(path, ignore_errors=True)
    print(f"{args.version}: hack/kube/v{minor}/, SUPPORTED_MINORS {_current_minors()}, deploy/ kube-{minor}")
    if resolved.toolchain:
        print(
            f"Go: {args.version} needs a newer Go than the local {local_go}; hack/kube/v{minor}/go.mod pins"
            f" toolchain {resolved.toolchain}, and build.sh selects it (GOTOOLCHAIN) for this minor's build"
        )
    print(f"next: KUBE_VERSION={minor} make test   (then make test-matrix for the support table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Add a Kubernetes minor (or move one to a new patch) in one command: the build module, the
support list, and deploy/'s kube-scheduler component and overlay.

    python hack/kube/add_minor.py v1.38.0            # a new minor: the newest, so the default
    python hack/kube/add_minor.py v1.37.3            # a newer patch of a supported minor
    python hack/kube/add_minor.py v1.38.0 --drop 1.34  # and retire the oldest in the same change

What it does, from k8s.io/kubernetes's own go.mod at that version (downloaded from the module
proxy with `go mod download`):
  1. hack/kube/v<minor>/go.mod: require k8s.io/kubernetes and the go.etcd.io/etcd/server/v3 that
     release requires, its `go` line, and every staging module of its `replace` block replaced with
     the tag of the same patch (./staging/src/k8s.io/X -> k8s.io/X v0.<minor>.<patch>); then
     `go mod tidy` (tools.go and cmd/etcd copied from the newest existing module).
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
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VERSIONS_PY = REPO / "extender" / "kube" / "versions.py"
VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
HEADER = (
    "// Pinned upstream Kubernetes components for the local e2e control plane.\n"
    "// Built by ./build.sh into a cache dir outside the repo; see README.md.\n"
    "module placementextender/kubebuild\n"
)


def module_go_mod(kubernetes_mod: str, version: str) -> str:
    """Our build module's go.mod for k8s.io/kubernetes `version`, from that release's go.mod text."""
    m = VERSION.match(version)
    if not m:
        raise ValueError(f"{version!r} is not a Kubernetes release like v1.38.0")
    staging_tag = f"v0.{m.group(1)}.{m.group(2)}"
    go_line = re.search(r"^go (\S+)$", kubernetes_mod, re.M)
    etcd = re.search(r"^\s*go\.etcd\.io/etcd/server/v3 (v\S+)", kubernetes_mod, re.M)
    block = re.search(r"^replace \($(.*?)^\)$", kubernetes_mod, re.M | re.S)
    if not (go_line and etcd and block):
        raise ValueError("the k8s.io/kubernetes go.mod has no go line, etcd server requirement or replace block")
    replaces = []
    for line in block.group(1).strip().splitlines():
        staged = re.match(r"^\s*(k8s\.io/[\w.-]+) => \./staging/src/k8s\.io/[\w.-]+$", line)
        if staged:
            replaces.append(f"\t{staged.group(1)} => {staged.group(1)} {staging_tag}")
    if not replaces:
        raise ValueError("no staging module in the replace block")
    return (
        f"{HEADER}\ngo {go_line.group(1)}\n\nrequire (\n\tgo.etcd.io/etcd/server/v3 {etcd.group(1)}\n"
        f"\tk8s.io/kubernetes {version}\n)\n\nreplace (\n" + "\n".join(replaces) + "\n)\n"
    )


def supported_minors_line(current: tuple[str, ...], add: str, drop: set[str]) -> str:
    """The SUPPORTED_MINORS line with `add` in and `drop` out, newest first."""
    minors = sorted({*current, add} - drop, key=lambda v: tuple(int(p) for p in v.split(".")), reverse=True)
    return "SUPPORTED_MINORS = (" + ", ".join(f'"{m}"' for m in minors) + ")"


def _current_minors() -> tuple[str, ...]:
    line = re.search(r"^SUPPORTED_MINORS = \((.*)\)$", VERSIONS_PY.read_text(), re.M)
    assert line, f"no SUPPORTED_MINORS line in {VERSIONS_PY}"
    return tuple(re.findall(r'"([\d.]+)"', line.group(1)))


def _kubernetes_mod(version: str) -> str:
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
        "# newer than the cluster's API server (see the README's install section).\n"
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\n"
        f"components:\n  - ../../components/kube-{minor}\n"
    )


def _retag_newest(version: str) -> None:
    deployment = REPO / "deploy" / "base" / "deployment.yaml"
    deployment.write_text(
        re.sub(
            r"registry\.k8s\.io/kube-scheduler:v[\d.]+",
            f"registry.k8s.io/kube-scheduler:{version}",
            deployment.read_text(),
        )
    )
    values = REPO / "deploy" / "helm" / "placement-scheduler" / "values.yaml"
    values.write_text(re.sub(r"(?m)^(\s+tag: )v1\.\d+\.\d+", rf"\g<1>{version}", values.read_text(), count=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="a k8s.io/kubernetes release, e.g. v1.38.0")
    parser.add_argument("--drop", action="append", default=[], help="a minor to retire in the same change")
    args = parser.parse_args(argv)
    m = VERSION.match(args.version)
    if not m:
        parser.error(f"{args.version!r} is not a Kubernetes release like v1.38.0")
    minor = f"1.{m.group(1)}"
    current = _current_minors()
    module = HERE / f"v{minor}"
    if not module.exists():
        shutil.copytree(HERE / f"v{current[0]}", module, ignore=shutil.ignore_patterns("go.mod", "go.sum"))
    (module / "go.mod").write_text(module_go_mod(_kubernetes_mod(args.version), args.version))
    (module / "go.sum").unlink(missing_ok=True)
    subprocess.run(["go", "mod", "tidy"], cwd=module, check=True)
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
    print(f"next: KUBE_VERSION={minor} make test   (then make test-matrix for the support table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

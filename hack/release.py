"""make release: the artifacts a platform team pulls, written to dist/.

    .venv/bin/python hack/release.py [--out dist] [--check-only]

- dist/placement-extender-<version>.oci.tar: the image, built from the Dockerfile (hack/image/build.py,
  cached by its inputs), named placement-extender:<version>;
- dist/placement-scheduler-<version>.tgz: the Helm chart (`helm package`, the pinned helm of
  hack/helm/build.sh);
- dist/SHA256SUMS: both, as `sha256sum -c` reads them.

The version is pyproject.toml's, the one place it is set; every other place that names it (the
chart's version and appVersion, its image tag, the image component's tag; and any manifest under
deploy/ that hard-codes the image's tag, which none should: each install takes it from the
component) must agree, or nothing is built and each disagreement is named (--check-only checks
that alone; tests/unit/test_release.py runs it). How to push the artifacts: docs/install/release.md.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deploy" / "helm" / "placement-scheduler"
IMAGE = "placement-extender"


def version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def version_places(root: Path = REPO) -> dict[str, str | None]:
    """Every place outside pyproject.toml that names the release version: where -> what it says."""
    chart = yaml.safe_load((root / "deploy/helm/placement-scheduler/Chart.yaml").read_text())
    values = yaml.safe_load((root / "deploy/helm/placement-scheduler/values.yaml").read_text())
    component = yaml.safe_load((root / "deploy/components/image/kustomization.yaml").read_text())
    places: dict[str, str | None] = {
        "deploy/helm/placement-scheduler/Chart.yaml version": str(chart.get("version")),
        "deploy/helm/placement-scheduler/Chart.yaml appVersion": str(chart.get("appVersion")),
        "deploy/helm/placement-scheduler/values.yaml image.tag": str((values.get("image") or {}).get("tag")),
        "deploy/components/image/kustomization.yaml newTag": str(
            next((i.get("newTag") for i in component.get("images") or () if i.get("name") == IMAGE), None)
        ),
    }
    # Every install (deploy/base, the overlays, deploy/optional/*/) names the image untagged and takes
    # its tag from the component; a manifest that hard-codes one is a place too (the optional ones
    # did, until they became kustomizations including the component).
    for manifest in sorted((root / "deploy").rglob("*.yaml")):
        if "helm" in manifest.relative_to(root).parts:
            continue
        for match in re.finditer(rf"image:\s*{IMAGE}:(\S+)", manifest.read_text()):
            places[f"{manifest.relative_to(root)} image"] = match.group(1)
    return places


def disagreements(root: Path = REPO) -> list[str]:
    """The places whose version is not pyproject.toml's, each with what it says."""
    wanted = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    return [
        f"{where} says {said}, pyproject.toml {wanted}"
        for where, said in version_places(root).items()
        if said != wanted
    ]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _last_line(command: list[str]) -> str:
    result = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO / "dist"), help="where the artifacts go (default dist/)")
    parser.add_argument("--check-only", action="store_true", help="check that every place names one version")
    args = parser.parse_args(argv)
    problems = disagreements()
    if problems:
        print("release: the version is set in pyproject.toml alone; these places disagree:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    release = version()
    if args.check_only:
        print(f"release {release}: every place agrees")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    archive = Path(_last_line([sys.executable, str(REPO / "hack/image/build.py"), "--base", "debian"]))
    image = out / f"{IMAGE}-{release}.oci.tar"
    shutil.copyfile(archive, image)
    helm = _last_line(["bash", str(REPO / "hack/helm/build.sh")])
    subprocess.run([helm, "package", str(CHART), "--destination", str(out)], check=True, stdout=subprocess.DEVNULL)
    chart = out / f"placement-scheduler-{release}.tgz"
    if not chart.exists():
        print(f"release: helm package wrote no {chart.name}", file=sys.stderr)
        return 1
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{_sha256(p)}  {p.name}\n" for p in (image, chart)))
    print(f"release {release}:")
    for path in (image, chart, sums):
        print(f"  {path}")
    print("push them: docs/install/release.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

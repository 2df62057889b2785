"""make release: the artifacts a platform team adopts, built from a release tag, written to dist/.

    python hack/release.py prepare 0.2.0-rc.1   # set every place that names the version
    python hack/release.py [--out dist]          # make release: HEAD's tag v<version>, a clean tree
    python hack/release.py --dev [--out dist]    # make release DEV=1: any tree, never a release version
    python hack/release.py --check-only [--version V]

What it writes (docs/install/release.md):

- placement-extender-<version>.oci.tar: the image built from the Dockerfile (hack/image/build.py,
  cached by its inputs), one image named placement-extender:<version>;
- placement-scheduler-<version>.tgz: the Helm chart (`helm package`, the pinned helm of
  hack/helm/build.sh);
- placement-extender-<version>.sbom.cdx.json: the image's SBOM, CycloneDX JSON: its Python
  environment as the CycloneDX generator (cyclonedx-py) reads it, run with the image's own python,
  and its Debian packages (pkg:deb), from the image's layers;
- THIRD_PARTY_NOTICES: the image's own file (/usr/share/doc/placement-extender/, written by the
  Dockerfile from what it installed; hack/notices.py);
- SHA256SUMS: all four, as `(cd dist && sha256sum -c SHA256SUMS)` checks them.

The version is the git tag on HEAD, `v<version>`, <version> being semver: MAJOR.MINOR.PATCH with
an optional pre-release -alpha.N, -beta.N or -rc.N. The places that name it must say it already
(`prepare` writes them, and is committed before tagging): the chart's version and appVersion, its
image tag (or an empty tag, which the chart reads as appVersion), the kustomize image component's
newTag, a `## <version>` section of CHANGELOG.md, and pyproject.toml's version in its PEP 440 form
(0.2.0-rc.1 is 0.2.0rc1; see pep440()). pyproject.toml holds it written out, not derived from git
(setuptools-scm), because the image is built from a context without .git and a source archive has
none either: the package's version must not depend on where it is built. Nothing is built when
the tree has uncommitted changes, HEAD has no such tag, or a place disagrees (each is named).

--dev (make release DEV=1) builds any tree, as <places' version>-dev.g<commit>[.dirty]: never a
release version (a pre-release identifier no tag uses, sorting before the version it names).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "hack"))

import notices  # noqa: E402

CHART = Path("deploy/helm/placement-scheduler")
IMAGE = "placement-extender"
NOTICES_IN_IMAGE = "usr/share/doc/placement-extender/THIRD_PARTY_NOTICES"
VENV_IN_IMAGE = "/opt/extender"
SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-(alpha|beta|rc)\.(0|[1-9]\d*))?")
PEP440_PRE = {"alpha": "a", "beta": "b", "rc": "rc"}
UNRELEASED = "## Unreleased"


class ReleaseError(RuntimeError):
    pass


# --- versions --------------------------------------------------------------------------------------


def parse(version: str) -> re.Match[str]:
    match = SEMVER.fullmatch(version)
    if not match:
        raise ReleaseError(
            f"{version!r} is not a release version: MAJOR.MINOR.PATCH, optionally with -alpha.N, -beta.N or -rc.N"
        )
    return match


def pep440(version: str) -> str:
    """The Python package's version for a release version: 0.2.0 -> 0.2.0, 0.2.0-rc.1 -> 0.2.0rc1,
    -alpha.N -> aN, -beta.N -> bN (PEP 440's pre-release spellings; both order the same way)."""
    match = parse(version)
    core = ".".join(match.group(1, 2, 3))
    return core + (PEP440_PRE[match.group(4)] + match.group(5) if match.group(4) else "")


def dev_version(base: str, commit: str, dirty: bool) -> tuple[str, str]:
    """(image/chart version, Python version) of a dev build of `base` at `commit`."""
    suffix = f"g{commit[:12]}" + (".dirty" if dirty else "")
    semver = f"{base}{'.' if '-' in base else '-'}dev.{suffix}"
    return semver, f"{pep440(base)}.dev0+{suffix}"


# --- the places that name the version --------------------------------------------------------------


def _yaml(root: Path, path: str) -> dict:
    return yaml.safe_load((root / path).read_text()) or {}


def changelog_sections(root: Path) -> list[str]:
    """CHANGELOG.md's release sections, newest first (its `## <version>` headings)."""
    text = (root / "CHANGELOG.md").read_text()
    return re.findall(r"^## \[?v?([0-9][^\]\s]*)\]?", text, re.M)


def version_places(root: Path = REPO) -> dict[str, str]:
    """Every place that names the release version: where -> what it says ("" for an empty value)."""
    chart = _yaml(root, f"{CHART}/Chart.yaml")
    values = _yaml(root, f"{CHART}/values.yaml")
    component = _yaml(root, "deploy/components/image/kustomization.yaml")
    tag = (values.get("image") or {}).get("tag")
    places = {
        "pyproject.toml version": str(tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]),
        f"{CHART}/Chart.yaml version": str(chart.get("version") or ""),
        f"{CHART}/Chart.yaml appVersion": str(chart.get("appVersion") or ""),
        f"{CHART}/values.yaml image.tag": "" if tag is None else str(tag),
        "deploy/components/image/kustomization.yaml newTag": str(
            next((i.get("newTag") for i in component.get("images") or () if i.get("name") == IMAGE), "")
        ),
    }
    # Every install (deploy/base, the overlays, deploy/optional/*/) names the image untagged and
    # takes its tag from the component: a manifest that hard-codes one is a place too.
    for manifest in sorted((root / "deploy").rglob("*.yaml")):
        if "helm" in manifest.relative_to(root).parts:
            continue
        for match in re.finditer(rf"image:\s*{IMAGE}:(\S+)", manifest.read_text()):
            places[f"{manifest.relative_to(root)} image"] = match.group(1)
    return places


def disagreements(root: Path = REPO, version: str | None = None, *, changelog: bool = True) -> list[str]:
    """The places that do not name `version` (default: the chart's), each with what it says; with
    `changelog`, also a CHANGELOG.md without its section (a release needs one, a tree between
    releases collects its notes under Unreleased)."""
    places = version_places(root)
    wanted = version or places[f"{CHART}/Chart.yaml version"]
    problems = []
    for where, said in places.items():
        if where == "pyproject.toml version":
            ok, expected = said == pep440(wanted), pep440(wanted)
        elif where.endswith("values.yaml image.tag"):
            ok, expected = said in ("", wanted), f"{wanted} or empty (the chart's appVersion)"
        else:
            ok, expected = said == wanted, wanted
        if not ok:
            problems.append(f"{where} says {said or '(nothing)'}, not {expected}")
    if changelog and wanted not in changelog_sections(root):
        problems.append(f"CHANGELOG.md has no `## {wanted}` section")
    return problems


def _replace(path: Path, pattern: str, value: str, *, count: int = 1) -> None:
    text = path.read_text()

    def keep(m: re.Match[str]) -> str:  # the first and last groups stay, the value goes between
        return m.group(1) + value + m.group(len(m.groups()))

    new, found = re.subn(pattern, keep, text, count=count, flags=re.M)
    if not found:
        raise ReleaseError(f"{path}: found no {pattern!r} to set")
    path.write_text(new)


def set_version(root: Path, version: str, *, python_version: str | None = None, changelog: bool = True) -> None:
    """Write `version` into every place (the edits keep each file's comments and layout)."""
    chart = root / CHART
    _replace(root / "pyproject.toml", r'^(version = ")[^"]*(")', python_version or pep440(version))
    _replace(chart / "Chart.yaml", r"^(version: )\S+()$", version)
    _replace(chart / "Chart.yaml", r'^(appVersion: )"?[^"\n]*"?()$', f'"{version}"')
    values = chart / "values.yaml"
    tag = (_yaml(root, f"{CHART}/values.yaml").get("image") or {}).get("tag")
    if tag not in (None, ""):  # an empty tag already means appVersion
        _replace(values, r'^(image:\n(?:[ #].*\n|\n)*?  tag: )"?[^"\n]*"?()$', f'"{version}"')
    _replace(
        root / "deploy/components/image/kustomization.yaml",
        rf'^(  - name: {IMAGE}\n(?:    .*\n)*?    newTag: )"?[^"\n]*"?()$',
        f'"{version}"',
    )
    if changelog and version not in changelog_sections(root):
        path = root / "CHANGELOG.md"
        text = path.read_text()
        if UNRELEASED not in text:
            raise ReleaseError(f"{path}: no `{UNRELEASED}` heading to put the `## {version}` section under")
        # What was collected under Unreleased becomes the release's; Unreleased starts empty.
        path.write_text(text.replace(UNRELEASED + "\n", f"{UNRELEASED}\n\n## {version}\n", 1))


# --- git -------------------------------------------------------------------------------------------


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def tree_state(root: Path = REPO) -> tuple[str | None, str, bool]:
    """(the tag on HEAD or None, HEAD's commit, whether the tree has uncommitted changes)."""
    head = _git(root, "rev-parse", "HEAD")
    if head.returncode != 0:
        raise ReleaseError(f"{root} is not a git checkout with a commit: a release is built from a tagged commit")
    tag = _git(root, "describe", "--exact-match", "--tags", "HEAD")
    # untracked files count: one under extender/ would be in the image and in no commit
    dirty = bool(_git(root, "status", "--porcelain").stdout.strip())
    return (tag.stdout.strip() or None) if tag.returncode == 0 else None, head.stdout.strip(), dirty


def release_version(root: Path = REPO) -> str:
    """The version HEAD's tag names, or why there is none to build (ReleaseError)."""
    tag, _, dirty = tree_state(root)
    if dirty:
        raise ReleaseError(
            "the tree has uncommitted changes, and a release is built from its tag's commit alone: commit "
            "them (and tag that commit), or build a dev version: make release DEV=1"
        )
    if tag is None:
        raise ReleaseError(
            "HEAD has no release tag. To release version X: python hack/release.py prepare X; commit; "
            "git tag vX; make release. A dev build of any commit: make release DEV=1"
        )
    if not tag.startswith("v"):
        raise ReleaseError(f"HEAD's tag {tag} is not a release tag v<version> (e.g. v0.2.0, v0.2.0-rc.1)")
    parse(tag[1:])
    return tag[1:]


# --- building --------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _last_line(command: list[str]) -> str:
    result = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-1]


@contextmanager
def dev_tree(version: str, python_version: str) -> Iterator[Path]:
    """What the build reads (the image's context and the chart) copied, with the dev version set."""
    with tempfile.TemporaryDirectory(prefix="placement-dev-") as tmp:
        root = Path(tmp)
        files = ("pyproject.toml", "constraints.txt", "LICENSE", "NOTICE", "Dockerfile", ".dockerignore", "README.md")
        for name in files:
            shutil.copy2(REPO / name, root / name)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(REPO / "extender", root / "extender", ignore=ignore)
        (root / "hack").mkdir()
        shutil.copy2(REPO / "hack/notices.py", root / "hack/notices.py")
        shutil.copytree(REPO / "deploy", root / "deploy", ignore=ignore)
        shutil.copy2(REPO / "CHANGELOG.md", root / "CHANGELOG.md")
        set_version(root, version, python_version=python_version, changelog=False)
        yield root


def image_layers(archive: Path, into: Path) -> None:
    """The archive's (one) image's filesystem unpacked into `into`: each layer in order, with the
    OCI whiteouts applied."""
    with tarfile.open(archive) as outer:
        blob = lambda digest: outer.extractfile("blobs/" + digest.replace(":", "/"))  # noqa: E731
        index = json.load(outer.extractfile("index.json"))  # type: ignore[arg-type]
        [entry] = index["manifests"]
        manifest = json.load(blob(entry["digest"]))  # type: ignore[arg-type]
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as tar:
                for member in tar:
                    path = Path(member.name)
                    if path.name == ".wh..wh..opq":
                        for child in (into / path.parent).glob("*"):
                            _remove(child)
                        continue
                    if path.name.startswith(".wh."):
                        _remove(into / path.parent / path.name.removeprefix(".wh."))
                        continue
                    if not member.isdir():
                        _remove(into / path)  # a later layer's file replaces the earlier one
                    # our own image, built from our Dockerfile: its absolute symlinks are kept as such
                    tar.extract(member, into, filter="fully_trusted")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def sbom(rootfs: Path, version: str, out: Path, work: Path) -> None:
    """The image's SBOM: cyclonedx-py over its Python environment, the image's own python telling it
    where its packages are (run in the unpacked image with chroot, its answer mapped back into the
    unpacked tree), then the image's Debian packages added as pkg:deb components."""
    if os.geteuid() != 0:
        raise ReleaseError("the SBOM runs the image's python in its unpacked filesystem (chroot): run as root")
    python = work / "image-python"
    python.write_text(
        f"#!{sys.executable}\n"
        "import json, subprocess, sys\n"
        f"root = {str(rootfs)!r}\n"
        f"answer = subprocess.run(['chroot', root, '{VENV_IN_IMAGE}/bin/python', *sys.argv[1:]],\n"
        "                        check=True, capture_output=True, text=True).stdout\n"
        "json.dump([root + p if p.startswith('/') else p for p in json.loads(answer)], sys.stdout)\n"
    )
    python.chmod(0o755)
    generated = work / "python.cdx.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cyclonedx_py",
            "environment",
            "--spec-version",
            "1.6",
            "--output-format",
            "JSON",
            "--output-reproducible",
            "--output-file",
            str(generated),
            str(python),
        ],
        check=True,
    )
    document = json.loads(generated.read_text())
    document["metadata"]["component"] = {
        "type": "container",
        "bom-ref": f"{IMAGE}:{version}",
        "name": IMAGE,
        "version": version,
        "licenses": [{"expression": "Apache-2.0"}],
    }
    # the container holds the project's package (with its dependencies) and the Debian packages
    project = [c["bom-ref"] for c in document.get("components", []) if c.get("name") == IMAGE]
    holds = {"ref": f"{IMAGE}:{version}", "dependsOn": list(project)}
    document.setdefault("dependencies", []).append(holds)
    codename = "bookworm" if (rootfs / "etc/debian_version").read_text().startswith("12") else "unknown"
    for package in notices.debian_packages(rootfs):
        purl = f"pkg:deb/debian/{package.name}@{package.version}?arch={package.architecture}&distro=debian-{codename}"
        component = {"type": "library", "bom-ref": purl, "name": package.name, "version": package.version}
        component["purl"] = purl
        if package.copyright:
            component["properties"] = [{"name": "debian:copyright", "value": package.copyright}]
        document["components"].append(component)
        holds["dependsOn"].append(purl)
    out.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.read_text())
    if error is not None:
        raise ReleaseError(f"{out.name} is not valid CycloneDX 1.6: {error}")


def build(version: str, out: Path, tree: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    build_py = [sys.executable, str(REPO / "hack/image/build.py"), "--tag", version, "--context", str(tree)]
    archive = Path(_last_line(build_py))
    image = out / f"{IMAGE}-{version}.oci.tar"
    shutil.copyfile(archive, image)
    helm = _last_line(["bash", str(REPO / "hack/helm/build.sh")])
    package = [helm, "package", str(tree / CHART), "--destination", str(out)]
    subprocess.run(package, check=True, stdout=subprocess.DEVNULL)
    chart = out / f"placement-scheduler-{version}.tgz"
    if not chart.exists():
        raise ReleaseError(f"helm package wrote no {chart.name}")
    with tempfile.TemporaryDirectory(prefix="placement-release-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        rootfs.mkdir()
        image_layers(image, rootfs)
        notices_file = out / "THIRD_PARTY_NOTICES"
        shutil.copyfile(rootfs / NOTICES_IN_IMAGE, notices_file)
        bom = out / f"{IMAGE}-{version}.sbom.cdx.json"
        sbom(rootfs, version, bom, Path(tmp))
    files = [image, chart, bom, notices_file]
    sums = out / "SHA256SUMS"
    sums.write_text("".join(f"{_sha256(p)}  {p.name}\n" for p in files))
    return [*files, sums]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default=str(REPO / "dist"), help="where the artifacts go (default dist/)")
    parser.add_argument("--dev", action="store_true", help="a dev build of any tree (make release DEV=1)")
    parser.add_argument("--check-only", action="store_true", help="check that every place names one version")
    parser.add_argument("--version", help="with --check-only: the version to check for (default: the chart's)")
    sub = parser.add_subparsers(dest="command")
    prepare = sub.add_parser("prepare", help="set every place that names the version, for a new release")
    prepare.add_argument("new_version", metavar="VERSION", help="e.g. 0.2.0 or 0.2.0-rc.1 (no leading v)")
    args = parser.parse_args(argv)
    try:
        if args.command == "prepare":
            new = args.new_version.removeprefix("v")
            parse(new)
            set_version(REPO, new)
            print(f"every place names {new} (pyproject.toml: {pep440(new)}); CHANGELOG.md has its `## {new}` section.")
            print(f"Next: write its upgrade notes there, commit, git tag v{new}, make release.")
            return 0
        if args.check_only:
            problems = disagreements(REPO, args.version, changelog=args.version is not None)
            if problems:
                raise ReleaseError("these places disagree:\n  " + "\n  ".join(problems))
            print(f"release {args.version or version_places(REPO)[f'{CHART}/Chart.yaml version']}: every place agrees")
            return 0
        if args.dev:
            _, commit, dirty = tree_state(REPO)
            semver, python_version = dev_version(version_places(REPO)[f"{CHART}/Chart.yaml version"], commit, dirty)
            with dev_tree(semver, python_version) as tree:
                written = build(semver, Path(args.out), tree)
            version = semver
        else:
            version = release_version(REPO)
            problems = disagreements(REPO, version)
            if problems:
                raise ReleaseError(
                    f"the tag says {version}, but these places disagree (python hack/release.py prepare {version}, "
                    "commit, and move the tag):\n  " + "\n  ".join(problems)
                )
            written = build(version, Path(args.out), REPO)
    except ReleaseError as e:
        print(f"release: {e}", file=sys.stderr)
        return 1
    print(f"release {version}:")
    for path in written:
        print(f"  {path}")
    print("push them: docs/install/release.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

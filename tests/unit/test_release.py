"""hack/release.py: a release is built from the tag v<version> on a clean HEAD, every place naming
the version agrees with the tag (each one that does not is named), `prepare` writes them all, and a
dev build is never named as a release."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))

import release  # noqa: E402

CHART = "deploy/helm/placement-scheduler"
# semver.org's own regular expression: what Helm and OCI tags take as a version
SEMVER_ORG = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def test_every_place_in_the_tree_names_one_version() -> None:
    assert release.disagreements(ROOT, changelog=False) == []
    places = release.version_places(ROOT)
    assert len(places) >= 5, places  # pyproject, the chart twice, its image tag, the component
    # every kustomize install takes the tag from the component: no manifest hard-codes one
    assert not [where for where in places if where.endswith(" image")], places


def test_check_only_passes_on_the_repo(capsys: pytest.CaptureFixture[str]) -> None:
    assert release.main(["--check-only"]) == 0
    assert "every place agrees" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("version", "python"),
    [("0.2.0", "0.2.0"), ("0.2.0-rc.1", "0.2.0rc1"), ("1.0.0-alpha.0", "1.0.0a0"), ("10.20.30-beta.4", "10.20.30b4")],
)
def test_the_python_version_is_the_pep440_spelling(version: str, python: str) -> None:
    assert release.pep440(version) == python
    assert str(Version(version)) == python  # what packaging normalizes the semver form to, too
    assert SEMVER_ORG.match(version)


@pytest.mark.parametrize("version", ["0.2", "v0.2.0", "0.2.0-rc1", "0.2.0-pre.1", "01.2.3", "0.2.0+build.1"])
def test_what_is_not_a_release_version(version: str) -> None:
    with pytest.raises(release.ReleaseError, match="not a release version"):
        release.pep440(version)


def _tree(root: Path) -> Path:
    """The files that name the version, as the repository has them."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "CHANGELOG.md"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "deploy", root / "deploy", ignore=shutil.ignore_patterns("templates"))
    return root


def test_prepare_writes_every_place_and_the_changelog_section(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    before = {p: (tree / p).read_text() for p in (f"{CHART}/Chart.yaml", "pyproject.toml")}
    assert release.disagreements(tree, "0.2.0-rc.1")  # not yet
    release.set_version(tree, "0.2.0-rc.1")
    assert release.disagreements(tree, "0.2.0-rc.1") == []
    places = release.version_places(tree)
    assert places["pyproject.toml version"] == "0.2.0rc1"
    assert places[f"{CHART}/Chart.yaml appVersion"] == "0.2.0-rc.1"
    # the edits keep each file's comments and layout: only the version lines change
    for path, text in before.items():
        old, new = text.splitlines(), (tree / path).read_text().splitlines()
        assert len(old) == len(new), path
        changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
        assert changed and all("0.2.0" in b for _, b in changed), (path, changed)
    # Unreleased stays at the top, empty; what it collected is now the release's
    changelog = (tree / "CHANGELOG.md").read_text()
    assert re.search(r"^## Unreleased\n\n## 0\.2\.0-rc\.1\n", changelog, re.M)
    assert release.changelog_sections(tree)[0] == "0.2.0-rc.1"
    release.set_version(tree, "0.2.0-rc.1")  # again: nothing more
    assert (tree / "CHANGELOG.md").read_text() == changelog


@pytest.mark.parametrize(("tag", "written"), [('""', ""), ('"0.1.0"', "0.3.0")])
def test_the_charts_image_tag_is_empty_or_the_version(tmp_path: Path, tag: str, written: str) -> None:
    """Empty means the chart's appVersion (Helm's convention), and prepare leaves it empty; a tag
    that is set is a place like the others."""
    tree = _tree(tmp_path)
    values = tree / CHART / "values.yaml"
    text, found = re.subn(
        r'^(image:\n(?:[ #].*\n)*?  tag: )"[^"\n]*"', rf"\g<1>{tag}", values.read_text(), count=1, flags=re.M
    )
    assert found
    values.write_text(text)
    release.set_version(tree, "0.3.0")
    assert yaml.safe_load(values.read_text())["image"]["tag"] == written
    assert release.disagreements(tree, "0.3.0") == []


@pytest.mark.parametrize(
    ("path", "pattern", "replacement", "named"),
    [
        ("pyproject.toml", r'^version = "0\.2\.0rc1"', 'version = "0.2.0"', "pyproject.toml version says 0.2.0"),
        (f"{CHART}/Chart.yaml", r"^version: 0\.2\.0-rc\.1", "version: 0.2.0", "Chart.yaml version says 0.2.0,"),
        (f"{CHART}/Chart.yaml", r'^appVersion: "0\.2\.0-rc\.1"', 'appVersion: "0.1.9"', "appVersion says 0.1.9"),
        (f"{CHART}/values.yaml", r'^(  tag: )"[^"]*"', r'\1"0.1.0"', "image.tag says 0.1.0"),
        ("deploy/components/image/kustomization.yaml", r'newTag: "0\.2\.0-rc\.1"', 'newTag: "9"', "newTag says 9"),
        ("CHANGELOG.md", r"^## 0\.2\.0-rc\.1\n", "", "CHANGELOG.md has no `## 0.2.0-rc.1` section"),
        # a manifest that hard-codes the tag again (the optional ones did, before they took the component)
        (
            "deploy/optional/audit/audit-cronjob.yaml",
            r"image: placement-extender\n",
            "image: placement-extender:0.0.9\n",
            "audit-cronjob.yaml image says 0.0.9",
        ),
    ],
)
def test_each_place_that_disagrees_with_the_tag_is_named(
    tmp_path: Path, path: str, pattern: str, replacement: str, named: str
) -> None:
    tree = _tree(tmp_path)
    release.set_version(tree, "0.2.0-rc.1")
    text, found = re.subn(pattern, replacement, (tree / path).read_text(), count=1, flags=re.M)
    assert found, (path, pattern)
    (tree / path).write_text(text)
    [problem] = release.disagreements(tree, "0.2.0-rc.1")
    assert named in problem, problem


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t"}
    env |= {"GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin", "HOME": str(root)}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git checkout of the version's places, prepared for 0.2.0-rc.1 and committed; release.py
    pointed at it, and its build replaced by a record of what it was asked to build."""
    tree = _tree(tmp_path / "repo")
    release.set_version(tree, "0.2.0-rc.1")
    _git(tree, "init", "-q", "-b", "main")
    _git(tree, "add", ".")
    _git(tree, "commit", "-q", "-m", "release 0.2.0-rc.1")
    monkeypatch.setattr(release, "REPO", tree)
    built: list[str] = []
    monkeypatch.setattr(release, "build", lambda version, out, tree: built.append(version) or [])
    monkeypatch.setattr(release, "dev_tree", lambda *a: _nothing())
    monkeypatch.setattr(release, "BUILT", built, raising=False)
    return tree


class _nothing:
    def __enter__(self) -> Path:
        return Path("/nonexistent")

    def __exit__(self, *exc: object) -> None:
        return None


def test_an_untagged_commit_is_refused_with_what_to_do(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert release.main([]) == 1
    err = capsys.readouterr().err
    assert "HEAD has no release tag" in err and "prepare X" in err and "git tag vX" in err and "DEV=1" in err
    assert release.BUILT == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("change", ["edited", "untracked"])
def test_a_dirty_tree_is_refused_even_when_tagged(repo: Path, capsys: pytest.CaptureFixture[str], change: str) -> None:
    _git(repo, "tag", "v0.2.0-rc.1")
    if change == "edited":
        (repo / "CHANGELOG.md").write_text((repo / "CHANGELOG.md").read_text() + "\nmore\n")
    else:  # a new file would be in the image's context and in no commit
        (repo / "deploy" / "new.yaml").write_text("{}\n")
    assert release.main([]) == 1
    assert "uncommitted changes" in capsys.readouterr().err
    assert release.BUILT == []  # type: ignore[attr-defined]


def test_a_tag_the_places_disagree_with_is_refused_naming_each(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _git(repo, "tag", "v0.2.0")
    assert release.main([]) == 1
    err = capsys.readouterr().err
    assert "the tag says 0.2.0" in err and "prepare 0.2.0" in err
    for place in ("pyproject.toml version", "Chart.yaml version", "Chart.yaml appVersion", "newTag", "CHANGELOG.md"):
        assert place in err, (place, err)
    assert release.BUILT == []  # type: ignore[attr-defined]


def test_a_tag_that_is_not_a_release_version_is_refused(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _git(repo, "tag", "nightly")
    assert release.main([]) == 1
    assert "not a release tag v<version>" in capsys.readouterr().err


def test_the_tagged_clean_tree_is_built_at_the_tags_version(repo: Path) -> None:
    _git(repo, "tag", "v0.2.0-rc.1")
    assert release.main([]) == 0
    assert release.BUILT == ["0.2.0-rc.1"]  # type: ignore[attr-defined]


def test_a_dev_build_is_never_named_as_a_release(repo: Path) -> None:
    (repo / "CHANGELOG.md").write_text((repo / "CHANGELOG.md").read_text() + "\nmore\n")  # dirty is allowed
    assert release.main(["--dev"]) == 0
    commit = _git(repo, "rev-parse", "HEAD").strip()
    [version] = release.BUILT  # type: ignore[attr-defined]
    assert version == f"0.2.0-rc.1.dev.g{commit[:12]}.dirty"
    assert SEMVER_ORG.match(version)  # a chart version and an image tag
    with pytest.raises(release.ReleaseError):
        release.parse(version)  # but no release's
    semver, python = release.dev_version("0.2.0", commit, dirty=False)
    assert semver == f"0.2.0-dev.g{commit[:12]}" and SEMVER_ORG.match(semver)
    assert Version(python) < Version("0.2.0") and Version(python).local == f"g{commit[:12]}"


def test_the_docs_release_block_mirrors_the_scheduler_deploy_names() -> None:
    """The platform team's block mirrors the kube-scheduler image deploy/ runs (its newest minor),
    from the upstream name unless SCHEDULER_SOURCE says otherwise, and pushes what make release
    wrote, at the tag's version."""
    text = (ROOT / "docs/install/release.md").read_text()
    block = re.search(r"<!-- release-commands:[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert block, "docs/install/release.md lost its release-commands block"
    commands = block.group(1)
    deployed = re.search(
        r"image: (registry\.k8s\.io/kube-scheduler:(\S+))", (ROOT / "deploy/base/deployment.yaml").read_text()
    )
    assert deployed
    assert (
        f"${{SCHEDULER_SOURCE:-docker://{deployed.group(1)}}} docker://$REGISTRY/kube-scheduler:{deployed.group(2)}"
        in commands
    )
    assert "VERSION=$(git describe --tags --exact-match | sed 's/^v//')" in commands
    for artifact in ("placement-extender-$VERSION.oci.tar", "placement-scheduler-$VERSION.tgz", "SHA256SUMS"):
        assert artifact in commands, artifact
    assert "REGISTRY=" not in commands  # set once, in the block before it


def test_the_charts_kube_version_admits_what_the_kustomize_page_suggests_for_an_untested_minor() -> None:
    """docs/install/index.md suggests an untested minor's tag (v1.32.9) to kustomize users; the
    chart must not refuse that minor (it said >=1.34)."""
    text = (ROOT / "docs/install/index.md").read_text()
    suggested = re.search(r"For a minor not in the table.*?newTag: v1\.(\d+)\.", text, re.S)
    assert suggested, "the page's suggestion moved: update this test"
    floor = yaml.safe_load((ROOT / "deploy/helm/placement-scheduler/Chart.yaml").read_text())["kubeVersion"]
    assert int(re.match(r">=1\.(\d+)", floor).group(1)) <= int(suggested.group(1)), floor  # type: ignore[union-attr]


def _layer(files: dict[str, bytes | None]) -> bytes:
    """A gzipped layer tar: name -> content (None: a folder)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue())


def test_the_images_filesystem_is_its_layers_in_order_with_whiteouts(tmp_path: Path) -> None:
    """What the notices and the SBOM are read from: the archive's one image, unpacked."""
    layers = [
        _layer({"etc": None, "etc/a": b"base", "etc/gone": b"x", "opt": None, "opt/old": b"1"}),
        _layer({"etc/a": b"top", "etc/.wh.gone": b"", "opt/.wh..wh..opq": b"", "opt/new": b"2"}),
    ]
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    manifest = json.dumps({"layers": [blob(layer) for layer in layers]}).encode()
    index = {"manifests": [blob(manifest)]}
    archive = tmp_path / "image.oci.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in [("index.json", json.dumps(index).encode())] + [
            ("blobs/" + d.replace(":", "/"), b) for d, b in blobs.items()
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    root = tmp_path / "root"
    root.mkdir()
    release.image_layers(archive, root)
    assert (root / "etc/a").read_bytes() == b"top"
    assert not (root / "etc/gone").exists() and not (root / "etc/.wh.gone").exists()
    assert sorted(p.name for p in (root / "opt").iterdir()) == ["new"]

"""The release as a platform team adopts it (docs/install/release.md), run as written by the
`released` fixture (conftest.py, releases.py): from a clean clone, the maintainer's prepare,
commit, tag and make release, then the team's block into its own registry (TLS, a CA of its
own). Here: what that registry now serves, and what dist/ holds. The later real-node modules
install from the same registry."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from extender.devcluster.cluster import REPO, LocalCluster

from .registry import Registry, manifest_digest, tags
from .releases import NAMESPACE, Released

pytestmark = pytest.mark.e2e

REF_NAME = "org.opencontainers.image.ref.name"


def _release_module(clone: Path) -> ModuleType:
    """The clone's hack/release.py (the code that made the release), for its image unpacking."""
    spec = importlib.util.spec_from_file_location("clone_release", clone / "hack" / "release.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _index(archive: Path) -> dict:
    with tarfile.open(archive) as tar:
        return json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]


def _runtime_pins() -> dict[str, str]:
    """The extender's runtime dependencies (transitively) at constraints.txt's pins."""
    sys.path.insert(0, str(REPO / "hack"))
    import notices

    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[notices.canonical(name)] = version.strip()
    return {p.name: pins[p.name] for p in notices.closure()}


def test_the_tag_was_made_by_prepare_and_names_a_pre_release(released: Released) -> None:
    assert released.version == "0.2.0-rc.1", released.version  # the page's maintainer block
    chart = yaml.safe_load((released.clone / "deploy/helm/placement-scheduler/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == released.version
    status = subprocess.run(["git", "-C", str(released.clone), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout.strip() in ("", "?? dist/"), status.stdout  # built from the tagged commit alone


def test_dist_holds_the_five_files_and_the_checksums_verify(released: Released) -> None:
    v = released.version
    names = {
        f"placement-extender-{v}.oci.tar",
        f"placement-scheduler-{v}.tgz",
        f"placement-extender-{v}.sbom.cdx.json",
        "THIRD_PARTY_NOTICES",
    }
    sums = dict(reversed(line.split("  ")) for line in (released.dist / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == names
    for name in names:
        assert hashlib.sha256((released.dist / name).read_bytes()).hexdigest() == sums[name], name
    assert all(f"{name}: OK" in released.log for name in names), released.log[-3000:]


def test_the_registry_serves_the_archives_one_image_at_its_digest(released: Released, registry: Registry) -> None:
    index = _index(released.dist / f"placement-extender-{released.version}.oci.tar")
    [manifest] = index["manifests"]  # one image in the archive: skopeo copy takes it as it is
    assert manifest["annotations"][REF_NAME] == f"placement-extender:{released.version}"
    repository = f"{NAMESPACE}/placement-extender"
    assert released.version in tags(registry, repository)
    assert manifest_digest(registry, repository, released.version) == manifest["digest"]


def test_the_kube_scheduler_mirror_is_in_the_registry(released: Released, registry: Registry) -> None:
    tag = released.scheduler_image.rpartition(":")[2]
    deployed = (REPO / "deploy/base/deployment.yaml").read_text()
    assert f"registry.k8s.io/kube-scheduler:{tag}" in deployed  # the image deploy/ runs, mirrored
    assert tags(registry, f"{NAMESPACE}/kube-scheduler") == [tag]
    assert manifest_digest(registry, f"{NAMESPACE}/kube-scheduler", tag).startswith("sha256:")


def test_the_chart_is_pulled_from_the_registry_at_the_version(released: Released, tmp_path: Path) -> None:
    helm = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, check=True)
    binary = helm.stdout.strip().splitlines()[-1]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **released.client_env}
    shown = subprocess.run(
        [binary, "show", "chart", released.chart, "--version", released.version],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    chart = yaml.safe_load(shown.stdout)
    assert chart["name"] == "placement-scheduler"
    assert chart["version"] == chart["appVersion"] == released.version
    pulled = subprocess.run(
        [binary, "pull", released.chart, "--version", released.version, "--destination", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert pulled.returncode == 0, pulled.stderr
    packaged = released.dist / f"placement-scheduler-{released.version}.tgz"
    assert (tmp_path / packaged.name).read_bytes() == packaged.read_bytes()  # the very file make release wrote


def test_the_notices_are_the_images_own_and_list_every_dependency(released: Released, tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    _release_module(released.clone).image_layers(
        released.dist / f"placement-extender-{released.version}.oci.tar", rootfs
    )
    in_image = (rootfs / "usr/share/doc/placement-extender/THIRD_PARTY_NOTICES").read_text()
    assert (released.dist / "THIRD_PARTY_NOTICES").read_text() == in_image
    assert (rootfs / "usr/share/doc/placement-extender/LICENSE").read_text() == (REPO / "LICENSE").read_text()
    rows = {tuple(line.split()[:2]) for line in in_image.splitlines()}
    for name, version in _runtime_pins().items():
        assert (name, version) in rows, (name, version)
    python3 = [line for line in in_image.splitlines() if line.split()[:1] == ["python3"]]
    assert python3 and python3[0].endswith("/usr/share/doc/python3/copyright"), python3
    # the Python package inside is the release's, in its PEP 440 form
    assert list(rootfs.glob("opt/extender/lib/python3*/site-packages/placement_extender-0.2.0rc1.dist-info"))


def test_the_sbom_names_the_pinned_dependencies_and_the_debian_python(released: Released) -> None:
    bom = json.loads((released.dist / f"placement-extender-{released.version}.sbom.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.6"
    assert bom["metadata"]["component"]["name"] == "placement-extender"
    assert bom["metadata"]["component"]["version"] == released.version
    purls = {c.get("purl", "") for c in bom["components"]}
    for name, version in _runtime_pins().items():
        assert f"pkg:pypi/{name}@{version}" in purls, (name, version)
    debian_python = [p for p in purls if p.startswith("pkg:deb/debian/python3@")]
    assert debian_python and "distro=debian-bookworm" in debian_python[0], debian_python


def test_the_node_pulls_the_release_trusting_the_registrys_ca_for_that_host(
    released: Released, node_cluster: LocalCluster, registry: Registry, tmp_path: Path
) -> None:
    """The node's containerd pulls the released image through the hosts.toml the kubelet's pulls
    read (RealNode.trust_registry: the test CA for that host alone), into a namespace of its own,
    so the later modules' pods still pull it themselves; the same file without its `ca` line
    fails on the certificate."""
    node = node_cluster.real_node
    assert node is not None

    def ctr(*args: str) -> subprocess.CompletedProcess[str]:
        argv = ["ctr", f"--address={node.paths.containerd_socket}", "--namespace=release-check", *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    trusted = (node.paths.registry_hosts / registry.host / "hosts.toml").read_text()
    assert "ca = " in trusted, trusted
    (tmp_path / registry.host).mkdir()
    (tmp_path / registry.host / "hosts.toml").write_text(
        "".join(line for line in trusted.splitlines(True) if "ca = " not in line)
    )
    untrusted = ctr("images", "pull", "--hosts-dir", str(tmp_path), released.extender_image)
    assert untrusted.returncode != 0 and "certificate" in untrusted.stderr, untrusted.stderr
    try:
        pulled = ctr("images", "pull", "--hosts-dir", str(node.paths.registry_hosts), released.extender_image)
        assert pulled.returncode == 0, pulled.stderr
        listed = ctr("images", "ls")
        index = _index(released.dist / f"placement-extender-{released.version}.oci.tar")
        assert index["manifests"][0]["digest"] in listed.stdout, listed.stdout
    finally:
        ctr("images", "rm", released.extender_image)
        ctr("namespaces", "rm", "release-check")

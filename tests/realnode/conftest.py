"""The real-node scenarios run in `make test` wherever a real node can run (Linux, root, the host
packages of hack/realnode/install.sh). Elsewhere (a laptop without root, macOS) they are skipped
with one line in the summary saying why and what to do, and the rest of the suite runs.

Under CI=true (or REALNODE=1) they are mandatory: a machine that cannot run them fails them, with
the same reason, so CI can never pass without them. REALNODE=0 skips them on a developer's
machine that could run them (not under CI=true)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.devcluster.cluster import REPO, LocalCluster, NodeSpec

from .failover import burst_nodes
from .harness import (
    STATE_FILE,
    RealNode,
    compare,
    restore_by_hand,
    snapshot,
    unavailable,
)
from .installs import KWOK_TAINT, ZONE, Images, figure, render
from .registry import Registry, local_registry, push
from .releases import Released, release


def mandatory() -> bool:
    return os.environ.get("CI", "").lower() == "true" or os.environ.get("REALNODE") == "1"


def why_not() -> str | None:
    """Why the real-node scenarios do not run here, or None when they do."""
    if os.environ.get("REALNODE") == "0" and not mandatory():
        return "REALNODE=0: the real-node scenarios (deploy/ as real pods) were not run"
    return unavailable()


_REASON = why_not()
# Not collected where they cannot run (and are not mandatory): one summary line instead of a
# skip per test.
collect_ignore_glob = ["*"] if _REASON and not mandatory() else []


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 (pytest's hook)
    if _REASON and not mandatory():
        terminalreporter.write_line(f"SKIPPED real-node scenarios (tests/realnode) not run: {_REASON}", yellow=True)


# The machine has one real-node slot: the crashed-harness scenario runs before the session's node
# exists; the chart runs last, since `helm uninstall` takes the CRDs with it.
MODULE_ORDER = (
    "test_crashed_harness",
    "test_deploy_on_real_node",
    "test_release_artifacts",  # after the image is built (for the node), which the release reuses
    "test_tls_install_on_real_node",
    "test_in_scheduler_on_real_node",
    "test_chart_on_real_node",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.stem
        return MODULE_ORDER.index(name) if item.path.parent.name == "realnode" and name in MODULE_ORDER else -1

    items.sort(key=rank)  # stable: every other test keeps its place, ahead of these


@pytest.fixture(autouse=True, scope="session")
def _real_node_possible() -> None:
    if _REASON:  # only collected when mandatory
        pytest.fail(f"mandatory under CI=true / REALNODE=1, but {_REASON}", pytrace=False)


# ------------------------------------------------------------------ one real node for the package
# Package-scoped: the node goes (and the host is checked) as soon as the last real-node module is
# done, not at the end of the session, so under `make test`'s workers it does not idle beside the
# modules that worker runs next.


@pytest.fixture(scope="package")
def node_cluster() -> Iterator[LocalCluster]:
    """The local control plane with one real node (zone ZONE); the host checked to be as it was
    found once the node is gone."""
    if STATE_FILE.exists():
        restore_by_hand()  # a crashed run's leftovers: the snapshot below must be of the host itself
    before = snapshot()
    started = time.monotonic()
    cluster = LocalCluster(real_node=RealNode(zone=ZONE))
    with cluster:
        figure("control plane and node up (s)", time.monotonic() - started)
        assert cluster.real_node is not None
        for name, seconds in cluster.real_node.timings.items():
            figure(f"{name} (s)", seconds)
        yield cluster
        (REPO / "test-logs" / "realnode").mkdir(parents=True, exist_ok=True)
        cluster.keep_logs(REPO / "test-logs" / "realnode" / "logs")
    differences = compare(before, snapshot())
    figure("host state differences after stop", differences)
    assert not differences, f"the host is not as it was found: {differences}"


@pytest.fixture(scope="package")
def registry(node_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """The platform team's own registry (tests/realnode/registry.py: TLS with a CA of the test's
    own), which the node pulls from, trusting that CA for it."""
    node = node_cluster.real_node
    assert node is not None
    with local_registry(tmp_path_factory.mktemp("registry")) as team_registry:
        node.trust_registry(team_registry.host, team_registry.ca)
        yield team_registry


@pytest.fixture(scope="package")
def images(node_cluster: LocalCluster, registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> Images:
    """The extender image built from the Dockerfile and pushed to the local registry under a name
    that is not the default (the node pulls it, as a cluster does); a copy of deploy/ with the
    documented image edit; and a kube-scheduler image of the pinned binary in the same registry,
    where a team mirrors the upstream one (no public registry is reachable here), pulled by the
    node like every image of the installs.

    Pulled, not imported under the upstream name: once the kubelet has pulled an image (the
    mirror, in the kustomize and Helm installs), it checks that a pod may use it by the name the
    pod gives, so the same image imported under another name with pull policy Never is refused
    (ErrImageNeverPull), as it was when the TLS install ran after the kustomize one."""
    node = node_cluster.real_node
    assert node is not None and node_cluster.bin_dir is not None
    started = time.monotonic()
    archive = node.build_image("--base", "debian")
    figure("extender image build (s, cached when unchanged)", time.monotonic() - started)
    figure("extender image archive (MB)", archive.stat().st_size / 1e6)
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    extender = f"{registry.host}/platform/placement-extender:{version}"
    started = time.monotonic()
    push(archive, extender, registry)
    figure("extender image push to the local registry (s)", time.monotonic() - started)
    deploy = _user_deploy(tmp_path_factory.mktemp("user"), extender)
    scheduler = _upstream_scheduler(node_cluster)
    started = time.monotonic()
    mirror = f"{registry.host}/platform/kube-scheduler:{scheduler.rpartition(':')[2]}"
    push(_scheduler_archive(node_cluster, scheduler), mirror, registry)
    figure("kube-scheduler image build + push to the mirror (s)", time.monotonic() - started)
    return Images(extender=extender, scheduler=mirror, deploy=deploy)


def _upstream_scheduler(cluster: LocalCluster) -> str:
    """The upstream kube-scheduler image deploy/ names (its newest minor's)."""
    return next(
        c["image"]
        for d in render(cluster, REPO / "deploy" / "overlays" / "kube-1.37")
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "placement-scheduler"
        for c in d["spec"]["template"]["spec"]["containers"]
        if c["name"] == "kube-scheduler"
    )


def _scheduler_archive(cluster: LocalCluster, name: str) -> Path:
    """The pinned kube-scheduler binary as a one-file image named `name` (built once, cached)."""
    node = cluster.real_node
    assert node is not None and cluster.bin_dir is not None
    return node.build_image(
        "--static-binary",
        str(cluster.bin_dir / "kube-scheduler"),
        "--name",
        name,  # the name deploy/ gives the upstream image, which the mirror copies
        "--entrypoint",
        "/usr/local/bin/kube-scheduler",  # deploy/'s `command: [kube-scheduler, ...]` finds it on PATH
    )


@pytest.fixture(scope="package")
def released(
    node_cluster: LocalCluster, registry: Registry, images: Images, tmp_path_factory: pytest.TempPathFactory
) -> Released:
    """The release as docs/install/release.md makes and pushes it, run as written (releases.py)
    from a clean clone with a tag of its own, into the team's registry: the extender image, the
    kube-scheduler mirror (the pinned binary's image standing in for the upstream one) and the
    chart, which the later modules install from (`helm install ... oci://...`)."""
    helm = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert helm.returncode == 0, helm.stderr[-2000:]
    return release(
        registry,
        _scheduler_archive(node_cluster, _upstream_scheduler(node_cluster)),
        Path(helm.stdout.strip().splitlines()[-1]),
        tmp_path_factory.mktemp("release"),
    )


def _user_deploy(root: Path, image: str) -> Path:
    """deploy/ (and the config/ it includes) as a user has them after the documented image edit:
    newName and newTag in deploy/components/image (docs/install/index.md)."""
    for part in ("deploy", "config"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("helm"))
    component = root / "deploy" / "components" / "image" / "kustomization.yaml"
    doc = yaml.safe_load(component.read_text())
    name, _, tag = image.rpartition(":")
    doc["images"] = [{"name": "placement-extender", "newName": name, "newTag": tag}]
    component.write_text(yaml.safe_dump(doc))
    return root / "deploy"


@pytest.fixture(scope="package")
def kwok_beside(node_cluster: LocalCluster) -> list[str]:
    """Two kwok nodes of another zone, emptier than the real node: kube-scheduler's own scores
    would pick them, so a pod on the real node was placed by the policy, through the extender."""
    names = node_cluster.add_nodes([NodeSpec("kwok-b1", "zone-b"), NodeSpec("kwok-b2", "zone-b")])
    api = node_cluster.admin
    assert api is not None
    for name in names:  # the installs' own pods (no toleration) must land on the real node
        api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": [KWOK_TAINT]}})
    return names


@pytest.fixture(scope="package")
def burst_zone(node_cluster: LocalCluster) -> list[str]:
    """kwok nodes of a zone of their own, for the failover bursts (failover.py)."""
    return burst_nodes(node_cluster)

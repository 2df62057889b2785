"""The Helm chart as a platform team runs it, on the real node (issue 52): a fresh `helm install
--create-namespace` into a cluster that has nothing of the extender (no placement-system
namespace, no CRDs, no RBAC: what the earlier installs left is deleted first), with the image
from the team's registry (`--set image.repository=...`, docs/install/index.md); both pods Ready
and a StatefulSet placed through it; `helm upgrade` to a new image tag (the same image pushed
again under it): the pods roll to it, Ready, and place again; `helm uninstall`: nothing of the
chart is left (the namespace `--create-namespace` made stays, as Helm leaves it). Without
`--create-namespace` the chart's own Namespace could not serve a first install: Helm writes its
release record into the namespace before any template ("namespaces placement-system not found",
found here), so the chart no longer carries it by default. It runs last: the CRDs go with it."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import REPO, SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster

from .installs import HELM_INSTALL, Images, await_ready, figure, place_statefulset
from .registry import crane

pytestmark = pytest.mark.e2e

CHART = REPO / "deploy" / "helm" / "placement-scheduler"
SELECTOR = "app.kubernetes.io/name=placement-scheduler"


def _helm() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


def _rendered(helm: Path, *values: str) -> list[dict]:
    out = subprocess.run(
        [str(helm), "template", "placement", str(CHART), "--namespace", SYSTEM_NAMESPACE, *values],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _path(doc: dict) -> str:
    """The API path of a rendered object (the kinds the chart renders)."""
    group, _, version = doc["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    kind = doc["kind"]
    plural = kind.lower()[:-1] + "ies" if kind.endswith("Policy") else kind.lower() + "s"
    namespace = doc["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace and doc["kind"] != "Namespace" else ""
    return f"{base}{scope}/{plural}/{doc['metadata']['name']}"


def _exists(api, doc: dict) -> bool:  # noqa: ANN001
    from extender.devcluster.api import ApiError

    try:
        api.get(_path(doc))
        return True
    except ApiError as err:
        if err.status == 404:
            return False
        raise


def _nothing_of_the_extender(cluster: LocalCluster) -> None:
    """Take away everything the earlier installs (and the harness) put on the cluster, as if it
    had never had the extender: the objects of every overlay, the namespace last."""
    for overlay in ("deploy", "deploy/overlays/in-scheduler", "deploy/overlays/tls"):
        cluster.kubectl("delete", "--ignore-not-found", "--wait=true", "-k", str(REPO / overlay), check=False)
    api = cluster.admin
    wait_for(
        f"no {SYSTEM_NAMESPACE} namespace",
        lambda: not [n for n in api.list("/api/v1/namespaces") if n["metadata"]["name"] == SYSTEM_NAMESPACE],
        180,
        1,
    )


@pytest.fixture(scope="module")
def chart(node_cluster: LocalCluster, images: Images, kwok_beside: list[str]) -> Iterator[tuple]:
    helm = _helm()
    _nothing_of_the_extender(node_cluster)
    repository, _, tag = images.scheduler.rpartition(":")
    extender, _, extender_tag = images.extender.rpartition(":")
    values = [
        "--set",  # the documented value: where the team pushed the image (their registry)
        f"image.repository={extender}",
        "--set",
        f"image.tag={extender_tag}",
        "--set",
        f"scheduler.image.repository={repository}",
        "--set",
        f"scheduler.image.tag={tag}",
    ]
    base = [str(helm), f"--kubeconfig={node_cluster.kubeconfig}", "--namespace", SYSTEM_NAMESPACE]
    started = time.monotonic()
    documented = shlex.split(HELM_INSTALL)  # the install page's command, word for word
    words = [str(CHART) if w == "deploy/helm/placement-scheduler" else w for w in documented[1:]]
    install = [str(helm), f"--kubeconfig={node_cluster.kubeconfig}", *words, *values]
    out = subprocess.run(install, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    api = node_cluster.admin
    pods = await_ready(api, SELECTOR, 2)
    figure("fresh helm install -> both scheduler pods Ready (s)", time.monotonic() - started)
    for pod in pods:
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": images.scheduler,
            "extender": images.extender,
        }
    yield node_cluster, base, values, _rendered(helm, *values)


def test_statefulset_placed_through_a_fresh_install(chart) -> None:  # noqa: ANN001
    cluster, *_ = chart
    seconds = place_statefulset(cluster, "db-chart", SCHEDULER_NAME)
    figure("chart: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_upgrade_to_a_new_image_tag(chart, images: Images) -> None:  # noqa: ANN001
    cluster, base, values, _ = chart
    repository, _, tag = images.extender.rpartition(":")
    upgraded = f"{tag}-upgrade"
    out = subprocess.run(
        [str(crane()), "tag", images.extender, upgraded, "--insecure"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    started = time.monotonic()
    out = subprocess.run(
        [*base, "upgrade", "placement", str(CHART), *values, "--set", f"image.tag={upgraded}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    api = cluster.admin

    def rolled() -> list | None:
        pods = [p for p in api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=SELECTOR)]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        images_now = {c["image"] for p in live for c in p["spec"]["containers"] if c["name"] == "extender"}
        return live if len(live) == 2 and images_now == {f"{repository}:{upgraded}"} else None

    wait_for("both pods on the new tag", rolled, 300, 1)
    await_ready(api, SELECTOR, 2)
    figure("helm upgrade to a new image tag -> both pods Ready (s)", time.monotonic() - started)
    seconds = place_statefulset(cluster, "db-upgraded", SCHEDULER_NAME)
    figure("chart after upgrade: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_uninstall_leaves_nothing_of_the_chart(chart) -> None:  # noqa: ANN001
    cluster, base, _, rendered = chart
    api = cluster.admin
    for name in ("db-chart", "db-upgraded"):  # the test's own workloads, not the chart's
        cluster.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false", check=False)
    out = subprocess.run([*base, "uninstall", "placement", "--wait"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    wait_for(
        "no placement-scheduler pods left",
        lambda: not api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=SELECTOR),
        180,
        1,
    )
    kept = [d for d in rendered if d["kind"] == "Namespace"]

    def left() -> list[str]:
        return [f"{d['kind']}/{d['metadata']['name']}" for d in rendered if d not in kept and _exists(api, d)]

    wait_for("every object of the chart gone", lambda: not left(), 120, 1)
    assert not kept, "the chart carries no Namespace by default (--create-namespace makes it)"

"""The Helm chart as a platform team runs it, on the real node: the install page's Helm command,
word for word but for the reader's registry and version, from the release's chart in the team's
registry (`released`, conftest.py: the chart pushed as oci://<registry>/charts/placement-scheduler,
the extender image and the mirrored kube-scheduler beside it), into a cluster that has nothing of
the extender (no namespace, no CRDs, no RBAC: what the earlier installs left is deleted first).
Both pods Ready, each running the team's image; the namespace `--create-namespace` made carries
the Pod Security label (the chart's hook Job, running the extender image on the node); a
StatefulSet placed through it; `helm upgrade` to a new image tag (the same image pushed again
under it): the pods roll to it, Ready, and place again; `helm uninstall` then the same install
again: every PlacementPolicy and ZoneRotation still there (the CRDs are kept), no pod of a placed
StatefulSet moved zone, and one deleted pod is placed again in its recorded zone; the last
`helm uninstall`: nothing of the chart is left but what it keeps (the CRDs, and the namespace
`--create-namespace` made, as Helm leaves it). It runs last."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from extender.devcluster.api import Api, ApiError, wait_for
from extender.devcluster.cluster import REPO, SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster

from .installs import HELM_INSTALL, ZONE, await_ready, documented, figure, is_ready, place_statefulset
from .releases import Released

pytestmark = pytest.mark.e2e

SELECTOR = "app.kubernetes.io/name=placement-scheduler"
GROUP = "/apis/placement.extender.dev/v1alpha1"
KEPT_CRDS = ("placementpolicies.placement.extender.dev", "zonerotations.placement.extender.dev")


def _helm() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


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


class Helm:
    """The pinned helm against the node's cluster, with the release's client environment (the CA
    the team's registry serves with)."""

    def __init__(self, cluster: LocalCluster, released: Released) -> None:
        self.binary = _helm()
        self.kubeconfig = str(cluster.kubeconfig)
        self.env = {**os.environ, **released.client_env}
        # The install page's command, word for word, with the team's registry and the release's version.
        self.install_words = shlex.split(documented(HELM_INSTALL, released.registry, released.version))[1:]
        assert released.chart in self.install_words, (released.chart, self.install_words)

    def __call__(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
        )

    def install(self) -> None:
        out = self(*self.install_words)
        assert out.returncode == 0, out.stdout + out.stderr

    def values(self) -> list[str]:
        """The install command's --set and --version, for the same chart in upgrade and template."""
        words, kept = self.install_words, []
        for flag, value in zip(words, words[1:], strict=False):
            if flag in ("--set", "--version"):
                kept += [flag, value]
        return kept


@pytest.fixture(scope="module")
def chart(
    node_cluster: LocalCluster, released: Released, kwok_beside: list[str]
) -> Iterator[tuple[LocalCluster, Helm]]:
    helm = Helm(node_cluster, released)
    _nothing_of_the_extender(node_cluster)
    started = time.monotonic()
    helm.install()
    api = node_cluster.admin
    pods = await_ready(api, SELECTOR, 2)
    figure("fresh helm install -> both scheduler pods Ready (s)", time.monotonic() - started)
    for pod in pods:  # the team's images, pulled from its registry: the chart's defaults name them so
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": released.scheduler_image,
            "extender": released.extender_image,
        }
    yield node_cluster, helm


def test_the_namespace_carries_the_pod_security_label(chart) -> None:  # noqa: ANN001
    """`--create-namespace` makes the namespace without labels; the chart's hook Job ran the
    extender image on the node and labelled it, as deploy/base/namespace.yaml does."""
    cluster, _ = chart
    labels = cluster.admin.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}")["metadata"].get("labels") or {}
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels


def test_statefulset_placed_through_a_fresh_install(chart) -> None:  # noqa: ANN001
    cluster, _ = chart
    seconds = place_statefulset(cluster, "db-chart", SCHEDULER_NAME)
    figure("chart: StatefulSet created -> 2 pods Ready (s)", seconds)


def test_upgrade_to_a_new_image_tag(chart, released: Released) -> None:  # noqa: ANN001
    cluster, helm = chart
    repository, _, tag = released.extender_image.rpartition(":")
    upgraded = f"{tag}-upgrade"
    out = subprocess.run(
        ["skopeo", "copy", f"docker://{released.extender_image}", f"docker://{repository}:{upgraded}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=helm.env,
    )
    assert out.returncode == 0, out.stderr
    started = time.monotonic()
    out = helm(
        "upgrade", "placement", released.chart, *helm.values(), "-n", SYSTEM_NAMESPACE, "--set", f"image.tag={upgraded}"
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


def _zones(cluster: LocalCluster, namespace: str) -> dict[str, tuple[str, str]]:
    """Each pod of the namespace: (its uid, its node's zone)."""
    api = cluster.admin
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"].get("topology.kubernetes.io/zone")
        for n in api.list("/api/v1/nodes")
    }
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], nodes.get(p["spec"].get("nodeName", "")))
        for p in api.list(f"/api/v1/namespaces/{namespace}/pods")
    }


def test_uninstall_then_install_keeps_policies_rotations_and_placements(chart) -> None:  # noqa: ANN001
    cluster, helm = chart
    api = cluster.admin
    namespace = cluster.namespace("db-chart")
    api.create(
        f"{GROUP}/namespaces/{namespace}/placementpolicies",
        {
            "apiVersion": "placement.extender.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "kept", "namespace": namespace},
            "spec": {"zones": {"allowed": [ZONE]}, "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}]},
        },
    )

    def records() -> dict[str, set[tuple[str, str]]]:
        return {
            plural: {(o["metadata"]["namespace"], o["metadata"]["uid"]) for o in api.list(f"{GROUP}/{plural}")}
            for plural in ("placementpolicies", "zonerotations")
        }

    before, placed = records(), {ns: _zones(cluster, ns) for ns in ("db-chart", "db-upgraded")}
    assert before["zonerotations"], "the placed StatefulSets (ordinal zones) have their rotation records"
    _uninstall(helm, api)
    assert records() == before
    started = time.monotonic()
    helm.install()
    await_ready(api, SELECTOR, 2)
    figure("helm install again after uninstall -> both scheduler pods Ready (s)", time.monotonic() - started)
    assert records() == before, "the same objects (uids): none deleted and made again"
    assert {ns: _zones(cluster, ns) for ns in placed} == placed, "no pod moved, none was replaced"
    # a pod the StatefulSet makes again is placed by the reinstalled scheduler, in its recorded zone
    name, (uid, zone) = sorted(placed["db-chart"].items())[-1]
    api.delete(f"/api/v1/namespaces/db-chart/pods/{name}")

    def back() -> dict | None:
        try:
            pod = api.get(f"/api/v1/namespaces/db-chart/pods/{name}")
        except ApiError:
            return None
        return pod if pod["metadata"]["uid"] != uid and is_ready(pod) else None

    wait_for(f"{name} placed again and Ready", back, 180, 1)
    assert _zones(cluster, "db-chart")[name][1] == zone


def test_uninstall_leaves_nothing_of_the_chart_but_what_it_keeps(chart, released: Released) -> None:  # noqa: ANN001
    cluster, helm = chart
    api = cluster.admin
    out = helm("template", "placement", released.chart, *helm.values(), "-n", SYSTEM_NAMESPACE)
    assert out.returncode == 0, out.stderr
    rendered = [
        d
        for d in yaml.safe_load_all(out.stdout)
        if d and "helm.sh/hook" not in (d["metadata"].get("annotations") or {})
    ]
    for name in ("db-chart", "db-upgraded"):  # the test's own workloads, not the chart's
        cluster.kubectl("delete", "namespace", name, "--ignore-not-found", "--wait=false", check=False)
    _uninstall(helm, api)
    kept = [d for d in rendered if d["kind"] in ("Namespace", "CustomResourceDefinition")]
    assert sorted(d["metadata"]["name"] for d in kept) == sorted(KEPT_CRDS), "no Namespace by default"

    def left() -> list[str]:
        return [f"{d['kind']}/{d['metadata']['name']}" for d in rendered if d not in kept and _exists(api, d)]

    wait_for("every object of the chart gone", lambda: not left(), 120, 1)
    assert all(_exists(api, d) for d in kept), "the CRDs stay, with every policy and rotation record"
    assert not any(
        j["metadata"]["name"] == "placement-namespace-labels"
        for j in api.list(f"/apis/batch/v1/namespaces/{SYSTEM_NAMESPACE}/jobs")
    ), "the hook's Job went once it succeeded"


def _uninstall(helm, api: Api) -> None:  # noqa: ANN001
    """The page's `helm uninstall`, and its scheduler pods gone."""
    out = helm("uninstall", "placement", "-n", SYSTEM_NAMESPACE, "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    wait_for(
        "no placement-scheduler pods left",
        lambda: not api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=SELECTOR),
        180,
        1,
    )

"""The Helm chart installed with `helm install` (its default values: the second scheduler with the
extender beside it) on the real node: Ready from the image we build, and a StatefulSet placed
through it; `helm uninstall` then takes it away.

The harness created the namespace, CRDs and RBAC from deploy/ before (as a cluster adopting the
chart after `kubectl apply -k deploy/` has them), so the install takes them over
(`--take-ownership --force-conflicts`, what the README tells such a cluster to use). It runs
last: uninstalling takes the CRDs with it (the namespace stays: the chart marks it `keep`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import REPO, SCHEDULER_NAME, SYSTEM_NAMESPACE, LocalCluster

from .installs import Images, await_ready, figure, place_statefulset

pytestmark = pytest.mark.e2e

CHART = REPO / "deploy" / "helm" / "placement-scheduler"


def _helm() -> Path:
    out = subprocess.run(["bash", str(REPO / "hack/helm/build.sh")], capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def chart_installed(node_cluster: LocalCluster, images: Images, kwok_beside: list[str]) -> Iterator[LocalCluster]:
    helm = _helm()
    repository, _, tag = images.scheduler.rpartition(":")
    base = [str(helm), f"--kubeconfig={node_cluster.kubeconfig}", "--namespace", SYSTEM_NAMESPACE]
    started = time.monotonic()
    out = subprocess.run(
        [
            *base,
            "install",
            "placement",
            str(CHART),
            "--take-ownership",
            "--force-conflicts",  # the fields `kubectl apply` (client-side) set become the chart's
            # the values' own defaults name these; set here so a drift between the chart and the
            # image we build fails the install instead of passing on a stale default
            "--set",
            f"image.tag={images.extender.rpartition(':')[2]}",
            "--set",
            f"scheduler.image.repository={repository}",
            "--set",
            f"scheduler.image.tag={tag}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    api = node_cluster.admin
    assert api is not None
    pods = await_ready(api, "app.kubernetes.io/name=placement-scheduler", 2)
    figure("helm install -> both scheduler pods Ready (s)", time.monotonic() - started)
    for pod in pods:
        assert {c["name"]: c["image"] for c in pod["spec"]["containers"]} == {
            "kube-scheduler": images.scheduler,
            "extender": images.extender,
        }
    yield node_cluster
    out = subprocess.run([*base, "uninstall", "placement", "--wait"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr  # it failed while the chart deleted its own namespace
    assert api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}")["metadata"]["name"] == SYSTEM_NAMESPACE  # kept
    wait_for(
        "no placement-scheduler pods left",
        lambda: (
            not api.list(
                f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods",
                labelSelector="app.kubernetes.io/name=placement-scheduler",
            )
        ),
        180,
        1,
    )


def test_statefulset_placed_through_the_chart(chart_installed: LocalCluster) -> None:
    seconds = place_statefulset(chart_installed, "db-chart", SCHEDULER_NAME)
    figure("chart: StatefulSet created -> 2 pods Ready (s)", seconds)

"""Workloads and checks for the e2e scenarios, all read from and written to the API server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from typing import Any

from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import REPO, SCHEDULER_NAME, STORAGE_CLASS

ZONE = "topology.kubernetes.io/zone"
POLICY_ANNOTATION = "placement.extender.dev/policy"
POLICY_NAME_ANNOTATION = "placement.extender.dev/policy-name"


def statefulset(
    name: str,
    replicas: int,
    *,
    labels: dict[str, str] | None = None,
    policy: dict | str | None = None,
    policy_name: str | None = None,
    scheduler: str = SCHEDULER_NAME,
    volumes: bool = False,
    parallel: bool = True,
) -> dict[str, Any]:
    pod_labels = {"app": name, **(labels or {})}
    annotations = {}
    if policy is not None:
        annotations[POLICY_ANNOTATION] = policy if isinstance(policy, str) else json.dumps(policy)
    if policy_name is not None:
        annotations[POLICY_NAME_ANNOTATION] = policy_name
    spec: dict[str, Any] = {
        "serviceName": name,
        "replicas": replicas,
        "podManagementPolicy": "Parallel" if parallel else "OrderedReady",
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": pod_labels, "annotations": annotations},
            "spec": {
                "schedulerName": scheduler,
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
            },
        },
    }
    if volumes:
        spec["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": STORAGE_CLASS,
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            }
        ]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name}, "spec": spec}


def create_statefulset(api: Api, namespace: str, manifest: dict[str, Any]) -> None:
    api.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", manifest)


def scale(api: Api, namespace: str, name: str, replicas: int) -> None:
    api.merge_patch(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}", {"spec": {"replicas": replicas}})


def pods(api: Api, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
    params = {"labelSelector": selector} if selector else {}
    return api.list(f"/api/v1/namespaces/{namespace}/pods", **params)


def node_zones(api: Api) -> dict[str, str | None]:
    return {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE) for n in api.list("/api/v1/nodes")}


def wait_settled(api: Api, namespace: str, selector: str, expected: int, timeout: float = 120) -> list[dict[str, Any]]:
    """Exactly `expected` live pods, all bound to nodes (terminating pods gone)."""

    def settled():
        items = pods(api, namespace, selector)
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        if len(items) == expected and len(live) == expected and all(p["spec"].get("nodeName") for p in live):
            return live
        return None

    try:
        return wait_for(f"{expected} pods matching {selector} bound", settled, timeout)
    except TimeoutError:
        items = pods(api, namespace, selector)
        detail = [(p["metadata"]["name"], p["spec"].get("nodeName"), _scheduled_message(p)) for p in items]
        raise AssertionError(f"{len(items)} pods (want {expected} bound): {detail}") from None


def _scheduled_message(pod: dict[str, Any]) -> str:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return c.get("message", "")
    return ""


def ordinal(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["name"].rsplit("-", 1)[1])


def shard_of(pod: dict[str, Any]) -> str:
    return pod["metadata"]["name"].rsplit("-", 1)[0]


def counts_by(pods_: list[dict[str, Any]], key) -> Counter:  # noqa: ANN001
    return Counter(key(p) for p in pods_)


def pods_per_shard_domain(pods_: list[dict[str, Any]], domain) -> dict[tuple[str, str | None], int]:  # noqa: ANN001
    out: dict[tuple[str, str | None], int] = defaultdict(int)
    for p in pods_:
        out[(shard_of(p), domain(p))] += 1
    return out


def cap_and_spread_violations(
    members: list[dict[str, Any]], zone_of: dict[str, str | None], zones: list[str], cap: int
) -> list[str]:
    """A per-node cap and a zone spread of maxSkew 1 over `zones`, checked on placed pods."""
    per_node = Counter(p["spec"]["nodeName"] for p in members)
    out = [f"{c} pods on node {node} (cap {cap})" for node, c in sorted(per_node.items()) if c > cap]
    per_zone = Counter(zone_of.get(p["spec"]["nodeName"]) for p in members)
    counts = {z: per_zone.get(z, 0) for z in zones}
    if max(counts.values()) - min(counts.values()) > 1:
        out.append(f"zones skewed beyond 1: {counts}")
    stray = set(per_zone) - set(zones)
    if stray:
        out.append(f"pods in unexpected zones {stray}")
    return out


def per_statefulset_violations(
    placed: list[dict[str, Any]], zone_of: dict[str, str | None], zones: list[str], cap: int
) -> list[str]:
    """cap_and_spread_violations for each StatefulSet's pods (each its own group), named."""
    by_set: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for p in placed:
        by_set[shard_of(p)].append(p)
    return [
        f"{name}: {problem}"
        for name, members in sorted(by_set.items(), key=lambda kv: str(kv[0]))
        for problem in cap_and_spread_violations(members, zone_of, zones, cap)
    ]


def events_for(api: Api, namespace: str, pod_name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.list(f"/api/v1/namespaces/{namespace}/events")
        if (e.get("involvedObject") or {}).get("name") == pod_name
    ]


def scheduled_by(api: Api, namespace: str, pod_name: str) -> set[str]:
    """Which scheduler(s) reported Scheduled for the pod."""
    return {
        e.get("reportingComponent") or (e.get("source") or {}).get("component", "")
        for e in events_for(api, namespace, pod_name)
        if e.get("reason") == "Scheduled"
    }


def scheduled_message(pod: dict[str, Any]) -> str:
    """The PodScheduled condition's message (what `kubectl describe pod` shows for a Pending pod)."""
    return _scheduled_message(pod)


def scheduled_at(pod: dict[str, Any]) -> str | None:
    """lastTransitionTime of PodScheduled=True: when the binding was written (1 s resolution)."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            return c.get("lastTransitionTime")
    return None


_METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def count_pods(
    api: Api, namespace: str, selector: str, *, bound: bool | None = None, field_selector: str | None = None
) -> int:
    """How many pods match, optionally only bound (or only unbound) ones, listing metadata only:
    cheap enough to poll every second while thousands of pods are placed."""
    fields = [field_selector] if field_selector else []
    if bound is not None:
        fields.append("spec.nodeName!=" if bound else "spec.nodeName=")
    params = {"labelSelector": selector}
    if fields:
        params["fieldSelector"] = ",".join(fields)
    response = api.session.get(
        f"{api.server}/api/v1/namespaces/{namespace}/pods",
        params=params,
        headers={"Accept": _METADATA_ONLY},
        timeout=30,
    )
    response.raise_for_status()
    return len(response.json().get("items") or ())


def deployment(
    name: str, replicas: int, *, policy: dict, max_surge: int = 1, max_unavailable: int = 0
) -> dict[str, Any]:
    """A Deployment placed by our scheduler, rolling with the given surge (kwok makes its pods Ready)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
            },
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {POLICY_ANNOTATION: json.dumps(policy)}},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "registry.invalid/web:1"}],
                },
            },
        },
    }


class Sampler:
    """Polls `probe` every `interval` seconds in a thread, keeping (monotonic time, value) pairs:
    how many pods are bound, what /readyz answers, while a fault plays out."""

    def __init__(self, probe, interval: float = 0.2) -> None:  # noqa: ANN001
        import threading

        self.probe, self.interval = probe, interval
        self.samples: list[tuple[float, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        import time

        while not self._stop.is_set():
            try:
                value = self.probe()
            except Exception as err:  # the API server may be down: that is a sample too
                value = err
            self.samples.append((time.monotonic(), value))
            self._stop.wait(self.interval)

    def first(self, after: float, test) -> float | None:  # noqa: ANN001
        """When a sample taken after `after` first passed `test`."""
        return next((t for t, v in list(self.samples) if t >= after and test(v)), None)

    def last(self) -> Any:
        return self.samples[-1][1] if self.samples else None


def service_account_token(api: Api, namespace: str, name: str) -> str:
    """A token of the ServiceAccount `name` (made if missing), from the API server's TokenRequest:
    what a scraper such as Prometheus presents, an hour long."""
    api.ensure(
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
    )
    review = api.create(
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )
    return review["status"]["token"]


def readyz_status(port: int) -> int | str:
    import requests

    try:
        return requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code
    except requests.RequestException as err:
        return type(err).__name__


def extender_requests(port: int, verb: str) -> int:
    """How many `verb` requests the extender has answered (extender_requests_total, any code)."""
    import requests

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    needle = f'verb="{verb}"'
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("extender_requests_total{") and needle in line
    )


def gate_lifts(port: int) -> dict[str, tuple[int, float]]:
    """{stage: (lifts, seconds)} of extender_placeable_gate_lift_seconds (in-scheduler mode)."""
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    out: dict[str, tuple[int, float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "extender_placeable_gate_lift_seconds":
            continue
        for sample in family.samples:
            stage = sample.labels.get("stage")
            count, total = out.get(stage, (0, 0.0))
            if sample.name.endswith("_count"):
                out[stage] = (int(sample.value), total)
            elif sample.name.endswith("_sum"):
                out[stage] = (count, sample.value)
    return out


def capped_violations(placed: list[dict[str, Any]], zone_of: dict[str, str | None], zones: list[str]) -> list[str]:
    """Per StatefulSet: at most 1 pod per node, zones within one pod of each other."""
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in placed:
        by_set[shard_of(p)].append(p)
    return [
        f"{name}: {problem}"
        for name, members in sorted(by_set.items())
        for problem in cap_and_spread_violations(members, zone_of, zones, cap=1)
    ]


def cli(cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:  # noqa: ANN001
    """`python -m extender ARGS` against the cluster (audit, explain, ...), as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "extender", *args, f"--kubeconfig={cluster.kubeconfig}"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )

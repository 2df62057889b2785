"""The extender's failover as the TLS and in-scheduler installs run it: two replicas of the image
we ship on the real node, one holding the Lease and being the Service's one endpoint, kube-scheduler
calling the Service's ClusterIP through kube-proxy. A 50-pod opted-in burst (a StatefulSet,
Parallel, at most 2 pods a node) goes to kwok nodes beside the real one; after 15 binds the active
replica is ended, either killed outright (SIGKILL to its container's processes: a crash, an OOM
kill) or gracefully as a drain ends it (the node cordoned, then the Eviction API, which the
PodDisruptionBudget must allow; the kubelet sends SIGTERM); the burst's second half is created at
that moment. Read from the API server throughout: every pod placed, no sample with more than 2
pods of the set on a node, the pause (the longest stretch without a bind from the disruption on)
and when the other replica took the Lease."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from e2e.workloads import Sampler, statefulset
from extender.api.policy import OPT_IN_RESOURCE
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import SYSTEM_NAMESPACE, LocalCluster, NodeSpec

from .installs import KWOK_TAINT, await_ready, dump

EXTENDER = "app.kubernetes.io/name=placement-extender"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/leases/placement-extender"
BURST_ZONE = "zone-burst"
BURST_NODES = 30
PODS = 50
CAP = 2
DISRUPT_AFTER = 15
PAUSE_BOUND = 30.0  # seconds: the promise of docs/operations/high-availability.md
POLICY = {"caps": [{"topologyKey": "kubernetes.io/hostname", "max": CAP}]}


def burst_nodes(cluster: LocalCluster) -> list[str]:
    """kwok nodes of their own zone, tainted like kwok_beside's: only the bursts go there."""
    specs = [NodeSpec(f"kwok-burst-{i:02d}", BURST_ZONE) for i in range(BURST_NODES)]
    names = cluster.add_nodes(specs)
    api = cluster.admin
    assert api is not None
    for name in names:
        api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": [KWOK_TAINT]}})
    return names


def holder(api: Api) -> str:
    """The Lease's holder identity (`<pod>_<random>`), or "" when none holds it."""
    try:
        return (api.get(LEASE).get("spec") or {}).get("holderIdentity") or ""
    except Exception:  # noqa: BLE001 - no Lease yet
        return ""


def active_pod(api: Api) -> str:
    """The pod that holds the Lease and is the Service's one endpoint, once both agree."""

    def agreed() -> str | None:
        pod = holder(api).rpartition("_")[0]
        try:
            endpoints = api.get(
                f"/apis/discovery.k8s.io/v1/namespaces/{SYSTEM_NAMESPACE}/endpointslices/placement-extender-active"
            )["endpoints"]
        except Exception:  # noqa: BLE001 - not written yet
            return None
        named = [e.get("targetRef", {}).get("name") for e in endpoints]
        return pod if pod and named == [pod] else None

    return wait_for("one extender replica holding the Lease and being the Service's endpoint", agreed, 90, 0.5)


def kill_container(cluster: LocalCluster, pod: str) -> None:
    """SIGKILL every process of the pod's extender container: no SIGTERM, no release."""
    api, node = cluster.admin, cluster.real_node
    assert api is not None and node is not None
    status = next(
        c
        for c in api.get(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{pod}")["status"]["containerStatuses"]
        if c["name"] == "extender"
    )
    container = status["containerID"].split("://", 1)[1]
    listed = node.ctr("tasks", "ps", container).stdout.splitlines()[1:]
    pids = [int(line.split()[0]) for line in listed if line]
    assert pids
    killed = 0
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except ProcessLookupError:  # it ended between the listing and now (the master's SIGKILL reaps its workers)
            pass
    assert killed, f"every process of {pod}'s extender container had ended before the kill"


def evict(cluster: LocalCluster, pod: str) -> None:
    """What `kubectl drain` does: the node cordoned, then an Eviction of each pod, which the
    PodDisruptionBudget judges. Cordoned first as a drain does, so the replacement the Deployment
    makes waits for another node instead of starting beside the control plane on this one machine
    (which took the CPU the ordinary pods' kube-scheduler needed: a cost of the test bed, not of
    the failover). both_replicas_back uncordons it."""
    api, node = cluster.admin, cluster.real_node
    assert api is not None and node is not None
    api.merge_patch(f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": True}})
    api.create(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{pod}/eviction",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": SYSTEM_NAMESPACE}},
    )


def standby_of(cluster: LocalCluster, active: str) -> str:
    """The other replica: ended instead of the active one, it gives the disruption's own cost to
    the cluster (a drain's eviction and replacement, a container's restart) with no failover."""
    api = cluster.admin
    assert api is not None
    names = [
        p["metadata"]["name"] for p in api.list(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods", labelSelector=EXTENDER)
    ]
    (standby,) = [n for n in names if n != active]
    return standby


@dataclass
class Outcome:
    placed: int
    placed_after: int  # bound after the disruption began: the failover happened mid-burst
    over_cap: int  # samples with more than CAP pods of the set on a node
    pause: float  # the longest stretch without a bind, from the disruption to the last bind
    takeover: float | None  # the disruption -> another replica holding the Lease
    ordinary: float | None  # a wave of ordinary pods created at the disruption: first create -> last bound
    before: str
    after: str


def _bound_per_node(api: Api, namespace: str, name: str) -> tuple[int, int]:
    pods = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"app={name}")
    nodes = [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]
    most = max((nodes.count(n) for n in set(nodes)), default=0)
    return len(nodes), most


def burst(
    cluster: LocalCluster,
    name: str,
    *,
    scheduler: str,
    opt_in: bool,
    disrupt: Callable[[LocalCluster, str], None] | None,
    ordinary: int = 0,
    ends_active: bool = True,
) -> Outcome:
    """One 50-pod burst, the active replica disrupted after DISRUPT_AFTER binds (None: left alone,
    the healthy baseline); `ordinary` pods without the opt-in created at that moment."""
    api = cluster.admin
    assert api is not None
    namespace = cluster.namespace(name)
    before = active_pod(api)
    # Half the burst first; the other half created the moment the active replica is disrupted, so
    # at least 25 pods are placed across the failover however fast the first ones bind (a run on a
    # busy machine evicted the replica so slowly that the whole burst was bound before it ended).
    manifest = statefulset(name, PODS // 2, policy=POLICY, scheduler=scheduler)
    pod_spec = manifest["spec"]["template"]["spec"]
    pod_spec["tolerations"] = [{**KWOK_TAINT, "operator": "Equal"}]
    pod_spec["nodeSelector"] = {"topology.kubernetes.io/zone": BURST_ZONE}
    if opt_in:
        pod_spec["containers"][0]["resources"] = {
            "requests": {OPT_IN_RESOURCE: "1"},
            "limits": {OPT_IN_RESOURCE: "1"},
        }
    started = time.monotonic()
    disrupted = None
    wave_started: float | None = None  # wall clock, before the first ordinary create
    bound_at: dict[str, float] = {}  # ordinary pod -> when a poll first saw it bound
    with Sampler(lambda: _bound_per_node(api, namespace, name)) as bound, Sampler(lambda: holder(api)) as lease:
        api.create(f"/apis/apps/v1/namespaces/{namespace}/statefulsets", manifest)
        while True:
            last = bound.last()
            count = last[0] if isinstance(last, tuple) else 0
            if count >= PODS:
                break
            if disrupted is None and count >= DISRUPT_AFTER:
                disrupted = time.monotonic()
                if disrupt is not None:
                    disrupt(cluster, before)
                api.merge_patch(
                    f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}", {"spec": {"replicas": PODS}}
                )
                if ordinary:
                    wave_started = _create_ordinary(api, namespace, ordinary)
            if ordinary and wave_started is not None and len(bound_at) < ordinary:
                _see_ordinary_bound(api, namespace, bound_at)
            if time.monotonic() - started > 240:
                dump(api, namespace)
                dump(api)
                raise AssertionError(f"{count} of {PODS} pods placed after 240 s")
            time.sleep(0.05)
        if ordinary:
            wait_for(
                "the ordinary pods bound",
                lambda: _see_ordinary_bound(api, namespace, bound_at) == ordinary,
                120,
                0.05,
            )
        if disrupt is not None and ends_active:  # placed through the other replica; the Lease says when
            wait_for("another replica holding the Lease", lambda: _taken(holder(api), before), 60, 0.2)
            time.sleep(0.5)  # one more Lease sample
    assert disrupted is not None
    samples = [(t, v) for t, v in bound.samples if isinstance(v, tuple)]
    over_cap = sum(1 for _, (_, most) in samples if most > CAP)
    bind_times = [disrupted] + [t for (t, v), (_, w) in zip(samples[1:], samples, strict=False) if v[0] > w[0]]
    bind_times = sorted(t for t in bind_times if t >= disrupted)
    pause = max((b - a for a, b in zip(bind_times, bind_times[1:], strict=False)), default=0.0)
    after = holder(api).rpartition("_")[0]
    takeover_at = lease.first(disrupted, lambda v: _taken(v, before))
    at_disruption = max((v[0] for t, v in samples if t <= disrupted), default=0)
    placed = samples[-1][1][0] if samples else 0
    return Outcome(
        placed=placed,
        placed_after=placed - at_disruption,
        over_cap=over_cap,
        pause=pause,
        takeover=None if takeover_at is None else takeover_at - disrupted,
        ordinary=None if wave_started is None else _last_scheduled(api, namespace) - wave_started,
        before=before,
        after=after,
    )


def _taken(holder_identity: object, before: str) -> bool:
    """The Lease is held, by another pod than `before`."""
    return isinstance(holder_identity, str) and bool(holder_identity) and not holder_identity.startswith(before + "_")


def _create_ordinary(api: Api, namespace: str, count: int) -> float:
    """A wave of pods that never opted in (the cluster's own kube-scheduler places them without
    calling the extender): they must not pay for its failover. Created from ten threads; returns
    the wall-clock time before the first create."""

    def create(i: int) -> None:
        api.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"ordinary-{i}", "labels": {"ordinary": "yes"}},
                "spec": {
                    "tolerations": [{**KWOK_TAINT, "operator": "Equal"}],
                    "nodeSelector": {"topology.kubernetes.io/zone": BURST_ZONE},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": "registry.invalid/app:1"}],
                },
            },
        )

    started = time.time()
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(create, range(count)))
    return started


def _last_scheduled(api: Api, namespace: str) -> float:
    """When kube-scheduler bound the wave's last pod (wall clock), from its Scheduled events'
    eventTime (microseconds; polling the pods measured mostly the poll on a busy machine)."""
    times = [
        datetime.fromisoformat(e["eventTime"]).timestamp()
        for e in api.list(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
        if e.get("reason") == "Scheduled"
        and (e.get("regarding") or {}).get("name", "").startswith("ordinary-")
        and e.get("eventTime")
    ]
    assert times, "no Scheduled event for the ordinary pods"
    return max(times)


def _see_ordinary_bound(api: Api, namespace: str, bound_at: dict[str, float]) -> int:
    """Record when each ordinary pod is first seen bound; how many are."""
    now = time.monotonic()
    for pod in api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector="ordinary=yes"):
        if pod["spec"].get("nodeName"):
            bound_at.setdefault(pod["metadata"]["name"], now)
    return len(bound_at)


def both_replicas_back(cluster: LocalCluster) -> list[dict[str, Any]]:
    """After a disruption: two Ready replicas again (the killed container restarted by the
    kubelet, the evicted pod replaced by its Deployment), one of them active."""
    api, node = cluster.admin, cluster.real_node
    assert api is not None and node is not None
    api.merge_patch(f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": False}})  # after a drain
    pods = await_ready(api, EXTENDER, 2, 180)
    active_pod(api)
    return pods

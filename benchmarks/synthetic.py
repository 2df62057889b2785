"""A synthetic cluster as raw Kubernetes JSON, the way the API server lists it and kube-scheduler
sends it: nodes over three zones, background pods of many Deployments in many namespaces, and
one policy group (a Redis-cluster-like set of StatefulSets) with a full placement policy.

The objects are shaped like real API objects (metadata with managedFields, containers with
resources and probes, status with conditions), so JSON decoding and parsing cost what they
cost in production; tests/fixtures/wire holds the shapes kube-scheduler itself marshals.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from extender.api.policy import POLICY_REF_ANNOTATION
from extender.api.rotation import rotation_object

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ZONES = ("zone-a", "zone-b", "zone-c")
GROUP_NS = "db"
CLUSTER = "redis-bench"
SCHEDULER = "placement-scheduler"

# The full policy of the HTTP benchmark: caps per node and per zone, ordinal zones, hard zone
# spread, required shard anti-affinity by zone, and a group selected by label over several
# StatefulSets whose replicas are known (so group size is derived and dead-end lookahead runs).
FULL_POLICY: dict[str, Any] = {
    "group": {"selector": {"matchLabels": {"cluster": CLUSTER}}},
    "caps": [
        {"topologyKey": HOST, "max": 1},
        {"topologyKey": ZONE, "max": 10},
    ],
    "ordinalZones": {},
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
    "shardAntiAffinity": [{"topologyKey": ZONE, "mode": "Required"}],
}


# The e2e benchmark's policy (group = the pod's own StatefulSet): caps per node, hard zone spread.
CAPS_SPREAD_POLICY: dict[str, Any] = {
    "caps": [{"topologyKey": HOST, "max": 1}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}
# name -> (policy, group shape) for the in-process profiles
POLICIES: dict[str, tuple[dict[str, Any], dict[str, int]]] = {
    "full": (FULL_POLICY, {}),
    "caps-spread": (CAPS_SPREAD_POLICY, {"shards": 2, "replicas": 100, "placed_shards": 1, "placed_in_next": 50}),
}


def _uid(kind: str, i: int) -> str:
    return f"{kind[:8]:0<8}-{(i >> 16) & 0xFFFF:04x}-4{(i >> 4) & 0xFFF:03x}-8{i & 0xFFF:03x}-{i:012x}"


# ---------------------------------------------------------------------------------------- nodes
def node_name(zone: str, k: int) -> str:
    return f"node-{zone.rsplit('-', 1)[-1]}{k}"


def node_obj(name: str, zone: str, i: int, *, ready: bool = True, unschedulable: bool = False) -> dict[str, Any]:
    """A Node as kube-scheduler marshals it (tests/fixtures/wire/filter_args_nodelist.json), with
    the labels a cloud node carries."""
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        HOST: name,
        "node.kubernetes.io/instance-type": "m6i.2xlarge",
        "topology.kubernetes.io/region": "bench-1",
        ZONE: zone,
    }
    spec: dict[str, Any] = {"podCIDR": f"10.{(i >> 8) & 255}.{i & 255}.0/24"}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name,
            "uid": _uid("node", i),
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "memory": "32386324Ki", "pods": "110"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "96625420948", "memory": "31369492Ki", "pods": "110"},
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "lastHeartbeatTime": "2024-01-02T03:04:05Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                    "reason": reason,
                    "message": f"kubelet {message}",
                }
                for kind, status, reason, message in (
                    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "has sufficient memory available"),
                    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "has no disk pressure"),
                    ("PIDPressure", "False", "KubeletHasSufficientPID", "has sufficient PID available"),
                    ("Ready", str(ready), "KubeletReady" if ready else "KubeletNotReady", "is posting ready status"),
                )
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{(i >> 8) & 255}.{i & 255}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": _uid("sys", i),
                "bootID": _uid("boot", i),
                "kernelVersion": "6.1.0-13-cloud-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.36.3",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def node_layout(count: int) -> list[tuple[str, str]]:
    """(name, zone) for `count` nodes dealt round-robin over the three zones."""
    out = []
    per_zone = {z: 0 for z in ZONES}
    for i in range(count):
        zone = ZONES[i % len(ZONES)]
        per_zone[zone] += 1
        out.append((node_name(zone, per_zone[zone]), zone))
    return out


def nodes(count: int, *, not_ready_every: int = 200) -> list[dict[str, Any]]:
    """`count` nodes; one in `not_ready_every` is NotReady (a real fleet always has a few)."""
    return [
        node_obj(name, zone, i, ready=not (not_ready_every and i % not_ready_every == not_ready_every - 1))
        for i, (name, zone) in enumerate(node_layout(count))
    ]


# ---------------------------------------------------------------------------------------- pods
# What every rich pod shares, as the API server lists it (benchmarks/synthetic_pod.yaml).
RICH_POD = yaml.safe_load((Path(__file__).with_name("synthetic_pod.yaml")).read_text())


def pod_obj(
    *,
    name: str,
    namespace: str,
    uid: str,
    labels: dict[str, str],
    owner: dict[str, Any],
    node: str | None,
    annotations: dict[str, str] | None = None,
    scheduler: str = "default-scheduler",
    claims: tuple[str, ...] = (),
    rv: Any = 1,
    rich: bool = True,
    generate_name: str | None = None,
) -> dict[str, Any]:
    """A pod as the API server lists it. rich=False drops what the extender never reads
    (managedFields, container details, status details) for faster synthetic setups."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": str(rv),
        "creationTimestamp": "2024-01-02T03:00:00Z",
        "labels": labels,
        "ownerReferences": [owner],
    }
    if annotations:
        meta["annotations"] = annotations
    volumes: list[dict[str, Any]] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    spec: dict[str, Any] = {"volumes": volumes, "schedulerName": scheduler}
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if node:
        spec["nodeName"] = node
    if rich:
        if generate_name:
            meta["generateName"] = generate_name
        meta["managedFields"] = managed = copy.deepcopy(RICH_POD["managedFields"])
        fields = managed[0]["fieldsV1"]["f:metadata"]
        fields["f:labels"].update({f"f:{k}": {} for k in labels})
        fields["f:ownerReferences"][f'k:{{"uid":"{owner["uid"]}"}}'] = {}
        volumes.append(copy.deepcopy(RICH_POD["apiAccessVolume"]))
        spec.update(copy.deepcopy(RICH_POD["spec"]))
        status.update(copy.deepcopy(RICH_POD["boundStatus" if node else "pendingStatus"]))
    return {"metadata": meta, "spec": spec, "status": status}


def background_pod(i: int, node: str, *, rich: bool = True, rv: int = 1) -> dict[str, Any]:
    """Pod i of the rest of the cluster: 50 namespaces, 20 Deployments each, owned by ReplicaSets."""
    ns, app = f"team-{i % 50:02d}", f"app-{(i // 50) % 20:02d}"
    hash_ = f"{(i // 1000) % 997:x}{(i * 7) % 89:02x}"
    rs = f"{app}-{hash_}"
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": _uid("rs", i % 1000)}
    return pod_obj(
        name=f"{rs}-{i:06x}",
        namespace=ns,
        uid=_uid("pod", i),
        labels={"app": app, "pod-template-hash": hash_, "team": ns},
        owner=owner | {"controller": True, "blockOwnerDeletion": True},
        node=node,
        rv=rv,
        rich=rich,
        generate_name=rs + "-",
    )


# ---------------------------------------------------------------------------------------- the group
@dataclass
class Group:
    """The policy group: `shards` StatefulSets of `replicas` pods, selected by label `cluster`."""

    shards: int = 10
    replicas: int = 3
    placed_shards: int = 6  # shards 0..placed_shards-1 fully placed
    placed_in_next: int = 1  # ordinals of the next shard already placed; the pod under test is the next ordinal

    def sts_name(self, s: int) -> str:
        return f"{CLUSTER}-{s}"

    @property
    def pod_under_test(self) -> tuple[int, int]:
        return self.placed_shards, self.placed_in_next


def group_labels(sts: str, o: int) -> dict[str, str]:
    """The labels of StatefulSet `sts`'s pod `o` in the group, as its controller sets them."""
    name = f"{sts}-{o}"
    return {
        "app": sts,
        "cluster": CLUSTER,
        "controller-revision-hash": f"{sts}-7d9f",
        "apps.kubernetes.io/pod-index": str(o),
        "statefulset.kubernetes.io/pod-name": name,
    }


def group_pod(group: Group, s: int, o: int, node: str | None, *, rich: bool = True) -> dict[str, Any]:
    sts = group.sts_name(s)
    name = f"{sts}-{o}"
    return pod_obj(
        name=name,
        namespace=GROUP_NS,
        uid=_uid("grp", s * 1000 + o),
        labels=group_labels(sts, o),
        owner={
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": sts,
            "uid": _uid("sts", s),
            "controller": True,
            "blockOwnerDeletion": True,
        },
        node=node,
        annotations={POLICY_REF_ANNOTATION: CLUSTER},
        scheduler=SCHEDULER,
        claims=(f"data-{name}",),
        rich=rich,
    )


def statefulset_obj(group: Group, s: int) -> dict[str, Any]:
    sts = group.sts_name(s)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": sts,
            "namespace": GROUP_NS,
            "uid": _uid("sts", s),
            "resourceVersion": "500",
            "generation": 1,
        },
        "spec": {
            "replicas": group.replicas,
            "serviceName": sts,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": sts}},
            "template": {
                "metadata": {
                    "labels": {"app": sts, "cluster": CLUSTER},
                    "annotations": {POLICY_REF_ANNOTATION: CLUSTER},
                },
                "spec": {"schedulerName": SCHEDULER, "containers": [{"name": "redis", "image": "redis:7"}]},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
                }
            ],
        },
        "status": {"replicas": group.replicas, "readyReplicas": group.replicas},
    }


def policy_obj(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": CLUSTER, "namespace": GROUP_NS, "uid": _uid("pol", 1), "resourceVersion": "10"},
        "spec": spec if spec is not None else FULL_POLICY,
    }


@dataclass
class Cluster:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    statefulsets: list[dict[str, Any]]
    policies: list[dict[str, Any]]
    pending: dict[str, Any]  # the pod kube-scheduler asks about
    group: Group = field(default_factory=Group)
    rotations: list[dict[str, Any]] = field(default_factory=list)  # ZoneRotation objects

    def load(self, store: Any) -> None:
        """Fill a ClusterStore the way the watcher does on its first sync."""
        for kind, items in (("nodes", self.nodes), ("pods", self.pods), ("statefulsets", self.statefulsets)):
            store.replace(kind, items)
        for kind, items in (
            ("claims", []),
            ("volumes", []),
            ("policies", self.policies),
            ("rotations", self.rotations),
        ):
            store.replace(kind, items)

    def node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.nodes]


def pending_pod(group: Group) -> dict[str, Any]:
    """The group's next pod, Pending, exactly as kube-scheduler sends it in ExtenderArgs.Pod."""
    s, o = group.pod_under_test
    return group_pod(group, s, o, None, rich=True)


def cluster(
    node_count: int,
    pod_count: int,
    *,
    group: Group | None = None,
    rich: bool = True,
    policy: dict[str, Any] | None = None,
) -> Cluster:
    """`node_count` nodes over three zones and `pod_count` cached pods in total (the group's bound
    pods included, the pending pod under test included)."""
    group = group or Group()
    raw_nodes = nodes(node_count)
    layout = node_layout(node_count)
    by_zone: dict[str, list[str]] = {z: [n for n, zz in layout if zz == z] for z in ZONES}
    # Group pods follow ordinal zones (order zone-a, zone-b, zone-c: equal node counts, ties by
    # name), one per node, on the first nodes of each zone.
    used = {z: 0 for z in ZONES}
    group_pods = []
    s_next, o_next = group.pod_under_test
    for s in range(group.shards):
        for o in range(group.replicas):
            if s < s_next or (s == s_next and o < o_next):
                zone = ZONES[o % len(ZONES)]
                node = by_zone[zone][used[zone]]
                used[zone] += 1
                group_pods.append(group_pod(group, s, o, node, rich=rich))
    pending = pending_pod(group)
    background = pod_count - len(group_pods) - 1
    pods_ = [background_pod(i, layout[i % node_count][0], rich=rich) for i in range(max(0, background))]
    pods_.extend(group_pods)
    pods_.append(pending)
    # A cluster in its steady state: every StatefulSet that has had a decision has its recorded
    # rotation (the extender writes one at a set's first decision; the sets with no pod yet have
    # none, and their order is decided from the live state at each decision until then).
    rotations = [
        rotation_object(GROUP_NS, group.sts_name(s), ZONES, {})
        for s in range(min(group.shards, s_next + (1 if o_next else 0)))
    ]
    return Cluster(
        nodes=raw_nodes,
        pods=pods_,
        statefulsets=[statefulset_obj(group, s) for s in range(group.shards)],
        policies=[policy_obj(policy)],
        pending=pending,
        group=group,
        rotations=rotations,
    )


# ---------------------------------------------------------------------------------------- wire
def filter_args(node_count: int, *, node_list: bool = False, group: Group | None = None) -> bytes:
    """ExtenderArgs as kube-scheduler marshals them (Go field names, nil as null, compact), for the
    pending pod of cluster(node_count, ...) with every node as a candidate.

    nodeCacheCapable: true sends NodeNames (tests/fixtures/wire/filter_args_nodenames.json);
    false sends full Node objects in a v1.NodeList (filter_args_nodelist.json)."""
    pod = pending_pod(group or Group())
    if node_list:
        body = {"Pod": pod, "Nodes": {"metadata": {}, "items": nodes(node_count)}, "NodeNames": None}
    else:
        body = {"Pod": pod, "Nodes": None, "NodeNames": [name for name, _ in node_layout(node_count)]}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def decision_of(filter_answer: bytes) -> dict[str, Any]:
    """What a filter answer decided: nodes passed, failed, failed and unresolvable (and its error)."""
    answer = json.loads(filter_answer)
    out = {
        "passed": len(answer.get("NodeNames") or (answer.get("Nodes") or {}).get("items") or []),
        "failed": len(answer.get("FailedNodes") or {}),
        "unresolvable": len(answer.get("FailedAndUnresolvableNodes") or {}),
    }
    return out | ({"error": answer["Error"][:300]} if answer.get("Error") else {})


def prioritize_args(filter_body: bytes, filter_answer: bytes) -> bytes:
    """The prioritize request that follows a filter: kube-scheduler scores only the nodes that
    passed filtering (its own plugins, then the extender's filter), so NodeNames (or Nodes.items)
    are the filter answer's."""
    request = json.loads(filter_body)
    answer = json.loads(filter_answer)
    if request.get("NodeNames") is not None:
        body = {"Pod": request["Pod"], "Nodes": None, "NodeNames": answer.get("NodeNames") or []}
    else:
        body = {
            "Pod": request["Pod"],
            "Nodes": {"metadata": {}, "items": (answer.get("Nodes") or {}).get("items") or []},
            "NodeNames": None,
        }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

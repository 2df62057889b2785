"""Kubernetes objects as raw JSON dicts, the way the API server and kube-scheduler send them."""

from __future__ import annotations

import json
from typing import Any

from extender.api.policy import INLINE_POLICY_ANNOTATION, POLICY_REF_ANNOTATION

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def node(
    name: str,
    zone: str | None = None,
    *,
    ready: bool = True,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    legacy_zone: bool = False,
) -> dict[str, Any]:
    all_labels = {HOST: name}
    if zone is not None:
        all_labels["failure-domain.beta.kubernetes.io/zone" if legacy_zone else ZONE] = zone
    all_labels.update(labels or {})
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": all_labels},
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pod(
    name: str,
    namespace: str = "db",
    *,
    sts: str | None = None,
    node_name: str | None = None,
    labels: dict[str, str] | None = None,
    policy: dict[str, Any] | str | None = None,
    policy_name: str | None = None,
    claims: tuple[str, ...] = (),
    terminating: bool = False,
    phase: str = "Pending",
    uid: str | None = None,
    scheduler: str = "placement-scheduler",
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{namespace}-{name}",
        "labels": all_labels,
    }
    if sts is not None:
        all_labels["statefulset.kubernetes.io/pod-name"] = name
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts, "uid": f"uid-sts-{sts}", "controller": True}
        ]
    annotations = {}
    if policy is not None:
        annotations[INLINE_POLICY_ANNOTATION] = policy if isinstance(policy, str) else json.dumps(policy)
    if policy_name is not None:
        annotations[POLICY_REF_ANNOTATION] = policy_name
    if annotations:
        meta["annotations"] = annotations
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox"}],
        "volumes": [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node_name and phase == "Pending" else phase},
    }


def statefulset(
    name: str,
    replicas: int,
    namespace: str = "db",
    *,
    labels: dict[str, str] | None = None,
    claim_templates: tuple[str, ...] = (),
    policy: dict[str, Any] | None = None,
    policy_name: str | None = None,
) -> dict[str, Any]:
    annotations = {}
    if policy is not None:
        annotations[INLINE_POLICY_ANNOTATION] = json.dumps(policy)
    if policy_name is not None:
        annotations[POLICY_REF_ANNOTATION] = policy_name
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"labels": dict(labels or {}), "annotations": annotations}},
            "volumeClaimTemplates": [{"metadata": {"name": t}} for t in claim_templates],
        },
    }


def claim(name: str, volume: str | None, namespace: str = "db") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"volumeName": volume} if volume else {}}


def volume(name: str, zone: str, *, as_affinity: bool = True) -> dict[str, Any]:
    if as_affinity:
        return {
            "metadata": {"name": name},
            "spec": {
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
                    }
                }
            },
        }
    return {"metadata": {"name": name, "labels": {ZONE: zone}}, "spec": {}}


def policy_object(name: str, spec: dict[str, Any], namespace: str = "db") -> dict[str, Any]:
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def filter_args(pod_obj: dict[str, Any], node_names: list[str]) -> dict[str, Any]:
    return {"Pod": pod_obj, "Nodes": None, "NodeNames": node_names}


# Pieces of YAML the fuzzers string together into policy annotations: brackets, anchors, tags,
# block and flow syntax, so the parser meets every construct, valid or not.
YAML_FRAGMENTS = [
    "[",
    "]",
    "{",
    "}",
    ":",
    ": ",
    ",",
    "- ",
    "\n",
    "  ",
    "&a ",
    "*a",
    "!!binary ",
    "!!int ",
    "!!float ",
    "!!timestamp ",
    "!!set ",
    "!!python/object ",
    "<<: ",
    "? ",
    "'",
    '"',
    "#",
    "|",
    ">",
    "...",
    "---",
    "caps",
    "topologyKey",
    "max",
    "1",
    "-1",
    "0x1f",
    "1e999",
    ".nan",
    "2024-02-30",
    "2001-12-14t21:59:43+99:00",
    "99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999",
    "\ud800",
    "\t",
    "%YAML 1.1\n",
    "~",
    "null",
    "true",
    "!!bool ",
    "!!omap ",
    "!",
    "group",
    "size",
    "zones",
    "0x",
    "+99:00",
    "\\",
    "{}",
    "[]",
    "=",
]

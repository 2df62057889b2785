"""adopt and retire on manifests: what a team that keeps its workloads in git commits.

`adopt -f FILE -o yaml` (and `retire`) read the workload from a file or stdin instead of the
cluster, and print, as YAML, every object adopt would write: the workload with its new pod
template and, for a running StatefulSet under ordinal zones, its ZoneRotation record (the record
"nothing running moves" depends on: the zones its running pods are kept in). The live
`adopt --dry-run -o yaml` prints the same documents from the live object. Nothing here does I/O:
the CLI reads the files and the cluster (extender/cli/workloads.py).

Invariant: the printed workload is the input with only adopt's (or retire's) changes, and is
committable: none of the API server's own fields (status, uid, resourceVersion, managedFields,
creationTimestamp, generation), so `kubectl apply -f` or a GitOps controller applies it as is.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ..api.policy import KIND as POLICY_KIND
from ..api.policy import PlacementPolicySpec, parse_spec
from .adopt import KINDS

# The API server's own fields: never committed (a GitOps controller would fight over them)
SERVER_METADATA = ("uid", "resourceVersion", "managedFields", "creationTimestamp", "generation", "selfLink")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class ManifestError(ValueError):
    """The input does not hold what the command needs; the message says what to give."""


def read_documents(text: str, source: str) -> list[dict[str, Any]]:
    """The YAML (or JSON) documents of `text`, flattened from `kind: List`."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise ManifestError(f"{source}: not YAML: {err}") from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise ManifestError(f"{source}: every document must be an object, not {type(doc).__name__}")
        if doc.get("kind") == "List":
            out.extend(item for item in doc.get("items") or () if isinstance(item, dict))
        else:
            out.append(doc)
    return out


def pick_workload(docs: list[dict[str, Any]], name: str | None, source: str) -> dict[str, Any]:
    """The one StatefulSet or Deployment of `docs` (the one named `name`, if given)."""
    workloads = [d for d in docs if d.get("kind") in KINDS.values()]
    if name is not None:
        workloads = [d for d in workloads if (d.get("metadata") or {}).get("name") == name]
    if len(workloads) != 1:
        found = ", ".join(f"{d['kind']}/{(d.get('metadata') or {}).get('name')}" for d in workloads) or "none"
        raise ManifestError(
            f"{source}: expected one StatefulSet or Deployment{f' named {name}' if name else ''}, found {found}: "
            "name the one to adopt as statefulset/NAME or deployment/NAME"
        )
    return copy.deepcopy(workloads[0])


def policy_in(docs: list[dict[str, Any]], name: str) -> PlacementPolicySpec | None:
    """The PlacementPolicy `name` if the manifests hold it (committed beside the workload)."""
    for doc in docs:
        if doc.get("kind") == POLICY_KIND and (doc.get("metadata") or {}).get("name") == name:
            return parse_spec(doc.get("spec") or {}, f"{POLICY_KIND} {name}")
    return None


def committable(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without the API server's own fields (status, uid, resourceVersion, ...)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in SERVER_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop(LAST_APPLIED, None)
    if "annotations" in meta and not annotations:
        meta.pop("annotations")
    return out


def with_api_version(workload: dict[str, Any]) -> dict[str, Any]:
    """apps/v1 on a workload read from the API (whose body the CLI took the kind from)."""
    return {"apiVersion": workload.get("apiVersion", "apps/v1"), **workload}


def dump(documents: list[dict[str, Any]]) -> str:
    """The documents as one multi-document YAML stream, in the order they must be applied."""
    return yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True)


# Argo CD applies the lower waves first and waits for them: the policy and the record before the
# workload. Without waves it applies custom resources after built-in kinds within a wave; the
# declared mark (api/policy.py ZONE_ROTATION_ANNOTATION) makes that order harmless too.
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
BEFORE_WORKLOADS = "-1"


def rotation_in(docs: list[dict[str, Any]], statefulset: str) -> dict[str, Any] | None:
    """The ZoneRotation of `statefulset` if the manifests hold it (committed beside the set)."""
    from ..api.rotation import KIND as ROTATION_KIND

    for doc in docs:
        if doc.get("kind") != ROTATION_KIND:
            continue
        spec = doc.get("spec") or {}
        if spec.get("statefulSet") == statefulset or (doc.get("metadata") or {}).get("name") == statefulset:
            return copy.deepcopy(doc)
    return None


def policy_document(docs: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    """The PlacementPolicy object `name` of the manifests, as written there."""
    for doc in docs:
        if doc.get("kind") == POLICY_KIND and (doc.get("metadata") or {}).get("name") == name:
            return copy.deepcopy(doc)
    return None


def to_commit(obj: dict[str, Any]) -> dict[str, Any]:
    """A policy or record as committed: no server field, no ownerReference (a record outlives its
    set: api/rotation.py), and applied before the workloads (SYNC_WAVE; a wave already set stays)."""
    out = committable(obj)
    meta = out.setdefault("metadata", {})
    meta.pop("ownerReferences", None)
    meta.setdefault("annotations", {}).setdefault(SYNC_WAVE, BEFORE_WORKLOADS)
    return out


def adopt_documents(
    policy: dict[str, Any] | None,
    record: dict[str, Any] | None,
    workload: dict[str, Any],
    others: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every object to commit, in the order to apply them: the PlacementPolicy, the ZoneRotation,
    the input's other objects as they were, the workload. So the output can replace the input
    file and lose nothing (retire's too: the policy and record it read stay)."""
    first = [to_commit(o) for o in (policy, record) if o is not None]
    return [*first, *(others or ()), committable(with_api_version(workload))]


def other_documents(docs: list[dict[str, Any]], *taken: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The documents of the input that are none of `taken` (compared by kind and name)."""

    def ident(d: dict[str, Any]) -> tuple[str, str]:
        return str(d.get("kind")), str((d.get("metadata") or {}).get("name"))

    out = {ident(t) for t in taken if t is not None}
    return [copy.deepcopy(d) for d in docs if ident(d) not in out]

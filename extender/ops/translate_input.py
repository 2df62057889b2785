"""Where `translate` finds a policy: manifests in a file, or objects in the live cluster."""

from __future__ import annotations

from typing import Any

from ..api.policy import (
    INLINE_POLICY_ANNOTATION,
    KIND,
    POLICY_REF_ANNOTATION,
    PlacementPolicySpec,
    parse_annotation,
    parse_spec,
)


def _statefulset_policy(sts: dict[str, Any], policies: dict[str, PlacementPolicySpec]) -> PlacementPolicySpec:
    name = sts["metadata"]["name"]
    annotations = ((sts.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {}
    if INLINE_POLICY_ANNOTATION in annotations:
        return parse_annotation(annotations[INLINE_POLICY_ANNOTATION], f"StatefulSet {name}")
    ref = annotations.get(POLICY_REF_ANNOTATION)
    if ref is None:
        raise ValueError(f"StatefulSet {name} carries no placement policy annotation")
    if ref not in policies:
        raise ValueError(f"StatefulSet {name} names PlacementPolicy {ref}: include it in the input")
    return policies[ref]


def _size(spec: PlacementPolicySpec, statefulsets: list[dict[str, Any]], own: dict[str, Any] | None) -> int | None:
    if spec.group.size:
        return spec.group.size
    if spec.group.selector is None:
        return int((own or {}).get("spec", {}).get("replicas", 1)) if own else None
    chosen = [
        s
        for s in statefulsets
        if spec.group.selector.matches(
            ((s.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        )
    ]
    return sum(int(s["spec"].get("replicas", 1)) for s in chosen) or None


def from_documents(docs: list[Any], source: str) -> tuple[PlacementPolicySpec, dict[str, str], int | None, str]:
    policies = {
        d["metadata"]["name"]: parse_spec(d.get("spec") or {}, f"{KIND} {d['metadata']['name']}")
        for d in docs
        if isinstance(d, dict) and d.get("kind") == KIND
    }
    statefulsets = [d for d in docs if isinstance(d, dict) and d.get("kind") == "StatefulSet"]
    if statefulsets:
        sts = statefulsets[0]
        spec = _statefulset_policy(sts, policies)
        labels = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return (
            spec,
            dict(labels) if spec.group.selector is None else {},
            _size(spec, statefulsets, sts),
            f"StatefulSet {sts['metadata']['name']}",
        )
    if policies:
        name, spec = next(iter(policies.items()))
        return spec, {}, _size(spec, statefulsets, None), f"{KIND} {name}"
    if len(docs) == 1 and isinstance(docs[0], dict):
        return parse_spec(docs[0], source), {}, None, source
    raise ValueError(f"{source}: expected a PlacementPolicy, a StatefulSet with a policy, or a bare policy spec")


def from_cluster(
    ref: str, namespace: str, kubeconfig: str | None, context: str | None = None
) -> tuple[PlacementPolicySpec, dict[str, str], int | None, str]:
    from ..api.policy import API_GROUP, API_VERSION, PLURAL
    from ..kube.client import connect

    kind, name = ref.split("/", 1)
    api = connect(kubeconfig, context)
    statefulsets = api.call("GET", f"/apis/apps/v1/namespaces/{namespace}/statefulsets").get("items") or []
    policies_list = (
        api.call("GET", f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{namespace}/{PLURAL}").get("items") or []
    )
    docs = [*policies_list, *({"kind": "StatefulSet", **s} for s in statefulsets)]
    if kind.lower() in ("statefulset", "statefulsets", "sts"):
        target = [d for d in docs if d.get("kind") == "StatefulSet" and d["metadata"]["name"] == name]
        if not target:
            raise ValueError(f"StatefulSet {namespace}/{name} not found")
        rest = [d for d in docs if d is not target[0]]
        return from_documents([target[0], *rest], ref)
    if kind.lower() in ("placementpolicy", "placementpolicies", "pp"):
        target = [d for d in policies_list if d["metadata"]["name"] == name]
        if not target:
            raise ValueError(f"PlacementPolicy {namespace}/{name} not found")
        others = [d for d in docs if d.get("kind") == "StatefulSet"]
        return from_documents([{"kind": KIND, **target[0]}, *others], ref)
    raise ValueError(f"unknown kind {kind!r}: use statefulset/NAME or placementpolicy/NAME")

"""An independent model of kube-scheduler's in-tree filters that count pods or read node labels:
NodeAffinity (required terms), PodTopologySpread (DoNotSchedule) and InterPodAffinity (required
anti-affinity, both directions), written from upstream v1.36 (pkg/scheduler/framework/plugins/
nodeaffinity, podtopologyspread/filtering.go, interpodaffinity/filtering.go) over plain data. It
shares no code with the engine or extender/engine/implied.py: the implied-constraint proofs compare the
two. What it leaves out (taints, resources, volumes, nominated pods) no implied constraint reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class NativePod:
    name: str
    labels: dict[str, str]
    node: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)  # topologySpreadConstraints, affinity
    namespace: str = "db"
    terminating: bool = False


def _requirement(req: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = req["key"], req["operator"], req.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    raise ValueError(op)


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False  # a nil selector matches nothing (metav1.LabelSelectorAsSelector)
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement(r, labels) for r in selector.get("matchExpressions") or [])


def _with_match_label_keys(selector: dict[str, Any], keys: list[str], labels: dict[str, str]) -> dict[str, Any]:
    """matchLabelKeys: `key In [the pod's value]` ANDed in; a key the pod lacks is ignored."""
    extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys if k in labels]
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []), *extra]}


def node_affinity_passes(pod: NativePod, node_labels: dict[str, str]) -> bool:
    for key, value in (pod.spec.get("nodeSelector") or {}).items():
        if node_labels.get(key) != value:
            return False
    required = (
        ((pod.spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    if not required:
        return True
    return any(all(_requirement(r, node_labels) for r in term.get("matchExpressions") or []) for term in required)


def spread_passes(pod: NativePod, node: str, nodes: dict[str, dict[str, str]], pods: list[NativePod]) -> bool:
    constraints = [
        c
        for c in pod.spec.get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
    ]
    if not constraints:
        return True
    keys = [c["topologyKey"] for c in constraints]
    for c in constraints:
        key = c["topologyKey"]
        if key not in nodes[node]:
            return False  # UnschedulableAndUnresolvable: missing required label
        selector = _with_match_label_keys(c["labelSelector"], c.get("matchLabelKeys") or [], pod.labels)
        counts: dict[str, int] = {}
        for name, labels in nodes.items():
            if not all(k in labels for k in keys):
                continue  # nodeLabelsMatchSpreadConstraints
            if c.get("nodeAffinityPolicy", "Honor") == "Honor" and not node_affinity_passes(pod, labels):
                continue
            value = labels[key]
            counts.setdefault(value, 0)
            for other in pods:
                if (
                    other.node == name
                    and other.namespace == pod.namespace
                    and not other.terminating
                    and selector_matches(selector, other.labels)
                ):
                    counts[value] += 1
        minimum = min(counts.values()) if counts else 0
        if c.get("minDomains") is not None and len(counts) < c["minDomains"]:
            minimum = 0
        self_match = 1 if selector_matches(selector, pod.labels) else 0
        if counts.get(nodes[node][key], 0) + self_match - minimum > c["maxSkew"]:
            return False
    return True


def _anti_terms(pod: NativePod) -> list[dict[str, Any]]:
    return list(
        ((pod.spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or []
    )


def anti_affinity_passes(pod: NativePod, node: str, nodes: dict[str, dict[str, str]], pods: list[NativePod]) -> bool:
    here = nodes[node]
    for other in pods:
        if other.node is None or other.node not in nodes or other.namespace != pod.namespace:
            continue
        there = nodes[other.node]
        for term in _anti_terms(pod):  # the incoming pod's terms against existing pods
            key = term["topologyKey"]
            selector = _with_match_label_keys(term["labelSelector"], term.get("matchLabelKeys") or [], pod.labels)
            if key in here and here.get(key) == there.get(key) and selector_matches(selector, other.labels):
                return False
        for term in _anti_terms(other):  # existing pods' terms against the incoming pod (symmetry)
            key = term["topologyKey"]
            selector = _with_match_label_keys(term["labelSelector"], term.get("matchLabelKeys") or [], other.labels)
            if key in here and here.get(key) == there.get(key) and selector_matches(selector, pod.labels):
                return False
    return True


def passes(pod: NativePod, node: str, nodes: dict[str, dict[str, str]], pods: list[NativePod]) -> bool:
    """Whether the in-tree filters modelled here let `pod` onto `node`."""
    return (
        node_affinity_passes(pod, nodes[node])
        and spread_passes(pod, node, nodes, pods)
        and anti_affinity_passes(pod, node, nodes, pods)
    )

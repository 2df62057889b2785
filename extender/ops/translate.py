"""A policy as the closest native pod-spec fragment, and what the native scheduler gives up.

Each rule's own translation lives with the rule (extender/engine/rules/); this module adds what
belongs to the group as a whole (the selector, the NetEase Redis design's soft spread per node and zone, the
dead-end gap) and assembles the fragment.

The retire path: teams adopt the extender where topologySpreadConstraints cannot say what they
need, and want to know, rule by rule, what they lose by going back. The conversions follow the
source designs: the NetEase Redis design turned "fewer than 1/3 of the cluster per node" into
maxSkew = floor(N/3), minus 1 when 3 divides N (which is exactly the cap's limit), required
zones into node affinity, shard separation into pod anti-affinity, plus a soft maxSkew 1 per
node and zone; KubeBlocks' affinity design emits one constraint per topology key and anti-affinity
required or preferred.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..api.policy import PlacementPolicySpec
from ..engine import Gap, NativeFragment, translate_rules

# The label StatefulSet pods carry that differs per StatefulSet (its name + revision hash):
# with matchLabelKeys, anti-affinity then applies among pods of one shard only.
SHARD_LABEL = "controller-revision-hash"


@dataclass
class Translation:
    fragment: dict[str, Any]
    gaps: list[Gap] = field(default_factory=list)
    group_size: int | None = None


def _selector(spec: PlacementPolicySpec, match_labels: dict[str, str]) -> dict[str, Any]:
    selector: dict[str, Any] = {"matchLabels": dict(match_labels)}
    if spec.group.selector is not None:
        selector["matchLabels"] = {**spec.group.selector.matchLabels, **match_labels}
        if spec.group.selector.matchExpressions:
            selector["matchExpressions"] = [e.model_dump() for e in spec.group.selector.matchExpressions]
    return selector


def translate(
    spec: PlacementPolicySpec,
    *,
    match_labels: dict[str, str] | None = None,
    group_size: int | None = None,
    shard_label: str = SHARD_LABEL,
) -> Translation:
    """Native constraints for one policy. `match_labels` names the group's pods when the policy
    has no selector (e.g. a StatefulSet's selector labels); `group_size` fills in a derived size."""
    size = spec.group.size or group_size
    labels = match_labels or {}
    if spec.group.selector is None and not labels:
        raise ValueError(
            "the policy has no group.selector: give the labels of the group's pods (--match-labels app=...)"
        )
    out = NativeFragment(spec, size, _selector(spec, labels), shard_label)
    translate_rules(spec, out)  # each rule's own native constraints and gaps (engine/rules/)
    # The NetEase Redis design: beside the hard rules, prefer an even spread per node (and per zone), where the
    # hard rules do not keep it already.
    for key in (spec.topology.node, *([spec.topology.zone] if spec.uses_zones else [])):
        if not _even_already(out, key):
            out.constraint(key, 1, "ScheduleAnyway")
    if spec.deadEndAvoidance and (spec.caps or out.required_pods) and (out.hard or out.required_pods):
        out.gap(
            "deadEndAvoidance",
            "the native scheduler places each pod greedily and never looks ahead",
            "a legal sequence of placements can leave the last pods no node (the NetEase Redis design, appendix 2: "
            "a 3-shard cluster on 3 zones x 2 nodes); loosening LessThan to AtMost is NetEase's workaround",
        )
    fragment: dict[str, Any] = {"topologySpreadConstraints": [*out.hard.values(), *out.soft.values()]}
    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    if out.required_nodes:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": out.required_nodes}
    if out.preferred_nodes:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = out.preferred_nodes
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    anti: dict[str, Any] = {}
    if out.required_pods:
        anti["requiredDuringSchedulingIgnoredDuringExecution"] = out.required_pods
    if out.preferred_pods:
        anti["preferredDuringSchedulingIgnoredDuringExecution"] = out.preferred_pods
    if anti:
        affinity["podAntiAffinity"] = anti
    if affinity:
        fragment["affinity"] = affinity
    return Translation(_unshared(fragment), out.gaps, size)


def _even_already(out: NativeFragment, key: str) -> bool:
    """Whether the hard constraints already keep the group within a skew of 1 on `key`, so a
    soft maxSkew 1 there would add nothing: a DoNotSchedule spread of maxSkew 1, or a required
    anti-affinity among all of the group's pods (at most one per domain: skew 1 at most)."""
    hard = out.hard.get(key)
    if hard is not None and hard["maxSkew"] <= 1:
        return True
    return any(
        term.get("topologyKey") == key and term.get("labelSelector") == out.selector and not term.get("matchLabelKeys")
        for term in out.required_pods
    )


def _unshared(value: Any) -> Any:
    """Deep copies, so YAML output has no &anchors / *aliases for the shared selector."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value

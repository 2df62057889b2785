"""A policy as the closest native pod-spec fragment, and what the native scheduler gives up.

The retire path: teams adopt the extender where topologySpreadConstraints cannot say what they
need, and want to know, rule by rule, what they lose by going back. The conversions follow the
seeds: NetEase (seed 002) turned "fewer than 1/3 of the cluster per node" into
maxSkew = floor(N/3), minus 1 when 3 divides N (which is exactly the cap's limit), required
zones into node affinity, shard separation into pod anti-affinity, plus a soft maxSkew 1 per
node and zone; KubeBlocks (seed 000) emits one constraint per topology key and anti-affinity
required or preferred.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .policy import AntiAffinityMode, PlacementPolicySpec

# The label StatefulSet pods carry that differs per StatefulSet (its name + revision hash):
# with matchLabelKeys, anti-affinity then applies among pods of one shard only.
SHARD_LABEL = "controller-revision-hash"


@dataclass(frozen=True)
class Gap:
    rule: str
    limitation: str
    cost: str


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
    selector = _selector(spec, labels)
    zone, node = spec.topology.zone, spec.topology.node
    gaps: list[Gap] = []
    hard: dict[str, dict[str, Any]] = {}  # topologyKey -> constraint (native allows one per key and mode)
    soft: dict[str, dict[str, Any]] = {}

    def constraint(key: str, skew: int, mode: str) -> None:
        table = hard if mode == "DoNotSchedule" else soft
        current = table.get(key)
        if current is None or skew < current["maxSkew"]:
            table[key] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": mode, "labelSelector": selector}

    for cap in spec.caps:
        key = spec.canonical_key(cap.topologyKey)
        limit = cap.limit(size)
        if limit is None:
            gaps.append(
                Gap(
                    "caps",
                    f"'{cap.describe(None)}' needs the group size, which is unknown",
                    "no constraint emitted for it: pass --size or set group.size",
                )
            )
            continue
        constraint(key, limit, "DoNotSchedule")
        gaps.append(
            Gap(
                "caps",
                f"'{cap.describe(size)}' becomes maxSkew {limit}, which bounds a domain's pods minus the emptiest "
                "domain's, not the count itself",
                "once every domain holds a pod, a domain can exceed the cap (seed 002, conclusion 2); with fewer "
                "domains than needed the cap is not kept at all",
            )
        )
    if any(c.fraction is not None for c in spec.caps) and size is not None:
        gaps.append(
            Gap(
                "caps",
                f"fractional caps become fixed maxSkew values for a group of {size}",
                "when the group grows or shrinks, every StatefulSet of the group must be updated with the "
                "recomputed maxSkew (seed 002's operator does this on scaling)",
            )
        )
    for s in spec.spread:
        constraint(spec.canonical_key(s.topologyKey), s.maxSkew, s.whenUnsatisfiable)
    uses_zones = spec.uses_zones
    # Seed 002: beside the hard rules, prefer an even spread per node (and per zone).
    constraint(node, 1, "ScheduleAnyway")
    if uses_zones:
        constraint(zone, 1, "ScheduleAnyway")

    permitted = spec.zones.permitted() if spec.zones else None
    if permitted is not None and zone in hard:
        hard[zone]["minDomains"] = len(permitted)  # spread over all allowed zones, even empty ones

    if spec.ordinalZones is not None:
        constraint(zone, 1, "DoNotSchedule")
        gaps.append(
            Gap(
                "ordinalZones",
                "no native rule ties a StatefulSet ordinal to a zone (crl-scheduler, seed 003)",
                "approximated by zone maxSkew 1: creation is balanced, but a scale-down removes the highest "
                "ordinals wherever they are and can empty a zone; a rescheduled pod is not steered back",
            )
        )

    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    if permitted is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": zone, "operator": "In", "values": sorted(permitted)}]}]
        }
    preferred = []
    groups = spec.zones.fallbackGroups if spec.zones else None
    if groups:
        step = max(1, 100 // len(groups))
        for i, group in enumerate(groups):
            weight = max(1, 100 - i * step)
            preferred.append(
                {
                    "weight": weight,
                    "preference": {"matchExpressions": [{"key": zone, "operator": "In", "values": list(group)}]},
                }
            )
        gaps.append(
            Gap(
                "zones.fallbackGroups",
                "native node affinity can only prefer earlier groups by score",
                "a pod may land in a later group while the first still has room, whenever other scores outweigh "
                "the preference (seed 001's ordered groups are strict)",
            )
        )
    for zone_name, weight in sorted((spec.zones.weights or {}).items() if spec.zones else ()):
        if weight > 0:
            preferred.append(
                {
                    "weight": weight,
                    "preference": {"matchExpressions": [{"key": zone, "operator": "In", "values": [zone_name]}]},
                }
            )
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity

    required, preferred_pods = [], []
    for rule in spec.shardAntiAffinity:
        term: dict[str, Any] = {"labelSelector": selector, "topologyKey": spec.canonical_key(rule.topologyKey)}
        if spec.group.selector is not None:
            term["matchLabelKeys"] = [shard_label]  # only pods of the same StatefulSet (shard)
        if rule.mode is AntiAffinityMode.REQUIRED:
            required.append(term)
        else:
            preferred_pods.append({"weight": 100, "podAffinityTerm": term})
    if spec.group.selector is not None and spec.shardAntiAffinity:
        gaps.append(
            Gap(
                "shardAntiAffinity",
                f"shards are told apart by the {shard_label} label (matchLabelKeys)",
                "during a rolling update a shard's old- and new-revision pods do not repel each other",
            )
        )
    if required or preferred_pods:
        anti: dict[str, Any] = {}
        if required:
            anti["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred_pods:
            anti["preferredDuringSchedulingIgnoredDuringExecution"] = preferred_pods
        affinity["podAntiAffinity"] = anti

    if spec.deadEndAvoidance and (spec.caps or required) and (hard or required):
        gaps.append(
            Gap(
                "deadEndAvoidance",
                "the native scheduler places each pod greedily and never looks ahead",
                "a legal sequence of placements can leave the last pods no node (seed 002, appendix 2: a 3-shard "
                "cluster on 3 zones x 2 nodes); loosening LessThan to AtMost is NetEase's workaround",
            )
        )

    fragment: dict[str, Any] = {"topologySpreadConstraints": [*hard.values(), *soft.values()]}
    if affinity:
        fragment["affinity"] = affinity
    return Translation(_unshared(fragment), gaps, size)


def _unshared(value: Any) -> Any:
    """Deep copies, so YAML output has no &anchors / *aliases for the shared selector."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value

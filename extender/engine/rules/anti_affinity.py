"""Shard anti-affinity: pods of one StatefulSet (a shard) kept apart across a key (the NetEase Redis design)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...api.policy import AntiAffinityMode, PlacementPolicySpec
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import DeadEndTerms, Exactness, Failure, ImpliedFragment, NativeFragment, Rule, missing_label

NAME = "shardAntiAffinity"


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant, per Required rule on key K: pods of the pod's StatefulSet in K(node) = 0."""
    if ctx.pod.shard is None:
        return None
    for rule in ctx.spec.shardAntiAffinity:
        if rule.mode is not AntiAffinityMode.REQUIRED:
            continue
        key = ctx.spec.canonical_key(rule.topologyKey)
        value = ctx.domain(node, key)
        if value is None:
            return missing_label(NAME, key)
        if ctx.shard_counts[key].get(value, 0) > 0:
            return Failure(
                Outcome.FAIL,
                NAME,
                f"{ctx.where(key, value)} already holds a pod of StatefulSet {ctx.pod.shard} (required anti-affinity)",
            )
    return None


def score(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float] | None:
    """Preferred rules: 1 where no sibling shares a domain, less per rule a sibling shares. The
    strongest preference after an adopted ordinal's zone (rules.SCORED): a free split of a shard is
    never traded for balance."""
    rules = [r for r in ctx.spec.shardAntiAffinity if r.mode is AntiAffinityMode.PREFERRED]
    if not rules or ctx.pod.shard is None:
        return None
    penalties = []
    for node in nodes:
        clash = 0
        for rule in rules:
            key = ctx.spec.canonical_key(rule.topologyKey)
            value = ctx.domain(node, key)
            if value is not None and ctx.shard_counts[key].get(value, 0) > 0:
                clash += 1
        penalties.append(clash / len(rules))
    if max(penalties) <= 0:
        return None
    return [1.0 - p for p in penalties]


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """At most one pod of a StatefulSet per domain: a gate per (StatefulSet type, domain)."""
    for rule in ctx.spec.shardAntiAffinity:
        if rule.mode is AntiAffinityMode.REQUIRED:
            terms.anti.append(ctx.spec.canonical_key(rule.topologyKey))


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """Pod anti-affinity over the group's pods; shards told apart by matchLabelKeys."""
    for rule in spec.shardAntiAffinity:
        term: dict[str, Any] = {"labelSelector": out.selector, "topologyKey": spec.canonical_key(rule.topologyKey)}
        keys = [out.shard_label] if spec.group.selector is not None else []  # only pods of the same shard
        keys += [k for k in spec.group.matchLabelKeys if k not in keys]  # and of the same revision, if asked
        if keys:
            term["matchLabelKeys"] = keys
        if rule.mode is AntiAffinityMode.REQUIRED:
            out.required_pods.append(term)
        else:
            out.preferred_pods.append({"weight": 100, "podAffinityTerm": term})
    if spec.group.selector is not None and spec.shardAntiAffinity:
        out.gap(
            NAME,
            f"shards are told apart by the {out.shard_label} label (matchLabelKeys)",
            "during a rolling update a shard's old- and new-revision pods do not repel each other",
        )


def imply(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """Required: pod anti-affinity on the key over the pod's StatefulSet within the group (the
    StatefulSet's selector, which its controller keeps to its own pods, and the group's), which
    refuses a node iff its domain holds a sibling: the check. Preferred is a preference: not
    mirrored."""
    for rule in spec.shardAntiAffinity:
        if rule.mode is not AntiAffinityMode.REQUIRED:
            continue
        key = spec.canonical_key(rule.topologyKey)
        if out.shard_selector is None:
            out.mirror(NAME, Exactness.NONE, f"on {key}: needs the StatefulSet's selector, which only adopt knows")
            continue
        out.anti(out.shard_selector, key)
        out.mirror(NAME, Exactness.EXACT, f"required pod anti-affinity on {key} over the pod's StatefulSet")


RULE = Rule(NAME, check, dead_end, translate, imply, score=score)

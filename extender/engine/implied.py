"""The native constraints a policy implies, and how they reach a workload's pods.

Autoscalers never call an extender: Karpenter and cluster-autoscaler simulate scheduling with the
in-tree plugins only, find that a Pending pod "fits" a node the extender refuses, and add nothing
(docs/how-to/autoscalers.md). A pod that also carries the native constraints its policy implies
shows them what the extender needs. Each rule module says what it implies (`imply`, never
stricter than the rule, so adding it changes none of the extender's decisions: the extender only
sees the nodes the in-tree filters passed); this module assembles them and writes them into a pod
spec and out of it again:

* `implied(spec, ...)`: the constraints and, per rule, whether they are exact, a relaxation, or
  missing.
* `add_to_spec` / `remove_from_spec`: what `adopt` writes into a template and `retire` takes out
  again (the template's IMPLIED_ANNOTATION records exactly what was added).
* `disagreements(...)`: a pod's own hard constraints that its policy does not imply (the warning
  the extender records and `audit` reports: autoscalers and the native scheduler act on them).

What only one pod can carry (its ordinal's zone) goes through the scheduling gate GATE: adopt puts
it in the template, and the extender narrows each gated pod's node affinity and lifts the gate in
one write (extender/server/gate_patch.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..api.policy import IMPLIED_ANNOTATION, NARROWED_ZONES_ANNOTATION, PlacementPolicySpec
from ..api.policy import ORDINAL_ZONE_GATE as GATE
from . import Exactness, ImpliedFragment, Mirror, imply_rules

__all__ = ["GATE", "IMPLIED_ANNOTATION", "NARROWED_ZONES_ANNOTATION", "Exactness"]

_SPREAD_DEFAULTS = {"nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore"}


@dataclass
class Implied:
    """A policy's implied native constraints (hard ones only) and each rule's mirror."""

    spreads: list[dict[str, Any]] = field(default_factory=list)
    node_requirements: list[dict[str, Any]] = field(default_factory=list)
    pod_anti: list[dict[str, Any]] = field(default_factory=list)
    gate: bool = False
    mirrors: list[Mirror] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.spreads or self.node_requirements or self.pod_anti or self.gate)


def group_selector(spec: PlacementPolicySpec, group_labels: dict[str, str] | None) -> dict[str, Any] | None:
    """The group's pods as a native label selector: the policy's group.selector, else the labels
    that select the StatefulSet's pods (a default group is one StatefulSet)."""
    if spec.group.selector is not None:
        selector: dict[str, Any] = {"matchLabels": dict(spec.group.selector.matchLabels)}
        if spec.group.selector.matchExpressions:
            selector["matchExpressions"] = [e.model_dump() for e in spec.group.selector.matchExpressions]
        return _clean(selector)  # as the API server stores it: no empty fields
    if group_labels:
        return {"matchLabels": dict(group_labels)}
    return None


def implied(
    spec: PlacementPolicySpec,
    *,
    group_labels: dict[str, str] | None = None,
    shard_labels: dict[str, str] | None = None,
) -> Implied:
    """The native constraints `spec` implies. `group_labels` select the group's pods when the
    policy has no group.selector; `shard_labels` select the pod's StatefulSet's pods (its
    spec.selector.matchLabels), which shard anti-affinity needs."""
    selector = group_selector(spec, group_labels)
    if selector is None:
        raise ValueError("the policy has no group.selector and the workload's selector labels are unknown")
    shard_selector = None
    if shard_labels:
        shard_selector = copy.deepcopy(selector)
        shard_selector["matchLabels"] = {**selector.get("matchLabels", {}), **shard_labels}
    out = ImpliedFragment(spec, selector, shard_selector)
    imply_rules(spec, out)
    if spec.deadEndAvoidance:
        out.mirror(
            "deadEndAvoidance",
            Exactness.NONE,
            "a node refused as a dead end looks free to an autoscaler: no native constraint looks ahead",
        )
    return Implied(
        spreads=[_plain(c) for c in out.spreads.values()],
        node_requirements=_plain(out.node_requirements),
        pod_anti=_plain(out.pod_anti),
        gate=out.per_pod_zone,
        mirrors=list(out.mirrors),
    )


# -- into and out of a pod spec --------------------------------------------------------------------
def add_to_spec(pod_spec: dict[str, Any], imp: Implied) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """`pod_spec` with the implied constraints added: (new spec, what was added, conflicts).

    Node requirements are ANDed into every required nodeSelectorTerm (terms are ORed: a new term
    would widen them). A DoNotSchedule spread on a key the spec already spreads on is not added
    (the API allows one per key and mode): a conflict, reported."""
    new = copy.deepcopy(pod_spec)
    added: dict[str, Any] = {"topologySpreadConstraints": [], "nodeRequirements": [], "podAntiAffinity": []}
    conflicts: list[str] = []
    spreads = new.setdefault("topologySpreadConstraints", [])
    for constraint in imp.spreads:
        same_key = [
            c
            for c in spreads
            if c.get("topologyKey") == constraint["topologyKey"]
            and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        ]
        if any(_same(c, constraint) for c in same_key):
            continue
        if same_key:
            conflicts.append(
                f"the template already has a DoNotSchedule spread on {constraint['topologyKey']} "
                f"({_short(same_key[0])}); the policy implies {_short(constraint)}: remove the template's "
                "(the API allows one per key), then adopt again"
            )
            continue
        spreads.append(constraint)
        added["topologySpreadConstraints"].append(constraint)
    if not spreads:
        del new["topologySpreadConstraints"]
    if imp.node_requirements:
        node_affinity = new.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
        terms = required.get("nodeSelectorTerms") or [{}]
        for term in terms:
            expressions = term.setdefault("matchExpressions", [])
            for requirement in imp.node_requirements:
                if requirement not in expressions:
                    expressions.append(requirement)
        required["nodeSelectorTerms"] = terms
        added["nodeRequirements"] = list(imp.node_requirements)
    if imp.pod_anti:
        anti = new.setdefault("affinity", {}).setdefault("podAntiAffinity", {})
        terms = anti.setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
        for term in imp.pod_anti:
            if term not in terms:
                terms.append(term)
                added["podAntiAffinity"].append(term)
    if imp.gate:
        gates = new.setdefault("schedulingGates", [])
        if {"name": GATE} not in gates:
            gates.append({"name": GATE})
        added["schedulingGate"] = True
    return new, added, conflicts


def remove_from_spec(pod_spec: dict[str, Any], added: dict[str, Any]) -> dict[str, Any]:
    """`pod_spec` without what `add_to_spec` added (as its `added` recorded), and nothing else."""
    new = copy.deepcopy(pod_spec)
    spreads = [
        c for c in new.get("topologySpreadConstraints", []) if c not in added.get("topologySpreadConstraints", [])
    ]
    if spreads:
        new["topologySpreadConstraints"] = spreads
    else:
        new.pop("topologySpreadConstraints", None)
    affinity = new.get("affinity") or {}
    requirements = added.get("nodeRequirements", [])
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    if requirements and required.get("nodeSelectorTerms"):
        terms = []
        for term in required["nodeSelectorTerms"]:
            expressions = [e for e in term.get("matchExpressions", []) if e not in requirements]
            term = {k: v for k, v in term.items() if k != "matchExpressions"}
            if expressions:
                term["matchExpressions"] = expressions
            if term:
                terms.append(term)
        if terms:
            required["nodeSelectorTerms"] = terms
        else:
            node_affinity.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    anti_terms = added.get("podAntiAffinity", [])
    anti = affinity.get("podAntiAffinity") or {}
    if anti_terms and anti.get("requiredDuringSchedulingIgnoredDuringExecution"):
        kept = [t for t in anti["requiredDuringSchedulingIgnoredDuringExecution"] if t not in anti_terms]
        if kept:
            anti["requiredDuringSchedulingIgnoredDuringExecution"] = kept
        else:
            anti.pop("requiredDuringSchedulingIgnoredDuringExecution")
    for kind, field_name in (
        ("nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
        ("podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ):  # preferences: only translate's merge (retire) adds these
        gone = added.get(f"{kind}.{field_name}", [])
        part = affinity.get(kind) or {}
        if gone and part.get(field_name):
            kept = [t for t in part[field_name] if t not in gone]
            if kept:
                part[field_name] = kept
            else:
                part.pop(field_name)
    for name in ("nodeAffinity", "podAntiAffinity"):
        if name in affinity and not affinity[name]:
            del affinity[name]
    if "affinity" in new and not new["affinity"]:
        del new["affinity"]
    gates = [g for g in new.get("schedulingGates", []) if g.get("name") != GATE]
    if gates:
        new["schedulingGates"] = gates
    else:
        new.pop("schedulingGates", None)
    return new


# -- disagreement ----------------------------------------------------------------------------------
def hard_pod_constraints(pod_spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The pod's native constraints that count other pods and refuse nodes: its DoNotSchedule
    spreads and required pod anti-affinity terms, each with where it sits."""
    found: list[tuple[str, dict[str, Any]]] = []
    for i, c in enumerate(pod_spec.get("topologySpreadConstraints") or []):
        if isinstance(c, dict) and c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule":
            found.append((f"topologySpreadConstraints[{i}]", c))
    anti = ((pod_spec.get("affinity") or {}).get("podAntiAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    for i, t in enumerate(anti or []):
        if isinstance(t, dict):
            found.append((f"affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}]", t))
    return found


def disagreements(constraints: list[tuple[str, dict[str, Any]]], pod_labels: dict[str, str], imp: Implied) -> list[str]:
    """Each of the pod's hard native constraints its policy does not imply, said plainly: the
    native scheduler and autoscalers act on it, the extender does not, so they work from a
    picture of the pod that is not the policy's (a stricter one makes an autoscaler add nodes the
    pod does not need, one for another group makes it count the wrong pods)."""
    wanted = [*imp.spreads, *imp.pod_anti]
    found = []
    for where, constraint in constraints:
        if any(_same(constraint, w) for w in wanted):
            continue
        selector = constraint.get("labelSelector")
        if isinstance(selector, dict) and not selects(selector, pod_labels):
            found.append(
                f"{where} ({_short(constraint)}) counts pods of another group (its labelSelector does not select "
                "this pod): autoscalers and the native scheduler act on it, the extender does not"
            )
        else:
            found.append(
                f"{where} ({_short(constraint)}) is not implied by the placement policy: autoscalers and the "
                "native scheduler act on it, the extender does not (`kubectl placement adopt` writes the ones "
                "the policy implies)"
            )
    return found


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A native label selector (as JSON) against labels; a malformed one selects nothing."""
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, dict):
        return False
    if any(labels.get(k) != v for k, v in match_labels.items()):
        return False
    for req in selector.get("matchExpressions") or []:
        if not isinstance(req, dict):
            return False
        key, op, values = req.get("key"), req.get("operator"), req.get("values") or []
        present = key in labels
        if op == "In" and (not present or labels[key] not in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal as the API means them: a spread's default inclusion policies written or not, empty
    fields dropped, and the `key In [value]` requirements the API server merges into a pod's
    labelSelector from matchLabelKeys (1.31+) left out."""

    def norm(c: dict[str, Any]) -> str:
        c = {k: v for k, v in c.items() if not (k in _SPREAD_DEFAULTS and v == _SPREAD_DEFAULTS[k])}
        if "maxSkew" in c:
            c.setdefault("whenUnsatisfiable", "DoNotSchedule")
        keys = set(c.get("matchLabelKeys") or ())
        selector = c.get("labelSelector")
        if keys and isinstance(selector, dict):
            merged = [
                e
                for e in selector.get("matchExpressions") or []
                if not (isinstance(e, dict) and e.get("key") in keys and e.get("operator") == "In")
            ]
            c = {**c, "labelSelector": {**selector, "matchExpressions": merged}}
        return json.dumps(_clean(c), sort_keys=True)

    return norm(a) == norm(b)


def _clean(value: Any) -> Any:
    """Without empty maps, lists and strings (the API server drops them: `matchLabels: {}`,
    `values: []` for Exists)."""
    if isinstance(value, dict):
        cleaned = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in ({}, [], "", None)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _short(constraint: dict[str, Any]) -> str:
    key = constraint.get("topologyKey")
    if "maxSkew" in constraint:
        extra = f", minDomains {constraint['minDomains']}" if "minDomains" in constraint else ""
        return f"spread on {key}, maxSkew {constraint.get('maxSkew')}{extra}"
    return f"anti-affinity on {key}"


def _plain(value: Any) -> Any:
    """Deep copies, so YAML output has no &anchors / *aliases for the shared selector."""
    return json.loads(json.dumps(value))


class CachedPod(Protocol):
    """What `pod_disagreements` reads of a cached pod (the state layer's PodRecord)."""

    labels: dict[str, str]
    hard_native: dict[str, Any] | None


def pod_disagreements(
    pod: CachedPod, spec: PlacementPolicySpec, statefulset_labels: dict[str, str] | None
) -> list[str]:
    """`disagreements` for a cached pod: its hard native constraints against what its policy
    implies (the group read as the extender reads it; `statefulset_labels` are its StatefulSet's
    selector labels, when it has one). Empty when it carries none, or when the group cannot be
    named natively (a default group without a StatefulSet)."""
    if pod.hard_native is None:
        return []
    try:
        imp = implied(spec, group_labels=statefulset_labels or None, shard_labels=statefulset_labels or None)
    except ValueError:
        return []
    return disagreements(hard_pod_constraints(pod.hard_native), pod.labels, imp)

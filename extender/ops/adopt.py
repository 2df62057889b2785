"""`adopt` and `retire`: a workload moves to the extender, or back, in one step.

adopt writes into the workload's pod template, in one update: `schedulerName`, the policy (a
named PlacementPolicy or the inline annotation), the native constraints the policy implies
(extender/engine/implied.py: never stricter than the rules, so autoscalers and the native scheduler see
what the extender needs) and, when the policy places pods by ordinal zone, the scheduling gate
the extender lifts pod by pod (extender/server/gate_patch.py). The template's IMPLIED_ANNOTATION records what
was added. Adopting again (a changed policy) first takes the old additions out.

In in-scheduler mode adopt requests the opt-in resource instead of setting `schedulerName`, and
adds the placeable gate: each pod enters the cluster's kube-scheduler queue only once the extender
answers and has a place for it (extender/server/place_gate.py), so a hung extender cannot hold up
the cluster's other pods behind its timeouts.

retire takes out exactly what adopt added (the opt-in resource too), sets `schedulerName` back (default-scheduler), and
writes translate's closest native constraints instead (extender/ops/translate.py), unless asked not
to; the policy annotation stays, so adopting again is one command.

Both are pure functions of the workload object; the CLI reads and writes it (update with its
resourceVersion: a concurrent change fails the write instead of being lost, and the CLI reads,
decides and writes again, up to five times).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from ..api.policy import (
    IMPLIED_ANNOTATION,
    INLINE_POLICY_ANNOTATION,
    OPT_IN_RESOURCE,
    PLACEABLE_GATE,
    POLICY_REF_ANNOTATION,
    TRANSLATED_ANNOTATION,
    ZONE_ROTATION_ANNOTATION,
    ZONE_ROTATION_DECLARED,
    PlacementPolicySpec,
)
from ..engine import Exactness, Mirror
from ..engine.implied import add_to_spec, implied, remove_from_spec
from .translate import translate

KINDS = {"statefulset": "StatefulSet", "deployment": "Deployment"}
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass
class Change:
    """A workload after adopt or retire, and what the operator should know about it."""

    workload: dict[str, Any]
    mirrors: list[Mirror] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _template(workload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    template = workload.setdefault("spec", {}).setdefault("template", {})
    return template.setdefault("metadata", {}), template.setdefault("spec", {})


def _selector_labels(workload: dict[str, Any]) -> dict[str, str]:
    return dict(((workload.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})


def _take_out_previous(meta: dict[str, Any], pod_spec: dict[str, Any]) -> dict[str, Any]:
    """The spec without what an earlier adopt added and what an earlier retire merged in from
    translate (each recorded in its annotation, which goes too); nothing else of the template."""
    annotations = meta.get("annotations") or {}
    for key in (IMPLIED_ANNOTATION, TRANSLATED_ANNOTATION):
        previous = annotations.pop(key, None)
        if previous is None:
            continue
        try:
            pod_spec = remove_from_spec(pod_spec, json.loads(previous))
        except (ValueError, TypeError, AttributeError):
            continue
    return pod_spec


def adopt(
    workload: dict[str, Any],
    spec: PlacementPolicySpec,
    *,
    scheduler_name: str,
    policy_name: str | None = None,
    inline_policy: str | None = None,
    mode: str = "second-scheduler",
    node_pool: tuple[str, str] | None = None,
    rotation_declared: bool = False,
) -> Change:
    """The workload with the extender as its scheduler, its policy and the implied constraints.

    `mode` "second-scheduler" sets `schedulerName` (the extender's own kube-scheduler);
    "in-scheduler" requests the opt-in resource instead (the cluster's one kube-scheduler sends
    the pods that request it to the extender: docs/concepts/two-ways-to-run.md) and leaves
    `schedulerName`, unless it names the second scheduler (`scheduler_name`): then it becomes
    default-scheduler, which the stanza's kube-scheduler serves.

    `rotation_declared`: the set's ZoneRotation is committed beside it (adopt -f), so the template
    says so and the extender waits for that record instead of deciding one, whichever of the two
    a GitOps controller applies first. Otherwise an existing mark is kept (it is git's)."""
    kind = workload.get("kind", "")
    if kind not in KINDS.values():
        raise ValueError(f"adopt takes a StatefulSet or a Deployment, not {kind or 'an object without a kind'}")
    if (policy_name is None) == (inline_policy is None):
        raise ValueError("give the policy once: a PlacementPolicy name, or a policy file to inline")
    if spec.ordinalZones is not None and kind != "StatefulSet":
        raise ValueError("the policy sets ordinalZones, which places StatefulSet pods by ordinal: adopt a StatefulSet")
    out = copy.deepcopy(workload)
    meta, pod_spec = _template(out)
    pod_spec = _take_out_previous(meta, pod_spec)
    labels = _selector_labels(out)
    imp = implied(
        spec,
        group_labels=labels or None,
        shard_labels=labels if kind == "StatefulSet" and labels else None,
    )
    new_spec, added, conflicts = add_to_spec(pod_spec, imp)
    if node_pool is not None:
        new_spec = on_node_pool(new_spec, *node_pool)
    notes = list(conflicts)
    if mode == "in-scheduler":
        new_spec = with_placeable_gate(with_opt_in(new_spec, True), True)
        if new_spec.get("schedulerName") == scheduler_name:
            # Moving from second-scheduler mode: the second scheduler cannot place a pod that
            # requests the opt-in resource (no node has it; only the stanza's kube-scheduler
            # ignores it), so the rollout's first pod stayed Pending for good.
            new_spec["schedulerName"] = DEFAULT_SCHEDULER
            notes.append(
                f"schedulerName {scheduler_name} -> {DEFAULT_SCHEDULER}: in in-scheduler mode the cluster's own "
                "kube-scheduler (the one with the extenders stanza) places the pods"
            )
    else:
        new_spec = with_placeable_gate(with_opt_in(new_spec, False), False)
        new_spec["schedulerName"] = scheduler_name
    out["spec"]["template"]["spec"] = new_spec
    annotations = meta.setdefault("annotations", {})
    annotations.pop(INLINE_POLICY_ANNOTATION, None)
    annotations.pop(POLICY_REF_ANNOTATION, None)
    if policy_name is not None:
        annotations[POLICY_REF_ANNOTATION] = policy_name
    else:
        annotations[INLINE_POLICY_ANNOTATION] = inline_policy  # type: ignore[assignment]
    annotations[IMPLIED_ANNOTATION] = json.dumps(added, sort_keys=True, separators=(",", ":"))
    if rotation_declared:
        annotations[ZONE_ROTATION_ANNOTATION] = ZONE_ROTATION_DECLARED
    missing = [m for m in imp.mirrors if m.exactness is Exactness.NONE]
    if missing:
        notes.append(
            f"{len(missing)} rule(s) have no native mirror: an autoscaler cannot see them, and a pod they alone "
            "refuse waits for a node it will not add (docs/how-to/autoscalers.md)"
        )
    return Change(out, imp.mirrors, notes)


def retire(workload: dict[str, Any], spec: PlacementPolicySpec | None, *, translated: bool = True) -> Change:
    """The workload back on the native scheduler: adopt's additions and the gate out, the policy's
    closest native constraints in (unless `translated` is False, or there is no policy)."""
    out = copy.deepcopy(workload)
    meta, pod_spec = _template(out)
    pod_spec = _take_out_previous(meta, pod_spec)
    pod_spec = remove_from_spec(pod_spec, {})  # the gate, whoever put it there
    pod_spec = with_placeable_gate(with_opt_in(pod_spec, False), False)
    pod_spec["schedulerName"] = DEFAULT_SCHEDULER
    annotations = meta.get("annotations") or {}
    annotations.pop(ZONE_ROTATION_ANNOTATION, None)  # the native scheduler reads no record
    if "annotations" in meta and not annotations:
        del meta["annotations"]
    notes: list[str] = []
    if translated and spec is not None:
        labels = _selector_labels(out)
        replicas = (out.get("spec") or {}).get("replicas")
        result = translate(spec, match_labels=labels, group_size=replicas if isinstance(replicas, int) else None)
        pod_spec, merged, merge_notes = merge_fragment(pod_spec, result.fragment)
        if any(merged.values()):
            annotations = meta.setdefault("annotations", {})
            annotations[TRANSLATED_ANNOTATION] = json.dumps(merged, sort_keys=True, separators=(",", ":"))
        notes += merge_notes
        notes += [f"{g.rule}: {g.limitation} ({g.cost})" for g in result.gaps]
    out["spec"]["template"]["spec"] = pod_spec
    return Change(out, [], notes)


def on_node_pool(pod_spec: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """The pod spec kept to a dedicated node pool: nodeSelector key=value and a toleration of the
    pool's taint key=value:NoSchedule. On a managed cluster whose default scheduler cannot be
    configured, a pool only the extender's workloads use is the way to share no node with the
    default scheduler at all (docs/concepts/two-ways-to-run.md): taint the pool's nodes so nothing else
    lands there, and label them."""
    new = copy.deepcopy(pod_spec)
    new.setdefault("nodeSelector", {})[key] = value
    toleration = {"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}
    tolerations = new.setdefault("tolerations", [])
    if toleration not in tolerations:
        tolerations.append(toleration)
    return new


def with_opt_in(pod_spec: dict[str, Any], on: bool) -> dict[str, Any]:
    """The pod spec requesting one OPT_IN_RESOURCE in its first container (requests and limits,
    as an extended resource needs), or none in any container."""
    new = copy.deepcopy(pod_spec)
    containers = [c for c in new.get("containers") or [] if isinstance(c, dict)]
    for i, container in enumerate(containers):
        resources = container.setdefault("resources", {})
        for part in ("requests", "limits"):
            values = resources.setdefault(part, {})
            if on and i == 0:
                values[OPT_IN_RESOURCE] = "1"
            else:
                values.pop(OPT_IN_RESOURCE, None)
            if not values:
                del resources[part]
        if not resources:
            del container["resources"]
    return new


def with_placeable_gate(pod_spec: dict[str, Any], on: bool) -> dict[str, Any]:
    """The pod spec with the in-scheduler placeable gate (server/place_gate.py), or without it;
    every other gate kept as it is."""
    new = copy.deepcopy(pod_spec)
    gates = [
        g for g in new.get("schedulingGates") or [] if not (isinstance(g, dict) and g.get("name") == PLACEABLE_GATE)
    ]
    if on:
        gates.append({"name": PLACEABLE_GATE})
    if gates:
        new["schedulingGates"] = gates
    else:
        new.pop("schedulingGates", None)
    return new


def merge_fragment(
    pod_spec: dict[str, Any], fragment: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """translate's fragment merged into a pod spec: spreads appended unless the spec already has
    one on that key and mode (reported), required node terms ANDed in, the rest appended. Returns
    the new spec, what was added (remove_from_spec's shape, so adopt can take exactly that out),
    and the notes."""
    new = copy.deepcopy(pod_spec)
    notes = []
    merged: dict[str, Any] = {"topologySpreadConstraints": [], "nodeRequirements": [], "podAntiAffinity": []}
    spreads = new.setdefault("topologySpreadConstraints", [])
    for c in fragment.get("topologySpreadConstraints", []):
        clash = [
            s
            for s in spreads
            if s.get("topologyKey") == c["topologyKey"] and s.get("whenUnsatisfiable") == c["whenUnsatisfiable"]
        ]
        if clash:
            notes.append(f"kept the template's own {c['whenUnsatisfiable']} spread on {c['topologyKey']}")
            continue
        spreads.append(c)
        merged["topologySpreadConstraints"].append(c)
    if not spreads:
        del new["topologySpreadConstraints"]
    affinity = fragment.get("affinity") or {}
    node = affinity.get("nodeAffinity") or {}
    required = (node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    target = new.setdefault("affinity", {})
    if required:
        requirements = [r for term in required for r in term.get("matchExpressions", [])]
        terms = (
            target.setdefault("nodeAffinity", {})
            .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
            .setdefault("nodeSelectorTerms", [])
        )
        for term in terms or [terms.append({}) or terms[-1]]:
            expressions = term.setdefault("matchExpressions", [])
            expressions += [r for r in requirements if r not in expressions]
        merged["nodeRequirements"] = requirements
    for kind, field_name in (
        ("nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
        ("podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
        ("podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    ):
        items = (affinity.get(kind) or {}).get(field_name) or []
        if items:
            existing = target.setdefault(kind, {}).setdefault(field_name, [])
            fresh = [i for i in items if i not in existing]
            existing += fresh
            merged.setdefault(f"{kind}.{field_name}", []).extend(fresh)
    merged["podAntiAffinity"] = merged.pop("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", [])
    if not target:
        del new["affinity"]
    return new, merged, notes

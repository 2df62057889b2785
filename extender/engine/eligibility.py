"""Which nodes a pod could use at all: its nodeSelector, required node affinity and tolerations.

kube-scheduler's NodeAffinity and TaintToleration filters refuse those nodes before the extender
is asked, so the extender never judges them; but the rules reason about *domains* (the emptiest
zone of a spread, the zones of an ordinal rotation, where the pods still to come can go), and a
domain the pod can never use must not count as one it could fill (native PodTopologySpread's
nodeAffinityPolicy / nodeTaintsPolicy, engine/rules/spread.py).

`NodeConstraints` is the pod's part, read from its spec (state/objects.py); `NodeView` is a
hashable choice of which parts to apply. The topology memoises the nodes a view admits per
topology version (engine/topology.py), so a request never matches node by node.

Matching follows k8s.io/component-helpers/scheduling/corev1/nodeaffinity: the nodeSelector's
labels must all be equal; the required terms are ORed, each term's requirements ANDed, an empty
term matches nothing; NotIn and DoesNotExist match a node without the label; Gt/Lt compare
integers. A toleration tolerates a taint when the effects agree (an empty effect: all), the keys
agree (an empty key with Exists: all) and, with Equal (the default operator), the values agree.
Only NoSchedule and NoExecute taints refuse a pod (PreferNoSchedule only scores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..api.policy import HOSTNAME_KEY, LEGACY_ZONE_KEY, ZONE_KEY, NodeInclusionPolicy, PlacementPolicySpec, Spread
from .model import NodeInfo, Taint

NODE_NAME_FIELD = "metadata.name"


class Requirement(NamedTuple):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]
    field: bool = False  # matchFields (metadata.name), not matchExpressions


Term = tuple[Requirement, ...]


class Toleration(NamedTuple):
    key: str
    operator: str  # Equal (default) or Exists
    value: str
    effect: str  # "" means every effect


def _requirement_matches(req: Requirement, node: NodeInfo) -> bool:
    if req.field:
        value: str | None = node.name if req.key == NODE_NAME_FIELD else None
    else:
        value = node.labels.get(req.key)
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(req.values) == 1:
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False  # an operator kube-scheduler would refuse to parse: the term matches nothing


def _has_domain(node: NodeInfo, key: str) -> bool:
    """Whether the node has a domain for a (canonical) topology key, as the engine reads domains
    (topology.Topology.domain): either zone label names the zone, and the hostname key falls
    back to the node's name."""
    labels = node.labels
    if key in labels:
        return True
    if key in (ZONE_KEY, LEGACY_ZONE_KEY):
        return ZONE_KEY in labels or LEGACY_ZONE_KEY in labels
    return key == HOSTNAME_KEY


def _term_matches(term: Term, node: NodeInfo) -> bool:
    return bool(term) and all(_requirement_matches(r, node) for r in term)


def tolerates(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.operator == "Exists":
            if not t.key or t.key == taint.key:
                return True
        elif t.key == taint.key and t.value == taint.value:
            return True
    return False


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """The pod's own node constraints, in a hashable form (its signature: pods of one template share it)."""

    selector: tuple[tuple[str, str], ...] = ()  # spec.nodeSelector, sorted
    terms: tuple[Term, ...] | None = None  # required node affinity's nodeSelectorTerms; None: none given
    tolerations: tuple[Toleration, ...] = ()

    @property
    def narrows_affinity(self) -> bool:
        return bool(self.selector) or self.terms is not None

    def matches_affinity(self, node: NodeInfo) -> bool:
        labels = node.labels
        for key, value in self.selector:
            if labels.get(key) != value:
                return False
        if self.terms is not None:
            return any(_term_matches(t, node) for t in self.terms)
        return True

    def tolerates_taints(self, node: NodeInfo) -> bool:
        return all(tolerates(self.tolerations, taint) for taint in node.taints)

    def view(self, affinity: bool, taints: bool, required: tuple[str, ...] = ()) -> NodeView | None:
        """The view applying the parts asked for; None when it admits every node."""
        affinity = affinity and self.narrows_affinity
        if not affinity and not taints and not required:
            return None
        return NodeView(self if affinity else None, self.tolerations if taints else None, required)


NO_CONSTRAINTS = NodeConstraints()


@dataclass(frozen=True, slots=True)
class NodeView:
    """Which nodes count: those matching `affinity` (when set), tolerating every NoSchedule /
    NoExecute taint with `tolerations` (when set), and carrying every label in `required`.
    Hashable: the topology memoises by it."""

    affinity: NodeConstraints | None
    tolerations: tuple[Toleration, ...] | None
    required: tuple[str, ...] = ()  # label keys a node must carry (native: every spread's topologyKey)

    def admits(self, node: NodeInfo) -> bool:
        if self.required and not all(_has_domain(node, k) for k in self.required):
            return False
        if self.affinity is not None and not self.affinity.matches_affinity(node):
            return False
        if self.tolerations is not None and node.taints:
            return all(tolerates(self.tolerations, t) for t in node.taints)
        return True


def spread_view(spread: Spread, constraints: NodeConstraints | None, required: tuple[str, ...] = ()) -> NodeView | None:
    """The nodes a spread counts for a pod with `constraints` (None: the pod has none): what its
    nodeAffinityPolicy / nodeTaintsPolicy admit, as native PodTopologySpread's node inclusion
    policies, among nodes carrying every key in `required` (spread_required_keys). None when
    every node counts."""
    if constraints is None:
        constraints = NO_CONSTRAINTS
    return constraints.view(
        spread.nodeAffinityPolicy is NodeInclusionPolicy.HONOR,
        spread.nodeTaintsPolicy is NodeInclusionPolicy.HONOR,
        required,
    )


def spread_required_keys(spec: PlacementPolicySpec, spread: Spread) -> tuple[str, ...]:
    """The labels a node must carry for a spread to count it, as native PodTopologySpread does:
    with constraints on two or more keys, a node lacking any of them (among the constraints of
    the same kind: DoNotSchedule for filtering, ScheduleAnyway for scoring) counts neither as a
    domain nor for the pods on it (nodeLabelsMatchSpreadConstraints in PreFilter and PreScore).
    Empty for one key: a node without it has no domain of that key anyway."""
    kind = spread.whenUnsatisfiable
    keys = tuple(sorted({spec.canonical_key(s.topologyKey) for s in spec.spread if s.whenUnsatisfiable is kind}))
    return keys if len(keys) > 1 else ()

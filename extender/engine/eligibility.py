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

from ..policy import NodeInclusionPolicy, Spread
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

    def view(self, affinity: bool, taints: bool) -> NodeView | None:
        """The view applying the parts asked for; None when it admits every node."""
        affinity = affinity and self.narrows_affinity
        if not affinity and not taints:
            return None
        return NodeView(self if affinity else None, self.tolerations if taints else None)


NO_CONSTRAINTS = NodeConstraints()


@dataclass(frozen=True, slots=True)
class NodeView:
    """Which nodes count: those matching `affinity` (when set) and tolerating every NoSchedule /
    NoExecute taint with `tolerations` (when set). Hashable: the topology memoises by it."""

    affinity: NodeConstraints | None
    tolerations: tuple[Toleration, ...] | None

    def admits(self, node: NodeInfo) -> bool:
        if self.affinity is not None and not self.affinity.matches_affinity(node):
            return False
        if self.tolerations is not None and node.taints:
            return all(tolerates(self.tolerations, t) for t in node.taints)
        return True


def spread_view(spread: Spread, constraints: NodeConstraints | None) -> NodeView | None:
    """The nodes a spread counts for a pod with `constraints` (None: the pod has none): what its
    nodeAffinityPolicy / nodeTaintsPolicy admit, as native PodTopologySpread's node inclusion
    policies. None when every node counts."""
    if constraints is None:
        constraints = NO_CONSTRAINTS
    return constraints.view(
        spread.nodeAffinityPolicy is NodeInclusionPolicy.HONOR, spread.nodeTaintsPolicy is NodeInclusionPolicy.HONOR
    )

"""Plain data the engine reads and writes. No Kubernetes objects, no I/O."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import chain
from typing import Any, NamedTuple


class Taint(NamedTuple):
    key: str
    value: str
    effect: str  # NoSchedule or NoExecute: the only effects that keep a pod off a node


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    # Ready and not cordoned: may host the group's future pods (used by lookahead and domain counts).
    schedulable: bool = True
    # Its NoSchedule / NoExecute taints (engine/eligibility.py: a pod not tolerating one cannot use the node).
    taints: tuple[Taint, ...] = ()


class PlacementKind(StrEnum):
    BOUND = "bound"  # observed on a node through the watch
    TERMINATING = "terminating"  # still counts until it is gone
    COMMITTED = "committed"  # bound by us, not yet observed
    TENTATIVE = "tentative"  # chosen by prioritize, bind not yet called (async binding)


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str  # namespace/name
    node: str | None  # None for a tentative placement whose node is not known yet
    shard: str | None = None  # the owning StatefulSet: the unit of shard anti-affinity and ordinal zones
    ordinal: int | None = None
    kind: PlacementKind = PlacementKind.BOUND
    # For a tentative placement: the domains every node it may land on shares (e.g. its zone).
    domains: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class RecordedRotation:
    """A StatefulSet's recorded ordinal -> zone rotation (a ZoneRotation object): ordinal i's
    zone is order[i mod len(order)]; `adopted` are ordinals running outside it when it was
    decided (left where they are)."""

    name: str  # namespace/name of the record, for reasons
    order: tuple[str, ...]
    adopted: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodRequest:
    """The pod being scheduled."""

    key: str  # namespace/name
    shard: str | None = None
    ordinal: int | None = None
    volume_zones: frozenset[str] = frozenset()  # zones of PVs its claims are bound to
    # Its nodeSelector, required node affinity and tolerations (engine.eligibility.NodeConstraints):
    # which nodes it, and the group's pods still to come (one template), could use at all.
    constraints: Any = None
    # Its set's ZoneRotation is declared beside the set (api/policy.py ZONE_ROTATION_ANNOTATION):
    # never decided here; until the record exists the pod waits for it.
    rotation_declared: bool = False


_SIGNATURE_MASK = (1 << 64) - 1


def _placement_hash(p: Placement) -> int:
    """What the counts keep of a placement, hashed (of its kind, only whether it is leaving)."""
    return hash((p.node, p.shard, p.ordinal, p.kind is PlacementKind.TERMINATING))


@dataclass
class GroupCounts:
    """The group's pods on nodes, counted: everything the rules and the dead-end analysis read of
    them. The watch cache keeps one per group current, pod event by pod event, so a decision for
    a group of 30,000 reads per-node and per-StatefulSet counts instead of walking every pod."""

    pods: int = 0
    per_node: Counter[str] = field(default_factory=Counter)
    per_shard_node: dict[str, Counter[str]] = field(default_factory=dict)
    shards_on_node: Counter[str] = field(default_factory=Counter)  # node -> distinct StatefulSets with a pod there
    ordinal_pods: dict[str, Counter[int]] = field(default_factory=dict)  # shard -> ordinal -> pods
    ordinals: dict[str, list[int]] = field(default_factory=dict)  # shard -> its distinct ordinals, sorted
    ordinal_node: dict[str, dict[int, str]] = field(default_factory=dict)  # shard -> ordinal -> a node holding it
    # node -> the group's terminating pods on it (also in per_node): a spread does not count them,
    # a cap and anti-affinity do (docs/concepts/which-pods-count.md: a terminating pod holds its node
    # until it is gone, and no spread may be broken once it is gone)
    leaving: Counter[str] = field(default_factory=Counter)
    # The sum of the counted placements' hashes: equal sums (with equal `pods`) mean the same
    # counts, whatever events came and went in between (a pod update removes and adds its
    # placement again). Lets prioritize tell in O(1) that filter's decision still holds.
    signature: int = 0

    @classmethod
    def of(cls, placements: Iterable[Placement]) -> GroupCounts:
        """Count placements on nodes in bulk (a few passes in C): the first decision for a group
        of 150,000 placed pods builds its counts in a fraction of the decision deadline."""
        placed = [p for p in placements if p.node is not None]
        counts = cls(pods=len(placed), per_node=Counter(p.node for p in placed))
        counts.leaving = Counter(p.node for p in placed if p.kind is PlacementKind.TERMINATING)
        counts.signature = sum(map(_placement_hash, placed)) & _SIGNATURE_MASK
        by_shard: dict[str, list[Placement]] = {}
        for p in placed:
            if p.shard is not None:
                members = by_shard.get(p.shard)
                if members is None:
                    members = by_shard[p.shard] = []
                members.append(p)
        for shard, members in by_shard.items():
            counts.per_shard_node[shard] = nodes = Counter(p.node for p in members)
            counts.shards_on_node.update(nodes.keys())
            ordinals = Counter(p.ordinal for p in members if p.ordinal is not None)
            if ordinals:
                counts.ordinal_pods[shard] = ordinals
                counts.ordinals[shard] = sorted(ordinals)
                counts.ordinal_node[shard] = {p.ordinal: p.node for p in members if p.ordinal is not None}  # type: ignore[misc]
        return counts

    def add(self, p: Placement) -> None:
        """Count a placement on a node (bound or terminating)."""
        assert p.node is not None
        self.pods += 1
        self.signature = (self.signature + _placement_hash(p)) & _SIGNATURE_MASK
        self.per_node[p.node] += 1
        if p.kind is PlacementKind.TERMINATING:
            self.leaving[p.node] += 1
        if p.shard is None:
            return
        nodes = self.per_shard_node.get(p.shard)
        if nodes is None:
            nodes = self.per_shard_node[p.shard] = Counter()
        if not nodes[p.node]:
            self.shards_on_node[p.node] += 1
        nodes[p.node] += 1
        if p.ordinal is not None:
            pods = self.ordinal_pods.get(p.shard)
            if pods is None:
                pods = self.ordinal_pods[p.shard] = Counter()
                self.ordinals[p.shard], self.ordinal_node[p.shard] = [], {}
            if not pods[p.ordinal]:
                bisect.insort(self.ordinals[p.shard], p.ordinal)
            pods[p.ordinal] += 1
            self.ordinal_node[p.shard][p.ordinal] = p.node

    def remove(self, p: Placement) -> None:
        assert p.node is not None
        self.pods -= 1
        self.signature = (self.signature - _placement_hash(p)) & _SIGNATURE_MASK
        _decrement(self.per_node, p.node)
        if p.kind is PlacementKind.TERMINATING:
            _decrement(self.leaving, p.node)
        if p.shard is None:
            return
        nodes = self.per_shard_node[p.shard]
        if nodes[p.node] == 1:
            _decrement(self.shards_on_node, p.node)
        _decrement(nodes, p.node, self.per_shard_node, p.shard)
        if p.ordinal is not None:
            pods = self.ordinal_pods[p.shard]
            _decrement(pods, p.ordinal)
            if not pods[p.ordinal]:
                order = self.ordinals[p.shard]
                del order[bisect.bisect_left(order, p.ordinal)]
                del self.ordinal_node[p.shard][p.ordinal]
                if not order:
                    del self.ordinals[p.shard], self.ordinal_pods[p.shard], self.ordinal_node[p.shard]

    def present(self, shard: str, start: int, stop: int) -> list[int]:
        """The shard's distinct ordinals in [start, stop), sorted (a slice, by bisection)."""
        order = self.ordinals.get(shard, [])
        return order[bisect.bisect_left(order, start) : bisect.bisect_left(order, stop)]


def _decrement(counter: Counter, key: object, parent: dict | None = None, parent_key: object = None) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]
        if parent is not None and not counter:
            del parent[parent_key]


@dataclass(frozen=True)
class Snapshot:
    """Everything one decision needs; the watch cache builds it, tests write it by hand."""

    topology: Topology  # noqa: F821 - engine.topology.Topology, kept loose to avoid an import cycle
    placements: Sequence[Placement] = ()  # the group's pods, without the pod being scheduled
    group_size: int | None = None
    # StatefulSet -> replicas, for the group's StatefulSets: tells lookahead which pods are still to come.
    shard_replicas: Mapping[str, int] = field(default_factory=dict)
    # StatefulSet -> ordinal -> zone of the bound volume, for ordinal zones and the pods still to come.
    volume_zones: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    # The group's pods on nodes, already counted (the watch cache's incremental counts); when set,
    # `placements` lists only the pods in flight (tentative, committed, nominated).
    counted: GroupCounts | None = None
    # StatefulSet -> its recorded zone rotation, for ordinal zones (absent: not recorded yet).
    zone_rotations: Mapping[str, RecordedRotation] = field(default_factory=dict)

    @property
    def placed(self) -> int:
        """How many of the group's pods are placed or in flight."""
        return len(self.placements) + (self.counted.pods if self.counted is not None else 0)

    # What the engine reads of the placed pods: the kept counts plus a walk over `placements`
    # (all of them without counts, only the few in flight with them).
    def node_pods(self) -> Counter[str]:
        """Node -> the group's pods on it (a fresh Counter the caller may change)."""
        pods = Counter(self.counted.per_node) if self.counted is not None else Counter()
        pods.update(p.node for p in self.placements if p.node is not None)
        return pods

    def leaving_pods(self) -> Counter[str]:
        """Node -> the group's terminating pods on it (counted in node_pods too)."""
        pods = Counter(self.counted.leaving) if self.counted is not None else Counter()
        pods.update(p.node for p in self.placements if p.node is not None and p.kind is PlacementKind.TERMINATING)
        return pods

    def shard_node_pods(self, shard: str) -> Counter[str]:
        """Node -> pods of one StatefulSet on it."""
        pods = Counter(self.counted.per_shard_node.get(shard, ())) if self.counted is not None else Counter()
        pods.update(p.node for p in self.placements if p.node is not None and p.shard == shard)
        return pods

    def shard_nodes(self) -> Iterable[tuple[str, str, int]]:
        """(StatefulSet, node, pods) for every StatefulSet pod on a node."""
        if self.counted is not None:
            for shard, nodes in self.counted.per_shard_node.items():
                for node, n in nodes.items():
                    yield shard, node, n
        for p in self.placements:
            if p.node is not None and p.shard is not None:
                yield p.shard, p.node, 1

    def ordinal_nodes(self, shard: str) -> dict[int, str | Placement]:
        """Ordinal -> where that ordinal of the StatefulSet is (a node, or an in-flight Placement
        known only by its domains)."""
        out: dict[int, str | Placement] = (
            dict(self.counted.ordinal_node.get(shard, {})) if self.counted is not None else {}
        )
        for p in self.placements:
            if p.shard == shard and p.ordinal is not None:
                out[p.ordinal] = p.node if p.node is not None else p
        return out

    def ordinals(self) -> dict[str, set[int]]:
        """StatefulSet -> its ordinals placed or in flight (without counts: from the placements)."""
        out: dict[str, set[int]] = {}
        for p in self.placements:
            if p.shard is not None and p.ordinal is not None:
                out.setdefault(p.shard, set()).add(p.ordinal)
        return out

    def present(self, shard: str, start: int, stop: int, extra: set[int] | frozenset[int] = frozenset()) -> list[int]:
        """The StatefulSet's distinct ordinals in [start, stop) placed or in flight, sorted."""
        counted = self.counted.present(shard, start, stop) if self.counted is not None else []
        if not extra:
            return counted
        return sorted(set(counted) | {o for o in extra if start <= o < stop})


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # preemption on this node might help
    UNRESOLVABLE = "unresolvable"  # nothing on this node can change the answer


@dataclass(slots=True)
class Verdict:
    """One node's answer (Decision.verdicts: a per-node view for explain and tests)."""

    node: str
    outcome: Outcome = Outcome.PASS
    rule: str = ""
    reason: str = ""
    score: int = 0

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS


@dataclass(slots=True)
class CandidateClass:
    """Candidate nodes the rules cannot tell apart (one signature, see Context.signature), and
    their one answer. The rules read only what the signature holds, so they judge `node`, any
    one of them, and the answer holds for all: a 5,000-node cluster is judged as a handful."""

    node: NodeInfo  # a representative
    names: list[str]
    outcome: Outcome = Outcome.PASS
    rule: str = ""
    reason: str = ""
    score: int = 0

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    def refuse(self, outcome: Outcome, rule: str, reason: str) -> None:
        self.outcome, self.rule, self.reason = outcome, rule, reason


@dataclass
class Decision:
    """The answer for every candidate, class by class; `order` keeps the candidates as sent."""

    classes: list[CandidateClass]
    order: list[str] = field(default_factory=list)
    members: frozenset[str] | set[str] = frozenset()  # the names of `order`, as a set (empty: not kept)
    notes: list[str] = field(default_factory=list)  # pod-level facts (ideal zone, zone order, group size)
    context: Any = field(default=None, repr=False)  # the engine.context.Context it was made with, if any
    analysis: Any = None  # the engine.lookahead.Analysis of dead ends, when one ran

    @property
    def fell_back(self) -> bool:
        """True when the deadline cut the dead-end analysis short: the hard rules alone decided."""
        return self.analysis is not None and self.analysis.fell_back

    @classmethod
    def all_pass(cls, names: list[str]) -> Decision:
        """A pod without a policy: every node passes, scores neutral."""
        names = list(dict.fromkeys(names))
        return cls([CandidateClass(NodeInfo(names[0], {}), list(names))] if names else [], names)

    @property
    def verdicts(self) -> dict[str, Verdict]:
        """Node -> its verdict, in candidate order (a fresh view: O(nodes), for explain and tests)."""
        by_name = {n: c for c in self.classes for n in c.names}
        return {
            n: Verdict(n, c.outcome, c.rule, c.reason, c.score) for n in self.order if (c := by_name.get(n)) is not None
        }

    def verdict(self, name: str) -> Verdict | None:
        """One node's verdict (bind's re-check and preemption judge one node)."""
        for c in self.classes:
            if name in c.names:
                return Verdict(name, c.outcome, c.rule, c.reason, c.score)
        return None

    def passed(self) -> list[str]:
        """Names of the passing nodes, class by class (kube-scheduler reads them as a set)."""
        return list(chain.from_iterable(c.names for c in self.classes if c.passed))

    def rejection_summary(self) -> str:
        """One line for a pod no node could take: how many nodes each rule removed, with an
        example reason per rule. One line however many nodes the cluster has (the pod's Event,
        the gate's, plan's reason)."""
        by_rule: dict[str, list[str]] = {}
        count: Counter[str] = Counter()
        for k in self.classes:
            if not k.passed and k.names:
                rule = k.rule or "other"
                by_rule.setdefault(rule, []).append(k.reason)
                count[rule] += len(k.names)
        parts = [f"{n} by {rule} (e.g. {by_rule[rule][0]})" for rule, n in sorted(count.items(), key=lambda kv: -kv[1])]
        return f"0/{len(self.order)} nodes can take this pod under its placement policy: " + "; ".join(parts)

    def failures(self) -> tuple[dict[str, str], dict[str, str]]:
        """(failed, unresolvable): node -> reason, for the filter's answer (built class by class)."""
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for c in self.classes:
            if c.outcome is Outcome.FAIL:
                failed.update(dict.fromkeys(c.names, c.reason))
            elif c.outcome is Outcome.UNRESOLVABLE:
                unresolvable.update(dict.fromkeys(c.names, c.reason))
        return failed, unresolvable

    def scores(self) -> list[tuple[list[str], int]]:
        """(names, score) class by class: prioritize's answer (failing nodes 0: kube-scheduler
        asks only about feasible ones)."""
        return [(c.names, c.score) for c in self.classes if c.names]

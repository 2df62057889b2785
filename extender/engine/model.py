"""Plain data the engine reads and writes. No Kubernetes objects, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    # Ready and not cordoned: may host the group's future pods (used by lookahead and domain counts).
    schedulable: bool = True


class PlacementKind(str, Enum):
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
class PodRequest:
    """The pod being scheduled."""

    key: str  # namespace/name
    shard: str | None = None
    ordinal: int | None = None
    volume_zones: frozenset[str] = frozenset()  # zones of PVs its claims are bound to


@dataclass(frozen=True)
class Snapshot:
    """Everything one decision needs; the watch cache builds it, tests write it by hand."""

    topology: "Topology"  # noqa: F821 - engine.topology.Topology, kept loose to avoid an import cycle
    placements: Sequence[Placement] = ()  # the group's pods, without the pod being scheduled
    group_size: int | None = None
    # StatefulSet -> replicas, for the group's StatefulSets: tells lookahead which pods are still to come.
    shard_replicas: Mapping[str, int] = field(default_factory=dict)
    # StatefulSet -> ordinal -> zone of the bound volume, for ordinal zones and the pods still to come.
    volume_zones: Mapping[str, Mapping[int, str]] = field(default_factory=dict)


class Outcome(str, Enum):
    PASS = "pass"
    FAIL = "fail"  # preemption on this node might help
    UNRESOLVABLE = "unresolvable"  # nothing on this node can change the answer


@dataclass(slots=True)
class Verdict:
    """One node's answer. A failing verdict may be shared by every node of the same class (its
    `node` is then the first of them): read a node's name from the Decision's key."""

    node: str
    outcome: Outcome = Outcome.PASS
    rule: str = ""
    reason: str = ""
    score: int = 0

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS


@dataclass
class Decision:
    verdicts: dict[str, Verdict]
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
        return cls({name: Verdict(name) for name in names})

    def passed(self) -> list[str]:
        return [n for n, v in self.verdicts.items() if v.passed]

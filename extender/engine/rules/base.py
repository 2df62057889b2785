"""What a placement rule is: the parts every rule module fills in, and the vocabulary they share.

A rule module (caps.py, spread.py, ...) holds everything its rule means, and exports one `RULE`:

* `check(ctx, node)`: the filter. A Failure with a reason for `kubectl describe pod`, or None.
* `score(ctx, nodes)`: its preference, 0..1 per node (1 best), or None when it tells the nodes
  no apart; rules.SCORED orders the preferences (engine/scoring.py).
* `dead_end(ctx, terms)`: what it asks of the dead-end analysis (engine/lookahead.py), in that
  analysis's terms: caps, spreads, anti-affinity keys, whether zones matter.
* `translate(spec, out)`: its closest native constraints, and what retiring to them gives up.
* `narrow(ctx, passing)`: a last word on the classes of nodes that passed (fallback zone
  groups): refuses some (CandidateClass.refuse) and returns the rest.
* `imply(spec, out)`: the native constraints the rule implies, never stricter than the rule, so
  that autoscalers (which simulate the in-tree plugins only) see what the extender needs, and
  whether they say it exactly, as a relaxation, or not at all (extender/engine/implied.py).

The engine iterates over `rules.RULES`; no other module knows a rule's semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from ...api.policy import PlacementPolicySpec, WhenUnsatisfiable
from ..context import Context
from ..model import CandidateClass, NodeInfo, Outcome


@dataclass(frozen=True, slots=True)
class Failure:
    outcome: Outcome
    rule: str
    reason: str


def missing_label(rule: str, key: str) -> Failure:
    return Failure(Outcome.UNRESOLVABLE, rule, f"node has no {key} label")


class SpreadTerm(NamedTuple):
    """A DoNotSchedule spread as the dead-end analysis sees it."""

    key: str  # canonical topology key
    max_skew: int
    index: int  # in spec.spread: its eligible domains and counts come from Context.spread_domains/_counts
    missing: int = 0  # domains short of minDomains: they hold 0 pods and never grow


@dataclass
class DeadEndTerms:
    """The hard rules as the dead-end analysis models them (canonical topology keys)."""

    zone_needed: bool = False  # pods are restricted to zones (allowed zones, ordinal zones)
    caps: list[tuple[str, int]] = field(default_factory=list)  # (key, most pods of the group per domain)
    spreads: list[SpreadTerm] = field(default_factory=list)  # the DoNotSchedule spreads
    anti: list[str] = field(default_factory=list)  # keys of Required shard anti-affinity
    unknown: str | None = None  # set when the rules cannot be modelled: nothing is filtered


@dataclass(frozen=True)
class Gap:
    """What retiring to the native constraints gives up, rule by rule (translate)."""

    rule: str
    limitation: str
    cost: str


@dataclass
class NativeFragment:
    """The native constraints a policy translates to, built rule by rule (see translate.py)."""

    spec: PlacementPolicySpec
    size: int | None
    selector: dict[str, Any]
    shard_label: str
    hard: dict[str, dict[str, Any]] = field(default_factory=dict)  # topologyKey -> DoNotSchedule constraint
    soft: dict[str, dict[str, Any]] = field(default_factory=dict)  # topologyKey -> ScheduleAnyway constraint
    required_nodes: list[dict[str, Any]] = field(default_factory=list)  # nodeSelectorTerms
    preferred_nodes: list[dict[str, Any]] = field(default_factory=list)  # preferred node affinity terms
    required_pods: list[dict[str, Any]] = field(default_factory=list)  # required pod anti-affinity terms
    preferred_pods: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    def constraint(self, key: str, skew: int, mode: str, **refinements: Any) -> None:
        """A topology spread constraint; native allows one per key and mode, so the tighter skew
        wins. `refinements` (a spread's minDomains, nodeAffinityPolicy, nodeTaintsPolicy) are
        kept whichever skew wins; the group's matchLabelKeys go on every constraint."""
        table = self.hard if mode == WhenUnsatisfiable.DO_NOT_SCHEDULE else self.soft
        current = table.get(key)
        if current is None:
            current = table[key] = {
                "maxSkew": skew,
                "topologyKey": key,
                "whenUnsatisfiable": str(mode),
                "labelSelector": self.selector,
            }
            if self.spec.group.matchLabelKeys:
                current["matchLabelKeys"] = list(self.spec.group.matchLabelKeys)
        elif skew < current["maxSkew"]:
            current["maxSkew"] = skew
        current.update(refinements)

    def gap(self, rule: str, limitation: str, cost: str) -> None:
        self.gaps.append(Gap(rule, limitation, cost))


class Exactness(StrEnum):
    """How a rule's implied native constraint compares with the rule, node by node."""

    EXACT = "exact"  # refuses exactly the nodes the rule refuses
    RELAXED = "relaxed"  # refuses only nodes the rule refuses, but not all of them
    NONE = "none"  # no native constraint says it (an autoscaler cannot see the rule)


@dataclass(frozen=True)
class Mirror:
    """One rule's native mirror, as `kubectl placement adopt` and docs/how-to/autoscalers.md report it."""

    rule: str
    exactness: Exactness
    native: str  # what it becomes, or why nothing


# A minDomains no cluster reaches: the spread's global minimum then counts as 0, so maxSkew k
# bounds a domain's count itself (count + 1 - 0 <= k), which is a cap (int32, the API's type).
UNREACHABLE_MIN_DOMAINS = 2**31 - 1


@dataclass
class ImpliedFragment:
    """The native constraints a policy implies, built rule by rule (extender/engine/implied.py).

    Only hard constraints (a preference changes native scores, which would change placements) and
    only ones that refuse no node the rule accepts: the extender sees only the nodes the in-tree
    filters passed, so adding them changes none of its decisions.
    """

    spec: PlacementPolicySpec
    selector: dict[str, Any]  # the group's pods, as the extender counts them
    shard_selector: dict[str, Any] | None  # the pod's StatefulSet's pods within the group, when known
    spreads: dict[str, dict[str, Any]] = field(default_factory=dict)  # topologyKey -> DoNotSchedule constraint
    node_requirements: list[dict[str, Any]] = field(default_factory=list)  # ANDed into every nodeSelectorTerm
    pod_anti: list[dict[str, Any]] = field(default_factory=list)  # required pod anti-affinity terms
    per_pod_zone: bool = False  # ordinal zones: each pod's zone, set on the pod while it is gated
    mirrors: list[Mirror] = field(default_factory=list)

    def spread(self, key: str, skew: int, **refinements: Any) -> dict[str, Any]:
        constraint = {
            "maxSkew": skew,
            "topologyKey": key,
            "whenUnsatisfiable": str(WhenUnsatisfiable.DO_NOT_SCHEDULE),
            "labelSelector": self.selector,
            **refinements,
        }
        if self.spec.group.matchLabelKeys:
            constraint["matchLabelKeys"] = list(self.spec.group.matchLabelKeys)
        self.spreads[key] = constraint
        return constraint

    def anti(self, selector: dict[str, Any], key: str) -> None:
        term: dict[str, Any] = {"labelSelector": selector, "topologyKey": key}
        if self.spec.group.matchLabelKeys:
            term["matchLabelKeys"] = list(self.spec.group.matchLabelKeys)
        if term not in self.pod_anti:
            self.pod_anti.append(term)

    def mirror(self, rule: str, exactness: Exactness, native: str) -> None:
        self.mirrors.append(Mirror(rule, exactness, native))


Check = Callable[[Context, NodeInfo], Failure | None]
Score = Callable[[Context, Sequence[NodeInfo]], list[float] | None]
DeadEnd = Callable[[Context, DeadEndTerms], None]
Translate = Callable[[PlacementPolicySpec, NativeFragment], None]
Narrow = Callable[[Context, list[CandidateClass]], list[CandidateClass]]
Imply = Callable[[PlacementPolicySpec, ImpliedFragment], None]


@dataclass(frozen=True)
class Rule:
    name: str
    check: Check
    dead_end: DeadEnd
    translate: Translate
    imply: Imply
    score: Score | None = None
    narrow: Narrow | None = None

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

The engine iterates over `rules.RULES`; no other module knows a rule's semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...policy import PlacementPolicySpec, WhenUnsatisfiable
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


Check = Callable[[Context, NodeInfo], Failure | None]
Score = Callable[[Context, Sequence[NodeInfo]], list[float] | None]
DeadEnd = Callable[[Context, DeadEndTerms], None]
Translate = Callable[[PlacementPolicySpec, NativeFragment], None]
Narrow = Callable[[Context, list[CandidateClass]], list[CandidateClass]]


@dataclass(frozen=True)
class Rule:
    name: str
    check: Check
    dead_end: DeadEnd
    translate: Translate
    score: Score | None = None
    narrow: Narrow | None = None

"""The placement rules, one module each: its filter check, score part, dead-end terms and native
translation together (see base.py for the parts, and docs/contributing/adding-a-rule.md).

`RULES` is the filter's order: the cheapest and most final first (zones refuse a node whatever
the group does), so a node's reason names the rule a user must change.
"""

from __future__ import annotations

from ...api.policy import PlacementPolicySpec
from ..context import Context
from ..model import NodeInfo
from . import anti_affinity, caps, ordinal_zones, spread, zones
from .base import DeadEndTerms, Exactness, Failure, Gap, ImpliedFragment, Mirror, NativeFragment, Rule

RULES: tuple[Rule, ...] = (zones.RULE, ordinal_zones.RULE, caps.RULE, spread.RULE, anti_affinity.RULE)
# Translation keeps the native fragment's order: constraints from caps and spreads first, then
# what zones add to them (minDomains), then ordinal zones' own constraint.
TRANSLATION_ORDER: tuple[Rule, ...] = (caps.RULE, spread.RULE, zones.RULE, ordinal_zones.RULE, anti_affinity.RULE)
# The preferences, strongest first: a node better on an earlier one always scores at least as
# high as one better only on later ones (engine/scoring.py; docs/concepts/rules.md).
SCORED: tuple[Rule, ...] = (ordinal_zones.RULE, anti_affinity.RULE, spread.RULE, zones.RULE)
# Implication: spreads first, so a policy's own DoNotSchedule spread on a key takes it before a cap.
IMPLICATION_ORDER: tuple[Rule, ...] = (spread.RULE, caps.RULE, zones.RULE, ordinal_zones.RULE, anti_affinity.RULE)
NARROWING: tuple[Rule, ...] = tuple(r for r in RULES if r.narrow is not None)


def first_failure(ctx: Context, node: NodeInfo) -> Failure | None:
    for rule in RULES:
        failure = rule.check(ctx, node)
        if failure is not None:
            return failure
    return None


def all_failures(ctx: Context, node: NodeInfo) -> list[Failure]:
    """Every hard rule a node breaks (for explain)."""
    return [f for f in (rule.check(ctx, node) for rule in RULES) if f is not None]


def dead_end_terms(ctx: Context) -> DeadEndTerms:
    """The hard rules in the dead-end analysis's terms, each rule adding its own."""
    terms = DeadEndTerms()
    for rule in RULES:
        rule.dead_end(ctx, terms)
    return terms


def imply_rules(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """Each rule's implied native constraints (never stricter than the rule), added to `out`."""
    for rule in IMPLICATION_ORDER:
        rule.imply(spec, out)


def translate_rules(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """Each rule's closest native constraints, added to `out` in the fragment's order."""
    for rule in TRANSLATION_ORDER:
        rule.translate(spec, out)


__all__ = [
    "NARROWING",
    "RULES",
    "SCORED",
    "TRANSLATION_ORDER",
    "DeadEndTerms",
    "Exactness",
    "Failure",
    "Gap",
    "ImpliedFragment",
    "Mirror",
    "NativeFragment",
    "Rule",
    "all_failures",
    "dead_end_terms",
    "first_failure",
    "imply_rules",
    "translate_rules",
]

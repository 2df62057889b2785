"""Spread: even spread over a key, with the native PodTopologySpread meaning (seed 004's Even)."""

from __future__ import annotations

from ...policy import PlacementPolicySpec, WhenUnsatisfiable
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import DeadEndTerms, Failure, NativeFragment, Rule, missing_label

NAME = "spread"


def min_count(ctx: Context, key: str) -> int:
    """The emptiest eligible domain's group pod count (native PodTopologySpread's global minimum).

    Computed once per decision and key, from the group's (few) occupied domains, never by
    walking every node.
    """
    cached = ctx.min_counts.get(key)
    if cached is not None:
        return cached
    domains = ctx.eligible_domains(key)
    counts = ctx.counts[key]
    occupied = [c for d, c in counts.items() if c > 0 and d in domains]
    low = min(occupied) if domains and len(occupied) == len(domains) else 0
    ctx.min_counts[key] = low
    return low


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant, per DoNotSchedule spread on key K:

        skew = pods of the group in K(node) + 1 - min over eligible domains d of pods in d <= maxSkew

    Eligible domains are those of schedulable nodes in the permitted zones (min_count); an
    eligible domain with no pod makes the minimum 0.
    """
    for spread in ctx.spec.spread:
        if spread.whenUnsatisfiable is not WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        key = ctx.spec.canonical_key(spread.topologyKey)
        value = ctx.domain(node, key)
        if value is None:
            return missing_label(NAME, key)
        have = ctx.counts[key].get(value, 0)
        low = min_count(ctx, key)
        skew = have + 1 - low
        if skew > spread.maxSkew:
            return Failure(
                Outcome.FAIL,
                NAME,
                f"{ctx.where(key, value)} would hold {have + 1} of the group's pods while the emptiest domain "
                f"holds {low}: skew {skew} > maxSkew {spread.maxSkew}",
            )
    return None


def soft_keys(spec: PlacementPolicySpec) -> set[str]:
    """Keys of ScheduleAnyway spreads: the score's balance part weighs them double."""
    return {
        spec.canonical_key(s.topologyKey)
        for s in spec.spread
        if s.whenUnsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
    }


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """A hard spread is decided through its final counts (see lookahead: emptiest-first order)."""
    for s in ctx.spec.spread:
        if s.whenUnsatisfiable is WhenUnsatisfiable.DO_NOT_SCHEDULE:
            terms.spreads.append((ctx.spec.canonical_key(s.topologyKey), s.maxSkew))


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """One to one: a spread is a native topology spread constraint."""
    for s in spec.spread:
        out.constraint(spec.canonical_key(s.topologyKey), s.maxSkew, s.whenUnsatisfiable)


RULE = Rule(NAME, check, dead_end, translate)

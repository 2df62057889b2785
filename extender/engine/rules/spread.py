"""Spread: even spread over a key, with the native PodTopologySpread meaning (seed 004's Even)."""

from __future__ import annotations

from ...policy import NodeInclusionPolicy, PlacementPolicySpec, WhenUnsatisfiable
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import DeadEndTerms, Failure, NativeFragment, Rule, SpreadTerm, missing_label

NAME = "spread"


def minimum(ctx: Context, index: int) -> tuple[int, int]:
    """(global minimum, eligible domains) of one spread, as native PodTopologySpread computes them:
    the emptiest eligible domain's count of the group's pods, or 0 while fewer eligible domains
    than minDomains exist.

    Eligible domains are those of schedulable nodes in the permitted zones that the spread's
    nodeAffinityPolicy / nodeTaintsPolicy admit for this pod (Context.spread_domains, memoised
    per topology version and node view). Computed once per decision and spread, from the
    group's (few) occupied domains, never by walking every node.
    """
    cached = ctx.min_counts.get(index)
    if cached is not None:
        return cached
    domains = ctx.spread_domains(index)
    counts = ctx.spread_counts(index)
    occupied = [c for d, c in counts.items() if c > 0 and d in domains]
    low = min(occupied) if domains and len(occupied) == len(domains) else 0
    min_domains = ctx.spec.spread[index].minDomains
    if min_domains is not None and len(domains) < min_domains:
        low = 0
    ctx.min_counts[index] = result = (low, len(domains))
    return result


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant, per DoNotSchedule spread on key K:

        skew = pods of the group in K(node) + 1 - global minimum <= maxSkew

    where the global minimum is the emptiest eligible domain's count (an eligible domain with
    no pod makes it 0), and 0 while fewer than minDomains eligible domains exist. With
    nodeAffinityPolicy / nodeTaintsPolicy Honor, nodes the pod could not use count neither
    their domain nor their pods (see minimum and Context.spread_counts).
    """
    for index, spread, key in ctx.hard_spreads():
        value = ctx.domain(node, key)
        if value is None:
            return missing_label(NAME, key)
        have = ctx.spread_counts(index).get(value, 0)
        low, domains = minimum(ctx, index)
        skew = have + 1 - low
        if skew > spread.maxSkew:
            if spread.minDomains is not None and domains < spread.minDomains:
                return Failure(
                    Outcome.FAIL,
                    NAME,
                    f"{ctx.where(key, value)} would hold {have + 1} of the group's pods; only {domains} eligible "
                    f"{key} domain(s) exist, fewer than minDomains {spread.minDomains}, so the emptiest counts as 0: "
                    f"skew {skew} > maxSkew {spread.maxSkew}",
                )
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
    """A hard spread is decided through its final counts (see lookahead: emptiest-first order),
    over its own eligible domains and counts; domains missing below minDomains hold 0 for good."""
    for index, s, key in ctx.hard_spreads():
        domains = ctx.spread_domains(index)
        missing = max(0, s.minDomains - len(domains)) if s.minDomains is not None else 0
        terms.spreads.append(SpreadTerm(key, s.maxSkew, index, missing))


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """One to one: a spread is a native topology spread constraint, with its minDomains and node
    inclusion policies (written when given or when they differ from the native defaults, which
    are ours) and the group's matchLabelKeys (NativeFragment.constraint)."""
    for s in spec.spread:
        refinements: dict[str, object] = {}
        if s.minDomains is not None:
            refinements["minDomains"] = s.minDomains
        for name, native_default in (
            ("nodeAffinityPolicy", NodeInclusionPolicy.HONOR),
            ("nodeTaintsPolicy", NodeInclusionPolicy.IGNORE),
        ):
            value = getattr(s, name)
            if name in s.model_fields_set or value is not native_default:
                refinements[name] = str(value)
        out.constraint(spec.canonical_key(s.topologyKey), s.maxSkew, s.whenUnsatisfiable, **refinements)


RULE = Rule(NAME, check, dead_end, translate)

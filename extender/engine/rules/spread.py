"""Spread: even spread over a key, with the native PodTopologySpread meaning (Open Cluster Management's Even spread)."""

from __future__ import annotations

from collections.abc import Sequence

from ...api.policy import NodeInclusionPolicy, PlacementPolicySpec, Spread, WhenUnsatisfiable
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import DeadEndTerms, Exactness, Failure, ImpliedFragment, NativeFragment, Rule, SpreadTerm, missing_label

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
    """Keys of ScheduleAnyway spreads (scored by `score`, not by the balance heuristic)."""
    return {
        spec.canonical_key(s.topologyKey)
        for s in spec.spread
        if s.whenUnsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY
    }


def score(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float] | None:
    """ScheduleAnyway spreads, as native PodTopologySpread scores them: fewer of the group's pods
    in the node's domains is better, counting only the pods on nodes each spread's
    nodeAffinityPolicy / nodeTaintsPolicy admit (Honor, the default, leaves out nodes the pod's
    nodeSelector or required affinity excludes); a node lacking one of their keys scores lowest
    (native ignores it, which normalizes to 0)."""
    soft = [(i, ctx.spec.canonical_key(s.topologyKey)) for i, s in enumerate(ctx.spec.spread)]
    soft = [(i, key) for i, key in soft if ctx.spec.spread[i].whenUnsatisfiable is WhenUnsatisfiable.SCHEDULE_ANYWAY]
    if not soft:
        return None
    loads: list[int | None] = []
    for node in nodes:
        load: int | None = 0
        for index, key in soft:
            value = ctx.domain(node, key)
            if value is None:
                load = None
                break
            load += ctx.spread_counts(index).get(value, 0)  # type: ignore[operator]
        loads.append(load)
    return scaled_lowest_best(loads)


def scaled_lowest_best(loads: Sequence[float | None]) -> list[float] | None:
    """Loads to 0..1, the lowest 1 and the highest 0; None (no domain) below every load. None
    when every node is alike."""
    known = [x for x in loads if x is not None]
    if not known:
        return None
    low, high = min(known), max(known)
    if high == low and len(known) == len(loads):
        return None
    span = (high - low) or 1.0
    return [-1.0 if x is None else (high - x) / span for x in loads]


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """A hard spread is decided through its final counts (see lookahead: emptiest-first order),
    over its own eligible domains and counts; domains missing below minDomains hold 0 for good."""
    for index, s, key in ctx.hard_spreads():
        domains = ctx.spread_domains(index)
        missing = max(0, s.minDomains - len(domains)) if s.minDomains is not None else 0
        terms.spreads.append(SpreadTerm(key, s.maxSkew, index, missing))


def _refinements(s: Spread) -> dict[str, object]:
    """minDomains and the node inclusion policies, written when given or when they differ from the
    native defaults (which are ours)."""
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
    return refinements


def imply(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """A DoNotSchedule spread is its native self: the engine applies native's skew formula to the
    same pods and domains (tests/unit/test_native_spread_conformance.py). Where the engine departs,
    it is the stricter one (it counts terminating pods; a node without a hostname label is its own
    domain), so the native constraint never refuses a node the rule accepts on nodes that carry
    the hostname label, as every kubelet sets it. ScheduleAnyway is a preference: not mirrored."""
    for s in spec.spread:
        key = spec.canonical_key(s.topologyKey)
        if s.whenUnsatisfiable != WhenUnsatisfiable.DO_NOT_SCHEDULE:
            continue
        current = out.spreads.get(key)
        if current is not None and current["maxSkew"] <= s.maxSkew:
            continue  # two spreads on one key: native takes one per key, the tighter is the policy's own
        out.spread(key, s.maxSkew, **_refinements(s))
        out.mirror(NAME, Exactness.EXACT, f"DoNotSchedule spread on {key}, maxSkew {s.maxSkew}: the same constraint")


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """One to one: a spread is a native topology spread constraint, with its minDomains and node
    inclusion policies (written when given or when they differ from the native defaults, which
    are ours) and the group's matchLabelKeys (NativeFragment.constraint)."""
    for s in spec.spread:
        out.constraint(spec.canonical_key(s.topologyKey), s.maxSkew, s.whenUnsatisfiable, **_refinements(s))


RULE = Rule(NAME, check, dead_end, translate, imply, score=score)

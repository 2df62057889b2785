"""Soft preferences, as a 0..10 score (MaxExtenderPriority) per feasible node.

The score prefers nodes that lower skew on every topology key the policy names (which also keeps
the most headroom under each cap, so later pods keep their choices), avoids sharing a domain with
a shard sibling where anti-affinity is preferred, and follows zone weights. Each part is scaled
to 0..1 over the candidates, then weighted; equal candidates get equal scores so kube-scheduler's
own scoring breaks the tie.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import replace
from itertools import repeat

from .context import Context
from .model import CandidateClass, Decision, NodeInfo
from .rules import SCORED, spread

MAX_SCORE = 10

# The balance part's weight; the rules' own parts carry theirs (anti-affinity 3, zone weights 2).
BALANCE_WEIGHT = 3.0


def _balance_loads(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float | None]:
    """The group's pods in each node's domains, over every key the rules use (soft spreads x2).

    A ScheduleAnyway spread counts as native PodTopologySpread scores it: only the pods on nodes
    its nodeAffinityPolicy / nodeTaintsPolicy admit (Honor, the default, leaves out nodes the pod's
    nodeSelector or required affinity excludes), and a candidate lacking one of the soft spreads'
    keys scores lowest (native ignores it, which normalizes to 0). None marks such a node."""
    soft = spread.soft_keys(ctx.spec)
    soft_counts = {
        ctx.spec.canonical_key(s.topologyKey): ctx.spread_counts(i)
        for i, s in enumerate(ctx.spec.spread)
        if ctx.spec.canonical_key(s.topologyKey) in soft
    }
    loads: list[float | None] = []
    for node in nodes:
        load: float | None = 0.0
        for key in ctx.balance_keys:
            value = ctx.domain(node, key)
            if value is None:
                if key in soft:
                    load = None
                    break
                continue
            if key in soft:
                load += 2.0 * soft_counts[key].get(value, 0)  # type: ignore[operator]
            else:
                load += ctx.counts[key].get(value, 0)  # type: ignore[operator]
        loads.append(load)
    return loads


def score_classes(ctx: Context, classes: Sequence[CandidateClass]) -> None:
    """Scores depend only on what a class's signature holds: each class is scored once, through
    its representative node, and the score holds for all its nodes."""
    if classes:
        for klass, score in zip(classes, _score_distinct(ctx, [k.node for k in classes]), strict=True):
            klass.score = score


def _score_distinct(ctx: Context, nodes: Sequence[NodeInfo]) -> list[int]:
    parts: list[tuple[float, list[float]]] = []
    loads = _balance_loads(ctx, nodes)
    known = [load for load in loads if load is not None]
    low, high = (min(known), max(known)) if known else (0.0, 0.0)
    if high > low or (known and len(known) < len(loads)):
        span = (high - low) or 1.0
        parts.append((BALANCE_WEIGHT, [0.0 if load is None else (high - load) / span for load in loads]))
    for rule in SCORED:  # each rule's own part: preferred anti-affinity, zone weights
        part = rule.score(ctx, nodes)  # type: ignore[misc]
        if part is not None:
            parts.append(part)
    if not parts:
        return [0] * len(nodes)  # nothing tells them apart: neutral, kube-scheduler decides
    total = sum(w for w, _ in parts)
    return [round(MAX_SCORE * sum(w * values[i] for w, values in parts) / total) for i in range(len(nodes))]


def break_tie(seed: str, decision: Decision) -> str | None:
    """Among equally good passing nodes, prefer one (+1, or the others -1 at the top of the range)
    and return it: the extender then knows where the pod is going before its binding shows, and
    reserves that node for the next pod's filter.

    Which node wins is a stable hash of (seed, node), the seed being the pod's uid, so a burst of
    one group's pods fans out over the equals instead of piling onto one. With the extender's
    weight above kube-scheduler's own score range (config/), the scheduler follows; if it does
    not, bind still enforces the rules. The winner leaves its class for a class of its own.
    """
    passed = [c for c in decision.classes if c.passed and c.names]
    if not passed:
        return None
    best = max(c.score for c in passed)
    top = [c for c in passed if c.score == best]
    if len(top) == 1 and len(top[0].names) == 1:
        return top[0].names[0]
    # crc32 of "seed/node", continued from the seed's part: the same value, computed in C per node
    prefix = zlib.crc32(f"{seed}/".encode("utf-8", "surrogatepass"))
    winners = [(_lowest(c.names, prefix), c) for c in top]
    (_, pick), home = min(winners, key=lambda w: w[0])
    if best < MAX_SCORE:
        score = best + 1
    else:
        score = best
        for c in top:
            c.score -= 1
    if len(home.names) == 1:
        home.score = score
    else:
        home.names.remove(pick)
        decision.classes.append(replace(home, names=[pick], score=score))
    return pick


def _lowest(names: list[str], prefix: int) -> tuple[int, str]:
    """(hash, name) of the name whose crc32 continued from `prefix` is lowest (first on a tie)."""
    try:
        hashes = list(map(zlib.crc32, map(str.encode, names), repeat(prefix)))
    except UnicodeEncodeError:  # a lone surrogate (the wire layer replaces them; a caller may not)
        hashes = [zlib.crc32(n.encode("utf-8", "surrogatepass"), prefix) for n in names]
    low = min(hashes)
    return low, names[hashes.index(low)]

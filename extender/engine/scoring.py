"""Soft preferences, as a 0..10 score (MaxExtenderPriority) per feasible node.

The preferences are ordered, strongest first, and compared lexicographically (docs/concepts/rules.md, "How
preferences are weighed"):

1. an adopted ordinal back in the zone it ran in (ordinal zones: nothing running moves);
2. preferred shard anti-affinity: a shard's pods apart when a split is free;
3. ScheduleAnyway spreads, with native PodTopologySpread's counting;
4. zone weights;
5. balance, the extender's own heuristic: fewer of the group's pods in the node's domains on
   every key the hard rules use, which keeps the most headroom under each cap so later pods keep
   their choices.

Invariant: a node better on an earlier preference never scores below one better only on later
ones. A weighted sum cannot promise that (with equal weights, a shard's free split and the
group's balance cancelled out and the tie-break chose: all three pods of a shard in one zone in
3 of 6 runs), so the nodes' preference tuples are ranked and the ranks spread over
0..10. Candidates alike on every preference get equal scores, so kube-scheduler's own scoring
breaks the tie.
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


def _balance(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float] | None:
    """The group's pods in each node's domains, over every key the rules use except those of
    ScheduleAnyway spreads (their own preference, spread.score): lowest best."""
    soft = spread.soft_keys(ctx.spec)
    keys = [k for k in ctx.balance_keys if k not in soft]
    loads = []
    for node in nodes:
        load = 0
        for key in keys:
            value = ctx.domain(node, key)
            if value is not None:
                load += ctx.counts[key].get(value, 0)
        loads.append(load)
    return spread.scaled_lowest_best(loads)


def score_classes(ctx: Context, classes: Sequence[CandidateClass]) -> None:
    """Scores depend only on what a class's signature holds: each class is scored once, through
    its representative node, and the score holds for all its nodes."""
    if classes:
        for klass, score in zip(classes, _score_distinct(ctx, [k.node for k in classes]), strict=True):
            klass.score = score


def _score_distinct(ctx: Context, nodes: Sequence[NodeInfo]) -> list[int]:
    parts = [rule.score(ctx, nodes) for rule in SCORED]  # type: ignore[misc]
    parts.append(_balance(ctx, nodes))
    parts = [p for p in parts if p is not None]
    if not parts:
        return [0] * len(nodes)  # nothing tells them apart: neutral, kube-scheduler decides
    preferences = [tuple(part[i] for part in parts) for i in range(len(nodes))]
    ranked = sorted(set(preferences))
    if len(ranked) == 1:
        return [0] * len(nodes)
    rank = {p: r for r, p in enumerate(ranked)}
    top = len(ranked) - 1
    return [round(MAX_SCORE * rank[p] / top) for p in preferences]


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

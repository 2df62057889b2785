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

from .context import Context
from .model import Decision, NodeInfo
from .rules import SCORED, spread

MAX_SCORE = 10

# The balance part's weight; the rules' own parts carry theirs (anti-affinity 3, zone weights 2).
BALANCE_WEIGHT = 3.0


def _balance_loads(ctx: Context, nodes: Sequence[NodeInfo]) -> list[float]:
    """The group's pods in each node's domains, over every key the rules use (soft spreads x2)."""
    soft = spread.soft_keys(ctx.spec)
    loads = []
    for node in nodes:
        load = 0.0
        for key in ctx.balance_keys:
            value = ctx.domain(node, key)
            if value is not None:
                load += ctx.counts[key].get(value, 0) * (2.0 if key in soft else 1.0)
        loads.append(load)
    return loads


def score_nodes(ctx: Context, nodes: Sequence[NodeInfo], signatures: dict[str, tuple] | None = None) -> list[int]:
    """Scores depend only on what a node's signature holds, so they are computed once per
    distinct signature (a handful) and spread over the nodes."""
    if not nodes:
        return []
    signatures = signatures or {}
    firsts: dict[tuple, int] = {}
    which: list[int] = []
    distinct: list[NodeInfo] = []
    for node in nodes:
        sig = signatures.get(node.name)
        if sig is None:
            sig = ctx.signature(node)
        at = firsts.get(sig)
        if at is None:
            at = firsts[sig] = len(distinct)
            distinct.append(node)
        which.append(at)
    scores = _score_distinct(ctx, distinct)
    return [scores[i] for i in which]


def _score_distinct(ctx: Context, nodes: Sequence[NodeInfo]) -> list[int]:
    parts: list[tuple[float, list[float]]] = []
    loads = _balance_loads(ctx, nodes)
    low, high = min(loads), max(loads)
    if high > low:
        parts.append((BALANCE_WEIGHT, [(high - load) / (high - low) for load in loads]))
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
    not, bind still enforces the rules.
    """
    passed = [v for v in decision.verdicts.values() if v.passed]
    if not passed:
        return None
    best = max(v.score for v in passed)
    top = [v for v in passed if v.score == best]
    if len(top) == 1:
        return top[0].node
    pick = min(top, key=lambda v: zlib.crc32(f"{seed}/{v.node}".encode("utf-8", "surrogatepass")))
    if best < MAX_SCORE:
        pick.score += 1
    else:
        for v in top:
            if v is not pick:
                v.score -= 1
    return pick.node

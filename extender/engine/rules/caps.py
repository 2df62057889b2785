"""Caps: at most so many of the group's pods in one domain (a node, a zone, a rack).

The NetEase Redis design's per-node "fewer than 1/3 of the cluster" and per-zone "fewer than 1/2" are caps with
a fraction of the group size; `max` is an absolute count.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from ...api.policy import Cap, PlacementPolicySpec
from ..context import Context
from ..model import NodeInfo, Outcome
from .base import (
    UNREACHABLE_MIN_DOMAINS,
    DeadEndTerms,
    Exactness,
    Failure,
    ImpliedFragment,
    NativeFragment,
    Rule,
    missing_label,
)

NAME = "caps"


def check(ctx: Context, node: NodeInfo) -> Failure | None:
    """Invariant, per cap on key K with limit L (max, or from fraction p/q of group size N:
    LessThan: L = ceil(p/q x N) - 1; AtMost: L = floor(p/q x N)):

        pods of the group in K(node) + 1 <= L

    A fractional cap without a known group size refuses every node, saying why.
    """
    for cap, key, limit in ctx.caps:
        if limit is None:
            return Failure(
                Outcome.UNRESOLVABLE,
                NAME,
                f"cap '{cap.describe(None)}' needs the group size, which is unknown: set group.size "
                "or make the group's StatefulSets visible to the extender",
            )
        value = ctx.domain(node, key)
        if value is None:
            return missing_label(NAME, key)
        have = ctx.counts[key].get(value, 0)
        if have + 1 > limit:
            return Failure(
                Outcome.FAIL,
                NAME,
                f"{ctx.where(key, value)} already holds {have} of the group's pods; "
                f"the cap ({cap.describe(ctx.group_size)}) allows {limit}",
            )
    return None


def dead_end(ctx: Context, terms: DeadEndTerms) -> None:
    """A cap bounds a domain's final count: an upper bound on the domain's edge in the flow."""
    for cap, key, limit in ctx.caps:
        if limit is None:
            terms.unknown = f"cap '{cap.describe(None)}' needs the group size"
            return
        terms.caps.append((key, limit))


def exact_form(spec: PlacementPolicySpec, cap: Cap, taken: Container[str]) -> tuple[str, int] | None:
    """The one native form that keeps the cap exactly, or None: ("anti", 1) for a limit of 1
    (required pod anti-affinity on its key over the group), ("spread", L) for a fixed limit L >= 2
    (a DoNotSchedule spread, maxSkew L, minDomains no cluster reaches, nodeAffinityPolicy Ignore),
    when the key is free (`taken`: keys whose one DoNotSchedule spread the policy's own spread
    holds). Fixed means an absolute max, or a fraction of an explicit group.size. What `adopt`
    writes (imply) and what `retire` writes (translate) both come from here."""
    limit = cap.limit(spec.group.size)
    key = spec.canonical_key(cap.topologyKey)
    if limit is None or limit <= 0:
        return None
    if limit == 1:
        return ("anti", 1)
    if key in taken:
        return None
    return ("spread", limit)


def translate(spec: PlacementPolicySpec, out: NativeFragment) -> None:
    """The exact form where there is one (exact_form, as adopt writes it); otherwise the NetEase Redis design's
    approximation, maxSkew = the limit, with what it gives up."""
    taken = {spec.canonical_key(s.topologyKey) for s in spec.spread if s.whenUnsatisfiable == "DoNotSchedule"}
    for cap in spec.caps:
        key = spec.canonical_key(cap.topologyKey)
        form = exact_form(spec, cap, taken)
        if form is not None and form[0] == "anti":
            term: dict[str, Any] = {"labelSelector": out.selector, "topologyKey": key}
            if spec.group.matchLabelKeys:
                term["matchLabelKeys"] = list(spec.group.matchLabelKeys)
            if term not in out.required_pods:
                out.required_pods.append(term)
            continue
        if form is not None:
            out.constraint(
                key, form[1], "DoNotSchedule", minDomains=UNREACHABLE_MIN_DOMAINS, nodeAffinityPolicy="Ignore"
            )
            continue
        limit = cap.limit(out.size)
        if limit is None:
            out.gap(
                NAME,
                f"'{cap.describe(None)}' needs the group size, which is unknown",
                "no constraint emitted for it: pass --size or set group.size",
            )
            continue
        out.constraint(key, limit, "DoNotSchedule")
        out.gap(
            NAME,
            f"'{cap.describe(out.size)}' becomes maxSkew {limit}, which bounds a domain's pods minus the emptiest "
            "domain's, not the count itself",
            "once every domain holds a pod, a domain can exceed the cap (the NetEase Redis design, conclusion 2); "
            "with fewer domains than needed the cap is not kept at all",
        )
    if any(c.fraction is not None for c in spec.caps) and spec.group.size is None and out.size is not None:
        out.gap(
            NAME,
            f"fractional caps become fixed maxSkew values for a group of {out.size}",
            "when the group grows or shrinks, every StatefulSet of the group must be updated with the "
            "recomputed maxSkew (the NetEase Redis operator does this on scaling)",
        )


def imply(spec: PlacementPolicySpec, out: ImpliedFragment) -> None:
    """Exact mirrors of a cap with a fixed limit L on key K (the check's `have + 1 <= L`):

    * L = 1: required pod anti-affinity on K over the group. A node is refused iff its K domain
      holds a pod of the group: have + 1 <= 1.
    * L >= 2: a DoNotSchedule spread on K with maxSkew L and a minDomains no cluster reaches.
      Native skew = matching pods in K(node) + 1 (the pod is in the group) - global minimum, and
      with fewer eligible domains than minDomains the global minimum is 0 (PodTopologySpread,
      KEP-3022), so the spread refuses iff have + 1 > L: the cap. nodeAffinityPolicy Ignore counts
      every node's pods, as the cap does. Native skips terminating pods, the cap counts them: the
      spread is then only looser, never stricter.

    A fraction of a group size that changes has no fixed native form (the limit moves with the
    size, and a stale one would be stricter than the rule): mirrored only with group.size set.
    """
    for cap in spec.caps:
        key = spec.canonical_key(cap.topologyKey)
        limit = cap.limit(spec.group.size)
        text = cap.describe(spec.group.size)
        form = exact_form(spec, cap, out.spreads.keys())
        if limit is None:
            out.mirror(
                NAME,
                Exactness.NONE,
                f"'{cap.describe(None)}' depends on the group size, which changes: no fixed native form "
                "(set group.size to get one)",
            )
        elif form is None and limit <= 0:
            out.mirror(NAME, Exactness.NONE, f"'{text}' allows no pod: no native constraint refuses every node")
        elif form is not None and form[0] == "anti":
            out.anti(out.selector, key)
            out.mirror(NAME, Exactness.EXACT, f"'{text}': required pod anti-affinity on {key} over the group")
        elif form is None:
            out.mirror(
                NAME,
                Exactness.NONE,
                f"'{text}': a pod carries one DoNotSchedule spread per key, and the policy's own spread on {key} "
                "takes it",
            )
        else:
            out.spread(key, limit, minDomains=UNREACHABLE_MIN_DOMAINS, nodeAffinityPolicy="Ignore")
            out.mirror(
                NAME,
                Exactness.EXACT,
                f"'{text}': DoNotSchedule spread on {key}, maxSkew {limit}, minDomains {UNREACHABLE_MIN_DOMAINS} "
                "(the global minimum is then 0, so maxSkew bounds the count itself)",
            )


RULE = Rule(NAME, check, dead_end, translate, imply)

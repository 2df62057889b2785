"""The engine's one entry point: a policy and a snapshot in, per-node verdicts and scores out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..api.policy import PlacementPolicySpec
from .context import Context
from .lookahead import Analysis, Certainty, dead_ends
from .model import CandidateClass, Decision, NodeInfo, Outcome, PodRequest, Snapshot
from .rules import NARROWING, Failure, all_failures, first_failure, ordinal_zones
from .scoring import score_classes
from .zone_order import ZoneOrder


def evaluate(
    spec: PlacementPolicySpec | None,
    pod: PodRequest,
    snap: Snapshot,
    candidates: Sequence[str] | Sequence[NodeInfo],
    *,
    dead_end_avoidance: bool = True,
    deadline: float | None = None,
) -> Decision:
    """Judge each candidate node for `pod`. Without a policy every node passes with a neutral score.

    Candidates are node names looked up in the snapshot's topology, or NodeInfo objects as
    kube-scheduler sent them (nodeCacheCapable: false). `deadline` (a time.monotonic() value)
    bounds the dead-end analysis: past it the hard rules alone decide, and the Decision says so.
    `dead_end_avoidance=False` skips the analysis (bind's re-check judges one node, not the group).

    The work is per class of candidates (nodes alike to the rules, see Context.signature), not
    per node: the rules, the dead-end analysis and the scores each see a handful of classes.
    """
    names = candidate_names(candidates)
    if spec is None:
        return Decision.all_pass(names)
    ctx = Context.build(spec, pod, snap)
    members = set(names)
    if len(members) != len(names):  # kube-scheduler never repeats a node; answer each once anyway
        names = list(dict.fromkeys(names))
    classes = classify(ctx, candidates, names, members)
    passing: list[CandidateClass] = []
    for klass in classes:
        if klass.rule == CACHE:
            continue
        failure = first_failure(ctx, klass.node)
        if failure is None:
            passing.append(klass)
        else:
            klass.refuse(failure.outcome, failure.rule, failure.reason)

    # Dead ends first: a node that would strand the rest of the group is not feasible, so a
    # fallback zone group whose every node is a dead end hands over to the next group.
    analysis: Analysis | None = None
    if (
        dead_end_avoidance
        and spec.deadEndAvoidance
        and sum(len(k.names) for k in passing) > 1
        and (snap.group_size is not None or snap.shard_replicas)
    ):
        analysis = dead_ends(ctx, passing, deadline)
        for i in analysis.dead:
            passing[i].refuse(
                Outcome.FAIL,
                "deadEndAvoidance",
                f"placing this pod here leaves no valid placement for the group's {analysis.to_come} remaining "
                "pod(s); other nodes keep it feasible",
            )
        passing = [k for k in passing if k.passed]

    for rule in NARROWING:  # fallback zone groups: after dead ends, so a group of dead ends hands over
        passing = rule.narrow(ctx, passing)  # type: ignore[misc]

    score_classes(ctx, passing)

    decision = Decision(classes, names, members, context=ctx, analysis=analysis)
    if ctx.zone_order is not None:
        decision.notes.append(
            f"ordinal {pod.ordinal} -> zone {ctx.ideal_zone} (order [{', '.join(ctx.zone_order.order)}]: "
            f"{ctx.zone_order.how})"
        )
    if snap.group_size is not None:
        decision.notes.append(f"group size {snap.group_size}, {snap.placed} placed or in flight")
    if analysis is not None:
        decision.notes.append(_describe(analysis))
    return decision


def hard_rule_reason(spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot, node: str) -> str | None:
    """Why `node` breaks a hard rule for `pod`, or None: the reason evaluate() gives `node` as the
    only candidate without dead-end avoidance (tests/unit/test_properties.py holds them equal).

    The bind's re-check judges one node: it needs no classes, scores or Decision, and with one
    candidate a fallback zone group's narrowing keeps it, so the first failing rule is the answer.
    """
    info = snap.topology.nodes.get(node)
    if info is None:
        return _NOT_CACHED
    failure = first_failure(Context.build(spec, pod, snap), info)
    return None if failure is None else failure.reason


def candidate_names(candidates: Sequence[str] | Sequence[NodeInfo]) -> list[str]:
    """The candidates' names (a fresh list). Candidates are all names or all NodeInfo objects,
    as kube-scheduler sends one or the other."""
    if not candidates or isinstance(candidates[0], str):
        return list(candidates)  # type: ignore[arg-type]
    return [c.name for c in candidates]  # type: ignore[union-attr]


CACHE = "cache"  # the rule name of a candidate the watch cache does not know yet
# The class table is used when there are at least this many candidates per base class; with
# fewer (a handful of candidates, or a label that makes every node its own class) node by node
# is cheaper. Either way the classes are the same (tests/unit/test_properties.py).
CANDIDATES_PER_CLASS = 4
_NOT_CACHED = "node is not in the extender's cache yet; retry shortly"


def classify(
    ctx: Context, candidates: Sequence[str] | Sequence[NodeInfo], names: list[str], members: set[str] | None = None
) -> list[CandidateClass]:
    """The candidates in classes of one signature each (plus one for nodes not in the cache),
    split by whether the group may use the node (schedulable, in a permitted zone, admitted by
    the pod's node constraints: what the dead-end analysis counts; see Context.partitions).

    Names are intersected, in C, with the topology's per-version table of base classes (nodes
    by their domains); only nodes that hold pods of the group (when a rule reads the node key)
    are looked at one by one. NodeInfo candidates, and few candidates among many classes, take
    the node-by-node path, which gives the same classes.
    """
    topology = ctx.snap.topology
    table = topology.classes(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
    if not names or not isinstance(candidates[0], str) or CANDIDATES_PER_CLASS * len(table.members) > len(names):
        return classify_each(ctx, candidates)
    wanted = members if members is not None else set(names)
    known = topology.names()
    out: list[CandidateClass] = []
    # Every node of the cache a candidate (kube-scheduler sends all that pass its own filters, and
    # percentageOfNodesToScore is 100): each piece below is then its own intersection.
    cached = known.issuperset(wanted)
    whole = cached and len(wanted) == len(known)
    if not cached:
        missing = wanted - known
        out.append(
            CandidateClass(
                NodeInfo(next(iter(missing)), {}),
                [n for n in names if n in missing],
                Outcome.FAIL,
                CACHE,
                _NOT_CACHED,
            )
        )
        wanted = wanted - missing
    nodes = topology.nodes
    parts = ctx.partitions()
    # Nodes holding the group's pods (where a rule reads the node key): their signature carries
    # their own counts, so they are grouped by (base class, counts, usable) in one tight loop.
    loaded: set[str] = set()
    if ctx.node_position is not None:
        key = ctx.node_key
        counts, shard_counts, leaving = ctx.counts[key], ctx.shard_counts[key], ctx.leaving[key]
        occupied = {d for d, n in counts.items() if n} | {d for d, n in shard_counts.items() if n}

        def held(domain: str) -> tuple[int, int, int]:
            return counts.get(domain, 0), shard_counts.get(domain, 0), leaving.get(domain, 0)

        by_key: dict[tuple, list[str]] = defaultdict(list)
        base_of = table.base_of
        if table.node_domain_is_name:  # the usual hostname label: a node's domain is its name (in C)
            loaded = wanted.intersection(occupied)
            if len(parts) == 1:
                part = parts[0]
                for name in loaded:
                    by_key[(base_of[name], held(name), name in part)].append(name)
            else:
                for name in loaded:
                    member = tuple(name in part for part in parts)
                    by_key[(base_of[name], held(name), member)].append(name)
        else:
            for domain in occupied:
                loaded.update(m for m in table.by_node_domain.get(domain, ()) if m in wanted)
            at = ctx.node_position
            index = topology.values_index(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
            for name in loaded:
                domain = index[name][at]
                member = tuple(name in part for part in parts)
                by_key[(base_of[name], held(domain), member)].append(name)
        out += [CandidateClass(nodes[group[0]], group) for group in by_key.values()]
    for pieces in topology.split_classes(tuple(ctx.keys), ctx.zone_key, ctx.node_key, tuple(parts)):
        for piece in pieces:
            plain = (piece - loaded if loaded else piece) if whole else piece & wanted
            if loaded and not whole:
                plain -= loaded
            if plain:
                out.append(CandidateClass(nodes[next(iter(plain))], list(plain)))
    return out


def classify_each(ctx: Context, candidates: Sequence[str] | Sequence[NodeInfo]) -> list[CandidateClass]:
    """Node by node: each candidate's signature, classes in the order first seen. A repeated
    name is judged once."""
    topology = ctx.snap.topology
    index = topology.values_index(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
    nodes = topology.nodes
    parts = ctx.partitions()
    by_signature: dict[tuple, CandidateClass] = {}
    missing: CandidateClass | None = None
    seen: set[str] = set()
    for candidate in candidates:
        if isinstance(candidate, NodeInfo):
            name, node, values = candidate.name, candidate, None
        else:
            name, node = candidate, nodes.get(candidate)
            values = index.get(candidate)
        if name in seen:
            continue
        seen.add(name)
        if node is None:
            if missing is None:
                missing = CandidateClass(NodeInfo(name, {}), [], Outcome.FAIL, CACHE, _NOT_CACHED)
            missing.names.append(name)
            continue
        sig = (ctx.signature(node, values), tuple(name in part for part in parts))
        klass = by_signature.get(sig)
        if klass is None:
            by_signature[sig] = CandidateClass(node, [name])
        else:
            klass.names.append(name)
    out = list(by_signature.values())
    return out + [missing] if missing is not None else out


def _describe(analysis: Analysis) -> str:
    """One line for explain: what the dead-end analysis decided, and how surely."""
    if analysis.certainty is Certainty.DEADLINE:
        return "dead-end avoidance skipped: the decision passed its deadline, the hard rules alone decided"
    if analysis.certainty is Certainty.UNKNOWN:
        return f"dead-end avoidance not applied: {analysis.why}"
    if analysis.certainty is Certainty.MOOT:
        return "dead-end avoidance: nothing to choose between (the candidates the group can use are one class of nodes)"
    found = (
        f"{analysis.stranded} candidate(s) would strand the rest"
        if analysis.stranded
        else "no candidate strands the rest"
    )
    how = "exact" if analysis.certainty is Certainty.EXACT else f"a relaxation ({analysis.why})"
    return f"dead-end avoidance: {analysis.to_come} pod(s) still to come; {found} ({how})"


# -- what the layers above read of a decision, without reaching into its context ------------------
def broken_rules(decision: Decision, node: NodeInfo) -> list[Failure]:
    """Every hard rule the node breaks for this decision's pod (explain lists them all)."""
    return all_failures(decision.context, node) if decision.context is not None else []


def zone_of(decision: Decision, node: NodeInfo) -> str | None:
    """The node's zone under the decision's policy (its zone key, with the legacy fallback)."""
    ctx = decision.context
    return ctx.domain(node, ctx.zone_key) if ctx is not None else None


def zone_order(decision: Decision) -> ZoneOrder | None:
    """The zone order the decision's pod follows: ordinal zones on and the pod a StatefulSet's
    (its ideal zone is order.zone_for(ordinal)); else None."""
    ctx = decision.context
    return ctx.zone_order if ctx is not None else None


def uncached_nodes(decision: Decision) -> list[str]:
    """The candidates refused only because the snapshot does not hold them yet."""
    return [name for klass in decision.classes if klass.rule == CACHE for name in klass.names]


def shared_domains(decision: Decision, names: list[str]) -> dict[str, str]:
    """The domains every node of `names` shares: what a reservation records while the pod's node
    is not known yet (kube-scheduler binds asynchronously). Read from the classes' representatives
    (a class shares every domain but the node's own), so it costs O(classes), not O(nodes)."""
    ctx = decision.context
    if ctx is None or not names:
        return {}
    wanted = set(names)
    touched = [k for k in decision.classes if not wanted.isdisjoint(k.names)]
    if any(k.rule == CACHE for k in touched):
        return {}
    shared = ctx.common_domains([k.node.name for k in touched])
    node_domain = shared.get(ctx.node_key)
    if node_domain is not None and len(wanted) > 1:
        table = ctx.snap.topology.classes(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
        if not wanted.issubset(table.by_node_domain.get(node_domain, ())):
            del shared[ctx.node_key]
    return shared


def passed_domains(decision: Decision) -> dict[str, str]:
    """shared_domains(decision, decision.passed()), read from the passing classes alone: what
    filter's reservation records. The general form hashes every passing name and walks every
    failing class looking for one (a fifth of a 5,000-node filter); these are the passing classes."""
    ctx = decision.context
    touched = [k for k in decision.classes if k.passed and k.names]
    if ctx is None or not touched:
        return {}
    shared = ctx.common_domains([k.node.name for k in touched])
    node_domain = shared.get(ctx.node_key)
    if node_domain is not None and sum(len(k.names) for k in touched) > 1:
        table = ctx.snap.topology.classes(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
        holders = set(table.by_node_domain.get(node_domain, ()))
        if not all(holders.issuperset(k.names) for k in touched):
            del shared[ctx.node_key]
    return shared


def ordinal_pod_zones(
    spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot
) -> tuple[frozenset[str] | None, ZoneOrder | None]:
    """The zones ordinal zones accept for this pod (its ordinal's zone under the set's recorded or
    derived order, and its volumes' zones), what the scheduling gate narrows its node affinity
    to, with the order they come from; None when the rule accepts no zone for it yet, or does
    not apply."""
    if spec.ordinalZones is None:
        return None, None
    ctx = Context.build(spec, pod, snap)
    return ordinal_zones.zones_for(ctx), ctx.zone_order

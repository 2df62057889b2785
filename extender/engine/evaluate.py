"""The engine's one entry point: a policy and a snapshot in, per-node verdicts and scores out."""

from __future__ import annotations

from collections.abc import Sequence

from ..policy import PlacementPolicySpec
from .context import Context
from .lookahead import Analysis, Certainty, dead_ends
from .model import Decision, NodeInfo, Outcome, PodRequest, Snapshot, Verdict
from .rules import NARROWING, Failure, all_failures, first_failure
from .scoring import score_nodes


def evaluate(
    spec: PlacementPolicySpec | None,
    pod: PodRequest,
    snap: Snapshot,
    candidates: Sequence[str | NodeInfo],
    *,
    dead_end_avoidance: bool = True,
    deadline: float | None = None,
) -> Decision:
    """Judge each candidate node for `pod`. Without a policy every node passes with a neutral score.

    Candidates are node names looked up in the snapshot's topology, or NodeInfo objects as
    kube-scheduler sent them (nodeCacheCapable: false). `deadline` (a time.monotonic() value)
    bounds the dead-end analysis: past it the hard rules alone decide, and the Decision says so.
    `dead_end_avoidance=False` skips the analysis (bind's re-check judges one node, not the group).
    """
    if spec is None:
        return Decision.all_pass([c if isinstance(c, str) else c.name for c in candidates])
    ctx = Context.build(spec, pod, snap)
    verdicts: dict[str, Verdict] = {}
    passing: list[NodeInfo] = []
    index = snap.topology.values_index(tuple(ctx.keys), ctx.zone_key, ctx.node_key)
    # signature -> the verdict of a failing class (one object shared by its nodes: failing
    # verdicts are never changed afterwards, and most nodes of a large cluster fail alike), or
    # None for a passing class (each passing node gets its own: scores are per node).
    known: dict[tuple, Verdict | None] = {}
    signatures: dict[str, tuple] = {}
    nodes = snap.topology.nodes
    for candidate in candidates:
        if isinstance(candidate, NodeInfo):
            name, node, values = candidate.name, candidate, None
        else:
            name, node = candidate, nodes.get(candidate)
            values = index.get(candidate)
        if node is None:
            verdicts[name] = Verdict(
                name, Outcome.FAIL, "cache", "node is not in the extender's cache yet; retry shortly"
            )
            continue
        sig = signatures[name] = ctx.signature(node, values)
        if sig in known:
            shared = known[sig]
        else:
            failure = first_failure(ctx, node)
            shared = known[sig] = (
                None if failure is None else Verdict(name, failure.outcome, failure.rule, failure.reason)
            )
        if shared is None:
            verdicts[name] = Verdict(name)
            passing.append(node)
        else:
            verdicts[name] = shared

    # Dead ends first: a node that would strand the rest of the group is not feasible, so a
    # fallback zone group whose every node is a dead end hands over to the next group.
    analysis: Analysis | None = None
    if (
        dead_end_avoidance
        and spec.deadEndAvoidance
        and len(passing) > 1
        and (snap.group_size is not None or snap.shard_replicas)
    ):
        analysis = dead_ends(ctx, passing, deadline, signatures)
        stranded = analysis.stranded
        for name, left in stranded.items():
            verdicts[name] = Verdict(
                name,
                Outcome.FAIL,
                "deadEndAvoidance",
                f"placing this pod here leaves no valid placement for the group's {left} remaining pod(s); "
                "other nodes keep it feasible",
            )
        passing = [n for n in passing if n.name not in stranded]

    for rule in NARROWING:  # fallback zone groups: after dead ends, so a group of dead ends hands over
        passing = rule.narrow(ctx, passing, verdicts)  # type: ignore[misc]

    for node, score in zip(passing, score_nodes(ctx, passing, signatures), strict=True):
        verdicts[node.name].score = score

    decision = Decision(verdicts, context=ctx, analysis=analysis)
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


def _describe(analysis: Analysis) -> str:
    """One line for explain: what the dead-end analysis decided, and how surely."""
    if analysis.certainty is Certainty.DEADLINE:
        return "dead-end avoidance skipped: the decision passed its deadline, the hard rules alone decided"
    if analysis.certainty is Certainty.UNKNOWN:
        return f"dead-end avoidance not applied: {analysis.why}"
    found = (
        f"{len(analysis.stranded)} candidate(s) would strand the rest"
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


def shared_domains(decision: Decision, names: list[str]) -> dict[str, str]:
    """The domains every node of `names` shares: what a reservation records while the pod's node
    is not known yet (kube-scheduler binds asynchronously)."""
    return decision.context.common_domains(names) if decision.context is not None else {}

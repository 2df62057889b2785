"""Planning: can a group's pods still to come all be placed, and what would it take?

The dead-end analysis (lookahead.py) answers, for one pod, which candidates keep the rest of its
group placeable. Planning asks the same of the group as a whole: the next pod to come may land on
some node the hard rules pass, and from there the rest fits. Growth is a snapshot with more
replicas; a drain is a snapshot without the drained nodes and the pods they held (those become
pods to come again, each with its ordinal's zone and volume). The answer carries the analysis's
certainty: exact where the analysis is exact, and where it is a relaxation a "no" is proven and a
"yes" is not (the same words as docs/concepts/dead-end-avoidance.md).

`nodes_to_add` searches the smallest multiset of new nodes, each a copy of a given shape (a zone's
nodes, with a new name), that makes the group fit: breadth first over sizes, so the first answer
is a smallest one.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..api.policy import HOSTNAME_KEY, PlacementPolicySpec
from .context import Context
from .evaluate import classify, evaluate
from .flow import DeadlineExceeded
from .lookahead import Certainty, _class_of, _Unknown, build_model, feasible_classes
from .model import NodeInfo, PodRequest, Snapshot
from .topology import Topology


@dataclass(frozen=True)
class Fit:
    """Whether the pods still to come can all be placed."""

    feasible: bool
    certainty: Certainty  # EXACT: proven either way; RELAXED: a "no" is proven, a "yes" is not
    to_come: int
    why: str = ""  # what refuses the next pod, when no node passes the hard rules


def group_fits(
    spec: PlacementPolicySpec,
    firsts: Sequence[PodRequest],
    snap: Snapshot,
    usable: Sequence[str],
    deadline: float | None = None,
) -> Fit:
    """Whether every pod still to come can be placed on `usable` (the nodes kube-scheduler's own
    filters pass for them), in some order. `firsts` are the pods that may come first (one per
    kind that differs to the rules: a StatefulSet, an ordinal's zone): a complete placement
    starts with one of them on a node the rules pass now, and the analysis decides the rest."""
    best: Fit | None = None
    for pod in firsts:
        fit = _fits_after(spec, pod, snap, usable, deadline)
        if fit.feasible and fit.certainty is Certainty.EXACT:
            return fit
        if best is None or (fit.feasible and not best.feasible):
            best = fit
    return best if best is not None else Fit(True, Certainty.EXACT, 0)


def _fits_after(
    spec: PlacementPolicySpec, pod: PodRequest, snap: Snapshot, usable: Sequence[str], deadline: float | None
) -> Fit:
    """Whether `pod` can land now and every other pod still to come after it."""
    decision = evaluate(spec, pod, snap, list(usable), dead_end_avoidance=False)
    passed = decision.passed()
    ctx = Context.build(spec, pod, snap)
    if not passed:
        failures = Counter(v.reason for v in decision.verdicts.values() if not v.passed and v.reason)
        why = "; ".join(f"{n} node(s): {reason}" for reason, n in failures.most_common(3)) or "no usable node"
        return Fit(False, Certainty.EXACT, 0, why)
    try:
        model = build_model(ctx)
    except _Unknown as err:
        return Fit(True, Certainty.UNKNOWN, 0, str(err))
    if model.to_come == 0:
        return Fit(True, Certainty.EXACT, 0)
    classes = classify(ctx, passed, list(passed))
    of = {_class_of(ctx, model, k.node.name) for k in classes}
    of.discard(None)
    try:
        feasible = feasible_classes(ctx, model, list(of), deadline)  # type: ignore[arg-type]
    except DeadlineExceeded:
        return Fit(True, Certainty.DEADLINE, model.to_come, "deadline passed")
    except _Unknown as err:
        return Fit(True, Certainty.UNKNOWN, model.to_come, str(err))
    certainty = Certainty.RELAXED if model.relaxed else Certainty.EXACT
    return Fit(bool(feasible), certainty, model.to_come, "; ".join(model.relaxed))


def without_nodes(snap: Snapshot, drained: set[str]) -> Snapshot:
    """The snapshot after a drain: the nodes gone, and the group's pods on them to come again."""
    nodes = [n for n in snap.topology.nodes.values() if n.name not in drained]
    placements = tuple(p for p in snap.placements if p.node not in drained)
    return replace(snap, topology=Topology(nodes), placements=placements)


def with_nodes(snap: Snapshot, added: Sequence[NodeInfo]) -> Snapshot:
    return replace(snap, topology=Topology([*snap.topology.nodes.values(), *added]))


def copy_of(shape: NodeInfo, name: str) -> NodeInfo:
    """A new node like `shape` (its labels and taints), named `name`."""
    labels = dict(shape.labels)
    labels[HOSTNAME_KEY] = name
    return NodeInfo(name, labels, True, shape.taints)


def nodes_to_add(
    spec: PlacementPolicySpec,
    firsts: Sequence[PodRequest],
    snap: Snapshot,
    usable: Sequence[str],
    shapes: Sequence[NodeInfo],
    *,
    most: int = 12,
    seconds: float = 10.0,
) -> tuple[list[NodeInfo], Fit] | None:
    """A smallest multiset of copies of `shapes` (one per domain to grow in) that makes the group
    fit, with the fit (its certainty: a relaxed "yes" is not proven); None if no multiset of at
    most `most` nodes does within `seconds`."""
    import time

    stop = time.monotonic() + seconds
    for size in range(1, most + 1):
        for combo in itertools.combinations_with_replacement(range(len(shapes)), size):
            seen: Counter[int] = Counter()
            added = []
            for i in combo:
                seen[i] += 1
                added.append(copy_of(shapes[i], f"new-{shapes[i].name}-{seen[i]}"))
            if time.monotonic() > stop:
                return None
            fit = group_fits(spec, firsts, with_nodes(snap, added), [*usable, *(n.name for n in added)], stop)
            if fit.feasible and fit.certainty in (Certainty.EXACT, Certainty.RELAXED):
                return added, fit
    return None


def ordinal_pods_to_try(request: PodRequest, missing: Sequence[int], most: int = 12) -> list[PodRequest]:
    """The new pods of a StatefulSet that may come first: one per missing ordinal (the first
    `most`), each its own kind under ordinal zones."""
    stem = request.key.rsplit("-", 1)[0]
    return [replace(request, key=f"{stem}-{o}", ordinal=o) for o in list(missing)[:most]]

"""Prioritize reuses filter's decision: kube-scheduler calls them back to back for a pod, with
prioritize given the nodes filter passed, so when nothing the decision read has changed the
scores come from the decision already made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from ..api.policy import PlacementPolicySpec
from ..engine import Decision, NodeInfo, PodRequest, Snapshot, candidate_names
from ..state.objects import PodRecord


class DecisionInputs:
    """What one decision read: the engine is a pure function of these and the candidates.

    Compared by prioritize to reuse filter's decision. Comparing the store's version instead
    missed four times in five in the e2e profile: it moves on every watch event of any object
    and every other pod's reservation. The mutable parts are compared by identity and version
    (the topology) or signature (the group's counts); the small ones by value.
    """

    __slots__ = ("spec", "request", "snap", "topology_version", "counts_signature")

    def __init__(self, spec: PlacementPolicySpec, request: PodRequest, snap: Snapshot) -> None:
        self.spec = spec
        self.request = request
        self.snap = snap
        self.topology_version = snap.topology.version
        counted = snap.counted
        self.counts_signature = None if counted is None else (counted.pods, counted.signature)

    def same_as(self, other: DecisionInputs) -> bool:
        a, b = self.snap, other.snap
        return (
            self.spec is other.spec
            and self.request == other.request
            and a.topology is b.topology
            and self.topology_version == other.topology_version
            and (a.counted is None) == (b.counted is None)
            and self.counts_signature == other.counts_signature
            and a.placements == b.placements
            and a.group_size == b.group_size
            and a.shard_replicas == b.shard_replicas
            and a.volume_zones == b.volume_zones
            and a.zone_rotations == b.zone_rotations
        )


class FilterMemo(NamedTuple):
    """filter's last decision: the pod's uid, what the decision read, the decision, the pod as
    filter read it, and the store's version after filter's own holds (an unchanged version
    skips reading the inputs again)."""

    uid: str
    inputs: DecisionInputs
    decision: Decision
    pod: PodRecord
    version: tuple[int, int]


def narrowed(decision: Decision, candidates: Sequence[str] | Sequence[NodeInfo]) -> Decision | None:
    """A decision narrowed to `candidates` (None if it did not judge them all): copies of the
    classes, as the tie-break changes scores and splits a class."""
    names = candidate_names(candidates)
    wanted = set(names)
    if len(wanted) != len(names):
        return None
    passing = [k for k in decision.classes if k.passed and k.names]
    if sum(len(k.names) for k in passing) == len(wanted) and all(wanted.issuperset(k.names) for k in passing):
        # The usual prioritize: exactly the nodes filter passed, so every other class is disjoint
        # from them (walking the failing classes to find that out was a tenth of a 5,000-node pair).
        classes = [replace(k, names=list(k.names)) for k in passing]
    elif wanted.issubset(decision.members):
        classes = []
        for k in decision.classes:
            if wanted.isdisjoint(k.names):
                continue
            kept = k.names if wanted.issuperset(k.names) else list(wanted.intersection(k.names))
            classes.append(replace(k, names=list(kept)))
    else:
        return None
    return Decision(classes, names, wanted, list(decision.notes), decision.context, decision.analysis)


def reused(
    memo: FilterMemo | None, pod: PodRecord, inputs: DecisionInputs, candidates: Sequence[str] | Sequence[NodeInfo]
) -> Decision | None:
    """Filter's decision for this pod, narrowed to these candidates, if nothing the decision
    read has changed since."""
    if memo is None or memo.uid != pod.uid or not memo.inputs.same_as(inputs):
        return None
    return narrowed(memo.decision, candidates)

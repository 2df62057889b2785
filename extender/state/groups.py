"""Per-group counts kept current pod event by pod event, so a decision never walks its group.

A group is what a policy counts together: the pods of one StatefulSet (the default), or the
pods a label selector picks in a namespace. The first decision for a group builds its index
from the store (one walk); from then on every pod event updates the indexes whose group the pod
belongs to, in O(1) each. A decision reads the group's bound pods as `GroupCounts` (per node, per
StatefulSet and node, ordinals) and walks only the members not on a node yet.

Indexes are kept for the groups decisions asked about recently (least recently used first out);
an evicted one is rebuilt by the next decision that needs it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..api.policy import LabelSelector, PlacementPolicySpec
from ..engine import GroupCounts, Placement
from .objects import PodRecord

MAX_GROUP_INDEXES = 256

# (namespace, "statefulset" | "selector", StatefulSet name | selector JSON, the pod's matchLabelKeys values)
GroupKey = tuple[str, str, str, tuple[tuple[str, str], ...]]


@dataclass
class GroupIndex:
    namespace: str
    shard: str | None  # the default group: the pods of this StatefulSet
    selector: LabelSelector | None
    split: dict[str, str] = field(default_factory=dict)  # group.matchLabelKeys: the values members share
    members: set[str] = field(default_factory=set)
    unplaced: set[str] = field(default_factory=set)  # members not on a node and not finished
    counts: GroupCounts = field(default_factory=GroupCounts)

    def admits(self, pod: PodRecord) -> bool:
        if pod.namespace != self.namespace:
            return False
        if self.split and any(pod.labels.get(k) != v for k, v in self.split.items()):
            return False
        if self.selector is None:
            return self.shard is not None and pod.shard == self.shard
        return self.selector.matches(pod.labels)

    def add(self, pod: PodRecord, placement: Placement | None) -> None:
        self.members.add(pod.uid)
        if placement is not None:
            self.counts.add(placement)
        elif not pod.finished:
            self.unplaced.add(pod.uid)

    def remove(self, uid: str, placement: Placement | None) -> None:
        if uid not in self.members:
            return
        self.members.discard(uid)
        self.unplaced.discard(uid)
        if placement is not None:
            self.counts.remove(placement)


def group_key(pod: PodRecord, spec: PlacementPolicySpec) -> GroupKey | None:
    """Which group a pod's policy counts it in; None for a default group without a StatefulSet.
    With group.matchLabelKeys, the pod's values for those keys split the group (one index each)."""
    selector = spec.group.selector
    split = tuple(sorted(spec.group.split_labels(pod.labels).items()))
    if selector is None:
        return (pod.namespace, "statefulset", pod.shard, split) if pod.shard is not None else None
    return (pod.namespace, "selector", selector.model_dump_json(), split)


class GroupIndexes:
    def __init__(self, limit: int = MAX_GROUP_INDEXES) -> None:
        self.limit = limit
        self._indexes: OrderedDict[GroupKey, GroupIndex] = OrderedDict()

    def __len__(self) -> int:
        return len(self._indexes)

    def get(
        self,
        key: GroupKey,
        pod: PodRecord,
        spec: PlacementPolicySpec,
        uids: Iterable[str],
        pods: Mapping[str, PodRecord],
        bound: Mapping[str, Placement],
    ) -> GroupIndex:
        """The group's index, built from the store's current pods the first time it is asked for."""
        index = self._indexes.get(key)
        if index is None:
            members = set(uids)
            index = GroupIndex(
                pod.namespace,
                pod.shard if spec.group.selector is None else None,
                spec.group.selector,
                dict(key[3]),
                members,
                {u for u in members if u not in bound and not pods[u].finished},
                GroupCounts.of(bound[u] for u in members if u in bound),
            )
            self._indexes[key] = index
            if len(self._indexes) > self.limit:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return index

    def pod_added(self, pod: PodRecord, placement: Placement | None) -> None:
        for index in self._indexes.values():
            if index.admits(pod):
                index.add(pod, placement)

    def pod_removed(self, pod: PodRecord, placement: Placement | None) -> None:
        for index in self._indexes.values():
            if index.namespace == pod.namespace:
                index.remove(pod.uid, placement)

    def clear(self) -> None:
        self._indexes.clear()

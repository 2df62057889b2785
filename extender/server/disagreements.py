"""A Warning event when a pod's own hard native constraints are not what its policy implies
(stricter, or counting another group): the native scheduler and autoscalers act on those, not on
the policy (extender/engine/implied.py says what a policy implies)."""

from __future__ import annotations

from collections import OrderedDict

from ..api.policy import PlacementPolicySpec
from ..engine.implied import pod_disagreements
from ..state.objects import PodRecord
from ..state.store import ClusterStore
from .ports import EventSink

PODS_REMEMBERED = 10_000


class DisagreementWarner:
    def __init__(self, store: ClusterStore, events: EventSink) -> None:
        self.store = store
        self.events = events
        self.checked: OrderedDict[str, None] = OrderedDict()  # pods already checked, oldest first

    def check(self, pod: PodRecord, spec: PlacementPolicySpec) -> None:
        """Once per pod (the sink also rate-limits); takes the store lock briefly."""
        if pod.uid in self.checked:
            return
        self.checked[pod.uid] = None
        if len(self.checked) > PODS_REMEMBERED:
            self.checked.popitem(last=False)
        with self.store.lock.held("disagreement"):
            sts = self.store.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
        found = pod_disagreements(pod, spec, sts.selector_labels if sts else None)
        if found:
            self.events.pod_event(pod, "NativeConstraintsDisagree", "; ".join(found))

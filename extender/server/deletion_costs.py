"""The scale-down controller (opt-in): pod-deletion-cost on the pods of policy groups that ReplicaSets own.

A ReplicaSet's controller deletes the pods with the lowest `controller.kubernetes.io/pod-deletion-cost`
first (after pending and not-ready ones). This loop keeps that cost on every running pod of a policy
group owned by a ReplicaSet (Deployments included), from the engine's scale-down order
(engine/scale_down.py: the most crowded domain first, so each step keeps the group's spreads, caps
and zone rules best). It writes only when a pod's cost changes, at most `rate` patches a second,
and never touches a StatefulSet's pods (ordinal zones keep them: the highest ordinals go first) or
a pod without a policy. It runs as its own process (`python -m extender deletion-costs`), with its
own ServiceAccount whose one write is `patch` on pods (deploy/optional/scale-down/).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Protocol

from ..api.policy import PlacementPolicySpec, PolicyError
from ..engine import deletion_costs, deletion_order
from ..state.groups import group_key
from ..state.objects import PodRecord
from ..state.store import ClusterStore
from .periodic import PeriodicPass

log = logging.getLogger(__name__)


class CostWriter(Protocol):
    def set_cost(self, pod: PodRecord, cost: int) -> None:
        """Write the pod's pod-deletion-cost annotation."""


def wanted_costs(store: ClusterStore) -> list[tuple[PodRecord, int]]:
    """(pod, cost) for every running ReplicaSet pod of a policy group whose cost is not that yet,
    the pods without any cost last. The order covers the group's running pods; only ReplicaSet pods
    are written. Under the store lock."""
    groups: dict[object, tuple[PlacementPolicySpec, list[PodRecord]]] = {}
    for pod in store.pods.values():
        if pod.replicaset is None or pod.node is None or pod.terminating or pod.finished:
            continue
        try:
            spec = store.resolve_policy(pod)
        except PolicyError:
            continue
        if spec is None or spec.group.selector is None:
            continue
        key = group_key(pod, spec)
        if key is not None and key not in groups:
            groups[key] = (spec, [])
        if key is not None:
            groups[key][1].append(pod)
    out: list[tuple[PodRecord, int]] = []
    for spec, members in groups.values():
        first = members[0]
        running = [store.pods[u] for u in store._group_uids(first, spec)]  # noqa: SLF001 - the store's own index
        where = {p.key: p.node for p in running if p.node is not None and not p.terminating and not p.finished}
        by_key = {p.key: p for p in members}
        costs = deletion_costs(deletion_order(spec, where, store.topology.nodes))  # type: ignore[arg-type]
        for pod_key, cost in costs.items():
            pod = by_key.get(pod_key)
            if pod is not None and pod.deletion_cost != str(cost):
                out.append((pod, cost))
    # Pods that have no cost yet go last: a pod without one is the visible sign that the controller
    # has not caught up with the group, so once every pod has one, the pass that saw them all has
    # written every other change first (a scale-down right after a scale-up then reads current costs,
    # not the order of the few pods an earlier pass saw bound).
    out.sort(key=lambda pod_cost: pod_cost[0].deletion_cost is None)
    return out


class DeletionCostController(PeriodicPass):
    name = "deletion-costs"

    def __init__(self, store: ClusterStore, writer: CostWriter, interval: float = 2.0, rate: float = 10.0) -> None:
        self.store = store
        self.writer = writer
        self.interval = interval
        self.rate = rate
        self.written = 0
        self._tokens = rate
        self._last = time.monotonic()

    def pass_once(self, now: float | None = None) -> int:
        """One pass: the costs that changed, written within the rate limit; returns how many."""
        now = time.monotonic() if now is None else now
        self._tokens = min(self.rate, self._tokens + (now - self._last) * self.rate)  # at most `rate` a second
        self._last = now
        with self.store.lock.held("deletion-costs"):
            if self.store.not_synced() is not None:
                return 0
            todo = wanted_costs(self.store)
        done = 0
        per_group: dict[str, int] = defaultdict(int)
        for pod, cost in todo:
            if self._tokens < 1:
                break
            try:
                self.writer.set_cost(pod, cost)
                self._tokens -= 1
                done += 1
                per_group[pod.namespace] += 1
            except Exception as err:  # noqa: BLE001 - the next pass tries again
                log.warning("could not set the deletion cost of %s: %s", pod.key, err)
        self.written += done
        if done:
            log.info("set pod-deletion-cost on %d pod(s) (%s)", done, dict(per_group))
        return done

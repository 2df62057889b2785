"""The cluster as the extender sees it: indexed slim objects kept current by the watch.

No I/O here: `apply`/`replace` take decoded watch events and list results (the watcher feeds
them), `decision_inputs` builds the engine's Snapshot for one pod. Every index a request needs
(pods by StatefulSet, by label, StatefulSets by namespace, claims by StatefulSet ordinal) is
maintained on update, so a request costs O(group + candidates), never O(cluster).
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable, Iterable, Set
from typing import Any

from ..api.policy import SCHEDULER_NAME, PlacementPolicySpec, PolicyError, parse_annotation, parse_spec
from ..engine import NodeInfo, Placement, PlacementKind, PodRequest, RecordedRotation, Snapshot, Topology
from ..limits import MAX_CACHE_STALENESS, MAX_GROUP_SIZE, MAX_POD_WAITERS
from .groups import GroupIndex, GroupIndexes, group_key
from .lock import TimedLock
from .objects import (
    ClaimRecord,
    NodeRecord,
    PodRecord,
    PolicyRecord,
    RotationRecord,
    StatefulSetRecord,
    VolumeRecord,
    parse_claim,
    parse_node_record,
    parse_pod,
    parse_policy,
    parse_rotation,
    parse_statefulset,
    parse_volume,
    split_ordinal,
)
from .reservations import Reservations

UNGATED_KEPT = 256  # arrivals outside the placeable gate kept for the log between two gate passes

KINDS = ("nodes", "pods", "statefulsets", "claims", "volumes", "policies", "rotations")
PARSERS = {
    "nodes": parse_node_record,
    "pods": parse_pod,
    "statefulsets": parse_statefulset,
    "claims": parse_claim,
    "volumes": parse_volume,
    "policies": parse_policy,
    "rotations": parse_rotation,
}
_EMPTY: frozenset[str] = frozenset()
_INLINE_SOURCE = "annotation"


class ClusterStore:
    def __init__(
        self,
        reservations: Reservations | None = None,
        clock: Callable[[], float] = time.time,
        scheduler_names: Iterable[str] = (SCHEDULER_NAME,),
    ) -> None:
        self.lock = TimedLock()
        # The schedulerNames whose pods are the extender's own (with the opted-in ones): see owns().
        self.scheduler_names = frozenset(scheduler_names)
        self.clock = clock
        self.topology = Topology()
        # Node -> allocatable resources, and node -> what the pods the watch shows there request
        # (every scheduler's, terminating ones included, finished ones not): the bind's resource
        # check when another scheduler shares the nodes (engine/resources.py).
        self.allocatable: dict[str, dict[str, int]] = {}
        self.node_requests: dict[str, dict[str, int]] = {}
        self.pods: dict[str, PodRecord] = {}
        self._pod_waiters: dict[str, threading.Event] = {}  # uid -> set when the watch shows the pod
        self._pod_uid: dict[tuple[str, str], str] = {}
        self._by_shard: dict[tuple[str, str], set[str]] = defaultdict(set)
        self._by_label: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self._by_namespace: dict[str, set[str]] = defaultdict(set)
        self._bound: dict[str, Placement] = {}  # uid -> the placement of a pod on a node, made once per event
        self.gated: set[str] = set()  # uids of pods held by the ordinal-zone gate (extender/server/gate_patch.py)
        self.held: set[str] = set()  # uids of pods held by the placeable gate (extender/server/place_gate.py)
        # Opted-in pods the watch showed arriving outside the placeable gate (PodRecord.outside_placeable_gate):
        # how many since start, and the latest, for the gate loop to log (extender/server/gate_lifter.py).
        self.ungated_arrivals = 0
        # uid -> how many filter requests named the pod (the verbs count them): that kube-scheduler
        # reached the extender about it, which the placeable gate waits for (place_gate.py)
        self.asks: dict[str, int] = {}
        # uid -> when (monotonic) the first of those requests came: how long a lifted pod took to
        # reach kube-scheduler's cycle (extender_placeable_gate_lift_seconds{stage="asked"})
        self.first_asked_at: dict[str, float] = {}
        # Set when the gate loop has work sooner than its period (a pod held, an opted-in pod bound
        # or gone): lifts follow binds, not a timer (extender/server/gate_lifter.py).
        self.gate_work = threading.Event()
        self.ungated_recent: deque[PodRecord] = deque(maxlen=UNGATED_KEPT)
        # PlacementPolicies created or edited since the first list: (namespace, name) -> generation
        self.policy_edits: dict[tuple[str, str], str] = {}
        self._policies_before: dict[tuple[str, str], PolicyRecord] = {}
        self.groups = GroupIndexes()  # per-group counts for decisions, kept current below
        self.statefulsets: dict[tuple[str, str], StatefulSetRecord] = {}
        self._sts_by_namespace: dict[str, set[str]] = defaultdict(set)
        self.claims: dict[tuple[str, str], ClaimRecord] = {}
        self._claims_by_prefix: dict[tuple[str, str], dict[int, str]] = defaultdict(dict)
        self.volumes: dict[str, VolumeRecord] = {}
        self.policies: dict[tuple[str, str], PolicyRecord] = {}
        self._policy_specs: dict[tuple[str, str], PlacementPolicySpec | PolicyError] = {}
        self._inline_specs: OrderedDict[str, PlacementPolicySpec | PolicyError] = OrderedDict()
        self.reservations = reservations if reservations is not None else Reservations()
        # kind -> its cache is complete now: listed, and no watch lost since (decisions wait for
        # every kind; see not_synced). `listed` only records the first list, for /readyz.
        self.synced: dict[str, bool] = {k: False for k in KINDS}
        self.listed: dict[str, bool] = {k: False for k in KINDS}
        self.list_errors: dict[str, str] = {}  # kind -> the last list/watch failure while unsynced
        self.started = clock()
        self.last_event: dict[str, float] = {}
        # kind -> when its list/watch stopped being connected (absent while connected): what
        # /readyz and extender_cache_stale_seconds report; the watcher keeps it.
        self.disconnected: dict[str, float] = {}
        self.policies_enabled = True  # False when the CRD is not installed: named policies then fail clearly
        # (namespace, StatefulSet) -> its ZoneRotation as the watch shows it, and the ones this
        # process decided whose object the watch has not shown yet (the watch's copy wins).
        self.rotations: dict[tuple[str, str], RotationRecord] = {}
        self.decided_rotations: dict[tuple[str, str], RotationRecord] = {}
        self.rotations_enabled = True  # False when the ZoneRotation CRD is not installed
        self.data_version = 0  # bumps on every event and list: part of the key of cached decisions
        # Why this replica may not decide although its cache is complete (None: it may): a standby
        # of several replicas, while another holds the Lease (extender/server/leader.py).
        self.standby: Callable[[], str | None] = lambda: None

    def owns(self, pod: PodRecord) -> bool:
        """The extender's own pod, judged from the watch's copy (PodRecord.placed_by)."""
        return pod.placed_by(self.scheduler_names)

    # ------------------------------------------------------------------ updates
    def apply(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED). Raises ObjectError for an unreadable object."""
        record = PARSERS[kind](obj)  # outside the lock: parsing is the costly part
        with self.lock.held("watch"):
            getattr(self, f"_put_{kind}")(event_type == "DELETED", record)
            if kind == "pods" and event_type == "ADDED" and record.outside_placeable_gate:
                self.ungated_arrivals += 1
                self.ungated_recent.append(record)
            self.last_event[kind] = self.clock()
            self.data_version += 1

    def replace(self, kind: str, objs: Iterable[dict[str, Any]]) -> None:
        """A full list: the kind's content becomes exactly `objs` (first sync and every relist)."""
        self.replace_records(kind, [PARSERS[kind](o) for o in objs])

    def replace_records(self, kind: str, records: Iterable[Any]) -> None:
        """As replace, with objects already parsed (the watcher parses page by page, so a
        150,000-pod list never sits in memory as decoded JSON)."""
        records = list(records)
        with self.lock.held("relist"):
            self._clear(kind)
            put = getattr(self, f"_put_{kind}")
            for record in records:
                put(False, record)
            if kind == "pods":  # a pod deleted while the watch was lost is not seen DELETED
                self.asks = {uid: n for uid, n in self.asks.items() if uid in self.pods}
                self.first_asked_at = {uid: t for uid, t in self.first_asked_at.items() if uid in self.pods}
            self._policies_before = {}
            self.synced[kind] = True
            self.listed[kind] = True
            self.list_errors.pop(kind, None)
            self.last_event[kind] = self.clock()
            self.data_version += 1

    @property
    def ready(self) -> bool:
        """Every kind listed once: what /readyz reports (with staleness). Decisions ask more of
        the cache: see not_synced."""
        return all(self.listed.values())

    def not_synced(self) -> str | None:
        """Why no decision may be made now, or None when every kind's cache is complete.

        Invariant: a filter, bind or preemption is decided only from a cache that holds every
        object of every kind it reads. Before a kind's first list completes, the cache is not
        merely stale but partial: a restarted extender would count an empty group and place a pod
        against its cap (6-20 pairs placed against their cap per restart with 2,000 unrelated pods making
        the pod list slow). After a lost watch the kind relists, and until then it may miss any
        number of events. And only one replica decides: a standby's complete cache is not enough."""
        standby = self.standby()
        if standby is not None:
            return standby
        waiting = [k for k in KINDS if not self.synced[k]]
        if not waiting:
            return None
        now = self.clock()
        first = [k for k in waiting if not self.listed[k]]
        if first:
            why = f"its first list of {', '.join(first)} has not completed ({now - self.started:.1f}s after start)"
        else:
            lost = min((self.disconnected.get(k, now) for k in waiting), default=now)
            why = f"its watch of {', '.join(waiting)} was lost {now - lost:.1f}s ago and the relist has not completed"
        errors = "; ".join(f"{k}: {self.list_errors[k]}" for k in waiting if k in self.list_errors)
        if errors:
            why += f" (last error: {errors[:300]})"
        return f"the placement extender's cache is not synced: {why}"

    def connection_lost(self, kind: str, error: str | None = None) -> None:
        """The kind's list or watch failed or broke: its cache may miss events from now on (the
        first loss counts; later failures of the same outage do not move it). No decision is
        made until the kind's relist completes (not_synced)."""
        self.disconnected.setdefault(kind, self.clock())
        self.synced[kind] = False
        if error:
            self.list_errors[kind] = error

    def connected(self, kind: str) -> None:
        """A list or watch of the kind reached the API server again."""
        self.disconnected.pop(kind, None)

    def staleness(self) -> dict[str, float]:
        """Seconds each disconnected kind has been disconnected (connected kinds are absent)."""
        now = self.clock()
        return {kind: max(0.0, now - since) for kind, since in dict(self.disconnected).items()}

    def stale(self, bound: float = MAX_CACHE_STALENESS) -> dict[str, float]:
        """The kinds disconnected for longer than `bound` seconds, with how long."""
        return {kind: seconds for kind, seconds in self.staleness().items() if seconds > bound}

    def _clear(self, kind: str) -> None:
        if kind == "nodes":
            for name in list(self.topology.nodes):
                self.topology.remove(name)
            self.allocatable.clear()
        elif kind == "pods":
            self.groups.clear()  # rebuilt from the new list by the next decision that asks
            for record in list(self.pods.values()):
                self._remove_pod(record)
        elif kind == "statefulsets":
            self.statefulsets.clear()
            self._sts_by_namespace.clear()
        elif kind == "claims":
            self.claims.clear()
            self._claims_by_prefix.clear()
        elif kind == "volumes":
            self.volumes.clear()
        elif kind == "policies":
            self._policies_before = dict(self.policies)  # a relist is no edit: compared against these
            self.policies.clear()
            self._policy_specs.clear()
        elif kind == "rotations":
            self.rotations.clear()

    def _put_nodes(self, deleted: bool, record: NodeRecord | NodeInfo) -> None:
        node = record.info if isinstance(record, NodeRecord) else record
        if deleted:
            self.topology.remove(node.name)
            self.allocatable.pop(node.name, None)
        else:
            self.topology.upsert(node)
            if isinstance(record, NodeRecord) and record.allocatable is not None:
                self.allocatable[node.name] = record.allocatable
            else:
                self.allocatable.pop(node.name, None)

    def _put_pods(self, deleted: bool, record: PodRecord) -> None:
        old = self.pods.get(record.uid)
        if old is not None and not deleted and _indexed_alike(old, record):
            # Most pod events change nothing the indexes hold (a kubelet's status, a condition):
            # the record is swapped in place of removing and adding it to every index again.
            if record.held:
                self.gate_work.set()
            self.pods[record.uid] = record
            if record.node is not None:
                self.reservations.release(record.uid)
            return
        if old is not None:
            self._remove_pod(old)
        if deleted:
            self.reservations.release(record.uid)
            self.asks.pop(record.uid, None)
            self.first_asked_at.pop(record.uid, None)
            if old is not None and old.opted_in:
                self.gate_work.set()
            return
        if record.held or (record.opted_in and record.node is not None and (old is None or old.node is None)):
            self.gate_work.set()  # a pod to hold, or a lift's slot freed by a bind: the gate loop's next pass now
        self.pods[record.uid] = record
        if self._pod_waiters:
            waiter = self._pod_waiters.get(record.uid)
            if waiter is not None:
                waiter.set()
        if record.gated:
            self.gated.add(record.uid)
        if record.held:
            self.held.add(record.uid)
        self._pod_uid[(record.namespace, record.name)] = record.uid
        self._by_namespace[record.namespace].add(record.uid)
        if record.shard is not None:
            self._by_shard[(record.namespace, record.shard)].add(record.uid)
        for k, v in record.labels.items():
            self._by_label[(record.namespace, k, v)].add(record.uid)
        if record.node is not None:
            self.reservations.release(record.uid)  # the watch shows it now: no stand-in needed
            if not record.finished:
                self._count_requests(record.node, record.requests, 1)
                kind = PlacementKind.TERMINATING if record.terminating else PlacementKind.BOUND
                self._bound[record.uid] = Placement(record.key, record.node, record.shard, record.ordinal, kind)
        self.groups.pod_added(record, self._bound.get(record.uid))

    def _count_requests(self, node: str, requests: tuple[tuple[str, int], ...], sign: int) -> None:
        used = self.node_requests.get(node)
        if used is None:
            used = self.node_requests[node] = {}
        for name, amount in requests:
            left = used.get(name, 0) + sign * amount
            if left:
                used[name] = left
            else:
                used.pop(name, None)
        if not used:
            del self.node_requests[node]

    def _remove_pod(self, record: PodRecord) -> None:
        if self.pods.pop(record.uid, None) is not None and record.node is not None and not record.finished:
            self._count_requests(record.node, record.requests, -1)
        self.gated.discard(record.uid)
        self.held.discard(record.uid)
        self.groups.pod_removed(record, self._bound.pop(record.uid, None))
        if self._pod_uid.get((record.namespace, record.name)) == record.uid:
            del self._pod_uid[(record.namespace, record.name)]
        _discard(self._by_namespace, record.namespace, record.uid)
        if record.shard is not None:
            _discard(self._by_shard, (record.namespace, record.shard), record.uid)
        for k, v in record.labels.items():
            _discard(self._by_label, (record.namespace, k, v), record.uid)

    def _put_statefulsets(self, deleted: bool, sts: StatefulSetRecord) -> None:
        key = (sts.namespace, sts.name)
        if deleted:
            self.statefulsets.pop(key, None)
            self._sts_by_namespace[sts.namespace].discard(sts.name)
            self.decided_rotations.pop(key, None)  # a set created again under the name decides anew
        else:
            self.statefulsets[key] = sts
            self._sts_by_namespace[sts.namespace].add(sts.name)

    def _put_claims(self, deleted: bool, claim: ClaimRecord) -> None:
        key = (claim.namespace, claim.name)
        split = split_ordinal(claim.name)  # read as a pod's ordinal is (objects.py)
        if deleted:
            self.claims.pop(key, None)
            if split is not None:
                self._claims_by_prefix[(claim.namespace, split[0])].pop(split[1], None)
        else:
            self.claims[key] = claim
            if split is not None:
                self._claims_by_prefix[(claim.namespace, split[0])][split[1]] = claim.name

    def _put_volumes(self, deleted: bool, volume: VolumeRecord) -> None:
        if deleted:
            self.volumes.pop(volume.name, None)
        else:
            self.volumes[volume.name] = volume

    def _put_policies(self, deleted: bool, policy: PolicyRecord) -> None:
        key = (policy.namespace, policy.name)
        self._policy_specs.pop(key, None)
        if deleted:
            self.policies.pop(key, None)
        else:
            old = self.policies.get(key) or self._policies_before.get(key)
            self.policies[key] = policy
            if self.listed.get("policies") and (old is None or old.spec != policy.spec):
                self.policy_edits[key] = policy.generation  # its waiting pods are nudged (server/nudge.py)

    def _put_rotations(self, deleted: bool, record: RotationRecord) -> None:
        key = (record.namespace, record.statefulset)
        if deleted:
            self.rotations.pop(key, None)
        else:
            self.rotations[key] = record
        self.decided_rotations.pop(key, None)  # the cluster's word from now on (a delete resets)

    def remember_rotation(self, record: RotationRecord) -> bool:
        """A rotation this process just decided, used until its object shows in the watch.
        False when the set already has one (recorded or decided): the first decision stands."""
        key = (record.namespace, record.statefulset)
        if key in self.rotations or key in self.decided_rotations:
            return False
        self.decided_rotations[key] = record
        self.data_version += 1
        return True

    def rotation(self, namespace: str, statefulset: str) -> RotationRecord | None:
        key = (namespace, statefulset)
        return self.rotations.get(key) or self.decided_rotations.get(key)

    def wait_for_pod(self, uid: str, timeout: float) -> bool:
        """Whether the watch shows pod `uid`, waiting up to `timeout` for it (without the lock).

        Why a bind waits for it: one watch delivers pod events in resourceVersion order, so once
        it has shown a pod, it has shown every pod event before the pod's creation, among them
        the deletion that made a controller create it. A bind re-checked then never counts a pod
        this one replaces (a drain with a 0 s grace period broke a spread 1 time in 10 when the
        bind trusted the reservation filter made before the watch had shown the deletion)."""
        with self.lock.held("bind-wait"):
            if uid in self.pods:
                return True
            waiter = self._pod_waiters.get(uid)
            if waiter is None:
                if len(self._pod_waiters) >= MAX_POD_WAITERS:
                    return False  # a flood of unknown pods: answered at once (limits.py)
                waiter = self._pod_waiters[uid] = threading.Event()
        try:
            return waiter.wait(timeout)
        finally:
            with self.lock.held("bind-wait"):
                if self._pod_waiters.get(uid) is waiter:
                    del self._pod_waiters[uid]

    # ------------------------------------------------------------------ lookups
    def pod_by_name(self, namespace: str, name: str) -> PodRecord | None:
        uid = self._pod_uid.get((namespace, name))
        return self.pods.get(uid) if uid else None

    def resolve_policy(self, pod: PodRecord) -> PlacementPolicySpec | None:
        """The pod's policy: a named PlacementPolicy, else the inline annotation, else none.

        Raises PolicyError with a message meant for `kubectl describe pod`, also for a valid
        policy that cannot act on this pod: group rules (caps, spread, shardAntiAffinity) on a pod
        whose group can only be itself (no StatefulSet owns it and no group.selector names its
        siblings, e.g. a Deployment's pod). Such a policy once placed a Deployment 4/2/0 under a
        zone spread while audit said "ok"; refusing it is what an invalid policy gets, and says
        the fix.
        """
        spec = self.policy_as_written(pod)
        if spec is not None:
            check_can_act(pod, spec)
        return spec

    def policy_as_written(self, pod: PodRecord) -> PlacementPolicySpec | None:
        """The pod's policy as written, valid or not for this pod (see resolve_policy)."""
        if pod.policy_ref is not None:
            key = (pod.namespace, pod.policy_ref)
            cached = self._policy_specs.get(key)
            if cached is None:
                record = self.policies.get(key)
                if record is None:
                    hint = "" if self.policies_enabled else " (the PlacementPolicy CRD is not installed)"
                    cached = PolicyError(f"PlacementPolicy {pod.namespace}/{pod.policy_ref} not found{hint}")
                    return _raise(cached)
                try:
                    cached = parse_spec(record.spec, f"PlacementPolicy {pod.namespace}/{pod.policy_ref}")
                except PolicyError as err:
                    cached = err
                self._policy_specs[key] = cached
            return _raise(cached)
        if pod.policy_annotation is not None:
            # Cached by the annotation's text, which sibling pods share: the error is kept without
            # a pod name and told to each pod with its own.
            cached = self._inline_specs.get(pod.policy_annotation)
            if cached is None:
                try:
                    cached = parse_annotation(pod.policy_annotation, _INLINE_SOURCE)
                except PolicyError as err:
                    cached = err
                self._inline_specs[pod.policy_annotation] = cached
                if len(self._inline_specs) > 256:
                    self._inline_specs.popitem(last=False)
            if isinstance(cached, PolicyError):
                raise PolicyError(str(cached).replace(_INLINE_SOURCE, f"{_INLINE_SOURCE} on pod {pod.key}", 1))
            return cached
        return None

    def _in_group(self, pod: PodRecord, spec: PlacementPolicySpec, other: PodRecord) -> bool:
        if other.namespace != pod.namespace:
            return False
        split = spec.group.split_labels(pod.labels)
        if any(other.labels.get(k) != v for k, v in split.items()):
            return False
        selector = spec.group.selector
        if selector is None:
            return pod.shard is not None and other.shard == pod.shard
        return selector.matches(other.labels)

    def _group_uids(self, pod: PodRecord, spec: PlacementPolicySpec) -> Set[str]:
        """The uids of the pod's group (read-only: it may be one of the store's own indexes).
        matchLabels are intersected in C; only matchExpressions are checked pod by pod. With
        group.matchLabelKeys, only pods with the pod's own values for those keys (native
        matchLabelKeys: e.g. one Deployment revision's pods, by pod-template-hash)."""
        uids = self._selected_uids(pod, spec)
        split = spec.group.split_labels(pod.labels)
        if not split:
            return uids
        sets = [self._by_label.get((pod.namespace, k, v), _EMPTY) for k, v in split.items()]
        return set(uids).intersection(*sets)

    def _selected_uids(self, pod: PodRecord, spec: PlacementPolicySpec) -> Set[str]:
        selector = spec.group.selector
        if selector is None:
            return self._by_shard.get((pod.namespace, pod.shard), _EMPTY) if pod.shard else _EMPTY
        if selector.matchLabels:
            sets = sorted(
                (self._by_label.get((pod.namespace, k, v), _EMPTY) for k, v in selector.matchLabels.items()), key=len
            )
            base: Set[str] = sets[0] if len(sets) == 1 else sets[0].intersection(*sets[1:])
        else:
            base = self._by_namespace.get(pod.namespace, _EMPTY)
        if not selector.matchExpressions:
            return base
        return {u for u in base if selector.matches(self.pods[u].labels)}

    def group_statefulsets(self, pod: PodRecord, spec: PlacementPolicySpec) -> list[StatefulSetRecord]:
        selector = spec.group.selector
        if selector is None:
            sts = self.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
            return [sts] if sts else []
        return sorted(
            (
                self.statefulsets[(pod.namespace, name)]
                for name in self._sts_by_namespace.get(pod.namespace, ())
                if selector.matches(self.statefulsets[(pod.namespace, name)].template_labels)
            ),
            key=lambda s: s.name,
        )

    def _volume_zone(self, namespace: str, claim: str) -> str | None:
        record = self.claims.get((namespace, claim))
        if record is None or record.volume is None:
            return None
        volume = self.volumes.get(record.volume)
        return volume.zone if volume else None

    def decision_inputs(
        self, pod: PodRecord, spec: PlacementPolicySpec, *, tentative: bool = True, counted: bool = True
    ) -> tuple[PodRequest, Snapshot]:
        """The engine's view for one pod. With tentative=False (bind), only placements that are
        bound or committed count: a tentative guess must not refuse a real decision. The group's
        pods on nodes come counted (state/groups.py); counted=False lists every placement instead,
        for a caller that edits the list (preemption's what-if).

        Raises PolicyError when the group's StatefulSets add up to more than MAX_GROUP_SIZE pods."""
        index = self._counted_group(pod, spec) if counted else None
        self.reservations.expire()
        placements = self._group_placements(pod, spec, index, tentative=tentative)
        statefulsets = self.group_statefulsets(pod, spec)
        size = self._group_size(pod, spec, statefulsets)
        volume_zones = self._volume_zones_by_ordinal(spec, statefulsets)
        request = PodRequest(
            pod.key, pod.shard, pod.ordinal, self._own_volume_zones(pod), pod.constraints, pod.rotation_declared
        )
        snapshot = Snapshot(
            zone_rotations=self._recorded_rotations(spec, statefulsets),
            topology=self.topology,
            placements=tuple(placements),
            group_size=size,
            shard_replicas={s.name: s.replicas for s in statefulsets},
            volume_zones=volume_zones,
            counted=index.counts if index is not None else None,
        )
        return request, snapshot

    def _counted_group(self, pod: PodRecord, spec: PlacementPolicySpec) -> GroupIndex | None:
        """The group's kept index, whose counts spare walking every member on a node; None when the
        group has no key or the pod itself is on a node (explain of a running pod), which must be
        counted without it, so its group is walked instead."""
        key = group_key(pod, spec)
        if key is None:
            return None
        index = self.groups.get(key, pod, spec, self._group_uids(pod, spec), self.pods, self._bound)
        if pod.uid in index.members and pod.uid in self._bound:
            return None
        return index

    def _group_placements(
        self, pod: PodRecord, spec: PlacementPolicySpec, index: GroupIndex | None, *, tentative: bool
    ) -> list[Placement]:
        """Where the rest of the pod's group is, or is about to be. With an index, the members on
        nodes are in its counts and only the others are listed; without one, every member on a node
        is listed too."""
        placements: list[Placement] = []
        if index is not None:
            unplaced: Iterable[str] = index.unplaced
        else:
            group = self._group_uids(pod, spec)
            bound = self._bound
            placements = [bound[u] for u in group if u in bound and u != pod.uid]
            unplaced = (
                [] if len(placements) == len(group) - (pod.uid in group) else [u for u in group if u not in bound]
            )
        placements += self._in_flight_placements(pod, unplaced, tentative=tentative)
        placements += self._placements_the_watch_no_longer_shows(pod, spec, tentative=tentative)
        return placements

    def _in_flight_placements(self, pod: PodRecord, unplaced: Iterable[str], *, tentative: bool) -> list[Placement]:
        """The group's pods not on a node yet, in flight or waiting: a reservation made for one
        counts (for bind only a committed one), and so does the node kube-scheduler nominated for
        it when a tentative view is asked for."""
        reservations = self.reservations
        placements: list[Placement] = []
        for uid in unplaced:
            if uid == pod.uid:
                continue
            other = self.pods[uid]
            if other.finished:
                continue
            reservation = reservations.peek(uid)
            if reservation is not None and (tentative or reservation.kind is PlacementKind.COMMITTED):
                placements.append(reservation.placement())
            elif tentative and other.nominated_node is not None:
                placements.append(
                    Placement(other.key, other.nominated_node, other.shard, other.ordinal, PlacementKind.TENTATIVE)
                )
        return placements

    def _placements_the_watch_no_longer_shows(
        self, pod: PodRecord, spec: PlacementPolicySpec, *, tentative: bool
    ) -> list[Placement]:
        """Reservations of the group's pods the watch no longer shows. A pod the watch shows is
        counted by _in_flight_placements if it is in the group (the group is read from the watch's
        records, never a reservation's older copy), so only the others are matched here: in a
        burst, every other group's reservations were, for every decision."""
        pods = self.pods
        placements: list[Placement] = []
        for reservation in self.reservations.peek_all():
            uid = reservation.pod.uid
            if uid in pods or not self._in_group(pod, spec, reservation.pod):
                continue
            if tentative or reservation.kind is PlacementKind.COMMITTED:
                placements.append(reservation.placement())
        return placements

    @staticmethod
    def _group_size(pod: PodRecord, spec: PlacementPolicySpec, statefulsets: list[StatefulSetRecord]) -> int | None:
        """group.size, or else the replicas of the group's StatefulSets: what a fraction cap is a
        fraction of. A size derived above MAX_GROUP_SIZE is refused with a PolicyError naming the
        sets: a group that large is a typo in spec.replicas, caught early with the field named."""
        size = spec.group.size
        if size is None and statefulsets:
            size = sum(s.replicas for s in statefulsets)
            if size > MAX_GROUP_SIZE:
                names = ", ".join(s.name for s in statefulsets[:3]) + (", ..." if len(statefulsets) > 3 else "")
                raise PolicyError(
                    f"invalid placement policy for pod {pod.key}: group.size, derived from the replicas of "
                    "StatefulSet(s) "
                    f"{names}, is {size:,}, above the limit of {MAX_GROUP_SIZE:,} pods; check spec.replicas, or set "
                    "group.size to the real group size"
                )
        return size

    def _volume_zones_by_ordinal(
        self, spec: PlacementPolicySpec, statefulsets: list[StatefulSetRecord]
    ) -> dict[str, dict[int, str]]:
        """For ordinal zones only: per StatefulSet, the zone of each ordinal's volume (the first
        claim template's that has one), so a pod goes back to where its data is."""
        volume_zones: dict[str, dict[int, str]] = {}
        if spec.ordinalZones is None:
            return volume_zones
        for sts in statefulsets:
            zones: dict[int, str] = {}
            for template in sts.claim_templates:
                for ordinal, claim in self._claims_by_prefix.get((sts.namespace, f"{template}-{sts.name}"), {}).items():
                    zone = self._volume_zone(sts.namespace, claim)
                    if zone is not None:
                        zones.setdefault(ordinal, zone)
            if zones:
                volume_zones[sts.name] = zones
        return volume_zones

    def _own_volume_zones(self, pod: PodRecord) -> frozenset[str]:
        """The zones of the pod's own bound volumes: nodes elsewhere cannot mount them."""
        return frozenset(z for z in (self._volume_zone(pod.namespace, c) for c in pod.claims) if z is not None)

    def _recorded_rotations(
        self, spec: PlacementPolicySpec, statefulsets: list[StatefulSetRecord]
    ) -> dict[str, RecordedRotation]:
        """For ordinal zones only: each StatefulSet's zone order as recorded at its first decision,
        so no restart, zone outage or adoption derives it again differently."""
        rotations: dict[str, RecordedRotation] = {}
        if spec.ordinalZones is None:
            return rotations
        for sts in statefulsets:
            found = self.rotation(sts.namespace, sts.name)
            if found is not None:
                rotations[sts.name] = RecordedRotation(f"{found.namespace}/{found.name}", found.order, found.adopted)
        return rotations

    @property
    def version(self) -> tuple[int, int]:
        """Changes whenever anything a decision reads may have changed."""
        return self.data_version, self.reservations.version

    def stats(self) -> dict[str, Any]:
        """Object counts and sync state, read without the lock (each a len() or one copy, atomic
        under the GIL): /readyz and /metrics answer while a decision holds the cache."""
        return {
            "nodes": len(self.topology.nodes),
            "pods": len(self.pods),
            "statefulsets": len(self.statefulsets),
            "claims": len(self.claims),
            "volumes": len(self.volumes),
            "policies": len(self.policies),
            "rotations": len(self.rotations),
            "reservations": self.reservations.counts(),
            "synced": dict(self.synced),
            "listed": dict(self.listed),
            "disconnected_seconds": {k: round(v, 1) for k, v in self.staleness().items()},
        }


def _indexed_alike(old: PodRecord, new: PodRecord) -> bool:
    """Whether every field an index, a count or a set of the store reads from a pod record is
    the same in both (so removing `old` and adding `new` would leave them as they are)."""
    return (
        old.node == new.node
        and old.finished == new.finished
        and old.terminating == new.terminating
        and old.labels == new.labels
        and old.gated == new.gated
        and old.held == new.held
        and old.requests == new.requests
        and old.name == new.name
        and old.namespace == new.namespace
        and old.shard == new.shard
        and old.ordinal == new.ordinal
    )


def _discard(index: dict, key: Any, uid: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(uid)
        if not members:
            del index[key]


def check_can_act(pod: PodRecord, spec: PlacementPolicySpec) -> None:
    """Raise PolicyError when the policy's group rules can never act on `pod` (resolve_policy):
    its group can only be the pod alone, or its group.selector does not select the pod itself
    (a typo there once switched every rule off: 4 pods of a cap of 1 on one node, audit ok)."""
    selector = spec.group.selector
    if selector is not None and spec.group_rules() and not selector.matches(pod.labels):
        rules = ", ".join(spec.group_rules())
        shown = json.dumps(selector.model_dump(exclude_defaults=True), sort_keys=True, separators=(",", ":"))
        labels = json.dumps(dict(sorted(pod.labels.items())), separators=(",", ":"))
        raise PolicyError(
            f"placement policy for pod {pod.key}: its group.selector {shown} does not select the pod itself "
            f"(labels {labels}), so its {rules} would count a group without it and could never hold for it; "
            "set group.selector to labels the workload's pods carry"
        )
    if pod.shard is None and selector is None and spec.group_rules():
        rules = ", ".join(spec.group_rules())
        raise PolicyError(
            f"placement policy for pod {pod.key}: its {rules} count a group, but no StatefulSet owns the pod and "
            "the policy has no group.selector, so its group is the pod alone and the rules can never act; set "
            "group.selector to the labels the workload's pods share (e.g. matchLabels: {app: <name>})"
        )


def _raise(value: PlacementPolicySpec | PolicyError) -> PlacementPolicySpec:
    if isinstance(value, PolicyError):
        raise value
    return value


__all__ = ["ClusterStore", "KINDS", "PARSERS"]


def waiting_for(store: ClusterStore, namespace: str, policy: str) -> list[PodRecord]:
    """The pods of `namespace` that name PlacementPolicy `policy` and wait for a node (not gated)."""
    out = []
    for uid in store._by_namespace.get(namespace, ()):  # noqa: SLF001 - the store's own index
        pod = store.pods[uid]
        if pod.policy_ref == policy and pod.node is None and not pod.gated and not pod.finished:
            out.append(pod)
    return out

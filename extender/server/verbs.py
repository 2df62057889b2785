"""The extender verbs: wire types in, engine decisions out, reservations kept in between.

This is the glue between the HTTP layer (which only parses and encodes) and the pure engine.
The Kubernetes side effects (Bindings, Events) go through the `Binder` and `EventSink`
interfaces, so the verbs are tested with plain fakes and served with the real client.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..api.policy import PlacementPolicySpec, PolicyError
from ..api.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    FailedNodeReasons,
    MetaPod,
    MetaVictims,
    Priorities,
)
from ..engine import (
    Decision,
    NodeInfo,
    PodRequest,
    Snapshot,
    ZoneOrder,
    break_tie,
    candidate_names,
    evaluate,
    ordinal_pod_zones,
    remedies,
    shared_domains,
    uncached_nodes,
    zone_left_empty,
    zone_order,
)
from ..engine.implied import implied, pod_disagreements
from ..limits import DEFAULT_DECISION_DEADLINE
from ..metrics import Metrics
from ..state.objects import ObjectError, PodRecord, RotationRecord, parse_node, parse_pod
from ..state.store import ClusterStore

log = logging.getLogger(__name__)

REMEDY_INTERVAL = 60.0  # seconds between computing what would free one Pending pod
REMEDY_SPACING = 1.0  # seconds between two such computations, whatever the pods: a bound on the lock time
# How long a node kube-scheduler names but the watch has not shown yet makes a pod no known node
# takes wait (an Error, retried in seconds) instead of being refused; past it the node counts as
# refused, so a node the watch never shows cannot hold a pod in retries (or hide it from autoscalers).
UNCACHED_NODE_GRACE = 30.0
UNCACHED_NODE_FORGET = 300.0  # a node not offered for this long is forgotten (a later miss starts a new grace)
UNCACHED_NODES_REMEMBERED = 4096


class BindError(Exception):
    pass


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding; raise BindError with a readable message on failure."""


class EventSink(Protocol):
    def pod_event(self, pod: PodRecord, reason: str, message: str) -> None:
        """Record a Warning event on the pod (deduplicated and rate limited by the sink)."""


class RecordWriter(Protocol):
    def zone_rotation(self, record: RotationRecord, statefulset_uid: str | None) -> None:
        """Create the StatefulSet's ZoneRotation object (asynchronously; an existing one wins)."""


@dataclass(frozen=True)
class GateAnswer:
    """For a pod held by the ordinal-zone gate: the node requirement to AND into its affinity
    before lifting the gate (None: lift it as it is), and why, for the log."""

    pod: PodRecord
    requirement: dict[str, object] | None
    why: str


class BadRequest(ValueError):
    """The request is malformed: answered with a 400 naming the problem."""


@dataclass
class Verbs:
    store: ClusterStore
    binder: Binder
    events: EventSink
    records: RecordWriter | None = None  # None: rotations are decided and kept in this process only
    decision_deadline: float = DEFAULT_DECISION_DEADLINE  # seconds of dead-end analysis per decision
    failed_node_reasons: FailedNodeReasons = FailedNodeReasons.WHEN_NONE_PASS
    metrics: Metrics = field(default_factory=Metrics)
    # filter's decision, reused by the prioritize call that follows it for the same pod when
    # nothing it read changed in between (kube-scheduler calls them back to back):
    # (uid, what the decision read, decision, the pod as filter read it, the store's version
    # after filter's own holds): an unchanged store version skips reading the inputs again.
    _last: tuple[str, _Inputs, Decision, PodRecord, tuple[int, int]] | None = field(default=None, repr=False)
    _warned: OrderedDict[str, None] = field(default_factory=OrderedDict, repr=False)  # pods checked for disagreement
    _remedies: OrderedDict[str, tuple[float, str]] = field(default_factory=OrderedDict, repr=False)
    _last_remedy: float = field(default=-1e9, repr=False)
    _owed: OrderedDict[str, tuple] = field(default_factory=OrderedDict, repr=False)  # pods owed a remedy
    _uncached: dict[str, tuple[float, float]] = field(default_factory=dict, repr=False)  # node -> first, last miss

    def __post_init__(self) -> None:
        self.store.lock.observe = lambda seconds, holder: self.metrics.lock_hold.observe(seconds, holder=holder)

    # ---------------------------------------------------------------- filter
    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        pod = _pod(args.Pod)
        candidates = self._candidates(args)
        log.debug("filter %s over %d nodes", pod.key, len(candidates))
        with self.store.lock.held("filter"):
            unsynced = self.store.not_synced()
            if unsynced is not None:
                return self._not_synced(pod, unsynced)
            try:
                spec = self.store.resolve_policy(pod)
                decision, inputs = self._decide(pod, spec, candidates)
            except PolicyError as err:
                return self._invalid(args, pod, err)
            if inputs is not None:
                self.store.reservations.hold(pod, decision.passed(), lambda names: shared_domains(decision, names))
                if spec is not None and spec.ordinalZones is not None:
                    self._record_rotation(pod, zone_order(decision))
                # After its own hold and record, which the decision does not read (a pod's own
                # reservation is never counted; a recorded rotation is the order it decided).
                self._last = (pod.uid, inputs, decision, pod, self.store.version)
            if self._uncached:
                self._forget_uncached()
            waiting = self._new_nodes(decision) if spec is not None and not decision.passed() else None
        if waiting:
            return self._not_synced(pod, f"node {waiting} is not in the extender's cache yet", "node_not_cached")
        passed = decision.passed()
        if passed and self.failed_node_reasons is FailedNodeReasons.WHEN_NONE_PASS:
            failed, unresolvable = {}, {}
        else:
            failed, unresolvable = decision.failures()
        for klass in decision.classes:
            if klass.names:
                self.metrics.node_verdicts.inc(len(klass.names), outcome=klass.outcome.value, rule=klass.rule or "-")
        result = "no_policy" if spec is None else ("feasible" if passed else "no_feasible_node")
        self.metrics.pod_decisions.inc(result=result)
        if spec is not None and pod.hard_native is not None:
            self._warn_disagreements(pod, spec)
        if result == "no_feasible_node" and decision.order:
            summary = rejection_summary(decision)
            self.events.pod_event(pod, "PlacementRejected", summary + self._remedy(pod, inputs, args, summary))
        return _filter_result(args, passed, failed, unresolvable)

    def _new_nodes(self, decision: Decision) -> str | None:
        """A node kube-scheduler offers that the watch has not shown yet, first missed less than
        UNCACHED_NODE_GRACE ago, when no node the extender knows takes the pod: the pod waits for
        the watch (an Error, retried from kube-scheduler's backoff queue) instead of being
        refused. A refusal would park it until kube-scheduler's next cluster event or its
        one-minute flush, and kube-scheduler's informer often shows a new node first: the very
        node that would free the pod (the e2e remedy scenario waited 60 s this way).

        A node's grace runs from its first miss. Its entry is dropped once the watch shows the
        node (a node deleted and created again later gets a new grace) or once kube-scheduler has
        not offered it for UNCACHED_NODE_FORGET (`_forget_uncached`); a node the watch never shows keeps its entry
        while it is offered, so past its grace it is refused like any other. With the table full,
        a node not in it gets no grace: the bound on memory never becomes endless retries.
        Called under the store lock."""
        names = uncached_nodes(decision)
        if not names:
            return None
        now = time.monotonic()
        table = self._uncached
        young = None
        for name in names:
            first, _ = table.get(name, (None, None))
            if first is None:
                if len(table) >= UNCACHED_NODES_REMEMBERED:
                    continue
                first = now
            table[name] = (first, now)
            if young is None and now - first < UNCACHED_NODE_GRACE:
                young = name
        return young

    def _forget_uncached(self) -> None:
        """Drop the entries of nodes the watch now shows, and of nodes not offered for
        UNCACHED_NODE_FORGET (every filter while the table is not empty; it is almost always)."""
        now = time.monotonic()
        known = self.store.topology.nodes
        table = self._uncached
        for name in [n for n, (_, last) in table.items() if n in known or now - last > UNCACHED_NODE_FORGET]:
            del table[name]

    def _record_rotation(self, pod: PodRecord, order: ZoneOrder | None) -> None:
        """The first decision for a StatefulSet under ordinal zones decides its rotation: kept
        in the store at once (the next decision reads it) and recorded in the cluster, so no
        restart, zone outage or adoption decides it again (extender/api/rotation.py)."""
        if order is None or not order.derived or not order.order or pod.shard is None:
            return
        sts = self.store.statefulsets.get((pod.namespace, pod.shard))
        if sts is None or not self.store.rotations_enabled:
            return
        record = RotationRecord(pod.namespace, sts.name, sts.name, order.order, dict(order.adopted))
        if self.store.remember_rotation(record):
            log.info("decided the zone rotation of StatefulSet %s/%s: %s", pod.namespace, sts.name, order.how)
            if self.records is not None:
                self.records.zone_rotation(record, sts.uid)

    def _remedy(self, pod: PodRecord, inputs: _Inputs | None, args: ExtenderArgs, summary: str) -> str:
        """What would free the pod (engine/remedy.py), for its PlacementRejected event: computed
        at most once a minute per pod (a few decisions' worth), the last answer reused between,
        and at most one computation a second across all pods (a bound on the lock time). A pod
        that finds the second taken is owed one: `pay_remedies` (a background loop,
        server/remedies.py) computes it shortly and sends the event with it, since kube-scheduler
        may not call filter for that pod again for minutes (kubernetes#122019)."""
        if inputs is None:
            return ""
        now = time.monotonic()
        last = self._remedies.get(pod.uid)
        if last is not None and now - last[0] < REMEDY_INTERVAL:
            return last[1]
        if now - self._last_remedy < REMEDY_SPACING:
            self._owed[pod.uid] = (pod, inputs, list(args.candidate_names()), summary)
            if len(self._owed) > 1000:
                self._owed.popitem(last=False)
            return last[1] if last is not None else ""
        return self._compute_remedy(pod, inputs, args.candidate_names(), now)

    def _compute_remedy(self, pod: PodRecord, inputs: _Inputs, names: Sequence[str], now: float) -> str:
        self._last_remedy = now
        with self.store.lock.held("remedy"):
            found = remedies(
                inputs.spec,
                inputs.request,
                pod.labels,
                inputs.snap,
                names,
                lambda other: self.store.decision_inputs(pod, other)[1],
            )
        text = (" — it would be placed with " + "; or ".join(r.text for r in found)) if found else ""
        self._remedies[pod.uid] = (now, text)
        if len(self._remedies) > 10_000:
            self._remedies.popitem(last=False)
        return text

    def pay_remedies(self, now: float | None = None) -> int:
        """Compute one owed remedy if the second allows, and send its event; returns how many."""
        now = time.monotonic() if now is None else now
        if not self._owed or now - self._last_remedy < REMEDY_SPACING:
            return 0
        uid, (pod, inputs, names, summary) = self._owed.popitem(last=False)
        with self.store.lock.held("remedy"):
            still_waiting = uid in self.store.pods and self.store.pods[uid].node is None
        if not still_waiting:
            return 0
        text = self._compute_remedy(pod, inputs, names, now)
        if text:
            self.events.pod_event(pod, "PlacementRejected", summary + text)
        return 1

    def _warn_disagreements(self, pod: PodRecord, spec: PlacementPolicySpec) -> None:
        """A Warning event when the pod's own hard native constraints are not what its policy
        implies (stricter, or counting another group): the native scheduler and autoscalers act
        on those, not on the policy. Once per pod (the sink also rate-limits)."""
        if pod.uid in self._warned:
            return
        self._warned[pod.uid] = None
        if len(self._warned) > 10_000:
            self._warned.popitem(last=False)
        with self.store.lock.held("disagreement"):
            sts = self.store.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
        found = pod_disagreements(pod, spec, sts.selector_labels if sts else None)
        if found:
            self.events.pod_event(pod, "NativeConstraintsDisagree", "; ".join(found))

    # ---------------------------------------------------------------- the ordinal-zone gate
    def gate_answer(self, uid: str) -> GateAnswer | None:
        """What to do with a pod held by the ordinal-zone gate (extender/server/gate_patch.py): AND its
        ordinal's zone (and its volumes') into its node affinity and lift the gate, or lift it as
        it is when there is nothing to narrow; None: not now (cache unsynced, or pod gone).

        The zones come from the same zone order the filter uses, recorded here when this is the
        set's first decision, so the narrowing and every later filter agree. Lifting never lets
        a pod past a rule: the filter still judges every node."""
        with self.store.lock.held("gate"):
            if self.store.not_synced() is not None:
                return None
            pod = self.store.pods.get(uid)
            if pod is None or not pod.gated:
                return None
            try:
                spec = self.store.resolve_policy(pod)
            except PolicyError as err:
                return GateAnswer(pod, None, f"its policy is invalid, which the filter reports: {err}")
            if spec is None or spec.ordinalZones is None:
                return GateAnswer(pod, None, "its policy does not place pods by ordinal zone")
            sts = self.store.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
            try:
                mirrored = implied(spec, group_labels=(sts.selector_labels if sts else None) or pod.labels).gate
            except ValueError:
                mirrored = False
            if not mirrored:
                return GateAnswer(pod, None, "its policy's ordinal zones have no exact native mirror (README)")
            try:
                request, snap = self.store.decision_inputs(pod, spec)
            except PolicyError as err:
                return GateAnswer(pod, None, f"its policy is invalid, which the filter reports: {err}")
            zones, order = ordinal_pod_zones(spec, request, snap)
            if zones is None or order is None:
                return GateAnswer(pod, None, "no zone order yet (no zone has a schedulable node): the filter judges")
            if spec.ordinalZones.order is None and pod.shard is not None:
                # Narrow only from an order the cluster holds (a ZoneRotation the watch has shown):
                # two replicas, or this one after a restart, then narrow alike and the filter agrees.
                if (pod.namespace, pod.shard) not in self.store.rotations:
                    if not self.store.rotations_enabled:
                        return GateAnswer(pod, None, "no ZoneRotation CRD, so no recorded order to narrow by")
                    if order.derived:
                        self._record_rotation(pod, order)
                    return None  # the next pass, once the watch shows the record
            requirement = {"key": spec.topology.zone, "operator": "In", "values": sorted(zones)}
            return GateAnswer(pod, requirement, f"ordinal {pod.ordinal} belongs in {', '.join(sorted(zones))}")

    def _not_synced(self, pod: PodRecord, why: str, result: str = "not_synced") -> ExtenderFilterResult:
        """No decision from a partial cache: the filter answers an Error, which kube-scheduler
        turns into a FailedScheduling event carrying `why` and a retry from its backoff queue
        (1 s doubling to 10 s). Not "every node unresolvable": kube-scheduler parks a pod an
        extender rejected until some cluster event moves it (kubernetes#122019, schedule_one.go),
        up to 5 minutes in a quiet cluster, while an Error is retried whatever happens."""
        self.metrics.pod_decisions.inc(result=result)
        log.info("filter %s refused: %s", pod.key, why)
        return ExtenderFilterResult(Error=f"{why}; no placement until it is, kube-scheduler will retry")

    def _invalid(self, args: ExtenderArgs, pod: PodRecord, err: PolicyError) -> ExtenderFilterResult:
        """An invalid (or missing) policy never places the pod, and no node could change that:
        the filter answers an Error carrying the message. kube-scheduler then marks the pod
        PodScheduled=False with reason SchedulerError, not Unschedulable, and both autoscalers
        consider only Unschedulable pods (Karpenter's IsProvisionable, cluster-autoscaler's
        unschedulable pod lister): a broken policy never buys a node. It is retried from the
        backoff queue, so fixing the policy is picked up within seconds."""
        names = args.candidate_names()
        self.events.pod_event(pod, "InvalidPlacementPolicy", str(err))
        self.metrics.pod_decisions.inc(result="invalid_policy")
        self.metrics.node_verdicts.inc(len(names), outcome="unresolvable", rule="policy")
        return ExtenderFilterResult(Error=str(err))

    # ---------------------------------------------------------------- prioritize
    def prioritize(self, args: ExtenderArgs) -> Priorities:
        pod = _pod(args.Pod)
        candidates = self._candidates(args)
        with self.store.lock.held("prioritize"):
            if self.store.not_synced() is not None:  # filter refused already; prefer nothing, hold nothing
                return Priorities(Decision.all_pass(candidate_names(candidates)).scores())
            try:
                spec = self.store.resolve_policy(pod)
                decision, _ = self._decide(pod, spec, candidates, reuse=True)
            except PolicyError:
                spec = None  # filter already refused every node; nothing to prefer
                decision = Decision.all_pass(candidate_names(candidates))
            if spec is not None:
                top = break_tie(pod.uid, decision)
                self.store.reservations.hold(pod, [top] if top else [], lambda names: shared_domains(decision, names))
        return Priorities(decision.scores())

    def _reuse(
        self, pod: PodRecord, inputs: _Inputs, candidates: Sequence[str] | Sequence[NodeInfo]
    ) -> Decision | None:
        """Filter's decision for this pod, narrowed to these candidates, if nothing the decision
        read has changed since (kube-scheduler sends prioritize the nodes filter passed)."""
        last = self._last
        if last is None or last[0] != pod.uid or not last[1].same_as(inputs):
            return None
        return _narrowed(last[2], candidates)

    # ---------------------------------------------------------------- bind
    def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        log.debug("bind %s/%s to %s", args.PodNamespace, args.PodName, args.Node)
        with self.store.lock.held("bind"):
            unsynced = self.store.not_synced()
            if unsynced is not None:
                self.metrics.binds.inc(result="not_synced")
                log.info("bind %s/%s refused: %s", args.PodNamespace, args.PodName, unsynced)
                return ExtenderBindingResult(Error=f"refused to bind: {unsynced}; kube-scheduler will retry")
            pod = self._known_pod(args)
            if pod is None:
                self.metrics.binds.inc(result="unknown_pod")
                return ExtenderBindingResult(
                    Error=f"pod {args.PodNamespace}/{args.PodName} ({args.PodUID}) is not in the extender's cache yet; "
                    "refusing to bind blind, kube-scheduler will retry"
                )
            refusal = self._recheck(pod, args.Node)
            if refusal is not None:
                return ExtenderBindingResult(Error=refusal)
        try:
            self.binder.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)
        except BindError as err:
            with self.store.lock.held("bind"):
                self.store.reservations.release(pod.uid)
            self.metrics.binds.inc(result="failed")
            log.warning("%s", err)
            return ExtenderBindingResult(Error=str(err))
        self.metrics.binds.inc(result="bound")
        return ExtenderBindingResult()

    def _recheck(self, pod: PodRecord, node: str) -> str | None:
        """The last word on hard rules (filters for other pods may have raced this one): a
        refusal, or None after committing the pod.

        A refusal must not rest on a guess. The rules are checked against the bound and committed
        placements only; if they refuse, they are checked again with the tentative ones (other
        pods' filter and prioritize holds, not bound yet) counted too, and the pod is refused only
        if both refuse. Caps and anti-affinity refuse on the first view alone (more pods can only
        add to a domain), but a spread's emptiest domain may be about to fill: in the e2e burst,
        checking the first view alone refused 2-7% of binds for a skew the pods in flight were
        already closing.
        """
        try:
            spec = self.store.resolve_policy(pod)
            if spec is None:
                return None
            request, snap = self.store.decision_inputs(pod, spec, tentative=False)
        except PolicyError as err:
            return str(err)
        verdict = evaluate(spec, request, snap, [node], dead_end_avoidance=False).verdicts[node]
        if not verdict.passed:
            request, snap = self.store.decision_inputs(pod, spec, tentative=True)
            in_flight_counted = evaluate(spec, request, snap, [node], dead_end_avoidance=False).verdicts[node]
            if in_flight_counted.passed:
                verdict = in_flight_counted
        if not verdict.passed:
            self.store.reservations.release(pod.uid)
            self.metrics.binds.inc(result="refused")
            log.info("refused to bind %s to %s: %s", pod.key, node, verdict.reason)
            return f"refused to bind to {node}: {verdict.reason}"
        self.store.reservations.commit(pod, node)
        return None

    # ---------------------------------------------------------------- preempt
    def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        """Keep only victim sets after which the preemptor passes our hard rules and no
        policy group of a victim loses its last pod in a zone."""
        pod = _pod(args.Pod)
        victims, pdb = _victims(args)
        kept: dict[str, MetaVictims] = {}
        with self.store.lock.held("preempt"):
            if self.store.not_synced() is not None:  # no victim is judged from a partial cache
                self.metrics.preemptions.inc(len(victims), result="refused")
                return ExtenderPreemptionResult(NodeNameToMetaVictims={})
            deadline = time.monotonic() + self.decision_deadline
            try:
                spec = self.store.resolve_policy(pod)
            except PolicyError:
                return ExtenderPreemptionResult(NodeNameToMetaVictims={})
            for node, uids in victims.items():
                if time.monotonic() > deadline:  # refusing a victim set only forgoes that preemption
                    self.metrics.fallbacks.inc(reason="preempt_deadline")
                    log.warning(
                        "preemption check for %s passed its %.3fs deadline; %d node(s) not judged were refused",
                        pod.key,
                        self.decision_deadline,
                        len(victims) - len(kept),
                    )
                    break
                if self._preemption_ok(pod, spec, node, set(uids)):
                    kept[node] = MetaVictims(Pods=[MetaPod(UID=u) for u in uids], NumPDBViolations=pdb[node])
                    self.metrics.preemptions.inc(result="kept")
                else:
                    self.metrics.preemptions.inc(result="refused")
        return ExtenderPreemptionResult(NodeNameToMetaVictims=kept)

    def _preemption_ok(self, pod: PodRecord, spec: PlacementPolicySpec | None, node: str, uids: set[str]) -> bool:
        store = self.store
        evicted = {store.pods[u].key for u in uids if u in store.pods}
        if spec is not None:
            try:
                request, snap = store.decision_inputs(pod, spec, counted=False)
            except PolicyError:
                return False
            snap = replace(snap, placements=tuple(p for p in snap.placements if p.pod not in evicted))
            if not evaluate(spec, request, snap, [node], dead_end_avoidance=False).verdicts[node].passed:
                return False
        for uid in uids:
            victim = store.pods.get(uid)
            zone = self._last_in_zone(victim, evicted) if victim is not None else None
            if zone is not None:
                log.info("preemption on %s refused: it would empty zone %s of %s's group", node, zone, victim.key)  # type: ignore[union-attr]
                return False
        return True

    def _last_in_zone(self, victim: PodRecord, evicted: set[str]) -> str | None:
        """The zone the victim's policy group would lose entirely, if any."""
        try:
            spec = self.store.resolve_policy(victim)
            if spec is None or not spec.uses_zones or victim.node is None:
                return None
            request, snap = self.store.decision_inputs(victim, spec, counted=False)
        except PolicyError:
            return None
        return zone_left_empty(spec, request, snap, victim.node, evicted)

    # ---------------------------------------------------------------- helpers
    def _candidates(self, args: ExtenderArgs) -> Sequence[str] | Sequence[NodeInfo]:
        if args.NodeNames is not None:
            return args.NodeNames
        assert args.Nodes is not None
        try:
            return [parse_node(n) for n in args.Nodes.items]
        except ObjectError as err:
            raise BadRequest(f"Nodes.items: {err}") from None

    def _decide(
        self,
        pod: PodRecord,
        spec: PlacementPolicySpec | None,
        candidates: Sequence[str] | Sequence[NodeInfo],
        *,
        reuse: bool = False,
    ) -> tuple[Decision, _Inputs | None]:
        """The decision and what it read; with `reuse`, filter's decision when that still holds."""
        if spec is None:
            return Decision.all_pass(candidate_names(candidates)), None
        if reuse and (last := self._last) is not None and last[0] == pod.uid and last[3] == pod:
            self.store.reservations.expire()
            if last[1].spec is spec and self.store.version == last[4]:  # nothing at all changed since filter
                reused = _narrowed(last[2], candidates)
                if reused is not None:
                    return reused, last[1]
        request, snap = self.store.decision_inputs(pod, spec)
        # The deadline bounds the dead-end analysis, so it starts after the inputs are read: the
        # first decision for a group also builds the group's counts (once; the watch keeps them
        # current after), 0.2-0.5 s for 150,000 placed pods, which left a 1,000,000-pod group's
        # first analysis no time (a fallback, seen by group_scaling on a slower machine).
        deadline = time.monotonic() + self.decision_deadline
        inputs = _Inputs(spec, request, snap)
        if reuse:
            reused = self._reuse(pod, inputs, candidates)
            if reused is not None:
                return reused, inputs
        decision = evaluate(spec, request, snap, candidates, deadline=deadline)
        if decision.fell_back:
            self.metrics.fallbacks.inc(reason="deadline")
            log.warning(
                "decision for %s passed its %.3fs deadline in the dead-end analysis; the hard rules alone "
                "decided (raise --decision-deadline, or check the policy's group size)",
                pod.key,
                self.decision_deadline,
            )
        return decision, inputs

    def _known_pod(self, args: ExtenderBindingArgs) -> PodRecord | None:
        reservation = self.store.reservations.get(args.PodUID)
        if reservation is not None:
            return reservation.pod
        pod = self.store.pods.get(args.PodUID)
        if pod is not None:
            return pod
        return None


def _narrowed(decision: Decision, candidates: Sequence[str] | Sequence[NodeInfo]) -> Decision | None:
    """A decision narrowed to `candidates` (None if it did not judge them all): copies of the
    classes, as the tie-break changes scores and splits a class."""
    names = candidate_names(candidates)
    wanted = set(names)
    if len(wanted) != len(names) or not wanted.issubset(decision.members):
        return None
    classes = []
    for k in decision.classes:
        if wanted.isdisjoint(k.names):
            continue
        kept = k.names if wanted.issuperset(k.names) else list(wanted.intersection(k.names))
        classes.append(replace(k, names=list(kept)))
    return Decision(classes, names, wanted, list(decision.notes), decision.context, decision.analysis)


class _Inputs:
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

    def same_as(self, other: _Inputs) -> bool:
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


def rejection_summary(decision: Decision) -> str:
    """One line for a pod no node could take: how many nodes each rule removed, with an example
    reason per rule. One Event per pod and message, however many nodes the cluster has."""
    by_rule: dict[str, list[str]] = {}
    count: Counter[str] = Counter()
    for k in decision.classes:
        if not k.passed and k.names:
            rule = k.rule or "other"
            by_rule.setdefault(rule, []).append(k.reason)
            count[rule] += len(k.names)
    parts = [f"{n} by {rule} (e.g. {by_rule[rule][0]})" for rule, n in sorted(count.items(), key=lambda kv: -kv[1])]
    return f"0/{len(decision.order)} nodes can take this pod under its placement policy: " + "; ".join(parts)


def _victims(args: ExtenderPreemptionArgs) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Node -> victim uids, and node -> PDB violations, from either form kube-scheduler sends."""
    victims: dict[str, list[str]] = {}
    pdb: dict[str, int] = {}
    if args.NodeNameToMetaVictims is not None:
        for node, meta in args.NodeNameToMetaVictims.items():
            victims[node] = [p.UID for p in meta.Pods or ()]
            pdb[node] = meta.NumPDBViolations
    elif args.NodeNameToVictims is not None:
        for node, full in args.NodeNameToVictims.items():
            victims[node] = [_pod(p).uid for p in full.Pods or ()]
            pdb[node] = full.NumPDBViolations
    return victims, pdb


def _pod(obj: object) -> PodRecord:
    try:
        return parse_pod(obj)
    except ObjectError as err:
        raise BadRequest(f"Pod: {err}") from None


def _filter_result(
    args: ExtenderArgs, passed: list[str], failed: dict[str, str], unresolvable: dict[str, str]
) -> ExtenderFilterResult:
    """Answer in the mode kube-scheduler asked in: names for names, full Nodes for Nodes."""
    if args.NodeNames is not None:  # built from validated parts: no need to validate 5,000 entries again
        return ExtenderFilterResult.model_construct(
            NodeNames=passed, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable, Nodes=None, Error=""
        )
    assert args.Nodes is not None
    keep = set(passed)
    items = [n for n in args.Nodes.items if (n.get("metadata") or {}).get("name") in keep]
    return ExtenderFilterResult(
        Nodes={"metadata": {}, "items": items}, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable
    )

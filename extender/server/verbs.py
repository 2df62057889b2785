"""The extender verbs: wire types in, engine decisions out, reservations kept in between.

This is the glue between the HTTP layer (which only parses and encodes) and the pure engine.
Each verb reads the cache under its lock, asks the engine, and answers; what a verb needs beside
that is a collaborator in a module of its own: the gate's answers (gate_answers.py), what would
free a pod (remedies.py), the disagreement warning (disagreements.py), the grace of a node the
watch has not shown (uncached.py), prioritize's reuse of filter's decision (reuse.py), the bind
re-check (bind_check.py), the preemption judgement (preemption.py). The Kubernetes side effects
(Bindings, Events, records) go through the interfaces of ports.py, so the verbs are tested with
plain fakes and served with the real client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..api.policy import OPT_IN_RESOURCE, PlacementPolicySpec, PolicyError
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
    break_tie,
    candidate_names,
    evaluate,
    passed_domains,
    shared_domains,
    zone_order,
)
from ..limits import DEFAULT_DECISION_DEADLINE
from ..metrics import Metrics
from ..state.objects import PodIdentity, PodRecord
from ..state.store import ClusterStore
from .bind_check import hard_rule_refusal, node_refusal, ownership_refusal, resource_refusal
from .disagreements import DisagreementWarner
from .gate_answers import GateAnswer, gate_answer
from .ports import AlreadyBound, Binder, BindError, BindOutcomeUnknown, EventSink, RecordWriter
from .preemption import victims_allowed
from .remedies import RemedyDesk
from .reuse import DecisionInputs, FilterMemo, narrowed, reused
from .rotation_records import RotationRecorder
from .uncached import UncachedNodes
from .wire_io import candidates_of, filter_result, named_pod, victims_of

log = logging.getLogger(__name__)

# How long a filter or bind waits for the watch to show its pod before refusing (kube-scheduler
# retries). The watch is usually ahead of kube-scheduler; the wait is the rare case's bound, well
# inside kube-scheduler's httpTimeout in config/ (5 s). The in-scheduler stanza's is 100 ms, but
# there the pods it sends were lifted from this cache by the placeable gate, so none waits.
BIND_WATCH_WAIT = 1.0
# Resources the bind's room check leaves out: in-scheduler mode's opt-in resource, which no node
# advertises and kube-scheduler's fit ignores (managedResources ignoredByScheduler).
IGNORED_RESOURCES = frozenset({OPT_IN_RESOURCE})


@dataclass
class Verbs:
    store: ClusterStore
    binder: Binder
    events: EventSink
    records: RecordWriter | None = None  # None: rotations are decided and kept in this process only
    decision_deadline: float = DEFAULT_DECISION_DEADLINE  # seconds of dead-end analysis per decision
    failed_node_reasons: FailedNodeReasons = FailedNodeReasons.WHEN_NONE_PASS
    metrics: Metrics = field(default_factory=Metrics)
    watch_wait: float = BIND_WATCH_WAIT  # seconds a verb waits for the watch to show the pod it names
    # filter's decision, reused by the prioritize call that follows it for the same pod when
    # nothing it read changed in between (kube-scheduler calls them back to back)
    _last: FilterMemo | None = field(default=None, repr=False)
    _uncached: UncachedNodes = field(default_factory=UncachedNodes, repr=False)

    def __post_init__(self) -> None:
        self.store.lock.observe = lambda seconds, holder: self.metrics.lock_hold.observe(seconds, holder=holder)
        self.rotations = RotationRecorder(self.store, self.records)
        self.remedies = RemedyDesk(self.store, self.events, budget=self.decision_deadline)
        self.disagreements = DisagreementWarner(self.store, self.events)

    # ---------------------------------------------------------------- filter
    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        named = named_pod(args.Pod)
        candidates = candidates_of(args)
        log.debug("filter %s over %d nodes", named.key, len(candidates))
        self._wait_for_watch(named)
        with self.store.lock.held("filter"):
            unsynced = self.store.not_synced()
            if unsynced is not None:
                return self._not_synced(named, unsynced)
            pod = self._watched(named)
            if pod is None:
                return self._not_synced(
                    named,
                    f"pod {named.key} ({named.uid}) is not in the extender's cache after {self.watch_wait:g}s "
                    "(a filter is judged from the watch's copy of the pod, never the request's)",
                    "unknown_pod",
                )
            if not self.store.owns(pod):
                # Not a pod it places (a caller's request, or a stanza sending every pod): it
                # passes every node, and nothing is held for it.
                self.metrics.pod_decisions.inc(result="not_ours")
                return filter_result(args, candidate_names(candidates), {}, {})
            try:
                spec = self.store.resolve_policy(pod)
                decision, inputs = self._decide(pod, spec, candidates)
            except PolicyError as err:
                return self._invalid(args, pod, err)
            answer = self._keep(pod, spec, decision, inputs) if inputs is not None else decision.passed()
            if self._uncached:
                self._uncached.forget(self.store.topology.nodes)
            waiting = self._uncached.young(decision) if spec is not None and not decision.passed() else None
        if waiting:
            return self._not_synced(pod, f"node {waiting} is not in the extender's cache yet", "node_not_cached")
        return self._filter_answer(args, pod, spec, decision, inputs, answer)

    def _keep(self, pod: PodRecord, spec: PlacementPolicySpec, decision: Decision, inputs: DecisionInputs) -> list[str]:
        """The nodes answered, and what filter keeps of its decision: the pod held there for the
        next pod's filter, the rotation recorded, and
        the decision remembered for the prioritize that may follow."""
        answer = self._answer(pod, decision)
        self.store.reservations.hold(pod, answer, lambda _passed: passed_domains(decision))
        if spec.ordinalZones is not None:
            self.rotations.record(pod, zone_order(decision))
        # After its own hold and record, which the decision does not read (a pod's own
        # reservation is never counted; a recorded rotation is the order it decided).
        self._last = FilterMemo(pod.uid, inputs, decision, pod, self.store.version)
        return answer

    @staticmethod
    def _answer(pod: PodRecord, decision: Decision) -> list[str]:
        """The nodes filter answers: every passing node, or for a pod that opted in by the opt-in
        resource (in-scheduler mode) the one it chose, by its scores. That stanza has no bindVerb:
        kube-scheduler binds the pod itself to the one node it is left (it scores nothing then), so
        the extender knows the pod's node from its own answer, holds it there for the next pod's
        filter until the watch shows the pod bound, and never waits on kube-scheduler's short
        timeout for a Binding. With the bind inside that timeout, kube-scheduler gave up on binds
        whose Binding then landed and placed other pods in their room: 4 CPU over allocatable on 40."""
        passed = decision.passed()
        if not pod.opted_in or len(passed) <= 1:
            return passed
        chosen = break_tie(pod.uid, decision)
        return [chosen] if chosen is not None else passed

    def _filter_answer(
        self,
        args: ExtenderArgs,
        pod: PodRecord,
        spec: PlacementPolicySpec | None,
        decision: Decision,
        inputs: DecisionInputs | None,
        passed: list[str],
    ) -> ExtenderFilterResult:
        """The decision as kube-scheduler's answer (`passed`: the nodes answered), with its metrics
        and the pod's events."""
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
            self.disagreements.check(pod, spec)
        if result == "no_feasible_node" and decision.order:
            summary = decision.rejection_summary()
            remedy = self.remedies.remedy(pod, inputs, args.candidate_names(), summary)
            self.events.pod_event(pod, "PlacementRejected", summary + remedy)
        return filter_result(args, passed, failed, unresolvable)

    def _not_synced(self, pod: PodRecord | PodIdentity, why: str, result: str = "not_synced") -> ExtenderFilterResult:
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
        named = named_pod(args.Pod)
        candidates = candidates_of(args)
        with self.store.lock.held("prioritize"):
            pod = self._watched(named)
            if self.store.not_synced() is not None or pod is None or not self.store.owns(pod):
                # filter refused already (or passed a pod not its own): prefer nothing, hold nothing
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

    # ---------------------------------------------------------------- bind
    def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        log.debug("bind %s/%s to %s", args.PodNamespace, args.PodName, args.Node)
        if args.PodUID not in self.store.pods and self.store.not_synced() is None and not self._watch_shows(args):
            self.metrics.binds.inc(result="not_seen")
            return ExtenderBindingResult(
                Error=f"pod {args.PodNamespace}/{args.PodName} ({args.PodUID}) is not in the extender's cache after "
                f"{self.watch_wait:g}s; refusing to bind on a view older than the pod, kube-scheduler will retry"
            )
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
            foreign = ownership_refusal(self.store, pod)
            if foreign is not None:
                self.store.reservations.release(pod.uid)
                self.metrics.binds.inc(result="not_ours")
                log.warning("refused to bind %s to %s: %s", pod.key, args.Node, foreign)
                return ExtenderBindingResult(Error=f"refused to bind: {foreign}")
            landed = self.store.reservations.get(pod.uid)
            landed_on = landed.node if landed is not None and landed.written else None
            refusal = None if landed_on is not None else self._recheck(pod, args.Node)
        if landed_on is not None:  # our Binding for it was accepted: this is a retry (_already_bound)
            return self._already_bound(pod, args.Node, landed_on)
        if refusal is not None:
            return ExtenderBindingResult(Error=refusal)
        return self._write_binding(pod, args)

    def _write_binding(self, pod: PodRecord, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        try:
            self.binder.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)
        except AlreadyBound as err:
            return self._already_bound(pod, args.Node, err.node)
        except BindOutcomeUnknown as err:
            # No answer: the Binding may have landed, so the pod stays counted on the node until the
            # watch shows where it is (or the committed reservation expires).
            self.metrics.binds.inc(result="failed")
            log.warning("%s", err)
            return ExtenderBindingResult(Error=str(err))
        except BindError as err:
            with self.store.lock.held("bind"):
                self.store.reservations.release(pod.uid)
            self.metrics.binds.inc(result="failed")
            log.warning("%s", err)
            return ExtenderBindingResult(Error=str(err))
        return self._bound(pod)

    def _already_bound(self, pod: PodRecord, node: str, bound_to: str) -> ExtenderBindingResult:
        """The pod is on `bound_to`, the API server says, whatever the watch shows yet: a Binding
        of ours landed after kube-scheduler stopped waiting for it (its httpTimeout: a stanza naming
        bindVerb with a short one, as the in-scheduler stanza did at 300 ms), and this is its
        retry. The pod is counted on that node until the watch shows it.
        Releasing it instead, as any failed bind does, let other pods of its group onto that node
        in the meantime: 6-12 pods over a cap a round in a burst whose binds outlasted the wait."""
        with self.store.lock.held("bind"):
            self.store.reservations.commit(pod, bound_to)
            self.store.reservations.confirm(pod.uid)
        if bound_to == node:
            log.info("%s was bound to %s already (an earlier try's Binding)", pod.key, node)
            return self._bound(pod)
        self.metrics.binds.inc(result="failed")
        log.warning("refused to bind %s to %s: it is bound to %s already", pod.key, node, bound_to)
        return ExtenderBindingResult(Error=f"{pod.key} is bound to {bound_to} already")

    def _bound(self, pod: PodRecord) -> ExtenderBindingResult:
        """The API server accepted the Binding. An opted-in pod's (in-scheduler mode) lift frees
        its slot of the placeable gate's window now, one watch round trip before the watch shows
        it bound: the gate's next lift follows at once (place_gate.py)."""
        with self.store.lock.held("bind"):
            self.store.reservations.confirm(pod.uid)
        if pod.opted_in:
            self.store.gate_work.set()
        self.metrics.binds.inc(result="bound")
        return ExtenderBindingResult()

    def _watch_shows(self, args: ExtenderBindingArgs) -> bool:
        """Wait (bounded) until the watch shows the pod: the re-check then counts every deletion
        that came before it, such as the pod this one replaces (ClusterStore.wait_for_pod)."""
        seen = self.store.wait_for_pod(args.PodUID, self.watch_wait)
        self.metrics.bind_watch_waits.inc(outcome="seen" if seen else "timeout")
        return seen

    def _recheck(self, pod: PodRecord, node: str) -> str | None:
        """A refusal (the reservation released), or None after committing the pod to `node`:
        the hard rules again, then the node's room (another scheduler may have bound there)."""
        reason, result = node_refusal(self.store, pod, node), "refused_node"
        if reason is None:
            reason, result = hard_rule_refusal(self.store, pod, node), "refused"
        if reason is None:
            reason, result = resource_refusal(self.store, pod, node, IGNORED_RESOURCES), "refused_resources"
        if reason is not None:
            self.store.reservations.release(pod.uid)
            self.metrics.binds.inc(result=result)
            log.info("refused to bind %s to %s: %s", pod.key, node, reason)
            return f"refused to bind to {node}: {reason}"
        self.store.reservations.commit(pod, node)
        return None

    def _known_pod(self, args: ExtenderBindingArgs) -> PodRecord | None:
        """The pod as the watch shows it: never a record kept from a filter's request body, which
        a caller could have forged (its labels, namespace or policy)."""
        pod = self.store.pods.get(args.PodUID)
        if pod is None or (pod.namespace, pod.name) != (args.PodNamespace, args.PodName):
            return None
        return pod

    def _watched(self, named: PodIdentity) -> PodRecord | None:
        """The watch's copy of the pod a request names (uid, namespace and name must all agree),
        or None. Only the request's identity is read: its labels, policy, owner, selector and
        gates could be anything a caller wrote, so the rules are never applied to them."""
        pod = self.store.pods.get(named.uid)
        if pod is None or (pod.namespace, pod.name) != (named.namespace, named.name):
            return None
        self.store.asks[pod.uid] = self.store.asks.get(pod.uid, 0) + 1  # reached about it (place_gate.py)
        self.store.first_asked_at.setdefault(pod.uid, time.monotonic())
        return pod

    def _wait_for_watch(self, named: PodIdentity) -> None:
        """Wait (bounded, without the lock) for the watch to show a pod it does not show yet."""
        if named.uid not in self.store.pods and self.store.not_synced() is None:
            self.store.wait_for_pod(named.uid, self.watch_wait)  # not shown: answered as unknown_pod

    # ---------------------------------------------------------------- preempt
    def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        """Keep only victim sets after which the preemptor passes our hard rules and no
        policy group of a victim loses its last pod in a zone (preemption.py).

        A candidate with no victims (`"Pods": []` or `null`: the placeholders Kubernetes 1.38 sends
        where its dry run, in-tree filters only, evicts nothing, kubernetes#135486) is judged the
        same way, with nothing evicted: kept with its empty list where the preemptor passes our
        rules now (kube-scheduler keeps it for the next extender and drops it if it ends empty),
        dropped elsewhere; a kept one is counted as `placeholder`, not `kept`."""
        named = named_pod(args.Pod)
        victims, pdb = victims_of(args)
        kept: dict[str, MetaVictims] = {}
        with self.store.lock.held("preempt"):
            pod = self._watched(named)
            if self.store.not_synced() is not None or pod is None:  # no victim is judged from a partial cache
                self.metrics.preemptions.inc(len(victims), result="refused")
                return ExtenderPreemptionResult(NodeNameToMetaVictims={})
            deadline = time.monotonic() + self.decision_deadline
            try:
                spec = self.store.resolve_policy(pod)
            except PolicyError:
                return ExtenderPreemptionResult(NodeNameToMetaVictims={})
            for node, uids in victims.items():
                if time.monotonic() > deadline:  # refusing a victim set only forgoes that preemption
                    self._preempt_deadline(pod, len(victims) - len(kept))
                    break
                if victims_allowed(self.store, pod, spec, node, set(uids)):
                    kept[node] = MetaVictims(Pods=[MetaPod(UID=u) for u in uids], NumPDBViolations=pdb[node])
                    self.metrics.preemptions.inc(result="kept" if uids else "placeholder")
                else:
                    self.metrics.preemptions.inc(result="refused")
        return ExtenderPreemptionResult(NodeNameToMetaVictims=kept)

    def _preempt_deadline(self, pod: PodRecord, not_judged: int) -> None:
        self.metrics.fallbacks.inc(reason="preempt_deadline")
        log.warning(
            "preemption check for %s passed its %.3fs deadline; %d node(s) not judged were refused",
            pod.key,
            self.decision_deadline,
            not_judged,
        )

    # ---------------------------------------------------------------- collaborators' entry points
    def gate_answer(self, uid: str) -> GateAnswer | None:
        """What to do with a pod held by the ordinal-zone gate (gate_answers.py)."""
        return gate_answer(self.store, self.rotations, uid)

    def pay_remedies(self, now: float | None = None) -> int:
        """Compute one owed remedy if the second allows, and send its event (remedies.py)."""
        return self.remedies.pay(now)

    # ---------------------------------------------------------------- the decision
    def _decide(
        self,
        pod: PodRecord,
        spec: PlacementPolicySpec | None,
        candidates: Sequence[str] | Sequence[NodeInfo],
        *,
        reuse: bool = False,
    ) -> tuple[Decision, DecisionInputs | None]:
        """The decision and what it read; with `reuse`, filter's decision when that still holds."""
        if spec is None:
            return Decision.all_pass(candidate_names(candidates)), None
        if reuse and (memo := self._last) is not None and memo.uid == pod.uid and memo.pod == pod:
            self.store.reservations.expire()
            if memo.inputs.spec is spec and self.store.version == memo.version:  # nothing at all changed
                again = narrowed(memo.decision, candidates)
                if again is not None:
                    return again, memo.inputs
        request, snap = self.store.decision_inputs(pod, spec)
        # The deadline bounds the dead-end analysis, so it starts after the inputs are read: the
        # first decision for a group also builds the group's counts (once; the watch keeps them
        # current after), 0.2-0.5 s for 150,000 placed pods, which left a 1,000,000-pod group's
        # first analysis no time (a fallback, seen by group_scaling on a slower machine).
        deadline = time.monotonic() + self.decision_deadline
        inputs = DecisionInputs(spec, request, snap)
        if reuse and (again := reused(self._last, pod, inputs, candidates)) is not None:
            return again, inputs
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

"""The in-scheduler placeable gate: an opted-in pod enters kube-scheduler's queue only while the
extender answers and has a place for it.

Why: in in-scheduler mode the extender sits inside the scheduling cycle of the cluster's one
kube-scheduler, which calls filter synchronously (schedule_one.go). While the extender hangs
(a stuck process, a paused VM, a partition), every attempt at an opted-in pod holds that cycle
for the stanza's `httpTimeout`, and every other pod of the cluster waits behind it: 50 opted-in
pods waiting for room turned a 4.4 s Deployment of ordinary pods into 251 s
(../shared/research/in-scheduler.md). A pod with a scheduling gate never enters the queue
(KEP-3521), so it costs nothing. Every opted-in pod is created with PLACEABLE_GATE (the
install's MutatingAdmissionPolicy, deploy/components/placeable-gate, on 1.36+; the template
`adopt --mode in-scheduler` writes, before), and this pass (run by the extender's gate loop, so
only while the extender runs) removes it from one of its own pods when

  * the cache is synced (a frozen, dead or partitioned extender lifts nothing), and
  * some node its own node constraints allow passes the pod's rules now (a place), with fewer of
    its group's pods lifted and still unbound than the group has passing nodes, and
  * fewer than `window` pods it lifted still count: a lift counts until its pod is bound (the watch
    shows it on a node: kube-scheduler binds in this mode, to the one node filter answered; the
    extender's own Binding, accepted, where an older stanza still binds through it) or gone,
    or `lifted_ttl` after kube-scheduler has tried it (a filter request naming it, or its own
    Unschedulable condition); never merely because time passed.

The invariant it keeps: the pods carrying the gate that are in kube-scheduler's queue are at most
`window` (lifted with a place, normally bound within one cycle) plus `visible` (below, never sent
to the extender), plus any that lost their place after kube-scheduler tried them (they stop
counting `lifted_ttl` later). So whatever the extender does, at most `window` opted-in pods make
kube-scheduler wait: frozen, each try at one costs the stanza's `httpTimeout` (100 ms) once per
kube-scheduler retry (1 s doubling to 10 s); cut off from kube-scheduler while it keeps running
(a partition, a broken Service path), its lifts are never tried, so they keep counting: the
queue holds at most twice `window` (those, plus lifts tried just before the cut, whose slots free
`lifted_ttl` later) and does not grow however long it lasts (before, a lift stopped counting 60 s
after it was made and 4 more followed: 36 in the queue after 8.5 minutes); killed, each try is refused at
once. The retries come densest in the first seconds (1 s, 2 s, 4 s apart): at `window` 2 and
`httpTimeout` 1 s a 50-pod ordinary wave started at a cut took 3.5x its healthy time; at `window`
6 and 100 ms (shipped: as many tries a round, for a third the time; opted-in pods placed at 0.71 of
the rate of every gate lifted at once, against 0.41 at 2 x 300 ms) every wave, at the cut, frozen,
killed or cut off for minutes, took at most 1.15x (tests/e2e/test_in_scheduler_worst_moment.py holds 2x;
docs/operations/failure-modes.md).

Lifts follow binds: the watch wakes the gate loop when an opted-in pod is bound or a pod is held
(ClusterStore.gate_work), so the next pod is lifted as soon as a slot frees, not at the next
tick; evaluations stay a budget per period (_refill) however often passes run.

Fair across tenants: a pass evaluates at most `max_evaluations` held pods (a pass over many
waiting pods stays short), starting after the last pod the previous pass evaluated (round robin
over all held pods, by namespace, workload and ordinal). So every held pod is evaluated, lifted
if it has a place and told why if not, within ceil(held / max_evaluations) passes, whatever
another tenant holds: 40 pods naming a missing policy no longer keep another namespace's
placeable pods gated (they did, for as long as those 40 waited, when every pass began at the
first held pod).

Autoscalers skip gated pods, so up to `visible` pods with no place of each namespace are lifted
anyway, and stay counted until they are bound or gone, so that an autoscaler sees them and may add
the node that frees them. The budget is per namespace (per tenant): a shown pod that no node ever
frees stays shown for good (a gate cannot be put back), and with one budget for the cluster one
tenant's pods that never fit kept every other tenant's pods from ever being shown. Only a pod that
carries its rules' exact native form (what adopt writes: required anti-affinity for a cap of 1, zone
affinity, ...): cluster-autoscaler and Karpenter simulate the in-tree rules alone, so for any other
pod a new node would never be bought, and for this one kube-scheduler's own filters refuse every
node the rules refuse, so it never calls the extender for it: a visible pod costs nothing during a
hang. A pod kept gated gets one
event saying why (no place, or an invalid policy) each time the reason changes.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from ..api.policy import PLACEABLE_GATE, PlacementPolicySpec, PolicyError
from ..engine import Exactness, evaluate
from ..engine.implied import implied, pod_disagreements
from ..limits import DEFAULT_PLACE_LIFTED_TTL, DEFAULT_PLACE_VISIBLE, DEFAULT_PLACE_WINDOW
from ..state.groups import group_key
from ..state.objects import PodRecord
from ..state.store import ClusterStore
from .gate_answers import GateAnswer
from .ports import EventSink

LIFTED_TTL = DEFAULT_PLACE_LIFTED_TTL
log = logging.getLogger(__name__)
MAX_EVALUATIONS = 32  # decisions per pass: a pass over many waiting pods stays short (and rotates: _from_cursor)


def _turn(pod: PodRecord) -> tuple[str, str, int, str, str]:
    """A held pod's place in the rotation: by namespace and workload, a StatefulSet's by ordinal."""
    return (pod.namespace, pod.shard or "", pod.ordinal if pod.ordinal is not None else -1, pod.name, pod.uid)


def _from_cursor(held: list[PodRecord], cursor: tuple[str, str, int, str, str] | None) -> list[PodRecord]:
    """`held` (in turn order) from the first pod after `cursor`, wrapping round: each pass goes on
    where the last one stopped, so every held pod is evaluated within ceil(held / max_evaluations)
    passes whatever the others are (an invalid policy, no place), and each is told why it waits."""
    if cursor is None:
        return held
    start = bisect_right([_turn(p) for p in held], cursor)
    return held[start:] + held[:start]


class LiftStage(StrEnum):
    """How far a lift has gone, each timed from the pass that decided it
    (extender_placeable_gate_lift_seconds). The window's rate is its size over the `bound` time; in
    e2e-modes on the 2-core machine that was 92 ms: written 28, asked 25 more, answered 1, bound 38
    more, the next lift 3 after that. The extender's own part is the answer and the next lift; the
    rest is the API server's write and its watches, which a faster control plane shortens."""

    WRITTEN = "written"  # the lift's PATCH accepted by the API server
    ASKED = "asked"  # kube-scheduler's first filter request naming the pod: it reached the queue's head
    BOUND = "bound"  # the gate saw it bound (the watch, or the extender's own Binding): its slot frees


@dataclass
class Lifted:
    at: float
    group: object
    visible: bool  # lifted with no place, so autoscalers see it
    asks: int = 0  # the filter requests that had named the pod when it was lifted (ClusterStore.asks)
    reached_at: float | None = None  # when this gate first saw that kube-scheduler had tried the pod
    namespace: str = ""  # whose visible budget it takes (one per namespace)
    asked_timed: bool = False  # its LiftStage.ASKED was reported

    @property
    def in_flight(self) -> bool:
        """Counts against the window: it may still make kube-scheduler wait on the extender."""
        return not self.visible


@dataclass
class PlaceGate:
    """Which pods held by the placeable gate to lift now (the state between passes: the lifts
    still in flight, and the last reason each held pod was told)."""

    store: ClusterStore
    events: EventSink
    window: int = DEFAULT_PLACE_WINDOW
    visible: int = DEFAULT_PLACE_VISIBLE
    lifted_ttl: float = LIFTED_TTL
    decision_deadline: float = 0.5
    max_evaluations: int = MAX_EVALUATIONS
    lifted: dict[str, Lifted] = field(default_factory=dict)
    told: dict[str, str] = field(default_factory=dict)
    # The turn of the last pod a pass evaluated: the next pass starts after it (round robin).
    cursor: tuple[str, str, int, str, str] | None = None
    interval: float = 0.2  # the period over which `max_evaluations` may be spent (_refill)
    # Told each stage of a lift with a place and its seconds (LiftStage): the serving process
    # exports them (extender_placeable_gate_lift_seconds); a test reads them.
    on_stage: Callable[[LiftStage, float], None] = lambda _stage, _seconds: None
    _tokens: float = field(default=float(MAX_EVALUATIONS), repr=False)
    _filled_at: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._tokens = float(self.max_evaluations)

    def answers(self, now: float | None = None) -> list[GateAnswer]:
        """The pods to lift in this pass, decided under the store lock."""
        now = time.monotonic() if now is None else now
        store = self.store
        with store.lock.held("place-gate"):
            if store.not_synced() is not None:
                return []
            self._forget(now)
            self._refill(now)
            in_flight = sum(1 for entry in self.lifted.values() if entry.in_flight)
            # A full window leaves only pods that may be shown to an autoscaler: the pass over a
            # burst's held pods then sorts none of the others (passes follow every held pod's event).
            showable_only = in_flight >= self.window
            held = sorted(
                (
                    p
                    for u in store.held
                    if (p := store.pods.get(u)) is not None
                    and (not showable_only or p.hard_native is not None)
                    and self._waiting(p)
                ),
                key=_turn,
            )
            out: list[GateAnswer] = []
            shown = Counter(entry.namespace for entry in self.lifted.values() if entry.visible)
            log.debug("place gate: %d held, %d lifts in flight, %d shown", len(held), in_flight, shown.total())
            for pod in _from_cursor(held, self.cursor)[: self.max_evaluations]:
                full = in_flight >= self.window
                may_show = shown[pod.namespace] < self.visible
                if full and (not may_show or pod.hard_native is None):
                    continue  # only a pod its namespace may still show, carrying its native form: nothing to decide
                if self._tokens < 1:
                    break
                self._tokens -= 1
                self.cursor = _turn(pod)
                answer, group, visible = self._answer(pod, in_flight < self.window, may_show)
                if answer is None:
                    continue
                self.lifted[pod.uid] = Lifted(now, group, visible, store.asks.get(pod.uid, 0), namespace=pod.namespace)
                shown[pod.namespace] += visible
                in_flight += not visible
                self.told.pop(pod.uid, None)
                out.append(answer)
            return out

    def _waiting(self, pod: PodRecord) -> bool:
        return (
            pod.held
            and not pod.gated  # the ordinal-zone gate goes first: it narrows the node affinity
            and pod.node is None
            and not pod.terminating
            and pod.uid not in self.lifted
            and self.store.owns(pod)
        )

    def _refill(self, now: float) -> None:
        """Evaluations are a budget, `max_evaluations` per `interval` (a token bucket): passes may
        come at every bind the watch shows, and a pass over pods with no place costs as much as
        ever, however often it runs."""
        if self._filled_at is not None:
            rate = self.max_evaluations / self.interval
            self._tokens = min(float(self.max_evaluations), self._tokens + (now - self._filled_at) * rate)
        self._filled_at = now

    def _forget(self, now: float) -> None:
        """A lift stops counting once its pod is bound (the watch shows it on a node, or the API
        server accepted the extender's Binding) or gone. (Not when filter answers it: an answer
        kube-scheduler gave up on, or a partition swallowed mid-call, put a pod back in its queue
        uncounted, 7 lifted pods in it where the window is 6.) A lift with a place also stops
        `lifted_ttl` after kube-scheduler has tried its pod (it lost its place: it must not hold
        the window for good), and only then: the evidence is a filter request naming it
        (ClusterStore.asks) or kube-scheduler's own Unschedulable condition on it. While
        kube-scheduler cannot reach the extender (a partition, a broken Service path) its lifts
        keep counting, so the queue that would wait its httpTimeout on each stops growing: at
        most twice `window` pods (the lifts tried just before the cut free their slots once, to
        lifts that then keep counting) however long the partition lasts."""
        asks, asked_at = self.store.asks, self.store.first_asked_at
        written = self.store.reservations.written
        for uid, entry in list(self.lifted.items()):
            pod = self.store.pods.get(uid)
            asked = asked_at.get(uid)
            if not entry.visible and not entry.asked_timed and asked is not None and asked >= entry.at:
                entry.asked_timed = True
                self.on_stage(LiftStage.ASKED, asked - entry.at)
            if pod is None or pod.node is not None or pod.finished or written(uid):
                if pod is not None and not pod.finished and not entry.visible:
                    self.on_stage(LiftStage.BOUND, max(0.0, now - entry.at))
                del self.lifted[uid]
                continue
            if entry.reached_at is None and (asks.get(uid, 0) > entry.asks or pod.tried_unschedulable):
                entry.reached_at = now
            if not entry.visible and entry.reached_at is not None and now - entry.reached_at > self.lifted_ttl:
                del self.lifted[uid]
        for uid in list(self.told):
            if uid not in self.store.held:
                del self.told[uid]

    def _answer(self, pod: PodRecord, may_place: bool, may_show: bool) -> tuple[GateAnswer | None, object, bool]:
        store = self.store
        # Only the nodes the pod's own nodeSelector, required affinity and tolerations allow:
        # kube-scheduler refuses the others itself, and a pod lifted for them would hold a slot
        # of the window for its TTL without ever being bound.
        usable = store.topology.admitted(pod.constraints.view(affinity=True, taints=True))
        names = sorted(store.topology.nodes if usable is None else usable)
        try:
            spec = store.resolve_policy(pod)
            if spec is None:
                places, group = sum(1 for n in names if store.topology.nodes[n].schedulable), None
            else:
                request, snap = store.decision_inputs(pod, spec)
                decision = evaluate(spec, request, snap, names, deadline=time.monotonic() + self.decision_deadline)
                places, group = len(decision.passed()), group_key(pod, spec)
        except PolicyError as err:
            self._tell(pod, "InvalidPlacementPolicy", f"held by {PLACEABLE_GATE} until its policy is fixed: {err}")
            return None, None, False
        if places:
            busy = sum(1 for e in self.lifted.values() if e.in_flight and e.group == group and group is not None)
            if may_place and busy < places:
                return GateAnswer(pod, None, f"a place on {places} node(s)", PLACEABLE_GATE), group, False
            return None, None, False  # its place is being taken by another lift, or the window is full
        if may_show and spec is not None and self._natively_refused(pod, spec, {c.rule for c in decision.classes}):
            why = "no place now; lifted so an autoscaler sees it (its native form refuses the same nodes)"
            return GateAnswer(pod, None, why, PLACEABLE_GATE), group, True
        summary = decision.rejection_summary() if spec is not None else "no node its own constraints allow"
        self._tell(pod, "WaitingForPlace", f"held by {PLACEABLE_GATE} until a node passes its rules: {summary}")
        return None, None, False

    def _natively_refused(self, pod: PodRecord, spec: PlacementPolicySpec, refusing: set[str]) -> bool:
        """The pod carries the exact native form of every rule that refuses it a node (`refusing`):
        each mirrored exactly, and the pod's own hard constraints are those mirrors (engine/implied.py)."""
        if pod.hard_native is None:
            return False
        sts = self.store.statefulsets.get((pod.namespace, pod.shard)) if pod.shard else None
        labels = sts.selector_labels if sts is not None else None
        try:
            imp = implied(spec, group_labels=labels or None, shard_labels=labels or None)
        except ValueError:
            return False
        exact = {m.rule for m in imp.mirrors if m.exactness is Exactness.EXACT}
        return bool(refusing) and refusing <= exact and not pod_disagreements(pod, spec, labels)

    def _tell(self, pod: PodRecord, reason: str, message: str) -> None:
        if self.told.get(pod.uid) != message:
            self.told[pod.uid] = message
            self.events.pod_event(pod, reason, message)

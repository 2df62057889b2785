"""The verbs with the real store and engine, Kubernetes replaced by a recording binder.

Focus: kube-scheduler's asynchronous binding. Filters for later pods can arrive before earlier
pods are bound or visible; reservations must keep a burst within the caps, and bind is the last
word when a guess was wrong.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api.policy import OPT_IN_RESOURCE
from extender.api.wire import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs
from extender.server.ports import AlreadyBound, BindError
from extender.state.objects import parse_pod
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, ZONE, claim, filter_args, node, pod, policy_object, statefulset, volume
from fakes import RecordedEvents, ShownVerbs


class RecordingBinder:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fail = fail

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        if self.fail:
            raise BindError(f"binding {namespace}/{name} to {node} failed: 409 Conflict")
        self.calls.append((f"{namespace}/{name}", node))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


UNREACHED_DEADLINE = 30.0


def make(nodes, *, clock=None, fail=False):
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60, clock=clock or Clock()))
    for kind in KINDS:
        store.replace(kind, [])
    for n in nodes:
        store.apply("nodes", "ADDED", n)
    binder = RecordingBinder(fail)
    # A deadline no small case reaches, however loaded the machine: the answers here must not
    # depend on wall-clock time (the preempt property once lost a node to the 0.5 s deadline
    # beside make test's timed e2e waves). The tests of the deadline set their own.
    return store, binder, ShownVerbs(store, binder, RecordedEvents(), decision_deadline=UNREACHED_DEADLINE)


def names(store):
    return sorted(store.topology.nodes)


def do_filter(verbs, p, candidates):
    return verbs.filter(ExtenderArgs.model_validate(filter_args(p, candidates)))


def do_prioritize(verbs, p, candidates):
    return verbs.prioritize(ExtenderArgs.model_validate(filter_args(p, candidates))).scores


def do_bind(verbs, p, node_name):
    m = p["metadata"]
    return verbs.bind(
        ExtenderBindingArgs(PodName=m["name"], PodNamespace=m["namespace"], PodUID=m["uid"], Node=node_name)
    )


CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}


def test_burst_before_any_binding_is_visible_respects_the_cap() -> None:
    """Filters for pods 2..n run while pod 1 is assumed but not bound (volume PreBind)."""
    store, binder, verbs = make([node(f"n{i}", "a") for i in range(3)])
    store.apply("statefulsets", "ADDED", statefulset("r", 3))
    chosen = []
    for i in range(3):
        p = pod(f"r-{i}", sts="r", policy=CAP1)
        store.apply("pods", "ADDED", p)
        result = do_filter(verbs, p, names(store))
        scores = do_prioritize(verbs, p, result.NodeNames)
        best = max(result.NodeNames, key=lambda n: (scores[n], n))
        chosen.append(best)
    assert len(set(chosen)) == 3  # tentative reservations steered every pod to a free node


def test_bind_refuses_a_choice_that_raced_past_the_cap() -> None:
    store, binder, verbs = make([node("n1", "a"), node("n2", "a")])
    p1, p2 = pod("r-0", sts="r", policy=CAP1), pod("r-1", sts="r", policy=CAP1)
    for p in (p1, p2):
        store.apply("pods", "ADDED", p)
    # Both were filtered before either reservation existed (e.g. the extender restarted).
    assert do_bind(verbs, p1, "n1").Error == ""
    refused = do_bind(verbs, p2, "n1")
    assert "refused to bind to n1" in refused.Error and "allows 1" in refused.Error
    assert binder.calls == [("db/r-0", "n1")]
    assert do_bind(verbs, p2, "n2").Error == ""


def test_tentative_guesses_do_not_refuse_a_real_bind() -> None:
    store, binder, verbs = make([node("n1", "a"), node("n2", "a")])
    p1, p2 = pod("r-0", sts="r", policy=CAP1), pod("r-1", sts="r", policy=CAP1)
    for p in (p1, p2):
        store.apply("pods", "ADDED", p)
    do_filter(verbs, p1, ["n1"])  # p1 tentatively on n1 ...
    assert do_bind(verbs, p2, "n1").Error == ""  # ... but p2 actually got n1 first: bind wins
    assert "allows 1" in do_bind(verbs, p1, "n1").Error


def test_committed_reservation_counts_until_the_watch_shows_the_pod() -> None:
    store, binder, verbs = make([node("n1", "a"), node("n2", "a")])
    p1, p2 = pod("r-0", sts="r", policy=CAP1), pod("r-1", sts="r", policy=CAP1)
    for p in (p1, p2):
        store.apply("pods", "ADDED", p)
    assert do_bind(verbs, p1, "n1").Error == ""
    assert do_filter(verbs, p2, ["n1", "n2"]).NodeNames == ["n2"]
    # The watch catches up: the reservation is replaced by the real pod, same answer.
    bound = dict(p1, spec=dict(p1["spec"], nodeName="n1"))
    store.apply("pods", "MODIFIED", bound)
    assert store.reservations.get(p1["metadata"]["uid"]) is None
    assert do_filter(verbs, p2, ["n1", "n2"]).NodeNames == ["n2"]


def test_reservations_expire() -> None:
    clock = Clock()
    store, binder, verbs = make([node("n1", "a"), node("n2", "a")], clock=clock)
    p1, p2 = pod("r-0", sts="r", policy=CAP1), pod("r-1", sts="r", policy=CAP1)
    for p in (p1, p2):
        store.apply("pods", "ADDED", p)
    do_filter(verbs, p1, ["n1"])
    assert do_filter(verbs, p2, ["n1", "n2"]).NodeNames == ["n2"]
    clock.now = 31
    assert do_filter(verbs, p2, ["n1", "n2"]).NodeNames == ["n1", "n2"]


def test_failed_binding_releases_the_reservation() -> None:
    store, binder, verbs = make([node("n1", "a")], fail=True)
    p = pod("r-0", sts="r", policy=CAP1)
    store.apply("pods", "ADDED", p)
    assert "409 Conflict" in do_bind(verbs, p, "n1").Error
    assert store.reservations.get(p["metadata"]["uid"]) is None


class ApiServerBindings:
    """Bindings as the API server keeps them: a pod's first Binding wins; any later one is refused
    with 409 naming the node it has (what kube-scheduler's retry meets when an earlier try's
    Binding landed after the stanza's timeout)."""

    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        key = f"{namespace}/{name}"
        if key in self.nodes:
            raise AlreadyBound(f"{key} is bound to {self.nodes[key]} already", self.nodes[key])
        self.nodes[key] = node


@pytest.mark.parametrize(
    ("retry_node", "answer"),
    [("n1", ""), ("n2", "bound to n1 already")],
    ids=["retried on the same node: bound", "retried elsewhere: refused, counted where it is"],
)
def test_a_retried_bind_of_a_pod_already_bound_counts_it_on_its_node(retry_node: str, answer: str) -> None:
    """kube-scheduler gave up on the first bind (its timeout), the Binding landed all the same, and
    the retry meets 409. The pod must stay counted on n1 until the watch shows it there: released,
    the next pod of a cap-1 group was placed on n1 beside it."""
    store, _, verbs = make([node("n1", "a"), node("n2", "a")])
    verbs.binder = api = ApiServerBindings()
    p1, p2 = pod("r-0", sts="r", policy=CAP1), pod("r-1", sts="r", policy=CAP1)
    for p in (p1, p2):
        store.apply("pods", "ADDED", p)
    assert do_bind(verbs, p1, "n1").Error == ""  # kube-scheduler stopped waiting before this answer
    assert (do_bind(verbs, p1, retry_node).Error or "").endswith(answer)
    assert do_filter(verbs, p2, ["n1", "n2"]).NodeNames == ["n2"]
    assert "allows 1" in do_bind(verbs, p2, "n1").Error
    assert api.nodes == {"db/r-0": "n1"}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attempts=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2)), max_size=12))
def test_binds_retried_in_any_order_never_put_two_pods_of_a_cap_1_group_on_a_node(attempts) -> None:
    """Whatever kube-scheduler retries where, before the watch shows any binding, the API server
    ends with at most one pod of the group a node."""
    store, _, verbs = make([node(f"n{i}", "a") for i in range(3)])
    verbs.binder = api = ApiServerBindings()
    pods = [pod(f"r-{i}", sts="r", policy=CAP1) for i in range(4)]
    for p in pods:
        store.apply("pods", "ADDED", p)
    for which, target in attempts:
        do_bind(verbs, pods[which], f"n{target}")
        per_node = list(api.nodes.values())
        assert len(per_node) == len(set(per_node)), api.nodes


def _opted_in(name: str, policy: dict, node_name: str | None = None) -> dict:
    """A pod as `adopt --mode in-scheduler` leaves it: the cluster's scheduler, the opt-in resource."""
    p = pod(name, sts="r", policy=policy, scheduler="default-scheduler", node_name=node_name)
    p["spec"]["containers"][0]["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}}
    return p


@pytest.mark.parametrize(
    ("opted_in", "policy", "answered"),
    [
        (True, CAP1, 1),
        (True, None, 4),
        (False, CAP1, 4),
    ],
    ids=[
        "in-scheduler pod with a policy: the one node chosen",
        "in-scheduler pod without a policy: every node (nothing to choose by)",
        "second-scheduler pod: every passing node (its scheduler binds through the extender)",
    ],
)
def test_filter_answers_an_opted_in_pod_the_one_node_it_chose(opted_in: bool, policy, answered: int) -> None:
    """The in-scheduler stanza has no bindVerb: kube-scheduler binds to the one node it is left."""
    store, _, verbs = make([node(f"n{i}", "a") for i in range(4)])
    p = _opted_in("r-0", policy) if opted_in else pod("r-0", sts="r", policy=policy)
    store.apply("pods", "ADDED", p)
    result = do_filter(verbs, p, names(store))
    assert result.Error == "" and len(result.NodeNames) == answered, result
    held = store.reservations.get(p["metadata"]["uid"])
    chosen = opted_in and policy is not None
    if chosen:
        assert held is not None and held.node == result.NodeNames[0]


def test_the_chosen_node_is_the_best_scored_one() -> None:
    """A zone spread: the chosen node is in the emptiest zone (the score kube-scheduler no longer adds)."""
    store, _, verbs = make([node("a1", "a"), node("a2", "a"), node("b1", "b"), node("b2", "b")])
    spread = {"spread": [{"topologyKey": ZONE, "maxSkew": 3}]}
    for i, on in enumerate(["a1", "a2"]):
        store.apply("pods", "ADDED", _opted_in(f"r-{i}", spread, node_name=on))
    p = _opted_in("r-2", spread)
    store.apply("pods", "ADDED", p)
    assert do_filter(verbs, p, names(store)).NodeNames in (["b1"], ["b2"])


CAPS = st.sampled_from(
    [
        CAP1,
        {"caps": [{"topologyKey": HOST, "max": 2}]},
        {"caps": [{"topologyKey": ZONE, "max": 3}, {"topologyKey": HOST, "max": 1}]},
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=CAPS,
    steps=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["bound", "bind failed", "watch"])), max_size=30),
)
def test_kube_scheduler_binding_the_chosen_nodes_never_breaks_a_cap(policy, steps) -> None:
    """In-scheduler mode, whatever the order: kube-scheduler binds a pod to the node filter answered
    (or its bind fails and it is filtered again later), and the watch shows a binding whenever it
    does, or never. The API server never holds more of the group on a node or zone than the caps."""
    nodes = [node(f"{z}{i}", z) for z in "ab" for i in range(3)]
    store, _, verbs = make(nodes)
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][ZONE] for n in nodes}
    pods_ = [_opted_in(f"r-{i}", policy) for i in range(6)]
    for p in pods_:
        store.apply("pods", "ADDED", p)
    bound: dict[int, str] = {}  # as the API server has it
    for which, step in steps:
        if step == "watch":
            if which in bound:
                store.apply("pods", "MODIFIED", _opted_in(f"r-{which}", policy, node_name=bound[which]))
            continue
        if which in bound:
            continue  # kube-scheduler never filters a bound pod again
        answer = do_filter(verbs, pods_[which], names(store)).NodeNames or []
        assert len(answer) <= 1, answer
        if answer and step == "bound":
            bound[which] = answer[0]
        for key, of in ((HOST, lambda n: n), (ZONE, zone_of.get)):
            limit = next((c["max"] for c in policy["caps"] if c["topologyKey"] == key), None)
            if limit is not None:
                assert max(Counter(of(n) for n in bound.values()).values(), default=0) <= limit, bound


@pytest.mark.parametrize(
    ("opted_in", "fail", "written", "wakes"),
    [(True, False, True, True), (True, True, False, False), (False, False, True, False)],
    ids=[
        "opted in, bound: written, the gate woken",
        "opted in, Binding refused: nothing",
        "second-scheduler pod, bound: written (a retry finds it), no gate to wake",
    ],
)
def test_an_accepted_binding_is_marked_written_and_an_opted_in_one_wakes_the_gate(opted_in, fail, written, wakes):
    """In-scheduler mode: the placeable gate frees the lift's slot on this mark (place_gate.py);
    and a retried bind of any pod finds it where the API server has it."""
    store, binder, verbs = make([node("n1", "a")], fail=fail)
    p = pod("r-0", sts="r", policy=CAP1, scheduler="default-scheduler" if opted_in else "placement-scheduler")
    if opted_in:
        p["spec"]["containers"][0]["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}}
    store.apply("pods", "ADDED", p)
    store.gate_work.clear()
    do_bind(verbs, p, "n1")
    assert store.reservations.written(p["metadata"]["uid"]) is written
    assert store.gate_work.is_set() is wakes


def test_bind_of_an_unknown_pod_is_refused_not_blind() -> None:
    store, binder, verbs = make([node("n1", "a")])
    result = do_bind(verbs, pod("ghost-0", sts="g"), "n1")
    assert "not in the extender's cache" in result.Error and binder.calls == []


def test_pod_without_policy_binds_anywhere() -> None:
    store, binder, verbs = make([node("n1", "a")])
    p = pod("plain", labels={"app": "x"})
    store.apply("pods", "ADDED", p)
    assert do_bind(verbs, p, "n1").Error == "" and binder.calls == [("db/plain", "n1")]


def test_terminating_pods_count_finished_pods_do_not() -> None:
    store, binder, verbs = make([node("n1", "a"), node("n2", "a"), node("n3", "a")])
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n1", terminating=True))
    store.apply("pods", "ADDED", pod("r-1", sts="r", node_name="n2", phase="Succeeded"))
    result = do_filter(verbs, pod("r-2", sts="r", policy=CAP1), names(store))
    assert result.NodeNames == ["n2", "n3"]


def test_named_policy_groups_several_statefulsets() -> None:
    store, binder, verbs = make([node(f"n{i}", z) for i, z in enumerate("aabbcc")])
    spec = {
        "group": {"selector": {"matchLabels": {"cluster": "redis-a"}}},
        "caps": [{"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"}],
    }
    store.apply("policies", "ADDED", policy_object("redis-a", spec))
    for s in range(3):
        store.apply("statefulsets", "ADDED", statefulset(f"shard{s}", 2, labels={"cluster": "redis-a"}))
    # 6 pods: fewer than 3 per zone. Zone a already holds 2 (from two different shards).
    store.apply(
        "pods",
        "ADDED",
        pod("shard0-0", sts="shard0", node_name="n0", labels={"cluster": "redis-a"}, policy_name="redis-a"),
    )
    store.apply(
        "pods",
        "ADDED",
        pod("shard1-0", sts="shard1", node_name="n1", labels={"cluster": "redis-a"}, policy_name="redis-a"),
    )
    p = pod("shard2-0", sts="shard2", labels={"cluster": "redis-a"}, policy_name="redis-a")
    result = do_filter(verbs, p, names(store))
    assert result.NodeNames == ["n2", "n3", "n4", "n5"]
    assert "already holds 2" in do_filter(verbs, p, ["n0"]).FailedNodes["n0"]


def test_ordinal_pod_may_follow_its_volume() -> None:
    """crl-scheduler: a pod whose PVC is bound in zone c may go to c even if its ideal zone differs."""
    store, binder, verbs = make([node(f"n{z}", z) for z in "abc"])
    store.apply("statefulsets", "ADDED", statefulset("crdb", 3, claim_templates=("data",)))
    store.apply("volumes", "ADDED", volume("pv-1", "c"))
    store.apply("claims", "ADDED", claim("data-crdb-1", "pv-1"))
    p = pod("crdb-1", sts="crdb", policy={"ordinalZones": {}}, claims=("data-crdb-1",))
    result = do_filter(verbs, p, names(store))
    # The volume also pins the order (crl): ordinal 1 -> c, so zone c is both ideal and the volume's.
    assert result.NodeNames == ["nc"]


def test_preempt_keeps_only_victim_sets_that_fix_the_pod_and_empty_no_zone() -> None:
    store, binder, verbs = make([node("n1", "a"), node("n2", "a"), node("n3", "b")])
    cap = {"caps": [{"topologyKey": HOST, "max": 1}], "zones": {"allowed": ["a", "b"]}}
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n1", policy=cap, uid="u-r0"))
    store.apply("pods", "ADDED", pod("other", node_name="n2", uid="u-other"))
    store.apply("pods", "ADDED", pod("r-1", sts="r", node_name="n3", policy=cap, uid="u-r1"))
    preemptor = pod("r-2", sts="r", policy=cap)
    args = ExtenderPreemptionArgs.model_validate(
        {
            "Pod": preemptor,
            "NodeNameToMetaVictims": {
                "n1": {
                    "Pods": [{"UID": "u-r0"}],
                    "NumPDBViolations": 0,
                },  # would empty nothing? r-0 is zone a's only r pod
                "n2": {"Pods": [{"UID": "u-other"}], "NumPDBViolations": 0},  # frees n2: fine
                "n3": {"Pods": [{"UID": "u-other"}], "NumPDBViolations": 0},  # n3 still holds r-1: cap broken
            },
        }
    )
    result = verbs.preempt(args)
    assert sorted(result.NodeNameToMetaVictims) == ["n2"]


@pytest.mark.parametrize("empty", [[], None], ids=["[]", "null"])
@pytest.mark.parametrize("cache_capable", [True, False], ids=["NodeNameToMetaVictims", "NodeNameToVictims"])
def test_preempt_keeps_placeholders_with_no_victims_and_counts_them_apart(cache_capable: bool, empty) -> None:
    """Kubernetes 1.38's placeholders (kubernetes#135486) beside ordinary victim sets, in either node
    mode: a candidate with no victims is kept with none where the preemptor passes as things are
    (n4: empty, in zone b) and counted `placeholder`; one where it does not (n3 still holds r-1, so
    the cap) is refused; the victim set that frees n2 is kept with its victims and counted `kept`."""
    store, _, verbs = make([node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")])
    cap = {"caps": [{"topologyKey": HOST, "max": 1}], "zones": {"allowed": ["a", "b"]}}
    placed = {
        "u-r0": pod("r-0", sts="r", node_name="n1", policy=cap, uid="u-r0"),
        "u-other": pod("other", node_name="n2", uid="u-other"),
        "u-r1": pod("r-1", sts="r", node_name="n3", policy=cap, uid="u-r1"),
    }
    for p in placed.values():
        store.apply("pods", "ADDED", p)
    proposed = {"n1": ["u-r0"], "n2": ["u-other"], "n3": empty, "n4": empty}

    def victims(uids):
        if uids is None:
            return {"Pods": None, "NumPDBViolations": 0}
        pods = [{"UID": u} for u in uids] if cache_capable else [placed[u] for u in uids]
        return {"Pods": pods, "NumPDBViolations": 0}

    key = "NodeNameToMetaVictims" if cache_capable else "NodeNameToVictims"
    args = {"Pod": pod("r-2", sts="r", policy=cap), key: {n: victims(u) for n, u in proposed.items()}}
    result = verbs.preempt(ExtenderPreemptionArgs.model_validate(args))
    kept = {n: [p.UID for p in meta.Pods or ()] for n, meta in (result.NodeNameToMetaVictims or {}).items()}
    assert kept == {"n2": ["u-other"], "n4": []}
    assert result.NodeNameToMetaVictims["n4"].Pods == []  # type: ignore[index]  # written as [], never null
    counted = {r: verbs.metrics.preemptions.value(result=r) for r in ("kept", "placeholder", "refused")}
    assert counted == {"kept": 1, "placeholder": 1, "refused": 2}


# -- bounded decisions ---------------------------------------------------------------------------


def test_a_group_whose_statefulsets_add_up_past_the_limit_gets_the_validation_message() -> None:
    """10^8 replicas: the pod stays Pending with a message naming group.size and the limit,
    like every invalid policy, and the answer comes at once (nothing is counted per pod)."""
    store, _, verbs = make([node("n1", "a"), node("n2", "b")])
    store.apply("statefulsets", "ADDED", statefulset("huge", 100_000_000))
    p = pod(
        "huge-0",
        sts="huge",
        policy={"caps": [{"topologyKey": HOST, "max": 1}], "spread": [{"topologyKey": ZONE, "maxSkew": 1}]},
    )
    result = do_filter(verbs, p, ["n1", "n2"])
    assert not result.NodeNames
    message = result.Error
    assert message.startswith("invalid placement policy for pod db/huge-0: group.size")
    assert "100,000,000" in message and "1,000,000" in message
    assert verbs.metrics.pod_decisions.value(result="invalid_policy") == 1
    assert do_prioritize(verbs, p, ["n1", "n2"]) == {"n1": 0, "n2": 0}
    store.apply("pods", "ADDED", p)
    bound = verbs.bind(ExtenderBindingArgs(PodName="huge-0", PodNamespace="db", PodUID="uid-db-huge-0", Node="n1"))
    assert "group.size" in bound.Error


def test_a_decision_past_its_deadline_falls_back_to_the_hard_rules_and_is_counted() -> None:
    """NetEase's trap (the Redis design's appendix 2) with no time left: the dead end is not filtered, the
    hard rules still are, and the fallback shows in the metric."""
    nodes = [node(f"node{i + 1}", "abc"[i // 2]) for i in range(6)]
    spec = {
        "group": {"size": 6, "selector": {"matchLabels": {"app": "redis"}}},
        "shardAntiAffinity": [{"topologyKey": ZONE}],
        "caps": [
            {"topologyKey": HOST, "fraction": "1/3", "comparison": "LessThan"},
            {"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"},
        ],
    }
    placed = {
        "sts0-0": ("sts0", "node1"),
        "sts1-0": ("sts1", "node4"),
        "sts2-0": ("sts2", "node6"),
        "sts0-1": ("sts0", "node3"),
    }

    def decide(deadline: float) -> tuple[list[str], float]:
        store, _, verbs = make(nodes)
        verbs.decision_deadline = deadline
        for sts in ("sts0", "sts1", "sts2"):
            store.apply("statefulsets", "ADDED", statefulset(sts, 2, labels={"app": "redis"}))
        for name, (sts, where) in placed.items():
            store.apply("pods", "ADDED", pod(name, sts=sts, node_name=where, policy=spec, labels={"app": "redis"}))
        me = pod("sts1-1", sts="sts1", policy=spec, labels={"app": "redis"})
        result = do_filter(verbs, me, [n["metadata"]["name"] for n in nodes])
        return sorted(result.NodeNames), verbs.metrics.fallbacks.value(reason="deadline")

    assert decide(5.0) == (["node5"], 0)  # node2 is the trap
    assert decide(1e-9) == (["node2", "node5"], 1)


def test_the_lock_hold_time_is_reported_by_holder() -> None:
    store, _, verbs = make([node("n1", "a")])
    do_filter(verbs, pod("w-0", sts="w", policy={"caps": [{"topologyKey": HOST, "max": 1}]}), ["n1"])
    assert verbs.metrics.lock_hold.count(holder="filter") == 1
    assert 'extender_store_lock_hold_seconds_bucket{holder="filter",le="+Inf"} 1' in verbs.metrics.render()


# -- prioritize reuses filter's decision exactly when nothing it read changed ----------------------

SPREAD_CAP = {"caps": [{"topologyKey": HOST, "max": 2}], "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
EVENTS = {
    # name: (changes what the group's decision reads, apply(store))
    "another namespace's pod": (False, lambda s: s.apply("pods", "ADDED", pod("x-0", namespace="other", sts="x"))),
    "a group pod updated in place": (
        False,
        lambda s: s.apply("pods", "MODIFIED", pod("r-0", sts="r", node_name="n0", policy=SPREAD_CAP, phase="Running")),
    ),
    "another group's reservation": (
        False,
        lambda s: s.reservations.commit(parse_pod(pod("y-0", namespace="other", sts="y")), "n1"),
    ),
    "a group pod bound": (True, lambda s: s.apply("pods", "ADDED", pod("r-2", sts="r", node_name="n3"))),
    "a node relabelled": (True, lambda s: s.apply("nodes", "MODIFIED", node("n5", "a"))),
    "a group pod deleted": (True, lambda s: s.apply("pods", "DELETED", pod("r-0", sts="r", node_name="n0"))),
}


def _counting(monkeypatch) -> list[int]:
    import extender.server.verbs

    calls = [0]
    real = extender.server.verbs.evaluate

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(extender.server.verbs, "evaluate", counted)
    return calls


def _reuse_setup():
    store, _, verbs = make([node(f"n{i}", "abc"[i % 3]) for i in range(6)])
    store.apply("statefulsets", "ADDED", statefulset("r", 6))
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n0", policy=SPREAD_CAP))
    store.apply("pods", "ADDED", pod("r-1", sts="r", node_name="n1", policy=SPREAD_CAP))
    me = pod("r-3", sts="r", policy=SPREAD_CAP)
    store.apply("pods", "ADDED", me)
    return store, verbs, me


def test_prioritize_reuses_filters_decision_when_nothing_it_read_changed(monkeypatch) -> None:
    for name, (changes, apply) in EVENTS.items():
        store, verbs, me = _reuse_setup()
        calls = _counting(monkeypatch)
        passed = do_filter(verbs, me, names(store)).NodeNames
        apply(store)
        calls[0] = 0
        scores = do_prioritize(verbs, me, passed)
        assert calls[0] == (1 if changes else 0), name  # decided again exactly when an input moved
        verbs._last = None
        assert scores == do_prioritize(verbs, me, passed), name  # the scores of a fresh decision either way


def test_prioritize_reads_no_inputs_when_the_store_has_not_moved_since_filter(monkeypatch) -> None:
    """kube-scheduler calls prioritize right after filter: when no event, list or reservation
    came in between, filter's decision is reused without reading the inputs again; any change
    (even one the decision does not read) goes through the full comparison."""
    store, verbs, me = _reuse_setup()
    calls = _counting(monkeypatch)
    reads = [0]
    real = store.decision_inputs

    def counted(*args, **kwargs):
        reads[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "decision_inputs", counted)
    passed = do_filter(verbs, me, names(store)).NodeNames
    calls[0] = reads[0] = 0
    quiet = do_prioritize(verbs, me, passed)
    assert (calls[0], reads[0]) == (0, 0)
    passed = do_filter(verbs, me, names(store)).NodeNames
    EVENTS["another namespace's pod"][1](store)
    calls[0] = reads[0] = 0
    assert do_prioritize(verbs, me, passed) == quiet
    assert (calls[0], reads[0]) == (0, 1)  # the version moved: inputs read, compared, still reused
    passed = do_filter(verbs, me, names(store)).NodeNames
    other = dict(me, metadata=dict(me["metadata"], labels={**me["metadata"]["labels"], "extra": "label"}))
    calls[0] = reads[0] = 0
    do_prioritize(verbs, other, passed)
    assert reads[0] == 1  # the same uid with another pod body: never the fast path


SPREAD1 = {"spread": [{"topologyKey": ZONE, "maxSkew": 1}]}


def test_bind_does_not_refuse_a_skew_that_pods_in_flight_are_closing() -> None:
    """Zones a:1, b:1, c:0 bound; x is held for zone c (filter + prioritize), y binds in zone a.
    Bound pods alone say skew 2; with x counted, 1. Refusing would rest on the guess that x
    never lands."""
    store, binder, verbs = make([node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")])
    store.apply("statefulsets", "ADDED", statefulset("s", 6))
    store.apply("pods", "ADDED", pod("s-0", sts="s", node_name="a1", policy=SPREAD1))
    store.apply("pods", "ADDED", pod("s-1", sts="s", node_name="b1", policy=SPREAD1))
    x, y = pod("s-2", sts="s", policy=SPREAD1), pod("s-3", sts="s", policy=SPREAD1)
    store.apply("pods", "ADDED", x)
    store.apply("pods", "ADDED", y)
    assert do_filter(verbs, x, names(store)).NodeNames == ["c1"]
    do_prioritize(verbs, x, ["c1"])
    assert do_bind(verbs, y, "a2").Error == ""
    assert binder.calls == [("db/s-3", "a2")]


def test_bind_still_refuses_a_skew_that_the_pods_in_flight_make_worse() -> None:
    store, binder, verbs = make([node("a1", "a"), node("a2", "a"), node("a3", "a"), node("b1", "b"), node("c1", "c")])
    store.apply("statefulsets", "ADDED", statefulset("s", 6))
    store.apply("pods", "ADDED", pod("s-0", sts="s", node_name="a1", policy=SPREAD1))
    x, y = pod("s-2", sts="s", policy=SPREAD1), pod("s-3", sts="s", policy=SPREAD1)
    store.apply("pods", "ADDED", x)
    store.apply("pods", "ADDED", y)
    store.reservations.commit(parse_pod(x), "a2")  # raced past filter: a now holds 2, b and c 0
    assert "skew" in do_bind(verbs, y, "a3").Error
    assert binder.calls == []


def test_ordinal_zones_on_a_pod_without_statefulset_stays_pending_with_the_field_named() -> None:
    store, _, verbs = make([node(f"n{i}", z) for i, z in enumerate("abc")])
    p = pod("web-7d9f-x2x", labels={"app": "web"}, policy={"ordinalZones": {}})
    result = do_filter(verbs, p, names(store))
    assert result.NodeNames == [] and not result.FailedNodes
    assert set(result.FailedAndUnresolvableNodes) == set(names(store))
    assert all("ordinalZones" in r for r in result.FailedAndUnresolvableNodes.values())
    assert any("ordinalZones" in message for _, reason, message in verbs.events.events if reason == "PlacementRejected")


def test_node_selector_narrows_the_spread_through_the_wire() -> None:
    """The pod object of the request carries its nodeSelector: zone c, which it cannot use, is no
    eligible domain of its zone spread (nodeAffinityPolicy Honor, the default)."""
    pools = {"a": "db", "b": "db", "c": "web"}
    store, _, verbs = make([node(f"{z}{i}", z, labels={"pool": pools[z]}) for z in "abc" for i in (1, 2)])
    policy = {"group": {"selector": {"matchLabels": {"app": "db"}}}, "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
    for i, where in enumerate(["a1", "b1"]):
        store.apply("pods", "ADDED", pod(f"db-{i}", labels={"app": "db"}, node_name=where, policy=policy))
    p = pod("db-2", labels={"app": "db"}, policy=policy)
    p["spec"]["nodeSelector"] = {"pool": "db"}
    result = do_filter(verbs, p, ["a1", "a2", "b1", "b2"])
    assert sorted(result.NodeNames) == ["a1", "a2", "b1", "b2"]
    ignore = {**policy, "spread": [{"topologyKey": ZONE, "maxSkew": 1, "nodeAffinityPolicy": "Ignore"}]}
    q = pod("db-3", labels={"app": "db"}, policy=ignore)
    q["spec"]["nodeSelector"] = {"pool": "db"}
    assert do_filter(verbs, q, ["a1", "a2", "b1", "b2"]).NodeNames == []


def _revision_pod(name: str, revision: str, policy: dict, node_name: str | None = None) -> dict:
    return pod(name, labels={"app": "web", "pod-template-hash": revision}, policy=policy, node_name=node_name)


def test_match_label_keys_count_each_revision_apart() -> None:
    """A Deployment of 3 with at most 1 per node on 3 nodes, mid rolling update (maxSurge 1): the
    old revision holds every node. Counted together no node is left and the update stalls; with
    matchLabelKeys [pod-template-hash] the new revision's pods are counted among themselves."""
    base = {"group": {"selector": {"matchLabels": {"app": "web"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    split = {**base, "group": {**base["group"], "matchLabelKeys": ["pod-template-hash"]}}
    for policy, expected in ((base, []), (split, ["n0", "n1", "n2"])):
        store, binder, verbs = make([node(f"n{i}", "a") for i in range(3)])
        for i in range(3):
            store.apply("pods", "ADDED", _revision_pod(f"web-old-{i}", "old", policy, f"n{i}"))
        new = _revision_pod("web-new-0", "new", policy)
        store.apply("pods", "ADDED", new)
        assert sorted(do_filter(verbs, new, names(store)).NodeNames) == expected
        if not expected:
            continue
        # The first new pod lands on n0 (its old pod is going): the next new pod must avoid n0,
        # whether the group's counts are built fresh or kept current by the watch.
        assert do_bind(verbs, new, "n0").Error == ""
        store.apply("pods", "MODIFIED", _revision_pod("web-new-0", "new", policy, "n0"))
        store.apply("pods", "DELETED", _revision_pod("web-old-0", "old", policy, "n0"))
        second = _revision_pod("web-new-1", "new", policy)
        store.apply("pods", "ADDED", second)
        assert sorted(do_filter(verbs, second, names(store)).NodeNames) == ["n1", "n2"]
        old = _revision_pod("web-old-3", "old", policy)  # an old pod still counts its own revision only
        assert sorted(do_filter(verbs, old, names(store)).NodeNames) == ["n0"]


def test_a_node_not_in_the_cache_yet_makes_the_pod_wait_not_park(monkeypatch) -> None:
    """kube-scheduler's informer can show a new node before the extender's watch does. When no
    known node takes the pod, filter answers an Error (retried from the backoff queue in seconds)
    instead of refusing (parked up to a minute); past UNCACHED_NODE_GRACE the node is refused
    like any other, and a known node that takes the pod is answered without waiting."""
    import extender.server.uncached as verbs_module

    now = [1000.0]
    monkeypatch.setattr(verbs_module.time, "monotonic", lambda: now[0])
    store, binder, verbs = make([node("n1", "a")])
    store.apply("pods", "ADDED", pod("r-0", sts="r", node_name="n1", policy=CAP1))
    waiting = pod("r-1", sts="r", policy=CAP1)

    # (seconds since the node was first offered, candidates, Error expected, nodes passed)
    cases = [
        (0.0, ["n1", "new"], True, None),
        (verbs_module.UNCACHED_NODE_GRACE - 1, ["n1", "new"], True, None),
        (verbs_module.UNCACHED_NODE_GRACE + 1, ["n1", "new"], False, []),
    ]
    start = now[0]
    for elapsed, candidates, error, passed in cases:
        now[0] = start + elapsed
        result = do_filter(verbs, waiting, candidates)
        if error:
            assert "node new is not in the extender's cache yet" in result.Error, (elapsed, result)
            assert "kube-scheduler will retry" in result.Error and result.NodeNames is None
        else:
            assert result.Error == "" and result.NodeNames == passed, (elapsed, result)
            assert "cache" in result.FailedNodes["new"]
    assert verbs.metrics.pod_decisions.value(result="node_not_cached") == 2

    # a node the watch never shows, still offered, keeps its expired grace: no endless retries
    now[0] = start + verbs_module.UNCACHED_NODE_FORGET + 10
    assert do_filter(verbs, waiting, ["n1", "new"]).Error == ""

    # once the watch shows it, it is judged like any node
    store.apply("nodes", "ADDED", node("new", "a"))
    result = do_filter(verbs, waiting, ["n1", "new"])
    assert result.Error == "" and result.NodeNames == ["new"]

    # a known node takes the pod: answered at once, the unknown one refused
    result = do_filter(verbs, waiting, ["new", "newer"])
    assert result.Error == "" and result.NodeNames == ["new"]

    # deleted, then created again: the entry went when the watch showed it, so a new grace
    store.apply("nodes", "DELETED", node("new", "a"))
    assert "node new is not in the extender's cache yet" in do_filter(verbs, waiting, ["n1", "new"]).Error

    # not offered for UNCACHED_NODE_FORGET: forgotten, a later miss starts a new grace
    assert "node newer is not in the extender's cache yet" in do_filter(verbs, waiting, ["n1", "newer"]).Error
    now[0] += verbs_module.UNCACHED_NODE_GRACE + 1
    assert do_filter(verbs, waiting, ["n1", "newer"]).Error == ""  # its grace is over
    now[0] += verbs_module.UNCACHED_NODE_FORGET + 1
    assert "node newer is not in the extender's cache yet" in do_filter(verbs, waiting, ["n1", "newer"]).Error

    # the table full: a node not in it gets no grace, whatever the number of candidates
    monkeypatch.setattr(verbs_module, "UNCACHED_NODES_REMEMBERED", 3)
    many = [f"m{i}" for i in range(5)]
    for _ in range(3):
        now[0] += 1
        result = do_filter(verbs, waiting, ["n1", *many])
        assert result.Error == "" or "node m" in result.Error
    now[0] += verbs_module.UNCACHED_NODE_GRACE + 1
    assert do_filter(verbs, waiting, ["n1", *many]).Error == ""  # none of them is retried forever
    assert len(verbs._uncached) <= 3

    # a pod without a policy never waits
    plain = pod("plain", labels={"app": "x"})
    assert do_filter(verbs, plain, ["newest"]).Error == ""


def test_reading_the_inputs_is_not_charged_to_the_dead_end_deadline(monkeypatch) -> None:
    """The first decision for a group builds its counts (0.2-0.5 s at 150,000 placed pods): the
    deadline bounds the dead-end analysis, so it starts once the inputs are read. Here reading
    them takes longer than the whole deadline, and the analysis still runs (no fallback)."""
    store, binder, verbs = make([node(f"n{i}", z) for i, z in enumerate("aabbcc")])
    store.apply("statefulsets", "ADDED", statefulset("r", 4))
    verbs.decision_deadline = 0.05
    read = store.decision_inputs

    def slow_read(*args, **kwargs):
        time.sleep(0.1)
        return read(*args, **kwargs)

    monkeypatch.setattr(store, "decision_inputs", slow_read)
    p = pod("r-0", sts="r", policy=CAP1)
    store.apply("pods", "ADDED", p)
    result = do_filter(verbs, p, names(store))
    assert result.Error == "" and result.NodeNames
    assert verbs.metrics.fallbacks.value(reason="deadline") == 0
    assert verbs._last is not None and verbs._last[2].analysis is not None
    assert not verbs._last[2].fell_back


SPREAD_BY_APP = {
    "group": {"selector": {"matchLabels": {"app": "web"}}},
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}


def _web(name: str, node_name: str | None = None, **kw):
    return pod(name, labels={"app": "web"}, node_name=node_name, policy=SPREAD_BY_APP, phase="Running", **kw)


def test_filter_and_bind_wait_for_the_watch_so_a_replaced_pod_is_not_counted() -> None:
    """A drain with a 0 s grace period: the old pod is deleted and its ReplicaSet creates the
    replacement at once. kube-scheduler may ask before the extender's watch has shown either
    event; the verbs wait until the watch shows the replacement itself, and one watch shows pod
    events in order, so the deletion came first: the decision never counts the old pod (a view
    that did allowed zones b and c, skew 2). A bind for a pod the watch already shows waits not
    at all, and is re-checked against the same fresh view."""
    import threading

    store, binder, verbs = make([node(f"{z}1", z) for z in "abc"])
    verbs.show = False
    placed = {f"web-{z}{i}": f"{z}1" for z in "abc" for i in range(2)}
    for name, where in placed.items():
        store.apply("pods", "ADDED", _web(name, where))
    replacement = _web("web-new")

    def watch_catches_up() -> None:
        time.sleep(0.2)
        store.apply("pods", "DELETED", _web("web-a0", "a1"))
        store.apply("pods", "ADDED", replacement)

    threading.Thread(target=watch_catches_up).start()
    assert do_filter(verbs, replacement, names(store)).NodeNames == ["a1"]
    refused = do_bind(verbs, replacement, "b1")
    assert "refused to bind to b1" in refused.Error and "skew 2 > maxSkew 1" in refused.Error, refused.Error
    assert verbs.metrics.bind_watch_waits.value(outcome="seen") == 0
    assert do_bind(verbs, replacement, "a1").Error == ""
    assert binder.calls == [("db/web-new", "a1")]


def test_filter_and_bind_refuse_a_pod_the_watch_never_shows_within_their_wait() -> None:
    store, binder, verbs = make([node("a1", "a")])
    verbs.watch_wait, verbs.show = 0.05, False
    ghost = _web("web-ghost")
    filtered = do_filter(verbs, ghost, ["a1"])
    assert "not in the extender's cache" in filtered.Error and "kube-scheduler will retry" in filtered.Error
    assert verbs.metrics.pod_decisions.value(result="unknown_pod") == 1
    assert len(store.reservations) == 0, "a filter for a pod the watch does not hold reserves nothing"
    result = do_bind(verbs, ghost, "a1")
    assert "not in the extender's cache" in result.Error and "kube-scheduler will retry" in result.Error
    assert binder.calls == [] and verbs.metrics.binds.value(result="not_seen") == 1


def _replicaset_pod(name: str, policy: dict, app: str = "web") -> dict:
    p = pod(name, labels={"app": app}, policy=policy)
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "uid": "uid-rs", "controller": True}
    ]
    return p


def test_group_rules_on_a_pod_that_can_only_be_its_own_group_are_an_error_naming_the_fix() -> None:
    """A Deployment's pod under a policy with group rules and no group.selector: its group is the
    pod alone (the default group is one StatefulSet's pods), so the rules could never act. The
    filter answers an Error (SchedulerError: no autoscaler buys a node for it) naming the fix."""
    store, binder, verbs = make([node(f"{z}1", z) for z in "abc"])
    spread = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]}
    cases = [
        (spread, "spread"),
        ({"caps": [{"topologyKey": HOST, "max": 1}]}, "caps"),
        ({**spread, "caps": [{"topologyKey": HOST, "max": 1}]}, "caps, spread"),
    ]
    for policy, rules in cases:
        result = do_filter(verbs, _replicaset_pod("web-x", policy), names(store))
        assert f"its {rules} count a group" in result.Error and "group.selector" in result.Error, result.Error
        assert result.NodeNames is None
    assert verbs.metrics.pod_decisions.value(result="invalid_policy") == len(cases)
    # a pod-level rule acts on a pod alone; with a selector the group is the workload's pods
    assert do_filter(verbs, _replicaset_pod("y", {"zones": {"allowed": ["b"]}}, app="y"), names(store)).NodeNames == [
        "b1"
    ]
    selected = {**spread, "group": {"selector": {"matchLabels": {"app": "web"}}}}
    store.apply("pods", "ADDED", _replicaset_pod("web-0", selected) | {"spec": {"nodeName": "a1"}})
    assert sorted(do_filter(verbs, _replicaset_pod("web-z", selected), names(store)).NodeNames) == ["b1", "c1"]


# -- preemption's answer keeps kube-scheduler's victims as sent ------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    placed=st.lists(st.tuples(st.sampled_from(["n1", "n2", "n3", "n4"]), st.booleans()), max_size=6),
    proposals=st.dictionaries(
        st.sampled_from(["n1", "n2", "n3", "n4"]), st.lists(st.integers(0, 5), max_size=3, unique=True), max_size=4
    ),
)
def test_preempt_keeps_a_node_with_exactly_the_victims_sent_or_drops_it(placed, proposals) -> None:
    """For any cluster and any proposal, empty victim lists included (the shape Kubernetes 1.38
    sends, kubernetes#135486): a kept node carries exactly the victims kube-scheduler proposed
    (1.38 refuses an answer with fewer), and a node proposed with no victim is kept exactly where
    the preemptor passes our filter now, since evicting nothing cannot change the verdict."""
    store, _, verbs = make([node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")])
    cap = {"caps": [{"topologyKey": HOST, "max": 1}]}
    uids = []
    for i, (where, grouped) in enumerate(placed):
        uid = f"u-{i}"
        store.apply(
            "pods",
            "ADDED",
            pod(
                f"r-{i}" if grouped else f"o-{i}",
                sts="r" if grouped else None,
                node_name=where,
                policy=cap if grouped else None,
                uid=uid,
            ),
        )
        uids.append(uid)
    preemptor = pod("r-9", sts="r", policy=cap)
    sent = {n: [uids[i] for i in idx if i < len(uids)] for n, idx in proposals.items()}
    passing = set(do_filter(verbs, preemptor, names(store)).NodeNames or ())
    result = verbs.preempt(
        ExtenderPreemptionArgs.model_validate(
            {"Pod": preemptor, "NodeNameToMetaVictims": {n: {"Pods": [{"UID": u} for u in v]} for n, v in sent.items()}}
        )
    )
    kept = result.NodeNameToMetaVictims or {}
    assert set(kept) <= set(sent)
    for n, meta in kept.items():
        assert [p.UID for p in meta.Pods or ()] == sent[n]
    for n, victims in sent.items():
        if not victims:
            assert (n in kept) == (n in passing), n


def _tainted(name: str) -> dict:
    n = node(name, "a")
    n["spec"]["taints"] = [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    return n


@pytest.mark.parametrize(
    ("scheduler", "opt_in", "spec_extra", "target", "want"),
    [
        ("placement-scheduler", False, {}, "n1", ""),
        ("default-scheduler", True, {}, "n1", ""),
        ("nobody-scheduler", False, {}, "n1", "is not this extender's"),
        ("default-scheduler", False, {}, "n1", "is not this extender's"),
        (
            "placement-scheduler",
            False,
            {"nodeSelector": {"disk": "ssd"}},
            "n1",
            "nodeSelector or required node affinity",
        ),
        ("placement-scheduler", False, {"nodeSelector": {"disk": "ssd"}}, "n2", ""),
        ("placement-scheduler", False, {}, "n3", "taint the pod does not tolerate"),
        (
            "placement-scheduler",
            False,
            {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]},
            "n3",
            "",
        ),
    ],
    ids=[
        "its scheduler's pod",
        "an opted-in pod",
        "another scheduler's pod",
        "a default-scheduler pod without the opt-in",
        "a node its nodeSelector excludes",
        "a node its nodeSelector takes",
        "a tainted node it does not tolerate",
        "a tainted node it tolerates",
    ],
)
def test_bind_acts_only_on_its_own_pods_and_their_own_node_constraints(scheduler, opt_in, spec_extra, target, want):
    """Bind is the privileged step. Whoever asks, it binds only the extender's own pods
    as the watch shows them, and never onto a node the pod's own constraints exclude."""
    store, binder, verbs = make([node("n1", "a"), node("n2", "a", labels={"disk": "ssd"}), _tainted("n3")])
    p = pod("p", labels={"app": "x"}, scheduler=scheduler)
    p["spec"].update(spec_extra)
    if opt_in:
        p["spec"]["containers"][0]["resources"] = {"requests": {"placement.extender.dev/opt-in": "1"}}
    store.apply("pods", "ADDED", p)
    result = do_bind(verbs, p, target)
    assert (want in result.Error) if want else result.Error == "", result.Error
    assert binder.calls == ([] if want else [("db/p", target)])


CAP_R = {"group": {"selector": {"matchLabels": {"app": "r"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
# What a caller may write into a request body's Pod: anything but the real pod's uid and name.
FORGERIES = st.fixed_dictionaries(
    {},
    optional={
        "labels": st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["r", "forged", ""]), max_size=2),
        "policy": st.sampled_from([{}, {"caps": [{"topologyKey": HOST, "max": 9}]}, "not: [json"]),
        "policy_name": st.sampled_from(["permissive", "missing"]),
        "namespace": st.sampled_from(["db", "other"]),
        "scheduler": st.sampled_from(["placement-scheduler", "default-scheduler"]),
        "sts": st.sampled_from(["r", "elsewhere"]),
        "node_name": st.sampled_from(["n1", "n2"]),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forgery=FORGERIES)
def test_a_forged_request_body_never_moves_the_real_pod(forgery) -> None:  # noqa: ANN001
    """Whatever a filter, prioritize or bind body claims about a pod (its labels, policy, named
    policy, namespace, scheduler, owner, node), the verbs judge the pod the watch holds: under
    its cap of 1 the occupied n1 is never passed, reserved or bound; a body naming another
    namespace names a pod the watch does not hold, and reserves nothing."""
    store, binder, verbs = make([node("n1", "a"), node("n2", "a")])
    verbs.show, verbs.watch_wait = False, 0.01
    store.apply("policies", "ADDED", policy_object("permissive", {}, namespace=forgery.get("namespace", "db")))
    store.apply("pods", "ADDED", pod("r-0", labels={"app": "r"}, policy=CAP_R, node_name="n1", phase="Running"))
    real = pod("r-1", labels={"app": "r"}, policy=CAP_R)
    store.apply("pods", "ADDED", real)
    uid = real["metadata"]["uid"]
    forged = pod("r-1", uid=uid, **forgery)

    filtered = do_filter(verbs, forged, ["n1", "n2"])
    if forgery.get("namespace", "db") != "db":
        assert "not in the extender's cache" in filtered.Error and filtered.NodeNames is None
    else:
        assert filtered.NodeNames == ["n2"], filtered
    do_prioritize(verbs, forged, ["n1", "n2"])
    held = store.reservations.peek(uid)
    assert held is None or held.node != "n1"
    forged_bind = ExtenderBindingArgs(PodName="r-1", PodNamespace=forgery.get("namespace", "db"), PodUID=uid, Node="n1")
    assert verbs.bind(forged_bind).Error and do_bind(verbs, real, "n1").Error
    assert binder.calls == []

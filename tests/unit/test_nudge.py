"""After a PlacementPolicy is created or edited, the pods waiting for it are nudged (server/nudge.py)
so kube-scheduler tries them again at once: a burst of edits costs at most one write per waiting
pod of the extender's own, and nothing once it has been served."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import POLICY_GENERATION_ANNOTATION
from extender.server.nudge import PolicyNudger
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, node, pod, policy_object

CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}
CAP2 = {"caps": [{"topologyKey": HOST, "max": 2}]}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Writer:
    """Records each write and, as the API server would, shows it in the watch (the pod's annotation)."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store
        self.nudged: list[tuple[str, str]] = []

    def nudge(self, record, generation: str) -> None:  # noqa: ANN001
        self.nudged.append((record.key, generation))
        obj = pod(
            record.name,
            record.namespace,
            sts=record.shard,
            policy_name=record.policy_ref,
            scheduler=record.scheduler_name,
        )
        obj["metadata"]["annotations"][POLICY_GENERATION_ANNOTATION] = generation
        self.store.apply("pods", "MODIFIED", obj)


def policy(spec: dict, generation: int) -> dict:
    obj = policy_object("p", spec)
    obj["metadata"]["generation"] = generation
    return obj


def setup(per_pass: int = 1) -> tuple[ClusterStore, Writer, PolicyNudger, Clock]:
    store = ClusterStore(Reservations())
    store.replace("policies", [policy(CAP1, 1)])  # the first list: not an edit
    for kind in KINDS:
        if kind != "policies":
            store.replace(kind, [])
    store.apply("nodes", "ADDED", node("a1", "a"))
    store.apply("pods", "ADDED", pod("w-0", sts="w", policy_name="p", node_name="a1"))
    store.apply("pods", "ADDED", pod("w-1", sts="w", policy_name="p"))
    store.apply("pods", "ADDED", pod("other-0", sts="other", policy_name="q"))
    store.apply("pods", "ADDED", pod("theirs-0", sts="theirs", policy_name="p", scheduler="default-scheduler"))
    clock, writer = Clock(), Writer(store)
    nudger = PolicyNudger(store, writer, per_pass=per_pass, quiet=0.5, max_delay=10, clock=clock, concurrency=1)
    return store, writer, nudger, clock


def test_an_edit_nudges_the_waiting_pods_of_its_own_that_name_the_policy_only() -> None:
    store, writer, nudger, clock = setup()
    assert nudger.pass_once() == 0, "the first list is not an edit"
    store.apply("policies", "MODIFIED", policy(CAP2, 2))
    assert nudger.pass_once() == 0, "the burst may go on: nothing before the policy is quiet"
    clock.now += 0.5
    assert nudger.pass_once() == 1
    assert writer.nudged == [("db/w-1", "2")], "not the bound pod, not another policy's, not another scheduler's"


def test_a_status_only_update_is_not_an_edit_and_a_large_group_goes_in_batches() -> None:
    store, writer, nudger, clock = setup()
    store.apply("policies", "MODIFIED", policy(CAP1, 1))
    clock.now += 1
    assert nudger.pass_once() == 0
    store.apply("pods", "ADDED", pod("w-2", sts="w", policy_name="p"))
    store.apply("policies", "MODIFIED", policy(CAP2, 2))
    nudger.pass_once()
    clock.now += 1
    assert nudger.pass_once() == 1 and nudger.pass_once() == 1 and nudger.pass_once() == 0
    assert sorted(k for k, _ in writer.nudged) == ["db/w-1", "db/w-2"]


def test_a_relist_is_not_an_edit() -> None:
    store, writer, nudger, clock = setup()
    store.replace("policies", [policy(CAP1, 1)])  # a lost watch relists: same spec
    clock.now += 1
    assert nudger.pass_once() == 0 and writer.nudged == []
    store.replace("policies", [policy(CAP2, 2)])  # a relist that brings a change: an edit
    nudger.pass_once()
    clock.now += 1
    assert nudger.pass_once() == 1


def test_twenty_edits_in_a_burst_write_each_waiting_pod_once_at_the_last_generation() -> None:
    store, writer, nudger, clock = setup(per_pass=100)
    for generation in range(2, 22):
        store.apply("policies", "MODIFIED", policy(CAP1 if generation % 2 else CAP2, generation))
        nudger.pass_once()
        clock.now += 0.1
    clock.now += 0.5
    for _ in range(5):
        nudger.pass_once()
    assert writer.nudged == [("db/w-1", "21")]


def test_a_policy_edited_without_pause_is_still_served_every_max_delay() -> None:
    store, writer, nudger, clock = setup(per_pass=100)
    for generation in range(2, 2 + 250):  # 25 s of edits, 0.1 s apart
        store.apply("policies", "MODIFIED", policy(CAP1 if generation % 2 else CAP2, generation))
        nudger.pass_once()
        clock.now += 0.1
    assert 2 <= len(writer.nudged) <= 3, writer.nudged  # once each 10 s of the burst, not once an edit


def test_the_pending_set_is_bounded() -> None:
    store, writer, nudger, clock = setup()
    nudger.max_pending = 1
    store.apply("pods", "ADDED", pod("w-2", sts="w", policy_name="p"))
    store.apply("policies", "MODIFIED", policy(CAP2, 2))
    nudger.pass_once()
    clock.now += 1
    nudger.pass_once()
    assert len(writer.nudged) == 1 and nudger.dropped == 1


# A random history: edits at random times, pods arriving, bound or deleted between passes.
STEP = st.one_of(
    st.tuples(st.just("edit"), st.sampled_from(["p", "q"]), st.floats(0.0, 3.0)),
    st.tuples(st.just("arrive"), st.integers(0, 9), st.sampled_from(["placement-scheduler", "default-scheduler"])),
    st.tuples(st.just("bind"), st.integers(0, 9), st.just(None)),
    st.tuples(st.just("pass"), st.just(None), st.floats(0.0, 3.0)),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEP, max_size=60), per_pass=st.integers(1, 5))
def test_writes_are_at_most_one_per_own_waiting_pod_per_burst_and_stop_once_served(steps, per_pass) -> None:  # noqa: ANN001
    """Whatever the history: each write goes to a waiting pod of the extender's own that names the
    edited policy, at that policy's generation of the moment; between two collections of a burst a
    pod is written at most once; once edits stop, the last burst served, nothing more is written and
    every pod of its own that waited at its policy's last edit and still waits carries that edit's
    generation (a pod that arrived later needs none: kube-scheduler tries it as it arrives)."""
    store, writer, nudger, clock = setup(per_pass)
    generations = {"p": 1, "q": 1}
    created = policy_object("q", CAP1)
    created["metadata"]["generation"] = 1
    store.apply("policies", "ADDED", created)  # a creation is an edit: served before the history
    nudger.pass_once()
    clock.now += 20
    for _ in range(3):
        nudger.pass_once()
    writer.nudged.clear()
    collections = 0
    collect = nudger._collect  # noqa: SLF001

    def counting_collect() -> None:
        nonlocal collections
        collections += 1
        collect()

    nudger._collect = counting_collect  # noqa: SLF001
    written_since: dict[int, set[str]] = {}
    waiting_at_last_edit: dict[str, set[str]] = {}
    for kind, what, arg in steps:
        if kind == "edit":
            generations[what] += 1
            obj = policy_object(what, CAP1 if generations[what] % 2 else CAP2)
            obj["metadata"]["generation"] = generations[what]
            store.apply("policies", "MODIFIED", obj)
            waiting_at_last_edit[what] = {
                p.key for p in store.pods.values() if p.policy_ref == what and p.node is None and store.owns(p)
            }
            clock.now += arg
        elif kind == "arrive" and f"uid-db-x-{what}" not in store.pods:
            store.apply("pods", "ADDED", pod(f"x-{what}", policy_name="p" if what % 2 else "q", scheduler=arg))
        elif kind == "bind":
            store.apply("pods", "ADDED", pod(f"x-{what}", policy_name="p" if what % 2 else "q", node_name="a1"))
        elif kind == "pass":
            before = len(writer.nudged)
            nudger.pass_once()
            for key, generation in writer.nudged[before:]:
                record = next(p for p in store.pods.values() if p.key == key)
                assert store.owns(record) and record.node is None, key
                assert generation == str(generations[record.policy_ref]), (key, generation, generations)
                seen = written_since.setdefault(collections, set())
                assert key not in seen, f"{key} written twice in one burst"
                seen.add(key)
            clock.now += arg
    nudger.pass_once()
    clock.now += 20  # the edits stop: the last burst is collected and served
    for _ in range(100):
        nudger.pass_once()
    served = len(writer.nudged)
    clock.now += 20
    for _ in range(5):
        nudger.pass_once()
    assert len(writer.nudged) == served, "writes after the burst was served"
    for name, keys in waiting_at_last_edit.items():
        for record in store.pods.values():
            if record.key in keys and record.node is None:
                assert record.nudged_generation == str(generations[name]), record.key

"""The store's per-group counts, kept current event by event, against counting from scratch.

Any sequence of pod events (created, bound, moved, relabelled out of the group, finished,
terminating, deleted, or a status change alone, which the store swaps in without touching an
index) must leave each group's counts equal to a fresh count of its bound pods, and a decision
made from the counted snapshot must equal one made from the full list.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.engine import evaluate
from extender.engine.model import GroupCounts
from extender.state.objects import parse_pod
from extender.state.store import KINDS, ClusterStore

from builders import HOST, ZONE, node, pod, statefulset

NODES = [node(f"n{i}", "ab"[i % 2]) for i in range(4)]
SELECTED = {
    "group": {"selector": {"matchLabels": {"app": "db"}}},
    "caps": [{"topologyKey": HOST, "max": 2}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1}],
    "shardAntiAffinity": [{"topologyKey": ZONE}],
}
DEFAULT = {"caps": [{"topologyKey": HOST, "max": 2}], "ordinalZones": {}}

events = st.lists(
    st.tuples(
        st.integers(0, 7),  # which pod
        st.sampled_from(["create", "bind", "move", "relabel", "finish", "terminate", "delete", "run"]),
        st.integers(0, 3),  # a node
    ),
    max_size=30,
)


def _pod(i: int, action: str, where: int, policy: dict) -> dict:
    sts = f"s{i % 2}"
    labels = {"app": "other" if action == "relabel" else "db"}
    obj = pod(
        f"{sts}-{i // 2}",
        sts=sts,
        labels=labels,
        policy=policy,
        node_name=None if action == "create" else f"n{where}",
        phase={"finish": "Succeeded", "run": "Running"}.get(action, "Pending"),
        terminating=action == "terminate",
    )
    return obj


def listed(pods: list[dict]) -> ClusterStore:
    """A store listed from scratch: the nodes, both StatefulSets and `pods`."""
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.replace("nodes", NODES)
    store.replace(
        "statefulsets", [statefulset("s0", 4, labels={"app": "db"}), statefulset("s1", 4, labels={"app": "db"})]
    )
    store.replace("pods", pods)
    return store


@settings(max_examples=200, deadline=None)
@given(steps=events, policy=st.sampled_from([SELECTED, DEFAULT]))
def test_counts_kept_by_events_equal_a_fresh_count_and_decide_alike(steps, policy) -> None:
    store = listed([])
    me = parse_pod(pod("s0-9", sts="s0", labels={"app": "db"}, policy=policy))
    spec = store.resolve_policy(me)
    store.decision_inputs(me, spec)  # the index exists from the start, so every event updates it
    names = [n["metadata"]["name"] for n in NODES]
    for i, action, where in steps:
        obj = _pod(i, action, where, policy)
        store.apply("pods", "DELETED" if action == "delete" else "MODIFIED", obj)
        request, counted = store.decision_inputs(me, spec)
        _, plain = store.decision_inputs(me, spec, counted=False)
        fresh = GroupCounts.of(p for p in plain.placements if p.node is not None)
        assert counted.counted is not None and counted.counted == fresh
        assert counted.placed == plain.placed
        a = evaluate(spec, request, counted, names)
        b = evaluate(spec, request, plain, names)
        assert {n: (v.outcome, v.reason, v.score) for n, v in a.verdicts.items()} == {
            n: (v.outcome, v.reason, v.score) for n, v in b.verdicts.items()
        }
        assert a.notes == b.notes


@settings(max_examples=200, deadline=None)
@given(steps=events, policy=st.sampled_from([SELECTED, DEFAULT]))
def test_a_store_kept_by_events_equals_one_listed_from_scratch(steps, policy) -> None:
    """The watch's events leave the store as a fresh list of the same pods would: the same pods
    on the same nodes, the same group counts and the same decision (the oracle for the store's
    in-place swap of events that change no index)."""
    kept = listed([])
    me = parse_pod(pod("s0-9", sts="s0", labels={"app": "db"}, policy=policy))
    spec = kept.resolve_policy(me)
    kept.decision_inputs(me, spec)
    names = [n["metadata"]["name"] for n in NODES]
    current: dict[str, dict] = {}
    for i, action, where in steps:
        obj = _pod(i, action, where, policy)
        uid = obj["metadata"]["uid"]
        if action == "delete":
            kept.apply("pods", "DELETED", obj)
            current.pop(uid, None)
        else:
            kept.apply("pods", "MODIFIED", obj)
            current[uid] = obj
        fresh = listed(list(current.values()))
        assert {u: (p.node, p.finished, p.terminating) for u, p in kept.pods.items()} == {
            u: (p.node, p.finished, p.terminating) for u, p in fresh.pods.items()
        }
        (request, a), (_, b) = kept.decision_inputs(me, spec), fresh.decision_inputs(me, spec)
        assert a.counted == b.counted
        x, y = evaluate(spec, request, a, names), evaluate(spec, request, b, names)
        assert {n: (v.outcome, v.reason, v.score) for n, v in x.verdicts.items()} == {
            n: (v.outcome, v.reason, v.score) for n, v in y.verdicts.items()
        }

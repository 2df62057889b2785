"""After a PlacementPolicy is created or edited, the pods waiting for it are nudged (server/nudge.py)
so kube-scheduler tries them again at once; nothing else is touched."""

from __future__ import annotations

from extender.server.nudge import PolicyNudger
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, node, pod, policy_object

CAP1 = {"caps": [{"topologyKey": HOST, "max": 1}]}
CAP2 = {"caps": [{"topologyKey": HOST, "max": 2}]}


class Writer:
    def __init__(self) -> None:
        self.nudged: list[tuple[str, str]] = []

    def nudge(self, pod, generation: str) -> None:  # noqa: ANN001
        self.nudged.append((pod.key, generation))


def policy(spec: dict, generation: int) -> dict:
    obj = policy_object("p", spec)
    obj["metadata"]["generation"] = generation
    return obj


def setup() -> tuple[ClusterStore, Writer, PolicyNudger]:
    store = ClusterStore(Reservations())
    store.replace("policies", [policy(CAP1, 1)])  # the first list: not an edit
    for kind in KINDS:
        if kind != "policies":
            store.replace(kind, [])
    store.apply("nodes", "ADDED", node("a1", "a"))
    store.apply("pods", "ADDED", pod("w-0", sts="w", policy_name="p", node_name="a1"))
    store.apply("pods", "ADDED", pod("w-1", sts="w", policy_name="p"))
    store.apply("pods", "ADDED", pod("other-0", sts="other", policy_name="q"))
    writer = Writer()
    return store, writer, PolicyNudger(store, writer, per_pass=1)


def test_an_edit_nudges_the_waiting_pods_that_name_the_policy_only() -> None:
    store, writer, nudger = setup()
    assert nudger.pass_once() == 0, "the first list is not an edit"
    store.apply("policies", "MODIFIED", policy(CAP2, 2))
    assert nudger.pass_once() == 1
    assert writer.nudged == [("db/w-1", "2")], "not the bound pod, not another policy's"


def test_a_status_only_update_is_not_an_edit_and_a_large_group_goes_in_batches() -> None:
    store, writer, nudger = setup()
    store.apply("policies", "MODIFIED", policy(CAP1, 1))
    assert nudger.pass_once() == 0
    store.apply("pods", "ADDED", pod("w-2", sts="w", policy_name="p"))
    store.apply("policies", "MODIFIED", policy(CAP2, 2))
    assert nudger.pass_once() == 1 and nudger.pass_once() == 1 and nudger.pass_once() == 0
    assert sorted(k for k, _ in writer.nudged) == ["db/w-1", "db/w-2"]


def test_a_relist_is_not_an_edit() -> None:
    store, writer, nudger = setup()
    store.replace("policies", [policy(CAP1, 1)])  # a lost watch relists: same spec
    assert nudger.pass_once() == 0 and writer.nudged == []
    store.replace("policies", [policy(CAP2, 2)])  # a relist that brings a change: an edit
    assert nudger.pass_once() == 1

"""The scale-down controller's pass (server/deletion_costs.py): which pods get which cost, that only
changed costs are written, within the rate, and that StatefulSet pods and pods without a policy are
never touched."""

from __future__ import annotations

from extender.server.deletion_costs import DeletionCostController, wanted_costs
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import ZONE, node, pod

SPREAD = {"group": {"selector": {"matchLabels": {"app": "web"}}}, "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}


def rs_pod(name: str, where: str, policy=SPREAD, cost: str | None = None) -> dict:  # noqa: ANN001
    obj = pod(name, labels={"app": "web"}, policy=policy, node_name=where)
    obj["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "web-1", "controller": True, "uid": "rs"}]
    if cost is not None:
        obj["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"] = cost
    return obj


def cache() -> ClusterStore:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        store.apply("nodes", "ADDED", node(name, zone))
    return store


class Writer:
    def __init__(self) -> None:
        self.costs: dict[str, int] = {}

    def set_cost(self, pod, cost: int) -> None:  # noqa: ANN001
        self.costs[pod.key] = cost


def test_the_crowded_zone_goes_first_and_nothing_else_is_touched() -> None:
    store = cache()
    for name, where in (("w-1", "a1"), ("w-2", "a2"), ("w-3", "b1")):
        store.apply("pods", "ADDED", rs_pod(name, where))
    store.apply("pods", "ADDED", pod("sts-0", sts="db", labels={"app": "web"}, policy=SPREAD, node_name="b1"))
    store.apply("pods", "ADDED", pod("plain", labels={"app": "web"}, node_name="a1"))
    costs = {p.key: c for p, c in wanted_costs(store)}
    assert set(costs) == {"db/w-1", "db/w-2", "db/w-3"}, "never a StatefulSet's pod, never one without a policy"
    assert min(costs, key=costs.get) in ("db/w-1", "db/w-2"), "zone a (2 of the group) before b"


def test_only_changed_costs_are_written_within_the_rate() -> None:
    store = cache()
    store.apply("pods", "ADDED", rs_pod("w-1", "a1"))
    store.apply("pods", "ADDED", rs_pod("w-2", "b1"))
    writer = Writer()
    controller = DeletionCostController(store, writer, interval=1.0, rate=1.0)

    def watch_brings_the_writes() -> None:
        for key, cost in writer.costs.items():
            name = key.split("/")[1]
            store.apply("pods", "MODIFIED", rs_pod(name, "a1" if name == "w-1" else "b1", cost=str(cost)))

    assert controller.pass_once(now=controller._last) == 1, "one patch a second"
    watch_brings_the_writes()
    assert controller.pass_once(now=controller._last + 1.0) == 1
    watch_brings_the_writes()
    assert len(writer.costs) == 2
    assert wanted_costs(store) == [], "costs in place: nothing to write"
    assert controller.pass_once(now=controller._last + 1.0) == 0


def test_pods_without_a_cost_are_written_after_every_changed_cost() -> None:
    """A pass that sees more pods bound than the last one rewrites the old pods' costs before it
    gives the new pods theirs: "every pod has a cost" then means the costs are the full group's
    order (the e2e scale-down scaled on a half-written order once: zones 3,3,3 -> 0,2,2)."""
    store = cache()
    store.apply("pods", "ADDED", rs_pod("w-1", "a1"))  # bound since the last pass: no cost yet
    store.apply("pods", "ADDED", rs_pod("w-2", "a2"))
    store.apply("pods", "ADDED", rs_pod("w-3", "b1", cost="0"))  # the last pass saw only w-3 and w-4
    store.apply("pods", "ADDED", rs_pod("w-4", "b1", cost="1"))
    todo = [(p.name, p.deletion_cost) for p, _ in wanted_costs(store)]
    assert [name for name, _ in todo] == ["w-4", "w-1", "w-2"], "w-4's cost changes (b1 holds two: w-3 goes first)"


def test_audit_says_which_removal_would_break_the_spread() -> None:
    from extender.ops.audit import audit, render

    store = cache()
    store.apply("nodes", "ADDED", node("c1", "c"))
    for name, where in (("w-1", "a1"), ("w-2", "b1"), ("w-3", "c1"), ("w-4", "a2")):
        store.apply("pods", "ADDED", rs_pod(name, where))
    text = render(audit(store))
    assert "may remove db/w-2 (no pod-deletion-cost decides the order)" in text  # b's only pod: a 2, b 0
    assert "db/w-1" not in text.split("warning")[1] if "warning" in text else True
    assert "scale-down controller" in text
    for name, where, cost in (("w-1", "a1", "0"), ("w-2", "b1", "3"), ("w-3", "c1", "2"), ("w-4", "a2", "1")):
        store.apply("pods", "MODIFIED", rs_pod(name, where, cost=cost))
    assert "may remove" not in render(audit(store)), "the lowest cost is in the crowded zone: nothing breaks"

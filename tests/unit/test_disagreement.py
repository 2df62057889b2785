"""A pod whose own hard native constraints its policy does not imply gets a Warning event (once),
and `audit` lists it: autoscalers and the native scheduler act on those constraints, not on the
policy. A pod carrying exactly what `adopt` wrote raises nothing."""

from __future__ import annotations

from extender.api.policy import parse_spec
from extender.api.wire import ExtenderArgs
from extender.ops.adopt import adopt
from extender.ops.audit import audit, render
from extender.server.verbs import Verbs
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, ZONE, filter_args, node, pod, statefulset
from fakes import RecordedEvents

POLICY = {"caps": [{"topologyKey": HOST, "max": 1}]}
STRICTER = [
    {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "db"}},
    }
]
OTHER_GROUP = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": HOST}
        ]
    }
}


def setup(pod_spec_extra: dict) -> tuple[ClusterStore, Verbs, RecordedEvents, dict]:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    for name, zone in (("a0", "a"), ("b0", "b")):
        store.apply("nodes", "ADDED", node(name, zone))
    sts = statefulset("db", 3, labels={"app": "db"}, policy=POLICY)
    sts["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    store.apply("statefulsets", "ADDED", sts)
    p = pod("db-0", sts="db", labels={"app": "db"}, policy=POLICY)
    p["spec"].update(pod_spec_extra)
    store.apply("pods", "ADDED", p)
    events = RecordedEvents()
    return store, Verbs(store, None, events), events, p  # type: ignore[arg-type]


def warnings(events: RecordedEvents) -> list[str]:
    return [m for _, reason, m in events.events if reason == "NativeConstraintsDisagree"]


def filter_twice(verbs: Verbs, p: dict) -> None:
    for _ in range(2):
        verbs.filter(ExtenderArgs.model_validate(filter_args(p, ["a0", "b0"])))


def test_a_stricter_spread_and_another_groups_anti_affinity_are_warned_once_each_pod() -> None:
    store, verbs, events, p = setup({"topologySpreadConstraints": STRICTER, "affinity": OTHER_GROUP})
    filter_twice(verbs, p)
    (message,) = warnings(events)
    assert "topologySpreadConstraints[0]" in message and "not implied by the placement policy" in message
    assert "counts pods of another group" in message
    text = render(audit(store))
    assert "native constraints: db/db-0: topologySpreadConstraints[0]" in text


def test_what_adopt_writes_raises_no_warning() -> None:
    workload = {
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "template": {"metadata": {}, "spec": {}}},
    }
    written = adopt(workload, parse_spec(POLICY, "test"), scheduler_name="s", policy_name="x").workload
    pod_spec = written["spec"]["template"]["spec"]
    store, verbs, events, p = setup({"affinity": pod_spec["affinity"]})
    filter_twice(verbs, p)
    assert warnings(events) == []
    assert "native constraints" not in render(audit(store))

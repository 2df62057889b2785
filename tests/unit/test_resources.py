"""The bind's room check: a pod's requests as kube-scheduler counts them, a node's
room, and the cache's per-node sums, each as a table; the sums held by a property over random
pod events; the bind refusing a node another scheduler filled."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import OPT_IN_RESOURCE
from extender.api.wire import ExtenderArgs, ExtenderBindingArgs
from extender.engine import pod_requests, resource_shortfall
from extender.engine.resources import quantity
from extender.server.verbs import IGNORED_RESOURCES, Verbs
from extender.state.store import KINDS, ClusterStore

from builders import HOST, filter_args, node, pod
from fakes import RecordedEvents


@pytest.mark.parametrize(
    ("name", "text", "amount"),
    [
        ("cpu", "1", 1000),
        ("cpu", "100m", 100),
        ("cpu", "0.5", 500),
        ("cpu", "1.0001", 1001),  # rounded up, as the API server rounds
        ("memory", "64Mi", 64 * 2**20),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("memory", "2E", 2 * 10**18),
        ("nvidia.com/gpu", "2", 2),
        ("memory", "-1", None),
        ("memory", "lots", None),
        ("memory", "", None),
    ],
)
def test_quantities(name: str, text: str, amount: int | None) -> None:
    assert quantity(name, text) == amount


def c(cpu: str | None = None, memory: str | None = None, *, sidecar: bool = False, limits_only: bool = False, **extra):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None} | extra
    container: dict = {"name": "c", "resources": {"limits" if limits_only else "requests": requests}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"containers": [c("1", "1Gi"), c("500m", "1Gi")]}, {"cpu": 1500, "memory": 2 * 2**30}, id="sum"),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("2")]}, {"cpu": 2000}, id="an-init-container-above-the-sum"
        ),
        pytest.param({"containers": [c("3")], "initContainers": [c("2")]}, {"cpu": 3000}, id="init-below-the-sum"),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("500m", sidecar=True), c("2")]},
            {"cpu": 2500},
            id="sidecar-runs-beside-the-init-after-it",
        ),
        pytest.param(
            {"containers": [c("1")], "initContainers": [c("2"), c("500m", sidecar=True)]},
            {"cpu": 2000},
            id="sidecar-after-the-init-beside-the-containers",
        ),
        pytest.param({"containers": [c("1")], "overhead": {"cpu": "250m"}}, {"cpu": 1250}, id="overhead"),
        pytest.param(
            {"containers": [c("1"), c("1")], "resources": {"requests": {"cpu": "3"}}}, {"cpu": 3000}, id="pod-level"
        ),
        pytest.param(
            {"containers": [c("1", limits_only=True)]},
            {},
            id="limits-alone-are-not-requests",  # the API server writes requests = limits before anyone reads it
        ),
        pytest.param({"containers": [c(**{"example.com/fpga": "2"})]}, {"example.com/fpga": 2}, id="extended"),
        pytest.param({"containers": "odd"}, {}, id="malformed-reads-as-nothing"),
    ],
)
def test_pod_requests_as_kube_scheduler_counts_them(spec: dict, expected: dict) -> None:
    assert pod_requests(spec) == {**expected, "pods": 1}


CAPACITY = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}


@pytest.mark.parametrize(
    ("pod", "used", "short"),
    [
        ({"cpu": 1000, "pods": 1}, {"cpu": 3000, "pods": 3}, []),
        ({"cpu": 1000, "pods": 1}, {"cpu": 3500, "pods": 4}, ["cpu"]),
        ({"cpu": 100, "pods": 1}, {"cpu": 100, "pods": 110}, ["pods"]),
        ({"example.com/gpu": 1, "pods": 1}, {}, ["example.com/gpu"]),  # not advertised: no room, as natively
        ({OPT_IN_RESOURCE: 1, "pods": 1}, {}, []),  # the opt-in resource is ignored, as kube-scheduler is told to
        ({"memory": 2**30, "pods": 1}, {"memory": 7 * 2**30}, []),
    ],
)
def test_room_on_a_node(pod: dict, used: dict, short: list[str]) -> None:
    found = resource_shortfall(pod, used, CAPACITY, IGNORED_RESOURCES)
    assert [reason.rsplit(" requested", 1)[0].split(" ")[-1] for reason in found] == short, found


def _node(name: str, cpu: str = "4", pods: str = "110") -> dict:
    obj = node(name, "a")
    obj["status"]["allocatable"] = {"cpu": cpu, "memory": "8Gi", "pods": pods}
    return obj


def _pod(name: str, cpu: str, node_name: str | None = None, **kw) -> dict:
    obj = pod(name, node_name=node_name, **kw)
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return obj


def _store() -> ClusterStore:
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    return store


def test_the_cache_counts_every_pod_on_a_node_but_finished_ones() -> None:
    store = _store()
    store.apply("nodes", "ADDED", _node("n1"))
    store.apply("pods", "ADDED", _pod("other-scheduler", "1", "n1", scheduler="default-scheduler"))
    store.apply("pods", "ADDED", _pod("leaving", "1", "n1", terminating=True))
    store.apply("pods", "ADDED", _pod("done", "1", "n1", phase="Succeeded"))
    assert store.node_requests["n1"] == {"cpu": 2000, "pods": 2}
    store.apply("pods", "DELETED", _pod("leaving", "1", "n1", terminating=True))
    assert store.node_requests["n1"] == {"cpu": 1000, "pods": 1}


def _bind(verbs: Verbs, obj: dict, node_name: str):
    m = obj["metadata"]
    return verbs.bind(
        ExtenderBindingArgs(PodName=m["name"], PodNamespace=m["namespace"], PodUID=m["uid"], Node=node_name)
    )


def test_a_bind_onto_a_node_another_scheduler_filled_is_refused() -> None:
    """The default scheduler bound 3 pods of 1 CPU on a 4-CPU node while this pod was being
    scheduled: the extender's bind of a 2-CPU pod there is refused (kube-scheduler retries it
    elsewhere) and counted; the other node takes it. A pod the extender committed but the watch
    does not show yet counts too."""
    store = _store()
    store.apply("nodes", "ADDED", _node("n1"))
    store.apply("nodes", "ADDED", _node("n2"))

    class Binder:
        calls: list = []

        def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
            self.calls.append((name, node))

    verbs = Verbs(store, Binder(), RecordedEvents())
    cap1 = {"group": {"selector": {"matchLabels": {"app": "ours"}}}, "caps": [{"topologyKey": HOST, "max": 10}]}
    ours = _pod("ours", "2", policy=cap1, labels={"app": "ours"})
    store.apply("pods", "ADDED", ours)
    for i in range(3):
        store.apply("pods", "ADDED", _pod(f"native-{i}", "1", "n1", scheduler="default-scheduler"))
    refused = _bind(verbs, ours, "n1")
    assert "no room" in refused.Error and "cpu" in refused.Error, refused.Error
    assert verbs.metrics.binds.value(result="refused_resources") == 1
    assert _bind(verbs, ours, "n2").Error == ""
    second = _pod("second", "3", policy=cap1, labels={"app": "ours"})
    store.apply("pods", "ADDED", second)
    verbs.filter(ExtenderArgs.model_validate(filter_args(second, ["n2"])))
    assert "no room" in _bind(verbs, second, "n2").Error  # "ours" is committed on n2, not shown bound yet


events = st.lists(
    st.tuples(
        st.sampled_from(["add", "move", "terminate", "finish", "delete"]),
        st.integers(0, 5),  # which pod
        st.sampled_from(["n1", "n2", None]),
        st.sampled_from(["100m", "1", "2500m"]),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(events)
def test_per_node_sums_equal_the_pods_counted_afresh(steps) -> None:
    store = _store()
    for n in ("n1", "n2"):
        store.apply("nodes", "ADDED", _node(n))
    live: dict[int, dict] = {}
    for action, i, where, cpu in steps:
        if action == "add" or (action == "move" and i in live):
            obj = _pod(f"p{i}", cpu, where)
        elif action == "terminate" and i in live:
            obj = _pod(f"p{i}", cpu, live[i]["spec"].get("nodeName"), terminating=True)
        elif action == "finish" and i in live:
            obj = _pod(f"p{i}", cpu, live[i]["spec"].get("nodeName"), phase="Failed")
        elif action == "delete" and i in live:
            store.apply("pods", "DELETED", live.pop(i))
            continue
        else:
            continue
        store.apply("pods", "MODIFIED" if i in live else "ADDED", obj)
        live[i] = obj
    expected: dict[str, dict[str, int]] = {}
    for obj in live.values():
        on, phase = obj["spec"].get("nodeName"), obj["status"].get("phase")
        if on and phase not in ("Succeeded", "Failed"):
            for k, v in pod_requests(obj["spec"]).items():
                expected.setdefault(on, {})[k] = expected.get(on, {}).get(k, 0) + v
    assert store.node_requests == expected


def test_audit_lists_nodes_over_allocatable_with_their_pods() -> None:
    from extender.ops.audit import overcommitted, render_overcommit

    store = _store()
    store.apply("nodes", "ADDED", _node("n1"))
    store.apply("nodes", "ADDED", _node("n2"))
    for i in range(3):
        store.apply("pods", "ADDED", _pod(f"native-{i}", "1", "n1", scheduler="default-scheduler"))
    store.apply("pods", "ADDED", _pod("ours", "2", "n1"))
    store.apply("pods", "ADDED", _pod("fine", "1", "n2"))
    (found,) = overcommitted(store)
    assert found.node == "n1" and found.short == ["cpu: 5000 requested of 4000"]
    assert "db/ours (placement-scheduler)" in found.pods and "db/native-0 (default-scheduler)" in found.pods
    assert "OVERCOMMITTED" in render_overcommit([found])

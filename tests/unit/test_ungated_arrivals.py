"""Opted-in pods that arrive outside the placeable gate: the store counts each as the
watch shows it created (never from a list, where a pod the extender lifted looks the same), and
the gate loop names them in the log once per workload per interval, with how many."""

from __future__ import annotations

import logging
import types

import pytest

from extender.api.policy import OPT_IN_RESOURCE, PLACEABLE_GATE
from extender.server.gate_lifter import UNGATED_LOG_EVERY, GateLifter
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import node, pod


def opted_in(name: str, *, gates=(), node_name: str | None = None, owner: str | None = None) -> dict:  # noqa: ANN001
    obj = pod(name, scheduler="default-scheduler", node_name=node_name, sts=owner)
    obj["spec"]["containers"][0]["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}}
    if gates:
        obj["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    return obj


def synced() -> ClusterStore:
    store = ClusterStore(Reservations())
    for kind in KINDS:
        store.replace(kind, [])
    store.apply("nodes", "ADDED", node("n0", "a"))
    return store


@pytest.mark.parametrize(
    ("event", "obj", "counted"),
    [
        pytest.param("ADDED", opted_in("p"), 1, id="opted-in-no-gate-counted"),
        pytest.param("ADDED", opted_in("p", gates=(PLACEABLE_GATE,)), 0, id="held-by-the-gate"),
        pytest.param("ADDED", opted_in("p", gates=("example.com/other",)), 1, id="another-gate-is-not-ours"),
        pytest.param("ADDED", opted_in("p", node_name="n0"), 0, id="created-on-a-node"),
        pytest.param("ADDED", pod("p", scheduler="default-scheduler"), 0, id="never-opted-in"),
        pytest.param("MODIFIED", opted_in("p"), 0, id="a-lift-shows-as-modified"),
    ],
)
def test_an_arrival_outside_the_gate_is_counted(event: str, obj: dict, counted: int) -> None:
    store = synced()
    store.apply("pods", event, obj)
    assert store.ungated_arrivals == counted
    assert [p.name for p in store.ungated_recent] == (["p"] if counted else [])


def test_a_list_counts_nothing() -> None:
    """After a restart the list shows lifted pods without the gate too: they are not arrivals."""
    store = synced()
    store.replace("pods", [opted_in("p")])
    assert store.ungated_arrivals == 0 and not store.ungated_recent


def test_the_gate_loop_names_each_workload_once_per_interval(caplog) -> None:  # noqa: ANN001
    store = synced()
    lifter = GateLifter(types.SimpleNamespace(store=store), writer=None)  # type: ignore[arg-type]
    for i in range(3):
        store.apply("pods", "ADDED", opted_in(f"db-{i}", owner="db"))
    store.apply("pods", "ADDED", opted_in("web-0", owner="web"))
    with caplog.at_level(logging.WARNING, logger="extender.server.gate_lifter"):
        lifter.pass_once(now=0.0)
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        store.apply("pods", "ADDED", opted_in("db-3", owner="db"))
        lifter.pass_once(now=1.0)
        quiet = [r.getMessage() for r in caplog.records]
        store.apply("pods", "ADDED", opted_in("db-4", owner="db"))
        lifter.pass_once(now=UNGATED_LOG_EVERY + 1.0)
        later = [r.getMessage() for r in caplog.records]
    assert len(first) == 2, first
    assert any("3 opted-in pod(s) of db/db (latest db-2)" in m for m in first), first
    assert any("1 opted-in pod(s) of db/web (latest web-0)" in m for m in first), first
    assert quiet == []
    assert len(later) == 1 and "2 opted-in pod(s) of db/db (latest db-4)" in later[0], later
    assert store.ungated_arrivals == 6 and not store.ungated_recent


@pytest.mark.parametrize(
    ("admission", "fix"),
    [
        pytest.param("absent", "install deploy/overlays/in-scheduler", id="absent-says-what-to-install"),
        pytest.param("installed", "created before it", id="installed-says-why-they-may-still-be-there"),
        pytest.param("unknown", "(RBAC)", id="unreadable-says-so"),
    ],
)
def test_audit_names_the_pods_pending_outside_the_gate(admission: str, fix: str) -> None:
    from extender.ops.audit import GateAdmission, gate_bound, render_gate_bound

    store = synced()
    store.replace(
        "pods",
        [
            opted_in("waiting"),
            opted_in("held", gates=(PLACEABLE_GATE,)),
            opted_in("running", node_name="n0"),
            pod("ordinary", scheduler="default-scheduler"),
        ],
    )
    bound = gate_bound(store, None, GateAdmission(admission))
    assert bound.outside == ["db/waiting"]
    text = render_gate_bound(bound)
    assert "outside: db/waiting" in text and fix in text, text
    assert render_gate_bound(gate_bound(store, "elsewhere", GateAdmission(admission))) == ""

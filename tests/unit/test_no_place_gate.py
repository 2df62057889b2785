"""serve --no-place-gate: the gate loop leaves opted-in pods held by the placeable gate, so another
lifter (the benchmarks' gate floor) can measure what the gate itself costs the control plane
without the extender's decisions, Events and window."""

from __future__ import annotations

from extender.api.policy import OPT_IN_RESOURCE, PLACEABLE_GATE
from extender.server import serve as serve_module
from extender.server.gate_lifter import GateLifter
from extender.server.place_gate import PlaceGate
from extender.server.serve import ServeOptions, placeable_gate
from extender.server.verbs import Verbs
from extender.state.store import ClusterStore

from builders import HOST, node, pod
from fakes import RecordedEvents, synced_store


def held(name: str) -> dict:
    """An opted-in pod of app db (at most 1 a node) held by the placeable gate."""
    policy = {"group": {"selector": {"matchLabels": {"app": "db"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    obj = pod(name, labels={"app": "db"}, policy=policy, scheduler="default-scheduler")
    obj["spec"]["containers"][0]["resources"] = {"requests": {OPT_IN_RESOURCE: "1"}}
    obj["spec"]["schedulingGates"] = [{"name": PLACEABLE_GATE}]
    return obj


def cluster(nodes: int, pods: list[dict]) -> ClusterStore:
    return synced_store([node(f"n{i}", "a") for i in range(nodes)], pods)


class Writer:
    def __init__(self) -> None:
        self.lifted: list[str] = []

    def lift(self, answer) -> None:  # noqa: ANN001
        self.lifted.append(answer.pod.name)


def served_options(monkeypatch, *argv: str) -> ServeOptions:  # noqa: ANN001
    from extender.cli.commands import main as cli_main

    seen: dict[str, ServeOptions] = {}
    monkeypatch.setattr(serve_module, "serve", lambda options: seen.setdefault("options", options))
    assert cli_main(["serve", *argv]) in (0, None)
    return seen["options"]


def test_the_flag_reaches_the_options_and_the_gate_is_on_without_it(monkeypatch) -> None:  # noqa: ANN001
    assert served_options(monkeypatch).place_gate is True
    assert served_options(monkeypatch, "--no-place-gate").place_gate is False


def test_without_the_place_gate_the_loop_lifts_no_pod_that_has_a_place() -> None:
    store = cluster(3, [held("db-0"), held("db-1")])
    events = RecordedEvents()
    verbs = Verbs(store, None, events)  # type: ignore[arg-type]

    off = placeable_gate(store, events, ServeOptions(place_gate=False))
    writer = Writer()
    assert off is None
    assert GateLifter(verbs, writer, place=off).pass_once(now=0.0) == 0 and writer.lifted == []

    on = placeable_gate(store, events, ServeOptions(place_window=2))
    assert isinstance(on, PlaceGate) and on.window == 2
    writer = Writer()
    lifter = GateLifter(verbs, writer, place=on)
    assert lifter.pass_once(now=0.0) == 2 and lifter.drain(timeout=10) == 2
    assert sorted(writer.lifted) == ["db-0", "db-1"]

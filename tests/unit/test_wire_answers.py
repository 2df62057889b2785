"""The smaller filter answer changes nothing kube-scheduler decides.

Filter leaves out the failed nodes' reasons when some node passes (FailedNodeReasons): the
reasons feed only the FitError of a pod no node passes. Held against a model of the
kube-scheduler code that reads them (`findNodesThatPassExtenders` and `schedulePod`,
pkg/scheduler/schedule_one.go, v1.33-v1.37), written from that code and sharing nothing with
the extender.

Prioritize's answer is not cut, and a test holds it whole: leaving out nodes at the lowest score
(after lowering every score by it) keeps the set of highest totals, but from 1.35 kube-scheduler
gives a random tie-break only to nodes some extender listed (`nodesScores[i].Randomizer`, set in
`prioritizeNodes` for listed nodes alone): among equal totals a listed node would then always
beat an unlisted one, and unlisted ones would be taken in heap order, not at random.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.wire import ExtenderArgs, FailedNodeReasons
from extender.server.verbs import Verbs
from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore

from builders import HOST, filter_args, node, pod
from fakes import RecordedEvents, ShownVerbs


def find_nodes_that_pass_extenders(
    feasible: list[str], answer: tuple[list[str], dict[str, str], dict[str, str]]
) -> tuple[list[str], dict[str, tuple[str, str]] | None]:
    """findNodesThatPassExtenders then schedulePod, for one extender: the nodes kept, and the
    diagnosis kube-scheduler keeps (None when some node passes: the pod is scheduled and the
    diagnosis is dropped, but for a count in a V(2) log line)."""
    passed, failed, unresolvable = answer
    statuses: dict[str, tuple[str, str]] = {}
    for name, message in unresolvable.items():
        statuses[name] = ("UnschedulableAndUnresolvable", message)
    for name, message in failed.items():
        if name not in unresolvable:
            statuses[name] = ("Unschedulable", message)
    kept = [n for n in feasible if n in set(passed)]
    return kept, (None if kept else statuses)


def verbs_over(nodes: list[dict], pods: list[dict], reasons: FailedNodeReasons) -> Verbs:
    store = ClusterStore(Reservations(tentative_ttl=30, committed_ttl=60))
    for kind in KINDS:
        store.replace(kind, {"nodes": nodes, "pods": pods}.get(kind, []))
    return ShownVerbs(store, binder=None, events=RecordedEvents(), failed_node_reasons=reasons)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=6), st.integers(1, 2))
def test_filter_without_reasons_when_some_node_passes_leaves_the_outcome_unchanged(held, cap) -> None:
    """For a cap over random per-node counts: the same nodes kept and the same diagnosis with
    the reasons left out as with every reason sent; the reasons are all there when none passes."""
    nodes = [node(f"n{i}", "a") for i in range(len(held))]
    running = [
        pod(f"r-{i}-{k}", sts="r", node_name=f"n{i}", policy={"caps": [{"topologyKey": HOST, "max": cap}]})
        for i, n in enumerate(held)
        for k in range(n)
    ]
    pending = pod("r-new", sts="r", policy={"caps": [{"topologyKey": HOST, "max": cap}]})
    names = [n["metadata"]["name"] for n in nodes]
    outcomes = []
    for reasons in FailedNodeReasons:
        result = verbs_over(nodes, running, reasons).filter(ExtenderArgs.model_validate(filter_args(pending, names)))
        answer = (result.NodeNames or [], result.FailedNodes or {}, result.FailedAndUnresolvableNodes or {})
        outcomes.append(find_nodes_that_pass_extenders(names, answer))
        if reasons is FailedNodeReasons.WHEN_NONE_PASS and result.NodeNames:
            assert result.FailedNodes == {} and result.FailedAndUnresolvableNodes == {}
    assert outcomes[0] == outcomes[1]
    kept, diagnosis = outcomes[0]
    assert kept == [f"n{i}" for i, n in enumerate(held) if n < cap]
    assert (diagnosis is None) == bool(kept)
    if diagnosis is not None:
        assert set(diagnosis) == set(names) and all("holds" in m for _, m in diagnosis.values())


def test_prioritize_lists_every_candidate() -> None:
    """From 1.35 an unlisted node loses every tie to a listed one (see the module docstring): the
    answer names every node kube-scheduler asked about, the equal ones included."""
    nodes = [node(f"n{i}", "a") for i in range(4)]
    pending = pod("r-new", sts="r", policy={"caps": [{"topologyKey": HOST, "max": 1}]})
    plain = pod("plain", labels={"app": "x"})
    verbs = verbs_over(nodes, [pod("r-0", sts="r", node_name="n0")], FailedNodeReasons.WHEN_NONE_PASS)
    names = [n["metadata"]["name"] for n in nodes]
    for p in (pending, plain):
        scores = verbs.prioritize(ExtenderArgs.model_validate(filter_args(p, names))).scores
        assert sorted(scores) == names, (p["metadata"]["name"], scores)


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        (None, [], FailedNodeReasons.WHEN_NONE_PASS),
        ("always", [], FailedNodeReasons.ALWAYS),
        (None, ["--failed-node-reasons", "always"], FailedNodeReasons.ALWAYS),
        ("always", ["--failed-node-reasons", "when-none-pass"], FailedNodeReasons.WHEN_NONE_PASS),
        ("Always", [], None),
        (None, ["--failed-node-reasons", "never"], None),
    ],
)
def test_the_serve_flag_and_its_environment_variable(monkeypatch, capsys, env, argv, expected) -> None:
    """A wrong value, from the flag or EXTENDER_FAILED_NODE_REASONS, is a usage error naming the
    choices, not a traceback."""
    from extender.cli.commands import parser

    if env is None:
        monkeypatch.delenv("EXTENDER_FAILED_NODE_REASONS", raising=False)
    else:
        monkeypatch.setenv("EXTENDER_FAILED_NODE_REASONS", env)
    if expected is None:
        with pytest.raises(SystemExit) as exit_:
            parser().parse_args(["serve", *argv])
        assert exit_.value.code == 2 and "is not one of when-none-pass, always" in capsys.readouterr().err
    else:
        assert parser().parse_args(["serve", *argv]).failed_node_reasons is expected

"""The smaller answers change nothing kube-scheduler decides (issue 26).

Two cuts, each held against a model of the kube-scheduler code that reads the answer
(pkg/scheduler/schedule_one.go, v1.33-v1.36), written here from that code and sharing nothing
with the extender:

- filter leaves out the failed nodes' reasons when some node passes (FailedNodeReasons): the
  reasons feed only the FitError of a pod no node passes;
- prioritize lowers every score by the lowest and leaves out the nodes then at 0
  (`only_what_ranks`): kube-scheduler adds each listed score, scaled, to the node's total and
  picks the highest total, at random among equals.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.state.reservations import Reservations
from extender.state.store import KINDS, ClusterStore
from extender.verbs import Verbs, only_what_ranks
from extender.wire import ExtenderArgs, FailedNodeReasons

from builders import HOST, filter_args, node, pod
from fakes import RecordedEvents

MAX_NODE_SCORE = 100  # fwk.MaxNodeScore
MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority


def kube_scheduler_pick(
    plugin_totals: dict[str, int], extenders: list[tuple[list[tuple[str, int]], int]]
) -> frozenset[str]:
    """prioritizeNodes then selectHost: each extender's (host, score) list, times its weight and
    MaxNodeScore / MaxExtenderPriority, added to the host's total (a host not listed gets
    nothing from that extender); the chosen node is one of the highest totals, at random. The
    set of highest totals is what can be chosen."""
    totals = dict(plugin_totals)
    for listed, weight in extenders:
        for host, score in listed:
            totals[host] += score * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
    best = max(totals.values())
    return frozenset(h for h, t in totals.items() if t == best)


def flat(groups: list[tuple[list[str], int]]) -> list[tuple[str, int]]:
    return [(h, s) for hosts, s in groups for h in hosts]


@st.composite
def rankings(draw):
    """Candidates with other plugins' totals, our score groups over exactly those candidates,
    and another extender's list."""
    hosts = [f"n{i}" for i in range(draw(st.integers(1, 12)))]
    plugin_totals = {h: draw(st.integers(0, 300)) for h in hosts}
    groups: list[tuple[list[str], int]] = []
    rest = list(hosts)
    while rest:
        take = draw(st.integers(1, len(rest)))
        groups.append((rest[:take], draw(st.integers(0, MAX_EXTENDER_PRIORITY))))
        rest = rest[take:]
    groups += [([], draw(st.integers(0, MAX_EXTENDER_PRIORITY)))] * draw(st.integers(0, 1))  # empty classes
    other = [(h, draw(st.integers(0, MAX_EXTENDER_PRIORITY))) for h in hosts if draw(st.booleans())]
    weights = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    return plugin_totals, groups, other, weights


@settings(max_examples=3000, deadline=None)
@given(rankings())
def test_prioritize_cut_to_what_ranks_picks_from_the_same_nodes(case) -> None:
    plugin_totals, groups, other, (ours_weight, other_weight) = case
    cut = only_what_ranks(groups)
    full_pick = kube_scheduler_pick(plugin_totals, [(flat(groups), ours_weight), (other, other_weight)])
    cut_pick = kube_scheduler_pick(plugin_totals, [(flat(cut), ours_weight), (other, other_weight)])
    assert cut_pick == full_pick
    assert all(0 < s <= MAX_EXTENDER_PRIORITY for _, s in flat(cut))  # within the protocol's range
    assert len(flat(cut)) <= len(flat(groups))


def test_prioritize_cut_examples() -> None:
    assert only_what_ranks([]) == []
    assert only_what_ranks([(["a", "b"], 0)]) == []
    assert only_what_ranks([(["a", "b"], 7)]) == []  # every node equal: nothing to rank
    assert only_what_ranks([(["a"], 3), (["b", "c"], 1), ([], 0)]) == [(["a"], 2)]
    assert only_what_ranks([(["a"], 10), (["b"], 4), (["c"], 4)]) == [(["a"], 6)]


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
    return Verbs(store, binder=None, events=RecordedEvents(), failed_node_reasons=reasons)  # type: ignore[arg-type]


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

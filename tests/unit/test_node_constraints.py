"""The pod's own node constraints (engine/eligibility.py), read from its spec (state/objects.py):
which nodes it could use at all. A table per part, with kube-scheduler's meaning."""

from __future__ import annotations

import pytest

from extender.engine import NO_CONSTRAINTS, NodeConstraints, NodeInfo, Requirement, Taint, Toleration, Topology
from extender.state.objects import parse_node, parse_pod

from builders import node as node_obj
from builders import pod as pod_obj

ZONE = "topology.kubernetes.io/zone"
A1 = NodeInfo("a1", {ZONE: "a", "disk": "ssd", "cpus": "16"})
B1 = NodeInfo("b1", {ZONE: "b"})


@pytest.mark.parametrize(
    ("constraints", "node", "matches"),
    [
        pytest.param(NO_CONSTRAINTS, B1, True, id="none"),
        pytest.param(NodeConstraints(selector=(("disk", "ssd"),)), A1, True, id="selector-match"),
        pytest.param(NodeConstraints(selector=(("disk", "ssd"),)), B1, False, id="selector-missing-label"),
        pytest.param(NodeConstraints(terms=((Requirement(ZONE, "In", ("a",)),),)), A1, True, id="in"),
        pytest.param(NodeConstraints(terms=((Requirement(ZONE, "In", ("a",)),),)), B1, False, id="in-other"),
        pytest.param(NodeConstraints(terms=((Requirement("disk", "NotIn", ("ssd",)),),)), B1, True, id="notin-absent"),
        pytest.param(NodeConstraints(terms=((Requirement("disk", "Exists", ()),),)), B1, False, id="exists"),
        pytest.param(NodeConstraints(terms=((Requirement("disk", "DoesNotExist", ()),),)), B1, True, id="not-exists"),
        pytest.param(NodeConstraints(terms=((Requirement("cpus", "Gt", ("8",)),),)), A1, True, id="gt"),
        pytest.param(NodeConstraints(terms=((Requirement("cpus", "Lt", ("8",)),),)), A1, False, id="lt"),
        pytest.param(NodeConstraints(terms=((Requirement(ZONE, "Gt", ("8",)),),)), A1, False, id="gt-not-a-number"),
        pytest.param(
            NodeConstraints(terms=((Requirement(ZONE, "In", ("a",)),), (Requirement(ZONE, "In", ("b",)),))),
            B1,
            True,
            id="terms-are-ored",
        ),
        pytest.param(
            NodeConstraints(terms=((Requirement(ZONE, "In", ("a",)), Requirement("disk", "In", ("hdd",))),)),
            A1,
            False,
            id="requirements-are-anded",
        ),
        pytest.param(NodeConstraints(terms=((),)), A1, False, id="empty-term-matches-nothing"),
        pytest.param(NodeConstraints(terms=()), A1, False, id="no-terms-matches-nothing"),
        pytest.param(
            NodeConstraints(terms=((Requirement("metadata.name", "In", ("b1",), True),),)), B1, True, id="match-fields"
        ),
    ],
)
def test_node_affinity(constraints, node, matches):
    assert constraints.matches_affinity(node) is matches


NO_SCHEDULE = Taint("dedicated", "db", "NoSchedule")
NO_EXECUTE = Taint("dedicated", "db", "NoExecute")


@pytest.mark.parametrize(
    ("tolerations", "taint", "tolerated"),
    [
        pytest.param((), NO_SCHEDULE, False, id="none"),
        pytest.param((Toleration("dedicated", "Equal", "db", "NoSchedule"),), NO_SCHEDULE, True, id="equal"),
        pytest.param((Toleration("dedicated", "Equal", "web", "NoSchedule"),), NO_SCHEDULE, False, id="other-value"),
        pytest.param((Toleration("dedicated", "Equal", "db", "NoSchedule"),), NO_EXECUTE, False, id="other-effect"),
        pytest.param((Toleration("dedicated", "Equal", "db", ""),), NO_EXECUTE, True, id="any-effect"),
        pytest.param((Toleration("dedicated", "Exists", "", "NoSchedule"),), NO_SCHEDULE, True, id="exists"),
        pytest.param((Toleration("", "Exists", "", ""),), NO_EXECUTE, True, id="tolerate-everything"),
        pytest.param((Toleration("other", "Exists", "", ""),), NO_SCHEDULE, False, id="other-key"),
    ],
)
def test_tolerations(tolerations, taint, tolerated):
    node = NodeInfo("t1", {}, True, (taint,))
    assert NodeConstraints(tolerations=tolerations).tolerates_taints(node) is tolerated


def test_views_apply_only_what_is_asked():
    c = NodeConstraints(selector=(("disk", "ssd"),))
    tainted = NodeInfo("t1", {"disk": "ssd"}, True, (NO_SCHEDULE,))
    assert c.view(affinity=False, taints=False) is None
    assert NO_CONSTRAINTS.view(affinity=True, taints=False) is None  # nothing to narrow
    assert c.view(affinity=True, taints=False).admits(tainted)
    assert not c.view(affinity=True, taints=True).admits(tainted)
    assert not c.view(affinity=True, taints=False).admits(B1)


def test_topology_memoises_admitted_nodes_per_version_and_view():
    topology = Topology([A1, B1])
    view = NodeConstraints(selector=(("disk", "ssd"),)).view(True, False)
    first = topology.admitted(view)
    assert first == {"a1"} and topology.admitted(view) is first
    assert topology.eligible_domains(ZONE, ZONE, None, view=view) == {"a": 1}
    topology.upsert(NodeInfo("b1", {ZONE: "b", "disk": "ssd"}))
    assert topology.admitted(view) == {"a1", "b1"}
    topology.upsert(NodeInfo("b1", {ZONE: "b", "disk": "ssd"}, True, (NO_SCHEDULE,)))  # a taint is a change
    assert topology.admitted(NO_CONSTRAINTS.view(False, True)) == {"a1"}


def test_parse_pod_constraints_and_node_taints():
    obj = pod_obj("p", sts="s")
    obj["spec"]["nodeSelector"] = {"disk": "ssd"}
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}],
                        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["x"]}],
                    }
                ]
            }
        }
    }
    obj["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    record = parse_pod(obj)
    assert record.constraints == NodeConstraints(
        (("disk", "ssd"),),
        ((Requirement(ZONE, "In", ("a", "b")), Requirement("metadata.name", "NotIn", ("x",), True)),),
        (Toleration("dedicated", "Exists", "", "NoSchedule"),),
    )
    assert parse_pod(obj).constraints is record.constraints  # one shared object per template
    assert parse_pod(pod_obj("q")).constraints is NO_CONSTRAINTS
    n = node_obj("n1", "a")
    n["spec"]["taints"] = [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "soft", "effect": "PreferNoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
    assert parse_node(n).taints == (NO_SCHEDULE, Taint("node.kubernetes.io/unreachable", "", "NoExecute"))

"""classify (engine/evaluate.py): the topology's class table and node-by-node signatures give the
same classes, in the cases where the table path takes a shortcut (a node's domain read as its
name, the usable-node partition cut once per topology version, loaded nodes keyed by their own
and their StatefulSet's counts). The property test (test_properties.py) draws such cases at
random; these name them."""

from __future__ import annotations

import importlib

import pytest

from extender.api.policy import PlacementPolicySpec
from extender.engine import NodeConstraints, NodeInfo, Placement, PodRequest, Snapshot, Topology, evaluate

evaluate_module = importlib.import_module("extender.engine.evaluate")  # the module (the package exports the function)
HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def _nodes(hostnames: dict[str, str] | None = None, pool: dict[str, str] | None = None) -> Topology:
    nodes = []
    for z in "ab":
        for i in range(6):
            name = f"{z}{i}"
            labels = {ZONE: f"zone-{z}", HOST: (hostnames or {}).get(name, name)}
            if pool and name in pool:
                labels["pool"] = pool[name]
            nodes.append(NodeInfo(name, labels))
    return Topology(nodes)


ANTI_HOST = {
    "group": {"selector": {"matchLabels": {"app": "db"}}},
    "shardAntiAffinity": [{"topologyKey": HOST}],
    "caps": [{"topologyKey": HOST, "max": 2}],
}
CASES = {
    # a0 holds a pod of the pod's own StatefulSet, a1 one of another: the same group load, and
    # only the first is refused by anti-affinity on the node key
    "own set vs another set on equally loaded nodes": (
        ANTI_HOST,
        _nodes(),
        (Placement("db/s-0", "a0", "s", 0), Placement("db/t-0", "a1", "t", 0)),
        PodRequest("db/s-1", "s", 1),
        {"a0": False, "a1": True},
    ),
    # hostname labels that are not the node names: domains are read from the labels
    "hostname label differs from the node name": (
        ANTI_HOST,
        _nodes(hostnames={n: f"host-{n}" for z in "ab" for n in (f"{z}{i}" for i in range(6))}),
        (Placement("db/s-0", "a0", "s", 0), Placement("db/t-0", "a1", "t", 0)),
        PodRequest("db/s-1", "s", 1),
        {"a0": False, "a1": True},
    ),
    # a hard spread on the node key counting only the nodes the pod's selector admits: two
    # partitions (usable, counted) cut the classes
    "two partitions": (
        {
            "group": {"selector": {"matchLabels": {"app": "db"}}},
            "spread": [{"topologyKey": HOST, "maxSkew": 1, "nodeAffinityPolicy": "Honor"}],
        },
        _nodes(pool={"a0": "x", "a1": "x", "a2": "x", "b0": "x"}),
        (Placement("db/s-0", "a0", "s", 0),),
        PodRequest("db/s-1", "s", 1, constraints=NodeConstraints(selector=(("pool", "x"),))),
        {"a0": False, "a1": True, "a3": True},
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_class_table_and_node_by_node_agree(name: str) -> None:
    policy, topology, placed, pod, expected = CASES[name]
    spec = PlacementPolicySpec.model_validate(policy)
    snap = Snapshot(topology, placed, group_size=6, shard_replicas={"s": 3, "t": 3})
    names = sorted(topology.nodes)
    answers = []
    for ratio in (0, 10**9):  # the class table always, never
        saved, evaluate_module.CANDIDATES_PER_CLASS = evaluate_module.CANDIDATES_PER_CLASS, ratio
        try:
            decision = evaluate(spec, pod, snap, names, dead_end_avoidance=False)
        finally:
            evaluate_module.CANDIDATES_PER_CLASS = saved
        answers.append({n: (v.outcome, v.rule, v.reason) for n, v in decision.verdicts.items()})
        for node, passes in expected.items():
            assert decision.verdicts[node].passed is passes, (name, ratio, node)
    assert answers[0] == answers[1], name

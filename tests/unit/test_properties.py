"""Property tests: evaluate() never passes a node that breaks a hard rule.

The checker below recomputes allowed zones, caps, hard spread and required shard anti-affinity
from the node labels and placements alone; it shares no code with the engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api.policy import HOSTNAME_KEY, LEGACY_ZONE_KEY, ZONE_KEY, parse_spec
from extender.engine import (
    NodeConstraints,
    NodeInfo,
    Outcome,
    Placement,
    PlacementKind,
    PodRequest,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
    Topology,
    evaluate,
    hard_rule_reason,
    passed_domains,
    shared_domains,
)
from extender.engine.context import Context

evaluate_module = importlib.import_module("extender.engine.evaluate")  # the module (the package exports the function)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SHARDS = ["s0", "s1", "s2"]
RACK = "example.com/rack"
TAINT = Taint("dedicated", "x", "NoSchedule")


# -- the independent checker ------------------------------------------------------------------------


def label(node: NodeInfo, key: str) -> str | None:
    """A node's domain for a topology key: either zone label names the zone; hostname defaults to the name."""
    if key in (ZONE_KEY, LEGACY_ZONE_KEY):
        return node.labels.get(ZONE_KEY, node.labels.get(LEGACY_ZONE_KEY))
    if key == HOSTNAME_KEY:
        return node.labels.get(HOSTNAME_KEY, node.name)
    return node.labels.get(key)


def canonical(key: str) -> str:
    return ZONE_KEY if key == LEGACY_ZONE_KEY else key


def cap_limit(cap: dict, size: int | None) -> int | None:
    if "max" in cap:
        return cap["max"]
    if size is None:
        return None
    bound = Fraction(cap["fraction"]) * size
    n = 0
    while (n + 1 < bound) if cap["comparison"] == "LessThan" else (n + 1 <= bound):
        n += 1
    return n


def admits(node: NodeInfo, pod: PodRequest, affinity: bool, taints: bool) -> bool:
    """Whether a spread with these policies counts the node, for the generated constraints only:
    zone NotIn / rack selector as affinity, an Exists toleration of the one taint key."""
    c = pod.constraints
    if c is None:
        return not (taints and node.taints)
    if affinity:
        if any(node.labels.get(k) != v for k, v in c.selector):
            return False
        if c.terms is not None:
            (req,) = c.terms[0]
            if node.labels.get(req.key) in req.values:
                return False
    if taints and node.taints:
        return any(t.operator == "Exists" and t.key in ("", TAINT.key) for t in c.tolerations)
    return True


def pods_in(
    nodes: dict[str, NodeInfo], placements: Sequence[Placement], key: str, value: str, shard: str | None = None
) -> int:
    return sum(
        1
        for p in placements
        if p.node in nodes and label(nodes[p.node], key) == value and (shard is None or p.shard == shard)
    )


def violations(
    policy: dict,
    nodes: dict[str, NodeInfo],
    placements: Sequence[Placement],
    size: int | None,
    pod: PodRequest,
    target: str,
) -> list[str]:
    """Hard rules that placing `pod` on `target` breaks (native semantics: counts before placement).

    Terminating pods, per rule (docs/concepts/which-pods-count.md): a cap and anti-affinity count them,
    so neither is exceeded at any moment; a spread does not, so it holds once they are gone."""
    node = nodes[target]
    staying = [p for p in placements if p.kind is not PlacementKind.TERMINATING]
    allowed = policy.get("zones", {}).get("allowed")
    out = []
    if allowed is not None and label(node, ZONE_KEY) not in allowed:
        out.append("zone not allowed")
    for cap in policy.get("caps", []):
        limit, value = cap_limit(cap, size), label(node, cap["topologyKey"])
        if limit is None or value is None:
            out.append(f"cap {cap} not computable")
        elif pods_in(nodes, placements, cap["topologyKey"], value) + 1 > limit:
            out.append(f"cap {cap} exceeded in {value}")
    for spread in policy.get("spread", []):
        if spread["whenUnsatisfiable"] != "DoNotSchedule":
            continue
        key, value = spread["topologyKey"], label(node, spread["topologyKey"])
        if value is None:
            out.append(f"spread {key}: no label")
            continue
        # Native node inclusion: a node the policies exclude counts neither its domain nor its pods.
        honor = spread.get("nodeAffinityPolicy", "Honor") == "Honor", spread.get("nodeTaintsPolicy") == "Honor"
        counted = {name: n for name, n in nodes.items() if admits(n, pod, *honor)}
        # Native with hard spreads on two or more keys: a node lacking any of them counts neither
        # as a domain nor for its pods (nodeLabelsMatchSpreadConstraints).
        hard_keys = {canonical(s["topologyKey"]) for s in policy["spread"] if s["whenUnsatisfiable"] == "DoNotSchedule"}
        if len(hard_keys) > 1:
            counted = {name: n for name, n in counted.items() if all(label(n, k) is not None for k in hard_keys)}
        eligible = {
            label(n, key)
            for n in counted.values()
            if n.schedulable and label(n, key) is not None and (allowed is None or label(n, ZONE_KEY) in allowed)
        }
        low = min((pods_in(counted, staying, key, d) for d in eligible), default=0)
        if len(eligible) < spread.get("minDomains", 0):
            low = 0
        if pods_in(counted, staying, key, value) + 1 - low > spread["maxSkew"]:
            out.append(f"spread {key} skew exceeded in {value}")
    for rule in policy.get("shardAntiAffinity", []):
        if rule["mode"] != "Required" or pod.shard is None:
            continue
        value = label(node, rule["topologyKey"])
        if value is None or pods_in(nodes, placements, rule["topologyKey"], value, pod.shard):
            out.append(f"anti-affinity {rule['topologyKey']} broken")
    return out


# -- strategies -----------------------------------------------------------------------------------


@dataclass
class Case:
    policy: dict
    nodes: list[NodeInfo]
    placements: list[Placement]
    pod: PodRequest
    group_size: int | None
    shard_replicas: dict[str, int]

    def snapshot(self) -> Snapshot:
        return Snapshot(Topology(self.nodes), tuple(self.placements), self.group_size, self.shard_replicas)

    def run(self, policy: dict | None = None):
        spec = parse_spec(policy if policy is not None else self.policy, "property")
        return evaluate(spec, self.pod, self.snapshot(), [n.name for n in self.nodes])


@st.composite
def node_layouts(draw) -> list[NodeInfo]:
    nodes = []
    for z in range(draw(st.integers(1, 4))):
        for i in range(draw(st.integers(1, 4))):
            name = f"z{z}n{i}"
            labels = {}
            if draw(st.booleans()) or i == 0:
                # usually the node's name; sometimes another value (the class table then cannot
                # read a node's domain as its name)
                labels[HOSTNAME_KEY] = draw(st.sampled_from([name, name, name, f"host-{name}"]))
            zone_label = draw(st.sampled_from([ZONE_KEY, ZONE_KEY, ZONE_KEY, LEGACY_ZONE_KEY, None]))
            if zone_label is not None:
                labels[zone_label] = f"zone{z}"
            rack = draw(st.sampled_from(["r0", "r1", None]))
            if rack is not None:
                labels[RACK] = rack
            taints = (TAINT,) if draw(st.integers(0, 5)) == 0 else ()
            nodes.append(NodeInfo(name, labels, draw(st.integers(0, 4)) > 0, taints))
    return nodes


def topology_keys(zone_key: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from([HOSTNAME_KEY, zone_key, RACK]), unique=True, max_size=3)


@st.composite
def cap_items(draw, key: str) -> dict:
    if draw(st.booleans()):
        return {"topologyKey": key, "max": draw(st.integers(1, 4))}
    return {
        "topologyKey": key,
        "fraction": draw(st.sampled_from(["1/3", "1/2", "2/3", "1/1", "1/4"])),
        "comparison": draw(st.sampled_from(["LessThan", "AtMost"])),
    }


@st.composite
def policies(draw, zones: list[str]) -> dict:
    zone_key = draw(st.sampled_from([ZONE_KEY, LEGACY_ZONE_KEY]))
    policy: dict = {"deadEndAvoidance": draw(st.booleans())}
    policy["caps"] = [draw(cap_items(k)) for k in draw(topology_keys(zone_key))]
    policy["spread"] = [
        {
            "topologyKey": k,
            "maxSkew": draw(st.integers(1, 2)),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"])),
        }
        for k in draw(topology_keys(zone_key))
    ]
    for spread in policy["spread"]:  # the native refinements, drawn
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            choice = draw(st.sampled_from([None, "Honor", "Ignore"]))
            if choice is not None:
                spread[field] = choice
        minimum = draw(st.sampled_from([None, None, 1, 2, 3, 5]))
        if minimum is not None and spread["whenUnsatisfiable"] == "DoNotSchedule":
            spread["minDomains"] = minimum
    policy["shardAntiAffinity"] = [
        {"topologyKey": k, "mode": draw(st.sampled_from(["Required", "Required", "Preferred"]))}
        for k in draw(topology_keys(zone_key))
    ]
    if draw(st.booleans()):
        policy["zones"] = {"allowed": draw(st.lists(st.sampled_from(zones + ["elsewhere"]), min_size=1, unique=True))}
    return policy


@st.composite
def node_constraints(draw, zones: list[str]) -> NodeConstraints | None:
    """None, or a nodeSelector on the rack and/or required affinity keeping out one zone, with
    or without a toleration of the one taint."""
    if draw(st.booleans()):
        return None
    selector = (("example.com/rack", draw(st.sampled_from(["r0", "r1"]))),) if draw(st.booleans()) else ()
    terms = None
    if draw(st.booleans()):
        terms = ((Requirement(ZONE_KEY, "NotIn", (draw(st.sampled_from([*zones, "elsewhere"])),)),),)
    tolerations = (Toleration(TAINT.key, "Exists", "", ""),) if draw(st.booleans()) else ()
    return NodeConstraints(selector, terms, tolerations)


ADMIT_ALL = NodeConstraints(
    (), ((Requirement(ZONE_KEY, "NotIn", ("elsewhere",)),),), (Toleration("", "Exists", "", ""),)
)


@st.composite
def cases(draw) -> Case:
    nodes = draw(node_layouts())
    zones = sorted({f"zone{n.name[1]}" for n in nodes})
    policy = draw(policies(zones))
    hosts = [n.name for n in nodes] + ["gone"]
    placements, next_ordinal = [], dict.fromkeys(SHARDS, 0)
    for i, (host, shard) in enumerate(
        draw(st.lists(st.tuples(st.sampled_from(hosts), st.sampled_from(SHARDS + [None])), max_size=10))
    ):
        ordinal = None
        if shard is not None:
            ordinal, next_ordinal[shard] = next_ordinal[shard], next_ordinal[shard] + 1
        leaving = draw(st.integers(0, 3)) == 0  # a terminating pod: a drain or a rolling update
        kind = PlacementKind.TERMINATING if leaving else PlacementKind.BOUND
        placements.append(Placement(f"db/p{i}", host, shard, ordinal, kind))
    shard = draw(st.sampled_from(SHARDS + [None]))
    pod = PodRequest("db/new", shard, next_ordinal[shard] if shard else None, constraints=draw(node_constraints(zones)))
    extra = draw(st.sampled_from([0, 1, 2, 4, None]))  # pods still to come after this one; None: size unknown
    group_size = None if extra is None else len(placements) + 1 + extra
    replicas = {}
    if draw(st.booleans()):
        replicas = {s: next_ordinal[s] + (1 if s == shard else 0) + draw(st.integers(0, 2)) for s in SHARDS}
    return Case(policy, nodes, placements, pod, group_size, replicas)


# -- properties -----------------------------------------------------------------------------------


@SETTINGS
@given(cases())
def test_passing_nodes_break_no_hard_rule(case: Case):
    decision = case.run()
    by_name = {n.name: n for n in case.nodes}
    for name in decision.passed():
        broken = violations(case.policy, by_name, case.placements, case.group_size, case.pod, name)
        assert not broken, (name, broken, decision.verdicts[name])


@SETTINGS
@given(cases())
def test_failing_nodes_break_a_rule_or_lead_to_a_dead_end(case: Case):
    """The converse: a node is filtered only for a broken hard rule or by one of the engine's own
    policies on top of them (dead-end avoidance)."""
    decision = case.run()
    by_name = {n.name: n for n in case.nodes}
    for name, verdict in decision.verdicts.items():
        if verdict.passed or verdict.rule == "deadEndAvoidance":
            continue
        assert violations(case.policy, by_name, case.placements, case.group_size, case.pod, name), verdict


@SETTINGS
@given(cases())
def test_scores_in_range_and_only_for_passing_nodes(case: Case):
    decision = case.run()
    assert set(decision.verdicts) == {n.name for n in case.nodes}
    for verdict in decision.verdicts.values():
        assert 0 <= verdict.score <= 10
        if not verdict.passed:
            assert verdict.score == 0
            assert verdict.outcome in (Outcome.FAIL, Outcome.UNRESOLVABLE) and verdict.rule and verdict.reason


@SETTINGS
@given(cases())
def test_dead_end_avoidance_only_narrows_and_never_empties(case: Case):
    greedy = set(case.run({**case.policy, "deadEndAvoidance": False}).passed())
    careful = set(case.run({**case.policy, "deadEndAvoidance": True}).passed())
    assert careful <= greedy
    assert bool(careful) == bool(greedy)


@SETTINGS
@given(cases())
def test_no_policy_passes_all(case: Case):
    names = [n.name for n in case.nodes] + ["not-in-cache"]
    decision = evaluate(None, case.pod, case.snapshot(), names)
    assert decision.passed() == names
    assert all(v.score == 0 for v in decision.verdicts.values())


@SETTINGS
@given(cases(), st.randoms(use_true_random=False), st.booleans(), st.booleans())
def test_class_table_and_node_by_node_agree(case: Case, rng, with_strangers: bool, everyone: bool):
    """The two ways of forming classes (the topology's class table, and each node's signature)
    give the same answer for every node, whatever subset and order of candidates is asked
    (`everyone`: every node of the cache, which the class table takes without intersecting)."""
    names = [n.name for n in case.nodes]
    rng.shuffle(names)
    if not everyone:
        names = names[: rng.randint(1, len(names))]
    if with_strangers:
        names += ["not-in-cache", names[0]]  # a node the cache lacks, and a repeated one
    spec = parse_spec(case.policy, "property")
    answers = []
    for ratio in (0, 10**9):  # class table always, never
        saved, evaluate_module.CANDIDATES_PER_CLASS = evaluate_module.CANDIDATES_PER_CLASS, ratio
        try:
            decision = evaluate(spec, case.pod, case.snapshot(), list(names))
        finally:
            evaluate_module.CANDIDATES_PER_CLASS = saved
        answers.append(
            (
                decision.order,
                sorted(decision.passed()),
                {n: (v.outcome, v.rule, v.reason, v.score) for n, v in decision.verdicts.items()},
            )
        )
    assert answers[0] == answers[1]


@SETTINGS
@given(cases(), st.booleans())
def test_one_node_check_is_evaluate_with_that_node_alone(case: Case, stranger: bool):
    """hard_rule_reason (the bind's re-check: the first failing rule, no classes or scores) gives
    each node the reason evaluate gives it as the only candidate without dead-end avoidance."""
    spec = parse_spec(case.policy, "property")
    snap = case.snapshot()
    for name in [n.name for n in case.nodes] + (["not-in-cache"] if stranger else []):
        verdict = evaluate(spec, case.pod, snap, [name], dead_end_avoidance=False).verdicts[name]
        assert hard_rule_reason(spec, case.pod, snap, name) == (None if verdict.passed else verdict.reason), name


@SETTINGS
@given(cases(), st.randoms(use_true_random=False))
def test_filters_reservation_domains_are_those_every_passing_node_shares(case: Case, rng):
    """passed_domains (what filter's reservation records, from the passing classes) equals
    shared_domains over the passing names, and both equal the domains every passing node has in
    common, counted node by node."""
    spec = parse_spec(case.policy, "property")
    names = [n.name for n in case.nodes]
    rng.shuffle(names)
    decision = evaluate(spec, case.pod, case.snapshot(), names)
    passed = decision.passed()
    assert passed_domains(decision) == shared_domains(decision, passed)
    if len(passed) > 1:
        ctx, by_name = decision.context, {n.name: n for n in case.nodes}
        common = {}
        for key in ctx.keys:
            values = {ctx.domain(by_name[n], key) for n in passed}
            if len(values) == 1 and None not in values:
                common[key] = values.pop()
        assert passed_domains(decision) == common


@SETTINGS
@given(cases())
def test_domain_counts_are_the_placements_counted_one_by_one(case: Case):
    """Context's per-domain counts (summed class by class from per-node counts) equal a plain
    count of the placed pods, domain by domain, for every key the policy reads."""
    spec = parse_spec(case.policy, "property")
    ctx = Context.build(spec, case.pod, case.snapshot())
    by_name = {n.name: n for n in case.nodes}
    for key in ctx.keys:
        expected: dict[str, int] = {}
        siblings: dict[str, int] = {}
        for p in case.placements:
            node = by_name.get(p.node or "")
            value = Topology.domain(node, key, ctx.zone_key, ctx.node_key) if node is not None else None
            if value is not None:
                expected[value] = expected.get(value, 0) + 1
                if case.pod.shard is not None and p.shard == case.pod.shard:
                    siblings[value] = siblings.get(value, 0) + 1
        assert {d: n for d, n in ctx.counts[key].items() if n} == expected, key
        assert {d: n for d, n in ctx.shard_counts[key].items() if n} == siblings, key


@SETTINGS
@given(cases(), st.sampled_from(["nodeAffinityPolicy", "nodeTaintsPolicy"]))
def test_honor_equals_ignore_when_every_node_is_eligible(case: Case, field: str):
    """A pod whose constraints admit every node (affinity away from a zone no node is in, a
    toleration of every taint): Honor and Ignore count the same nodes, so decide the same."""
    pod = PodRequest(case.pod.key, case.pod.shard, case.pod.ordinal, constraints=ADMIT_ALL)
    answers = []
    for mode in ("Honor", "Ignore"):
        policy = {**case.policy, "spread": [{**s, field: mode} for s in case.policy["spread"]]}
        decision = evaluate(parse_spec(policy, "property"), pod, case.snapshot(), [n.name for n in case.nodes])
        answers.append({n: (v.outcome, v.rule, v.reason, v.score) for n, v in decision.verdicts.items()})
    assert answers[0] == answers[1]

"""The independent checker (extender/checker.py) by its own table of cases.

`audit` and `ab` count violations with it, and it is simpler than the engine on purpose: it
recomputes each hard rule from a finished placement, with no counts kept, no reservations and no
dead-end analysis, so a bug in the engine does not hide itself. These cases pin down what it
reports, independently of the engine's tests.
"""

from __future__ import annotations

import pytest

from extender.checker import Member, violations
from extender.engine import NodeInfo
from extender.policy import HOSTNAME_KEY, ZONE_KEY, PlacementPolicySpec

NODES = {
    n: NodeInfo(n, {HOSTNAME_KEY: n, ZONE_KEY: z}) for n, z in (("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"))
}


def member(name: str, node: str, shard: str | None = "s", ordinal: int | None = None) -> Member:
    return Member(f"db/{name}", node, shard, ordinal)


CASES = [
    pytest.param(
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        [member("s-0", "a1"), member("s-1", "a2")],
        2,
        [],
        id="cap-kept",
    ),
    pytest.param(
        {"caps": [{"topologyKey": HOSTNAME_KEY, "max": 1}]},
        [member("s-0", "a1"), member("s-1", "a1")],
        2,
        ["caps"],
        id="cap-broken-on-a-node",
    ),
    pytest.param(
        {"caps": [{"topologyKey": ZONE_KEY, "fraction": "1/2", "comparison": "LessThan"}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "b1"), member("s-3", "c1")],
        4,
        ["caps"],
        id="fraction-cap-broken-in-a-zone",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "b1"), member("s-3", "c1")],
        4,
        [],
        id="spread-within-skew",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "a1")],
        3,
        ["spread"],
        id="spread-beyond-skew",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
        [member("s-0", "a1"), member("s-1", "a2"), member("s-2", "a1")],
        3,
        [],
        id="soft-spread-never-broken",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]},
        [member("s-0", "a1"), member("s-1", "a2", shard="s")],
        2,
        ["shardAntiAffinity"],
        id="anti-affinity-broken",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]},
        [member("s-0", "a1"), member("t-0", "a2", shard="t")],
        2,
        [],
        id="other-shards-may-share",
    ),
    pytest.param({"zones": {"allowed": ["a", "b"]}}, [member("s-0", "c1")], 1, ["zones"], id="outside-allowed-zones"),
]


@pytest.mark.parametrize(("policy", "members", "size", "rules"), CASES)
def test_checker_reports_each_broken_rule(policy, members, size, rules) -> None:
    spec = PlacementPolicySpec.model_validate(policy)
    found = violations(spec, members, NODES, size)
    assert sorted({v.rule for v in found}) == rules, found
    assert all(v.message for v in found)

"""Valid policies at their bounds (extender/limits.py), alone and combined: what a tenant may
write without any validation message, and so what must never slow another tenant's pods.

Shared by the HTTP fuzzer's valid-extreme profile (tests/unit/test_fuzz_http.py) and the
lock-hold property on the benchmark's 1,000-node cluster (tests/unit/test_extreme_policies.py),
and written out for the hostile-tenant e2e scenario.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from extender.limits import (
    MAX_CAPS,
    MAX_FALLBACK_GROUPS,
    MAX_GROUP_SIZE,
    MAX_LABEL_VALUE,
    MAX_MIN_DOMAINS,
    MAX_POLICY_ZONES,
    MAX_SELECTOR_EXPRESSIONS,
    MAX_SELECTOR_LABELS,
    MAX_SELECTOR_VALUES,
    MAX_TOPOLOGY_RULES,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SECTIONS = ("zones", "fallback", "weights", "ordinal", "caps", "spread", "anti", "selector", "size")


def zone_names(real: list[str], with_nodes: int) -> list[str]:
    """MAX_POLICY_ZONES zone names: `with_nodes` of the cluster's own, the rest zones no node is in."""
    own = real[:with_nodes]
    return own + [f"nowhere-{i}" for i in range(MAX_POLICY_ZONES - len(own))]


def at_bounds(sections: set[str], zones: list[str], *, hard: bool = True) -> dict[str, Any]:
    """One policy with each named section at its bound (`hard`: the hard forms where a rule has two)."""
    policy: dict[str, Any] = {}
    if sections & {"zones", "fallback", "weights"}:
        policy["zones"] = {}
    if "zones" in sections or "fallback" in sections:
        policy["zones"]["allowed"] = zones
    if "fallback" in sections and "ordinal" not in sections:
        step = max(1, len(zones) // MAX_FALLBACK_GROUPS)
        policy["zones"]["fallbackGroups"] = [
            zones[i * step : (i + 1) * step] or zones[-1:] for i in range(MAX_FALLBACK_GROUPS)
        ]
    if "weights" in sections:
        policy["zones"]["weights"] = {z: 100 - i % 101 for i, z in enumerate(zones)}
    if "ordinal" in sections:
        policy["ordinalZones"] = {"order": zones}
    if "caps" in sections:
        policy["caps"] = [
            {"topologyKey": HOST, "max": 1},
            {"topologyKey": ZONE, "fraction": "1/3", "comparison": "LessThan"},
        ]
        policy["caps"] += [{"topologyKey": f"example.com/cap-{i}", "max": 1} for i in range(MAX_CAPS - 2)]
    if "spread" in sections:
        when = "DoNotSchedule" if hard else "ScheduleAnyway"
        policy["spread"] = [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": when}]
        policy["spread"] += [
            {"topologyKey": f"example.com/spread-{i}", "maxSkew": 1, "whenUnsatisfiable": when}
            for i in range(MAX_TOPOLOGY_RULES - 1)
        ]
        if hard:
            policy["spread"][0]["minDomains"] = MAX_MIN_DOMAINS
    if "anti" in sections:
        mode = "Required" if hard else "Preferred"
        policy["shardAntiAffinity"] = [{"topologyKey": HOST, "mode": mode}]
        policy["shardAntiAffinity"] += [
            {"topologyKey": f"example.com/anti-{i}", "mode": mode} for i in range(MAX_TOPOLOGY_RULES - 1)
        ]
    group: dict[str, Any] = {}
    if "selector" in sections:
        value = "v" * MAX_LABEL_VALUE
        group["selector"] = {
            "matchLabels": {f"example.com/l{i}": value for i in range(MAX_SELECTOR_LABELS)},
            "matchExpressions": [
                {
                    "key": f"example.com/e{i}",
                    "operator": "In",
                    "values": [f"{value[:-3]}{j:03d}" for j in range(MAX_SELECTOR_VALUES)],
                }
                for i in range(MAX_SELECTOR_EXPRESSIONS)
            ],
        }
        group["matchLabelKeys"] = [f"example.com/k{i}" for i in range(16)]
    if "size" in sections:
        group["size"] = MAX_GROUP_SIZE
    if group:
        policy["group"] = group
    return policy


@st.composite
def extreme_policies(draw, real_zones: list[str]) -> dict[str, Any]:
    """A valid policy with a drawn combination of sections at their bounds; the allowed zones are
    all MAX_POLICY_ZONES, of which none, one or all of the cluster's own have nodes."""
    sections = set(draw(st.sets(st.sampled_from(SECTIONS), min_size=1)))
    with_nodes = draw(st.sampled_from([0, 1, len(real_zones)]))
    return at_bounds(sections, zone_names(real_zones, with_nodes), hard=draw(st.booleans()))

"""PlacementPolicySpec validation, annotation parsing, and Cap.limit arithmetic (the NetEase Redis design's numbers)."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from extender.api.policy import (
    FRACTION_PATTERN,
    HOSTNAME_KEY,
    LEGACY_ZONE_KEY,
    MAX_FRACTION_LENGTH,
    ZONE_KEY,
    Cap,
    PlacementPolicySpec,
    PolicyError,
    parse_annotation,
    parse_spec,
)


def host_cap(**kw) -> dict:
    return {"topologyKey": HOSTNAME_KEY, **kw}


def zone_cap(**kw) -> dict:
    return {"topologyKey": ZONE_KEY, **kw}


# -- valid specs --------------------------------------------------------------------------------

VALID = [
    pytest.param({}, id="empty"),
    pytest.param({"caps": [host_cap(max=2)]}, id="cap-max"),
    pytest.param({"caps": [host_cap(fraction="1/3", comparison="LessThan")]}, id="cap-fraction-lessthan"),
    pytest.param({"caps": [zone_cap(fraction="1/2", comparison="AtMost")]}, id="cap-fraction-atmost"),
    pytest.param({"caps": [host_cap(fraction="1/1", comparison="AtMost")]}, id="cap-fraction-one"),
    pytest.param({"caps": [host_cap(fraction="3/3", comparison="AtMost")]}, id="cap-fraction-one-unreduced"),
    pytest.param({"caps": [host_cap(fraction="007/8", comparison="AtMost")]}, id="cap-fraction-leading-zeros"),
    pytest.param({"caps": [host_cap(fraction="1/999999999999999999", comparison="AtMost")]}, id="cap-fraction-longest"),
    pytest.param({"zones": {"allowed": ["a"]}}, id="allowed-one-zone"),
    pytest.param({"caps": [host_cap(max=1), zone_cap(max=3), {"topologyKey": "rack", "max": 2}]}, id="caps-three-keys"),
    pytest.param({"zones": {"allowed": ["a", "b"], "fallbackGroups": [["a"], ["b"]]}}, id="fallback-within-allowed"),
    pytest.param({"zones": {"fallbackGroups": [["a", "b"], ["c"]]}}, id="fallback-alone"),
    pytest.param({"zones": {"weights": {"a": 100, "b": 0}}}, id="weights"),
    pytest.param({"ordinalZones": {}}, id="ordinal-zones-derived"),
    pytest.param(
        {"ordinalZones": {"order": ["b", "a"]}, "zones": {"allowed": ["a", "b", "c"]}},
        id="ordinal-order-within-allowed",
    ),
    pytest.param(
        {
            "caps": [zone_cap(max=4)],
            "spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}],
            "shardAntiAffinity": [{"topologyKey": ZONE_KEY}],
        },
        id="same-key-across-sections",
    ),
    pytest.param(
        {"spread": [{"topologyKey": HOSTNAME_KEY, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
        id="soft-spread",
    ),
    pytest.param({"group": {"size": 6, "selector": {"matchLabels": {"app": "redis"}}}}, id="group"),
    pytest.param(
        {"group": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}}, id="selector-exists"
    ),
    pytest.param({"topology": {"zone": "example.com/zone", "node": "example.com/node"}}, id="custom-keys"),
    pytest.param({"deadEndAvoidance": False}, id="dead-end-off"),
    pytest.param(
        {
            "spread": [
                {
                    "topologyKey": ZONE_KEY,
                    "maxSkew": 1,
                    "minDomains": 3,
                    "nodeAffinityPolicy": "Ignore",
                    "nodeTaintsPolicy": "Honor",
                }
            ]
        },
        id="spread-native-refinements",
    ),
    pytest.param({"group": {"matchLabelKeys": ["pod-template-hash"]}}, id="group-match-label-keys"),
]


@pytest.mark.parametrize("data", VALID)
def test_valid_policies(data):
    spec = parse_spec(data, "test")
    assert isinstance(spec, PlacementPolicySpec)


def test_defaults():
    spec = parse_spec({}, "test")
    assert spec.topology.zone == ZONE_KEY and spec.topology.node == HOSTNAME_KEY
    assert spec.caps == [] and spec.zones is None and spec.ordinalZones is None
    assert spec.deadEndAvoidance is True
    assert not spec.uses_zones


# -- invalid specs: (data, substrings the error message must contain) ----------------------------

INVALID = [
    pytest.param({"caps": [host_cap()]}, ["caps.0", "exactly one of max or fraction"], id="cap-neither"),
    pytest.param(
        {"caps": [host_cap(max=2, fraction="1/3", comparison="LessThan")]}, ["caps.0", "exactly one"], id="cap-both"
    ),
    pytest.param({"caps": [host_cap(fraction="1/3")]}, ["caps.0", "comparison"], id="fraction-without-comparison"),
    pytest.param(
        {"caps": [host_cap(max=2, comparison="AtMost")]},
        ["caps.0", "comparison goes with fraction"],
        id="max-with-comparison",
    ),
    pytest.param(
        {"caps": [host_cap(fraction="0/3", comparison="AtMost")]}, ["caps.0.fraction", "(0, 1]"], id="fraction-zero"
    ),
    pytest.param(
        {"caps": [host_cap(fraction="4/3", comparison="AtMost")]},
        ["caps.0.fraction: fraction 4/3 must be in (0, 1]"],
        id="fraction-above-one",
    ),
    pytest.param(
        {"caps": [host_cap(fraction="10/9", comparison="LessThan")]}, ["caps.0.fraction", "(0, 1]"], id="fraction-10/9"
    ),
    pytest.param(
        {"caps": [host_cap(fraction="1/9999999999999999999", comparison="AtMost")]},
        ["caps.0.fraction", "at most 20 characters"],
        id="fraction-too-long",
    ),
    pytest.param(
        {"caps": [host_cap(fraction="1/0", comparison="AtMost")]}, ["caps.0.fraction"], id="fraction-zero-denominator"
    ),
    pytest.param({"caps": [host_cap(fraction="0.5", comparison="AtMost")]}, ["caps.0.fraction"], id="fraction-decimal"),
    pytest.param(
        {"caps": [host_cap(fraction="1/3", comparison="Below")]}, ["caps.0.comparison"], id="comparison-unknown"
    ),
    pytest.param({"caps": [host_cap(max=0)]}, ["caps.0.max"], id="cap-max-zero"),
    pytest.param({"caps": [{"max": 1}]}, ["caps.0.topologyKey"], id="cap-without-key"),
    pytest.param({"caps": [{"topologyKey": "bad key!", "max": 1}]}, ["caps.0.topologyKey"], id="bad-label-key"),
    pytest.param(
        {"caps": [host_cap(max=1), host_cap(max=2)]}, ["spec: caps lists the same topologyKey twice"], id="dup-cap"
    ),
    pytest.param(
        {"caps": [zone_cap(max=1), {"topologyKey": LEGACY_ZONE_KEY, "max": 2}]},
        ["spec: caps lists the same topologyKey twice"],
        id="dup-cap-legacy-zone",
    ),
    pytest.param(
        {
            "topology": {"zone": "example.com/zone"},
            "caps": [{"topologyKey": "example.com/zone", "max": 1}, {"topologyKey": LEGACY_ZONE_KEY, "max": 2}],
        },
        ["spec: caps lists the same topologyKey twice"],
        id="dup-cap-custom-zone-vs-legacy",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1}, {"topologyKey": LEGACY_ZONE_KEY, "maxSkew": 2}]},
        ["spec: spread lists the same topologyKey twice"],
        id="dup-spread-legacy-zone",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": HOSTNAME_KEY}, {"topologyKey": HOSTNAME_KEY, "mode": "Preferred"}]},
        ["spec: shardAntiAffinity lists the same topologyKey twice"],
        id="dup-anti-affinity",
    ),
    pytest.param({"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 0}]}, ["spread.0.maxSkew"], id="spread-skew-zero"),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "whenUnsatisfiable": "Sometimes"}]},
        ["spread.0.whenUnsatisfiable"],
        id="spread-bad-when",
    ),
    pytest.param(
        {"shardAntiAffinity": [{"topologyKey": ZONE_KEY, "mode": "Always"}]},
        ["shardAntiAffinity.0.mode"],
        id="anti-bad-mode",
    ),
    pytest.param(
        {"zones": {"allowed": ["a"], "fallbackGroups": [["a"], ["b", "c"]]}},
        ["zones: fallbackGroups name zones outside allowed: b, c"],
        id="fallback-outside-allowed",
    ),
    pytest.param(
        {"zones": {"fallbackGroups": []}}, ["zones: fallbackGroups needs at least one group"], id="fallback-empty"
    ),
    pytest.param(
        {"zones": {"fallbackGroups": [["a"], []]}},
        ["zones: fallbackGroups needs", "no empty group"],
        id="fallback-empty-group",
    ),
    pytest.param({"zones": {"weights": {"a": 101}}}, ["zones.weights.a"], id="weight-above-100"),
    pytest.param({"zones": {"allowed": []}}, ["zones.allowed", "at least 1 item"], id="allowed-empty"),
    pytest.param(
        {"caps": [{"topologyKey": f"example.com/level-{i}", "max": 1} for i in range(17)]},
        ["caps", "at most 16 items"],
        id="caps-over-limit",
    ),
    pytest.param(
        {"ordinalZones": {}, "zones": {"fallbackGroups": [["a"], ["b"]]}},
        ["spec: ordinalZones and zones.fallbackGroups cannot be combined"],
        id="ordinal-with-fallback",
    ),
    pytest.param(
        {"ordinalZones": {"order": ["a", "d"]}, "zones": {"allowed": ["a", "b"]}},
        ["ordinalZones.order names zones outside zones.allowed: d"],
        id="ordinal-order-outside-allowed",
    ),
    pytest.param(
        {"ordinalZones": {"order": []}}, ["ordinalZones.order", "at least one zone"], id="ordinal-order-empty"
    ),
    pytest.param(
        {"ordinalZones": {"order": ["a", "a"]}}, ["ordinalZones.order", "twice"], id="ordinal-order-duplicate"
    ),
    pytest.param({"group": {"size": 0}}, ["group.size"], id="group-size-zero"),
    pytest.param(
        {"group": {"size": 100_000_000}}, ["group.size", "less than or equal to 1000000"], id="group-size-over-limit"
    ),
    pytest.param(
        {"group": {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}},
        ["group.selector.matchExpressions.0", "needs at least one value"],
        id="selector-in-without-values",
    ),
    pytest.param(
        {"group": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]}}},
        ["group.selector.matchExpressions.0", "takes no values"],
        id="selector-exists-with-values",
    ),
    pytest.param({"capz": []}, ["capz", "Extra inputs are not permitted"], id="unknown-top-level"),
    pytest.param({"caps": [host_cap(max=1, maximum=2)]}, ["caps.0.maximum", "Extra inputs"], id="unknown-in-cap"),
    pytest.param({"zones": {"allowd": ["a"]}}, ["zones.allowd", "Extra inputs"], id="unknown-in-zones"),
    pytest.param({"topology": {"region": "x"}}, ["topology.region", "Extra inputs"], id="unknown-in-topology"),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "minDomains": 0}]},
        ["spread.0.minDomains", "greater than or equal to 1"],
        id="min-domains-zero",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"}]},
        ["spread.0", "minDomains applies only with whenUnsatisfiable: DoNotSchedule"],
        id="min-domains-soft",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "nodeAffinityPolicy": "Always"}]},
        ["spread.0.nodeAffinityPolicy", "'Honor' or 'Ignore'"],
        id="node-affinity-policy-unknown",
    ),
    pytest.param(
        {"spread": [{"topologyKey": ZONE_KEY, "maxSkew": 1, "nodeTaintsPolicy": "honor"}]},
        ["spread.0.nodeTaintsPolicy", "'Honor' or 'Ignore'"],
        id="node-taints-policy-case",
    ),
    pytest.param(
        {"group": {"matchLabelKeys": ["pod-template-hash", "pod-template-hash"]}},
        ["group.matchLabelKeys", "twice"],
        id="match-label-keys-duplicate",
    ),
    pytest.param({"group": {"matchLabelKeys": ["bad key!"]}}, ["group.matchLabelKeys.0"], id="match-label-key-bad"),
]


@pytest.mark.parametrize(("data", "needles"), INVALID)
def test_invalid_policies(data, needles):
    with pytest.raises(PolicyError) as err:
        parse_spec(data, "pod db/redis-0")
    message = str(err.value)
    assert message.startswith("invalid placement policy in pod db/redis-0: ")
    for needle in needles:
        assert needle in message, message


@pytest.mark.parametrize(
    "data", [pytest.param([], id="list"), pytest.param("caps", id="string"), pytest.param(3, id="int")]
)
def test_spec_must_be_a_mapping(data):
    with pytest.raises(PolicyError, match="expected a mapping"):
        parse_spec(data, "x")


# -- fractions: what the model accepts is what the CRD's pattern, maxLength and CEL rule accept ------


def crd_accepts_fraction(text: str) -> bool:
    """extender/api/schema.py's rule for Cap.fraction, read in Python: the model's pattern and
    maxLength, then int(p) > 0 && int(p) <= int(q) as CEL computes it, in int64."""
    if len(text) > MAX_FRACTION_LENGTH or re.fullmatch(FRACTION_PATTERN.strip("^$"), text) is None:
        return False
    p, q = (int(part) for part in text.split("/"))
    assert max(p, q) < 2**63, "the CEL rule's int() would overflow"
    return 0 < p <= q


FRACTION_TEXT = st.one_of(
    st.builds(lambda p, q: f"{p}/{q}", st.integers(0, 10**19), st.integers(0, 10**19)),
    st.builds(lambda z, p, q: f"{'0' * z}{p}/{q}", st.integers(0, 3), st.integers(0, 40), st.integers(1, 40)),
    st.text(alphabet="0123456789/.-", max_size=24),
)


@settings(max_examples=500, deadline=None)
@given(FRACTION_TEXT)
def test_model_and_crd_rule_accept_the_same_fractions(text: str) -> None:
    try:
        Cap(topologyKey=HOSTNAME_KEY, fraction=text, comparison="AtMost")
        accepted = True
    except ValidationError as err:
        assert all(e["loc"] == ("fraction",) for e in err.errors()), err  # the field is named
        accepted = False
    assert accepted == crd_accepts_fraction(text)
    if accepted:
        assert 0 < Fraction(text) <= 1


@given(st.from_regex(FRACTION_PATTERN, fullmatch=True).filter(lambda t: len(t) <= MAX_FRACTION_LENGTH))
def test_every_fraction_within_the_length_fits_int64(text: str) -> None:
    assert all(int(part) < 2**63 for part in text.split("/"))


# -- inline annotation -------------------------------------------------------------------------

YAML_POLICY = """\
caps:
- topologyKey: kubernetes.io/hostname
  fraction: 1/3
  comparison: LessThan
shardAntiAffinity:
- topologyKey: topology.kubernetes.io/zone
"""


@pytest.mark.parametrize(
    ("text", "caps", "anti"),
    [
        pytest.param("", 0, 0, id="empty-text"),
        pytest.param("{}", 0, 0, id="empty-json"),
        pytest.param('{"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}]}', 1, 0, id="json"),
        pytest.param(YAML_POLICY, 1, 1, id="yaml"),
        pytest.param("caps: [{topologyKey: rack, max: 1}]", 1, 0, id="yaml-flow"),
    ],
)
def test_annotation_parses(text, caps, anti):
    spec = parse_annotation(text, "annotation")
    assert len(spec.caps) == caps and len(spec.shardAntiAffinity) == anti


def test_annotation_yaml_values():
    spec = parse_annotation(YAML_POLICY, "annotation")
    assert spec.caps[0].fraction == "1/3" and spec.caps[0].comparison == "LessThan"
    assert spec.shardAntiAffinity[0].mode == "Required"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param("caps: [unclosed", "not JSON or YAML", id="broken-yaml"),
        pytest.param("- a\n- b", "expected a mapping", id="yaml-list"),
        pytest.param('"just a string"', "expected a mapping", id="json-string"),
        pytest.param('{"caps": [{"topologyKey": "rack"}]}', "caps.0: a cap takes exactly one", id="json-invalid-cap"),
        pytest.param("spread:\n- topologyKey: rack\n  maxSkew: 0\n", "spread.0.maxSkew", id="yaml-invalid-spread"),
    ],
)
def test_annotation_errors(text, needle):
    with pytest.raises(PolicyError) as err:
        parse_annotation(text, "pod db/x")
    assert "pod db/x" in str(err.value) and needle in str(err.value)


# -- Cap.limit ---------------------------------------------------------------------------------


def cap(fraction: str, comparison: str) -> Cap:
    return Cap(topologyKey=HOSTNAME_KEY, fraction=fraction, comparison=comparison)


@pytest.mark.parametrize(
    ("fraction", "comparison", "size", "limit"),
    [
        # the NetEase Redis design: 3 shards x 2 = 6 pods; "fewer than 1/3 per node", "fewer than 1/2 per zone"
        pytest.param("1/3", "LessThan", 6, 1, id="lt-third-of-6"),
        pytest.param("1/3", "AtMost", 6, 2, id="atmost-third-of-6"),
        pytest.param("1/2", "LessThan", 6, 2, id="lt-half-of-6"),
        pytest.param("1/2", "AtMost", 6, 3, id="atmost-half-of-6"),
        # the NetEase Redis design's ConfigMap: cluster-size 18, max-pod-on-node 5, max-pod-in-zone 8
        pytest.param("1/3", "LessThan", 18, 5, id="lt-third-of-18-max-pod-on-node"),
        pytest.param("1/2", "LessThan", 18, 8, id="lt-half-of-18-max-pod-in-zone"),
        # not divisible: both comparisons agree
        pytest.param("1/3", "LessThan", 10, 3, id="lt-third-of-10"),
        pytest.param("1/3", "AtMost", 10, 3, id="atmost-third-of-10"),
        pytest.param("1/2", "LessThan", 10, 4, id="lt-half-of-10"),
        pytest.param("1/1", "AtMost", 4, 4, id="atmost-all"),
        pytest.param("1/1", "LessThan", 4, 3, id="lt-all"),
        pytest.param("1/3", "LessThan", 1, 0, id="lt-third-of-1"),
        pytest.param("2/3", "AtMost", 9, 6, id="atmost-two-thirds-of-9"),
        pytest.param("1/3", "LessThan", None, None, id="unknown-size"),
        pytest.param("1/2", "AtMost", None, None, id="unknown-size-atmost"),
    ],
)
def test_cap_limit(fraction, comparison, size, limit):
    assert cap(fraction, comparison).limit(size) == limit


@pytest.mark.parametrize("size", [None, 1, 6, 100], ids=lambda s: f"size-{s}")
def test_absolute_cap_ignores_size(size):
    assert Cap(topologyKey="rack", max=3).limit(size) == 3


@pytest.mark.parametrize(
    ("data", "size", "text"),
    [
        pytest.param({"max": 2}, 6, f"at most 2 per {HOSTNAME_KEY}", id="max"),
        pytest.param(
            {"fraction": "1/3", "comparison": "LessThan"}, 6, f"fewer than 1/3 of 6 per {HOSTNAME_KEY}", id="lt"
        ),
        pytest.param(
            {"fraction": "1/2", "comparison": "AtMost"}, 6, f"no more than 1/2 of 6 per {HOSTNAME_KEY}", id="atmost"
        ),
        pytest.param(
            {"fraction": "1/3", "comparison": "LessThan"},
            None,
            f"fewer than 1/3 of the group (size unknown) per {HOSTNAME_KEY}",
            id="size-unknown",
        ),
    ],
)
def test_cap_describe(data, size, text):
    assert Cap(topologyKey=HOSTNAME_KEY, **data).describe(size) == text


@pytest.mark.parametrize(
    ("data", "uses_zones"),
    [
        pytest.param({}, False, id="empty"),
        pytest.param({"caps": [host_cap(max=1)]}, False, id="host-cap"),
        pytest.param({"caps": [{"topologyKey": LEGACY_ZONE_KEY, "max": 1}]}, True, id="legacy-zone-cap"),
        pytest.param({"zones": {"allowed": ["a"]}}, True, id="allowed"),
        pytest.param({"zones": {"weights": {"a": 1}}}, False, id="weights-only"),
        pytest.param({"ordinalZones": {}}, True, id="ordinal"),
        pytest.param({"shardAntiAffinity": [{"topologyKey": ZONE_KEY}]}, True, id="anti-zone"),
    ],
)
def test_uses_zones(data, uses_zones):
    assert parse_spec(data, "t").uses_zones is uses_zones


@pytest.mark.parametrize(
    ("zones", "permitted"),
    [
        pytest.param({}, None, id="none"),
        pytest.param({"allowed": ["a", "b"]}, {"a", "b"}, id="allowed"),
        pytest.param({"fallbackGroups": [["a"], ["b"]]}, {"a", "b"}, id="groups"),
        pytest.param({"allowed": ["a", "b", "c"], "fallbackGroups": [["b"], ["c"]]}, {"b", "c"}, id="intersection"),
    ],
)
def test_zones_permitted(zones, permitted):
    got = parse_spec({"zones": zones}, "t").zones.permitted()
    assert (got if got is None else set(got)) == permitted


def test_spec_is_frozen():
    spec = parse_spec({"caps": [host_cap(max=1)]}, "t")
    with pytest.raises(ValidationError, match="frozen"):
        spec.deadEndAvoidance = False  # type: ignore[misc]

"""translate: the native fragment a policy comes closest to, and the listed gaps."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import PlacementPolicySpec
from extender.cli.commands import main
from extender.ops.translate import translate

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"


def netease(size: int | None) -> PlacementPolicySpec:
    """The NetEase Redis design's policy. With its size given (group.size), its caps have exact native forms; the
    seed's formulas are for a size known only from the StatefulSets (translate's group_size)."""
    group: dict = {"selector": {"matchLabels": {"cluster": "redis-a"}}}
    if size is not None:
        group["size"] = size
    return PlacementPolicySpec.model_validate(
        {
            "group": group,
            "zones": {"allowed": ["zoneA", "zoneB", "zoneC"]},
            "caps": [
                {"topologyKey": HOST, "fraction": "1/3", "comparison": "LessThan"},
                {"topologyKey": ZONE, "fraction": "1/2", "comparison": "LessThan"},
            ],
            "shardAntiAffinity": [{"topologyKey": ZONE, "mode": "Required"}],
        }
    )


def skews(fragment: dict) -> dict[tuple[str, str], int]:
    return {(c["topologyKey"], c["whenUnsatisfiable"]): c["maxSkew"] for c in fragment["topologySpreadConstraints"]}


@pytest.mark.parametrize("size", [2, 3, 4, 5, 6, 7, 9, 10, 12, 18, 20])
def test_seed_002_formulas(size: int) -> None:
    """maxSkew = floor(N/3), minus 1 when 3 divides N; per zone floor(N/2), minus 1 when 2 divides N."""
    got = skews(translate(netease(None), group_size=size).fragment)
    assert got[(HOST, "DoNotSchedule")] == size // 3 - (1 if size % 3 == 0 else 0)
    assert got[(ZONE, "DoNotSchedule")] == size // 2 - (1 if size % 2 == 0 else 0)


def test_seed_002_example_fragment() -> None:
    """The seed's 6-pod cluster: maxSkew 1 per node and 2 per zone (hard), 1 per zone (soft),
    required zones as node affinity, shard anti-affinity by zone as required pod anti-affinity.
    The seed also lists a soft maxSkew 1 per node; beside the hard one it adds nothing, so it
    is left out (translate emits only constraints that add something)."""
    result = translate(netease(None), group_size=6)
    assert skews(result.fragment) == {
        (HOST, "DoNotSchedule"): 1,
        (ZONE, "DoNotSchedule"): 2,
        (ZONE, "ScheduleAnyway"): 1,
    }
    for c in result.fragment["topologySpreadConstraints"]:
        assert c["labelSelector"] == {"matchLabels": {"cluster": "redis-a"}}
    affinity = result.fragment["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zoneA", "zoneB", "zoneC"]}]}]
    anti = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti == [
        {
            "labelSelector": {"matchLabels": {"cluster": "redis-a"}},
            "topologyKey": ZONE,
            "matchLabelKeys": ["controller-revision-hash"],
        }
    ]
    assert {g.rule for g in result.gaps} >= {"caps", "deadEndAvoidance", "shardAntiAffinity"}


def test_seed_000_one_constraint_per_key_and_preferred_anti_affinity() -> None:
    spec = PlacementPolicySpec.model_validate(
        {
            "spread": [{"topologyKey": ZONE, "maxSkew": 1}, {"topologyKey": HOST, "maxSkew": 1}],
            "shardAntiAffinity": [{"topologyKey": HOST, "mode": "Preferred"}],
        }
    )
    result = translate(spec, match_labels={"app.kubernetes.io/instance": "mongo"})
    assert skews(result.fragment)[(ZONE, "DoNotSchedule")] == 1 and skews(result.fragment)[(HOST, "DoNotSchedule")] == 1
    preferred = result.fragment["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [
        {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": "mongo"}},
                "topologyKey": HOST,
            },
        }
    ]


def test_cap_and_spread_on_one_key_merge_to_the_tighter() -> None:
    spec = PlacementPolicySpec.model_validate(
        {"caps": [{"topologyKey": ZONE, "max": 3}], "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
    )
    constraints = translate(spec, match_labels={"app": "x"}).fragment["topologySpreadConstraints"]
    assert [
        (c["topologyKey"], c["whenUnsatisfiable"], c["maxSkew"])
        for c in constraints
        if c["whenUnsatisfiable"] == "DoNotSchedule"
    ] == [(ZONE, "DoNotSchedule", 1)]


def test_what_cannot_be_expressed_is_listed() -> None:
    spec = PlacementPolicySpec.model_validate({"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]})
    rules = {g.rule for g in translate(spec, match_labels={"app": "crdb"}).gaps}
    assert {"ordinalZones", "deadEndAvoidance"} <= rules and "caps" not in rules  # a cap of 1 is kept exactly
    spec = PlacementPolicySpec.model_validate({"zones": {"fallbackGroups": [["a", "b"], ["c"]], "weights": {"a": 20}}})
    result = translate(spec, match_labels={"app": "x"})
    assert "zones.fallbackGroups" in {g.rule for g in result.gaps}
    weights = [
        t["weight"]
        for t in result.fragment["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    ]
    assert weights == [100, 50, 20]


def test_fraction_caps_without_size_are_reported_not_guessed() -> None:
    spec = PlacementPolicySpec.model_validate(
        {"caps": [{"topologyKey": HOST, "fraction": "1/3", "comparison": "AtMost"}]}
    )
    result = translate(spec, match_labels={"app": "x"})
    assert (HOST, "DoNotSchedule") not in skews(result.fragment)
    assert any("needs the group size" in g.limitation for g in result.gaps)


def test_no_selector_and_no_labels_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="--match-labels"):
        translate(PlacementPolicySpec())


def test_cli_reads_a_statefulset_with_an_inline_policy(tmp_path, capsys) -> None:
    manifest = tmp_path / "sts.yaml"
    manifest.write_text(open("config/examples/cockroachdb-ordinal-zones.yaml").read())
    assert main(["translate", str(manifest), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["groupSize"] == 6 and out["source"] == "StatefulSet crdb"
    assert {c["labelSelector"]["matchLabels"]["app"] for c in out["fragment"]["topologySpreadConstraints"]} == {"crdb"}
    assert {"rule", "limitation", "cost"} == set(out["gaps"][0])


def test_cli_error_is_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("caps: [{topologyKey: x}]\n")
    assert main(["translate", str(bad)]) == 1  # an invalid policy: exit_codes.FINDING
    assert "exactly one of max or fraction" in capsys.readouterr().err


def test_the_fragment_dumps_as_yaml_with_every_mode() -> None:
    """`translate` prints YAML with yaml.safe_dump, which refuses enum members: every mode in the
    fragment must be a plain string (a StrEnum once leaked through a spread's whenUnsatisfiable)."""
    import yaml

    spec = PlacementPolicySpec.model_validate(
        {
            "group": {"selector": {"matchLabels": {"app": "db"}}},
            "spread": [
                {"topologyKey": "topology.kubernetes.io/zone", "maxSkew": 1},
                {"topologyKey": "kubernetes.io/hostname", "maxSkew": 2, "whenUnsatisfiable": "ScheduleAnyway"},
            ],
            "shardAntiAffinity": [{"topologyKey": "kubernetes.io/hostname", "mode": "Preferred"}],
        }
    )
    text = yaml.safe_dump(translate(spec).fragment)
    assert "whenUnsatisfiable: DoNotSchedule" in text and "whenUnsatisfiable: ScheduleAnyway" in text


# -- the native refinements, one to one ---------------------------------------------------------
SELECTOR = {"selector": {"matchLabels": {"app": "db"}}}


def hard(fragment: dict, key: str) -> dict:
    return next(
        c
        for c in fragment["topologySpreadConstraints"]
        if c["topologyKey"] == key and c["whenUnsatisfiable"] == "DoNotSchedule"
    )


@pytest.mark.parametrize(
    ("spread", "expected"),
    [
        pytest.param({}, {}, id="defaults-are-native-defaults"),
        pytest.param({"minDomains": 3}, {"minDomains": 3}, id="min-domains"),
        pytest.param({"nodeAffinityPolicy": "Ignore"}, {"nodeAffinityPolicy": "Ignore"}, id="affinity-ignore"),
        pytest.param({"nodeAffinityPolicy": "Honor"}, {"nodeAffinityPolicy": "Honor"}, id="affinity-honor-given"),
        pytest.param({"nodeTaintsPolicy": "Honor"}, {"nodeTaintsPolicy": "Honor"}, id="taints-honor"),
        pytest.param(
            {"minDomains": 2, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
            {"minDomains": 2, "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
            id="all-three",
        ),
    ],
)
def test_spread_refinements_translate_one_to_one(spread: dict, expected: dict) -> None:
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "spread": [{"topologyKey": ZONE, "maxSkew": 1, **spread}]}
    )
    constraint = hard(translate(spec).fragment, ZONE)
    fields = ("minDomains", "nodeAffinityPolicy", "nodeTaintsPolicy")
    refinements = {k: constraint[k] for k in fields if k in constraint}
    assert refinements == expected
    assert "matchLabelKeys" not in constraint


def test_spread_refinements_survive_a_tighter_cap_on_the_same_key() -> None:
    """A cap of 2 on a key the policy's own spread holds has no exact form (one DoNotSchedule
    spread per key): its approximation merges, the spread's refinements kept. A cap of 1 there is
    required anti-affinity, and the spread keeps its own form."""
    spread = {"topologyKey": ZONE, "maxSkew": 3, "minDomains": 3, "nodeTaintsPolicy": "Honor"}
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "caps": [{"topologyKey": ZONE, "max": 2}], "spread": [spread]}
    )
    constraint = hard(translate(spec).fragment, ZONE)
    assert (constraint["maxSkew"], constraint["minDomains"], constraint["nodeTaintsPolicy"]) == (2, 3, "Honor")
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "caps": [{"topologyKey": ZONE, "max": 1}], "spread": [spread]}
    )
    fragment = translate(spec).fragment
    assert hard(fragment, ZONE)["maxSkew"] == 3
    (term,) = fragment["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == ZONE


def test_allowed_zones_leave_the_spreads_min_domains_as_the_policy_says() -> None:
    """Allowed zones add required node affinity only: a minDomains the policy did not write would
    count zones without nodes as empty domains, stricter than the rule (and than adopt's form)."""
    zone_spread = {"topologyKey": ZONE, "maxSkew": 1, "minDomains": 3}
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "zones": {"allowed": ["a", "b"]}, "spread": [zone_spread]}
    )
    assert hard(translate(spec).fragment, ZONE)["minDomains"] == 3
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "zones": {"allowed": ["a", "b"]}, "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
    )
    assert "minDomains" not in hard(translate(spec).fragment, ZONE)


def test_match_label_keys_go_on_every_constraint_and_anti_affinity_term() -> None:
    spec = PlacementPolicySpec.model_validate(
        {
            "group": {**SELECTOR, "matchLabelKeys": ["pod-template-hash"]},
            "caps": [{"topologyKey": HOST, "max": 1}],
            "shardAntiAffinity": [{"topologyKey": ZONE}],
        }
    )
    fragment = translate(spec).fragment
    assert fragment["topologySpreadConstraints"]
    assert all(c["matchLabelKeys"] == ["pod-template-hash"] for c in fragment["topologySpreadConstraints"])
    terms = {
        t["topologyKey"]: t
        for t in fragment["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    }
    assert terms[ZONE]["matchLabelKeys"] == ["controller-revision-hash", "pod-template-hash"]  # the shards'
    assert terms[HOST]["matchLabelKeys"] == ["pod-template-hash"]  # the cap of 1, over the group


def test_unknown_size_is_said_in_words() -> None:
    spec = PlacementPolicySpec.model_validate(
        {"group": SELECTOR, "caps": [{"topologyKey": HOST, "fraction": "1/3", "comparison": "LessThan"}]}
    )
    text = " ".join(f"{g.limitation} {g.cost}" for g in translate(spec).gaps)
    assert "None" not in text and "fewer than 1/3 of the group (size unknown)" in text


LABELS = {"app": "crdb"}
EXACT_CASES = [
    pytest.param({"caps": [{"topologyKey": HOST, "max": 1}]}, id="cap-of-1"),
    pytest.param({"caps": [{"topologyKey": ZONE, "max": 2}]}, id="cap-of-2"),
    pytest.param(
        {"group": {"size": 6}, "caps": [{"topologyKey": HOST, "fraction": "1/3", "comparison": "AtMost"}]},
        id="fraction-of-a-fixed-size",
    ),
    pytest.param({"spread": [{"topologyKey": ZONE, "maxSkew": 1, "minDomains": 3}]}, id="spread"),
    pytest.param({"zones": {"allowed": ["a", "b"]}}, id="allowed-zones"),
    pytest.param({"shardAntiAffinity": [{"topologyKey": ZONE}]}, id="shard-anti-affinity"),
    pytest.param(
        {
            "zones": {"allowed": ["a", "b", "c"]},
            "caps": [{"topologyKey": HOST, "max": 1}],
            "spread": [{"topologyKey": ZONE, "maxSkew": 1}],
        },
        id="combined",
    ),
]


@pytest.mark.parametrize("policy", EXACT_CASES)
def test_translate_keeps_exactly_what_adopt_implies_where_the_mirror_is_exact(policy: dict) -> None:
    """One native form per rule: wherever adopt's implied constraint is exact, retire's
    translation carries that very constraint (a cap of 1 as required pod anti-affinity, not a
    hostname spread that lets a node hold 2 once every node holds 1: 6 of 6 autoscaled runs
    doubled up so before). Ordinal zones have no template form (per pod, through the gate)."""
    from extender.engine import Exactness
    from extender.engine.implied import implied

    spec = PlacementPolicySpec.model_validate({**policy, "deadEndAvoidance": False})
    imp = implied(spec, group_labels=LABELS, shard_labels=LABELS)
    assert imp.mirrors and all(m.exactness is Exactness.EXACT for m in imp.mirrors), imp.mirrors
    fragment = translate(spec, match_labels=LABELS).fragment
    hard_spreads = [c for c in fragment["topologySpreadConstraints"] if c["whenUnsatisfiable"] == "DoNotSchedule"]
    affinity = fragment.get("affinity", {})
    anti = affinity.get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    terms = affinity.get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    node_expressions = [e for t in terms.get("nodeSelectorTerms", []) for e in t["matchExpressions"]]
    for spread in imp.spreads:
        assert spread in hard_spreads, (spread, hard_spreads)
    for term in imp.pod_anti:
        assert term in anti, (term, anti)
    for requirement in imp.node_requirements:
        assert requirement in node_expressions, (requirement, node_expressions)
    assert len(hard_spreads) == len(imp.spreads) and len(anti) == len(imp.pod_anti), "nothing looser beside it"


@settings(max_examples=150, deadline=None)
@given(policy=st.sampled_from(list(range(6))), node_skew=st.integers(1, 3), zone_skew=st.integers(1, 3))
def test_no_soft_spread_is_emitted_where_the_hard_rules_keep_it_already(policy, node_skew, zone_skew) -> None:  # noqa: ANN001
    """A ScheduleAnyway maxSkew 1 on a key is emitted only where no DoNotSchedule spread of maxSkew
    1 and no required anti-affinity among all the group's pods holds that key already; and
    wherever neither holds it, it is emitted (the NetEase Redis design's preference is kept where it adds)."""
    shapes = [
        {"caps": [{"topologyKey": HOST, "max": 1}], "ordinalZones": {}},
        {"spread": [{"topologyKey": ZONE, "maxSkew": zone_skew}, {"topologyKey": HOST, "maxSkew": node_skew}]},
        {"caps": [{"topologyKey": HOST, "max": 2}]},
        {"spread": [{"topologyKey": ZONE, "maxSkew": zone_skew}]},
        {"shardAntiAffinity": [{"topologyKey": HOST}]},
        {"caps": [{"topologyKey": ZONE, "max": 3}], "spread": [{"topologyKey": HOST, "maxSkew": node_skew}]},
    ]
    result = translate(PlacementPolicySpec.model_validate(shapes[policy]), match_labels={"app": "g"}, group_size=6)
    constraints = result.fragment["topologySpreadConstraints"]
    hard = {c["topologyKey"]: c["maxSkew"] for c in constraints if c["whenUnsatisfiable"] == "DoNotSchedule"}
    soft = {c["topologyKey"] for c in constraints if c["whenUnsatisfiable"] == "ScheduleAnyway"}
    anti = (result.fragment.get("affinity") or {}).get("podAntiAffinity", {})
    whole_group = {
        t["topologyKey"]
        for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        if t["labelSelector"] == {"matchLabels": {"app": "g"}} and not t.get("matchLabelKeys")
    }
    for key in (HOST, ZONE):
        kept = hard.get(key, 99) <= 1 or key in whole_group
        if kept:
            assert key not in soft, (shapes[policy], key, result.fragment)
    assert HOST in soft or hard.get(HOST, 99) <= 1 or HOST in whole_group

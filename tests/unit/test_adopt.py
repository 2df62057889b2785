"""adopt and retire as pure functions of the workload object (extender/ops/adopt.py): what each writes
into the pod template, that adopting twice changes nothing more, and that retire takes out exactly
what adopt put in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api.policy import (
    IMPLIED_ANNOTATION,
    INLINE_POLICY_ANNOTATION,
    ORDINAL_ZONE_GATE,
    POLICY_REF_ANNOTATION,
    parse_spec,
)
from extender.cli.workloads import workload_path as _workload_path
from extender.engine import Exactness
from extender.ops.adopt import adopt, retire

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def workload(kind: str = "StatefulSet", pod_spec: dict | None = None) -> dict:
    return {
        "kind": kind,
        "metadata": {"name": "db", "namespace": "data", "resourceVersion": "3"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": pod_spec or {"containers": [{"name": "db", "image": "db:1"}]},
            },
        },
    }


CAP1_ORDINAL = parse_spec({"ordinalZones": {}, "caps": [{"topologyKey": HOST, "max": 1}]}, "test")


def template(obj: dict) -> tuple[dict, dict]:
    return obj["spec"]["template"]["metadata"], obj["spec"]["template"]["spec"]


def test_adopt_writes_scheduler_policy_implied_constraints_and_the_gate() -> None:
    change = adopt(workload(), CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db")
    meta, spec = template(change.workload)
    assert spec["schedulerName"] == "placement-scheduler"
    assert meta["annotations"][POLICY_REF_ANNOTATION] == "db"
    assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}
    ]
    assert spec["schedulingGates"] == [{"name": ORDINAL_ZONE_GATE}]
    assert json.loads(meta["annotations"][IMPLIED_ANNOTATION])["schedulingGate"] is True
    assert {m.exactness for m in change.mirrors} <= {Exactness.EXACT, Exactness.NONE}
    assert change.workload["metadata"]["resourceVersion"] == "3", "the update is guarded by what was read"


def test_adopting_again_changes_nothing_and_a_new_policy_replaces_the_old_constraints() -> None:
    once = adopt(workload(), CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db").workload
    twice = adopt(once, CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db").workload
    assert twice == once
    cap2 = parse_spec({"caps": [{"topologyKey": HOST, "max": 2}]}, "test")
    changed = adopt(once, cap2, scheduler_name="placement-scheduler", inline_policy=cap2.model_dump_json()).workload
    meta, spec = template(changed)
    assert "affinity" not in spec and "schedulingGates" not in spec, "the old policy's additions are gone"
    assert [c["maxSkew"] for c in spec["topologySpreadConstraints"]] == [2]
    assert POLICY_REF_ANNOTATION not in meta["annotations"] and INLINE_POLICY_ANNOTATION in meta["annotations"]


def test_retire_takes_out_what_adopt_put_in_and_writes_translates_constraints() -> None:
    own = {
        "containers": [{"name": "db", "image": "db:1"}],
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    }
    adopted = adopt(workload(pod_spec=own), CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db")
    bare = retire(adopted.workload, CAP1_ORDINAL, translated=False).workload
    _, spec = template(bare)
    assert spec == {**own, "schedulerName": "default-scheduler"}
    _, translated = template(retire(adopted.workload, CAP1_ORDINAL).workload)
    assert "schedulingGates" not in translated
    assert any(c["whenUnsatisfiable"] == "DoNotSchedule" for c in translated["topologySpreadConstraints"])


def test_a_templates_own_spread_on_a_key_is_kept_and_reported() -> None:
    own = {
        "containers": [],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}],
    }
    spec = parse_spec({"caps": [{"topologyKey": ZONE, "max": 2}]}, "test")
    change = adopt(workload(pod_spec=own), spec, scheduler_name="s", policy_name="db")
    assert template(change.workload)[1]["topologySpreadConstraints"] == own["topologySpreadConstraints"]
    assert any("already has a DoNotSchedule spread" in n for n in change.notes)


@pytest.mark.parametrize(
    ("kind", "policy", "needle"),
    [
        ("Deployment", {"ordinalZones": {}}, "adopt a StatefulSet"),
        ("DaemonSet", {}, "StatefulSet or a Deployment"),
    ],
)
def test_adopt_refuses_what_it_cannot_do_saying_why(kind, policy, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        adopt(workload(kind), parse_spec(policy, "test"), scheduler_name="s", policy_name="db")


@pytest.mark.parametrize(
    ("ref", "kind"),
    [
        ("statefulset/db", "StatefulSet"),
        ("sts/db", "StatefulSet"),
        ("deploy/web", "Deployment"),
        ("deployments/web", "Deployment"),
    ],
)
def test_workload_names_as_kubectl_spells_them(ref, kind) -> None:
    assert _workload_path(ref, "ns")[0] == kind


def test_an_unknown_workload_kind_says_how_to_name_one() -> None:
    with pytest.raises(ValueError, match="statefulset/NAME or deployment/NAME"):
        _workload_path("pod/db-0", "ns")


def test_in_scheduler_mode_requests_the_opt_in_resource_and_retire_takes_it_out() -> None:
    """In-scheduler mode: schedulerName stays (the cluster's one kube-scheduler); the first
    container requests one opt-in resource, requests and limits alike as an extended resource
    needs; switching modes or retiring leaves no trace of it."""
    from extender.api.policy import OPT_IN_RESOURCE

    two = {"containers": [{"name": "db", "image": "db:1", "resources": {"requests": {"cpu": "1"}}}, {"name": "s"}]}
    change = adopt(workload(pod_spec=two), CAP1_ORDINAL, scheduler_name="x", policy_name="db", mode="in-scheduler")
    _, spec = template(change.workload)
    assert "schedulerName" not in spec
    first, second = spec["containers"]
    assert first["resources"] == {"requests": {"cpu": "1", OPT_IN_RESOURCE: "1"}, "limits": {OPT_IN_RESOURCE: "1"}}
    assert "resources" not in second
    back = adopt(change.workload, CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db")
    assert template(back.workload)[1]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    retired = retire(change.workload, CAP1_ORDINAL, translated=False).workload
    _, spec = template(retired)
    assert spec["containers"] == two["containers"] and spec["schedulerName"] == "default-scheduler"


@pytest.mark.parametrize("other_gates", [[], [{"name": "example.com/theirs"}]], ids=["no other gate", "another gate"])
def test_in_scheduler_mode_gates_pods_until_the_extender_has_a_place_and_every_way_back_removes_it(other_gates) -> None:
    """The placeable gate (server/place_gate.py) comes with in-scheduler mode and goes with it:
    adopting in second-scheduler mode or retiring takes it out; anyone else's gate stays."""
    from extender.api.policy import ORDINAL_ZONE_GATE, PLACEABLE_GATE

    spec = {"containers": [{"name": "db", "image": "db:1"}], "schedulingGates": list(other_gates)}
    change = adopt(workload(pod_spec=spec), CAP1_ORDINAL, scheduler_name="p", policy_name="db", mode="in-scheduler")
    names = [g["name"] for g in template(change.workload)[1]["schedulingGates"]]
    assert names.count(PLACEABLE_GATE) == 1 and {g["name"] for g in other_gates} <= set(names)
    again = adopt(change.workload, CAP1_ORDINAL, scheduler_name="p", policy_name="db", mode="in-scheduler")
    assert [g["name"] for g in template(again.workload)[1]["schedulingGates"]].count(PLACEABLE_GATE) == 1
    for back in (
        adopt(change.workload, CAP1_ORDINAL, scheduler_name="p", policy_name="db").workload,
        retire(change.workload, CAP1_ORDINAL, translated=False).workload,
    ):
        left = template(back)[1].get("schedulingGates", [])
        assert PLACEABLE_GATE not in [g["name"] for g in left]
        assert [g for g in left if g["name"] != ORDINAL_ZONE_GATE] == other_gates


@pytest.mark.parametrize(
    ("template_scheduler", "expected"),
    [
        ("placement-scheduler", "default-scheduler"),  # from second-scheduler mode: to the stanza's scheduler
        (None, None),  # never set: the default scheduler already
        ("default-scheduler", "default-scheduler"),
        ("my-profile", "my-profile"),  # a profile of the cluster's own kube-scheduler: kept
    ],
)
def test_in_scheduler_mode_takes_a_workload_off_the_second_scheduler(template_scheduler, expected) -> None:
    """A pod that requests the opt-in resource can be placed only by the kube-scheduler whose
    stanza ignores it; left with the second scheduler, the rollout's first pod was Pending for good."""
    spec = {"containers": [{"name": "db", "image": "db:1"}]}
    if template_scheduler:
        spec["schedulerName"] = template_scheduler
    moved = workload(pod_spec=spec)
    change = adopt(moved, CAP1_ORDINAL, scheduler_name="placement-scheduler", policy_name="db", mode="in-scheduler")
    assert template(change.workload)[1].get("schedulerName") == expected
    assert any("default-scheduler" in n for n in change.notes) == (template_scheduler == "placement-scheduler")


def test_adopt_can_keep_a_workload_on_a_dedicated_node_pool() -> None:
    change = adopt(workload(), CAP1_ORDINAL, scheduler_name="p", policy_name="db", node_pool=("pool", "placement"))
    _, spec = template(change.workload)
    assert spec["nodeSelector"] == {"pool": "placement"}
    assert spec["tolerations"] == [{"key": "pool", "operator": "Equal", "value": "placement", "effect": "NoSchedule"}]
    again = adopt(change.workload, CAP1_ORDINAL, scheduler_name="p", policy_name="db", node_pool=("pool", "placement"))
    assert template(again.workload)[1]["tolerations"] == spec["tolerations"]


@st.composite
def adoptable_policies(draw) -> dict:
    """Policies over a StatefulSet's pods, with every rule translate has a native form for."""
    policy: dict = {}
    if draw(st.booleans()):
        policy["caps"] = [{"topologyKey": draw(st.sampled_from([HOST, ZONE])), "max": draw(st.integers(1, 3))}]
    if draw(st.booleans()):
        policy["spread"] = [
            {
                "topologyKey": draw(st.sampled_from([ZONE, HOST])),
                "maxSkew": draw(st.integers(1, 2)),
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
            }
        ]
    if draw(st.booleans()):
        policy["zones"] = {"allowed": ["a", "b", "c"][: draw(st.integers(1, 3))]}
    if draw(st.booleans()):
        policy["ordinalZones"] = {}
    return policy or {"caps": [{"topologyKey": HOST, "max": 1}]}


@settings(max_examples=150, deadline=None)
@given(policy=adoptable_policies(), mode=st.sampled_from(["second-scheduler", "in-scheduler"]), own=st.booleans())
def test_retire_then_adopt_again_leaves_exactly_what_adopt_leaves(policy, mode, own) -> None:
    """A workload moved back and forth keeps no leftover: retire records what translate merged
    in, and adopt takes exactly that out (retire's spread once stayed and audit flagged it).
    Its own constraints (`own`: a preferred zone) are kept through every step."""
    spec = parse_spec(policy, "test")
    pod_spec = {"containers": [{"name": "db", "image": "db:1"}]}
    if own:
        preferred = {
            "weight": 5,
            "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
        }
        pod_spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [preferred]}}
    original = workload(pod_spec=pod_spec)
    first = adopt(original, spec, scheduler_name="placement-scheduler", policy_name="db", mode=mode).workload
    retired = retire(first, spec).workload
    again = adopt(retired, spec, scheduler_name="placement-scheduler", policy_name="db", mode=mode).workload
    assert _defaulted(template(again)) == _defaulted(template(first))
    plain = retire(again, spec, translated=False).workload
    want = dict(pod_spec, schedulerName="default-scheduler")
    assert template(plain)[1] == want


def _defaulted(parts: tuple[dict, dict]) -> tuple[dict, dict]:
    """A template as the API server reads it: no schedulerName is default-scheduler."""
    meta, spec = parts
    return meta, {"schedulerName": "default-scheduler", **spec}

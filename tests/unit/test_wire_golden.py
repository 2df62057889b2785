"""Golden wire tests: bytes as Go marshals them (tests/fixtures/wire, made by Go from the
upstream extender/v1 types), round-tripped through our models and served by the Flask app in
both nodeCacheCapable modes.

Set UPDATE_GOLDEN=1 to rewrite tests/fixtures/wire/expected/ after a deliberate change of
reasons or scores, and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.api import wire
from extender.api.wire import FailedNodeReasons
from extender.server.app import create_app
from extender.state.store import KINDS, ClusterStore

from builders import statefulset
from fakes import RecordedEvents, ShownVerbs

FIXTURES = Path(__file__).parent.parent / "fixtures" / "wire"
EXPECTED = FIXTURES / "expected"


def raw(name: str) -> str:
    return (FIXTURES / f"{name}.json").read_text()


ROUND_TRIP = [
    ("filter_args_nodenames", wire.ExtenderArgs),
    ("filter_args_nodelist", wire.ExtenderArgs),
    ("filter_result_nodenames", wire.ExtenderFilterResult),
    ("filter_result_nodelist", wire.ExtenderFilterResult),
    ("filter_result_empty", wire.ExtenderFilterResult),
    ("filter_result_error", wire.ExtenderFilterResult),
    ("prioritize_result", wire.HostPriorityList),
    ("bind_args", wire.ExtenderBindingArgs),
    ("bind_result_ok", wire.ExtenderBindingResult),
    ("bind_result_error", wire.ExtenderBindingResult),
    ("preempt_args_victims", wire.ExtenderPreemptionArgs),
    ("preempt_args_metavictims", wire.ExtenderPreemptionArgs),
    ("preempt_result", wire.ExtenderPreemptionResult),
    ("preempt_args_empty_victims", wire.ExtenderPreemptionArgs),
    ("preempt_args_empty_metavictims", wire.ExtenderPreemptionArgs),
    ("preempt_result_empty_victims", wire.ExtenderPreemptionResult),
]


@pytest.mark.parametrize("name,model", ROUND_TRIP, ids=[n for n, _ in ROUND_TRIP])
def test_round_trip_is_byte_exact(name: str, model: type) -> None:
    text = raw(name)
    assert wire.encode(model.model_validate_json(text)) + "\n" == text


def test_keys_are_read_case_insensitively_like_go() -> None:
    args = wire.ExtenderBindingArgs.model_validate({"podname": "p", "PODNAMESPACE": "ns", "podUid": "u", "node": "n"})
    assert (args.PodName, args.PodNamespace, args.PodUID, args.Node) == ("p", "ns", "u", "n")


def test_go_escapes_html_characters() -> None:
    assert wire.go_json({"a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e"}'


@pytest.fixture
def client():
    """The fixtures' cluster: 6 nodes over zone-a/b/c, StatefulSet db/crdb of 3 replicas."""
    return fixture_client(FailedNodeReasons.WHEN_NONE_PASS)


def fixture_client(reasons: FailedNodeReasons):
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for item in json.loads(raw("filter_args_nodelist"))["Nodes"]["items"]:
        store.apply("nodes", "ADDED", item)
    store.apply("statefulsets", "ADDED", statefulset("crdb", 3, claim_templates=("datadir",)))
    verbs = ShownVerbs(store, binder=None, events=RecordedEvents(), failed_node_reasons=reasons)  # type: ignore[arg-type]
    return create_app(verbs).test_client()


def check_golden(name: str, body: str) -> None:
    path = EXPECTED / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(body)
    assert body == path.read_text()


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_node_names_mode(client, verb: str) -> None:
    response = client.post(f"/{verb}", data=raw("filter_args_nodenames"), content_type="application/json")
    assert response.status_code == 200
    check_golden(f"{verb}_nodenames", response.get_data(as_text=True))


def test_with_every_reason_the_filter_answer_is_the_same_but_for_the_reasons() -> None:
    """--failed-node-reasons=always: the reasons for the nodes refused although some passed
    (kube-scheduler discards them then; see FailedNodeReasons)."""
    response = fixture_client(FailedNodeReasons.ALWAYS).post(
        "/filter", data=raw("filter_args_nodenames"), content_type="application/json"
    )
    check_golden("filter_nodenames_always", response.get_data(as_text=True))
    compact = json.loads((EXPECTED / "filter_nodenames.json").read_text())
    full = json.loads((EXPECTED / "filter_nodenames_always.json").read_text())
    assert compact["FailedAndUnresolvableNodes"] == compact["FailedNodes"] == {}
    assert {**full, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}} == compact
    assert set(full["FailedAndUnresolvableNodes"]) == {"node-a1", "node-a2", "node-c1", "node-c2"}


def test_filter_node_names_mode_answers_in_names() -> None:
    result = json.loads((EXPECTED / "filter_nodenames.json").read_text())
    assert result["Nodes"] is None
    # crdb-1 is ordinal 1; zones a, b, c tie on node count, so zone-b is its zone (crl order).
    assert result["NodeNames"] == ["node-b1", "node-b2"]


def test_filter_node_list_mode_returns_the_nodes_as_sent(client) -> None:
    response = client.post("/filter", data=raw("filter_args_nodelist"), content_type="application/json")
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    check_golden("filter_nodelist", body)
    ours = json.loads(body)
    assert ours["NodeNames"] is None
    # The kept Node objects are exactly those Go marshalled for the same answer.
    go = raw("filter_result_nodelist")
    go_nodes = go[go.index('"Nodes":') : go.index(',"NodeNames"')]
    assert go_nodes in body
    assert [n["metadata"]["name"] for n in ours["Nodes"]["items"]] == ["node-b1", "node-b2"]


@pytest.mark.parametrize("form", ["preempt_args_empty_victims", "preempt_args_empty_metavictims"])
def test_preempt_with_empty_victim_lists_keeps_only_the_nodes_the_pod_passes_as_they_are(client, form: str) -> None:
    """Kubernetes 1.38 (kubernetes#135486) sends a candidate with an empty victim list where its
    dry-run (in-tree filters only) finds the pod fits with nothing evicted. Evicting nothing
    cannot change our verdict, so the node is kept (with the empty list, never more victims than
    sent) exactly where the pod passes our filter now, and dropped elsewhere: here crdb-1's
    ordinal zone is zone-b, so node-b1 stays and node-a1 goes. The answer is Go's bytes."""
    response = client.post("/preempt", data=raw(form), content_type="application/json")
    assert response.status_code == 200
    assert response.get_data(as_text=True) == raw("preempt_result_empty_victims")


# Both forms of an empty victim list in both node modes: Go marshals a nil slice as null and an empty one as [];
# 1.38 sends [] in the MetaVictims form (nodeCacheCapable: true) and null in the Victims form (false).
PLACEHOLDER_FORMS = {
    "cache-capable, []": ("preempt_args_empty_metavictims", None),
    "cache-capable, null": ("preempt_args_empty_metavictims", ('"Pods":[]', '"Pods":null')),
    "full nodes, null": ("preempt_args_empty_victims", None),
    "full nodes, []": ("preempt_args_empty_victims", ('"Pods":null', '"Pods":[]')),
}


def _preempt_nodes(client, result: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(client.get("/metrics").get_data(as_text=True))
    family = next(f for f in families if f.name == "extender_preempt_nodes")
    return sum(s.value for s in family.samples if s.name.endswith("_total") and s.labels["result"] == result)


@pytest.mark.parametrize("form", PLACEHOLDER_FORMS)
def test_preempt_counts_a_kept_placeholder_apart_from_kept_victims(client, form: str) -> None:
    """A candidate with no victims, `"Pods": []` or `null`, nodeCacheCapable or not, is answered with
    the node and no victims where the pod passes (node-b1, crdb-1's ordinal zone), and counted in
    extender_preempt_nodes_total as `placeholder`, never as `kept` (a victim set kept); node-a1,
    where it does not pass, is refused."""
    name, swap = PLACEHOLDER_FORMS[form]
    body = raw(name) if swap is None else raw(name).replace(*swap)
    assert swap is None or swap[1] in body
    response = client.post("/preempt", data=body, content_type="application/json")
    assert response.status_code == 200
    assert response.get_data(as_text=True) == raw("preempt_result_empty_victims")
    assert json.loads(response.get_data())["NodeNameToMetaVictims"] == {"node-b1": {"Pods": [], "NumPDBViolations": 0}}
    assert (_preempt_nodes(client, "placeholder"), _preempt_nodes(client, "kept")) == (1, 0)
    assert _preempt_nodes(client, "refused") == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)


@settings(max_examples=2000, deadline=None)
@given(json_values)
def test_the_fast_encoder_writes_what_the_reference_path_writes(value) -> None:  # noqa: ANN001
    """orjson's bytes, plus Go's escapes, equal json.dumps's with the same escapes, for any value
    (surrogates and huge integers go through the reference path itself)."""
    assert wire.go_bytes(value) == wire._go_text(value).encode("utf-8")


names = st.text(max_size=8)


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(names, max_size=5),
    st.dictionaries(names, st.text(max_size=8), max_size=5),
    st.dictionaries(names, st.text(max_size=8), max_size=5),
    st.text(max_size=8),
)
def test_the_filter_answer_encoder_writes_what_the_generic_path_writes(passed, failed, unresolvable, error) -> None:  # noqa: ANN001
    """The NodeNames-mode filter answer, written field by field, is the model's generic encoding
    (struct fields in Go's order, maps with sorted keys, Go's escapes)."""
    result = wire.ExtenderFilterResult(
        NodeNames=passed, FailedNodes=failed, FailedAndUnresolvableNodes=unresolvable, Error=error
    )
    assert wire._filter_result_bytes(result) == wire.go_bytes(wire._go_order(result.model_dump(mode="json")))


json_floats = st.floats(allow_nan=False, allow_infinity=False)
json_texts = st.recursive(
    st.none() | st.booleans() | st.integers() | json_floats | st.text(),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
).map(lambda v: json.dumps(v, ensure_ascii=False))


@settings(max_examples=2000, deadline=None)
@given(
    json_texts
    | st.sampled_from(["1e400", "NaN", '"\\ud800"', "[18446744073709551616]", "-9223372036854775809", "[1,]", "{"])
)
def test_the_fast_decoder_reads_what_json_loads_reads(text: str) -> None:
    """orjson's reading of a body equals the reference json.loads path, value for value, and
    whatever it refuses gets the reference path's answer (a value, or its WireError)."""
    raw = text.encode("utf-8", "surrogatepass")
    try:
        expected = wire._decode_slowly(raw.decode("utf-8", "replace"), 128)
        if wire._SURROGATE_ESCAPE.search(raw):
            expected = wire._replace_surrogates(expected)
    except wire.WireError as err:
        with pytest.raises(wire.WireError) as got:
            wire.decode_json(raw)
        assert str(got.value) == str(err)
        return
    assert repr(wire.decode_json(raw)) == repr(expected)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.tuples(st.lists(st.text(max_size=6), max_size=4), st.integers(-(2**70), 2**70)), max_size=4))
def test_the_priorities_encoder_writes_what_the_list_of_dicts_writes(groups) -> None:  # noqa: ANN001
    """Group by group, at C speed, the same bytes as the HostPriorityList's dicts (an out-of-range
    score takes the reference path, which then writes it as json.dumps would)."""
    priorities = wire.Priorities(groups)
    expected = wire.go_bytes([{"Host": h, "Score": s} for hosts, s in groups for h in hosts])
    assert wire.encode_bytes(priorities) == expected

"""Bounded input: the exact requests outside testing answered with a 500, and the limits that
now answer them (extender/limits.py), each with the status and a message naming the limit.

Also the property tests of the parsers these depend on: any text is a policy or a PolicyError,
any bytes are a value or a WireError, and the depth scan agrees with the decoded value.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api.policy import PlacementPolicySpec, PolicyError, parse_annotation
from extender.api.wire import WireError, decode_json, go_json, nests_deeper
from extender.limits import MAX_CANDIDATE_NODES, MAX_POLICY_ANNOTATION_BYTES, MAX_POLICY_DEPTH, MAX_REQUEST_DEPTH
from extender.server.app import create_app
from extender.state.objects import ObjectError, parse_pod, pod_identity, split_ordinal
from extender.state.store import KINDS, ClusterStore

from builders import HOST, YAML_FRAGMENTS, filter_args, node, pod, statefulset
from fakes import RecordedEvents, ShownVerbs

NAMES = ["n1", "n2", "n3"]
CAPS = {"caps": [{"topologyKey": HOST, "max": 1}]}


class OkBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pass


@pytest.fixture
def client():
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for name, zone in zip(NAMES, "abc", strict=True):
        store.apply("nodes", "ADDED", node(name, zone))
    store.apply("statefulsets", "ADDED", statefulset("w", 3))
    return create_app(ShownVerbs(store, binder=OkBinder(), events=RecordedEvents())).test_client()  # type: ignore[arg-type]


def post(client, path: str, body: Any) -> tuple[int, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(path, data=raw, content_type="application/json")
    assert response.is_json, response.data[:200]
    return response.status_code, json.loads(response.get_data())


def nest(levels: int, inner: Any = None) -> Any:
    for _ in range(levels):
        inner = [inner]
    return inner


# -- 1. request nesting ---------------------------------------------------------------------------

DEEP_REQUESTS = [
    ("100,000 brackets", "/filter", b"[" * 100_000 + b"]" * 100_000),
    ("unclosed brackets", "/filter", b"[" * 100_000),
    ("objects", "/prioritize", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    (
        "deep in a pod label",
        "/filter",
        json.dumps({"Pod": pod("w-0", sts="w"), "NodeNames": NAMES})
        .replace('"labels": {', '"labels": {"x": ' + "[" * 5000 + "]" * 5000 + ", ")
        .encode(),
    ),
    ("deep in bind", "/bind", b'{"PodName": ' + b"[" * 3000 + b"]" * 3000 + b"}"),
    (
        "deep in preempt victims",
        "/preempt",
        json.dumps({"Pod": pod("w-0"), "NodeNameToVictims": {"n1": {"Pods": [nest(MAX_REQUEST_DEPTH)]}}}).encode(),
    ),
]


@pytest.mark.parametrize("path,body", [(p, b) for _, p, b in DEEP_REQUESTS], ids=[i for i, _, _ in DEEP_REQUESTS])
def test_deeply_nested_bodies_are_refused_with_the_limit_named(client, path: str, body: bytes) -> None:
    status, answer = post(client, path, body)
    assert status == 400
    assert f"more than {MAX_REQUEST_DEPTH} deep" in answer["error"] and "MAX_REQUEST_DEPTH" in answer["error"]


def test_a_body_exactly_at_the_depth_limit_is_served(client) -> None:
    # The body itself is one level; "x" holds the remaining MAX_REQUEST_DEPTH - 1.
    body = {"Pod": pod("w-0"), "NodeNames": NAMES, "x": nest(MAX_REQUEST_DEPTH - 1)}
    assert post(client, "/filter", body)[0] == 200
    body["x"] = nest(MAX_REQUEST_DEPTH)
    assert post(client, "/filter", body)[0] == 400


def test_a_node_nested_to_the_limit_is_echoed_back_in_node_list_mode(client) -> None:
    """What was read is written back (Nodes.items): the answer's encoders must manage the depth."""
    item = node("n1", "a")
    item["metadata"]["x"] = nest(MAX_REQUEST_DEPTH - 5)  # body, Nodes, items, the node, metadata
    status, answer = post(client, "/filter", {"Pod": pod("w-0"), "Nodes": {"items": [item]}})
    assert status == 200 and answer["Nodes"]["items"] == [item]


def test_brackets_inside_strings_do_not_count_as_nesting(client) -> None:
    tricky = '[[[{{{\\"' * 100 + "\\\\" + "]" * 300
    body = {"Pod": pod("w-0", labels={"note": tricky}), "NodeNames": NAMES}
    status, answer = post(client, "/filter", body)
    assert status == 200 and answer["NodeNames"] == NAMES


# -- 2. inline policy annotations -------------------------------------------------------------------

TOO_DEEP = f"mappings/lists nest more than {MAX_POLICY_DEPTH} deep, the limit"
BAD_ANNOTATIONS = [
    ("json, 3,000 deep", '{"caps":' * 3000 + "[]" + "}" * 3000, TOO_DEEP),
    ("json arrays, 30,000 deep", "[" * 30_000 + "]" * 1000, TOO_DEEP),
    ("json, 13 deep", json.dumps({"caps": nest(12)}), TOO_DEEP),
    ("yaml flow, 30,000 deep", "caps: " + "[" * 30_000, TOO_DEEP),
    ("yaml flow mappings", "caps: " + "{a: " * 5000, TOO_DEEP),
    ("yaml block sequences", "caps:\n" + "- " * 10_000 + "x", TOO_DEEP),
    ("yaml indentation", "".join(" " * i + "k:\n" for i in range(100)) + " " * 100 + "v", TOO_DEEP),
    (
        "yaml alias bomb",
        "\n".join(
            ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
            + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 20)]
            + ["caps: *a19"]
        ),
        TOO_DEEP,
    ),
    ("yaml self reference", "caps: &s [*s]", TOO_DEEP),
    (
        "40,000 bytes",
        '{"caps":[]' + " " * (40_000 - 11) + "}",
        f"the annotation is 40,000 bytes; the limit is {MAX_POLICY_ANNOTATION_BYTES:,} "
        "(use a PlacementPolicy object for large policies)",
    ),
    (
        "over the limit in UTF-8 bytes",
        "caps: [] # " + "é" * (MAX_POLICY_ANNOTATION_BYTES // 2),
        f"the annotation is {11 + MAX_POLICY_ANNOTATION_BYTES:,} bytes",
    ),
    ("yaml tag on an empty value", "caps: !!int", "YAML tags are not allowed (found !!int)"),
    ("yaml bool tag", "deadEndAvoidance: !!bool maybe", "YAML tags are not allowed (found !!bool)"),
    ("yaml timestamp tag", "a: !!timestamp x", "YAML tags are not allowed (found !!timestamp)"),
    ("yaml impossible date", "caps: 2024-02-30", "not JSON or YAML (day is out of range for month)"),
    ("yaml impossible offset", "caps: 2001-12-14t21:59:43+99:00", "not JSON or YAML (offset must be"),
    (
        "yaml 5,000-digit integer",
        "group: {size: " + "9" * 5000 + "}",
        "not JSON or YAML (Exceeds the limit (4300 digits)",
    ),
    ("lone surrogate in yaml", "caps: [\ud800", "not JSON or YAML"),
]


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in BAD_ANNOTATIONS], ids=[n for n, *_ in BAD_ANNOTATIONS])
def test_bad_annotations_are_policy_errors_naming_the_limit(text: str, expected: str) -> None:
    with pytest.raises(PolicyError) as err:
        parse_annotation(text, "annotation on pod db/x")
    message = str(err.value)
    assert message.startswith("invalid placement policy in annotation on pod db/x: ")
    assert expected in message
    assert len(message) <= 1024


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in BAD_ANNOTATIONS], ids=[n for n, *_ in BAD_ANNOTATIONS])
def test_a_pod_with_a_bad_annotation_gets_every_node_refused_with_the_message(client, text: str, expected: str) -> None:
    """The invalid-policy path: 200, an Error with the validation message (which kube-scheduler
    shows on the Pending pod, reason SchedulerError), never a 500."""
    status, answer = post(client, "/filter", filter_args(pod("w-0", sts="w", policy=text), NAMES))
    assert status == 200
    assert not answer.get("NodeNames") and not answer.get("FailedAndUnresolvableNodes")
    message = answer["Error"]
    assert message.startswith("invalid placement policy in annotation on pod db/w-0: ")
    assert expected.replace("\ud800", "\ufffd") in message
    for verb in ("/prioritize", "/preempt"):
        assert (
            post(client, verb, {**filter_args(pod("w-0", sts="w", policy=text), NAMES), "NodeNameToMetaVictims": {}})[0]
            == 200
        )


def test_an_annotation_of_exactly_the_limit_is_read() -> None:
    text = json.dumps(CAPS)
    text += " " * (MAX_POLICY_ANNOTATION_BYTES - len(text))
    assert parse_annotation(text, "x").caps[0].max == 1


def test_the_deepest_valid_policy_is_well_within_the_depth_limit() -> None:
    spec = parse_annotation(
        "group:\n  selector:\n    matchExpressions:\n    - key: app\n      operator: In\n      values: [a, b]\n", "x"
    )
    assert spec.group.selector is not None and spec.group.selector.matchExpressions[0].values == ["a", "b"]
    assert "!!str" not in str(parse_annotation("caps: [{topologyKey: !!str zone, max: 1}]", "x"))


def test_a_policy_error_message_stays_short_however_many_entries_are_wrong() -> None:
    with pytest.raises(PolicyError) as err:
        parse_annotation("shardAntiAffinity: [" + "a, " * 16 + "]", "annotation on pod db/x")
    message = str(err.value)
    assert len(message) <= 1024
    assert message.startswith("invalid placement policy in annotation on pod db/x: shardAntiAffinity.0: ")
    assert message.endswith(
        "shardAntiAffinity.4: Input should be a valid dictionary or instance of ShardAntiAffinity; and 11 more"
    )


def test_thousands_of_caps_get_one_error() -> None:
    """Caps are bounded (limits.MAX_CAPS): the list's length is the one error, its entries unread."""
    with pytest.raises(PolicyError) as err:
        parse_annotation("caps: [" + "a, " * 10_000 + "]", "annotation on pod db/x")
    assert str(err.value) == (
        "invalid placement policy in annotation on pod db/x: caps: List should have at most 16 items after "
        "validation, not 10000"
    )


def test_a_policy_object_with_thousands_of_entries_gets_a_short_message() -> None:
    """A PlacementPolicy object goes through the same bounds and formatter: a list past its bound
    is one error naming it, and an object past MAX_POLICY_OBJECT_BYTES is refused unread."""
    from extender.api.policy import parse_spec

    with pytest.raises(PolicyError) as err:
        parse_spec({"shardAntiAffinity": ["a"] * 10_000}, "PlacementPolicy db/p")
    assert str(err.value) == (
        "invalid placement policy in PlacementPolicy db/p: shardAntiAffinity: List should have at most 16 items "
        "after validation, not 10000"
    )
    with pytest.raises(PolicyError) as err:
        parse_spec({"shardAntiAffinity": ["a" * 100] * 1_000}, "PlacementPolicy db/p")
    assert "the limit is 65,536" in str(err.value) and len(str(err.value)) < 300


# -- 3. lone surrogates -------------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_pod_name_with_an_invalid_policy_is_answered(client) -> None:
    body = json.dumps(filter_args(pod("w-\ud800", sts="w", policy="{bad"), NAMES))  # ensure_ascii: "\ud800"
    assert "\\ud800" in body
    status, answer = post(client, "/filter", body.encode())
    assert status == 200
    # Read as Go reads it: the surrogate is U+FFFD.
    assert "on pod db/w-\ufffd:" in answer["Error"]


def test_a_surrogate_encoded_as_bytes_reads_as_replacement_characters(client) -> None:
    body = json.dumps(filter_args(pod("w-0", labels={"x": "\ud800"}), NAMES), ensure_ascii=False)
    status, _ = post(client, "/filter", body.encode("utf-8", errors="surrogatepass"))
    assert status == 200


def test_a_lone_surrogate_uid_survives_prioritize_tie_breaking(client) -> None:
    obj = pod("w-0", sts="w", policy=CAPS, uid="\udc00")
    for verb in ("/filter", "/prioritize"):
        assert post(client, verb, filter_args(obj, NAMES))[0] == 200


@pytest.mark.parametrize(
    "value,expected",
    [
        ({"a": "\ud800"}, '{"a":"\\ufffd"}'),
        ({"\udfff": ["x\ud800y", "<\u2028>"]}, '{"\\ufffd":["x\\ufffdy","\\u003c\\u2028\\u003e"]}'),
        ({"a": "é😀\ufffd"}, '{"a":"é😀\ufffd"}'),
    ],
)
def test_go_json_writes_lone_surrogates_as_go_writes_invalid_utf8(value: Any, expected: str) -> None:
    assert go_json(value) == expected
    go_json(value).encode("utf-8")


# -- 4. ordinals ----------------------------------------------------------------------------------

ORDINALS = [
    ("w-0", 0),
    ("w-7", 7),
    ("w-10", 10),
    ("a-1-2", 2),
    ("w-2147483647", 2**31 - 1),
    ("w-2147483648", None),  # replicas and ordinals.start are int32
    ("w-99999999999", None),
    ("w-" + "9" * 5000, None),
    ("w-007", None),
    ("w-00", None),  # the controller writes %d: a leading zero is no ordinal it made
    ("w-\u0663", None),  # an Arabic-Indic digit: int() would read it as 3
    ("w-5\n", None),
    ("w", None),
    ("w-", None),
    ("w-3-", None),
]


@pytest.mark.parametrize("name,ordinal", ORDINALS)
def test_only_sane_ordinals_are_read_from_pod_names(name: str, ordinal: int | None) -> None:
    assert parse_pod(pod(name, sts="w")).ordinal == ordinal
    assert (split_ordinal(name) or (None, None))[1] == ordinal


def test_a_pod_name_ending_in_5000_digits_is_filtered_normally(client) -> None:
    status, answer = post(client, "/filter", filter_args(pod("w-" + "9" * 5000, sts="w", policy=CAPS), NAMES))
    assert status == 200 and answer["NodeNames"]


# -- 5. candidate count -----------------------------------------------------------------------------


def too_many_names() -> list[str]:
    return [f"n{i}" for i in range(MAX_CANDIDATE_NODES + 1)]


CANDIDATES = [
    ("filter NodeNames", "/filter", lambda: {"Pod": pod("w-0"), "NodeNames": too_many_names()}),
    ("prioritize NodeNames", "/prioritize", lambda: {"Pod": pod("w-0"), "NodeNames": too_many_names()}),
    (
        "filter Nodes.items",
        "/filter",
        lambda: {"Pod": pod("w-0"), "Nodes": {"items": [{"metadata": {"name": n}} for n in too_many_names()]}},
    ),
    (
        "preempt victims",
        "/preempt",
        lambda: {"Pod": pod("w-0"), "NodeNameToMetaVictims": {n: {"Pods": []} for n in too_many_names()}},
    ),
]


@pytest.mark.parametrize("path,body", [(p, b) for _, p, b in CANDIDATES], ids=[i for i, _, _ in CANDIDATES])
def test_more_candidates_than_the_limit_is_a_413_naming_it(client, path: str, body) -> None:
    status, answer = post(client, path, body())
    assert status == 413
    assert f"names {MAX_CANDIDATE_NODES + 1:,} candidate nodes; the limit is {MAX_CANDIDATE_NODES:,}" in answer["error"]
    assert "MAX_CANDIDATE_NODES" in answer["error"]


def test_exactly_the_limit_of_candidates_is_served(client) -> None:
    names = too_many_names()[:-1]
    status, answer = post(client, "/filter", {"Pod": pod("w-0"), "NodeNames": names})
    assert status == 200 and len(answer["NodeNames"]) == MAX_CANDIDATE_NODES


def test_a_huge_list_of_wrong_entries_is_one_quick_error(client) -> None:
    """3 million wrong NodeNames took 10 s and 3 GB as one validation error each."""
    raw = b'{"Pod": {"metadata": {"name": "w"}}, "NodeNames": [' + b"1," * 3_000_000 + b"1]}"
    status, answer = post(client, "/filter", raw)
    assert status == 400 and answer["error"] == "invalid ExtenderArgs: NodeNames.0: Input should be a valid string"


# -- 6. everything else the fuzzers found ---------------------------------------------------------------

GOOD = json.dumps({"Pod": pod("w-0"), "NodeNames": NAMES})
ODD_BODIES = [
    ("NaN", GOOD.replace('"NodeNames"', '"x": NaN, "NodeNames"').encode(), 400, "NaN is not a JSON value"),
    (
        "Infinity",
        GOOD.replace('"NodeNames"', '"x": -Infinity, "NodeNames"').encode(),
        400,
        "-Infinity is not a JSON value",
    ),
    (
        "1e999",
        GOOD.replace('"NodeNames"', '"x": 1e999, "NodeNames"').encode(),
        400,
        "beyond the range of a 64-bit float",
    ),
    (
        "5,000-digit integer",
        GOOD.replace('"NodeNames"', f'"x": {"9" * 5000}, "NodeNames"').encode(),
        400,
        "Exceeds the limit (4300 digits) for integer string conversion",
    ),
    ("UTF-8 byte order mark", b"\xef\xbb\xbf" + GOOD.encode(), 400, "malformed JSON"),
    ("not UTF-8 outside strings", b"\xff\xfe", 400, "malformed JSON"),
    (
        "not UTF-8 inside a string",
        GOOD.replace('"w-0"', '"w-\\u0030"').encode().replace(b"uid-db", b"uid-\xff\xc3"),
        200,
        None,
    ),
    (
        "victims' PDB count beyond int64",
        json.dumps(
            {"Pod": pod("w-0"), "NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 2**63}}}
        ).encode(),
        400,
        "NumPDBViolations",
    ),
    (
        "a 100 KB key in a wrong place",
        json.dumps({"Pod": pod("w-0"), "NodeNameToMetaVictims": {"k" * 100_000: {"Pods": 1}}}).encode(),
        400,
        "NodeNameToMetaVictims.kkkkkkkk",
    ),
]


@pytest.mark.parametrize("raw,status,message", [b[1:] for b in ODD_BODIES], ids=[n for n, *_ in ODD_BODIES])
def test_odd_bodies_are_answered_in_json(client, raw: bytes, status: int, message: str | None) -> None:
    path = "/preempt" if b"NodeNameToMetaVictims" in raw else "/filter"
    got, answer = post(client, path, raw)
    assert got == status, answer
    if message is not None:
        assert message in answer["error"]
        assert "set_int_max_str_digits" not in answer["error"]
        assert len(answer["error"]) < 1000


def test_a_repeated_key_takes_the_last_value_as_go_does(client) -> None:
    raw = b'{"NodeNames": ["n1"], "Pod": {"metadata": {"name": "w-0"}}, "nodenames": ["n2"]}'
    status, answer = post(client, "/filter", raw)
    assert status == 200 and answer["NodeNames"] == ["n2"]


def test_options_is_a_json_405(client) -> None:
    response = client.options("/filter")
    assert response.status_code == 405 and response.is_json


def test_a_strange_request_id_is_not_echoed(client) -> None:
    response = client.get("/healthz", headers={"X-Request-Id": "x" * 500})
    assert response.headers["X-Request-Id"] != "x" * 500
    response = client.get("/healthz", headers={"X-Request-Id": "abc-123"})
    assert response.headers["X-Request-Id"] == "abc-123"


# -- parsers: property tests --------------------------------------------------------------------------

POLICY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60) | st.lists(
    st.sampled_from(YAML_FRAGMENTS), max_size=30
).map("".join)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=POLICY_TEXT)
def test_any_annotation_text_is_a_policy_or_a_policy_error(text: str) -> None:
    try:
        spec = parse_annotation(text, "annotation on pod db/x")
    except PolicyError as err:
        assert str(err).startswith("invalid placement policy in annotation on pod db/x: ")
        assert len(str(err)) <= 1024
    else:
        assert isinstance(spec, PlacementPolicySpec)


JSON_TEXT = st.text(st.sampled_from('[]{}"\\,:ab\u00e9'), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | JSON_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(JSON_TEXT, children, max_size=3),
    max_leaves=25,
)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@settings(max_examples=500, deadline=None)
@given(value=json_values, limit=st.integers(0, 8), ascii_only=st.booleans())
def test_the_depth_scan_agrees_with_the_decoded_value(value: Any, limit: int, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert nests_deeper(raw, limit) == (depth(value) > limit)


@settings(max_examples=500, deadline=None)
@given(
    raw=st.binary(max_size=64)
    | json_values.map(lambda v: json.dumps(v).encode()).flatmap(
        lambda raw: st.integers(0, len(raw)).map(lambda cut: raw[:cut])
    )
)
def test_any_bytes_are_a_value_or_a_wire_error(raw: bytes) -> None:
    try:
        decode_json(raw, max_depth=4)
    except WireError:
        pass


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_METADATA = st.fixed_dictionaries(
    {},
    optional={"name": st.text(max_size=8) | _JSON, "namespace": st.text(max_size=8) | _JSON, "uid": _JSON},
)


@settings(max_examples=300, deadline=None)
@given(obj=st.fixed_dictionaries({}, optional={"metadata": _METADATA | _JSON, "spec": _JSON, "status": _JSON}) | _JSON)
def test_a_requests_pod_is_named_as_the_full_parse_names_it(obj: Any) -> None:
    """The verbs read only who a request names (pod_identity): for any object the full parse
    reads, the same uid, namespace and name; anything without a name is refused by both."""
    try:
        full = parse_pod(obj)
    except ObjectError:
        full = None
    try:
        named = pod_identity(obj)
    except ObjectError:
        assert full is None
        return
    if full is not None:
        assert (named.uid, named.namespace, named.name, named.key) == (full.uid, full.namespace, full.name, full.key)

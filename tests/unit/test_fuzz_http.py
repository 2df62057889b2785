"""Any body at all, posted to any verb, gets a 200 or a 4xx with a JSON error: never a 500.

Three kinds of input: arbitrary JSON; real pods with odd values in the fields the extender reads;
and, the main fuzzer, valid filter/prioritize/bind/preempt bodies (the Go-made fixtures and
builders.py's objects) with random mutations of the kinds outside testing found 500s with:
deep nesting, lone surrogates and odd Unicode, 5,000-digit names and numbers, oversize and deeply
nested policy annotations in JSON and YAML, odd NodeNames, NaN, broken UTF-8, truncation.
Its example count comes from the Hypothesis profile (tests/conftest.py): 300 locally, 10,000 in CI.

Valid extreme policies too (tests/extreme_policies.py: every section at its bound, alone and
combined): among the mutated bodies' policies, and in a test of their own that holds each verb's
answer, and every hold of the cache's lock, to the decision deadline plus LOCK_HOLD_MARGIN.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from extender.api.policy import INLINE_POLICY_ANNOTATION
from extender.server.app import create_app
from extender.server.verbs import Verbs
from extender.state.store import KINDS, ClusterStore
from extreme_policies import extreme_policies

from builders import HOST, YAML_FRAGMENTS, ZONE, node, pod, statefulset
from fakes import RecordedEvents, ShownVerbs

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
POD_KEYS = ["metadata", "spec", "status"]
META_KEYS = ["name", "namespace", "uid", "labels", "annotations", "ownerReferences", "deletionTimestamp"]
SPEC_KEYS = ["volumes", "nodeName", "schedulerName"]


def mangled_pod():
    """A real pod with random values swapped into the fields the extender reads."""
    sections = st.sampled_from(["metadata", "spec", "status", None])
    keys = st.sampled_from(META_KEYS + SPEC_KEYS)
    return st.tuples(sections, keys, json_values).map(lambda t: _mangle(t[0], t[1], t[2]))


def _mangle(section, key, value):
    obj = pod("w-0", sts="w", policy={"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]}, claims=("c",))
    if section is None:
        obj[key] = value
    elif isinstance(obj.get(section), dict):
        obj[section][key] = value
    return obj


# The verbs are shown each body's pod as the watch would (fakes.ShownVerbs), so a mutated pod is
# decided, not only refused as unknown; and no wait for an unknown one (10,000 bodies in the ci profile).
def client():
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.apply("nodes", "ADDED", node("n1", "a"))
    return create_app(ShownVerbs(store, binder=None, events=RecordedEvents(), watch_wait=0)).test_client()  # type: ignore[arg-type]


CLIENT = client()
VERBS = ["/filter", "/prioritize", "/bind", "/preempt"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(VERBS), body=json_values)
def test_any_json_body_is_answered_without_a_server_error(path, body) -> None:
    response = CLIENT.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code < 500, response.get_data(as_text=True)
    assert response.is_json


@settings(max_examples=300, deadline=None)
@given(
    path=st.sampled_from(["/filter", "/prioritize", "/preempt"]),
    obj=mangled_pod(),
    names=st.lists(json_values, max_size=3),
)
def test_mangled_pods_are_answered_without_a_server_error(path, obj, names) -> None:
    body = {"Pod": obj, "NodeNames": names or ["n1"], "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "x"}]}}}
    response = CLIENT.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code < 500, response.get_data(as_text=True)


KIND_OBJECTS = {
    "nodes": lambda: node("n9", "z"),
    "pods": lambda: pod("w-1", sts="w", claims=("c",)),
    "statefulsets": lambda: {
        "metadata": {"name": "s", "namespace": "db"},
        "spec": {"replicas": 2, "template": {"metadata": {}}, "volumeClaimTemplates": []},
    },
    "claims": lambda: {"metadata": {"name": "c", "namespace": "db"}, "spec": {"volumeName": "v"}},
    "volumes": lambda: {"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": []}}}},
    "policies": lambda: {"metadata": {"name": "p", "namespace": "db"}, "spec": {}},
    "rotations": lambda: {"metadata": {"name": "s", "namespace": "db"}, "spec": {"statefulSet": "s", "order": ["a"]}},
}


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(KIND_OBJECTS)),
    section=st.sampled_from(["metadata", "spec", "status"]),
    key=st.sampled_from(
        META_KEYS
        + SPEC_KEYS
        + ["replicas", "template", "volumeClaimTemplates", "volumeName", "nodeAffinity", "conditions", "unschedulable"]
    ),
    value=json_values,
)
def test_odd_watch_objects_are_rejected_cleanly_or_stored(kind, section, key, value) -> None:
    """A watch event the parser cannot read raises ValueError (the watcher logs and skips it);
    nothing else escapes, so one odd object never stops the watch."""
    from extender.state.objects import ObjectError

    store = ClusterStore()
    obj = KIND_OBJECTS[kind]()
    if isinstance(obj.get(section), dict) or section not in obj:
        obj.setdefault(section, {})[key] = value
    try:
        store.apply(kind, "ADDED", obj)
    except ObjectError:
        pass


# -- the main fuzzer: mutated valid bodies ----------------------------------------------------------

FIXTURES = Path(__file__).parent.parent / "fixtures" / "wire"
try:
    FUZZ = settings.get_profile(f"{settings.get_current_profile_name()}-fuzz")
except InvalidArgument:  # a profile of one's own, without a -fuzz sibling
    FUZZ = settings.get_profile("default-fuzz")


class OkBinder:
    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pass


def fixture_verbs() -> Verbs:
    """The wire fixtures' cluster (6 nodes in zone-a/b/c, StatefulSet db/crdb of 3), a binder
    that succeeds, so bind runs all the way for a pod filter has seen."""
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for item in json.loads((FIXTURES / "filter_args_nodelist.json").read_text())["Nodes"]["items"]:
        store.apply("nodes", "ADDED", item)
    store.apply("statefulsets", "ADDED", statefulset("crdb", 3, claim_templates=("datadir",)))
    store.apply("statefulsets", "ADDED", statefulset("w", 3))
    store.apply("pods", "ADDED", pod("w-2", sts="w", node_name="node-a1", policy=CAPS))
    return ShownVerbs(store, binder=OkBinder(), events=RecordedEvents(), watch_wait=0)  # type: ignore[arg-type]


def fixture_client():
    return create_app(fixture_verbs()).test_client()


CAPS = {"caps": [{"topologyKey": HOST, "max": 1}], "spread": [{"topologyKey": ZONE, "maxSkew": 1}]}
FIXTURE_ZONES = ["zone-a", "zone-b", "zone-c"]
NAMES = [f"node-{z}{i}" for z in "abc" for i in (1, 2)]
YAML_POLICY = "group:\n  size: 3\ncaps:\n- topologyKey: kubernetes.io/hostname\n  max: 1\nordinalZones: {}\n"


def valid_bodies() -> list[tuple[str, Any]]:
    """(verb, body) pairs kube-scheduler could send: Go's own bytes and builders.py's objects."""
    fixture = {
        name: json.loads((FIXTURES / f"{name}.json").read_text())
        for name in (
            "filter_args_nodenames",
            "filter_args_nodelist",
            "bind_args",
            "preempt_args",
            "preempt_args_victims",
            "preempt_args_metavictims",
        )
    }
    w0 = pod("w-0", sts="w", policy=CAPS, claims=("data-w-0",))
    w1 = pod("w-1", sts="w", policy=YAML_POLICY)
    bodies: list[tuple[str, Any]] = []
    for verb in ("/filter", "/prioritize"):
        bodies += [
            (verb, fixture["filter_args_nodenames"]),
            (verb, fixture["filter_args_nodelist"]),
            (verb, {"Pod": w0, "Nodes": None, "NodeNames": NAMES}),
            (verb, {"Pod": w1, "NodeNames": NAMES[:3]}),
            (verb, {"Pod": w0, "Nodes": {"metadata": {}, "items": [node(n, f"zone-{n[5]}") for n in NAMES]}}),
        ]
    bodies += [
        ("/bind", fixture["bind_args"]),
        ("/bind", {"PodName": "w-0", "PodNamespace": "db", "PodUID": "uid-db-w-0", "Node": "node-b1"}),
    ]
    bodies += [
        ("/preempt", fixture[name]) for name in ("preempt_args", "preempt_args_victims", "preempt_args_metavictims")
    ]
    bodies += [("/preempt", {"Pod": w0, "NodeNameToMetaVictims": {"node-a1": {"Pods": [{"UID": "uid-db-w-2"}]}}})]
    return bodies


VALID = valid_bodies()
DEEP = "\u0000deep\u0000"  # a placeholder string, replaced in the encoded text by the nesting

ODD_TEXT = st.sampled_from(
    [
        "\ud800",
        "w-\udfff",
        "\udc00\ud800",
        "\U0001f600",
        "\u2028\u2029",
        "<&>",
        "\x00",
        "\x7f",
        "\ufeff",
        "\u0663",
        "w-\u0663",
        "-",
        "",
        " ",
        "\\",
        '"',
        "[[[{{{",
        "w-007",
        "w-2147483648",
        "w-" + "9" * 5000,
        "9" * 5000,
        "a" * 70_000,
        "node-a1",
        "crdb-1",
    ]
) | st.text(st.characters(exclude_categories=()), max_size=12)
ODD_NUMBER = (
    st.sampled_from(
        [
            2**63,
            -(2**63) - 1,
            2**64,
            10**300,
            int("9" * 4300),
            1e308,
            -0.0,
            5e-324,
            float("nan"),
            float("inf"),
        ]
    )
    | st.integers()
    | st.floats()
)
ODD_VALUES = st.recursive(
    st.none() | st.booleans() | ODD_NUMBER | ODD_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ODD_TEXT, children, max_size=4),
    max_leaves=12,
)


@st.composite
def policy_texts(draw) -> str:
    """Inline policy annotations: valid, oversize, deeply nested (JSON, YAML flow and block), odd."""
    kind = draw(
        st.sampled_from(
            [
                "json-deep",
                "yaml-flow",
                "yaml-block",
                "yaml-indent",
                "oversize",
                "aliases",
                "huge-int",
                "fragments",
                "valid",
                "valid-extreme",
            ]
        )
    )
    depth = draw(st.integers(1, 6000))
    if kind == "json-deep":
        return '{"caps":' * depth + "[]" + "}" * depth
    if kind == "yaml-flow":
        return "caps: " + "[" * depth + "]" * draw(st.integers(0, depth))
    if kind == "yaml-block":
        return "caps:\n" + "- " * depth + "x\n"
    if kind == "yaml-indent":
        return "".join(" " * i + f"k{i}:\n" for i in range(min(depth, 250))) + " " * 251 + "v"
    if kind == "oversize":
        size = draw(st.integers(32 * 1024 - 64, 80 * 1024))
        zones = ",".join(['"zone-x"'] * (size // 9))
        return draw(st.sampled_from([f'{{"zones":{{"allowed":[{zones}]}}}}', "caps: []\n# " + "x" * size]))
    if kind == "aliases":
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, min(depth, 30))
        ]
        return "\n".join(lines + ["self: &s [*s]", f"caps: *a{min(depth, 30) - 1}"])
    if kind == "huge-int":
        digits = draw(st.integers(1, 5000))
        field = draw(
            st.sampled_from(
                [
                    '{"group":{"size":%s}}',
                    '{"caps":[{"topologyKey":"zone","max":%s}]}',
                    '{"spread":[{"topologyKey":"zone","maxSkew":%s}]}',
                    '{"caps":[{"topologyKey":"zone","fraction":"1/%s","comparison":"AtMost"}]}',
                    "group: {size: %s}",
                    "zones: {weights: {a: %s}}",
                ]
            )
        )
        return field % ("9" * digits)
    if kind == "fragments":
        return "".join(draw(st.lists(st.sampled_from(YAML_FRAGMENTS), max_size=40)))
    if kind == "valid-extreme":
        return json.dumps(draw(extreme_policies(FIXTURE_ZONES)))
    return draw(st.sampled_from([json.dumps(CAPS), YAML_POLICY, "{}", "", "null", "caps: 2024-02-30", "[1]"]))


@st.composite
def mutated_bodies(draw) -> tuple[str, bytes]:
    """One valid body, mutated one to three times, then encoded (sometimes mangled as bytes)."""
    verb, body = draw(st.sampled_from(VALID))
    body = json.loads(json.dumps(body))  # a private copy
    if draw(st.integers(0, 9)) == 0:
        verb = draw(st.sampled_from(["/filter", "/prioritize", "/bind", "/preempt"]))  # the wrong verb's body
    deep: tuple[Any, int, bool] | None = None
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(body)
        path = draw(st.sampled_from(paths))
        mutation = draw(
            st.sampled_from(["value", "odd-string", "key", "delete", "deep", "name", "policy", "node-names", "number"])
        )
        if mutation == "value":
            body = _set(body, path, draw(ODD_VALUES))
        elif mutation == "odd-string":
            body = _set(body, path, draw(ODD_TEXT))
        elif mutation == "number":
            body = _set(body, path, draw(ODD_NUMBER))
        elif mutation == "key" and path:
            parent = _get(body, path[:-1])
            if isinstance(parent, dict):
                parent[draw(ODD_TEXT)] = parent.pop(path[-1])
        elif mutation == "delete" and path:
            parent = _get(body, path[:-1])
            del parent[path[-1]]
        elif mutation == "deep" and deep is None:
            deep = (_get(body, path), draw(st.integers(1, 5000)), draw(st.booleans()))
            body = _set(body, path, DEEP)
        elif mutation == "name":
            meta = _pod_meta(body)
            if meta is not None:
                meta["name"] = draw(ODD_TEXT | st.integers(1, 6000).map(lambda n: "w-" + "7" * n))
        elif mutation == "policy":
            meta = _pod_meta(body)
            if meta is not None:
                meta["annotations"] = {**_dict(meta.get("annotations")), INLINE_POLICY_ANNOTATION: draw(policy_texts())}
                if draw(st.booleans()):
                    labels = _dict(meta.get("labels"))
                    meta["labels"] = {**labels, "statefulset.kubernetes.io/pod-name": meta.get("name")}
        elif mutation == "node-names" and isinstance(body, dict) and "Pod" in body:
            body["NodeNames"] = draw(st.lists(ODD_TEXT | ODD_VALUES | st.sampled_from(NAMES), max_size=8))
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    if deep is not None:
        inner, levels, as_list = deep
        opening, closing = ("[", "]") if as_list else ('{"k":', "}")
        text = text.replace(json.dumps(DEEP), opening * levels + json.dumps(inner) + closing * levels)
    raw = text.encode("utf-8", errors="surrogatepass")  # raw surrogates: bytes that are not UTF-8
    if raw.startswith(b"{") and draw(st.integers(0, 9)) == 0:
        # The same field twice, in another spelling (Go matches keys case-insensitively).
        key = draw(st.sampled_from(["pod", "POD", "nodenames", "Nodes", "NODENAMETOMETAVICTIMS", "podname", "node"]))
        value = json.dumps(draw(ODD_VALUES | st.sampled_from([NAMES, {"items": []}, {}])))
        value = value.encode("utf-8", "surrogatepass")
        raw = b'{"' + key.encode() + b'":' + value + (b"," if len(raw) > 2 else b"") + raw[1:]
    if draw(st.integers(0, 9)) == 0:
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(
            st.sampled_from(
                [
                    b"",
                    b"\xff",
                    b"\xc3",
                    b"NaN",
                    b"-Infinity",
                    b"\xef\xbb\xbf",
                    b"\\",
                    b'"',
                    b"{",
                    b"]",
                    b"\x00",
                    b"1" * 5000,
                ]
            )
        )
    return verb, raw


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, path + (i,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(body: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(body, path[:-1])[path[-1]] = value
    return body


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _pod_meta(body: Any) -> dict | None:
    pod_obj = body.get("Pod") if isinstance(body, dict) else None
    meta = pod_obj.get("metadata") if isinstance(pod_obj, dict) else None
    return meta if isinstance(meta, dict) else None


FIXTURE_CLIENT = fixture_client()


@settings(FUZZ)
@given(request=mutated_bodies())
def test_mutated_valid_bodies_are_answered_without_a_server_error(request: tuple[str, bytes]) -> None:
    verb, raw = request
    response = FIXTURE_CLIENT.post(verb, data=raw, content_type="application/json")
    assert response.status_code < 500, response.get_data(as_text=True)
    assert response.is_json
    json.loads(response.get_data(), parse_constant=_no_constant)  # Go-readable: UTF-8, no NaN


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} in an answer")

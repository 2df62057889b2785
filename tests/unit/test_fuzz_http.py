"""Any JSON at all, posted to any verb, gets a 200 or a 4xx with a JSON error: never a 500."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import node, pod
from extender.kube import NullEventSink
from extender.server.app import create_app
from extender.state.store import KINDS, ClusterStore
from extender.verbs import Verbs

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
    return st.tuples(st.sampled_from(["metadata", "spec", "status", None]), st.sampled_from(META_KEYS + SPEC_KEYS), json_values).map(
        lambda t: _mangle(t[0], t[1], t[2]))


def _mangle(section, key, value):
    obj = pod("w-0", sts="w", policy={"caps": [{"topologyKey": "kubernetes.io/hostname", "max": 1}]}, claims=("c",))
    if section is None:
        obj[key] = value
    elif isinstance(obj.get(section), dict):
        obj[section][key] = value
    return obj


def client():
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    store.apply("nodes", "ADDED", node("n1", "a"))
    return create_app(Verbs(store, binder=None, events=NullEventSink())).test_client()  # type: ignore[arg-type]


CLIENT = client()
VERBS = ["/filter", "/prioritize", "/bind", "/preempt"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(VERBS), body=json_values)
def test_any_json_body_is_answered_without_a_server_error(path, body) -> None:
    response = CLIENT.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code < 500, response.get_data(as_text=True)
    assert response.is_json


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(["/filter", "/prioritize", "/preempt"]), obj=mangled_pod(), names=st.lists(json_values, max_size=3))
def test_mangled_pods_are_answered_without_a_server_error(path, obj, names) -> None:
    body = {"Pod": obj, "NodeNames": names or ["n1"], "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "x"}]}}}
    response = CLIENT.post(path, data=json.dumps(body), content_type="application/json")
    assert response.status_code < 500, response.get_data(as_text=True)


KIND_OBJECTS = {
    "nodes": lambda: node("n9", "z"),
    "pods": lambda: pod("w-1", sts="w", claims=("c",)),
    "statefulsets": lambda: {"metadata": {"name": "s", "namespace": "db"}, "spec": {"replicas": 2, "template": {"metadata": {}}, "volumeClaimTemplates": []}},
    "claims": lambda: {"metadata": {"name": "c", "namespace": "db"}, "spec": {"volumeName": "v"}},
    "volumes": lambda: {"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": []}}}},
    "policies": lambda: {"metadata": {"name": "p", "namespace": "db"}, "spec": {}},
}


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(KIND_OBJECTS)), section=st.sampled_from(["metadata", "spec", "status"]),
       key=st.sampled_from(META_KEYS + SPEC_KEYS + ["replicas", "template", "volumeClaimTemplates", "volumeName",
                                                    "nodeAffinity", "conditions", "unschedulable"]), value=json_values)
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

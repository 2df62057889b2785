"""`audit` and `explain` over a hand-built cache: which group a pod counts in, what is reported.

Issue 13: with no group.selector, a pod placed by hand (spec.nodeName) next to its StatefulSet's
pods was reported as a group of its own, "size unknown: ok", though it breaks the cap; and
`explain` said nothing of a breach in the pod's group.
"""

from __future__ import annotations

import pytest

from extender.audit import audit, group_report, render
from extender.explain import explain
from extender.explain import render as render_explanation
from extender.state.store import KINDS, ClusterStore

from builders import HOST, node, pod, policy_object, statefulset

CAP = {"caps": [{"topologyKey": HOST, "max": 1}]}
LABELS = {"app": "crdb"}


def cluster(policy: dict | None = CAP, policy_name: str | None = None, replicas: int = 3) -> ClusterStore:
    """6 nodes over zones a, b, c; StatefulSet db/crdb placed one pod a node (crdb-i on node i)."""
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for i, zone in enumerate("aabbcc"):
        store.apply("nodes", "ADDED", node(f"n{i}", zone))
    if policy_name is not None:
        store.apply("policies", "ADDED", policy_object(policy_name, policy or {}))
        policy = None
    store.apply(
        "statefulsets",
        "ADDED",
        statefulset("crdb", replicas, labels=LABELS, policy=policy, policy_name=policy_name),
    )
    for i in range(replicas):
        store.apply(
            "pods",
            "ADDED",
            pod(f"crdb-{i}", sts="crdb", node_name=f"n{i}", labels=LABELS, policy=policy, policy_name=policy_name),
        )
    return store


def by_hand(store: ClusterStore, name: str, node_name: str | None, **kw) -> None:
    store.apply("pods", "ADDED", pod(name, node_name=node_name, scheduler="default-scheduler", **kw))


def test_a_compliant_group_is_ok() -> None:
    (report,) = audit(cluster())
    assert report.group == "StatefulSet crdb" and report.size == 3 and report.violations == []


COPIES = [
    pytest.param({"labels": LABELS, "policy": CAP}, None, id="inline-policy-same-text"),
    pytest.param(
        {"labels": {**LABELS, "extra": "x"}, "policy": "caps: [{max: 1, topologyKey: kubernetes.io/hostname}]"},
        None,
        id="inline-policy-same-spec-other-text",
    ),
    pytest.param({"labels": LABELS, "policy_name": "crdb"}, "crdb", id="named-policy"),
]


@pytest.mark.parametrize(("copy", "policy_name"), COPIES)
def test_a_pod_placed_by_hand_counts_in_the_statefulset_it_copies(copy, policy_name) -> None:
    store = cluster(policy_name=policy_name)
    by_hand(store, "rogue", "n1", **copy)
    (report,) = audit(store, "db")
    assert report.group == "StatefulSet crdb" and report.size == 3
    assert "db/rogue" in report.placed
    assert report.violations == [
        f"caps: {HOST}=n1 holds 2 pods (db/crdb-1, db/rogue); at most 1 per {HOST} allows 1"
    ], report.violations
    assert report.notes and "db/rogue has no StatefulSet owner; counted in StatefulSet crdb" in report.notes[0]
    text = render([report])
    assert "StatefulSet crdb" in text and "VIOLATED" in text and "n1" in text and "caps:" in text


NOT_COPIES = [
    pytest.param({"labels": {"app": "other"}, "policy": CAP}, id="other-labels"),
    pytest.param({"labels": {}, "policy": CAP}, id="no-labels"),
    pytest.param({"labels": LABELS, "policy": {"caps": [{"topologyKey": HOST, "max": 2}]}}, id="other-policy"),
    pytest.param({"labels": LABELS, "policy_name": "crdb"}, id="named-policy-vs-inline"),
]


@pytest.mark.parametrize("copy", NOT_COPIES)
def test_a_pod_that_copies_no_statefulset_stays_its_own_group(copy) -> None:
    store = cluster()
    store.apply("policies", "ADDED", policy_object("crdb", CAP))
    by_hand(store, "rogue", "n1", **copy)
    reports = {r.group: r for r in audit(store, "db")}
    assert set(reports) == {"StatefulSet crdb", "pod rogue"}
    assert reports["StatefulSet crdb"].violations == [] and reports["pod rogue"].violations == []


def test_an_unplaced_copy_is_pending_in_its_group() -> None:
    store = cluster()
    by_hand(store, "rogue", None, labels=LABELS, policy=CAP)
    (report,) = audit(store)
    assert report.violations == [] and "db/rogue" in report.pending


def test_the_most_specific_template_owns_a_copy() -> None:
    store = cluster()
    store.apply("statefulsets", "ADDED", statefulset("wide", 1, labels={"tier": "db"}, policy=CAP))
    by_hand(store, "rogue", "n0", labels={**LABELS, "tier": "db"}, policy=CAP)
    reports = {r.group: r for r in audit(store)}
    assert "db/rogue" in reports["StatefulSet crdb"].placed and "StatefulSet wide" not in reports


def test_group_report_is_the_audit_of_the_pods_group() -> None:
    store = cluster()
    by_hand(store, "rogue", "n2", labels=LABELS, policy=CAP)
    for name in ("crdb-0", "rogue"):
        report = group_report(store, store.pod_by_name("db", name))
        assert report is not None and report.group == "StatefulSet crdb" and len(report.violations) == 1


# -- explain states the breach of the pod's group --------------------------------------------------


def test_explain_states_a_breach_of_the_pods_group() -> None:
    store = cluster(replicas=2)
    store.apply("statefulsets", "MODIFIED", statefulset("crdb", 3, labels=LABELS, policy=CAP))
    store.apply("pods", "ADDED", pod("crdb-2", sts="crdb", labels=LABELS, policy=CAP))  # Pending
    by_hand(store, "rogue", "n0", labels=LABELS, policy=CAP)
    e = explain(store, "db", "crdb-2")
    assert e.breaches == [f"caps: {HOST}=n0 holds 2 pods (db/crdb-0, db/rogue); at most 1 per {HOST} allows 1"]
    text = render_explanation(e)
    assert "group, StatefulSet crdb, breaks a hard rule now (1)" in text and f"{HOST}=n0 holds 2 pods" in text
    assert e.as_dict()["breaches"] == e.breaches


def test_explain_of_a_compliant_group_states_no_breach() -> None:
    e = explain(cluster(), "db", "crdb-1")
    assert e.breaches == [] and "breaks a hard rule" not in render_explanation(e)

"""`audit` and `explain` over a hand-built cache: which group a pod counts in, what is reported.

With no group.selector, a pod placed by hand (spec.nodeName) next to its StatefulSet's
pods was reported as a group of its own, "size unknown: ok", though it breaks the cap; and
`explain` said nothing of a breach in the pod's group.
"""

from __future__ import annotations

import pytest

from extender.api.policy import PolicyError
from extender.ops.audit import audit, group_report, render
from extender.ops.explain import explain
from extender.ops.explain import render as render_explanation
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
def test_a_pod_that_copies_no_statefulset_is_not_counted_in_it(copy) -> None:
    """Placed by hand by another scheduler: not the StatefulSet's, and its own policy, a group of
    one (no owner, no group.selector), is one its scheduler never reads: not audited. Were it the
    extender's pod, that policy would be refused, and audit lists it with the fix."""
    store = cluster()
    store.apply("policies", "ADDED", policy_object("crdb", CAP))
    by_hand(store, "rogue", "n1", **copy)
    reports = {r.group: r for r in audit(store, "db")}
    assert set(reports) == {"StatefulSet crdb"} and reports["StatefulSet crdb"].violations == []
    store.apply("pods", "ADDED", pod("ours", node_name="n1", **copy))
    reports = {r.group: r for r in audit(store, "db")}
    listed = "PlacementPolicy crdb" if "policy_name" in copy else "pod ours"  # an invalid policy, listed once
    assert set(reports) == {"StatefulSet crdb", listed}
    assert "group.selector" in (reports[listed].error or ""), reports[listed]


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


# -- spread judged over the domains the pods can use (node inclusion policies, minDomains) ---------

ZONE = "topology.kubernetes.io/zone"
POOLS = {"n0": ("a", "db"), "n1": ("a", "db"), "n2": ("b", "db"), "n3": ("b", "db"), "n4": ("c", "web")}


def pinned(spread: dict, selector: dict[str, str] | None, nodes: tuple[str, ...]) -> ClusterStore:
    """StatefulSet db/crdb with a zone spread (maxSkew 1 and `spread`), its pods selecting
    `selector` (pool=db: zones a and b of a, b, c), crdb-i on nodes[i]."""
    policy = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, **spread}]}
    store = ClusterStore()
    for kind in KINDS:
        store.replace(kind, [])
    for name, (zone, pool) in POOLS.items():
        store.apply("nodes", "ADDED", node(name, zone, labels={"pool": pool}))
    store.apply("statefulsets", "ADDED", statefulset("crdb", len(nodes), labels=LABELS, policy=policy))
    for i, where in enumerate(nodes):
        obj = pod(f"crdb-{i}", sts="crdb", node_name=where, labels=LABELS, policy=policy)
        if selector is not None:
            obj["spec"]["nodeSelector"] = selector
        store.apply("pods", "ADDED", obj)
    return store


DB = {"pool": "db"}
SPREAD_CASES = [
    # The pods select zones a and b; zone c, which they can never use, is no empty domain.
    pytest.param({}, DB, ("n0", "n2", "n1", "n3"), None, id="two-of-three-zones"),
    pytest.param({}, DB, ("n0", "n1", "n2"), None, id="two-of-three-within-skew"),
    pytest.param({}, DB, ("n0", "n1", "n0", "n2"), f"{ZONE} skew 2 > maxSkew 1: {ZONE}=a holds 3 pods", id="real-skew"),
    pytest.param({}, None, ("n0", "n2", "n1", "n3"), f"{ZONE}=c 0", id="no-selector-every-zone-counts"),
    pytest.param({"nodeAffinityPolicy": "Ignore"}, DB, ("n0", "n2", "n1", "n3"), f"{ZONE}=c 0", id="affinity-ignored"),
    pytest.param({"minDomains": 2}, DB, ("n0", "n2", "n1", "n3"), None, id="min-domains-met"),
    pytest.param(
        {"minDomains": 3},
        DB,
        ("n0", "n2", "n1", "n3"),
        f"only 2 eligible {ZONE} domain(s) exist, fewer than minDomains 3, so the emptiest counts as 0",
        id="min-domains-unmet",
    ),
]


@pytest.mark.parametrize(("spread", "selector", "nodes", "broken"), SPREAD_CASES)
def test_audit_judges_a_spread_over_the_domains_the_pods_can_use(spread, selector, nodes, broken) -> None:
    (report,) = audit(pinned(spread, selector, nodes))
    if broken is None:
        assert report.violations == []
        assert "VIOLATED" not in render([report])
    else:
        (violation,) = report.violations
        assert violation.startswith("spread: ") and broken in violation, violation


# -- group.matchLabelKeys: each revision is its own group, as the engine counts it -----------------

HASH = "pod-template-hash"
WEB = {"app": "web"}
SPLIT = {"group": {"selector": {"matchLabels": WEB}, "matchLabelKeys": [HASH]}, **CAP}


def rolling(placed: dict[str, tuple[str, str]], policy: dict = SPLIT) -> ClusterStore:
    """Pods `placed` name -> (revision, node) of a Deployment-like group app=web, on cluster()'s nodes."""
    store = cluster()
    for name, (revision, where) in placed.items():
        store.apply("pods", "ADDED", pod(name, node_name=where, labels={**WEB, HASH: revision}, policy=policy))
    return store


REVISION_CASES = [
    # Mid rolling update, the new revision's first pod shares n0 with an old one: each revision
    # keeps its per-node cap of 1.
    pytest.param(
        {"web-old-0": ("old", "n0"), "web-old-1": ("old", "n1"), "web-new-0": ("new", "n0")},
        SPLIT,
        {"new": [], "old": []},
        id="rolling-update",
    ),
    pytest.param(
        {"web-old-0": ("old", "n0"), "web-new-0": ("new", "n0"), "web-new-1": ("new", "n0")},
        SPLIT,
        {
            "new": [f"caps: {HOST}=n0 holds 2 pods (db/web-new-0, db/web-new-1); at most 1 per {HOST} allows 1"],
            "old": [],
        },
        id="a-revision-breaks-its-cap",
    ),
]


@pytest.mark.parametrize(("placed", "policy", "expected"), REVISION_CASES)
def test_each_revision_is_reported_as_its_own_group(placed, policy, expected) -> None:
    reports = {r.group: r for r in audit(rolling(placed, policy)) if r.group != "StatefulSet crdb"}
    assert {g: r.violations for g, r in reports.items()} == {
        f"pods matching app=web ({HASH}={rev})": v for rev, v in expected.items()
    }
    for rev in expected:
        group = reports[f"pods matching app=web ({HASH}={rev})"]
        assert set(group.placed) == {f"db/{n}" for n, (r, _) in placed.items() if r == rev}


def test_without_match_label_keys_the_revisions_are_one_group() -> None:
    policy = {"group": {"selector": {"matchLabels": WEB}}, **CAP}
    placed = {"web-old-0": ("old", "n0"), "web-old-1": ("old", "n1"), "web-new-0": ("new", "n0")}
    reports = {r.group: r for r in audit(rolling(placed, policy)) if r.group != "StatefulSet crdb"}
    (report,) = reports.values()
    assert report.group == "pods matching app=web" and len(report.placed) == 3
    assert report.violations == [
        f"caps: {HOST}=n0 holds 2 pods (db/web-new-0, db/web-old-0); at most 1 per {HOST} allows 1"
    ]


def test_explain_names_the_pods_revision_group() -> None:
    store = rolling({"web-old-0": ("old", "n0"), "web-new-0": ("new", "n0"), "web-new-1": ("new", "n0")})
    assert explain(store, "db", "web-old-0").breaches == []
    e = explain(store, "db", "web-new-1")
    assert e.group == f"pods matching app=web ({HASH}=new)" and len(e.breaches) == 1


def test_a_statefulset_split_by_controller_revision_hash_reports_each_revision() -> None:
    policy = {"group": {"matchLabelKeys": ["controller-revision-hash"]}, **CAP}
    store = cluster(policy=policy)
    for i, revision in enumerate(("crdb-1", "crdb-1", "crdb-2")):  # crdb-2 updated, now on n0 beside crdb-0
        labels = {**LABELS, "controller-revision-hash": revision}
        store.apply(
            "pods", "MODIFIED", pod(f"crdb-{i}", sts="crdb", node_name=f"n{i % 2}", labels=labels, policy=policy)
        )
    reports = {r.group: sorted(r.placed) for r in audit(store)}
    assert reports == {
        "StatefulSet crdb (controller-revision-hash=crdb-1)": ["db/crdb-0", "db/crdb-1"],
        "StatefulSet crdb (controller-revision-hash=crdb-2)": ["db/crdb-2"],
    }
    assert all(r.violations == [] for r in audit(store))


def test_audit_reads_the_zone_rotation_record() -> None:
    """Audit judges ordinal zones by the StatefulSet's ZoneRotation, as filter does.
    crdb-0..2 sit in zones a, a, b (n0, n1, n2). Without a record they read as placed before
    adoption (nothing to report); with the record [a, b, c], crdb-1 (zone a, its zone b) and
    crdb-2 (zone b, its zone c) are out of place, unless the record lists them as adopted."""
    from extender.api.rotation import rotation_object

    store = cluster(policy={"ordinalZones": {}})
    (report,) = audit(store)
    assert report.violations == []
    store.apply("rotations", "ADDED", rotation_object("db", "crdb", ("a", "b", "c"), {}))
    (report,) = audit(store)
    assert sorted(v.split(" ")[1] for v in report.violations) == ["db/crdb-1", "db/crdb-2"], report.violations
    assert all("recorded in ZoneRotation db/crdb" in v for v in report.violations)
    store.apply("rotations", "MODIFIED", rotation_object("db", "crdb", ("a", "b", "c"), {1: "a", 2: "b"}))
    (report,) = audit(store)
    assert report.violations == []


def test_retire_leaves_nothing_behind() -> None:
    """After `retire` the pods are the default scheduler's and keep the (inert) policy
    annotation: audit holds none of them to it, whatever their placement, and does not flag the
    native constraints retire wrote. Mid-rollout, the extender's pods are judged and the others
    still hold their places in the group's counts."""
    store = cluster()
    for i in range(3):  # retired and recreated: another scheduler's, one pod doubled up, a spread written
        retired = pod(f"crdb-{i}", sts="crdb", node_name="n0", labels=LABELS, policy=CAP, scheduler="default-scheduler")
        retired["spec"]["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
        ]
        store.apply("pods", "ADDED", retired)
    assert audit(store, "db") == []
    store.apply("pods", "ADDED", pod("crdb-2", sts="crdb", node_name="n2", labels=LABELS, policy=CAP))
    (report,) = audit(store, "db")
    assert report.violations == [f"caps: {HOST}=n0 holds 2 pods (db/crdb-0, db/crdb-1); at most 1 per {HOST} allows 1"]
    assert report.native_disagreements == {}


def test_a_deleted_policy_that_pods_still_name_is_reported_loudly() -> None:
    """A PlacementPolicy deleted while pods name it: audit reports every such group as a policy
    error (exit 1), with the running pods, and the Pending ones with the message the filter gives
    them (and its InvalidPlacementPolicy event). It is not protected from deletion:
    docs/operations/failure-modes.md says so."""
    store = cluster(policy_name="crdb")
    store.apply("pods", "ADDED", pod("crdb-3", sts="crdb", labels=LABELS, policy_name="crdb"))
    store.apply("policies", "DELETED", policy_object("crdb", CAP))
    reports = audit(store, "db")
    assert reports and all(r.error and "PlacementPolicy db/crdb not found" in r.error for r in reports), reports
    assert any("db/crdb-3" in r.pending for r in reports)
    assert "policy error" in render(reports)


@pytest.mark.parametrize("named", [True, False], ids=["named policy", "inline policy"])
def test_a_selector_that_misses_its_own_pods_is_an_error_listed_once(named) -> None:
    """A typo in group.selector once switched every rule off (4 pods of a cap of 1 on one node,
    audit ok). Now each pod it does not select is refused with the fix naming group.selector, and
    audit lists the policy once, however many pods name it."""
    typo = {"group": {"selector": {"matchLabels": {"app": "crbd"}}}, "caps": [{"topologyKey": HOST, "max": 1}]}
    store = cluster(typo, policy_name="crdb" if named else None, replicas=5)
    for p in store.pods.values():
        with pytest.raises(PolicyError, match=r"group\.selector .* does not select the pod itself"):
            store.resolve_policy(p)
    (report,) = audit(store, "db")
    assert report.error and "group.selector" in report.error
    assert report.group == ("PlacementPolicy crdb" if named else "StatefulSet crdb")
    fixed = {**typo, "group": {"selector": {"matchLabels": LABELS}}}
    (report,) = audit(cluster(fixed, policy_name="crdb" if named else None, replicas=5), "db")
    assert report.error is None and report.violations == []


@pytest.mark.parametrize(
    ("records", "namespace", "noted"),
    [
        ([("db", "crdb")], None, []),  # its set exists
        ([("db", "gone")], None, ["db/gone"]),  # the set was deleted: the record stays, noted
        ([("db", "gone"), ("other", "x")], "db", ["db/gone"]),  # only the namespace asked for
        ([("db", "gone"), ("other", "x")], None, ["db/gone", "other/x"]),
    ],
)
def test_a_record_whose_statefulset_is_gone_is_a_note_not_a_finding(records, namespace, noted) -> None:  # noqa: ANN001
    """A ZoneRotation outlives its StatefulSet on purpose (api/rotation.py): audit says what to
    delete when the set is gone for good, and judges nothing by it."""
    from extender.api.rotation import rotation_object
    from extender.ops.audit import records_without_statefulset

    store = cluster(policy={"ordinalZones": {}})
    for ns, name in records:
        # the order crdb's pods (zones a, a, b) follow, ordinal 1 adopted in a: nothing to judge
        store.apply("rotations", "ADDED", rotation_object(ns, name, ("a", "c", "b"), {1: "a"}))
    notes = records_without_statefulset(store, namespace)
    assert [n.split(" ")[1].rstrip(":") for n in notes] == noted
    assert all("kubectl delete zonerotation" in n for n in notes)
    assert all(not r.violations for r in audit(store, namespace))

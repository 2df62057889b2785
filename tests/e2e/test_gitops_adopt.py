"""A running database declared in git, on any cluster (docs/how-to/gitops.md).

A platform team keeps every object in git and lets Argo CD or Flux apply them; no one runs the
CLI against the cluster at apply time. Two StatefulSets of 9 (one with volumes, one without) run
on the default scheduler, one pod a node, their zones opened b, c, a so their ordinals follow no
rotation. Their committed files come from `adopt -f statefulset.yaml --kustomize placement` (a
kustomize component: the PlacementPolicy fetched from the cluster, the ZoneRotation that keeps
the running pods in their zones, a patch with adopt's changes alone). Then, with those files only:

- cluster 1, the running sets: `kubectl apply -k` (every kind at once): the rollout puts every pod
  back in its zone, none changes zone, `audit` exits 0;
- cluster 2, fresh: the files applied custom resources last (built-in kinds first, the set's
  first pods created, then the policy, then the record, as Argo CD orders kinds within a wave):
  the pods keep their gate and the extender decides no rotation until the committed record is
  there; then every ordinal lands in the zone the record gives it (the zone it ran in on cluster 1
  when adopted, else its rotation zone): cluster 1's layout exactly. The set deleted: after two
  garbage-collection passes (sentinel ConfigMaps owned by a UID that does not exist, each waited
  for in turn) the record is still there, unchanged, without an ownerReference; the set recreated
  from the same files comes back in the record's zones (exactly its earlier zones, for the one with volumes);
- retire from git: `retire --kustomize` rewrites the component; kustomize then builds the native
  form adopt's output promised, with nothing of the team's template lost.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest
import yaml

from extender.api.policy import (
    TRANSLATED_ANNOTATION,
    ZONE_ROTATION_ANNOTATION,
    ZONE_ROTATION_DECLARED,
)
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, LocalCluster, NodeSpec
from extender.ops.component import KUSTOMIZATION, ROTATION_FILE

from .conftest import LOG_DIR
from .test_adopt_rollout import HOST, ZONE, _set_cordon
from .workloads import cli, create_statefulset, pods, statefulset

pytestmark = pytest.mark.e2e

ROTATIONS = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations"
REPLICAS = 9
OPENED = "bca"  # the order the zones opened in while the default scheduler placed the sets
CASES = {"gitops-vol": True, "gitops-novol": False}  # namespace (and set name) -> with volumes


def _nodes(cluster: LocalCluster, prefix: str) -> dict[str, list[str]]:
    """3 zones x 3 nodes, zones gitops-a/b/c (the record names them: both clusters have them)."""
    nodes = {z: [f"{prefix}-{z}{i}" for i in (1, 2, 3)] for z in "abc"}
    cluster.add_nodes(NodeSpec(n, f"gitops-{z}") for z in "abc" for n in nodes[z])
    return nodes


def _manifest(name: str, volumes: bool) -> dict:
    """The team's StatefulSet as committed: the default scheduler, one pod a node."""
    manifest = statefulset(name, REPLICAS, scheduler="default-scheduler", parallel=False, volumes=volumes)
    manifest["metadata"]["namespace"] = name
    manifest["spec"]["template"]["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": HOST}
            ]
        }
    }
    manifest["spec"]["template"]["spec"]["tolerations"] = [{"key": "team.example/db", "operator": "Exists"}]
    return manifest


def _policy(name: str) -> dict:
    return {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name, "namespace": name},
        "spec": {
            "ordinalZones": {},
            "zones": {"allowed": ["gitops-a", "gitops-b", "gitops-c"]},
            "caps": [{"topologyKey": HOST, "max": 1}],
        },
    }


def _zones(cluster: LocalCluster, ns: str) -> dict[int, str]:
    """Ordinal -> zone of the set's bound pods."""
    api = cluster.admin
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}
    return {
        int(p["metadata"]["name"].rsplit("-", 1)[1]): zone_of[p["spec"]["nodeName"]]
        for p in pods(api, ns, f"app={ns}")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def _settled(cluster: LocalCluster, ns: str, scheduler: str) -> dict[int, str] | None:
    """Ordinal -> zone once the set's rollout is done: every pod current, bound, of `scheduler`."""
    api = cluster.admin
    sts = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{ns}")
    status = sts.get("status") or {}
    if status.get("observedGeneration") != sts["metadata"]["generation"]:
        return None
    if status.get("updateRevision") != status.get("currentRevision") or status.get("updatedReplicas") != REPLICAS:
        return None
    live = [p for p in pods(api, ns, f"app={ns}") if not p["metadata"].get("deletionTimestamp")]
    if len(live) != REPLICAS or not all(
        p["spec"].get("nodeName") and p["spec"]["schedulerName"] == scheduler for p in live
    ):
        return None
    return _zones(cluster, ns)


def _follows(zones: dict[int, str], record: dict) -> bool:
    """Every ordinal in the zone the record gives it: the zone it ran in when it was adopted, for
    an adopted ordinal (the rule would accept its rotation zone too, so that a rollout cannot
    stall, and prefers this one above every other score), else its rotation zone."""
    order, adopted = record["order"], record["adopted"]
    return all(z == adopted.get(str(o), order[o % len(order)]) for o, z in zones.items())


def _kustomize(cluster: LocalCluster, folder: Path) -> list[dict]:
    built = cluster.kubectl("kustomize", str(folder))
    return [d for d in yaml.safe_load_all(built.stdout) if d]


def _sentinel_collected(cluster: LocalCluster, ns: str, name: str) -> None:
    """One garbage-collection pass, seen: a ConfigMap owned by a UID nothing has, created and
    waited for until the garbage collector deletes it."""
    api = cluster.admin
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "no-such-owner", "uid": str(uuid.uuid4())}
    api.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": [owner]}},
    )
    wait_for(
        f"the garbage collector to delete {ns}/{name}",
        lambda: not [c for c in api.list(f"/api/v1/namespaces/{ns}/configmaps") if c["metadata"]["name"] == name],
        60,
    )


def _run_on_default_scheduler(cluster: LocalCluster, nodes: dict[str, list[str]]) -> dict[str, dict[int, str]]:
    """Both sets placed by the default scheduler zone by zone (OPENED), the others cordoned."""
    api = cluster.admin
    for ns, volumes in CASES.items():
        cluster.namespace(ns)
        if volumes:
            for z in "abc":
                cluster.add_zonal_volumes(f"gitops-{z}", 3, prefix=f"pv-gitops-{z}")
        api.create(f"/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/placementpolicies", _policy(ns))
    _set_cordon(api, [n for z in OPENED[1:] for n in nodes[z]], True)
    for ns, volumes in CASES.items():
        create_statefulset(api, ns, _manifest(ns, volumes))
    for count, zone in zip((3, 6, 9), OPENED, strict=True):
        if count > 3:
            _set_cordon(api, nodes[zone], False)
        for ns in CASES:
            wait_for(f"{count} pods of {ns} placed", lambda ns=ns, count=count: len(_zones(cluster, ns)) == count, 120)
    return {ns: _zones(cluster, ns) for ns in CASES}


def _commit(cluster: LocalCluster, root: Path, ns: str, volumes: bool) -> Path:
    """The team's app folder, and adopt's component in it (the policy read from the cluster)."""
    app = root / ns
    (app / "placement").mkdir(parents=True)
    (app / "statefulset.yaml").write_text(yaml.safe_dump(_manifest(ns, volumes)))
    (app / KUSTOMIZATION).write_text(yaml.safe_dump({"resources": ["statefulset.yaml"]}))
    adopted = cli(
        cluster,
        "adopt",
        "-f",
        str(app / "statefulset.yaml"),
        "--policy-name",
        ns,
        "--kustomize",
        str(app / "placement"),
    )
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    assert "components:\n- placement" in adopted.stderr, "the line the app's kustomization lacks"
    (app / KUSTOMIZATION).write_text(yaml.safe_dump({"resources": ["statefulset.yaml"], "components": ["placement"]}))
    return app


def test_a_running_database_declared_in_git_lands_in_its_zones_on_any_cluster(cluster, scenario, tmp_path) -> None:  # noqa: ANN001, PLR0915
    started = time.monotonic()
    api = cluster.admin
    nodes = _nodes(cluster, "one")
    before = _run_on_default_scheduler(cluster, nodes)
    apps = {ns: _commit(cluster, tmp_path, ns, volumes) for ns, volumes in CASES.items()}
    records = {}
    for ns, app in apps.items():
        assert not api.list(ROTATIONS.format(ns=ns)), "adopt -f wrote nothing"
        built = _kustomize(cluster, app)
        assert sorted(d["kind"] for d in built) == ["PlacementPolicy", "StatefulSet", "ZoneRotation"]
        (record,) = [d for d in built if d["kind"] == "ZoneRotation"]
        # ordinals outside the rotation are kept by the record, or by their volumes (which the
        # rule honours anyway: nothing to record for those)
        assert bool(record["spec"]["adopted"]) is not CASES[ns], (before[ns], record)
        assert "ownerReferences" not in record["metadata"] and "uid" not in record["metadata"]
        (sts,) = [d for d in built if d["kind"] == "StatefulSet"]
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert annotations[ZONE_ROTATION_ANNOTATION] == ZONE_ROTATION_DECLARED
        # rotation export (read-only) gives the same record, for a team that commits it by hand
        exported = cli(cluster, "rotation", "export", f"statefulset/{ns}", "-n", ns, "--policy-name", ns)
        assert exported.returncode == 0, exported.stderr
        assert yaml.safe_load(exported.stdout)["spec"] == record["spec"]
        records[ns] = record["spec"]

    # cluster 1: the running sets, every kind applied at once
    for app in apps.values():
        applied = cluster.kubectl("apply", "-k", str(app))
        assert applied.returncode == 0, applied.stderr
    after = {ns: wait_for(f"{ns}'s rollout", lambda ns=ns: _settled(cluster, ns, SCHEDULER_NAME), 240) for ns in CASES}
    assert after == before, "a running pod changed zone at adoption"
    audit = cli(cluster, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    for ns in CASES:
        (live,) = api.list(ROTATIONS.format(ns=ns))
        assert live["spec"] == records[ns], "the extender wrote its own record over the committed one"

    # retire from git, on a copy (cluster 2 gets the adopted files): the component rewritten,
    # kustomize builds the native form adopt's output promised, nothing of the team's lost
    for ns, app in apps.items():
        copy = tmp_path / "retire" / ns
        shutil.copytree(app, copy)
        full = cli(cluster, "adopt", "-f", str(app / "statefulset.yaml"), "--policy-name", ns)
        assert full.returncode == 0, full.stderr
        (promised_adopted,) = [d for d in yaml.safe_load_all(full.stdout) if d and d["kind"] == "StatefulSet"]
        (built_adopted,) = [d for d in _kustomize(cluster, app) if d["kind"] == "StatefulSet"]
        assert built_adopted == promised_adopted, "the component builds adopt's full output"
        retired = cli(
            cluster, "retire", "-f", str(copy / "statefulset.yaml"), "--kustomize", str(copy / "placement"), "--offline"
        )
        assert retired.returncode == 0, retired.stdout + retired.stderr
        whole = tmp_path / f"{ns}-adopted.yaml"
        whole.write_text(full.stdout)
        retire_full = cli(cluster, "retire", "-f", str(whole), "--offline")
        assert retire_full.returncode == 0, retire_full.stderr
        (promised,) = [d for d in yaml.safe_load_all(retire_full.stdout) if d and d["kind"] == "StatefulSet"]
        (native,) = [d for d in _kustomize(cluster, copy) if d["kind"] == "StatefulSet"]
        assert native == promised
        template = native["spec"]["template"]
        assert template["spec"]["schedulerName"] == "default-scheduler" and "schedulingGates" not in template["spec"]
        assert ZONE_ROTATION_ANNOTATION not in template["metadata"]["annotations"]
        assert TRANSLATED_ANNOTATION in template["metadata"]["annotations"], "translate's native constraints"
        team = _manifest(ns, CASES[ns])["spec"]
        if CASES[ns]:
            assert native["spec"]["volumeClaimTemplates"] == team["volumeClaimTemplates"]
        assert template["spec"]["tolerations"] == team["template"]["spec"]["tolerations"]
        assert template["spec"]["containers"] == team["template"]["spec"]["containers"]
        anti = team["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert (
            anti[0] in template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        )
        assert (copy / "placement" / ROTATION_FILE).read_text() == (app / "placement" / ROTATION_FILE).read_text()
    first = time.monotonic() - started

    # cluster 2, fresh: the same files, custom resources last
    second = LocalCluster(extender_args=["--reservation-ttl=30"])
    try:
        second.start()
        other = second.admin
        _nodes(second, "two")
        for ns, volumes in CASES.items():
            second.namespace(ns)
            if volumes:
                for z in "abc":
                    second.add_zonal_volumes(f"gitops-{z}", 3, prefix=f"pv-gitops-{z}")
        custom: dict[str, list[dict]] = {}
        for ns, app in apps.items():
            built = _kustomize(second, app)
            builtin = [d for d in built if d["apiVersion"] == "apps/v1"]
            custom[ns] = [d for d in built if d["apiVersion"] != "apps/v1"]
            applied = second.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(builtin))
            assert applied.returncode == 0, applied.stderr
        for ns in CASES:
            wait_for(f"{ns}'s first pod", lambda ns=ns: pods(other, ns, f"app={ns}"), 60)
        # the policy first, the record later: the pods wait for the record, the extender decides none
        for ns in CASES:
            policy = [d for d in custom[ns] if d["kind"] == "PlacementPolicy"]
            assert second.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(policy)).returncode == 0
        time.sleep(3)  # 15 of the gate lifter's passes
        for ns in CASES:
            assert not other.list(ROTATIONS.format(ns=ns)), "the extender decided a rotation the files declare"
            assert not _zones(second, ns), "a pod placed before its committed record"
            waiting = pods(other, ns, f"app={ns}")
            assert all(p["spec"].get("schedulingGates") for p in waiting), "the gate stays until the record"
        for ns in CASES:
            record = [d for d in custom[ns] if d["kind"] == "ZoneRotation"]
            assert second.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(record)).returncode == 0
        fresh = {ns: wait_for(f"{ns} placed", lambda ns=ns: _settled(second, ns, SCHEDULER_NAME), 240) for ns in CASES}
        for ns in CASES:
            assert _follows(fresh[ns], records[ns]), (ns, fresh[ns], records[ns])
        audit = cli(second, "audit")
        assert audit.returncode == 0, audit.stdout + audit.stderr

        # the set deleted, the garbage collector given two passes, the set recreated from git
        for ns in CASES:
            other.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{ns}")
        for ns in CASES:
            wait_for(f"{ns}'s pods gone", lambda ns=ns: not pods(other, ns, f"app={ns}"), 120)
        _sentinel_collected(second, "gitops-novol", "gc-pass-1")
        _sentinel_collected(second, "gitops-novol", "gc-pass-2")
        for ns in CASES:
            (kept,) = other.list(ROTATIONS.format(ns=ns))
            assert kept["spec"] == records[ns] and not kept["metadata"].get("ownerReferences")
            applied = second.kubectl("apply", "-k", str(apps[ns]))
            assert applied.returncode == 0, applied.stderr
        again = {
            ns: wait_for(f"{ns} recreated", lambda ns=ns: _settled(second, ns, SCHEDULER_NAME), 240) for ns in CASES
        }
        for ns in CASES:
            assert _follows(again[ns], records[ns]), (ns, again[ns], records[ns])
        assert again["gitops-vol"] == fresh["gitops-vol"], "a recreated set left its volumes' zones"
        audit = cli(second, "audit")
        assert audit.returncode == 0, audit.stdout + audit.stderr
    except BaseException:
        print(f"\ncluster 2's logs kept in {second.keep_logs(LOG_DIR / 'test_gitops_adopt-cluster-2')}")
        raise
    finally:
        second.stop()
    scenario.repetitions = 1
    scenario.pods_placed = 3 * len(CASES) * REPLICAS
    scenario.note = (
        f"2 running sets of 9 (with and without volumes) adopted from git: cluster 1 apply -k, 0 zone changes; "
        f"cluster 2 fresh, custom resources last: every ordinal in the zone the record gives it, none placed or "
        f"decided before the record; deleted, two GC passes, record unchanged, recreated in the record's zones "
        f"(on its volumes' zones); retire --kustomize builds the native form "
        f"(cluster 1 {first:.0f} s, total {time.monotonic() - started:.0f} s)"
    )
    print(f"\n{scenario.note}")

"""Ordinal zones at the moments things go wrong: a zone outage, and an adoption.

Each scenario keeps to zones of its own (`zones.allowed`), so the node deletions of one do not
touch the others. Everything is read from the API server: where pods are, their PodScheduled
condition, the ZoneRotation object, and `audit`'s exit code.

1. Zone outage, no volumes: 3 zones x 3 nodes, 9 replicas (a per-node cap of 2, so zones a and
   b have room for zone c's pods). Zone c's nodes are deleted and its pods recreated: they stay
   Pending with kube-scheduler's condition naming zone c, nothing else moves, `audit` is clean;
   when zone c's nodes return, they are placed there within 60 s.
2. Zone outage, with volumes: the same with zonal volumes (3 zones x 2 nodes, 6 replicas). Here
   kube-scheduler's own volume filter refuses zones a and b before the extender is asked, so the
   condition names the PersistentVolume's node affinity; `explain` names the zone the pod waits for.
3. Adoption: a StatefulSet placed by the default scheduler with ordinals 0 and 1 in one zone is
   given ordinalZones (updateStrategy OnDelete: nothing running is recreated) and scaled to 6.
   The new ordinals spread over every zone as crl's order does; ordinals 0 and 1 stay where they
   are and are recorded as adopted, so `audit` passes.
"""

from __future__ import annotations

import json
import time

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

from .workloads import (
    POLICY_ANNOTATION,
    cli,
    create_statefulset,
    node_zones,
    ordinal,
    pods,
    scale,
    scheduled_message,
    statefulset,
    wait_settled,
)

pytestmark = pytest.mark.e2e

ROTATIONS = "/apis/placement.extender.dev/v1alpha1/namespaces/{ns}/zonerotations"
RETURN_WITHIN = 60.0


def where(api, ns: str, selector: str) -> dict[int, tuple[str, str]]:  # noqa: ANN001
    """ordinal -> (pod uid, node) of the pods placed now."""
    return {
        ordinal(p): (p["metadata"]["uid"], p["spec"]["nodeName"])
        for p in pods(api, ns, selector)
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def lose_zone(cluster, ns: str, selector: str, zone_nodes: list[str]) -> None:  # noqa: ANN001
    """The zone's nodes are deleted and the pods on them recreated by the StatefulSet controller
    (what the pod garbage collector does after its quarantine, done at once here)."""
    api = cluster.admin
    for name in zone_nodes:
        api.delete(f"/api/v1/nodes/{name}")
    for p in pods(api, ns, selector):
        if p["spec"].get("nodeName") in zone_nodes:
            api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}", gracePeriodSeconds="0")


def outage(cluster, scenario, *, label: str, per_zone: int, replicas: int, volumes: bool) -> None:  # noqa: ANN001
    api = cluster.admin
    zones = [f"{label}-a", f"{label}-b", f"{label}-c"]
    cluster.add_nodes(zoned_nodes({z: per_zone for z in zones}, prefix=label))
    if volumes:
        for zone in zones:
            cluster.add_zonal_volumes(zone, replicas // 3, prefix=f"pv-{zone}")
    ns = cluster.namespace(label)
    selector = f"app={label}"
    policy = {
        "ordinalZones": {},
        "zones": {"allowed": zones},
        "caps": [{"topologyKey": "kubernetes.io/hostname", "max": 2}],
    }
    create_statefulset(api, ns, statefulset(label, replicas, policy=policy, volumes=volumes))
    placed = wait_settled(api, ns, selector, replicas, timeout=180)
    zone_of = node_zones(api)
    assert {ordinal(p): zone_of[p["spec"]["nodeName"]] for p in placed} == {i: zones[i % 3] for i in range(replicas)}
    (record,) = wait_for("the ZoneRotation record", lambda: api.list(ROTATIONS.format(ns=ns)), 30)
    assert record["spec"]["order"] == zones and not record["metadata"].get("ownerReferences")

    before = where(api, ns, selector)
    lost = sorted(n for n, z in zone_of.items() if z == zones[2])
    lost_ordinals = sorted(o for o, (_, n) in before.items() if n in lost)
    lose_zone(cluster, ns, selector, lost)

    def waiting_named() -> list[dict] | None:
        items = {ordinal(p): p for p in pods(api, ns, selector) if not p["metadata"].get("deletionTimestamp")}
        waiting = [items.get(o) for o in lost_ordinals]
        if any(p is None or p["spec"].get("nodeName") or not scheduled_message(p) for p in waiting):
            return None
        return waiting  # type: ignore[return-value]

    wait_for("the lost zone's ordinals Pending with a reason", waiting_named, 120)
    time.sleep(10)  # kube-scheduler has retried them meanwhile (node deletions move its queue)
    still = waiting_named()
    assert still is not None, "a lost zone's ordinal was placed elsewhere"
    messages = [scheduled_message(p) for p in still]
    explained = cli(cluster, "explain", f"{ns}/{label}-{lost_ordinals[0]}")
    if volumes:
        # kube-scheduler's volume filter refused the other zones; the extender was not asked
        # ("didn't match PersistentVolume's node affinity"; "volume node affinity conflict" before 1.34)
        assert all("PersistentVolume's node affinity" in m or "volume node affinity" in m for m in messages), messages
    else:
        assert all(f"zone {zones[2]}" in m for m in messages), messages
    assert f"belongs in zone {zones[2]}" in explained.stdout and "no schedulable node" in explained.stdout, (
        explained.stdout + explained.stderr
    )
    kept = {o: v for o, v in before.items() if o not in lost_ordinals}
    assert where(api, ns, selector) == kept, "a pod outside the lost zone moved"
    audit = cli(cluster, "audit", "-n", ns)
    assert audit.returncode == 0, audit.stdout + audit.stderr

    returned = time.monotonic()
    cluster.add_nodes(zoned_nodes({zones[2]: per_zone}, prefix=f"{label}-back"))
    placed = wait_settled(api, ns, selector, replicas, timeout=RETURN_WITHIN)
    back_after = time.monotonic() - returned
    zone_of = node_zones(api)
    now = where(api, ns, selector)
    assert {o: now[o] for o in kept} == kept, "a pod outside the lost zone moved"
    assert all(zone_of[now[o][1]] == zones[2] for o in lost_ordinals)
    audit = cli(cluster, "audit", "-n", ns)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # The record outlives its StatefulSet, as the set's claims do (api/rotation.py): the set
    # recreated under its name comes back in the same zones (tests/e2e/test_gitops_adopt.py)
    api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{label}")
    wait_for("the StatefulSet gone", lambda: not api.list(f"/apis/apps/v1/namespaces/{ns}/statefulsets"), 60)
    assert [r["spec"]["order"] for r in api.list(ROTATIONS.format(ns=ns))] == [zones]
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    named = "volume conflict; explain names the zone" if volumes else "condition names the zone"
    scenario.note = (
        f"{'with' if volumes else 'without'} volumes: zone {zones[2]}'s {len(lost)} nodes deleted, ordinals "
        f"{lost_ordinals} Pending ({named})"
        f", nothing else moved, audit clean; placed back in {zones[2]} {back_after:.1f}s after its nodes returned"
    )
    print(f"\n{scenario.note}")


def test_zone_outage_without_volumes_keeps_ordinals_waiting_for_their_zone(cluster, scenario) -> None:
    outage(cluster, scenario, label="oz1", per_zone=3, replicas=9, volumes=False)


def test_zone_outage_with_volumes_keeps_ordinals_waiting_for_their_zone(cluster, scenario) -> None:
    outage(cluster, scenario, label="oz2", per_zone=2, replicas=6, volumes=True)


def test_adopting_a_set_with_two_ordinals_in_one_zone_spreads_the_new_ones(cluster, scenario) -> None:
    api = cluster.admin
    label = "adopt"
    zones = [f"{label}-a", f"{label}-b", f"{label}-c"]
    cluster.add_nodes(zoned_nodes({z: 2 for z in zones}, prefix=label))
    ns = cluster.namespace(label)
    selector = f"app={label}"
    manifest = statefulset(label, 2, scheduler="default-scheduler", parallel=True)
    manifest["spec"]["updateStrategy"] = {"type": "OnDelete"}
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": zones[0]}
    create_statefulset(api, ns, manifest)
    wait_settled(api, ns, selector, 2, timeout=120)
    before = where(api, ns, selector)
    zone_of = node_zones(api)
    assert {zone_of[n] for _, n in before.values()} == {zones[0]}

    # Adopt: our scheduler, a policy, no nodeSelector (OnDelete: the running pods are not recreated)
    policy = {"ordinalZones": {}, "zones": {"allowed": zones}}
    api.merge_patch(
        f"/apis/apps/v1/namespaces/{ns}/statefulsets/{label}",
        {
            "spec": {
                "template": {
                    "metadata": {"annotations": {POLICY_ANNOTATION: json.dumps(policy)}},
                    "spec": {"schedulerName": SCHEDULER_NAME, "nodeSelector": None},
                }
            }
        },
    )
    scale(api, ns, label, 6)
    placed = wait_settled(api, ns, selector, 6, timeout=180)
    zone_of = node_zones(api)
    now = where(api, ns, selector)
    new_zones = {o: zone_of[now[o][1]] for o in range(2, 6)}
    (record,) = wait_for("the ZoneRotation record", lambda: api.list(ROTATIONS.format(ns=ns)), 30)
    order = record["spec"]["order"]
    assert {o: now[o] for o in before} == before, "a running pod moved at adoption"
    assert set(new_zones.values()) == set(zones), f"new ordinals did not spread: {new_zones}"
    assert new_zones == {o: order[o % 3] for o in range(2, 6)}, (new_zones, order)
    assert order == zones and record["spec"]["adopted"] == {"1": zones[0]}, record["spec"]
    audit = cli(cluster, "audit", "-n", ns)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    # README: an orphaning delete (to change an immutable field) keeps the pods and the record
    api.delete(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{label}", propagationPolicy="Orphan")
    wait_for("the StatefulSet gone", lambda: not api.list(f"/apis/apps/v1/namespaces/{ns}/statefulsets"), 60)
    time.sleep(3)  # the garbage collector has had its chance to (wrongly) delete the record
    assert [r["spec"]["order"] for r in api.list(ROTATIONS.format(ns=ns))] == [order]
    assert where(api, ns, selector) == now
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.note = (
        f"adopted with ordinals 0,1 in {zones[0]}: recorded order {order}, adopted {record['spec']['adopted']}; "
        f"new ordinals 2-5 in {[new_zones[o] for o in range(2, 6)]}; nothing running moved; audit clean"
    )
    print(f"\n{scenario.note}")

"""Scenario 1 (crl-scheduler): ordinal zones under the real kube-scheduler.

A StatefulSet of 6 with zonal volumes (WaitForFirstConsumer) over 3 zones x 2 nodes. Ordinal i
must sit in zone order[i mod 3]; scaling 6 -> 3 keeps all three zones; scaling 3 -> 1 -> 4 brings
every pod back to its volume's zone, none left Pending.
"""

from __future__ import annotations

import pytest

from extender.devcluster.cluster import zoned_nodes

from .workloads import ZONE, create_statefulset, node_zones, ordinal, scale, statefulset, wait_settled

pytestmark = pytest.mark.e2e

ZONES = ["zone-a", "zone-b", "zone-c"]


@pytest.fixture(scope="module")
def crl(cluster):
    cluster.add_nodes(zoned_nodes({z: 2 for z in ZONES}))
    for zone in ZONES:
        cluster.add_zonal_volumes(zone, 4)
    namespace = cluster.namespace("crl")
    create_statefulset(cluster.admin, namespace, statefulset("crdb", 6, policy={"ordinalZones": {}}, volumes=True))
    return cluster, namespace


def volume_zone(api, namespace: str, pod_name: str) -> str:
    claim = api.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data-{pod_name}")
    volume = api.get(f"/api/v1/persistentvolumes/{claim['spec']['volumeName']}")
    return volume["metadata"]["labels"][ZONE]


def test_ordinal_i_sits_in_zone_order_i_mod_3(crl, scenario) -> None:
    cluster, namespace = crl
    api = cluster.admin
    placed = wait_settled(api, namespace, "app=crdb", 6)
    zones = node_zones(api)
    # Equal node counts: crl orders zones by name, so ordinal i -> ZONES[i % 3].
    where = {ordinal(p): zones[p["spec"]["nodeName"]] for p in placed}
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += sum(1 for i, z in where.items() if z != ZONES[i % 3])
    assert where == {i: ZONES[i % 3] for i in range(6)}


def test_scale_down_to_three_keeps_every_zone(crl, scenario) -> None:
    cluster, namespace = crl
    api = cluster.admin
    scale(api, namespace, "crdb", 3)
    placed = wait_settled(api, namespace, "app=crdb", 3)
    zones = node_zones(api)
    held = {zones[p["spec"]["nodeName"]] for p in placed}
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(set(ZONES) - held)
    assert held == set(ZONES)


def test_scale_3_1_4_every_pod_returns_to_its_volume_zone(crl, scenario) -> None:
    cluster, namespace = crl
    api = cluster.admin
    scale(api, namespace, "crdb", 1)
    wait_settled(api, namespace, "app=crdb", 1)
    scale(api, namespace, "crdb", 4)
    placed = wait_settled(api, namespace, "app=crdb", 4)
    zones = node_zones(api)
    mismatched = {
        p["metadata"]["name"]: (zones[p["spec"]["nodeName"]], volume_zone(api, namespace, p["metadata"]["name"]))
        for p in placed
        if zones[p["spec"]["nodeName"]] != volume_zone(api, namespace, p["metadata"]["name"])
    }
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    scenario.violations += len(mismatched)
    assert not mismatched, f"pods away from their volumes: {mismatched}"
    # The rotation still holds: ordinal 3 is back in zone-a, where its volume from the first round is.
    assert {ordinal(p): zones[p["spec"]["nodeName"]] for p in placed} == {i: ZONES[i % 3] for i in range(4)}

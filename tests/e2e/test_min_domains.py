"""minDomains 3 on a 2-zone cluster, as native PodTopologySpread.

Zone spread maxSkew 1 DoNotSchedule, minDomains 3, 4 pods on zone-a and zone-b: with fewer
eligible zones than minDomains the emptiest counts as 0, so one pod per zone places and the other
two stay Pending with a reason naming minDomains. Once a third zone's node is added they place.
"""

from __future__ import annotations

from collections import Counter

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import NodeSpec, zoned_nodes

from .workloads import create_statefulset, node_zones, pods, scheduled_message, statefulset, wait_settled

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
POLICY = {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3}]}


def test_pods_beyond_the_skew_wait_for_a_third_zone(cluster, scenario) -> None:
    cluster.add_nodes(zoned_nodes({"zone-a": 2, "zone-b": 2}))
    ns = cluster.namespace("min-domains")
    api = cluster.admin
    create_statefulset(api, ns, statefulset("spread3", 4, policy=POLICY))

    def two_placed_two_waiting():
        items = pods(api, ns, "app=spread3")
        bound = [p for p in items if p["spec"].get("nodeName")]
        waiting = [p for p in items if not p["spec"].get("nodeName") and "minDomains" in scheduled_message(p)]
        return (bound, waiting) if len(items) == 4 and len(bound) == 2 and len(waiting) == 2 else None

    bound, waiting = wait_for("2 pods placed and 2 Pending naming minDomains", two_placed_two_waiting, 120)
    zones = node_zones(api)
    assert Counter(zones[p["spec"]["nodeName"]] for p in bound) == {"zone-a": 1, "zone-b": 1}
    scenario.pending += len(waiting)

    cluster.add_nodes([NodeSpec("node-c1", "zone-c")])
    placed = wait_settled(api, ns, "app=spread3", 4, timeout=360)  # kube-scheduler's retry of Pending pods
    per_zone = Counter(node_zones(api)[p["spec"]["nodeName"]] for p in placed)
    scenario.repetitions += 1
    scenario.pods_placed += len(placed)
    assert set(per_zone) == {"zone-a", "zone-b", "zone-c"} and max(per_zone.values()) - min(per_zone.values()) <= 1


POLICIES = "/apis/placement.extender.dev/v1alpha1/namespaces/default/placementpolicies"


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (
            {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "minDomains": 3, "whenUnsatisfiable": "ScheduleAnyway"}]},
            "spec.spread[0]",
            "minDomains applies only with whenUnsatisfiable: DoNotSchedule",
        ),
        ({"spread": [{"topologyKey": ZONE, "maxSkew": 1, "minDomains": 0}]}, "spec.spread[0].minDomains", "1"),
        (
            {"spread": [{"topologyKey": ZONE, "maxSkew": 1, "nodeTaintsPolicy": "Sometimes"}]},
            "spec.spread[0].nodeTaintsPolicy",
            "Unsupported value",
        ),
        ({"group": {"matchLabelKeys": ["a", "a"]}}, "spec.group", "matchLabelKeys lists a key twice"),
    ],
    ids=["min-domains-soft", "min-domains-zero", "bad-taints-policy", "duplicate-match-label-key"],
)
def test_api_server_rejects_bad_refinements_naming_the_field(cluster, spec, field, words) -> None:
    from extender.devcluster.api import ApiError

    body = {
        "apiVersion": "placement.extender.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "bad"},
        "spec": spec,
    }
    with pytest.raises(ApiError) as err:
        cluster.admin.create(POLICIES, body)
    assert err.value.status == 422
    assert field in str(err.value) and words in str(err.value)

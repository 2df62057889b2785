"""Rolling updates that recreate several ordinals at once keep every pod in its zone.

From Kubernetes 1.37 a StatefulSet's `updateStrategy.rollingUpdate.maxUnavailable` is honoured by
default (MaxUnavailableStatefulSet): the controller deletes up to that many pods of the old
revision together, so several ordinals are Pending at the same moment and kube-scheduler asks the
extender about them in any order, each while its siblings are missing. Ordinal zones must not
read the momentary gaps as room elsewhere: ordinal i goes back to zone order[i mod 3].

A StatefulSet of 9 under ordinal zones and a per-node cap of 1, over 3 zones x 4 nodes, with
`maxUnavailable: 3` and `minReadySeconds: 2` (so each batch stays unavailable long enough to be
seen), is rolled twice. A sampler reads the set's pods from the API server every 0.2 s for the
whole time: at no sample is a bound pod outside its ordinal's zone or beside a sibling on a node,
and `audit` exits 0 after each roll. Each roll starts with every pod available, so the budget of
3 is what limits it; the run records how many of the set's pods were unavailable at once (as the
controller counts them), and requires at least 2 in each roll, to show it really took several
ordinals down together.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

from .workloads import Sampler, cli, create_statefulset, node_zones, ordinal, pods, statefulset, wait_settled

pytestmark = pytest.mark.e2e

ZONES = ["roll-a", "roll-b", "roll-c"]
NAME = "rolled"
REPLICAS = 9
MAX_UNAVAILABLE = 3
MIN_READY_SECONDS = 2
HOST = "kubernetes.io/hostname"
POLICY = {"ordinalZones": {}, "zones": {"allowed": ZONES}, "caps": [{"topologyKey": HOST, "max": 1}]}


def _complete(api, ns: str, revision_before: str | None) -> bool:  # noqa: ANN001
    sts = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{NAME}")
    status = sts.get("status") or {}
    live = [p for p in pods(api, ns, f"app={NAME}") if not p["metadata"].get("deletionTimestamp")]
    return (
        status.get("observedGeneration") == sts["metadata"]["generation"]
        and status.get("updateRevision") != revision_before
        and status.get("currentRevision") == status.get("updateRevision")
        and status.get("updatedReplicas") == REPLICAS
        and status.get("availableReplicas") == REPLICAS
        and len(live) == REPLICAS
        and all(p["spec"].get("nodeName") for p in live)
    )


def _violations(api, ns: str, zone_of: dict[str, str | None]) -> list[str]:  # noqa: ANN001
    """Every bound pod of the set outside zone order[ordinal mod 3], or sharing a node."""
    found, seen = [], {}
    for p in pods(api, ns, f"app={NAME}"):
        node = p["spec"].get("nodeName")
        if not node:
            continue
        name = p["metadata"]["name"]
        if zone_of.get(node) != ZONES[ordinal(p) % 3]:
            found.append(f"{name} on {node} in {zone_of.get(node)}, not {ZONES[ordinal(p) % 3]}")
        if node in seen:
            found.append(f"{name} shares {node} with {seen[node]}")
        seen[node] = name
    return found


def _unavailable(api, ns: str) -> int:  # noqa: ANN001
    """How many of the set's ordinals are unavailable right now, as the StatefulSet controller
    counts them: missing, terminating, unbound, not Ready, or Ready for less than minReadySeconds."""
    now = datetime.now(UTC)
    available = set()
    for p in pods(api, ns, f"app={NAME}"):
        if not p["spec"].get("nodeName") or p["metadata"].get("deletionTimestamp"):
            continue
        ready = next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), None)
        if ready and ready["status"] == "True":
            since = datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00"))
            if (now - since).total_seconds() >= MIN_READY_SECONDS:
                available.add(ordinal(p))
    return REPLICAS - len(available)


def test_rolled_twice_with_max_unavailable_every_pod_stays_in_its_zone(cluster, scenario) -> None:
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({z: 4 for z in ZONES}, prefix="roll"))
    zone_of = node_zones(api)
    ns = cluster.namespace("roll")
    manifest = statefulset(NAME, REPLICAS, policy=POLICY)
    manifest["spec"]["minReadySeconds"] = MIN_READY_SECONDS
    manifest["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": MAX_UNAVAILABLE}}
    create_statefulset(api, ns, manifest)
    wait_settled(api, ns, f"app={NAME}", REPLICAS)
    sts_path = f"/apis/apps/v1/namespaces/{ns}/statefulsets/{NAME}"
    # The API server drops the field where MaxUnavailableStatefulSet is off (before 1.37 by
    # default); from 1.37 it must be kept, or this scenario would not test what it is for.
    honoured = (api.get(sts_path)["spec"]["updateStrategy"].get("rollingUpdate") or {}).get("maxUnavailable") == 3
    minor = int(api.get("/version")["minor"].rstrip("+"))
    assert honoured or minor < 37, "the 1.37+ API server dropped maxUnavailable"
    assert _violations(api, ns, zone_of) == []
    most_down, samples, bad = [], [], []
    for roll in (1, 2):
        # Every pod available first: a pod of the old revision that is not yet available is
        # deleted at once whatever the budget (the Parallel controller's first phase), which would
        # test that instead of the budget of 3.
        wait_for("every pod available", lambda: api.get(sts_path)["status"].get("availableReplicas") == REPLICAS, 60)
        before = api.get(sts_path)["status"].get("updateRevision")
        with Sampler(lambda: (_violations(api, ns, zone_of), _unavailable(api, ns))) as sampler:
            api.merge_patch(sts_path, {"spec": {"template": {"metadata": {"annotations": {"rolled": str(roll)}}}}})
            wait_for(f"roll {roll} to complete", lambda before=before: _complete(api, ns, before), 300)
        read = [value for _, value in sampler.samples if not isinstance(value, Exception)]
        samples.append(len(read))
        bad.extend(v for violations, _ in read for v in violations)
        most_down.append(max(down for _, down in read))
        audit = cli(cluster, "audit", "-n", ns)
        assert audit.returncode == 0, audit.stdout + audit.stderr
    placed = [p for p in pods(api, ns, f"app={NAME}") if p["spec"].get("nodeName")]
    assert all(p["spec"]["schedulerName"] == SCHEDULER_NAME for p in placed)
    scenario.repetitions += 2
    scenario.pods_placed += 2 * REPLICAS
    scenario.violations += len(bad)
    scenario.note = f"samples {samples}, at most {most_down} of {REPLICAS} pods unavailable at once (per roll)"
    print(f"\nmaxUnavailable rollouts: {scenario.note}, {len(bad)} violations")
    assert bad == [], bad[:10]
    assert min(samples) >= 5, "the sampler read the pods throughout each roll"
    if honoured:
        assert min(most_down) >= 2, f"a roll never took several ordinals down together ({most_down})"

"""Moving a workload between the two modes with the documented commands.

One control plane runs both: our second kube-scheduler (placement-scheduler) and the cluster's
own kube-scheduler with the in-scheduler stanza, one extender behind both, as while an operator
moves workloads from one mode to the other. A StatefulSet of 7 under ordinal zones and a per-node
cap of 1, 3 zones of 3 nodes, placed in second-scheduler mode, then:

1. `adopt --mode in-scheduler`: the rollout completes, every pod on the cluster's scheduler with
   the opt-in request, 0 pods change zone, the cap and every ordinal's zone hold at every sample
   taken through the rollout, `audit` exits 0;
2. `adopt` (second-scheduler mode) back: the same;
3. `retire` then `adopt --mode in-scheduler`: retire's rollout completes and `audit` exits 0; the
   adoption takes out exactly what retire's translate merged in (no leftover spread), its rollout
   completes with nothing moved from where the default scheduler ran it (an ordinal it put outside
   the rotation is recorded as adopted there: "nothing running moves", README), and `audit` exits 0.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from extender.api.policy import OPT_IN_RESOURCE, TRANSLATED_ANNOTATION
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import SCHEDULER_NAME, zoned_nodes

from .workloads import Sampler, cli, create_statefulset, ordinal, pods, scale, statefulset

pytestmark = pytest.mark.e2e

CLUSTER_OPTIONS = {"mode": "both"}
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ZONES = ["ms-a", "ms-b", "ms-c"]
REPLICAS = 7
NAME = "ms"


def _opted_in(pod: dict) -> bool:
    return any(OPT_IN_RESOURCE in ((c.get("resources") or {}).get("requests") or {}) for c in pod["spec"]["containers"])


def _rolled(api, ns: str, mode: str) -> list[dict] | None:  # noqa: ANN001
    """The set's pods once its rollout is done, each bound and placed the way `mode` places it."""
    sts = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{NAME}")
    status = sts.get("status") or {}
    if status.get("observedGeneration") != sts["metadata"]["generation"]:
        return None
    if status.get("updateRevision") != status.get("currentRevision") or status.get("updatedReplicas") != REPLICAS:
        return None
    live = [p for p in pods(api, ns, f"app={NAME}") if not p["metadata"].get("deletionTimestamp")]
    want = {
        "second-scheduler": lambda p: p["spec"]["schedulerName"] == SCHEDULER_NAME and not _opted_in(p),
        "in-scheduler": lambda p: p["spec"]["schedulerName"] == "default-scheduler" and _opted_in(p),
        "native": lambda p: p["spec"]["schedulerName"] == "default-scheduler" and not _opted_in(p),
    }[mode]
    done = len(live) == REPLICAS and all(p["spec"].get("nodeName") and want(p) for p in live)
    return live if done else None


def _zones(api, placed: list[dict]) -> dict[str, str]:  # noqa: ANN001
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}
    return {p["metadata"]["name"]: zone_of[p["spec"]["nodeName"]] for p in placed}


def _adopt(cluster, ns: str, policy_file, *mode: str) -> None:  # noqa: ANN001
    out = cli(cluster, "adopt", f"statefulset/{NAME}", "-n", ns, "--policy-file", str(policy_file), *mode)
    assert out.returncode == 0, out.stdout + out.stderr


def _audit(cluster, ns: str) -> None:  # noqa: ANN001
    out = cli(cluster, "audit", "-n", ns)
    assert out.returncode == 0, out.stdout + out.stderr


def _violations(api, ns: str, order: dict[int, str]):  # noqa: ANN001, ANN202
    """A probe for the Sampler: the set's pods doubled on a node, and bound outside their ordinal's zone."""
    zone_of = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE) for n in api.list("/api/v1/nodes")}

    def probe() -> int:
        placed = [p for p in pods(api, ns, f"app={NAME}") if p["spec"].get("nodeName")]
        doubled = sum(c - 1 for c in Counter(p["spec"]["nodeName"] for p in placed).values() if c > 1)
        astray = sum(1 for p in placed if zone_of[p["spec"]["nodeName"]] != order[ordinal(p)])
        return doubled + astray

    return probe


def test_a_set_moves_to_in_scheduler_mode_and_back_without_a_pod_changing_zone(cluster, scenario, tmp_path) -> None:  # noqa: ANN001
    api = cluster.admin
    cluster.add_nodes(zoned_nodes({z: 3 for z in ZONES}, prefix="ms"))
    ns = cluster.namespace("mode-switch")
    policy = {"zones": {"allowed": ZONES}, "ordinalZones": {"order": ZONES}, "caps": [{"topologyKey": HOST, "max": 1}]}
    policy_file = tmp_path / "policy.json"
    policy_file.write_text(json.dumps(policy))
    create_statefulset(api, ns, statefulset(NAME, 0, scheduler="default-scheduler", parallel=False))
    _adopt(cluster, ns, policy_file)
    scale(api, ns, NAME, REPLICAS)
    placed = wait_for("7 pods placed in second-scheduler mode", lambda: _rolled(api, ns, "second-scheduler"), 180)
    start = _zones(api, placed)
    order = {i: ZONES[i % 3] for i in range(REPLICAS)}
    assert all(start[f"{NAME}-{i}"] == order[i] for i in range(REPLICAS)), start
    _audit(cluster, ns)

    moved, samples = {}, {}
    for step, mode, flags in (
        ("to in-scheduler", "in-scheduler", ("--mode", "in-scheduler")),
        ("back to second-scheduler", "second-scheduler", ()),
    ):
        with Sampler(_violations(api, ns, order), interval=0.2) as sampler:
            _adopt(cluster, ns, policy_file, *flags)
            after = wait_for(f"the rollout {step}", lambda mode=mode: _rolled(api, ns, mode), 300)
        zones = _zones(api, after)
        moved[step] = [name for name, zone in zones.items() if zone != start[name]]
        values = [v for _, v in sampler.samples if isinstance(v, int)]
        samples[step] = (len(values), max(values, default=0))
        _audit(cluster, ns)

    out = cli(cluster, "retire", f"statefulset/{NAME}", "-n", ns)
    assert out.returncode == 0, out.stdout + out.stderr
    retired_pods = wait_for("the retirement's rollout", lambda: _rolled(api, ns, "native"), 300)
    retired_zones = _zones(api, retired_pods)
    _audit(cluster, ns)
    retired = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{NAME}")["spec"]["template"]
    assert TRANSLATED_ANNOTATION in retired["metadata"]["annotations"], "retire records what translate merged in"
    _adopt(cluster, ns, policy_file, "--mode", "in-scheduler")
    readopted = api.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/{NAME}")["spec"]["template"]
    assert TRANSLATED_ANNOTATION not in readopted["metadata"]["annotations"]
    spreads = readopted["spec"].get("topologySpreadConstraints") or []
    assert not [s for s in spreads if s.get("whenUnsatisfiable") == "ScheduleAnyway"], spreads
    final = wait_for("the rollout after retire and adopt", lambda: _rolled(api, ns, "in-scheduler"), 300)
    _audit(cluster, ns)
    final_zones = _zones(api, final)
    astray = sum(final_zones[f"{NAME}-{i}"] != order[i] for i in range(REPLICAS))

    scenario.repetitions, scenario.pods_placed = 4, REPLICAS * 5
    scenario.violations = sum(worst for _, worst in samples.values())
    scenario.note = (
        f"7 pods, ordinal zones + cap 1: to in-scheduler and back, pods that changed zone {moved}; "
        f"samples (count, worst violations) {samples}; after retire + adopt --mode in-scheduler, "
        f"nothing moved, {astray} ordinal(s) the default scheduler put outside the rotation kept there "
        "(adopted); audit 0 each time"
    )
    print(f"\n{scenario.note}")
    assert moved == {"to in-scheduler": [], "back to second-scheduler": []}, moved
    assert all(worst == 0 for _, worst in samples.values()), samples
    assert final_zones == retired_zones, (retired_zones, final_zones)

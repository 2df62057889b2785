"""Kind `soak`: a bounded churn loop on the local control plane, watching for slow leaks.

Several capped groups (StatefulSets, Parallel, each its own group: at most 1 pod per node and
at most 3 per zone, zones preferably even) go through random cycles of create, scale up, scale
down and delete, each cycle waiting until the cluster shows exactly the pods it asked for, all
bound. Every few cycles the placement is audited (extender/ops/audit.py over a fresh list of the
cluster: 0 violations expected) and the extender is sampled: the RSS of its gunicorn worker
(/proc), its reservations (extender_reservations), and how many metric series /metrics serves.
At the end every group is deleted, the extender is given its reservation TTL to drop what it
still holds, and the slope per hour of each sample is printed (least squares over the run after
its first fifth, the warm-up).

Caps only (no hard spread): a scale-down removes the highest ordinals wherever they are, which
can skew zones but never break a cap, so any violation the audit finds is the extender's.

Figures: `violations` (the audits' total), `reservations_after` (what the extender still held
after settling), `rss_mib_per_hour`, `reservations_per_hour`, `series_per_hour` (the slopes),
`rss_mib_per_hour_last_quarter`, `cycles`, `placed`, `audits`. The targets (no violation, no
reservation left) are the workload file's.

    python -m benchmarks run soak                        # 30 minutes
    python -m benchmarks run soak --set workload.minutes=3 --set workload.groups=4
    python -m benchmarks run soak --smoke                # 1 minute

The e2e suite runs a short form (tests/e2e/test_soak.py) on its own control plane.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests

from benchmarks.cluster import ZONES, gone, parallel_statefulset
from benchmarks.common import REPO, table, vm_status, worker_pid
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import HOSTNAME, SCHEDULER_NAME, ZONE, LocalCluster, zoned_nodes
from extender.kube.client import connect
from extender.ops.audit import audit
from extender.state.watcher import list_once

NODES_PER_ZONE = 4
MAX_REPLICAS = 8
POLICY = {
    "caps": [{"topologyKey": HOSTNAME, "max": 1}, {"topologyKey": ZONE, "max": 3}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}],
}
LABEL = "soak"


@dataclass
class Sample:
    at: float  # seconds since the start
    cycle: int
    rss_kib: int
    reservations: float
    series: int
    pods: int
    violations: int


@dataclass
class SoakResult:
    minutes: float
    cycles: int = 0
    placed: int = 0  # pods the churn asked to be placed (creates and scale-ups)
    actions: dict[str, int] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    reservations_after: float | None = None
    slopes_per_hour: dict[str, float] = field(default_factory=dict)
    # the RSS slope in each quarter of the run: a leak keeps its slope, a heap settling loses it
    rss_kib_per_hour_by_quarter: list[float] = field(default_factory=list)

    def summary(self) -> str:
        s = self.slopes_per_hour
        first, last = (self.samples[0], self.samples[-1]) if self.samples else (None, None)
        rss = f"RSS {first.rss_kib / 1024:.0f}->{last.rss_kib / 1024:.0f} MiB" if first and last else "RSS -"
        series = f"series {first.series}->{last.series}" if first and last else "series -"
        return (
            f"{self.cycles} churn cycles in {self.minutes:.1f} min ({self.actions}), {len(self.samples)} audits, "
            f"{len(self.violations)} violations; {rss} ({s.get('rss_kib', 0) / 1024:+.1f} MiB/h), "
            f"reservations {s.get('reservations', 0):+.1f}/h, {series} ({s.get('series', 0):+.0f}/h); "
            f"reservations left after settling: {self.reservations_after}; RSS slope by quarter "
            f"{', '.join(f'{v / 1024:+.0f}' for v in self.rss_kib_per_hour_by_quarter)} MiB/h"
        )


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per hour (0 with fewer than two points)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mx) * (v - my) for t, v in points) / var * 3600


def scrape(port: int) -> tuple[float, int]:
    """(reservations held, metric series served) from the extender's /metrics."""
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    reservations = sum(float(line.rsplit(" ", 1)[1]) for line in series if line.startswith("extender_reservations{"))
    return reservations, len(series)


def _statefulset(name: str, replicas: int) -> dict[str, Any]:
    return parallel_statefulset(
        name,
        replicas,
        {"app": name, LABEL: "churn"},
        {"placement.extender.dev/policy": json.dumps(POLICY)},
        {
            "schedulerName": SCHEDULER_NAME,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.invalid/db:1"}],
        },
    )


def _settled(api: Api, namespace: str, want: dict[str, int]) -> bool:
    items = api.list(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{LABEL}=churn")
    have: dict[str, int] = {}
    for pod in items:
        if pod["metadata"].get("deletionTimestamp") or not pod["spec"].get("nodeName"):
            return False
        app = pod["metadata"]["labels"]["app"]
        have[app] = have.get(app, 0) + 1
    return have == {k: v for k, v in want.items() if v}


def churn(
    cluster: LocalCluster,
    namespace: str,
    *,
    minutes: float,
    groups: int = 4,
    audit_every: int = 3,
    seed: int = 1,
    settle_timeout: float = 120,
    log=print,  # noqa: ANN001
) -> SoakResult:
    """Churn `groups` StatefulSets in `namespace` for `minutes`; see the module docstring."""
    api = cluster.admin
    assert api is not None
    rng = random.Random(seed)
    reader = connect(str(cluster.kubeconfig))
    master = cluster.process("extender")
    assert master is not None and master.popen is not None
    port = cluster.ports["extender"]
    sts_path = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    want: dict[str, int] = {}  # group -> replicas asked for (absent: deleted)
    result = SoakResult(minutes=minutes)
    started = time.monotonic()

    def act(name: str, action: str, replicas: int) -> None:
        if action == "create":
            api.create(sts_path, _statefulset(name, replicas))
        elif action == "delete":
            api.delete(f"{sts_path}/{name}", propagationPolicy="Foreground")
        else:
            api.merge_patch(f"{sts_path}/{name}", {"spec": {"replicas": replicas}})
        result.actions[action] = result.actions.get(action, 0) + 1
        result.placed += max(0, replicas - want.get(name, 0))
        if action == "delete":
            want.pop(name, None)
            wait_for(f"{name} deleted", lambda: gone(api, f"{sts_path}/{name}"), settle_timeout)
        else:
            want[name] = replicas
        wait_for(f"{namespace} settled at {want}", lambda: _settled(api, namespace, want), settle_timeout)

    def sample() -> None:
        store = list_once(reader)
        found = [f"{r.group}: {v}" for r in audit(store, namespace) for v in r.violations]
        result.violations.extend(found)
        reservations, series = scrape(port)
        s = Sample(
            at=round(time.monotonic() - started, 1),
            cycle=result.cycles,
            rss_kib=vm_status(worker_pid(master.popen.pid) or 0)["VmRSS"],
            reservations=reservations,
            series=series,
            pods=sum(want.values()),
            violations=len(found),
        )
        result.samples.append(s)
        log(
            f"  cycle {s.cycle:4d} at {s.at:7.1f}s: {s.pods:3d} pods, RSS {s.rss_kib / 1024:.1f} MiB, "
            f"{s.reservations:.0f} reservations, {s.series} series, {s.violations} violations"
        )

    names = [f"soak-{i}" for i in range(groups)]
    sample()
    while time.monotonic() - started < minutes * 60:
        name = rng.choice(names)
        current = want.get(name)
        if current is None:
            act(name, "create", rng.randint(2, MAX_REPLICAS))
        else:
            roll = rng.random()
            if roll < 0.15:
                act(name, "delete", 0)
            elif (roll < 0.6 and current < MAX_REPLICAS) or current <= 1:
                act(name, "scale-up", min(MAX_REPLICAS, current + rng.randint(1, 3)))
            else:
                act(name, "scale-down", max(1, current - rng.randint(1, 3)))
        result.cycles += 1
        if result.cycles % audit_every == 0:
            sample()
    for name in list(want):
        act(name, "delete", 0)
    sample()

    try:  # committed reservations drop when the watch shows the binding; tentative ones at their TTL
        wait_for("the extender's reservations to drain", lambda: scrape(port)[0] == 0, 150, interval=1)
        result.reservations_after = 0.0
    except TimeoutError:
        result.reservations_after = scrape(port)[0]
    # The first fifth of the run is warm-up (the worker's heap, the first label sets of every
    # metric): slopes are fitted over the rest, so that they measure drift, not start-up.
    steady = [s for s in result.samples if s.at >= result.samples[-1].at / 5]
    for key in ("rss_kib", "reservations", "series"):
        result.slopes_per_hour[key] = round(slope_per_hour([(s.at, getattr(s, key)) for s in steady]), 1)
    end = result.samples[-1].at
    result.rss_kib_per_hour_by_quarter = [
        round(slope_per_hour([(s.at, s.rss_kib) for s in result.samples if q * end / 4 <= s.at <= (q + 1) * end / 4]))
        for q in range(4)
    ]
    return result


def thin(samples: list[Any], keep: int = 200) -> list[Any]:
    """At most `keep` samples, evenly spaced, the first and last included (the JSON stays small)."""
    if len(samples) <= keep:
        return list(samples)
    step = (len(samples) - 1) / (keep - 1)
    return [samples[round(i * step)] for i in range(keep)]


def figures(result: SoakResult) -> dict[str, float]:
    """The flat figures targets read (see the module docstring)."""
    first, last = result.samples[0], result.samples[-1]
    out: dict[str, float] = {
        "cycles": result.cycles,
        "placed": result.placed,
        "audits": len(result.samples),
        "violations": len(result.violations),
        "rss_mib_first": round(first.rss_kib / 1024, 1),
        "rss_mib_last": round(last.rss_kib / 1024, 1),
        "rss_mib_per_hour": round(result.slopes_per_hour["rss_kib"] / 1024, 1),
        "reservations_per_hour": result.slopes_per_hour["reservations"],
        "series_per_hour": result.slopes_per_hour["series"],
        "series_last": last.series,
    }
    if result.reservations_after is not None:
        out["reservations_after"] = result.reservations_after
    if result.rss_kib_per_hour_by_quarter:
        out["rss_mib_per_hour_last_quarter"] = round(result.rss_kib_per_hour_by_quarter[-1] / 1024, 1)
    return out


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """One churn of `workload.minutes` on a fresh control plane (`rounds` must be 1: a soak is one
    long run); the kind's result: `figures`, `arms`, `detail` (the soak's JSON)."""
    params, per_zone = workload.workload, workload.cluster.nodes_per_zone
    with LocalCluster(extender_args=[f"--reservation-ttl={params.reservation_ttl_s}"]) as cluster:
        cluster.add_nodes(zoned_nodes({z: per_zone for z in ZONES}))
        namespace = cluster.namespace("soak")
        log(f"soak: {params.groups} groups on {len(ZONES) * per_zone} nodes for {params.minutes} min")
        result = churn(
            cluster,
            namespace,
            minutes=params.minutes,
            groups=params.groups,
            audit_every=params.audit_every,
            seed=params.seed,
            log=log,
        )
    data = asdict(result)
    data["samples_taken"] = len(result.samples)
    data["samples"] = thin(data["samples"])
    return {
        "figures": figures(result),
        "arms": {"extender": {"available": True, "mode": "the extender as deployed, beside our kube-scheduler"}},
        "detail": {"nodes": len(ZONES) * per_zone, **data, "summary": result.summary()},
    }


def report(result: dict[str, Any]) -> str:
    detail = result["detail"]
    samples = detail["samples"]
    rows = [
        [key, f"{samples[0][key]}", f"{samples[-1][key]}", value] for key, value in detail["slopes_per_hour"].items()
    ]
    return table(["sample", "first", "last", "slope per hour"], rows) + "\n" + detail["summary"]

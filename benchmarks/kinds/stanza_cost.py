"""Kind `stanza_cost`: what the in-scheduler stanza costs the pods that never opted in: the
cluster's kube-scheduler with the shipped config/in-scheduler/scheduler-config.yaml against the same file without its
`extenders` stanza, same binaries, one control plane, one run.

(Moved from benchmarks/stanza_cost.py; its settings are benchmarks/workloads/stanza-cost.yaml.)

`cluster.nodes` kwok nodes (500). Each round stops the default kube-scheduler, creates the pods (no opt-in, so the
extender is never called for them), restarts kube-scheduler with one of the two configurations,
and times the drain: from the first pod bound to the last (read from the API server), and the
scheduler's own `scheduler_scheduling_attempt_duration_seconds` per scheduled pod (the algorithm's
histogram too, where the pod was not batched). The configurations
alternate (with, without, with, ...), `rounds` each. Two pod shapes (`workload.shapes`):

- default:   `workload.pods` (1,000) pods of a Deployment-like template (kube-scheduler's default spread
             constraints apply, so no pod is batchable);
- batchable: the profile's PodTopologySpread `defaultingType: List` with no default constraints,
             500 pods each taking most of a node (one per node): pods opportunistic batching
             (1.35+) can schedule from one signature. Any extender turns batching off in every
             profile ("Disabling signatures for profile because it has extenders configured"),
             so this shape shows what the stanza costs where batching would have applied.

kube-scheduler keeps its default client limits (50 QPS, burst 100), as deployed: the Binding
calls then bound the drain rate, and the algorithm time says what the CPU pays.
`--set workload.qps=500` lifts that limit, so the drain shows the CPU's share.

Figures, per shape: `SHAPE.pods_per_second.with` / `.without`, `SHAPE.throughput_ratio`,
`SHAPE.algorithm_ms.with` / `.without`, `SHAPE.algorithm_ratio` (medians of rounds).

    python -m benchmarks run stanza-cost                # both shapes, 3 rounds each way; ~10 min
    python -m benchmarks run stanza-cost --set workload.qps=500 --out benchmarks/results/stanza_cost_qps500.json
    python -m benchmarks run stanza-cost --set 'workload.shapes=[default]' --set workload.pods=100 --rounds 1
    python -m benchmarks run stanza-cost --smoke        # 30 nodes, 50 default pods, 1 round each way
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml

from benchmarks.cluster import PodWatch
from benchmarks.common import REPO, read_histograms, table
from extender.devcluster.api import wait_for
from extender.devcluster.cluster import IN_SCHEDULER_CONFIG, LocalCluster, NodeSpec

ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
ATTEMPT = "scheduler_scheduling_attempt_duration_seconds"  # per attempt, batched pods included
BATCHABLE_ARGS = {
    "name": "PodTopologySpread",
    "args": {"defaultingType": "List", "defaultConstraints": []},
}


class StanzaCluster(LocalCluster):
    """The in-scheduler control plane whose default kube-scheduler can be restarted with or without
    the stanza, and with the batchable profile or not."""

    stanza = True
    batchable = False
    qps: float | None = None  # clientConnection qps/burst; None keeps kube-scheduler's (50/100)

    def _start_default_scheduler(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(IN_SCHEDULER_CONFIG.read_text())
        config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
        if self.qps is not None:
            config["clientConnection"].update(qps=self.qps, burst=int(2 * self.qps))
        if self.stanza:
            extender = config["extenders"][0]
            extender["urlPrefix"] = f"http://127.0.0.1:{self.ports['extender']}"
            extender["enableHTTPS"] = False
            extender.pop("tlsConfig", None)
        else:
            del config["extenders"]
        if self.batchable:
            config["profiles"][0]["pluginConfig"] = [BATCHABLE_ARGS]
        path = self.workdir / "kube-scheduler.yaml"
        path.write_text(yaml.safe_dump(config))
        argv = [self._bin("kube-scheduler"), f"--config={path}"]
        argv += [f"--secure-port={self.ports['scheduler']}", "--bind-address=127.0.0.1"]
        argv.append("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")  # loopback only
        self._spawn("kube-scheduler", argv)

    def restart_scheduler(self, *, stanza: bool, batchable: bool) -> None:
        self.stop_scheduler()
        self.stanza, self.batchable = stanza, batchable
        self._start_default_scheduler(self.workdir / "scheduler.kubeconfig")

    def stop_scheduler(self) -> None:
        process = self.process("kube-scheduler")
        if process is not None:
            process.stop()
            self.processes.remove(process)

    def metrics(self) -> str:
        """kube-scheduler's /metrics text (the benchmark opens the path to loopback callers)."""
        urllib3.disable_warnings()
        response = requests.get(f"https://127.0.0.1:{self.ports['scheduler']}/metrics", verify=False, timeout=10)
        response.raise_for_status()
        return response.text


def pod(name: str, batchable: bool) -> dict[str, Any]:
    resources = {"requests": {"cpu": "20", "memory": "1Gi"}} if batchable else {"requests": {"cpu": "10m"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "ordinary"}},
        "spec": {
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "registry.invalid/web:1", "resources": resources}],
        },
    }


def run_round(cluster: StanzaCluster, shape: str, stanza: bool, index: int, pods: int) -> dict[str, Any]:
    """Pods created with the scheduler stopped, then drained by a fresh kube-scheduler (its
    metrics start at zero), watched from before it starts."""
    api = cluster.admin
    assert api is not None
    batchable = shape == "batchable"
    cluster.stop_scheduler()
    ns = cluster.namespace(f"{shape}-{'with' if stanza else 'without'}-{index}")
    for i in range(pods):
        api.create(f"/api/v1/namespaces/{ns}/pods", pod(f"p{i}", batchable))
    watch = PodWatch(cluster, ns, pods)
    watch.start()
    cluster.restart_scheduler(stanza=stanza, batchable=batchable)
    if not watch.done.wait(600) or watch.error is not None:
        raise RuntimeError(f"{len(watch.bound)} of {pods} bound: {watch.error or 'timed out'}")
    times = sorted(watch.bound.values())
    metrics = cluster.metrics()
    drain = times[-1] - times[0]
    api.delete(f"/api/v1/namespaces/{ns}")
    wait_for(f"namespace {ns} emptied", lambda: not api.list(f"/api/v1/namespaces/{ns}/pods"), 300)
    return {
        "shape": shape,
        "stanza": stanza,
        "pods": pods,
        "drain_s": round(drain, 2),
        "pods_per_s": round((pods - 1) / drain, 1) if drain else None,
        "attempt_ms_per_pod": _mean_ms(metrics, ATTEMPT, {"result": "scheduled"}),
        "algorithm_ms_per_pod": _mean_ms(metrics, ALGORITHM, {}),
    }


def _mean_ms(text: str, name: str, labels: dict[str, str]) -> float | None:
    series = [h for key, h in read_histograms(text, name).items() if set(labels.items()) <= set(key)]
    count = sum(h.count for h in series)
    return round(1000 * sum(h.total for h in series) / count, 3) if count else None


HEADERS = ["pods", "n", "pods/s with stanza", "without", "throughput ratio", "algorithm ms with", "without", "ratio"]


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """`rounds` rounds per configuration and shape on one in-scheduler control plane; the kind's
    result: `figures`, `arms`, `detail` (stanza_cost's JSON: every round and the summary)."""
    params, nodes = workload.workload, workload.cluster.nodes
    rows: list[dict[str, Any]] = []
    with StanzaCluster(mode="in-scheduler") as cluster:
        cluster.qps = params.qps
        cluster.add_nodes([NodeSpec(f"n{i}", f"zone-{'abc'[i % 3]}") for i in range(nodes)])
        for shape in params.shapes:
            pods = params.pods if shape == "default" else nodes
            for index in range(rounds):
                for stanza in (True, False):
                    row = run_round(cluster, shape, stanza, index, pods)
                    log(str(row))
                    rows.append(row)
    summary = summarise(rows, params.shapes)
    return {
        "figures": figures(summary),
        "arms": {"extender": {"available": True, "mode": "the stanza in the default kube-scheduler (in-scheduler)"}},
        "detail": {"nodes": nodes, "rounds": rows, "summary": summary},
    }


def summarise(rows: list[dict[str, Any]], shapes: list[str]) -> list[list[Any]]:
    summary = []
    for shape in shapes:
        with_ = [r for r in rows if r["shape"] == shape and r["stanza"]]
        without = [r for r in rows if r["shape"] == shape and not r["stanza"]]
        rate_with = statistics.median(r["pods_per_s"] for r in with_)
        rate_without = statistics.median(r["pods_per_s"] for r in without)
        algo_with = statistics.median(r["algorithm_ms_per_pod"] for r in with_)
        algo_without = statistics.median(r["algorithm_ms_per_pod"] for r in without)
        summary.append(
            [
                shape,
                with_[0]["pods"],
                rate_with,
                rate_without,
                round(rate_with / rate_without, 3),
                algo_with,
                algo_without,
                round(algo_with / algo_without, 2),
            ]
        )
    return summary


def figures(summary: list[list[Any]]) -> dict[str, float]:
    """Per shape: `SHAPE.pods_per_second.with` / `.without`, `SHAPE.throughput_ratio` (with / without),
    `SHAPE.algorithm_ms.with` / `.without`, `SHAPE.algorithm_ratio` (medians of rounds)."""
    out: dict[str, float] = {}
    for shape, _, rate_with, rate_without, ratio, algo_with, algo_without, algo_ratio in summary:
        out |= {
            f"{shape}.pods_per_second.with": rate_with,
            f"{shape}.pods_per_second.without": rate_without,
            f"{shape}.throughput_ratio": ratio,
            f"{shape}.algorithm_ms.with": algo_with,
            f"{shape}.algorithm_ms.without": algo_without,
            f"{shape}.algorithm_ratio": algo_ratio,
        }
    return out


def report(result: dict[str, Any]) -> str:
    return table(HEADERS, result["detail"]["summary"])

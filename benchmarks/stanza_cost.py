"""What the in-scheduler stanza costs the pods that never opted in: the cluster's kube-scheduler with
the shipped config/in-scheduler/scheduler-config.yaml against the same file without its
`extenders` stanza, same binaries, one control plane, one run (issue 43).

500 kwok nodes. Each round stops the default kube-scheduler, creates the pods (no opt-in, so the
extender is never called for them), restarts kube-scheduler with one of the two configurations,
and times the drain: from the first pod bound to the last (read from the API server), and the
scheduler's own `scheduler_scheduling_attempt_duration_seconds` per scheduled pod (the algorithm's
histogram too, where the pod was not batched). The configurations
alternate (with, without, with, ...), `--rounds` each. Two pod shapes:

- default:   1,000 pods of a Deployment-like template (kube-scheduler's default spread
             constraints apply, so no pod is batchable);
- batchable: the profile's PodTopologySpread `defaultingType: List` with no default constraints,
             500 pods each taking most of a node (one per node): pods opportunistic batching
             (1.35+) can schedule from one signature. Any extender turns batching off in every
             profile ("Disabling signatures for profile because it has extenders configured"),
             so this shape shows what the stanza costs where batching would have applied.

kube-scheduler keeps its default client limits (50 QPS, burst 100), as deployed: the Binding
calls then bound the drain rate, and the algorithm time says what the CPU pays. `--qps 500`
lifts that limit, so the drain shows the CPU's share.

    python -m benchmarks.stanza_cost                  # both shapes, 3 rounds each way; ~10 min
    python -m benchmarks.stanza_cost --shapes default --rounds 1 --nodes 60 --pods 100
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
import urllib3  # noqa: E402
import yaml  # noqa: E402

from benchmarks.cluster import PodWatch  # noqa: E402
from benchmarks.common import machine, read_histograms, table, write_result  # noqa: E402
from extender.devcluster.api import wait_for  # noqa: E402
from extender.devcluster.cluster import IN_SCHEDULER_CONFIG, LocalCluster, NodeSpec  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=1000, help="pods per default-shape round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per configuration and shape")
    parser.add_argument("--shapes", default="default,batchable")
    parser.add_argument(
        "--qps", type=float, help="kube-scheduler's client qps (burst twice it); default: its own 50/100, as deployed"
    )
    args = parser.parse_args(argv)
    info = machine()
    print(f"machine: {info['cpu_model']}, {info['nproc']} CPUs; code {info['code']}")
    rows: list[dict[str, Any]] = []
    with StanzaCluster(mode="in-scheduler") as cluster:
        cluster.qps = args.qps
        cluster.add_nodes([NodeSpec(f"n{i}", f"zone-{'abc'[i % 3]}") for i in range(args.nodes)])
        for shape in args.shapes.split(","):
            pods = args.pods if shape == "default" else args.nodes
            for index in range(args.rounds):
                for stanza in (True, False):
                    row = run_round(cluster, shape, stanza, index, pods)
                    print(row, flush=True)
                    rows.append(row)
    summary = []
    for shape in args.shapes.split(","):
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
    print()
    headers = [
        "pods",
        "n",
        "pods/s with stanza",
        "without",
        "throughput ratio",
        "algorithm ms with",
        "without",
        "ratio",
    ]
    print(table(headers, summary))
    path = write_result("stanza_cost", {"machine": info, "args": vars(args), "rounds": rows, "summary": summary})
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The extender's binds on a contended API server, with and without deploy/'s FlowSchema.

API Priority and Fairness queues any ServiceAccount's requests in `workload-low`, the default
scheduler's in `workload-high`; deploy/base/flowschema.yaml moves the extender's identities to the
default scheduler's level. This measures what that buys when `workload-low` is full.

One LocalCluster (e2e_throughput's BenchCluster) with Priority and Fairness on and the API server's
concurrency cut to --inflight / --mutating-inflight seats, so that a few noisy tenants fill a
level without burning the machine's CPU: --tenants ServiceAccounts of their own (each its own
flow) each keep --threads ConfigMap creates in flight in namespace `noisy`, and a validating
webhook (served here, on loopback) answers each after --webhook-delay seconds, so each create
holds its seat that long while the CPU idles. This is how a slow admission webhook, or a busy
operator, loads a real API server.

Rounds (e2e_throughput's run_round: --sets StatefulSets x --replicas through our scheduler, caps
hostname 1 and zone spread; time from the first create until a watch has seen every pod bound):
one quiet round first (no noise, FlowSchema on), then noisy rounds alternating with and without
the FlowSchema, --rounds of each. Each reports pods/s, the extender's bind wall time and the API
server's own time for the Binding POSTs (queueing in Priority and Fairness included), the noisy
tenants' completed creates (so the level was full) and the API server's rejections (429).

    python -m benchmarks.api_priority                  # ~5 min
    python -m benchmarks.api_priority --rounds 1 --sets 2 --replicas 30 --nodes 45
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
import yaml  # noqa: E402

from benchmarks.cluster import BenchCluster, add_zoned_nodes, run_round  # noqa: E402
from benchmarks.common import machine, table, write_result  # noqa: E402
from extender.devcluster.api import Api, ApiError, wait_for  # noqa: E402
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE  # noqa: E402
from extender.devcluster.processes import free_port  # noqa: E402

FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
FLOWSCHEMA = yaml.safe_load((REPO / "deploy" / "base" / "flowschema.yaml").read_text())
NOISY = "noisy"
ZONES = ("zone-a", "zone-b", "zone-c")


class SlowWebhook:
    """A validating admission webhook on loopback (TLS with the control plane's serving pair) that
    allows every request after `delay` seconds: each call holds the caller's API server seat."""

    def __init__(self, cluster: BenchCluster, delay: float) -> None:
        self.cluster, self.delay, self.port = cluster, delay, free_port()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                time.sleep(outer.delay)
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": review["request"]["uid"], "allowed": True},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(cluster.pki.serving_cert), str(cluster.pki.serving_key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def register(self) -> None:
        ca = base64.b64encode(self.cluster.pki.ca_cert.read_bytes()).decode()
        self.cluster.admin.create(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "bench-slow-webhook"},
                "webhooks": [
                    {
                        "name": "slow.bench.placement.extender.dev",
                        "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate", "caBundle": ca},
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["configmaps"],
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {"bench": NOISY}},
                        "failurePolicy": "Ignore",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 10,
                    }
                ],
            },
        )

    def close(self) -> None:
        self.server.shutdown()


class NoisyTenants:
    """`tenants` ServiceAccounts, each with `threads` ConfigMap creates in flight, forever, until
    stopped; counts what completed and what the API server turned away (429)."""

    def __init__(self, cluster: BenchCluster, tenants: int, threads: int) -> None:
        self.cluster, self.tenants, self.threads = cluster, tenants, threads
        self.running = threading.Event()
        self.completed = 0
        self.rejected = 0
        self.failed = 0
        self.first_failure: str | None = None
        self._lock = threading.Lock()
        api = cluster.admin
        api.ensure(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NOISY, "labels": {"bench": NOISY}}},
        )
        api.ensure(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NOISY}/roles",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "noise"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}],
            },
        )
        self.tokens = []
        for t in range(tenants):
            name = f"tenant-{t}"
            api.ensure(
                f"/api/v1/namespaces/{NOISY}/serviceaccounts",
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
            )
            api.ensure(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NOISY}/rolebindings",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "noise"},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NOISY}],
                },
            )
            review = api.create(
                f"/api/v1/namespaces/{NOISY}/serviceaccounts/{name}/token",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
            )
            self.tokens.append(review["status"]["token"])
        self.workers = [
            threading.Thread(target=self._loop, args=(token,), daemon=True)
            for token in self.tokens
            for _ in range(threads)
        ]
        for worker in self.workers:
            worker.start()

    def _loop(self, token: str) -> None:
        api = Api(self.cluster.server, str(self.cluster.pki.ca_cert), token=token)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "noise-"}, "data": {"k": "v"}}
        while True:
            self.running.wait()
            try:
                api.create(f"/api/v1/namespaces/{NOISY}/configmaps", body)
                outcome = "completed"
            except ApiError as err:
                outcome = "rejected" if err.status == 429 else "failed"
                failure = str(err)
            except requests.RequestException as err:
                outcome, failure = "failed", str(err)
            with self._lock:
                setattr(self, outcome, getattr(self, outcome) + 1)
                if outcome == "failed" and self.first_failure is None:
                    self.first_failure = failure[:300]
            if outcome == "failed":
                time.sleep(1.0)  # a tenant that errors backs off instead of spinning the CPU

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"completed": self.completed, "rejected": self.rejected, "failed": self.failed}


def set_flowschema(cluster: BenchCluster, present: bool) -> None:
    """Create or delete deploy/'s FlowSchema, then wait until the API server classifies a request
    of the pod's identity accordingly (its configuration controller applies changes in seconds)."""
    api = cluster.admin
    name = FLOWSCHEMA["metadata"]["name"]
    if present:
        api.ensure(f"{FLOWCONTROL}/flowschemas", FLOWSCHEMA)
    else:
        api.delete(f"{FLOWCONTROL}/flowschemas/{name}")
    review = api.create(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/serviceaccounts/placement-scheduler/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    probe = Api(cluster.server, str(cluster.pki.ca_cert), token=review["status"]["token"])

    def classified_as_wanted() -> bool:
        uid = probe.session.get(f"{cluster.server}/api", timeout=30).headers.get("X-Kubernetes-PF-FlowSchema-UID")
        ours = [f for f in api.list(f"{FLOWCONTROL}/flowschemas") if f["metadata"]["name"] == name]
        return (bool(ours) and ours[0]["metadata"]["uid"] == uid) == present

    wait_for(f"FlowSchema {name} {'applied' if present else 'gone'}", classified_as_wanted, 60, interval=0.5)


def rejected_total(cluster: BenchCluster) -> float:
    """apiserver_flowcontrol_rejected_requests_total, every level."""
    text = cluster.admin.session.get(f"{cluster.server}/metrics", timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_flowcontrol_rejected_requests_total{")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=60, help="kwok nodes, dealt over 3 zones")
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2, help="noisy rounds with, and as many without")
    parser.add_argument("--tenants", type=int, default=8, help="noisy ServiceAccounts (flows)")
    parser.add_argument("--threads", type=int, default=8, help="creates each tenant keeps in flight")
    parser.add_argument("--webhook-delay", type=float, default=1.0, help="seconds the webhook holds each create")
    parser.add_argument("--inflight", type=int, default=40, help="kube-apiserver --max-requests-inflight")
    parser.add_argument("--mutating-inflight", type=int, default=20, help="--max-mutating-requests-inflight")
    parser.add_argument("--timeout", type=float, default=240)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    info = machine()
    print(
        f"machine: {info['nproc']} cpu ({info['cpu_model']}), Python {info['python']}, load {info['loadavg_at_start']}"
    )
    apiserver_args = [
        "--enable-priority-and-fairness=true",
        f"--max-requests-inflight={args.inflight}",
        f"--max-mutating-requests-inflight={args.mutating_inflight}",
    ]
    layout = {z: args.nodes // 3 + (1 if i < args.nodes % 3 else 0) for i, z in enumerate(ZONES)}
    rounds: list[dict[str, Any]] = []
    started = time.monotonic()
    with BenchCluster(kcm_qps=500, scheduler_qps=500, scheduler_burst=1000, apiserver_args=apiserver_args) as cluster:
        zone_of = add_zoned_nodes(cluster, layout, args.nodes)
        webhook = SlowWebhook(cluster, args.webhook_delay)
        webhook.register()
        noise = NoisyTenants(cluster, args.tenants, args.threads)
        plan = [("quiet", True)] + [(c, c == "with") for _ in range(args.rounds) for c in ("with", "without")]
        try:
            for index, (condition, present) in enumerate(plan):
                set_flowschema(cluster, present)
                if condition == "quiet":
                    noise.running.clear()
                else:
                    noise.running.set()
                    time.sleep(10)  # the level fills, and its seat borrowing settles (every 10 s)
                before, rejected_before, t0 = noise.counts(), rejected_total(cluster), time.monotonic()
                result = run_round(
                    cluster, "extender", index, args.sets, args.replicas, zone_of, args.timeout, log=print
                )
                after, seconds = noise.counts(), time.monotonic() - t0
                result["condition"] = condition
                result["flowschema"] = present
                result["noise_per_second"] = {k: round((after[k] - before[k]) / seconds, 1) for k in after}
                result["apiserver_rejections"] = int(rejected_total(cluster) - rejected_before)
                if noise.first_failure:
                    print(f"          a noisy create failed: {noise.first_failure}")
                print(
                    f"          [{condition}] noise {result['noise_per_second']} per s, API server rejections (429) "
                    f"{result['apiserver_rejections']}"
                )
                rounds.append(result)
        finally:
            noise.running.clear()
            webhook.close()

    rows = []
    for condition in ("quiet", "with", "without"):
        mine = [r for r in rounds if r["condition"] == condition and r["complete"]]
        if not mine:
            continue

        def med(get: Any, rs: list[dict[str, Any]] = mine) -> float:
            return round(statistics.median(get(r) for r in rs), 1)

        rows.append(
            [
                {"quiet": "no noise, FlowSchema", "with": "noise, FlowSchema", "without": "noise, no FlowSchema"}[
                    condition
                ],
                len(mine),
                med(lambda r: r["pods_per_second"]),
                med(lambda r: r["bind_ms"].get("extender", {}).get("mean", float("nan"))),
                med(lambda r: r["bind_ms"].get("kube-apiserver", {}).get("mean", float("nan"))),
                med(lambda r: r["noise_per_second"]["completed"]),
                med(lambda r: r["apiserver_rejections"]),
            ]
        )
    print()
    print(
        f"Our scheduler's pods on a contended API server ({args.tenants} tenants x {args.threads} creates in flight, "
        f"webhook {args.webhook_delay:g} s, seats {args.inflight}+{args.mutating_inflight}); medians over rounds:"
    )
    print(
        table(
            [
                "condition",
                "rounds",
                "pods/s",
                "extender bind mean ms",
                "API server's own, Binding ms",
                "noise creates/s",
                "429s",
            ],
            rows,
        )
    )
    path = write_result(
        "api_priority",
        {
            "benchmark": "api_priority",
            "machine": info,
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "rounds": rounds,
            "summary": rows,
            "total_seconds": round(time.monotonic() - started, 1),
        },
        args.out,
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

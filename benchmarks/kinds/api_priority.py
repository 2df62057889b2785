"""Kind `api_priority`: the extender's binds on a contended API server, with and without deploy/'s FlowSchema.

(Moved from benchmarks/api_priority.py; its settings are benchmarks/workloads/api-priority.yaml.)

API Priority and Fairness queues any ServiceAccount's requests in `workload-low`, the default
scheduler's in `workload-high`; deploy/base/flowschema.yaml moves the extender's identities to the
default scheduler's level. This measures what that buys when `workload-low` is full.

One LocalCluster (benchmarks/cluster.py's BenchCluster) with Priority and Fairness on and the API
server's concurrency cut to `workload.inflight` / `workload.mutating_inflight` seats, so that a few
noisy tenants fill a level without burning the machine's CPU: `workload.tenants` ServiceAccounts of
their own (each its own flow) each keep `workload.threads` ConfigMap creates in flight in namespace
`noisy`, and a validating webhook (served here, on loopback) answers each after
`workload.webhook_delay_s` seconds, so each create
holds its seat that long while the CPU idles. This is how a slow admission webhook, or a busy
operator, loads a real API server.

Rounds (benchmarks/cluster.py's run_round: `sets` StatefulSets x `replicas` through our scheduler, caps
hostname 1 and zone spread; time from the first create until a watch has seen every pod bound):
one quiet round first (no noise, FlowSchema on), then noisy rounds alternating with and without
the FlowSchema, `rounds` of each. Each reports pods/s, the extender's bind wall time and the API
server's own time for the Binding POSTs (queueing in Priority and Fairness included), the noisy
tenants' completed creates (so the level was full) and the API server's rejections (429).

Figures: `CONDITION.pods_per_second`, `.extender_bind_mean_ms`, `.apiserver_binding_mean_ms`,
`.noise_creates_per_second`, `.rejections_429` for the conditions quiet, with and without (medians
of rounds), and `with_over_without.pods_per_second`. No target: BENCHMARKS.md states none for it.

    python -m benchmarks run api-priority                  # ~5 min
    python -m benchmarks run api-priority --rounds 1 --set cluster.nodes=45 --set workload.replicas=30
    python -m benchmarks run api-priority --smoke          # 30 nodes, 2 sets x 10, one round each way
"""

from __future__ import annotations

import base64
import json
import ssl
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests
import yaml

from benchmarks.cluster import BenchCluster, add_zoned_nodes, run_round, zone_layout
from benchmarks.common import table
from extender.devcluster.api import Api, ApiError, wait_for
from extender.devcluster.cluster import REPO, SYSTEM_NAMESPACE
from extender.devcluster.processes import free_port

FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
FLOWSCHEMA = yaml.safe_load((REPO / "deploy" / "base" / "flowschema.yaml").read_text())
NOISY = "noisy"


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


CONDITIONS = {"quiet": "no noise, FlowSchema", "with": "noise, FlowSchema", "without": "noise, no FlowSchema"}


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """A quiet round, then `rounds` noisy rounds with the FlowSchema and as many without,
    alternating, on one control plane; the kind's result: `figures`, `arms`, `detail`."""
    params, nodes = workload.workload, workload.cluster.nodes
    apiserver_args = [
        "--enable-priority-and-fairness=true",
        f"--max-requests-inflight={params.inflight}",
        f"--max-mutating-requests-inflight={params.mutating_inflight}",
    ]
    layout = zone_layout(nodes)
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    with BenchCluster(
        kcm_qps=workload.cluster.kcm_qps, scheduler_qps=500, scheduler_burst=1000, apiserver_args=apiserver_args
    ) as cluster:
        zone_of = add_zoned_nodes(cluster, layout, nodes)
        webhook = SlowWebhook(cluster, params.webhook_delay_s)
        webhook.register()
        noise = NoisyTenants(cluster, params.tenants, params.threads)
        plan = [("quiet", True)] + [(c, c == "with") for _ in range(rounds) for c in ("with", "without")]
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
                    cluster, "extender", index, params.sets, params.replicas, zone_of, params.timeout_s, log=log
                )
                after, seconds = noise.counts(), time.monotonic() - t0
                result["condition"] = condition
                result["flowschema"] = present
                result["noise_per_second"] = {k: round((after[k] - before[k]) / seconds, 1) for k in after}
                result["apiserver_rejections"] = int(rejected_total(cluster) - rejected_before)
                if noise.first_failure:
                    log(f"          a noisy create failed: {noise.first_failure}")
                log(
                    f"          [{condition}] noise {result['noise_per_second']} per s, API server rejections (429) "
                    f"{result['apiserver_rejections']}"
                )
                results.append(result)
        finally:
            noise.running.clear()
            webhook.close()
    rows = summary_rows(results)
    return {
        "figures": figures(rows),
        "arms": {"extender": {"available": True, "mode": "our kube-scheduler + the extender as deployed"}},
        "detail": {
            "nodes": nodes,
            "params": workload.workload.model_dump(mode="json"),
            "rounds": results,
            "summary": rows,
            "total_seconds": round(time.monotonic() - started, 1),
        },
    }


def summary_rows(rounds: list[dict[str, Any]]) -> list[list[Any]]:
    """Per condition, medians over its complete rounds: rounds, pods/s, extender bind mean ms, the
    API server's own Binding ms, noise creates/s, 429s."""
    rows = []
    for condition in ("quiet", "with", "without"):
        mine = [r for r in rounds if r["condition"] == condition and r["complete"]]
        if not mine:
            continue

        def med(get: Any, rs: list[dict[str, Any]] = mine) -> float:
            return round(statistics.median(get(r) for r in rs), 1)

        rows.append(
            [
                CONDITIONS[condition],
                len(mine),
                med(lambda r: r["pods_per_second"]),
                med(lambda r: r["bind_ms"].get("extender", {}).get("mean", float("nan"))),
                med(lambda r: r["bind_ms"].get("kube-apiserver", {}).get("mean", float("nan"))),
                med(lambda r: r["noise_per_second"]["completed"]),
                med(lambda r: r["apiserver_rejections"]),
            ]
        )
    return rows


FIGURE_COLUMNS = (
    "pods_per_second",
    "extender_bind_mean_ms",
    "apiserver_binding_mean_ms",
    "noise_creates_per_second",
    "rejections_429",
)


def figures(rows: list[list[Any]]) -> dict[str, float]:
    """`CONDITION.NAME` (quiet, with, without; NAME one of FIGURE_COLUMNS), and
    `with_over_without.pods_per_second`: the FlowSchema's gain under noise, medians of rounds."""
    by_label = {label: key for key, label in CONDITIONS.items()}
    out: dict[str, float] = {}
    for row in rows:
        condition = by_label[row[0]]
        for name, value in zip(FIGURE_COLUMNS, row[2:], strict=True):
            if value == value:  # not NaN (no bind of that binder timed)
                out[f"{condition}.{name}"] = value
    if out.get("without.pods_per_second"):
        out["with_over_without.pods_per_second"] = round(
            out.get("with.pods_per_second", 0.0) / out["without.pods_per_second"], 2
        )
    return out


def report(result: dict[str, Any]) -> str:
    p = result["detail"]["params"]
    return (
        f"Our scheduler's pods on a contended API server ({p['tenants']} tenants x {p['threads']} creates in "
        f"flight, webhook {p['webhook_delay_s']:g} s, seats {p['inflight']}+{p['mutating_inflight']}); medians "
        "over rounds:\n"
        + table(
            [
                "condition",
                "rounds",
                "pods/s",
                "extender bind mean ms",
                "API server's own, Binding ms",
                "noise creates/s",
                "429s",
            ],
            result["detail"]["summary"],
        )
    )

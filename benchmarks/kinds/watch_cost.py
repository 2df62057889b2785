"""Kind `watch_cost`: what the extender's list+watch costs the API server (and the extender), and
which request parameters lower it: measured on the real local control plane, every variant
against the current requests in the same run.

(Moved from benchmarks/watch_cost.py; its settings are benchmarks/workloads/watch-cost.yaml.)

One control plane (extender/devcluster: etcd, kube-apiserver, kube-controller-manager, both
kube-schedulers, kwok; the extender itself is not started: its watcher runs in this process),
`cluster.nodes` kwok nodes and `cluster.pods` pods bound to them directly (spec.nodeName; kwok marks them
Running), ~3.5 KB each as the API server returns them (managedFields, status, env, a claim).

1. Lists of every pod (what the watcher's `_list` does at start and on every relist), each
   variant `workload.reps` times per block, blocks interleaved over `rounds` rounds in a shuffled
   order. Per list: kube-apiserver and etcd CPU (utime+stime from /proc, children included,
   minus the idle rate measured in the same run) and this thread's CPU (`time.thread_time`:
   requests, TLS, gzip, JSON decoding; not the parsing into records, which no variant changes).
   Variants: the page size (500 = the shipped one, 2,000, 5,000, no limit), resourceVersion
   "0" with resourceVersionMatch=NotOlderThan (the watch cache, any age), compression
   (requests asks for gzip by default; `identity` asks for none), stdlib json vs orjson, and
   the streaming list (watch with sendInitialEvents=true, WatchList).
2. Watch events under load (unless `workload.watch: false`): every pod is patched (a label) by
   `workload.writers` threads, once with
   no watcher of ours (the floor) and once with two pod watchers (the shipped decoder, and the
   new one), each timing its own thread; the raw chunks the API server sent are recorded and
   replayed through both decoders (`_lines` + json vs orjson) for a precise per-event figure.

Figures: `list.VARIANT.apiserver_ms` (and `.etcd_ms`, `.client_ms`, `.apiserver_vs_shipped`,
`.client_vs_shipped`) per list variant, `watch.apiserver_ms_per_watcher_per_1000_events`;
`detail` is the script's JSON (lists, watch phases, replays).

    python -m benchmarks run watch-cost                  # 50 nodes, 5,000 pods; ~4 min
    python -m benchmarks run watch-cost --set cluster.pods=500 --rounds 2 --set workload.reps=2
    python -m benchmarks run watch-cost --smoke          # 30 nodes, 200 pods, 1 round of 1 rep
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from benchmarks.cluster import BenchCluster
from benchmarks.common import REPO, table, tree_cpu
from extender.devcluster.api import Api, wait_for
from extender.devcluster.cluster import zoned_nodes
from extender.kube.client import KubeHttp, connect
from extender.state import watcher as watcher_module

NAMESPACE = "watch-cost"
PODS = "/api/v1/pods"


# ------------------------------------------------------------------------------ the workload
def pod_manifest(i: int, node: str) -> dict[str, Any]:
    name = f"db-{i // 100}-{i % 100}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": f"db-{i // 100}", "tier": "data", "statefulset.kubernetes.io/pod-name": name},
            "annotations": {"example.com/owner": "team-storage", "example.com/build": f"{i:08x}"},
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/db:1.2.3",
                    "args": ["--port=6379", "--cluster-enabled=yes", "--appendonly=yes"],
                    "env": [{"name": f"SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(6)],
                    "ports": [{"containerPort": 6379, "name": "client"}, {"containerPort": 16379, "name": "gossip"}],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}],
        },
    }


def _thread_api(cluster: BenchCluster, local: threading.local) -> Api:
    if not hasattr(local, "api"):
        admin = cluster.admin
        assert admin is not None
        local.api = Api(cluster.server, str(admin.session.verify), *admin.session.cert)  # type: ignore[misc]
    return local.api


def create_pods(cluster: BenchCluster, nodes: list[str], count: int, writers: int) -> float:
    local = threading.local()
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    t0 = time.monotonic()
    with ThreadPoolExecutor(writers) as pool:
        list(
            pool.map(
                lambda i: _thread_api(cluster, local).create(path, pod_manifest(i, nodes[i % len(nodes)])), range(count)
            )
        )
    return time.monotonic() - t0


def patch_pods(cluster: BenchCluster, count: int, writers: int, mark: str) -> float:
    local = threading.local()
    t0 = time.monotonic()

    def patch(i: int) -> None:
        name = f"db-{i // 100}-{i % 100}"
        _thread_api(cluster, local).merge_patch(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{name}", {"metadata": {"labels": {"bench-mark": mark}}}
        )

    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(patch, range(count)))
    return time.monotonic() - t0


# ------------------------------------------------------------------------------ CPU meters
class Meter:
    def __init__(self, cluster: BenchCluster) -> None:
        self.pids = {p.name: p.popen.pid for p in cluster.processes if p.popen is not None}

    def server(self) -> tuple[float, float]:
        return tree_cpu(self.pids["kube-apiserver"]), tree_cpu(self.pids["etcd"])


def idle_rate(meter: Meter, seconds: float) -> tuple[float, float]:
    a0, e0 = meter.server()
    time.sleep(seconds)
    a1, e1 = meter.server()
    return (a1 - a0) / seconds, (e1 - e0) / seconds


# ------------------------------------------------------------------------------ list variants
def _request(api: KubeHttp, query: list[tuple[str, str]], *, identity: bool, stream: bool = False):
    headers = api._headers()
    if identity:
        headers["Accept-Encoding"] = "identity"
    response = api.session.request(
        "GET", api.cfg.host.rstrip("/") + PODS, params=query, headers=headers, timeout=(10, 120), stream=stream
    )
    response.raise_for_status()
    return response


def paged_list(limit: int | None, *, rv0: bool = False, identity: bool = False, fast_json: bool = False):
    def run(api: KubeHttp) -> dict[str, Any]:
        token, items, pages = "", 0, 0
        while True:
            query: list[tuple[str, str]] = []
            if limit:
                query.append(("limit", str(limit)))
            if rv0 and not token:
                query += [("resourceVersion", "0"), ("resourceVersionMatch", "NotOlderThan")]
            if token:
                query.append(("continue", token))
            response = _request(api, query, identity=identity)
            page = orjson.loads(response.content) if fast_json else response.json()
            response.close()
            pages += 1
            items += len(page.get("items") or ())
            token = (page.get("metadata") or {}).get("continue") or ""
            del page
            if not token:
                return {"items": items, "pages": pages, "encoding": response.headers.get("Content-Encoding", "none")}

    return run


def watch_list(*, fast_json: bool = True):
    """The streaming list: a watch with sendInitialEvents=true, read up to the bookmark that
    ends the initial events, then closed."""

    def run(api: KubeHttp) -> dict[str, Any]:
        query = [
            ("watch", "1"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "120"),
        ]
        response = _request(api, query, identity=False, stream=True)
        items = 0
        done = False
        try:
            for event in watcher_module._lines(response) if fast_json else _old_lines(response):
                if event.get("type") == "BOOKMARK":
                    annotations = (event.get("object") or {}).get("metadata", {}).get("annotations") or {}
                    if annotations.get("k8s.io/initial-events-end") == "true":
                        done = True
                        break
                elif event.get("type") == "ADDED":
                    items += 1
                elif event.get("type") == "ERROR":
                    raise RuntimeError(f"watch-list error: {event.get('object')}")
        finally:
            response.close()
        if not done:
            raise RuntimeError("watch-list ended without the initial-events-end bookmark")
        return {"items": items, "pages": 1, "encoding": "stream"}

    return run


def _old_lines(response: Any) -> Iterator[dict[str, Any]]:
    """The watcher's `_lines` as shipped before this benchmark (the baseline): bytes += chunk,
    one split per line, stdlib json."""
    buffer = b""
    for chunk in response.iter_content(chunk_size=None):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)


LIST_VARIANTS: dict[str, Callable[[KubeHttp], dict[str, Any]]] = {
    "shipped: limit 500, consistent, gzip, json": paged_list(500),
    "limit 500, orjson": paged_list(500, fast_json=True),
    "limit 2000, orjson": paged_list(2000, fast_json=True),
    "limit 5000, orjson": paged_list(5000, fast_json=True),
    "no limit, orjson": paged_list(None, fast_json=True),
    "limit 500, rv=0 NotOlderThan, orjson": paged_list(500, rv0=True, fast_json=True),
    "limit 500, identity, orjson": paged_list(500, identity=True, fast_json=True),
    "watch-list (sendInitialEvents), orjson": watch_list(),
}
BASELINE = "shipped: limit 500, consistent, gzip, json"


def measure_lists(api: KubeHttp, meter: Meter, rounds: int, reps: int, idle_s: float) -> dict[str, Any]:
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in LIST_VARIANTS}
    shape: dict[str, dict[str, Any]] = {}
    idle: list[tuple[float, float]] = []
    rng = random.Random(7)
    for name, run in LIST_VARIANTS.items():  # warm: connections, caches; and the shape of each
        shape[name] = run(api)
    for rnd in range(rounds):
        idle.append(idle_rate(meter, idle_s))
        order = list(LIST_VARIANTS)
        rng.shuffle(order)
        for name in order:
            run = LIST_VARIANTS[name]
            a0, e0 = meter.server()
            c0, w0 = time.thread_time(), time.monotonic()
            for _ in range(reps):
                run(api)
            c1, w1 = time.thread_time(), time.monotonic()
            a1, e1 = meter.server()
            samples[name].append({"apiserver": a1 - a0, "etcd": e1 - e0, "client": c1 - c0, "wall": w1 - w0})
        print(f"  list round {rnd + 1}/{rounds} done", flush=True)
    rate_a = statistics.median(r[0] for r in idle)
    rate_e = statistics.median(r[1] for r in idle)
    out: dict[str, Any] = {"idle_cpu_per_s": {"apiserver": round(rate_a, 4), "etcd": round(rate_e, 4)}}
    per: dict[str, Any] = {}
    for name, blocks in samples.items():

        def per_list(key: str, rate: float = 0.0, blocks=blocks) -> float:
            return statistics.median((b[key] - rate * b["wall"]) / reps for b in blocks) * 1000

        per[name] = {
            **shape[name],
            "apiserver_ms": round(per_list("apiserver", rate_a), 1),
            "etcd_ms": round(per_list("etcd", rate_e), 1),
            "client_ms": round(per_list("client"), 1),
            "wall_ms": round(per_list("wall"), 1),
            "blocks": [{k: round(v, 3) for k, v in b.items()} for b in blocks],
        }
    base = per[BASELINE]
    for v in per.values():
        v["apiserver_vs_shipped"] = round(v["apiserver_ms"] / base["apiserver_ms"], 2) if base["apiserver_ms"] else None
        v["client_vs_shipped"] = round(v["client_ms"] / base["client_ms"], 2) if base["client_ms"] else None
    out["variants"] = per
    out["reps_per_block"] = reps
    out["rounds"] = rounds
    return out


# ------------------------------------------------------------------------------ watch under load
class TimedWatch(threading.Thread):
    """A pod watch (all namespaces, bookmarks on, as the watcher asks) decoding with one of the
    two decoders, timing its own thread; optionally recording the raw chunks."""

    def __init__(self, api: KubeHttp, version: str, decoder: str, mark: str, expected: int, record: bool) -> None:
        super().__init__(daemon=True, name=f"watch-{decoder}")
        self.api, self.version, self.decoder, self.mark, self.expected = api, version, decoder, mark, expected
        self.chunks: list[bytes] | None = [] if record else None
        self.events = 0
        self.marked = 0
        self.cpu = 0.0
        self.done = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        query = [
            ("watch", "1"),
            ("resourceVersion", self.version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "300"),
        ]
        response = self.api.call("GET", PODS, query=query, timeout=(10, 330), stream=True)
        chunks = self.chunks
        if chunks is not None:
            inner = response.iter_content

            def recording(chunk_size=None):
                for chunk in inner(chunk_size=chunk_size):
                    chunks.append(chunk)
                    yield chunk

            response.iter_content = recording  # type: ignore[method-assign]
        lines = watcher_module._lines if self.decoder == "new" else _old_lines
        c0 = time.thread_time()
        try:
            for event in lines(response):
                self.events += 1
                labels = ((event.get("object") or {}).get("metadata") or {}).get("labels") or {}
                if labels.get("bench-mark") == self.mark:
                    self.marked += 1
                    if self.marked >= self.expected:
                        break
        except Exception as err:  # noqa: BLE001
            self.error = err
        finally:
            self.cpu = time.thread_time() - c0
            response.close()
            self.done.set()


class _Replay:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def iter_content(self, chunk_size=None):
        return iter(self.chunks)


def replay(chunks: list[bytes], repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # The same bytes in large chunks too (a backlog read in bulk: 64 KiB at a time).
    body = b"".join(chunks)
    bulk = [body[i : i + 65536] for i in range(0, len(body), 65536)]
    for shape_name, data in (("as received", chunks), ("64 KiB chunks", bulk)):
        for name, lines in (("shipped (bytes +=, json)", _old_lines), ("new (_lines, orjson)", watcher_module._lines)):
            best = float("inf")
            events = 0
            for _ in range(repeat):
                t0 = time.perf_counter()
                events = sum(1 for _ in lines(_Replay(data)))
                best = min(best, time.perf_counter() - t0)
            out[f"{shape_name}: {name}"] = {"events": events, "us_per_event": round(best / max(events, 1) * 1e6, 2)}
    return out


def measure_watch(
    cluster: BenchCluster, api: KubeHttp, meter: Meter, pods: int, writers: int, idle_s: float
) -> dict[str, Any]:
    rate_a, rate_e = idle_rate(meter, idle_s)
    phases: dict[str, Any] = {}
    for phase, watchers in (("floor: no watcher of ours", ()), ("two pod watchers", ("shipped", "new"))):
        mark = f"m{int(time.time() * 1000) % 10**9}"
        version = api.call("GET", PODS, query=[("limit", "1")])["metadata"]["resourceVersion"]
        threads = [TimedWatch(api, version, d, mark, pods, record=(d == "shipped")) for d in watchers]
        for t in threads:
            t.start()
        time.sleep(0.5)
        a0, e0 = meter.server()
        w0 = time.monotonic()
        seconds = patch_pods(cluster, pods, writers, mark)
        for t in threads:
            t.done.wait(120)
        wall = time.monotonic() - w0
        a1, e1 = meter.server()
        phases[phase] = {
            "patch_seconds": round(seconds, 2),
            "apiserver_s": round(a1 - a0 - rate_a * wall, 2),
            "etcd_s": round(e1 - e0 - rate_e * wall, 2),
            "watchers": {
                t.decoder: {
                    "events": t.events,
                    "marked": t.marked,
                    "thread_cpu_s": round(t.cpu, 3),
                    "us_per_event": round(t.cpu / max(t.events, 1) * 1e6, 1),
                    "error": str(t.error) if t.error else None,
                }
                for t in threads
            },
        }
        recorded = next((t.chunks for t in threads if t.chunks is not None), None)
        if recorded:
            sizes = [len(c) for c in recorded]
            lines_per_chunk = [c.count(b"\n") for c in recorded]
            phases[phase]["chunks"] = {
                "count": len(sizes),
                "bytes_median": int(statistics.median(sizes)),
                "bytes_max": max(sizes),
                "events_per_chunk_max": max(lines_per_chunk),
                "bytes_total": sum(sizes),
            }
            phases[phase]["replay"] = replay(recorded, 5)
        time.sleep(1.0)
    floor = phases["floor: no watcher of ours"]["apiserver_s"]
    two = phases["two pod watchers"]["apiserver_s"]
    return {
        "phases": phases,
        "apiserver_ms_per_watcher_per_1000_events": round((two - floor) / 2 / pods * 1000 * 1000, 1),
    }


# ------------------------------------------------------------------------------ main
def render(result: dict[str, Any]) -> str:
    lists = result["lists"]["variants"]
    rows = [
        [
            name,
            v["pages"],
            v["encoding"],
            v["apiserver_ms"],
            f"{v['apiserver_vs_shipped']}x",
            v["etcd_ms"],
            v["client_ms"],
            f"{v['client_vs_shipped']}x",
            v["wall_ms"],
        ]
        for name, v in lists.items()
    ]
    lines = [
        f"List of {result['pods']} pods (+ the control plane's own), per list, medians of "
        f"{result['lists']['rounds']} blocks x {result['lists']['reps_per_block']} lists "
        f"(idle apiserver {result['lists']['idle_cpu_per_s']['apiserver']} cpu-s/s subtracted)",
        table(
            [
                "variant",
                "pages",
                "encoding",
                "apiserver ms",
                "vs shipped",
                "etcd ms",
                "client ms",
                "vs shipped",
                "wall ms",
            ],
            rows,
        ),
    ]
    watch = result.get("watch")
    if watch:
        lines += ["", f"Watch under load: every pod patched once ({result['pods']} MODIFIED events)"]
        wrows = []
        for phase, p in watch["phases"].items():
            for dec, w in p["watchers"].items() or {"-": {}}.items():
                wrows.append(
                    [phase, p["patch_seconds"], p["apiserver_s"], dec, w.get("events", "-"), w.get("us_per_event", "-")]
                )
        lines.append(table(["phase", "patch s", "apiserver cpu s", "watcher", "events", "watcher cpu us/event"], wrows))
        lines.append(f"apiserver per watcher: ~{watch['apiserver_ms_per_watcher_per_1000_events']} ms per 1,000 events")
        for p in watch["phases"].values():
            if "replay" in p:
                lines += ["", f"chunks as the API server sent them: {p['chunks']}"]
                lines.append(
                    table(
                        ["replay (best of 5)", "events", "us/event"],
                        [[k, v["events"], v["us_per_event"]] for k, v in p["replay"].items()],
                    )
                )
    return "\n".join(lines)


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """The lists (`rounds` blocks) and, unless `workload.watch: false`, the watch phases, on one
    control plane without the extender; the kind's result: `figures`, `arms`, `detail` (watch_cost's JSON)."""
    params, node_count, pod_count = workload.workload, workload.cluster.nodes, workload.cluster.pods
    with BenchCluster(extender=False) as cluster:
        assert cluster.admin is not None
        nodes = cluster.add_nodes(
            zoned_nodes(
                {
                    "zone-a": node_count // 3 + node_count % 3,
                    "zone-b": node_count // 3,
                    "zone-c": node_count // 3,
                }
            )
        )
        cluster.namespace(NAMESPACE)
        created = create_pods(cluster, nodes, pod_count, params.writers)
        log(f"created {pod_count} pods in {created:.1f}s")
        admin = cluster.admin
        wait_for(
            f"{pod_count} pods Running (kwok)",
            lambda: (
                sum(
                    1
                    for p in admin.list(f"/api/v1/namespaces/{NAMESPACE}/pods")
                    if (p.get("status") or {}).get("phase") == "Running"
                )
                >= pod_count
            ),
            300,
            2.0,
        )
        time.sleep(3)
        api = connect(str(cluster.kubeconfig))
        meter = Meter(cluster)
        sample = admin.get(f"/api/v1/namespaces/{NAMESPACE}/pods/db-0-0")
        result: dict[str, Any] = {
            "nodes": len(nodes),
            "pods": pod_count,
            "pod_json_bytes": len(json.dumps(sample, separators=(",", ":"))),
        }
        result["lists"] = measure_lists(api, meter, rounds, params.reps, params.idle_s)
        if params.watch:
            result["watch"] = measure_watch(cluster, api, meter, pod_count, params.writers, params.idle_s)
    return {
        "figures": figures(result),
        "arms": {"extender": {"available": True, "mode": "the watcher's requests, from this process (no extender)"}},
        "detail": result,
    }


def figures(result: dict[str, Any]) -> dict[str, float]:
    """`list.VARIANT.apiserver_ms` / `.etcd_ms` / `.client_ms` / `.apiserver_vs_shipped` /
    `.client_vs_shipped` per list variant, and `watch.apiserver_ms_per_watcher_per_1000_events`."""
    out: dict[str, float] = {}
    for name, v in result["lists"]["variants"].items():
        for key in ("apiserver_ms", "etcd_ms", "client_ms", "apiserver_vs_shipped", "client_vs_shipped"):
            if isinstance(v.get(key), (int, float)):
                out[f"list.{name}.{key}"] = v[key]
    watch = result.get("watch") or {}
    if isinstance(watch.get("apiserver_ms_per_watcher_per_1000_events"), (int, float)):
        out["watch.apiserver_ms_per_watcher_per_1000_events"] = watch["apiserver_ms_per_watcher_per_1000_events"]
    return out


def report(result: dict[str, Any]) -> str:
    return render(result["detail"])

"""Kind `profile_e2e`: where the extender's CPU and wall time go in the e2e kind's equal-qps round.

(Moved from benchmarks/profile_e2e.py; its settings are benchmarks/workloads/profile-e2e.yaml.)

Starts the same control plane as the e2e kind's equal-qps variant (benchmarks/cluster.py's
BenchCluster: kube-controller-manager at `cluster.kcm_qps`, both kube-schedulers at client
qps/burst `workload.qps` / `workload.burst`, 500/1000, 500 kwok nodes over 3 zones) and runs the
same rounds (its run_round: 10 StatefulSets x 100 replicas), with the extender started through
benchmarks/e2e_probe.py (timing probes in the worker, nothing under extender/ edited). Rounds, in
order (`rounds` times over):

1. native (skip with `workload.native: false`): the default scheduler, for the API server's
   Binding latency and the component CPU when no extender is involved;
2. extender, profiled: py-spy samples the gunicorn worker, by default only the thread holding
   the GIL (`workload.mode: gil`: a CPU attribution that stays right on a saturated machine,
   ~0.5 CPU-s a round). `mode: active` samples every thread the OS calls running, which also
   counts threads waiting on a run queue. With `workload.idle: true` a second py-spy records every
   thread's wall time (where the bind handlers block); that costs several CPU-seconds a round and
   slows the round;
3. one unprofiled extender round per `workload.switch_intervals` value (sys.setswitchinterval in
   the worker, set at run time): the effect of the profiler on throughput, and of GIL hand-off
   latency on bind.

For each round: pods/s and component CPU (from run_round), the worker's CPU per thread, py-spy's
samples sorted into activities (HTTP serving, filter engine, prioritize, bind client, watch
decoding, store upkeep, metrics, logging...), bind's wall time taken apart (store-lock wait,
the Binding call's wall / CPU / run-queue delay / time to response headers, new TLS connections),
lock waits per holder, garbage collections, GIL wake-up lateness, and the API server's own
latency per request kind (its apiserver_request_duration_seconds, via /metrics).

Needs py-spy in the venv (not a project dependency): `.venv/bin/pip install py-spy`. It attaches
with ptrace (`py-spy record --pid`): run as root or with CAP_SYS_PTRACE (ptrace_scope 0 or 1
with the same user does not suffice for a non-child). `--set workload.profiler=none` runs the
probes alone. On a shared machine wrap it: `flock /tmp/bench.lock .venv/bin/python -m benchmarks run profile-e2e`.

    python -m benchmarks run profile-e2e                 # ~2 min: native, profiled, 2 plain rounds
    python -m benchmarks run profile-e2e --set workload.native=false --set 'workload.switch_intervals=[]' \\
        --set workload.idle=true
    python -m benchmarks run profile-e2e --smoke         # 30 nodes, 2 sets x 10, no plain rounds
    python -m benchmarks.kinds.profile_e2e --analyse /tmp/x/py-spy/extender-1.pyspy.txt --rate 100   # no cluster
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import requests

from benchmarks.cluster import POLICY, BenchCluster, add_zoned_nodes, run_round, zone_layout
from benchmarks.common import REPO, percentile, table

PY_SPY = Path(sys.executable).with_name("py-spy")


# ---------------------------------------------------------------------------------- cluster
class ProfileCluster(BenchCluster):
    """BenchCluster whose extender runs as `python -m benchmarks.e2e_probe` (same arguments)."""

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        if name == "extender" and argv[1:3] == ["-m", "extender"]:
            argv = [argv[0], "-m", "benchmarks.e2e_probe", *argv[3:]]
        return super()._spawn(name, argv, env)


def probe(cluster: BenchCluster, path: str = "", body: dict[str, Any] | None = None) -> dict[str, Any]:
    url = f"http://127.0.0.1:{cluster.ports['extender']}/bench/probe{path}"
    if body is None and path == "":
        return requests.get(url, timeout=30).json()
    return requests.post(url, json=body or {}, timeout=30).json()


# ---------------------------------------------------------------------------------- metrics
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(session: requests.Session, url: str, prefixes: tuple[str, ...]) -> dict[tuple[str, str], float]:
    """{(metric name, label text): value} of the samples whose name starts with a prefix."""
    try:
        response = session.get(url, timeout=30)
        response.raise_for_status()
    except requests.RequestException:
        return {}
    out = {}
    for line in response.text.splitlines():
        if not line or line[0] == "#" or not line.startswith(prefixes):
            continue
        m = _SAMPLE.match(line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def labels(text: str) -> dict[str, str]:
    return dict(_LABEL.findall(text))


def metric_delta(before: dict, after: dict) -> dict[tuple[str, str], float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) != 0}


def histogram_quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """Prometheus-style quantile from cumulative (le, count) pairs, linear within a bucket."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_count) / max(count - prev_count, 1e-9)
        prev_le, prev_count = le, count
    return None


def apiserver_requests(delta: dict[tuple[str, str], float]) -> dict[str, dict[str, Any]]:
    """Per request kind (verb resource/subresource): calls, mean ms, p50/p90 from the buckets."""
    acc: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0.0, "sum": 0.0, "buckets": defaultdict(float)})
    for (name, text), value in delta.items():
        if not name.startswith("apiserver_request_duration_seconds"):
            continue
        lab = labels(text)
        resource = lab.get("resource", "")
        if lab.get("group"):
            resource = f"{lab['group']}/{resource}"
        if lab.get("subresource"):
            resource += "/" + lab["subresource"]
        key = f"{lab.get('verb', '?')} {resource}"
        if name.endswith("_count"):
            acc[key]["count"] += value
        elif name.endswith("_sum"):
            acc[key]["sum"] += value
        elif name.endswith("_bucket"):
            acc[key]["buckets"][float(lab["le"].replace("+Inf", "inf"))] += value
    out = {}
    for key, a in sorted(acc.items(), key=lambda kv: -kv[1]["count"]):
        if a["count"] <= 0:
            continue
        buckets = list(a["buckets"].items())
        p50, p90 = histogram_quantile(buckets, 0.5), histogram_quantile(buckets, 0.9)
        out[key] = {
            "count": int(a["count"]),
            "mean_ms": round(1000 * a["sum"] / a["count"], 2),
            "p50_ms": round(1000 * p50, 1) if p50 is not None else None,
            "p90_ms": round(1000 * p90, 1) if p90 is not None else None,
        }
    return out


def scheduler_histograms(delta: dict[tuple[str, str], float]) -> dict[str, dict[str, Any]]:
    """kube-scheduler histograms worth comparing (mean ms and count), keyed by name{labels}."""
    keep = ("extension_point", "result", "operation")
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (name, text), value in delta.items():
        if not (name.endswith("_sum") or name.endswith("_count")):
            continue
        base = name.rsplit("_", 1)[0]
        lab = labels(text)
        if base == "scheduler_framework_extension_point_duration_seconds" and lab.get("extension_point") not in (
            "Bind",
            "PreBind",
            "Filter",
            "Score",
            "PreFilter",
            "PreScore",
            "Reserve",
            "Permit",
        ):
            continue
        if lab.get("status") not in (None, "Success"):
            continue
        tag = ",".join(f"{k}={lab[k]}" for k in keep if k in lab)
        key = f"{base}{{{tag}}}" if tag else base
        acc[key][0 if name.endswith("_count") else 1] += value
    return {
        k: {"count": int(c), "mean_ms": round(1000 * s / c, 2)}
        for k, (c, s) in sorted(acc.items())
        if c > 0 and (k.startswith("scheduler_framework_extension_point") or "attempt" in k or "algorithm" in k)
    }


class Metrics:
    """The API server's and both kube-schedulers' /metrics, read before and after a round."""

    def __init__(self, cluster: BenchCluster) -> None:
        self.cluster = cluster
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.verify = False
        admin = cluster.admin
        assert admin is not None
        self.session.cert = admin.session.cert
        import urllib3

        urllib3.disable_warnings()

    def read(self) -> dict[str, dict]:
        c = self.cluster
        return {
            "apiserver": scrape(self.session, f"{c.server}/metrics", ("apiserver_request_duration_seconds",)),
            "kube-scheduler": scrape(
                self.session, f"https://127.0.0.1:{c.ports['scheduler']}/metrics", ("scheduler_",)
            ),
            "placement-scheduler": scrape(
                self.session, f"https://127.0.0.1:{c.ports['placement']}/metrics", ("scheduler_",)
            ),
        }

    @staticmethod
    def delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, Any]:
        out: dict[str, Any] = {"apiserver": apiserver_requests(metric_delta(before["apiserver"], after["apiserver"]))}
        for name in ("kube-scheduler", "placement-scheduler"):
            out[name] = scheduler_histograms(metric_delta(before[name], after[name])) if after[name] else "unavailable"
        return out


# ---------------------------------------------------------------------------------- py-spy
class PySpy:
    def __init__(self, pid: int, path: Path, rate: int, mode: str = "gil") -> None:
        argv = [str(PY_SPY), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--threads"]
        argv += ["--nonblocking", "--output", str(path)]
        if mode in ("gil", "idle"):
            argv.append(f"--{mode}")
        self.path = path
        self.log = path.with_suffix(".log")
        with open(self.log, "wb") as log:
            self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.cpu_seconds = 0.0

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(self.popen.pid, 0)
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_seconds = usage.ru_utime + usage.ru_stime
        if not self.path.exists():
            raise RuntimeError(f"py-spy wrote no profile; its log:\n{self.log.read_text(errors='replace')[-2000:]}")


def read_raw(path: Path) -> list[tuple[str, list[tuple[str, str]], int]]:
    """py-spy's raw (collapsed) output: [(thread name, [(function, file)...] root first, samples)]."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        head, _, rest = stack.partition(": ")
        parts = rest.split(";")
        thread = parts[0] if head.startswith("thread") else "?"
        frames = []
        for part in parts[1:] if head.startswith("thread") else parts:
            func, _, where = part.partition(" (")
            frames.append((func, where.rstrip(")").rsplit(":", 1)[0]))
        out.append((thread, frames, int(count)))
    return out


# Activities, most specific first. Each: (name, test on the (function, file) frames root first).
def _is(fn: str, func: str | None) -> bool:
    """py-spy names functions by qualified name (`create_app.<locals>.bind`, `Probe._gil_loop`)."""
    return func is None or fn == func or fn.endswith("." + func)


def _has(frames, file_part: str, func: str | None = None) -> bool:
    return any(file_part in f and _is(fn, func) for fn, f in frames)


def _index(frames, file_part: str, func: str | None = None) -> int:
    for i, (fn, f) in enumerate(frames):
        if file_part in f and _is(fn, func):
            return i
    return -1


VERB_HANDLERS = {
    "filter_": "filter",
    "prioritize": "prioritize",
    "bind": "bind",
    "preempt": "preempt",
    "metrics": "/metrics",
    "readyz": "/readyz",
    "healthz": "/healthz",
}
VERB_VERBS = ("filter", "prioritize", "bind", "preempt")
HTTP_CLIENT = ("requests/", "urllib3/", "ssl.py", "http/client.py", "socket.py")


def classify(thread: str, frames: list[tuple[str, str]]) -> str:
    """The activity a sample belongs to (see the report's table for the list)."""
    tail = frames[-12:]
    if frames and "e2e_probe.py" in frames[-1][1] and not frames[-1][0].endswith(("verb_bind", "kube_bind")):
        return "bench probe (not the extender)"  # the probe's own timing reads
    if _has(frames, "e2e_probe.py", "_gil_loop") or _has(frames, "e2e_probe.py", "probe_report"):
        return "bench probe (not the extender)"
    if _has(tail, "logging/"):
        return "logging"
    if _has(frames, "extender/metrics.py") or _has(frames, "extender/server/app.py", "metrics"):
        return "metrics (extender/metrics.py, /metrics)"
    if _has(frames, "extender/state/watcher.py"):
        if _has(frames, "json/"):
            return "watch: JSON decode (json.loads)"
        if _has(frames, "extender/state/objects.py"):
            return "watch: parse records (objects.py)"
        if _has(frames, "extender/state/store.py") or _has(frames, "extender/state/groups.py"):
            if _has(frames, "extender/state/reservations.py"):
                return "watch: store.apply (reservations)"
            return "watch: store.apply + group index"
        if any(_has(frames, h) for h in HTTP_CLIENT):
            return "watch: HTTP stream read (requests/urllib3/ssl)"
        if _has(frames, "extender/state/watcher.py", "_lines"):
            return "watch: line splitting (_lines)"
        return "watch: other"
    if _has(frames, "extender/server/effects.py", "_run"):
        return "events: POST (event-sink thread)"
    verb = None
    for fn, f in frames:
        short = fn.rsplit(".", 1)[-1]
        if f.endswith("extender/server/app.py") and short in VERB_HANDLERS:
            verb = VERB_HANDLERS[short]  # the Flask routes (before the connection worker)
            break
        if f.endswith("extender/server/verbs.py") and fn.startswith("Verbs.") and short in VERB_VERBS:
            verb = short  # the verbs, called by VerbRoutes in front of Flask
            break
    if verb is None and _has(frames, "extender/server/app.py", "VerbRoutes.__call__"):
        if _has(frames, "extender/server/app.py", "parse"):
            return "verbs: parse request (JSON + pydantic)"
        if _has(frames, "extender/api/wire.py"):
            return "verbs: encode answer"
        return "verbs: routing, request id, metrics"
    if verb is not None:
        if _has(frames, "extender/server/app.py", "parse"):
            return f"{verb}: parse request (JSON + pydantic)"
        if _has(frames, "extender/server/app.py", "answer"):
            return f"{verb}: encode answer"
        if verb == "bind":
            if _has(frames, "extender/server/effects.py") or _has(frames, "extender/kube/client.py"):
                if _has(frames, "kubernetes/"):
                    return "bind: Binding call: credentials hook"
                return "bind: Binding call (requests/urllib3/ssl)"
            if _has(frames, "extender/engine/"):
                return "bind: re-check (engine)"
            return "bind: re-check / glue (verbs, store)"
        if verb in ("filter", "prioritize", "preempt"):
            if _has(frames, "extender/engine/"):
                return f"{verb}: engine"
            if _has(frames, "extender/state/"):
                return f"{verb}: snapshot / reservations (state/)"
            return f"{verb}: verbs glue"
        return f"{verb}: handler"
    if _has(frames, "extender/server/worker.py"):  # the connection worker
        if _has(frames, "flask/") or _has(frames, "werkzeug/"):
            return "HTTP serving: flask/werkzeug (outside the verbs)"
        if _has(frames, "extender/server/app.py"):
            return "HTTP serving: verb routes (outside the verbs)"
        return "HTTP serving: connection worker (parse, answer, accept)"
    if _has(frames, "gunicorn/workers/gthread.py", "handle") or _has(
        frames, "gunicorn/workers/gthread.py", "process_request"
    ):
        if _has(frames, "flask/") or _has(frames, "werkzeug/"):
            return "HTTP serving: flask/werkzeug (outside the verbs)"
        return "HTTP serving: gunicorn request handling"
    if _has(frames, "gunicorn/"):
        return "HTTP serving: gunicorn main loop (accept, poll, keepalive)"
    if _has(frames, "concurrent/futures/thread.py"):
        return "HTTP serving: thread pool hand-off"
    return "other"


def summarise_profile(path: Path, rate: int, worker_cpu: float, pods: int) -> dict[str, Any]:
    stacks = read_raw(path)
    total = sum(n for _, _, n in stacks)
    by_activity: Counter[str] = Counter()
    by_thread: Counter[str] = Counter()
    by_leaf: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    examples: dict[str, Counter[str]] = defaultdict(Counter)
    for thread, frames, n in stacks:
        activity = classify(thread, frames)
        by_activity[activity] += n
        kind = "request threads" if thread.startswith("ThreadPoolExecutor") else thread
        by_thread[kind] += n
        if frames:
            fn, f = frames[-1]
            by_leaf[f"{fn} ({_short(f)})"] += n
            by_file[_short(f)] += n
            examples[activity][" <- ".join(f"{fn}" for fn, _ in reversed(frames[-4:]))] += n
    scale = worker_cpu / total if total else 0.0  # samples -> the worker's measured CPU seconds

    def row(count: int) -> dict[str, float]:
        return {
            "samples": count,
            "sampled_seconds": round(count / rate, 3),
            "share": round(count / total, 4) if total else 0.0,
            "cpu_seconds": round(count * scale, 3),
            "ms_per_pod": round(1000 * count * scale / pods, 3) if pods else 0.0,
        }

    return {
        "samples": total,
        "rate": rate,
        "sampled_seconds": round(total / rate, 2),
        "worker_cpu_seconds": round(worker_cpu, 2),
        "activities": {k: row(v) for k, v in by_activity.most_common()},
        "threads": {k: row(v) for k, v in by_thread.most_common()},
        "top_leaf_functions": {k: row(v) for k, v in by_leaf.most_common(40)},
        "top_files_self": {k: row(v) for k, v in by_file.most_common(30)},
        "activity_examples": {k: dict(v.most_common(4)) for k, v in examples.items()},
    }


def summarise_idle(path: Path, rate: int) -> dict[str, Any]:
    """Wall-time samples (--idle) of the request threads inside the bind verb: where they wait."""
    where: Counter[str] = Counter()
    for thread, frames, n in read_raw(path):
        if not thread.startswith("ThreadPoolExecutor") or not _has(frames, "extender/server/app.py", "bind"):
            continue
        if _has(frames, "extender/state/lock.py"):
            spot = "store lock (acquire or held)"
        elif _has(frames, "urllib3/connection.py", "connect") or _has(frames, "ssl.py", "do_handshake"):
            spot = "new TLS connection"
        elif _has(frames, "http/client.py", "getresponse") or _has(frames, "urllib3/connection.py", "getresponse"):
            spot = "waiting for / reading the response (getresponse)"
        elif _has(frames, "http/client.py", "send") or _has(frames, "http/client.py", "request"):
            spot = "sending the request"
        elif _has(frames, "urllib3/connectionpool.py", "_get_conn"):
            spot = "connection pool checkout"
        elif _has(frames, "extender/server/effects.py") or _has(frames, "extender/kube/client.py"):
            spot = "rest of the Binding call (requests)"
        elif _has(frames, "extender/server/app.py", "parse"):
            spot = "parse"
        else:
            spot = "verb (re-check, glue)"
        where[spot] += n
    return {k: {"samples": v, "seconds": round(v / rate, 2)} for k, v in where.most_common()}


def _short(path: str) -> str:
    for marker in ("site-packages/", "lib/python3", "/work/main/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return path.split("/", 1)[1] if path.startswith(".") else path


# ---------------------------------------------------------------------------------- probe data
def _stats_ms(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ms = [1000 * v for v in values]
    return {
        "n": len(ms),
        "mean": round(statistics.fmean(ms), 2),
        "p50": round(percentile(ms, 50), 2),
        "p90": round(percentile(ms, 90), 2),
        "p99": round(percentile(ms, 99), 2),
        "total_s": round(sum(values), 3),
    }


def thread_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, dict[str, float]]:
    """CPU and run-queue seconds per thread kind over the round."""
    old = {t["tid"]: t for t in before["threads"]}
    keys = ("cpu_seconds", "system_seconds", "runqueue_seconds")
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"threads": 0, **dict.fromkeys(keys, 0.0)})
    for t in after["threads"]:
        o = old.get(t["tid"], {})
        name = t["name"]
        if name.startswith("ThreadPoolExecutor"):
            kind = "request threads (ThreadPoolExecutor)"
        elif name.startswith("native-") and t["tid"] == after["pid"]:
            kind = "gunicorn main thread (accept, poll, keepalive)"  # threading's record of it predates the fork
        else:
            kind = name
        out[kind]["threads"] += 1
        for key in keys:
            out[kind][key] += t.get(key, 0.0) - o.get(key, 0.0)
    return {
        k: {kk: round(vv, 3) for kk, vv in v.items()}
        for k, v in sorted(out.items(), key=lambda kv: -kv[1]["cpu_seconds"])
        if v["cpu_seconds"] > 0 or v["runqueue_seconds"] > 0
    }


def bind_breakdown(binds: list[dict[str, float]], lock_wait_bind: list[float]) -> dict[str, Any]:
    """Means (ms) of bind's parts; lock_wait is per lock.held("bind") call, taken from the probe."""
    done = [b for b in binds if "api_wall" in b]
    if not binds:
        return {}

    def mean(key: str, rows=done) -> float | None:  # noqa: ANN001
        values = [r[key] for r in rows if key in r]
        return round(1000 * statistics.fmean(values), 2) if values else None

    api_wall = mean("api_wall")
    api_cpu = mean("api_cpu")
    api_runq = mean("api_runqueue")
    return {
        "binds": len(binds),
        "with_binding_call": len(done),
        "verb_wall": _stats_ms([b["wall"] for b in binds]),
        "verb_cpu_ms": mean("cpu", binds),
        "verb_runqueue_ms": mean("runqueue", binds),
        "lock_wait_bind_ms": _stats_ms(lock_wait_bind),
        "binding_call_wall": _stats_ms([b["api_wall"] for b in done]),
        "binding_call_cpu_ms": api_cpu,
        "binding_call_runqueue_ms": api_runq,
        "binding_call_blocked_ms": round(api_wall - api_cpu - api_runq, 2) if api_wall is not None else None,
        "getresponse": _stats_ms([b["api_getresponse"] for b in done if "api_getresponse" in b]),
        "new_connections": sum(int(b.get("api_connects", 0)) for b in done),
        "new_connection_wall": _stats_ms([b["api_connect_wall"] for b in done if "api_connect_wall" in b]),
        "inflight_at_start_mean": round(statistics.fmean(b["inflight"] for b in binds), 2),
        "inflight_at_start_max": max(int(b["inflight"]) for b in binds),
    }


def probe_summary(before: dict[str, Any], after: dict[str, Any], pods: int) -> dict[str, Any]:
    threads = thread_delta(before, after)
    live = sum(t["cpu_seconds"] for t in threads.values())
    if "process_cpu_seconds" in after and "process_cpu_seconds" in before:
        worker_cpu = after["process_cpu_seconds"] - before["process_cpu_seconds"]
        if worker_cpu - live > 0.005:
            threads["threads that exited during the round (connections closed)"] = {
                "threads": 0,
                "cpu_seconds": round(worker_cpu - live, 3),
                "system_seconds": 0.0,
                "runqueue_seconds": 0.0,
            }
    else:
        worker_cpu = live
    gil_late = after["gil_late"]
    return {
        "worker_pid": after["pid"],
        "switch_interval": after["switch_interval"],
        "worker_cpu_seconds": round(worker_cpu, 2),
        "worker_cpu_ms_per_pod": round(1000 * worker_cpu / pods, 2),
        "accepted_connections": after.get("accepted", 0) - before.get("accepted", 0),
        "evaluations": after.get("evaluations", {}),
        "worker_runqueue_seconds": round(sum(t["runqueue_seconds"] for t in threads.values()), 2),
        "worker_system_seconds": round(sum(t["system_seconds"] for t in threads.values()), 2),
        "threads": threads,
        "bind": bind_breakdown(after["binds"], after["lock_wait"].get("bind", [])),
        "lock_wait": {k: _stats_ms(v) for k, v in sorted(after["lock_wait"].items())},
        "new_connections": {k: _stats_ms(v) for k, v in after["connects"].items()},
        "getresponse": {k: _stats_ms(v) for k, v in after["getresponse"].items()},
        "gc": {
            gen: {"collections": len(v), "seconds": round(sum(v), 3), "ms_per_pod": round(1000 * sum(v) / pods, 3)}
            for gen, v in sorted(after["gc"].items())
        },
        "gil_probe_lateness": _stats_ms(gil_late),
        "gil_probe_runqueue_ms_per_wakeup": round(
            1000 * threads.get("bench-gil-probe", {}).get("runqueue_seconds", 0.0) / len(gil_late), 3
        )
        if gil_late
        else None,
    }


# ---------------------------------------------------------------------------------- rounds
def measured_round(
    cluster: ProfileCluster,
    side: str,
    index: int,
    args: Any,
    zone_of: dict[str, str | None],
    profile_dir: Path,
    *,
    profiler: str = "none",
    switch_interval: float | None = None,
) -> dict[str, Any]:
    label = f"{side}-{index}" + (f"-switch{switch_interval:g}" if switch_interval is not None else "")
    metrics = Metrics(cluster)
    extender = side == "extender"
    if extender:
        # The GIL probe wakes 200 times a second: kept out of the profiled round's samples.
        gil = args.gil_probe and profiler == "none"
        probe(cluster, "/config", {"switch_interval": switch_interval or 0.005, "gil_probe": gil})
    probe(cluster, "/reset")
    m_before = metrics.read()
    p_before = probe(cluster)
    spies: list[PySpy] = []
    if extender and profiler == "py-spy":
        spies.append(PySpy(p_before["pid"], profile_dir / f"{label}.pyspy.txt", args.rate, args.mode))
        if args.idle:
            spies.append(PySpy(p_before["pid"], profile_dir / f"{label}.idle.pyspy.txt", args.rate, "idle"))
        time.sleep(1.0)  # attached before the first StatefulSet is created
    captured: dict[str, Any] = {}

    def at_end(line: str) -> None:
        # run_round logs its summary once the last pod is bound, before it deletes the namespace:
        # stop the clock on everything here, so the teardown is not in the profile.
        print(line, flush=True)
        if "p_after" in captured:
            return
        for spy in spies:
            spy.stop()
        captured["p_after"] = probe(cluster)
        captured["m_after"] = metrics.read()

    result = run_round(cluster, side, index, args.sets, args.replicas, zone_of, args.timeout_s, log=at_end)
    if extender:
        probe(cluster, "/config", {"gil_probe": False, "switch_interval": 0.005})
    pods = result["pods"]
    out: dict[str, Any] = {
        "label": label,
        "profiler": profiler if extender else "none",
        "mode": args.mode if spies else None,
        "switch_interval": switch_interval,
        "round": result,
        "metrics": Metrics.delta(m_before, captured["m_after"]),
    }
    summary = probe_summary(p_before, captured["p_after"], pods)
    if extender:
        out["probe"] = summary
    else:
        out["extender_worker_cpu_seconds"] = summary["worker_cpu_seconds"]
    for spy in spies:
        out.setdefault("py_spy_cpu_seconds", 0.0)
        out["py_spy_cpu_seconds"] = round(out["py_spy_cpu_seconds"] + spy.cpu_seconds, 2)
    if spies:
        out["profile"] = summarise_profile(spies[0].path, args.rate, summary["worker_cpu_seconds"], pods)
        out["profile"]["file"] = str(spies[0].path)
        if args.idle:
            out["bind_wall_samples"] = summarise_idle(spies[1].path, args.rate)
            out["idle_profile_file"] = str(spies[1].path)
    return out


# ---------------------------------------------------------------------------------- report
def render(runs: list[dict[str, Any]]) -> str:
    lines = []
    rows = []
    for r in runs:
        res = r["round"]
        cpu = res["cpu_seconds"]
        rows.append(
            [
                r["label"],
                r["profiler"],
                res["pods_per_second"],
                res["seconds_to_all_bound"],
                cpu.get("extender", "-"),
                cpu.get("placement-scheduler" if res["side"] == "extender" else "kube-scheduler", "-"),
                cpu.get("kube-apiserver", "-"),
                round(sum(cpu.values()), 1),
                res["extender_verbs"].get("bind", {}).get("ms_per_call", "-"),
                r.get("py_spy_cpu_seconds", "-"),
            ]
        )
    lines.append(
        table(
            [
                "round",
                "profiler",
                "pods/s",
                "s",
                "extender cpu s",
                "scheduler cpu s",
                "apiserver cpu s",
                "all components cpu s",
                "bind ms/call",
                "py-spy cpu s",
            ],
            rows,
        )
    )
    for r in runs:
        if "profile" in r:
            p = r["profile"]
            lines += [
                "",
                f"{r['label']}: py-spy ({r.get('mode')}) {p['samples']} samples at {p['rate']} Hz "
                f"({p['sampled_seconds']} s) "
                f"scaled to the worker's {p['worker_cpu_seconds']} CPU s:",
                table(
                    ["activity", "share", "sampled s", "scaled cpu s", "ms/pod"],
                    [
                        [k, f"{100 * v['share']:.1f}%", v["sampled_seconds"], v["cpu_seconds"], v["ms_per_pod"]]
                        for k, v in p["activities"].items()
                    ],
                ),
            ]
        if "probe" in r:
            pr = r["probe"]
            b = pr["bind"]
            lines += [
                "",
                f"{r['label']} (switch interval {pr['switch_interval'] * 1000:g} ms): worker CPU "
                f"{pr['worker_cpu_seconds']} s ({pr['worker_cpu_ms_per_pod']} ms/pod), run-queue wait "
                f"{pr['worker_runqueue_seconds']} s; client connections accepted {pr.get('accepted_connections')}; "
                f"engine evaluations {pr.get('evaluations')}",
                table(
                    ["thread", "n", "cpu s", "of which system s", "run-queue s"],
                    [
                        [k, v["threads"], v["cpu_seconds"], v["system_seconds"], v["runqueue_seconds"]]
                        for k, v in pr["threads"].items()
                    ],
                ),
            ]
            if b:
                lines.append(
                    f"bind: verb wall mean {b['verb_wall']['mean']} ms (p90 {b['verb_wall']['p90']}), "
                    f"store-lock wait mean {(b['lock_wait_bind_ms'] or {}).get('mean')} ms, Binding call wall mean "
                    f"{(b['binding_call_wall'] or {}).get('mean')} ms = cpu {b['binding_call_cpu_ms']} + run queue "
                    f"{b['binding_call_runqueue_ms']} + blocked {b['binding_call_blocked_ms']}; getresponse mean "
                    f"{(b['getresponse'] or {}).get('mean')} ms; new TLS connections {b['new_connections']}; "
                    f"binds in flight at start mean {b['inflight_at_start_mean']} (max {b['inflight_at_start_max']})"
                )
            lines.append(
                "lock wait (ms): "
                + "; ".join(
                    f"{k} n={v['n']} mean {v['mean']} p90 {v['p90']} total {v['total_s']} s"
                    for k, v in pr["lock_wait"].items()
                    if v
                )
            )
            lines.append(
                "gc: "
                + "; ".join(f"gen{g} {v['collections']}x {v['seconds']} s" for g, v in pr["gc"].items())
                + f"; GIL probe lateness (ms): {pr['gil_probe_lateness']}; of which run-queue wait per wake-up: "
                f"{pr['gil_probe_runqueue_ms_per_wakeup']} ms"
            )
        api = r["metrics"]["apiserver"]
        bind_key = "POST pods/binding"
        if bind_key in api:
            a = api[bind_key]
            lines.append(
                f"{r['label']}: API server POST pods/binding: {a['count']} calls, mean {a['mean_ms']} ms, "
                f"p50 {a['p50_ms']} ms, p90 {a['p90_ms']} ms (its own request_duration, handler side)"
            )
    return "\n".join(lines)


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """The plan (native, profiled extender, one plain extender round per switch interval) `rounds`
    times on one control plane; the kind's result: `figures`, `arms`, `detail` (profile_e2e's JSON)."""
    params, nodes = workload.workload, workload.cluster.nodes
    if params.profiler == "py-spy" and not PY_SPY.exists():
        raise RuntimeError(f"{PY_SPY} not found: .venv/bin/pip install py-spy (or --set workload.profiler=none)")
    # py-spy's raw stacks outlive the run (for --analyse): a directory of their own, not the runner's
    profile_dir = Path(params.profile_dir) if params.profile_dir else Path(tempfile.mkdtemp(prefix="profile-e2e-"))
    profile_dir.mkdir(parents=True, exist_ok=True)
    log(f"py-spy stacks in {profile_dir}")
    layout = zone_layout(nodes)
    started = time.monotonic()
    runs: list[dict[str, Any]] = []
    kcm_qps = workload.cluster.kcm_qps
    with ProfileCluster(kcm_qps=kcm_qps, scheduler_qps=params.qps, scheduler_burst=params.burst) as cluster:
        log(f"control plane up in {time.monotonic() - started:.1f}s; {nodes} kwok nodes")
        zone_of = add_zoned_nodes(cluster, layout, nodes)
        plan: list[tuple[str, str, float | None]] = []
        for _ in range(rounds):
            if params.native:
                plan.append(("native", "none", None))
            plan.append(("extender", params.profiler, None))
            plan += [("extender", "none", s) for s in params.switch_intervals]
        for index, (side, profiler, switch) in enumerate(plan):
            runs.append(
                measured_round(
                    cluster, side, index, params, zone_of, profile_dir, profiler=profiler, switch_interval=switch
                )
            )
        if params.keep_logs is not None:
            cluster.keep_logs(Path(params.keep_logs))
    return {
        "figures": figures(runs),
        "arms": {"extender": {"available": True, "mode": "python -m benchmarks.e2e_probe (the extender with probes)"}},
        "detail": {
            "nodes": nodes,
            "sets": params.sets,
            "replicas": params.replicas,
            "policy": POLICY,
            "scheduler_qps": params.qps,
            "scheduler_burst": params.burst,
            "kcm_qps": kcm_qps,
            "profile_dir": str(profile_dir),
            "runs": runs,
            "total_seconds": round(time.monotonic() - started, 1),
        },
    }


def figures(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Flat figures: per round label, `LABEL.pods_per_second`, `LABEL.extender_cpu_ms_per_pod` (the
    extender's process tree), `LABEL.worker_cpu_ms_per_pod` (the probes'), and the profiled round's
    `LABEL.activity.NAME.ms_per_pod`; `extender.pods_per_second`, the median over extender rounds."""
    out: dict[str, float] = {}
    for r in runs:
        res, label = r["round"], r["label"]
        out[f"{label}.pods_per_second"] = res["pods_per_second"]
        if "extender" in res["cpu_seconds"] and res["bound"]:
            out[f"{label}.extender_cpu_ms_per_pod"] = round(res["cpu_seconds"]["extender"] * 1000 / res["bound"], 2)
        if "probe" in r:
            out[f"{label}.worker_cpu_ms_per_pod"] = r["probe"]["worker_cpu_ms_per_pod"]
        for name, activity in (r.get("profile") or {}).get("activities", {}).items():
            out[f"{label}.activity.{name}.ms_per_pod"] = activity["ms_per_pod"]
    mine = [r["round"]["pods_per_second"] for r in runs if r["round"]["side"] == "extender" and r["round"]["complete"]]
    if mine:
        out["extender.pods_per_second"] = statistics.median(mine)
    return out


def report(result: dict[str, Any]) -> str:
    return render(result["detail"]["runs"]) + f"\npy-spy stacks: {result['detail']['profile_dir']}"


def analyse_main(argv: list[str] | None = None) -> int:
    """No cluster: sort a py-spy raw file from an earlier run into activities and print the table
    (`python -m benchmarks.kinds.profile_e2e --analyse RAW [--rate R --pods-in-round N --worker-cpu S]`)."""
    parser = argparse.ArgumentParser(description=analyse_main.__doc__)
    parser.add_argument("--analyse", type=Path, metavar="RAW", required=True, help="a py-spy raw file")
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second it was taken at")
    parser.add_argument("--pods-in-round", type=int, default=1000)
    parser.add_argument("--worker-cpu", type=float, help="the worker's CPU seconds in the round")
    args = parser.parse_args(argv)
    p = summarise_profile(args.analyse, args.rate, args.worker_cpu or 0.0, args.pods_in_round)
    print(
        table(
            ["activity", "share", "sampled s", "scaled cpu s", "ms/pod"],
            [
                [k, f"{100 * v['share']:.1f}%", v["sampled_seconds"], v["cpu_seconds"], v["ms_per_pod"]]
                for k, v in p["activities"].items()
            ],
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(analyse_main())

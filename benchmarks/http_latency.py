"""Filter + prioritize round trips over HTTP, served by gunicorn exactly as deployed.

For each configuration a real gunicorn server is started in a subprocess
(benchmarks/extender_app.py: ExtenderApplication's settings, one connection worker, a synthetic
ClusterStore preloaded with `store.replace`), and one keep-alive client sends, sequentially,
the exact ExtenderArgs kube-scheduler sends (every node a candidate) for one pod with the full
policy (caps per node and per zone, ordinal zones, zone spread DoNotSchedule, required shard
anti-affinity by zone, a label-selected group of 10 StatefulSets with known replicas, so
dead-end lookahead runs).

Each iteration sends what kube-scheduler sends per pod: POST /filter with every node as a
candidate, then POST /prioritize with the nodes that passed (kube-scheduler scores only feasible
nodes); then the same two payloads to POST /noop (same parse path, fixed small answer: the
HTTP + JSON floor) and the filter payload once to POST /noop-raw (body read, no JSON: the HTTP
floor). The order alternates between iterations. Warm-up, then `--runs` runs of `--requests`
iterations each; the server's full garbage collections are counted per run (GET /bench/gc).

Ratio definitions (medians of per-iteration times, in the same run):
  pair ratio       = (filter + prioritize) / (noop(filter payload) + noop(prioritize payload))
                     <- the target (<= 1.5x)
  filter ratio     = filter / noop(filter payload)
  prioritize ratio = prioritize / noop(prioritize payload)

The Go floor (benchmarks/gofloor, built with `go build` into
${XDG_CACHE_HOME:-~/.cache}/placement-extender/gofloor-<hash>/ on first use, then reused) is a
do-nothing extender in Go: encoding/json into kube-scheduler's extenderv1.ExtenderArgs, and answers
of realistic size (filter: every candidate passes; prioritize: score 0 for every candidate). Each
iteration also sends it the same filter and prioritize payloads; the three groups (verbs, Python
floors, Go floor) rotate their order between iterations. Beside the ratios above:
  pair / Go pair, filter / Go filter, prioritize / Go prioritize   (medians, same run)
Without `go` (or with --no-go-floor) the run goes on and says "Go floor: unavailable (<reason>)".

    python -m benchmarks.http_latency                 # 1k, 5k, 1k-nodelist; ~4 min
    python -m benchmarks.http_latency --configs 1k    # one configuration
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import synthetic  # noqa: E402
from benchmarks.common import (  # noqa: E402
    REPO,
    GoFloorBuild,
    build_go_floor,
    code_version,
    loadavg,
    machine,
    summary_ms,
    table,
    verdict,
    vm_status,
    write_result,
)


@dataclass(frozen=True)
class Config:
    name: str
    nodes: int
    pods: int
    node_list: bool = False
    target_p99_ms: float | None = None  # for the filter + prioritize pair
    target_ratio: float | None = 1.5  # pair ratio

    @property
    def mode(self) -> str:
        return "NodeList (nodeCacheCapable: false)" if self.node_list else "NodeNames (nodeCacheCapable: true)"


CONFIGS = {
    "1k": Config("1k", 1000, 10_000, target_p99_ms=5.0),
    "5k": Config("5k", 5000, 150_000, target_p99_ms=25.0),
    "1k-nodelist": Config("1k-nodelist", 1000, 10_000, node_list=True, target_ratio=None),
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


# ------------------------------------------------------------------------------------ server
class Server:
    """`python -m benchmarks.extender_app` in its own process group; stopped by its pid."""

    def __init__(self, nodes: int, pods: int, port: int, log_path: Path, extra: list[str] | None = None) -> None:
        self.port = port
        self.log_path = log_path
        argv = [
            sys.executable,
            "-m",
            "benchmarks.extender_app",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--listen",
            f"127.0.0.1:{port}",
            *(extra or []),
        ]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 300) -> float:
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"benchmark server exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                conn.close()
                if response.status == 200:
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"benchmark server not ready in {timeout}s:\n{self.tail()}")

    def worker_pid(self) -> int | None:
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            return int(children[0]) if children else None
        except OSError:
            return None

    def worker_memory(self) -> dict[str, int]:
        pid = self.worker_pid()
        return vm_status(pid) if pid else {}

    def tail(self, lines: int = 30) -> str:
        self.log.flush()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own child's process group (start_new_session)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


class GoFloorServer(Server):
    """The Go floor binary (benchmarks/gofloor) in its own process group; stopped by its pid."""

    def __init__(self, binary: Path, port: int, log_path: Path) -> None:
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [str(binary), "-listen", f"127.0.0.1:{port}"],
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------ client
class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        started = time.perf_counter()
        self.conn.request("POST", path, body, HEADERS)
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"POST {path}: {response.status} {data[:300]!r}")
        return elapsed, data

    def get_json(self, path: str) -> Any:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        return json.loads(response.read())

    def close(self) -> None:
        self.conn.close()


METRICS = ("filter", "prioritize", "pair", "noop_filter", "noop_prioritize", "noop_pair", "noop_raw")
# The Go floor's figures: present when the Go floor ran (build_go_floor found or built it).
GO_METRICS = ("go_filter", "go_prioritize", "go_pair")


def run_once(
    client: Client, filter_body: bytes, prioritize_body: bytes, iterations: int, go_client: Client | None = None
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {k: [] for k in METRICS + (GO_METRICS if go_client else ())}
    gc.collect()
    gc.disable()  # the client's own collector must not land inside a timed request
    try:
        for i in range(iterations):

            def verbs() -> None:
                f, _ = client.post("/filter", filter_body)
                p, _ = client.post("/prioritize", prioritize_body)
                samples["filter"].append(f)
                samples["prioritize"].append(p)
                samples["pair"].append(f + p)

            def floors() -> None:
                a, _ = client.post("/noop", filter_body)
                b, _ = client.post("/noop", prioritize_body)
                r, _ = client.post("/noop-raw", filter_body)
                samples["noop_filter"].append(a)
                samples["noop_prioritize"].append(b)
                samples["noop_pair"].append(a + b)
                samples["noop_raw"].append(r)

            def go_floor() -> None:
                assert go_client is not None
                a, _ = go_client.post("/filter", filter_body)
                b, _ = go_client.post("/prioritize", prioritize_body)
                samples["go_filter"].append(a)
                samples["go_prioritize"].append(b)
                samples["go_pair"].append(a + b)

            # Rotate the groups' order between iterations: without the Go floor, verbs+floors then
            # floors+verbs, alternately, as before; with it each group takes each position in turn.
            groups = [verbs, floors, go_floor] if go_client else [verbs, floors]
            shift = i % len(groups)
            for group in groups[shift:] + groups[:shift]:
                group()
    finally:
        gc.enable()
    return samples


def ratios(stats: dict[str, dict[str, float]]) -> dict[str, float]:
    out = {
        "pair_over_2noop_median": round(stats["pair"]["median"] / stats["noop_pair"]["median"], 2),
        "pair_over_2noop_p99": round(stats["pair"]["p99"] / stats["noop_pair"]["p99"], 2),
        "filter_over_noop_median": round(stats["filter"]["median"] / stats["noop_filter"]["median"], 2),
        "prioritize_over_noop_median": round(stats["prioritize"]["median"] / stats["noop_prioritize"]["median"], 2),
    }
    if "go_pair" in stats:  # the Go floor ran
        out |= {
            "pair_over_go_pair_median": round(stats["pair"]["median"] / stats["go_pair"]["median"], 2),
            "pair_over_go_pair_p99": round(stats["pair"]["p99"] / stats["go_pair"]["p99"], 2),
            "filter_over_go_filter_median": round(stats["filter"]["median"] / stats["go_filter"]["median"], 2),
            "prioritize_over_go_prioritize_median": round(
                stats["prioritize"]["median"] / stats["go_prioritize"]["median"], 2
            ),
            # the Python floor (a fixed 90-byte answer) against the Go floor (answers of realistic size)
            "noop_pair_over_go_pair_median": round(stats["noop_pair"]["median"] / stats["go_pair"]["median"], 2),
        }
    return out


def gc_delta(before: dict[str, Any], after: dict[str, Any], iterations: int) -> dict[str, Any]:
    """The server's garbage collections during a run, per iteration (one iteration = 5 requests)."""
    return {
        "gen2_collections": after["collections"][2] - before["collections"][2],
        "gen2_ms_total": round((after["seconds"][2] - before["seconds"][2]) * 1000, 1),
        "gen01_ms_total": round((sum(after["seconds"][:2]) - sum(before["seconds"][:2])) * 1000, 1),
        "gen2_ms_per_iteration": round((after["seconds"][2] - before["seconds"][2]) * 1000 / iterations, 2),
        "tracked_objects": after["tracked_objects"],
        "frozen_objects": after["frozen"],
    }


def start_go_floor(
    config: Config, go: GoFloorBuild | None, workdir: Path, filter_body: bytes, prioritize_body: bytes, log=print
) -> tuple[GoFloorServer | None, Client | None, dict[str, Any]]:
    """The Go floor's server and client for one configuration, checked with one filter and one
    prioritize; (None, None, why) when there is no binary or it does not answer as it should."""
    if go is None or go.path is None:
        return None, None, {"available": False, "reason": go.reason if go else "not requested"}
    port = free_port()
    try:
        server = GoFloorServer(go.path, port, workdir / f"gofloor-{config.name}.log")
    except OSError as exc:
        log(f"[{config.name}] Go floor: unavailable (cannot start {go.path}: {exc})")
        return None, None, {"available": False, "reason": f"cannot start {go.path}: {exc}"}
    client: Client | None = None
    try:
        ready_s = server.wait_ready(timeout=30)
        client = Client(port)
        client.conn.request("GET", "/readyz")
        go_version = client.conn.getresponse().read().decode().strip()
        _, filter_answer = client.post("/filter", filter_body)
        _, prio_answer = client.post("/prioritize", prioritize_body)
        candidates = json.loads(filter_body)
        passed = json.loads(filter_answer)
        if config.node_list:
            want, got = len(candidates["Nodes"]["items"]), len(passed["Nodes"]["items"])
        else:
            want, got = len(candidates["NodeNames"]), len(passed["NodeNames"])
        if want != got:
            raise RuntimeError(f"the Go floor passed {got} of {want} candidates")
    except (OSError, RuntimeError, TimeoutError, KeyError, TypeError, ValueError) as exc:
        if client is not None:
            client.close()
        reason = f"server: {exc}"
        server.stop()
        log(f"[{config.name}] Go floor: unavailable ({reason})")
        return None, None, {"available": False, "reason": reason}
    info = {
        "available": True,
        "go_version": go_version,
        "server_ready_seconds": round(ready_s, 2),
        "filter_answer_bytes": len(filter_answer),
        "prioritize_answer_bytes": len(prio_answer),
    }
    log(
        f"[{config.name}] Go floor ready in {ready_s:.2f}s ({go_version}); filter answer "
        f"{len(filter_answer):,} bytes, prioritize answer {len(prio_answer):,} bytes"
    )
    return server, client, info


def measure(
    config: Config,
    *,
    requests: int,
    runs: int,
    warmup: int,
    workdir: Path,
    gc_freeze: bool = True,
    log=print,
    go: GoFloorBuild | None = None,
) -> dict[str, Any]:
    filter_body = synthetic.filter_args(config.nodes, node_list=config.node_list)
    go_server: GoFloorServer | None = None
    go_client: Client | None = None
    go_info: dict[str, Any] = {"available": False, "reason": "not started"}
    port = free_port()
    server = Server(
        config.nodes,
        config.pods,
        port,
        workdir / f"server-{config.name}.log",
        None if gc_freeze else ["--no-gc-freeze"],
    )
    try:
        ready_s = server.wait_ready()
        client = Client(port)
        _, filter_answer = client.post("/filter", filter_body)
        prioritize_body = synthetic.prioritize_args(filter_body, filter_answer)
        _, prio_answer = client.post("/prioritize", prioritize_body)
        log(
            f"[{config.name}] server ready in {ready_s:.1f}s (gunicorn, 1 connection worker); filter request "
            f"{len(filter_body):,} bytes, prioritize request {len(prioritize_body):,} bytes"
        )
        answer = json.loads(filter_answer)
        passed = len(answer.get("NodeNames") or (answer.get("Nodes") or {}).get("items") or [])
        decision = {
            "passed": passed,
            "failed": len(answer.get("FailedNodes") or {}),
            "unresolvable": len(answer.get("FailedAndUnresolvableNodes") or {}),
            "filter_answer_bytes": len(filter_answer),
            "prioritize_answer_bytes": len(prio_answer),
        }
        if passed == 0:
            raise RuntimeError(f"the benchmark pod passes no node: {decision}")
        go_server, go_client, go_info = start_go_floor(config, go, workdir, filter_body, prioritize_body, log)
        run_once(client, filter_body, prioritize_body, warmup, go_client)
        per_run = []
        for r in range(runs):
            load = loadavg()
            gc_before = client.get_json("/bench/gc")
            samples = run_once(client, filter_body, prioritize_body, requests, go_client)
            gc_after = client.get_json("/bench/gc")
            stats = {k: summary_ms(v) for k, v in samples.items()}
            entry = {
                "run": r + 1,
                "loadavg_before": [round(x, 2) for x in load],
                "stats": stats,
                "ratios": ratios(stats),
                "server_gc": gc_delta(gc_before, gc_after, requests),
            }
            per_run.append(entry)
            go_line = ""
            if go_client is not None:
                go_line = (
                    f"; Go floor pair median {stats['go_pair']['median']:.2f} ms, ratio "
                    f"{entry['ratios']['pair_over_go_pair_median']}x"
                )
            log(
                f"[{config.name}] run {r + 1}/{runs}: pair median {stats['pair']['median']:.2f} ms, p99 "
                f"{stats['pair']['p99']:.2f} ms; "
                f"2x noop median {stats['noop_pair']['median']:.2f} ms; ratio "
                f"{entry['ratios']['pair_over_2noop_median']}x "
                f"(load {load[0]:.2f}); server: {entry['server_gc']['gen2_collections']} full GCs, "
                f"{entry['server_gc']['gen2_ms_total']:.0f} ms" + go_line
            )
        client.close()
        memory = server.worker_memory()
    finally:
        server.stop()
        if go_client is not None:
            go_client.close()
        if go_server is not None:
            go_server.stop()
    return {
        "config": config.name + ("" if gc_freeze else "+no-gc-freeze"),
        "gc_freeze": gc_freeze,
        "nodes": config.nodes,
        "pods": config.pods,
        "mode": config.mode,
        "filter_request_bytes": len(filter_body),
        "prioritize_request_bytes": len(prioritize_body),
        "decision": decision,
        "server_ready_seconds": round(ready_s, 1),
        "worker_memory_kib": memory,
        "requests_per_run": requests,
        "go_floor": go_info,
        "runs": per_run,
        "summary": summarise(config, per_run),
    }


def summarise(config: Config, runs: list[dict[str, Any]]) -> dict[str, Any]:
    def mm(metric: str, field: str) -> float:
        return round(statistics.median(r["stats"][metric][field] for r in runs), 3)

    out: dict[str, Any] = {
        metric: {
            "median_of_medians": mm(metric, "median"),
            "median_p90": mm(metric, "p90"),
            "median_p99": mm(metric, "p99"),
            "worst_p99": round(max(r["stats"][metric]["p99"] for r in runs), 3),
            "max": round(max(r["stats"][metric]["max"] for r in runs), 3),
        }
        for metric in METRICS + GO_METRICS
        if metric in runs[0]["stats"]
    }
    out["ratios"] = {k: round(statistics.median(r["ratios"][k] for r in runs), 2) for k in runs[0]["ratios"]}
    out["server_gc"] = {
        "gen2_collections_per_run": statistics.median(r["server_gc"]["gen2_collections"] for r in runs),
        "gen2_ms_per_run": statistics.median(r["server_gc"]["gen2_ms_total"] for r in runs),
        "gen2_ms_per_iteration": statistics.median(r["server_gc"]["gen2_ms_per_iteration"] for r in runs),
        "tracked_objects": runs[-1]["server_gc"]["tracked_objects"],
    }
    targets = {}
    if config.target_p99_ms is not None:
        p99 = out["pair"]["median_p99"]
        targets["pair_p99_ms"] = {
            "target": config.target_p99_ms,
            "value": p99,
            "verdict": verdict(p99, config.target_p99_ms),
        }
    if config.target_ratio is not None:
        ratio = out["ratios"]["pair_over_2noop_median"]
        targets["pair_over_2noop_median"] = {
            "target": config.target_ratio,
            "value": ratio,
            "verdict": verdict(ratio, config.target_ratio),
        }
    out["targets"] = targets
    return out


def report(results: list[dict[str, Any]]) -> str:
    rows = []
    for res in results:
        s = res["summary"]
        for metric in METRICS + GO_METRICS:
            if metric not in s:
                continue
            m = s[metric]
            rows.append([res["config"], metric, m["median_of_medians"], m["median_p90"], m["median_p99"], m["max"]])
    lines = [
        "HTTP latency, ms (median of per-run medians; p90/p99: median over runs; max: over all runs)",
        table(["config", "request", "median", "p90", "p99", "max"], rows),
        "",
        table(
            [
                "config",
                "nodes",
                "pods",
                "mode",
                "pair/2noop",
                "filter/noop",
                "prio/noop",
                "pair p99 target",
                "ratio target",
            ],
            [
                [
                    r["config"],
                    r["nodes"],
                    r["pods"],
                    r["mode"].split()[0],
                    f"{r['summary']['ratios']['pair_over_2noop_median']}x",
                    f"{r['summary']['ratios']['filter_over_noop_median']}x",
                    f"{r['summary']['ratios']['prioritize_over_noop_median']}x",
                    _target(r, "pair_p99_ms"),
                    _target(r, "pair_over_2noop_median"),
                ]
                for r in results
            ],
        ),
        "",
        *go_floor_report(results),
        "server's full (gen 2) garbage collections during a run of "
        + str(results[0]["requests_per_run"])
        + " iterations (median of runs):",
        table(
            ["config", "gen2 GCs", "ms in gen2 GC", "ms per iteration", "GC-tracked objects"],
            [
                [
                    r["config"],
                    r["summary"]["server_gc"]["gen2_collections_per_run"],
                    r["summary"]["server_gc"]["gen2_ms_per_run"],
                    r["summary"]["server_gc"]["gen2_ms_per_iteration"],
                    r["summary"]["server_gc"]["tracked_objects"],
                ]
                for r in results
            ],
        ),
    ]
    return "\n".join(lines)


def go_floor_report(results: list[dict[str, Any]]) -> list[str]:
    """The Go floor's table (its figures and our ratios to it), or why it did not run."""
    ran = [r for r in results if "go_pair" in r["summary"]]
    lines = []
    if ran:
        lines += [
            "Go floor (benchmarks/gofloor: encoding/json into extenderv1.ExtenderArgs, answers of realistic size), "
            "same run; ms, median of per-run medians; ratios: medians",
            table(
                [
                    "config",
                    "Go pair",
                    "Go pair p99",
                    "Go filter",
                    "Go prio",
                    "pair/Go",
                    "filter/Go",
                    "prio/Go",
                    "2noop/Go",
                ],
                [
                    [
                        r["config"],
                        r["summary"]["go_pair"]["median_of_medians"],
                        r["summary"]["go_pair"]["median_p99"],
                        r["summary"]["go_filter"]["median_of_medians"],
                        r["summary"]["go_prioritize"]["median_of_medians"],
                        f"{r['summary']['ratios']['pair_over_go_pair_median']}x",
                        f"{r['summary']['ratios']['filter_over_go_filter_median']}x",
                        f"{r['summary']['ratios']['prioritize_over_go_prioritize_median']}x",
                        f"{r['summary']['ratios']['noop_pair_over_go_pair_median']}x",
                    ]
                    for r in ran
                ],
            ),
        ]
    for r in results:
        if "go_pair" not in r["summary"]:
            lines.append(f"{r['config']}: Go floor: unavailable ({r['go_floor'].get('reason')})")
    return [*lines, ""]


def _target(res: dict[str, Any], key: str) -> str:
    t = res["summary"]["targets"].get(key)
    if t is None:
        return "-"
    return f"{t['value']} vs {t['target']}: {t['verdict']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="1k,5k,1k-nodelist", help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--nodes", type=int, help="a custom configuration instead (with --pods)")
    parser.add_argument("--pods", type=int)
    parser.add_argument("--node-list", action="store_true", help="custom configuration in NodeList mode")
    parser.add_argument("--requests", type=int, default=200, help="iterations (filter+prioritize pairs) per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--no-gc-freeze",
        dest="gc_freeze",
        action="store_false",
        help="skip freeze_heap() after the server loads its cache (the extender's watcher freezes after every list)",
    )
    parser.add_argument(
        "--no-go-floor",
        dest="go_floor",
        action="store_false",
        help="do not build or run the Go floor (benchmarks/gofloor)",
    )
    parser.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/http_latency.json)")
    args = parser.parse_args(argv)

    if args.nodes:
        configs = [Config("custom", args.nodes, args.pods or args.nodes * 10, node_list=args.node_list)]
    else:
        configs = [CONFIGS[name] for name in args.configs.split(",") if name]
    info = machine()
    print(
        f"machine: {info['nproc']} cpu ({info['cpu_model']}), Python {info['python']}, load {info['loadavg_at_start']}"
    )
    go = build_go_floor() if args.go_floor else GoFloorBuild(None, "--no-go-floor")
    info["go_floor"] = go.describe()
    if go.path is None:
        print(f"Go floor: unavailable ({go.reason})")
    else:
        how = "cached" if go.cached else f"built in {go.build_seconds:.1f}s"
        print(f"Go floor: {go.path} ({how})")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
        for config in configs:
            results.append(
                measure(
                    config,
                    requests=args.requests,
                    runs=args.runs,
                    warmup=args.warmup,
                    workdir=Path(tmp),
                    gc_freeze=args.gc_freeze,
                    go=go,
                )
            )
    info["loadavg_at_end"] = [round(x, 2) for x in loadavg()]
    info["code_at_end"] = code_version()
    if info["code_at_end"]["extender_sha256"] != info["code"]["extender_sha256"]:
        print("WARNING: extender/ changed on disk during the run; the figures mix two versions of the code")
    print()
    print(report(results))
    path = write_result("http_latency", {"benchmark": "http_latency", "machine": info, "results": results}, args.out)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

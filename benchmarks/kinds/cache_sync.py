"""Kind `cache_sync`: the watch cache's initial sync time, resident memory, and watch-event throughput.

(Moved from benchmarks/cache_sync.py; its settings are benchmarks/workloads/cache-sync.yaml.)

Each round (a run) is a fresh subprocess (so its memory is the cache's alone), which:

1. records VmRSS after its imports (the baseline);
2. syncs through the watcher's own code (`Watcher._list`: list pages of 500 objects arrive as JSON
   bytes, realistic objects: a pod is ~3.9 KB, with managedFields, containers, status; each page is
   `json.loads`-ed, what `requests.Response.json()` does, and its records made as it arrives, the
   collector paused, the heap frozen after). Timed: nodes, then pods (the bytes themselves are
   generated outside the timers);
3. collects garbage and records VmRSS again (and VmHWM, the peak): the resident memory of the
   synced store is VmRSS after - VmRSS before;
4. replays `workload.events` watch events through the watcher's own code (`Watcher._watch` over a
   fake API response, so `_lines` splitting, `json.loads` per line and `store.apply` of MODIFIED
   pod events are all in the timer), first with one event per HTTP chunk (the API server flushes
   each event), then with 64 KiB chunks (a backlog read in bulk).

`workload.streamed: true` adds one more run, the sync alone (no events). It compared applying the
pages as they arrive with holding every raw item until `replace`; since the watcher itself syncs
page by page (`6badedb`), both runs sync the same way.

Figures (medians over the runs): `sync_s`, `sync_gc_s`, `nodes_list_s`, `pods_list_s`,
`rss_delta_mb`, `peak_delta_mb`, `events_per_second` (one event per chunk),
`events_per_second_64KiB_chunks`, `json_loads_us_per_event`, `store_apply_us_per_event`, and the
streamed run's `streamed.rss_delta_mb`, `streamed.peak_delta_mb`, `streamed.sync_s`. The targets
(sync <= 30 s, RSS <= 400 MB, >= 5,000 events/s) are the workload file's.

    python -m benchmarks run cache-sync                 # 5,000 nodes, 150,000 pods, 3 runs; ~2 min
    python -m benchmarks run cache-sync --smoke         # 50 nodes, 500 pods, 1 run, 200 events
    python -m benchmarks run cache-sync --set workload.streamed=true --rounds 1
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, loadavg, table, vm_status

PAGE = 500


# ------------------------------------------------------------------------------------ child
def _child(nodes: int, pods: int, events: int, mode: str) -> dict[str, Any]:
    from benchmarks import synthetic
    from extender.state.store import ClusterStore
    from extender.state.watcher import Resource, Watcher

    synthetic.background_pod_json(0, "warm")  # build the template before the baseline
    timings = {"nodes_decode": 0.0, "nodes_replace": 0.0, "pods_decode": 0.0, "pods_replace": 0.0}
    gc_in = dict.fromkeys(timings, 0.0)  # of which: seconds in the cyclic garbage collector
    current: list[Any] = [None, 0.0]  # timed section, GC start mark

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if current[0] is None:
            return
        if phase == "start":
            current[1] = time.perf_counter()
        elif current[1]:
            gc_in[current[0]] += time.perf_counter() - current[1]
            current[1] = 0.0

    class timed:
        def __init__(self, key: str) -> None:
            self.key = key

        def __enter__(self) -> None:
            current[0] = self.key
            self.t = time.perf_counter()

        def __exit__(self, *exc: object) -> None:
            timings[self.key] += time.perf_counter() - self.t
            current[0] = None

    gc.collect()
    base = vm_status()
    gc.callbacks.append(on_gc)
    store = ClusterStore()
    layout = synthetic.node_layout(nodes)

    # -- the list, through the watcher's own code (Watcher._list: page by page, records made as
    # each page arrives, the collector paused, the heap frozen after). The fake API builds each
    # page's JSON bytes on demand; that generation is timed separately and subtracted.
    generating = [0.0]
    bytes_seen = [0]

    class ListApi:
        def __init__(self, pages):
            self.pages = pages

        def call(self, method, path, *, query=None, timeout=None, stream=False, body=None):
            t0 = time.perf_counter()
            raw = next(self.pages)
            generating[0] += time.perf_counter() - t0
            bytes_seen[0] += len(raw)
            return json.loads(raw)  # what requests' Response.json() does, inside the timer

    def node_pages():
        for start in range(0, nodes, PAGE):
            chunk = [
                json.dumps(synthetic.node_obj(n, z, start + k), separators=(",", ":"))
                for k, (n, z) in enumerate(layout[start : start + PAGE])
            ]
            yield synthetic.list_page("NodeList", chunk, 100, "more" if start + PAGE < nodes else "")

    def pod_pages():
        for start in range(0, pods, PAGE):
            chunk = [
                synthetic.background_pod_json(i, layout[i % nodes][0]) for i in range(start, min(start + PAGE, pods))
            ]
            yield synthetic.list_page("PodList", chunk, 100, "more" if start + PAGE < pods else "")

    for kind, path, pages in (("nodes", "/api/v1/nodes", node_pages()), ("pods", "/api/v1/pods", pod_pages())):
        generating[0] = 0.0
        watcher = Watcher(ListApi(pages), store)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        watcher._list(Resource(kind, path))
        timings[f"{kind}_list"] = time.perf_counter() - t0 - generating[0]
    bytes_total = bytes_seen[0]
    gc.callbacks.remove(on_gc)
    gc.collect()
    after = vm_status()
    out: dict[str, Any] = {
        "mode": mode,
        "nodes": len(store.topology.nodes),
        "pods": len(store.pods),
        "pod_list_bytes": bytes_total,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "gc_s": {k: round(v, 3) for k, v in gc_in.items()},
        "sync_s": round(sum(timings.values()), 3),
        "sync_gc_s": round(sum(gc_in.values()), 3),
        "rss_kib": {"baseline": base["VmRSS"], "after_sync": after["VmRSS"], "peak": after["VmHWM"]},
        "rss_delta_mb": round((after["VmRSS"] - base["VmRSS"]) / 1024, 1),
        "peak_delta_mb": round((after["VmHWM"] - base["VmRSS"]) / 1024, 1),
    }
    if events <= 0 or mode == "streamed":
        return out

    # -- watch events: MODIFIED pods (a container restarted: restartCount and resourceVersion change)
    lines = [
        json.dumps({"type": "MODIFIED", "object": None}, separators=(",", ":"))
        .replace(
            "null",
            synthetic.background_pod_json(
                (k * 7919) % pods, layout[((k * 7919) % pods) % nodes][0], rv=200 + k, restarts=1 + k % 5
            ),
        )
        .encode()
        + b"\n"
        for k in range(events)
    ]

    class FakeResponse:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def iter_content(self, chunk_size: int | None = None):
            return iter(self.chunks)

        def close(self) -> None:
            pass

    class FakeApi:
        def __init__(self, chunks: list[bytes]) -> None:
            self.chunks = chunks

        def call(self, *args: Any, **kwargs: Any) -> FakeResponse:
            return FakeResponse(self.chunks)

    resource = Resource("pods", "/api/v1/pods")
    stream = b"".join(lines)
    variants = {
        "one_event_per_chunk": lines,
        "64KiB_chunks": [stream[i : i + 65536] for i in range(0, len(stream), 65536)],
    }
    rates: dict[str, Any] = {}
    for name, chunks in variants.items():
        watcher = Watcher(FakeApi(chunks), store)  # type: ignore[arg-type]
        gc.collect()
        t = time.perf_counter()
        version = watcher._watch(resource, "100")
        elapsed = time.perf_counter() - t
        assert version == str(200 + events - 1), version
        rates[name] = {"events": events, "seconds": round(elapsed, 3), "per_second": round(events / elapsed)}
    # Breakdown of the per-event cost, in one loop (holding all decoded events would inflate the heap).
    decode_s = apply_s = 0.0
    for line in lines:
        t0 = time.perf_counter()
        event = json.loads(line)
        t1 = time.perf_counter()
        store.apply("pods", event["type"], event["object"])
        decode_s += t1 - t0
        apply_s += time.perf_counter() - t1
    rates["breakdown_us_per_event"] = {
        "json_loads": round(decode_s / events * 1e6, 1),
        "store_apply": round(apply_s / events * 1e6, 1),
    }
    out["watch"] = rates
    out["event_bytes_mean"] = round(len(stream) / events)
    assert len(store.pods) == pods
    return out


# ------------------------------------------------------------------------------------ parent
def run_child(nodes: int, pods: int, events: int, mode: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    argv = [
        sys.executable,
        "-m",
        "benchmarks.kinds.cache_sync",
        "--child",
        mode,
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--events",
        str(events),
    ]
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"cache_sync child failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict[str, Any]], streamed: dict[str, Any] | None) -> dict[str, Any]:
    med = lambda f: round(statistics.median(f(r) for r in runs), 3)  # noqa: E731
    out: dict[str, Any] = {
        "sync_s": med(lambda r: r["sync_s"]),
        "sync_gc_s": med(lambda r: r["sync_gc_s"]),
        "nodes_decode_s": med(lambda r: r["timings_s"]["nodes_decode"]),
        "nodes_replace_s": med(lambda r: r["timings_s"]["nodes_replace"]),
        "pods_decode_s": med(lambda r: r["timings_s"]["pods_decode"]),
        "pods_replace_s": med(lambda r: r["timings_s"]["pods_replace"]),
        "nodes_list_s": med(lambda r: r["timings_s"]["nodes_list"]),
        "pods_list_s": med(lambda r: r["timings_s"]["pods_list"]),
        "rss_delta_mb": med(lambda r: r["rss_delta_mb"]),
        "peak_delta_mb": med(lambda r: r["peak_delta_mb"]),
    }
    if "watch" in runs[0]:
        out["events_per_second"] = med(lambda r: r["watch"]["one_event_per_chunk"]["per_second"])
        out["events_per_second_64KiB_chunks"] = med(lambda r: r["watch"]["64KiB_chunks"]["per_second"])
        out["json_loads_us_per_event"] = med(lambda r: r["watch"]["breakdown_us_per_event"]["json_loads"])
        out["store_apply_us_per_event"] = med(lambda r: r["watch"]["breakdown_us_per_event"]["store_apply"])
    if streamed is not None:
        out["streamed"] = {
            "rss_delta_mb": streamed["rss_delta_mb"],
            "peak_delta_mb": streamed["peak_delta_mb"],
            "sync_s": streamed["sync_s"],
            "sync_gc_s": streamed["sync_gc_s"],
        }
    return out


def figures(summary: dict[str, Any]) -> dict[str, float]:
    """The flat figures targets read: the summary's, the streamed run's as `streamed.NAME`."""
    out = {k: v for k, v in summary.items() if k != "streamed"}
    out |= {f"streamed.{k}": v for k, v in (summary.get("streamed") or {}).items()}
    return out


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """`rounds` runs, each a fresh subprocess, and the streamed run when the workload asks; the
    kind's result: `figures`, `arms` (the extender's code, in a subprocess), `detail`."""
    nodes, pods, params = workload.cluster.nodes, workload.cluster.pods, workload.workload
    runs = []
    for i in range(rounds):
        load = loadavg()
        result = run_child(nodes, pods, params.events, "watcher")
        result["loadavg_before"] = [round(x, 2) for x in load]
        runs.append(result)
        log(
            f"[{workload.name}] run {i + 1}/{rounds}: sync {result['sync_s']} s, RSS +{result['rss_delta_mb']} MB, "
            f"{result.get('watch', {}).get('one_event_per_chunk', {}).get('per_second', '-')} events/s (load "
            f"{load[0]:.2f})"
        )
    streamed = run_child(nodes, pods, 0, "streamed") if params.streamed else None
    summary = summarise(runs, streamed)
    return {
        "figures": figures(summary),
        "arms": {"extender": {"available": True, "mode": "the watcher's code, a fresh subprocess per run"}},
        "detail": {"nodes": nodes, "pods": pods, "runs": runs, "streamed": streamed, "summary": summary},
    }


def report(result: dict[str, Any]) -> str:
    detail = result["detail"]
    nodes, pods, runs, summary = detail["nodes"], detail["pods"], detail["runs"], detail["summary"]
    rows = []
    for i, r in enumerate(runs, 1):
        t = r["timings_s"]
        w = r.get("watch", {})
        rows.append(
            [
                i,
                t.get("nodes_list", "-"),
                t.get("pods_list", "-"),
                r["sync_s"],
                r["sync_gc_s"],
                r["rss_delta_mb"],
                r["peak_delta_mb"],
                w.get("one_event_per_chunk", {}).get("per_second", "-"),
                w.get("64KiB_chunks", {}).get("per_second", "-"),
            ]
        )
    lines = [
        f"Cache: {nodes:,} nodes + {pods:,} pods ({runs[0]['pod_list_bytes'] / 1e6:.0f} MB of pod list JSON)",
        table(
            [
                "run",
                "nodes list s",
                "pods list s",
                "sync s",
                "of which GC s",
                "RSS +MB",
                "peak +MB",
                "events/s",
                "events/s 64KiB",
            ],
            rows,
        ),
    ]
    if "json_loads_us_per_event" in summary:
        lines.append(
            f"per event: json.loads {summary['json_loads_us_per_event']} us + store.apply "
            f"{summary['store_apply_us_per_event']} us"
        )
    if "streamed" in summary:
        st = summary["streamed"]
        lines.append(
            f"streamed run (the sync alone): sync {st['sync_s']} s, RSS +{st['rss_delta_mb']} MB, "
            f"peak +{st['peak_delta_mb']} MB"
        )
    lines.append("(the targets below are judged on the medians of the runs)")
    return "\n".join(lines)


def child_main(argv: list[str] | None = None) -> int:
    """One run in this fresh process, its result as one JSON line on stdout: what run_child starts
    (`python -m benchmarks.kinds.cache_sync --child MODE ...`), not a command of its own."""
    parser = argparse.ArgumentParser(description="one cache_sync run in a fresh process (run_child's)")
    parser.add_argument("--child", choices=("watcher", "streamed"), required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--events", type=int, required=True)
    args = parser.parse_args(argv)
    print(json.dumps(_child(args.nodes, args.pods, args.events, args.child)))
    return 0


if __name__ == "__main__":
    sys.exit(child_main())

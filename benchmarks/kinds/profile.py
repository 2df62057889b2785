"""Kind `profile`: where a filter + prioritize pair spends its time, in-process.

The same app, store and payloads as the http_pair kind (prioritize carries the nodes filter
passed), called in-process (Flask's WSGI app through its test client, no gunicorn, no socket):
first `requests` iterations timed unprofiled in each round (the garbage collector's share measured
separately through gc.callbacks), then `requests` iterations once under cProfile, or pyinstrument
with `workload.pyinstrument: true` (pip install pyinstrument).

The shares are of the time inside Flask's `wsgi_app` (parse, verbs, encode, Flask itself). The
cyclic garbage collector is disabled while profiling, so its pauses are not smeared over whichever
function allocated (`workload.keep_gc: true` profiles with it on).

Figures: `ms_per_iteration_unprofiled` (median over rounds), `gc_ms_per_iteration_unprofiled`,
`gc_full_collections`, `gc_ms_per_full_collection` (the last round's), and under cProfile
`ms_per_iteration_profiled` (inside wsgi_app, the profiler's overhead included). The detail keeps
the top functions by self and by cumulative time (`by_self`, `by_cumulative`), or pyinstrument's
text tree (`pyinstrument`).

    python -m benchmarks run profile-5k
    python -m benchmarks run profile-1k-nodelist --set workload.pyinstrument=true
    python -m benchmarks run profile-1k --set workload.verb=filter --set workload.requests=200
"""

from __future__ import annotations

import cProfile
import gc
import io
import pstats
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import synthetic
from benchmarks.common import REPO, loadavg
from benchmarks.extender_app import NullBinder, add_floor_routes, build_store
from extender.server.app import create_app
from extender.server.effects import DiscardEvents
from extender.server.serve import ServeOptions
from extender.server.verbs import Verbs


def make_app(nodes: int, pods: int, policy: str = "full"):
    options = ServeOptions()
    store = build_store(nodes, pods, options, policy)
    verbs = Verbs(store, NullBinder(), DiscardEvents(), decision_deadline=options.decision_deadline)
    app = create_app(verbs, max_body=options.max_body)
    add_floor_routes(app, verbs)
    return app


def _where(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    path = Path(filename)
    try:
        filename = str(path.resolve().relative_to(REPO))
    except ValueError:
        parts = path.parts
        filename = "/".join(parts[-2:]) if len(parts) >= 2 else filename
    return f"{name} ({filename}:{line})"


def top(stats: pstats.Stats, total: float, key: str, limit: int) -> list[dict[str, Any]]:
    rows = []
    for func, (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": _where(func),
                "calls": nc,
                "self_s": tt,
                "cumulative_s": ct,
                "self_share": tt / total,
                "cumulative_share": ct / total,
            }
        )
    rows.sort(key=lambda r: r[key], reverse=True)
    return rows[:limit]


def _rounded(row: dict) -> dict:
    """A profile row as the JSON keeps it: times and shares to four places."""
    return dict(row, **{k: round(row[k], 4) for k in ("self_s", "cumulative_s", "self_share", "cumulative_share")})


def _pyinstrument_profiler() -> Any:
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise RuntimeError("workload.pyinstrument: true needs pyinstrument (pip install pyinstrument)") from None
    return Profiler(interval=0.0005)


def timed_unprofiled(work: Callable[[], None], requests: int) -> dict[str, Any]:
    """One round of `work` unprofiled: seconds per iteration and the collector's share."""
    gc_seconds = [0.0, 0.0, 0.0]
    gc_count = [0, 0, 0]
    mark = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            mark[0] = time.perf_counter()
        elif mark[0]:
            gc_seconds[info["generation"]] += time.perf_counter() - mark[0]
            gc_count[info["generation"]] += 1

    gc.callbacks.append(on_gc)
    try:
        t = time.perf_counter()
        work()
        plain = (time.perf_counter() - t) / requests
    finally:
        gc.callbacks.remove(on_gc)
    return {
        "ms_per_iteration": round(plain * 1000, 3),
        "gc_ms_per_iteration": round(sum(gc_seconds) * 1000 / requests, 3),
        "gc_full_collections": gc_count[2],
        "gc_ms_per_full_collection": round(gc_seconds[2] * 1000 / max(gc_count[2], 1), 1),
    }


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """`rounds` unprofiled timings of `requests` iterations, then one profiled run; the kind's
    result: `figures`, `arms` (the extender's code, in-process), `detail`."""
    params, cluster = workload.workload, workload.cluster
    pyinstrument = _pyinstrument_profiler() if params.pyinstrument else None  # fail before the setup
    started = time.perf_counter()
    app = make_app(cluster.nodes, cluster.pods, params.policy)
    _, shape = synthetic.POLICIES[params.policy]
    client = app.test_client()
    filter_body = synthetic.filter_args(cluster.nodes, node_list=params.node_list, group=synthetic.Group(**shape))
    answer = client.post("/filter", data=filter_body, content_type="application/json").data
    bodies = {
        "/filter": filter_body,
        "/prioritize": synthetic.prioritize_args(filter_body, answer),
    }  # as kube-scheduler
    decided = synthetic.decision_of(answer)
    paths = ["/filter", "/prioritize"] if params.verb == "both" else [f"/{params.verb}"]
    verbs = "+".join(p[1:] for p in paths)
    mode = "NodeList" if params.node_list else "NodeNames"
    log(
        f"[{workload.name}] app and store ready in {time.perf_counter() - started:.1f}s (in-process, Flask test client)"
    )

    def work() -> None:
        for _ in range(params.requests):
            for path in paths:
                response = client.post(path, data=bodies[path], content_type="application/json")
                assert response.status_code == 200, response.data[:200]

    for _ in range(params.warmup):
        for path in paths:
            client.post(path, data=bodies[path], content_type="application/json")
    per_round = []
    for r in range(rounds):
        load = loadavg()
        entry = {"round": r + 1, "loadavg_before": [round(x, 2) for x in load]} | timed_unprofiled(
            work, params.requests
        )
        per_round.append(entry)
        log(
            f"[{workload.name}] round {r + 1}/{rounds}: {cluster.nodes} nodes, {cluster.pods} pods, {mode}: "
            f"{entry['ms_per_iteration']:.2f} ms per {verbs} in-process (unprofiled, test client), "
            f"of which {entry['gc_ms_per_iteration']:.2f} ms in the garbage collector "
            f"({entry['gc_full_collections']} full collections in {params.requests} iterations, "
            f"{entry['gc_ms_per_full_collection']:.0f} ms each; {len(gc.get_objects()):,} tracked objects) "
            f"(load {load[0]:.2f})"
        )
    last = per_round[-1]
    figures: dict[str, float] = {
        "ms_per_iteration_unprofiled": round(statistics.median(e["ms_per_iteration"] for e in per_round), 3),
        "gc_ms_per_iteration_unprofiled": round(statistics.median(e["gc_ms_per_iteration"] for e in per_round), 3),
        "gc_full_collections": last["gc_full_collections"],
        "gc_ms_per_full_collection": last["gc_ms_per_full_collection"],
    }
    detail: dict[str, Any] = {
        "nodes": cluster.nodes,
        "pods": cluster.pods,
        "node_list": params.node_list,
        "policy": params.policy,
        "requests": params.requests,
        "verbs": paths,
        "decision": decided,
        "profiled_with_gc": params.keep_gc,
        "profiler": "pyinstrument" if pyinstrument is not None else "cProfile",
        "rounds": per_round,
    }

    profiler = cProfile.Profile() if pyinstrument is None else None
    collector_was_on = gc.isenabled()
    if not params.keep_gc:
        gc.collect()
        gc.disable()
    try:  # the collector as it was, whatever happens: the runner (and pytest) go on in this process
        if pyinstrument is not None:
            pyinstrument.start()
            try:
                work()
            finally:
                pyinstrument.stop()
            detail["pyinstrument"] = pyinstrument.output_text(unicode=False, color=False, show_all=False)
        elif profiler is not None:
            profiler.enable()
            try:
                work()
            finally:
                profiler.disable()
    finally:
        if collector_was_on:
            gc.enable()
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=io.StringIO())
        wsgi = [v for k, v in stats.stats.items() if k[2] == "wsgi_app"]  # type: ignore[attr-defined]
        total = wsgi[0][3] if wsgi else sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
        figures["ms_per_iteration_profiled"] = round(total / params.requests * 1000, 3)
        detail["by_self"] = [_rounded(r) for r in top(stats, total, "self_s", params.limit)]
        detail["by_cumulative"] = [_rounded(r) for r in top(stats, total, "cumulative_s", params.limit + 15)]
    return {"figures": figures, "arms": {"extender": {"available": True, "mode": "in-process"}}, "detail": detail}


def report(result: dict[str, Any]) -> str:
    d, f = result["detail"], result["figures"]
    verbs = "+".join(p[1:] for p in d["verbs"])
    requests = d["requests"]
    lines = [
        f"{d['nodes']} nodes, {d['pods']} pods, {'NodeList' if d['node_list'] else 'NodeNames'}, policy {d['policy']}: "
        f"{f['ms_per_iteration_unprofiled']:.2f} ms per {verbs} in-process (unprofiled, test client; median of "
        f"{len(d['rounds'])} rounds), of which {f['gc_ms_per_iteration_unprofiled']:.2f} ms in the garbage collector",
    ]
    if "pyinstrument" in d:
        lines += ["", d["pyinstrument"]]
        return "\n".join(lines)
    lines.append(
        f"\ncProfile, {requests} x {verbs}: {f['ms_per_iteration_profiled']:.2f} ms per iteration "
        f"inside wsgi_app (profiler overhead included)\n"
    )
    lines.append("by self time:")
    lines.append(f"  {'self %':>6} {'cum %':>6} {'calls/it':>9}  function")
    for r in d["by_self"]:
        lines.append(
            f"  {r['self_share'] * 100:6.1f} {r['cumulative_share'] * 100:6.1f} "
            f"{r['calls'] / requests:9.0f}  {r['function']}"
        )
    lines.append("\nby cumulative time:")
    lines.append(f"  {'cum %':>6} {'self %':>6} {'calls/it':>9}  function")
    for r in d["by_cumulative"]:
        lines.append(
            f"  {r['cumulative_share'] * 100:6.1f} {r['self_share'] * 100:6.1f} "
            f"{r['calls'] / requests:9.0f}  {r['function']}"
        )
    return "\n".join(lines)

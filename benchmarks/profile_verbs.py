"""Where a filter + prioritize request spends its time: the same app, store and payloads as
benchmarks/kinds/http_pair.py (prioritize carries the nodes filter passed), called in-process (Flask's WSGI app,
no gunicorn, no socket) under
cProfile, or pyinstrument when --pyinstrument is given (pip install pyinstrument).

The shares are of the time inside Flask's `wsgi_app` (parse, verbs, encode, Flask itself).
The cyclic garbage collector is measured separately (gc.callbacks, in the unprofiled loop) and
disabled while profiling, so its pauses are not smeared over whichever function allocated
(--keep-gc to profile with it on).

    python -m benchmarks.profile_verbs --nodes 5000 --pods 150000
    python -m benchmarks.profile_verbs --nodes 1000 --pods 10000 --node-list --pyinstrument
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import synthetic  # noqa: E402
from benchmarks.common import REPO, RESULTS, write_result  # noqa: E402
from benchmarks.extender_app import NullBinder, add_floor_routes, build_store  # noqa: E402
from extender.server.app import create_app  # noqa: E402
from extender.server.effects import DiscardEvents  # noqa: E402
from extender.server.serve import ServeOptions  # noqa: E402
from extender.server.verbs import Verbs  # noqa: E402


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


def _profile_name(args: argparse.Namespace) -> str:
    """profile_<nodes>[_nodelist][_<policy>]: the name of this run's result files."""
    mode = "_nodelist" if args.node_list else ""
    policy = "" if args.policy == "full" else f"_{args.policy}"
    return f"profile_{args.nodes}{mode}{policy}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--node-list", action="store_true")
    parser.add_argument(
        "--policy",
        choices=tuple(synthetic.POLICIES),
        default="full",
        help="full: the HTTP benchmark's policy; caps-spread: the e2e benchmark's (one StatefulSet of 100)",
    )
    parser.add_argument("--requests", type=int, default=100, help="filter+prioritize pairs profiled")
    parser.add_argument("--verb", choices=("both", "filter", "prioritize"), default="both")
    parser.add_argument("--limit", type=int, default=25)
    parser.add_argument("--pyinstrument", action="store_true")
    parser.add_argument("--keep-gc", action="store_true", help="leave the garbage collector on while profiling")
    parser.add_argument(
        "--out", type=Path, help="JSON output (default benchmarks/results/profile_<nodes>[_nodelist].json)"
    )
    args = parser.parse_args(argv)

    app = make_app(args.nodes, args.pods, args.policy)
    _, shape = synthetic.POLICIES[args.policy]
    client = app.test_client()
    filter_body = synthetic.filter_args(args.nodes, node_list=args.node_list, group=synthetic.Group(**shape))
    answer = client.post("/filter", data=filter_body, content_type="application/json").data
    bodies = {
        "/filter": filter_body,
        "/prioritize": synthetic.prioritize_args(filter_body, answer),
    }  # as kube-scheduler
    paths = ["/filter", "/prioritize"] if args.verb == "both" else [f"/{args.verb}"]

    def work() -> None:
        for _ in range(args.requests):
            for path in paths:
                response = client.post(path, data=bodies[path], content_type="application/json")
                assert response.status_code == 200, response.data[:200]

    for _ in range(5):  # warm-up
        for path in paths:
            client.post(path, data=bodies[path], content_type="application/json")
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
    t = time.perf_counter()
    work()
    plain = (time.perf_counter() - t) / args.requests
    gc.callbacks.remove(on_gc)
    gc_ms = sum(gc_seconds) * 1000 / args.requests
    print(
        f"{args.nodes} nodes, {args.pods} pods, {'NodeList' if args.node_list else 'NodeNames'}: "
        f"{plain * 1000:.2f} ms per {'+'.join(p[1:] for p in paths)} in-process (unprofiled, test client), "
        f"of which {gc_ms:.2f} ms in the garbage collector ({gc_count[2]} full collections in {args.requests} "
        "iterations, "
        f"{gc_seconds[2] * 1000 / max(gc_count[2], 1):.0f} ms each; {len(gc.get_objects()):,} tracked objects)"
    )
    if not args.keep_gc:
        gc.collect()
        gc.disable()

    if args.pyinstrument:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        profiler.start()
        work()
        profiler.stop()
        text = profiler.output_text(unicode=False, color=False, show_all=False)
        print(text)
        name = f"{_profile_name(args)}.pyinstrument.txt"
        path = (args.out.parent if args.out else RESULTS) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"text: {path}")
        return 0

    profiler = cProfile.Profile()
    profiler.enable()
    work()
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    wsgi = [v for k, v in stats.stats.items() if k[2] == "wsgi_app"]  # type: ignore[attr-defined]
    total = wsgi[0][3] if wsgi else sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    by_self = top(stats, total, "self_s", args.limit)
    by_cum = top(stats, total, "cumulative_s", args.limit + 15)
    print(
        f"\ncProfile, {args.requests} x {'+'.join(p[1:] for p in paths)}: {total / args.requests * 1000:.2f} ms "
        "per iteration "
        f"inside wsgi_app (profiler overhead included)\n"
    )
    print("by self time:")
    print(f"  {'self %':>6} {'cum %':>6} {'calls/it':>9}  function")
    for r in by_self:
        print(
            f"  {r['self_share'] * 100:6.1f} {r['cumulative_share'] * 100:6.1f} "
            f"{r['calls'] / args.requests:9.0f}  {r['function']}"
        )
    print("\nby cumulative time:")
    print(f"  {'cum %':>6} {'self %':>6} {'calls/it':>9}  function")
    for r in by_cum:
        print(
            f"  {r['cumulative_share'] * 100:6.1f} {r['self_share'] * 100:6.1f} "
            f"{r['calls'] / args.requests:9.0f}  {r['function']}"
        )
    name = _profile_name(args)
    path = write_result(
        name,
        {
            "benchmark": "profile_verbs",
            "nodes": args.nodes,
            "pods": args.pods,
            "node_list": args.node_list,
            "policy": args.policy,
            "requests": args.requests,
            "verbs": paths,
            "ms_per_iteration_unprofiled": round(plain * 1000, 3),
            "gc_ms_per_iteration_unprofiled": round(gc_ms, 3),
            "gc_full_collections": gc_count[2],
            "gc_ms_per_full_collection": round(gc_seconds[2] * 1000 / max(gc_count[2], 1), 1),
            "profiled_with_gc": args.keep_gc,
            "by_self": [_rounded(r) for r in by_self],
            "by_cumulative": [_rounded(r) for r in by_cum],
        },
        args.out,
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

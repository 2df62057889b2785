"""Kind `http_pair`: filter + prioritize round trips over HTTP, each arm sent the same payloads.

The extender arm is a real gunicorn server in a subprocess (benchmarks/extender_app.py:
ExtenderApplication's settings, one connection worker, a synthetic ClusterStore preloaded with
`store.replace`); one keep-alive client sends, sequentially, the exact ExtenderArgs kube-scheduler
sends (every node a candidate) for one pod with the full policy (caps per node and per zone,
ordinal zones, zone spread DoNotSchedule, required shard anti-affinity by zone, a label-selected
group of 10 StatefulSets with known replicas, so dead-end lookahead runs).

Each iteration sends what kube-scheduler sends per pod: POST /filter with every node as a
candidate, then POST /prioritize with the nodes that passed (kube-scheduler scores only feasible
nodes); every other arm gets the same two payloads (the noop arm: /noop twice, the HTTP + JSON
floor, and the filter payload once to /noop-raw, the HTTP floor; the gofloor arm: the Go
do-nothing extender). The arms' order rotates between iterations. Warm-up, then one run of
`requests` iterations per round; the server's full garbage collections are counted per round
(GET /bench/gc).

Figures (medians over rounds of each round's median / p90 / p99), named `ARM.REQUEST.STAT`, e.g.
`extender.pair.median`, `noop.pair.p99`, `gofloor.pair.median`; ratios, medians over rounds of
the ratio measured in the same round:
  ratio.pair_over_noop.median       (filter + prioritize) / (noop(filter) + noop(prioritize))
  ratio.pair_over_gofloor.median    the same over the Go floor's pair
  ratio.filter_over_noop.median, ratio.prioritize_over_gofloor.median, ... ; .p99 for the pair
An arm that cannot run (no `go`) is reported unavailable with its reason; the run goes on.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import arms as arms_mod
from benchmarks import synthetic
from benchmarks.arms import ArmUnavailable, Endpoint, Session
from benchmarks.common import REPO, loadavg, summary_ms, table

REQUESTS = ("filter", "prioritize", "pair")
SUPPORTS_BASE = True


def run_once(endpoints: list[Endpoint], filter_body: bytes, prioritize_body: bytes, iterations: int) -> dict:
    """`iterations` of every arm's filter + prioritize (and its extra requests), the arms' order
    rotating so that each takes each position in turn. Samples in seconds, keyed `arm.request`."""
    samples: dict[str, list[float]] = {}
    for e in endpoints:
        for request in REQUESTS + tuple(name for name, _ in e.extra):
            samples[f"{e.arm}.{request}"] = []

    def group(e: Endpoint) -> Callable[[], None]:
        def send() -> None:
            f, _ = e.client.post(e.filter_path, filter_body)
            p, _ = e.client.post(e.prioritize_path, prioritize_body)
            samples[f"{e.arm}.filter"].append(f)
            samples[f"{e.arm}.prioritize"].append(p)
            samples[f"{e.arm}.pair"].append(f + p)
            for name, path in e.extra:
                r, _ = e.client.post(path, filter_body)
                samples[f"{e.arm}.{name}"].append(r)

        return send

    groups = [group(e) for e in endpoints]
    gc.collect()
    gc.disable()  # the client's own collector must not land inside a timed request
    try:
        for i in range(iterations):
            shift = i % len(groups)
            for send in groups[shift:] + groups[:shift]:
                send()
    finally:
        gc.enable()
    return samples


def ratios(stats: dict[str, dict[str, float]]) -> dict[str, float]:
    """The extender over each floor arm measured in the same round, and the floors between them."""
    out: dict[str, float] = {}
    floors = [arm for arm in ("noop", "gofloor") if f"{arm}.pair" in stats]
    for floor in floors:
        for request in REQUESTS:
            out[f"{request}_over_{floor}.median"] = round(
                stats[f"extender.{request}"]["median"] / stats[f"{floor}.{request}"]["median"], 2
            )
        out[f"pair_over_{floor}.p99"] = round(stats["extender.pair"]["p99"] / stats[f"{floor}.pair"]["p99"], 2)
    if len(floors) == 2:  # the Python floor (a fixed 90-byte answer) against the Go floor (realistic answers)
        out["noop_pair_over_gofloor_pair.median"] = round(
            stats["noop.pair"]["median"] / stats["gofloor.pair"]["median"], 2
        )
    return out


def gc_delta(before: dict[str, Any], after: dict[str, Any], iterations: int) -> dict[str, Any]:
    """The server's garbage collections during a run, per iteration."""
    return {
        "gen2_collections": after["collections"][2] - before["collections"][2],
        "gen2_ms_total": round((after["seconds"][2] - before["seconds"][2]) * 1000, 1),
        "gen01_ms_total": round((sum(after["seconds"][:2]) - sum(before["seconds"][:2])) * 1000, 1),
        "gen2_ms_per_iteration": round((after["seconds"][2] - before["seconds"][2]) * 1000 / iterations, 2),
        "tracked_objects": after["tracked_objects"],
        "frozen_objects": after["frozen"],
    }


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """One workload, `rounds` runs of `requests` iterations over the arms; the kind's result:
    `figures` (flat name -> value, what targets read), `arms`, `detail`."""
    params, cluster = workload.workload, workload.cluster
    filter_body = synthetic.filter_args(cluster.nodes, node_list=params.node_list)
    session = Session(
        workload.name,
        workdir,
        cluster.nodes,
        cluster.pods,
        [] if params.gc_freeze else ["--no-gc-freeze"],
        tree=tree,
        filter_body=filter_body,
        log=log,
    )
    arm_info: dict[str, dict[str, Any]] = {}
    try:
        server, client = session.extender()
        _, filter_answer = client.post("/filter", filter_body)
        session.prioritize_body = prioritize_body = synthetic.prioritize_args(filter_body, filter_answer)
        _, prio_answer = client.post("/prioritize", prioritize_body)
        log(
            f"[{workload.name}] server ready in {session.ready_seconds:.1f}s (gunicorn, 1 connection worker); "
            f"filter request {len(filter_body):,} bytes, prioritize request {len(prioritize_body):,} bytes"
        )
        decision = synthetic.decision_of(filter_answer)
        decision |= {"filter_answer_bytes": len(filter_answer), "prioritize_answer_bytes": len(prio_answer)}
        if decision["passed"] == 0:
            raise RuntimeError(f"the benchmark pod passes no node: {decision}")
        endpoints = []
        for name in arms:
            try:
                endpoint = arms_mod.start(name, session)
            except ArmUnavailable as exc:
                log(f"[{workload.name}] arm {name}: unavailable ({exc})")
                arm_info[name] = {"available": False, "reason": str(exc)}
                continue
            session.on_close(endpoint.stop)
            endpoints.append(endpoint)
            arm_info[name] = {"available": True, **endpoint.info}
        run_once(endpoints, filter_body, prioritize_body, params.warmup)
        per_round = []
        for r in range(rounds):
            load = loadavg()
            gc_before = client.get_json("/bench/gc")
            samples = run_once(endpoints, filter_body, prioritize_body, params.requests)
            gc_after = client.get_json("/bench/gc")
            stats = {k: summary_ms(v) for k, v in samples.items()}
            entry = {
                "round": r + 1,
                "loadavg_before": [round(x, 2) for x in load],
                "stats": stats,
                "ratios": ratios(stats),
                "server_gc": gc_delta(gc_before, gc_after, params.requests),
            }
            per_round.append(entry)
            floors = "; ".join(
                f"{arm} pair median {stats[f'{arm}.pair']['median']:.2f} ms, "
                f"ratio {entry['ratios'][f'pair_over_{arm}.median']}x"
                for arm in ("noop", "gofloor")
                if f"{arm}.pair" in stats
            )
            log(
                f"[{workload.name}] round {r + 1}/{rounds}: pair median {stats['extender.pair']['median']:.2f} ms, "
                f"p99 {stats['extender.pair']['p99']:.2f} ms; {floors} (load {load[0]:.2f}); server: "
                f"{entry['server_gc']['gen2_collections']} full GCs, {entry['server_gc']['gen2_ms_total']:.0f} ms"
            )
        memory = server.worker_memory()
        ready_s = session.ready_seconds
    finally:
        session.close()
    summary = summarise(per_round)
    return {
        "figures": figures(summary),
        "arms": arm_info,
        "detail": {
            "nodes": cluster.nodes,
            "pods": cluster.pods,
            "mode": "NodeList (nodeCacheCapable: false)" if params.node_list else "NodeNames (nodeCacheCapable: true)",
            "gc_freeze": params.gc_freeze,
            "filter_request_bytes": len(filter_body),
            "prioritize_request_bytes": len(prioritize_body),
            "decision": decision,
            "server_ready_seconds": round(ready_s, 1),
            "worker_memory_kib": memory,
            "requests_per_round": params.requests,
            "rounds": per_round,
            "summary": summary,
        },
    }


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def mm(metric: str, field: str) -> float:
        return round(statistics.median(r["stats"][metric][field] for r in rounds), 3)

    out: dict[str, Any] = {
        metric: {
            "median": mm(metric, "median"),
            "p90": mm(metric, "p90"),
            "p99": mm(metric, "p99"),
            "worst_p99": round(max(r["stats"][metric]["p99"] for r in rounds), 3),
            "max": round(max(r["stats"][metric]["max"] for r in rounds), 3),
        }
        for metric in rounds[0]["stats"]
    }
    out["ratios"] = {k: round(statistics.median(r["ratios"][k] for r in rounds), 2) for k in rounds[0]["ratios"]}
    out["server_gc"] = {
        "gen2_collections_per_round": statistics.median(r["server_gc"]["gen2_collections"] for r in rounds),
        "gen2_ms_per_round": statistics.median(r["server_gc"]["gen2_ms_total"] for r in rounds),
        "gen2_ms_per_iteration": statistics.median(r["server_gc"]["gen2_ms_per_iteration"] for r in rounds),
        "tracked_objects": rounds[-1]["server_gc"]["tracked_objects"],
    }
    return out


def figures(summary: dict[str, Any]) -> dict[str, float]:
    """The flat figures targets and `--base` read: `arm.request.stat`, `ratio.name.stat`, `server_gc.name`."""
    out: dict[str, float] = {}
    for metric, stats in summary.items():
        if metric in ("ratios", "server_gc"):
            continue
        for stat in ("median", "p90", "p99", "max"):
            out[f"{metric}.{stat}"] = stats[stat]
    out |= {f"ratio.{name}": value for name, value in summary["ratios"].items()}
    out |= {f"server_gc.{name}": value for name, value in summary["server_gc"].items()}
    return out


def report(result: dict[str, Any]) -> str:
    detail = result["detail"]
    s = detail["summary"]
    rows = [
        [metric, m["median"], m["p90"], m["p99"], m["max"]]
        for metric, m in s.items()
        if metric not in ("ratios", "server_gc")
    ]
    lines = [
        f"{detail['nodes']:,} nodes, {detail['pods']:,} pods, {detail['mode']}; "
        f"ms (median of per-round medians; p90/p99: median over rounds; max: over all rounds)",
        table(["arm.request", "median", "p90", "p99", "max"], rows),
        "",
        table(["ratio (same round; median over rounds)", "value"], [[k, f"{v}x"] for k, v in s["ratios"].items()]),
        "",
    ]
    for arm, info in result["arms"].items():
        if not info.get("available"):
            lines.append(f"{arm}: unavailable ({info.get('reason')})")
    g = s["server_gc"]
    lines.append(
        f"server's full (gen 2) GCs per round of {detail['requests_per_round']} iterations: "
        f"{g['gen2_collections_per_round']} ({g['gen2_ms_per_round']} ms, {g['gen2_ms_per_iteration']} ms per "
        f"iteration); GC-tracked objects {g['tracked_objects']:,}"
    )
    return "\n".join(lines)

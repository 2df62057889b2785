"""Kind `group_scaling`: filter + prioritize over HTTP as the policy group grows (30 to 1,000,000 pods).

A decision's cost must not grow with the number of the group's pods still to come. For every group
size and policy variant (one row each), a gunicorn server as deployed (benchmarks/extender_app.py,
its store built in the worker by `build_store` below) and one keep-alive client sending what
kube-scheduler sends per pod: POST /filter with every node a candidate (NodeNames), then POST
/prioritize with those that passed, interleaved with the /noop floor on the same payloads.

The cluster, the shape rule and the policies are BENCHMARKS.md's section 5: `cluster.nodes` nodes
round-robin over 3 zones; S StatefulSets x R replicas, R the largest divisor of N that is <=
sqrt(10 N / 3) and <= 3 x the smallest zone's nodes (so hard zone spread with anti-affinity by
hostname stays feasible: 1,000,000 -> 1,250 x 800), or `workload.shapes`; each set's lowest
ordinals placed (`placed_fraction`, at most `max_placed` in all), every rule checked by `plan()`;
the pod under test is set 0's next ordinal. Variants: hard-spread (zone spread DoNotSchedule) and
no-hard-spread (ScheduleAnyway), both with a node cap, a zone cap below 1/2 and shard anti-affinity.

Per row: median and p99 of the pair and of the floor pair, their ratio, HTTP errors (counted, not
raised), and from /metrics after the row the fallbacks at the deadline (every request of the row)
and the store lock's hold. A row that cannot fit its iterations in `row_budget_s` (judged from its
first pair) runs fewer and says so; a request past `request_timeout_s` ends the row there. The
targets (the workload's) are judged over the rows they name.

    python -m benchmarks run group-scaling                # 5 sizes x 2 variants, 200 iterations; ~5 min
    python -m benchmarks run group-scaling-quick          # sizes 30, 3,000, 30,000, 1,000,000; < 1 min
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import synthetic
from benchmarks.arms.server import Client, Server, free_port
from benchmarks.common import REPO, loadavg, read_histograms, sum_series, summary_ms, table, verdict

log = logging.getLogger("benchmarks.kinds.group_scaling")

SIZES = (30, 300, 3_000, 30_000, 1_000_000)  # benchmarks/workloads/group-scaling.yaml's
VARIANTS = ("hard-spread", "no-hard-spread")
MAX_PLACED = 150_000  # Kubernetes' documented limit of pods per cluster
FALLBACK_METRIC = "extender_decision_fallbacks_total"
LOCK_HOLD_METRIC = "extender_store_lock_hold_seconds"


# ------------------------------------------------------------------------------------ the cluster
@dataclass(frozen=True)
class Shape:
    size: int
    sets: int
    replicas: int
    placed_per_set: int
    nodes: int

    @property
    def placed(self) -> int:
        return self.sets * self.placed_per_set

    @property
    def to_come(self) -> int:
        """Pods of the group still to come after the pod under test."""
        return self.size - self.placed - 1

    @property
    def node_cap(self) -> int:
        return max(2, math.ceil(1.25 * self.size / self.nodes))

    @property
    def group(self) -> synthetic.Group:
        # synthetic's group: the pod under test is (placed_shards, placed_in_next) = set 0, ordinal P
        return synthetic.Group(
            shards=self.sets, replicas=self.replicas, placed_shards=0, placed_in_next=self.placed_per_set
        )


def zone_nodes(nodes: int) -> dict[str, list[str]]:
    layout = synthetic.node_layout(nodes)
    return {z: [n for n, zz in layout if zz == z] for z in synthetic.ZONES}


def shape(
    size: int,
    nodes: int,
    *,
    placed_fraction: float = 0.6,
    max_placed: int = MAX_PLACED,
    override: tuple[int, int] | None = None,
) -> Shape:
    """S sets x R replicas for a group of `size` pods (the rule in the module docstring)."""
    if override is not None:
        sets, replicas = override
        if sets * replicas != size:
            raise ValueError(f"--shape {size}={sets}x{replicas}: {sets} x {replicas} != {size}")
    else:
        bound = min(math.isqrt(10 * size // 3), 3 * min(len(v) for v in zone_nodes(nodes).values()))
        replicas = max(d for d in range(1, max(1, bound) + 1) if size % d == 0)
        sets = size // replicas
    if replicas > nodes:
        raise ValueError(f"a set of {replicas} replicas cannot keep anti-affinity by hostname on {nodes} nodes")
    per_set = min(int(placed_fraction * replicas), max_placed // sets, replicas - 1)
    return Shape(size, sets, replicas, max(0, per_set), nodes)


def policy(variant: str, sh: Shape) -> dict[str, Any]:
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    return {
        "group": {"selector": {"matchLabels": {"cluster": synthetic.CLUSTER}}},
        "caps": [
            {"topologyKey": synthetic.HOST, "max": sh.node_cap},
            {"topologyKey": synthetic.ZONE, "fraction": "1/2", "comparison": "LessThan"},
        ],
        "spread": [
            {
                "topologyKey": synthetic.ZONE,
                "maxSkew": 1,
                "whenUnsatisfiable": "DoNotSchedule" if variant == "hard-spread" else "ScheduleAnyway",
            }
        ],
        "shardAntiAffinity": [{"topologyKey": synthetic.HOST, "mode": "Required"}],
    }


def plan(sh: Shape) -> list[tuple[int, int, str]]:
    """(set, ordinal, node) for every placed pod, obeying the hard-spread policy (checked)."""
    by_zone = zone_nodes(sh.nodes)
    zones = synthetic.ZONES
    cap = sh.node_cap
    load: dict[str, int] = {}
    used: list[set[str]] = [set() for _ in range(sh.sets)]
    pointer = {z: 0 for z in zones}
    out = []
    for o in range(sh.placed_per_set):  # round by round: every set gets its next ordinal
        for s in range(sh.sets):
            zone = zones[(s + o) % len(zones)]
            names = by_zone[zone]
            start = pointer[zone]
            for step in range(len(names)):
                node = names[(start + step) % len(names)]
                if load.get(node, 0) < cap and node not in used[s]:
                    break
            else:
                raise RuntimeError(f"no node left in {zone} for set {s} ordinal {o} (cap {cap})")
            pointer[zone] = (start + step + 1) % len(names)
            load[node] = load.get(node, 0) + 1
            used[s].add(node)
            out.append((s, o, node))
    _check(sh, out)
    return out


def _check(sh: Shape, placed: list[tuple[int, int, str]]) -> None:
    zone_of = {n: z for n, z in synthetic.node_layout(sh.nodes)}
    per_node: dict[str, int] = {}
    per_zone = {z: 0 for z in synthetic.ZONES}
    seen: set[tuple[int, str]] = set()
    for s, _, node in placed:
        per_node[node] = per_node.get(node, 0) + 1
        per_zone[zone_of[node]] += 1
        if (s, node) in seen:
            raise AssertionError(f"set {s} twice on {node}")
        seen.add((s, node))
    if per_node and max(per_node.values()) > sh.node_cap:
        raise AssertionError("node cap exceeded")
    if max(per_zone.values()) - min(per_zone.values()) > 1:
        raise AssertionError(f"zone skew > 1: {per_zone}")
    if max(per_zone.values()) >= sh.size / 2 and placed:
        raise AssertionError(f"zone cap (fewer than 1/2 of {sh.size}) exceeded: {per_zone}")


def build_records(sh: Shape, variant: str, *, background_pods: int = 0) -> dict[str, list[Any]]:
    """Parsed records per store kind. Pods of the group are made from one parsed template (each
    field set as parse_pod would set it; `same_as_parser` checks a sample): 150,000 pods in ~1 s
    instead of ~5 s through raw JSON and parse_pod."""
    from extender.state.objects import parse_node, parse_pod, parse_policy, parse_statefulset

    group = sh.group
    template = parse_pod(synthetic.group_pod(group, 0, 0, "node-a1", rich=False))
    cls = type(template)
    base = {f.name: getattr(template, f.name) for f in dataclasses.fields(template)}
    for name in ("uid", "name", "labels", "node", "shard", "ordinal", "claims"):
        base.pop(name, None)
    uid = synthetic._uid
    pods = []
    for s, o, node in plan(sh):
        sts = group.sts_name(s)
        name = f"{sts}-{o}"
        pods.append(
            cls(
                **base,
                uid=uid("grp", s * 1000 + o),
                name=name,
                node=node,
                shard=sts,
                ordinal=o,
                labels=synthetic.group_labels(sts, o),
                claims=(f"data-{name}",),
            )
        )
    layout = synthetic.node_layout(sh.nodes)
    pods.extend(
        parse_pod(synthetic.background_pod(i, layout[i % sh.nodes][0], rich=False)) for i in range(background_pods)
    )
    pods.append(parse_pod(synthetic.pending_pod(group)))
    return {
        "nodes": [parse_node(n) for n in synthetic.nodes(sh.nodes, not_ready_every=0)],
        "pods": pods,
        "statefulsets": [parse_statefulset(synthetic.statefulset_obj(group, s)) for s in range(sh.sets)],
        "claims": [],
        "volumes": [],
        "policies": [parse_policy(synthetic.policy_obj(policy(variant, sh)))],
    }


def same_as_parser(sh: Shape, records: dict[str, list[Any]], sample: int = 5) -> bool:
    """The fast group records equal parse_pod of the same pods' JSON."""
    from extender.state.objects import parse_pod

    placed = records["pods"][: sh.placed]
    step = max(1, len(placed) // sample)
    for record in placed[::step]:
        s, o = int(record.shard.rsplit("-", 1)[1]), record.ordinal
        if record != parse_pod(synthetic.group_pod(sh.group, s, o, record.node, rich=False)):
            return False
    return True


def build_store(
    options: Any,
    *,
    size: int,
    variant: str,
    nodes: int,
    placed_fraction: float = 0.6,
    max_placed: int = MAX_PLACED,
    shape_override: list[int] | None = None,
    background_pods: int = 0,
):
    """The store of one row, built inside the gunicorn worker (benchmarks/extender_app.py
    --store-builder benchmarks.kinds.group_scaling:build_store --store-args JSON). Returns (store, info)."""
    from extender.state.reservations import Reservations
    from extender.state.store import KINDS, ClusterStore

    started = time.perf_counter()
    sh = shape(
        size,
        nodes,
        placed_fraction=placed_fraction,
        max_placed=max_placed,
        override=tuple(shape_override) if shape_override else None,
    )  # type: ignore[arg-type]
    records = build_records(sh, variant, background_pods=background_pods)
    built = time.perf_counter()
    store = ClusterStore(Reservations(options.tentative_ttl, options.committed_ttl))
    for kind in KINDS:
        store.replace_records(kind, records.get(kind, []))
    loaded = time.perf_counter()
    info = {
        "records_seconds": round(built - started, 2),
        "store_seconds": round(loaded - built, 2),
        "stats": store.stats(),
        "shape": dataclasses.asdict(sh),
        "policy": policy(variant, sh),
    }
    log.info("group_scaling store: %s", json.dumps(info))
    return store, info


# ------------------------------------------------------------------------------------ the client
SAMPLES = ("pair", "filter", "prioritize", "floor_pair", "error_pair")


def run_iterations(
    client: Client,
    filter_body: bytes,
    prioritize_body: bytes,
    iterations: int,
    errors: dict[str, int],
    *,
    verbs: bool = True,
    floor_arm: bool = True,
) -> dict[str, list[float]]:
    """`iterations` of: filter + prioritize, and the floor (/noop with both payloads), order
    alternating. A pair with a non-200 answer is counted in `errors` (by path and status) and
    timed apart, in "error_pair"."""
    samples: dict[str, list[float]] = {k: [] for k in SAMPLES}
    gc.collect()
    gc.disable()  # the client's own collector must not land inside a timed request
    try:
        for i in range(iterations):
            if client.timed_out:
                errors["stopped after a client timeout"] = 1
                break

            def pair() -> None:
                if not verbs:
                    return
                f, fs, _ = client.send("/filter", filter_body)
                p, ps, _ = client.send("/prioritize", prioritize_body)
                if fs == 200 and ps == 200:
                    samples["filter"].append(f)
                    samples["prioritize"].append(p)
                    samples["pair"].append(f + p)
                else:
                    samples["error_pair"].append(f + p)  # how long a failing pair took (not in "pair")
                for path, status in (("filter", fs), ("prioritize", ps)):
                    if status != 200:
                        errors[f"{path} {status or 'timeout'}"] = errors.get(f"{path} {status or 'timeout'}", 0) + 1

            def floor() -> None:
                if not floor_arm:
                    return
                a, as_, _ = client.send("/noop", filter_body)
                b, bs, _ = client.send("/noop", prioritize_body)
                if as_ == 200 and bs == 200:
                    samples["floor_pair"].append(a + b)
                else:
                    errors["noop"] = errors.get("noop", 0) + 1

            if i % 2 == 0:
                pair()
                floor()
            else:
                floor()
                pair()
    finally:
        gc.enable()
    return samples


# ------------------------------------------------------------------------------------ /metrics
def fallbacks(text: str) -> dict[str, Any]:
    """The fallback counter summed over its series; `exported` false when /metrics has no such family."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        if family.name in (FALLBACK_METRIC, FALLBACK_METRIC.removesuffix("_total")):
            samples = [s for s in family.samples if s.name == FALLBACK_METRIC]
            by_labels = {",".join(f"{k}={v}" for k, v in sorted(s.labels.items())) or "-": s.value for s in samples}
            return {"exported": True, "total": int(sum(by_labels.values())), "by_labels": by_labels}
    return {"exported": False, "total": 0, "by_labels": {}}


def lock_hold(text: str) -> dict[str, Any] | None:
    """The store lock's holds over every holder: count, mean, and the upper bounds of the buckets
    that hold the 99th percentile and the longest hold (None: beyond the last bucket)."""
    series = list(read_histograms(text, LOCK_HOLD_METRIC).values())
    if not series:
        return None
    h = sum_series(series)
    if h.count <= 0:
        return {"count": 0}

    def le_ms(q: float) -> float | None:
        le = next(le for le, n in h.buckets if n >= q * h.count)
        return None if math.isinf(le) else round(le * 1000, 3)

    top = le_ms(1.0)
    return {
        "count": int(h.count),
        "mean_ms": round(h.total / h.count * 1000, 3),
        "p99_bucket_le_ms": le_ms(0.99),
        "max_bucket_le_ms": top,
        "beyond_last_bucket": top is None,
    }


# ------------------------------------------------------------------------------------ one row
def measure_row(
    variant: str,
    sh: Shape,
    *,
    iterations: int,
    warmup: int,
    workdir: Path,
    row_budget: float,
    placed_fraction: float,
    max_placed: int,
    background_pods: int = 0,
    request_timeout: float = 120.0,
    floor_arm: bool = True,
    tree: Path = REPO,
    log_line=print,
) -> dict[str, Any]:
    store_args = {
        "size": sh.size,
        "variant": variant,
        "nodes": sh.nodes,
        "placed_fraction": placed_fraction,
        "max_placed": max_placed,
        "shape_override": [sh.sets, sh.replicas],
        "background_pods": background_pods,
    }
    name = f"{variant}-{sh.size}"
    port = free_port()
    filter_body = synthetic.filter_args(sh.nodes, group=sh.group)
    server = Server(
        sh.nodes,
        0,
        port,
        workdir / f"server-{name}.log",
        ["--store-builder", "benchmarks.kinds.group_scaling:build_store", "--store-args", json.dumps(store_args)],
        tree=tree,
    )
    errors: dict[str, int] = {}
    notes: list[str] = []
    try:
        ready_s = server.wait_ready()
        memory_ready = server.worker_memory()
        client = Client(port, request_timeout)
        _, status, raw = client.send("/bench/info")
        info = json.loads(raw) if status == 200 else {}
        # The first pair: the prioritize payload is the filter's passing nodes.
        first_f, fs, filter_answer = client.send("/filter", filter_body)
        decision: dict[str, Any] = {"filter_status": fs, "first_filter_ms": round(first_f * 1000, 1)}
        if fs == 200:
            decision |= synthetic.decision_of(filter_answer)
            prioritize_body = synthetic.prioritize_args(filter_body, filter_answer)
        else:
            decision["answer"] = filter_answer[:300].decode(errors="replace")
            notes.append(f"first filter answered {fs or 'timeout'}; prioritize sent every node")
            prioritize_body = filter_body
        if client.timed_out:  # the server is still on it: a prioritize would only queue behind
            first_p, ps = 0.0, 0
        else:
            first_p, ps, _ = client.send("/prioritize", prioritize_body)
        probe_s = first_f + first_p  # the first pair: a probe of how long this row's pairs take
        decision.update(prioritize_status=ps, first_pair_ms=round(probe_s * 1000, 1))
        planned = iterations
        if client.timed_out:
            warmup = iterations = 0
            notes.append(f"the first pair timed out (--request-timeout {client.timeout:g} s): not measured further")
        elif probe_s * (warmup + iterations) > row_budget:
            warmup = 0  # the probe warmed the server up
            iterations = min(iterations, int(row_budget / probe_s))
            notes.append(
                f"iterations cut from {planned} to {iterations or 'the first pair alone'}, no warm-up: the first pair "
                f"took {probe_s * 1000:.0f} ms (--row-budget {row_budget:g} s)"
            )
        run_iterations(client, filter_body, prioritize_body, warmup, {}, floor_arm=floor_arm)
        load = loadavg()
        started = time.perf_counter()
        if iterations:
            samples = run_iterations(client, filter_body, prioritize_body, iterations, errors, floor_arm=floor_arm)
            iterations = len(samples["pair"]) + len(samples["error_pair"])  # fewer after a timeout
        else:  # too slow to repeat: the row's figures are the first pair's, beside a few floor pairs
            timed_out, client.timed_out = client.timed_out, False
            if timed_out:  # a fresh server would answer the floor; this one is busy: no floor figures
                samples = {k: [] for k in SAMPLES}
            else:
                samples = run_iterations(client, filter_body, prioritize_body, 5, errors, verbs=False)
            if fs == 200 and ps == 200:
                samples["filter"].append(first_f)
                samples["prioritize"].append(first_p)
                samples["pair"].append(probe_s)
            else:
                samples["error_pair"].append(probe_s)
                for path, status in (("filter", fs), ("prioritize", ps)):
                    if status != 200:
                        errors[f"{path} {status or 'timeout'}"] = errors.get(f"{path} {status or 'timeout'}", 0) + 1
            iterations = 1
        run_s = time.perf_counter() - started
        metrics, info_after, metrics_read = "", {}, False
        if not client.timed_out and not timed_out_probe(decision):
            _, status, raw = client.send("/metrics")
            metrics_read = status == 200
            metrics = raw.decode() if metrics_read else ""
            _, status, raw = client.send("/bench/info")
            info_after = json.loads(raw) if status == 200 else {}
        client.close()
        memory = server.worker_memory()
    finally:
        server.stop()
    server_errors = sorted(
        set(re.findall(r"^(\w+(?:Error|Exception)): (.{0,200})$", server.log_path.read_text(errors="replace"), re.M))
    )
    stats = {k: summary_ms(v) for k, v in samples.items() if v}
    fb = fallbacks(metrics)
    if not metrics_read:
        fb["unread"] = True
        notes.append("/metrics not read: the server was still busy after a client timeout")
    elif not fb["exported"]:
        notes.append(f"metric not exported: {FALLBACK_METRIC} (fallbacks reported as 0)")
    row: dict[str, Any] = {
        "variant": variant,
        "size": sh.size,
        "sets": sh.sets,
        "replicas": sh.replicas,
        "nodes": sh.nodes,
        "node_cap": sh.node_cap,
        "placed": sh.placed,
        "placed_per_set": sh.placed_per_set,
        "to_come": sh.to_come,
        "background_pods": background_pods,
        "pod_under_test": f"{synthetic.GROUP_NS}/{sh.group.sts_name(0)}-{sh.placed_per_set}",
        "policy": policy(variant, sh),
        "server_ready_seconds": round(ready_s, 1),
        "store_build": {k: info.get(k) for k in ("records_seconds", "store_seconds", "stats")},
        "reservations_after": (info_after.get("live_stats") or {}).get("reservations"),
        "worker_memory_kib": memory,
        "worker_memory_ready_kib": memory_ready,
        "server_errors": [f"{kind}: {text}" for kind, text in server_errors][:5],
        "filter_request_bytes": len(filter_body),
        "prioritize_request_bytes": len(prioritize_body),
        "decision": decision,
        "warmup": warmup,
        "iterations": iterations,
        "iterations_requested": planned,
        # every filter/prioritize of the row, probe and warm-up included: what the /metrics figures cover
        "requests_sent": 2 * (1 + warmup + iterations) if iterations else 2,
        "run_seconds": round(run_s, 2),
        "loadavg_before": [round(x, 2) for x in load],
        "errors": errors,
        "error_count": sum(errors.values()),
        "stats_ms": stats,
        "fallbacks": fb,
        "lock_hold": lock_hold(metrics),
        "notes": notes,
    }
    row["ratio_median"] = _ratio(stats, "median")
    row["ratio_p99"] = _ratio(stats, "p99")
    row["figures"] = row_figures(row)
    pair = stats.get("pair", {})
    log_line(
        f"[{name}] {sh.sets}x{sh.replicas}, placed {sh.placed:,}, to come {sh.to_come:,}: ready in {ready_s:.1f}s "
        f"(store {info.get('records_seconds')}+{info.get('store_seconds')}s), "
        f"pair median {pair.get('median', float('nan')):.2f} ms p99 {pair.get('p99', float('nan')):.2f} ms, "
        f"floor median {stats.get('floor_pair', {}).get('median', float('nan')):.2f} ms, {iterations} iterations, "
        f"{row['error_count']} errors, fallbacks {fb['total'] if fb['exported'] else 'n/a'}, "
        f"RSS {memory.get('VmRSS', 0) // 1024} MB"
    )
    for note in notes:
        if not note.startswith("metric not exported"):
            log_line(f"[{name}]   note: {note}")
    return row


def timed_out_probe(decision: dict[str, Any]) -> bool:
    return decision.get("filter_status") == 0 or decision.get("prioritize_status") == 0


def _ratio(stats: dict[str, dict[str, float]], field: str) -> float:
    if "pair" not in stats or "floor_pair" not in stats or not stats["floor_pair"][field]:
        return float("nan")
    return round(stats["pair"][field] / stats["floor_pair"][field], 2)


def row_figures(row: dict[str, Any]) -> dict[str, float | None]:
    """What a target reads in a row (None: not measured, e.g. fallbacks not exported or unread)."""
    stats = row["stats_ms"]
    fb = row["fallbacks"]
    return {
        "pair.median": stats.get("pair", {}).get("median"),
        "pair.p99": stats.get("pair", {}).get("p99"),
        "floor_pair.median": stats.get("floor_pair", {}).get("median"),
        "floor_pair.p99": stats.get("floor_pair", {}).get("p99"),
        "ratio.median": None if row["ratio_median"] != row["ratio_median"] else row["ratio_median"],
        "ratio.p99": None if row["ratio_p99"] != row["ratio_p99"] else row["ratio_p99"],
        "fallbacks": fb["total"] if fb["exported"] and not fb.get("unread") else None,
        "errors": row["error_count"],
    }


def applies(target: Any, row: dict[str, Any]) -> bool:
    return (target.variants is None or row["variant"] in target.variants) and (
        target.max_size is None or row["size"] <= target.max_size
    )


def row_verdicts(targets: list[Any], row: dict[str, Any]) -> list[tuple[Any, float | None, str]]:
    out = []
    for t in targets:
        if not applies(t, row):
            continue
        value = row["figures"].get(t.figure)
        higher = t.min is not None
        bound = t.min if higher else t.max
        out.append((t, value, "no figure" if value is None else verdict(value, bound, higher_is_better=higher)))
    return out


def judge(targets: list[Any], result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target over the rows it applies to: its worst value, and met only if every row meets it."""
    rows = result["detail"]["rows"]
    out = []
    for t in targets:
        higher = t.min is not None
        judged = [(r, *row_verdicts([t], r)[0][1:]) for r in rows if applies(t, r)]
        values = [v for _, v, _ in judged if v is not None]
        worst = (min(values) if higher else max(values)) if values else None
        verdicts = {f"{r['variant']}/{r['size']}": v for r, _, v in judged}
        if not judged:
            overall = "no row"
        elif "MISSED" in verdicts.values():
            overall = "MISSED"
        elif "no figure" in verdicts.values():
            overall = "no figure"
        else:
            overall = "met"
        entry: dict[str, Any] = {"figure": t.figure, "min" if higher else "max": t.min if higher else t.max}
        entry |= {"rows": describe_rows(t), "value": worst, "verdict": overall, "per_row": verdicts}
        if t.note:
            entry["note"] = t.note
        out.append(entry)
    for r in rows:
        r["verdict"] = "; ".join(f"{t.figure} {v}" for t, _, v in row_verdicts(targets, r)) or "no target"
    return out


def describe_rows(target: Any) -> str:
    parts = []
    if target.variants is not None:
        parts.append(",".join(target.variants))
    if target.max_size is not None:
        parts.append(f"size <= {target.max_size:,}")
    return " ".join(parts) or "every row"


# ------------------------------------------------------------------------------------ report
MAIN_COLUMNS = "variant|size|sets x replicas|placed|to come|iters|errors|pair median|pair p99|floor median|"
MAIN_COLUMNS += "floor p99|ratio|fallbacks|verdict"
SETUP_COLUMNS = "variant|size|node cap|passed|first pair ms|ready s|records s|store s|RSS ready MB|RSS MB|peak MB|"
SETUP_COLUMNS += "lock hold p99 ms|lock hold max ms"


def report(result: dict[str, Any]) -> str:
    rows = result["detail"]["rows"]

    def ms(row: dict[str, Any], metric: str, field: str) -> float:
        return row["stats_ms"].get(metric, {}).get(field, float("nan"))

    main = table(
        MAIN_COLUMNS.split("|"),
        [
            [
                r["variant"],
                f"{r['size']:,}",
                f"{r['sets']:,} x {r['replicas']:,}",
                f"{r['placed']:,}",
                f"{r['to_come']:,}",
                r["iterations"],
                r["error_count"],
                ms(r, "pair", "median"),
                ms(r, "pair", "p99"),
                ms(r, "floor_pair", "median"),
                ms(r, "floor_pair", "p99"),
                _x(r["ratio_median"]),
                r["fallbacks"]["total"] if r["fallbacks"]["exported"] else "n/a",
                r.get("verdict", "-"),
            ]
            for r in rows
        ],
    )
    setup = table(
        SETUP_COLUMNS.split("|"),
        [
            [
                r["variant"],
                f"{r['size']:,}",
                r["node_cap"],
                r["decision"].get("passed", "-"),
                r["decision"]["first_pair_ms"],
                r["server_ready_seconds"],
                r["store_build"].get("records_seconds"),
                r["store_build"].get("store_seconds"),
                r["worker_memory_ready_kib"].get("VmRSS", 0) // 1024,
                r["worker_memory_kib"].get("VmRSS", 0) // 1024,
                r["worker_memory_kib"].get("VmHWM", 0) // 1024,
                (r["lock_hold"] or {}).get("p99_bucket_le_ms", "-"),
                (r["lock_hold"] or {}).get("max_bucket_le_ms", "-"),
            ]
            for r in rows
        ],
    )
    return "\n".join(
        [
            "filter + prioritize pair over HTTP, ms (floor: /noop with the same two payloads, same run)",
            main,
            "",
            "setup (store built inside the gunicorn worker) and the store lock, from /metrics when exported:",
            setup,
            *notes(result),
            f"wall time {result['detail']['wall_seconds']:.0f} s",
        ]
    )


def _x(ratio: float) -> str:
    return "-" if ratio != ratio else f"{ratio}x"


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """Every size x variant of the workload, once per round, each row on its own server."""
    params, cluster = workload.workload, workload.cluster
    shapes = [
        shape(
            n,
            cluster.nodes,
            placed_fraction=params.placed_fraction,
            max_placed=params.max_placed,
            override=tuple(params.shapes[n]) if n in params.shapes else None,  # type: ignore[arg-type]
        )
        for n in params.sizes
    ]
    log(
        f"cluster: {cluster.nodes} nodes in 3 zones, all Ready, {cluster.background_pods} background pods; placed: "
        f"{params.placed_fraction:g} of each set's ordinals, at most {params.max_placed:,} in all; "
        f"{params.iterations} iterations per row ({params.warmup} warm-up, row budget {params.row_budget_s:g} s)"
    )
    wall = time.perf_counter()
    rows = []
    for r in range(rounds):
        for sh in shapes:
            for variant in params.variants:
                row = measure_row(
                    variant,
                    sh,
                    iterations=params.iterations,
                    warmup=params.warmup,
                    workdir=workdir,
                    row_budget=params.row_budget_s,
                    placed_fraction=params.placed_fraction,
                    max_placed=params.max_placed,
                    background_pods=cluster.background_pods,
                    request_timeout=params.request_timeout_s,
                    floor_arm="noop" in arms,
                    tree=tree,
                    log_line=log,
                )
                rows.append({"round": r + 1, **row})
    figures = {
        f"{row['variant']}/{row['size']}.{name}" + (f"@{row['round']}" if rounds > 1 else ""): value
        for row in rows
        for name, value in row["figures"].items()
        if value is not None
    }
    return {
        "figures": figures,
        "arms": {"extender": {"available": True}} | ({"noop": {"available": True}} if "noop" in arms else {}),
        "detail": {"wall_seconds": round(time.perf_counter() - wall, 1), "rows": rows},
    }


def notes(result: dict[str, Any]) -> list[str]:
    rows = result["detail"]["rows"]
    lines = []
    if any(not r["fallbacks"]["exported"] and not r["fallbacks"].get("unread") for r in rows):
        lines.append(f"note: metric not exported: the server has no {FALLBACK_METRIC}; fallbacks reported as 0 (n/a)")
    for r in rows:
        if r["error_count"]:
            e = r["stats_ms"].get("error_pair", {})
            lines.append(
                f"errors in {r['variant']}/{r['size']:,}: {r['errors']}; a failing pair took "
                f"{e.get('median', float('nan')):.0f} ms (median); server: "
                f"{'; '.join(r['server_errors']) or r['decision'].get('answer', '')[:160]!r}"
            )
    return lines

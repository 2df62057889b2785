"""End to end on the local control plane: pods per second, our scheduler + extender against the
default scheduler with the equivalent native topologySpreadConstraints, in the same run.

One LocalCluster (pinned etcd, kube-apiserver, kube-controller-manager, default kube-scheduler,
our kube-scheduler with the extender served by gunicorn, kwok), 500 kwok nodes over 3 zones.
Each round creates, in a fresh namespace, 10 StatefulSets x 100 replicas (Parallel):

- native:   schedulerName default-scheduler, pod spec + `translate(spec, group_size=100)`'s
            native fragment (topologySpreadConstraints);
- extender: schedulerName placement-scheduler, the policy inline on the pod template.

Policy (group = one StatefulSet, the default): caps kubernetes.io/hostname max 1, spread
topology.kubernetes.io/zone maxSkew 1 DoNotSchedule. Sides alternate (native, extender, native,
extender, ...). The time of a round runs from the first StatefulSet create call until a watch
on the namespace's pods has seen all 1,000 with spec.nodeName (read from the API server).

kube-controller-manager's client is raised to --kube-api-qps 500 / burst 1000 (--kcm-qps; 0 =
its default 20/30): at the default the StatefulSet controller creates pods at ~20/s, which
would cap both sides at the same rate and hide the schedulers' throughput.

Variants, each on a fresh control plane (--variants, default all):

- shipped:   both kube-schedulers keep their default client limits (50 QPS, burst 100), as
             deployed. The default scheduler's Binding calls then cap the native side near
             (1,000 - 100) / 50 = 18 s, while our scheduler delegates binding to the extender,
             whose client is not limited.
- equal-qps: both kube-schedulers at clientConnection qps 500 / burst 1000 (--equal-qps,
             --equal-burst), so the native side is no longer held by its client rate limit.
- modes:     as equal-qps, on a control plane running both modes (LocalCluster mode "both"): a
             third side, in-scheduler, whose StatefulSets request the opt-in resource (written
             by hand; the install's admission policy gates them) and are placed by the default
             kube-scheduler with the stanza. Its rate against the extender side's is issue 50's
             throughput target (>= 0.8).
- go-floor:  as equal-qps, but our kube-scheduler calls the do-nothing Go extender
             (benchmarks/gofloor: filter passes every node, prioritize scores 0) and binds by
             itself. No rule is enforced (its violations are expected): this is the cost of the
             extender protocol alone, the ceiling any HTTP extender reaches on this machine.

    python -m benchmarks.e2e_throughput                 # all variants, 2 rounds per side; ~8 min
    python -m benchmarks.e2e_throughput --variants equal-qps --equal-qps 1000 --equal-burst 2000
    python -m benchmarks.e2e_throughput --rounds 1 --sets 3 --replicas 50 --nodes 60
    python -m benchmarks.e2e_throughput --variants modes --sets 3 --nodes 120   # issue 50: the modes
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests  # noqa: E402
import urllib3  # noqa: E402

from benchmarks.common import (  # noqa: E402
    Histogram,
    build_go_floor,
    code_version,
    loadavg,
    machine,
    read_histograms,
    table,
    verdict,
    write_result,
)
from extender.api.policy import INLINE_POLICY_ANNOTATION, OPT_IN_RESOURCE, PlacementPolicySpec  # noqa: E402
from extender.devcluster.api import ApiError, wait_for  # noqa: E402
from extender.devcluster.cluster import (  # noqa: E402
    HOSTNAME,
    SCHEDULER_NAME,
    ZONE,
    LocalCluster,
    zoned_nodes,
)
from extender.ops.translate import translate  # noqa: E402

POLICY = {
    "caps": [{"topologyKey": HOSTNAME, "max": 1}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}
ZONES = ("zone-a", "zone-b", "zone-c")
TARGET_RATIO = 0.8
IN_SCHEDULER_TARGET = 0.8  # issue 50: opted-in pods in in-scheduler mode / second-scheduler mode, same run
SIDES = ("native", "extender", "in-scheduler")
CLK_TCK = 100
VARIANTS = ("shipped", "equal-qps", "go-floor", "before", "modes")


def variant_limits(variant: str, qps: float, burst: int) -> tuple[float | None, int | None]:
    """Both kube-schedulers' client (qps, burst) for a variant; None keeps kube-scheduler's default."""
    if variant == "shipped":
        return None, None
    if variant in ("equal-qps", "go-floor", "before", "modes"):
        return qps, burst
    raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")


class BenchCluster(LocalCluster):
    """LocalCluster with kube-controller-manager's client rate limit raised (see the docstring)."""

    def __init__(self, *args: Any, kcm_qps: int = 500, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kcm_qps = kcm_qps

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        if name == "kube-controller-manager" and self.kcm_qps > 0:
            argv = [*argv, f"--kube-api-qps={self.kcm_qps}", f"--kube-api-burst={2 * self.kcm_qps}"]
        if name in SCHEDULER_PORTS:  # their /metrics, read anonymously on loopback for the Bind durations
            argv = [*argv, "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"]
        return super()._spawn(name, argv, env)

    def cpu_seconds(self) -> dict[str, float]:
        """utime+stime of every component, children included (the extender's gunicorn worker)."""
        out = {}
        for p in self.processes:
            if p.popen is None or p.popen.poll() is not None:
                continue
            out[p.name] = _tree_cpu(p.popen.pid)
        return out


class BeforeCluster(BenchCluster):
    """BenchCluster whose extender runs the code of another checkout (--before-tree, e.g. a `git
    worktree` of the last release): the same control plane, deploy/ objects and harness, so the
    two extenders' figures differ by their code alone. `python -P` keeps the working directory off
    sys.path, so PYTHONPATH alone decides which `extender` package is imported."""

    def __init__(self, tree: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tree = tree

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None):
        if name == "extender":
            argv = [argv[0], "-P", *argv[1:]]
            env = {**(env or {}), "PYTHONPATH": str(self.tree)}
        return super()._spawn(name, argv, env)


class GoFloorCluster(BenchCluster):
    """BenchCluster whose placement-scheduler calls the do-nothing Go extender (benchmarks/gofloor:
    filter passes every candidate, prioritize scores 0) and binds by itself (no bindVerb): the
    protocol's own cost, the ceiling any HTTP extender can reach in this harness. It enforces no
    rule, so its side's violations are expected."""

    def __init__(self, binary: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go_floor = binary

    def start_extender(self, extra_args: Any = ()) -> Any:
        port = self.ports["extender"]
        proc = self._spawn("extender", [str(self.go_floor), "-listen", f"127.0.0.1:{port}"])
        self._await(proc, "Go floor /readyz", lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok)
        return proc

    def adjust_extender_config(self, extender: dict[str, Any]) -> None:
        for verb in ("bindVerb", "preemptVerb"):  # kube-scheduler binds; nothing to preempt here
            extender.pop(verb, None)


def _tree_cpu(pid: int) -> float:
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += _tree_cpu(int(child))
    except (OSError, IndexError, ValueError):
        pass
    return total


def extender_histograms(cluster: LocalCluster) -> dict[str, Histogram]:
    """{verb: histogram} of the extender's request durations (its /metrics); {} when it serves none
    (the Go floor answers /metrics with a 404 page)."""
    try:
        text = requests.get(f"http://127.0.0.1:{cluster.ports['extender']}/metrics", timeout=5).text
        series = read_histograms(text, "extender_request_duration_seconds")
    except (requests.RequestException, ValueError):
        return {}
    return {dict(labels)["verb"]: hist for labels, hist in series.items() if "verb" in dict(labels)}


def verb_totals(cluster: LocalCluster) -> dict[str, tuple[float, float]]:
    """{verb: (calls, seconds)} from the extender's request-duration histogram."""
    return {verb: (hist.count, hist.total) for verb, hist in extender_histograms(cluster).items()}


SCHEDULER_PORTS = {"kube-scheduler": "scheduler", "placement-scheduler": "placement"}
BIND_POINT = "scheduler_framework_extension_point_duration_seconds"  # kube-scheduler's, every bind timed
APISERVER_POINT = "apiserver_request_duration_seconds"  # the API server's own time per request


urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # the schedulers' self-signed loopback certs


def bind_histograms(cluster: LocalCluster) -> dict[str, Histogram]:
    """Each binder's bind-duration histogram, now: the extender's bind handler, each
    kube-scheduler's Bind extension point (DefaultBinder's POST of the Binding, summed over status),
    which times the same API call made by Go in the same burst, and the API server's own time for
    Binding POSTs ("kube-apiserver"): the floor no binder goes under, whoever sent them."""
    out: dict[str, Histogram] = {}
    extender = extender_histograms(cluster).get("bind")
    if extender is not None:
        out["extender"] = extender
    assert cluster.admin is not None
    try:
        text = cluster.admin.session.get(cluster.admin.server + "/metrics", timeout=30).text
        # only the Binding POSTs' series, kept before parsing: the API server's whole page is megabytes
        wanted = [
            line
            for line in text.splitlines()
            if line.startswith("#") or (line.startswith(APISERVER_POINT) and 'subresource="binding"' in line)
        ]
        series = [
            h
            for labels, h in read_histograms("\n".join(wanted), APISERVER_POINT).items()
            if dict(labels).get("verb") == "POST"
        ]
        if series:
            out["kube-apiserver"] = _sum_series(series)
    except (requests.RequestException, ValueError):
        pass
    for component, port_name in SCHEDULER_PORTS.items():
        url = f"https://127.0.0.1:{cluster.ports[port_name]}/metrics"
        try:
            text = requests.get(url, timeout=5, verify=False).text  # noqa: S501 - loopback, self-signed
        except requests.RequestException:
            continue
        histograms = read_histograms(text, BIND_POINT)
        series = [h for labels, h in histograms.items() if dict(labels).get("extension_point") == "Bind"]
        if series:
            out[component] = _sum_series(series)
    return out


def _sum_series(series: list[Histogram]) -> Histogram:
    bounds = sorted({le for h in series for le, _ in h.buckets})
    buckets = tuple((le, sum(dict(h.buckets).get(le, 0.0) for h in series)) for le in bounds)
    return Histogram(buckets, sum(h.total for h in series), sum(h.count for h in series))


def bind_delta(before: dict[str, Histogram], after: dict[str, Histogram]) -> dict[str, dict[str, Any]]:
    """Per binder over a round: calls and ms (mean; p50/p90/p99 estimated from the buckets), and
    the round's cumulative buckets themselves (le in seconds, "inf" last) for any later reading."""
    out = {}
    for binder, hist in sorted(after.items()):
        delta = hist.minus(before.get(binder))
        if delta.count > 0:
            buckets = [["inf" if le == float("inf") else le, int(n)] for le, n in delta.buckets]
            out[binder] = {**delta.summary_ms(), "buckets": buckets}
    return out


def verb_delta(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], pods: int
) -> dict[str, dict[str, float]]:
    """Per verb over a round: calls, wall seconds inside the extender's handlers, ms per call and per pod."""
    out = {}
    for verb, (calls, seconds) in sorted(after.items()):
        c0, s0 = before.get(verb, (0.0, 0.0))
        n, t = calls - c0, seconds - s0
        if n > 0:
            out[verb] = {
                "calls": int(n),
                "seconds": round(t, 2),
                "ms_per_call": round(1000 * t / n, 2),
                "ms_per_pod": round(1000 * t / pods, 2),
            }
    return out


def statefulset(name: str, replicas: int, side: str, spec: PlacementPolicySpec) -> dict[str, Any]:
    """`side`: native (translate's constraints, the default scheduler), extender (second-scheduler
    mode) or in-scheduler (the default scheduler with the stanza: the opt-in request, written by
    hand; the install's admission policy adds the placeable gate)."""
    labels = {"app": name, "bench": "e2e"}
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/db:1"}
    if side == "in-scheduler":
        container["resources"] = {"limits": {OPT_IN_RESOURCE: "1"}}
    pod_spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME if side == "extender" else "default-scheduler",
        "terminationGracePeriodSeconds": 0,
        "containers": [container],
    }
    annotations = {}
    if side in ("extender", "in-scheduler"):
        annotations[INLINE_POLICY_ANNOTATION] = json.dumps(POLICY)
    else:
        pod_spec.update(translate(spec, match_labels={"app": name}, group_size=replicas).fragment)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec},
        },
    }


WATCH_SECONDS = 10  # each watch request's timeoutSeconds: the loop resumes, or stops once asked


class PodWatch(threading.Thread):
    """Watches a namespace's pods; records when each was first seen, and first seen bound."""

    def __init__(self, cluster: LocalCluster, namespace: str, expected: int) -> None:
        super().__init__(daemon=True, name=f"watch-{namespace}")
        self.api = cluster.admin
        self.namespace = namespace
        self.expected = expected
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.done = threading.Event()
        self.error: Exception | None = None
        path = f"/api/v1/namespaces/{namespace}/pods"
        self.version = self.api.get(path)["metadata"]["resourceVersion"]

    def run(self) -> None:
        url = f"{self.api.server}/api/v1/namespaces/{self.namespace}/pods"
        version = self.version
        try:
            while not self.done.is_set():
                params = {"watch": "1", "resourceVersion": version, "timeoutSeconds": str(WATCH_SECONDS)}
                timeout = (10, WATCH_SECONDS + 60)
                with self.api.session.get(url, params=params, stream=True, timeout=timeout) as response:
                    for line in response.iter_lines():
                        if self.done.is_set():
                            return
                        if not line:
                            continue
                        event = json.loads(line)
                        now = time.monotonic()
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise RuntimeError(f"watch error: {obj.get('message')}")
                        version = obj["metadata"].get("resourceVersion", version)
                        name = obj["metadata"]["name"]
                        self.seen.setdefault(name, now)
                        if obj.get("spec", {}).get("nodeName") and event.get("type") != "DELETED":
                            self.bound.setdefault(name, now)
                            if len(self.bound) >= self.expected:
                                self.done.set()
                                return
        except Exception as err:  # noqa: BLE001
            if not self.done.is_set():
                self.error = err
                self.done.set()

    def stop(self) -> None:
        """Ends the watch without waiting on it: the thread stops at its watch's next timeout
        (WATCH_SECONDS) or event. (Closing the response from this thread could block on the
        reading thread's buffer lock, which hung a round that timed out.)"""
        self.done.set()


def _violations(pods: list[dict[str, Any]], zone_of: dict[str, str | None]) -> int:
    by_set: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pods:
        if p["spec"].get("nodeName"):
            by_set[p["metadata"]["name"].rsplit("-", 1)[0]].append(p)
    count = 0
    for members in by_set.values():
        count += sum(1 for c in Counter(p["spec"]["nodeName"] for p in members).values() if c > 1)
        zones = Counter(zone_of.get(p["spec"]["nodeName"]) for p in members)
        counts = [zones.get(z, 0) for z in ZONES]
        count += int(max(counts) - min(counts) > 1)
    return count


def run_round(
    cluster: BenchCluster,
    side: str,
    index: int,
    sets: int,
    replicas: int,
    zone_of: dict[str, str | None],
    timeout: float,
    log=print,
) -> dict[str, Any]:
    api = cluster.admin
    assert api is not None
    spec = PlacementPolicySpec.model_validate(POLICY)
    ns = cluster.namespace(f"bench-{side}-{index}")
    expected = sets * replicas
    watch = PodWatch(cluster, ns, expected)
    watch.start()
    load = loadavg()
    cpu_before = cluster.cpu_seconds()
    verbs_before = verb_totals(cluster)
    binds_before = bind_histograms(cluster)
    started = time.monotonic()
    for i in range(sets):
        api.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", statefulset(f"set-{i}", replicas, side, spec))
    created_calls = time.monotonic() - started
    watch.done.wait(timeout)
    watch.stop()
    cpu_after = cluster.cpu_seconds()
    verbs_after = verb_totals(cluster)
    binds_after = bind_histograms(cluster)
    if watch.error is not None:
        raise watch.error
    bound_times = sorted(t - started for t in watch.bound.values())
    seen_times = sorted(t - started for t in watch.seen.values())
    complete = len(bound_times) >= expected
    elapsed = bound_times[-1] if complete else float("nan")
    items = api.list(f"/api/v1/namespaces/{ns}/pods")
    events = api.list(f"/api/v1/namespaces/{ns}/events")
    failed_scheduling = sum(int(e.get("count") or 1) for e in events if e.get("reason") == "FailedScheduling")

    def at(fraction: float) -> float:
        k = max(0, min(len(bound_times) - 1, int(round(fraction * expected)) - 1))
        return bound_times[k] if bound_times else float("nan")

    result = {
        "side": side,
        "round": index,
        "namespace": ns,
        "pods": expected,
        "bound": len(bound_times),
        "complete": complete,
        "seconds_to_all_bound": round(elapsed, 2),
        "pods_per_second": round(expected / elapsed, 1) if complete else 0.0,
        "steady_pods_per_second_10_90": round(0.8 * expected / (at(0.9) - at(0.1)), 1)
        if complete and at(0.9) > at(0.1)
        else None,
        "seconds_first_bound": round(bound_times[0], 2) if bound_times else None,
        "seconds_all_created": round(seen_times[-1], 2) if len(seen_times) >= expected else None,
        "create_calls_seconds": round(created_calls, 2),
        "failed_scheduling_events": failed_scheduling,
        "rule_violations": _violations(items, zone_of),
        "cpu_seconds": {k: round(cpu_after.get(k, 0) - v, 1) for k, v in cpu_before.items()},
        "loadavg_before": [round(x, 2) for x in load],
        "extender_verbs": verb_delta(verbs_before, verbs_after, expected),
        "bind_ms": bind_delta(binds_before, binds_after),
    }
    log(
        f"{side:>8} round {index}: {result['bound']}/{expected} bound in {result['seconds_to_all_bound']} s "
        f"({result['pods_per_second']} pods/s; all created at {result['seconds_all_created']} s; "
        f"{failed_scheduling} FailedScheduling; {result['rule_violations']} violations; load {load[0]:.2f})"
    )
    verbs = [
        f"{v} {d['calls']} calls {d['ms_per_call']} ms/call ({d['ms_per_pod']} ms/pod)"
        for v, d in result["extender_verbs"].items()
    ]
    binds = [
        f"{b} {d['calls']} calls mean {d['mean']} p50 {d['p50']} p99 {d['p99']} ms"
        for b, d in result["bind_ms"].items()
    ]
    for label, parts in (("extender handlers", verbs), ("bind", binds)):
        if parts:
            log(f"          {label}: " + "; ".join(parts))
    # Clean up before the next round, so rounds never overlap.
    api.delete(f"/api/v1/namespaces/{ns}")
    try:
        wait_for(f"namespace {ns} gone", lambda: _gone(api, ns), 180, interval=1.0)
    except TimeoutError:
        log(f"  (namespace {ns} still terminating after 180 s; continuing)")
    return result


def _gone(api, ns: str) -> bool:  # noqa: ANN001
    try:
        api.get(f"/api/v1/namespaces/{ns}")
        return False
    except ApiError as err:
        return err.status == 404


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side in SIDES:
        if side == "in-scheduler" and not any(r["side"] == side for r in rounds):
            continue
        mine = [r for r in rounds if r["side"] == side and r["complete"]]
        out[side] = {
            "rounds": len([r for r in rounds if r["side"] == side]),
            "complete": len(mine),
            "median_seconds": round(statistics.median(r["seconds_to_all_bound"] for r in mine), 2) if mine else None,
            "median_pods_per_second": round(statistics.median(r["pods_per_second"] for r in mine), 1) if mine else None,
        }
    pairs = []
    natives = [r for r in rounds if r["side"] == "native"]
    extenders = [r for r in rounds if r["side"] == "extender"]
    for n, e in zip(natives, extenders, strict=False):  # rounds alternate; a cut run may end on one side
        if n["complete"] and e["complete"]:
            pairs.append(round(e["pods_per_second"] / n["pods_per_second"], 2))
    ratio = None
    if out["native"]["median_pods_per_second"] and out["extender"]["median_pods_per_second"]:
        ratio = round(out["extender"]["median_pods_per_second"] / out["native"]["median_pods_per_second"], 2)
    out["ratio_extender_over_native"] = ratio
    out["ratio_per_round_pair"] = pairs
    if "in-scheduler" in out:  # the modes variant: in-scheduler against second-scheduler, same rounds
        ours = [r for r in rounds if r["side"] == "in-scheduler"]
        out["ratio_in_scheduler_per_round"] = [
            round(i["pods_per_second"] / e["pods_per_second"], 2)
            for i, e in zip(ours, extenders, strict=False)
            if i["complete"] and e["complete"]
        ]
        inside, beside = out["in-scheduler"]["median_pods_per_second"], out["extender"]["median_pods_per_second"]
        value = round(inside / beside, 2) if inside and beside else None
        out["in_scheduler"] = {
            "ratio_over_second_scheduler": value,
            "target": IN_SCHEDULER_TARGET,
            "verdict": verdict(value, IN_SCHEDULER_TARGET, higher_is_better=True) if value else "not measured",
        }
    out["target"] = {
        "target": TARGET_RATIO,
        "value": ratio,
        "verdict": verdict(ratio, TARGET_RATIO, higher_is_better=True) if ratio is not None else "not measured",
    }
    return out


def report(rounds: list[dict[str, Any]], summary: dict[str, Any], title: str = "") -> str:
    rows = [
        [
            r["side"],
            r["round"],
            f"{r['bound']}/{r['pods']}",
            r["seconds_to_all_bound"],
            r["pods_per_second"],
            r["steady_pods_per_second_10_90"] or "-",
            r["seconds_all_created"] or "-",
            r["failed_scheduling_events"],
            r["rule_violations"],
            r["cpu_seconds"].get("extender", "-"),
            r["cpu_seconds"].get("placement-scheduler" if r["side"] == "extender" else "kube-scheduler", "-"),
            r["cpu_seconds"].get("kube-apiserver", "-"),
        ]
        for r in rounds
    ]
    lines = [
        title
        or "End to end: time from the first StatefulSet create until every pod is bound (watch on the API server)",
        table(
            [
                "side",
                "round",
                "bound",
                "seconds",
                "pods/s",
                "pods/s 10-90%",
                "all created s",
                "FailedScheduling",
                "violations",
                "extender cpu s",
                "scheduler cpu s",
                "apiserver cpu s",
            ],
            rows,
        ),
        "",
        f"median pods/s: native {summary['native']['median_pods_per_second']}, extender "
        f"{summary['extender']['median_pods_per_second']}; "
        f"ratio extender/native {summary['ratio_extender_over_native']} (per round pair: "
        f"{summary['ratio_per_round_pair']}); "
        f"target >= {TARGET_RATIO}: {summary['target']['verdict']}",
    ]
    if "in_scheduler" in summary:
        mine = summary["in_scheduler"]
        lines.append(
            f"in-scheduler mode: median {summary['in-scheduler']['median_pods_per_second']} pods/s, "
            f"{mine['ratio_over_second_scheduler']} of second-scheduler mode's (per round: "
            f"{summary['ratio_in_scheduler_per_round']}); target >= {IN_SCHEDULER_TARGET}: {mine['verdict']}"
        )
    return "\n".join(lines)


def variants_table(results: dict[str, dict[str, Any]]) -> str:
    rows = []
    for name, v in results.items():
        if v.get("skipped"):
            rows.append([name, "-", "-", "-", "-", "-", f"skipped: {v['skipped']}"[:60]])
            continue
        s = v["summary"]
        limits = "default (50/100)" if v["scheduler_qps"] is None else f"{v['scheduler_qps']:g}/{v['scheduler_burst']}"
        rows.append(
            [
                name,
                limits,
                s["native"]["median_pods_per_second"] or "-",
                s["extender"]["median_pods_per_second"] or "-",
                s["ratio_extender_over_native"] if s["ratio_extender_over_native"] is not None else "-",
                s["ratio_per_round_pair"],
                "n/a: the ceiling" if name == "go-floor" else s["target"]["verdict"],
            ]
        )
    return table(
        [
            "variant",
            "kube-schedulers' client qps/burst",
            "native pods/s",
            "extender pods/s",
            "ratio",
            "per round pair",
            f"target >= {TARGET_RATIO}",
        ],
        rows,
    )


CEILING_TARGET = 0.9  # issue 26: extender / native over go-floor / native, same run, equal client QPS


def over_ceiling(results: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The extender's share of the protocol's ceiling: equal-qps's extender/native ratio over
    go-floor's, both measured in this run (None unless both variants ran)."""
    ours = (results.get("equal-qps") or {}).get("summary", {}).get("ratio_extender_over_native")
    ceiling = (results.get("go-floor") or {}).get("summary", {}).get("ratio_extender_over_native")
    if not ours or not ceiling:
        return None
    value = round(ours / ceiling, 2)
    return {
        "equal_qps_ratio": ours,
        "go_floor_ratio": ceiling,
        "extender_over_ceiling": value,
        "target": CEILING_TARGET,
        "verdict": verdict(value, CEILING_TARGET, higher_is_better=True),
    }


def cpu_per_pod(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """CPU-ms per pod placed, per component, median over a side's complete rounds."""
    rows = []
    for name, v in results.items():
        for side in SIDES:
            mine = [r for r in v.get("rounds", []) if r["side"] == side and r["complete"]]
            if not mine:
                continue
            components = sorted({c for r in mine for c in r["cpu_seconds"]})
            cells = []
            for component in components:
                per_pod = [r["cpu_seconds"].get(component, 0) * 1000 / max(1, r["bound"]) for r in mine]
                cells.append(f"{component} {statistics.median(per_pod):.1f}")
            rows.append([name, side, ", ".join(cells)])
    return rows


BIND_COLUMNS = ("calls", "mean", "p50", "p90", "p99")


def _median_cell(values: list[float | str]) -> float | str:
    """The median of a column over rounds; a quantile beyond a histogram's last bucket (">204.8")
    in any round makes the cell that text, since no median of it is known."""
    texts = [v for v in values if isinstance(v, str)]
    if texts:
        return max(texts, key=lambda t: float(t.lstrip(">")))
    return round(statistics.median(values), 2)  # type: ignore[arg-type]


def bind_summary(results: dict[str, dict[str, Any]]) -> list[list[Any]]:
    """Rows of variant, side, binder, then the median over the side's complete rounds of calls,
    mean, p50, p90 and p99 ms; then the mean over the same control plane's native mean (the default
    kube-scheduler's DefaultBinder, Go, posting the same Binding in a burst of the same size), and
    over the API server's own mean for the same side's Binding POSTs (what the binder adds)."""
    rows = []
    for name, v in results.items():
        for side in SIDES:
            mine = [r for r in v.get("rounds", []) if r["side"] == side and r["complete"]]
            for binder in sorted({b for r in mine for b in r.get("bind_ms", {})}):
                stats = [r["bind_ms"][binder] for r in mine if binder in r.get("bind_ms", {})]
                rows.append([name, side, binder, *(_median_cell([s[k] for s in stats]) for k in BIND_COLUMNS)])
    native = {row[0]: row[4] for row in rows if row[1] == "native" and row[2] == "kube-scheduler"}
    server = {(row[0], row[1]): row[4] for row in rows if row[2] == "kube-apiserver"}
    for row in rows:
        row.append(round(row[4] / native[row[0]], 2) if native.get(row[0]) else "-")
        floor = server.get((row[0], row[1]))
        row.append(round(row[4] / floor, 2) if floor and row[2] != "kube-apiserver" else "-")
    return rows


def add_zoned_nodes(cluster: LocalCluster, layout: dict[str, int], nodes: int) -> dict[str, str | None]:
    """Add the kwok nodes, wait until the extender's cache holds them all; node -> zone."""
    cluster.add_nodes(zoned_nodes(layout))
    api = cluster.admin
    assert api is not None
    zone_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE) for n in api.list("/api/v1/nodes")}
    port = cluster.ports["extender"]
    if isinstance(cluster, GoFloorCluster):  # no cache to wait for
        wait_for("every node Ready", lambda: len(api.list("/api/v1/nodes")) >= nodes, 60)
        return zone_of
    wait_for(
        "the extender's cache to hold every node",
        lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()["cache"]["nodes"] >= nodes,
        60,
    )
    return zone_of


def run_variant(variant: str, args: argparse.Namespace, layout: dict[str, int], log=print) -> dict[str, Any]:
    qps, burst = variant_limits(variant, args.equal_qps, args.equal_burst)
    rounds: list[dict[str, Any]] = []
    started = time.monotonic()
    log(f"\n== variant {variant}: kube-schedulers' client qps/burst {'default' if qps is None else f'{qps:g}/{burst}'}")
    if variant == "go-floor":
        build = build_go_floor(log=log)
        if build.path is None:
            log(f"Go floor unavailable: {build.reason}; variant skipped")
            return {"variant": variant, "skipped": build.reason, "rounds": [], "summary": {}}
        cluster_context: BenchCluster = GoFloorCluster(
            build.path, kcm_qps=args.kcm_qps, scheduler_qps=qps, scheduler_burst=burst
        )
    elif variant == "before":
        if args.before_tree is None:
            log("variant before needs --before-tree (a checkout of the code to compare); skipped")
            return {"variant": variant, "skipped": "no --before-tree", "rounds": [], "summary": {}}
        cluster_context = BeforeCluster(
            args.before_tree, kcm_qps=args.kcm_qps, scheduler_qps=qps, scheduler_burst=burst
        )
    elif variant == "modes":  # both modes on one control plane: our kube-scheduler and the stanza
        window = [] if args.place_window is None else ["--place-window", str(args.place_window)]
        cluster_context = BenchCluster(
            kcm_qps=args.kcm_qps, scheduler_qps=qps, scheduler_burst=burst, mode="both", extender_args=window
        )
    else:
        cluster_context = BenchCluster(kcm_qps=args.kcm_qps, scheduler_qps=qps, scheduler_burst=burst)
    with cluster_context as cluster:
        log(f"control plane up in {time.monotonic() - started:.1f}s; adding {args.nodes} kwok nodes {layout}")
        t = time.monotonic()
        zone_of = add_zoned_nodes(cluster, layout, args.nodes)
        log(f"nodes Ready in {time.monotonic() - t:.1f}s")
        sides = SIDES if variant == "modes" else SIDES[:2]
        for index in range(args.rounds):
            for side in sides:
                rounds.append(run_round(cluster, side, index, args.sets, args.replicas, zone_of, args.timeout, log))
        if args.keep_logs is not None:
            cluster.keep_logs(args.keep_logs / variant)
    return {
        "variant": variant,
        "scheduler_qps": qps,
        "scheduler_burst": burst,
        "rounds": rounds,
        "summary": summarise(rounds),
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=500, help="kwok nodes, dealt over 3 zones")
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side (sides alternate)")
    parser.add_argument(
        "--kcm-qps", type=int, default=500, help="kube-controller-manager --kube-api-qps (0: its default)"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated, run in this order, each on a fresh control plane: shipped (both "
        "kube-schedulers at their default client qps 50 / burst 100), equal-qps (both at "
        "--equal-qps / --equal-burst), go-floor (equal-qps, the do-nothing Go extender), before "
        "(equal-qps, the extender of --before-tree), modes (equal-qps, both modes on one control "
        "plane: native, second-scheduler and in-scheduler sides)",
    )
    parser.add_argument("--equal-qps", type=float, default=500, help="both kube-schedulers' client qps in equal-qps")
    parser.add_argument("--equal-burst", type=int, default=1000, help="both kube-schedulers' client burst in equal-qps")
    parser.add_argument("--timeout", type=float, default=240, help="seconds a round may take")
    parser.add_argument(
        "--place-window", type=int, help="modes: the extender's --place-window (default: the shipped one)"
    )
    parser.add_argument(
        "--before-tree",
        type=Path,
        help="variant before: a checkout whose extender/ is run instead of this one's, at equal-qps "
        "(e.g. `git worktree add /tmp/before <release>`)",
    )
    parser.add_argument("--keep-logs", type=Path, help="copy each variant's component logs to DIR/<variant>/")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if "before" in variants and args.before_tree is None:
        parser.error("variant before needs --before-tree")
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")

    info = machine()
    print(
        f"machine: {info['nproc']} cpu ({info['cpu_model']}), Python {info['python']}, load {info['loadavg_at_start']}"
    )
    layout = {z: args.nodes // 3 + (1 if i < args.nodes % 3 else 0) for i, z in enumerate(ZONES)}
    started = time.monotonic()
    results = {v: run_variant(v, args, layout) for v in variants}
    info["loadavg_at_end"] = [round(x, 2) for x in loadavg()]
    info["code_at_end"] = code_version()
    if info["code_at_end"]["extender_sha256"] != info["code"]["extender_sha256"]:
        print("WARNING: extender/ changed on disk during the run; the figures mix two versions of the code")
    for name, v in results.items():
        limits = "default 50/100" if v["scheduler_qps"] is None else f"{v['scheduler_qps']:g}/{v['scheduler_burst']}"
        print()
        print(report(v["rounds"], v["summary"], f"Variant {name} (kube-schedulers' client qps/burst {limits})"))
    print()
    print("Variants (median pods/s; ratio = extender / native):")
    print(variants_table(results))
    total = round(time.monotonic() - started, 1)
    ceiling = over_ceiling(results)
    if ceiling is not None:
        print(
            f"extender / ceiling: {ceiling['extender_over_ceiling']} (equal-qps {ceiling['equal_qps_ratio']} over "
            f"go-floor {ceiling['go_floor_ratio']}, same run); target >= {CEILING_TARGET}: {ceiling['verdict']}"
        )
    print()
    print("Bind wall time per call, ms (median over a side's rounds; extender: its bind handler; kube-scheduler /")
    print("placement-scheduler: their Bind extension point, DefaultBinder's POST from Go, in the same burst;")
    print("kube-apiserver: its own time for those Binding POSTs, the floor):")
    binds = bind_summary(results)
    headers = [
        "variant",
        "side",
        "binder",
        "calls",
        "mean",
        "p50",
        "p90",
        "p99",
        "mean / native Go binder",
        "mean / API server's",
    ]
    print(table(headers, binds))
    print()
    print("CPU-ms per pod placed, per component (median of a side's rounds; the whole process tree):")
    print(table(["variant", "side", "CPU-ms per pod"], cpu_per_pod(results)))
    print(f"total {total} s")
    path = write_result(
        "e2e_throughput",
        {
            "benchmark": "e2e_throughput",
            "machine": info,
            "nodes": args.nodes,
            "zones": layout,
            "sets": args.sets,
            "replicas": args.replicas,
            "policy": POLICY,
            "native_fragment": translate(
                PlacementPolicySpec.model_validate(POLICY), match_labels={"app": "set-0"}, group_size=args.replicas
            ).fragment,
            "kcm_qps": args.kcm_qps,
            "variants": results,
            "summary": {
                name: {
                    "scheduler_qps": v["scheduler_qps"],
                    "scheduler_burst": v["scheduler_burst"],
                    "native_pods_per_second": v["summary"]["native"]["median_pods_per_second"],
                    "extender_pods_per_second": v["summary"]["extender"]["median_pods_per_second"],
                    "ratio_extender_over_native": v["summary"]["ratio_extender_over_native"],
                    "verdict": v["summary"]["target"]["verdict"],
                    "in_scheduler": v["summary"].get("in_scheduler"),
                }
                for name, v in results.items()
            },
            "over_ceiling": ceiling,
            "cpu_ms_per_pod": cpu_per_pod(results),
            "bind_ms": binds,
            "before_tree": str(args.before_tree) if args.before_tree else None,
            "total_seconds": total,
        },
        args.out,
    )
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The e2e harness shared by the control-plane kinds (benchmarks/kinds/e2e.py and
soak): the local control plane with the benchmarks' tweaks, the
StatefulSet rounds and what they read from the components' /metrics.

One LocalCluster (pinned etcd, kube-apiserver, kube-controller-manager, default kube-scheduler,
our kube-scheduler with the extender served by gunicorn, kwok), kwok nodes over 3 zones. A round
(`run_round`) creates, in a fresh namespace, `sets` StatefulSets x `replicas` (Parallel), on one
side:

- native:   schedulerName default-scheduler, pod spec + `translate(spec, group_size=replicas)`'s
            native fragment (topologySpreadConstraints);
- extender: schedulerName placement-scheduler, the policy inline on the pod template;
- in-scheduler: the default kube-scheduler with the stanza, the opt-in resource requested by hand.

Policy (group = one StatefulSet, the default): caps kubernetes.io/hostname max 1, spread
topology.kubernetes.io/zone maxSkew 1 DoNotSchedule. The time of a round runs from the first
StatefulSet create call until a watch on the namespace's pods has seen all of them with
spec.nodeName (read from the API server).

kube-controller-manager's client is raised to --kube-api-qps 500 / burst 1000 (`kcm_qps`; 0 =
its default 20/30): at the default the StatefulSet controller creates pods at ~20/s, which
would cap both sides at the same rate and hide the schedulers' throughput.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import requests
import urllib3

from benchmarks.common import REPO, Histogram, loadavg, read_histograms, tree_cpu
from benchmarks.common import sum_series as _sum_series
from extender.api.policy import INLINE_POLICY_ANNOTATION, OPT_IN_RESOURCE, PlacementPolicySpec
from extender.devcluster.api import ApiError, wait_for
from extender.devcluster.cluster import (
    HOSTNAME,
    SCHEDULER_NAME,
    ZONE,
    LocalCluster,
    zoned_nodes,
)
from extender.ops.translate import translate

POLICY = {
    "caps": [{"topologyKey": HOSTNAME, "max": 1}],
    "spread": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
}
ZONES = ("zone-a", "zone-b", "zone-c")


def zone_layout(nodes: int) -> dict[str, int]:
    """`nodes` dealt over the three zones, the first zones taking the remainder."""
    return {z: nodes // 3 + (1 if i < nodes % 3 else 0) for i, z in enumerate(ZONES)}


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
            out[p.name] = tree_cpu(p.popen.pid)
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


class FloorCluster(BenchCluster):
    """BenchCluster whose placement-scheduler calls a do-nothing extender and binds by itself (no
    bindVerb): the protocol's own cost. It enforces no rule, so its side's violations are expected."""

    def adjust_extender_config(self, extender: dict[str, Any]) -> None:
        for verb in ("bindVerb", "preemptVerb"):  # kube-scheduler binds; nothing to preempt here
            extender.pop(verb, None)

    def _serve_floor(self, what: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
        """Start the floor (`argv` ending in its listen address flag) on the extender's port."""
        port = self.ports["extender"]
        proc = self._spawn("extender", [*argv, f"127.0.0.1:{port}"], env)
        self._await(
            proc, f"{what} floor /readyz", lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=2).ok
        )
        return proc


class GoFloorCluster(FloorCluster):
    """The do-nothing Go extender (benchmarks/gofloor: filter passes every candidate, prioritize
    scores 0): the ceiling any HTTP extender can reach in this harness."""

    def __init__(self, binary: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.go_floor = binary

    def start_extender(self, extra_args: Any = ()) -> Any:
        return self._serve_floor("Go", [str(self.go_floor), "-listen"])


class PyFloorCluster(FloorCluster):
    """The Python floor (benchmarks/pyfloor_app.py: the extender's own server and request path with
    do-nothing verbs, no watch): serving the protocol in Python, before any rule."""

    def start_extender(self, extra_args: Any = ()) -> Any:
        argv = [sys.executable, "-m", "benchmarks.pyfloor_app", "--listen"]
        return self._serve_floor("Python", argv, {"PYTHONPATH": str(REPO)})


class PyDutiesCluster(PyFloorCluster):
    """The duties floor (benchmarks/pyfloor_app.py --kubeconfig): the Python floor plus the watch
    cache and the bind verb's Binding, with the extender's identity; no rule, nothing re-checked."""

    def adjust_extender_config(self, extender: dict[str, Any]) -> None:
        extender.pop("preemptVerb", None)  # the extender binds, as deployed; nothing to preempt here

    def start_extender(self, extra_args: Any = ()) -> Any:
        kubeconfig = self.service_account_kubeconfig("placement-scheduler", component="placement-extender")
        argv = [sys.executable, "-m", "benchmarks.pyfloor_app", "--kubeconfig", str(kubeconfig), "--listen"]
        return self._serve_floor("Python duties", argv, {"PYTHONPATH": str(REPO)})


def extender_histograms(
    cluster: LocalCluster, name: str = "extender_request_duration_seconds", label: str = "verb"
) -> dict[str, Histogram]:
    """{verb: histogram} of the extender's request durations (its /metrics), or of another of its
    histograms by `label`; {} when it serves none (the Go floor answers /metrics with a 404 page)."""
    try:
        text = requests.get(f"http://127.0.0.1:{cluster.ports['extender']}/metrics", timeout=5).text
        series = read_histograms(text, name)
    except (requests.RequestException, ValueError):
        return {}
    return {dict(labels)[label]: hist for labels, hist in series.items() if label in dict(labels)}


def gate_lift_totals(cluster: LocalCluster) -> dict[str, tuple[float, float]]:
    """{stage: (lifts, seconds)} of the placeable gate's lifts (in-scheduler mode), each stage timed
    from the pass that decided the lift (extender_placeable_gate_lift_seconds)."""
    series = extender_histograms(cluster, "extender_placeable_gate_lift_seconds", "stage")
    return {stage: (hist.count, hist.total) for stage, hist in series.items()}


def gate_lift_delta(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """Per stage over a round: lifts and their mean ms from the deciding pass. The window over the
    `bound` mean is the rate the window allows; the stages say whose time it is."""
    out: dict[str, Any] = {}
    for stage in ("written", "asked", "bound"):
        n = after.get(stage, (0.0, 0.0))[0] - before.get(stage, (0.0, 0.0))[0]
        t = after.get(stage, (0.0, 0.0))[1] - before.get(stage, (0.0, 0.0))[1]
        if n > 0:
            out[stage] = {"lifts": int(n), "mean_ms": round(1000 * t / n, 1)}
    return out


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
    return parallel_statefulset(name, replicas, labels, annotations, pod_spec)


def parallel_statefulset(
    name: str, replicas: int, labels: dict[str, str], annotations: dict[str, str], pod_spec: dict[str, Any]
) -> dict[str, Any]:
    """A StatefulSet whose pods are created all at once (Parallel), selected by `app: name`."""
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
    lifts_before = gate_lift_totals(cluster)
    binds_before = bind_histograms(cluster)
    started = time.monotonic()
    for i in range(sets):
        api.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", statefulset(f"set-{i}", replicas, side, spec))
    created_calls = time.monotonic() - started
    watch.done.wait(timeout)
    watch.stop()
    cpu_after = cluster.cpu_seconds()
    verbs_after = verb_totals(cluster)
    lifts_after = gate_lift_totals(cluster)
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
        "gate_lift_ms": gate_lift_delta(lifts_before, lifts_after),
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
    # cumulative means, each from the pass that decided the lift
    lifts = [f"{stage} {d['mean_ms']} ms ({d['lifts']} lifts)" for stage, d in result["gate_lift_ms"].items()]
    for label, parts in (("extender handlers", verbs), ("bind", binds), ("placeable gate, lift ->", lifts)):
        if parts:
            log(f"          {label}: " + "; ".join(parts))
    # Clean up before the next round, so rounds never overlap.
    api.delete(f"/api/v1/namespaces/{ns}")
    try:
        wait_for(f"namespace {ns} gone", lambda: gone(api, f"/api/v1/namespaces/{ns}"), 180, interval=1.0)
    except TimeoutError:
        log(f"  (namespace {ns} still terminating after 180 s; continuing)")
    return result


def gone(api, path: str) -> bool:  # noqa: ANN001
    """Whether the object at `path` is gone (404)."""
    try:
        api.get(path)
        return False
    except ApiError as err:
        return err.status == 404


def add_zoned_nodes(cluster: LocalCluster, layout: dict[str, int], nodes: int) -> dict[str, str | None]:
    """Add the kwok nodes, wait until the extender's cache holds them all; node -> zone."""
    cluster.add_nodes(zoned_nodes(layout))
    api = cluster.admin
    assert api is not None
    zone_of = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE) for n in api.list("/api/v1/nodes")}
    port = cluster.ports["extender"]
    if isinstance(cluster, FloorCluster):  # no cache to wait for
        wait_for("every node Ready", lambda: len(api.list("/api/v1/nodes")) >= nodes, 60)
        return zone_of
    wait_for(
        "the extender's cache to hold every node",
        lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()["cache"]["nodes"] >= nodes,
        60,
    )
    return zone_of

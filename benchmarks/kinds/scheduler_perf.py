"""Kind `scheduler_perf`: upstream's scheduler benchmark (k8s.io/kubernetes test/integration/scheduler_perf, the
newest supported minor), the way the field measures a scheduler, run on arms that put this project in its path.

The harness starts kube-apiserver (on its own etcd) and kube-scheduler in one process, creates plain Node
objects and the test case's pods, and reports `SchedulingThroughput` (pods/s, the mean of one-second samples
while the measured pods are placed). hack/schedperf/build.sh compiles it once per pinned version
(`go test -c` of benchmarks/schedperf, cached beside the control plane's binaries, with upstream's data files
of that version); each run writes a performance-config.yaml holding one upstream test case, one of its
workloads (or the data file's own size of it) and one arm's scheduler configuration and pod template:

- `native`: upstream's test case as shipped.
- `stanza-gofloor`, `stanza-extender`: the same, with config/in-scheduler/scheduler-config.yaml's `extenders`
  stanza added to the scheduler configuration, pointing at the Go do-nothing extender (benchmarks/gofloor) or at
  the extender (serving, watching the harness's API server); no pod opts in, so kube-scheduler never calls
  either: what the stanza costs every other pod (any extender turns opportunistic batching off in every
  profile), and with the extender what its watch of the cluster costs the same 2 cores.
- `policy-extender`, `policy-gofloor`: the measured pods' native rule (`topologySpreadConstraints`, pod
  anti-affinity) taken out of their template and written as the case's PlacementPolicy instead (the
  `placement.extender.dev/policy` annotation, the group being the pods with the template's labels), the pods
  opted in (they request the opt-in resource, so kube-scheduler sends them to the stanza's extender): through
  the extender, which enforces the rule and answers the one node it chose, and through the Go floor, which
  enforces nothing and answers every node (the protocol's ceiling); kube-scheduler binds in both (the stanza
  names no bindVerb). The harness has no admission policy, so the pods carry
  no scheduling gate: this is what kube-scheduler does per opted-in pod in either mode.

`configs` per case: `shipped` is the case's own schedulerConfigPath (upstream's batching cases turn default
spreading off there), `default` drops it (kube-scheduler's defaults, under which no pod is batchable).

Figures, per case, configuration and arm (one value a round, medians over rounds): `CASE.CONFIG.ARM.pods_per_second`
(upstream's SchedulingThroughput Average), `.over_native` (that arm over `native` of the same case and
configuration, same run), `.attempt_ms` (kube-scheduler's scheduling attempt duration, scheduled pods, mean),
`.cpu_ms_per_pod` (CPU-ms per pod placed while upstream measures: the harness's process tree, API server,
kube-scheduler and etcd, plus the extender's or the Go floor's; `.harness_cpu_ms_per_pod`,
`.extender_cpu_ms_per_pod` apart), `.cpu_over_native`, and the whole run's `.harness_cpu_s`, `.extender_cpu_s`.
A rate on a machine other jobs share moves with their load (each run records the 1-minute load before and
after it; the report shows the higher); CPU time per pod barely does.

    python -m benchmarks run scheduler-perf            # the benchmark sizes (5,000 nodes); about 40 min on 2 cores
    python -m benchmarks run scheduler-perf --smoke    # upstream's 5Nodes cases, every arm; about 4 minutes
    python -m benchmarks run scheduler-perf --smoke --set workload.keep_logs=/tmp/schedperf-logs
    python -m benchmarks run scheduler-perf --set 'workload.only=[TopologySpreading]' \
        --set 'arms=[native,policy-extender]'
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests
import yaml

from benchmarks.arms.server import GoFloorServer, free_port
from benchmarks.common import REPO, build_go_floor, loadavg, table, tree_cpu
from extender.api.policy import INLINE_POLICY_ANNOTATION, OPT_IN_RESOURCE
from extender.devcluster.cluster import IN_SCHEDULER_CONFIG, kube_binaries

BUILD = REPO / "hack" / "schedperf" / "build.sh"
CRDS = (REPO / "deploy" / "base" / "crd.yaml", REPO / "deploy" / "base" / "crd-zonerotation.yaml")
ARMS = ("native", "stanza-gofloor", "stanza-extender", "policy-extender", "policy-gofloor")
SCHEDULER_CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
# The native form of a rule a PlacementPolicy replaces in the measured pods' template.
NATIVE_RULES = ("topologySpreadConstraints", "affinity")


def harness(log=print) -> tuple[Path, Path]:
    """The test binary and upstream's data files beside it (built, or reused, by hack/schedperf/build.sh)."""
    env = dict(os.environ)
    env.setdefault("KUBE_BUILD_NICE", "19")
    result = subprocess.run(["bash", str(BUILD)], stdout=subprocess.PIPE, text=True, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"building scheduler_perf failed (exit {result.returncode}); see the output above")
    binary = Path(result.stdout.strip().splitlines()[-1])
    return binary, binary.parent / "upstream"


def upstream_case(data: Path, family: str, name: str) -> dict[str, Any]:
    cases = yaml.safe_load((data / family / "performance-config.yaml").read_text())
    for case in cases:
        if case.get("name") == name:
            return case
    raise RuntimeError(f"no test case {name} in upstream's {family}/performance-config.yaml")


def pick_workload(case: dict[str, Any], size: Any) -> dict[str, Any]:
    """Upstream's workload of that name, or the data file's own ({name, params}) on the case's template."""
    if isinstance(size, str):
        for w in case["workloads"]:
            if w["name"] == size:
                chosen = copy.deepcopy(w)
                break
        else:
            raise RuntimeError(f"{case['name']} has no workload {size}")
    else:
        if hasattr(size, "model_dump"):  # the workload file's SchedPerfSize
            size = size.model_dump()
        chosen = {"name": size["name"], "params": dict(size["params"])}
        if size.get("featureGates"):
            chosen["featureGates"] = dict(size["featureGates"])
    # Upstream's thresholds are its CI machines' rates; a figure here is a ratio within the run, never a
    # pass mark, so no threshold fails a slower machine's run.
    chosen.pop("threshold", None)
    chosen.pop("thresholdMetricSelector", None)
    chosen["labels"] = ["performance"]
    return chosen


def stanza(port: int, *, floor: bool) -> dict[str, Any]:
    """config/in-scheduler/scheduler-config.yaml's extender, over plain HTTP on loopback (the harness's
    connection details, as the e2e control plane does)."""
    extender = copy.deepcopy(yaml.safe_load(IN_SCHEDULER_CONFIG.read_text())["extenders"][0])
    extender["urlPrefix"] = f"http://127.0.0.1:{port}"
    extender["enableHTTPS"] = False
    extender.pop("tlsConfig", None)
    if floor:  # the Go floor has nothing to preempt (kube-scheduler binds, as for the extender)
        extender.pop("preemptVerb", None)
    return extender


def opted_in(template: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """The pod template with its native rule taken out, the rule as an inline PlacementPolicy over the pods
    carrying the template's labels, and the opt-in resource requested (requests and limits, as adopt writes it)."""
    pod = copy.deepcopy(template)
    spec = pod["spec"]
    for field in NATIVE_RULES:
        spec.pop(field, None)
    labels = pod.get("metadata", {}).get("labels") or {}
    rule = copy.deepcopy(policy)
    rule.setdefault("group", {})["selector"] = {"matchLabels": dict(labels)}
    pod.setdefault("metadata", {}).setdefault("annotations", {})[INLINE_POLICY_ANNOTATION] = json.dumps(rule)
    resources = spec["containers"][0].setdefault("resources", {})
    for part in ("requests", "limits"):
        resources.setdefault(part, {})[OPT_IN_RESOURCE] = "1"
    return pod


def write_case(
    run_dir: Path, data: Path, spec: Any, size: Any, config: str, arm: str, port: int | None
) -> tuple[Path, str]:
    """The run's performance-config.yaml (in run_dir/case, upstream's `../templates` beside it): one test case
    with one workload, the arm's scheduler configuration and measured pods. Returns (cwd, the workload's name)."""
    family_dir = data / spec.family
    case = copy.deepcopy(upstream_case(data, spec.family, spec.case))
    workload = pick_workload(case, size)
    case["workloads"] = [workload]
    cwd = run_dir / "case"
    cwd.mkdir(parents=True)
    (run_dir / "templates").symlink_to(data / "templates")
    shipped = case.pop("schedulerConfigPath", None)
    base = None
    if config == "shipped" and shipped:
        base = yaml.safe_load((family_dir / shipped).read_text())
    if arm != "native":
        base = copy.deepcopy(base) if base else dict(SCHEDULER_CONFIG)
        assert port is not None
        base["extenders"] = [stanza(port, floor=arm.endswith("gofloor"))]
    if base is not None:
        path = cwd / "scheduler-config.yaml"
        path.write_text(yaml.safe_dump(base))
        case["schedulerConfigPath"] = str(path)
    if arm.startswith("policy-"):
        for op in case["workloadTemplate"]:
            if op.get("opcode") != "createPods" or not op.get("collectMetrics"):
                continue
            source = op.get("podTemplatePath") or case.get("defaultPodTemplatePath")
            template = yaml.safe_load((family_dir / source).read_text())
            path = cwd / "measured-pod.yaml"
            path.write_text(yaml.safe_dump(opted_in(template, spec.policy)))
            op["podTemplatePath"] = str(path)
    (cwd / "performance-config.yaml").write_text(yaml.safe_dump([case], sort_keys=False))
    return cwd, workload["name"]


def _exited(pid: int) -> bool:
    """Whether our child has exited, without reaping it (its rusage is read by os.wait4 afterwards)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class CpuSampler(threading.Thread):
    """Every `interval` seconds, the CPU seconds of each named process tree, stamped with time.time(): what
    a run's measured stretch cost each, read afterwards between two instants. CPU time, unlike a rate, barely
    moves with the load other jobs put on a shared machine."""

    def __init__(self, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.roots: dict[str, int] = {}
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            now = time.time()
            self.samples.append((now, {name: tree_cpu(pid) for name, pid in list(self.roots.items())}))

    def stop(self) -> None:
        self.halt.set()
        self.join(5)

    def at(self, instant: float, name: str) -> float | None:
        """The sample nearest before `instant` (or the first) of one tree."""
        before = [values for t, values in self.samples if t <= instant and name in values]
        after = [values for t, values in self.samples if name in values]
        chosen = before[-1] if before else (after[0] if after else None)
        return None if chosen is None else chosen[name]


# upstream's throughput collector, once a second while the measured pods are placed
PROGRESS = re.compile(r"^I(\d{4}) (\d\d:\d\d:\d\d\.\d+) .*\] (\d+) pods have been scheduled successfully", re.M)


def measured_stretch(log_text: str) -> tuple[float, float, int] | None:
    """(start, end, pods placed between) of the measured pods' placement, from the harness's progress lines
    (klog's local time, the runner's too)."""
    found = PROGRESS.findall(log_text)
    if len(found) < 2:
        return None
    year = time.localtime().tm_year

    def instant(day: str, clock: str) -> float:
        stamp = time.strptime(f"{year}{day} {clock.split('.')[0]}", "%Y%m%d %H:%M:%S")
        return time.mktime(stamp) + float("0." + clock.split(".")[1])

    (d0, c0, n0), (d1, c1, n1) = found[0], found[-1]
    return instant(d0, c0), instant(d1, c1), int(n1) - int(n0)


class Extender:
    """The extender served from `tree`, as deployed in-scheduler mode (no TLS on loopback), on the
    harness's API server."""

    def __init__(self, tree: Path, kubeconfig: Path, port: int, log_path: Path) -> None:
        self.port = port
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "extender", "serve", f"--listen=127.0.0.1:{port}", f"--kubeconfig={kubeconfig}"],
            cwd=tree,
            env=dict(os.environ, PYTHONPATH=str(tree)),
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the extender exited ({self.proc.returncode}); see {self.log.name}")
            try:
                if requests.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"the extender was not ready in {timeout}s; see {self.log.name}")

    def stop(self) -> float:
        """Stops it; its CPU seconds (itself and the children it waited for)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own child's process group (start_new_session)
        try:
            _, status, usage = os.wait4(self.proc.pid, 0)
            self.proc.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            usage = None
        self.log.close()
        return round(usage.ru_utime + usage.ru_stime, 2) if usage else 0.0


def run_one(
    binary: Path,
    data: Path,
    kube_bin: Path,
    go_floor: Path | None,
    spec: Any,
    size: Any,
    config: str,
    arm: str,
    run_dir: Path,
    tree: Path,
    timeout_s: float,
    log=print,
) -> dict[str, Any]:
    """One harness process on one arm; its figures."""
    port = free_port() if arm != "native" else None
    cwd, workload_name = write_case(run_dir, data, spec, size, config, arm, port)
    items = run_dir / "data-items"
    env = dict(os.environ)
    env["PATH"] = f"{kube_bin}{os.pathsep}{env.get('PATH', '')}"  # etcd, from the control plane's build
    # An address nothing listens on: the harness then starts its own etcd rather than reusing one at the
    # default address that another process on this machine may own.
    env["KUBE_INTEGRATION_ETCD_URL"] = f"http://127.0.0.1:{free_port()}"
    # The binary is built with -trimpath (to share go's build cache with the control plane's build), so the
    # API server's test fixtures are found through the variables upstream reads for its own trimmed builds:
    # the build copies them under upstream/src at the path compiled into the binary.
    env |= {"TEST_SRCDIR": str(data), "TEST_WORKSPACE": "src"}
    needs_extender = arm.endswith("-extender")
    kubeconfig, ready, done = run_dir / "harness.kubeconfig", run_dir / "ready", run_dir / "done"
    if arm != "native":
        env["SCHEDPERF_DONE"] = str(done)
    if needs_extender:
        env |= {"SCHEDPERF_KUBECONFIG": str(kubeconfig), "SCHEDPERF_READY": str(ready)}
    floor = None
    if arm.endswith("-gofloor"):
        assert go_floor is not None and port is not None
        floor = GoFloorServer(go_floor, port, run_dir / "gofloor.log")
        floor.wait_ready(30)
    argv = [
        str(binary),
        "-test.run=^$",
        "-test.bench=^BenchmarkPerfScheduling$",
        "-test.benchtime=1ns",
        f"-test.timeout={int(timeout_s)}s",
        "-perf-scheduling-label-filter=performance",
        f"-data-items-dir={items}",
    ]
    harness_log = open(run_dir / "harness.log", "wb")
    load_before = loadavg()[0]  # a shared machine's other work shows here: read a ratio beside it
    started = time.monotonic()
    sampler = CpuSampler()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=harness_log, stderr=subprocess.STDOUT, start_new_session=True
    )
    sampler.roots["harness"] = proc.pid
    if floor is not None:
        sampler.roots["extender"] = floor.proc.pid
    sampler.start()
    extender: Extender | None = None
    extender_cpu = None
    try:
        if needs_extender:
            assert port is not None
            while not kubeconfig.exists():
                if _exited(proc.pid):
                    raise RuntimeError("the harness exited before its API server was up")
                if time.monotonic() - started > 600:
                    raise TimeoutError("no kubeconfig from the harness in 600 s")
                time.sleep(0.2)
            time.sleep(0.2)  # written in one go, but give the writer its close
            kubectl = [str(kube_bin / "kubectl"), f"--kubeconfig={kubeconfig}"]
            for crd in CRDS:
                subprocess.run([*kubectl, "apply", "-f", str(crd)], check=True, capture_output=True)
            extender = Extender(tree, kubeconfig, port, run_dir / "extender.log")
            sampler.roots["extender"] = extender.proc.pid
            extender.wait_ready()
            ready.touch()
        if arm != "native":
            # The workload is done when the harness says so: the server stops then, before the API
            # server's graceful shutdown (which the extender's watches would hold for minutes) and
            # upstream's leak check (which kube-scheduler's idle connections to it would hold for 90 s).
            while not done.exists() and not _exited(proc.pid):
                time.sleep(0.2)
            sampler.stop()  # the measured stretch is over; stopping the servers is not part of it
            if extender is not None:
                extender_cpu = extender.stop()
                extender = None
            if floor is not None:
                extender_cpu = round(tree_cpu(floor.proc.pid), 2)
                floor.stop()
                floor = None
            done.unlink(missing_ok=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        sampler.stop()
        if proc.returncode is None:  # not reaped: the run failed before the harness finished
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        if extender is not None:
            extender_cpu = extender.stop()
        if floor is not None:
            floor.stop()
        harness_log.close()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = (run_dir / "harness.log").read_text(errors="replace").splitlines()[-40:]
        raise RuntimeError(f"{spec.case}/{workload_name} on {arm} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    throughput, attempt = read_items(items)
    per_pod: dict[str, float | None] = {"harness": None, "extender": None}
    stretch = measured_stretch((run_dir / "harness.log").read_text(errors="replace"))
    if stretch is not None and stretch[2] > 0:
        start, end, pods = stretch
        for name in per_pod:
            a, b = sampler.at(start, name), sampler.at(end, name)
            if a is not None and b is not None:
                per_pod[name] = round(1000 * (b - a) / pods, 2)
    row = {
        "case": spec.case,
        "workload": workload_name,
        "config": config,
        "arm": arm,
        "pods_per_second": throughput.get("Average"),
        "pods_per_second_p50": throughput.get("Perc50"),
        "attempt_ms": attempt,
        "harness_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "extender_cpu_s": extender_cpu,
        "wall_s": round(wall, 1),
        "load_1m": [round(load_before, 2), round(loadavg()[0], 2)],
        # CPU-ms per pod placed while upstream measured (its progress lines bound the stretch): the harness
        # process tree (API server, kube-scheduler, etcd) and the extender's or the Go floor's
        "harness_cpu_ms_per_pod": per_pod["harness"],
        "extender_cpu_ms_per_pod": per_pod["extender"],
        "measured_stretch_pods": stretch[2] if stretch else None,
    }
    log(str(row))
    return row


def read_items(items: Path) -> tuple[dict[str, float], float | None]:
    """Upstream's data items: SchedulingThroughput's buckets, and the mean scheduling attempt duration (ms)
    of scheduled pods."""
    throughput: dict[str, float] = {}
    attempt = None
    for path in sorted(items.glob("*.json")):
        for item in json.loads(path.read_text()).get("dataItems", []):
            labels = item.get("labels", {})
            if labels.get("Metric") == "SchedulingThroughput":
                throughput = item.get("data", {})
            elif (
                labels.get("Metric") == "scheduler_scheduling_attempt_duration_seconds"
                and labels.get("result") == "scheduled"
            ):
                attempt = item.get("data", {}).get("Average")
    return throughput, round(attempt, 3) if attempt is not None else None


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    """Every case x configuration x arm, `rounds` times, arms alternating within a round."""
    params = workload.workload
    binary, data = harness(log)
    kube_bin = kube_binaries()
    go_floor = None
    if any(a.endswith("-gofloor") for a in arms):
        build = build_go_floor(log=log)
        if build.path is None:
            raise RuntimeError(f"the Go floor: {build.reason}")
        go_floor = build.path
    rows: list[dict[str, Any]] = []
    n = 0
    for spec in params.cases:
        if params.only and spec.case not in params.only:
            continue
        size = spec.smoke if params.size == "smoke" else spec.benchmark
        case_arms = [a for a in arms if a in spec.arms]
        for config in spec.configs:
            for index in range(rounds):
                order = case_arms if index % 2 == 0 else list(reversed(case_arms))
                for arm in order:
                    n += 1
                    log(f"[scheduler_perf] {spec.case} {config} {arm} round {index + 1}/{rounds}")
                    run_dir = workdir / f"run-{n}"
                    run_dir.mkdir()
                    try:
                        row = run_one(
                            binary,
                            data,
                            kube_bin,
                            go_floor,
                            spec,
                            size,
                            config,
                            arm,
                            run_dir,
                            tree,
                            params.timeout_s,
                            log,
                        )
                    finally:
                        if params.keep_logs:  # the harness's, the extender's and the floor's logs, the files written
                            shutil.copytree(run_dir, Path(params.keep_logs) / run_dir.name, symlinks=True)
                    row["round"] = index
                    rows.append(row)
    summary = summarise(rows)
    return {
        "figures": figures(summary),
        "arms": {arm: {"available": True, "mode": arm} for arm in arms},
        "detail": {"binary": str(binary), "rounds": rows, "summary": summary},
    }


def _median(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 3) if present else None


def _cpu_per_pod(row: dict[str, Any]) -> float | None:
    """The CPU-ms a measured pod cost the harness and the arm's server together (None where the stretch
    could not be read)."""
    harness = row.get("harness_cpu_ms_per_pod")
    if harness is None:
        return None
    return round(harness + (row.get("extender_cpu_ms_per_pod") or 0.0), 2)


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = list(dict.fromkeys((r["case"], r["workload"], r["config"], r["arm"]) for r in rows))
    out = []
    for case, workload, config, arm in keys:
        mine = [r for r in rows if (r["case"], r["workload"], r["config"], r["arm"]) == (case, workload, config, arm)]
        native = [
            r for r in rows if (r["case"], r["workload"], r["config"], r["arm"]) == (case, workload, config, "native")
        ]
        rate, base = _median([r["pods_per_second"] for r in mine]), _median([r["pods_per_second"] for r in native])
        cpu, cpu_base = _median([_cpu_per_pod(r) for r in mine]), _median([_cpu_per_pod(r) for r in native])
        out.append(
            {
                "case": case,
                "workload": workload,
                "config": config,
                "arm": arm,
                "rounds": len(mine),
                "pods_per_second": rate,
                "over_native": round(rate / base, 3) if rate is not None and base else None,
                "cpu_ms_per_pod": cpu,
                "cpu_over_native": round(cpu / cpu_base, 3) if cpu is not None and cpu_base else None,
                "harness_cpu_ms_per_pod": _median([r.get("harness_cpu_ms_per_pod") for r in mine]),
                "extender_cpu_ms_per_pod": _median([r.get("extender_cpu_ms_per_pod") for r in mine]),
                "attempt_ms": _median([r["attempt_ms"] for r in mine]),
                "harness_cpu_s": _median([r["harness_cpu_s"] for r in mine]),
                "extender_cpu_s": _median([r["extender_cpu_s"] for r in mine]),
                "load_1m": _median([max(r["load_1m"]) for r in mine if r.get("load_1m")]),
            }
        )
    return out


def figures(summary: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in summary:
        prefix = f"{s['case']}.{s['config']}.{s['arm']}"
        for key in (
            "pods_per_second",
            "over_native",
            "cpu_ms_per_pod",
            "cpu_over_native",
            "harness_cpu_ms_per_pod",
            "extender_cpu_ms_per_pod",
            "attempt_ms",
            "harness_cpu_s",
            "extender_cpu_s",
        ):
            if s[key] is not None:
                out[f"{prefix}.{key}"] = s[key]
    return out


HEADERS = [
    "case",
    "workload",
    "config",
    "arm",
    "n",
    "pods/s",
    "over native",
    "CPU-ms/pod",
    "over native",
    "harness",
    "extender",
    "load",
]


def report(result: dict[str, Any]) -> str:
    rows = [
        [
            s["case"],
            s["workload"],
            s["config"],
            s["arm"],
            s["rounds"],
            _dash(s["pods_per_second"]),
            _dash(s["over_native"]),
            _dash(s["cpu_ms_per_pod"]),
            _dash(s["cpu_over_native"]),
            _dash(s["harness_cpu_ms_per_pod"]),
            _dash(s["extender_cpu_ms_per_pod"]),
            _dash(s.get("load_1m")),
        ]
        for s in result["detail"]["summary"]
    ]
    return table(HEADERS, rows)


def _dash(value: Any) -> Any:
    return "-" if value is None else value

"""The in-scheduler gate floor, and every API call per opted-in pod, for the kind e2e's modes variant.

Why: in-scheduler mode placed opted-in pods at a third of second-scheduler mode's rate, for 67 CPU-ms
a pod over every component against 25, and nobody could say which part a scheduling gate costs by
itself (the admission policy that adds it at create, the PATCH that removes it, that update's
fan-out to every pod watcher, the StatefulSet controller's sync on it) and which part the extender
adds per held pod (its decisions, its window, Events, annotations, its writes' validating policy).

The side `gate-floor` (SIDE) is the in-scheduler side's configuration and StatefulSets with the
extender's own gate loop off (serve --no-place-gate, the extender restarted for the round) and a
do-nothing lifter in its place: a process of its own (its CPU is the component LIFTER) that
watches the opted-in pods and removes the placeable gate from each as soon as the watch shows it,
no decision and no window, one PATCH a pod (the extender's own patch: a resourceVersion test and
the gate's removal), LIFTERS at once. kube-scheduler still calls the extender for filter and bind.
It lifts as the cluster's admin, so the extender's validating policy
(placement-extender-pod-writes, which matches the extender's identity only) is not evaluated for
its writes: that policy is part of what the extender adds.

Every side's API calls: kube-apiserver's /metrics is read just before a round's CPU is first read
and just after it is read at the end (ScrapedCluster), and the round keeps the deltas
(`api_delta`): requests by verb/resource/subresource (calls, and the API server's own seconds for
them), admission by plug-in and by step, the admission policies' match conditions and checks, and
watch events sent by resource (the fan-out). `api_per_pod` divides a side's deltas over its
complete rounds by the pods they placed.

    python -m benchmarks.gate_floor --server URL --ca CA --cert CERT --key KEY   # the lifter alone
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from extender.api.policy import PLACEABLE_GATE  # noqa: E402
from extender.server.gate_patch import lift_patch  # noqa: E402

SIDE = "gate-floor"
LIFTER = "gate-floor-lifter"  # the lifter's process: a component of its own in the round's CPU
NO_GATE_LOOP = "--no-place-gate"  # the extender's serve option that leaves the placeable gate alone
LIFTERS = 16  # PATCHes in flight at once: every gated pod at once, as far as the API server takes them
SELECTOR = "bench=e2e"  # the benchmark's pods (benchmarks/cluster.py's StatefulSet template labels)
WATCH_SECONDS = 60


# ---------------------------------------------------------------------------------------- API metrics

# Sample name -> the labels a delta keeps (the others, the response code among them, are summed).
# Histograms by their _count and _sum samples: how many, and the seconds the API server spent.
FAMILIES: dict[str, tuple[str, ...]] = {
    "apiserver_request_total": ("verb", "resource", "subresource"),
    "apiserver_request_duration_seconds_count": ("verb", "resource", "subresource"),
    "apiserver_request_duration_seconds_sum": ("verb", "resource", "subresource"),
    "apiserver_admission_controller_admission_duration_seconds_count": ("name", "operation", "type"),
    "apiserver_admission_controller_admission_duration_seconds_sum": ("name", "operation", "type"),
    "apiserver_admission_step_admission_duration_seconds_count": ("operation", "type"),
    "apiserver_admission_step_admission_duration_seconds_sum": ("operation", "type"),
    "apiserver_admission_match_condition_evaluation_seconds_count": ("name", "operation", "type"),
    "apiserver_admission_match_condition_evaluation_seconds_sum": ("name", "operation", "type"),
    "apiserver_mutating_admission_policy_check_duration_seconds_count": ("policy",),
    "apiserver_mutating_admission_policy_check_duration_seconds_sum": ("policy",),
    "apiserver_validating_admission_policy_check_duration_seconds_count": ("policy",),
    "apiserver_validating_admission_policy_check_duration_seconds_sum": ("policy",),
    "apiserver_validating_admission_policy_check_total": ("policy", "enforcement_action"),
    "apiserver_watch_events_total": ("resource",),
    "apiserver_watch_events_sizes_sum": ("resource",),
}
# How each table of api_delta is built: (name, count sample, seconds sample or None).
TABLES: tuple[tuple[str, str, str | None], ...] = (
    ("requests", "apiserver_request_total", "apiserver_request_duration_seconds_sum"),
    (
        "admission_controllers",
        "apiserver_admission_controller_admission_duration_seconds_count",
        "apiserver_admission_controller_admission_duration_seconds_sum",
    ),
    (
        "admission_steps",
        "apiserver_admission_step_admission_duration_seconds_count",
        "apiserver_admission_step_admission_duration_seconds_sum",
    ),
    (
        "match_conditions",
        "apiserver_admission_match_condition_evaluation_seconds_count",
        "apiserver_admission_match_condition_evaluation_seconds_sum",
    ),
    (
        "mutating_policies",
        "apiserver_mutating_admission_policy_check_duration_seconds_count",
        "apiserver_mutating_admission_policy_check_duration_seconds_sum",
    ),
    (
        "validating_policies",
        "apiserver_validating_admission_policy_check_duration_seconds_count",
        "apiserver_validating_admission_policy_check_duration_seconds_sum",
    ),
    # the fan-out: events the API server sent to watchers, and their bytes (in "seconds"' place)
    ("watch_events", "apiserver_watch_events_total", "apiserver_watch_events_sizes_sum"),
)


def filter_page(text: str, names: Iterable[str] = FAMILIES) -> str:
    """The lines of a /metrics page holding samples of `names` (the API server's page is megabytes;
    only these are parsed). Comments go too: the parser then takes each sample under its full name."""
    prefixes = tuple(f"{name}{sep}" for name in names for sep in ("{", " "))
    return "\n".join(line for line in text.splitlines() if line.startswith(prefixes)) + "\n"


def read_samples(text: str) -> dict[str, dict[tuple[str, ...], float]]:
    """{sample name: {kept label values: value summed over the other labels}} for FAMILIES's
    samples in a /metrics text, parsed with prometheus_client's exposition parser."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[tuple[str, ...], float]] = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(filter_page(text)):
        for sample in family.samples:
            kept = FAMILIES.get(sample.name)
            if kept is None:
                continue
            out[sample.name][tuple(sample.labels.get(k, "") for k in kept)] += sample.value
    return {name: dict(series) for name, series in out.items()}


def api_delta(before: str, after: str) -> dict[str, list[dict[str, Any]]]:
    """Each table of TABLES over a round, from the /metrics texts read before and after it: a row a
    label set whose count grew, with `calls` and `seconds` (the watch events' bytes for those)."""
    first, last = read_samples(before), read_samples(after)
    out: dict[str, list[dict[str, Any]]] = {}
    for table, count_name, seconds_name in TABLES:
        labels = FAMILIES[count_name]
        rows = []
        counts = last.get(count_name, {})
        for key in sorted(counts):
            calls = counts[key] - first.get(count_name, {}).get(key, 0.0)
            if calls <= 0:
                continue
            row: dict[str, Any] = dict(zip(labels, key, strict=True))
            row["calls"] = int(round(calls))
            if seconds_name is not None:
                seconds_key = key[: len(FAMILIES[seconds_name])]
                spent = last.get(seconds_name, {}).get(seconds_key, 0.0)
                spent -= first.get(seconds_name, {}).get(seconds_key, 0.0)
                row["seconds"] = round(spent, 6)
            rows.append(row)
        out[table] = rows
    return out


def api_per_pod(rounds: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """A side's API deltas over its complete rounds, per pod placed: each row's calls and ms
    (seconds x 1000; bytes for watch_events) divided by the pods those rounds placed."""
    mine = [r for r in rounds if r.get("complete") and r.get("api")]
    pods = sum(r["bound"] for r in mine)
    if not pods:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for table, count_name, _ in TABLES:
        labels = FAMILIES[count_name]
        totals: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in mine:
            for row in r["api"].get(table, []):
                total = totals[tuple(row[k] for k in labels)]
                total[0] += row["calls"]
                total[1] += row.get("seconds", 0.0)
        scale = 1.0 if table == "watch_events" else 1000.0
        out[table] = [
            {
                **dict(zip(labels, key, strict=True)),
                "per_pod": round(calls / pods, 3),
                ("bytes_per_pod" if table == "watch_events" else "ms_per_pod"): round(scale * spent / pods, 3),
            }
            for key, (calls, spent) in sorted(totals.items())
        ]
    return out


def api_table(per_side: dict[str, dict[str, list[dict[str, Any]]]], table: str, min_per_pod: float = 0.05) -> str:
    """One TABLES table for every side, a row a label set (a side's cell: calls / pod, ms / pod),
    rows any side reaches `min_per_pod` calls a pod for; sorted by the heaviest side's ms."""
    from benchmarks.common import table as render

    labels = FAMILIES[next(c for name, c, _ in TABLES if name == table)]
    cost = "bytes_per_pod" if table == "watch_events" else "ms_per_pod"
    sides = list(per_side)
    cells: dict[tuple[str, ...], dict[str, tuple[float, float]]] = defaultdict(dict)
    for side, tables in per_side.items():
        for row in tables.get(table, []):
            cells[tuple(row[k] for k in labels)][side] = (row["per_pod"], row[cost])
    keys = [k for k, v in cells.items() if max(c for c, _ in v.values()) >= min_per_pod]
    keys.sort(key=lambda k: -max(ms for _, ms in cells[k].values()))
    rows = [[*k, *(f"{cells[k][s][0]:g} / {cells[k][s][1]:g}" if s in cells[k] else "-" for s in sides)] for k in keys]
    unit = "bytes" if table == "watch_events" else "ms"
    return render([*labels, *(f"{s}: per pod / {unit}" for s in sides)], rows)


SETTLE_TIMEOUT = 60.0  # seconds a round's cluster may take to fall quiet after its last bind
SETTLE_POLL = 0.5  # seconds between two looks (each lists the round's pods: API server work of its own, in the window)
SETTLE_QUIET = 1.0  # ... quiet: every pod Running, and no pod or StatefulSet of the round changed for this long


class ScrapedCluster:
    """A mixin for a BenchCluster: run_round reads cpu_seconds() once before a round and once after
    it; the API server's metrics are read beside them, outside the measured window (before the
    first CPU reading, after the last), so the page's own cost is not in the round's figures.

    Before the last reading it waits for the round to settle (every pod Running, nothing of the
    round's changing for SETTLE_QUIET): the work that trails the last bind (kwok marking pods
    Running, the StatefulSet controller's status updates) is then counted on every side. Counted
    only to the last bind, a fast round left most of it out and a slow one, whose binds trickle in,
    kept it in: a diagnostic in-scheduler round counted a status PATCH for every pod, the gate
    floor's 0.4. The time of a round is the watch's, unchanged."""

    scrapes: list[str]

    def namespace(self, name: str) -> str:
        self.__dict__["round_namespace"] = name
        return super().namespace(name)  # type: ignore[misc]

    def cpu_seconds(self) -> dict[str, float]:
        scrapes = self.__dict__.setdefault("scrapes", [])
        if len(scrapes) % 2 == 0:
            scrapes.append(self.metrics_page())
            return super().cpu_seconds()  # type: ignore[misc]
        self.__dict__["settled_after"] = self.settle()
        cpu = super().cpu_seconds()  # type: ignore[misc]
        scrapes.append(self.metrics_page())
        return cpu

    def metrics_page(self) -> str:
        admin = self.admin  # type: ignore[attr-defined]
        return filter_page(admin.session.get(admin.server + "/metrics", timeout=60).text)

    def settle(self) -> float | None:
        """Seconds until the round's namespace is quiet (None: not within SETTLE_TIMEOUT)."""
        namespace = self.__dict__.get("round_namespace")
        if namespace is None:
            return None
        api = self.admin  # type: ignore[attr-defined]
        started = time.monotonic()
        last, quiet_since = None, started
        while time.monotonic() - started < SETTLE_TIMEOUT:
            pods = api.list(f"/api/v1/namespaces/{namespace}/pods")
            sets = api.list(f"/apis/apps/v1/namespaces/{namespace}/statefulsets")
            versions = tuple(sorted(o["metadata"]["resourceVersion"] for o in [*pods, *sets]))
            running = all((p.get("status") or {}).get("phase") == "Running" for p in pods)
            now = time.monotonic()
            if versions != last or not running:
                last, quiet_since = versions, now
            elif now - quiet_since >= SETTLE_QUIET:
                return round(quiet_since - started, 2)
            time.sleep(SETTLE_POLL)
        return None

    def round_api(self) -> dict[str, Any] | None:
        """The last round's deltas and how long it took to settle after its last bind, and forget
        its pages (None: the round read no pair)."""
        scrapes = self.__dict__.setdefault("scrapes", [])
        pair = scrapes[-2:] if len(scrapes) >= 2 and len(scrapes) % 2 == 0 else None
        scrapes.clear()
        if pair is None:
            return None
        return {**api_delta(*pair), "settled_after_s": self.__dict__.pop("settled_after", None)}


# Who made the calls: a diagnostic run may start kube-apiserver with an audit log (every request's
# metadata, never a body) and count a round's requests by client; not in the timed runs, since
# writing the log costs the API server CPU of its own.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
"""


def audit_args(workdir: Path) -> list[str]:
    """kube-apiserver flags for an audit log of every request's metadata in `workdir`."""
    policy = workdir / "audit-policy.yaml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(AUDIT_POLICY)
    return [f"--audit-policy-file={policy}", f"--audit-log-path={workdir / 'audit.log'}", "--audit-log-maxsize=0"]


def attribute(lines: Iterable[str], namespace: str) -> dict[tuple[str, str, str, str], int]:
    """{(user, verb, resource, subresource): requests} of the audit log's completed requests on
    objects in `namespace` (a round's pods, their Events, its StatefulSets)."""
    out: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or ref.get("namespace") != namespace:
            continue
        user = (event.get("user") or {}).get("username", "")
        out[(user, event.get("verb", ""), ref.get("resource", ""), ref.get("subresource", ""))] += 1
    return dict(out)


# ---------------------------------------------------------------------------------------- the lifter


class Lifter:
    """Watches the benchmark's pods in every namespace and lifts the placeable gate of each gated one
    as soon as the watch shows it, LIFTERS PATCHes at once; a pod whose patch failed (it changed in
    between) is tried again at its next event."""

    def __init__(self, server: str, session: requests.Session, log: Callable[[str], None] = print) -> None:
        self.server = server.rstrip("/")
        self.session = session
        self.log = log
        self.pool = ThreadPoolExecutor(max_workers=LIFTERS, thread_name_prefix="lift")
        self.pending: set[str] = set()  # uids lifted or being lifted
        self.mutex = threading.Lock()
        self.lifted = 0
        self.failed = 0

    def offer(self, obj: dict[str, Any]) -> bool:
        """Lift `obj` if it carries the gate and is not being lifted already; True if submitted."""
        gates = [g.get("name") for g in (obj.get("spec") or {}).get("schedulingGates") or []]
        uid = obj["metadata"]["uid"]
        with self.mutex:
            if PLACEABLE_GATE not in gates or uid in self.pending:
                return False
            self.pending.add(uid)
        self.pool.submit(self._lift, obj)
        return True

    def _lift(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        url = f"{self.server}/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        try:
            response = self.session.patch(
                url,
                data=json.dumps(lift_patch(obj, None, PLACEABLE_GATE)),
                headers={"Content-Type": "application/json-patch+json"},
                timeout=30,
            )
            ok = response.status_code < 400
        except requests.RequestException:
            ok = False
        with self.mutex:
            if ok:
                self.lifted += 1
            else:
                self.failed += 1
                self.pending.discard(meta["uid"])  # its next event offers it again

    def run(self, stop: threading.Event | None = None) -> None:
        url = f"{self.server}/api/v1/pods"
        listed = self.session.get(url, params={"labelSelector": SELECTOR}, timeout=30)
        listed.raise_for_status()
        page = listed.json()
        version = page["metadata"]["resourceVersion"]
        for obj in page.get("items") or []:
            self.offer(obj)
        self.log(f"watching from {version}")
        while stop is None or not stop.is_set():
            params = {
                "watch": "1",
                "labelSelector": SELECTOR,
                "resourceVersion": version,
                "timeoutSeconds": str(WATCH_SECONDS),
                "allowWatchBookmarks": "true",
            }
            with self.session.get(url, params=params, stream=True, timeout=(10, WATCH_SECONDS + 30)) as response:
                for line in response.iter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":  # too old a version: list again
                        return self.run(stop)
                    version = obj.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.offer(obj)
            self.log(f"lifted {self.lifted}, failed {self.failed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="lift the placeable gate of every benchmark pod at once")
    parser.add_argument("--server", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    session = requests.Session()
    session.trust_env = False  # loopback only
    session.verify = args.ca
    session.cert = (args.cert, args.key)
    adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=LIFTERS + 1)
    session.mount("https://", adapter)
    Lifter(args.server, session, log=lambda text: print(text, flush=True)).run()
    return 0


# ---------------------------------------------------------------------------------------- the round


def restart_extender(cluster: Any, extra_args: list[str], nodes: int) -> None:
    """Stop the extender and start it again with `extra_args` after the cluster's own; back once
    its cache holds every node (filter would refuse every pod before)."""
    from extender.devcluster.api import wait_for

    process = cluster.process("extender")
    if process is not None:
        process.stop()
    cluster.start_extender(extra_args)
    port = cluster.ports["extender"]
    wait_for(
        "the restarted extender's cache to hold every node",
        lambda: requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()["cache"]["nodes"] >= nodes,
        60,
    )


def start_lifter(cluster: Any) -> Any:
    """The lifter as a component of the cluster (its CPU counted as LIFTER), back once it watches."""
    from benchmarks.common import REPO
    from extender.devcluster.api import wait_for

    admin = cluster.admin
    cert, key = admin.session.cert
    argv = [sys.executable, "-m", "benchmarks.gate_floor", "--server", admin.server, "--ca", str(admin.session.verify)]
    process = cluster._spawn(LIFTER, [*argv, "--cert", cert, "--key", key], {"PYTHONPATH": str(REPO)})

    def watching() -> bool:
        process.check()
        return "watching from" in process.log_path.read_text(errors="replace")

    wait_for("the gate floor's lifter to watch", watching, 60, interval=0.1)
    return process


def run_floor_round(cluster: Any, index: int, nodes: int, run: Callable[[str, str], dict[str, Any]], log=print) -> dict:
    """One gate-floor round: the extender restarted without its gate loop, the lifter started, the
    in-scheduler side's round (`run(side, index)`, benchmarks/cluster.py's run_round), then both put
    back. The round's namespace is the in-scheduler side's with `-gate-floor` after its index."""
    log(f"{SIDE} round {index}: the extender restarted with {NO_GATE_LOOP}, the lifter started")
    restart_extender(cluster, [NO_GATE_LOOP], nodes)
    lifter = start_lifter(cluster)
    try:
        result = run("in-scheduler", f"{index}-{SIDE}")
    finally:
        lifter.stop()
        restart_extender(cluster, [], nodes)
    log(f"{SIDE} round {index}: lifter's last lines: {lifter.tail(2)!r}")
    return {**result, "side": SIDE, "round": index}


if __name__ == "__main__":
    sys.exit(main())

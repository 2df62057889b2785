"""Timing probes inside the extender's gunicorn worker, for the runner's kind profile_e2e.

Run in place of `python -m extender`, with the same arguments:

    python -m benchmarks.e2e_probe --log-level info serve --listen=... --kubeconfig=...

Before handing over to `extender.cli.commands.main` it wraps, in memory only (nothing under extender/ is
edited), a few functions of the running process; gunicorn forks its worker after that, so the
worker inherits them:

- `Verbs.bind` and `KubeBinder.bind`: per bind, the wall time of the verb, of the Binding call,
  the calling thread's CPU time and run-queue delay (/proc/thread-self/schedstat) during that
  call, how many binds were in flight, and whether the call opened a new TLS connection;
- `TimedLock.held`: how long each holder (filter, prioritize, bind, watch...) waited to get the
  store lock (the extender's own metric times the hold, not the wait);
- urllib3 `HTTPSConnection.connect` (new connections to the API server, per thread kind, and
  their handshake time) and `HTTPConnection.getresponse` (request sent -> headers read);
- `gc.callbacks`: collections per generation and the seconds spent in them.

A GIL probe thread (off until switched on) sleeps 5 ms in a loop and records how late it wakes:
the time a thread that returns from a blocking call waits for the GIL plus its run-queue delay
(the thread's total run-queue delay is in the thread table, so the two can be told apart).

Routes added to the extender's Flask app:

- `GET /bench/probe`: the worker's pid, every thread's name, CPU seconds and run-queue delay, the
  records and counters above;
- `POST /bench/probe/reset`: clear the records and counters (thread CPU stays cumulative);
- `POST /bench/probe/config` `{"switch_interval": s, "gil_probe": bool}`: sys.setswitchinterval
  and the GIL probe, at run time.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLK_TCK = os.sysconf("SC_CLK_TCK")

_local = threading.local()
_mutex = threading.Lock()


def _schedstat() -> tuple[int, int]:
    """(ns on cpu, ns waiting on a run queue) of the calling thread."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            run, wait, _ = f.read().split()
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


def _thread_kind(name: str) -> str:
    if name.startswith("watch-"):
        return name
    if name.startswith("ThreadPoolExecutor"):
        return "request"
    return name


class Probe:
    def __init__(self) -> None:
        self.reset()
        self.gil_probe_on = threading.Event()
        self._gil_thread: threading.Thread | None = None

    def reset(self) -> None:
        with _mutex:
            self.binds: list[dict[str, float]] = []
            self.lock_wait: dict[str, list[float]] = defaultdict(list)
            self.connects: dict[str, list[float]] = defaultdict(list)
            self.getresponse: dict[str, list[float]] = defaultdict(list)
            self.gc: dict[int, list[float]] = defaultdict(list)
            self.gil_late: list[float] = []
            self.accepted = 0  # client connections the worker accepted (kube-scheduler's churn)
            self.evaluations: dict[str, int] = defaultdict(int)  # verb -> engine evaluations (reuse misses)
            self.inflight = 0
            self.started = time.time()

    # ------------------------------------------------------------------ GIL probe
    def start_gil_probe(self) -> None:
        if self._gil_thread is None:
            self._gil_thread = threading.Thread(target=self._gil_loop, name="bench-gil-probe", daemon=True)
            self._gil_thread.start()

    def _gil_loop(self) -> None:
        nap = 0.005
        while True:
            self.gil_probe_on.wait()
            t0 = time.perf_counter()
            time.sleep(nap)
            self.gil_late.append(time.perf_counter() - t0 - nap)

    # ------------------------------------------------------------------ report
    def threads(self) -> list[dict[str, Any]]:
        names = {t.native_id: t.name for t in threading.enumerate()}
        out = []
        for task in Path("/proc/self/task").iterdir():
            tid = int(task.name)
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                run, wait, slices = (int(x) for x in (task / "schedstat").read_text().split())
            except (OSError, ValueError):
                continue
            out.append(
                {
                    "tid": tid,
                    "name": names.get(tid, f"native-{tid}"),
                    "cpu_seconds": (int(fields[11]) + int(fields[12])) / CLK_TCK,
                    "system_seconds": int(fields[12]) / CLK_TCK,
                    "runqueue_seconds": wait / 1e9,
                    "timeslices": slices,
                }
            )
        return out

    def report(self) -> dict[str, Any]:
        with _mutex:
            return {
                "pid": os.getpid(),
                "time": time.time(),
                "since": self.started,
                "switch_interval": sys.getswitchinterval(),
                # the whole process, threads that have exited included (a connection's thread
                # ends with its connection; the per-thread table sees only the live ones)
                "process_cpu_seconds": sum(os.times()[:2]),
                "threads": self.threads(),
                "binds": list(self.binds),
                "lock_wait": {k: list(v) for k, v in self.lock_wait.items()},
                "connects": {k: list(v) for k, v in self.connects.items()},
                "getresponse": {k: list(v) for k, v in self.getresponse.items()},
                "gc": {str(k): list(v) for k, v in self.gc.items()},
                "gil_late": list(self.gil_late),
                "accepted": self.accepted,
                "evaluations": dict(self.evaluations),
            }


PROBE = Probe()


def _gc_callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _local.gc_started = time.perf_counter()
    else:
        started = getattr(_local, "gc_started", None)
        if started is not None:
            PROBE.gc[info.get("generation", -1)].append(time.perf_counter() - started)


def install() -> None:
    """Wrap the functions named in the module docstring (in memory, in this process)."""
    import urllib3.connection

    from extender.server import effects, serve, worker
    from extender.server import verbs as verbs_module
    from extender.server.verbs import Verbs
    from extender.state import lock as lock_mod

    gc.callbacks.append(_gc_callback)

    original_held = lock_mod.TimedLock.held

    @contextmanager
    def held(self, holder: str):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        with original_held(self, holder):
            PROBE.lock_wait[holder].append(time.perf_counter() - t0)
            yield

    lock_mod.TimedLock.held = held  # type: ignore[method-assign]

    original_verb_bind = Verbs.bind

    def verb_bind(self, args):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        c0 = time.thread_time()
        _, q0 = _schedstat()
        _local.bind = record = {"inflight": PROBE.inflight}
        PROBE.inflight += 1
        try:
            return original_verb_bind(self, args)
        finally:
            PROBE.inflight -= 1
            _, q1 = _schedstat()
            record["wall"] = time.perf_counter() - t0
            record["cpu"] = time.thread_time() - c0
            record["runqueue"] = (q1 - q0) / 1e9
            _local.bind = None
            PROBE.binds.append(record)

    Verbs.bind = verb_bind  # type: ignore[method-assign]

    original_kube_bind = effects.KubeBinder.bind

    def kube_bind(self, namespace, name, uid, node):  # noqa: ANN001, ANN202
        record = getattr(_local, "bind", None) or {}
        t0 = time.perf_counter()
        c0 = time.thread_time()
        _, q0 = _schedstat()
        record["api_connects"] = 0
        try:
            return original_kube_bind(self, namespace, name, uid, node)
        finally:
            _, q1 = _schedstat()
            record["api_wall"] = time.perf_counter() - t0
            record["api_cpu"] = time.thread_time() - c0
            record["api_runqueue"] = (q1 - q0) / 1e9

    effects.KubeBinder.bind = kube_bind  # type: ignore[method-assign]

    original_connect = urllib3.connection.HTTPSConnection.connect

    def connect(self):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        try:
            return original_connect(self)
        finally:
            PROBE.connects[_thread_kind(threading.current_thread().name)].append(time.perf_counter() - t0)
            record = getattr(_local, "bind", None)
            if record is not None:
                record["api_connects"] = record.get("api_connects", 0) + 1
                record["api_connect_wall"] = time.perf_counter() - t0

    urllib3.connection.HTTPSConnection.connect = connect  # type: ignore[method-assign]

    original_getresponse = urllib3.connection.HTTPConnection.getresponse

    def getresponse(self):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        try:
            return original_getresponse(self)
        finally:
            elapsed = time.perf_counter() - t0
            PROBE.getresponse[_thread_kind(threading.current_thread().name)].append(elapsed)
            record = getattr(_local, "bind", None)
            if record is not None:
                record["api_getresponse"] = elapsed

    urllib3.connection.HTTPConnection.getresponse = getresponse  # type: ignore[method-assign]

    original_evaluate = verbs_module.evaluate

    def evaluate(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        PROBE.evaluations[getattr(_local, "verb", "other")] += 1
        return original_evaluate(*args, **kwargs)

    verbs_module.evaluate = evaluate

    for verb in ("filter", "prioritize"):
        original_verb = getattr(Verbs, verb)

        def traced(self, args, _original=original_verb, _verb=verb):  # noqa: ANN001, ANN202
            _local.verb = _verb
            try:
                return _original(self, args)
            finally:
                _local.verb = None

        setattr(Verbs, verb, traced)

    original_connection = worker._Connection.__init__

    def connection(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        PROBE.accepted += 1
        original_connection(self, *args, **kwargs)

    worker._Connection.__init__ = connection  # type: ignore[method-assign]

    original_build = serve.build

    def build(options):  # noqa: ANN001, ANN202
        app = original_build(options)
        add_routes(app)
        return app

    serve.build = build


def add_routes(app) -> None:  # noqa: ANN001
    from flask import jsonify, request

    @app.get("/bench/probe")
    def probe_report():  # noqa: ANN202
        return jsonify(PROBE.report())

    @app.post("/bench/probe/reset")
    def probe_reset():  # noqa: ANN202
        PROBE.reset()
        return jsonify({"ok": True})

    @app.post("/bench/probe/config")
    def probe_config():  # noqa: ANN202
        body = request.get_json(force=True) or {}
        if "switch_interval" in body:
            sys.setswitchinterval(float(body["switch_interval"]))
        if "gil_probe" in body:
            if body["gil_probe"]:
                PROBE.start_gil_probe()
                PROBE.gil_probe_on.set()
            else:
                PROBE.gil_probe_on.clear()
        return jsonify({"switch_interval": sys.getswitchinterval(), "gil_probe": PROBE.gil_probe_on.is_set()})


def main(argv: list[str] | None = None) -> int:
    install()
    from extender.cli.commands import main as extender_main

    return extender_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

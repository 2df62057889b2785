"""Kind `connection_cost`: what a new client connection costs the extender's server, beside a kept one.

kube-scheduler keeps 2 idle connections to an extender (Go's default MaxIdleConnsPerHost; its
extender transport sets no other) while it runs binds in parallel, so most binds arrive on a
connection opened for them (709 for 1,000 pods in the e2e burst, counted by the e2e profile). This measures
the worker's side of that: the server served as deployed (gunicorn, the ConnectionWorker, VerbRoutes;
benchmarks/pyfloor_app.py's do-nothing verbs, so the figure is the connection's, not a decision's),
in its own process, and a client in this one sending `workload.requests` POST /filter requests (a
2-node request) each way, alternating a round at a time:

- `kept`: one keep-alive connection for every request;
- `new`: a new connection for every request, closed after its answer (what a bind beyond the 2 idle
  connections does).

Per listener: plain HTTP (the sidecar on loopback, the default install), and TLS with an ECDSA P-256
and an RSA 2048 serving key (deploy/overlays/tls and in-scheduler mode: every new connection is a
full handshake; kube-scheduler's client keeps no TLS session cache). The server's CPU is its whole
process tree's, read from /proc before and after each round.

Figures (medians over rounds): `LISTENER.kept_cpu_ms`, `LISTENER.new_cpu_ms` (server CPU-ms per
request) and `LISTENER.new_connection_cpu_ms` (their difference: what one new connection adds).

    python -m benchmarks run connection-cost              # 3 rounds, 1,500 requests each way; ~1 min
    python -m benchmarks run connection-cost --smoke
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.arms.server import free_port
from benchmarks.common import REPO, loadavg, table, tree_cpu

BODY = json.dumps(
    {"Pod": {"metadata": {"name": "p", "namespace": "db", "uid": "u-1"}}, "NodeNames": ["node-a1", "node-b1"]}
).encode()
KEYS = {
    "ecdsa-p256": ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
    "rsa-2048": ("-newkey", "rsa:2048"),
}


def _certificate(kind: str, workdir: Path) -> tuple[Path, Path]:
    key, cert = workdir / f"{kind}.key", workdir / f"{kind}.crt"
    subprocess.run(
        ["openssl", "req", "-x509", *KEYS[kind], "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return key, cert


def _serve(port: int, tls: tuple[Path, Path] | None, tree: Path, log_path: Path) -> subprocess.Popen:
    options = f"listen='127.0.0.1:{port}', events=False"
    if tls is not None:
        options += f", tls_key_file={str(tls[0])!r}, tls_cert_file={str(tls[1])!r}"
    code = (
        "from benchmarks.pyfloor_app import FloorApplication\n"
        "from extender.server.serve import ServeOptions\n"
        f"FloorApplication(ServeOptions({options})).run()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log_path, "wb") as log:
        argv = [sys.executable, "-c", code]
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"the server did not listen within 30 s; see {log_path}")


def _connect(port: int, context: ssl.SSLContext | None) -> http.client.HTTPConnection:
    if context is None:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)


def _round(proc: subprocess.Popen, port: int, context: ssl.SSLContext | None, requests: int, new: bool) -> float:
    """Server CPU-ms per request over `requests` POST /filter, on one connection or a new one each."""
    conn: http.client.HTTPConnection | None = None
    before = tree_cpu(proc.pid)
    for _ in range(requests):
        if conn is None or new:
            if conn is not None:
                conn.close()
            conn = _connect(port, context)
        conn.request("POST", "/filter", BODY, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"POST /filter answered {answer.status}")
    if conn is not None:
        conn.close()
    time.sleep(0.3)  # the server's side of the last close
    return 1000 * (tree_cpu(proc.pid) - before) / requests


def run(workload: Any, *, arms: list[str], rounds: int, workdir: Path, tree: Path = REPO, log=print) -> dict:
    params = workload.workload
    listeners: dict[str, dict[str, Any]] = {}
    for listener in params.listeners:
        tls = None if listener == "plain" else _certificate(listener, workdir)
        context = None
        if tls is not None:
            context = ssl.create_default_context(cafile=str(tls[1]))
        port = free_port()
        proc = _serve(port, tls, tree, workdir / f"server-{listener}.log")
        try:
            _round(proc, port, context, max(10, params.requests // 10), new=True)  # warm both paths
            kept, new = [], []
            for i in range(rounds):
                kept.append(_round(proc, port, context, params.requests, new=False))
                new.append(_round(proc, port, context, params.requests, new=True))
                log(
                    f"[{workload.name}] {listener} round {i + 1}/{rounds}: server CPU-ms a request, kept "
                    f"{kept[-1]:.3f}, new connection {new[-1]:.3f} (load {loadavg()[0]:.2f})"
                )
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        listeners[listener] = {"kept_cpu_ms": kept, "new_cpu_ms": new}
    figures: dict[str, float] = {}
    for listener, r in listeners.items():
        kept_ms, new_ms = statistics.median(r["kept_cpu_ms"]), statistics.median(r["new_cpu_ms"])
        figures[f"{listener}.kept_cpu_ms"] = round(kept_ms, 3)
        figures[f"{listener}.new_cpu_ms"] = round(new_ms, 3)
        figures[f"{listener}.new_connection_cpu_ms"] = round(new_ms - kept_ms, 3)
    return {
        "figures": figures,
        "arms": {"extender": {"available": True, "mode": "the extender's server (pyfloor_app), its own process"}},
        "detail": {"requests": params.requests, "listeners": listeners},
    }


def report(result: dict[str, Any]) -> str:
    figures = result["figures"]
    rows = [
        [
            listener,
            figures[f"{listener}.kept_cpu_ms"],
            figures[f"{listener}.new_cpu_ms"],
            figures[f"{listener}.new_connection_cpu_ms"],
        ]
        for listener in result["detail"]["listeners"]
    ]
    return (
        f"Server CPU-ms per POST /filter ({result['detail']['requests']:,} requests a round; medians over rounds):\n"
        + table(["listener", "kept connection", "new connection each", "one new connection adds"], rows)
    )

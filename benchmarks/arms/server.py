"""The process harness the arms share: a server in its own process group, stopped by its pid, and one
keep-alive client (moved here from http_latency.py)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, vm_status, worker_pid

HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class Server:
    """`python -m benchmarks.extender_app` in its own process group; stopped by its pid. `tree` is the
    checkout whose benchmarks/extender_app.py and extender/ are served (the working tree by default; a
    worktree of the base revision in `--base` mode)."""

    def __init__(
        self,
        nodes: int,
        pods: int,
        port: int,
        log_path: Path,
        extra: list[str] | None = None,
        *,
        tree: Path = REPO,
    ) -> None:
        self.port = port
        self.log_path = log_path
        argv = [
            sys.executable,
            "-m",
            "benchmarks.extender_app",
            "--nodes",
            str(nodes),
            "--pods",
            str(pods),
            "--listen",
            f"127.0.0.1:{port}",
            *(extra or []),
        ]
        env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 300) -> float:
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"benchmark server exited ({self.proc.returncode}):\n{self.tail()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                conn.close()
                if response.status == 200:
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"benchmark server not ready in {timeout}s:\n{self.tail()}")

    def worker_memory(self) -> dict[str, int]:
        pid = worker_pid(self.proc.pid)
        return vm_status(pid) if pid else {}

    def tail(self, lines: int = 30) -> str:
        self.log.flush()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own child's process group (start_new_session)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.log.close()


class GoFloorServer(Server):
    """The Go floor binary (benchmarks/gofloor) in its own process group; stopped by its pid."""

    def __init__(self, binary: Path, port: int, log_path: Path) -> None:
        self.port = port
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(
            [str(binary), "-listen", f"127.0.0.1:{port}"],
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One keep-alive connection; `post`: a non-200 answer raises. `send`: any answer is returned,
    and after a timeout (status 0: the server is still busy with that request) `timed_out` is set."""

    def __init__(self, port: int, timeout: float = 60) -> None:
        self.port, self.timeout, self.timed_out = port, timeout, False
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def send(self, path: str, body: bytes | None = None) -> tuple[float, int, bytes]:
        """POST `body` (GET without one): (seconds, status, answer); status 0 a timeout, -1 an error."""
        started = time.perf_counter()
        try:
            self.conn.request("GET" if body is None else "POST", path, body, HEADERS)
            response = self.conn.getresponse()
            status, data = response.status, response.read()
        except TimeoutError:
            self.timed_out = True
            status, data = 0, b"client timeout"
        except (OSError, http.client.HTTPException) as err:
            status, data = -1, repr(err).encode()
        if status <= 0:
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        return time.perf_counter() - started, status, data

    def post(self, path: str, body: bytes) -> tuple[float, bytes]:
        started = time.perf_counter()
        self.conn.request("POST", path, body, HEADERS)
        response = self.conn.getresponse()
        data = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 200:
            raise RuntimeError(f"POST {path}: {response.status} {data[:300]!r}")
        return elapsed, data

    def get_json(self, path: str) -> Any:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        return json.loads(response.read())

    def close(self) -> None:
        self.conn.close()

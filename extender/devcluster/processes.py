"""Child processes of the local control plane: started in their own process group, logged to a
file, and always stopped (SIGTERM, then SIGKILL) so no process outlives the harness."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

_handed_out: set[int] = set()


class SigtermAsInterrupt:
    """While installed, SIGTERM raises KeyboardInterrupt in the main thread, as Ctrl-C does, so
    `with LocalCluster()` and pytest's teardown stop the control plane instead of leaving it
    running (CI's timeout, `kill` and `timeout` send SIGTERM, which by default ends Python with
    no cleanup). Installed only from the main thread and only over the default disposition, so
    a program's own SIGTERM handler is left alone; `restore` undoes only what `install` did."""

    def __init__(self) -> None:
        self._installed = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _interrupt)
        self._installed = True

    def restore(self) -> None:
        if self._installed and signal.getsignal(signal.SIGTERM) is _interrupt:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._installed = False


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}: stopping the local control plane")


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A free loopback port below the ephemeral range.

    A port from bind(0) comes from the ephemeral range, which every outgoing connection on the
    machine also draws from: in the seconds before a component binds it, a client connection
    can take it ("address already in use"). Ports below that range are only ever taken by
    listeners, and the bind test here sees those.
    """
    low, _ = _ephemeral_range()
    top = low - 1 if low > 12000 else 0
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(10000, top) if top else 0
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port found below the ephemeral range")


class Process:
    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self.env = env
        self.popen: subprocess.Popen[bytes] | None = None
        self.ended = False  # stopped or killed on purpose: its exit is no failure

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        env = dict(os.environ, **(self.env or {}))
        self.popen = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
        )
        log.close()

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def check(self) -> None:
        if self.ended:
            return
        if self.popen is not None and self.popen.poll() is not None:
            raise RuntimeError(f"{self.name} exited with code {self.popen.returncode}; last log lines:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash, not a stop), and reap it."""
        self.ended = True
        if self.popen is None or self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.popen.wait(10)

    def signal_stop(self) -> None:
        """SIGTERM to its process group, not waited for (stop() waits): a control plane's
        processes all told at once stop in the time of the slowest, not of their sum."""
        self.ended = True
        if self.popen is not None and self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = 10.0) -> None:
        self.ended = True
        if self.popen is None or self.popen.poll() is not None:
            return
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.popen.poll() is None:
            time.sleep(0.05)
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.popen.wait(5)

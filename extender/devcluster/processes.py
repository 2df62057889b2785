"""Child processes of the local control plane: started in their own process group, logged to a
file, and always stopped (SIGTERM, then SIGKILL) so no process outlives the harness."""

from __future__ import annotations

import atexit
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

_handed_out: set[int] = set()

# Ports handed out by every process on this machine that runs a local control plane: `make test`
# runs three pytest workers, and each one's bind test sees another's port free in the seconds
# before that one's component binds it (CI once lost a run to "address already in use" on a
# kube-scheduler's port this way). A claim is a file named by the port holding its owner's pid;
# a dead owner's claim is taken over, and each process removes its own on exit.
PORT_CLAIMS = Path(tempfile.gettempdir()) / "placement-extender-port-claims"


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
        if not claim_port(port):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError("no free loopback port found below the ephemeral range")


def claim_port(port: int, claims: Path = PORT_CLAIMS) -> bool:
    """True when this process now owns `port` among the processes on this machine that claim
    ports here; False when a live process claimed it first."""
    path = claims / str(port)
    for _ in range(3):
        claims.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileNotFoundError:
            continue  # the last other claimant removed the directory just now
        except FileExistsError:
            if not _stale(path):
                return False
            path.unlink(missing_ok=True)  # its owner ended without removing it (SIGKILL)
            continue
        with os.fdopen(fd, "w") as file:
            file.write(str(os.getpid()))
        if not _claimed:
            atexit.register(_remove_claims)
        _claimed.append(path)
        return True
    return False


_claimed: list[Path] = []


def _stale(path: Path) -> bool:
    """A claim whose owner has ended. An empty one is being written, unless it is a minute old."""
    try:
        text = path.read_text().strip()
        if not text:
            return time.time() - path.stat().st_mtime > 60
        os.kill(int(text), 0)
    except ProcessLookupError:
        return True
    except (OSError, ValueError):
        return False
    return False


def _remove_claims(claims: Path = PORT_CLAIMS) -> None:
    """At exit: this process's claims, and those of claimants that ended without removing theirs
    (a harness stopped with SIGKILL runs no exit handler: a CI run left 10 such files behind), so
    the last one out leaves no trace on the machine."""
    for path in _claimed:
        path.unlink(missing_ok=True)
    _claimed.clear()
    try:
        for path in claims.iterdir():
            if _stale(path):
                path.unlink(missing_ok=True)
        claims.rmdir()
    except OSError:
        pass


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

"""A SIGTERM to the harness unwinds like Ctrl-C, so `with LocalCluster()` stops its processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

from extender.devcluster.processes import SigtermAsInterrupt

SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, time
    from extender.devcluster.processes import SigtermAsInterrupt
    guard = SigtermAsInterrupt()
    guard.install()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        print(child.pid, flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        child.terminate()
        child.wait(10)
        print("stopped", flush=True)
    finally:
        guard.restore()
    """
)


def test_sigterm_runs_the_cleanup_and_the_child_is_stopped() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert out.strip() == "stopped" and proc.returncode == 0
    assert subprocess.run(["kill", "-0", str(child)], capture_output=True).returncode != 0, "child outlived"


def test_a_handler_of_the_programs_own_is_left_alone_and_restore_undoes_only_ours() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    try:

        def own(signum: int, frame: object) -> None:
            return None

        signal.signal(signal.SIGTERM, own)
        guard = SigtermAsInterrupt()
        guard.install()
        assert signal.getsignal(signal.SIGTERM) is own
        guard.restore()
        assert signal.getsignal(signal.SIGTERM) is own
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        guard.install()
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        guard.restore()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_not_installed_from_another_thread() -> None:
    previous = signal.getsignal(signal.SIGTERM)
    guard = SigtermAsInterrupt()
    worker = threading.Thread(target=guard.install)
    worker.start()
    worker.join()
    assert signal.getsignal(signal.SIGTERM) is previous

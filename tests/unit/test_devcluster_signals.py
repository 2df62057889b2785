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
    import time
    from extender.devcluster.processes import SigtermAsInterrupt
    guard = SigtermAsInterrupt()
    guard.install()
    try:
        print("ready", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        print("cleaned up", flush=True)  # where `with LocalCluster()` stops its processes
    finally:
        guard.restore()
    """
)


def test_sigterm_unwinds_through_the_cleanup() -> None:
    # (No grandchild here: one started just before the signal can receive it between fork and
    # exec, where the handler swallows it, and then hold the output pipe open for a minute.)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert out.strip() == "cleaned up" and proc.returncode == 0


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
